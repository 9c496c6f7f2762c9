//! The operator flow (selection -> confirm -> engine call -> flash) against the real engine, without
//! a terminal: keys go into the app, effects are run with the engine operator, files are checked.

use crossterm::event::KeyCode;
use pantheon::Root;
use pantheon::console::action::{Action, Pane};
use pantheon::console::app::{App, Effect, FlashKind, Mode};
use pantheon::console::engine_ops::EngineOperator;
use pantheon::console::ops::{Op, Operator};
use serde_json::Value;

use super::support::*;

/// Runs the effects the way the event loop does (synchronously) and feeds the results back.
fn run(app: &mut App, op: &EngineOperator, effects: Vec<Effect>) -> Vec<Op> {
    let mut done = Vec::new();
    for e in effects {
        match e {
            Effect::Execute(o) => {
                let r = op.execute(&o).map_err(|e| e.to_string());
                app.op_finished(&o, r);
                done.push(o);
            }
            Effect::PreviewCleanup(wf) => {
                let r = op.cleanup_preview(&wf).map_err(|e| e.to_string());
                app.cleanup_previewed(wf, r);
            }
            Effect::Quit | Effect::Rescan => {}
        }
    }
    done
}

fn refresh(app: &mut App, root: &std::path::Path) {
    app.set_snapshot(snapshot_of(root));
}

fn select_dispatch(app: &mut App, handoff: &str) {
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.dispatch(Action::Top);
    let idx = pantheon::console::items::dispatches(&app.snapshot, &app.filter(Pane::Inboxes))
        .iter()
        .position(|r| r.view.dispatch.handoff_id == handoff)
        .unwrap_or_else(|| panic!("{handoff} not in the Inboxes pane"));
    for _ in 0..idx {
        app.dispatch(Action::Down);
    }
}

fn state(root: &std::path::Path, wf: &str) -> Value {
    serde_json::from_slice(&std::fs::read(root.join(format!("conductor/state/{wf}.json"))).unwrap())
        .unwrap()
}

#[test]
fn ack_accepted_through_the_dialog_archives_the_dispatch_as_the_operator() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_aaa111");
    assert!(app.on_key(key('a')).is_empty());
    assert!(matches!(app.mode, Mode::AckMenu { .. }));
    assert!(
        app.on_key(code(KeyCode::Enter)).is_empty(),
        "accepted needs no message"
    );
    let Mode::Confirm(c) = &app.mode else {
        panic!("expected a confirmation")
    };
    assert!(!c.confirm_focused, "Cancel is focused first");
    // Enter on the focused Cancel does nothing.
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Info);
    assert!(
        r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json")
            .exists()
    );

    app.on_key(key('a'));
    app.on_key(code(KeyCode::Enter));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert_eq!(done.len(), 1);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Success, "{}", flash.text);
    assert!(flash.text.contains("in_progress"), "{}", flash.text);
    assert!(
        !r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json")
            .exists()
    );
    assert!(
        r.join("conductor/archive/hephaestus/hof_20260614_aaa111.json")
            .exists()
    );
    let st = state(r, "wf_pay_1");
    assert_eq!(st["status"], "in_progress");
    assert_eq!(st["acks"][0]["by"], "operator");
}

#[test]
fn ack_rejected_asks_a_reason_and_reroutes_to_the_fallback_god() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_bbb222");
    app.on_key(key('a'));
    app.on_key(key('j'));
    app.on_key(key('j'));
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode, Mode::Prompt(_)));
    // An empty reason is refused and the prompt stays.
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode, Mode::Prompt(_)));
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Error);
    type_text(&mut app, "on leave");
    app.on_key(code(KeyCode::Enter));
    app.on_key(code(KeyCode::Right));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Success, "{}", flash.text);
    assert!(flash.text.contains("rerouted to marvin"), "{}", flash.text);
    assert!(
        std::fs::read_dir(r.join("conductor/pending/marvin"))
            .unwrap()
            .count()
            == 1
    );
}

