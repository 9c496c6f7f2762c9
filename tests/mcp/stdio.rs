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

    // Not JSON at all: a parse error, with no id to answer to.
    server.send("{this is not json");
    let garbage = server.recv();
    assert_eq!(garbage["error"]["code"], json!(-32700), "{garbage}");
    assert_eq!(garbage["id"], Value::Null, "{garbage}");
    // A blank line is no message: nothing to answer.
    server.send("");
    // JSON, but `arguments` is not an object: invalid params for that request.
    server.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "check_inbox", "arguments": "thoth"}})
        .to_string(),
    );
    let invalid = server.recv();
    assert_eq!(invalid["id"], json!(2), "{invalid}");
    assert_eq!(invalid["error"]["code"], json!(-32602), "{invalid}");
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

/// `pantheon mcp` on a root that does not exist refuses to start (exit 1, the
/// `init` hint on stderr, nothing on stdout) instead of serving empty answers; hosts show the
/// hint in their MCP log.
#[test]
fn a_server_on_a_missing_root_refuses_to_start_with_the_init_hint() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-root-here");
    let out = Command::new(pantheon_bin())
        .arg("--root")
        .arg(&missing)
        .arg("mcp")
        .env_remove("PANTHEON_ROOT")
        .stdin(Stdio::piped())
        .output()
        .expect("run pantheon mcp");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "stdout carries only the protocol");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("pantheon --root {} init", missing.display())),
        "{err}"
    );
    assert!(!missing.exists());
}

/// Every line that is no valid request gets an answer, the request's id when it
/// can be read, and the server keeps serving.
#[test]
fn bad_lines_are_answered_with_json_rpc_errors_over_real_stdio() {
    let root = TestRoot::new();
    let mut server = RawServer::start(&root);
    server.initialize();

    server.send("[1, 2, 3]");
    let not_a_message = server.recv();
    assert_eq!(
        not_a_message["error"]["code"],
        json!(-32600),
        "{not_a_message}"
    );
    assert_eq!(not_a_message["id"], Value::Null);

    server.send(&json!({"jsonrpc": "2.0", "id": "req-7", "params": {}}).to_string());
    let no_method = server.recv();
    assert_eq!(no_method["id"], json!("req-7"), "{no_method}");
    assert_eq!(no_method["error"]["code"], json!(-32600), "{no_method}");

    server.send(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                "params": {"name": "list_rules", "arguments": [1]}})
        .to_string(),
    );
    let array_args = server.recv();
    assert_eq!(array_args["id"], json!(8));
    assert_eq!(array_args["error"]["code"], json!(-32602), "{array_args}");
    server.send(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": "list_rules"})
            .to_string(),
    );
    assert_eq!(server.recv()["error"]["code"], json!(-32602));

    // Over the 16 MiB line limit, with the id first (as hosts write it): answered for that id.
    let big = "x".repeat(17 * 1024 * 1024);
    server.send(&format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{{"name":"check_inbox","arguments":{{"god_name":"{big}"}}}}}}"#
    ));
    let too_long = server.recv();
    assert_eq!(
        too_long["id"],
        json!(10),
        "{}",
        &too_long.to_string()[..200.min(too_long.to_string().len())]
    );
    assert_eq!(too_long["error"]["code"], json!(-32600));
    assert!(
        too_long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit"),
        "{too_long}"
    );
    // Over the limit with no id before the cut: a parse error without an id.
    server.send(&format!(r#"{{"params":{{"blob":"{big}"}},"id":11}}"#));
    let cut = server.recv();
    assert_eq!(cut["error"]["code"], json!(-32700), "{cut}");
    assert_eq!(cut["id"], Value::Null);

    // Still serving, and the next request is read whole.
    server.call(12, "check_inbox", json!({"god_name": "thoth"}));
    let inbox = server.response(12);
    assert_eq!(
        inbox["result"]["structuredContent"]["god"],
        json!("thoth"),
        "{inbox}"
    );
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

/// A dispatch file as a god's own script writes it (the seed's fields), `summary` its only variable.
fn foreign_dispatch(summary: &str) -> String {
    json!({"handoff_id": "hof_20260614_0000aa", "workflow_id": "wf_cache", "from_god": "thoth",
           "to_god": "iris", "step": "research", "context": {"summary": summary, "decisions": [],
           "artifacts": [], "open_questions": [], "gates_passed": [], "history": []},
           "dispatched_at": "2026-06-14T10:00:00Z", "ack_status": "unacked"})
    .to_string()
}

#[test]
fn a_long_lived_server_never_answers_from_a_stale_read_of_an_inbox_file() {
    let root = TestRoot::new();
    let inbox = root.path().join("conductor/pending/iris");
    std::fs::create_dir_all(&inbox).unwrap();
    let file = inbox.join("hof_20260614_0000aa.json");
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    // Written and back-dated the way a foreign writer may: same size, same modification time each
    // time, so only the inode's change time tells the two versions apart.
    let write = |summary: &str| {
        std::fs::write(&file, foreign_dispatch(summary)).unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(old).unwrap();
    };
    write("version one");
    let mut s = RawServer::start(&root);
    s.initialize();
    let summary = |s: &mut RawServer, id: u64, tool: &str| {
        let args = if tool == "check_inbox" {
            json!({"god_name": "iris"})
        } else {
            json!({"god_name": "iris", "handoff_id": "hof_20260614_0000aa"})
        };
        s.call(id, tool, args);
        let r = s.response(id);
        let sc = &r["result"]["structuredContent"];
        let d = if tool == "check_inbox" {
            &sc["dispatches"][0]
        } else {
            &sc["dispatch"]
        };
        d["context"]["summary"]
            .as_str()
            .unwrap_or_else(|| panic!("no summary in {r}"))
            .to_owned()
    };
    // Read for longer than the file takes to settle, so that the server keeps its parse.
    for id in 10..24 {
        assert_eq!(summary(&mut s, id, "check_inbox"), "version one");
        std::thread::sleep(Duration::from_millis(250));
    }
    write("version two");
    assert_eq!(summary(&mut s, 100, "check_inbox"), "version two");
    assert_eq!(summary(&mut s, 101, "get_dispatch"), "version two");
    // Replaced by a rename, and then gone.
    let tmp = inbox.join(".hof.tmp");
    std::fs::write(&tmp, foreign_dispatch("version 3!!")).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    assert_eq!(summary(&mut s, 102, "get_dispatch"), "version 3!!");
    std::fs::remove_file(&file).unwrap();
    s.call(103, "check_inbox", json!({"god_name": "iris"}));
    let r = s.response(103);
    assert_eq!(r["result"]["structuredContent"]["count"], json!(0), "{r}");
    s.close();
}
