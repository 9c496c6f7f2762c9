//! The A2A wire: a bounded blocking HTTP client (ureq), JSON-RPC calls, and the lines of a
//! Server-Sent Events stream. Every size is bounded and every call has a deadline, so a hostile or
//! down agent is an error with its reason, never a hang or an unbounded allocation.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use serde_json::{Value, json};

/// The largest agent card read (a card is a few KiB; signed, with many skills, tens).
pub(crate) const MAX_CARD_BYTES: u64 = 256 * 1024;
/// The largest JSON-RPC response read (a page of tasks with their history and artifacts).
pub(crate) const MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// The longest line of an event stream (one event's `data:`).
pub(crate) const MAX_SSE_LINE: usize = 1024 * 1024;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one call may take in all (connect, send, headers and body).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stream may stay silent before it is dropped (and opened again if still wanted).
pub(crate) const STREAM_IDLE: Duration = Duration::from_secs(30);

/// The JSON-RPC protocol generation an agent is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A2A 1.0: `SendMessage`, `GetTask`, `ListTasks`, `SubscribeToTask`; the `A2A-Version: 1.0`
    /// header; protobuf JSON (`TASK_STATE_INPUT_REQUIRED`, `ROLE_USER`).
    V1,
    /// A2A 0.3: `message/send`, `tasks/get`, `tasks/list`, `tasks/resubscribe`; `kind` fields,
    /// `input-required`, `user`.
    V03,
}

impl Dialect {
    /// The method name for `what` in this dialect.
    pub(crate) fn method(self, what: Method) -> &'static str {
        match (self, what) {
            (Dialect::V1, Method::Send) => "SendMessage",
            (Dialect::V1, Method::Get) => "GetTask",
            (Dialect::V1, Method::List) => "ListTasks",
            (Dialect::V1, Method::Subscribe) => "SubscribeToTask",
            (Dialect::V03, Method::Send) => "message/send",
            (Dialect::V03, Method::Get) => "tasks/get",
            (Dialect::V03, Method::List) => "tasks/list",
            (Dialect::V03, Method::Subscribe) => "tasks/resubscribe",
        }
    }

    /// The protocol version as the operator reads it.
    pub(crate) fn version(self) -> &'static str {
        match self {
            Dialect::V1 => "1.0",
            Dialect::V03 => "0.3",
        }
    }
}

/// The calls the source makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Send,
    Get,
    List,
    Subscribe,
}

/// Why a call failed: the agent could not be reached or answered badly (`Transport`), or it
/// answered with a JSON-RPC error (`Rpc`, with its code, so "method not found" can be told apart).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallError {
    Transport(String),
    Rpc { code: i64, message: String },
}

/// JSON-RPC's "method not found".
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Transport(s) => f.write_str(s),
            CallError::Rpc { code, message } => {
                write!(f, "the agent answered error {code}: {message}")
            }
        }
    }
}

/// The HTTP client, one per source (its connections are kept alive between polls).
#[derive(Clone)]
pub(crate) struct Http {
    calls: ureq::Agent,
    streams: ureq::Agent,
}

impl Default for Http {
    fn default() -> Self {
        Self::new()
    }
}

impl Http {
    /// A client whose every call has the deadlines above; streams have a per-read deadline instead.
    pub(crate) fn new() -> Self {
        let base = || {
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(CONNECT_TIMEOUT))
                .max_redirects(3)
                .max_response_header_size(64 * 1024)
                .user_agent(concat!("pantheon/", env!("CARGO_PKG_VERSION")))
        };
        let calls = base()
            .timeout_global(Some(CALL_TIMEOUT))
            .build()
            .new_agent();
        let streams = base()
            .timeout_recv_response(Some(CALL_TIMEOUT))
            .timeout_per_read(Some(STREAM_IDLE))
            .build()
            .new_agent();
        Self { calls, streams }
    }

    /// GETs `url` and parses it as JSON, at most `limit` bytes. `Ok(None)` on 404 (the caller tries
    /// the next name).
    pub(crate) fn get_json(&self, url: &str, limit: u64) -> Result<Option<Value>, String> {
        let mut resp = self
            .calls
            .get(url)
            .header("Accept", "application/json")
            .call()
            .map_err(|e| reach_error(url, &e))?;
        let status = resp.status().as_u16();
        if status == 404 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            return Err(format!("{url} answered HTTP {status}"));
        }
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| body_error(url, limit, &e))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{url} is not JSON: {e}"))
    }

    /// One JSON-RPC call; its `result`, or why not. A 1.0 method (`ListTasks`) carries the
    /// `A2A-Version: 1.0` header, a 0.3 one (`tasks/list`) none (an agent reads no header as 0.3).
    pub(crate) fn call(&self, url: &str, method: &str, params: Value) -> Result<Value, CallError> {
        let body = request_body(method, params);
        let mut req = self
            .calls
            .post(url)
            .header("Content-Type", "application/json");
        if is_1_0(method) {
            req = req.header("A2A-Version", "1.0");
        }
        let mut resp = req
            .send(body.as_bytes())
            .map_err(|e| CallError::Transport(reach_error(url, &e)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(|e| CallError::Transport(body_error(url, MAX_RESPONSE_BYTES, &e)))?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            CallError::Transport(format!(
                "{method} at {url} answered HTTP {status} with no JSON-RPC reply ({e})"
            ))
        })?;
        rpc_result(value).map_err(|e| match e {
            CallError::Transport(s) => CallError::Transport(format!("{method} at {url}: {s}")),
            rpc => rpc,
        })
    }

    /// Opens a streaming call (`SubscribeToTask`, `tasks/resubscribe`): its events as lines.
    pub(crate) fn stream(
        &self,
        url: &str,
        method: &str,
        params: Value,
    ) -> Result<SseLines, String> {
        let body = request_body(method, params);
        let mut req = self
            .streams
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "text/event-stream");
        if is_1_0(method) {
            req = req.header("A2A-Version", "1.0");
        }
        let resp = req
            .send(body.as_bytes())
            .map_err(|e| reach_error(url, &e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(format!("{method} at {url} answered HTTP {status}"));
        }
        let reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        Ok(SseLines {
            reader: BufReader::new(Box::new(reader)),
        })
    }
}

