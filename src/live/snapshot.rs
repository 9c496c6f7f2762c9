//! The immutable picture of a root the console draws: engine types behind `Arc`s, shared between
//! snapshots when a part did not change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::engine::{
    AbortManifest, AckStatus, Assessment, BoardSession, DiscussionLine, Dispatch, Envelope,
    LoadError, LockEntry, Overdue, OverdueRule, Vote, Waits, WorkerEntry, WorkflowDef,
    WorkflowState, WorkflowStatus,
};

pub(crate) use super::compact::{DispatchRow, Stamp};

/// A dispatch that has waited unacknowledged this long is overdue (the default of
/// [`Snapshot::unacked_overdue_after`]; the console's `[thresholds] overdue_secs` sets another).
pub(crate) const UNACKED_OVERDUE_AFTER: Duration = crate::engine::UNACKED_AFTER;

/// A held dispatch (in `_quarantine`) waiting for an operator longer than this is flagged as
/// overdue (the default of [`Snapshot::held_overdue_after`]; `[thresholds] held_secs` sets another).
pub(crate) const HELD_OVERDUE_AFTER: Duration = crate::engine::HELD_AFTER;

/// A threshold in seconds as the config gives it, bounded (at least one second, at most a century).
pub(crate) fn threshold_secs(secs: u64) -> Duration {
    Duration::seconds(
        i64::try_from(secs)
            .unwrap_or(i64::MAX)
            .clamp(1, 100 * 365 * 86_400),
    )
}

/// A problem with one file: it is shown, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWarning {
    pub path: PathBuf,
    pub message: String,
    /// When the model first saw this file with a problem (set when the snapshot is published).
    pub since: Option<DateTime<Utc>>,
}

impl FileWarning {
    /// True when a pane still shows what this file held before it became unreadable.
    pub fn shows_last_good(&self) -> bool {
        self.message.ends_with(super::files::LAST_GOOD_NOTE)
    }
}

/// Everything the console shows about a root at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub root: PathBuf,
    /// Increases with every snapshot the model publishes.
    pub seq: u64,
    /// When the model built it (the views take "now" from the app, not from here).
    pub taken_at: Option<DateTime<Utc>>,
    /// How changes are noticed (`notify`, `poll 1000ms`).
    pub watch: String,
    pub workflows: Arc<Vec<WorkflowView>>,
    /// One entry per god with an inbox directory, sorted by name.
    pub inboxes: Arc<Vec<InboxView>>,
    /// Dispatches held for operator approval.
    pub quarantine: Arc<InboxView>,
    pub definitions: Arc<Vec<WorkflowDef>>,
    pub definition_errors: Arc<Vec<LoadError>>,
    /// One entry per track, sorted by name.
    pub tracks: Arc<Vec<Arc<TrackView>>>,
    /// Files that could not be read as they are now.
    pub warnings: Arc<Vec<FileWarning>>,
    /// The staleness threshold for workers when it is not the protocol's 10 minutes (overridden by
    /// `PANTHEON_STALE_AFTER_SECS`, as the demo does), so the console can say which one it applies.
    pub stale_after: Option<Duration>,
    /// Dead-lettered dispatches, `conductor/dead/{god}/{handoff_id}.json`, one entry per god.
    pub dead_letters: Arc<Vec<InboxView>>,
    /// The newest entries of the operator journal (`conductor/journal.jsonl` and its segments).
    pub journal: Arc<JournalView>,
    /// `conductor/bridge/status.json` as the running bridge last wrote it (docs/NATS.md), if any.
    pub bridge: Option<Arc<crate::engine::nats::Status>>,
    /// Set while the first load of a large root is still reading files (the first screen is drawn
    /// before the whole root is read).
    pub loading: Option<Loading>,
    /// The bridge's records for the `:pane bridge` view: track cursors, outbox, sent, dead letters.
    pub bridge_view: Arc<BridgeView>,
    /// True when `workflows` is already in the Workflows pane's order (unfinished first, then ids
    /// in natural order), as the model publishes it: a frame need not sort 100,000 rows again.
    pub workflows_in_order: bool,
    /// The overdue threshold of this console (`None`: [`UNACKED_OVERDUE_AFTER`]); set by the live
    /// model from its options, or by the app from its config, never process-wide.
    pub overdue_after: Option<Duration>,
    /// The held-too-long threshold of this console (`None`: [`HELD_OVERDUE_AFTER`]).
    pub held_after: Option<Duration>,
    /// The heartbeats of `pantheon serve` supervisors (`conductor/supervisor/*.json`), alive or not.
    pub supervisors: Arc<Vec<SupervisorBeat>>,
    /// Open dispatches (unacked or pending, in an inbox) with an ack deadline: what a supervisor
    /// enforces (the count `validate` warns about when none is alive).
    pub deadlines: usize,
    /// The header's workflow counts, worked out once per snapshot by the model (a frame then costs
    /// no pass over every workflow); `None` in a snapshot built by hand, which counts row by row.
    pub tallies: Option<Arc<Tallies>>,
    /// The ledger, budgets and budget warnings (`conductor/cost/`), read incrementally.
    pub ledger: Arc<super::ledger::LedgerView>,
    /// The pauses in force (`conductor/paused.json`, docs/PROTOCOL.md §2.14), or why the file
    /// cannot be read.
    pub paused: Arc<PausedView>,
    /// The foreign sources beside the root (`--source`), as their readers last saw them: their
    /// agents, messages, tasks, locks and waiting items, or why they cannot be read.
    pub sources: Arc<Vec<crate::sources::SourceState>>,
    /// The approval links' records (`conductor/approvals/`, docs/PROTOCOL.md §2.15), by held item.
    pub links: Arc<LinksView>,
}

