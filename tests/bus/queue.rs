//! The queue, events, heartbeats, deadlocks, status and archive through the CLI.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Env, bin, strict_lines};

#[test]
fn init_creates_the_layout_and_never_wipes() {
    let env = Env::new();
    let bus = env.bus_dir();
    for f in [
        "queue.jsonl",
        ".lock_mutex",
        "locks.json",
        "worker-status.json",
        "events",
        "board",
    ] {
        assert!(bus.join(f).exists(), "{f} missing");
    }
    env.ok(&["post", "PROGRESS", "--source", "w1"]);
    env.ok(&["lock", "a.ts", "--worker", "w1"]);
    let again = env.ok(&["init"]);
    assert_eq!(again["created"], json!([]));
    assert_eq!(strict_lines(&bus.join("queue.jsonl")).len(), 2);
    assert!(env.ok(&["status"])["locks"][0]["live"].as_bool().unwrap());
}

#[test]
fn commands_on_a_missing_bus_say_how_to_create_it() {
    let env = Env::empty();
    let err = env.refused(&["post", "PROGRESS", "--source", "w"]);
    assert!(err.contains("bus --track t1 init"), "{err}");
    let bad = env
        .cmd()
        .args(["bus", "--track", "../etc", "init"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid track"));
}

#[test]
fn post_writes_the_envelope_and_read_filters_by_type_source_and_instant() {
    let env = Env::new();
    let m = env.ok(&[
        "post",
        "PROGRESS",
        "--source",
        "worker-1",
        "--payload",
        r#"{"task_id":"1.1","progress_pct":50}"#,
    ]);
    assert!(m["id"].as_str().unwrap().starts_with("msg-"));
    assert!(m["timestamp"].as_str().unwrap().ends_with('Z'));
    let line = &strict_lines(&env.bus_dir().join("queue.jsonl"))[0];
    let keys: Vec<&str> = line
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["id", "type", "source", "timestamp", "payload"]);
    env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "worker-2",
        "--payload",
        r#"{"task_id":"1.2"}"#,
    ]);
    env.ok(&["post", "CUSTOM_THING", "--source", "worker-1"]);

    let by_type = env.ok(&["read", "--type", "TASK_COMPLETE"]);
    assert_eq!(by_type["count"], 1);
    assert_eq!(by_type["messages"][0]["source"], "worker-2");
    let by_source = env.ok(&["read", "--source", "worker-1"]);
    assert_eq!(by_source["count"], 2);
    assert_eq!(
        by_source["messages"][1]["type"], "CUSTOM_THING",
        "unknown types are kept"
    );
    // The same instant written with another precision and zone still counts as "since".
    let ts = m["timestamp"].as_str().unwrap().replace('Z', "+00:00");
    assert_eq!(env.ok(&["read", "--since", &ts])["count"], 3);
    assert_eq!(
        env.ok(&["read", "--since", "2999-01-01T00:00:00"])["count"],
        0
    );
    // Not a moment: bad usage (exit 2), with the one error text every moment flag has.
    let out = env.run("bus", &["read", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"yesterday\" is not a moment"));
    assert!(
        env.bus_dir()
            .join("events/TASK_COMPLETE_1.2.event")
            .exists()
    );
    let content =
        std::fs::read_to_string(env.bus_dir().join("events/TASK_COMPLETE_1.2.event")).unwrap();
    assert!(content.starts_with("msg-"));
}

