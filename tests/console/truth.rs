//! The console tells the truth: one overdue rule everywhere, confirmations bound to what they
//! showed, the actor it journals, `stalled` as a status of its own, and the smaller things an
//! operator's pass found misleading. Roots are built by the real binary; acts go through the
//! engine.

use std::path::Path;

use chrono::{Duration, Utc};
use crossterm::event::KeyCode;
use pantheon::Root;
use pantheon::engine::{TrackName, board::BoardSeen};
use pantheon::testing::console::app::{App, Effect, FlashKind, Mode};
use pantheon::testing::console::attention::Kind;
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Keymap, Pane, Scope};
use pantheon::testing::console::ops::{Op, Operator};
use serde_json::Value;

use super::actions::{confirm, confirm_text, held_handoff, select_dispatch, three_held};
use super::deadletters::{DL_FLOW, dead_letter_all, root_with};
use super::support::*;

/// Sets `dispatched_at` of a dispatch file to `ago` before now (as an agent's clock would have).
fn dispatched_ago(file: &Path, ago: Duration) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    v["dispatched_at"] = Value::String((Utc::now() - ago).format("%Y-%m-%dT%H:%M:%SZ").to_string());
    std::fs::write(file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

fn validate_warnings(r: &Path) -> Vec<String> {
    let report = pantheon(r, &["validate"], None);
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["path"].as_str().unwrap(),
                p["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// Items of pane 7 about `wf`, as (kind, reason).
fn items_of(app: &App, wf: &str) -> Vec<(Kind, String)> {
    app.attention_all()
        .into_iter()
        .filter(|i| i.to_json()["ids"]["workflow_id"] == wf)
        .map(|i| (i.kind, i.reason))
        .collect()
}

#[test]
fn a_held_dispatch_is_overdue_only_past_the_held_limit_and_is_one_item_everywhere() {
    let root = engine_root();
    let r = root.path();
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&held_handoff("wf_ext_1", "hof_20260614_ddd444")),
    );
    let held = r.join("conductor/pending/_quarantine/hof_20260614_ddd444.json");
    let unacked = r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json");
    // Ten minutes: past the unacked limit (5m), well within the held one (30m).
    dispatched_ago(&held, Duration::minutes(10));
    dispatched_ago(&unacked, Duration::minutes(10));
    let app = app_for(r, Utc::now());
    let ext = items_of(&app, "wf_ext_1");
    assert_eq!(ext.len(), 1, "one item per dispatch: {ext:?}");
    assert_eq!(ext[0].0, Kind::Held);
    assert!(!ext[0].1.contains("OVERDUE"), "{ext:?}");
    let pay = items_of(&app, "wf_pay_1");
    assert_eq!(pay.len(), 1, "{pay:?}");
    assert!(
        pay[0].0 == Kind::Overdue && pay[0].1.contains("unacked for 10m (limit 5m)"),
        "{pay:?}"
    );
    assert_eq!(
        app.snapshot().counts(app.now()).overdue,
        1,
        "the header counts wf_pay_1 only"
    );
    let s = screen(&app, 200, 50, r);
    let ext_row = s.lines().find(|l| l.contains("wf_ext_1")).unwrap();
    assert!(!ext_row.contains("OVERDUE"), "{ext_row}");
    let w = validate_warnings(r);
    assert!(
        w.iter()
            .any(|p| p.contains("hof_20260614_aaa111.json overdue: unacked for 10m")),
        "{w:?}"
    );
    assert!(
        !w.iter()
            .any(|p| p.contains("ddd444") && p.contains("overdue")),
        "{w:?}"
    );

    // Forty-five minutes on hold: past the held limit. Still one item, which says so; the header,
    // pane 1, pane 2 and validate agree.
    dispatched_ago(&held, Duration::minutes(45));
    let mut app = app_for(r, Utc::now());
    let ext = items_of(&app, "wf_ext_1");
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert_eq!(ext[0].0, Kind::Held);
    assert!(
        ext[0]
            .1
            .starts_with("▲ OVERDUE, waiting 45m (limit 30m) · held for approval"),
        "{ext:?}"
    );
    assert!(!ext[0].1.contains("ack it"));
    assert_eq!(app.snapshot().counts(app.now()).overdue, 2);
    let s = screen(&app, 200, 50, r);
    let ext_row = s.lines().find(|l| l.contains("wf_ext_1")).unwrap();
    assert!(ext_row.contains("OVERDUE"), "{ext_row}");
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, 200, 50, r);
    let held_row = s
        .lines()
        .find(|l| l.contains("hof_20260614_ddd444"))
        .unwrap();
    assert!(held_row.contains("▲ OVERDUE"), "{held_row}");
    let w = validate_warnings(r);
    assert!(
        w.iter().any(|p| p
            .contains("hof_20260614_ddd444.json overdue: held for approval for 45m (limit 30m)")),
        "{w:?}"
    );
}

