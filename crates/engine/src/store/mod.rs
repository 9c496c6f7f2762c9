//! The storage layer every protocol module stands on: atomic writes, `flock` with a bounded wait,
//! tolerant reading, validated ids, timestamps and safe paths.

pub mod atomic;
pub mod ids;
pub mod layout;
pub mod limits;
pub mod lock;
pub mod paths;
pub mod read;
pub mod safe;
pub mod settings;
pub mod time;
pub mod yaml;

pub use ids::{
    ACK_ID_PATTERN, AckId, DefinitionId, Director, FREE_TEXT_MAX, FREE_TEXT_RULE, GodName,
    HANDOFF_ID_PATTERN, HandoffId, NAME_PATTERN, RuleId, StepId, TrackName, WORKFLOW_ID_PATTERN,
    WorkerId, WorkflowId, check_free_text, decode_key, encode_key, generate_dispatch_id,
    generate_message_id, is_free_text, is_valid_ack_id, is_valid_handoff_id, is_valid_name,
    is_valid_workflow_id,
};
pub use paths::Root;
pub use settings::Settings;

/// Serialises a value the engine built itself (its own record types, `serde_json::Value`s, strings) to
/// JSON text. Serialising these cannot fail: they hold no map with non-string keys and no type whose
/// `Serialize` refuses. This is the one place the engine accepts a panic for serialisation, so the crate's
/// `expect_used` lint can hold everywhere else.
#[allow(clippy::expect_used)]
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(value: &T, pretty: bool) -> Vec<u8> {
    let out = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    };
    out.expect("the engine's own values always serialise")
}

/// `json_text` as a `serde_json::Value`.
#[allow(clippy::expect_used)]
pub fn json_value<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("the engine's own values always serialise")
}

/// [`json_text`] as a `String` (compact).
pub(crate) fn json_string<T: serde::Serialize + ?Sized>(value: &T) -> String {
    String::from_utf8_lossy(&json_text(value, false)).into_owned()
}
