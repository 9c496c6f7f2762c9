//! Operator actions as data: an [`Op`] names one engine call; an [`Operator`] performs it. The console
//! never writes a file itself: the real operator is the engine (see `engine_ops`).

use crate::engine::{
    AbortResult, AckRequest, AckResult, ApprovalResult, Budget, CleanupResult, Error, GodName,
    HandoffId, LockKey, RequeueResult, RerunResult, StepId, TrackName, UnlockResult, WorkflowId,
    board::{AdvanceResult, BoardSeen, ResolveResult, WriteResult},
};

use super::action::AckChoice;

/// Who the console acts as (recorded as `by` / `source` / `forced_by`).
pub const OPERATOR: &str = "operator";

/// One engine call the operator asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// An ack, as the engine takes it (its `ack_id` made once, when the op is built): the god
    /// whose inbox holds the dispatch rides along for the confirmation and the flash.
    Ack {
        god: GodName,
        request: AckRequest,
    },
    Approve {
        handoff_id: HandoffId,
        /// For a dispatch held for a budget: first set each budget it reached to these limits
        /// (`approve --budget-usd/--budget-tokens`; journaled as `budget_raise`).
        raise: Option<Budget>,
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
        /// The lock, parsed where the op is built (a lock listed with a path that is no lock key
        /// never becomes an op).
        path: LockKey,
    },
    BoardAdvance {
        track: TrackName,
        /// Move on although the current phase is not complete (the CLI's `--force`).
        force: bool,
        /// The session as the confirmation showed it: the engine refuses, under the board's
        /// lock, when it moved on since (`None`: whatever it is then).
        seen: Option<BoardSeen>,
    },
    BoardNextRound {
        track: TrackName,
        seen: Option<BoardSeen>,
    },
    BoardResolve {
        track: TrackName,
        /// Needed when some directors have not voted (they are recorded as abstained).
        force: bool,
        seen: Option<BoardSeen>,
    },
    /// Puts a dead letter back into an inbox (`pantheon requeue HANDOFF_ID [--to GOD]`).
    Requeue {
        handoff_id: HandoffId,
        /// The god whose dead letters hold it (for the confirmation and the flash).
        from_god: GodName,
        /// Another god's inbox; `None`: the god it was last delivered to.
        to: Option<GodName>,
    },
    /// Dispatches a failed, stalled or completed workflow again from a step (`pantheon rerun WF
    /// --from STEP`; an edited context is the CLI's `--context FILE` only).
    Rerun {
        workflow_id: WorkflowId,
        step: StepId,
        /// A fork from the replay: the moment (RFC 3339) whose context bag the rerun starts from
        /// (`pantheon rerun WF --from STEP --as-of TS`).
        as_of: Option<String>,
    },
    /// The same action on every marked record (see `marks`): one engine call each, in order.
    Bulk {
        items: Vec<super::marks::BulkItem>,
        /// Marked records the action does not apply to, with why (reported, never called).
        skipped: Vec<super::marks::Skipped>,
    },
}

/// The key of an ack's `context` that lists the gates the operator asserts passed
/// (docs/PROTOCOL.md §2.5, `completed`).
const GATES_PASSED: &str = "gates_passed";

/// The engine's ack of a dispatch as the operator answered the prompts: the gates that passed go
/// into its `context`, where the protocol has them.
pub fn ack_request(
    handoff_id: HandoffId,
    workflow_id: Option<WorkflowId>,
    decision: AckChoice,
    message: Option<String>,
    eta: Option<String>,
    gates_passed: Vec<String>,
) -> AckRequest {
    let mut ack = AckRequest::new(handoff_id, decision);
    ack.workflow_id = workflow_id;
    ack.message = message;
    ack.eta = eta;
    if !gates_passed.is_empty() {
        ack.context
            .insert(GATES_PASSED.into(), serde_json::json!(gates_passed));
    }
    ack
}

