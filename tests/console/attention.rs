//! The attention queue from roots written by hand, one cause at a time: the item appears with its
//! reason, Enter jumps to the record in its pane (the resolving action one key away), it can be
//! snoozed, and it goes when its cause goes. The journal pane jumps to an entry's record.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use crossterm::event::KeyCode;
use pantheon::testing::console::app::{App, Mode};
use pantheon::testing::console::attention::Kind;
use pantheon::testing::console::keymap::{Action, Pane};
use serde_json::json;

use super::support::*;

fn now() -> DateTime<Utc> {
    "2026-06-14T12:00:00Z".parse().unwrap()
}

fn ago(mins: i64) -> String {
    (now() - Duration::minutes(mins)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn put(root: &Path, rel: &str, v: &serde_json::Value) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

fn bus(track: &str) -> String {
    format!("conductor/tracks/{track}/.message-bus")
}

fn dispatch(hid: &str, wf: &str, to: &str, at: &str) -> serde_json::Value {
    json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": to,
           "step": "build", "context": {"summary": "s"}, "dispatched_at": at,
           "ack_status": "unacked"})
}

fn state(wf: &str, status: &str) -> serde_json::Value {
    json!({"workflow_id": wf, "status": status, "current_step": "build",
           "dispatched_to": "hephaestus", "created": ago(60), "updated": ago(30)})
}

/// An empty root with one track.
fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for dir in [
        "conductor/state",
        "conductor/pending",
        "conductor/workflows",
    ] {
        std::fs::create_dir_all(d.path().join(dir)).unwrap();
    }
    std::fs::create_dir_all(d.path().join(bus("t1"))).unwrap();
    std::fs::write(d.path().join(bus("t1")).join("queue.jsonl"), "").unwrap();
    d
}

fn kinds(app: &App) -> Vec<Kind> {
    app.attention_all().iter().map(|i| i.kind).collect()
}

/// The one item of `kind`: it is listed in pane 7, Enter takes the operator to `pane` with the
/// record selected (its identity `key`), and the flash says what resolves it.
fn check_jump(app: &mut App, kind: Kind, pane: Pane, key: &str, action_key: &str) {
    let items = app.attention_all();
    let item = items
        .iter()
        .find(|i| i.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} item in {items:?}"));
    let action = pantheon::testing::console::attention::action_text(item, app.keymap());
    assert!(!item.reason.is_empty() && !action.is_empty());
    assert!(action.contains(action_key), "{action}");
    app.dispatch(Action::GoPane(Pane::Attention));
    let row = app.attention().iter().position(|i| i.kind == kind).unwrap();
    app.dispatch(Action::Top);
    for _ in 0..row {
        app.dispatch(Action::Down);
    }
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), pane, "{kind:?} jumps to {pane:?}");
    let st = &app.panes()[pane];
    assert!(st.gone.is_none());
    let flash = app.shown_flash().unwrap().text.clone();
    assert!(flash.contains(&action), "{flash}");
    if !key.is_empty() {
        let selected = app.selected(pane);
        let keys = row_keys(app, pane);
        assert_eq!(
            keys.get(selected).map(String::as_str),
            Some(key),
            "{kind:?}"
        );
    }
}

/// The identities of a pane's rows, as the app knows them (what a jump selects), as they read.
fn row_keys(app: &App, pane: Pane) -> Vec<String> {
    app.keys(pane).iter().map(ToString::to_string).collect()
}

fn app_at(root: &Path) -> App {
    app_for(root, now())
}

