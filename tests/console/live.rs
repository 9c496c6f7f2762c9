//! The live model: incremental queue reads, last good values, appearing and vanishing parts, and
//! snapshots published after real changes by notify and by polling.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pantheon::Root;
use pantheon::testing::live::runner::LiveHandle;
use pantheon::testing::live::{LiveModel, ModelOptions, WatchMode};

use super::support::*;

fn bus_dir(root: &Path, track: &str) -> PathBuf {
    root.join("conductor/tracks")
        .join(track)
        .join(".message-bus")
}

fn line(id: &str, kind: &str) -> String {
    format!(
        "{{\"id\":\"{id}\",\"type\":\"{kind}\",\"source\":\"w\",\"timestamp\":\"2026-02-01T12:00:00Z\",\"payload\":{{}}}}\n"
    )
}

fn append(path: &Path, s: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap()
        .write_all(s.as_bytes())
        .unwrap();
}

fn ids(model: &LiveModel, track: &str) -> Vec<String> {
    model
        .snapshot()
        .track(track)
        .map(|t| t.messages.iter().map(|m| m.id.clone()).collect())
        .unwrap_or_default()
}

#[test]
fn queue_appends_are_read_from_the_last_offset_never_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let q = bus_dir(dir.path(), "t").join("queue.jsonl");
    std::fs::create_dir_all(q.parent().unwrap()).unwrap();
    append(&q, &line("msg-1", "PROGRESS"));
    let mut m = LiveModel::open(Root::at(dir.path()), ModelOptions::default());
    assert_eq!(ids(&m, "t"), ["msg-1"]);
    // Rewrite the first line in place (same length): a model that re-read the file would see it.
    let mut f = std::fs::OpenOptions::new().write(true).open(&q).unwrap();
    f.write_all(line("msg-X", "PROGRESS").as_bytes()).unwrap();
    drop(f);
    append(&q, &line("msg-2", "BLOCKED"));
    assert!(m.apply(std::slice::from_ref(&q)).is_some());
    assert_eq!(ids(&m, "t"), ["msg-1", "msg-2"]);
    assert_eq!(m.snapshot().track("t").unwrap().messages_read, 2);
}

#[test]
fn a_torn_last_line_waits_until_it_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let q = bus_dir(dir.path(), "t").join("queue.jsonl");
    std::fs::create_dir_all(q.parent().unwrap()).unwrap();
    let full = line("msg-1", "PROGRESS");
    append(&q, &full[..20]);
    let mut m = LiveModel::open(Root::at(dir.path()), ModelOptions::default());
    assert!(ids(&m, "t").is_empty());
    append(&q, &full[20..]);
    m.apply(std::slice::from_ref(&q));
    assert_eq!(ids(&m, "t"), ["msg-1"]);
    assert_eq!(m.snapshot().track("t").unwrap().lines_skipped, 0);
}

#[test]
fn a_replaced_or_truncated_queue_is_read_from_its_start_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let b = bus_dir(dir.path(), "t");
    std::fs::create_dir_all(&b).unwrap();
    let q = b.join("queue.jsonl");
    append(&q, &line("msg-1", "PROGRESS"));
    append(&q, &line("msg-2", "PROGRESS"));
    let mut m = LiveModel::open(Root::at(dir.path()), ModelOptions::default());
    std::fs::rename(&q, b.join("queue.old.archive.jsonl")).unwrap();
    std::fs::write(&q, line("msg-3", "BUS_INIT")).unwrap();
    m.apply(std::slice::from_ref(&q));
    assert_eq!(ids(&m, "t"), ["msg-3"]);
    let note = m.snapshot().track("t").unwrap().queue_note.clone().unwrap();
    assert!(note.contains("replaced"), "{note}");
}

#[test]
fn a_large_queue_is_opened_from_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = bus_dir(dir.path(), "t").join("queue.jsonl");
    std::fs::create_dir_all(q.parent().unwrap()).unwrap();
    let mut s = String::new();
    for i in 0..20_000 {
        s.push_str(&line(&format!("msg-{i}"), "PROGRESS"));
    }
    std::fs::write(&q, &s).unwrap();
    let opts = ModelOptions {
        tail_bytes: 64 * 1024,
        buffer: 100,
        ..ModelOptions::default()
    };
    let m = LiveModel::open(Root::at(dir.path()), opts);
    let snap = m.snapshot();
    let t = snap.track("t").unwrap();
    assert!(t.head_bytes_skipped > s.len() as u64 - 64 * 1024 - 200);
    assert_eq!(t.messages.len(), 100, "bounded buffer");
    assert_eq!(t.messages.last().unwrap().id, "msg-19999");
    assert_eq!(t.lines_skipped, 0, "the tail starts at a line boundary");
}

