//! Shared helpers: a fresh initialised root per test, and sessions driven by the official Python
//! MCP client SDK (`python/session.py`) or the official TypeScript one (`node/session.mjs`) against
//! the real `pantheon mcp` binary. Both scripts take the same steps and report the same way.

use crate::fixture_root::{copy_dir, fixture_root};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use tempfile::TempDir;

/// Every tool docs/PROTOCOL.md §5.2 lists, sorted.
pub const ALL_TOOLS: [&str; 27] = [
    "abort_workflow",
    "ack_handoff",
    "acquire_lock",
    "approve_dispatch",
    "board_advance",
    "board_assess",
    "board_discuss",
    "board_next_round",
    "board_open",
    "board_resolve",
    "board_status",
    "board_vote",
    "check_inbox",
    "cleanup",
    "detect_deadlocks",
    "get_dispatch",
    "get_workflow_state",
    "list_pending",
    "list_rules",
    "list_workflows",
    "post_message",
    "read_messages",
    "release_lock",
    "requeue_dead_letter",
    "submit_handoff",
    "update_worker_status",
    "wait_for_event",
];

/// The `pantheon` binary under test.
pub fn pantheon_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin!("pantheon").to_path_buf()
}

/// The Python interpreter of the test virtualenv: `$PANTHEON_TEST_PYTHON`, else `.venv/bin/python`
/// in the repository, which `scripts/test-setup.sh` creates (see `tests/common/setup.rs`).
pub fn python() -> PathBuf {
    crate::setup::python()
}

fn session_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python/session.py")
}

/// Which official MCP client SDK drives a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `mcp` from PyPI (`python/session.py`).
    Python,
    /// `@modelcontextprotocol/sdk` from npm (`node/session.mjs`).
    TypeScript,
}

/// Both official clients, for tests that run one sequence through each.
pub const BOTH_SDKS: [Sdk; 2] = [Sdk::Python, Sdk::TypeScript];

/// A fresh temp root on which `pantheon init` has run.
pub struct TestRoot {
    pub dir: TempDir,
}

impl TestRoot {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = Self { dir };
        let out = root.pantheon(&["init"]);
        assert!(
            out.status.success(),
            "pantheon init failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        root
    }

    /// A copy of the shared foreign-root fixture (quirks and junk included), then `pantheon init`.
    pub fn foreign() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(&fixture_root(), dir.path());
        let root = Self { dir };
        root.cli_json(&["init"]);
        root
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs the CLI on this root.
    pub fn pantheon(&self, args: &[&str]) -> std::process::Output {
        Command::new(pantheon_bin())
            .arg("--root")
            .arg(self.path())
            .args(args)
            .env_remove("PANTHEON_ROOT")
            .env_remove("CONDUCTOR_BASE_DIR")
            .env_remove("CONDUCTOR_HANDOFFS_DIR")
            .output()
            .expect("run pantheon")
    }

    /// Runs the CLI on this root and parses its JSON output (it must succeed).
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let out = self.pantheon(args);
        assert!(
            out.status.success(),
            "pantheon {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("CLI prints JSON")
    }

    /// Creates the message bus of `track` (as an operator does with the CLI).
    pub fn init_track(&self, track: &str) {
        self.cli_json(&["bus", "--track", track, "init"]);
    }

    /// Writes a file under the root (test setup: workflow definitions, artifacts).
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Starts a client session running `steps` (see `session.py`); wait with [`Session::finish`].
    pub fn start_session(&self, mode: &str, steps: &[Value]) -> Session {
        let mut cmd = Command::new(python());
        cmd.arg(session_script())
            .arg(pantheon_bin())
            .arg(self.path())
            .arg(mode);
        self.spawn_session(cmd, steps)
    }

    /// [`TestRoot::start_session`] with variables added to the client's environment (which the
    /// server it starts inherits).
    pub fn start_session_env(&self, mode: &str, steps: &[Value], env: &[(&str, &str)]) -> Session {
        let mut cmd = Command::new(python());
        cmd.arg(session_script())
            .arg(pantheon_bin())
            .arg(self.path())
            .arg(mode);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.spawn_session(cmd, steps)
    }

    /// Starts a session of `sdk`'s official client running `steps`.
    pub fn start_session_with(&self, sdk: Sdk, steps: &[Value]) -> Session {
        match sdk {
            Sdk::Python => self.start_session("auto", steps),
            Sdk::TypeScript => {
                let dir = crate::setup::node_client_dir();
                let mut cmd = Command::new("node");
                cmd.arg(dir.join("session.mjs"))
                    .arg(pantheon_bin())
                    .arg(self.path());
                self.spawn_session(cmd, steps)
            }
        }
    }

    /// Starts `cmd` (a client script taking the steps on its stdin) as a session.
    pub fn spawn_session(&self, mut cmd: Command, steps: &[Value]) -> Session {
        let mut child = cmd
            .env_remove("PANTHEON_ROOT")
            .env_remove("CONDUCTOR_BASE_DIR")
            .env_remove("CONDUCTOR_HANDOFFS_DIR")
            .env("PANTHEON_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the MCP client");
        let steps = serde_json::to_vec(steps).unwrap();
        child.stdin.take().unwrap().write_all(&steps).unwrap();
        Session { child }
    }

