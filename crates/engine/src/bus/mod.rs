//! The per-track message bus and the board deliberation (docs/PROTOCOL.md §3 and §4).
//!
//! [`Bus`] is the handle every shell uses: `Bus::open(&root, &track).post(…)` (a [`TrackName`] parsed at the edge), `.acquire_lock(…)`,
//! `.board_open(…)`. Each area lives in its own module and adds its methods to `Bus`:
//! [`queue`] (the log), [`events`], [`locks`], [`workers`] (heartbeats), [`deadlock`], [`board`],
//! [`archive`]. [`model`] holds the tolerant record types all of them read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::journal::Origin;
use crate::store::Root;
use crate::store::atomic::{ensure_dir, ensure_file, write_json};
use crate::store::ids::TrackName;
use crate::store::lock::FileLock;
use crate::store::read::read_json_object;
use crate::store::time::now_ts;

use crate::store::layout;

pub(crate) mod archive;
pub(crate) mod board;
pub(crate) mod deadlock;
pub(crate) mod events;
pub(crate) mod fencing;
pub(crate) mod journaled;
pub(crate) mod locks;
pub(crate) mod model;
pub(crate) mod notices;
pub(crate) mod queue;
pub(crate) mod vocab;
pub(crate) mod workers;

pub(crate) use model::Envelope;
pub(crate) use queue::MessageKind;

/// Who operator acts are recorded as (`forced_by`, board `source`).
pub const OPERATOR: &str = "operator";

/// One track's message bus: `conductor/tracks/{track}/.message-bus/`.
///
/// The handle keeps `queue.jsonl` open once something was posted, so a long-lived process (the
/// demo, a god posting progress through the library) pays one lock and one write per message, not an
/// open and a close. Clones share that writer.
#[derive(Debug, Clone)]
pub struct Bus {
    /// The root this track lives in.
    pub root: Root,
    /// The track (validated name).
    pub track: TrackName,
    /// The track's directory, `tracks/{track}/`.
    pub dir: PathBuf,
    writer: Arc<Mutex<Option<queue::QueueWriter>>>,
    /// Who acts through this handle, for the journal.
    pub origin: Origin,
    /// The board session as the caller last saw it: a board act through this handle is refused,
    /// under the board's lock, when the session is no longer that one, in that phase and round.
    pub expect_board: Option<board::BoardSeen>,
}

/// What `bus init` did.
#[derive(Debug, Clone, Serialize)]
pub struct InitResult {
    /// The track initialised.
    pub track: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Files and directories that were missing and are now created.
    pub created: Vec<String>,
}

/// Between the track and the queue offset in a read cursor.
const CURSOR_SEP: char = ':';

impl Bus {
    /// The bus of `track`; the directory need not exist yet. The name was validated when the
    /// [`TrackName`] was parsed (at the CLI, MCP or console edge), so opening cannot fail.
    pub fn open(root: &Root, track: &TrackName) -> Self {
        Self {
            dir: root.bus_dir(track),
            root: root.clone(),
            track: track.clone(),
            writer: Arc::default(),
            origin: Origin::default(),
            expect_board: None,
        }
    }

    /// This handle, acting on the board only while its session is still `seen` (a console's
    /// confirmation acts on exactly the phase and round it showed).
    pub fn expecting_board(mut self, seen: board::BoardSeen) -> Self {
        self.expect_board = Some(seen);
        self
    }

    /// Like [`Bus::open`], but refuses a bus that was never initialised.
    pub fn open_existing(root: &Root, track: &TrackName) -> Result<Self> {
        let bus = Self::open(root, track);
        bus.require()?;
        Ok(bus)
    }

