//! The wire itself, without an SDK: what a buggy host might send must never kill the server.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

struct RawServer {
    child: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl RawServer {
    fn start(root: &TestRoot) -> Self {
        let mut cmd = Command::new(pantheon_bin());
        cmd.arg("--root").arg(root.path()).arg("mcp");
        Self::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .env("PANTHEON_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pantheon mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message the server writes; every stdout line must be JSON-RPC.
    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the server answers (and is still alive)");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], json!("2.0"), "{v}");
        v
    }

    fn initialize(&mut self) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"}}})
            .to_string(),
        );
        let init = self.response(1);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        init
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}})
            .to_string(),
        );
    }

    /// Closes stdin and waits (bounded) for a clean exit.
    fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "exit status {status}");
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not exit after stdin closed");
            }
            // Polling a child's exit status has no signal to await in std.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The response to request `id`, skipping notifications.
    fn response(&self, id: u64) -> Value {
        loop {
            let v = self.recv();
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
            assert!(v.get("method").is_some(), "unexpected message {v}");
        }
    }
}

#[test]
fn server_survives_garbage_lines_malformed_requests_and_bad_arguments() {
    let root = TestRoot::new();
    let mut server = RawServer::start(&root);
    let init = server.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], json!("conductor"));

    // Not JSON at all: ignored (there is no id to answer).
    server.send("{this is not json");
    server.send("");
    // JSON, but `arguments` is not an object: the request is invalid.
    server.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "check_inbox", "arguments": "thoth"}})
        .to_string(),
    );
    let invalid = server.recv();
    assert!(
        invalid["error"]["code"].is_i64(),
        "an error response: {invalid}"
    );
    // Well-formed request, wrong argument type: a tool error naming the field.
    server.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "check_inbox", "arguments": {"god_name": 7}}})
        .to_string(),
    );
    let bad = server.response(3);
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let text = bad["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("/god_name"), "names the field: {text}");
    // An unknown method.
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}).to_string());
    assert!(server.response(4)["error"].is_object());

    // Still serving.
    server.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string());
    let list = server.response(5);
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        ALL_TOOLS.len()
    );

    // Closing stdin ends the server cleanly.
    server.close();
}

#[test]
fn root_comes_from_pantheon_root_when_no_flag_is_given() {
    let root = TestRoot::new();
    let mut cmd = Command::new(pantheon_bin());
    cmd.arg("mcp").env("PANTHEON_ROOT", root.path());
    let mut server = RawServer::spawn(cmd);
    server.initialize();
    server.call(2, "list_workflows", json!({}));
    let listed = server.response(2);
    let workflows = &listed["result"]["structuredContent"]["workflows"];
    let first = workflows[0]["path"]
        .as_str()
        .expect("init installs sample workflows");
    assert!(
        first.starts_with(root.path().to_str().unwrap()),
        "{first} lies in $PANTHEON_ROOT"
    );
    server.close();
}

#[test]
fn a_cancelled_or_abandoned_wait_never_blocks_the_server_or_its_exit() {
    let root = TestRoot::new();
    root.init_track("raw");
    let mut server = RawServer::start(&root);
    server.initialize();
    server.call(
        2,
        "wait_for_event",
        json!({"track": "raw", "event_pattern": "NEVER", "timeout": 600}),
    );
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 2, "reason": "host gave up"}})
        .to_string(),
    );
    server.call(
        3,
        "wait_for_event",
        json!({"track": "raw", "event_pattern": "NEVER", "timeout": 600}),
    );
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string());
    let list = server.response(4);
    assert!(
        list["result"]["tools"].is_array(),
        "served while two waits are pending"
    );
    // The host hangs up with wait 3 still running: the process exits anyway.
    server.close();
}

#[test]
fn mcp_acts_are_journaled_as_the_client_that_made_them() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    let mut server = RawServer::start(&root);
    server.initialize();
    let h = handoff(
        &handoff_id(0x51),
        "wf_mcp_journal",
        "thoth",
        "hephaestus",
        "research",
        &[],
    );
    server.call(2, "submit_handoff", json!({"handoff": h}));
    let r = server.response(2);
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    server.close();

    let j = root.cli_json(&["journal"]);
    assert_eq!(j["count"], 1, "{j}");
    let e = &j["entries"][0];
    assert_eq!(e["actor"], "raw-test", "the client's name from initialize");
    assert_eq!(e["source"], "mcp");
    assert_eq!(e["action"], "submit");
    assert_eq!(e["targets"]["workflow_id"], "wf_mcp_journal");
    assert_eq!(root.cli_json(&["journal", "--verify"])["valid"], true);
}

#[test]
fn acquire_lock_returns_a_fencing_token_and_release_lock_refuses_a_stale_one() {
    let root = TestRoot::new();
    root.init_track("t1");
    let mut server = RawServer::start(&root);
    server.initialize();
    let lock = |s: &mut RawServer, id: u64| {
        s.call(
            id,
            "acquire_lock",
            json!({"track": "t1", "filepath": "src/a.ts", "worker_id": "w1"}),
        );
        s.response(id)["result"]["structuredContent"]["fencing_token"]
            .as_u64()
            .expect("acquire_lock answers its fencing_token")
    };
    let t1 = lock(&mut server, 2);
    server.call(
        3,
        "release_lock",
        json!({"track": "t1", "filepath": "src/a.ts", "worker_id": "w1", "fencing_token": t1 + 1}),
    );
    let stale = server.response(3);
    assert_eq!(stale["result"]["isError"], json!(true), "{stale}");
    assert!(stale.to_string().contains("stale"), "{stale}");
    server.call(
        4,
        "release_lock",
        json!({"track": "t1", "filepath": "src/a.ts", "worker_id": "w1", "fencing_token": t1}),
    );
    assert_eq!(server.response(4)["result"]["isError"], json!(false));
    assert!(lock(&mut server, 5) > t1, "a new lease gets a higher token");
    server.close();
}
