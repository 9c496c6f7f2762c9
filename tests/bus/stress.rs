//! Stress with real processes: concurrent writers, heartbeats and lock contention.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{Env, bin, driver, seed_reads_queue, strict_lines};

fn pantheon(env: &Env) -> Command {
    let mut c = Command::new(bin());
    c.arg("--root").arg(env.root()).stdout(Stdio::null());
    c
}

#[test]
fn eight_writers_of_two_thousand_messages_leave_exactly_sixteen_thousand_valid_lines() {
    let env = Env::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            pantheon(&env)
                .args(["bus", "--track", "t1", "post", "PROGRESS", "--source", &format!("writer-{i}"), "--count", "2000"])
                .args(["--payload", r#"{"task_id":"stress","progress_pct":1,"current_subtask":"a fairly long subtask text to make lines realistic"}"#])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let lines = strict_lines(&env.bus_dir().join("queue.jsonl"));
    assert_eq!(lines.len(), 16_000);
    let ids: std::collections::HashSet<&str> =
        lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 16_000);
    for i in 0..8 {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l["source"] == format!("writer-{i}"))
                .count(),
            2000
        );
    }
    assert_eq!(seed_reads_queue(&env.bus_dir()), 16_000);
}

#[test]
fn sixteen_workers_heartbeating_concurrently_all_keep_their_last_beat() {
    let env = Env::new();
    let beats = 5;
    // Each worker is a shell loop of real `pantheon bus heartbeat` processes, all 16 at once.
    let children: Vec<_> = (0..16)
        .map(|w| {
            let script = format!(
                "for p in $(seq 1 {beats}); do \"$0\" --root \"$1\" bus --track t1 heartbeat --worker worker-{w} --task task-{w} --status RUNNING --progress $((p * 20)) --subtask step-$p >/dev/null || exit 1; done"
            );
            Command::new("sh")
                .args(["-c", &script])
                .arg(bin())
                .arg(env.root())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let all: Value = serde_json::from_str(
        &std::fs::read_to_string(env.bus_dir().join("worker-status.json")).unwrap(),
    )
    .unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), 16);
    for w in 0..16 {
        let e = &all[&format!("worker-{w}")];
        assert_eq!(e["progress_pct"], 100, "worker-{w}");
        assert_eq!(e["current_subtask"], format!("step-{beats}"));
        assert_eq!(e["task_id"], format!("task-{w}"));
    }
    seed_reads_queue(&env.bus_dir());
}

#[test]
fn eight_processes_contending_for_three_locks_never_share_one() {
    let env = Env::new();
    let bus = env.bus_dir();
    let counters = tempfile::tempdir().unwrap();
    // Six contenders use our CLI; two use the seed's Python acquire_lock on the same files.
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mode = if i < 6 { "cli" } else { "seed" };
            Command::new("python3")
                .arg(driver())
                .args([
                    "contend",
                    bus.to_str().unwrap(),
                    counters.path().to_str().unwrap(),
                    "3",
                ])
                .arg(format!("{mode}-{i}"))
                .arg(mode)
                .arg(bin())
                .arg(env.root())
                .arg("t1")
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut acquired = 0;
    let mut by_seed = 0;
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(s["violations"], 0, "contender {i} saw two holders: {s}");
        assert_eq!(s["release_failures"], 0, "contender {i}: {s}");
        acquired += s["acquired"].as_u64().unwrap();
        if i >= 6 {
            by_seed += s["acquired"].as_u64().unwrap();
        }
    }
    assert!(
        acquired > 50,
        "too little contention to mean anything: {acquired}"
    );
    assert!(by_seed > 0, "the Python contenders never got a lock");
    // Nothing left invalid: every lock released, the queue all valid lines, locks.json an empty object.
    let locks: Value =
        serde_json::from_str(&std::fs::read_to_string(bus.join("locks.json")).unwrap()).unwrap();
    assert_eq!(locks, serde_json::json!({}));
    let lines = strict_lines(&bus.join("queue.jsonl"));
    assert_eq!(
        lines.len() as u64,
        acquired * 2,
        "one FILE_LOCK and one FILE_UNLOCK per hold"
    );
    let r = env.ok(&["read"]);
    assert_eq!(r["skipped"], 0);
    seed_reads_queue(&bus);
}

