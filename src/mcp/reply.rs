//! Turning an engine call into a tool result.
//!
//! Every engine call runs on tokio's blocking pool (it may wait on an `flock` or on file-system
//! events), so one slow call never stalls the others. Success is the engine's result as structured
//! content plus the same JSON as text; a refusal is a tool result with `isError: true` whose text
//! is the engine's message. Even a panic inside the engine becomes a refused call, never a dead
//! server.
//!
//! A refusal carries no structured content: the official TypeScript client checks any structured
//! content against the tool's `outputSchema`, error or not, and a refusal shaped `{error, kind}`
//! would reach the agent as that client's own schema error instead of the message. The kind of
//! refusal (and the violations of an invalid document) travel in the result's `_meta` under
//! [`REFUSAL_META`], which no client validates.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use crate::engine::{Error, Violation};

/// Runs `call` on the blocking pool and turns its outcome into the tool's result.
pub(crate) async fn blocking<T, F>(tool: &'static str, call: F) -> CallToolResult
where
    F: FnOnce() -> Result<T, Error> + Send + 'static,
    T: Serialize + Send + 'static,
{
    let started = Instant::now();
    let outcome = tokio::task::spawn_blocking(call).await;
    let ms = started.elapsed().as_millis() as u64;
    match outcome {
        Ok(Ok(value)) => match serde_json::to_value(value) {
            Ok(value) => {
                tracing::info!(tool, ms, "ok");
                success(value)
            }
            Err(e) => {
                tracing::error!(tool, ms, error = %e, "result does not serialise");
                failure(
                    format!("internal error: the result of {tool} could not be serialised: {e}"),
                    "internal",
                    None,
                )
            }
        },
        Ok(Err(e)) => {
            tracing::info!(tool, ms, error = %e, "refused");
            refusal(&e)
        }
        Err(join) => {
            let why = if join.is_panic() {
                let payload = join.into_panic();
                payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string())
            } else {
                "the call was cancelled".to_string()
            };
            tracing::error!(tool, ms, why, "engine call failed");
            failure(
                format!(
                    "internal error in {tool}: {why} (the server is still running; report this)"
                ),
                "internal",
                None,
            )
        }
    }
}

/// A successful result: structured content, and the same JSON as text for hosts that only read
/// text. Results are JSON objects (the shapes of docs/PROTOCOL.md); anything else is wrapped as `{"result": …}`
/// so that structured content stays an object, as MCP requires.
pub(crate) fn success(value: Value) -> CallToolResult {
    let value = match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    };
    CallToolResult::structured(value)
}

/// The `_meta` key of a refusal's `{kind, violations?}`.
pub(crate) const REFUSAL_META: &str = "pantheon/refusal";

/// A refusal by the engine: `isError: true`, the engine's message as text, and
/// `{kind, violations?}` in `_meta` for callers that branch on the kind.
pub(crate) fn refusal(e: &Error) -> CallToolResult {
    let (kind, violations) = match e {
        Error::InvalidName { .. } => ("invalid_name", None),
        Error::Invalid { violations, .. } => ("invalid", Some(clipped(violations))),
        Error::NotFound(_) => ("not_found", None),
        Error::Refused(_) => ("refused", None),
        Error::LockTimeout { .. } => ("lock_timeout", None),
        Error::Corrupt { .. } => ("corrupt", None),
        Error::Io { .. } => ("io", None),
    };
    failure(e.to_string(), kind, violations)
}

/// A call outside the caller's rights: `isError: true`, the message naming the right, kind
/// `forbidden`.
pub(crate) fn forbidden(message: String) -> CallToolResult {
    failure(message, "forbidden", None)
}

/// Arguments that do not fit the tool's input schema: `isError: true`, one line per violation.
pub(crate) fn bad_arguments(tool: &str, violations: Vec<String>) -> CallToolResult {
    let violations: Vec<String> = violations.iter().map(|v| clip(v, MAX_LINE)).collect();
    let message = format!(
        "invalid arguments for {tool}:\n{}",
        violations
            .iter()
            .map(|v| format!("  - {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    failure(message, "invalid_arguments", Some(json!(violations)))
}

/// The longest violation line sent back, in bytes: a message names the bad value, and an agent that
/// sent a 10 MiB string must not get it back inside a 10 MiB error.
const MAX_LINE: usize = 512;

/// The longest error message sent back, in bytes (each line is cut to [`MAX_LINE`] first; this
/// bounds a message with very many lines).
const MAX_MESSAGE: usize = 16 * 1024;

/// `text` cut to at most `max` bytes at a character boundary, saying how long it was.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// The engine's violations as `{pointer, message}` objects, each part cut to [`MAX_LINE`].
fn clipped(violations: &[Violation]) -> Value {
    json!(
        violations
            .iter()
            .map(|v| json!({
                "pointer": clip(&v.pointer, MAX_LINE),
                "message": clip(&v.message, MAX_LINE),
            }))
            .collect::<Vec<_>>()
    )
}

fn failure(message: String, kind: &str, violations: Option<Value>) -> CallToolResult {
    let message = clip(
        &message
            .lines()
            .map(|l| clip(l, MAX_LINE))
            .collect::<Vec<_>>()
            .join("\n"),
        MAX_MESSAGE,
    );
    let mut refusal = json!({ "kind": kind });
    if let Some(v) = violations {
        refusal["violations"] = v;
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    let mut meta = rmcp::model::MetaObject::new();
    meta.insert(REFUSAL_META.to_string(), refusal);
    result.meta = Some(meta);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(r: &CallToolResult) -> String {
        serde_json::to_string(r).unwrap()
    }

    fn text_only(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn a_refusal_is_text_with_its_kind_in_meta_and_no_structured_content() {
        let r = refusal(&Error::NotFound("no dispatch hof_1 for marvin".into()));
        assert_eq!(r.is_error, Some(true));
        assert!(r.structured_content.is_none());
        assert_eq!(text_only(&r), "no dispatch hof_1 for marvin");
        let meta = r.meta.as_ref().expect("meta");
        assert_eq!(meta.get(REFUSAL_META), Some(&json!({"kind": "not_found"})));
    }

    #[test]
    fn a_huge_value_is_not_echoed_whole_in_a_refusal() {
        let huge = "é".repeat(5 << 20); // 10 MiB, two bytes a character
        let r = bad_arguments(
            "conductor.ack",
            vec![format!("/god: {huge:?} is not valid")],
        );
        let all = text_of(&r);
        assert!(all.len() < 4 * 1024, "{} bytes", all.len());
        assert!(all.contains("/god: "), "{all}");
        assert!(all.contains("bytes in all"), "{all}");
        assert_eq!(r.is_error, Some(true));

        let e = Error::Invalid {
            what: "handoff".into(),
            violations: vec![
                Violation {
                    pointer: "/summary".into(),
                    message: format!("summary {huge:?} is too long"),
                };
                3
            ],
        };
        let r = refusal(&e);
        let all = text_of(&r);
        assert!(all.len() < 8 * 1024, "{} bytes", all.len());
        assert!(
            r.structured_content.is_none(),
            "no structure to fail a schema"
        );
        let message = text_only(&r);
        assert_eq!(message.matches("summary ").count(), 3, "{message}");
        assert_eq!(message.lines().count(), 4, "{message}");
    }

    #[test]
    fn clip_keeps_short_text_and_cuts_at_a_character_boundary() {
        assert_eq!(clip("short", 10), "short");
        let cut = clip("ééé", 3); // the boundary after 1.5 characters is not one
        assert_eq!(cut, "é… (6 bytes in all)");
    }
}