/// `conductor/approvals/` as the console shows it: each held item's link records, as kept (the
/// console does not hold the operator's key, so it shows what a record says; a record planted by
/// another writer of the root approves nothing, the engine refuses it when its token is used).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinksView {
    /// Each held item's records (by handoff id), oldest first.
    pub by_handoff: std::collections::BTreeMap<String, Vec<Arc<crate::engine::LinkRecord>>>,
    /// Record files that could not be read as one (each is a warning too).
    pub unreadable: usize,
}

/// `conductor/paused.json` as the console shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PausedView {
    /// The pauses in force, as the file lists them.
    pub pauses: Vec<crate::engine::Pause>,
    /// Why the file cannot be read (then nothing is shown as paused, and the header says so).
    pub error: Option<String>,
}

impl PausedView {
    /// The pause that stops dispatches to `god` or of workflow `wf`, if any.
    pub fn covering(&self, god: &str, wf: &str) -> Option<&crate::engine::Pause> {
        use crate::engine::PauseKind;
        self.pauses.iter().find(|p| match p.kind {
            PauseKind::All => true,
            PauseKind::God => p.name.as_deref() == Some(god),
            PauseKind::Workflow => p.name.as_deref() == Some(wf),
            _ => false,
        })
    }

    /// The pause of exactly `kind` and `name`, if any.
    pub fn of(&self, kind: crate::engine::PauseKind, name: &str) -> Option<&crate::engine::Pause> {
        self.pauses
            .iter()
            .find(|p| p.kind == kind && p.name.as_deref() == Some(name))
    }
}

/// Workflow counts that do not depend on the clock, and the instants from which each unfinished
/// workflow is overdue (sorted), so the overdue count at any "now" is one binary search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tallies {
    pub active: usize,
    /// Workflows `stalled` (a dispatch ran out of deliveries): not active, waiting on an operator.
    pub stalled: usize,
    pub orphaned: usize,
    pub overdue_from: Vec<DateTime<Utc>>,
    /// Workflows whose state records usage or a raised budget.
    pub costed: usize,
}

/// One supervisor's heartbeat file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorBeat {
    /// Its id (the file name without `.json`).
    pub id: String,
    /// Its `last_beat`, when the file holds a readable one.
    pub last_beat: Option<DateTime<Utc>>,
}

impl SupervisorBeat {
    /// True when it beat within the engine's liveness limit at `now`.
    pub fn alive(&self, now: DateTime<Utc>) -> bool {
        self.last_beat
            .is_some_and(|t| crate::engine::supervisor_alive(t, now))
    }
}

/// How far the first load of a root got: files read of those listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loading {
    pub read: usize,
    pub total: usize,
    /// Finished workflows read so far (they keep coming in the background; unfinished ones are
    /// read first, see `LiveModel::load_more`).
    pub finished: usize,
}

/// A record read whole (a detail view, a confirmation): the typed value and the raw document.
#[derive(Debug)]
pub struct Whole<T> {
    pub typed: T,
    pub raw: Value,
}

/// The whole of one version of a record's file, read the first time someone asks for it and shared
/// by every snapshot that shows that version (the model makes a new cell when the file changes).
#[derive(Debug)]
pub struct WholeCell<T>(OnceLock<Result<Arc<Whole<T>>, String>>);

impl<T> Default for WholeCell<T> {
    fn default() -> Self {
        Self(OnceLock::new())
    }
}

impl<T> WholeCell<T> {
    /// True once the whole file was read (or found unreadable).
    pub fn is_read(&self) -> bool {
        self.0.get().is_some()
    }
}

