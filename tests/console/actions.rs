//! The operator flow (selection -> confirm -> engine call -> flash) against the real engine, without
//! a terminal: keys go into the app, effects are run with the engine operator, files are checked.

use crossterm::event::KeyCode;
use pantheon::Root;
use pantheon::engine::WorkflowId;
use pantheon::testing::console::app::{App, Effect, FlashKind, Mode};
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, OperatorAction, Pane};
use pantheon::testing::console::ops::{Op, Operator};
use serde_json::Value;

use super::support::*;

/// Runs the effects the way the event loop does (synchronously) and feeds the results back.
pub(crate) fn run(app: &mut App, op: &EngineOperator, effects: Vec<Effect>) -> Vec<Op> {
    let mut done = Vec::new();
    for e in effects {
        match e {
            Effect::Execute(o) => {
                let r = op.execute(&o);
                app.op_finished(&o, r);
                done.push(*o);
            }
            Effect::PreviewCleanup(wf) => {
                let r = op.cleanup_preview(&wf);
                app.cleanup_previewed(wf, r);
            }
            Effect::Quit
            | Effect::Rescan
            | Effect::Clipboard(_)
            | Effect::Mouse(_)
            | Effect::ReplayAt(_)
            | Effect::Replay(_)
            | Effect::Live => {}
        }
    }
    done
}

fn refresh(app: &mut App, root: &std::path::Path) {
    app.set_snapshot(snapshot_of(root));
}

pub(crate) fn select_dispatch(app: &mut App, handoff: &str) {
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.dispatch(Action::Top);
    let idx =
        pantheon::testing::console::items::dispatches(app.snapshot(), &app.filter(Pane::Inboxes))
            .iter()
            .position(|r| *r.view.dispatch.handoff_id == *handoff)
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
    assert!(matches!(app.mode(), Mode::AckMenu { .. }));
    assert!(
        app.on_key(code(KeyCode::Enter)).is_empty(),
        "accepted needs no message"
    );
    let Mode::Confirm(c) = &app.mode() else {
        panic!("expected a confirmation")
    };
    assert!(!c.confirm_focused, "Cancel is focused first");
    // Enter on the focused Cancel does nothing.
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    assert_eq!(app.shown_flash().unwrap().kind, FlashKind::Info);
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
    let flash = app.shown_flash().cloned().unwrap();
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

    // The act is in the operator journal, as the console's user.
    let j = pantheon::engine::read_journal(&Root::at(r), &Default::default()).unwrap();
    let e = j.entries.last().unwrap();
    assert_eq!(e["source"], "console", "{:?}", j.entries);
    let me = pantheon::testing::console::engine_ops::operator_name(None);
    assert_eq!(e["actor"], me.as_str());
    assert_ne!(
        me, "unknown",
        "a name, also without USER: the uid's login name"
    );
    assert_eq!(e["action"], "ack");
    assert_eq!(e["outcome"], "accepted");
    assert_eq!(e["targets"]["handoff_id"], "hof_20260614_aaa111");
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
    assert!(matches!(app.mode(), Mode::Prompt(_)));
    // An empty reason is refused and the prompt stays.
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Prompt(_)));
    assert_eq!(app.shown_flash().unwrap().kind, FlashKind::Error);
    type_text(&mut app, "on leave");
    app.on_key(code(KeyCode::Enter));
    app.on_key(code(KeyCode::Right));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let flash = app.shown_flash().cloned().unwrap();
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
    let said = confirm_text(&app);
    assert!(
        said.contains("hof_20260614_aaa111") && said.contains("wf_pay_1.aborted.json"),
        "{said}"
    );
    let text = confirm(&mut app, &op);
    assert!(
        text.starts_with("wf_pay_1 aborted: 1 artifact(s) marked, 1 dispatch(es) withdrawn"),
        "{}",
        text
    );
    assert_eq!(state(r, "wf_pay_1")["status"], "aborted");
    assert_eq!(state(r, "wf_pay_1")["aborted_by"], "operator");
    assert!(r.join("conductor/state/wf_pay_1.aborted.json").exists());
    assert!(
        !r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json")
            .exists()
    );

    // Now finished, it can be cleaned up: the dry run comes first, and when it finds nothing to
    // delete no Delete button is offered.
    refresh(&mut app, r);
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.dispatch(Action::Bottom);
    let effects = app.run_command("cleanup");
    let dry = op
        .cleanup_preview(&WorkflowId::parse("wf_pay_1").unwrap())
        .unwrap();
    run(&mut app, &op, effects);
    assert!(dry.paths().is_empty() && dry.deleted.is_none(), "{dry:?}");
    assert!(matches!(app.mode(), Mode::Normal), "{:?}", app.mode());
    let f = app.shown_flash().cloned().unwrap();
    assert!(f.text.contains("found nothing to delete"), "{}", f.text);
    // The cleanup itself (no Delete button here, so straight through the operator): its flash counts.
    let cleanup = Op::Cleanup {
        workflow_id: WorkflowId::parse("wf_pay_1").unwrap(),
    };
    let done = op.execute(&cleanup).unwrap();
    assert_eq!(
        done.flash,
        format!(
            "wf_pay_1 cleaned: 0 deleted, {} missing, 0 refused",
            dry.missing.len()
        )
    );
    // The aborted workflow's ACK column no longer says it was accepted.
    let s = screen(&app, 160, 40, r);
    let row = s
        .lines()
        .find(|l| l.contains("wf_pay_1"))
        .unwrap_or_default();
    assert!(!row.contains("accepted"), "{row}");
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
    let effects = app.dispatch(Action::Operator(OperatorAction::Cleanup));
    run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "{}", f.text);
    assert!(matches!(app.mode(), Mode::Normal));
}

