//! `:pane bridge` and the header's bridge item: the bridge's status, shared-track
//! cursors, outbox, sent records and dead letters, in the files and shapes the bridge writes, at
//! 80x24 and 200x50; and the header following the status file as it changes (it is watched). The
//! same pane over a root a real bridge ran on is in `tests/nats`.

use insta::assert_snapshot;
use pantheon::Root;
use pantheon::engine::{
    nats::{self as eb, Status},
    outbox::{self, OutboxRecord},
};
use pantheon::testing::console::keymap::{Action, OperatorAction, Pane};
use pantheon::testing::console::rowkey::RowKey;
use pantheon::testing::live::snapshot::BridgeKind;
use pantheon::testing::live::{LiveModel, ModelOptions};
use serde_json::json;

use super::support::*;

fn write(path: &std::path::Path, v: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

fn status(connected: bool, error: Option<&str>) -> Status {
    let mut s = Status {
        name: "konan".into(),
        server: "nats://10.0.0.5:4222".into(),
        connected,
        pid: 4242,
        published: 12,
        received: 3,
        dead_lettered: 1,
        outbox_pending: 1,
        lag: 0,
        last_error: error.map(str::to_owned),
        updated: "2026-06-14T10:35:58Z".into(),
        ..Default::default()
    };
    s.tracks.insert(
        "shared".into(),
        eb::TrackCounts {
            published: 40,
            mirrored: 37,
            stream_seq: 77,
            lag: 2,
        },
    );
    s
}

/// The fixture root with the bridge's files as a bridge writes them, at fixed times.
fn root_with_bridge() -> tempfile::TempDir {
    let dir = fixture_root();
    let root = Root::at(dir.path());
    eb::write_status(&root, &status(true, None)).unwrap();
    write(
        &eb::track::cursors_dir(&root).join("shared.json"),
        &json!({"track": "shared", "stream": "PANTHEON_TRACK_shared", "stream_seq": 77,
                "published_offset": 9120, "queue_identity": [2049, 131], "updated": "2026-06-14T10:35:57Z"}),
    );
    let pending = OutboxRecord {
        outbox_id: "ob_deploy_42_notify".into(),
        kind: "request".into(),
        workflow_id: "wf_deploy_42".into(),
        step: "notify-enterprise".into(),
        subject: "subspace.konan.outgoing.tallon".into(),
        message: "Deploy request: wf_deploy_42".into(),
        payload: json!({"workflow_id": "wf_deploy_42"}),
        created: "2026-06-14T10:34:00Z".into(),
        ..Default::default()
    };
    write(
        &outbox::record_path(&root, &pending.outbox_id).unwrap(),
        &serde_json::to_value(&pending).unwrap(),
    );
    let mut sent = serde_json::to_value(OutboxRecord {
        outbox_id: "ob_ship_7_notify".into(),
        workflow_id: "wf_ship_7".into(),
        created: "2026-06-14T10:20:00Z".into(),
        ..pending.clone()
    })
    .unwrap();
    sent["sent_at"] = json!("2026-06-14T10:20:01Z");
    sent["stream_seq"] = json!(31);
    write(
        &outbox::sent_dir(&root).join("ob_ship_7_notify.json"),
        &sent,
    );
    write(
        &eb::dead_dir(&root).join("000000000005.json"),
        &json!({"stream_seq": 5, "subject": "subspace.romulus.outgoing.konan",
                "reason": "romulus is not a peer of konan (--peer)", "dead_at": "2026-06-14T10:30:00Z",
                "data": "{}", "truncated": false}),
    );
    dir
}

#[test]
fn the_bridge_pane_at_80x24_and_200x50() {
    let root = root_with_bridge();
    for (w, h) in [(80, 24), (200, 50)] {
        let mut app = app_for(root.path(), fixture_now());
        app.run_command("pane bridge");
        assert_eq!(app.pane(), Pane::Bridge);
        let s = screen(&app, w, h, root.path());
        for want in [
            "konan",
            "connected",
            "shared",
            "ob_deploy_42_notify",
            "ob_ship_7_notify",
            "pending",
            "dead",
            "sent",
        ] {
            assert!(s.contains(want), "{w}x{h}: no {want:?} in\n{s}");
        }
        assert_snapshot!(format!("bridge_pane_{w}x{h}"), s);
        // Enter shows the selected row's whole record (the track's cursor, the first row).
        app.dispatch(Action::Open);
        let d = screen(&app, w, h, root.path());
        assert!(d.contains("published_offset"), "{d}");
        assert_snapshot!(format!("bridge_pane_detail_{w}x{h}"), d);
    }
}

#[test]
fn a_status_file_with_lags_that_overflow_when_added_draws_a_saturated_lag() {
    // status.json is a file in the root: its counts are input, and their sum must not overflow.
    let root = fixture_root();
    let r = Root::at(root.path());
    let mut st = status(true, None);
    st.lag = u64::MAX;
    st.extra.insert(
        "tracks".into(),
        json!({"a": {"lag": u64::MAX}, "b": {"lag": 7}, "c": {"lag": -3}}),
    );
    eb::write_status(&r, &st).unwrap();
    let mut app = app_for(root.path(), fixture_now());
    // The header adds the lags up too (its bridge item may be dropped for width, not the sum).
    let head = screen(&app, 200, 50, root.path());
    assert!(head.contains("Workflows"), "{head}");
    app.run_command("pane bridge");
    let s = screen(&app, 200, 50, root.path());
    assert!(s.contains(&format!("lag {}", u64::MAX)), "{s}");
}

#[test]
fn the_bridge_pane_filters_and_says_when_no_bridge_ran() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bridge));
    let s = screen(&app, 80, 24, root.path());
    assert!(s.contains("No bridge has run in this root"), "{s}");

    let root = root_with_bridge();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bridge));
    assert_eq!(app.row_count(), 4);
    app.run_command("filter romulus");
    assert_eq!(app.row_count(), 1);
    assert_eq!(
        app.keys(Pane::Bridge),
        [RowKey::Bridge {
            kind: BridgeKind::Dead,
            id: "000000000005".into()
        }]
    );
}