#[test]
fn a_board_confirmation_refuses_once_the_session_moved_on_and_says_what_changed() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Board));
    app.on_key(key('F'));
    let shown = confirm_text(&app);
    assert!(shown.contains("ASSESSING -> DISCUSSING"), "{shown}");
    // Another process moves the session on while the dialog is open.
    pantheon(
        r,
        &["board", "--track", "alpha", "advance", "--force"],
        None,
    );
    app.set_snapshot(snapshot_of(r));
    let Mode::Confirm(c) = &app.mode() else {
        panic!("the dialog stays open: {:?}", app.mode())
    };
    assert!(
        c.changed
            .as_deref()
            .is_some_and(|w| w.contains("phase ASSESSING → DISCUSSING")),
        "{:?}",
        c.changed
    );
    assert_eq!(confirm_text(&app), shown, "the lines read stay");
    let s = screen(&app, 120, 40, r);
    assert!(s.contains("⚠ changed since shown"), "{s}");
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    assert!(effects.is_empty(), "nothing is sent: {effects:?}");
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error);
    assert!(
        f.text.contains("refused: changed since it was shown")
            && f.text.contains("ASSESSING → DISCUSSING"),
        "{}",
        f.text
    );
    let phase = |r: &Path| {
        snapshot_of(r).tracks[0]
            .board
            .as_ref()
            .unwrap()
            .session
            .status
            .clone()
    };
    assert_eq!(phase(r), "DISCUSSING", "the next phase was not forced");

    // The engine checks it too, under the board's lock: an act bound to the phase shown is refused.
    let snap = snapshot_of(r);
    let session = snap.tracks[0].board.as_ref().unwrap().session.clone();
    let stale = Op::BoardAdvance {
        track: TrackName::parse("alpha").unwrap(),
        force: true,
        seen: Some(BoardSeen {
            session_id: session.session_id.clone(),
            status: "ASSESSING".into(),
            rounds: 0,
        }),
    };
    let e = op.execute(&stale).unwrap_err().to_string();
    assert!(
        e.contains("the board changed since it was shown (phase ASSESSING → DISCUSSING)"),
        "{e}"
    );
    assert_eq!(phase(r), "DISCUSSING");
    // Bound to what it is now, it goes through.
    let now = Op::BoardAdvance {
        track: TrackName::parse("alpha").unwrap(),
        force: true,
        seen: Some(BoardSeen::of(&session)),
    };
    op.execute(&now).unwrap();
    assert_eq!(phase(r), "VOTING");
}

#[test]
fn a_force_unlock_confirmation_refuses_when_another_worker_took_the_lock_meanwhile() {
    let root = engine_root();
    let r = root.path();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Locks));
    app.on_key(key('u'));
    assert!(confirm_text(&app).contains("src/app.rs"));
    let bus = |a: &[&str]| {
        let mut v = vec!["bus", "--track", "alpha"];
        v.extend_from_slice(a);
        pantheon(r, &v, None)
    };
    bus(&["unlock", "src/app.rs", "--worker", "worker-1"]);
    bus(&["lock", "src/app.rs", "--worker", "worker-2"]);
    app.set_snapshot(snapshot_of(r));
    app.on_key(code(KeyCode::Tab));
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    let f = app.shown_flash().cloned().unwrap();
    assert!(f.text.contains("holder worker-1 → worker-2"), "{}", f.text);
    let locks: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/tracks/alpha/.message-bus/locks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(locks["src/app.rs"]["worker_id"], "worker-2", "{locks}");
}

