//! The stdio transport: one JSON-RPC message per line, every bad line answered.
//!
//! The SDK's own line transport skips input that is not JSON and lines over its limit without a
//! word, so a host that sent them waits for an answer that never comes. This one answers as
//! JSON-RPC 2.0 says: `-32700` (parse error, `id: null`) for a line that is not JSON or that is
//! too long to read whose id cannot be found; `-32600` (invalid request) for JSON that is no
//! message, answered with its `id` when it has one (also for an over-long line whose `id` comes
//! early); `-32602` (invalid params) for a `tools/call` whose `params` or `arguments` is not an
//! object. Notifications (no `id`) that are not understood are skipped, as JSON-RPC requires.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest request line read (the SDK's default: 16 MiB); longer ones are answered and dropped.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How much of an over-long line is kept to find its `id`.
const ID_PREFIX_BYTES: usize = 4096;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// Line-delimited JSON-RPC over a reader and a writer (stdin and stdout for `pantheon mcp`).
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    write: Arc<Mutex<W>>,
    line: Vec<u8>,
    max_line: usize,
    /// Dropping the rest of an over-long line; its start is kept in `prefix`.
    discarding: bool,
    prefix: Vec<u8>,
}

/// The transport of `pantheon mcp`: stdin and stdout.
pub(crate) fn stdio() -> LineTransport<tokio::io::Stdin, tokio::io::Stdout> {
    LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), MAX_LINE_BYTES)
}

enum Line {
    Complete,
    Oversized,
    Eof,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static> LineTransport<R, W> {
    pub(crate) fn new(read: R, write: W, max_line: usize) -> Self {
        Self {
            read: BufReader::new(read),
            write: Arc::new(Mutex::new(write)),
            line: Vec::new(),
            max_line,
            discarding: false,
            prefix: Vec::new(),
        }
    }

    /// Reads one line into `self.line`, never holding more than `max_line` bytes. Cancel-safe:
    /// a partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut ended_oversized = false;
            if self.discarding {
                ended_oversized = newline.is_some();
            } else if self.line.len().saturating_add(take) > self.max_line {
                self.prefix = std::mem::take(&mut self.line);
                let room = ID_PREFIX_BYTES.saturating_sub(self.prefix.len());
                self.prefix.extend_from_slice(&available[..take.min(room)]);
                self.prefix.truncate(ID_PREFIX_BYTES);
                self.discarding = true;
                ended_oversized = newline.is_some();
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if ended_oversized {
                self.discarding = false;
                return Ok(Line::Oversized);
            }
            if newline.is_some() && !self.discarding {
                return Ok(Line::Complete);
            }
        }
    }

    /// Writes an error answer; false when the host is gone.
    fn reply(&self, reply: Value) -> impl Future<Output = bool> + Send + 'static {
        let write = self.write.clone();
        async move { write_line(&write, &reply).await.is_ok() }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    value: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    let mut w = write.lock().await;
    w.write_all(&bytes).await?;
    w.flush().await
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// What to do with one complete line: hand a message to the server, answer an error, or skip it.
enum Verdict {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Reply(Value),
    Skip,
}

fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Reply(error_reply(
                Value::Null,
                PARSE_ERROR,
                format!("parse error: the line is not JSON ({e})"),
            ));
        }
    };
    let Some(message) = value.as_object() else {
        return Verdict::Reply(error_reply(
            Value::Null,
            INVALID_REQUEST,
            "invalid request: a message is one JSON-RPC object per line".into(),
        ));
    };
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    if let (Some(id), Some("tools/call")) = (&id, message.get("method").and_then(Value::as_str)) {
        let params = message.get("params");
        let arguments = params.and_then(|p| p.get("arguments"));
        let bad = match (params, arguments) {
            (Some(p), _) if !p.is_object() => Some(("params", p)),
            (_, Some(a)) if !(a.is_object() || a.is_null()) => Some(("arguments", a)),
            _ => None,
        };
        if let Some((what, got)) = bad {
            return Verdict::Reply(error_reply(
                id.clone(),
                INVALID_PARAMS,
                format!(
                    "invalid params: tools/call {what} must be an object, got {}",
                    kind_of(got)
                ),
            ));
        }
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(m) => Verdict::Message(Box::new(m)),
        Err(e) => match id {
            Some(id) => Verdict::Reply(error_reply(
                id,
                INVALID_REQUEST,
                format!("invalid request: {e}"),
            )),
            None => {
                tracing::debug!(error = %e, "skipping a notification that is not understood");
                Verdict::Skip
            }
        },
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The top-level `"id"` of a JSON object cut short, when it comes before the cut (hosts write
/// `id` before `params`, so it usually does).
fn id_of_prefix(prefix: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < prefix.len() {
        match prefix[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let start = i;
                i += 1;
                while i < prefix.len() && prefix[i] != b'"' {
                    i += if prefix[i] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && prefix.get(start..=i) == Some(b"\"id\"") {
                    let rest = prefix.get(i + 1..)?;
                    let rest = rest.trim_ascii_start().strip_prefix(b":")?;
                    let mut values =
                        serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
                    return match values.next()? {
                        Ok(id) if id.is_string() || id.is_number() => Some(id),
                        _ => None,
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move { write_line(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read standard input");
                    return None;
                }
                Ok(Line::Oversized) => {
                    let limit = self.max_line;
                    let prefix = std::mem::take(&mut self.prefix);
                    tracing::warn!(limit, "request line over the limit, answered and dropped");
                    let reply = match id_of_prefix(&prefix) {
                        Some(id) => error_reply(
                            id,
                            INVALID_REQUEST,
                            format!(
                                "invalid request: the message is longer than the limit of {limit} bytes"
                            ),
                        ),
                        None => error_reply(
                            Value::Null,
                            PARSE_ERROR,
                            format!(
                                "parse error: a line longer than the limit of {limit} bytes was dropped"
                            ),
                        ),
                    };
                    if !self.reply(reply).await {
                        return None;
                    }
                }
                Ok(Line::Complete) => {
                    let verdict = judge(&self.line);
                    self.line.clear();
                    match verdict {
                        Verdict::Message(m) => return Some(*m),
                        Verdict::Skip => {}
                        Verdict::Reply(reply) => {
                            tracing::info!(%reply, "bad input answered");
                            if !self.reply(reply).await {
                                return None;
                            }
                        }
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_cut_message_is_found_at_the_top_level_only() {
        assert_eq!(
            id_of_prefix(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#),
            Some(json!(7))
        );
        assert_eq!(
            id_of_prefix(br#"{"params":{"id":1,"x":"\"id\":2"},"id":"a-1","meth"#),
            Some(json!("a-1"))
        );
        assert_eq!(
            id_of_prefix(br#"{"params":{"id":1,"arguments":{"x":"aaaa"#),
            None
        );
        assert_eq!(id_of_prefix(b"not json at all"), None);
    }
}
