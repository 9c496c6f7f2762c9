//! The result shapes of the Conductor's operations (docs/PROTOCOL.md §2), printed by the CLI and returned by MCP.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::definition::LoadError;
use super::files::FileError;
use super::model::{AckStatus, Dispatch, WorkflowStatus};
use crate::store::{HandoffId, WorkflowId};
use crate::words::words;

words!(
    /// What a submit did with a handoff (docs/PROTOCOL.md §2.1).
    pub SubmitStatus {
        /// The next step was dispatched to its god's inbox.
        Dispatched = "dispatched",
        /// The next step's dispatch is held in `_quarantine` for an operator.
        AwaitingApproval = "awaiting_approval",
        /// The handoff completed the workflow.
        Completed = "completed",
        /// Recorded; nothing was dispatched (no route).
        Recorded = "recorded",
        /// The next step publishes to a peer pantheon (the bridge sends it).
        Publishing = "publishing",
        /// The next step waits for a peer pantheon's reply.
        AwaitingReply = "awaiting_reply",
        /// The handoff was recorded before; the first result is returned.
        Duplicate = "duplicate",
    }
);

impl SubmitStatus {}

words!(
    /// What became of a peer's reply to one of our requests (`receive_reply`).
    pub ReplyStatus {
        /// The waiting `await_ack` step took it: the workflow moved on.
        Applied = "applied",
        /// The workflow has not reached the waiting step yet: kept for when it does.
        Kept = "kept",
        /// Seen before (by its reply id): nothing changed.
        Duplicate = "duplicate",
    }
);

words!(
    /// What an operator's act on a waiting outbox record did (`pantheon bridge retry|discard`).
    pub OutboxActStatus {
        /// A request to try it again now was left for the bridge.
        RetryRequested = "retry_requested",
        /// It was dead-lettered and will never be published.
        Discarded = "discarded",
    }
);

words!(
    /// Which deadline an ack's answer names (docs/PROTOCOL.md §2.10).
    pub DeadlineKind {
        /// The wait for the next ack (after `pending`).
        Ack = "ack",
        /// The end of an accepted step's `timeout`.
        StepTimeout = "step_timeout",
    }
);

words!(
    /// An operator's decision on a held dispatch.
    pub ApprovalStatus {
        /// Released into the god's inbox.
        Approved = "approved",
        /// Archived; the workflow failed.
        Rejected = "rejected",
    }
);

words!(
    /// What `abort_workflow` did.
    pub AbortStatus {
        /// The workflow was aborted now.
        Aborted = "aborted",
        /// It was aborted before; the existing manifest is returned.
        AlreadyAborted = "already_aborted",
    }
);

words!(
    /// What `cleanup` did.
    pub CleanupStatus {
        /// The temporary artifacts were deleted.
        Cleaned = "cleaned",
        /// Nothing was deleted; the answer lists what would be.
        DryRun = "dry_run",
    }
);

words!(
    /// What `redispatch` did.
    pub RedispatchStatus {
        /// The step's dispatch was written again.
        Redispatched = "redispatched",
    }
);

words!(
    /// What `init` did.
    pub InitStatus {
        /// The root's directories and files are in place.
        Initialized = "initialized",
    }
);

/// `submit_handoff`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubmitResult {
    /// What the submit did.
    pub status: SubmitStatus,
    /// The workflow the handoff belongs to.
    pub workflow_id: WorkflowId,
    /// The handoff recorded.
    pub handoff_id: String,
    /// The god the next step was dispatched to, if any.
    pub target_god: Option<String>,
    /// The step dispatched next, if any.
    pub target_step: Option<String>,
    /// The workflow's status after the handoff.
    pub state_status: WorkflowStatus,
    /// Where the handoff was written, relative to the root.
    pub handoff_path: String,
    /// Where the dispatch was written, if one was.
    pub dispatch_path: Option<String>,
    /// The rule that routed it, when a rule did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_rule: Option<String>,
    /// Problems that did not stop the handoff (unknown gates, a proposal overridden…).
    pub warnings: Vec<String>,
}