    /// Runs one client session to the end and returns its report.
    pub fn session(&self, steps: &[Value]) -> Report {
        self.start_session("auto", steps).finish()
    }

    /// Runs one session of `sdk`'s client to the end and returns its report.
    pub fn session_with(&self, sdk: Sdk, steps: &[Value]) -> Report {
        self.start_session_with(sdk, steps).finish()
    }
}

/// A running client session.
pub struct Session {
    child: Child,
}

impl Session {
    /// Waits for the session; a broken session (server died, SDK error) fails the test with the
    /// client's and the server's stderr.
    pub fn finish(self) -> Report {
        let out = self.child.wait_with_output().expect("wait for python");
        assert!(
            out.status.success(),
            "the MCP client session failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "session output is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        Report {
            server: v["server"].clone(),
            results: v["results"].as_array().cloned().unwrap_or_default(),
        }
    }
}

/// What a session saw: the server's identity and one result per step.
pub struct Report {
    pub server: Value,
    pub results: Vec<Value>,
}

/// A `tools/call` step.
pub fn call(tool: &str, arguments: Value) -> Value {
    json!({"op": "call", "tool": tool, "arguments": arguments})
}

/// A `tools/list` step.
pub fn list_tools() -> Value {
    json!({"op": "list_tools"})
}

/// The structured content of a successful call (fails the test on an error result, and on a
/// result that does not fit the tool's declared `outputSchema`).
pub fn ok(result: &Value) -> &Value {
    assert_eq!(
        result["is_error"],
        json!(false),
        "expected success, got {result:#}"
    );
    assert_eq!(
        result["schema_errors"],
        json!([]),
        "the result must fit the tool's outputSchema: {result:#}"
    );
    let s = &result["structured"];
    assert!(s.is_object(), "no structured content in {result:#}");
    let text: Value = serde_json::from_str(result["text"].as_str().unwrap())
        .expect("the text content is the same JSON");
    assert_eq!(&text, s, "text and structured content differ");
    s
}

/// The message of a refused call (fails the test unless it is an `isError` result whose text the
/// client received: no structured content that breaks the tool's `outputSchema`, a message, and
/// its kind in `_meta`).
pub fn refused(result: &Value) -> String {
    assert_eq!(
        result["is_error"],
        json!(true),
        "expected an isError result, got {result:#}"
    );
    assert_eq!(
        result["schema_errors"],
        json!([]),
        "a refusal must reach the client whole: {result:#}"
    );
    assert!(
        result["refusal"]["kind"].is_string(),
        "a refusal names its kind in _meta: {result:#}"
    );
    let text = result["text"].as_str().unwrap().to_string();
    assert!(!text.trim().is_empty(), "a refusal says why: {result:#}");
    text
}

/// A fresh handoff id (`hof_YYYYMMDD_` + 6 hex).
pub fn handoff_id(n: u32) -> String {
    format!("hof_20260614_{:06x}", n)
}

/// A fresh ack id (`ack_YYYYMMDD_` + 6 hex).
pub fn ack_id(n: u32) -> String {
    format!("ack_20260614_{:06x}", n)
}

/// A step that sends `calls` at once on the same session (see `session.py`).
pub fn gather(calls: Vec<Value>) -> Value {
    json!({"op": "gather", "calls": calls})
}

/// A three-step definition: research (thoth) → implement (hephaestus) → review (marvin);
/// `implement` declares the `logic_gate`.
pub const TEST_WORKFLOW: &str = r#"workflow:
  id: mcp-test
  name: "MCP test flow"
  version: "1.0.0"
  description: "research, implement, review"
  steps:
    - id: research
      god: thoth
    - id: implement
      god: hephaestus
      gates: [logic_gate]
    - id: review
      god: marvin
"#;

/// A workflow whose `build` step waits for an operator's approval.
const GATE_WORKFLOW: &str = r#"workflow:
  id: gate
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: ares
      approval_required: true
"#;

/// A workflow whose `build` dispatch waits 1 s for an ack and is delivered twice at most.
const DEAD_WORKFLOW: &str = r#"workflow:
  id: dead-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hades
      ack_wait: 1s
      max_deliveries: 2
"#;

/// What the operator's tools act on (see [`TestRoot::operator_items`]): held dispatches and dead
/// letters, by handoff id.
pub struct OperatorItems {
    /// Dispatches held for approval (for `ares`).
    pub held: Vec<String>,
    /// Dead letters (of `hades`).
    pub dead: Vec<String>,
}

/// The handoff id of the `i`th held dispatch [`TestRoot::operator_items`] makes.
pub fn held_id(i: u32) -> String {
    handoff_id(0xa100 + i)
}

/// The handoff id of the `i`th dead letter [`TestRoot::operator_items`] makes.
pub fn dead_id(i: u32) -> String {
    handoff_id(0xd100 + i)
}

impl TestRoot {
    /// `n` dispatches held for approval and `n` dead letters, made through the engine as agents and
    /// the supervisor make them: a submit into a step with `approval_required`, and a dispatch
    /// nobody acks, passed twice by the supervisor's pass an hour and two hours on.
    pub fn operator_items(&self, n: u32) -> OperatorItems {
        self.write("conductor/workflows/gate.yaml", GATE_WORKFLOW);
        self.write("conductor/workflows/dead-flow.yaml", DEAD_WORKFLOW);
        let c = pantheon::engine::Conductor::new(pantheon::Root::at(self.path()));
        let mut items = OperatorItems {
            held: Vec::new(),
            dead: Vec::new(),
        };
        for i in 0..n {
            for (definition, id, list) in [
                ("gate", held_id(i), &mut items.held),
                ("dead-flow", dead_id(i), &mut items.dead),
            ] {
                let plan = id;
                let mut h = handoff(
                    &plan,
                    &format!("wf_{}_{i}", definition.replace('-', "_")),
                    "thoth",
                    "x",
                    "plan",
                    &[],
                );
                h["routing"] = json!({"workflow_definition": definition});
                let r = c.submit_handoff(&h).expect("the operator item's submit");
                list.push(r.handoff_id.to_string());
            }
        }
        let t = chrono::Utc::now();
        c.tick(t + chrono::Duration::hours(1));
        let report = c.tick(t + chrono::Duration::hours(2));
        assert_eq!(report.dead_lettered.len(), n as usize, "{report:?}");
        items
    }
}

/// A handoff for the test workflow (see [`TEST_WORKFLOW`]).
pub fn handoff(id: &str, wf: &str, from: &str, to: &str, step: &str, gates: &[&str]) -> Value {
    json!({
        "handoff_id": id,
        "workflow_id": wf,
        "from_god": from,
        "to_god": to,
        "step": step,
        "context": {
            "summary": format!("{from} finished {step}"),
            "decisions": [format!("decision of {step}")],
            "artifacts": [format!("artifacts/{wf}/{step}.md")],
            "gates_passed": gates,
        },
        "routing": {"workflow_definition": "mcp-test", "workflow_version": "1.0.0"},
    })
}

/// A `pantheon mcp --http` (or `serve --mcp`) process on a test root, stopped with SIGTERM when
/// dropped; its standard error is kept for a failing test's message.
pub struct HttpServer {
    child: Option<Child>,
    /// Where clients connect: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    /// Starts `pantheon --root ROOT ARGS…` and waits for the line that says where MCP is served.
    pub fn start(root: &Path, args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(pantheon_bin())
            .arg("--root")
            .arg(root)
            .args(args)
            .env_remove("PANTHEON_ROOT")
            .env("PANTHEON_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pantheon");
        let stderr = child.stderr.take().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    log.lock().unwrap().push_str(&format!("{line}\n"));
                    if let Some(at) = line.find("http://").or_else(|| line.find("https://"))
                        && line.contains("/mcp")
                    {
                        let url = line[at..].split_whitespace().next().unwrap().to_owned();
                        let _ = tx.send(url);
                    }
                }
            });
        }
        let url = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "pantheon {args:?} never said where it serves MCP:\n{}",
                    log.lock().unwrap()
                );
            }
        };
        Self {
            child: Some(child),
            url,
            log,
        }
    }

    /// What the server wrote to standard error so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Stops it with SIGTERM and returns its exit status (killed after 20 s).
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.stop_now().expect("the server was running")
    }

    fn stop_now(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// One official client's session over Streamable HTTP to `url`, with `token` as its bearer
/// credential: the raw report (`{server, results}`, or `{connect_error}` when the server refused the
/// connection). `env` adds variables (a CA to trust, a client name).
pub fn http_session(
    sdk: Sdk,
    url: &str,
    token: Option<&str>,
    env: &[(&str, &str)],
    steps: &[Value],
) -> Value {
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = Command::new(python());
            c.arg(session_script()).arg(url).arg("-").arg("auto");
            c
        }
        Sdk::TypeScript => {
            let mut c = Command::new("node");
            c.arg(crate::setup::node_client_dir().join("session.mjs"))
                .arg(url)
                .arg("-");
            c
        }
    };
    cmd.env_remove("PANTHEON_MCP_TOKEN");
    if let Some(t) = token {
        cmd.env("PANTHEON_MCP_TOKEN", t);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the MCP client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(steps).unwrap())
        .unwrap();
    let out = child.wait_with_output().expect("wait for the client");
    assert!(
        out.status.success(),
        "the {sdk:?} client failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the {sdk:?} client's output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The results of an HTTP session that connected (fails the test with the report otherwise).
pub fn http_results(report: &Value) -> Vec<Value> {
    assert!(
        report.get("connect_error").is_none(),
        "the session did not connect: {report:#}"
    );
    report["results"].as_array().cloned().unwrap_or_default()
}

/// Adds a principal with `pantheon credentials add` and returns its secret.
pub fn add_credential(root: &TestRoot, file: &Path, name: &str, kind: &str) -> String {
    let v = root.cli_json(&[
        "credentials",
        "add",
        name,
        kind,
        "--file",
        file.to_str().unwrap(),
    ]);
    v["secret"].as_str().expect("a secret").to_owned()
}
