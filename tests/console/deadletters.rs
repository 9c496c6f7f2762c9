//! Pane 9 (dead letters: requeue, abort, marks), the rerun action of pane 1 and the "no supervisor"
//! notice: dead letters made by the real supervisor pass (`Conductor::tick`), every flash checked
//! against what the engine did, hostile files in `conductor/dead/`, and a real `pantheon serve`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use insta::assert_snapshot;
use pantheon::Root;
use pantheon::engine::Conductor;
use pantheon::testing::console::app::{App, FlashKind, Mode};
use pantheon::testing::console::attention::Kind;
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::rowkey::RowKey;
use pantheon::testing::live::{LiveModel, ModelOptions};
use serde_json::{Value, json};

use super::actions::{confirm_text, run};
use super::support::*;

/// `build` waits 1 s for an ack and is delivered twice at most; `ship` follows it.
pub(crate) const DL_FLOW: &str = r#"
workflow:
  id: dl-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      max_deliveries: 2
      fallback_gods: [marvin]
    - id: ship
      god: apollo
"#;

fn handoff(wf: &str, hid: &str) -> String {
    json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "hephaestus",
        "step": "plan",
        "context": {"summary": format!("plan of {wf}"), "decisions": ["build it"],
                    "artifacts": [], "open_questions": [], "gates_passed": []},
        "routing": {"workflow_definition": "dl-flow"}
    })
    .to_string()
}

/// A root whose workflows (`wf`, `hid`) wait for `build`'s ack, with `flow` as dl-flow.
pub(crate) fn root_with(flow: &str, wfs: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    pantheon(r, &["init"], None);
    std::fs::write(r.join("conductor/workflows/dl-flow.yaml"), flow).unwrap();
    for (wf, hid) in wfs {
        pantheon(r, &["handoff", "submit", "-"], Some(&handoff(wf, hid)));
    }
    dir
}

/// Dead-letters every waiting dispatch the way the supervisor does: two passes past the deadlines.
pub(crate) fn dead_letter_all(r: &Path) {
    let c = Conductor::new(Root::at(r));
    let t = chrono::Utc::now();
    c.tick(t + chrono::Duration::hours(1));
    let report = c.tick(t + chrono::Duration::hours(2));
    assert!(
        !report.dead_lettered.is_empty(),
        "the second pass dead-letters: {report:?}"
    );
}

fn journal(r: &Path) -> Vec<Value> {
    std::fs::read_to_string(r.join("conductor/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn state(r: &Path, wf: &str) -> Value {
    serde_json::from_slice(&std::fs::read(r.join(format!("conductor/state/{wf}.json"))).unwrap())
        .unwrap()
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn flash(app: &App) -> (FlashKind, String) {
    let f = app.shown_flash().expect("a flash");
    (f.kind, f.text.clone())
}

/// Tab to the confirm button and press it: the effects to run.
fn press_confirm(app: &mut App) -> Vec<pantheon::testing::console::app::Effect> {
    assert!(app.on_key(code(KeyCode::Tab)).is_empty());
    app.on_key(code(KeyCode::Enter))
}

fn prompt_text(app: &App) -> String {
    match &app.mode() {
        Mode::Prompt(p) => p.input.text().to_owned(),
        m => panic!("expected a prompt, got {m:?}"),
    }
}

#[test]
fn a_dead_letter_is_listed_requeued_to_another_god_and_journaled_as_the_console() {
    let root = root_with(
        DL_FLOW,
        &[
            ("wf_dl_1", "hof_20260614_dd0001"),
            ("wf_dl_2", "hof_20260614_dd0002"),
        ],
    );
    let r = root.path();
    dead_letter_all(r);
    let mut app = app_for(r, chrono::Utc::now());
    assert_eq!(
        app.keys(Pane::DeadLetters),
        vec![
            RowKey::dead_letter("hephaestus", "hof_20260614_dd0001"),
            RowKey::dead_letter("hephaestus", "hof_20260614_dd0002")
        ]
    );
    // The attention item of a dead letter takes the operator to it.
    let item = app
        .attention_all()
        .into_iter()
        .find(|i| i.kind == Kind::DeadLetter)
        .unwrap();
    assert!(
        item.reason.contains("after 2 deliveries"),
        "{}",
        item.reason
    );
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    app.dispatch(Action::Top);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("9 Dead letters (2)"), "{s}");
    assert!(s.contains("2/2"), "{s}");

    // R asks where to: the god it was delivered to last, Tab completes another.
    assert!(app.on_key(key('R')).is_empty());
    assert_eq!(prompt_text(&app), "hephaestus");
    // The suggestion is a placeholder: the first key typed replaces it.
    type_text(&mut app, "ma");
    assert_eq!(prompt_text(&app), "ma");
    app.on_key(code(KeyCode::Tab));
    assert_eq!(prompt_text(&app), "marvin");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("will be put back into marvin's inbox (--to)"),
        "{lines}"
    );
    assert!(
        lines.contains("wf_dl_1 will wait for marvin's ack again"),
        "{lines}"
    );
    // Cancel is focused: Enter cancels and nothing moves.
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    assert_eq!(
        flash(&app),
        (
            FlashKind::Info,
            "cancelled: Requeue hof_20260614_dd0001 to marvin".into()
        )
    );
    assert!(
        r.join("conductor/dead/hephaestus/hof_20260614_dd0001.json")
            .exists()
    );

    app.on_key(key('R'));
    app.on_key(ctrl('u'));
    type_text(&mut app, "marvin");
    app.on_key(code(KeyCode::Enter));
    let effects = press_confirm(&mut app);
    let op = EngineOperator::new(Root::at(r));
    let done = run(&mut app, &op, effects);
    assert_eq!(done.len(), 1);
    let d: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/pending/marvin/hof_20260614_dd0001.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 1);
    let (kind, text) = flash(&app);
    assert_eq!(kind, FlashKind::Success);
    // The deadline as an age, not the raw timestamp.
    assert!(
        text.starts_with(
            "hof_20260614_dd0001 requeued into marvin's inbox, workflow wf_dl_1 waits for its ack again (ack due "
        ),
        "{text}"
    );
    assert!(
        !text.contains(d["ack_deadline"].as_str().unwrap()),
        "{text}"
    );
    assert_eq!(state(r, "wf_dl_1")["status"], "waiting_for_ack");
    assert_eq!(state(r, "wf_dl_1")["dispatched_to"], "marvin");
    let last = journal(r).pop().unwrap();
    assert_eq!(last["action"], "requeue");
    assert_eq!(last["source"], "console");
    assert_eq!(last["targets"]["to_god"], "marvin");
    assert_eq!(last["targets"]["handoff_id"], "hof_20260614_dd0001");

    // The next snapshot lists one dead letter; requeued to the same god, no --to is sent.
    app.set_snapshot(snapshot_of(r));
    assert_eq!(app.row_count(), 1);
    app.dispatch(Action::Top);
    app.on_key(key('R'));
    assert_eq!(prompt_text(&app), "hephaestus");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("hephaestus's inbox, the god it was delivered to last"),
        "{lines}"
    );
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    assert!(
        flash(&app)
            .1
            .starts_with("hof_20260614_dd0002 requeued into hephaestus's inbox"),
        "{:?}",
        flash(&app)
    );
    assert!(
        r.join("conductor/pending/hephaestus/hof_20260614_dd0002.json")
            .exists()
    );
}