/// 1.0's method names are words (`SendMessage`); 0.3's are paths (`message/send`).
fn is_1_0(method: &str) -> bool {
    !method.contains('/')
}

fn request_body(method: &str, params: Value) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A JSON-RPC reply's `result`, or its `error` as `CallError::Rpc`.
pub(crate) fn rpc_result(reply: Value) -> Result<Value, CallError> {
    let Value::Object(mut map) = reply else {
        return Err(CallError::Transport(
            "the reply is not a JSON-RPC object".into(),
        ));
    };
    if let Some(err) = map.remove("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .chars()
            .take(300)
            .collect();
        return Err(CallError::Rpc { code, message });
    }
    map.remove("result")
        .ok_or_else(|| CallError::Transport("the reply has neither result nor error".into()))
}

fn reach_error(url: &str, e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("{url} did not answer in time ({e})"),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("{url} refused the connection: is the agent running?")
        }
        ureq::Error::HostNotFound => format!("{url}: host not found"),
        _ => format!("{url} cannot be reached: {e}"),
    }
}

fn body_error(url: &str, limit: u64, e: &ureq::Error) -> String {
    match e {
        ureq::Error::BodyExceedsLimit(_) => {
            format!(
                "{url} answered more than {} KiB: refused as hostile",
                limit / 1024
            )
        }
        _ => reach_error(url, e),
    }
}

/// The `data:` payloads of a Server-Sent Events stream, each line bounded.
pub(crate) struct SseLines {
    reader: BufReader<Box<dyn Read + Send>>,
}

impl SseLines {
    /// The next event's data (its `data:` lines joined), `Ok(None)` at the end of the stream.
    pub(crate) fn next_event(&mut self) -> Result<Option<String>, String> {
        let mut data = String::new();
        loop {
            let Some(line) = read_line(&mut self.reader, MAX_SSE_LINE)? else {
                return Ok((!data.is_empty()).then_some(data));
            };
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                if !data.is_empty() {
                    return Ok(Some(data));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("data:") {
                if data.len() + rest.len() > MAX_SSE_LINE {
                    return Err(format!(
                        "an event is over {} KiB: refused as hostile",
                        MAX_SSE_LINE / 1024
                    ));
                }
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
    }
}

/// One line (without its `\n`), at most `limit` bytes; `Ok(None)` at the end of the input.
fn read_line(reader: &mut impl BufRead, limit: usize) -> Result<Option<String>, String> {
    let mut buf = Vec::new();
    let mut take = reader.take(limit as u64 + 1);
    let n = take
        .read_until(b'\n', &mut buf)
        .map_err(|e| format!("the stream broke: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > limit {
        return Err(format!(
            "a stream line is over {} KiB: refused as hostile",
            limit / 1024
        ));
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_join_data_lines_and_refuse_a_long_line() {
        let input = b"event: x\ndata: {\"a\":1}\n\n: comment\ndata: one\r\ndata:two\n\n".to_vec();
        let mut lines = SseLines {
            reader: BufReader::new(Box::new(std::io::Cursor::new(input))),
        };
        assert_eq!(lines.next_event().unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(lines.next_event().unwrap().as_deref(), Some("one\ntwo"));
        assert_eq!(lines.next_event().unwrap(), None);

        let mut long = b"data: ".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_SSE_LINE + 10));
        let mut lines = SseLines {
            reader: BufReader::new(Box::new(std::io::Cursor::new(long))),
        };
        let err = lines.next_event().unwrap_err();
        assert!(err.contains("refused as hostile"), "{err}");
    }

    #[test]
    fn rpc_errors_keep_their_code() {
        let reply = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}});
        assert_eq!(
            rpc_result(reply),
            Err(CallError::Rpc {
                code: METHOD_NOT_FOUND,
                message: "Method not found".into()
            })
        );
        assert_eq!(rpc_result(json!({"result": {"x": 1}})), Ok(json!({"x": 1})));
        assert!(matches!(
            rpc_result(json!([1])),
            Err(CallError::Transport(_))
        ));
    }
}