/// `ack_handoff`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AckResult {
    /// True when the ack was recorded (also for a duplicate).
    pub acknowledged: bool,
    /// The dispatch acked.
    pub handoff_id: String,
    /// The id of the ack record (the first one's, for a duplicate).
    pub ack_id: String,
    /// The workflow the dispatch belongs to.
    pub workflow_id: WorkflowId,
    /// The ack's status (`accepted`, `pending`, `rejected`, `completed`).
    pub status: AckStatus,
    /// The workflow's status after the ack.
    pub state_status: WorkflowStatus,
    /// The god the dispatch was addressed to.
    pub god: String,
    /// Who acked: the god itself or `operator`.
    pub by: String,
    /// True when this ack repeats one already recorded (nothing new happened).
    pub duplicate: bool,
    /// `rejected`: the fallback god the step went to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerouted_to: Option<String>,
    /// `completed`: the handoff recorded on the god's behalf and where it went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<SubmitResult>,
    /// When the next deadline now falls (docs/PROTOCOL.md §2.10): after `pending`, the ack deadline
    /// (the ETA, or the wait restarted); after `accepted`, the end of the step's `timeout`. `None`: no
    /// deadline applies.
    pub deadline: Option<String>,
    /// Which deadline `deadline` is.
    pub deadline_kind: Option<DeadlineKind>,
    /// Problems that did not stop the ack.
    pub warnings: Vec<String>,
}

/// `check_inbox`'s result: one page of dispatches, oldest first; unreadable files in `errors`.
/// `D` is [`Dispatch`] (the whole dispatch) or, with `compact`, a
/// [`CompactDispatch`](super::paging::CompactDispatch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxResult<D = Dispatch> {
    /// The inbox read.
    pub god: String,
    /// False when the god has no inbox directory (a misspelt or unknown god): nothing can be
    /// dispatched to it until `init` or a first dispatch creates the inbox.
    pub known_god: bool,
    /// True when each dispatch is a [`CompactDispatch`](super::paging::CompactDispatch): the tag a
    /// reader (and an output schema) tells the two shapes of this answer apart by.
    pub compact: bool,
    /// This page's dispatches, oldest first.
    pub dispatches: Vec<D>,
    /// Every dispatch in the inbox, on this page or another.
    pub count: usize,
    /// The page size asked for (`None`: everything).
    pub limit: Option<usize>,
    /// Pass it as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Files in the inbox that could not be read, and why.
    pub errors: Vec<FileError>,
}

/// `get_dispatch`'s result: one dispatch whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchResult {
    /// The inbox the dispatch lies in.
    pub god: String,
    /// The dispatch as read.
    pub dispatch: Dispatch,
    /// Its path, relative to the root.
    pub path: String,
}

/// One line of `list_pending`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingEntry {
    /// The dispatch's own id, when set.
    pub dispatch_id: Option<String>,
    /// Its handoff id (and file name).
    pub handoff_id: String,
    /// The workflow it belongs to.
    pub workflow_id: String,
    /// The god whose handoff led here.
    pub from_god: String,
    /// The god that must act.
    pub to_god: String,
    /// The step to do.
    pub step: String,
    /// When it was dispatched (RFC 3339).
    pub dispatched_at: Option<String>,
    /// Its ack status as written.
    pub ack_status: AckStatus,
    /// Why it is held, for a dispatch in `_quarantine`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_because: Option<String>,
}

/// `list_pending`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingResult {
    /// A key per inbox; the entries are this page's, oldest first within each god.
    pub pending: BTreeMap<String, Vec<PendingEntry>>,
    /// Every dispatch not yet taken, on this page or another.
    pub count: usize,
    /// The page size asked for (`None`: everything).
    pub limit: Option<usize>,
    /// Pass it as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Not paged: dispatches held for an operator's approval.
    pub awaiting_approval: Vec<PendingEntry>,
    /// Files that could not be read, and why.
    pub errors: Vec<FileError>,
}

/// One rule in `list_rules`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleDetail {
    /// The rule's id.
    pub id: String,
    /// The file it came from.
    pub file: String,
    /// The conditions, as written.
    pub when: Map<String, Value>,
    /// The action, as written.
    pub then: Map<String, Value>,
}

/// `list_rules`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RulesResult {
    /// The rule files, in the order they are matched.
    pub rules: Vec<String>,
    /// How many rules loaded.
    pub count: usize,
    /// Every loaded rule.
    pub details: Vec<RuleDetail>,
    /// Rule files that failed to load, and why.
    pub errors: Vec<LoadError>,
}

/// A step in `list_workflows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    /// The step's id.
    pub id: String,
    /// The god that does it.
    pub god: String,
    /// The gates its handoff must claim.
    pub gates: Vec<String>,
    /// Its timeout as written (`2h`), if any.
    pub timeout: Option<String>,
    /// Gods tried in order when the step is rejected.
    pub fallback_gods: Vec<String>,
    /// True when its dispatches wait for an operator.
    pub approval_required: bool,
}