    /// Refuses when the bus directory does not exist, saying how to create it.
    pub fn require(&self) -> Result<()> {
        if self.dir.is_dir() {
            Ok(())
        } else {
            let tracks = list_tracks(&self.root)
                .into_iter()
                .map(|t| t.to_string())
                .collect();
            let known = crate::store::read::name_list(tracks).map_or_else(
                || " (no track has one yet)".to_owned(),
                |l| format!(" (tracks here: {l})"),
            );
            Err(Error::not_found(format!(
                "track {} has no message bus at {}; create it with `pantheon bus --track {} init`{known}",
                self.track,
                self.dir.display(),
                self.track
            )))
        }
    }

    /// The track's `queue.jsonl`.
    pub fn queue_path(&self) -> PathBuf {
        self.dir.join(layout::QUEUE_FILE)
    }
    /// The lock file that serialises queue appends across processes.
    pub(crate) fn mutex_path(&self) -> PathBuf {
        self.dir.join(layout::BUS_MUTEX_FILE)
    }
    /// The track's `locks.json`.
    pub(crate) fn locks_path(&self) -> PathBuf {
        self.dir.join(layout::LOCKS_FILE)
    }
    /// The track's `worker-status.json`.
    pub(crate) fn workers_path(&self) -> PathBuf {
        self.dir.join(layout::WORKERS_FILE)
    }
    /// The track's `events/` directory.
    pub fn events_dir(&self) -> PathBuf {
        self.dir.join(layout::EVENTS_DIR)
    }
    /// The track's `board/` directory.
    pub(crate) fn board_dir(&self) -> PathBuf {
        self.dir.join(layout::BOARD_DIR)
    }