#[test]
fn a_state_file_caught_mid_write_keeps_its_last_good_value_with_a_warning() {
    let root = fixture_root();
    let r = root.path();
    let mut m = LiveModel::open(Root::at(r), ModelOptions::default());
    let p = r.join("conductor/state/wf_deploy_42.json");
    let good = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, &good[..good.len() / 2]).unwrap();
    m.apply(std::slice::from_ref(&p))
        .expect("a change is published");
    let s = m.snapshot();
    let w = s
        .workflows
        .iter()
        .find(|w| &*w.id == "wf_deploy_42")
        .unwrap();
    assert_eq!(w.state.current_step.as_deref(), Some("architect"));
    assert!(
        w.warning.as_deref().unwrap().contains("last good"),
        "{:?}",
        w.warning
    );
    assert!(s.warnings.iter().any(|x| x.path == p));
    std::fs::write(&p, good.replace("architect", "implement")).unwrap();
    m.apply(std::slice::from_ref(&p));
    let s = m.snapshot();
    let w = s
        .workflows
        .iter()
        .find(|w| &*w.id == "wf_deploy_42")
        .unwrap();
    assert_eq!(w.state.current_step.as_deref(), Some("implement"));
    assert!(w.warning.is_none());
}

#[test]
fn unchanged_files_publish_nothing() {
    let root = fixture_root();
    let mut m = LiveModel::open(Root::at(root.path()), ModelOptions::default());
    let p = root.path().join("conductor/state/wf_deploy_42.json");
    assert!(m.apply(&[p]).is_none());
    assert!(m.rescan().is_none());
}

#[test]
fn tracks_gods_and_workflows_appearing_and_vanishing_are_picked_up() {
    let root = fixture_root();
    let r = root.path();
    let mut m = LiveModel::open(Root::at(r), ModelOptions::default());
    let n_tracks = m.snapshot().tracks.len();
    // New track, new god inbox with a dispatch, new workflow.
    let b = bus_dir(r, "beta");
    std::fs::create_dir_all(&b).unwrap();
    append(&b.join("queue.jsonl"), &line("msg-b", "PROGRESS"));
    let inbox = r.join("conductor/pending/iris2");
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::copy(
        r.join("conductor/pending/hephaestus/hof_20260614_abc123.json"),
        inbox.join("hof_20260614_abc999.json"),
    )
    .unwrap();
    std::fs::copy(
        r.join("conductor/state/wf_bug_7.json"),
        r.join("conductor/state/wf_new_1.json"),
    )
    .unwrap();
    m.apply(&[
        b.join("queue.jsonl"),
        inbox.clone(),
        r.join("conductor/state/wf_new_1.json"),
    ]);
    let s = m.snapshot();
    assert_eq!(s.tracks.len(), n_tracks + 1);
    assert_eq!(ids(&m, "beta"), ["msg-b"]);
    assert!(
        s.inboxes
            .iter()
            .any(|i| i.god == "iris2" && i.dispatches.len() == 1)
    );
    assert!(s.workflows.iter().any(|w| &*w.id == "wf_new_1"));
    // And gone again.
    std::fs::remove_dir_all(r.join("conductor/tracks/beta")).unwrap();
    std::fs::remove_dir_all(&inbox).unwrap();
    std::fs::remove_file(r.join("conductor/state/wf_new_1.json")).unwrap();
    m.apply(&[
        r.join("conductor/tracks/beta"),
        inbox,
        r.join("conductor/state/wf_new_1.json"),
    ]);
    let s = m.snapshot();
    assert_eq!(s.tracks.len(), n_tracks);
    assert!(!s.inboxes.iter().any(|i| i.god == "iris2"));
    assert!(!s.workflows.iter().any(|w| &*w.id == "wf_new_1"));
}

