//! Typed requests at the engine's seam: what a shell (console, CLI, MCP) asks the Conductor to do, built
//! from validated ids and closed enums instead of loose JSON.

use serde_json::{Map, Value, json};

use super::model::AckStatus;
use crate::store::{AckId, HandoffId, WorkflowId};
use crate::words::words;

words!(
    /// What an ack decides (docs/PROTOCOL.md §2.5): the four statuses a recipient may send.
    pub AckDecision {
        /// The god took the dispatch.
        Accepted = "accepted",
        /// The god will act later (`eta`).
        Pending = "pending",
        /// The god refuses it: the step goes to a fallback god or the workflow fails.
        Rejected = "rejected",
        /// The god finished the step (a handoff is recorded on its behalf).
        Completed = "completed",
    }
);

impl AckDecision {
    /// The ack status this decision records.
    pub fn status(self) -> AckStatus {
        AckStatus::parse(self.as_str())
    }
}

/// An ack, typed: the console builds it directly ([`AckRequest::new`]). [`AckRequest::to_json`] gives
/// the document the protocol defines, which
/// [`super::Conductor::ack`] checks against the ack schema like any other ack.
#[derive(Debug, Clone, PartialEq)]
pub struct AckRequest {
    /// The ack's own id (idempotency key).
    pub ack_id: AckId,
    /// The dispatch acknowledged.
    pub handoff_id: HandoffId,
    /// Optional: found from the handoff when absent.
    pub workflow_id: Option<WorkflowId>,
    /// What the ack decides.
    pub decision: AckDecision,
    /// Free text for the operator.
    pub message: Option<String>,
    /// When the god expects to act (RFC 3339), for `pending`.
    pub eta: Option<String>,
    /// `context` (`gates_passed`, `summary`, … for `completed`), kept as given.
    pub context: Map<String, Value>,
    /// The W3C `traceparent` of the acking god's span, when it sent one (docs/PROTOCOL.md §2.13).
    pub traceparent: Option<String>,
}

impl AckRequest {
    /// A new ack with a fresh `ack_id` and nothing optional.
    pub fn new(handoff_id: HandoffId, decision: AckDecision) -> Self {
        Self {
            ack_id: AckId::generate(),
            handoff_id,
            workflow_id: None,
            decision,
            message: None,
            eta: None,
            context: Map::new(),
            traceparent: None,
        }
    }

    /// The ack document (docs/PROTOCOL.md §2.5).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "ack_id": self.ack_id.as_str(),
            "handoff_id": self.handoff_id.as_str(),
            "status": self.decision.as_str(),
        });
        if let Some(w) = &self.workflow_id {
            v["workflow_id"] = json!(w.as_str());
        }
        if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        if let Some(e) = &self.eta {
            v["eta"] = json!(e);
        }
        if !self.context.is_empty() {
            v["context"] = Value::Object(self.context.clone());
        }
        if let Some(t) = &self.traceparent {
            v["traceparent"] = json!(t);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_writes_the_protocol_document_and_only_the_four_decisions_parse() {
        let v = json!({"ack_id": "ack_20260201_abcdef", "handoff_id": "hof_20260201_abcdef",
            "status": "pending", "eta": "2026-02-01T12:00:00Z", "context": {"gates_passed": ["a"]}});
        let mut a = AckRequest::new(
            HandoffId::parse("hof_20260201_abcdef").unwrap(),
            AckDecision::Pending,
        );
        a.ack_id = AckId::parse("ack_20260201_abcdef").unwrap();
        a.eta = Some("2026-02-01T12:00:00Z".into());
        a.context = json!({"gates_passed": ["a"]}).as_object().unwrap().clone();
        assert_eq!(a.to_json(), v);
        for bad in ["unacked", "withdrawn", "ACCEPTED", ""] {
            assert_eq!(AckDecision::parse(bad), None, "{bad}");
        }
        for d in AckDecision::ALL {
            assert_eq!(d.status().as_str(), d.as_str());
        }
    }
}