/// Checks the whole life of one cause: appears (and nothing else), jumps, snoozes, goes away.
fn life(
    make: impl Fn(&Path),
    undo: impl Fn(&Path),
    kind: Kind,
    pane: Pane,
    key: &str,
    action_key: &str,
) {
    let d = root();
    let r = d.path();
    assert!(kinds(&app_at(r)).is_empty(), "an empty root needs nobody");
    make(r);
    let mut app = app_at(r);
    assert_eq!(kinds(&app), vec![kind]);
    check_jump(&mut app, kind, pane, key, action_key);

    // Snooze it for 2 hours: it leaves the queue, the title counts it, and it comes back later.
    // The suggested `1h` is a placeholder: typing `2h` replaces it (not `1h2h`).
    let mut app = app_at(r);
    app.dispatch(Action::GoPane(Pane::Attention));
    app.on_key(key_z());
    let Mode::Prompt(p) = &app.mode() else {
        panic!("z asks how long")
    };
    assert_eq!(p.input.text(), "1h");
    assert!(p.input.is_suggested());
    type_text(&mut app, "2h");
    let Mode::Prompt(p) = &app.mode() else {
        panic!("still asking")
    };
    assert_eq!(p.input.text(), "2h");
    app.on_key(code(KeyCode::Enter));
    assert!(app.attention_all().is_empty(), "snoozed");
    assert_eq!(app.snoozed_count(), 1);
    assert!(screen(&app, 120, 30, r).contains("7 Attention (0, 1 snoozed)"));
    app.set_now(now() + Duration::hours(3));
    // (Moved on in time, other causes may have grown due; this one is back.)
    assert!(app.attention_all().iter().any(|i| i.kind == kind));

    undo(r);
    assert!(kinds(&app_at(r)).is_empty(), "{kind:?} gone with its cause");
}

fn key_z() -> crossterm::event::KeyEvent {
    key('z')
}

#[test]
fn a_held_dispatch_waits_for_approval() {
    let f = "conductor/pending/_quarantine/hof_held_1.json";
    life(
        |r| put(r, f, &dispatch("hof_held_1", "wf_h", "hephaestus", &ago(3))),
        |r| std::fs::remove_file(r.join(f)).unwrap(),
        Kind::Held,
        Pane::Inboxes,
        "_quarantine/hof_held_1",
        "p approve",
    );
}

#[test]
fn an_overdue_dispatch_waits_for_its_ack() {
    let f = "conductor/pending/hephaestus/hof_late_1.json";
    life(
        |r| {
            put(
                r,
                "conductor/state/wf_late.json",
                &state("wf_late", "waiting_for_ack"),
            );
            put(
                r,
                f,
                &dispatch("hof_late_1", "wf_late", "hephaestus", &ago(20)),
            );
        },
        |r| {
            let mut d = dispatch("hof_late_1", "wf_late", "hephaestus", &ago(20));
            d["ack_status"] = json!("accepted");
            put(r, f, &d);
        },
        Kind::Overdue,
        Pane::Workflows,
        "wf_late",
        "x abort",
    );
}

#[test]
fn an_orphaned_wait_needs_a_redispatch() {
    let f = "conductor/state/wf_orphan.json";
    life(
        |r| put(r, f, &state("wf_orphan", "waiting_for_ack")),
        |r| put(r, f, &state("wf_orphan", "completed")),
        Kind::Orphaned,
        Pane::Workflows,
        "wf_orphan",
        "redispatch",
    );
}

#[test]
fn a_stale_worker_is_listed_until_it_beats_again() {
    let f = format!("{}/worker-status.json", bus("t1"));
    let beat =
        |at: String| json!({"w1": {"task_id": "1", "status": "RUNNING", "last_heartbeat": at}});
    life(
        |r| put(r, &f, &beat(ago(30))),
        |r| put(r, &f, &beat(ago(0))),
        Kind::StaleWorker,
        Pane::Workers,
        "t1/w1",
        "l its locks",
    );
}

#[test]
fn an_expired_lock_still_held_waits_for_a_force_unlock() {
    let f = format!("{}/locks.json", bus("t1"));
    life(
        |r| {
            put(
                r,
                &f,
                &json!({"src/a.rs": {"worker_id": "w1", "acquired_at": ago(60), "expires_at": ago(10)}}),
            )
        },
        |r| put(r, &f, &json!({})),
        Kind::ExpiredLock,
        Pane::Locks,
        "t1/src/a.rs",
        "u force-unlock",
    );
}