#[test]
fn the_header_follows_the_bridge_status_file_as_it_changes() {
    let dir = fixture_root();
    let root = Root::at(dir.path());
    eb::write_status(&root, &status(true, None)).unwrap();
    // The status file's directory and the outbox's are watched.
    let watched = pantheon::testing::live::model::dirs_to_watch(&root);
    for d in eb::watched_dirs(&root) {
        assert!(watched.contains(&d), "{} is not watched", d.display());
    }
    let mut model = LiveModel::open(root.clone(), ModelOptions::default());
    let s = model.snapshot();
    assert!(s.bridge.as_ref().unwrap().connected);
    // Only the status file changes (nothing else in the root): the header follows it.
    eb::write_status(&root, &status(false, Some("nats: disconnected"))).unwrap();
    let s = model
        .apply(&[eb::status_path(&root)])
        .expect("a changed status file publishes a snapshot");
    assert!(!s.bridge.as_ref().unwrap().connected);
    let app = pantheon::testing::console::app::App::new(s, false, fixture_now());
    let text = screen(&app, 200, 50, dir.path());
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("disconnected") && header.contains("konan"),
        "{header}"
    );
    // A dead letter appearing is a new row.
    write(
        &eb::dead_dir(&root).join("000000000009.json"),
        &json!({"stream_seq": 9, "subject": "x.y", "reason": "not JSON", "dead_at": "2026-06-14T10:35:00Z"}),
    );
    let s = model
        .apply(&[eb::dead_dir(&root).join("000000000009.json")])
        .expect("a new dead letter publishes a snapshot");
    assert_eq!(s.bridge_view.dead, 1);
}