/// Interleaved lines as they were first seen: four Python processes running the seed's `post_message`
/// (no lock at all, some lines long enough to reach the file in pieces) and four `pantheon` processes posting
/// one message per invocation, each of which checks the queue's tail for a torn line before it writes. The
/// torn-line fence must never leave an empty line, lose a line or double one, and the seed's unforgiving
/// `read_messages` must read the result. Three rounds on one queue, since the race showed in 2 runs of 6.
#[test]
fn four_unlocked_python_writers_and_four_pantheon_writers_never_leave_a_blank_line() {
    let env = Env::new();
    let bus = env.bus_dir();
    std::fs::create_dir_all(&bus).unwrap();
    let bus_s = bus.to_str().unwrap().to_string();
    const ROUNDS: usize = 3;
    const PY: usize = 120;
    const RS: usize = 40;
    for round in 0..ROUNDS {
        let py: Vec<_> = (0..4)
            .map(|i| {
                Command::new("python3")
                    .arg(driver())
                    .args(["post-unlocked", &bus_s, &PY.to_string(), &format!("py-{i}")])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let rs: Vec<_> = (0..4)
            .map(|i| {
                let root = env.root().to_path_buf();
                std::thread::spawn(move || {
                    for n in 0..RS {
                        let payload = format!(r#"{{"task_id":"rs","round":{round},"n":{n}}}"#);
                        let st = Command::new(bin())
                            .arg("--root")
                            .arg(&root)
                            .args(["bus", "--track", "t1", "post", "PROGRESS"])
                            .args(["--source", &format!("rs-{i}"), "--payload", &payload])
                            .stdout(Stdio::null())
                            .status()
                            .unwrap();
                        assert!(st.success(), "rs-{i} post {n} failed");
                    }
                })
            })
            .collect();
        for mut c in py {
            assert!(c.wait().unwrap().success());
        }
        for t in rs {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(bus.join("queue.jsonl")).unwrap();
        assert!(
            !text.contains("\n\n") && !text.starts_with('\n'),
            "round {round}: an empty line in the queue"
        );
        let lines = strict_lines(&bus.join("queue.jsonl"));
        assert_eq!(lines.len(), (round + 1) * 4 * (PY + RS), "round {round}");
    }
    let lines = strict_lines(&bus.join("queue.jsonl"));
    let ids: std::collections::HashSet<&str> =
        lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), lines.len(), "a line was doubled");
    for i in 0..4 {
        for (who, per) in [("py", PY), ("rs", RS)] {
            let n = lines
                .iter()
                .filter(|l| l["source"] == format!("{who}-{i}"))
                .count();
            assert_eq!(n, ROUNDS * per, "{who}-{i}");
        }
    }
    assert_eq!(seed_reads_queue(&bus), lines.len());
}

/// Three seed-style writers (the seed document's `post_message`: `open("a")`, one write,
/// no lock; lines of 10 B to 70 KB) beside a `pantheon bus lock`/`unlock` loop and `pantheon mcp`
/// `post_message` calls, with one CPU burner per core, so writers are preempted mid-copy. A torn tail our
/// append fenced while its writer was still copying it became a blank line (9 in 68,085 lines at full
/// size). Every line must be whole: no blank line, nothing unparsable, every post there once, and the
/// seed's own `read_messages` reads the queue. Rounds of a few seconds each (the full-size run, 2 x 15 s
/// and more, is `scripts/queue-stress.sh`); serial with every other CPU-burner test.
#[test]
fn seed_writers_beside_our_appends_on_a_loaded_machine_never_leave_a_blank_line() {
    let _heavy = crate::common::heavy();
    const ROUNDS: usize = 3;
    const SECONDS: &str = "4";
    let env = Env::new();
    let bus = env.bus_dir();
    let mut total = strict_lines(&bus.join("queue.jsonl")).len();
    for round in 0..ROUNDS {
        let out = Command::new("python3")
            .arg(driver().with_file_name("load_stress.py"))
            .arg(bin())
            .arg(env.root())
            .args([env.track.as_str(), SECONDS])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["blank"], 0, "round {round}: blank lines: {r}");
        assert_eq!(r["not_json"], 0, "round {round}: broken lines: {r}");
        assert_eq!(r["terminated"], true, "round {round}: {r}");
        assert_eq!(r["failures"], 0, "round {round}: a post failed: {r}");
        assert_eq!(
            r["posted"], r["seen"],
            "round {round}: every post once: {r}"
        );
        for who in ["seed-0", "seed-1", "seed-2", "locker", "mcp"] {
            assert!(
                r["posted"][who].as_u64().unwrap_or(0) > 0,
                "round {round}: {who} posted nothing: {r}"
            );
        }
        total += r["lines"].as_u64().unwrap() as usize;
        assert_eq!(
            r["seed_read"].as_u64(),
            Some(total as u64),
            "round {round}: {r}"
        );
    }
    // The whole queue, every round together, read by our strict reader and the seed's.
    assert_eq!(strict_lines(&bus.join("queue.jsonl")).len(), total);
    assert_eq!(seed_reads_queue(&bus), total);
}