#[test]
fn the_actor_given_is_journaled_and_named_in_the_confirmation() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::acting_as(Root::at(r), "alice");
    let mut app = app_for(r, Utc::now());
    app.set_actor("alice".into());
    select_dispatch(&mut app, "hof_20260614_aaa111");
    app.on_key(key('a'));
    app.on_key(code(KeyCode::Enter));
    assert!(
        confirm_text(&app).contains("Journaled as alice (source console)"),
        "{}",
        confirm_text(&app)
    );
    confirm(&mut app, &op);
    let journal = std::fs::read_to_string(r.join("conductor/journal.jsonl")).unwrap();
    let last: Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(last["actor"], "alice", "{last}");
    assert_eq!(last["source"], "console", "{last}");
    // `--actor` reaches the console's options; without it, a name (never `unknown`).
    let opts = pantheon::testing::console::run::ConsoleOptions::for_operator(
        Default::default(),
        pantheon::testing::console::run::OperatorFlags {
            actor: Some("carol".into()),
            ..Default::default()
        },
    );
    assert_eq!(opts.actor, "carol");
    let own = pantheon::testing::console::engine_ops::operator_name(None);
    assert!(!own.is_empty() && own != "unknown", "{own}");
}

#[test]
fn a_stalled_workflow_has_its_glyph_its_header_alert_its_filter_and_is_not_active() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_aaa111")]);
    let r = root.path();
    dead_letter_all(r);
    let mut app = app_for(r, Utc::now());
    let c = app.snapshot().counts(app.now());
    assert_eq!((c.stalled, c.active), (1, 0), "{c:?}");
    let buf = render(&app, 200, 50);
    let s = text(&buf);
    assert!(s.contains("⊘ stalled"), "{s}");
    assert!(!s.contains("? stalled"), "{s}");
    assert!(s.contains("▲ 1 stalled"), "{s}");
    assert!(s.contains("1 workflow (0 active)"), "{s}");
    assert_eq!(
        fg_of(&buf, "⊘ stalled"),
        fg_of(&buf, "▲ 1 stalled"),
        "drawn as an alert"
    );
    app.dispatch(Action::Filter);
    type_text(&mut app, "stalled");
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.row_count(), 1);
}

#[test]
fn q_in_a_detail_or_raw_view_goes_back_and_quits_only_from_the_table() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.on_key(code(KeyCode::Enter));
    assert!(app.pane_state().detail);
    assert!(app.on_key(key('q')).is_empty());
    assert!(!app.pane_state().detail);
    app.on_key(key('v'));
    assert!(app.pane_state().raw);
    assert!(app.on_key(key('q')).is_empty());
    assert!(!app.pane_state().raw && !app.pane_state().detail);
    assert!(matches!(app.on_key(key('q'))[..], [Effect::Quit]));
}

#[test]
fn the_journal_follows_its_newest_entry_until_the_operator_moves_and_attention_selects_on_entry() {
    let root = engine_root();
    let r = root.path();
    let board = |a: &[&str]| {
        let mut v = vec!["board", "--track", "alpha"];
        v.extend_from_slice(a);
        pantheon(r, &v, None)
    };
    board(&["advance", "--force"]);
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Journal));
    let seq = |app: &App, i: usize| app.journal()[i]["seq"].as_u64().unwrap();
    let newest = |app: &App| {
        app.journal()
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .max()
            .unwrap()
    };
    assert_eq!(app.selected(Pane::Journal), 0);
    board(&["advance", "--force"]);
    app.set_snapshot(snapshot_of(r));
    assert_eq!(
        seq(&app, app.selected(Pane::Journal)),
        newest(&app),
        "it follows the new entry"
    );
    assert!(screen(&app, 160, 40, r).contains("▼ following"));
    // Moved off the newest: the selection stays on its record.
    app.on_key(key('j'));
    let on = seq(&app, 1);
    board(&["advance", "--force"]);
    app.set_snapshot(snapshot_of(r));
    assert_eq!(app.selected(Pane::Journal), 2);
    assert_eq!(seq(&app, 2), on);
    assert!(screen(&app, 160, 40, r).contains("‖ paused (g follows)"));
    app.on_key(key('g'));
    board(&["resolve", "--force"]);
    app.set_snapshot(snapshot_of(r));
    assert_eq!(seq(&app, app.selected(Pane::Journal)), newest(&app));

    // Pane 7: the first item is selected on entry and after its record went away, so `z` works.
    let mut app = app_for(r, Utc::now() + Duration::minutes(10));
    app.dispatch(Action::GoPane(Pane::Attention));
    assert!(app.attention().len() >= 2);
    let acked = EngineOperator::new(Root::at(r)).execute(&Op::Ack {
        god: pantheon::engine::GodName::parse("hephaestus").unwrap(),
        request: pantheon::engine::AckRequest::new(
            pantheon::engine::HandoffId::parse("hof_20260614_aaa111").unwrap(),
            pantheon::testing::console::keymap::AckChoice::Accepted,
        ),
    });
    acked.unwrap();
    app.set_snapshot(snapshot_of(r));
    assert!(app.pane_state().gone.is_none());
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.dispatch(Action::GoPane(Pane::Attention));
    app.on_key(key('z'));
    assert!(matches!(app.mode(), Mode::Prompt(_)), "{:?}", app.mode());
}