fn deadlock(r: &Path) {
    let locks = json!({
        "a.ts": {"worker_id": "w1", "acquired_at": ago(5), "expires_at": "2099-01-01T00:00:00Z"},
        "b.ts": {"worker_id": "w2", "acquired_at": ago(5), "expires_at": "2099-01-01T00:00:00Z"},
    });
    put(r, &format!("{}/locks.json", bus("t1")), &locks);
    let msg = |id: &str, src: &str, res: &str| {
        json!({"id": id, "type": "BLOCKED", "source": src, "timestamp": ago(2),
               "payload": {"waiting_for": "file_lock", "resource": res}})
        .to_string()
    };
    std::fs::write(
        r.join(bus("t1")).join("queue.jsonl"),
        format!("{}\n{}\n", msg("m1", "w1", "b.ts"), msg("m2", "w2", "a.ts")),
    )
    .unwrap();
}

#[test]
fn a_deadlock_names_its_locks_and_jumps_to_one_to_release() {
    life(
        deadlock,
        |r| {
            put(
                r,
                &format!("{}/locks.json", bus("t1")),
                &json!({"a.ts": {"worker_id": "w1", "expires_at": "2099-01-01T00:00:00Z"}}),
            )
        },
        Kind::Deadlock,
        Pane::Locks,
        "t1/b.ts",
        "u force-unlock",
    );
}

#[test]
fn deadlocked_locks_are_marked_in_pane_4_and_l_in_pane_5_selects_one() {
    let d = root();
    let r = d.path();
    deadlock(r);
    let mut app = app_at(r);
    let item = &app.attention_all()[0];
    assert!(
        item.reason.contains("(locks: b.ts, a.ts)"),
        "the deadlock names its locks: {}",
        item.reason
    );
    app.dispatch(Action::GoPane(Pane::Locks));
    let s = screen(&app, 120, 30, r);
    assert_eq!(s.matches("⟲ CYCLE").count(), 2, "{s}");
    app.dispatch(Action::GoPane(Pane::Workers));
    app.on_key(key('L'));
    assert_eq!(app.pane(), Pane::Locks);
    let first = row_keys(&app, Pane::Locks)[app.selected(Pane::Locks)].clone();
    assert!(first == "t1/a.ts" || first == "t1/b.ts", "{first}");
    assert!(app.shown_flash().unwrap().text.contains("u force-unlocks"));
    // Pressed again (from pane 5): the other lock of the cycle.
    app.dispatch(Action::GoPane(Pane::Workers));
    app.on_key(key('L'));
    let second = row_keys(&app, Pane::Locks)[app.selected(Pane::Locks)].clone();
    assert_ne!(first, second);
}

#[test]
fn a_board_vote_past_its_deadline_waits_for_a_resolution() {
    let f = format!("{}/board/session-b1.json", bus("t1"));
    let session = |status: &str| {
        json!({"session_id": "b1", "checkpoint": "EVALUATE_PLAN", "status": status,
               "proposal": "Ship it", "directors": ["CA", "CPO", "CSO", "COO", "CXO"],
               "started_at": ago(200), "vote_deadline": ago(20)})
    };
    life(
        |r| put(r, &f, &session("VOTING")),
        |r| put(r, &f, &session("COMPLETE")),
        Kind::VoteOverdue,
        Pane::Board,
        "",
        "s resolve",
    );
}