impl<T: serde::de::DeserializeOwned> WholeCell<T> {
    /// Reads `path` whole (once per version; through the engine's bounded, no-follow read).
    pub fn get(&self, path: &Path) -> Result<Arc<Whole<T>>, String> {
        self.0
            .get_or_init(|| {
                let v = crate::engine::read_json_once(path)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{} is gone", path.display()))?;
                if !v.is_object() {
                    return Err(format!(
                        "expected a JSON object, found {}",
                        crate::engine::json_kind(&v)
                    ));
                }
                let typed = crate::engine::model_from_value::<T>(v.clone())?;
                Ok(Arc::new(Whole { typed, raw: v }))
            })
            .clone()
    }
}
/// The newest entries of the operator journal, read through the engine's journal module.
#[derive(Debug, Clone, Default)]
pub struct JournalView {
    /// Oldest first, at most [`JOURNAL_KEPT`].
    pub entries: Vec<Arc<Value>>,
    /// Lines of the files read that are not entries.
    pub bad_lines: usize,
    /// Why the journal could not be read.
    pub error: Option<String>,
}

/// What a row of the bridge view is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BridgeKind {
    /// A shared track's cursor (`conductor/bridge/tracks/T.json`) with the bridge's counts.
    Track,
    /// An outbox record waiting for the bridge (`conductor/outbox/`).
    Pending,
    /// A message the bridge refused (`conductor/bridge/dead/`).
    Dead,
    /// An outbox record the server stored (`conductor/outbox/sent/`).
    Sent,
}

impl BridgeKind {
    /// The word shown in the KIND column.
    pub fn word(self) -> &'static str {
        match self {
            BridgeKind::Track => "track",
            BridgeKind::Pending => "pending",
            BridgeKind::Dead => "dead",
            BridgeKind::Sent => "sent",
        }
    }
}

/// One row of the bridge view.
#[derive(Debug, Clone)]
pub struct BridgeRow {
    pub kind: BridgeKind,
    /// The track name, outbox id or dead letter's file name.
    pub id: String,
    /// The subject (or a track's stream).
    pub subject: String,
    /// A one-line summary (counts, workflow and step, reason).
    pub what: String,
    /// The record's time (cursor updated, created, sent, dead-lettered), as written.
    pub at: String,
    /// The whole record, for the detail view.
    pub raw: Arc<Value>,
}

/// The bridge's files as the console shows them (docs/NATS.md).
#[derive(Debug, Clone, Default)]
pub struct BridgeView {
    /// Tracks, then pending records (oldest first), dead letters and sent records (newest first).
    pub rows: Vec<BridgeRow>,
    /// Files of each kind on disk (the rows keep at most [`BRIDGE_KEPT`] sent records).
    pub pending: usize,
    pub sent: usize,
    pub dead: usize,
    /// Files that could not be read, with why.
    pub unreadable: Vec<String>,
}

/// The most sent records the bridge view keeps (the newest by file time).
pub(crate) const BRIDGE_KEPT: usize = 500;

/// How many seconds of message rate a track keeps.
pub(crate) const RATE_SECONDS: usize = 120;

impl TrackView {
    /// Messages per second over the `secs` seconds up to `now`, oldest first.
    pub fn per_second(&self, now: DateTime<Utc>, secs: usize) -> Vec<u32> {
        let end = now.timestamp();
        let start = end - secs as i64 + 1;
        let mut out = vec![0u32; secs];
        for (s, n) in self.rate.iter().rev() {
            if *s < start {
                break;
            }
            if let Ok(i) = usize::try_from(s - start)
                && let Some(slot) = out.get_mut(i)
            {
                *slot = *n;
            }
        }
        out
    }
}

/// The most journal entries the console keeps.
pub(crate) const JOURNAL_KEPT: usize = 2000;

/// A string shared by every row that holds it (god names, step ids, definition ids): the model
/// keeps one copy of each (see `Interner` in the live model).
pub type Sym = Arc<str>;

/// What the tables, counts, filters, sorts and overdue checks read of a workflow's state file:
/// everything else (step history, context bag, every ack but the latest, unknown fields) is read
/// from the file when a detail asks for it ([`WorkflowView::whole`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRow {
    pub status: WorkflowStatus,
    pub definition_id: Option<Sym>,
    pub current_step: Option<Sym>,
    pub dispatched_to: Option<Sym>,
    pub created: Option<Stamp>,
    /// When the state was last written: for a finished workflow, when it finished.
    pub updated: Option<Stamp>,
    /// The latest entry of `acks`.
    pub last_ack: Option<LastAck>,
    /// Waiting at an `await_ack` step for a peer's reply (the state names the request).
    pub awaits_reply: bool,
    /// The usage the state records and the budgets raised for it (docs/BUDGETS.md), when any.
    pub cost: Option<Box<super::ledger::RowCost>>,
}