    /// Creates whatever is missing (queue, mutex, locks, worker status, events, board); never wipes.
    pub fn init(&self) -> Result<InitResult> {
        let mut created = Vec::new();
        for d in [self.dir.clone(), self.events_dir(), self.board_dir()] {
            if !d.is_dir() {
                ensure_dir(&self.root, &d)?;
                created.push(self.rel(&d));
            }
        }
        for f in [self.queue_path(), self.mutex_path()] {
            if !f.exists() {
                ensure_file(&self.root, &f)?;
                created.push(self.rel(&f));
            }
        }
        let _mutex = self.mutex()?;
        // The board files as the seed's `init_message_bus` leaves them (empty), so a seed reader that
        // opens them before any board session (`get_messages_for_director`, `resolve_board_vote`)
        // finds them; `board open` archives nothing for them while no session exists.
        for f in [
            self.locks_path(),
            self.workers_path(),
            self.assessments_path(),
            self.votes_path(),
        ] {
            if !f.exists() {
                write_json(&self.root, &f, &serde_json::json!({}))?;
                created.push(self.rel(&f));
            }
        }
        let discussion = self.discussion_path();
        if !discussion.exists() {
            ensure_file(&self.root, &discussion)?;
            created.push(self.rel(&discussion));
        }
        Ok(InitResult {
            track: self.track.to_string(),
            dir: self.dir.clone(),
            created,
        })
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.dir)
            .map(|r| r.display().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| layout::BUS_DIR.into())
    }

    /// Takes `.lock_mutex`, the lock of every read-modify-write on the bus (bounded wait).
    pub(crate) fn mutex(&self) -> Result<FileLock> {
        FileLock::exclusive(&self.root, &self.mutex_path())
    }

    /// Whether the track's bus directory exists.
    pub(crate) fn is_initialised(&self) -> bool {
        self.dir.is_dir()
    }

    /// Refuses a post while the track (or the whole root) is paused, naming the pause
    /// (docs/PROTOCOL.md §2.14). Reads, lock releases and heartbeats are never refused.
    fn refuse_paused(&self) -> Result<()> {
        // A post is the bus's hot path and most roots have no pause file: its absence costs one
        // `lstat`, not the checked walk (an absent file is no pause either way; a symlink on the
        // way, which the walk refuses, is refused by the post's own writes). A file that is there
        // is read as every act reads it: no-follow, bounded, checked.
        if let Err(e) = std::fs::symlink_metadata(self.root.paused_path())
            && e.kind() == std::io::ErrorKind::NotFound
        {
            return Ok(());
        }
        let pauses = crate::store::paused::Pauses::load(&self.root)?;
        if let Some(p) = pauses.track(self.track.as_str()) {
            let flag = match &p.name {
                Some(n) => format!("--{} {n}", p.kind),
                None => format!("--{}", p.kind),
            };
            return Err(Error::refused(format!(
                "track {} is paused ({}: {} by {} since {}{}); posts wait until `pantheon resume {flag}`",
                self.track,
                p.target().label(),
                p.reason,
                p.by,
                p.since,
                p.until
                    .as_deref()
                    .map(|u| format!(", until {u}"))
                    .unwrap_or_default()
            )));
        }
        Ok(())
    }

    /// Writes the `PAUSED` or `RESUMED` line of pause `p` (source `operator`), unless one of this
    /// pause is already among the track's last lines of that type (a repeated pause or resume).
    pub(crate) fn announce_pause(
        &self,
        p: &crate::store::paused::Pause,
        word: vocab::MessageType,
    ) -> Result<()> {
        let filter = queue::Filter {
            kind: Some(word.as_str().to_owned()),
            ..Default::default()
        };
        let seen = queue::tail(&self.queue_path(), 50, &filter)?;
        if seen
            .messages
            .iter()
            .any(|m| m.payload.get("pause_id").and_then(Value::as_str) == Some(p.id.as_str()))
        {
            return Ok(());
        }
        let payload = serde_json::json!({
            "pause_id": p.id, "kind": p.kind, "name": p.name, "by": p.by, "reason": p.reason,
            "since": p.since, "until": p.until, "resumed_at": p.resuming_at,
        });
        let kind = queue::MessageKind::parse(word.as_str())?;
        let env = {
            let mut slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            let env = queue::envelope(&kind, OPERATOR, payload)?;
            self.append_with(&mut slot, &queue::line_of(&env))?;
            env
        };
        events::touch_for(&self.root, &self.events_dir(), &env)?;
        Ok(())
    }

    /// Posts a message: appends the envelope under the queue's flock and touches its events.
    /// Refused while the track is paused.
    pub fn post(
        &self,
        kind: impl Into<queue::MessageKind>,
        source: &str,
        payload: Value,
    ) -> Result<Envelope> {
        crate::store::commit::act_unheld(&self.root, || self.post_act(kind, source, payload))
    }

    fn post_act(
        &self,
        kind: impl Into<queue::MessageKind>,
        source: &str,
        payload: Value,
    ) -> Result<Envelope> {
        let kind = kind.into();
        self.refuse_paused()?;
        let env = {
            let mut slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                self.require()?;
            }
            let env = queue::envelope(&kind, source, payload)?;
            self.append_with(&mut slot, &queue::line_of(&env))?;
            env
        };
        events::touch_for(&self.root, &self.events_dir(), &env)?;
        Ok(env)
    }

    /// Appends whole lines through the handle's writer, opening it first when needed. A failed append
    /// drops the writer, so the next post checks the bus again from scratch.
    fn append_with(&self, slot: &mut Option<queue::QueueWriter>, lines: &[u8]) -> Result<()> {
        let writer = match slot {
            Some(w) => w,
            None => slot.insert(queue::QueueWriter::open_in_place(
                &self.root,
                &self.queue_path(),
            )?),
        };
        let result = writer.append_line(lines);
        if result.is_err() {
            *slot = None;
            self.require()?;
        }
        result
    }

    /// Posts many messages from one process. Every item is checked before anything is written; then
    /// whole lines are appended in chunks of up to `queue::BATCH_BYTES`, each chunk one `write` under
    /// one hold of the queue's flock (other writers interleave between chunks, never inside a line).
    pub fn post_batch(
        &self,
        items: impl IntoIterator<Item = (queue::MessageKind, String, Value)>,
    ) -> Result<Vec<Envelope>> {
        crate::store::commit::act_unheld(&self.root, || self.post_batch_act(items))
    }

    fn post_batch_act(
        &self,
        items: impl IntoIterator<Item = (queue::MessageKind, String, Value)>,
    ) -> Result<Vec<Envelope>> {
        self.require()?;
        self.refuse_paused()?;
        let envs = items
            .into_iter()
            .map(|(kind, source, payload)| queue::envelope(&kind, &source, payload))
            .collect::<Result<Vec<_>>>()?;
        let mut slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut chunk = Vec::with_capacity(queue::BATCH_BYTES);
        let mut pending = 0..0;
        for (i, env) in envs.iter().enumerate() {
            chunk.extend(crate::store::json_text(env, false));
            chunk.push(b'\n');
            pending.end = i + 1;
            if chunk.len() >= queue::BATCH_BYTES || i + 1 == envs.len() {
                self.append_with(&mut slot, &chunk)?;
                chunk.clear();
                for env in &envs[pending.clone()] {
                    events::touch_for(&self.root, &self.events_dir(), env)?;
                }
                pending = i + 1..i + 1;
            }
        }
        Ok(envs)
    }

    /// Posts the same message `count` times (each with its own id and time), checked once, streamed
    /// in chunks of whole lines like [`Bus::post_batch`] without holding every envelope in memory.
    /// Returns (count, first id, last id).
    pub fn post_repeated(
        &self,
        kind: impl Into<queue::MessageKind>,
        source: &str,
        payload: Value,
        count: usize,
    ) -> Result<(usize, Option<String>, Option<String>)> {
        crate::store::commit::act_unheld(&self.root, || {
            self.post_repeated_act(kind, source, payload, count)
        })
    }

    fn post_repeated_act(
        &self,
        kind: impl Into<queue::MessageKind>,
        source: &str,
        payload: Value,
        count: usize,
    ) -> Result<(usize, Option<String>, Option<String>)> {
        self.require()?;
        self.refuse_paused()?;
        let template = queue::envelope(&kind.into(), source, payload)?;
        if count == 0 {
            return Ok((0, None, None));
        }
        // Every line shares type, source and payload: serialise them once.
        let head = format!(
            ",\"type\":{},\"source\":{},\"timestamp\":\"",
            crate::store::json_string(&template.kind),
            crate::store::json_string(&template.source),
        );
        let tail = format!(
            "\",\"payload\":{}}}\n",
            crate::store::json_string(&template.payload)
        );
        let mut slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut chunk = Vec::with_capacity(queue::BATCH_BYTES + 1024);
        let (mut first, mut last) = (None, String::new());
        for i in 0..count {
            let id = crate::store::ids::generate_message_id();
            chunk.extend_from_slice(b"{\"id\":\"");
            chunk.extend_from_slice(id.as_bytes());
            chunk.extend_from_slice(b"\"");
            chunk.extend_from_slice(head.as_bytes());
            chunk.extend_from_slice(now_ts().as_bytes());
            chunk.extend_from_slice(tail.as_bytes());
            if first.is_none() {
                first = Some(id.clone());
            }
            last = id;
            if chunk.len() >= queue::BATCH_BYTES || i + 1 == count {
                self.append_with(&mut slot, &chunk)?;
                chunk.clear();
                // Every message names the same event files; the last one written wins, as it would
                // one message at a time.
                let env = Envelope {
                    id: last.clone(),
                    ..template.clone()
                };
                events::touch_for(&self.root, &self.events_dir(), &env)?;
            }
        }
        Ok((count, first, Some(last)))
    }

    /// Reads messages passing `filter`; with `tail`, only the last N (seeking from the end).
    pub fn read(&self, filter: &queue::Filter, tail: Option<usize>) -> Result<queue::ReadResult> {
        self.read_page(filter, tail, &queue::Page::default())
    }

    /// One page of a read: at most `page.limit` messages, from `page.cursor` (not with `tail`, whose
    /// pages continue forward from the cursor of its first page).
    pub fn read_page(
        &self,
        filter: &queue::Filter,
        tail: Option<usize>,
        page: &queue::Page,
    ) -> Result<queue::ReadResult> {
        if page.limit == Some(0) {
            return Err(Error::refused(
                "limit must be at least 1 (leave it out to read every message)",
            ));
        }
        let page = queue::Page {
            limit: page.limit,
            cursor: page
                .cursor
                .as_deref()
                .map(|c| self.cursor_offset(c))
                .transpose()?,
        };
        let mut read = match (tail, &page.cursor) {
            (Some(_), Some(_)) => Err(Error::refused(
                "pass either tail or cursor, not both: a cursor continues forward from an earlier page",
            )),
            (Some(n), None) => queue::tail_page(&self.queue_path(), n, filter, page.limit),
            (None, _) => queue::read_page(&self.queue_path(), filter, &page),
        }?;
        read.next_cursor = read
            .next_cursor
            .map(|c| format!("{}{CURSOR_SEP}{c}", self.track));
        Ok(read)
    }

    /// The queue offset a read cursor names, if this track's reads gave it out: a cursor is
    /// `{track}:{offset}`, so one from another track's queue (where the same offset means another
    /// message) is refused, saying whose it is.
    fn cursor_offset(&self, cursor: &str) -> Result<String> {
        let shown: String = cursor.chars().take(64).collect();
        match cursor.rsplit_once(CURSOR_SEP) {
            Some((track, offset)) if track == self.track.as_str() => Ok(offset.to_owned()),
            Some((track, offset))
                if TrackName::parse(track).is_ok() && offset.parse::<u64>().is_ok() =>
            {
                Err(Error::refused(format!(
                    "cursor {shown:?} was given out by a read of track {track:?}, not of track {:?}: \
                     a cursor only continues the read that gave it; read from the start without a cursor",
                    self.track.as_str()
                )))
            }
            _ => Err(Error::refused(format!(
                "cursor {shown:?} is not one this reader gave; pass `next_cursor` from the previous \
                 page as it is, or read from the start without a cursor"
            ))),
        }
    }

    /// Waits for an event file (see `events::wait_for_event`).
    pub fn wait_for_event(
        &self,
        pattern: &events::EventPattern,
        timeout: std::time::Duration,
        fresh: bool,
    ) -> Result<events::WaitResult> {
        self.require()?;
        ensure_dir(&self.root, &self.events_dir())?;
        events::wait_for_event(&self.events_dir(), pattern, timeout, fresh)
    }

    /// Lists the event files.
    pub fn events(&self) -> Result<Vec<events::EventFile>> {
        events::list(&self.events_dir())
    }

    /// Reads a JSON object file of the bus (missing = empty).
    fn read_object(&self, path: &Path) -> Result<serde_json::Map<String, Value>> {
        read_json_object(path)
    }

    /// A snapshot of the whole bus for `bus status`.
    pub fn status(&self) -> Result<BusStatus> {
        self.require()?;
        let locks = self.locks()?;
        let workers = self.workers()?;
        let q = std::fs::metadata(self.queue_path())
            .map(|m| m.len())
            .unwrap_or(0);
        let last = queue::tail(&self.queue_path(), 1, &queue::Filter::default())?;
        let board = board::current_session(self).ok().flatten();
        Ok(BusStatus {
            track: self.track.to_string(),
            dir: self.dir.clone(),
            now: now_ts(),
            queue_bytes: q,
            last_message: last.messages.into_iter().next(),
            live_locks: locks.iter().filter(|l| l.live).count(),
            locks,
            stale_workers: workers.iter().filter(|w| w.stale).count(),
            workers,
            events: self.events()?,
            board: board.map(|s| BoardSummary {
                session_id: s.session_id,
                checkpoint: s.checkpoint,
                status: s.status,
            }),
        })
    }
}