#[test]
fn bulk_prompts_and_the_ack_chooser_name_every_marked_record() {
    let root = three_held();
    let r = root.path();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.dispatch(Action::Filter);
    type_text(&mut app, "held");
    app.on_key(code(KeyCode::Enter));
    app.on_key(key('*'));
    app.on_key(key('R'));
    let Mode::Prompt(p) = &app.mode() else {
        panic!("{:?}", app.mode())
    };
    assert_eq!(p.title, "Reject 3 marked held dispatch(es)");
    app.on_key(code(KeyCode::Esc));
    app.on_key(key('*'));
    app.dispatch(Action::Filter);
    for _ in 0..4 {
        app.on_key(code(KeyCode::Backspace));
    }
    type_text(&mut app, "hephaestus");
    app.on_key(code(KeyCode::Enter));
    app.on_key(key('*'));
    app.on_key(key('a'));
    let s = screen(&app, 120, 40, r);
    assert!(
        s.contains("2 marked dispatch(es): one status for all"),
        "{s}"
    );
}

#[test]
fn y_copies_a_hostile_lock_path_without_its_control_characters() {
    let root = engine_root();
    let r = root.path();
    let file = r.join("conductor/tracks/alpha/.message-bus/locks.json");
    let mut locks: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let entry = locks["src/app.rs"].clone();
    locks["src/\u{1b}]52;c;ZXZpbA==\u{7}evil\nx.rs"] = entry;
    std::fs::write(&file, serde_json::to_vec(&locks).unwrap()).unwrap();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Locks));
    let rows = pantheon::testing::console::items::locks(app.snapshot(), &app.filter(Pane::Locks));
    let i = rows
        .iter()
        .position(|(_, l)| l.path.contains("evil"))
        .unwrap();
    for _ in 0..i {
        app.dispatch(Action::Down);
    }
    let effects = app.on_key(key('y'));
    let [Effect::Clipboard(t)] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(t, "src/]52;c;ZXZpbA==evilx.rs");
    assert!(
        !app.shown_flash()
            .as_ref()
            .unwrap()
            .text
            .chars()
            .any(char::is_control)
    );
}

#[test]
fn the_smaller_things_say_what_is_true() {
    // No supervisor: an empty dead-letter list claims nothing about deadlines met.
    let root = engine_root();
    let r = root.path();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("No supervisor is running"), "{s}");
    assert!(!s.contains("acked in time"), "{s}");
    // A task id that says `task` already is not said twice.
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "post",
            "PROGRESS",
            "--source",
            "worker-9",
            "--payload",
            r#"{"task_id":"task-1.2","progress_pct":10}"#,
        ],
        None,
    );
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Bus));
    let s = screen(&app, 200, 50, r);
    assert!(
        s.contains("task-1.2") && !s.contains("task task-1.2"),
        "{s}"
    );
    // The raw view names the key that opens it.
    let mut app = app_for(r, Utc::now());
    app.on_key(key('v'));
    let s = screen(&app, 120, 40, r);
    assert!(s.contains("raw state (v)"), "{s}");
}

/// The keys docs/CONSOLE.md's table documents, by scope: the rows' backticked keys (`1`–`9`
/// expanded; rows of `:` commands and Shift-letter sorts left out).
fn documented_keys() -> Vec<(Scope, String, usize)> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/CONSOLE.md")).unwrap();
    let table = doc
        .split("| where | key | action |")
        .nth(1)
        .expect("the Keys table");
    let mut out = Vec::new();
    let mut scope = Scope::Global;
    for (n, line) in table.lines().enumerate().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (place, keys) = (cells[1], cells[2]);
        if !place.is_empty() {
            scope = match place {
                "everywhere" => Scope::Global,
                "detail view" => Scope::Detail,
                "in replay" => Scope::Replay,
                p => Scope::Pane(
                    Pane::ALL
                        .into_iter()
                        .find(|x| p == format!("{} {}", x.number(), x.title()))
                        .unwrap_or_else(|| panic!("unknown place {p:?}")),
                ),
            };
        }
        if keys.starts_with("`:sort") {
            continue;
        }
        let ticked: Vec<&str> = keys.split('`').skip(1).step_by(2).collect();
        for k in ticked {
            if k.len() > 1 && k.starts_with(':') {
                continue;
            }
            out.push((scope, k.to_owned(), n));
        }
        if keys.contains("`1`–`9`") {
            for d in 2..=8 {
                out.push((scope, d.to_string(), n));
            }
        }
    }
    out
}

