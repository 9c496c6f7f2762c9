//! The console's real [`Operator`]: every action is one engine call, recorded as the operator.

use crate::engine::{
    Actor, Bus, CleanupResult, Conductor, Error, Origin, Root, TrackName, WorkerId, WorkflowId,
    board::BoardSeen,
};

use super::ops::{OPERATOR, Op, Operator, Outcome};

/// Performs operations with the Conductor and bus engines of one root.
pub struct EngineOperator {
    root: Root,
    conductor: Conductor,
}

impl EngineOperator {
    /// Acts on `root`, journaled as the user running the console (see [`operator_name`]).
    pub fn new(root: Root) -> Self {
        Self::acting_as(root, &operator_name(None))
    }

    /// Acts on `root`, journaled as `actor` (the console's `--actor`).
    pub fn acting_as(root: Root, actor: &str) -> Self {
        Self {
            conductor: Conductor::new(root.clone())
                .with_origin(Origin::new(Some(actor), "console")),
            root,
        }
    }

    fn bus(&self, track: &TrackName) -> Result<Bus, Error> {
        Bus::open_existing(&self.root, track).map(|b| b.with_origin(self.conductor.origin()))
    }

    /// The bus of `track` for a board act bound to the session as it was shown.
    fn board(&self, track: &TrackName, seen: &Option<BoardSeen>) -> Result<Bus, Error> {
        let bus = self.bus(track)?;
        Ok(match seen {
            Some(s) => bus.expecting_board(s.clone()),
            None => bus,
        })
    }
}

impl Operator for EngineOperator {
    fn execute(&self, op: &Op) -> Result<Outcome, Error> {
        match op {
            Op::Ack { request, .. } => {
                Ok(Outcome::Ack(self.conductor.ack(request, Actor::Operator)?))
            }
            Op::Approve {
                handoff_id,
                raise: None,
            } => Ok(Outcome::Approval(
                self.conductor.approve(handoff_id, Actor::Operator)?,
            )),
            Op::Approve {
                handoff_id,
                raise: Some(to),
            } => {
                // As `approve --budget-usd/--budget-tokens`: the raise (journaled), then the approval.
                let actor = self.conductor.origin().actor.clone();
                let raised = self.conductor.raise_budget(handoff_id, *to, &actor)?;
                let raises = raise_texts(&raised);
                Ok(Outcome::RaisedAndApproved {
                    raises,
                    approval: self.conductor.approve(handoff_id, Actor::Operator)?,
                })
            }
            Op::RejectHeld { handoff_id, reason } => Ok(Outcome::Approval(
                self.conductor
                    .reject_held(handoff_id, reason, Actor::Operator)?,
            )),
            Op::Abort {
                workflow_id,
                reason,
            } => Ok(Outcome::Abort(self.conductor.abort_workflow(
                workflow_id,
                reason,
                Actor::Operator,
            )?)),
            Op::Cleanup { workflow_id } => Ok(Outcome::Cleanup(
                self.conductor.cleanup(workflow_id, false)?,
            )),
            Op::ForceUnlock { track, path } => Ok(Outcome::Unlock(self.bus(track)?.release_lock(
                path,
                &WorkerId::operator(),
                true,
            )?)),
            Op::BoardAdvance { track, force, seen } => Ok(Outcome::Advance(
                self.board(track, seen)?.board_advance(*force, OPERATOR)?,
            )),
            Op::BoardNextRound { track, seen } => Ok(Outcome::Round(
                self.board(track, seen)?.board_next_round(OPERATOR)?,
            )),
            Op::BoardResolve { track, force, seen } => Ok(Outcome::Resolve(
                self.board(track, seen)?.board_resolve(*force, OPERATOR)?,
            )),
            Op::Requeue { handoff_id, to, .. } => Ok(Outcome::Requeue(
                self.conductor.requeue(handoff_id, to.as_ref())?,
            )),
            Op::Rerun {
                workflow_id,
                step,
                as_of: None,
            } => Ok(Outcome::Rerun(self.conductor.rerun(
                workflow_id,
                step,
                None,
            )?)),
            // A fork acts on the live root, from the context bag the history holds for the moment.
            Op::Rerun {
                workflow_id,
                step,
                as_of: Some(at),
            } => {
                let as_of = crate::engine::context_as_of(&self.root, workflow_id, at)?;
                Ok(Outcome::Rerun(self.conductor.rerun_as_of(
                    workflow_id,
                    step,
                    None,
                    &as_of,
                )?))
            }
            Op::Bulk { items, skipped } => Ok(Outcome::Bulk(super::marks::execute_bulk(
                self, items, skipped,
            ))),
        }
    }

    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<CleanupResult, Error> {
        self.conductor.cleanup(workflow_id, true)
    }
}

pub use crate::actor::operator_name;

/// Each raise of [`Conductor::raise_budget`]'s answer as `scope name -> {cost_usd, tokens}`.
fn raise_texts(raised: &serde_json::Value) -> Vec<String> {
    raised
        .get("raises")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
            format!(
                "{} {} -> {}",
                s("scope"),
                s("name"),
                r.get("to").cloned().unwrap_or_default()
            )
        })
        .collect()
}
