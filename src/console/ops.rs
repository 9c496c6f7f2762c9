//! Operator actions as data: an [`Op`] names one engine call (each made, described and performed
//! by its module in `console/actions/`); an [`Operator`] performs it. The console never writes a
//! file itself: the real operator is the engine (see `engine_ops`).

use crate::engine::{
    AbortResult, AckResult, ApprovalResult, CleanupResult, Error, OutboxActResult, RequeueResult,
    RerunResult, UnlockResult, WorkflowId,
    board::{AdvanceResult, ResolveResult, WriteResult},
};

pub(crate) use super::actions::Op;

/// Who the console acts as (recorded as `by` / `source` / `forced_by`).
pub(crate) const OPERATOR: &str = "operator";

/// What the engine returned for an [`Op`]: its typed result, so a flash message reads real fields
/// (the action's module makes the flash of its result type, see [`Done`]). One variant per kind of engine result:
/// an action whose engine call returns a new kind adds its variant here.
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
    /// [`Op::OutboxRetry`] and [`Op::OutboxDiscard`].
    Outbox(OutboxActResult),
    /// [`Op::DiscardDead`].
    Discard(crate::engine::RetiredDead),
    /// [`Op::Pause`].
    Pause(crate::engine::PauseResult),
    /// [`Op::Resume`].
    Resume(crate::engine::ResumeResult),
    /// [`Op::AnswerSource`]: what the source said it did.
    Answer(crate::sources::Answered),
    /// [`Op::Link`]: the pair minted, with its URLs.
    Link(crate::approvals::LinkUrls),
    /// [`Op::Bulk`]: one entry per item (`key`, `subject`, `ok`, and `error` when refused) and the
    /// marked records that were skipped, as [`super::marks::execute_bulk`] reports them.
    Bulk(super::marks::BulkReport),
}

/// What an operator action's one engine call produced: the engine's typed result, and the flash
/// the action's module made of it where the result's type is known (so no flash is asked of an
/// outcome of another kind).
#[derive(Debug, Clone)]
pub struct Done {
    /// The engine's typed result (what `Act::finished` reads afterwards).
    pub outcome: Outcome,
    /// The flash message: a one-line account of the result.
    pub flash: String,
}

impl Done {
    /// `result` as `wrap` holds it, with the flash `summary` makes of it.
    pub fn new<R>(
        result: R,
        summary: impl FnOnce(&R) -> String,
        wrap: impl FnOnce(R) -> Outcome,
    ) -> Self {
        Self {
            flash: summary(&result),
            outcome: wrap(result),
        }
    }
}

/// Performs operations. The console's real operator calls the engine; tests may record calls.
pub trait Operator: Send + Sync + 'static {
    /// Performs `op` and returns the engine's typed result with its flash.
    fn execute(&self, op: &Op) -> Result<Done, Error>;
    /// What `cleanup` would do, without doing it (the dry run shown before confirming).
    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<CleanupResult, Error>;
}
