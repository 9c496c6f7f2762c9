//! The live model: keeps one cache per file of the root, refreshes only what changed, and builds
//! an immutable [`Snapshot`] that shares every unchanged part with the previous one.

use crate::engine::{AbortManifest, Root, layout, load_definitions, model_from_value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::files::JsonFile;
use super::snapshot::{FileWarning, JournalView, Snapshot};

/// Tuning of the live model.
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    /// When a queue is first opened, only its last this-many bytes are read.
    pub tail_bytes: u64,
    /// The most bus messages kept per track.
    pub buffer: usize,
    /// This console's overdue threshold (`None`: the default), published with every snapshot.
    pub overdue_after: Option<chrono::Duration>,
    /// This console's held-too-long threshold (`None`: the default).
    pub held_after: Option<chrono::Duration>,
    /// How long a burst of file events may gather before one snapshot is made of it (`None`: the
    /// console's [`super::runner::DEBOUNCE_MAX`]). A reader that needs no frame-rate freshness
    /// (`serve --metrics`) takes a longer one: fewer snapshots of a busy root.
    pub settle: Option<std::time::Duration>,
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self {
            tail_bytes: 4 * 1024 * 1024,
            buffer: 10_000,
            overdue_after: None,
            held_after: None,
            settle: None,
        }
    }
}

/// Parses a record file that must hold a JSON object into `T`.
fn parse_as<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, crate::engine::Refusal> {
    if !v.is_object() {
        return Err(format!(
            "expected a JSON object, found {}",
            crate::engine::json_kind(&v)
        )
        .into());
    }
    model_from_value::<T>(v)
}

fn object(v: Value) -> Result<serde_json::Map<String, Value>, crate::engine::Refusal> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "expected a JSON object, found {}",
            crate::engine::json_kind(&other)
        )
        .into()),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
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

mod bridge;
/// The files of `dir` (hidden and temporary ones left out), sorted by name: for the directories of
/// many thousand records, where a sort after the listing is cheaper than a tree of names.
fn list_files_sorted(dir: &Path) -> Vec<String> {
    let (mut names, links) = list_files_and_links(dir);
    if !links.is_empty() {
        names.extend(links);
        names.sort_unstable();
    }
    names
}

/// The files of `dir` (hidden and temporary ones left out), sorted by name, and apart from them its
/// symbolic links, sorted too: told apart by the type the directory listing gives (no `lstat` per
/// file, which cost a syscall per dispatch on the first screen of a large root).
fn list_files_and_links(dir: &Path) -> (Vec<String>, Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    let (mut files, mut links) = (Vec::new(), Vec::new());
    for e in rd.filter_map(|e| e.ok()) {
        // `DirEntry::file_type` does not follow a link (and stats the entry only when the file
        // system does not say its type).
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if t.is_symlink() {
            links.push(name)
        } else {
            files.push(name)
        }
    }
    for v in [&mut files, &mut links] {
        v.sort_unstable();
        v.dedup();
    }
    (files, links)
}

mod cost;
mod inbox;
mod links;
mod track;
mod workflow;

use inbox::InboxTracker;
use track::TrackTracker;

