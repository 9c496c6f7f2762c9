//! The live model: keeps one cache per file of the root, refreshes only what changed, and builds
//! an immutable [`Snapshot`] that shares every unchanged part with the previous one.

use crate::engine::store::layout;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::engine::bus::model::{
    BoardSession, DiscussionLine, Envelope, LockEntry, WorkerEntry, parse_assessments, parse_locks,
    parse_votes, parse_workers,
};
use crate::engine::conductor::definition::load_definitions;
use crate::engine::conductor::model::{AbortManifest, Dispatch, WorkflowState, from_value};
use crate::engine::store::Root;

use super::files::{JsonFile, LogChange, LogCursor, Refresh};
use super::snapshot::{
    BoardView, DispatchView, FileWarning, InboxView, Snapshot, TrackView, WorkflowView,
};

/// Tuning of the live model.
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    /// When a queue is first opened, only its last this-many bytes are read.
    pub tail_bytes: u64,
    /// The most bus messages kept per track.
    pub buffer: usize,
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self {
            tail_bytes: 4 * 1024 * 1024,
            buffer: 10_000,
        }
    }
}

/// A parsed JSON file: the typed value and the raw document (for the raw view).
#[derive(Debug)]
struct Parsed<T> {
    typed: Arc<T>,
    raw: Arc<Value>,
}

fn parse_as<T: serde::de::DeserializeOwned>(v: Value) -> Result<Parsed<T>, String> {
    if !v.is_object() {
        return Err(format!(
            "expected a JSON object, found {}",
            crate::engine::store::read::kind(&v)
        ));
    }
    let typed = from_value::<T>(v.clone())?;
    Ok(Parsed {
        typed: Arc::new(typed),
        raw: Arc::new(v),
    })
}

fn object(v: Value) -> Result<serde_json::Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "expected a JSON object, found {}",
            crate::engine::store::read::kind(&other)
        )),
    }
}

/// Names of the entries of `dir` (files and directories), hidden and temporary ones left out.
fn list_dir(dir: &Path, want_dirs: bool) -> BTreeSet<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_type()
                .map(|t| t.is_dir() == want_dirs)
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

/// A directory of one-JSON-per-file records (an inbox, the quarantine).
#[derive(Debug)]
struct InboxTracker {
    god: String,
    dir: PathBuf,
    files: BTreeMap<String, JsonFile<Parsed<Dispatch>>>,
    /// Files that are not `*.json` (reported, not read).
    strays: BTreeSet<String>,
    view: Arc<InboxView>,
}

impl InboxTracker {
    fn new(god: &str, dir: PathBuf) -> Self {
        Self {
            god: god.to_owned(),
            dir,
            files: BTreeMap::new(),
            strays: BTreeSet::new(),
            view: Arc::new(InboxView {
                god: god.to_owned(),
                ..InboxView::default()
            }),
        }
    }

    /// Re-lists the directory and refreshes every file; true if anything changed.
    fn rescan(&mut self) -> bool {
        let names = list_dir(&self.dir, false);
        let mut changed = false;
        self.files.retain(|n, _| {
            let keep = names.contains(n);
            changed |= !keep;
            keep
        });
        let strays: BTreeSet<String> = names
            .iter()
            .filter(|n| !n.ends_with(".json"))
            .cloned()
            .collect();
        if strays != self.strays {
            self.strays = strays;
            changed = true;
        }
        for n in names.iter().filter(|n| n.ends_with(".json")) {
            let dir = &self.dir;
            let f = self
                .files
                .entry(n.clone())
                .or_insert_with(|| JsonFile::new(dir.join(n)));
            changed |= f.refresh(parse_as::<Dispatch>) != Refresh::Unchanged;
        }
        changed
    }

    /// Refreshes one file named by an event; true if anything changed.
    fn touch(&mut self, name: &str) -> bool {
        if name.starts_with('.') {
            return false;
        }
        if !name.ends_with(".json") {
            return self.rescan();
        }
        let path = self.dir.join(name);
        let exists = path.exists();
        let f = self
            .files
            .entry(name.to_owned())
            .or_insert_with(|| JsonFile::new(path));
        match f.refresh(parse_as::<Dispatch>) {
            Refresh::Unchanged => {
                if !exists {
                    // An event for a file already gone (a temp name, a quick move): forget it.
                    self.files.remove(name);
                }
                false
            }
            Refresh::Removed => {
                self.files.remove(name);
                true
            }
            _ => true,
        }
    }

