//! The per-track message bus and the board deliberation (PROTOCOL 3 and 4).
//!
//! [`Bus`] is the handle every shell uses: `Bus::open(&root, "track")?.post(…)`, `.acquire_lock(…)`,
//! `.board_open(…)`. Each area lives in its own module and adds its methods to `Bus`:
//! [`queue`] (the log), [`events`], [`locks`], [`workers`] (heartbeats), [`deadlock`], [`board`],
//! [`archive`]. [`model`] holds the tolerant record types all of them read.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::store::Root;
use crate::engine::store::atomic::{ensure_dir, ensure_file, write_json};
use crate::engine::store::ids::TrackName;
use crate::engine::store::lock::FileLock;
use crate::engine::store::read::read_json_object;
use crate::engine::store::time::now_ts;

pub mod archive;
pub mod board;
pub mod deadlock;
pub mod events;
pub mod locks;
pub mod model;
pub mod queue;
pub mod workers;

pub use model::{
    Assessment, BoardSession, DiscussionLine, Envelope, LockEntry, Vote, WorkerEntry, WorkerStatus,
};

/// Who operator acts are recorded as (`forced_by`, board `source`).
pub const OPERATOR: &str = "operator";

/// One track's message bus: `conductor/tracks/{track}/.message-bus/`.
#[derive(Debug, Clone)]
pub struct Bus {
    pub root: Root,
    pub track: TrackName,
    pub dir: PathBuf,
}

/// What `bus init` did.
#[derive(Debug, Clone, Serialize)]
pub struct InitResult {
    pub track: String,
    pub dir: PathBuf,
    /// Files and directories that were missing and are now created.
    pub created: Vec<String>,
}

impl Bus {
    /// The bus of `track` (validated against the name pattern); the directory need not exist yet.
    pub fn open(root: &Root, track: &str) -> Result<Self> {
        let track = TrackName::parse(track)?;
        Ok(Self {
            dir: root.bus_dir(&track),
            root: root.clone(),
            track,
        })
    }

    /// Like [`Bus::open`], but refuses a bus that was never initialised.
    pub fn open_existing(root: &Root, track: &str) -> Result<Self> {
        let bus = Self::open(root, track)?;
        bus.require()?;
        Ok(bus)
    }

    /// Refuses when the bus directory does not exist, saying how to create it.
    pub fn require(&self) -> Result<()> {
        if self.dir.is_dir() {
            Ok(())
        } else {
            Err(Error::not_found(format!(
                "track {} has no message bus at {}; create it with `pantheon bus --track {} init`",
                self.track,
                self.dir.display(),
                self.track
            )))
        }
    }

    pub fn queue_path(&self) -> PathBuf {
        self.dir.join("queue.jsonl")
    }
    pub fn mutex_path(&self) -> PathBuf {
        self.dir.join(".lock_mutex")
    }
    pub fn locks_path(&self) -> PathBuf {
        self.dir.join("locks.json")
    }
    pub fn workers_path(&self) -> PathBuf {
        self.dir.join("worker-status.json")
    }
    pub fn events_dir(&self) -> PathBuf {
        self.dir.join("events")
    }
    pub fn board_dir(&self) -> PathBuf {
        self.dir.join("board")
    }

    /// Creates whatever is missing (queue, mutex, locks, worker status, events, board); never wipes.
    pub fn init(&self) -> Result<InitResult> {
        let mut created = Vec::new();
        for d in [self.dir.clone(), self.events_dir(), self.board_dir()] {
            if !d.is_dir() {
                ensure_dir(&d)?;
                created.push(self.rel(&d));
            }
        }
        for f in [self.queue_path(), self.mutex_path()] {
            if !f.exists() {
                ensure_file(&f)?;
                created.push(self.rel(&f));
            }
        }
        let _mutex = self.mutex()?;
        for f in [self.locks_path(), self.workers_path()] {
            if !f.exists() {
                write_json(&f, &serde_json::json!({}))?;
                created.push(self.rel(&f));
            }
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
            .unwrap_or_else(|| ".message-bus".into())
    }

    /// Takes `.lock_mutex`, the lock of every read-modify-write on the bus (bounded wait).
    pub fn mutex(&self) -> Result<FileLock> {
        FileLock::exclusive(&self.mutex_path())
    }

    /// Posts a message: appends the envelope under the queue's flock and touches its events.
    pub fn post(&self, kind: &str, source: &str, payload: Value) -> Result<Envelope> {
        self.require()?;
        let env = queue::envelope(kind, source, payload)?;
        queue::append(&self.queue_path(), &env)?;
        events::touch_for(&self.events_dir(), &env)?;
        Ok(env)
    }

    /// Posts many messages from one process. Every item is checked before anything is written; then
    /// whole lines are appended in chunks of up to [`queue::BATCH_BYTES`], each chunk one `write` under
    /// one hold of the queue's flock (other writers interleave between chunks, never inside a line).
    pub fn post_batch(
        &self,
        items: impl IntoIterator<Item = (String, String, Value)>,
    ) -> Result<Vec<Envelope>> {
        self.require()?;
        let envs = items
            .into_iter()
            .map(|(kind, source, payload)| queue::envelope(&kind, &source, payload))
            .collect::<Result<Vec<_>>>()?;
        let mut w = queue::QueueWriter::open(&self.queue_path())?;
        let mut chunk = Vec::with_capacity(queue::BATCH_BYTES);
        let mut pending = 0..0;
        for (i, env) in envs.iter().enumerate() {
            serde_json::to_writer(&mut chunk, env).expect("envelopes always serialise");
            chunk.push(b'\n');
            pending.end = i + 1;
            if chunk.len() >= queue::BATCH_BYTES || i + 1 == envs.len() {
                w.append_line(&chunk)?;
                chunk.clear();
                for env in &envs[pending.clone()] {
                    events::touch_for(&self.events_dir(), env)?;
                }
                pending = i + 1..i + 1;
            }
        }
        Ok(envs)
    }

    /// Reads messages passing `filter`; with `tail`, only the last N (seeking from the end).
    pub fn read(&self, filter: &queue::Filter, tail: Option<usize>) -> Result<queue::ReadResult> {
        match tail {
            Some(n) => queue::tail(&self.queue_path(), n, filter),
            None => queue::read(&self.queue_path(), filter),
        }
    }

    /// Waits for an event file (see [`events::wait_for_event`]).
    pub fn wait_for_event(
        &self,
        pattern: &str,
        timeout: std::time::Duration,
        fresh: bool,
    ) -> Result<events::WaitResult> {
        self.require()?;
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
    pub track: String,
    pub dir: PathBuf,
    pub now: String,
    pub queue_bytes: u64,
    pub last_message: Option<Envelope>,
    pub live_locks: usize,
    pub locks: Vec<locks::LockView>,
    pub stale_workers: usize,
    pub workers: Vec<workers::WorkerView>,
    pub events: Vec<events::EventFile>,
    pub board: Option<BoardSummary>,
}

/// The current board session in a bus status.
#[derive(Debug, Clone, Serialize)]
pub struct BoardSummary {
    pub session_id: String,
    pub checkpoint: String,
    pub status: String,
}

/// The tracks of `root` that have a `.message-bus` directory, sorted.
pub fn list_tracks(root: &Root) -> Vec<TrackName> {
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
