//! The sessions of the Streamable HTTP transport (clients of the `initialize` handshake): a long
//! call's event stream resumed with `Last-Event-ID` after the connection dropped (while the call is
//! under way: rmcp 3.11 keeps no answer past its sending, docs/MCP.md "Resumption"), through the
//! official TypeScript SDK's `StreamableHTTPClientTransport` (`resumptionToken`); the cap on live
//! sessions (`--max-sessions`: a clear `503` past it, which the official client reports) and the
//! closing of idle ones (`--session-idle`).

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::*;

const TRACK: &str = "resume";

#[test]
fn a_long_call_is_resumed_with_last_event_id_after_the_connection_drops() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let server = HttpServer::start(root.path(), &["mcp", "--http", "127.0.0.1:0"]);
    let out = std::process::Command::new("node")
        .arg(crate::setup::node_client_dir().join("resume.mjs"))
        .arg(&server.url)
        .arg(TRACK)
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    });
    assert!(
        report.get("error").is_none(),
        "{report:#}\n{}",
        server.log()
    );
    assert!(report["session_id"].is_string(), "{report:#}");
    assert!(
        report["token"].is_string(),
        "an event id to resume from: {report:#}"
    );
    // The call was still waiting when the connection dropped: no answer reached the first client.
    assert!(
        report["dropped"]["dropped_with"].is_string(),
        "the call was under way at the drop: {report:#}"
    );
    // The event was posted after the resumption (the wait counts only events after it began,
    // `fresh`), so the answer came back on the resumed stream: the client sent no new request.
    let result = &report["result"];
    assert_eq!(result["is_error"], json!(false), "{report:#}");
    assert_eq!(result["structured"]["matched"], json!(true), "{report:#}");
    assert!(
        result["structured"]["event"]["name"]
            .as_str()
            .is_some_and(|e| e.starts_with("TASK_COMPLETE_resumed")),
        "{report:#}"
    );
}

/// An `initialize` over raw HTTP, as any client opens a session: the status line and headers.
fn open_session(url: &str) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn sessions_past_the_cap_get_a_clear_503_and_idle_ones_are_closed() {
    let root = TestRoot::new();
    let server = HttpServer::start(
        root.path(),
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--max-sessions",
            "2",
            "--session-idle",
            "30s",
        ],
    );
    let opened_at = std::time::Instant::now();
    for _ in 0..2 {
        let opened = open_session(&server.url);
        assert!(
            opened.starts_with("HTTP/1.1 200")
                && opened.to_ascii_lowercase().contains("mcp-session-id:"),
            "{opened}"
        );
    }
    // A third session: refused, clearly, over raw HTTP and through the official client.
    let third = open_session(&server.url);
    assert!(third.starts_with("HTTP/1.1 503"), "{third}");
    assert!(
        third.to_ascii_lowercase().contains("retry-after: 30"),
        "{third}"
    );
    assert!(third.contains("--max-sessions 2"), "{third}");
    let report = http_session(Sdk::TypeScript, &server.url, None, &[], &[list_tools()]);
    assert_eq!(report["connect_error"]["status"], json!(503), "{report:#}");
    // A client of the per-request era opens no session: it is served while the sessions are full.
    let r = http_results(&http_session(
        Sdk::Python,
        &server.url,
        None,
        &[],
        &[list_tools()],
    ));
    assert_eq!(r[0]["tools"].as_array().unwrap().len(), ALL_TOOLS.len());
    // Idle past 30 s, the two raw sessions are closed: the official client gets one again.
    assert!(
        opened_at.elapsed() < Duration::from_secs(30),
        "the refusals came before the sessions could idle out"
    );
    std::thread::sleep(Duration::from_secs(32).saturating_sub(opened_at.elapsed()));
    let r = http_results(&http_session(
        Sdk::TypeScript,
        &server.url,
        None,
        &[],
        &[list_tools()],
    ));
    assert_eq!(r[0]["tools"].as_array().unwrap().len(), ALL_TOOLS.len());
    assert!(
        server.log().contains("a new session refused"),
        "{}",
        server.log()
    );

    let bad = root.pantheon(&["mcp", "--http", "127.0.0.1:0", "--max-sessions", "0"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("at least 1"));
}