#[test]
fn abort_from_pane_9_and_a_bulk_requeue_report_each_dead_letter() {
    let root = root_with(
        DL_FLOW,
        &[
            ("wf_dl_0", "hof_20260614_dd0000"),
            ("wf_dl_1", "hof_20260614_dd0001"),
            ("wf_dl_2", "hof_20260614_dd0002"),
            ("wf_dl_3", "hof_20260614_dd0003"),
        ],
    );
    let r = root.path();
    dead_letter_all(r);
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    app.dispatch(Action::Bottom);
    // x aborts the selected dead letter's workflow.
    app.on_key(key('x'));
    type_text(&mut app, "no builder left");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("wf_dl_3 (dl-flow) will be marked aborted"),
        "{lines}"
    );
    assert!(
        lines.contains("Its dead letter(s) will be retired (moved to conductor/retired/, journaled): hephaestus/hof_20260614_dd0003"),
        "{lines}"
    );
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    assert_eq!(
        flash(&app),
        (
            FlashKind::Success,
            "wf_dl_3 aborted: 0 artifact(s) marked, 0 dispatch(es) withdrawn".into()
        )
    );
    assert_eq!(state(r, "wf_dl_3")["status"], "aborted");
    // The abort, then its dead letter's retirement, each journaled as the console.
    let entries = journal(r);
    let [.., abort, retire] = entries.as_slice() else {
        panic!("{entries:?}")
    };
    assert_eq!(
        (abort["action"].as_str(), abort["source"].as_str()),
        (Some("abort"), Some("console"))
    );
    assert_eq!(
        (
            retire["action"].as_str(),
            retire["targets"]["handoff_id"].as_str(),
            retire["reason"].as_str(),
            retire["source"].as_str()
        ),
        (
            Some("dead_retire"),
            Some("hof_20260614_dd0003"),
            Some("its workflow was aborted"),
            Some("console")
        )
    );
    assert!(
        r.join("conductor/retired/hephaestus/hof_20260614_dd0003.json")
            .exists()
    );
    app.set_snapshot(snapshot_of(r));
    // Retired, it left pane 9 and the attention items; the live ones stay.
    let waiting: Vec<String> = app
        .attention_all()
        .iter()
        .filter(|i| i.kind == pantheon::testing::console::attention::Kind::DeadLetter)
        .map(|i| i.ids["workflow_id"].to_owned())
        .collect();
    assert_eq!(waiting.len(), 3, "{waiting:?}");
    assert!(!waiting.iter().any(|w| w == "wf_dl_3"), "{waiting:?}");
    assert_eq!(app.keys(Pane::DeadLetters).len(), 3);

    // A dead letter whose step has a newer open dispatch (one a rerun wrote) is not requeued:
    // the flash is the engine's reason, naming the newer dispatch.
    let mut newer: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/dead/hephaestus/hof_20260614_dd0000.json")).unwrap(),
    )
    .unwrap();
    let m = newer.as_object_mut().unwrap();
    for k in ["dead_at", "dead_reason", "deliveries", "ack_deadline"] {
        m.remove(k);
    }
    m.insert("handoff_id".into(), json!("hof_20260614_nw0000"));
    m.insert("to_god".into(), json!("marvin"));
    std::fs::create_dir_all(r.join("conductor/pending/marvin")).unwrap();
    std::fs::write(
        r.join("conductor/pending/marvin/hof_20260614_nw0000.json"),
        newer.to_string(),
    )
    .unwrap();
    app.set_snapshot(snapshot_of(r));
    app.dispatch(Action::Top);
    app.on_key(key('R'));
    app.on_key(code(KeyCode::Enter));
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    let (kind, text) = flash(&app);
    assert_eq!(kind, FlashKind::Error);
    assert!(
        text.starts_with(
            "Requeue hof_20260614_dd0000 refused: dead letter hof_20260614_dd0000 is superseded by \
             hof_20260614_nw0000, an open dispatch of step build of wf_dl_0"
        ),
        "{text}"
    );
    // w goes to its workflow; the journal's dead-letter entry comes back here.
    app.on_key(key('w'));
    assert_eq!(app.pane(), Pane::Workflows);
    assert_eq!(
        app.keys(Pane::Workflows)[app.selected(Pane::Workflows)],
        RowKey::workflow("wf_dl_0")
    );
    app.dispatch(Action::GoPane(Pane::Journal));
    let row = app
        .journal()
        .iter()
        .position(|e| {
            e["action"] == "dead_letter" && e["targets"]["handoff_id"] == "hof_20260614_dd0001"
        })
        .expect("the dead letter's journal entry");
    app.dispatch(Action::Top);
    for _ in 0..row {
        app.dispatch(Action::Down);
    }
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), Pane::DeadLetters);
    assert_eq!(
        app.keys(Pane::DeadLetters)[app.selected(Pane::DeadLetters)],
        RowKey::dead_letter("hephaestus", "hof_20260614_dd0001")
    );

    // Mark all three and requeue each to its last god: the superseded one is refused and stays
    // marked.
    app.on_key(key('*'));
    assert_eq!(app.picked(Pane::DeadLetters).len(), 3);
    app.on_key(key('R'));
    assert_eq!(
        prompt_text(&app),
        "",
        "several marks: empty means each to its own"
    );
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("3 marked record(s) will be requeued, one engine call each"),
        "{lines}"
    );
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    let (kind, text) = flash(&app);
    assert_eq!(kind, FlashKind::Error);
    assert!(
        text.starts_with(
            "requeued 2, refused 1: hof_20260614_dd0000: dead letter hof_20260614_dd0000 is superseded by"
        ),
        "{text}"
    );
    assert_eq!(
        app.picked(Pane::DeadLetters),
        [RowKey::dead_letter("hephaestus", "hof_20260614_dd0000")]
    );
    for hid in ["hof_20260614_dd0001", "hof_20260614_dd0002"] {
        assert!(
            r.join(format!("conductor/pending/hephaestus/{hid}.json"))
                .exists()
        );
    }
    // A god typed for several marks goes to each of them (as `--to`).
    let root2 = root_with(
        DL_FLOW,
        &[
            ("wf_dl_4", "hof_20260614_dd0004"),
            ("wf_dl_5", "hof_20260614_dd0005"),
        ],
    );
    let r2 = root2.path();
    dead_letter_all(r2);
    let op2 = EngineOperator::new(Root::at(r2));
    let mut app = app_for(r2, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    app.on_key(key('*'));
    app.on_key(key('R'));
    type_text(&mut app, "apo");
    app.on_key(code(KeyCode::Tab));
    assert_eq!(prompt_text(&app), "apollo");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("Requeue hof_20260614_dd0004 to apollo"),
        "{lines}"
    );
    let effects = press_confirm(&mut app);
    run(&mut app, &op2, effects);
    assert_eq!(flash(&app), (FlashKind::Success, "requeued 2".into()));
    for hid in ["hof_20260614_dd0004", "hof_20260614_dd0005"] {
        assert!(
            r2.join(format!("conductor/pending/apollo/{hid}.json"))
                .exists()
        );
    }
    let requeues = journal(r)
        .iter()
        .filter(|e| e["action"] == "requeue" && e["source"] == "console")
        .count();
    assert_eq!(requeues, 2);
}

