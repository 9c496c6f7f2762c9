//! The foreign fixture root (quirks and junk included) is read without error and its problems reported.

use crate::common::Env;
use crate::fixture_root::{copy_dir, fixture_root as fixture};

fn fixture_env() -> Env {
    let src = fixture();
    assert!(
        src.is_dir(),
        "fixture root missing at {} (set PANTHEON_FIXTURE_ROOT)",
        src.display()
    );
    let env = Env::empty();
    copy_dir(&src, env.root());
    Env {
        track: "stripe-checkout_20260201".into(),
        ..env
    }
}

#[test]
fn the_fixture_bus_reads_without_error() {
    let env = fixture_env();
    let r = env.ok(&["read"]);
    assert_eq!(r["count"], 8);
    assert_eq!(r["skipped"], 3, "blank, non-JSON and torn lines");
    assert_eq!(
        env.ok(&["read", "--tail", "2"])["messages"][1]["type"],
        "TASK_FAILED"
    );
    assert_eq!(
        env.ok(&["read", "--since", "2026-02-01T12:08:20.2Z"])["count"],
        5,
        "the BOARD_ASSESS at 12:01:10 sits later in the file but is earlier in time"
    );

    let s = env.ok(&["status"]);
    let locks = s["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 3);
    assert_eq!(
        s["live_locks"], 2,
        "the live lock and the bare-string entry"
    );
    let workers = s["workers"].as_array().unwrap();
    let statuses: Vec<&str> = workers
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["RUNNING", "COMPLETE", "FAILED"]);
    assert_eq!(s["stale_workers"], 1);
    assert_eq!(s["board"]["status"], "DISCUSSING");
    let empty_event = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "FILE_UNLOCK_all.event")
        .unwrap();
    assert_eq!(empty_event["content"], "");

    let d = env.ok(&["deadlocks"]);
    assert_eq!(d["deadlocked"], false);
    assert_eq!(d["waits"][0]["holder"], "worker-1.1-20260201120800");

    let b = env.board(&["status"]);
    assert_eq!(b["discussion"].as_array().unwrap().len(), 3);
    assert_eq!(b["session"]["phases"]["discuss"]["rounds"], 1);
    assert_eq!(b["missing_votes"].as_array().unwrap().len(), 5);
}

#[test]
fn the_fixture_board_continues_and_appending_fences_the_torn_line() {
    let env = fixture_env();
    env.board(&[
        "discuss",
        "--from",
        "CXO",
        "--to",
        "ALL",
        "--type",
        "AGREE",
        "--message",
        "fine",
    ]);
    let lines = crate::common::strict_lines(&env.bus_dir().join("board/discussion.jsonl"));
    assert_eq!(lines[3]["round"], 2, "round 1 is done, so this is round 2");
    let r = env.ok(&["read"]);
    assert_eq!(
        (r["count"].as_u64(), r["skipped"].as_u64()),
        (Some(9), Some(3))
    );
    let opened = env.board(&["open", "--checkpoint", "QUICK_REVIEW", "--proposal", "next"]);
    assert_eq!(opened["archived"]["session_id"], "board-20260201120005");
    let old = env.bus_dir().join("board/archive/board-20260201120005");
    for f in [
        "session-board-20260201120005.json",
        "assessments.json",
        "discussion.jsonl",
        "votes.json",
        "resolution.md",
    ] {
        assert!(old.join(f).exists(), "{f} not archived");
    }
}