/// A definition in `list_workflows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowSummary {
    /// The definition's id.
    pub id: String,
    /// Its human title.
    pub name: String,
    /// Its version, if any.
    pub version: Option<String>,
    /// Its description, if any.
    pub description: Option<String>,
    /// Its steps, in order.
    pub steps: Vec<StepSummary>,
    /// The file it was loaded from.
    pub path: String,
    /// Problems that do not stop the definition loading (a dangling `input_from`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `list_workflows`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowsResult {
    /// Every definition that loaded.
    pub workflows: Vec<WorkflowSummary>,
    /// How many loaded.
    pub count: usize,
    /// Definition files that failed to load, and why.
    pub errors: Vec<LoadError>,
}

/// `approve` / `reject_held`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalResult {
    /// The decision.
    pub status: ApprovalStatus,
    /// The held dispatch decided.
    pub handoff_id: HandoffId,
    /// The workflow it belongs to.
    pub workflow_id: WorkflowId,
    /// The god it was addressed to.
    pub target_god: String,
    /// The step it asks for.
    pub target_step: String,
    /// The workflow's status after the decision.
    pub state_status: WorkflowStatus,
    /// Where the dispatch is now (the inbox when approved, the archive when rejected).
    pub dispatch_path: String,
    /// Who decided (normally `operator`).
    pub by: String,
    /// True when this repeats a decision already taken.
    pub duplicate: bool,
}

/// `abort_workflow`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbortResult {
    /// `aborted`, or `already_aborted` for a repeat.
    pub status: AbortStatus,
    /// The workflow aborted.
    pub workflow_id: WorkflowId,
    /// Artifacts marked as belonging to an aborted workflow.
    pub artifacts_marked: Vec<String>,
    /// Artifacts that could not be marked, and why.
    pub artifacts_skipped: Vec<super::model::SkippedArtifact>,
    /// Where the abort manifest was written, relative to the root.
    pub manifest_path: String,
    /// Handoff ids of the dispatches withdrawn to the archive.
    pub dispatches_withdrawn: Vec<String>,
    /// True when the workflow was already aborted (the existing manifest is returned).
    pub duplicate: bool,
}

/// A path `cleanup` would not touch, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusedPath {
    /// The path as the definition named it.
    pub path: String,
    /// Why it was refused (outside the workspace, a link, a protocol directory…).
    pub reason: String,
}

/// `cleanup`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanupResult {
    /// `cleaned`, or `dry_run` when nothing was deleted.
    pub status: CleanupStatus,
    /// The workflow whose temporary artifacts were cleaned.
    pub workflow_id: WorkflowId,
    /// Deleted (a cleanup; absent from a dry run's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Vec<String>>,
    /// What a cleanup would delete (a dry run; absent from a cleanup's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_delete: Option<Vec<String>>,
    /// Paths that did not exist.
    pub missing: Vec<String>,
    /// Paths that were refused, with the reason.
    pub refused: Vec<RefusedPath>,
    /// True when nothing was deleted.
    pub dry_run: bool,
    /// Problems that did not stop the cleanup.
    pub warnings: Vec<String>,
}

impl CleanupResult {
    /// The paths deleted, or in a dry run those that would be.
    pub fn paths(&self) -> &[String] {
        self.deleted
            .as_deref()
            .or(self.would_delete.as_deref())
            .unwrap_or_default()
    }
}

/// `bridge retry` and `bridge discard`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxActResult {
    /// `retry_requested` or `discarded`.
    pub status: OutboxActStatus,
    /// The outbox record acted on.
    pub outbox_id: String,
    /// The workflow whose step wrote it (for a reply: the peer's workflow).
    pub workflow_id: String,
    /// The subject it was to be published on.
    pub subject: String,
    /// For a discard: where the record is kept now, relative to the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<String>,
    /// True when a bridge is running on this root (its status file is fresh): a retry takes
    /// effect within a second; else when a bridge starts.
    pub bridge_running: bool,
}

/// `redispatch`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedispatchResult {
    /// `redispatched`.
    pub status: RedispatchStatus,
    /// The workflow whose step was dispatched again.
    pub workflow_id: WorkflowId,
    /// The handoff id of the new dispatch.
    pub handoff_id: HandoffId,
    /// The god it went to.
    pub to_god: String,
    /// The step it asks for.
    pub step: String,
    /// Where it was written, relative to the root.
    pub dispatch_path: String,
}

/// `init`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InitResult {
    /// `initialized` (also when everything was there already: see `created`).
    pub status: InitStatus,
    /// The root directory initialised.
    pub root: String,
    /// Directories and files created now.
    pub created: Vec<String>,
    /// Sample or schema files left as they were because a file with that name exists.
    pub kept: Vec<String>,
    /// Files replaced by their current version: an unedited schema an earlier version shipped.
    pub upgraded: Vec<String>,
    /// What the operator should know (e.g. an edited schema left as it is, older than the current one).
    pub notes: Vec<String>,
}
