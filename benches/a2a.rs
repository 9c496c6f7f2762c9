//! Foreign sources benchmark: an A2A agent built with the official A2A Python SDK
//! (`tests/sources/a2a_agent.py`) and the a2a source (docs/SOURCES.md).
//!
//! Measures, for tasks that work 1.5 s and then ask for input (PER_ROUND at once, ROUNDS rounds):
//! - a task entering input-required to the attention item: the source read at its own
//!   `poll_every()` (as the live model reads it), the moment an item for the task first appears,
//!   minus the task's status timestamp (the agent's clock, the same host);
//! - the operator's answer to the task resumed: `answer` called, to the status timestamp of the
//!   state the task moved to (the agent resumes and completes at once).
//!
//! Baselines in the same run, against the same agent: the SDK's own client (`a2a_client.py bench`),
//! following each task by subscription from its start and answering with `send_message`.
//!
//! Run: `cargo bench --bench a2a` (ROUNDS and PER_ROUND: `SOURCES_BENCH_ROUNDS`,
//! `SOURCES_BENCH_PER_ROUND`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use pantheon::testing::sources::Source;
use pantheon::testing::sources::a2a::A2aSource;
use serde_json::{Value, json};

mod common;
use common::Figure;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/test-setup.sh"))
        .output()
        .expect("run scripts/test-setup.sh");
    assert!(
        out.status.success(),
        "test setup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo().join(".venv/bin/python")
}

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(python: &Path) -> (Agent, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(python)
        .arg(repo().join("tests/sources/a2a_agent.py"))
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the A2A agent");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    (Agent(child), format!("http://127.0.0.1:{port}/"))
}

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One raw JSON-RPC 1.0 call (the bench's own client starts tasks and reads timestamps).
fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut resp = ureq::post(url)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .send(body.as_bytes())
        .unwrap();
    let v: Value = serde_json::from_slice(&resp.body_mut().read_to_vec().unwrap()).unwrap();
    v["result"].clone()
}

fn stamp(task: &Value) -> DateTime<Utc> {
    let s = task
        .pointer("/status/timestamp")
        .and_then(Value::as_str)
        .unwrap();
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn ms(d: chrono::TimeDelta) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// One round through our source: PER_ROUND tasks started at once, their questions seen, answered.
fn our_round(
    source: &mut A2aSource,
    url: &str,
    per_round: usize,
    out: &mut BTreeMap<&str, Vec<f64>>,
) {
    let ids: Vec<String> = (0..per_round)
        .map(|n| {
            let params = json!({
                "message": {"messageId": format!("bench-{n}-{}", rand_id()), "role": "ROLE_USER",
                            "parts": [{"text": "slow:1500"}]},
                "configuration": {"returnImmediately": true},
            });
            rpc(url, "SendMessage", params)["task"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while keys.len() < ids.len() {
        assert!(Instant::now() < deadline, "the questions never showed");
        let snap = source.read().expect("read the agent");
        let now = Utc::now();
        for item in &snap.attention {
            let id = item.raw["id"].as_str().unwrap_or("").to_owned();
            if ids.contains(&id) && !keys.contains_key(&id) {
                out.entry("attention")
                    .or_default()
                    .push(ms(now - item.since.unwrap()));
                keys.insert(id, item.key.clone());
            }
        }
        std::thread::sleep(source.poll_every());
    }
    for (id, key) in keys {
        let t0 = Utc::now();
        source.answer(&key, "Ada").expect("answer");
        let task = wait_resumed(url, &id);
        out.entry("answer").or_default().push(ms(stamp(&task) - t0));
    }
}

fn wait_resumed(url: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let task = rpc(url, "GetTask", json!({"id": id}));
        let state = task
            .pointer("/status/state")
            .and_then(Value::as_str)
            .unwrap_or("");
        if state != "TASK_STATE_INPUT_REQUIRED" {
            return task;
        }
        assert!(Instant::now() < deadline, "task {id} never resumed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn rand_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() as f64 * p).ceil() as usize).clamp(1, s.len()) - 1;
    (s[i] * 100.0).round() / 100.0
}

fn main() {
    let rounds = env_n("SOURCES_BENCH_ROUNDS", 8);
    let per_round = env_n("SOURCES_BENCH_PER_ROUND", 8);
    let python = python();
    let (_agent, url) = start_agent(&python);
    let mut source = A2aSource::new(&url).unwrap();
    source.read().expect("the agent answers");
    let mut ours = BTreeMap::new();
    for _ in 0..rounds {
        our_round(&mut source, &url, per_round, &mut ours);
    }
    let out = Command::new(&python)
        .arg(repo().join("tests/sources/a2a_client.py"))
        .args(["bench", &url, &rounds.to_string(), &per_round.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "baseline: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = rounds * per_round;
    for (name, goal, what, base_key, base_name) in [
        (
            "attention",
            100.0,
            "an A2A task entering input-required to the attention item, p99 (goal: < 100 ms)",
            "attention_ms",
            "the A2A SDK's own client, subscribed to the task from its start",
        ),
        (
            "answer",
            200.0,
            "the operator's answer to the A2A task resumed, p99 (goal: < 200 ms)",
            "answer_ms",
            "the A2A SDK's own client's send_message",
        ),
    ] {
        let o = &ours[name];
        let b: Vec<f64> = base[base_key]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let (o99, b99) = (pct(o, 0.99), pct(&b, 0.99));
        Figure {
            name: &format!("a2a_{name}_p99"),
            issue: 47,
            goal: what,
            median: o99,
            unit: "ms",
            baseline: Some((b99, base_name)),
            met: Some(o99 < goal),
            note: &format!(
                "p50 {} ms vs {} ms; tasks working 1.5 s then asking, {per_round} at once; n={n}",
                pct(o, 0.5),
                pct(&b, 0.5)
            ),
        }
        .print();
    }
}