#[test]
fn force_unlock_releases_the_lock_and_posts_file_unlock() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Locks));
    app.on_key(key('u'));
    let said = confirm_text(&app);
    assert!(
        said.contains("src/app.rs") && said.contains("worker-1"),
        "{said}"
    );
    app.on_key(key('l'));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Success);
    assert_eq!(f.text, "src/app.rs unlocked (was held by worker-1)");
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
    // Advance with 1 of 5 assessments: not offered; the key says why and names the forced move.
    assert!(!app.offers(&Action::Operator(OperatorAction::BoardAdvance)));
    app.on_key(key('>'));
    assert!(matches!(app.mode(), Mode::Normal));
    let f = app.shown_flash().cloned().unwrap();
    assert!(
        f.text.contains("ASSESSING phase is not complete")
            && f.text.contains("no assessment from CPO")
            && f.text.contains("F forces ASSESSING -> DISCUSSING"),
        "{}",
        f.text
    );
    // No discussion round outside DISCUSSING.
    app.on_key(key('n'));
    assert!(matches!(app.mode(), Mode::Normal));
    assert!(
        app.shown_flash()
            .as_ref()
            .unwrap()
            .text
            .contains("rounds are for DISCUSSING")
    );
    // The forced advance has its own confirmation, which names the transition and what is missing.
    app.on_key(key('F'));
    let said = confirm_text(&app);
    assert!(
        said.contains("ASSESSING -> DISCUSSING although") && said.contains("no assessment from"),
        "{said}"
    );
    let text = confirm(&mut app, &op);
    assert!(
        text.contains("board ASSESSING -> DISCUSSING (forced)"),
        "{text}"
    );
    refresh(&mut app, r);
    // Rounds count from 1; the last one says so.
    app.on_key(key('n'));
    let said = confirm_text(&app);
    assert!(
        said.contains("Discussion round 1 of 3 will be closed; round 2 begins"),
        "{said}"
    );
    let text = confirm(&mut app, &op);
    assert!(
        text.contains("round 1 closed; round 2 of 3 begins"),
        "{text}"
    );
    // Resolve with missing votes is forced (they abstain) after the dialog says so.
    refresh(&mut app, r);
    app.on_key(key('s'));
    let Mode::Confirm(c) = &app.mode() else {
        panic!("expected a confirmation")
    };
    assert!(matches!(c.op, Op::BoardResolve { force: true, .. }));
    let text = confirm(&mut app, &op);
    assert!(text.contains("board resolved: ESCALATE (forced)"), "{text}");
    assert!(
        r.join("conductor/tracks/alpha/.message-bus/board/resolution.md")
            .exists()
    );
    // A completed session offers nothing; its header says who resolved it.
    refresh(&mut app, r);
    for (k, a) in [
        ('>', Action::Operator(OperatorAction::BoardAdvance)),
        ('F', Action::Operator(OperatorAction::BoardForceAdvance)),
        ('n', Action::Operator(OperatorAction::BoardNextRound)),
        ('s', Action::Operator(OperatorAction::BoardResolve)),
    ] {
        assert!(!app.offers(&a), "{a:?}");
        app.on_key(key(k));
        assert!(matches!(app.mode(), Mode::Normal), "{k}");
        let f = app.shown_flash().cloned().unwrap();
        assert!(
            f.text.contains("is resolved: ESCALATE by operator at"),
            "{k}: {}",
            f.text
        );
    }
    let s = screen(&app, 80, 24, r);
    assert!(s.contains("resolved: ESCALATE by operator at"), "{s}");
    let footer = s.lines().last().unwrap_or_default();
    for hint in ["advance phase", "next round", "resolve", "force advance"] {
        assert!(
            !footer.contains(hint),
            "{hint} offered on a completed session: {s}"
        );
    }
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
        assert!(matches!(app.mode(), Mode::Normal), "{pane:?} {k}");
        assert_eq!(app.shown_flash().unwrap().kind, FlashKind::Error);
    }
}

