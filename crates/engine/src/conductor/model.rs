//! Tolerant serde types for the Conductor's files (docs/PROTOCOL.md §2): handoffs, dispatches, workflow state,
//! acks. Readers accept what foreign writers leave (missing fields, `null`s, non-string list items,
//! unknown statuses); unknown fields are kept in `extra` so a rewrite never loses them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Lenient field deserialisers shared by the model types.
pub mod lenient {
    use super::*;

    /// `null` (or a missing field, with `#[serde(default)]`) becomes `T::default()`.
    pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Default + Deserialize<'de>,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// A list of strings; a single string is a one-item list, non-string items are kept as their JSON
    /// text, `null` is empty.
    pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Vec::new(),
            Value::Array(items) => items.into_iter().map(text).collect(),
            other => vec![text(other)],
        })
    }

    /// An optional string; numbers and booleans are kept as their text, `null` is `None`.
    pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => None,
            other => Some(text(other)),
        })
    }

    /// A value as a display string: strings as is, anything else as compact JSON.
    pub fn text(v: Value) -> String {
        match v {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
}

macro_rules! open_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
            /// A value this engine does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// Every word this engine knows, in protocol order (without [`Self::Other`]).
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// True when `s` is one of [`Self::ALL`], spelled exactly.
            pub fn is_known(s: &str) -> bool {
                !matches!(Self::parse(s), Self::Other(_))
            }

            /// `a, b, c`: every known word, for messages.
            pub fn list() -> String {
                Self::ALL.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ")
            }

            /// The protocol's spelling.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Other(s) => s,
                }
            }

            /// Parses the protocol's spelling; anything else is kept as [`Self::Other`].
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(match Value::deserialize(d)? {
                    Value::String(s) => Self::parse(&s),
                    Value::Null => Self::Other(String::new()),
                    other => Self::Other(other.to_string()),
                })
            }
        }
    };
}

open_enum!(
    /// A workflow's status (docs/PROTOCOL.md §2.2).
    WorkflowStatus {
        InProgress = "in_progress",
        WaitingForAck = "waiting_for_ack",
        AwaitingApproval = "awaiting_approval",
        Completed = "completed",
        Aborted = "aborted",
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

open_enum!(
    /// A dispatch's acknowledgement status, and the status of an ack (docs/PROTOCOL.md §2.5).
    AckStatus {
        Unacked = "unacked",
        Accepted = "accepted",
        Pending = "pending",
        Rejected = "rejected",
        Completed = "completed",
        /// Withdrawn from an inbox by an abort (archive only).
        Withdrawn = "withdrawn",
    }
);

#[allow(clippy::derivable_impls)]
impl Default for AckStatus {
    fn default() -> Self {
        Self::Unacked
    }
}

impl AckStatus {
    /// True for the statuses that close a dispatch (`rejected`, `completed`, `withdrawn`).
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Rejected | Self::Completed | Self::Withdrawn)
    }
}

/// `context` of a handoff: what the step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandoffContext {
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    #[serde(
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub open_questions: Vec<String>,
    #[serde(
        deserialize_with = "lenient::strings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub gates_passed: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `routing` of a handoff or dispatch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Routing {
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_definition: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_version: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_step: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A handoff (`shared/handoffs/{workflow_id}/{step}.json`), docs/PROTOCOL.md §2.1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Handoff {
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub from_god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub to_god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub context: HandoffContext,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One line of a dispatch's `context.history`: a step done before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryEntry {
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context` of a dispatch: everything decided so far, so the next god never has to ask.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DispatchContext {
    #[serde(deserialize_with = "lenient::or_default")]
    pub summary: String,
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub open_questions: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub gates_passed: Vec<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub history: Vec<HistoryEntry>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A dispatch: `conductor/pending/{god}/{handoff_id}.json`, `_quarantine/…` or `archive/{god}/…`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Dispatch {
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatch_id: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub from_god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub to_god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub context: DispatchContext,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatched_at: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub ack_status: AckStatus,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub eta: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub message: Option<String>,
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
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context_bag` of a workflow state: every decision and artifact so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextBag {
    #[serde(deserialize_with = "lenient::strings")]
    pub decisions: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub open_questions: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where a recorded handoff was routed (kept so a resubmission returns the first result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Routed {
    /// `dispatched`, `awaiting_approval`, `completed` or `recorded`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: String,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub target_god: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub target_step: Option<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `step_history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepRecord {
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: String,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub summary: Option<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub gates_passed: Vec<String>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed: Option<Routed>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `acks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckRecord {
    #[serde(deserialize_with = "lenient::or_default")]
    pub ack_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub god: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: AckStatus,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub eta: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub acked_at: Option<String>,
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
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `conductor/state/{workflow_id}.json` (docs/PROTOCOL.md §2.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkflowState {
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_version: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: WorkflowStatus,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub current_step: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dispatched_to: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub context_bag: ContextBag,
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_history: Vec<StepRecord>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub acks: Vec<AckRecord>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub created: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub updated: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub completion_target: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub abort_on_fail: bool,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub failure_reason: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub aborted_at: Option<String>,
    #[serde(
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub aborted_by: Option<String>,
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
}

/// A completed step in an abort manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompletedStep {
    #[serde(deserialize_with = "lenient::or_default")]
    pub step_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An artifact abort did not mark, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedArtifact {
    #[serde(deserialize_with = "lenient::or_default")]
    pub path: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub reason: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `conductor/state/{workflow_id}.aborted.json` (docs/PROTOCOL.md §2.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AbortManifest {
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub definition_id: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub status: WorkflowStatus,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub failed_step: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub failure_reason: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub completed_steps: Vec<CompletedStep>,
    #[serde(deserialize_with = "lenient::strings")]
    pub artifacts_marked: Vec<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub artifacts_skipped: Vec<SkippedArtifact>,
    #[serde(deserialize_with = "lenient::strings")]
    pub dispatches_withdrawn: Vec<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub aborted_at: Option<String>,
    #[serde(deserialize_with = "lenient::opt_string")]
    pub aborted_by: Option<String>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub requires_manual_review: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Parses a JSON value into a model type, describing the failure for an `errors[]` list.
pub fn from_value<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
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