#[test]
fn the_docs_key_table_matches_the_keymap_both_ways() {
    let km = Keymap::default();
    let doc = documented_keys();
    let mut seen = std::collections::HashSet::new();
    for (scope, k, line) in &doc {
        let key = pantheon::testing::console::config::parse_key(k)
            .unwrap_or_else(|| panic!("row {line}: `{k}` is no key"));
        assert!(
            seen.insert((format!("{scope:?}"), k.clone())),
            "row {line}: `{k}` documented twice in {scope:?}"
        );
        assert!(
            km.bindings
                .iter()
                .any(|b| b.scope == *scope && b.keys.contains(&key)),
            "row {line}: `{k}` is documented in {scope:?}, but the keymap binds it there to nothing"
        );
    }
    for b in &km.bindings {
        if matches!(b.scope, Scope::Dialog(_))
            || matches!(
                b.action,
                pantheon::testing::console::keymap::Action::Sort(_)
            )
        {
            continue;
        }
        assert!(
            b.keys
                .iter()
                .any(|k| doc.iter().any(|(s, d, _)| *s == b.scope
                    && pantheon::testing::console::config::parse_key(d) == Some(*k))),
            "{:?} ({}) in {:?} is missing from docs/CONSOLE.md's key table",
            b.action,
            b.keys_label(),
            b.scope
        );
    }
}

/// A deadlock on `track` between two workers over two long paths.
fn deadlock_on(r: &Path, track: &str) {
    pantheon(r, &["bus", "--track", track, "init"], None);
    let dir = r.join(format!("conductor/tracks/{track}/.message-bus"));
    let at = (Utc::now() - Duration::minutes(5)).to_rfc3339();
    let (a, b) = (
        format!("src/{track}/a_module_with_a_rather_long_name/handler.ts"),
        format!("src/{track}/another_module_with_a_long_name/routes.ts"),
    );
    let locks = serde_json::json!({
        &a: {"worker_id": format!("{track}-w1"), "acquired_at": at, "expires_at": "2099-01-01T00:00:00Z"},
        &b: {"worker_id": format!("{track}-w2"), "acquired_at": at, "expires_at": "2099-01-01T00:00:00Z"},
    });
    std::fs::write(dir.join("locks.json"), locks.to_string()).unwrap();
    let msg = |id: &str, src: String, res: &str| {
        serde_json::json!({"id": id, "type": "BLOCKED", "source": src, "timestamp": at,
               "payload": {"waiting_for": "file_lock", "resource": res}})
        .to_string()
    };
    let mut q = std::fs::read_to_string(dir.join("queue.jsonl")).unwrap_or_default();
    q.push_str(&format!(
        "{}\n{}\n",
        msg(&format!("{track}-m1"), format!("{track}-w1"), &b),
        msg(&format!("{track}-m2"), format!("{track}-w2"), &a)
    ));
    std::fs::write(dir.join("queue.jsonl"), q).unwrap();
}

#[test]
fn at_60x14_record_ids_stay_whole_and_what_is_cut_says_so() {
    let root = engine_root();
    let r = root.path();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, 60, 14, r);
    // The handoff ids are whole; the free-text summary gave way first.
    assert!(
        s.contains("hof_20260614_aaa111") && s.contains("hof_20260614_bbb222"),
        "{s}"
    );
    // Two deadlocks in a box of one row: the first, cut with `…`, and how many more.
    deadlock_on(r, "t1");
    deadlock_on(r, "t2");
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Workers));
    let s = screen(&app, 60, 14, r);
    let row = s
        .lines()
        .find(|l| l.contains("▲ DEADLOCK"))
        .unwrap_or_else(|| panic!("{s}"));
    assert!(row.contains("… (+1 more)"), "{s}");
    let s = screen(&app, 200, 50, r);
    assert_eq!(
        s.matches("▲ DEADLOCK").count(),
        2,
        "both whole when there is room: {s}"
    );
}