#[test]
fn a_dead_lettered_dispatch_is_listed_from_conductor_dead() {
    // The shape the delivery supervisor writes: the dispatch, its deliveries, when and why.
    let f = "conductor/dead/hephaestus/hof_dead_1.json";
    life(
        |r| {
            put(
                r,
                "conductor/state/wf_dead.json",
                &state("wf_dead", "stalled"),
            );
            let mut d = dispatch("hof_dead_1", "wf_dead", "hephaestus", &ago(40));
            d["deliveries"] = json!([{"at": ago(40), "to": "hephaestus"},
                                     {"at": ago(30), "to": "hephaestus"},
                                     {"at": ago(20), "to": "apollo"}]);
            d["dead_at"] = json!(ago(10));
            d["reason"] = json!("not acked after 3 deliveries");
            put(r, f, &d);
        },
        |r| std::fs::remove_file(r.join(f)).unwrap(),
        Kind::DeadLetter,
        Pane::DeadLetters,
        "hephaestus/hof_dead_1",
        "R requeue",
    );
}

#[test]
fn a_file_the_engine_cannot_read_opens_the_issues() {
    let f = "conductor/pending/hephaestus/broken.json";
    let d = root();
    let r = d.path();
    std::fs::create_dir_all(r.join("conductor/pending/hephaestus")).unwrap();
    std::fs::write(r.join(f), "{ not json").unwrap();
    let mut app = app_at(r);
    assert_eq!(kinds(&app), vec![Kind::Unreadable]);
    app.dispatch(Action::GoPane(Pane::Attention));
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Issues));
    std::fs::remove_file(r.join(f)).unwrap();
    assert!(kinds(&app_at(r)).is_empty());
}

#[test]
fn newest_first_and_the_global_key_walks_every_item_from_any_pane() {
    let d = root();
    let r = d.path();
    put(
        r,
        "conductor/pending/_quarantine/hof_20260614_aaaa01.json",
        &dispatch("hof_20260614_aaaa01", "wf_a", "apollo", &ago(50)),
    );
    put(
        r,
        "conductor/pending/_quarantine/hof_20260614_bbbb02.json",
        &dispatch("hof_20260614_bbbb02", "wf_b", "apollo", &ago(5)),
    );
    put(
        r,
        "conductor/state/wf_orphan.json",
        &state("wf_orphan", "waiting_for_ack"),
    );
    let mut app = app_at(r);
    let items = app.attention_all();
    assert_eq!(items.len(), 3);
    // Newest first: hof_b (5 min), wf_orphan (updated 30 min ago), hof_a (50 min).
    assert_eq!(&items[0].ids["handoff_id"], "hof_20260614_bbbb02");
    assert_eq!(items[1].kind, Kind::Orphaned);
    assert_eq!(&items[2].ids["handoff_id"], "hof_20260614_aaaa01");
    app.dispatch(Action::GoPane(Pane::Bus));
    let mut visited = Vec::new();
    for _ in 0..4 {
        app.on_key(key('@'));
        visited.push((app.pane(), app.selected(app.pane())));
    }
    assert_eq!(visited[0].0, Pane::Inboxes);
    assert_eq!(visited[1].0, Pane::Workflows);
    assert_eq!(visited[2].0, Pane::Inboxes);
    assert_eq!(visited[3], visited[0], "wraps around");
    assert_ne!(visited[0].1, visited[2].1);
    // From the held dispatch, approving is one key away.
    app.on_key(key('p'));
    assert!(matches!(app.mode(), Mode::Confirm(_)));
}