pub(crate) fn held_handoff(wf: &str, hid: &str) -> String {
    serde_json::json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "caduceus",
        "step": "announce",
        "context": {"summary": "Tell the partner pantheon", "decisions": [], "artifacts": []}
    })
    .to_string()
}

#[test]
fn held_dispatches_are_approved_into_the_inbox_or_rejected_with_a_reason() {
    let root = engine_root();
    let r = root.path();
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&held_handoff("wf_ext_1", "hof_20260614_ddd444")),
    );
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&held_handoff("wf_ext_2", "hof_20260614_eee555")),
    );
    assert!(
        r.join("conductor/pending/_quarantine/hof_20260614_ddd444.json")
            .exists()
    );
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());

    select_dispatch(&mut app, "hof_20260614_ddd444");
    // A held dispatch is not acked.
    app.on_key(key('a'));
    assert!(matches!(app.mode(), Mode::Normal));
    assert_eq!(app.shown_flash().unwrap().kind, FlashKind::Error);
    app.on_key(key('p'));
    let said = confirm_text(&app);
    assert!(said.contains("caduceus's inbox"), "{said}");
    let text = confirm(&mut app, &op);
    assert!(
        text.starts_with("hof_20260614_ddd444 approved into caduceus's inbox (step "),
        "{}",
        text
    );
    assert!(
        r.join("conductor/pending/caduceus/hof_20260614_ddd444.json")
            .exists()
    );

    refresh(&mut app, r);
    select_dispatch(&mut app, "hof_20260614_eee555");
    app.on_key(key('R'));
    type_text(&mut app, "not cleared");
    app.on_key(code(KeyCode::Enter));
    let text = confirm(&mut app, &op);
    assert_eq!(text, "hof_20260614_eee555 rejected, workflow failed");
    assert_eq!(state(r, "wf_ext_2")["status"], "failed");
    assert!(
        !r.join("conductor/pending/_quarantine/hof_20260614_eee555.json")
            .exists()
    );
}

/// A root with three held dispatches (wf_ext_1..3), oldest first.
pub(crate) fn three_held() -> tempfile::TempDir {
    let root = engine_root();
    for (wf, hid) in [
        ("wf_ext_1", "hof_20260614_ddd444"),
        ("wf_ext_2", "hof_20260614_eee555"),
        ("wf_ext_3", "hof_20260614_fff666"),
    ] {
        pantheon(
            root.path(),
            &["handoff", "submit", "-"],
            Some(&held_handoff(wf, hid)),
        );
    }
    root
}

pub(crate) fn dialog_text(app: &App) -> String {
    let Mode::Confirm(c) = &app.mode() else {
        panic!("a confirmation is open: {:?}", app.mode())
    };
    let mut s = c.op.title();
    for (_, l) in &c.lines {
        s.push('\n');
        s.push_str(l);
    }
    s
}

