//! Hostile files on the bus side: planted links and hard links at the bus's lock files and
//! queue never lead a write outside the root (a decoy tree outside is compared whole).

use std::os::unix::fs::symlink;

use crate::common::Env;
use crate::decoy::Decoy;

#[test]
fn a_planted_lock_mutex_link_creates_nothing_outside() {
    for target in ["planted.lock", "victim.txt"] {
        let env = Env::new();
        let decoy = Decoy::new();
        let before = decoy.tree();
        let mutex = env.bus_dir().join(".lock_mutex");
        std::fs::remove_file(&mutex).unwrap();
        symlink(decoy.path(target), &mutex).unwrap();
        let err = env.refused(&["lock", "src/a.ts", "--worker", "w1"]);
        assert!(err.contains("symbolic link"), "{err}");
        env.refused(&[
            "heartbeat",
            "--worker",
            "w1",
            "--task",
            "t",
            "--status",
            "RUNNING",
        ]);
        decoy.assert_unchanged(&before, target);
    }
}

#[test]
fn a_planted_queue_link_or_hard_link_appends_nothing_outside() {
    let env = Env::new();
    let decoy = Decoy::new();
    let queue = env.bus_dir().join("queue.jsonl");
    std::fs::remove_file(&queue).unwrap();
    symlink(decoy.path("victim.txt"), &queue).unwrap();
    let before = decoy.tree();
    let err = env.refused(&["post", "PROGRESS", "--source", "w1"]);
    assert!(err.contains("symbolic link"), "{err}");
    env.refused(&["archive", "--track-id", "t1-done"]);
    decoy.assert_unchanged(&before, "symlinked queue");

    std::fs::remove_file(&queue).unwrap();
    std::fs::hard_link(decoy.path("victim.txt"), &queue).unwrap();
    let before = decoy.tree();
    let err = env.refused(&["post", "PROGRESS", "--source", "w1"]);
    assert!(err.contains("hard links"), "{err}");
    let err = env.refused(&["archive", "--track-id", "t1-done"]);
    assert!(err.contains("hard links"), "{err}");
    // Compare the decoy whole (the victim's link count is 2 while the queue names it; that is ours).
    decoy.assert_unchanged(&before, "hard-linked queue");
}

#[test]
fn an_overlong_ttl_is_refused_clearly_and_never_panics() {
    let env = Env::new();
    let locks = env.bus_dir().join("locks.json");
    let before = std::fs::read(&locks).unwrap();
    for ttl in [
        "99999999999d",
        "3000000d",
        "366d",
        "99999999999999999999999d",
    ] {
        let err = env.refused(&["lock", "src/a.ts", "--worker", "w1", "--ttl", ttl]);
        assert!(err.contains("365d"), "{ttl}: {err}");
        assert!(!err.contains("panicked"), "{ttl}: {err}");
    }
    assert_eq!(std::fs::read(&locks).unwrap(), before);
    let ok = env.ok(&["lock", "src/a.ts", "--worker", "w1", "--ttl", "365d"]);
    let expires = ok.to_string();
    assert!(!expires.contains("+10240"), "{expires}");
}

/// A track with `n` messages, a live lock, a RUNNING worker and events, ready to archive.
fn busy_track(n: usize) -> Env {
    let env = Env::new();
    env.ok(&[
        "post",
        "PROGRESS",
        "--source",
        "w1",
        "--count",
        &n.to_string(),
    ]);
    env.ok(&[
        "post",
        "TASK_COMPLETE",
        "--source",
        "w1",
        "--payload",
        r#"{"task_id":"1.1"}"#,
    ]);
    env.ok(&["lock", "src/a.ts", "--worker", "w1", "--ttl", "1h"]);
    env.ok(&[
        "heartbeat",
        "--worker",
        "w1",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
    ]);
    env
}

/// After a completed archive: one archive holding every message once, nothing stale left.
fn queue_lines(env: &Env) -> usize {
    std::fs::read_to_string(env.bus_dir().join("queue.jsonl"))
        .unwrap()
        .lines()
        .count()
}

fn assert_archived_whole(env: &Env, n: usize) {
    let bus = env.bus_dir();
    let archive = std::fs::read_to_string(bus.join("queue.done.archive.jsonl")).unwrap();
    let lines: Vec<&str> = archive.lines().collect();
    assert_eq!(lines.len(), n, "every message archived exactly once");
    let mut ids: Vec<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
    assert!(std::fs::metadata(bus.join("queue.jsonl")).map_or(true, |m| m.len() == 0));
    assert!(!bus.join("locks.json").exists(), "stale locks left");
    assert!(
        !bus.join("worker-status.json").exists(),
        "RUNNING workers left"
    );
    let events: Vec<_> = std::fs::read_dir(bus.join("events")).unwrap().collect();
    assert!(events.is_empty(), "events left: {events:?}");
    let s = env.ok(&["status"]);
    assert!(!s.to_string().contains("RUNNING"), "{s}");
}

#[test]
fn an_archive_killed_at_any_point_is_finished_by_repeating_it() {
    let archive = ["archive", "--track-id", "done", "--force"];
    for point in [
        "archive:after-rename",
        "archive:after-clear-one",
        "archive:after-event",
    ] {
        let env = busy_track(20);
        let n = queue_lines(&env);
        let out = env
            .cmd()
            .env("PANTHEON_TEST_CRASH_AT", point)
            .args(["bus", "--track", &env.track])
            .args(archive)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "{point}: the crash point was not reached"
        );
        let r = env.ok(&archive);
        assert_eq!(r["resumed"], true, "{point}: {r}");
        assert_archived_whole(&env, n);
        // Repeating a finished archive is harmless.
        env.ok(&archive);
        assert_archived_whole(&env, n);
    }
}

#[test]
fn an_archive_sigkilled_at_random_times_is_finished_by_repeating_it() {
    use rand::Rng;
    let archive = ["archive", "--track-id", "done", "--force"];
    let mut rng = rand::rng();
    for _ in 0..25 {
        let env = busy_track(200);
        let n = queue_lines(&env);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pantheon"))
            .arg("--root")
            .arg(env.root())
            .env_remove("PANTHEON_ROOT")
            .args(["bus", "--track", &env.track])
            .args(archive)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..6000)));
        let _ = child.kill();
        child.wait().unwrap();
        env.ok(&archive);
        assert_archived_whole(&env, n);
    }
}

#[test]
fn an_oversized_message_is_refused_before_anything_is_written() {
    let env = Env::new();
    let queue = env.bus_dir().join("queue.jsonl");
    let before = std::fs::read(&queue).unwrap();
    let line = format!("{{\"note\": \"{}\"}}\n", "p".repeat(300 * 1024));
    let out = env
        .cmd()
        .args([
            "bus", "--track", &env.track, "post", "PROGRESS", "--source", "w1", "--stdin",
        ])
        .write_stdin(line)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/note") && err.contains("limit"), "{err}");
    assert_eq!(std::fs::read(&queue).unwrap(), before);
}
