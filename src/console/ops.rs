//! Operator actions as data: an [`Op`] names one engine call; an [`Operator`] performs it. The console
//! never writes a file itself: the real operator is the engine (see `engine_ops`).

use serde_json::Value;

use crate::engine::error::Error;
use crate::engine::store::{GodName, HandoffId, TrackName, WorkflowId};

use super::action::AckChoice;

/// Who the console acts as (recorded as `by` / `source` / `forced_by`).
pub const OPERATOR: &str = "operator";

/// One engine call the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Ack {
        god: GodName,
        handoff_id: HandoffId,
        workflow_id: Option<WorkflowId>,
        status: AckChoice,
        message: Option<String>,
        /// When the god expects to act (RFC 3339), for `pending`.
        eta: Option<String>,
        /// Gates the operator asserts passed, for `completed` (sent as `context.gates_passed`).
        gates_passed: Vec<String>,
    },
    Approve {
        handoff_id: HandoffId,
    },
    RejectHeld {
        handoff_id: HandoffId,
        reason: String,
    },
    Abort {
        workflow_id: WorkflowId,
        reason: String,
    },
    Cleanup {
        workflow_id: WorkflowId,
    },
    ForceUnlock {
        track: TrackName,
        path: String,
    },
    BoardAdvance {
        track: TrackName,
        /// Move on although the current phase is not complete (the CLI's `--force`).
        force: bool,
    },
    BoardNextRound {
        track: TrackName,
    },
    BoardResolve {
        track: TrackName,
        /// Needed when some directors have not voted (they are recorded as abstained).
        force: bool,
    },
    /// The same action on every marked record (see `marks`): one engine call each, in order.
    Bulk {
        items: Vec<super::marks::BulkItem>,
        /// Marked records the action does not apply to, with why (reported, never called).
        skipped: Vec<(String, String)>,
    },
}

impl Op {
    /// A short title for dialogs and flash messages.
    pub fn title(&self) -> String {
        match self {
            Op::Ack {
                handoff_id, status, ..
            } => format!("Ack {handoff_id} as {}", status.as_str()),
            Op::Approve { handoff_id } => format!("Approve held dispatch {handoff_id}"),
            Op::RejectHeld { handoff_id, .. } => format!("Reject held dispatch {handoff_id}"),
            Op::Abort { workflow_id, .. } => format!("Abort {workflow_id}"),
            Op::Cleanup { workflow_id } => format!("Clean up {workflow_id}"),
            Op::ForceUnlock { path, .. } => format!("Force-unlock {path}"),
            Op::BoardAdvance {
                track,
                force: false,
            } => format!("Advance the board of {track}"),
            Op::BoardAdvance { track, force: true } => {
                format!("Force the board of {track} to its next phase")
            }
            Op::BoardNextRound { track } => format!("Next discussion round on {track}"),
            Op::BoardResolve { track, .. } => format!("Resolve the board of {track}"),
            Op::Bulk { items, .. } => match items.first() {
                Some((_, op)) => format!("{} {} marked record(s)", op.verb(), items.len()),
                None => "Nothing to do on the marked records".to_owned(),
            },
        }
    }