#[test]
fn post_refuses_bad_types_and_payloads_and_writes_nothing() {
    let env = Env::new();
    assert!(
        env.refused(&["post", "progress", "--source", "w"])
            .contains("^[A-Z][A-Z0-9_]*$")
    );
    assert!(
        env.refused(&["post", "X", "--source", "w", "--payload", "[1]"])
            .contains("JSON object")
    );
    assert!(
        env.refused(&["post", "X", "--source", "w", "--payload", "{"])
            .contains("not JSON")
    );
    let usage = env
        .cmd()
        .args(["bus", "--track", "t1", "post", "X"])
        .output()
        .unwrap();
    assert_eq!(
        usage.status.code(),
        Some(2),
        "a missing --source is bad usage"
    );
    assert_eq!(
        std::fs::metadata(env.bus_dir().join("queue.jsonl"))
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn post_many_from_one_process_with_count_and_stdin() {
    let env = Env::new();
    assert_eq!(
        env.ok(&["post", "PROGRESS", "--source", "w", "--count", "50"])["posted"],
        50
    );
    let out = env
        .cmd()
        .args(["bus", "--track", "t1", "post", "PROGRESS", "--source", "w", "--count", "0", "--stdin"])
        .write_stdin("{\"task_id\":\"a\"}\n\n{\"type\":\"TASK_FAILED\",\"source\":\"w9\",\"payload\":{\"task_id\":\"b\",\"error\":\"x\"}}\n")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = strict_lines(&env.bus_dir().join("queue.jsonl"));
    assert_eq!(lines.len(), 52);
    assert_eq!(lines[50]["payload"]["task_id"], "a");
    assert_eq!(
        (lines[51]["type"].as_str(), lines[51]["source"].as_str()),
        (Some("TASK_FAILED"), Some("w9"))
    );
    assert!(env.bus_dir().join("events/TASK_FAILED_b.event").exists());
    // One bad line in a batch and nothing of it is posted.
    let out = env
        .cmd()
        .args([
            "bus", "--track", "t1", "post", "PROGRESS", "--source", "w", "--count", "3", "--stdin",
        ])
        .write_stdin("{\"type\":\"lower case\",\"payload\":{}}\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(strict_lines(&env.bus_dir().join("queue.jsonl")).len(), 52);
}

#[test]
fn a_torn_line_is_fenced_and_readers_skip_bad_lines() {
    let env = Env::new();
    let q = env.bus_dir().join("queue.jsonl");
    env.ok(&["post", "PROGRESS", "--source", "w"]);
    let mut f = std::fs::OpenOptions::new().append(true).open(&q).unwrap();
    f.write_all(b"\nnot json\n{\"id\": \"msg-torn\", \"type\": \"PROG")
        .unwrap();
    // Its writer died a while ago (a fresh torn tail is waited for, docs/PROTOCOL.md 3.2).
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(10))
        .unwrap();
    let r = env.ok(&["read"]);
    assert_eq!(
        (r["count"].as_u64(), r["skipped"].as_u64()),
        (Some(1), Some(3))
    );
    env.ok(&["post", "PROGRESS", "--source", "w"]);
    let r = env.ok(&["read"]);
    assert_eq!(
        (r["count"].as_u64(), r["skipped"].as_u64()),
        (Some(2), Some(3))
    );
    let t = env.ok(&["read", "--tail", "1"]);
    assert_eq!(t["count"], 1);
    assert_eq!(t["messages"][0]["id"], r["messages"][1]["id"]);
}

#[test]
fn read_follow_streams_new_messages_as_json_lines() {
    let env = Env::new();
    env.ok(&["post", "PROGRESS", "--source", "early"]);
    let mut child = Command::new(bin())
        .args(["--root"])
        .arg(env.root())
        .args([
            "bus",
            "--track",
            "t1",
            "read",
            "--follow",
            "--type",
            "TASK_COMPLETE",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "w1",
        "--payload",
        r#"{"task_id":"1"}"#,
    ]);
    env.ok(&["post", "PROGRESS", "--source", "w1"]);
    env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "w2",
        "--payload",
        r#"{"task_id":"2"}"#,
    ]);
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (first["source"].as_str(), second["source"].as_str()),
        (Some("w1"), Some("w2"))
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn wait_returns_when_the_event_appears_and_exits_1_on_timeout() {
    let env = Env::new();
    let child = Command::new(bin())
        .arg("--root")
        .arg(env.root())
        .args([
            "bus",
            "--track",
            "t1",
            "wait",
            "TASK_COMPLETE_7",
            "--timeout",
            "60",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let posted = env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "w",
        "--payload",
        r#"{"task_id":"7"}"#,
    ]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["event"]["content"], posted["id"]);

    // The event exists now: without --fresh it matches at once; with --fresh it does not count.
    env.ok(&["wait", "TASK_COMPLETE_*", "--timeout", "5"]);
    let err = env.refused(&["wait", "TASK_COMPLETE_7", "--timeout", "0.3", "--fresh"]);
    assert!(err.contains("no event matching"), "{err}");
}

#[test]
fn wait_refuses_a_timeout_that_is_no_duration_instead_of_panicking() {
    let env = Env::new();
    for t in ["1e30", "-1", "NaN", "inf"] {
        let arg = format!("--timeout={t}");
        let err = env.refused(&["wait", "TASK_COMPLETE_*", &arg]);
        assert!(
            err.contains("--timeout must be a number of seconds"),
            "{t}: {err}"
        );
    }
}

#[test]
fn heartbeats_merge_and_staleness_is_reported() {
    let env = Env::new();
    env.ok(&[
        "heartbeat",
        "--worker",
        "w1",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
        "--progress",
        "10",
        "--subtask",
        "client",
    ]);
    let r = env.ok(&[
        "heartbeat",
        "--worker",
        "w1",
        "--task",
        "1.1",
        "--status",
        "COMPLETED",
        "--progress",
        "100",
    ]);
    assert_eq!(r["status"], "COMPLETE");
    assert_eq!(
        r["current_subtask"], "client",
        "fields a beat does not set are kept"
    );
    assert!(
        env.refused(&[
            "heartbeat",
            "--worker",
            "w",
            "--task",
            "t",
            "--status",
            "NAPPING"
        ])
        .contains("RUNNING")
    );
    assert!(
        env.refused(&[
            "heartbeat",
            "--worker",
            "w",
            "--task",
            "t",
            "--status",
            "RUNNING",
            "--progress",
            "101"
        ])
        .contains("0–100")
    );
    // A foreign worker silent for an hour.
    let p = env.bus_dir().join("worker-status.json");
    let mut all: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    all["old"] = json!({"task_id": "2", "status": "RUNNING", "last_heartbeat": "2026-01-01T00:00:00Z", "custom": 1});
    std::fs::write(&p, serde_json::to_string(&all).unwrap()).unwrap();
    let s = env.ok(&["status"]);
    assert_eq!(s["stale_workers"], 1);
    let old = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == "old")
        .unwrap();
    assert_eq!(
        (old["stale"].as_bool(), old["custom"].as_i64()),
        (Some(true), Some(1))
    );
}

