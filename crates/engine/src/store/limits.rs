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
/// compact JSON is over `max` bytes. Every post and submit passes here: nothing is allocated for a
/// document within its limits (the pointer is built only for a field over its limit, the length is
/// counted as the JSON is written, stopping at `max`).
pub(crate) fn check_document(what: &str, value: &Value, max: usize) -> Result<()> {
    if let Some((pointer, len)) = long_string(value) {
        let pointer = if pointer.is_empty() {
            "/".into()
        } else {
            pointer
        };
        return Err(Error::refused(format!(
            "{what} field {pointer} is {len} bytes, over the {MAX_FIELD_BYTES}-byte limit per field; \
             put large content in a file and list it in artifacts"
        )));
    }
    let mut count = Count { len: 0, max };
    if serde_json::to_writer(&mut count, value).is_err() || count.len > max {
        let len = serde_json::to_vec(value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        return Err(Error::refused(format!(
            "{what} is {len} bytes, over the {max}-byte limit; put large content in a file and list it \
             in artifacts"
        )));
    }
    Ok(())
}

/// The JSON pointer (RFC 6901; empty for `v` itself) and length of the first string in `v` over
/// [`MAX_FIELD_BYTES`].
fn long_string(v: &Value) -> Option<(String, usize)> {
    match v {
        Value::String(s) if s.len() > MAX_FIELD_BYTES => Some((String::new(), s.len())),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| long_string(x).map(|(at, len)| (format!("/{i}{at}"), len))),
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            long_string(x).map(|(at, len)| {
                let key = k.replace('~', "~0").replace('/', "~1");
                (format!("/{key}{at}"), len)
            })
        }),
        _ => None,
    }
}

/// Counts the bytes written to it, failing once they pass `max` (so a huge document is not written
/// out whole to be measured).
struct Count {
    len: usize,
    max: usize,
}

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.len = self.len.saturating_add(buf.len());
        if self.len > self.max {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
        // The pointer names the field in RFC 6901's escapes, through arrays, or the whole value.
        let big = "z".repeat(MAX_FIELD_BYTES + 1);
        let nested = serde_json::json!({"ok": ["a"], "a/b~c": [1, {"x": big}]});
        let err = check_document("ack", &nested, usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ack field /a~1b~0c/1/x is 262145 bytes"),
            "{err}"
        );
        let err = check_document("payload", &serde_json::json!(big), usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("payload field / is"), "{err}");
        // The whole document's length, exact at the limit and one over it.
        let doc = serde_json::json!({"k": "v".repeat(100)});
        let len = serde_json::to_vec(&doc).unwrap().len();
        check_document("post", &doc, len).unwrap();
        let err = check_document("post", &doc, len - 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("post is {len} bytes")), "{err}");
    }
}