#[test]
fn d_discards_a_dead_letter_with_a_reason_and_journals_it() {
    let root = root_with(
        DL_FLOW,
        &[
            ("wf_dl_1", "hof_20260614_dd0001"),
            ("wf_dl_2", "hof_20260614_dd0002"),
        ],
    );
    let r = root.path();
    dead_letter_all(r);
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    app.dispatch(Action::Top);
    app.on_key(key('D'));
    let Mode::Prompt(p) = &app.mode() else {
        panic!("D asks a reason: {:?}", app.mode())
    };
    assert_eq!(p.title, "Discard dead letter hof_20260614_dd0001");
    // The reason is required.
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Prompt(_)));
    type_text(&mut app, "the customer cancelled");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("will be retired: moved to conductor/retired/hephaestus/"),
        "{lines}"
    );
    assert!(lines.contains("Reason: the customer cancelled"), "{lines}");
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    assert_eq!(
        flash(&app),
        (
            FlashKind::Success,
            "hof_20260614_dd0001 discarded: retired from hephaestus's dead letters (the customer cancelled)"
                .into()
        )
    );
    assert!(
        !r.join("conductor/dead/hephaestus/hof_20260614_dd0001.json")
            .exists()
    );
    let kept: Value = serde_json::from_slice(
        &std::fs::read(r.join("conductor/retired/hephaestus/hof_20260614_dd0001.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept["retired_reason"], "the customer cancelled");
    assert!(kept["retired_at"].is_string() && kept["dead_at"].is_string());
    let last = journal(r).pop().unwrap();
    assert_eq!(
        (
            last["action"].as_str(),
            last["targets"]["handoff_id"].as_str(),
            last["reason"].as_str(),
            last["source"].as_str()
        ),
        (
            Some("dead_retire"),
            Some("hof_20260614_dd0001"),
            Some("the customer cancelled"),
            Some("console")
        )
    );
    app.set_snapshot(snapshot_of(r));
    assert_eq!(
        app.keys(Pane::DeadLetters),
        vec![RowKey::dead_letter("hephaestus", "hof_20260614_dd0002")]
    );
}

#[test]
fn rerun_asks_for_a_step_of_the_definition_and_dispatches_it_again() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    // While it waits for an ack, rerun is refused with why.
    app.dispatch(Action::GoPane(Pane::Workflows));
    app.on_key(key('R'));
    assert!(matches!(app.mode(), Mode::Normal));
    assert_eq!(
        flash(&app),
        (
            FlashKind::Error,
            "wf_dl_1 is waiting_for_ack: only a failed, stalled or completed workflow is rerun (abort it first)"
                .into()
        )
    );
    dead_letter_all(r);
    app.set_snapshot(snapshot_of(r));
    assert_eq!(state(r, "wf_dl_1")["status"], "stalled");
    app.on_key(key('R'));
    // The stalled step is the default; the label names the steps Tab completes.
    assert_eq!(prompt_text(&app), "build");
    let Mode::Prompt(p) = &app.mode() else {
        unreachable!()
    };
    assert!(p.label.contains("plan, build, ship"), "{}", p.label);
    assert!(p.input.is_suggested());
    // Typing replaces the suggested step (not `buildnope`).
    type_text(&mut app, "nope");
    assert_eq!(prompt_text(&app), "nope");
    app.on_key(code(KeyCode::Enter));
    assert!(
        matches!(app.mode(), Mode::Prompt(_)),
        "a wrong step keeps the prompt"
    );
    assert!(
        flash(&app).1.contains("\"nope\" is not a step"),
        "{:?}",
        flash(&app)
    );
    app.on_key(ctrl('u'));
    type_text(&mut app, "s");
    app.on_key(code(KeyCode::Tab));
    assert_eq!(prompt_text(&app), "ship");
    app.on_key(ctrl('u'));
    type_text(&mut app, "b");
    app.on_key(code(KeyCode::Tab));
    assert_eq!(prompt_text(&app), "build");
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    assert!(
        lines.contains("Workflow wf_dl_1 (dl-flow, now stalled) will be dispatched again from step build to hephaestus's inbox."),
        "{lines}"
    );
    assert!(
        lines.contains("pantheon rerun wf_dl_1 --from build --context FILE"),
        "{lines}"
    );
    let effects = press_confirm(&mut app);
    run(&mut app, &op, effects);
    let st = state(r, "wf_dl_1");
    assert_eq!(st["status"], "waiting_for_ack");
    // The rerun, then the retirement of the dead letter it superseded, each journaled.
    let entries = journal(r);
    let [.., last, retire] = entries.as_slice() else {
        panic!("{entries:?}")
    };
    assert_eq!(last["action"], "rerun");
    assert_eq!(last["source"], "console");
    let hid = last["targets"]["handoff_id"].as_str().unwrap();
    assert_eq!(
        flash(&app),
        (
            FlashKind::Success,
            format!(
                "wf_dl_1 rerun from step build (attempt 2, was stalled): dispatched to hephaestus as {hid}"
            )
        )
    );
    assert!(
        r.join(format!("conductor/pending/hephaestus/{hid}.json"))
            .exists()
    );
    assert_eq!(retire["action"], "dead_retire");
    assert_eq!(retire["targets"]["handoff_id"], "hof_20260614_dd0001");
    assert_eq!(retire["targets"]["superseded_by"], hid);
    // It left pane 9: nothing offers to requeue it any more.
    app.set_snapshot(snapshot_of(r));
    assert!(app.keys(Pane::DeadLetters).is_empty());
}

#[test]
fn hostile_files_in_conductor_dead_are_file_issues_never_read_through() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    dead_letter_all(r);
    let mut model = LiveModel::open(Root::at(r), ModelOptions::default());
    assert_eq!(model.snapshot().dead_letters.len(), 1);
    let dir = r.join("conductor/dead/hephaestus");
    // Malformed, oversized (sparse, so the disk is not filled), a stray, and a link to a valid
    // dead letter outside the root (a decoy that must never be read).
    std::fs::write(dir.join("hof_20260614_bad001.json"), "{ not json").unwrap();
    let big = std::fs::File::create(dir.join("hof_20260614_big001.json")).unwrap();
    big.set_len(65 * 1024 * 1024).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let decoy = outside.path().join("decoy.json");
    let valid = std::fs::read(dir.join("hof_20260614_dd0001.json")).unwrap();
    std::fs::write(&decoy, &valid).unwrap();
    std::os::unix::fs::symlink(&decoy, dir.join("hof_20260614_lnk001.json")).unwrap();
    std::fs::create_dir_all(r.join("conductor/dead/marvin")).unwrap();
    std::fs::write(
        r.join("conductor/dead/marvin/hof_20260614_arr001.json"),
        "[1,2]",
    )
    .unwrap();
    let paths = [
        dir.join("hof_20260614_bad001.json"),
        dir.join("hof_20260614_big001.json"),
        dir.join("notes.txt"),
        dir.join("hof_20260614_lnk001.json"),
        r.join("conductor/dead/marvin"),
    ];
    let snap = model.apply(&paths).expect("a new snapshot");
    let warned = |name: &str| {
        snap.warnings
            .iter()
            .find(|w| w.path.ends_with(name))
            .map(|w| w.message.clone())
            .unwrap_or_else(|| panic!("no warning for {name}: {:?}", snap.warnings))
    };
    assert!(warned("hof_20260614_bad001.json").contains("JSON"));
    assert!(warned("hof_20260614_big001.json").contains("limit"));
    assert!(warned("notes.txt").contains("not a .json"));
    assert_eq!(
        warned("hof_20260614_lnk001.json"),
        "a symbolic link; not followed"
    );
    assert!(warned("hof_20260614_arr001.json").contains("expected a JSON object"));
    // Only the real dead letter is listed; the pane and the attention queue draw without a panic.
    let mut app = App::new(snap.clone(), false, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    assert_eq!(
        app.keys(Pane::DeadLetters),
        [RowKey::dead_letter("hephaestus", "hof_20260614_dd0001")]
    );
    let s = screen(&app, 120, 30, r);
    assert!(s.contains("⚠ 5 unreadable"), "{s}");
    app.on_key(code(KeyCode::Enter));
    let s = screen(&app, 120, 30, r);
    assert!(s.contains("Delivery history (2)"), "{s}");
    let unreadable = app
        .attention_all()
        .iter()
        .filter(|i| i.kind == Kind::Unreadable)
        .count();
    assert_eq!(unreadable, 5);
    // The same from a full rescan.
    let again = LiveModel::open(Root::at(r), ModelOptions::default()).snapshot();
    assert_eq!(again.warnings.len(), snap.warnings.len());
    // The decoy was never changed (nothing writes through the link either).
    assert_eq!(std::fs::read(&decoy).unwrap(), valid);
}

/// Kills the supervisor if a test fails before stopping it (no process is left behind).
struct Serve(Option<Child>);

impl Serve {
    fn start(r: &Path) -> Self {
        let child = Command::new(assert_cmd::cargo::cargo_bin("pantheon"))
            .arg("--root")
            .arg(r)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(Some(child))
    }

    /// SIGTERM, then its exit status code.
    fn stop(mut self) -> Option<i32> {
        let mut child = self.0.take()?;
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        child.wait().unwrap().code()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn no_supervisor_is_said_in_the_header_and_the_queue_until_pantheon_serve_beats() {
    // An hour's ack_wait: the supervisor has nothing to do but beat.
    let flow = DL_FLOW.replace("ack_wait: 1s", "ack_wait: 1h");
    let root = root_with(&flow, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    let mut model = LiveModel::open(Root::at(r), ModelOptions::default());
    let mut app = App::new(model.snapshot(), false, chrono::Utc::now());
    let notice = |app: &App| {
        app.attention_all()
            .into_iter()
            .filter(|i| i.kind == Kind::NoSupervisor)
            .collect::<Vec<_>>()
    };
    let items = notice(&app);
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].reason,
        "1 dispatch(es) have an ack deadline and no supervisor is alive to enforce it"
    );
    assert_eq!(items[0].action, "run `pantheon serve` for this root");
    assert!(
        screen(&app, 200, 50, r)
            .lines()
            .next()
            .unwrap()
            .contains("▲ no supervisor")
    );
    // Narrower, it drops whole or stays whole, never cut.
    for w in 60..=200 {
        let top = screen(&app, w, 24, r).lines().next().unwrap().to_owned();
        assert!(
            top.contains("▲ no supervisor") || !top.contains("supervis"),
            "{w}: {top}"
        );
    }
    // Enter on it goes to the inboxes.
    app.dispatch(Action::GoPane(Pane::Attention));
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), Pane::Inboxes);

    let serve = Serve::start(r);
    wait_for("the supervisor's heartbeat", || {
        std::fs::read_dir(r.join("conductor/supervisor"))
            .map(|d| d.count() > 0)
            .unwrap_or(false)
    });
    wait_for("the model to see the heartbeat", || {
        if let Some(s) = model.rescan() {
            app.set_snapshot(s);
        }
        app.set_now(chrono::Utc::now());
        notice(&app).is_empty()
    });
    let top = screen(&app, 200, 50, r).lines().next().unwrap().to_owned();
    assert!(!top.contains("no supervisor"), "{top}");
    assert_eq!(serve.stop(), Some(0), "serve exits 0 on SIGTERM");
    // Its heartbeat is removed on exit: the notice is back.
    wait_for("the notice again", || {
        if let Some(s) = model.rescan() {
            app.set_snapshot(s);
        }
        notice(&app).len() == 1
    });
    // A heartbeat older than the liveness limit (a supervisor killed -9) counts as none.
    std::fs::create_dir_all(r.join("conductor/supervisor")).unwrap();
    std::fs::write(
        r.join("conductor/supervisor/old.json"),
        json!({"supervisor": "old", "last_beat": "2026-01-01T00:00:00Z"}).to_string(),
    )
    .unwrap();
    app.set_snapshot(model.rescan().expect("the old heartbeat is read"));
    let items = notice(&app);
    assert_eq!(items.len(), 1);
    assert!(
        items[0].reason.contains("(last beat "),
        "{}",
        items[0].reason
    );
}