pub(crate) fn held_files(root: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root.join("conductor/pending/_quarantine"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn approve_acts_on_the_held_dispatch_on_screen_even_when_rows_move_before_enter() {
    let root = three_held();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_eee555");
    app.dispatch(Action::Open);
    let s = screen(&app, 160, 40, r);
    assert!(
        s.contains("hof_20260614_eee555") && s.contains("wf_ext_2"),
        "{s}"
    );
    app.on_key(key('p'));
    assert!(
        dialog_text(&app).contains("hof_20260614_eee555 (step announce of wf_ext_2, from thoth)")
    );

    // While the dialog is open another operator approves the row above: every row moves up.
    pantheon(r, &["approve", "hof_20260614_ddd444"], None);
    refresh(&mut app, r);
    let said = dialog_text(&app);
    assert!(
        said.contains("hof_20260614_eee555") && !said.contains("fff666"),
        "{said}"
    );
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert!(
        matches!(done.as_slice(), [Op::Approve { handoff_id, raise: None }] if handoff_id.as_str() == "hof_20260614_eee555"),
        "{done:?}"
    );
    assert_eq!(held_files(r), ["hof_20260614_fff666.json"]);
    assert!(
        r.join("conductor/pending/caduceus/hof_20260614_eee555.json")
            .exists()
    );
    // It went away because of the operator's own approval: the list is back with a row selected,
    // not a "no longer here" notice.
    refresh(&mut app, r);
    assert!(app.pane_state().gone.is_none() && !app.pane_state().detail);
    let s = screen(&app, 160, 40, r);
    assert!(!s.contains("no longer here"), "{s}");
}

#[test]
fn a_held_dispatch_that_goes_away_while_viewed_is_reported_and_p_refuses_to_approve_its_neighbour()
{
    let root = three_held();
    let r = root.path();
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_eee555");
    app.dispatch(Action::Open);

    // Someone else approves the very dispatch on screen; the one below slides into its row.
    pantheon(r, &["approve", "hof_20260614_eee555"], None);
    refresh(&mut app, r);
    let s = screen(&app, 160, 40, r);
    assert!(s.contains("is no longer here"), "{s}");
    assert!(
        !s.contains("wf_ext_3"),
        "the neighbour is not shown as if selected: {s}"
    );
    app.on_key(key('p'));
    assert!(
        matches!(app.mode(), Mode::Normal),
        "no dialog for a neighbour"
    );
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error);
    assert!(f.text.contains("no longer listed"), "{}", f.text);

    // Back in the list nothing is highlighted until the operator moves; then p names the row the
    // list highlights.
    app.dispatch(Action::Back);
    app.on_key(key('j'));
    let rows =
        pantheon::testing::console::items::dispatches(app.snapshot(), &app.filter(Pane::Inboxes));
    let shown = rows[app.selected(Pane::Inboxes)]
        .view
        .dispatch
        .handoff_id
        .to_string();
    assert!(shown != "hof_20260614_eee555");
    app.on_key(key('p'));
    assert!(dialog_text(&app).contains(&shown), "{}", dialog_text(&app));
    assert_eq!(
        held_files(r),
        ["hof_20260614_ddd444.json", "hof_20260614_fff666.json"],
        "nothing was approved by mistake"
    );
}

#[test]
fn a_selected_record_that_comes_back_is_selected_again() {
    let root = three_held();
    let r = root.path();
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_eee555");
    let file = r.join("conductor/pending/_quarantine/hof_20260614_eee555.json");
    let aside = r.join("eee555.json");
    std::fs::rename(&file, &aside).unwrap();
    refresh(&mut app, r);
    assert!(app.pane_state().gone.is_some());
    std::fs::rename(&aside, &file).unwrap();
    refresh(&mut app, r);
    assert!(app.pane_state().gone.is_none());
    app.on_key(key('p'));
    assert!(dialog_text(&app).contains("hof_20260614_eee555"));
}

/// The lines of the confirmation on screen, joined.
pub(crate) fn confirm_text(app: &App) -> String {
    let Mode::Confirm(c) = &app.mode() else {
        panic!("expected a confirmation, got {:?}", app.mode())
    };
    c.lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn prompt_of(app: &App) -> (String, String) {
    let Mode::Prompt(p) = &app.mode() else {
        panic!("expected a prompt, got {:?}", app.mode())
    };
    (p.label.clone(), p.input.text().to_owned())
}

/// Opens the ack menu on the selected dispatch and picks `status` (menu order: accepted, pending,
/// rejected, completed).
fn ack_menu_pick(app: &mut App, downs: usize) {
    app.on_key(key('a'));
    for _ in 0..downs {
        app.on_key(key('j'));
    }
    app.on_key(code(KeyCode::Enter));
}

pub(crate) fn confirm(app: &mut App, op: &EngineOperator) -> String {
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(app, op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    f.text
}

#[test]
fn pending_asks_a_message_then_an_eta_and_the_dispatch_keeps_both() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let now = chrono::Utc::now();
    let mut app = app_for(r, now);
    select_dispatch(&mut app, "hof_20260614_aaa111");
    ack_menu_pick(&mut app, 1);
    type_text(&mut app, "waiting for the API keys");
    app.on_key(code(KeyCode::Enter));
    let (label, _) = prompt_of(&app);
    assert!(label.starts_with("ETA"), "{label}");
    // Something that is no time is refused and the prompt stays.
    type_text(&mut app, "soonish");
    app.on_key(code(KeyCode::Enter));
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error);
    assert!(f.text.contains("neither a duration"), "{}", f.text);
    for _ in 0.."soonish".len() {
        app.on_key(code(KeyCode::Backspace));
    }
    type_text(&mut app, "in 2h");
    app.on_key(code(KeyCode::Enter));
    let said = confirm_text(&app);
    assert!(said.contains("ETA: ") && said.contains("in 2h"), "{said}");
    assert!(said.contains("Message: waiting for the API keys"), "{said}");
    confirm(&mut app, &op);
    let d: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/pending/hephaestus/hof_20260614_aaa111.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(d["ack_status"], "pending");
    let eta = pantheon::engine::time::parse_ts(d["eta"].as_str().unwrap()).unwrap();
    let ahead = (eta - now).num_seconds();
    assert!((7190..=7210).contains(&ahead), "eta {ahead} s ahead");
    assert_eq!(state(r, "wf_pay_1")["status"], "waiting_for_ack");
}

#[test]
fn completed_asks_for_the_gates_its_step_declares_and_the_engine_checks_them() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    // architect declares no gates: summary, then straight to the confirmation.
    select_dispatch(&mut app, "hof_20260614_aaa111");
    ack_menu_pick(&mut app, 3);
    type_text(&mut app, "Design done: webhooks + client");
    app.on_key(code(KeyCode::Enter));
    let said = confirm_text(&app);
    assert!(said.contains("Gates passed: none asserted"), "{said}");
    let text = confirm(&mut app, &op);
    assert!(text.contains("completed"), "{text}");
    // The next step, implement, went to marvin and declares logic_gate.
    refresh(&mut app, r);
    let next =
        pantheon::testing::console::items::dispatches(app.snapshot(), &app.filter(Pane::Inboxes))
            .iter()
            .find(|d| d.god == "marvin")
            .map(|d| d.view.dispatch.handoff_id.to_string())
            .expect("implement dispatched to marvin");
    select_dispatch(&mut app, &next);
    ack_menu_pick(&mut app, 3);
    type_text(&mut app, "Implemented");
    app.on_key(code(KeyCode::Enter));
    let (label, input) = prompt_of(&app);
    assert!(label.contains("implement declares: logic_gate"), "{label}");
    assert_eq!(input, "logic_gate", "prefilled with the declared gates");
    // Cleared: the engine refuses and names the gate; nothing moves.
    for _ in 0..input.len() {
        app.on_key(code(KeyCode::Backspace));
    }
    app.on_key(code(KeyCode::Enter));
    assert!(confirm_text(&app).contains("none asserted"));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "{}", f.text);
    assert!(f.text.contains("logic_gate"), "{}", f.text);
    assert!(
        r.join(format!("conductor/pending/marvin/{next}.json"))
            .exists()
    );
    // With the gate asserted, the step completes and review goes to hephaestus.
    refresh(&mut app, r);
    select_dispatch(&mut app, &next);
    ack_menu_pick(&mut app, 3);
    type_text(&mut app, "Implemented");
    app.on_key(code(KeyCode::Enter));
    app.on_key(code(KeyCode::Enter));
    let said = confirm_text(&app);
    assert!(
        said.contains("Gates passed (asserted by operator): logic_gate"),
        "{said}"
    );
    confirm(&mut app, &op);
    let st = state(r, "wf_pay_1");
    assert_eq!(st["current_step"], "review", "{st:#}");
    let implement = st["step_history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "implement")
        .unwrap();
    assert_eq!(implement["gates_passed"], serde_json::json!(["logic_gate"]));
}