    fn rebuild(&mut self) {
        let mut dispatches = Vec::new();
        let mut errors = Vec::new();
        for (name, f) in &self.files {
            match f.value() {
                Some(p) => dispatches.push(DispatchView {
                    path: f.path().to_path_buf(),
                    name: name.trim_end_matches(".json").to_owned(),
                    dispatch: p.typed.clone(),
                    raw: p.raw.clone(),
                    warning: f.warning().map(str::to_owned),
                }),
                None => {
                    if let Some(w) = f.warning() {
                        errors.push(FileWarning {
                            path: f.path().to_path_buf(),
                            message: w.to_owned(),
                            since: None,
                        });
                    }
                }
            }
            if let (Some(_), Some(w)) = (f.value(), f.warning()) {
                errors.push(FileWarning {
                    path: f.path().to_path_buf(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        }
        for s in &self.strays {
            errors.push(FileWarning {
                path: self.dir.join(s),
                message: "not a .json dispatch file; ignored".into(),
                since: None,
            });
        }
        // Oldest first: by dispatch time (parsed), then file name.
        dispatches.sort_by(|a, b| {
            let ta = a
                .dispatch
                .dispatched_at
                .as_deref()
                .and_then(crate::engine::store::time::parse_ts);
            let tb = b
                .dispatch
                .dispatched_at
                .as_deref()
                .and_then(crate::engine::store::time::parse_ts);
            ta.cmp(&tb).then_with(|| a.name.cmp(&b.name))
        });
        self.view = Arc::new(InboxView {
            god: self.god.clone(),
            dispatches,
            errors,
        });
    }
}

/// One track's bus files.
#[derive(Debug)]
struct TrackTracker {
    name: String,
    bus: PathBuf,
    cursor: LogCursor,
    messages: VecDeque<Arc<Envelope>>,
    messages_read: u64,
    lines_skipped: u64,
    queue_note: Option<String>,
    locks: JsonFile<Vec<LockEntry>>,
    workers: JsonFile<Vec<WorkerEntry>>,
    session: Option<Arc<BoardSession>>,
    session_warning: Option<String>,
    board_fp: Vec<(String, super::files::Fingerprint)>,
    assessments: JsonFile<Vec<(String, crate::engine::bus::model::Assessment)>>,
    votes: JsonFile<Vec<(String, crate::engine::bus::model::Vote)>>,
    discussion: Option<(super::files::Fingerprint, Arc<Vec<DiscussionLine>>)>,
    view: Arc<TrackView>,
}

impl TrackTracker {
    fn new(name: &str, bus: PathBuf) -> Self {
        let board = bus.join(layout::BOARD_DIR);
        Self {
            name: name.to_owned(),
            cursor: LogCursor::new(),
            messages: VecDeque::new(),
            messages_read: 0,
            lines_skipped: 0,
            queue_note: None,
            locks: JsonFile::new(bus.join(layout::LOCKS_FILE)),
            workers: JsonFile::new(bus.join(layout::WORKERS_FILE)),
            session: None,
            session_warning: None,
            board_fp: Vec::new(),
            assessments: JsonFile::new(board.join(layout::ASSESSMENTS_FILE)),
            votes: JsonFile::new(board.join(layout::VOTES_FILE)),
            discussion: None,
            bus,
            view: Arc::new(TrackView {
                name: name.to_owned(),
                ..TrackView::default()
            }),
        }
    }

    fn queue_path(&self) -> PathBuf {
        self.bus.join(layout::QUEUE_FILE)
    }

    /// Reads what was appended to `queue.jsonl` since the last read; true if anything changed.
    fn read_queue(&mut self, opts: &ModelOptions) -> bool {
        let path = self.queue_path();
        let mut changed = false;
        match self.cursor.check(&path, opts.tail_bytes) {
            LogChange::Unchanged => return false,
            LogChange::Removed => {
                self.queue_note = Some("queue.jsonl is gone (archived?)".into());
                return true;
            }
            LogChange::Replaced => {
                self.messages.clear();
                self.queue_note =
                    Some("queue.jsonl was replaced or truncated; reading the new file".into());
                changed = true;
            }
            LogChange::Appended => {}
        }
        // Far behind (writers outpace us): jump to the last `tail_bytes`, as on first open, so one
        // read never holds more than that in memory; what is jumped over could not stay in the
        // bounded buffer anyway, and it is counted in `head_bytes_skipped`.
        if let Ok(len) = std::fs::metadata(&path).map(|m| m.len())
            && len.saturating_sub(self.cursor.offset()) > opts.tail_bytes
            && let Ok(start) = super::files::line_start_after(&path, len - opts.tail_bytes)
            && start > self.cursor.offset()
        {
            self.cursor.skipped_head_bytes += start - self.cursor.offset();
            self.cursor.advance_to(start);
            changed = true;
        }
        match super::engine_glue::read_queue(&path, self.cursor.offset()) {
            Ok(batch) => {
                // Only an unterminated line after the offset: nothing to show until it completes.
                changed |= !batch.messages.is_empty() || batch.skipped > 0;
                self.cursor.advance_to(batch.next_offset);
                self.lines_skipped += batch.skipped;
                self.messages_read += batch.messages.len() as u64;
                for m in batch.messages {
                    if self.messages.len() == opts.buffer {
                        self.messages.pop_front();
                    }
                    self.messages.push_back(Arc::new(m));
                }
                if self
                    .queue_note
                    .as_deref()
                    .is_some_and(|n| n.contains("gone"))
                {
                    self.queue_note = None;
                    changed = true;
                }
            }
            Err(e) => {
                self.queue_note = Some(e);
                changed = true;
            }
        }
        changed
    }

    fn refresh_locks(&mut self) -> bool {
        self.locks.refresh(|v| object(v).map(|m| parse_locks(&m))) != Refresh::Unchanged
    }

    fn refresh_workers(&mut self) -> bool {
        self.workers
            .refresh(|v| object(v).map(|m| parse_workers(&m)))
            != Refresh::Unchanged
    }

    /// Refreshes the board: the current session (chosen by the engine) when a session file changed,
    /// then assessments, votes and the discussion.
    fn refresh_board(&mut self, root: &Root) -> bool {
        let board = self.bus.join(layout::BOARD_DIR);
        let mut fps: Vec<(String, super::files::Fingerprint)> = list_dir(&board, false)
            .into_iter()
            .filter(|n| layout::session_id_of(n).is_some())
            .filter_map(|n| super::files::Fingerprint::of(&board.join(&n)).map(|f| (n, f)))
            .collect();
        fps.sort_by(|a, b| a.0.cmp(&b.0));
        let mut changed = false;
        if fps != self.board_fp {
            self.board_fp = fps;
            changed = true;
            match super::engine_glue::current_session(root, &self.name) {
                Ok(s) => {
                    self.session = s.map(Arc::new);
                    self.session_warning = None;
                }
                Err(e) => {
                    self.session_warning = Some(if self.session.is_some() {
                        format!("{e}{}", super::files::LAST_GOOD_NOTE)
                    } else {
                        e
                    });
                }
            }
        }
        changed |= self
            .assessments
            .refresh(|v| object(v).map(|m| parse_assessments(&m)))
            != Refresh::Unchanged;
        changed |= self.votes.refresh(|v| object(v).map(|m| parse_votes(&m))) != Refresh::Unchanged;
        let disc = board.join(layout::DISCUSSION_FILE);
        let fp = super::files::Fingerprint::of(&disc);
        match (fp, &self.discussion) {
            (None, None) => {}
            (None, Some(_)) => {
                self.discussion = None;
                changed = true;
            }
            (Some(fp), Some((old, _))) if *old == fp => {}
            (Some(fp), _) => {
                match super::engine_glue::read_discussion(&disc) {
                    Ok((lines, _skipped)) => self.discussion = Some((fp, Arc::new(lines))),
                    Err(e) => self.session_warning = Some(e),
                }
                changed = true;
            }
        }
        changed
    }

    fn rescan(&mut self, root: &Root, opts: &ModelOptions) -> bool {
        let mut changed = self.read_queue(opts);
        changed |= self.refresh_locks();
        changed |= self.refresh_workers();
        changed |= self.refresh_board(root);
        changed
    }

    fn rebuild(&mut self, now: chrono::DateTime<chrono::Utc>) {
        let mut warnings = Vec::new();
        let mut warn = |path: &Path, w: Option<&str>| {
            if let Some(w) = w {
                warnings.push(FileWarning {
                    path: path.to_path_buf(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        };
        warn(self.locks.path(), self.locks.warning());
        warn(self.workers.path(), self.workers.warning());
        warn(self.assessments.path(), self.assessments.warning());
        warn(self.votes.path(), self.votes.warning());
        let board_dir = self.bus.join(layout::BOARD_DIR);
        warn(&board_dir, self.session_warning.as_deref());
        let locks = self.locks.value().cloned().unwrap_or_default();
        let workers = self.workers.value().cloned().unwrap_or_default();
        let messages: Vec<Arc<Envelope>> = self.messages.iter().cloned().collect();
        let deadlocks = super::engine_glue::deadlocks(&messages, &locks, &workers, now);
        let board = self.session.as_ref().map(|session| {
            let votes = self.votes.value().cloned().unwrap_or_default();
            let assessments = self.assessments.value().cloned().unwrap_or_default();
            let predicted = super::engine_glue::predicted_verdict(session, &assessments, &votes);
            Arc::new(BoardView {
                session: session.clone(),
                session_path: board_dir.join(layout::session_file_name(&session.session_id)),
                assessments,
                votes,
                discussion: self
                    .discussion
                    .as_ref()
                    .map(|(_, d)| d.clone())
                    .unwrap_or_default(),
                predicted,
                resolved: session
                    .resolution
                    .as_ref()
                    .and_then(crate::engine::bus::board::ResolvedVotes::read),
            })
        });
        let head = self.cursor.skipped_head_bytes;
        self.view = Arc::new(TrackView {
            name: self.name.clone(),
            messages: Arc::new(messages),
            messages_read: self.messages_read,
            lines_skipped: self.lines_skipped,
            head_bytes_skipped: head,
            queue_note: self.queue_note.clone(),
            locks,
            workers,
            deadlocks: Arc::new(deadlocks),
            board,
            warnings,
        });
    }
}

/// Which part of the model a changed path belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Everything,
    StateFile(String),
    StateDir,
    Inbox(String, Option<String>),
    Quarantine(Option<String>),
    InboxesDir,
    Definitions,
    Track(String, TrackPart),
    TracksDir,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum TrackPart {
    Queue,
    Locks,
    Workers,
    Board,
    All,
}

/// The watched model of one root.
pub struct LiveModel {
    root: Root,
    opts: ModelOptions,
    seq: u64,
    watch: String,
    states: BTreeMap<String, JsonFile<Parsed<WorkflowState>>>,
    manifests: BTreeMap<String, JsonFile<Parsed<AbortManifest>>>,
    inboxes: BTreeMap<String, InboxTracker>,
    quarantine: InboxTracker,
    tracks: BTreeMap<String, TrackTracker>,
    snapshot: Arc<Snapshot>,
    dirty_workflows: bool,
    dirty_inboxes: bool,
    dirty_tracks: bool,
    dirty_definitions: bool,
    /// Fingerprints of the definition files, to reload them only when one changed.
    definition_files: Vec<(String, super::files::Fingerprint)>,
    /// When each file now in the warnings was first seen with a problem.
    warned_since: BTreeMap<PathBuf, chrono::DateTime<chrono::Utc>>,
}

impl LiveModel {
    /// A model of `root`, fully read once (queues from their tail).
    pub fn open(root: Root, opts: ModelOptions) -> Self {
        let quarantine = InboxTracker::new(layout::QUARANTINE_DIR, root.quarantine_dir());
        let mut m = Self {
            opts,
            seq: 0,
            watch: String::new(),
            states: BTreeMap::new(),
            manifests: BTreeMap::new(),
            inboxes: BTreeMap::new(),
            quarantine,
            tracks: BTreeMap::new(),
            snapshot: Arc::new(Snapshot::default()),
            dirty_workflows: true,
            dirty_inboxes: true,
            dirty_tracks: true,
            dirty_definitions: true,
            definition_files: Vec::new(),
            warned_since: BTreeMap::new(),
            root,
        };
        m.rescan_all();
        m.publish();
        m
    }

    /// Records how changes are noticed, for the header.
    pub fn set_watch_mode(&mut self, mode: impl Into<String>) {
        self.watch = mode.into();
        let mut s = (*self.snapshot).clone();
        s.watch = self.watch.clone();
        self.snapshot = Arc::new(s);
    }

    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.clone()
    }

    /// Re-checks every file (stat; only changed files are read) and publishes a new snapshot if
    /// anything changed. Returns the new snapshot, or `None` if nothing changed.
    pub fn rescan(&mut self) -> Option<Arc<Snapshot>> {
        self.rescan_all();
        self.publish_if_dirty()
    }

    /// Applies the changes named by file-system events; `None` if nothing visible changed.
    pub fn apply(&mut self, paths: &[PathBuf]) -> Option<Arc<Snapshot>> {
        let mut targets: BTreeSet<Target> = paths.iter().map(|p| self.classify(p)).collect();
        if targets.contains(&Target::Everything) {
            targets = [Target::Everything].into();
        }
        for t in targets {
            self.refresh_target(t);
        }
        self.publish_if_dirty()
    }

    /// Maps a changed path onto what to refresh; the engine's [`layout::classify`] says what the path is.
    fn classify(&self, path: &Path) -> Target {
        use layout::{BusEntry, Place};
        match layout::classify(&self.root, path) {
            Place::Top | Place::ConductorChild => Target::Everything,
            Place::StateDir => Target::StateDir,
            Place::StateFile(name) => Target::StateFile(name),
            Place::PendingDir => Target::InboxesDir,
            Place::ForeignPending | Place::Other => Target::Ignore,
            Place::Quarantine(file) => Target::Quarantine(file),
            Place::Inbox(god, file) => Target::Inbox(god, file),
            Place::Definitions => Target::Definitions,
            Place::TracksDir => Target::TracksDir,
            Place::Track(track) => Target::Track(track, TrackPart::All),
            Place::Bus(track, entry) => match entry {
                BusEntry::Queue => Target::Track(track, TrackPart::Queue),
                BusEntry::Locks => Target::Track(track, TrackPart::Locks),
                BusEntry::Workers => Target::Track(track, TrackPart::Workers),
                BusEntry::Board => Target::Track(track, TrackPart::Board),
                BusEntry::QueueArchive | BusEntry::Mutex | BusEntry::Fencing | BusEntry::Events => {
                    Target::Ignore
                }
            },
        }
    }

    fn refresh_target(&mut self, t: Target) {
        match t {
            Target::Everything => self.rescan_all(),
            Target::Ignore => {}
            Target::StateDir => self.rescan_states(),
            Target::StateFile(name) => {
                if self.refresh_state_file(&name) {
                    self.dirty_workflows = true;
                }
            }
            Target::InboxesDir => self.rescan_inboxes(),
            Target::Inbox(god, file) => {
                let dir = self.root.pending_root().join(&god);
                if !dir.is_dir() {
                    if self.inboxes.remove(&god).is_some() {
                        self.dirty_inboxes = true;
                    }
                    return;
                }
                let is_new = !self.inboxes.contains_key(&god);
                let inbox = self
                    .inboxes
                    .entry(god.clone())
                    .or_insert_with(|| InboxTracker::new(&god, dir));
                let changed = match file {
                    Some(f) => inbox.touch(&f),
                    None => inbox.rescan(),
                } || is_new;
                if changed {
                    inbox.rebuild();
                    self.dirty_inboxes = true;
                }
            }
            Target::Quarantine(file) => {
                let changed = match file {
                    Some(f) => self.quarantine.touch(&f),
                    None => self.quarantine.rescan(),
                };
                if changed {
                    self.quarantine.rebuild();
                    self.dirty_inboxes = true;
                }
            }
            Target::Definitions => self.check_definitions(),
            Target::TracksDir => self.rescan_tracks(),
            Target::Track(name, part) => {
                let bus = self.root.tracks_dir().join(&name).join(layout::BUS_DIR);
                if !bus.is_dir() {
                    if self.tracks.remove(&name).is_some() {
                        self.dirty_tracks = true;
                    }
                    return;
                }
                let opts = self.opts;
                let root = self.root.clone();
                let is_new = !self.tracks.contains_key(&name);
                let t = self
                    .tracks
                    .entry(name.clone())
                    .or_insert_with(|| TrackTracker::new(&name, bus));
                let changed = match part {
                    TrackPart::Queue if !is_new => t.read_queue(&opts),
                    TrackPart::Locks if !is_new => t.refresh_locks(),
                    TrackPart::Workers if !is_new => t.refresh_workers(),
                    TrackPart::Board if !is_new => t.refresh_board(&root),
                    _ => t.rescan(&root, &opts),
                } || is_new;
                if changed {
                    t.rebuild(chrono::Utc::now());
                    self.dirty_tracks = true;
                }
            }
        }
    }

    fn rescan_all(&mut self) {
        self.rescan_states();
        self.rescan_inboxes();
        self.rescan_tracks();
        self.check_definitions();
    }

    /// Marks the definitions for reloading when a file in `conductor/workflows/` changed.
    fn check_definitions(&mut self) {
        let dir = self.root.workflows_dir();
        let files: Vec<(String, super::files::Fingerprint)> = list_dir(&dir, false)
            .into_iter()
            .filter_map(|n| super::files::Fingerprint::of(&dir.join(&n)).map(|f| (n, f)))
            .collect();
        if files != self.definition_files {
            self.definition_files = files;
            self.dirty_definitions = true;
        }
    }

    fn refresh_state_file(&mut self, name: &str) -> bool {
        let dir = self.root.state_dir();
        if let Some(id) = name.strip_suffix(layout::ABORTED_SUFFIX) {
            let f = self
                .manifests
                .entry(id.to_owned())
                .or_insert_with(|| JsonFile::new(dir.join(name)));
            let r = f.refresh(parse_as::<AbortManifest>);
            if r == Refresh::Removed {
                self.manifests.remove(id);
            }
            return r != Refresh::Unchanged;
        }
        let Some(id) = name.strip_suffix(".json") else {
            return false;
        };
        let f = self
            .states
            .entry(id.to_owned())
            .or_insert_with(|| JsonFile::new(dir.join(name)));
        let r = f.refresh(parse_as::<WorkflowState>);
        if r == Refresh::Removed {
            self.states.remove(id);
        }
        r != Refresh::Unchanged
    }

    fn rescan_states(&mut self) {
        let names = list_dir(&self.root.state_dir(), false);
        let before = (self.states.len(), self.manifests.len());
        self.states
            .retain(|id, _| names.contains(&format!("{id}.json")));
        self.manifests
            .retain(|id, _| names.contains(&format!("{id}{}", layout::ABORTED_SUFFIX)));
        let mut changed = before != (self.states.len(), self.manifests.len());
        for n in names.iter().filter(|n| n.ends_with(".json")) {
            changed |= self.refresh_state_file(n);
        }
        if changed {
            self.dirty_workflows = true;
        }
    }

    fn rescan_inboxes(&mut self) {
        let pending = self.root.pending_root();
        let mut gods = list_dir(&pending, true);
        gods.retain(|g| !crate::engine::conductor::files::is_foreign_pending_dir(g));
        let before = self.inboxes.len();
        self.inboxes.retain(|g, _| gods.contains(g));
        let mut changed = before != self.inboxes.len();
        for g in gods.iter().filter(|g| *g != layout::QUARANTINE_DIR) {
            let is_new = !self.inboxes.contains_key(g);
            let inbox = self
                .inboxes
                .entry(g.clone())
                .or_insert_with(|| InboxTracker::new(g, pending.join(g)));
            if inbox.rescan() || is_new {
                inbox.rebuild();
                changed = true;
            }
        }
        if self.quarantine.rescan() {
            self.quarantine.rebuild();
            changed = true;
        }
        if changed {
            self.dirty_inboxes = true;
        }
    }

    fn rescan_tracks(&mut self) {
        let dir = self.root.tracks_dir();
        let names: BTreeSet<String> = list_dir(&dir, true)
            .into_iter()
            .filter(|t| dir.join(t).join(layout::BUS_DIR).is_dir())
            .collect();
        let before = self.tracks.len();
        self.tracks.retain(|t, _| names.contains(t));
        if before != self.tracks.len() {
            self.dirty_tracks = true;
        }
        let opts = self.opts;
        let root = self.root.clone();
        for n in &names {
            let fresh = !self.tracks.contains_key(n);
            let t = self
                .tracks
                .entry(n.clone())
                .or_insert_with(|| TrackTracker::new(n, dir.join(n).join(layout::BUS_DIR)));
            if t.rescan(&root, &opts) || fresh {
                t.rebuild(chrono::Utc::now());
                self.dirty_tracks = true;
            }
        }
    }

    fn publish_if_dirty(&mut self) -> Option<Arc<Snapshot>> {
        if self.dirty_workflows || self.dirty_inboxes || self.dirty_tracks || self.dirty_definitions
        {
            self.publish();
            Some(self.snapshot.clone())
        } else {
            None
        }
    }

    fn publish(&mut self) {
        let prev = self.snapshot.clone();
        let mut s = (*prev).clone();
        s.root = self.root.root.clone();
        s.watch = self.watch.clone();
        let stale_after = crate::engine::bus::model::stale_after();
        s.stale_after =
            (stale_after != crate::engine::bus::model::STALE_AFTER).then_some(stale_after);
        self.seq += 1;
        s.seq = self.seq;
        s.taken_at = Some(chrono::Utc::now());
        if self.dirty_definitions {
            let (defs, errors) = load_definitions(&self.root);
            s.definitions = Arc::new(defs);
            s.definition_errors = Arc::new(errors);
        }
        if self.dirty_inboxes {
            s.inboxes = Arc::new(self.inboxes.values().map(|i| (*i.view).clone()).collect());
            s.quarantine = self.quarantine.view.clone();
        }
        if self.dirty_inboxes || self.dirty_workflows {
            s.workflows = Arc::new(self.build_workflows(&s));
        }
        if self.dirty_tracks {
            s.tracks = Arc::new(self.tracks.values().map(|t| t.view.clone()).collect());
        }
        let mut warnings = self.collect_warnings(&s);
        let now = chrono::Utc::now();
        self.warned_since
            .retain(|p, _| warnings.iter().any(|w| &w.path == p));
        for w in &mut warnings {
            w.since = Some(*self.warned_since.entry(w.path.clone()).or_insert(now));
        }
        s.warnings = Arc::new(warnings);
        self.dirty_workflows = false;
        self.dirty_inboxes = false;
        self.dirty_tracks = false;
        self.dirty_definitions = false;
        self.snapshot = Arc::new(s);
    }

    fn build_workflows(&self, s: &Snapshot) -> Vec<WorkflowView> {
        let mut waiting: BTreeMap<&str, Vec<(String, Arc<Dispatch>)>> = BTreeMap::new();
        for inbox in s.inboxes.iter().chain(std::iter::once(&*s.quarantine)) {
            for d in &inbox.dispatches {
                waiting
                    .entry(d.dispatch.workflow_id.as_str())
                    .or_default()
                    .push((inbox.god.clone(), d.dispatch.clone()));
            }
        }
        self.states
            .iter()
            .filter_map(|(id, f)| {
                let p = f.value()?;
                Some(WorkflowView {
                    id: id.clone(),
                    path: f.path().to_path_buf(),
                    state: p.typed.clone(),
                    raw: p.raw.clone(),
                    manifest: self
                        .manifests
                        .get(id)
                        .and_then(|m| m.value())
                        .map(|m| m.typed.clone()),
                    warning: f.warning().map(str::to_owned),
                    waiting: waiting.remove(id.as_str()).unwrap_or_default(),
                })
            })
            .collect()
    }

    fn collect_warnings(&self, s: &Snapshot) -> Vec<FileWarning> {
        let mut out = Vec::new();
        for f in self.states.values() {
            if let Some(w) = f.warning() {
                out.push(FileWarning {
                    path: f.path().to_path_buf(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        }
        for f in self.manifests.values() {
            if let Some(w) = f.warning() {
                out.push(FileWarning {
                    path: f.path().to_path_buf(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        }
        for i in s.inboxes.iter().chain(std::iter::once(&*s.quarantine)) {
            out.extend(i.errors.iter().cloned());
        }
        for e in s.definition_errors.iter() {
            out.push(FileWarning {
                path: e.path.clone(),
                message: e.message.clone(),
                since: None,
            });
        }
        for t in s.tracks.iter() {
            out.extend(t.warnings.iter().cloned());
        }
        out
    }
}