#[test]
fn the_fixture_is_read_with_every_problem_reported() {
    let root = fixture_root();
    let m = LiveModel::open(Root::at(root.path()), ModelOptions::default());
    let s = m.snapshot();
    assert_eq!(s.workflows.len(), 4);
    let gods: Vec<&str> = s.inboxes.iter().map(|i| i.god.as_str()).collect();
    assert_eq!(
        gods,
        ["hephaestus", "iris", "marvin", "thoth"],
        "another engine's _webhooks/ and inbox/ are not gods"
    );
    let msgs: Vec<String> = s
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path.display(), w.message))
        .collect();
    let all = msgs.join("\n");
    assert!(
        all.contains("broken.json") && all.contains("notes.txt") && all.contains("broken.yaml"),
        "{all}"
    );
    let t = &s.tracks[0];
    assert_eq!(t.messages.len(), 8);
    assert_eq!(
        t.lines_skipped, 2,
        "blank and non-JSON lines (the torn last line waits)"
    );
    assert_eq!(t.locks.len(), 3);
    assert_eq!(
        t.board.as_ref().unwrap().predicted.as_deref(),
        Some("ESCALATE")
    );
}

/// Waits for a snapshot satisfying `pred`, with a deadline; returns how long it took.
fn wait_for(
    handle: &mut LiveHandle,
    deadline: Duration,
    pred: impl Fn(&pantheon::testing::live::Snapshot) -> bool,
) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    rt.block_on(async {
        loop {
            if pred(&handle.snapshots.borrow_and_update()) {
                return start.elapsed();
            }
            let left = deadline
                .checked_sub(start.elapsed())
                .expect("deadline passed");
            tokio::time::timeout(left, handle.snapshots.changed())
                .await
                .expect("no snapshot before the deadline")
                .unwrap();
        }
    })
}

#[test]
fn notify_publishes_an_external_append_within_the_debounce_window() {
    let root = engine_root();
    let r = root.path();
    let mut h = LiveHandle::start(Root::at(r), WatchMode::Notify, ModelOptions::default());
    assert_eq!(h.mode, WatchMode::Notify);
    // Another process appends.
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "post",
            "TASK_COMPLETE",
            "--source",
            "worker-9",
        ],
        None,
    );
    let took = wait_for(&mut h, Duration::from_secs(5), |s| {
        s.track("alpha")
            .is_some_and(|t| t.messages.iter().any(|m| m.source == "worker-9"))
    });
    assert!(took < Duration::from_secs(2), "{took:?}");
    // And a new inbox file.
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&research_handoff("wf_pay_3", "hof_20260614_ccc333")),
    );
    wait_for(&mut h, Duration::from_secs(5), |s| {
        s.inboxes.iter().any(|i| {
            i.dispatches
                .iter()
                .any(|d| &*d.dispatch.handoff_id == "hof_20260614_ccc333")
        })
    });
}

#[test]
fn poll_mode_sees_changes_without_notifications() {
    let root = engine_root();
    let r = root.path();
    let mut h = LiveHandle::start(
        Root::at(r),
        WatchMode::Poll(Duration::from_millis(100)),
        ModelOptions::default(),
    );
    assert_eq!(h.mode, WatchMode::Poll(Duration::from_millis(100)));
    assert!(h.latest().watch.starts_with("poll"));
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "heartbeat",
            "--worker",
            "worker-7",
            "--task",
            "9",
            "--status",
            "BLOCKED",
        ],
        None,
    );
    wait_for(&mut h, Duration::from_secs(5), |s| {
        s.track("alpha")
            .is_some_and(|t| t.workers.iter().any(|w| w.worker_id == "worker-7"))
    });
}

#[test]
fn a_wait_whose_dispatch_was_deleted_is_counted_as_orphaned() {
    let root = fixture_root();
    let mut m = LiveModel::open(Root::at(root.path()), ModelOptions::default());
    let now = fixture_now();
    assert_eq!(m.snapshot().counts(now).orphaned, 0);
    // wf_deploy_42 waits for hephaestus's ack; a foreign cleanup deletes the dispatch outright.
    let d = root
        .path()
        .join("conductor/pending/hephaestus/hof_20260614_abc123.json");
    std::fs::remove_file(&d).unwrap();
    m.apply(std::slice::from_ref(&d));
    let s = m.snapshot();
    assert_eq!(s.counts(now).orphaned, 1);
    let w = s
        .workflows
        .iter()
        .find(|w| &*w.id == "wf_deploy_42")
        .unwrap();
    assert!(pantheon::testing::live::Snapshot::orphaned(w));
}