#[test]
fn the_journal_pane_lists_entries_newest_first_filters_and_jumps_to_the_record() {
    let d = root();
    let r = d.path();
    put(
        r,
        "conductor/state/wf_j.json",
        &state("wf_j", "in_progress"),
    );
    let root = pantheon::Root::at(r);
    let o = pantheon::engine::Origin::new(Some("alice"), "cli");
    use pantheon::engine::JournalVerb;
    for (wf, action) in [
        ("wf_j", JournalVerb::Submit),
        ("wf_gone", JournalVerb::Abort),
    ] {
        pantheon::engine::append_journal(
            &root,
            &o,
            &pantheon::engine::Act::new(action, "done").workflow(wf),
        )
        .unwrap();
    }
    let mut app = app_at(r);
    app.dispatch(Action::GoPane(Pane::Journal));
    assert_eq!(app.row_count(), 2);
    let s = screen(&app, 120, 30, r);
    let (abort, submit) = (s.find("abort").unwrap(), s.find("submit").unwrap());
    assert!(abort < submit, "newest first:\n{s}");
    assert!(s.contains("alice (cli)"), "{s}");
    app.dispatch(Action::Filter);
    type_text(&mut app, "wf_j");
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.row_count(), 1);
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), Pane::Workflows, "Enter jumps to the workflow");
    assert_eq!(
        row_keys(&app, Pane::Workflows)[app.selected(Pane::Workflows)],
        "wf_j"
    );
    // An entry whose record is gone opens the entry itself.
    app.dispatch(Action::GoPane(Pane::Journal));
    app.on_key(code(KeyCode::Esc));
    app.dispatch(Action::Top);
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), Pane::Journal);
    assert!(app.pane_state().detail);
    assert!(screen(&app, 120, 30, r).contains("\"wf_gone\""));
}

#[test]
fn flashes_are_kept_in_messages() {
    let d = root();
    let mut app = app_at(d.path());
    app.dispatch(Action::Refresh);
    app.on_key(key('@'));
    app.run_command("messages");
    assert!(matches!(app.mode(), Mode::Messages));
    let s = screen(&app, 120, 30, d.path());
    assert!(s.contains("rescanning the root"), "{s}");
    assert!(s.contains("nothing waits on you"), "{s}");
    let (a, b) = (
        s.find("nothing waits").unwrap(),
        s.find("rescanning").unwrap(),
    );
    assert!(a < b, "newest first");
}

#[test]
fn workers_link_to_their_locks_and_messages_and_dispatches_to_their_workflow() {
    let d = root();
    let r = d.path();
    put(
        r,
        &format!("{}/worker-status.json", bus("t1")),
        &json!({"w1": {"task_id": "1", "status": "RUNNING", "last_heartbeat": ago(0)}}),
    );
    put(
        r,
        &format!("{}/locks.json", bus("t1")),
        &json!({"src/x.rs": {"worker_id": "w1", "expires_at": "2099-01-01T00:00:00Z"},
                "src/y.rs": {"worker_id": "w9", "expires_at": "2099-01-01T00:00:00Z"}}),
    );
    put(
        r,
        "conductor/state/wf_l.json",
        &state("wf_l", "waiting_for_ack"),
    );
    put(
        r,
        "conductor/pending/hephaestus/hof_l.json",
        &dispatch("hof_l", "wf_l", "hephaestus", &ago(1)),
    );
    let mut app = app_at(r);
    app.dispatch(Action::GoPane(Pane::Workers));
    app.on_key(key('l'));
    assert_eq!(app.pane(), Pane::Locks);
    assert_eq!(row_keys(&app, Pane::Locks), vec!["t1/src/x.rs"]);
    app.dispatch(Action::GoPane(Pane::Workers));
    app.on_key(key('m'));
    assert_eq!(app.pane(), Pane::Bus);
    assert_eq!(app.track_name().as_deref(), Some("t1"));
    assert_eq!(app.pane_state().filter, "source:w1");
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.on_key(key('d'));
    assert_eq!(app.pane(), Pane::Inboxes);
    assert_eq!(
        row_keys(&app, Pane::Inboxes)[app.selected(Pane::Inboxes)],
        "hephaestus/hof_l"
    );
    app.on_key(key('w'));
    assert_eq!(app.pane(), Pane::Workflows);
    assert_eq!(
        row_keys(&app, Pane::Workflows)[app.selected(Pane::Workflows)],
        "wf_l"
    );
}