#[test]
fn a_mistyped_command_says_what_was_meant() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.run_command("requeu");
    let f = app.shown_flash().cloned().unwrap();
    assert!(f.text.contains("did you mean :requeue?"), "{}", f.text);
    app.run_command("qqqqqqq");
    assert!(
        !app.shown_flash()
            .cloned()
            .unwrap()
            .text
            .contains("did you mean")
    );
}

#[test]
fn the_lock_detail_gives_relative_times_the_holders_beat_and_who_waits() {
    let root = engine_root();
    let r = root.path();
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "post",
            "BLOCKED",
            "--source",
            "worker-2",
            "--payload",
            r#"{"task_id":"1.2","waiting_for":"file_lock","resource":"src/app.rs"}"#,
        ],
        None,
    );
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Locks));
    app.on_key(code(KeyCode::Enter));
    let s = screen(&app, 160, 40, r);
    assert!(s.contains("ago)"), "acquired is relative: {s}");
    assert!(s.contains("(in 29m") || s.contains("(in 30m"), "{s}");
    let beat = s.lines().find(|l| l.contains("holder beat")).unwrap();
    assert!(beat.contains("RUNNING") && beat.contains("ago"), "{beat}");
    let waiters = s.lines().find(|l| l.contains("waiters")).unwrap();
    assert!(waiters.contains("worker-2"), "{waiters}");
}

#[test]
fn discussion_messages_start_in_one_column() {
    let root = fixture_root();
    let r = root.path();
    let mut app = app_for(r, fixture_now());
    app.dispatch(Action::GoPane(Pane::Board));
    let s = screen(&app, 200, 50, r);
    let starts: Vec<usize> = s
        .lines()
        .filter(|l| {
            // A discussion line: `│r1 ` or `│r? `.
            let c: Vec<char> = l.chars().take(4).collect();
            c.len() == 4 && c[1] == 'r' && (c[2].is_ascii_digit() || c[2] == '?') && c[3] == ' '
        })
        .map(|l| {
            // After the round, the pair and the kind: the message's first column.
            let cells: Vec<char> = l.chars().collect();
            let mut i = 0;
            for _ in 0..3 {
                while cells[i] != ' ' {
                    i += 1;
                }
                while cells[i] == ' ' {
                    i += 1;
                }
            }
            i
        })
        .collect();
    assert!(starts.len() >= 2, "{s}");
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}\n{s}");
}

/// The fixture's dispatch `hof_20260614_abc123` with a delivery count and an ack deadline `left`
/// after the fixture's time (negative: past).
fn with_ack_deadline(r: &Path, left: Duration) {
    let inbox = r.join("conductor/pending/hephaestus/hof_20260614_abc123.json");
    let mut d: Value = serde_json::from_slice(&std::fs::read(&inbox).unwrap()).unwrap();
    d["ack_wait"] = serde_json::json!("1h");
    d["ack_deadline"] = serde_json::json!((fixture_now() + left).to_rfc3339());
    d["deliveries"] = serde_json::json!([{"at": "2026-06-14T10:00:00+00:00", "to": "hephaestus"}]);
    d["max_deliveries"] = serde_json::json!(3);
    std::fs::write(&inbox, serde_json::to_string_pretty(&d).unwrap()).unwrap();
}

#[test]
fn at_60x14_the_ack_column_shortens_its_words_instead_of_cutting_the_deadline() {
    for (left, due) in [
        (Duration::seconds(-5), "due now"),
        (Duration::minutes(45), "due 45m"),
    ] {
        let root = fixture_root();
        let r = root.path();
        with_ack_deadline(r, left);
        let mut app = app_for(r, fixture_now());
        app.dispatch(Action::GoPane(Pane::Inboxes));
        let wide = screen(&app, 200, 50, r);
        let row = wide
            .lines()
            .find(|l| l.contains("hof_20260614_abc123"))
            .unwrap();
        assert!(row.contains(&format!("1/3 {due}")), "{wide}");
        let s = screen(&app, 60, 14, r);
        let row = s
            .lines()
            .find(|l| l.contains("hof_20260614_abc123"))
            .unwrap_or_else(|| panic!("{s}"));
        // The deadline is whole, and no word of the cell is cut mid-way.
        assert!(row.contains(due), "{s}");
        assert!(!row.contains("due n…") && !row.contains("du…"), "{s}");
    }
}