/// The fixture root at its fixed time with a stalled workflow and its dead letter (as the
/// supervisor writes them), and a dispatch with an ack deadline nobody enforces.
fn fixture_with_dead() -> tempfile::TempDir {
    let root = fixture_root();
    let r = root.path();
    let put = |rel: &str, v: Value| {
        let p = r.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    };
    put(
        "conductor/state/wf_stuck_5.json",
        json!({
            "workflow_id": "wf_stuck_5", "definition_id": "deploy-feature", "status": "stalled",
            "current_step": "implement", "dispatched_to": "marvin",
            "failure_reason": "dispatch hof_20260614_dead05 dead-lettered after 3 deliveries",
            "created": "2026-06-14T09:00:00+00:00", "updated": "2026-06-14T10:20:00+00:00",
            "context_bag": {}, "step_history": [], "acks": []
        }),
    );
    put(
        "conductor/dead/marvin/hof_20260614_dead05.json",
        json!({
            "dispatch_id": "disp_20260614_090500_dead05", "handoff_id": "hof_20260614_dead05",
            "workflow_id": "wf_stuck_5", "from_god": "hephaestus", "to_god": "marvin",
            "step": "implement", "dispatched_at": "2026-06-14T10:10:00+00:00",
            "ack_status": "unacked", "ack_wait": "5m", "max_deliveries": 3,
            "deliveries": [
                {"at": "2026-06-14T10:00:00+00:00", "to": "hephaestus"},
                {"at": "2026-06-14T10:05:00+00:00", "to": "hephaestus"},
                {"at": "2026-06-14T10:10:00+00:00", "to": "marvin"}
            ],
            "dead_at": "2026-06-14T10:15:00+00:00",
            "dead_reason": "not acked after 3 deliveries",
            "context": {"summary": "Implement the checkout", "decisions": ["Use Stripe"],
                        "artifacts": ["src/checkout.rs"], "open_questions": []}
        }),
    );
    let inbox = r.join("conductor/pending/hephaestus/hof_20260614_abc123.json");
    let mut d: Value = serde_json::from_slice(&std::fs::read(&inbox).unwrap()).unwrap();
    d["ack_wait"] = json!("1h");
    d["ack_deadline"] = json!("2026-06-14T11:00:00+00:00");
    d["deliveries"] = json!([{"at": "2026-06-14T10:00:00+00:00", "to": "hephaestus"}]);
    d["max_deliveries"] = json!(3);
    std::fs::write(&inbox, serde_json::to_string_pretty(&d).unwrap()).unwrap();
    root
}

