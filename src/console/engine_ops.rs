//! The console's real [`Operator`]: every action is one engine call, recorded as the operator.

use serde_json::{Value, json};

use crate::engine::bus::Bus;
use crate::engine::conductor::{Actor, Conductor};
use crate::engine::error::Error;
use crate::engine::journal::Origin;
use crate::engine::store::{AckId, Root, WorkflowId};

use super::ops::{OPERATOR, Op, Operator};

/// Performs operations with the Conductor and bus engines of one root.
pub struct EngineOperator {
    root: Root,
    conductor: Conductor,
}

impl EngineOperator {
    pub fn new(root: Root) -> Self {
        Self {
            conductor: Conductor::new(root.clone()).with_origin(Origin::new(None, "console")),
            root,
        }
    }

    fn bus(&self, track: &str) -> Result<Bus, Error> {
        Bus::open_existing(&self.root, track).map(|b| b.with_origin(self.conductor.origin()))
    }
}

fn to_json<T: serde::Serialize>(v: T) -> Result<Value, Error> {
    Ok(serde_json::to_value(v).expect("engine results always serialise"))
}

impl Operator for EngineOperator {
    fn execute(&self, op: &Op) -> Result<Value, Error> {
        match op {
            Op::Ack {
                handoff_id,
                workflow_id,
                status,
                message,
                eta,
                gates_passed,
                ..
            } => {
                let mut ack = json!({
                    "ack_id": AckId::generate().as_str(),
                    "handoff_id": handoff_id.as_str(),
                    "status": status.as_str(),
                });
                if let Some(w) = workflow_id {
                    ack["workflow_id"] = json!(w.as_str());
                }
                if let Some(m) = message {
                    ack["message"] = json!(m);
                }
                if let Some(e) = eta {
                    ack["eta"] = json!(e);
                }
                if !gates_passed.is_empty() {
                    ack["context"] = json!({ "gates_passed": gates_passed });
                }
                to_json(self.conductor.ack_handoff(&ack, Actor::Operator)?)
            }
            Op::Approve { handoff_id } => to_json(
                self.conductor
                    .approve(handoff_id.as_str(), Actor::Operator)?,
            ),
            Op::RejectHeld { handoff_id, reason } => to_json(self.conductor.reject_held(
                handoff_id.as_str(),
                reason,
                Actor::Operator,
            )?),
            Op::Abort {
                workflow_id,
                reason,
            } => to_json(self.conductor.abort_workflow(
                workflow_id.as_str(),
                reason,
                Actor::Operator,
            )?),
            Op::Cleanup { workflow_id } => {
                to_json(self.conductor.cleanup(workflow_id.as_str(), false)?)
            }
            Op::ForceUnlock { track, path } => to_json(
                self.bus(track.as_str())?
                    .release_lock(path, OPERATOR, true)?,
            ),
            Op::BoardAdvance { track, force } => {
                to_json(self.bus(track.as_str())?.board_advance(*force, OPERATOR)?)
            }
            Op::BoardNextRound { track } => {
                to_json(self.bus(track.as_str())?.board_next_round(OPERATOR)?)
            }
            Op::BoardResolve { track, force } => {
                to_json(self.bus(track.as_str())?.board_resolve(*force, OPERATOR)?)
            }
            Op::Bulk { items, skipped } => Ok(super::marks::execute_bulk(self, items, skipped)),
        }
    }

    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<Value, Error> {
        to_json(self.conductor.cleanup(workflow_id.as_str(), true)?)
    }
}