/// The latest ack of a workflow, as its row keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastAck {
    pub status: AckStatus,
    pub acked_at: Option<Stamp>,
}

impl WorkflowRow {
    /// The row of a state (strings not interned; the live model interns them).
    pub fn of(s: &WorkflowState) -> Self {
        Self::with(s, &mut |x: &str| Sym::from(x))
    }

    /// The row of a state, with `intern` giving the shared copy of a god, step or definition name.
    pub fn with(s: &WorkflowState, intern: &mut dyn FnMut(&str) -> Sym) -> Self {
        let mut sym = |o: &Option<String>| o.as_deref().map(&mut *intern);
        Self {
            status: s.status.clone(),
            definition_id: sym(&s.definition_id),
            current_step: sym(&s.current_step),
            dispatched_to: sym(&s.dispatched_to),
            created: Stamp::of_opt(s.created.as_deref()),
            updated: Stamp::of_opt(s.updated.as_deref()),
            last_ack: s.acks.last().map(|a| LastAck {
                status: a.status.clone(),
                acked_at: Stamp::of_opt(a.acked_at.as_deref()),
            }),
            awaits_reply: s.awaiting_reply().is_some(),
            cost: super::ledger::RowCost::of(&s.extra),
        }
    }

    /// True once the workflow can no longer move (completed, aborted, failed).
    pub fn is_finished(&self) -> bool {
        self.status.is_finished()
    }

    /// A state holding what this row knows (for a detail when the file can no longer be read).
    pub fn to_state(&self, id: &str) -> WorkflowState {
        let s = |o: &Option<Sym>| o.as_deref().map(str::to_owned);
        let t = |o: &Option<Stamp>| o.as_ref().map(|x| x.text().into_owned());
        WorkflowState {
            workflow_id: id.to_owned(),
            definition_id: s(&self.definition_id),
            status: self.status.clone(),
            current_step: s(&self.current_step),
            dispatched_to: s(&self.dispatched_to),
            created: t(&self.created),
            updated: t(&self.updated),
            acks: self
                .last_ack
                .iter()
                .map(|a| crate::engine::AckRecord {
                    status: a.status.clone(),
                    acked_at: t(&a.acked_at),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }
}

/// A record's compact row and the cell that reads its file whole on demand, in one allocation.
#[derive(Debug, Default)]
pub struct Record<R, W> {
    pub row: R,
    pub whole: WholeCell<W>,
}

impl<R, W> Record<R, W> {
    /// A row whose file is not read whole yet.
    pub fn new(row: R) -> Self {
        Self {
            row,
            whole: WholeCell::default(),
        }
    }
}

impl<R, W> std::ops::Deref for Record<R, W> {
    type Target = R;
    fn deref(&self) -> &R {
        &self.row
    }
}

/// A workflow's state file, its abort manifest and its dispatches still waiting.
///
/// The model keeps a compact row per workflow ([`WorkflowRow`], reached through `state`): what the
/// tables, counts and overdue checks use. Read the whole file with [`WorkflowView::whole`].
#[derive(Debug, Clone)]
pub struct WorkflowView {
    pub id: Sym,
    /// The compact row (see above) and the whole file once read.
    pub state: Arc<Record<WorkflowRow, WorkflowState>>,
    pub manifest: Option<Arc<AbortManifest>>,
    /// Set when the file on disk is not the version shown (mid-write, corrupt).
    pub warning: Option<Box<str>>,
    /// Dispatches of this workflow in an inbox or `_quarantine`: (god or `_quarantine`, dispatch).
    pub waiting: Waiting,
    /// `conductor/state/`, shared by every row.
    pub dir: Arc<Path>,
}

impl WorkflowView {
    /// The state file: `conductor/state/{id}.json`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.id))
    }

    /// The whole state file (step history, context bag, raw document), read now if not read yet.
    pub fn whole(&self) -> Result<Arc<Whole<WorkflowState>>, String> {
        self.state.whole.get(&self.path())
    }
}

/// A dispatch's compact row and the cell that reads its file whole on demand, in one allocation.
pub type DispatchRecord = Record<DispatchRow, Dispatch>;

/// A waiting dispatch of a workflow: the god (or `_quarantine`) and the dispatch.
pub(crate) type WaitingDispatch = (Sym, Arc<DispatchRecord>);

/// The dispatches of one workflow still waiting, oldest first per inbox: a range of one list the
/// snapshot's rows share (a publish makes one allocation for every workflow's, not one per row).
/// Reads as a slice.
#[derive(Debug, Clone, Default)]
pub struct Waiting {
    all: Option<Arc<[WaitingDispatch]>>,
    start: u32,
    end: u32,
}

impl Waiting {
    /// The range `start..end` of `all` (an empty one when it is not inside `all`).
    pub fn new(all: &Arc<[WaitingDispatch]>, start: usize, end: usize) -> Self {
        match (u32::try_from(start), u32::try_from(end)) {
            (Ok(s), Ok(e)) if s < e && end <= all.len() => Self {
                all: Some(all.clone()),
                start: s,
                end: e,
            },
            _ => Self::default(),
        }
    }

    /// A list of its own (tests, hand-built snapshots).
    pub fn of(list: Vec<WaitingDispatch>) -> Self {
        let all: Arc<[WaitingDispatch]> = list.into();
        Self::new(&all, 0, all.len())
    }
}

impl std::ops::Deref for Waiting {
    type Target = [WaitingDispatch];
    fn deref(&self) -> &[WaitingDispatch] {
        self.all
            .as_deref()
            .and_then(|a| a.get(self.start as usize..self.end as usize))
            .unwrap_or(&[])
    }
}

impl<'a> IntoIterator for &'a Waiting {
    type Item = &'a WaitingDispatch;
    type IntoIter = std::slice::Iter<'a, WaitingDispatch>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// One dispatch file.
///
/// `dispatch` is compact ([`DispatchRow`]: ids, names, times, ack status, delivery count); read the
/// whole file with [`DispatchView::whole`].
#[derive(Debug, Clone)]
pub struct DispatchView {
    /// The directory of the file, shared by every dispatch of the inbox.
    pub dir: Arc<Path>,
    /// The file name without `.json` (the same allocation as the handoff id when they agree).
    pub name: Sym,
    /// The compact row (see above) and the whole file once read.
    pub dispatch: Arc<DispatchRecord>,
    pub warning: Option<Box<str>>,
}

impl DispatchView {
    /// The dispatch file: `{dir}/{name}.json`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.name))
    }

    /// The whole dispatch file (full context, raw document), read now if not read yet. The read is
    /// checked again as the listing was: a file since replaced by a symbolic link is refused (the
    /// inbox never follows one), and the engine's bounded read refuses anything but a regular file
    /// and anything over the size limit.
    pub fn whole(&self) -> Result<Arc<Whole<Dispatch>>, String> {
        let path = self.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "{} is now a symbolic link; not followed",
                path.display()
            ));
        }
        self.dispatch.whole.get(&path)
    }
}