#[test]
fn pane_9_its_detail_its_dialogs_and_the_header_notice_at_80x24_and_200x50() {
    let root = fixture_with_dead();
    let r = root.path();
    let shots: [(&str, &[char]); 5] = [
        ("list", &[]),
        ("detail", &['\n']),
        ("requeue_prompt", &['R']),
        ("requeue_confirm", &['R', '\n']),
        ("abort_prompt", &['x']),
    ];
    for (w, h) in [(80u16, 24u16), (200, 50)] {
        for (name, keys) in shots {
            let mut app = app_for(r, fixture_now());
            app.dispatch(Action::GoPane(Pane::DeadLetters));
            for k in keys {
                match k {
                    '\n' => app.on_key(code(KeyCode::Enter)),
                    c => app.on_key(key(*c)),
                };
            }
            let s = screen(&app, w, h, r);
            assert!(s.contains("no supervisor") || w < 100, "{s}");
            assert_snapshot!(format!("dead_letters_{name}_{w}x{h}"), s);
        }
        // Rerun from pane 1: its prompt and its confirmation.
        let mut app = app_for(r, fixture_now());
        let at = app
            .keys(Pane::Workflows)
            .iter()
            .position(|k| *k == RowKey::workflow("wf_stuck_5"))
            .unwrap();
        app.dispatch(Action::GoPane(Pane::Workflows));
        app.dispatch(Action::Top);
        for _ in 0..at {
            app.dispatch(Action::Down);
        }
        app.on_key(key('R'));
        assert_snapshot!(format!("rerun_prompt_{w}x{h}"), screen(&app, w, h, r));
        app.on_key(code(KeyCode::Enter));
        assert_snapshot!(format!("rerun_confirm_{w}x{h}"), screen(&app, w, h, r));
    }
}

