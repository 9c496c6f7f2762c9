//! The immutable picture of a root the console draws: engine types behind `Arc`s, shared between
//! snapshots when a part did not change.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::engine::bus::model::{
    Assessment, BoardSession, DiscussionLine, Envelope, LockEntry, Vote, WorkerEntry,
};
use crate::engine::conductor::definition::{LoadError, WorkflowDef};
use crate::engine::conductor::model::{AbortManifest, AckStatus, Dispatch, WorkflowState};
use crate::engine::store::time::parse_ts;

/// A dispatch that has waited unacknowledged this long is overdue.
pub const UNACKED_OVERDUE_AFTER: Duration = Duration::minutes(5);

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
}

/// A workflow's state file, its abort manifest and its dispatches still waiting.
#[derive(Debug, Clone)]
pub struct WorkflowView {
    pub id: String,
    pub path: PathBuf,
    pub state: Arc<WorkflowState>,
    pub raw: Arc<Value>,
    pub manifest: Option<Arc<AbortManifest>>,
    /// Set when the file on disk is not the version shown (mid-write, corrupt).
    pub warning: Option<String>,
    /// Dispatches of this workflow in an inbox or `_quarantine`: (god or `_quarantine`, dispatch).
    pub waiting: Vec<(String, Arc<Dispatch>)>,
}

/// One dispatch file.
#[derive(Debug, Clone)]
pub struct DispatchView {
    pub path: PathBuf,
    /// The file name without `.json`.
    pub name: String,
    pub dispatch: Arc<Dispatch>,
    pub raw: Arc<Value>,
    pub warning: Option<String>,
}

/// A god's inbox (or the quarantine): its dispatches oldest first and the files it could not read.
#[derive(Debug, Clone, Default)]
pub struct InboxView {
    pub god: String,
    pub dispatches: Vec<DispatchView>,
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
    pub resolved: Option<crate::engine::bus::board::ResolvedVotes>,
}

impl Snapshot {
    /// Counts for the header: (workflows active, dispatches waiting, held, stale workers, expired locks, deadlocks).
    pub fn counts(&self, now: DateTime<Utc>) -> Counts {
        let mut c = Counts {
            workflows: self.workflows.len(),
            ..Counts::default()
        };
        for w in self.workflows.iter() {
            if !w.state.status.is_finished() {
                c.active += 1;
            }
            if self.overdue(w, now).is_some() {
                c.overdue += 1;
            }
            if Self::orphaned(w) {
                c.orphaned += 1;
            }
        }
        c.waiting = self.inboxes.iter().map(|i| i.dispatches.len()).sum();
        c.held = self.quarantine.dispatches.len();
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
    pub fn orphaned(w: &WorkflowView) -> bool {
        w.state.status == crate::engine::conductor::WorkflowStatus::WaitingForAck
            && w.waiting.is_empty()
    }

    /// The staleness threshold of the root's settings.
    pub fn stale_threshold(&self) -> std::time::Duration {
        self.stale_after
            .and_then(|d| d.to_std().ok())
            .unwrap_or(crate::engine::store::settings::DEFAULT_STALE_AFTER)
    }

    /// Why a workflow is overdue, if it is: a dispatch unacknowledged for over 5 minutes, or a step
    /// accepted longer ago than its definition's `timeout`.
    pub fn overdue(&self, w: &WorkflowView, now: DateTime<Utc>) -> Option<String> {
        if w.state.status.is_finished() {
            return None;
        }
        for (_, d) in &w.waiting {
            if d.ack_status == AckStatus::Unacked
                && let Some(at) = d.dispatched_at.as_deref().and_then(parse_ts)
                && now - at > UNACKED_OVERDUE_AFTER
            {
                return Some(format!("unacked for {}", short_duration(now - at)));
            }
        }
        let step = w.state.current_step.as_deref()?;
        let timeout = self
            .definition(w.state.definition_id.as_deref())?
            .step(step)?
            .timeout?;
        // The step's clock starts at the latest ack when that ack accepted it.
        let last = w.state.acks.last()?;
        if last.status != AckStatus::Accepted {
            return None;
        }
        let accepted = last.acked_at.as_deref().and_then(parse_ts)?;
        let limit = Duration::from_std(timeout).ok()?;
        (now - accepted > limit).then(|| {
            format!(
                "step {step} accepted {} ago, timeout {}",
                short_duration(now - accepted),
                short_duration(limit)
            )
        })
    }

    /// The track with this name.
    pub fn track(&self, name: &str) -> Option<&Arc<TrackView>> {
        self.tracks.iter().find(|t| t.name == name)
    }
}

/// Header counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub workflows: usize,
    pub active: usize,
    pub overdue: usize,
    pub waiting: usize,
    pub held: usize,
    pub stale: usize,
    pub expired: usize,
    pub deadlocks: usize,
    pub warnings: usize,
    /// Workflows waiting for an ack whose dispatch is in no inbox (`pantheon redispatch` writes it again).
    pub orphaned: usize,
}

/// `90s` -> `1m`, `2h`, `3d`.
pub fn short_duration(d: Duration) -> String {
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