/// The flashes of repeats read the engine's `duplicate`: an ack the engine already holds, an abort of an
/// aborted workflow.
#[test]
fn repeated_acks_and_aborts_flash_what_the_engine_says_of_them() {
    use pantheon::engine::AckRequest;
    use pantheon::engine::{GodName, HandoffId};
    use pantheon::testing::console::keymap::AckChoice;
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    // Each accept is a new ack (its own ack id).
    let accept = || Op::Ack {
        god: GodName::parse("hephaestus").unwrap(),
        request: AckRequest::new(
            HandoffId::parse("hof_20260614_aaa111").unwrap(),
            AckChoice::Accepted,
        ),
    };
    let (accept, second) = (accept(), accept());
    let first = op.execute(&accept).unwrap().flash;
    assert_eq!(
        first, "hof_20260614_aaa111: accepted, workflow in_progress",
        "{first}"
    );
    // A second accept (a new ack id) of the archived, accepted dispatch: the engine calls it a duplicate.
    let again = op.execute(&second).unwrap().flash;
    assert_eq!(
        again,
        "hof_20260614_aaa111: accepted (already recorded), workflow in_progress"
    );
    let abort = Op::Abort {
        workflow_id: WorkflowId::parse("wf_pay_1").unwrap(),
        reason: "scope cut".into(),
    };
    let first = op.execute(&abort).unwrap().flash;
    assert!(!first.contains("already aborted"), "{first}");
    let again = op.execute(&abort).unwrap().flash;
    assert_eq!(
        again,
        format!("{} (already aborted)", first),
        "the repeat returns the same manifest"
    );
}