#[test]
fn a_root_deleted_and_recreated_is_watched_again() {
    let root = engine_root();
    let r = root.path();
    let mut h = LiveHandle::start(Root::at(r), WatchMode::Notify, ModelOptions::default());
    assert_eq!(h.mode, WatchMode::Notify);
    // The root goes away and comes back (a new directory under the same name).
    std::fs::remove_dir_all(r).unwrap();
    wait_for(&mut h, Duration::from_secs(15), |s| s.workflows.is_empty());
    std::fs::create_dir(r).unwrap();
    pantheon(r, &["init"], None);
    std::fs::create_dir_all(r.join("research")).unwrap();
    std::fs::write(r.join("research/payments.md"), "notes").unwrap();
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&research_handoff("wf_back_1", "hof_20260614_ddd444")),
    );
    wait_for(&mut h, Duration::from_secs(15), |s| {
        s.workflows.iter().any(|w| &*w.id == "wf_back_1")
    });
    // Later changes arrive by notification again, not only by the re-check.
    pantheon(r, &["bus", "--track", "beta", "init"], None);
    pantheon(
        r,
        &[
            "bus", "--track", "beta", "post", "PROGRESS", "--source", "worker-5",
        ],
        None,
    );
    let took = wait_for(&mut h, Duration::from_secs(15), |s| {
        s.track("beta")
            .is_some_and(|t| t.messages.iter().any(|m| m.source == "worker-5"))
    });
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(h.latest().watch, "notify");
}