    /// The button that confirms it.
    pub fn verb(&self) -> &'static str {
        match self {
            Op::Ack { .. } => "Ack",
            Op::Approve { .. } => "Approve",
            Op::RejectHeld { .. } => "Reject",
            Op::Abort { .. } => "Abort",
            Op::Cleanup { .. } => "Delete",
            Op::ForceUnlock { .. } => "Unlock",
            Op::BoardAdvance { force: false, .. } => "Advance",
            Op::BoardAdvance { force: true, .. } => "Force advance",
            Op::BoardNextRound { .. } => "Next round",
            Op::BoardResolve { .. } => "Resolve",
            Op::Bulk { items, .. } => items.first().map_or("OK", |(_, op)| op.verb()),
        }
    }

    /// Destructive operations are drawn in red.
    pub fn is_destructive(&self) -> bool {
        matches!(
            self,
            Op::Abort { .. }
                | Op::Cleanup { .. }
                | Op::ForceUnlock { .. }
                | Op::BoardResolve { .. }
                | Op::BoardAdvance { force: true, .. }
                | Op::RejectHeld { .. }
        ) || matches!(self, Op::Bulk { items, .. } if items.iter().any(|(_, o)| o.is_destructive()))
            || matches!(
                self,
                Op::Ack {
                    status: AckChoice::Rejected,
                    ..
                }
            )
    }

    /// A one-line account of what the engine returned, for the flash message.
    pub fn summarize(&self, result: &Value) -> String {
        if let Op::Bulk { items, .. } = self {
            return super::marks::summarize_bulk(items, result);
        }
        let s = |k: &str| result.get(k).and_then(Value::as_str);
        let n = |k: &str| result.get(k).and_then(Value::as_array).map_or(0, Vec::len);
        match self {
            Op::Ack { handoff_id, .. } => {
                let mut out = format!("{handoff_id}: {}", s("status").unwrap_or("acknowledged"));
                if let Some(st) = s("state_status") {
                    out.push_str(&format!(", workflow {st}"));
                }
                if let Some(g) = s("rerouted_to") {
                    out.push_str(&format!(", rerouted to {g}"));
                }
                out
            }
            Op::Approve { handoff_id } => format!(
                "{handoff_id} approved{}",
                s("to_god")
                    .or(s("target_god"))
                    .map(|g| format!(" into {g}'s inbox"))
                    .unwrap_or_default()
            ),
            Op::RejectHeld { handoff_id, .. } => format!(
                "{handoff_id} rejected{}",
                s("state_status")
                    .map(|st| format!(", workflow {st}"))
                    .unwrap_or_default()
            ),
            Op::Abort { workflow_id, .. } => format!(
                "{workflow_id} aborted: {} artifact(s) marked, {} dispatch(es) withdrawn",
                n("artifacts_marked"),
                n("dispatches_withdrawn")
            ),
            Op::Cleanup { workflow_id } => format!(
                "{workflow_id} cleaned: {} deleted, {} missing, {} refused",
                n("deleted"),
                n("missing"),
                n("refused")
            ),
            Op::ForceUnlock { path, .. } => format!("{path} unlocked"),
            Op::BoardAdvance { .. } => format!(
                "board {} -> {}{}",
                s("from").unwrap_or("?"),
                s("to").unwrap_or("?"),
                if result.get("forced").and_then(Value::as_bool) == Some(true) {
                    " (forced)"
                } else {
                    ""
                }
            ),
            Op::BoardNextRound { .. } => {
                let r = |k: &str| {
                    result
                        .pointer(&format!("/record/{k}"))
                        .and_then(Value::as_u64)
                };
                match (r("round"), r("max_rounds")) {
                    (Some(done), Some(max)) if done >= max => {
                        format!(
                            "discussion round {done} of {max} closed: the last one (advance with >)"
                        )
                    }
                    (Some(done), Some(max)) => {
                        format!(
                            "discussion round {done} closed; round {} of {max} begins",
                            done + 1
                        )
                    }
                    _ => "discussion round closed".to_owned(),
                }
            }
            Op::Bulk { .. } => String::new(),
            Op::BoardResolve { .. } => format!(
                "board resolved: {}",
                s("verdict")
                    .or_else(|| result
                        .pointer("/resolution/verdict")
                        .and_then(Value::as_str))
                    .unwrap_or("done")
            ),
        }
    }
}

/// Performs operations. The console's real operator calls the engine; tests may record calls.
pub trait Operator: Send + Sync + 'static {
    /// Performs `op` and returns the engine's result JSON.
    fn execute(&self, op: &Op) -> Result<Value, Error>;
    /// What `cleanup` would do, without doing it (the dry run shown before confirming).
    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<Value, Error>;
}
