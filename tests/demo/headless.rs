//! `pantheon demo --headless --duration 20 --seed 1`: every kind of protocol traffic appears on disk
//! within 20 demo seconds, and the root stays valid.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{json_files_under, pantheon, queue};

/// One 20-second run shared by the tests of this file (run once per test process).
fn run() -> &'static (PathBuf, Value) {
    static RUN: OnceLock<(PathBuf, Value)> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("demo-headless-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let root = dir.join("root");
        let summary = crate::common::headless(&root, 1, 20, false);
        (root, summary)
    })
}

fn states(root: &Path) -> Vec<Value> {
    json_files_under(&root.join("conductor/state"))
        .into_iter()
        .filter(|(p, _)| !p.to_string_lossy().ends_with(".aborted.json"))
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn demo_creates_the_root_it_is_given_and_reports_it() {
    let (root, s) = run();
    assert_eq!(s["root"], root.display().to_string());
    assert_eq!(s["ticks"], 200, "20 demo seconds at 10 ticks per second");
    assert_eq!(s["mode"], "headless");
}

#[test]
fn demo_completes_a_workflow_with_its_artifacts_on_disk() {
    let (root, s) = run();
    assert!(s["workflows"]["completed"].as_u64().unwrap() >= 1, "{s:#}");
    let done: Vec<Value> = states(root)
        .into_iter()
        .filter(|st| st["status"] == "completed")
        .collect();
    assert!(!done.is_empty(), "no completed workflow state on disk");
    for st in &done {
        let artifacts = st["context_bag"]["artifacts"].as_array().unwrap();
        assert!(!artifacts.is_empty());
        for a in artifacts {
            let p = root.join(a.as_str().unwrap());
            assert!(p.is_file(), "artifact {} is not on disk", p.display());
        }
    }
}

#[test]
fn demo_rejection_reroutes_to_a_fallback_god() {
    let (root, s) = run();
    assert!(s["reroutes"].as_u64().unwrap() >= 1, "{s:#}");
    let rerouted = states(root).into_iter().any(|st| {
        st["acks"].as_array().into_iter().flatten().any(|a| {
            a["status"] == "rejected" && a["rerouted_to"].as_str().is_some_and(|g| !g.is_empty())
        })
    });
    assert!(
        rerouted,
        "no state records a rejected ack rerouted to a fallback god"
    );
}

#[test]
fn demo_holds_a_dispatch_for_approval_and_the_stand_in_operator_approves_it() {
    let (root, s) = run();
    assert!(s["held_dispatches"].as_u64().unwrap() >= 1, "{s:#}");
    assert!(s["operator"]["approvals_by_sim_operator"].as_u64().unwrap() >= 1);
    let approved = states(root).into_iter().any(|st| {
        st["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["decision"] == "approved")
    });
    assert!(approved, "no state records an approval");
}

#[test]
fn demo_board_session_reaches_resolving_or_complete() {
    let (root, s) = run();
    let sessions = s["board_sessions"].as_array().unwrap();
    assert!(
        sessions
            .iter()
            .any(|x| x["status"] == "RESOLVING" || x["status"] == "COMPLETE"),
        "{s:#}"
    );
    let board = root.join("conductor/tracks/checkout/.message-bus/board");
    let on_disk = json_files_under(&board).into_iter().any(|(p, v)| {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("session-")
            && (v["status"] == "RESOLVING" || v["status"] == "COMPLETE")
    });
    assert!(on_disk, "no session file at RESOLVING or COMPLETE");
    let kinds: Vec<String> = queue(root, "checkout")
        .iter()
        .map(|m| m["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    for k in ["BOARD_ASSESS", "BOARD_DISCUSS", "BOARD_VOTE"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} on the bus");
    }
    let rounds = queue(root, "checkout")
        .iter()
        .filter(|m| m["type"] == "BOARD_DISCUSS")
        .filter_map(|m| m["payload"]["round"].as_u64())
        .max();
    assert_eq!(rounds, Some(3), "the discussion runs three rounds");
}

#[test]
fn demo_workers_lock_files_beat_and_block() {
    let (root, _) = run();
    for track in ["checkout", "search"] {
        let kinds: Vec<String> = queue(root, track)
            .iter()
            .map(|m| m["type"].as_str().unwrap_or_default().to_owned())
            .collect();
        for k in [
            "FILE_LOCK",
            "FILE_UNLOCK",
            "PROGRESS",
            "BLOCKED",
            "TASK_COMPLETE",
        ] {
            assert!(kinds.iter().any(|x| x == k), "no {k} on track {track}");
        }
        let status: Value = serde_json::from_slice(
            &std::fs::read(
                root.join("conductor/tracks")
                    .join(track)
                    .join(".message-bus/worker-status.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let workers = status.as_object().unwrap();
        assert!(!workers.is_empty(), "no heartbeats on {track}");
        assert!(workers.values().all(|w| w["last_heartbeat"].is_string()));
    }
}

#[test]
fn demo_blocked_message_names_the_lock_it_waits_for() {
    let (root, _) = run();
    let blocked: Vec<Value> = queue(root, "checkout")
        .into_iter()
        .filter(|m| m["type"] == "BLOCKED")
        .collect();
    assert!(!blocked.is_empty());
    for b in blocked {
        let res = b["payload"]["resource"].as_str().unwrap();
        assert_eq!(b["payload"]["waiting_for"], format!("FILE_UNLOCK_{res}"));
        assert!(b["payload"]["task_id"].is_string());
    }
}

#[test]
fn demo_leaves_a_stale_worker_that_the_bus_reports_with_the_compressed_threshold() {
    let (root, s) = run();
    let stale = s["stale_workers"].as_array().unwrap();
    assert!(!stale.is_empty(), "{s:#}");
    // Another process reading the same root with the demo's threshold sees it too.
    let threshold = s["stale_after_secs"].as_f64().unwrap();
    assert!(threshold < 600.0);
    let out = pantheon()
        .env("PANTHEON_STALE_AFTER_SECS", threshold.to_string())
        .arg("--root")
        .arg(root)
        .args(["bus", "--track", "search", "status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status["stale_workers"].as_u64().unwrap() >= 1, "{status:#}");
    // With the protocol's 10 minutes, the same worker is not (yet) stale: nothing was faked.
    let out = pantheon()
        .arg("--root")
        .arg(root)
        .args(["bus", "--track", "search", "status"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["stale_workers"], 0);
}

#[test]
fn demo_lock_left_to_expire_is_taken_over_by_another_worker() {
    let (root, s) = run();
    assert!(
        s["locks"]["expired_taken_over"].as_u64().unwrap() >= 1,
        "{s:#}"
    );
    let took_over = queue(root, "search")
        .iter()
        .any(|m| m["type"] == "FILE_LOCK" && m["payload"]["previous_holder"].is_string());
    assert!(
        took_over,
        "no FILE_LOCK with previous_holder on the search track"
    );
}

#[test]
fn demo_deadlock_is_detected_and_broken_by_a_force_unlock() {
    let (root, s) = run();
    assert!(s["deadlocks"]["detected"].as_u64().unwrap() >= 1, "{s:#}");
    assert!(s["deadlocks"]["broken"].as_u64().unwrap() >= 1, "{s:#}");
    let forced = queue(root, "checkout")
        .iter()
        .any(|m| m["type"] == "FILE_UNLOCK" && m["payload"]["forced_by"] == "operator");
    assert!(forced, "no forced FILE_UNLOCK");
    // The worker that lost its lock reported it and retried.
    let failed_lost = queue(root, "checkout").iter().any(|m| {
        m["type"] == "TASK_FAILED"
            && m["payload"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("lost the lock"))
    });
    assert!(failed_lost);
}

#[test]
fn demo_root_is_valid_for_the_protocol() {
    let (root, _) = run();
    let out = pantheon()
        .arg("--root")
        .arg(root)
        .arg("validate")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["errors"], 0);
    assert!(report["files_checked"].as_u64().unwrap() > 30);
}

/// The demo's probe page is never acked: its ack deadline runs out on the wall clock, the
/// simulation's supervisor pass redelivers it once (`max_deliveries: 2`) and then dead-letters it,
/// so the console's pane 2 shows a deadline and pane 9 a dead letter (at speed 10 the page's
/// `ack_wait` is 2 s).
#[test]
fn the_probe_page_runs_out_of_time_and_is_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let out = pantheon()
        .args(["demo", "--headless", "--speed", "10", "--duration", "90"])
        .args(["--seed", "2", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["dead_letters"], 1, "{s:#}");
    let dead = json_files_under(&root.join("conductor/dead"));
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0].1;
    assert_eq!(d["step"], "page-on-call");
    assert_eq!(d["to_god"], "hermes");
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 2, "{d:#}");
    assert!(d["dead_at"].is_string(), "{d:#}");
    // The demo's supervisor pass beat while it ran.
    assert!(root.join("conductor/supervisor/demo.json").is_file());
    let v = pantheon()
        .arg("--root")
        .arg(&root)
        .arg("validate")
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}