/// A god's inbox (or the quarantine): its dispatches oldest first and the files it could not read.
#[derive(Debug, Clone, Default)]
pub struct InboxView {
    pub god: String,
    /// Shared between snapshots while the inbox does not change.
    pub dispatches: Arc<Vec<DispatchView>>,
    /// The earliest `dispatched_at` among the dispatches (RFC 3339, or as written when it is not a
    /// time), worked out by the model.
    pub oldest_at: Option<String>,
    /// How many of the dispatches are unacknowledged, worked out by the model.
    pub unacked: usize,
    pub errors: Vec<FileWarning>,
}

/// One track's message bus.
#[derive(Debug, Clone, Default)]
pub struct TrackView {
    pub name: String,
    /// The newest messages (bounded), oldest first.
    pub messages: Arc<Vec<Arc<Envelope>>>,
    /// Messages read since the console opened the queue (including those dropped from the buffer).
    pub messages_read: u64,
    /// Lines skipped because they were blank, not JSON or not an object.
    pub lines_skipped: u64,
    /// Bytes at the head of a large queue that were not read (the console starts from the tail).
    pub head_bytes_skipped: u64,
    /// Rotation, truncation or a missing queue.
    pub queue_note: Option<String>,
    pub locks: Arc<Vec<LockEntry>>,
    pub workers: Arc<Vec<WorkerEntry>>,
    /// Wait-for cycles among the workers, each as a readable chain.
    pub deadlocks: Arc<Vec<String>>,
    /// For each cycle in `deadlocks`, the paths of the locks in it (as `locks.json` writes them).
    pub deadlock_locks: Arc<Vec<Vec<String>>>,
    /// Messages per second (by their timestamps): (unix second, count), oldest first, over the
    /// newest [`RATE_SECONDS`] seconds seen.
    pub rate: Arc<Vec<(i64, u32)>>,
    pub board: Option<Arc<BoardView>>,
    pub warnings: Vec<FileWarning>,
}