/// The gates an ack asserts passed (see [`ack_request`]).
pub fn gates_passed(ack: &AckRequest) -> Vec<String> {
    ack.context
        .get(GATES_PASSED)
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl Op {
    /// A short title for dialogs and flash messages.
    pub fn title(&self) -> String {
        match self {
            Op::Ack { request, .. } => format!(
                "Ack {} as {}",
                request.handoff_id,
                request.decision.as_str()
            ),
            Op::Approve {
                handoff_id,
                raise: None,
            } => format!("Approve held dispatch {handoff_id}"),
            Op::Approve {
                handoff_id,
                raise: Some(_),
            } => format!("Raise the budget and approve held dispatch {handoff_id}"),
            Op::RejectHeld { handoff_id, .. } => format!("Reject held dispatch {handoff_id}"),
            Op::Abort { workflow_id, .. } => format!("Abort {workflow_id}"),
            Op::Cleanup { workflow_id } => format!("Clean up {workflow_id}"),
            Op::ForceUnlock { path, .. } => format!("Force-unlock {path}"),
            Op::BoardAdvance {
                track,
                force: false,
                ..
            } => format!("Advance the board of {track}"),
            Op::BoardAdvance {
                track, force: true, ..
            } => {
                format!("Force the board of {track} to its next phase")
            }
            Op::BoardNextRound { track, .. } => format!("Next discussion round on {track}"),
            Op::BoardResolve { track, .. } => format!("Resolve the board of {track}"),
            Op::Requeue { handoff_id, to, .. } => match to {
                Some(g) => format!("Requeue {handoff_id} to {g}"),
                None => format!("Requeue {handoff_id}"),
            },
            Op::Rerun {
                workflow_id,
                step,
                as_of: None,
            } => format!("Rerun {workflow_id} from step {step}"),
            Op::Rerun {
                workflow_id,
                step,
                as_of: Some(at),
            } => format!("Fork {workflow_id} from step {step} as of {at}"),
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
            Op::Requeue { .. } => "Requeue",
            Op::Rerun { as_of: None, .. } => "Rerun",
            Op::Rerun { .. } => "Fork",
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
                Op::Ack { request, .. } if request.decision == AckChoice::Rejected
            )
    }

    /// A one-line account of what the engine returned, for the flash message.
    pub fn summarize(&self, outcome: &Outcome) -> String {
        match outcome {
            Outcome::Bulk(report) => match self {
                Op::Bulk { items, .. } => super::marks::summarize_bulk(items, report),
                _ => String::new(),
            },
            Outcome::Ack(r) => {
                let mut out = format!("{}: {}", r.handoff_id, r.status);
                if r.duplicate {
                    out.push_str(" (already recorded)");
                }
                out.push_str(&format!(", workflow {}", r.state_status));
                if let Some(g) = &r.rerouted_to {
                    out.push_str(&format!(", rerouted to {g}"));
                }
                out
            }
            Outcome::RaisedAndApproved { raises, approval } => format!(
                "budget raised ({}); {}",
                raises.join("; "),
                self.summarize(&Outcome::Approval(approval.clone()))
            ),
            Outcome::Approval(r) if r.status == crate::engine::ApprovalStatus::Approved => {
                format!(
                    "{} approved into {}'s inbox (step {}), workflow {}",
                    r.handoff_id, r.target_god, r.target_step, r.state_status
                )
            }
            Outcome::Approval(r) => {
                format!("{} {}, workflow {}", r.handoff_id, r.status, r.state_status)
            }
            Outcome::Abort(r) => format!(
                "{} aborted: {} artifact(s) marked, {} dispatch(es) withdrawn{}",
                r.workflow_id,
                r.artifacts_marked.len(),
                r.dispatches_withdrawn.len(),
                if r.duplicate {
                    " (already aborted)"
                } else {
                    ""
                }
            ),
            Outcome::Cleanup(r) => format!(
                "{} cleaned: {} deleted, {} missing, {} refused",
                r.workflow_id,
                r.paths().len(),
                r.missing.len(),
                r.refused.len()
            ),
            Outcome::Unlock(r) => format!(
                "{} unlocked{}",
                r.filepath,
                r.released_from
                    .as_deref()
                    .map(|h| format!(" (was held by {h})"))
                    .unwrap_or_default()
            ),
            Outcome::Advance(r) => format!(
                "board {} -> {}{}",
                r.from,
                r.to,
                if r.forced { " (forced)" } else { "" }
            ),
            Outcome::Round(r) => {
                let d = &r.phases.discuss;
                if d.rounds >= d.max_rounds {
                    format!(
                        "discussion round {} of {} closed: the last one (advance with >)",
                        d.rounds, d.max_rounds
                    )
                } else {
                    format!(
                        "discussion round {} closed; round {} of {} begins",
                        d.rounds,
                        d.rounds.saturating_add(1),
                        d.max_rounds
                    )
                }
            }
            Outcome::Requeue(r) => format!(
                "{} requeued into {}'s inbox, workflow {} waits for its ack again{}",
                r.handoff_id,
                r.to_god,
                r.workflow_id,
                r.ack_deadline
                    .as_deref()
                    .map(|d| format!(" (ack deadline {d})"))
                    .unwrap_or_default()
            ),
            Outcome::Rerun(r) => format!(
                "{} {} from step {}{} (attempt {}, was {}): dispatched to {} as {}",
                r.workflow_id,
                if r.as_of.is_some() { "forked" } else { "rerun" },
                r.step,
                r.as_of
                    .as_deref()
                    .map(|t| format!(" as of {t}"))
                    .unwrap_or_default(),
                r.attempt,
                r.previous_status,
                r.to_god,
                r.handoff_id
            ),
            Outcome::Resolve(r) => format!(
                "board resolved: {}{}",
                r.resolution.outcome.verdict.as_str(),
                if r.resolution.forced { " (forced)" } else { "" }
            ),
        }
    }
}

/// What the engine returned for an [`Op`]: its typed result, so a flash message reads real fields.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// [`Op::Ack`].
    Ack(AckResult),
    /// [`Op::Approve`] and [`Op::RejectHeld`].
    Approval(ApprovalResult),
    /// [`Op::Approve`] with a raise: each raise the engine recorded (`workflow wf_x -> $5`), then
    /// the approval.
    RaisedAndApproved {
        raises: Vec<String>,
        approval: ApprovalResult,
    },
    /// [`Op::Abort`].
    Abort(AbortResult),
    /// [`Op::Cleanup`].
    Cleanup(CleanupResult),
    /// [`Op::ForceUnlock`].
    Unlock(UnlockResult),
    /// [`Op::BoardAdvance`].
    Advance(AdvanceResult),
    /// [`Op::BoardNextRound`].
    Round(WriteResult),
    /// [`Op::BoardResolve`].
    Resolve(ResolveResult),
    /// [`Op::Requeue`].
    Requeue(RequeueResult),
    /// [`Op::Rerun`].
    Rerun(RerunResult),
    /// [`Op::Bulk`]: one entry per item (`key`, `subject`, `ok`, and `error` when refused) and the
    /// marked records that were skipped, as [`super::marks::execute_bulk`] reports them.
    Bulk(super::marks::BulkReport),
}

/// Performs operations. The console's real operator calls the engine; tests may record calls.
pub trait Operator: Send + Sync + 'static {
    /// Performs `op` and returns the engine's typed result.
    fn execute(&self, op: &Op) -> Result<Outcome, Error>;
    /// What `cleanup` would do, without doing it (the dry run shown before confirming).
    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<CleanupResult, Error>;
}
