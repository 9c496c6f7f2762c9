//! Foreign sources against the real thing (docs/SOURCES.md). The A2A agent is built with the official
//! A2A Python SDK (`tests/sources/a2a_agent.py`, a child of the test killed by a guard), and the other
//! client is the SDK's own (`a2a_client.py`): it starts the tasks and checks, on the agent's side, what
//! an answer sent through `pantheon` did.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pantheon::testing::sources::Source;
use pantheon::testing::sources::a2a::A2aSource;
use serde_json::Value;

#[path = "../common/setup.rs"]
mod setup;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pantheon"))
}

fn here(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sources")
        .join(file)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The SDK agent, killed and reaped when dropped.
struct Agent {
    child: Child,
    url: String,
}

impl Agent {
    fn start(extra: &[&str]) -> Self {
        let port = free_port();
        let mut child = Command::new(setup::python())
            .arg(here("a2a_agent.py"))
            .arg(port.to_string())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the A2A test agent starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the agent did not start");
        Agent {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SDK's own client: `a2a_client.py CMD URL ARGS…`, its JSON answer.
fn sdk_client(args: &[&str]) -> Value {
    let out = Command::new(setup::python())
        .arg(here("a2a_client.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "a2a_client.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pantheon(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("PANTHEON_ROOT")
        .output()
        .unwrap()
}

fn init_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = pantheon(dir.path(), &["init"]);
    assert!(
        out.status.success(),
        "init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Reads `source` until `pred` holds on a snapshot (polling as the live model does).
fn read_until(
    source: &mut A2aSource,
    what: &str,
    pred: impl Fn(&pantheon::testing::sources::Snapshot) -> bool,
) -> pantheon::testing::sources::Snapshot {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snap = source.read().unwrap_or_else(|e| panic!("read: {e}"));
        if pred(&snap) {
            return snap;
        }
        assert!(Instant::now() < deadline, "never saw {what}: {snap:#?}");
        std::thread::sleep(source.poll_every());
    }
}

#[test]
fn a_task_another_client_started_is_answered_from_here_and_completes_with_the_answer() {
    let agent = Agent::start(&[]);
    let root = init_root();
    // The other client starts the task; it stops in input-required.
    let started = sdk_client(&["start", &agent.url, "hi"]);
    assert_eq!(started["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = started["id"].as_str().unwrap().to_owned();

    let mut source = A2aSource::new(&format!("{}/", agent.url)).unwrap();
    let snap = read_until(&mut source, "the waiting task", |s| {
        s.attention.iter().any(|a| a.raw["id"] == id.as_str())
    });
    assert_eq!(snap.agents[0].name, "asker");
    assert!(
        snap.agents[0]
            .status
            .as_deref()
            .unwrap()
            .contains("A2A 1.0"),
        "{:?}",
        snap.agents[0].status
    );
    let task = snap.tasks.iter().find(|t| t.id == id).unwrap();
    assert_eq!(task.state, "input-required");
    assert_eq!(task.title, "hi");
    let item = snap
        .attention
        .iter()
        .find(|a| a.raw["id"] == id.as_str())
        .unwrap();
    assert!(item.answerable);
    assert!(item.what.contains("what name?"), "{}", item.what);
    assert!(
        item.key.starts_with(&format!("{id}#input-required@")),
        "{}",
        item.key
    );
    assert!(
        snap.messages
            .iter()
            .any(|m| m.body == "hi" && m.from == "client")
    );
    // The same wait gives the same key on the next read.
    let again = source.read().unwrap();
    assert!(again.attention.iter().any(|a| a.key == item.key));

    // The operator answers through the CLI with the item's key: exit 0, JSON, journaled.
    let out = pantheon(
        root.path(),
        &[
            "sources",
            "answer",
            "--source",
            &format!("a2a:{}/", agent.url),
            &item.key,
            "Ada",
        ],
    );
    assert!(
        out.status.success(),
        "answer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answered: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answered["sent_chars"], 3);
    assert_eq!(answered["key"], item.key.as_str());
    assert!(answered["journal_seq"].is_u64(), "{answered}");

    // On the agent's side, through the SDK's client: resumed and completed with the operator's answer.
    let seen = sdk_client(&["get", &agent.url, &id]);
    assert_eq!(seen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["artifacts"][0], "hello, Ada", "{seen}");
    assert!(
        seen["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h == "Ada"),
        "{seen}"
    );

    // And here: the attention item is gone, the task completed.
    let snap = read_until(&mut source, "the completion", |s| {
        s.tasks.iter().any(|t| t.id == id && t.state == "completed")
    });
    assert!(snap.attention.iter().all(|a| a.raw["id"] != id.as_str()));
    assert!(snap.messages.iter().any(|m| m.body == "hello, Ada"));

    // The journal names the act, the source and the item, not the text.
    let journal = std::fs::read_to_string(root.path().join("conductor/journal.jsonl")).unwrap();
    let entry = journal
        .lines()
        .find(|l| l.contains("answer_source"))
        .expect("journaled");
    assert!(
        entry.contains(&item.key) && entry.contains("sent 3 characters"),
        "{entry}"
    );
    assert!(
        !entry.contains("Ada"),
        "the answer's text is not journaled: {entry}"
    );

    // Answering again: the task no longer waits, nothing is sent, exit 1 with the reason.
    let out = pantheon(
        root.path(),
        &[
            "sources",
            "answer",
            "--source",
            &format!("a2a:{}/", agent.url),
            &id,
            "again",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: a2a:") && err.contains("is completed, not waiting for input"),
        "{err}"
    );
}

#[test]
fn a_task_that_works_then_asks_is_seen_by_its_stream_and_auth_required_is_answerable() {
    let agent = Agent::start(&[]);
    let mut source = A2aSource::new(&agent.url).unwrap();
    assert!(source.read().unwrap().tasks.is_empty());
    // Started by the other client in a thread: it works 1.5 s (seen working), then asks.
    let url = agent.url.clone();
    let starter = std::thread::spawn(move || sdk_client(&["start", &url, "slow:1500 then ask"]));
    read_until(&mut source, "the working task", |s| {
        s.tasks.iter().any(|t| t.state == "working")
    });
    let snap = read_until(&mut source, "the question", |s| !s.attention.is_empty());
    assert!(
        snap.agents[0]
            .status
            .as_deref()
            .unwrap()
            .contains("streaming")
    );
    let started = starter.join().unwrap();
    assert_eq!(snap.attention[0].raw["id"], started["id"]);

    let auth = sdk_client(&["start", &agent.url, "auth me"]);
    assert_eq!(auth["state"], "TASK_STATE_AUTH_REQUIRED");
    let snap = read_until(&mut source, "the auth wait", |s| {
        s.attention.iter().any(|a| a.raw["id"] == auth["id"])
    });
    let item = snap
        .attention
        .iter()
        .find(|a| a.raw["id"] == auth["id"])
        .unwrap();
    assert!(
        item.answerable && item.what.starts_with("auth-required"),
        "{item:?}"
    );
    let done = source.answer(&item.key, "token-123").unwrap();
    assert!(done.detail.contains("sent 9 characters"), "{done:?}");
    let seen = sdk_client(&["get", &agent.url, auth["id"].as_str().unwrap()]);
    assert_eq!(seen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["artifacts"][0], "hello, token-123");
}

#[test]
fn an_agent_offering_0_3_is_answered_with_0_3_names() {
    let agent = Agent::start(&["--no-streaming"]);
    let started = sdk_client(&["start", &agent.url, "hi"]);
    let id = started["id"].as_str().unwrap();
    // The 0.3 card: `message/send` on the SDK's 0.3 adapter; tasks found with ListTasks after
    // `tasks/list` (which 0.3 does not have) is refused as an unknown method.
    let mut source = A2aSource::new(&format!("{}/.well-known/agent.json", agent.url)).unwrap();
    let snap = read_until(&mut source, "the waiting task", |s| !s.attention.is_empty());
    assert!(
        snap.agents[0]
            .status
            .as_deref()
            .unwrap()
            .contains("A2A 0.3 · polled"),
        "{:?}",
        snap.agents[0].status
    );
    let key = snap.attention[0].key.clone();
    let done = source.answer(&key, "Grace").unwrap();
    assert!(done.detail.contains("sent 5 characters"), "{done:?}");
    let seen = sdk_client(&["get", &agent.url, id]);
    assert_eq!(seen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["artifacts"][0], "hello, Grace");
}

/// A hostile server on a thread: answers every connection with `reply(request_line)`.
fn hostile(reply: fn(&str, &mut std::net::TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                reply(head.lines().next().unwrap_or(""), &mut stream);
            });
        }
    });
    url
}

fn huge_json(stream: &mut std::net::TcpStream) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{\"name\":\"");
    let chunk = vec![b'x'; 64 * 1024];
    while stream.write_all(&chunk).is_ok() {}
}

#[test]
fn a_down_agent_a_hostile_card_and_a_huge_answer_are_errors_with_their_reason_quickly() {
    let root = tempfile::tempdir().unwrap();
    // Down: nothing listens.
    let down = format!("a2a:http://127.0.0.1:{}/", free_port());
    let out = pantheon(
        &root.path().join("none"),
        &["sources", "read", "--source", &down],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused the connection: is the agent running?"),
        "{err}"
    );

    // A card of a gigabyte: refused at the card's limit.
    let url = hostile(|_, s| huge_json(s));
    let t = Instant::now();
    let err = A2aSource::new(&url).unwrap().read().unwrap_err();
    assert!(err.reason.contains("refused as hostile"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // A fair card, then an endless reply to ListTasks: refused at the response's limit.
    let url = hostile(|line, s| {
        if line.starts_with("GET") {
            let port = s.local_addr().unwrap().port();
            let card = format!(
                r#"{{"name":"h","supportedInterfaces":[{{"url":"http://127.0.0.1:{port}/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}}]}}"#
            );
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{card}",
                card.len()
            );
        } else {
            huge_json(s);
        }
    });
    let t = Instant::now();
    let err = A2aSource::new(&url).unwrap().read().unwrap_err();
    assert!(err.reason.contains("refused as hostile"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // A server that takes the connection and never answers: an error at the call's deadline.
    let url = hostile(|_, _| std::thread::sleep(Duration::from_secs(60)));
    let t = Instant::now();
    let err = A2aSource::new(&url).unwrap().read().unwrap_err();
    assert!(err.reason.contains("did not answer in time"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
}