#[test]
fn remapped_pane_keys_show_in_the_tabs_and_the_help_and_work() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[keys]\npane_9 = \"F9\"\npane_1 = \"F1\"\n").unwrap();
    let cfg = pantheon::testing::console::config::load(Some(&cfg)).unwrap();
    let root = fixture_with_dead();
    let r = root.path();
    let mut app = app_for(r, fixture_now());
    app.configure(&cfg);
    let help = app.keymap().help_rows(Pane::Workflows);
    let row = |keys: &str| {
        help.iter()
            .find(|h| h.keys == keys)
            .map(|h| h.text.clone())
            .unwrap_or_else(|| panic!("no help row for {keys}"))
    };
    assert_eq!(row("F9"), "go to pane 9 Dead letters");
    assert_eq!(row("F1"), "go to pane 1 Workflows");
    assert_eq!(row("2"), "go to pane 2 Inboxes");
    assert!(
        !help.iter().any(|h| h.keys == "1-9"),
        "no `1-9` once remapped"
    );
    // The tab bar names the keys as bound; the old digit does nothing, the new key works.
    let s = screen(&app, 200, 50, r);
    let tabs = s.lines().nth(1).unwrap();
    assert!(
        tabs.contains(" F1 Workflows ") && tabs.contains(" F9 Dead letters "),
        "{tabs}"
    );
    app.on_key(key('9'));
    assert_eq!(app.pane(), Pane::Workflows);
    app.on_key(code(KeyCode::F(9)));
    assert_eq!(app.pane(), Pane::DeadLetters);
    // The help overlay as drawn.
    app.on_key(key('?'));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("go to pane 9 Dead letters"), "{s}");
    // A click on the drawn tab follows the drawn labels.
    app.on_key(code(KeyCode::Esc));
    let _ = screen(&app, 200, 50, r);
    let x = tabs.find("F1 Workflows").unwrap() as u16;
    app.on_mouse(
        crossterm::event::MouseEvent {
            kind: crossterm::event::MouseEventKind::Down(crossterm::event::MouseButton::Left),
            column: x,
            row: 1,
            modifiers: KeyModifiers::NONE,
        },
        Instant::now(),
    );
    assert_eq!(app.pane(), Pane::Workflows);
    // The first-time hints name the keys as bound too.
    std::fs::write(
        dir.path().join("c2.toml"),
        "[keys]\npane_2 = \"F2\"\napprove = \"P\"\n",
    )
    .unwrap();
    let cfg = pantheon::testing::console::config::load(Some(&dir.path().join("c2.toml"))).unwrap();
    let waits = root_with_waits();
    let mut app = app_for(waits.path(), chrono::Utc::now());
    app.configure(&cfg);
    app.show_first_time_hints();
    app.first_time_hints();
    let hint = flash(&app).1;
    assert!(
        hint.contains("press F2, select the held row, P approves"),
        "{hint}"
    );
}

