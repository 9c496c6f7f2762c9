//! The bus and board tools: locks, messages, heartbeats, events and a board vote.

use serde_json::json;

use crate::harness::*;

const TRACK: &str = "checkout";

#[test]
fn lock_is_refused_while_held_and_granted_after_release() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let lock = |worker: &str| {
        call(
            "acquire_lock",
            json!({"track": TRACK, "filepath": "src/pay.rs", "worker_id": worker}),
        )
    };
    let unlock = |worker: &str| {
        call(
            "release_lock",
            json!({"track": TRACK, "filepath": "./src//pay.rs", "worker_id": worker}),
        )
    };
    let report = root.session(&[
        lock("worker-1"),
        lock("worker-2"),
        unlock("worker-2"),
        lock("worker-1"),
        unlock("worker-1"),
        lock("worker-2"),
    ]);
    ok(&report.results[0]);
    let held = refused(&report.results[1]);
    assert!(held.contains("worker-1"), "says who holds it: {held}");
    let not_holder = refused(&report.results[2]);
    assert!(not_holder.contains("worker-1"), "{not_holder}");
    ok(&report.results[3]); // the holder renews its lease
    ok(&report.results[4]);
    ok(&report.results[5]);

    let messages = root.session(&[call(
        "read_messages",
        json!({"track": TRACK, "msg_type": "FILE_UNLOCK"}),
    )]);
    let text = messages.results[0]["text"].as_str().unwrap().to_string();
    ok(&messages.results[0]);
    assert!(text.contains("worker-1"), "the release was posted: {text}");
}

#[test]
fn messages_heartbeats_and_events_round_trip() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let report = root.session(&[
        call(
            "post_message",
            json!({"track": TRACK, "msg_type": "PROGRESS", "source": "worker-1",
                   "payload": {"task_id": "1.1", "progress_pct": 40, "current_subtask": "tests"}}),
        ),
        call(
            "update_worker_status",
            json!({"track": TRACK, "worker_id": "worker-1", "task_id": "1.1",
                   "status": "RUNNING", "progress_pct": 40, "current_subtask": "tests"}),
        ),
        call(
            "post_message",
            json!({"track": TRACK, "msg_type": "TASK_COMPLETE", "source": "worker-1",
                   "payload": {"task_id": "1.1", "commit_sha": "abc", "files_modified": [],
                               "unblocks": []}}),
        ),
        call(
            "wait_for_event",
            json!({"track": TRACK, "event_pattern": "TASK_COMPLETE_1.1", "timeout": 10}),
        ),
        call("read_messages", json!({"track": TRACK, "tail": 1})),
        call("detect_deadlocks", json!({"track": TRACK})),
        call(
            "post_message",
            json!({"track": TRACK, "msg_type": "lower", "source": "w"}),
        ),
    ]);
    for (i, r) in report.results[..6].iter().enumerate() {
        ok(r);
        assert_eq!(r["is_error"], json!(false), "step {i}");
    }
    let waited = report.results[3]["text"].as_str().unwrap();
    assert!(waited.contains("TASK_COMPLETE_1.1"), "{waited}");
    let tail = report.results[4]["text"].as_str().unwrap();
    assert!(
        tail.contains("TASK_COMPLETE") && !tail.contains("\"PROGRESS\""),
        "{tail}"
    );
    let bad_type = refused(&report.results[6]);
    assert!(bad_type.contains("lower"), "{bad_type}");

    let status = root
        .path()
        .join("conductor/tracks")
        .join(TRACK)
        .join(".message-bus/worker-status.json");
    let workers: serde_json::Value =
        serde_json::from_slice(&std::fs::read(status).unwrap()).unwrap();
    assert_eq!(workers["worker-1"]["status"], json!("RUNNING"));
    assert!(workers["worker-1"]["last_heartbeat"].is_string());
}

#[test]
fn a_wait_is_woken_by_a_post_on_the_same_connection() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    // Sent together on one connection: the wait is answered by the event the post creates, with
    // no sleeps (the event is the signal), whichever of the two the server starts first.
    let report = root.session(&[gather(vec![
        call(
            "wait_for_event",
            json!({"track": TRACK, "event_pattern": "TASK_COMPLETE_7.7", "timeout": 60}),
        ),
        call("read_messages", json!({"track": TRACK, "tail": 1})),
        call(
            "post_message",
            json!({"track": TRACK, "msg_type": "TASK_COMPLETE", "source": "worker-7",
                   "payload": {"task_id": "7.7"}}),
        ),
    ])]);
    let g = &report.results[0];
    let results = g["results"].as_array().unwrap();
    ok(&results[1]);
    ok(&results[2]);
    let waited = ok(&results[0]);
    assert_eq!(
        waited["matched"],
        json!(true),
        "the post was served while the wait blocked: {waited}"
    );
}