#[test]
fn watches_do_not_grow_with_workflows_and_new_directories_are_followed() {
    let root = engine_root();
    let r = root.path();
    // A year of workflows leaves a handoff directory each: none of them may cost a watch.
    for i in 0..300 {
        let d = r.join(format!("shared/handoffs/wf_old_{i}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("research.json"), "{}").unwrap();
    }
    let mut h = LiveHandle::start(Root::at(r), WatchMode::Notify, ModelOptions::default());
    assert_eq!(h.mode, WatchMode::Notify);
    let before = h.watch_count();
    assert!(before > 0 && before < 30, "{before} watches");
    // A god's inbox appears with a dispatch already in it (written before any watch could exist on
    // the new directory): it is read, and the directory is watched from then on.
    let inbox = r.join("conductor/pending/newgod");
    std::fs::create_dir(&inbox).unwrap();
    let disp = serde_json::json!({
        "dispatch_id": "disp_20260614_120000_aaaaaa", "handoff_id": "hof_20260614_eee555",
        "workflow_id": "wf_deploy_42", "from_god": "thoth", "to_god": "newgod", "step": "review",
        "context": {"summary": "first"}, "dispatched_at": "2026-06-14T12:00:00Z", "ack_status": "unacked"
    });
    std::fs::write(inbox.join("hof_20260614_eee555.json"), disp.to_string()).unwrap();
    wait_for(&mut h, Duration::from_secs(15), |s| {
        s.inboxes
            .iter()
            .any(|i| i.god == "newgod" && i.dispatches.len() == 1)
    });
    let mut second = disp.clone();
    second["handoff_id"] = "hof_20260614_fff666".into();
    std::fs::write(inbox.join("hof_20260614_fff666.json"), second.to_string()).unwrap();
    let took = wait_for(&mut h, Duration::from_secs(15), |s| {
        s.inboxes
            .iter()
            .any(|i| i.god == "newgod" && i.dispatches.len() == 2)
    });
    // By notification on the new directory's own watch, not by a later re-check.
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(h.watch_count(), before + 1);
}

#[test]
fn a_large_root_is_shown_before_it_is_read_whole_and_details_read_the_file_on_demand() {
    let root = engine_root();
    let r = root.path();
    for i in 0..300 {
        let st = serde_json::json!({
            "workflow_id": format!("wf_many_{i}"), "definition_id": "deploy-feature",
            "status": "completed", "current_step": "architect",
            "context_bag": {"decisions": [format!("decision {i}")], "artifacts": []},
            "step_history": [{"step_id": "research", "god": "thoth", "status": "completed"}],
            "acks": []
        });
        std::fs::write(
            r.join(format!("conductor/state/wf_many_{i}.json")),
            st.to_string(),
        )
        .unwrap();
    }
    // No time for the first snapshot: it holds a first chunk and says the load goes on.
    let mut m = LiveModel::open_progressive(Root::at(r), ModelOptions::default(), Duration::ZERO);
    assert!(m.is_loading());
    let first = m.snapshot();
    let l = first
        .loading
        .expect("the first snapshot says it is loading");
    assert!(l.read < l.total && l.total >= 300, "{l:?}");
    assert!(first.workflows.len() < 300);
    let mut steps = 0;
    while m.is_loading() {
        m.load_more(Duration::ZERO).expect("each step publishes");
        steps += 1;
        assert!(steps < 1000);
    }
    let s = m.snapshot();
    assert!(s.loading.is_none());
    assert_eq!(
        s.workflows
            .iter()
            .filter(|w| w.id.starts_with("wf_many_"))
            .count(),
        300
    );
    // The model's tallies and order are what counting and sorting row by row would give.
    let now = chrono::Utc::now();
    let mut by_hand = (*s).clone();
    by_hand.tallies = None;
    by_hand.workflows_in_order = false;
    assert_eq!(s.counts(now), by_hand.counts(now));
    let f = pantheon::testing::console::items::Filter::default();
    let ids = |s: &pantheon::testing::live::Snapshot| -> Vec<String> {
        pantheon::testing::console::items::workflows(s, &f)
            .iter()
            .map(|w| w.id.to_string())
            .collect()
    };
    assert_eq!(ids(&s), ids(&by_hand));
    // The snapshot keeps a compact row; the detail reads the whole file, once per version.
    let w = s.workflows.iter().find(|w| &*w.id == "wf_many_7").unwrap();
    assert!(
        !w.state.whole.is_read(),
        "not read whole before a detail asks"
    );
    let whole = w.whole().unwrap();
    assert_eq!(whole.typed.context_bag.decisions, ["decision 7"]);
    assert_eq!(whole.typed.step_history.len(), 1);
    assert_eq!(whole.raw["workflow_id"], "wf_many_7");
    assert!(Arc::ptr_eq(&whole, &w.whole().unwrap()));
    assert!(w.state.whole.is_read());
}

#[test]
fn file_issues_are_listed_with_since_and_a_pane_marks_its_last_good_data() {
    use pantheon::testing::console::app::{App, Mode};
    let root = engine_root();
    let r = root.path();
    let locks = bus_dir(r, "alpha").join("locks.json");
    let mut m = LiveModel::open(Root::at(r), ModelOptions::default());
    assert!(m.snapshot().warnings.is_empty());
    std::fs::write(&locks, "{\"src/x.ts\": {\"worker_id\": ").unwrap();
    m.apply(std::slice::from_ref(&locks));
    let s = m.snapshot();
    let w = s
        .warnings
        .iter()
        .find(|w| w.path == locks)
        .unwrap_or_else(|| panic!("{:?}", s.warnings));
    assert!(w.shows_last_good(), "{w:?}");
    let since = w.since.expect("since when");
    // Still broken on the next snapshot: the same `since`.
    append(
        &bus_dir(r, "alpha").join("queue.jsonl"),
        &line("msg-z", "PROGRESS"),
    );
    m.apply(&[bus_dir(r, "alpha").join("queue.jsonl")]);
    let s = m.snapshot();
    assert_eq!(
        s.warnings.iter().find(|w| w.path == locks).unwrap().since,
        Some(since)
    );

    let mut app = App::new(s.clone(), false, chrono::Utc::now());
    app.on_key(key('4'));
    let locks_pane = screen(&app, 160, 30, r);
    assert!(
        locks_pane.contains("last good: locks.json unreadable since"),
        "{locks_pane}"
    );
    app.on_key(key('!'));
    assert!(matches!(app.mode(), Mode::Issues));
    let overlay = screen(&app, 160, 30, r);
    assert!(overlay.contains("File issues: 1"), "{overlay}");
    assert!(
        overlay.contains("conductor/tracks/alpha/.message-bus/locks.json"),
        "{overlay}"
    );
    assert!(overlay.contains("locks.json  since "), "{overlay}");
    assert!(overlay.contains("  truncated JSON"), "{overlay}");
    app.on_key(key('x'));
    assert!(matches!(app.mode(), Mode::Normal));
    // Fixed: the issue and its marker go away.
    std::fs::write(&locks, "{}").unwrap();
    m.apply(std::slice::from_ref(&locks));
    assert!(m.snapshot().warnings.is_empty());
}