/// `bus status`: the locks, workers, events and board of a track at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct BusStatus {
    /// The track.
    pub track: String,
    /// Its directory.
    pub dir: PathBuf,
    /// When the status was taken (RFC 3339).
    pub now: String,
    /// The size of `queue.jsonl` in bytes.
    pub queue_bytes: u64,
    /// The last readable message, if any.
    pub last_message: Option<Envelope>,
    /// How many locks hold now.
    pub live_locks: usize,
    /// Every lock, live or not.
    pub locks: Vec<locks::LockView>,
    /// How many workers missed their heartbeat.
    pub stale_workers: usize,
    /// Every worker.
    pub workers: Vec<workers::WorkerView>,
    /// The event files present.
    pub events: Vec<events::EventFile>,
    /// The current board session, if any.
    pub board: Option<BoardSummary>,
}

/// The current board session in a bus status.
#[derive(Debug, Clone, Serialize)]
pub struct BoardSummary {
    /// The session's id.
    pub session_id: String,
    /// What it decides.
    pub checkpoint: String,
    /// Its status (`ASSESSING`…`COMPLETE`).
    pub status: String,
}

/// The tracks of `root` that have a `.message-bus` directory, sorted.
pub(crate) fn list_tracks(root: &Root) -> Vec<TrackName> {
    let mut out: Vec<TrackName> = std::fs::read_dir(root.tracks_dir())
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| TrackName::parse(&e.file_name().to_string_lossy()).ok())
                .filter(|t| root.bus_dir(t).is_dir())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use locks::LockKey;
    use vocab::MessageType;

    #[test]
    fn repeated_posts_write_the_same_envelopes_as_single_posts() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        let payload = serde_json::json!({"task_id": "a\"b\n", "n": [1, 2]});
        let one = bus
            .post(MessageType::TaskComplete, "w \"1\"", payload.clone())
            .unwrap();
        let (n, first, last) = bus
            .post_repeated(MessageType::TaskComplete, "w \"1\"", payload.clone(), 3000)
            .unwrap();
        assert_eq!(n, 3000);
        let all = bus.read(&queue::Filter::default(), None).unwrap();
        assert_eq!((all.count, all.skipped), (3001, 0));
        assert_eq!(all.messages[1].id, first.unwrap());
        assert_eq!(all.messages[3000].id, last.clone().unwrap());
        let text = std::fs::read_to_string(bus.queue_path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Same shape, key order and escaping as a single post, apart from id and time.
        let strip = |l: &str| {
            let e = Envelope::parse_line(l.as_bytes()).unwrap();
            l.replace(&e.id, "ID").replace(&e.timestamp, "TS")
        };
        assert_eq!(strip(lines[0]), strip(lines[2999]));
        assert!(
            all.messages
                .iter()
                .all(|m| m.payload == payload && m.instant().is_some())
        );
        let ev =
            std::fs::read_to_string(bus.events_dir().join("TASK_COMPLETE_a%22b%0A.event")).unwrap();
        assert_eq!(ev, last.unwrap());
        assert!("bad".parse::<MessageKind>().is_err());
        assert!(
            bus.post_repeated(MessageType::Progress, "", Value::Null, 5)
                .is_err()
        );
        assert_eq!(
            bus.read(&queue::Filter::default(), None).unwrap().count,
            3001
        );
        assert_eq!(one.kind, "TASK_COMPLETE");
    }

    fn ids_in(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| Envelope::parse_line(l.as_bytes()).unwrap().id)
            .collect()
    }

    #[test]
    fn a_kept_writer_follows_the_name_through_archive_rename_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        let post = |n: u64| {
            bus.post(MessageType::Progress, "w", serde_json::json!({ "n": n }))
                .unwrap()
                .id
        };
        let before = post(1);
        // Our archive moves the queue away while the handle holds it open.
        let archived = bus.archive(&"one".parse().unwrap(), false).unwrap().archive;
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&archived).unwrap().permissions().mode();
        assert_eq!(mode & 0o222, 0, "the archive is marked read-only");
        let after_archive = post(2);
        assert_eq!(ids_in(&archived), vec![before]);
        assert_eq!(ids_in(&bus.queue_path()), vec![after_archive.clone()]);
        // A foreign rename of the live queue, then a deletion: each post lands under the name.
        let moved = bus.dir.join("moved.jsonl");
        std::fs::rename(bus.queue_path(), &moved).unwrap();
        let after_rename = post(3);
        assert_eq!(ids_in(&moved), vec![after_archive]);
        assert_eq!(ids_in(&bus.queue_path()), vec![after_rename]);
        std::fs::remove_file(bus.queue_path()).unwrap();
        let after_delete = post(4);
        assert_eq!(ids_in(&bus.queue_path()), vec![after_delete]);
    }

    #[test]
    fn a_kept_writer_whose_bus_is_gone_refuses_without_recreating_it() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        bus.post(MessageType::Progress, "w", Value::Null).unwrap();
        std::fs::remove_dir_all(&bus.dir).unwrap();
        let err = bus
            .post(MessageType::Progress, "w", Value::Null)
            .unwrap_err();
        assert!(err.to_string().contains("bus --track t init"), "{err}");
        assert!(!bus.dir.exists());
        // Once initialised again, the same handle posts again.
        bus.init().unwrap();
        let id = bus
            .post(MessageType::Progress, "w", Value::Null)
            .unwrap()
            .id;
        assert_eq!(ids_in(&bus.queue_path()), vec![id]);
    }

    #[test]
    fn threads_sharing_a_handle_write_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let bus = bus.clone();
                s.spawn(move || {
                    for n in 0..500 {
                        bus.post(
                            MessageType::Progress,
                            &format!("w{t}"),
                            serde_json::json!({ "n": n }),
                        )
                        .unwrap();
                    }
                });
            }
        });
        let all = bus.read(&queue::Filter::default(), None).unwrap();
        assert_eq!((all.count, all.skipped), (2000, 0));
        for t in 0..4 {
            let mine: Vec<u64> = all
                .messages
                .iter()
                .filter(|m| m.source == format!("w{t}"))
                .map(|m| m.payload["n"].as_u64().unwrap())
                .collect();
            assert_eq!(mine, (0..500).collect::<Vec<_>>(), "w{t}'s posts in order");
        }
    }

    /// The foreign fixture root (written by the original Python tools) names its tracks, lock
    /// keys and workers in forms every typed id accepts.
    #[test]
    fn the_foreign_roots_names_parse_as_typed_ids() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/foreign-root");
        let root = Root::at(&fixture);
        let tracks = list_tracks(&root);
        assert_eq!(tracks.len(), 1, "{tracks:?}");
        let bus = Bus::open_existing(&root, &tracks[0]).unwrap();
        let object = |p: PathBuf| -> serde_json::Map<String, Value> {
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        };
        let locks = object(bus.locks_path());
        assert_eq!(locks.len(), 3);
        for (key, entry) in &locks {
            assert_eq!(LockKey::parse(key).unwrap().as_str(), key);
            let holder = entry
                .get("worker_id")
                .and_then(Value::as_str)
                .or(entry.as_str())
                .unwrap();
            crate::store::WorkerId::parse(holder).unwrap();
        }
        let workers = object(bus.workers_path());
        assert_eq!(workers.len(), 3);
        for id in workers.keys() {
            crate::store::WorkerId::parse(id).unwrap();
        }
        // Every readable message's type, the engine's words and the foreign ones (BUS_INIT,
        // WORKER_DISPATCHED), parses as a MessageKind; the torn lines are skipped by the reader.
        let read = bus.read(&queue::Filter::default(), None).unwrap();
        assert_eq!(read.messages.len(), 8);
        for m in &read.messages {
            assert_eq!(MessageKind::parse(&m.kind).unwrap().as_str(), m.kind);
        }
        let session = board::current_session(&bus).unwrap().unwrap();
        assert_eq!(session.directors, ["CA", "CPO", "CSO", "COO", "CXO"]);
        for d in &session.directors {
            crate::store::ids::Director::parse(d).unwrap();
        }
    }

    #[test]
    fn list_tracks_names_only_valid_tracks_with_a_bus() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        assert!(list_tracks(&root).is_empty());
        for t in ["b-track", "a_track"] {
            Bus::open(&root, &t.parse().unwrap()).init().unwrap();
        }
        std::fs::create_dir_all(root.tracks_dir().join("no-bus")).unwrap();
        std::fs::create_dir_all(root.tracks_dir().join("bad name/.message-bus")).unwrap();
        let names: Vec<String> = list_tracks(&root).iter().map(|t| t.to_string()).collect();
        assert_eq!(names, ["a_track", "b-track"]);
        assert!("../x".parse::<TrackName>().is_err());
        assert!(
            Bus::open_existing(&root, &"no-bus".parse().unwrap())
                .unwrap_err()
                .to_string()
                .contains("init")
        );
    }

    /// Runs `f` on a thread and gives up after 5 s (a reader blocked on a FIFO never returns).
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }

    use std::os::unix::fs::FileTypeExt;

    fn fifo(p: &Path) {
        let _ = std::fs::remove_file(p);
        rustix::fs::mkfifoat(rustix::fs::CWD, p, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
    }

    #[test]
    fn fifos_planted_as_the_queue_an_event_or_the_discussion_never_block_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let bus = Bus::open(&root, &"t".parse().unwrap());
        bus.init().unwrap();

        fifo(&bus.events_dir().join("TASK_COMPLETE_1.event"));
        let b = bus.clone();
        let waited = within_5s(move || {
            b.wait_for_event(
                &"TASK_COMPLETE_*".parse().unwrap(),
                std::time::Duration::from_secs(1),
                false,
            )
            .map(|r| r.matched)
            .map_err(|e| e.to_string())
        })
        .expect("wait_for_event blocked on a FIFO event");
        assert!(waited.is_ok(), "{waited:?}");

        std::fs::create_dir_all(bus.board_dir()).unwrap();
        fifo(&bus.board_dir().join("discussion.jsonl"));
        let p = bus.board_dir().join("discussion.jsonl");
        let got = within_5s(move || board::session::read_discussion(&p).map_err(|e| e.to_string()))
            .expect("reading the discussion blocked on a FIFO");
        assert!(got.unwrap_err().contains("not a regular file"));

        fifo(&bus.queue_path());
        let b = bus.clone();
        let got = within_5s(move || {
            b.read(&queue::Filter::default(), None)
                .map(|r| r.count)
                .map_err(|e| e.to_string())
        })
        .expect("reading the queue blocked on a FIFO");
        let e = got.unwrap_err();
        assert!(
            e.contains("not a regular file") && e.contains("queue.jsonl"),
            "{e}"
        );
        let b = bus.clone();
        let got = within_5s(move || b.read(&queue::Filter::default(), Some(5)).is_err())
            .expect("a tail of the queue blocked on a FIFO");
        assert!(got);
        let b = bus.clone();
        let got = within_5s(move || {
            b.archive(&"t1".parse().unwrap(), true)
                .map_err(|e| e.to_string())
        })
        .expect("archiving blocked on a FIFO queue");
        assert!(got.unwrap_err().contains("not a regular file"));
        assert!(
            std::fs::symlink_metadata(bus.queue_path())
                .unwrap()
                .file_type()
                .is_fifo(),
            "the FIFO is left where it was"
        );
    }
}