#[test]
fn quick_calls_are_answered_while_a_wait_is_pending() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let report = root.session(&[gather(vec![
        call(
            "wait_for_event",
            json!({"track": TRACK, "event_pattern": "NEVER_*", "timeout": 3}),
        ),
        call("board_status", json!({"track": TRACK})),
        call("read_messages", json!({"track": TRACK})),
        call("detect_deadlocks", json!({"track": TRACK})),
    ])]);
    let g = &report.results[0];
    let results = g["results"].as_array().unwrap();
    assert_eq!(
        ok(&results[0])["matched"],
        json!(false),
        "a timeout is an answer, not an error"
    );
    assert_eq!(
        g["finished_order"].as_array().unwrap().last(),
        Some(&json!(0)),
        "the three quick calls did not wait for the blocked one: {g}"
    );
}

#[test]
fn board_runs_from_open_to_a_resolved_vote() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let directors = ["CA", "CPO", "CSO", "COO", "CXO"];
    let mut steps = vec![call(
        "board_open",
        json!({"track": TRACK, "checkpoint": "EVALUATE_PLAN", "proposal": "Ship checkout v2"}),
    )];
    for d in directors {
        steps.push(call(
            "board_assess",
            json!({"track": TRACK, "director": d, "verdict": "APPROVE", "score": 8,
                   "concerns": [], "recommendations": ["monitor latency"]}),
        ));
    }
    // A vote before the voting phase is refused.
    steps.push(call(
        "board_vote",
        json!({"track": TRACK, "director": "CA", "final_verdict": "APPROVE", "confidence": 0.9}),
    ));
    steps.push(call("board_advance", json!({"track": TRACK})));
    steps.push(call(
        "board_discuss",
        json!({"track": TRACK, "from": "CSO", "to": "ALL", "msg_type": "AGREE",
               "message": "No blocking risk."}),
    ));
    steps.push(call("board_next_round", json!({"track": TRACK})));
    steps.push(call(
        "board_advance",
        json!({"track": TRACK, "force": true}),
    ));
    for (i, d) in directors.iter().enumerate() {
        let verdict = if i < 4 { "APPROVE" } else { "REJECT" };
        steps.push(call(
            "board_vote",
            json!({"track": TRACK, "director": d, "final_verdict": verdict, "confidence": 0.8,
                   "conditions": [format!("condition of {d}")]}),
        ));
    }
    steps.push(call("board_advance", json!({"track": TRACK})));
    steps.push(call("board_resolve", json!({"track": TRACK})));
    steps.push(call("board_status", json!({"track": TRACK})));
    let report = root.session(&steps);
    let r = &report.results;

    ok(&r[0]);
    for a in &r[1..6] {
        ok(a);
    }
    refused(&r[6]);
    for s in &r[7..11] {
        ok(s);
    }
    for v in &r[11..16] {
        ok(v);
    }
    assert_eq!(ok(&r[16])["to"], json!("RESOLVING"));
    let resolved = ok(&r[17]);
    assert_eq!(
        resolved["verdict"],
        json!("APPROVED"),
        "4 approvals of 5: {resolved}"
    );
    assert_eq!(resolved["dissent"], json!(["CXO"]), "{resolved}");
    let status = ok(&r[18]).to_string();
    assert!(status.contains("COMPLETE"), "{status}");
    assert!(
        root.path()
            .join("conductor/tracks")
            .join(TRACK)
            .join(".message-bus/board/resolution.md")
            .exists()
    );
}