/// The current board session of a track.
#[derive(Debug, Clone, Default)]
pub struct BoardView {
    pub session: Arc<BoardSession>,
    pub session_path: PathBuf,
    pub assessments: Arc<Vec<(String, Assessment)>>,
    pub votes: Arc<Vec<(String, Vote)>>,
    pub discussion: Arc<Vec<DiscussionLine>>,
    /// The verdict the resolve rule would give with the votes cast now.
    pub predicted: Option<String>,
    /// The votes behind the session's resolution once resolved (either shape of `vote_summary`).
    pub resolved: Option<crate::engine::board::ResolvedVotes>,
}

impl Snapshot {
    /// Counts for the header: (workflows active, dispatches waiting, held, stale workers, expired locks, deadlocks).
    pub fn counts(&self, now: DateTime<Utc>) -> Counts {
        let mut c = Counts {
            workflows: self.workflows.len(),
            ..Counts::default()
        };
        if let Some(t) = &self.tallies {
            c.active = t.active;
            c.stalled = t.stalled;
            c.orphaned = t.orphaned;
            c.overdue = t.overdue_from.partition_point(|at| *at < now);
        } else {
            for w in self.workflows.iter() {
                if Self::is_active(w) {
                    c.active += 1;
                }
                if w.state.status == WorkflowStatus::Stalled {
                    c.stalled += 1;
                }
                if self.overdue(w, now).is_some() {
                    c.overdue += 1;
                }
                if self.loading.is_none() && Self::orphaned(w) {
                    c.orphaned += 1;
                }
            }
        }
        c.waiting = self.inboxes.iter().map(|i| i.dispatches.len()).sum();
        c.paused_held = self
            .quarantine
            .dispatches
            .iter()
            .filter(|d| crate::engine::held_by_pause(d.dispatch.held_because.as_deref()))
            .count();
        c.held = self.quarantine.dispatches.len() - c.paused_held;
        c.paused = self.paused.pauses.len();
        for t in self.tracks.iter() {
            c.stale += t
                .workers
                .iter()
                .filter(|w| w.is_stale(now, self.stale_threshold()))
                .count();
            c.expired += t.locks.iter().filter(|l| l.is_expired(now)).count();
            c.deadlocks += t.deadlocks.len();
        }
        c.warnings = self.warnings.len();
        c
    }

    /// The definition a workflow follows, if it is loaded.
    pub fn definition(&self, id: Option<&str>) -> Option<&WorkflowDef> {
        let id = id?;
        self.definitions.iter().find(|d| d.id == id)
    }

    /// True when `w` waits for an ack but none of its dispatches is in an inbox or `_quarantine`: it
    /// was deleted outright, and nobody can ack it (`pantheon redispatch WF` writes it again).
    /// The counts and the attention list ask only once the first load is over: until then its
    /// dispatch may just not be read yet.
    /// A workflow waiting at an `await_ack` step for a peer's reply has no dispatch and is never
    /// orphaned (the engine's rule, shared with `validate`).
    pub fn orphaned(w: &WorkflowView) -> bool {
        crate::engine::waits_on_a_god(&w.state.status, w.state.awaits_reply) && w.waiting.is_empty()
    }

    /// True when `w` is still moving: neither finished nor `stalled` (a stalled workflow waits for
    /// an operator to requeue its dead letter or rerun it; it is counted on its own).
    pub fn is_active(w: &WorkflowView) -> bool {
        !w.state.status.is_finished() && w.state.status != WorkflowStatus::Stalled
    }

    /// The overdue threshold in effect for this snapshot.
    pub fn unacked_overdue_after(&self) -> Duration {
        self.overdue_after.unwrap_or(UNACKED_OVERDUE_AFTER)
    }

    /// The held-too-long threshold in effect for this snapshot.
    pub fn held_overdue_after(&self) -> Duration {
        self.held_after.unwrap_or(HELD_OVERDUE_AFTER)
    }

    /// The same snapshot with these thresholds (`None`: the defaults), its tallies worked out again
    /// when they change; shared as it is when they do not.
    pub fn with_thresholds(
        self: &Arc<Self>,
        overdue_after: Option<Duration>,
        held_after: Option<Duration>,
    ) -> Arc<Self> {
        if self.unacked_overdue_after() == overdue_after.unwrap_or(UNACKED_OVERDUE_AFTER)
            && self.held_overdue_after() == held_after.unwrap_or(HELD_OVERDUE_AFTER)
        {
            return self.clone();
        }
        let mut s = (**self).clone();
        s.overdue_after = overdue_after;
        s.held_after = held_after;
        if s.tallies.is_some() {
            s.tallies = Some(Arc::new(s.tally()));
        }
        Arc::new(s)
    }