/// A root with one dispatch waiting unacked for two minutes and one held for ten.
fn root_with_waits() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let at = |mins: i64| (chrono::Utc::now() - chrono::Duration::minutes(mins)).to_rfc3339();
    for (dir, hid, mins) in [
        ("conductor/pending/hephaestus", "hof_20260614_aa0001", 2),
        ("conductor/pending/_quarantine", "hof_20260614_aa0002", 10),
    ] {
        std::fs::create_dir_all(r.join(dir)).unwrap();
        std::fs::write(
            r.join(dir).join(format!("{hid}.json")),
            json!({"handoff_id": hid, "workflow_id": format!("wf_{hid}"), "from_god": "thoth",
                   "to_god": "hephaestus", "step": "build", "context": {"summary": "s"},
                   "dispatched_at": at(mins), "ack_status": "unacked", "held_because": "rule"})
            .to_string(),
        )
        .unwrap();
    }
    std::fs::create_dir_all(r.join("conductor/state")).unwrap();
    std::fs::write(
        r.join("conductor/state/wf_hof_20260614_aa0001.json"),
        json!({"workflow_id": "wf_hof_20260614_aa0001", "status": "waiting_for_ack",
               "current_step": "build", "dispatched_to": "hephaestus", "created": at(3)})
        .to_string(),
    )
    .unwrap();
    d
}