#[test]
fn retry_and_discard_act_on_a_waiting_outbox_record_and_are_journaled() {
    use crossterm::event::KeyCode;
    use pantheon::testing::console::app::FlashKind;
    use pantheon::testing::console::engine_ops::EngineOperator;
    use pantheon::testing::console::ops::Operator;
    let root = root_with_bridge();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, fixture_now());
    app.run_command("pane bridge");
    app.dispatch(Action::Top);
    // Not offered on a row that is no waiting record (the track's cursor is first).
    assert!(!app.offers(&Action::Operator(OperatorAction::OutboxRetry)));
    assert!(!app.offers(&Action::Operator(OperatorAction::OutboxDiscard)));
    let idx = app
        .keys(Pane::Bridge)
        .iter()
        .position(|k| {
            matches!(
                k,
                RowKey::Bridge {
                    kind: BridgeKind::Pending,
                    ..
                }
            )
        })
        .unwrap();
    for _ in 0..idx {
        app.dispatch(Action::Down);
    }
    assert!(app.offers(&Action::Operator(OperatorAction::OutboxRetry)));
    // R: confirmed, then a request file the bridge takes; no bridge runs here (the status is old).
    app.on_key(key('R'));
    let said = super::actions::confirm_text(&app);
    assert!(
        said.contains("ob_deploy_42_notify") && said.contains("subspace.konan.outgoing.tallon"),
        "{said}"
    );
    app.on_key(key('l'));
    let effects = app.on_key(code(KeyCode::Enter));
    super::actions::run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert_eq!(
        f.text,
        "ob_deploy_42_notify: retry asked; no bridge is running, the next one to start tries it at once"
    );
    assert!(
        r.join("conductor/bridge/retry/ob_deploy_42_notify.json")
            .exists()
    );
    // D: the reason is asked, the confirmation says it is never published.
    app.on_key(key('D'));
    type_text(&mut app, "resent by hand");
    app.on_key(code(KeyCode::Enter));
    let said = super::actions::confirm_text(&app);
    assert!(
        said.contains("will never be published") && said.contains("Reason: resent by hand"),
        "{said}"
    );
    app.on_key(key('l'));
    let effects = app.on_key(code(KeyCode::Enter));
    super::actions::run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert_eq!(
        f.text,
        "ob_deploy_42_notify discarded: kept in conductor/bridge/dead/outbox_ob_deploy_42_notify.json"
    );
    assert!(!r.join("conductor/outbox/ob_deploy_42_notify.json").exists());
    let dead: serde_json::Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/bridge/dead/outbox_ob_deploy_42_notify.json")).unwrap(),
    )
    .unwrap();
    assert!(
        dead["reason"]
            .as_str()
            .unwrap()
            .ends_with(": resent by hand"),
        "{dead}"
    );
    // Both journaled from the console, naming the outbox id.
    let journal = std::fs::read_to_string(r.join("conductor/journal.jsonl")).unwrap();
    let entries: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for action in ["bridge_retry", "bridge_discard"] {
        let e = entries
            .iter()
            .find(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("no {action}: {journal}"));
        assert_eq!(e["targets"]["outbox_id"], "ob_deploy_42_notify", "{e}");
        assert_eq!(e["source"], "console", "{e}");
    }
    // A discarded record is gone: retry is refused with where it went.
    let refused = op
        .execute(&pantheon::testing::console::ops::Op::OutboxRetry {
            outbox_id: "ob_deploy_42_notify".into(),
        })
        .unwrap_err()
        .to_string();
    assert!(refused.contains("dead-lettered"), "{refused}");
}

/// A peer pantheon's pause the bridge heard (its status file's `peer_pauses`, docs/NATS.md) shows in
/// the header's `⏸ PEER` badge on every pane and in the bridge pane's status box, at 80x24 and
/// 200x50; once expired (the peer silent for three of its periods) it shows nowhere.
#[test]
fn a_peers_pause_shows_in_the_header_and_the_bridge_pane() {
    let root = root_with_bridge();
    let r = Root::at(root.path());
    let mut st = status(true, None);
    st.extra.insert(
        "peer_pauses".into(),
        json!([{"peer": "tallon", "more": 0,
                "pauses": [{"id": "pause_20260614_100100_abcdef", "kind": "god", "name": "hermes",
                            "by": "ops", "reason": "incident 12", "since": "2026-06-14T10:01:00Z",
                            "until": null},
                           {"id": "pause_20260614_100200_abcdef", "kind": "track", "name": "main",
                            "by": "ops", "reason": "incident 12", "since": "2026-06-14T10:02:00Z",
                            "until": null}],
                "announced_at": "2026-06-14T10:35:50Z", "received_at": "2026-06-14T10:35:50Z",
                "expires_at": "2026-06-14T10:36:20Z"}]),
    );
    eb::write_status(&r, &st).unwrap();
    for (w, h) in [(80, 24), (200, 50)] {
        let mut app = app_for(root.path(), fixture_now());
        let s = screen(&app, w, h, root.path());
        let header = s.lines().next().unwrap();
        assert!(header.contains("⏸ PEER tallon"), "{w}x{h}: {header}");
        app.run_command("pane bridge");
        let s = screen(&app, w, h, root.path());
        assert!(s.lines().next().unwrap().contains("⏸ PEER tallon"), "{s}");
        assert!(
            s.contains("⏸ peers paused: tallon: god hermes since"),
            "{s}"
        );
        // The table keeps its rows below the taller status box.
        for want in ["ob_deploy_42_notify", "ob_ship_7_notify"] {
            assert!(s.contains(want), "{w}x{h}: no {want:?} in\n{s}");
        }
        assert_snapshot!(format!("bridge_pane_peer_paused_{w}x{h}"), s);
    }
    let wide = screen(&app_for(root.path(), fixture_now()), 200, 50, root.path());
    assert!(
        wide.lines()
            .next()
            .unwrap()
            .contains("⏸ PEER tallon: god hermes since"),
        "{wide}"
    );
    // Expired: the bridge stopped hearing the peer.
    let later = fixture_now() + chrono::Duration::minutes(5);
    let mut app = app_for(root.path(), later);
    app.run_command("pane bridge");
    let s = screen(&app, 200, 50, root.path());
    assert!(!s.contains("PEER") && !s.contains("peers paused"), "{s}");
}