    /// The staleness threshold of the root's settings.
    pub fn stale_threshold(&self) -> std::time::Duration {
        self.stale_after
            .and_then(|d| d.to_std().ok())
            .unwrap_or(crate::engine::DEFAULT_STALE_AFTER)
    }

    /// The engine's overdue rule with this console's limits (one rule for every pane, the header,
    /// the attention list and `validate`: see `conductor::overdue`).
    pub fn overdue_rule(&self) -> OverdueRule {
        OverdueRule {
            unacked_after: self.unacked_overdue_after(),
            held_after: self.held_overdue_after(),
        }
    }

    /// Why a workflow is overdue, if it is: a dispatch unacknowledged past the unacked limit, a
    /// held one past the held limit, or a step accepted longer ago than its definition's `timeout`.
    pub fn overdue(&self, w: &WorkflowView, now: DateTime<Utc>) -> Option<String> {
        self.overdue_cause(w, now).map(|c| c.to_string())
    }

    /// [`Snapshot::overdue`] as a cause the attention list can tell apart (a held dispatch's cause
    /// belongs to its `held` item, not to a second one).
    pub fn overdue_cause(&self, w: &WorkflowView, now: DateTime<Utc>) -> Option<OverdueCause> {
        if w.state.status.is_finished() {
            return None;
        }
        let rule = self.overdue_rule();
        for (god, d) in &w.waiting {
            let held = &**god == crate::engine::layout::QUARANTINE_DIR;
            if held && crate::engine::held_by_pause(d.held_because.as_deref()) {
                // Waiting on the operator's own pause: never overdue.
                continue;
            }
            let at = d.dispatched_at.as_ref().and_then(Stamp::at);
            if let Some(o) = rule.check(held, &d.ack_status, at, now) {
                return Some(OverdueCause::Dispatch(o));
            }
        }
        let step = w.state.current_step.as_deref()?;
        let timeout = self
            .definition(w.state.definition_id.as_deref())?
            .step(step)?
            .timeout?;
        // The step's clock starts at the latest ack when that ack accepted it.
        let last = w.state.last_ack.as_ref()?;
        if last.status != AckStatus::Accepted {
            return None;
        }
        let accepted = last.acked_at.as_ref().and_then(Stamp::at)?;
        let limit = Duration::from_std(timeout).ok()?;
        (now - accepted > limit).then(|| {
            OverdueCause::Step(format!(
                "step {step} accepted {} ago, timeout {}",
                short_duration(now - accepted),
                short_duration(limit)
            ))
        })
    }

    /// Works out [`Tallies`] for the workflows of this snapshot.
    pub fn tally(&self) -> Tallies {
        let mut t = Tallies::default();
        for w in self.workflows.iter() {
            if Self::is_active(w) {
                t.active += 1;
            }
            if w.state.status == WorkflowStatus::Stalled {
                t.stalled += 1;
            }
            if self.loading.is_none() && Self::orphaned(w) {
                t.orphaned += 1;
            }
            if let Some(at) = self.overdue_from(w) {
                t.overdue_from.push(at);
            }
            if w.state.cost.is_some() {
                t.costed += 1;
            }
        }
        t.overdue_from.sort();
        t
    }

    /// The instant after which [`Snapshot::overdue`] says `w` is overdue (the earliest of its
    /// reasons), if any.
    pub fn overdue_from(&self, w: &WorkflowView) -> Option<DateTime<Utc>> {
        if w.state.status.is_finished() {
            return None;
        }
        let mut from: Option<DateTime<Utc>> = None;
        let mut earliest = |t: DateTime<Utc>| from = Some(from.map_or(t, |f| f.min(t)));
        let rule = self.overdue_rule();
        for (god, d) in &w.waiting {
            let held = &**god == crate::engine::layout::QUARANTINE_DIR;
            if let Some(at) = d.dispatched_at.as_ref().and_then(Stamp::at)
                && let Some(t) = rule.overdue_from(held, &d.ack_status, at)
            {
                earliest(t);
            }
        }
        let timeout = w.state.current_step.as_deref().and_then(|step| {
            self.definition(w.state.definition_id.as_deref())?
                .step(step)?
                .timeout
        });
        if let Some(timeout) = timeout
            && let Some(last) = &w.state.last_ack
            && last.status == AckStatus::Accepted
            && let Some(accepted) = last.acked_at.as_ref().and_then(Stamp::at)
            && let Ok(limit) = Duration::from_std(timeout)
            && let Some(t) = accepted.checked_add_signed(limit)
        {
            earliest(t);
        }
        from
    }

