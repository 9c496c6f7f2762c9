//! Tolerant serde types for the Conductor's files (docs/PROTOCOL.md §2): handoffs, dispatches, workflow state,
//! acks. Readers accept what foreign writers leave (missing fields, `null`s, non-string list items,
//! unknown statuses); unknown fields are kept in `extra` so a rewrite never loses them.

use crate::error::Refusal;
use serde::{Deserialize, Deserializer, Serialize};

use crate::words::words;
use serde_json::{Map, Value};

/// Lenient field deserialisers shared by the model types.
pub(crate) mod lenient {
    use super::*;

    /// `null` (or a missing field, with `#[serde(default)]`) becomes `T::default()`.
    pub(crate) fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Default + Deserialize<'de>,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// A list of strings; a single string is a one-item list, non-string items are kept as their JSON
    /// text, `null` is empty.
    pub(crate) fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Vec::new(),
            Value::Array(items) => items.into_iter().map(text).collect(),
            other => vec![text(other)],
        })
    }

    /// An optional string; numbers and booleans are kept as their text, `null` is `None`.
    pub(crate) fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => None,
            other => Some(text(other)),
        })
    }

    /// A string; any other value (a number, `null`, an object) reads as absent.
    pub(crate) fn only_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            _ => None,
        })
    }

    /// A field that is present, whatever its value (`null` included, so a rewrite keeps it); a missing
    /// field (with `#[serde(default)]`) is `None`.
    pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Ok(Some(Value::deserialize(d)?))
    }

    /// A value as a display string: strings as is, anything else as compact JSON.
    pub(crate) fn text(v: Value) -> String {
        match v {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
}

words!(
    open
    /// A workflow's status (docs/PROTOCOL.md §2.2).
    pub WorkflowStatus {
        /// A step is dispatched or being worked on; the default for a new workflow.
        InProgress = "in_progress",
        /// A dispatch waits for its receiving god's first ack.
        WaitingForAck = "waiting_for_ack",
        /// A dispatch is held in `_quarantine` until an operator approves or rejects it.
        AwaitingApproval = "awaiting_approval",
        /// The completion target's handoff was recorded; no further handoff is taken.
        Completed = "completed",
        /// Aborted by a god or the operator; its dispatches were withdrawn.
        Aborted = "aborted",
        /// A step failed with nowhere to go (no fallback).
        Failed = "failed",
        /// A dispatch ran out of deliveries and was dead-lettered (docs/PROTOCOL.md §2.10).
        Stalled = "stalled",
    }
);

#[allow(clippy::derivable_impls)]
impl Default for WorkflowStatus {
    fn default() -> Self {
        Self::InProgress
    }
}

impl WorkflowStatus {
    /// True once the workflow can no longer move (completed, aborted, failed).
    pub fn is_finished(&self) -> bool {
        matches!(self, Self::Completed | Self::Aborted | Self::Failed)
    }
}

words!(
    open
    /// A dispatch's acknowledgement status, and the status of an ack (docs/PROTOCOL.md §2.5).
    pub AckStatus {
        /// Delivered, not yet acknowledged.
        Unacked = "unacked",
        /// The god took the work.
        Accepted = "accepted",
        /// The god is still on it (a progress ack that renews the deadline).
        Pending = "pending",
        /// The god refused the work; the step goes to its fallback, if any.
        Rejected = "rejected",
        /// The god finished; a handoff was recorded on its behalf.
        Completed = "completed",
        /// Withdrawn from an inbox by an abort (archive only).
        Withdrawn = "withdrawn",
    }
);

words!(
    open
    /// A `step_history` entry's status: the engine writes `completed` (a recorded handoff) and
    /// `rerun` (an operator's rerun); a foreign writer's other words are kept verbatim.
    pub StepStatus {
        /// The step's handoff was recorded.
        Completed = "completed",
        /// The operator dispatched the step again (`pantheon rerun`).
        Rerun = "rerun",
    }
);

/// A missing status reads (and is written back) as the empty word, as before it was typed.
impl Default for StepStatus {
    fn default() -> Self {
        Self::Other(String::new())
    }
}

#[allow(clippy::derivable_impls)]
impl Default for AckStatus {
    fn default() -> Self {
        Self::Unacked
    }
}

impl AckStatus {}

words!(
    open
    /// Where a recorded handoff was routed (a step record's `routed.status`, docs/PROTOCOL.md §2.2).
    pub RouteStatus {
        /// The next step was dispatched to its god's inbox.
        Dispatched = "dispatched",
        /// The next step's dispatch is held in `_quarantine` for an operator.
        AwaitingApproval = "awaiting_approval",
        /// The handoff completed the workflow.
        Completed = "completed",
        /// Recorded; nothing was dispatched.
        Recorded = "recorded",
        /// The next step publishes to a peer pantheon.
        Publishing = "publishing",
        /// The next step waits for a peer pantheon's reply.
        AwaitingReply = "awaiting_reply",
        /// A peer pantheon rejected the request the workflow waited for.
        Failed = "failed",
    }
);

#[allow(clippy::derivable_impls)]
impl Default for RouteStatus {
    fn default() -> Self {
        Self::Other(String::new())
    }
}

/// `context` of a handoff: what the step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HandoffContext {
    /// What the step did, in one paragraph for the next god; a missing or `null` summary reads as empty.
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    /// Decisions the step made; they are appended to the workflow's `context_bag`.
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    /// Paths of the files the step produced (checked against the workspace, never opened here).
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    /// Questions the step leaves open; empty lists are not written back.
    #[serde(
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub open_questions: Vec<String>,
    /// Gate names the sender claims passed; the Conductor checks them against the step's gates.
    #[serde(
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub gates_passed: Vec<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `routing` of a handoff or dispatch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Routing {
    /// The workflow definition id the sender means; absent: the state's definition is used.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_definition: Option<String>,
    /// The definition version the sender means; a mismatch is reported, not silently taken.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_version: Option<String>,
    /// The definition step this handoff completes, when it differs from `step`.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_step: Option<String>,
    /// A free-form priority word carried to the dispatch; the Conductor does not order by it.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A handoff (`shared/handoffs/{workflow_id}/{step}.json`), docs/PROTOCOL.md §2.1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Handoff {
    /// The handoff's own id (protocol id rules, see `store::ids`); a resubmission with the same id returns the first result.
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    /// The workflow this handoff belongs to; it names `conductor/state/{workflow_id}.json`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    /// The god that did the step; it must be the god the step was dispatched to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub from_god: String,
    /// The god the sender proposes next; the definition's routing may override it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub to_god: String,
    /// The step this handoff completes.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    /// What the step did and produced.
    #[serde(deserialize_with = "lenient::or_default")]
    pub context: HandoffContext,
    /// Optional routing hints (definition, version, step, priority).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// The W3C `traceparent` of the sender's span (docs/PROTOCOL.md §2.13): the workflow's trace
    /// starts from the first one, and the submit's span becomes its child.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One line of a dispatch's `context.history`: a step done before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryEntry {
    /// The step id that was done.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    /// The god that did it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    /// Its one-paragraph summary.
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context` of a dispatch: everything decided so far, so the next god never has to ask.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DispatchContext {
    /// The summary of the step that led here.
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    /// Every decision made so far in the workflow.
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    /// Every artifact produced so far in the workflow.
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    /// Questions still open.
    #[serde(deserialize_with = "lenient::strings")]
    pub open_questions: Vec<String>,
    /// Gates that passed on the way here.
    #[serde(deserialize_with = "lenient::strings")]
    pub gates_passed: Vec<String>,
    /// The steps done before, oldest first.
    #[serde(deserialize_with = "lenient::or_default")]
    pub history: Vec<HistoryEntry>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A dispatch: `conductor/pending/{god}/{handoff_id}.json`, `_quarantine/…` or `archive/{god}/…`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Dispatch {
    /// An optional id of this delivery, distinct from the handoff id when a foreign writer sets one.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatch_id: Option<String>,
    /// The handoff id this dispatch carries; it is also the file's name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    /// The workflow the dispatch belongs to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    /// The god whose handoff led here.
    #[serde(deserialize_with = "lenient::or_default")]
    pub from_god: String,
    /// The god that must act; it names the `pending/{god}/` directory.
    #[serde(deserialize_with = "lenient::or_default")]
    pub to_god: String,
    /// The step the receiving god is to do.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    /// Everything the receiving god needs to know.
    #[serde(deserialize_with = "lenient::or_default")]
    pub context: DispatchContext,
    /// Routing hints carried over from the handoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// The `traceparent` of this dispatch's span (docs/PROTOCOL.md §2.13): a god that passes it on
    /// (in its ack, its handoff, its own spans) joins the workflow's trace.
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<String>,
    /// When the Conductor wrote the dispatch (RFC 3339).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatched_at: Option<String>,
    /// Where the receiving god stands: pending until its first ack.
    #[serde(deserialize_with = "lenient::or_default")]
    pub ack_status: AckStatus,
    /// The god's estimate of when it will be done, as it wrote it.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub eta: Option<String>,
    /// The god's last ack message.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub message: Option<String>,
    /// When the last ack was recorded (RFC 3339).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub acked_at: Option<String>,
    /// Who acted last on it (a god or `operator`).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub by: Option<String>,
    /// Why it was held in `_quarantine` (the rule id or `step approval_required`).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub held_because: Option<String>,
    /// Why it went to the archive (withdrawn by an abort, rejected, superseded…).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub archive_reason: Option<String>,
    /// When the dispatch was moved to the archive (RFC 3339).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub archived_at: Option<String>,
    /// The wait for the first ack (docs/PROTOCOL.md §2.10); absent: no ack deadline.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub ack_wait: Option<String>,
    /// Deliveries, the first included, before the dispatch is dead-lettered.
    #[serde(
        default,
        deserialize_with = "super::delivery::opt_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_deliveries: Option<u32>,
    /// The waits after the second, third, … delivery.
    #[serde(
        default,
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub backoff: Vec<String>,
    /// One entry per delivery: when and to whom.
    #[serde(
        default,
        deserialize_with = "super::delivery::deliveries_de",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub deliveries: Vec<super::delivery::Delivery>,
    /// When the current delivery's ack (or progress ack) is due.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub ack_deadline: Option<String>,
    /// The definition's step, carried for the receiving god (an object, kept as written).
    #[serde(
        default,
        deserialize_with = "lenient::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub step_def: Option<Value>,
    /// The names of the step definition's fields left out of `step_def` for size.
    #[serde(
        default,
        deserialize_with = "lenient::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted: Option<Value>,
    /// Who released a held dispatch (`operator`, or the god acting).
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub approved_by: Option<String>,
    /// When it was released (RFC 3339).
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub approved_at: Option<String>,
    /// For a dispatch rerouted after a rejection: the god that rejected it.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub rerouted_from: Option<String>,
    /// When an accepted step times out (RFC 3339): its `timeout` after the accept, or the ETA of a
    /// later `pending` ack.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub step_deadline: Option<String>,
    /// The step's `timeout` as written (`2h`), beside `step_deadline`.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub step_timeout: Option<String>,
    /// When an accepted step's timeout passed and the dispatch was delivered again (RFC 3339).
    #[serde(
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub timed_out_at: Option<String>,
    /// When the dispatch was dead-lettered (RFC 3339); set before it is moved to the dead letters,
    /// so a dispatch with it outside them is a move a crash cut short.
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub dead_at: Option<String>,
    /// Why it was dead-lettered.
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub dead_reason: Option<String>,
    /// When the dead letter was retired (RFC 3339): it ended without a requeue and lies in
    /// `conductor/retired/{god}/`; set before it is moved there.
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub retired_at: Option<String>,
    /// Why it was retired (the operator's reason, or the act that ended it).
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub retired_reason: Option<String>,
    /// The handoff of the newer dispatch of its step that superseded it (a rerun's).
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub superseded_by: Option<String>,
    /// Set while a pause that ended still leaves another pause freezing the dispatch: when its ack
    /// deadline stopped running (docs/PROTOCOL.md §2.14).
    #[serde(
        default,
        deserialize_with = "lenient::only_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub frozen_since: Option<String>,
    /// One entry per pause whose resume shifted (or noted) the ack deadline, the newest last.
    #[serde(
        default,
        deserialize_with = "super::pause::frozen_de",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub frozen: Vec<super::pause::Frozen>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context_bag` of a workflow state: every decision and artifact so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextBag {
    /// Every decision made so far, in the order the handoffs reported them.
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    /// Every artifact produced so far.
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    /// Questions still open.
    #[serde(deserialize_with = "lenient::strings")]
    pub open_questions: Vec<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where a recorded handoff was routed (kept so a resubmission returns the first result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Routed {
    /// Where it went; a word this engine does not know is kept as written.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: RouteStatus,
    /// The god the handoff was routed to, if any.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub target_god: Option<String>,
    /// The step it was routed to, if any.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub target_step: Option<String>,
    /// Warnings the routing produced (unknown gates, a proposal overridden…).
    #[serde(deserialize_with = "lenient::strings")]
    pub warnings: Vec<String>,
    /// The rule that routed it, when a rule did.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub rule: Option<String>,
    /// Why its dispatch was held in `_quarantine` (the rule id, `step approval_required`, or the
    /// bridge's reason).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub held_because: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `step_history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepRecord {
    /// The step this entry records.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_id: String,
    /// The god that did (or was asked to do) the step.
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    /// `completed` or `rerun` as the engine writes it; a foreign writer's other words are kept.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: StepStatus,
    /// When the step was done (RFC 3339).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at: Option<String>,
    /// The step's summary, from its handoff.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub summary: Option<String>,
    /// Gates that passed for this step.
    #[serde(deserialize_with = "lenient::strings")]
    pub gates_passed: Vec<String>,
    /// The handoff that recorded this step; looked up to answer a resubmission.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub handoff_id: Option<String>,
    /// The artifacts this step produced (so abort can mark them).
    #[serde(
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub artifacts: Vec<String>,
    /// Where the handoff was routed, so a resubmission returns the first result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed: Option<Routed>,
    /// The `traceparent` the recorded handoff carried (for a `completed` ack's handoff: the ack's
    /// span), the parent of this submit's span.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `acks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckRecord {
    /// This ack's own id.
    #[serde(deserialize_with = "lenient::or_default")]
    pub ack_id: String,
    /// The dispatch (handoff id) the ack answers.
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    /// The god that acked (or the operator acting for it).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub god: Option<String>,
    /// The decision the ack recorded.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: AckStatus,
    /// The estimate given with an `accepted` or `in_progress` ack.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub eta: Option<String>,
    /// The free-text message given with the ack.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub message: Option<String>,
    /// When the ack was recorded (RFC 3339).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub acked_at: Option<String>,
    /// Who wrote it: the god itself or `operator`.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub by: Option<String>,
    /// For `completed`: the handoff recorded on the god's behalf.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub recorded_handoff_id: Option<String>,
    /// For `rejected`: the fallback god the step went to.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub rerouted_to: Option<String>,
    /// The `traceparent` the ack carried: the acking god's span, the parent of the ack's span.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `conductor/state/{workflow_id}.json` (docs/PROTOCOL.md §2.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkflowState {
    /// The workflow's id; it names this file.
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    /// The workflow definition it follows, if it was started from one.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_id: Option<String>,
    /// The version of that definition, pinned at start.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_version: Option<String>,
    /// Where the workflow stands; only the Conductor changes it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: WorkflowStatus,
    /// The step now being done, if any.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub current_step: Option<String>,
    /// The god the current step was dispatched to.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatched_to: Option<String>,
    /// Every decision and artifact so far.
    #[serde(deserialize_with = "lenient::or_default")]
    pub context_bag: ContextBag,
    /// Every step recorded, oldest first.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_history: Vec<StepRecord>,
    /// Every ack recorded, oldest first.
    #[serde(deserialize_with = "lenient::or_default")]
    pub acks: Vec<AckRecord>,
    /// When the workflow was started (RFC 3339).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub created: Option<String>,
    /// When the state was last written (RFC 3339).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub updated: Option<String>,
    /// The step or god whose handoff completes the workflow, from the definition.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub completion_target: Option<String>,
    /// When true, a failed step aborts the workflow instead of holding it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub abort_on_fail: bool,
    /// Why the workflow failed, when it did.
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub failure_reason: Option<String>,
    /// When it was aborted (RFC 3339).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub aborted_at: Option<String>,
    /// Who aborted it (a god, `operator` or `conductor`).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub aborted_by: Option<String>,
    /// The workflow's trace id (32 hex digits): the first handoff's, else a new one (§2.13).
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub trace_id: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl WorkflowState {
    /// The step-history entry that recorded `handoff_id`, if any.
    pub fn record_of(&self, handoff_id: &str) -> Option<&StepRecord> {
        self.step_history
            .iter()
            .find(|r| r.handoff_id.as_deref() == Some(handoff_id))
    }

    /// The `outbox_id` whose reply the workflow waits for at an `await_ack` step, if it does.
    pub fn awaiting_reply(&self) -> Option<&str> {
        awaiting_reply(self.extra.get(AWAITING_REPLY))
    }

    /// True when the workflow waits for a god to ack a dispatch ([`waits_on_a_god`]).
    pub fn waits_on_a_god(&self) -> bool {
        waits_on_a_god(&self.status, self.awaiting_reply().is_some())
    }
}

/// The state field an `await_ack` step's wait is recorded in (docs/PROTOCOL.md §2.2).
pub(crate) const AWAITING_REPLY: &str = "awaiting_reply";

/// The request id a state's `awaiting_reply` field names (absent, empty or not a string: none).
pub(crate) fn awaiting_reply(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The orphan rule, shared by `validate` and the console: a workflow waits for a god's ack when it is
/// `waiting_for_ack` and not waiting at an `await_ack` step for a peer's reply (`awaits_reply`: its
/// state's `awaiting_reply` names a request). Such a workflow with no dispatch in any inbox or
/// `_quarantine` is orphaned (`pantheon redispatch` writes it again). A workflow waiting for a reply
/// has no dispatch by design: it waits for a peer pantheon, and neither `redispatch` nor `abort`
/// is the remedy.
pub fn waits_on_a_god(status: &WorkflowStatus, awaits_reply: bool) -> bool {
    *status == WorkflowStatus::WaitingForAck && !awaits_reply
}

/// A completed step in an abort manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompletedStep {
    /// The step that was completed before the abort.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_id: String,
    /// The god that completed it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An artifact abort did not mark, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedArtifact {
    /// The artifact's path as the handoff named it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub path: String,
    /// Why it was not marked (outside the workspace, missing, a link…).
    #[serde(deserialize_with = "lenient::or_default")]
    pub reason: String,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `conductor/state/{workflow_id}.aborted.json` (docs/PROTOCOL.md §2.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AbortManifest {
    /// The aborted workflow.
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    /// Its definition, if any.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_id: Option<String>,
    /// The workflow's status at the abort (normally `aborted`).
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: WorkflowStatus,
    /// The step that was current when the workflow was aborted.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub failed_step: Option<String>,
    /// Why the workflow was aborted.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub failure_reason: Option<String>,
    /// Steps completed before the abort, so a human can undo them.
    #[serde(deserialize_with = "lenient::or_default")]
    pub completed_steps: Vec<CompletedStep>,
    /// Artifacts marked as belonging to an aborted workflow.
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts_marked: Vec<String>,
    /// Artifacts that could not be marked, with the reason.
    #[serde(deserialize_with = "lenient::or_default")]
    pub artifacts_skipped: Vec<SkippedArtifact>,
    /// Handoff ids of the dispatches withdrawn to the archive.
    #[serde(deserialize_with = "lenient::strings")]
    pub dispatches_withdrawn: Vec<String>,
    /// When the abort happened (RFC 3339).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub aborted_at: Option<String>,
    /// Who aborted.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub aborted_by: Option<String>,
    /// True when something could not be undone automatically and a human must look.
    #[serde(deserialize_with = "lenient::or_default")]
    pub requires_manual_review: bool,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Parses a JSON value into a model type, describing the failure for an `errors[]` list.
pub fn from_value<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Refusal> {
    serde_json::from_value(v).map_err(|e| e.to_string().into())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::Path;

    pub(crate) use crate::test_fixture::fixture_root as fixture;

    fn json(path: &Path) -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn every_foreign_state_and_manifest_parses_and_keeps_unknown_fields() {
        let dir = fixture().join("conductor/state");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".aborted.json") {
                let m: AbortManifest = from_value(json(&path)).unwrap();
                assert_eq!(m.status, WorkflowStatus::Aborted);
            } else if name.ends_with(".json") {
                let s: WorkflowState = from_value(json(&path)).unwrap();
                assert!(s.workflow_id.starts_with("wf_"), "{name}");
                seen += 1;
            }
        }
        assert_eq!(seen, 4);
        let s: WorkflowState = from_value(json(&dir.join("wf_1a2b3c4d.json"))).unwrap();
        assert_eq!(s.status, WorkflowStatus::InProgress);
        assert!(s.abort_on_fail);
        assert_eq!(s.step_history[0].extra["v2_dispatched"], Value::Bool(true));
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back["step_history"][0]["started"], "2026-06-15T06:00:00.5Z");
        let bug: WorkflowState = from_value(json(&dir.join("wf_bug_7.json"))).unwrap();
        assert_eq!(bug.acks[0].status, AckStatus::Pending);
        assert!(bug.acks[0].god.is_none());
    }

    #[test]
    fn every_foreign_dispatch_and_handoff_parses() {
        let root = fixture();
        for rel in [
            "conductor/pending/hephaestus/hof_20260614_abc123.json",
            "conductor/pending/marvin/hof_20260614_d00d01.json",
            "conductor/pending/thoth/wf_1a2b3c4d_active-goals.json",
        ] {
            let d: Dispatch = from_value(json(&root.join(rel))).unwrap();
            assert!(d.workflow_id.starts_with("wf_"), "{rel}");
        }
        let other: Dispatch = from_value(json(
            &root.join("conductor/pending/thoth/wf_1a2b3c4d_active-goals.json"),
        ))
        .unwrap();
        assert_eq!(other.ack_status, AckStatus::Unacked);
        assert!(other.dispatch_id.is_none());
        assert!(other.extra.contains_key("state"));
        let h: Handoff = from_value(json(
            &root.join("shared/handoffs/wf_deploy_42/research.json"),
        ))
        .unwrap();
        assert_eq!(h.context.gates_passed, vec!["state_gate"]);
    }

    /// The fields the engine writes into a dispatch and a step record itself are typed, declared in the
    /// order it writes them: a file it wrote reads and writes back byte for byte, an unknown key after
    /// them kept.
    #[test]
    fn engine_written_fields_are_typed_and_keep_the_bytes_of_a_file() {
        let text = r#"{
  "dispatch_id": "dsp_1",
  "handoff_id": "hof_20260614_abc123",
  "workflow_id": "wf_1",
  "from_god": "athena",
  "to_god": "hermes",
  "step": "build",
  "context": {
    "summary": "s",
    "decisions": [],
    "artifacts": [],
    "open_questions": [],
    "gates_passed": [],
    "history": []
  },
  "dispatched_at": "2026-06-14T10:00:00Z",
  "ack_status": "accepted",
  "held_because": "step approval_required",
  "ack_wait": "10m",
  "step_def": {
    "action": "implement"
  },
  "omitted": [
    "context.big"
  ],
  "approved_by": "operator",
  "approved_at": "2026-06-14T10:01:00Z",
  "rerouted_from": "apollo",
  "step_deadline": "2026-06-14T12:00:00Z",
  "step_timeout": "2h",
  "timed_out_at": "2026-06-14T11:00:00Z",
  "dead_at": "2026-06-14T12:30:00Z",
  "dead_reason": "timed out",
  "foreign": 1
}"#;
        let d: Dispatch = serde_json::from_str(text).unwrap();
        assert_eq!(d.step_deadline.as_deref(), Some("2026-06-14T12:00:00Z"));
        assert_eq!(d.dead_reason.as_deref(), Some("timed out"));
        assert_eq!(d.extra.keys().collect::<Vec<_>>(), ["foreign"]);
        assert_eq!(serde_json::to_string_pretty(&d).unwrap(), text);
        let routed = r#"{"status":"awaiting_approval","target_god":"hermes","target_step":"build","warnings":[],"rule":"r1","held_because":"rule r1","x":true}"#;
        let r: Routed = serde_json::from_str(routed).unwrap();
        assert_eq!(r.status, RouteStatus::AwaitingApproval);
        assert_eq!(r.held_because.as_deref(), Some("rule r1"));
        assert_eq!(serde_json::to_string(&r).unwrap(), routed);
    }

    #[test]
    fn unknown_statuses_survive_a_round_trip() {
        let s: WorkflowState =
            from_value(serde_json::json!({"status": "paused", "context_bag": null})).unwrap();
        assert_eq!(s.status, WorkflowStatus::Other("paused".into()));
        assert_eq!(serde_json::to_value(&s).unwrap()["status"], "paused");
        let d: Dispatch = from_value(serde_json::json!({"ack_status": "snoozed",
            "context": {"decisions": ["a", 3, {"k": 1}]}}))
        .unwrap();
        assert_eq!(d.ack_status, AckStatus::Other("snoozed".into()));
        assert_eq!(d.context.decisions, vec!["a", "3", "{\"k\":1}"]);
    }
}
