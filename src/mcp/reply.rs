//! Turning an engine call into a tool result.
//!
//! Every engine call runs on tokio's blocking pool (it may wait on an `flock` or on file-system
//! events), so one slow call never stalls the others. Success is the engine's result as structured
//! content plus the same JSON as text; a refusal is a tool result with `isError: true` whose text
//! is the engine's message. Even a panic inside the engine becomes a refused call, never a dead
//! server.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use crate::engine::error::Error;

/// Runs `call` on the blocking pool and turns its outcome into the tool's result.
pub async fn blocking<T, F>(tool: &'static str, call: F) -> CallToolResult
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
pub fn success(value: Value) -> CallToolResult {
    let value = match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    };
    CallToolResult::structured(value)
}

/// A refusal by the engine: `isError: true`, the engine's message as text, and
/// `{error, kind, violations?}` as structured content for callers that branch on the kind.
pub fn refusal(e: &Error) -> CallToolResult {
    let (kind, violations) = match e {
        Error::InvalidName { .. } => ("invalid_name", None),
        Error::Invalid { violations, .. } => ("invalid", Some(json!(violations))),
        Error::NotFound(_) => ("not_found", None),
        Error::Refused(_) => ("refused", None),
        Error::LockTimeout { .. } => ("lock_timeout", None),
        Error::Corrupt { .. } => ("corrupt", None),
        Error::Io { .. } => ("io", None),
    };
    failure(e.to_string(), kind, violations)
}

/// Arguments that do not fit the tool's input schema: `isError: true`, one line per violation.
pub fn bad_arguments(tool: &str, violations: Vec<String>) -> CallToolResult {
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

fn failure(message: String, kind: &str, violations: Option<Value>) -> CallToolResult {
    let mut structured = json!({ "error": message, "kind": kind });
    if let Some(v) = violations {
        structured["violations"] = v;
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    result.structured_content = Some(structured);
    result
}
