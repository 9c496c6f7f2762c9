//! Interoperation with real Python processes running the seed's functions (tests/bus/python).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{Env, driver, python_json, seed_reads_queue, strict_lines};

#[test]
fn python_and_pantheon_append_concurrently_without_losing_a_line() {
    let env = Env::new();
    let bus = env.bus_dir();
    let bus_s = bus.to_str().unwrap();
    let mut children = Vec::new();
    for i in 0..3 {
        children.push(
            Command::new("python3")
                .arg(driver())
                .args(["post", bus_s, "500", &format!("py-{i}")])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut c = std::process::Command::new(crate::common::bin());
        c.arg("--root").arg(env.root());
        c.args([
            "bus",
            "--track",
            "t1",
            "post",
            "PROGRESS",
            "--source",
            &format!("rs-{i}"),
            "--count",
            "500",
        ]);
        children.push(c.stdout(Stdio::null()).spawn().unwrap());
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let lines = strict_lines(&bus.join("queue.jsonl"));
    assert_eq!(lines.len(), 3000);
    for i in 0..3 {
        for who in ["py", "rs"] {
            let n = lines
                .iter()
                .filter(|l| l["source"] == format!("{who}-{i}"))
                .count();
            assert_eq!(n, 500, "{who}-{i}");
        }
    }
    let r = env.ok(&["read"]);
    assert_eq!(
        (r["count"].as_u64(), r["skipped"].as_u64()),
        (Some(3000), Some(0))
    );
    assert_eq!(python_json(&["read-all", bus_s])["queue"], 3000);
    seed_reads_queue(&bus);
}

#[test]
fn a_python_holder_of_the_mutex_makes_pantheon_wait_then_proceed() {
    let env = Env::new();
    let bus = env.bus_dir();
    let mut holder = Command::new("python3")
        .arg(driver())
        .args(["hold-mutex", bus.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "held");
    let blocked = env
        .cmd()
        .env("PANTHEON_LOCK_TIMEOUT_MS", "300")
        .args(["bus", "--track", "t1", "lock", "a.ts", "--worker", "w1"])
        .output()
        .unwrap();
    assert_eq!(blocked.status.code(), Some(1));
    let err = String::from_utf8_lossy(&blocked.stderr);
    assert!(
        err.contains("timed out") && err.contains(".lock_mutex"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(bus.join("locks.json"))
            .unwrap()
            .trim(),
        "{}"
    );
    // Start ours waiting (a bounded blocking wait, not a single try), then let Python go.
    let waiting = Command::new(crate::common::bin())
        .arg("--root")
        .arg(env.root())
        .env("PANTHEON_LOCK_TIMEOUT_MS", "20000")
        .args(["bus", "--track", "t1", "lock", "a.ts", "--worker", "w1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    holder.stdin.take().unwrap().write_all(b"go\n").unwrap();
    holder.wait().unwrap();
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["worker_id"], "w1");
    seed_reads_queue(&bus);
}

#[test]
fn pantheon_holding_the_mutex_makes_python_acquire_lock_back_off() {
    let env = Env::new();
    let bus = env.bus_dir();
    let bus_s = bus.to_str().unwrap();
    {
        let _ours = pantheon::engine::FileLock::exclusive(
            &pantheon::engine::Root::at(env.root()),
            &bus.join(".lock_mutex"),
        )
        .unwrap();
        assert_eq!(
            python_json(&["try-lock", bus_s, "a.ts", "py-1"]),
            json!({"acquired": false})
        );
    }
    assert_eq!(
        python_json(&["try-lock", bus_s, "a.ts", "py-1"]),
        json!({"acquired": true})
    );
    seed_reads_queue(&bus);
}

#[test]
fn python_and_pantheon_respect_each_others_locks() {
    let env = Env::new();
    let bus = env.bus_dir();
    let bus_s = bus.to_str().unwrap();
    assert_eq!(
        python_json(&["try-lock", bus_s, "src/a.ts", "py-1"])["acquired"],
        true
    );
    assert!(
        env.refused(&["lock", "./src/a.ts", "--worker", "w1"])
            .contains("locked by py-1")
    );
    env.ok(&["lock", "src/b.ts", "--worker", "w1"]);
    assert_eq!(
        python_json(&["try-lock", bus_s, "src/b.ts", "py-1"])["acquired"],
        false
    );
    assert_eq!(
        python_json(&["release", bus_s, "src/b.ts", "py-1"])["released"],
        false
    );
    env.ok(&["unlock", "src/b.ts", "--worker", "w1"]);
    assert_eq!(
        python_json(&["try-lock", bus_s, "src/b.ts", "py-1"])["acquired"],
        true
    );
    assert_eq!(
        python_json(&["release", bus_s, "src/a.ts", "py-1"])["released"],
        true
    );
    env.ok(&["lock", "src/a.ts", "--worker", "w1"]);
    // Python heartbeats and ours merge into one file.
    env.ok(&[
        "heartbeat",
        "--worker",
        "w1",
        "--task",
        "1",
        "--status",
        "RUNNING",
        "--subtask",
        "kept",
    ]);
    python_json(&["heartbeat", bus_s, "py-1", "2", "BLOCKED", "40"]);
    python_json(&["heartbeat", bus_s, "w1", "1", "RUNNING", "60"]);
    let s = env.ok(&["status"]);
    let w1 = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == "w1")
        .unwrap();
    assert_eq!(
        (w1["progress_pct"].as_i64(), w1["current_subtask"].as_str()),
        (Some(60), Some("kept"))
    );
    assert_eq!(s["workers"].as_array().unwrap().len(), 2);
    seed_reads_queue(&bus);
}

#[test]
fn python_reads_every_file_we_write() {
    let env = Env::new();
    let bus = env.bus_dir();
    env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "w1",
        "--payload",
        r#"{"task_id":"1.1","commit_sha":"abc","files_modified":[],"unblocks":[]}"#,
    ]);
    env.ok(&["lock", "src/a.ts", "--worker", "w1"]);
    env.ok(&["lock", "src/b.ts", "--worker", "w2", "--ttl", "2h"]);
    env.ok(&[
        "heartbeat",
        "--worker",
        "w1",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
        "--progress",
        "42.5",
    ]);
    env.board(&["open", "--checkpoint", "EVALUATE_PLAN", "--proposal", "p"]);
    for d in ["CA", "CPO", "CSO", "COO", "CXO"] {
        env.board(&[
            "assess",
            "--director",
            d,
            "--verdict",
            "APPROVE",
            "--score",
            "9",
        ]);
    }
    env.board(&["advance"]);
    env.board(&[
        "discuss",
        "--from",
        "CA",
        "--to",
        "ALL",
        "--type",
        "AGREE",
        "--message",
        "ok",
    ]);
    env.board(&["advance", "--force"]);
    for d in ["CA", "CPO", "CSO", "COO", "CXO"] {
        env.board(&[
            "vote",
            "--director",
            d,
            "--verdict",
            "APPROVE",
            "--confidence",
            "0.9",
            "--condition",
            "c",
        ]);
    }
    env.board(&["resolve"]);
    let seen = python_json(&["read-all", bus.to_str().unwrap()]);
    assert_eq!(seen["queue"], strict_lines(&bus.join("queue.jsonl")).len());
    assert_eq!(seen["locks"]["src/b.ts"]["worker_id"], "w2");
    assert_eq!(seen["workers"]["w1"]["progress_pct"], 42.5);
    assert_eq!(seen["sessions"][0]["status"], "COMPLETE");
    assert_eq!(seen["assessments"]["CSO"]["score"], 9);
    assert_eq!(seen["votes"]["CXO"]["conditions"], json!(["c"]));
    assert_eq!(seen["discussion"][0]["message"], "ok");
    assert!(
        seen["resolution_md"]
            .as_str()
            .unwrap()
            .contains("**Verdict**: APPROVED")
    );
    assert!(
        seen["events"]["BOARD_RESOLVE.event"]
            .as_str()
            .unwrap()
            .starts_with("msg-")
    );
    assert!(
        seen["events"]["TASK_COMPLETE_1.1.event"]
            .as_str()
            .unwrap()
            .starts_with("msg-")
    );
    seed_reads_queue(&bus);
}

/// Kills and reaps a child when the test ends, also on panic.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_line_another_writer_is_still_copying_is_never_fenced() {
    // The seed's unlocked append writes half a line, waits until our post holds the queue's lock,
    // pauses 5 ms, then finishes the line. Fencing that live tail would split it (or, when the rest
    // lands first, leave a blank line); the seed's read_messages fails on either.
    stalled_writer_is_waited_for("5");
}

#[test]
fn a_writer_preempted_mid_line_for_far_longer_than_a_copy_is_still_waited_for() {
    // The same with a 600 ms pause: what a loaded machine does to a writer preempted mid-copy. The old
    // 25 ms settle took such a tail for a dead writer's and fenced it: the rest of the line then
    // landed after our newline as a line of its own, and our fence left a blank line before ours.
    stalled_writer_is_waited_for("600");
}

fn stalled_writer_is_waited_for(pause_ms: &str) {
    let env = Env::new();
    let bus = env.bus_dir();
    env.ok(&["post", "PROGRESS", "--source", "before"]);
    let mut py = Reaped(
        Command::new("python3")
            .arg(driver())
            .args(["slow-post", bus.to_str().unwrap(), pause_ms])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(py.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "half");
    env.ok(&["post", "PROGRESS", "--source", "during"]);
    assert!(py.0.wait().unwrap().success());
    let text = std::fs::read_to_string(bus.join("queue.jsonl")).unwrap();
    assert!(!text.contains("\n\n"), "a blank line: {text}");
    let sources: Vec<_> = strict_lines(&bus.join("queue.jsonl"))
        .iter()
        .map(|l| l["source"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sources, ["before", "slow", "during"]);
    seed_reads_queue(&bus);
}

/// `bus init` leaves the board files as the seed's `init_message_bus` does, so the
/// seed's board readers work on a track we initialised before any session; `board open` then archives
/// nothing for those empty files (no `unknown-…` session), and the readers keep working after it.
#[test]
fn the_seeds_board_readers_work_on_a_track_we_initialised() {
    let env = Env::new();
    let bus = env.bus_dir();
    for f in ["board/assessments.json", "board/votes.json"] {
        assert_eq!(
            std::fs::read_to_string(bus.join(f)).unwrap().trim(),
            "{}",
            "{f}"
        );
    }
    assert_eq!(
        std::fs::read(bus.join("board/discussion.jsonl")).unwrap(),
        b""
    );
    let r = python_json(&["board-readers", bus.to_str().unwrap(), "CA"]);
    assert_eq!(r, serde_json::json!({"messages": 0, "verdict": "ESCALATE"}));
    // Safe to run again: nothing rewritten.
    assert_eq!(env.ok(&["init"])["created"], serde_json::json!([]));
    let opened = env.board(&["open", "--checkpoint", "QUICK_REVIEW", "--proposal", "p"]);
    assert_eq!(opened["archived"], serde_json::Value::Null, "{opened}");
    let archive = bus.join("board/archive");
    assert!(!archive.exists() || std::fs::read_dir(&archive).unwrap().next().is_none());
    let r = python_json(&["board-readers", bus.to_str().unwrap(), "CA"]);
    assert_eq!(r["messages"], 0);
    seed_reads_queue(&bus);
}
