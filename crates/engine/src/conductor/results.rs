//! The result shapes of the Conductor's operations (docs/PROTOCOL.md §2), printed by the CLI and returned by MCP.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::definition::LoadError;
use super::files::FileError;
use super::model::{Dispatch, WorkflowStatus};

/// `submit_handoff`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubmitResult {
    /// `dispatched`, `awaiting_approval`, `completed`, `recorded` or `duplicate`.
    pub status: String,
    pub workflow_id: String,
    pub handoff_id: String,
    pub target_god: Option<String>,
    pub target_step: Option<String>,
    pub state_status: WorkflowStatus,
    pub handoff_path: String,
    pub dispatch_path: Option<String>,
    /// The rule that routed it, when a rule did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_rule: Option<String>,
    pub warnings: Vec<String>,
}

/// `ack_handoff`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AckResult {
    pub acknowledged: bool,
    pub handoff_id: String,
    pub ack_id: String,
    pub workflow_id: String,
    /// The ack's status (`accepted`, `pending`, `rejected`, `completed`).
    pub status: String,
    pub state_status: WorkflowStatus,
    /// The god the dispatch was addressed to.
    pub god: String,
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
    /// `ack` or `step_timeout`, beside `deadline`.
    pub deadline_kind: Option<String>,
    pub warnings: Vec<String>,
}

/// `check_inbox`'s result: one page of dispatches, oldest first; unreadable files in `errors`.
/// `D` is [`Dispatch`] (the whole dispatch) or, with `compact`, a
/// [`CompactDispatch`](super::paging::CompactDispatch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxResult<D = Dispatch> {
    pub god: String,
    /// False when the god has no inbox directory (a misspelt or unknown god): nothing can be
    /// dispatched to it until `init` or a first dispatch creates the inbox.
    pub known_god: bool,
    pub dispatches: Vec<D>,
    /// Every dispatch in the inbox, on this page or another.
    pub count: usize,
    /// The page size asked for (`None`: everything).
    pub limit: Option<usize>,
    /// Pass it as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
    pub errors: Vec<FileError>,
}

/// `get_dispatch`'s result: one dispatch whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchResult {
    pub god: String,
    pub dispatch: Dispatch,
    pub path: String,
}

/// One line of `list_pending`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingEntry {
    pub dispatch_id: Option<String>,
    pub handoff_id: String,
    pub workflow_id: String,
    pub from_god: String,
    pub to_god: String,
    pub step: String,
    pub dispatched_at: Option<String>,
    pub ack_status: String,
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
    pub limit: Option<usize>,
    pub next_cursor: Option<String>,
    /// Not paged: dispatches held for an operator's approval.
    pub awaiting_approval: Vec<PendingEntry>,
    pub errors: Vec<FileError>,
}

/// One rule in `list_rules`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleDetail {
    pub id: String,
    pub file: String,
    pub when: Map<String, Value>,
    pub then: Map<String, Value>,
}

/// `list_rules`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RulesResult {
    /// The rule files, in the order they are matched.
    pub rules: Vec<String>,
    pub count: usize,
    pub details: Vec<RuleDetail>,
    pub errors: Vec<LoadError>,
}

/// A step in `list_workflows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    pub id: String,
    pub god: String,
    pub gates: Vec<String>,
    pub timeout: Option<String>,
    pub fallback_gods: Vec<String>,
    pub approval_required: bool,
}

/// A definition in `list_workflows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowSummary {
    pub id: String,
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    pub steps: Vec<StepSummary>,
    pub path: String,
    /// Problems that do not stop the definition loading (a dangling `input_from`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `list_workflows`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowsResult {
    pub workflows: Vec<WorkflowSummary>,
    pub count: usize,
    pub errors: Vec<LoadError>,
}

/// `approve` / `reject_held`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalResult {
    /// `approved` or `rejected`.
    pub status: String,
    pub handoff_id: String,
    pub workflow_id: String,
    pub target_god: String,
    pub target_step: String,
    pub state_status: WorkflowStatus,
    /// Where the dispatch is now (the inbox when approved, the archive when rejected).
    pub dispatch_path: String,
    pub by: String,
    /// True when this repeats a decision already taken.
    pub duplicate: bool,
}

/// `abort_workflow`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbortResult {
    pub status: String,
    pub workflow_id: String,
    pub artifacts_marked: Vec<String>,
    pub artifacts_skipped: Vec<super::model::SkippedArtifact>,
    pub manifest_path: String,
    pub dispatches_withdrawn: Vec<String>,
    /// True when the workflow was already aborted (the existing manifest is returned).
    pub duplicate: bool,
}

/// A path `cleanup` would not touch, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusedPath {
    pub path: String,
    pub reason: String,
}

/// `cleanup`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanupResult {
    pub status: String,
    pub workflow_id: String,
    /// Deleted (or, in a dry run, that would be deleted).
    pub deleted: Vec<String>,
    pub missing: Vec<String>,
    pub refused: Vec<RefusedPath>,
    pub dry_run: bool,
    pub warnings: Vec<String>,
}

/// `redispatch`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedispatchResult {
    /// `redispatched`.
    pub status: String,
    pub workflow_id: String,
    pub handoff_id: String,
    pub to_god: String,
    pub step: String,
    pub dispatch_path: String,
}

/// `init`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InitResult {
    pub status: String,
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