/// `Z` pauses the selected dispatch's god with a reason (confirmed); the header shows
/// `⏸ PAUSED` with what and since, the inbox row is marked; `Z` again (or `:resume`) resumes it,
/// confirmed; a read-only console refuses both.
#[test]
fn pause_and_resume_from_the_inboxes_pane_with_a_reason_and_a_header_badge() {
    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));

    let mut ro = app_for(r, chrono::Utc::now());
    ro.set_read_only(true);
    select_dispatch(&mut ro, "hof_20260614_aaa111");
    ro.on_key(key('Z'));
    assert!(matches!(ro.mode(), Mode::Normal), "{:?}", ro.mode());
    let f = ro.shown_flash().cloned().unwrap();
    assert!(f.text.contains("read-only"), "{}", f.text);
    let effects = ro.run_command("resume");
    assert!(effects.is_empty());
    assert!(!r.join("conductor/paused.json").exists());

    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_aaa111");
    app.on_key(key('Z'));
    type_text(&mut app, "god misbehaving");
    app.on_key(code(KeyCode::Enter));
    let said = confirm_text(&app);
    assert!(
        said.contains("Nothing new reaches hephaestus's inbox"),
        "{said}"
    );
    assert!(said.contains("Reason: god misbehaving"), "{said}");
    let text = confirm(&mut app, &op);
    assert!(text.starts_with("god hephaestus paused since "), "{text}");
    let paused: Value =
        serde_json::from_slice(&std::fs::read(r.join("conductor/paused.json")).unwrap()).unwrap();
    assert_eq!(paused["pauses"][0]["name"], "hephaestus");
    assert_eq!(paused["pauses"][0]["reason"], "god misbehaving");
    assert_eq!(paused["pauses"][0]["source"], "console");

    refresh(&mut app, r);
    let s = screen(&app, 200, 40, r);
    assert!(s.contains("⏸ PAUSED god hephaestus since"), "{s}");
    assert!(s.contains("⏸ hephaestus"), "{s}");

    select_dispatch(&mut app, "hof_20260614_aaa111");
    let effects = app.run_command("resume");
    run(&mut app, &op, effects);
    let said = confirm_text(&app);
    assert!(said.contains("god hephaestus is paused since"), "{said}");
    assert!(said.contains("god misbehaving"), "{said}");
    let text = confirm(&mut app, &op);
    assert!(text.starts_with("god hephaestus resumed after "), "{text}");
    refresh(&mut app, r);
    let s = screen(&app, 200, 40, r);
    assert!(!s.contains("PAUSED"), "{s}");
}