    /// How many open dispatches have an ack deadline while no supervisor is alive at `now` to
    /// enforce it (`None` when one is alive or nothing has a deadline), as `validate` warns.
    pub fn unsupervised_deadlines(&self, now: DateTime<Utc>) -> Option<usize> {
        (self.deadlines > 0 && !self.supervisors.iter().any(|b| b.alive(now)))
            .then_some(self.deadlines)
    }

    /// The track with this name.
    pub fn track(&self, name: &str) -> Option<&Arc<TrackView>> {
        self.tracks.iter().find(|t| t.name == name)
    }
}

/// Why a workflow is overdue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverdueCause {
    /// One of its waiting dispatches (unacked, or held for approval) passed its limit.
    Dispatch(Overdue),
    /// Its accepted step ran past the definition's `timeout`.
    Step(String),
}

impl OverdueCause {
    /// True when the cause is a dispatch held for approval.
    pub fn is_held(&self) -> bool {
        matches!(self, OverdueCause::Dispatch(o) if o.waits == Waits::Approval)
    }
}

impl std::fmt::Display for OverdueCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OverdueCause::Dispatch(o) => o.fmt(f),
            OverdueCause::Step(s) => f.write_str(s),
        }
    }
}

/// Header counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub workflows: usize,
    pub active: usize,
    /// Workflows `stalled`: a dispatch was dead-lettered (requeue it in pane 9, or rerun).
    pub stalled: usize,
    pub overdue: usize,
    pub waiting: usize,
    pub held: usize,
    pub stale: usize,
    pub expired: usize,
    pub deadlocks: usize,
    pub warnings: usize,
    /// Workflows waiting for an ack whose dispatch is in no inbox (`pantheon redispatch` writes it again).
    pub orphaned: usize,
    /// Pauses in force (`conductor/paused.json`).
    pub paused: usize,
    /// Dispatches held by a pause (counted here, not in `held`).
    pub paused_held: usize,
}

/// `90s` -> `1m`, `2h`, `3d`.
pub(crate) fn short_duration(d: Duration) -> String {
    let s = d.num_seconds().abs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{}h", s / 86_400, (s % 86_400) / 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_supervisor_is_alive_within_the_engines_limit_and_deadlines_need_one() {
        let now = at("2026-06-14T10:00:30Z");
        let beat = |t: Option<&str>| SupervisorBeat {
            id: "s".into(),
            last_beat: t.map(at),
        };
        assert!(beat(Some("2026-06-14T10:00:00Z")).alive(now), "30 s: alive");
        assert!(!beat(Some("2026-06-14T09:59:59Z")).alive(now), "31 s: not");
        assert!(!beat(None).alive(now), "unreadable: not");
        let mut s = Snapshot::default();
        assert_eq!(s.unsupervised_deadlines(now), None, "no deadline");
        s.deadlines = 2;
        assert_eq!(s.unsupervised_deadlines(now), Some(2));
        s.supervisors = Arc::new(vec![beat(Some("2026-06-14T09:00:00Z"))]);
        assert_eq!(s.unsupervised_deadlines(now), Some(2), "an old beat");
        s.supervisors = Arc::new(vec![
            beat(Some("2026-06-14T09:00:00Z")),
            beat(Some("2026-06-14T10:00:25Z")),
        ]);
        assert_eq!(s.unsupervised_deadlines(now), None, "one alive is enough");
    }

    #[test]
    fn thresholds_are_the_snapshots_own_and_shared_when_unchanged() {
        let s = Arc::new(Snapshot {
            tallies: Some(Arc::new(Tallies::default())),
            ..Snapshot::default()
        });
        assert_eq!(s.unacked_overdue_after(), UNACKED_OVERDUE_AFTER);
        assert_eq!(s.held_overdue_after(), HELD_OVERDUE_AFTER);
        assert!(Arc::ptr_eq(&s, &s.with_thresholds(None, None)));
        assert!(Arc::ptr_eq(
            &s,
            &s.with_thresholds(Some(UNACKED_OVERDUE_AFTER), None)
        ));
        let t = s.with_thresholds(Some(Duration::seconds(60)), Some(Duration::seconds(90)));
        assert!(!Arc::ptr_eq(&s, &t));
        assert_eq!(t.unacked_overdue_after(), Duration::seconds(60));
        assert_eq!(t.held_overdue_after(), Duration::seconds(90));
        assert_eq!(
            s.unacked_overdue_after(),
            UNACKED_OVERDUE_AFTER,
            "s unchanged"
        );
        assert_eq!(threshold_secs(0), Duration::seconds(1));
        assert_eq!(
            threshold_secs(u64::MAX),
            Duration::seconds(100 * 365 * 86_400)
        );
    }
}