/// The directories whose entries the model reads, each to be watched non-recursively: the root and
/// `conductor/` (for the protocol directories appearing), `state/`, `workflows/`, `pending/` and each
/// inbox, `tracks/` and each track, its `.message-bus/` and `board/`. Not `shared/handoffs/`, whose
/// directory per workflow the console does not read: watching it recursively would cost a watch per
/// workflow out of a limit every process of the user shares.
pub fn dirs_to_watch(root: &Root) -> BTreeSet<PathBuf> {
    let mut out: BTreeSet<PathBuf> = [
        root.dir.clone(),
        root.conductor.clone(),
        root.state_dir(),
        root.workflows_dir(),
        root.pending_root(),
        root.tracks_dir(),
    ]
    .into();
    let pending = root.pending_root();
    for g in list_dir(&pending, true) {
        if !crate::engine::is_foreign_pending_dir(&g) {
            out.insert(pending.join(g));
        }
    }
    let tracks = root.tracks_dir();
    for t in list_dir(&tracks, true) {
        let bus = tracks.join(&t).join(layout::BUS_DIR);
        out.insert(tracks.join(&t));
        out.insert(bus.join(layout::BOARD_DIR));
        out.insert(bus);
    }
    // Dead letters (`dead/` and a directory per god), the journal's segments and the bridge's
    // status file, which the Dead letters, Journal and header items show.
    let dead = root.dead_root();
    for g in list_dir(&dead, true) {
        out.insert(dead.join(g));
    }
    out.insert(dead);
    out.insert(root.supervisor_dir());
    out.insert(crate::engine::journal_segments_dir(root));
    // The bridge's status, cursors, dead letters and outbox (the header item and `:pane bridge`).
    out.extend(crate::engine::nats::watched_dirs(root));
    // The ledger, the budget warnings and the raised budgets (the Ledger pane, the cost column).
    out.insert(cost::watched(root));
    // The approval links' records (pane 2's detail of a held item).
    out.insert(root.approvals_dir());
    out
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
    /// `conductor/dead/`: dead-lettered dispatches.
    Dead,
    /// `conductor/journal.jsonl` or a segment in `conductor/journal/`.
    Journal,
    /// `conductor/supervisor/`: supervisor heartbeats.
    Supervisors,
    /// `conductor/paused.json`: the pauses in force.
    Paused,
    /// The bridge's status, cursors, outbox, sent records or dead letters.
    Bridge(bridge::BridgePart),
    /// `conductor/cost/`: the ledger, the budget warnings, the raised budgets.
    Cost(cost::CostPart),
    /// `conductor/approvals/`: the approval links' records.
    Links,
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

/// A file listed by the first load but not read yet.
#[derive(Debug, Clone)]
enum Unread {
    /// A file of `conductor/state/`.
    State(String),
    /// A dispatch file: (god or `_quarantine`, file name).
    Dispatch(String, String),
}

/// How long the first load reads before the first snapshot is published (the first screen).
pub(crate) const FIRST_CHUNK: std::time::Duration = std::time::Duration::from_millis(40);
/// How long the first later step of the first load reads before it publishes what it has; each
/// step after it reads twice as long as the one before, up to [`LOAD_STEPS_DOUBLE`] doublings.
pub(crate) const LOAD_CHUNK: std::time::Duration = std::time::Duration::from_millis(200);
/// How many times a step of the first load doubles [`LOAD_CHUNK`] (200 ms, 400, 800, then 1.6 s):
/// every publish rebuilds and re-sorts the whole list of rows, and so does the console's frame
/// after it, so a root of 100,000 workflows loads in a handful of steps, not in twenty.
pub(crate) const LOAD_STEPS_DOUBLE: u32 = 3;

/// The watched model of one root.
pub struct LiveModel {
    root: Root,
    opts: ModelOptions,
    seq: u64,
    watch: String,
    /// One compact row per state file, by workflow id.
    states: BTreeMap<super::snapshot::Sym, workflow::StateFile>,
    /// The shared copies of the names the rows hold.
    names: workflow::Interner,
    /// `conductor/state/`, shared by every workflow view.
    state_dir: Arc<Path>,
    manifests: BTreeMap<String, JsonFile<AbortManifest>>,
    inboxes: BTreeMap<String, InboxTracker>,
    quarantine: InboxTracker,
    tracks: BTreeMap<String, TrackTracker>,
    snapshot: Arc<Snapshot>,
    dirty_workflows: bool,
    dirty_inboxes: bool,
    dirty_tracks: bool,
    dirty_definitions: bool,
    /// Fingerprints of the definition files, to reload them only when one changed.
    definition_files: Vec<(String, crate::live::files::Fingerprint)>,
    /// Since when each file now in the warnings has its problem (its modification time, else when it
    /// was first seen with it).
    warned_since: BTreeMap<PathBuf, chrono::DateTime<chrono::Utc>>,
    /// `conductor/dead/{god}/`: dead letters, read as dispatches.
    dead: BTreeMap<String, InboxTracker>,
    dirty_dead: bool,
    /// The supervisors' heartbeats, as last read.
    supervisors: Vec<crate::live::snapshot::SupervisorBeat>,
    dirty_supervisors: bool,
    /// The pauses in force (`conductor/paused.json`), or why the file cannot be read.
    paused: crate::live::snapshot::PausedView,
    dirty_paused: bool,
    /// Fingerprints of the journal's files when it was last read.
    journal_files: Vec<(PathBuf, Option<crate::live::files::Fingerprint>)>,
    dirty_journal: bool,
    /// The bridge's records (`conductor/bridge/`, `conductor/outbox/`).
    bridge: bridge::BridgeTracker,
    dirty_bridge: bool,
    /// The ledger, warnings and raised budgets (`conductor/cost/`).
    cost: cost::CostTracker,
    dirty_cost: bool,
    /// The approval links' records (`conductor/approvals/`).
    links: links::LinkTracker,
    dirty_links: bool,
    /// True until the first load read `conductor/cost/` (after the first screen: a long ledger's
    /// tail takes longer than the first screen may).
    cost_unread: bool,
    /// Increases whenever a directory may have appeared or vanished (see [`LiveModel::layout_generation`]).
    layout: u64,
    /// True while the first load lists files without reading the new ones (they go to `unread`).
    progressive: bool,
    /// Files listed by the first load and not read yet, read a chunk at a time by [`LiveModel::load_more`].
    unread: std::collections::VecDeque<Unread>,
    /// How many files the first load listed (for "loading N of M").
    load_total: usize,
    /// True once the files left by the first chunk are ordered newest first.
    load_ordered: bool,
    /// True while the first load has not listed the inboxes yet (a large state directory took the
    /// first screen's time).
    inboxes_unlisted: bool,
    /// How long the last publish took: a step of the first load reads at least four times that
    /// long, so publishing a root of 100,000 rows does not take most of the load's time.
    last_publish: std::time::Duration,
    /// How many steps of the first load were taken (each reads longer, see [`LOAD_STEPS_DOUBLE`]).
    load_steps: u32,
}

impl LiveModel {
    /// A model of `root`, fully read once (queues from their tail).
    pub fn open(root: Root, opts: ModelOptions) -> Self {
        let mut m = Self::open_empty(root, opts);
        m.rescan_all();
        m.publish();
        m
    }

    fn open_empty(root: Root, opts: ModelOptions) -> Self {
        let quarantine = InboxTracker::new(layout::QUARANTINE_DIR, root.quarantine_dir());
        Self {
            opts,
            seq: 0,
            watch: String::new(),
            states: BTreeMap::new(),
            names: Default::default(),
            state_dir: Self::state_dir_of(&root),
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
            dead: BTreeMap::new(),
            dirty_dead: true,
            supervisors: Vec::new(),
            dirty_supervisors: true,
            paused: Default::default(),
            dirty_paused: true,
            journal_files: Vec::new(),
            dirty_journal: true,
            bridge: Default::default(),
            dirty_bridge: true,
            cost: Default::default(),
            dirty_cost: true,
            links: Default::default(),
            dirty_links: true,
            cost_unread: false,
            layout: 0,
            progressive: false,
            unread: Default::default(),
            load_total: 0,
            load_ordered: false,
            inboxes_unlisted: false,
            last_publish: std::time::Duration::ZERO,
            load_steps: 0,
            root,
        }
    }

    /// A model of `root` whose first snapshot is published after `first` of reading: the protocol
    /// directories are listed, tracks and definitions read, then workflow states and dispatches
    /// until the time is up. The rest is read by [`LiveModel::load_more`]; until then the snapshot
    /// says how far the load got ([`Snapshot::loading`]).
    pub fn open_progressive(root: Root, opts: ModelOptions, first: std::time::Duration) -> Self {
        let started = std::time::Instant::now();
        let mut m = Self::open_empty(root, opts);
        m.progressive = true;
        m.rescan_states();
        // Listing a few hundred thousand files takes a while: when the state directory alone took
        // the first screen's time, the inboxes are listed by the first step after it.
        if started.elapsed() < first {
            m.rescan_inboxes();
        } else {
            m.inboxes_unlisted = true;
        }
        m.rescan_tracks();
        m.check_definitions();
        m.rescan_dead();
        m.rescan_supervisors();
        m.read_paused();
        m.check_journal();
        // Small files: the supervisors' heartbeats and the bridge's status are part of the first
        // screen (the header's notices), not of the background load.
        m.bridge.refresh(&m.root, bridge::BridgePart::All);
        m.cost_unread = true;
        m.progressive = false;
        m.load_total = m.unread.len();
        let left = first.saturating_sub(started.elapsed());
        m.read_unread(left);
        m.publish();
        m
    }

    /// True while files listed by the first load are still unread.
    pub fn is_loading(&self) -> bool {
        !self.unread.is_empty() || self.inboxes_unlisted || self.cost_unread
    }

    /// Reads unread files for about `budget` (doubled at each step, see [`LOAD_STEPS_DOUBLE`]), then
    /// publishes what changed.
    pub fn load_more(&mut self, budget: std::time::Duration) -> Option<Arc<Snapshot>> {
        if !self.is_loading() {
            return None;
        }
        if self.cost_unread {
            self.cost_unread = false;
            if self.cost.refresh(&self.root, cost::CostPart::All) {
                self.dirty_cost = true;
            }
            // The approval links' records too: up to 10,000 small files, after the first screen.
            if self.links.refresh(&self.root) {
                self.dirty_links = true;
            }
        }
        if self.inboxes_unlisted {
            self.inboxes_unlisted = false;
            let before = self.unread.len();
            self.progressive = true;
            self.rescan_inboxes();
            self.progressive = false;
            self.load_total += self.unread.len().saturating_sub(before);
        }
        if !self.load_ordered {
            self.order_unread();
        }
        let grown = budget.saturating_mul(1 << self.load_steps.min(LOAD_STEPS_DOUBLE));
        self.load_steps = self.load_steps.saturating_add(1);
        let budget = if budget.is_zero() {
            budget
        } else {
            grown.max(self.last_publish.saturating_mul(4))
        };
        self.read_unread(budget);
        // The last step always publishes, so the "loading" note goes away.
        self.dirty_workflows = true;
        self.publish_if_dirty()
    }

    /// Orders the files the first chunk left unread newest first (by modification time): a
    /// workflow still running was written lately, a finished one long ago, so the unfinished ones
    /// and their dispatches come in the first pages and the finished ones follow in the background.
    /// One `stat` per file, done once, after the first screen.
    fn order_unread(&mut self) {
        self.load_ordered = true;
        let state = self.root.state_dir();
        let pending = self.root.pending_root();
        let mut files: Vec<(Option<std::time::SystemTime>, Unread)> = self
            .unread
            .drain(..)
            .map(|u| {
                let path = match &u {
                    Unread::State(n) => state.join(n),
                    Unread::Dispatch(g, n) => pending.join(g).join(n),
                };
                (std::fs::metadata(path).and_then(|m| m.modified()).ok(), u)
            })
            .collect();
        // Newest first; a file that could not be stat'ed last. The sort is stable: equal times
        // keep the listing's order.
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        self.unread = files.into_iter().map(|(_, u)| u).collect();
    }

    fn defer(&mut self, files: Vec<Unread>) {
        self.unread.extend(files);
    }

    /// Reads unread files until `budget` is spent (at least one file).
    fn read_unread(&mut self, budget: std::time::Duration) {
        let started = std::time::Instant::now();
        let mut touched = BTreeSet::new();
        let mut n = 0usize;
        while let Some(u) = self.unread.pop_front() {
            match u {
                Unread::State(name) => {
                    if self.refresh_state_file(&name) {
                        self.dirty_workflows = true;
                    }
                }
                Unread::Dispatch(god, file) => {
                    if self.read_deferred_dispatch(&god, &file) {
                        touched.insert(god);
                    }
                }
            }
            n += 1;
            // A clock read every 64 files: cheap next to reading one.
            if n.is_multiple_of(64) && started.elapsed() >= budget {
                break;
            }
        }
        if self.unread.is_empty() {
            // The queue held every file of the root once: give its memory back.
            self.unread = Default::default();
        }
        self.rebuild_inboxes(&touched);
    }

    /// Records how changes are noticed, for the header.
    pub fn set_watch_mode(&mut self, mode: impl Into<String>) {
        self.watch = mode.into();
        let mut s = (*self.snapshot).clone();
        s.watch = self.watch.clone();
        self.snapshot = Arc::new(s);
    }

    /// Increases whenever an event or a rescan may have made a directory appear or vanish: the
    /// runner then syncs its watches with [`dirs_to_watch`].
    pub fn layout_generation(&self) -> u64 {
        self.layout
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

    fn classify(&self, path: &Path) -> Target {
        let name = file_name(path);
        if name.starts_with(layout::TEMP_PREFIX)
            || name.ends_with(layout::LOCK_SUFFIX)
            || name == layout::BUS_MUTEX_FILE
        {
            return Target::Ignore;
        }
        if path == self.root.dir || path == self.root.conductor {
            return Target::Everything;
        }
        if let Ok(rel) = path.strip_prefix(self.root.state_dir()) {
            let parts: Vec<_> = rel.components().collect();
            return match parts.len() {
                0 => Target::StateDir,
                1 => Target::StateFile(name),
                _ => Target::Ignore,
            };
        }
        if let Ok(rel) = path.strip_prefix(self.root.pending_root()) {
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            return match parts.as_slice() {
                [] => Target::InboxesDir,
                [god, ..] if crate::engine::is_foreign_pending_dir(god) => Target::Ignore,
                [god] if god == layout::QUARANTINE_DIR => Target::Quarantine(None),
                [god] => Target::Inbox(god.clone(), None),
                [god, file] if god == layout::QUARANTINE_DIR => {
                    Target::Quarantine(Some(file.clone()))
                }
                [god, file] => Target::Inbox(god.clone(), Some(file.clone())),
                _ => Target::Ignore,
            };
        }
        if path.starts_with(self.root.workflows_dir()) {
            return Target::Definitions;
        }
        if let Ok(rel) = path.strip_prefix(self.root.tracks_dir()) {
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            return match parts.as_slice() {
                [] => Target::TracksDir,
                [track] | [track, _] => Target::Track(track.clone(), TrackPart::All),
                [track, _, f] if f == layout::QUEUE_FILE => {
                    Target::Track(track.clone(), TrackPart::Queue)
                }
                [track, _, f] if f == layout::LOCKS_FILE => {
                    Target::Track(track.clone(), TrackPart::Locks)
                }
                [track, _, f] if f == layout::WORKERS_FILE => {
                    Target::Track(track.clone(), TrackPart::Workers)
                }
                [track, _, b, ..] if b == layout::BOARD_DIR => {
                    Target::Track(track.clone(), TrackPart::Board)
                }
                _ => Target::Ignore,
            };
        }
        if let Some(part) = bridge::part_of(&self.root, path) {
            return Target::Bridge(part);
        }
        if let Some(part) = cost::part_of(&self.root, path) {
            return Target::Cost(part);
        }
        if path.starts_with(cost::watched(&self.root)) {
            return Target::Ignore;
        }
        if path.starts_with(self.dead_dir()) {
            return Target::Dead;
        }
        if path.starts_with(self.root.approvals_dir()) {
            return Target::Links;
        }
        if path.starts_with(self.root.supervisor_dir()) {
            return Target::Supervisors;
        }
        if path == self.root.paused_path() {
            return Target::Paused;
        }
        let journal = crate::engine::journal_path(&self.root);
        if path == journal || path.starts_with(crate::engine::journal_segments_dir(&self.root)) {
            return Target::Journal;
        }
        if path.starts_with(&self.root.conductor) {
            // A new or removed top-level directory (pending/, state/, tracks/ created by init); not a
            // file such as the journal, whose every append would cost a rescan of the whole root.
            if path.parent() == Some(self.root.conductor.as_path()) && !path.is_file() {
                return Target::Everything;
            }
        }
        Target::Ignore
    }

    fn refresh_target(&mut self, t: Target) {
        if matches!(
            t,
            Target::Everything
                | Target::StateDir
                | Target::InboxesDir
                | Target::TracksDir
                | Target::Inbox(_, None)
                | Target::Quarantine(None)
                | Target::Track(_, TrackPart::All | TrackPart::Board)
                | Target::Dead
                | Target::Bridge(bridge::BridgePart::All)
                | Target::Cost(cost::CostPart::All)
        ) {
            self.layout += 1;
        }
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
                    Some(f) => inbox.touch(&f, &mut self.names),
                    None => inbox.rescan(&mut self.names),
                } || is_new;
                if changed {
                    inbox.rebuild();
                    self.dirty_inboxes = true;
                }
            }
            Target::Quarantine(file) => {
                let changed = match file {
                    Some(f) => self.quarantine.touch(&f, &mut self.names),
                    None => self.quarantine.rescan(&mut self.names),
                };
                if changed {
                    self.quarantine.rebuild();
                    self.dirty_inboxes = true;
                }
            }
            Target::Definitions => self.check_definitions(),
            Target::Dead => self.rescan_dead(),
            Target::Supervisors => self.rescan_supervisors(),
            Target::Paused => self.read_paused(),
            Target::Journal => self.check_journal(),
            Target::Bridge(part) => {
                if self.bridge.refresh(&self.root, part) {
                    self.dirty_bridge = true;
                }
            }
            Target::Cost(part) => {
                if self.cost.refresh(&self.root, part) {
                    self.dirty_cost = true;
                }
            }
            Target::Links => {
                if self.links.refresh(&self.root) {
                    self.dirty_links = true;
                }
            }
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
        self.rescan_dead();
        self.rescan_supervisors();
        self.read_paused();
        self.check_journal();
        if self.bridge.refresh(&self.root, bridge::BridgePart::All) {
            self.dirty_bridge = true;
        }
        if self.cost.refresh(&self.root, cost::CostPart::All) {
            self.dirty_cost = true;
        }
        if self.links.refresh(&self.root) {
            self.dirty_links = true;
        }
    }

    /// Re-reads the supervisors' heartbeats (small files, few of them; bounded reads, links not
    /// followed, an unreadable one counts as not alive).
    fn rescan_supervisors(&mut self) {
        let dir = self.root.supervisor_dir();
        let beats: Vec<crate::live::snapshot::SupervisorBeat> = list_dir(&dir, false)
            .into_iter()
            .filter_map(|n| {
                let id = n.strip_suffix(".json")?.to_owned();
                let path = dir.join(&n);
                let link =
                    std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
                let last_beat = (!link)
                    .then(|| crate::engine::read_json_once(&path).ok().flatten())
                    .flatten()
                    .and_then(|v| {
                        v.get("last_beat")
                            .and_then(Value::as_str)
                            .and_then(crate::engine::time::parse_ts)
                    });
                Some(crate::live::snapshot::SupervisorBeat { id, last_beat })
            })
            .collect();
        if beats != self.supervisors {
            self.supervisors = beats;
            self.dirty_supervisors = true;
        }
    }

    /// Reads `conductor/paused.json` again (through the engine's bounded, no-follow reader).
    fn read_paused(&mut self) {
        let now = match crate::engine::Pauses::load(&self.root) {
            Ok(p) => crate::live::snapshot::PausedView {
                pauses: p.list().to_vec(),
                error: None,
            },
            Err(e) => crate::live::snapshot::PausedView {
                pauses: Vec::new(),
                error: Some(e.to_string()),
            },
        };
        if now != self.paused {
            self.paused = now;
            self.dirty_paused = true;
        }
    }

    fn dead_dir(&self) -> PathBuf {
        self.root.dead_root()
    }

    /// Re-lists `conductor/dead/` and refreshes its files (only changed ones are read).
    fn rescan_dead(&mut self) {
        let dir = self.dead_dir();
        let gods = list_dir(&dir, true);
        let before = self.dead.len();
        self.dead.retain(|g, _| gods.contains(g));
        let mut changed = before != self.dead.len();
        for g in &gods {
            let is_new = !self.dead.contains_key(g);
            let t = self
                .dead
                .entry(g.clone())
                .or_insert_with(|| InboxTracker::new(g, dir.join(g)));
            if t.rescan(&mut self.names) || is_new {
                t.rebuild();
                changed = true;
            }
        }
        if changed {
            self.dirty_dead = true;
        }
    }

    /// Marks the journal for reading when one of its files changed (appended, rotated).
    fn check_journal(&mut self) {
        let files: Vec<(PathBuf, Option<crate::live::files::Fingerprint>)> =
            crate::engine::journal_files(&self.root)
                .into_iter()
                .map(|p| {
                    let f = crate::live::files::Fingerprint::of(&p);
                    (p, f)
                })
                .collect();
        if files != self.journal_files {
            self.journal_files = files;
            self.dirty_journal = true;
        }
    }

    /// Marks the definitions for reloading when a file in `conductor/workflows/` changed.
    fn check_definitions(&mut self) {
        let dir = self.root.workflows_dir();
        let files: Vec<(String, crate::live::files::Fingerprint)> = list_dir(&dir, false)
            .into_iter()
            .filter_map(|n| crate::live::files::Fingerprint::of(&dir.join(&n)).map(|f| (n, f)))
            .collect();
        if files != self.definition_files {
            self.definition_files = files;
            self.dirty_definitions = true;
        }
    }
    fn publish_if_dirty(&mut self) -> Option<Arc<Snapshot>> {
        if self.dirty_workflows
            || self.dirty_inboxes
            || self.dirty_tracks
            || self.dirty_definitions
            || self.dirty_dead
            || self.dirty_supervisors
            || self.dirty_paused
            || self.dirty_journal
            || self.dirty_bridge
            || self.dirty_cost
            || self.dirty_links
        {
            self.publish();
            Some(self.snapshot.clone())
        } else {
            None
        }
    }

    fn publish(&mut self) {
        let started = std::time::Instant::now();
        self.publish_now();
        self.last_publish = started.elapsed();
    }

    /// Dates each warning: since its file was last written (when it got this way), if that is not
    /// in the future, else since it was first seen with the problem; kept while the problem stays.
    fn date_warnings(&mut self, warnings: &mut [crate::live::snapshot::FileWarning]) {
        let now = chrono::Utc::now();
        self.warned_since
            .retain(|p, _| warnings.iter().any(|w| &w.path == p));
        for w in warnings.iter_mut() {
            let since = *self.warned_since.entry(w.path.clone()).or_insert_with(|| {
                std::fs::symlink_metadata(&w.path)
                    .and_then(|m| m.modified())
                    .ok()
                    .map(chrono::DateTime::<chrono::Utc>::from)
                    .filter(|t| *t <= now)
                    .unwrap_or(now)
            });
            w.since = Some(since);
        }
    }

    fn publish_now(&mut self) {
        let prev = self.snapshot.clone();
        let mut s = (*prev).clone();
        s.root = self.root.dir.clone();
        s.watch = self.watch.clone();
        s.overdue_after = self.opts.overdue_after;
        s.held_after = self.opts.held_after;
        let stale_after = chrono::Duration::from_std(self.root.settings.stale_after)
            .unwrap_or(crate::engine::STALE_AFTER);
        s.stale_after = (stale_after != crate::engine::STALE_AFTER).then_some(stale_after);
        s.bridge = crate::engine::read_json(&crate::engine::nats::status_path(&self.root))
            .ok()
            .flatten()
            .filter(Value::is_object)
            .map(|v| Arc::new(crate::engine::nats::Status::from_value(&v)));
        if self.dirty_bridge {
            s.bridge_view = Arc::new(self.bridge.view(s.bridge.as_deref()));
        }
        self.seq += 1;
        s.seq = self.seq;
        s.loading = self.is_loading().then(|| super::snapshot::Loading {
            read: self.load_total.saturating_sub(self.unread.len()),
            total: self.load_total,
            finished: 0,
        });
        s.taken_at = Some(chrono::Utc::now());
        if self.dirty_definitions {
            let (defs, errors) = load_definitions(&self.root);
            s.definitions = Arc::new(defs);
            s.definition_errors = Arc::new(errors);
        }
        if self.dirty_inboxes {
            s.inboxes = Arc::new(self.inboxes.values().map(|i| (*i.view).clone()).collect());
            s.quarantine = self.quarantine.view.clone();
            s.deadlines = s
                .inboxes
                .iter()
                .flat_map(|i| i.dispatches.iter())
                .filter(|d| {
                    use crate::engine::AckStatus;
                    d.dispatch.ack_deadline.is_some()
                        && matches!(
                            d.dispatch.ack_status,
                            AckStatus::Unacked | AckStatus::Pending
                        )
                })
                .count();
        }
        if self.dirty_supervisors {
            s.supervisors = Arc::new(self.supervisors.clone());
        }
        if self.dirty_paused {
            s.paused = Arc::new(self.paused.clone());
        }
        if self.dirty_cost {
            s.ledger = self.cost.view();
        }
        if self.dirty_links {
            s.links = Arc::new(self.links.view());
        }
        if self.dirty_inboxes || self.dirty_workflows || self.dirty_definitions {
            let mut list = self.build_workflows(&s);
            // In the Workflows pane's order once here, not on every frame. Unstable, so no buffer
            // of half the list beside it (4 MiB at 100,000 rows, at the load's peak); the ids break
            // ties in the order a stable sort kept them in (the map's).
            list.sort_unstable_by(|a, b| {
                a.state
                    .status
                    .is_finished()
                    .cmp(&b.state.status.is_finished())
                    .then_with(|| crate::console::items::natural_cmp(&a.id, &b.id))
                    .then_with(|| a.id.cmp(&b.id))
            });
            s.workflows = Arc::new(list);
            s.workflows_in_order = true;
            s.tallies = Some(Arc::new(s.tally()));
            self.names.prune();
        }
        if self.dirty_tracks {
            s.tracks = Arc::new(self.tracks.values().map(|t| t.view.clone()).collect());
        }
        if self.dirty_dead {
            s.dead_letters = Arc::new(self.dead.values().map(|i| (*i.view).clone()).collect());
        }
        if self.dirty_journal {
            s.journal = Arc::new(
                match crate::engine::read_recent_journal(
                    &self.root,
                    crate::live::snapshot::JOURNAL_KEPT,
                ) {
                    Ok(r) => JournalView {
                        entries: r.entries.into_iter().map(Arc::new).collect(),
                        bad_lines: r.bad_lines,
                        error: None,
                    },
                    Err(e) => JournalView {
                        error: Some(e.to_string()),
                        ..JournalView::default()
                    },
                },
            );
        }
        if let (Some(l), Some(t)) = (s.loading.as_mut(), s.tallies.as_ref()) {
            l.finished = s.workflows.len().saturating_sub(t.active);
        }
        let mut warnings = self.collect_warnings(&s);
        self.date_warnings(&mut warnings);
        s.warnings = Arc::new(warnings);
        self.clear_dirty();
        self.snapshot = Arc::new(s);
    }

    /// Every part published: nothing dirty until the next change.
    fn clear_dirty(&mut self) {
        self.dirty_workflows = false;
        self.dirty_inboxes = false;
        self.dirty_tracks = false;
        self.dirty_definitions = false;
        self.dirty_dead = false;
        self.dirty_supervisors = false;
        self.dirty_paused = false;
        self.dirty_journal = false;
        self.dirty_bridge = false;
        self.dirty_cost = false;
        self.dirty_links = false;
    }

    fn collect_warnings(&self, s: &Snapshot) -> Vec<FileWarning> {
        let mut out = Vec::new();
        for (id, f) in &self.states {
            if let Some(w) = f.warning() {
                out.push(FileWarning {
                    path: self.state_dir.join(format!("{id}.json")),
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
        for i in s.dead_letters.iter() {
            out.extend(i.errors.iter().cloned());
        }
        out.extend(self.links.warnings(&self.root));
        out
    }
}