#[test]
fn abort_asks_a_reason_shows_withdrawals_and_writes_the_manifest() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.dispatch(Action::Top);
    app.on_key(key('x'));
    type_text(&mut app, "scope cut");
    app.on_key(code(KeyCode::Enter));
    let Mode::Confirm(c) = &app.mode else {
        panic!("expected a confirmation")
    };
    let said: String = c
        .lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("hof_20260614_aaa111") && said.contains("wf_pay_1.aborted.json"),
        "{said}"
    );
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success);
    assert_eq!(state(r, "wf_pay_1")["status"], "aborted");
    assert_eq!(state(r, "wf_pay_1")["aborted_by"], "operator");
    assert!(r.join("conductor/state/wf_pay_1.aborted.json").exists());
    assert!(
        !r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json")
            .exists()
    );

    // Now finished, it can be cleaned up: the dry run is shown first.
    refresh(&mut app, r);
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.dispatch(Action::Bottom);
    let effects = app.run_command("cleanup");
    run(&mut app, &op, effects);
    let Mode::Confirm(c) = &app.mode else {
        panic!("cleanup shows its dry run first")
    };
    assert!(matches!(c.op, Op::Cleanup { .. }));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.flash.clone().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert!(f.text.contains("cleaned"), "{}", f.text);
}

#[test]
fn engine_refusals_become_error_flashes() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.dispatch(Action::Top);
    // Cleanup of a workflow still running is refused by the engine.
    let effects = app.dispatch(Action::Cleanup);
    run(&mut app, &op, effects);
    let f = app.flash.clone().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "{}", f.text);
    assert!(matches!(app.mode, Mode::Normal));
}

#[test]
fn force_unlock_releases_the_lock_and_posts_file_unlock() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Locks));
    app.on_key(key('u'));
    let Mode::Confirm(c) = &app.mode else {
        panic!("expected a confirmation")
    };
    let said: String = c
        .lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("src/app.rs") && said.contains("worker-1"),
        "{said}"
    );
    app.on_key(key('l'));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success);
    let locks: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/tracks/alpha/.message-bus/locks.json")).unwrap(),
    )
    .unwrap();
    assert!(locks.as_object().unwrap().is_empty(), "{locks}");
    let queue =
        std::fs::read_to_string(r.join("conductor/tracks/alpha/.message-bus/queue.jsonl")).unwrap();
    assert!(
        queue
            .lines()
            .last()
            .unwrap()
            .contains("\"forced_by\":\"operator\""),
        "{queue}"
    );
}

#[test]
fn board_actions_go_through_the_engine() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Board));
    // Advance with 1 of 5 assessments is refused by the engine (not forced).
    app.on_key(key('>'));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Error);
    // Resolve with missing votes is forced (they abstain) after the dialog says so.
    app.on_key(key('s'));
    let Mode::Confirm(c) = &app.mode else {
        panic!("expected a confirmation")
    };
    assert!(matches!(c.op, Op::BoardResolve { force: true, .. }));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.flash.clone().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert!(
        r.join("conductor/tracks/alpha/.message-bus/board/resolution.md")
            .exists()
    );
}

#[test]
fn read_only_refuses_every_action_before_any_dialog() {
    let root = engine_root();
    let mut app = App::new(snapshot_of(root.path()), true, chrono::Utc::now());
    for (pane, k) in [
        (Pane::Inboxes, 'a'),
        (Pane::Workflows, 'x'),
        (Pane::Workflows, 'c'),
        (Pane::Locks, 'u'),
        (Pane::Board, 's'),
        (Pane::Board, '>'),
    ] {
        app.dispatch(Action::GoPane(pane));
        assert!(app.on_key(key(k)).is_empty());
        assert!(matches!(app.mode, Mode::Normal), "{pane:?} {k}");
        assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Error);
    }
}
