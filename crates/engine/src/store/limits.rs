//! Every size the engine accepts, in one place (docs/THREAT-MODEL.md, "Limits"). Input is refused at
//! the door when a file it would produce could not be read back under [`MAX_FILE_BYTES`].

use serde_json::Value;

use crate::error::{Error, Result};

/// Largest JSON file any reader accepts (state, dispatch, handoff, locks, workers).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest handoff accepted (its JSON as submitted); the dispatch carries its context, so this also
/// bounds every dispatch.
pub const MAX_HANDOFF_BYTES: usize = 1024 * 1024;
/// Largest acknowledgement accepted.
pub(crate) const MAX_ACK_BYTES: usize = 1024 * 1024;
/// Largest single string value in a handoff, an ack or a bus payload.
pub(crate) const MAX_FIELD_BYTES: usize = 256 * 1024;
/// Largest bus message (one `queue.jsonl` line).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Largest workflow state written: half the read limit, so a state always reads back and abort works.
pub(crate) const MAX_STATE_BYTES: usize = 32 * 1024 * 1024;

/// Refuses `value` (a `what` such as "handoff") when any string in it is over [`MAX_FIELD_BYTES`] or its
/// compact JSON is over `max` bytes.
pub(crate) fn check_document(what: &str, value: &Value, max: usize) -> Result<()> {
    if let Some((pointer, len)) = long_string(value, String::new()) {
        return Err(Error::refused(format!(
            "{what} field {pointer} is {len} bytes, over the {MAX_FIELD_BYTES}-byte limit per field; \
             put large content in a file and list it in artifacts"
        )));
    }
    let len = serde_json::to_vec(value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if len > max {
        return Err(Error::refused(format!(
            "{what} is {len} bytes, over the {max}-byte limit; put large content in a file and list it \
             in artifacts"
        )));
    }
    Ok(())
}

fn long_string(v: &Value, at: String) -> Option<(String, usize)> {
    match v {
        Value::String(s) if s.len() > MAX_FIELD_BYTES => {
            Some((if at.is_empty() { "/".into() } else { at }, s.len()))
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| long_string(x, format!("{at}/{i}"))),
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            long_string(
                x,
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
            )
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_fields_and_documents_are_named() {
        let big = "x".repeat(MAX_FIELD_BYTES + 1);
        let err = check_document(
            "handoff",
            &serde_json::json!({"context": {"summary": big}}),
            MAX_HANDOFF_BYTES,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/context/summary") && err.contains("per field"),
            "{err}"
        );
        let many: Vec<String> = (0..10).map(|_| "y".repeat(MAX_FIELD_BYTES / 2)).collect();
        let err = check_document(
            "handoff",
            &serde_json::json!({"d": many}),
            MAX_HANDOFF_BYTES,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("over the 1048576-byte limit"), "{err}");
        check_document("handoff", &serde_json::json!({"a": "b"}), MAX_HANDOFF_BYTES).unwrap();
    }
}