#[test]
fn l_mints_an_approval_link_to_a_held_dispatch_and_copies_its_url() {
    let root = engine_root();
    let r = root.path();
    let hid = "hof_20260614_lnk001";
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&held_handoff("wf_lnk_1", hid)),
    );
    let keys = tempfile::tempdir().unwrap();
    let op = EngineOperator::new(Root::at(r)).with_link_key_file(keys.path().join("link-key"));
    // The confirmation reads the item's links from the snapshot's root: the real one here.
    let real = |r: &std::path::Path| {
        let mut s = (*snapshot_of(r)).clone();
        s.root = r.to_path_buf();
        std::sync::Arc::new(s)
    };
    let mut app = App::new(real(r), false, chrono::Utc::now());
    // No listener recorded: the confirmation says so and the engine call is refused.
    select_dispatch(&mut app, hid);
    app.on_key(key('L'));
    let said = confirm_text(&app);
    assert!(said.contains("Its links so far: none yet."), "{said}");
    assert!(said.contains("No listener is recorded"), "{said}");
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "{}", f.text);
    assert!(f.text.contains("serve --approvals"), "{}", f.text);
    // With a listener: minted, the approve URL on the clipboard and in the flash.
    pantheon::engine::write_approvals_listener(&Root::at(r), "http://127.0.0.1:9").unwrap();
    app.set_snapshot(real(r));
    select_dispatch(&mut app, hid);
    app.on_key(key('L'));
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let mut clipboard = Vec::new();
    for e in effects {
        if let Effect::Execute(o) = e {
            let done = op.execute(&o);
            for more in app.op_finished(&o, done) {
                if let Effect::Clipboard(t) = more {
                    clipboard.push(t);
                }
            }
        }
    }
    let flash = app.shown_flash().unwrap().text.clone();
    assert!(
        flash.starts_with(&format!(
            "approval link for {hid} copied (OSC 52), expires "
        )),
        "{flash}"
    );
    assert_eq!(clipboard.len(), 1, "{flash}");
    assert!(
        clipboard[0].starts_with("http://127.0.0.1:9/a/"),
        "{clipboard:?}"
    );
    assert!(flash.ends_with(&clipboard[0]), "{flash}");
    // The root keeps the pair (hashes only), minted through the console.
    let links = pantheon::engine::Conductor::new(Root::at(r)).link_entries();
    assert_eq!(links.len(), 2, "{links:?}");
    assert!(
        links
            .iter()
            .all(|l| l.channel == "console" && l.state == "open")
    );
    let token = clipboard[0].rsplit('/').next().unwrap();
    let kept = std::fs::read_dir(r.join("conductor/approvals"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(!kept.contains(token), "no token rests in the root");
    // The next confirmation counts them.
    app.set_snapshot(real(r));
    select_dispatch(&mut app, hid);
    app.on_key(key('L'));
    let said = confirm_text(&app);
    assert!(said.contains("Its links so far: 2 open."), "{said}");
    app.on_key(code(KeyCode::Esc));
    // A read-only console refuses before any dialog.
    let mut ro = App::new(snapshot_of(r), true, chrono::Utc::now());
    select_dispatch(&mut ro, hid);
    assert!(ro.on_key(key('L')).is_empty());
    assert!(matches!(ro.mode(), Mode::Normal));
    assert_eq!(ro.shown_flash().unwrap().kind, FlashKind::Error);
}