#[test]
fn deadlocks_report_the_cycle_with_workers_and_resources() {
    let env = Env::new();
    env.ok(&["lock", "a.ts", "--worker", "w1"]);
    env.ok(&["lock", "b.ts", "--worker", "w2"]);
    env.ok(&[
        "post",
        "BLOCKED",
        "--source",
        "w1",
        "--payload",
        r#"{"task_id":"1","waiting_for":"FILE_UNLOCK_b.ts","resource":"b.ts"}"#,
    ]);
    assert_eq!(env.ok(&["deadlocks"])["deadlocked"], false);
    env.ok(&[
        "post",
        "BLOCKED",
        "--source",
        "w2",
        "--payload",
        r#"{"task_id":"2","waiting_for":"file_lock","resource":"./a.ts"}"#,
    ]);
    let r = env.ok(&["deadlocks"]);
    assert_eq!(r["deadlocked"], true);
    assert_eq!(r["cycles"][0]["workers"], json!(["w1", "w2"]));
    assert_eq!(r["cycles"][0]["resources"], json!(["b.ts", "a.ts"]));
    // w2 moves on: the cycle is gone.
    env.ok(&["post", "PROGRESS", "--source", "w2"]);
    assert_eq!(env.ok(&["deadlocks"])["cycles"], json!([]));
}

#[test]
fn archive_is_refused_while_active_and_keeps_the_board() {
    let env = Env::new();
    env.board(&[
        "open",
        "--checkpoint",
        "QUICK_REVIEW",
        "--proposal",
        "ship it",
    ]);
    env.ok(&["lock", "a.ts", "--worker", "w1"]);
    env.ok(&[
        "heartbeat",
        "--worker",
        "w2",
        "--task",
        "2",
        "--status",
        "RUNNING",
    ]);
    let err = env.refused(&["archive", "--track-id", "stripe-1"]);
    assert!(
        err.contains("a.ts (held by w1)") && err.contains("w2") && err.contains("--force"),
        "{err}"
    );
    env.ok(&["unlock", "a.ts", "--worker", "w1"]);
    let r = env.ok(&["archive", "--track-id", "stripe-1", "--force"]);
    assert_eq!(r["running_workers"], json!(["w2"]));
    let bus = env.bus_dir();
    assert!(bus.join("queue.stripe-1.archive.jsonl").exists());
    assert!(!bus.join("locks.json").exists() && !bus.join("worker-status.json").exists());
    assert_eq!(std::fs::read_dir(bus.join("events")).unwrap().count(), 0);
    assert!(std::fs::read_dir(bus.join("board")).unwrap().count() > 0);
    assert_eq!(
        strict_lines(&bus.join("queue.stripe-1.archive.jsonl")).len(),
        3
    );
    // The bus keeps working after the archive, with a fresh queue.
    env.ok(&["post", "PROGRESS", "--source", "w"]);
    assert_eq!(env.ok(&["read"])["count"], 1);
    assert!(
        env.refused(&["archive", "--track-id", "stripe-1"])
            .contains("already exists")
    );
    assert!(
        env.refused(&["archive", "--track-id", "../x"])
            .contains("invalid track id")
    );
}