#[test]
fn sparklines_show_messages_per_second_and_inbox_depth_over_time() {
    let d = root();
    let r = d.path();
    let at = |secs: i64| {
        (now() - Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let msg = |id: &str, ts: String| {
        json!({"id": id, "type": "PROGRESS", "source": "w1", "timestamp": ts, "payload": {}})
            .to_string()
    };
    let lines = [
        msg("m1", at(2)),
        msg("m2", at(0)),
        msg("m3", at(0)),
        msg("m4", at(0)),
    ];
    std::fs::write(
        r.join(bus("t1")).join("queue.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let mut app = app_at(r);
    let t = app.snapshot().track("t1").unwrap().clone();
    assert_eq!(t.per_second(now(), 8), vec![0, 0, 0, 0, 0, 1, 0, 3]);
    let s = screen(&app, 200, 30, r);
    assert!(
        s.lines().next().unwrap().contains("bus ▁▁▁▁▁▄▁█ 3/s"),
        "{s}"
    );
    app.dispatch(Action::GoPane(Pane::Bus));
    assert!(screen(&app, 200, 30, r).contains("▁▄▁█ 3/s"));

    // Inbox depth: sampled every 10 s while the console runs.
    for (i, n) in [0usize, 2, 1].iter().enumerate() {
        for k in 0..*n {
            put(
                r,
                &format!("conductor/pending/hephaestus/hof_20260614_d{i}{k}.json"),
                &dispatch(
                    &format!("hof_20260614_d{i}{k}"),
                    "wf_x",
                    "hephaestus",
                    &ago(1),
                ),
            );
        }
        std::fs::create_dir_all(r.join("conductor/pending/hephaestus")).unwrap();
        app.set_snapshot(snapshot_of(r));
        app.set_now(now() + Duration::seconds(10 * i as i64));
        app.sample_depth();
    }
    // Depths 0, 2, 3 (the files add up).
    let depth: Vec<u32> = app.depth("hephaestus").unwrap().iter().copied().collect();
    assert_eq!(depth, vec![0, 2, 3]);
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, 160, 30, r);
    assert!(s.contains("DEPTH 5m") && s.contains("▁▆█"), "{s}");
}

/// Every surface counts the same attention items on one root where every kind is present: the
/// console's header and pane 7, `pantheon status` in each format, `pantheon check`'s perfdata and
/// `/metrics`' `pantheon_attention_items` (the exposition `serve --metrics` serves, over the live
/// model's snapshot of the root). A snoozed item stays in every count.
#[test]
fn every_surface_counts_the_same_attention_items_of_every_kind() {
    let root = super::cost::cost_root();
    let r = root.path();
    let now = Utc::now();
    let ago = |mins: i64| {
        (now - Duration::minutes(mins)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let state = |wf: &str, status: &str| {
        json!({"workflow_id": wf, "status": status, "current_step": "build",
               "dispatched_to": "hephaestus", "created": ago(60), "updated": ago(30)})
    };
    let dispatch = |hid: &str, wf: &str, to: &str, at: String| {
        json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": to,
               "step": "build", "context": {"summary": "s"}, "dispatched_at": at,
               "ack_status": "unacked"})
    };
    // held, and a held dispatch moved by hand into an inbox (its workflow awaits approval).
    put(
        r,
        "conductor/pending/_quarantine/hof_20261206_held01.json",
        &dispatch("hof_20261206_held01", "wf_att_held", "hephaestus", ago(2)),
    );
    put(
        r,
        "conductor/state/wf_att_moved.json",
        &state("wf_att_moved", "awaiting_approval"),
    );
    put(
        r,
        "conductor/pending/hephaestus/hof_20261206_moved1.json",
        &dispatch("hof_20261206_moved1", "wf_att_moved", "hephaestus", ago(1)),
    );
    // overdue, with an ack deadline nobody enforces (no supervisor).
    put(
        r,
        "conductor/state/wf_att_late.json",
        &state("wf_att_late", "waiting_for_ack"),
    );
    let mut late = dispatch("hof_20261206_late01", "wf_att_late", "hephaestus", ago(20));
    late["ack_deadline"] = json!("2099-01-01T00:00:00Z");
    put(
        r,
        "conductor/pending/hephaestus/hof_20261206_late01.json",
        &late,
    );
    // orphaned.
    put(
        r,
        "conductor/state/wf_att_orphan.json",
        &state("wf_att_orphan", "waiting_for_ack"),
    );
    // A stale worker, a deadlock and an overdue board vote on t1; an expired lock on t2.
    let bus1 = "conductor/tracks/t1/.message-bus";
    put(
        r,
        &format!("{bus1}/worker-status.json"),
        &json!({"w9": {"task_id": "1", "status": "RUNNING", "last_heartbeat": ago(30)}}),
    );
    put(
        r,
        &format!("{bus1}/locks.json"),
        &json!({
            "a.ts": {"worker_id": "w1", "acquired_at": ago(5), "expires_at": "2099-01-01T00:00:00Z"},
            "b.ts": {"worker_id": "w2", "acquired_at": ago(5), "expires_at": "2099-01-01T00:00:00Z"},
        }),
    );
    let blocked = |id: &str, src: &str, res: &str| {
        json!({"id": id, "type": "BLOCKED", "source": src, "timestamp": ago(2),
               "payload": {"waiting_for": "file_lock", "resource": res}})
        .to_string()
    };
    std::fs::write(
        r.join(bus1).join("queue.jsonl"),
        format!(
            "{}\n{}\n",
            blocked("m1", "w1", "b.ts"),
            blocked("m2", "w2", "a.ts")
        ),
    )
    .unwrap();
    put(
        r,
        &format!("{bus1}/board/session-b1.json"),
        &json!({"session_id": "b1", "checkpoint": "EVALUATE_PLAN", "status": "VOTING",
                "proposal": "Ship it", "directors": ["CA", "CPO", "CSO", "COO", "CXO"],
                "started_at": ago(200), "vote_deadline": ago(20)}),
    );
    put(
        r,
        "conductor/tracks/t2/.message-bus/locks.json",
        &json!({"src/a.rs": {"worker_id": "w1", "acquired_at": ago(60), "expires_at": ago(10)}}),
    );
    std::fs::write(r.join("conductor/tracks/t2/.message-bus/queue.jsonl"), "").unwrap();
    // A dead letter of a stalled workflow.
    put(
        r,
        "conductor/state/wf_att_dead.json",
        &state("wf_att_dead", "stalled"),
    );
    let mut dead = dispatch("hof_20261206_dead01", "wf_att_dead", "hephaestus", ago(40));
    dead["deliveries"] = json!([{"at": ago(40), "to": "hephaestus"}]);
    dead["dead_at"] = json!(ago(10));
    put(
        r,
        "conductor/dead/hephaestus/hof_20261206_dead01.json",
        &dead,
    );
    // An unreadable file, and an outbox record the bridge cannot publish.
    std::fs::create_dir_all(r.join("conductor/pending/apollo")).unwrap();
    std::fs::write(r.join("conductor/pending/apollo/broken.json"), "{ not json").unwrap();
    put(
        r,
        "conductor/bridge/status.json",
        &json!({"name": "konan", "updated": ago(0), "stuck": [{
            "outbox_id": "ob_1", "attempts": 3, "since": ago(5),
            "error": "no stream found for given subject"}]}),
    );

    // A foreign source with a teammate's permission request, and one that cannot be read: the
    // `foreign` and `source_down` kinds, beside the root (outside it).
    let claude = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(claude.path().join("teams/t/inboxes")).unwrap();
    let req = json!({"type": "permission_request", "requestId": "p1", "workerName": "w",
                     "toolName": "Bash", "input": {"command": "make"}});
    std::fs::write(
        claude.path().join("teams/t/inboxes/lead.json"),
        json!([{"from": "w", "text": req.to_string(), "timestamp": ago(3)}]).to_string(),
    )
    .unwrap();
    let specs = [
        format!("claude-teams:{}", claude.path().display()),
        format!("claude-teams:{}", claude.path().join("gone").display()),
    ];
    let with_sources = || {
        let mut s = (*snapshot_of(r)).clone();
        s.sources = std::sync::Arc::new(pantheon::testing::sources::probe(
            &specs,
            std::time::Duration::from_secs(10),
        ));
        std::sync::Arc::new(s)
    };

    // The console: its header count and pane 7's rows, each kind present.
    let mut app = App::new(with_sources(), false, now);
    let listed = app.attention_all();
    let console = pantheon::testing::console::attention::Tally::of(&listed);
    for kind in Kind::ALL {
        assert!(console.get(kind) >= 1, "no {kind:?} item: {listed:#?}");
    }
    let n = console.total();
    assert_eq!(app.attention_count(), n);
    // The counts without the items (what `/metrics` and `status` use) are the items' counts.
    let snap = with_sources();
    for at in [now, now + Duration::minutes(10), now + Duration::days(2)] {
        assert_eq!(
            pantheon::testing::live::attention::tally(&snap, at),
            pantheon::testing::console::attention::Tally::of(
                &pantheon::testing::live::attention::items(&snap, at)
            ),
            "at {at}"
        );
    }
    assert!(screen(&app, 200, 50, r).contains(&format!("@ {n} need you")));
    // Snoozed, an item leaves pane 7's list and no count.
    app.dispatch(Action::GoPane(Pane::Attention));
    app.on_key(key_z());
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.attention_all().len(), n - 1);
    assert_eq!(app.attention_count(), n);
    assert!(screen(&app, 200, 50, r).contains(&format!("@ {n} need you")));

    // `pantheon status`: the JSON's total and kinds, the line's and tmux's `@`.
    let run = |args: &[&str]| {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("pantheon"))
            .arg("--root")
            .arg(r)
            .args(specs.iter().flat_map(|s| ["--source", s.as_str()]))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let j: serde_json::Value = serde_json::from_str(&run(&["status", "--format", "json"])).unwrap();
    assert_eq!(j["attention"], n, "{j:#}");
    assert_eq!(j["attention_kinds"], console.to_json(), "{j:#}");
    let line = run(&["status"]);
    assert!(line.starts_with(&format!("@{n} ")), "{line}");
    let tmux = run(&["status", "--format", "tmux"]);
    assert!(
        tmux.starts_with(&format!("#[fg=colour214]@{n}#[default]")),
        "{tmux}"
    );
    // `pantheon check`: the perfdata, and a level on it.
    let check = run(&["check", "--no-journal"]);
    assert!(check.contains(&format!(" attention={n};;;0;")), "{check}");
    let check = run(&["check", "--no-journal", "--crit", &format!("attention={n}")]);
    assert!(
        check.starts_with("PANTHEON CRITICAL - ")
            && check.contains(&format!("{n} attention items (")),
        "{check}"
    );
    // `/metrics`: one series per kind, the same counts.
    let text = pantheon::testing::observe::metrics::Metrics::new(pantheon::Root::at(r), false)
        .scrape(&with_sources(), false)
        .to_string();
    for (kind, count) in console.iter() {
        // A foreign source's items are counted by the source's kind too.
        let series = match kind {
            "foreign" | "source_down" => {
                format!(
                    "pantheon_attention_items{{kind=\"{kind}\",source=\"claude-teams\"}} {count}\n"
                )
            }
            _ => format!("pantheon_attention_items{{kind=\"{kind}\"}} {count}\n"),
        };
        assert!(text.contains(&series), "{kind} {count}: {text}");
    }
}