#[test]
fn read_messages_is_paged_by_limit_and_cursor() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    root.cli_json(&[
        "bus", "--track", TRACK, "post", "PROGRESS", "--source", "w1", "--count", "150",
    ]);
    let first = root.session(&[call("read_messages", json!({"track": TRACK}))]);
    let page = ok(&first.results[0]);
    assert_eq!(page["count"], 150, "count is every match");
    assert_eq!(
        page["messages"].as_array().unwrap().len(),
        100,
        "100 by default"
    );
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let last_of_first = page["messages"][99]["id"].clone();
    let rest = root.session(&[
        call(
            "read_messages",
            json!({"track": TRACK, "cursor": cursor, "limit": 30}),
        ),
        call(
            "read_messages",
            json!({"track": TRACK, "cursor": "7", "limit": 30}),
        ),
        call(
            "read_messages",
            json!({"track": TRACK, "tail": 3, "cursor": cursor}),
        ),
    ]);
    let second = ok(&rest.results[0]);
    assert_eq!(second["count"], 50);
    assert_eq!(second["messages"].as_array().unwrap().len(), 30);
    assert_ne!(second["messages"][0]["id"], last_of_first);
    assert!(second["next_cursor"].is_string());
    assert!(refused(&rest.results[1]).contains("next_cursor"));
    assert!(refused(&rest.results[2]).contains("either tail or cursor"));
}

#[test]
fn bad_ids_are_clear_tool_errors_and_touch_nothing() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let name_rule = "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";
    let free_text_rule = "must match 1 to 512 bytes of text without NUL";
    let long = "w".repeat(600);
    let report = root.session(&[
        call(
            "acquire_lock",
            json!({"track": "../etc", "filepath": "src/a.rs", "worker_id": "w1"}),
        ),
        call(
            "acquire_lock",
            json!({"track": TRACK, "filepath": "./", "worker_id": "w1"}),
        ),
        call(
            "acquire_lock",
            json!({"track": TRACK, "filepath": "src/a.rs", "worker_id": ""}),
        ),
        call(
            "release_lock",
            json!({"track": TRACK, "filepath": "src/a.rs", "worker_id": "w\u{0}1"}),
        ),
        call(
            "update_worker_status",
            json!({"track": TRACK, "worker_id": long, "task_id": "1.1", "status": "RUNNING"}),
        ),
        call("read_messages", json!({"track": "a/b"})),
        call(
            "board_open",
            json!({"track": TRACK, "checkpoint": "EVALUATE_PLAN", "proposal": "x",
                   "directors": ["CA", "../CPO"]}),
        ),
        call(
            "wait_for_event",
            json!({"track": TRACK, "event_pattern": "FILE_UNLOCK_[", "timeout": 60}),
        ),
        call(
            "post_message",
            json!({"track": TRACK, "msg_type": "FILE_LOCK", "source": "w1",
                   "payload": {"filepath": "src/a.rs"}}),
        ),
    ]);
    let r = &report.results;
    assert_eq!(
        refused(&r[0]),
        format!("invalid track \"../etc\": {name_rule}")
    );
    let e = refused(&r[1]);
    assert!(e.starts_with("lock path \"./\" names no file"), "{e}");
    assert_eq!(
        refused(&r[2]),
        format!("invalid worker \"\": {free_text_rule}")
    );
    assert_eq!(
        refused(&r[3]),
        format!("invalid worker \"w\\0\u{31}\": {free_text_rule}")
    );
    let e = refused(&r[4]);
    assert!(
        e.starts_with(&format!("invalid worker \"{}\"", "w".repeat(80)))
            && e.ends_with(free_text_rule),
        "the value is cut to 80 characters: {e}"
    );
    assert_eq!(
        refused(&r[5]),
        format!("invalid track \"a/b\": {name_rule}")
    );
    assert_eq!(
        refused(&r[6]),
        format!("invalid director \"../CPO\": {name_rule}")
    );
    // The event pattern is parsed at the edge with the same words (it named no rule before).
    assert_eq!(
        refused(&r[7]),
        "invalid event_pattern \"FILE_UNLOCK_[\": must match a glob over event names \
         (`*`, `?`, `[..]` closed), 1 to 1024 bytes without NUL"
    );
    // The server still answers after the refusals.
    ok(&r[8]);
    assert!(!root.path().join("conductor/etc").exists());
    assert!(!root.path().join("conductor/tracks/a").exists());
    let bus = root
        .path()
        .join("conductor/tracks")
        .join(TRACK)
        .join(".message-bus");
    let locks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bus.join("locks.json")).unwrap()).unwrap();
    assert_eq!(locks, json!({}), "no lock was taken");
    let workers: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bus.join("worker-status.json")).unwrap()).unwrap();
    assert_eq!(workers, json!({}), "no heartbeat was written");
    // `bus init` leaves the seed's empty board files; no session file was added.
    assert!(
        std::fs::read_dir(bus.join("board"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("session-")),
        "no board session was opened"
    );
}