#[test]
fn two_consoles_in_one_process_keep_their_own_thresholds() {
    let root = root_with_waits();
    let r = root.path();
    let now = chrono::Utc::now();
    // One by its live model's options, one by its config; a third with the defaults.
    let strict = LiveModel::open(
        Root::at(r),
        ModelOptions {
            overdue_after: Some(chrono::Duration::seconds(60)),
            held_after: Some(chrono::Duration::seconds(300)),
            ..ModelOptions::default()
        },
    );
    let a = App::new(strict.snapshot(), false, now);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[thresholds]\noverdue_secs = 90\nheld_secs = 120\n").unwrap();
    let mut b = App::new(
        LiveModel::open(Root::at(r), ModelOptions::default()).snapshot(),
        false,
        now,
    );
    b.configure(&pantheon::testing::console::config::load(Some(&cfg)).unwrap());
    let c = App::new(
        LiveModel::open(Root::at(r), ModelOptions::default()).snapshot(),
        false,
        now,
    );
    let kinds = |app: &App| {
        let mut k: Vec<Kind> = app.attention_all().iter().map(|i| i.kind).collect();
        k.sort();
        k
    };
    // Held 10 minutes: overdue for a (5m) and b (2m), not for c (30m). Unacked 2 minutes: overdue
    // for a (1m) and b (90s), not for c (5m).
    for app in [&a, &b] {
        assert_eq!(app.snapshot().counts(now).overdue, 1);
        let s = screen(app, 200, 50, r);
        assert!(s.contains("▲ 1 overdue"), "{s}");
    }
    assert_eq!(c.snapshot().counts(now).overdue, 0);
    assert!(!screen(&c, 200, 50, r).contains("overdue"));
    assert_eq!(kinds(&a), vec![Kind::Held, Kind::Overdue]);
    assert_eq!(kinds(&c), vec![Kind::Held]);
    let held_flag = |app: &mut App| {
        app.dispatch(Action::GoPane(Pane::Inboxes));
        screen(app, 200, 50, r).contains("held ▲ O")
    };
    let (mut a, mut b, mut c) = (a, b, c);
    assert!(held_flag(&mut a) && held_flag(&mut b) && !held_flag(&mut c));
    // A new snapshot keeps each console's own limits.
    b.set_snapshot(LiveModel::open(Root::at(r), ModelOptions::default()).snapshot());
    assert_eq!(b.snapshot().counts(now).overdue, 1);
    c.set_snapshot(strict.snapshot());
    assert_eq!(c.snapshot().counts(now).overdue, 0, "c keeps the defaults");
}

#[test]
fn the_live_model_watches_dead_letters_and_supervisor_heartbeats() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    dead_letter_all(r);
    std::fs::create_dir_all(r.join("conductor/supervisor")).unwrap();
    let dirs = pantheon::testing::live::model::dirs_to_watch(&Root::at(r));
    for d in [
        "conductor/dead",
        "conductor/dead/hephaestus",
        "conductor/supervisor",
    ] {
        assert!(dirs.contains(&r.join(d)), "{d} is watched: {dirs:?}");
    }
}

/// In a real terminal: a dead letter made while the console runs shows in pane 9 (the console
/// watches `conductor/dead/` as it appears), and R, Tab completion and the confirmation requeue it.
#[test]
fn in_tmux_a_new_dead_letter_appears_in_pane_9_and_is_requeued_by_keys() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    let log = tempfile::tempdir().unwrap();
    let script = format!(
        "PANTHEON_LOG={} {} --root {} console; echo EXITED=$?; sleep 600",
        log.path().join("console.log").display(),
        assert_cmd::cargo::cargo_bin("pantheon").display(),
        r.display()
    );
    let t = crate::tmux::Tmux::start("dead", &script);
    t.wait("the console", |s| {
        s.contains("1 Workflows") && s.contains("wf_dl_1")
    });
    t.keys(&["9"]);
    t.wait("an empty pane 9", |s| s.contains("9 Dead letters (0)"));
    dead_letter_all(r);
    t.wait("the dead letter", |s| {
        s.contains("9 Dead letters (1)") && s.contains("hof_20260614_dd0001")
    });
    t.wait("the header notice gone with the deadline", |s| {
        !s.lines().next().unwrap_or("").contains("no supervisor")
    });
    t.keys(&["R"]);
    t.wait("the requeue prompt", |s| s.contains("Requeue to god"));
    t.keys(&["C-u"]);
    t.type_text("ma");
    t.keys(&["Tab"]);
    t.wait("marvin completed", |s| s.contains("marvin▏"));
    t.keys(&["Enter"]);
    t.wait("the confirmation", |s| {
        s.contains("[ Cancel ]") && s.contains("will be put back into marvin's inbox")
    });
    t.keys(&["Tab", "Enter"]);
    t.wait("the flash", |s| {
        s.contains("hof_20260614_dd0001 requeued into marvin's inbox")
    });
    assert!(
        r.join("conductor/pending/marvin/hof_20260614_dd0001.json")
            .exists()
    );
    t.wait("the empty pane again", |s| s.contains("9 Dead letters (0)"));
    // The requeued dispatch has a deadline and no supervisor runs: the header says so.
    t.wait("the notice", |s| {
        s.lines().next().unwrap_or("").contains("▲ no supervisor")
    });
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}
