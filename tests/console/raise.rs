//! Budget raises that say what they do (docs/BUDGETS.md, docs/CONSOLE.md): the raise
//! dialog lists each budget reached with its usage and limit and asks for each metric reached; an
//! answer that would leave a budget reached is refused naming it; bulk approve names the marked
//! dispatches held for a budget and asks their raise; `Enter` on a reached `budget_warning` lands
//! where `p` acts. Against the real engine, drawn through the real render path.

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::Root;
use pantheon::testing::console::app::{App, FlashKind, Mode};
use pantheon::testing::console::attention::Kind;
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::ops::Op;
use serde_json::{Value, json};

use super::actions::{dialog_text, run, select_dispatch};
use super::support::*;

const BOTH: &str = "workflow:\n  id: both\n  version: \"1\"\n  budget: {cost_usd: 1}\n  steps:\n    \
                    - id: research\n      god: thoth\n    - id: build\n      god: hephaestus\n      \
                    budget: {tokens: 100000}\n    - id: review\n      god: marvin\n";
const GATED: &str = "workflow:\n  id: gated\n  version: \"1\"\n  steps:\n    - id: plan\n      \
                     god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n";
/// The dispatch held for two budgets: the workflow's dollars and its build step's tokens.
const BUDGET_HELD: &str = "hof_20260614_b07400";
/// A dispatch held for an approval step, no budget.
const STEP_HELD: &str = "hof_20260614_9a7e00";

fn submit(r: &std::path::Path, h: Value) {
    pantheon(r, &["handoff", "submit", "-"], Some(&h.to_string()));
}

/// wf_both_1 spends $0.20 on research, then $1.00 and 136,000 tokens on build: its review is held
/// for the workflow's $1 budget and the build step's 100,000-token budget. wf_gate_1's build is
/// held for its approval step.
fn root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    pantheon(r, &["init"], None);
    std::fs::write(r.join("conductor/workflows/both.yaml"), BOTH).unwrap();
    std::fs::write(r.join("conductor/workflows/gated.yaml"), GATED).unwrap();
    for e in std::fs::read_dir(r.join("conductor/rules")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let step = |hid: &str, wf: &str, def: &str, from: &str, step: &str, usage: Value| {
        let mut h = json!({"handoff_id": hid, "workflow_id": wf, "from_god": from, "to_god": "x",
                           "step": step, "routing": {"workflow_definition": def},
                           "context": {"summary": step, "decisions": [], "artifacts": []}});
        if !usage.is_null() {
            h["usage"] = usage;
        }
        h
    };
    submit(
        r,
        step(
            "hof_20260614_b07300",
            "wf_both_1",
            "both",
            "thoth",
            "research",
            json!({"cost_usd": 0.2}),
        ),
    );
    submit(
        r,
        step(
            BUDGET_HELD,
            "wf_both_1",
            "both",
            "hephaestus",
            "build",
            json!({"cost_usd": 1.0, "input_tokens": 136000}),
        ),
    );
    submit(
        r,
        step(
            STEP_HELD,
            "wf_gate_1",
            "gated",
            "thoth",
            "plan",
            Value::Null,
        ),
    );
    root
}

/// The dialog box of a screen: the columns of its title row's borders, from that row to its bottom
/// border.
fn dialog_box(screen: &str) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let top = lines
        .iter()
        .position(|l| l.iter().collect::<String>().contains("Raise the budgets"))
        .expect("the dialog is drawn");
    let from = lines[top].iter().position(|c| *c == '╭').unwrap();
    let to = lines[top].iter().position(|c| *c == '╮').unwrap() + 1;
    let mut out = Vec::new();
    for l in &lines[top..] {
        let row: String = l[from.min(l.len())..to.min(l.len())].iter().collect();
        let last = row.starts_with('╰');
        out.push(row);
        if last {
            break;
        }
    }
    out.join("\n")
}

fn clear_input(app: &mut App) {
    for _ in 0..40 {
        app.on_key(code(KeyCode::Backspace));
    }
}

fn flash(app: &App) -> String {
    app.shown_flash()
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default()
}

fn state(r: &std::path::Path, wf: &str) -> Value {
    serde_json::from_slice(&std::fs::read(r.join(format!("conductor/state/{wf}.json"))).unwrap())
        .unwrap()
}

#[test]
fn the_raise_dialog_lists_each_reached_budget_and_refuses_a_raise_that_leaves_one_reached() {
    let root = root();
    let r = root.path();
    let op = EngineOperator::acting_as(Root::at(r), "alice");
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, BUDGET_HELD);
    assert!(app.on_key(key('p')).is_empty());
    let Mode::Prompt(p) = &app.mode() else {
        panic!("a budget hold asks for the raise first: {:?}", app.mode())
    };
    assert_eq!(
        p.context,
        [
            "Reached: workflow wf_both_1: $1.20 of $1.00",
            "Reached: step wf_both_1/build: 136.0k of 100.0k tokens"
        ]
    );
    assert!(
        p.label.starts_with("New limit in dollars and tokens"),
        "{}",
        p.label
    );
    // Drawn: the budgets, the question and the answer line, whole, at 80x24 (and 200x50).
    for (w, h) in [(80, 24), (200, 50)] {
        let s = screen(&app, w, h, r);
        for want in [
            "Raise the budgets of hof_20260614_b07400",
            "Reached: workflow wf_both_1: $1.20 of $1.00",
            "Reached: step wf_both_1/build: 136.0k of 100.0k tokens",
            "dollars and tokens",
        ] {
            assert!(s.contains(want), "{want:?} at {w}x{h}:\n{s}");
        }
    }
    assert_snapshot!("raise_dialog_80x24", dialog_box(&screen(&app, 80, 24, r)));

    // Dollars only: the step's token budget would stay reached. Refused, named, the prompt stays.
    type_text(&mut app, "$5");
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Prompt(_)), "{:?}", app.mode());
    let said = flash(&app);
    assert!(
        said.contains("step wf_both_1/build reached its 100.0k tokens")
            && said.contains("give tokens too, above 136.0k tokens"),
        "{said}"
    );
    // Below what is spent: refused, naming the usage.
    clear_input(&mut app);
    type_text(&mut app, "$1, 200000 tokens");
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Prompt(_)), "{:?}", app.mode());
    let said = flash(&app);
    assert!(
        said.contains("workflow wf_both_1 has used $1.20: $1.00 would leave it reached"),
        "{said}"
    );
    // Both, above what is used: the confirmation says what each budget becomes.
    clear_input(&mut app);
    type_text(&mut app, "$5, 200000 tokens");
    app.on_key(code(KeyCode::Enter));
    let said = dialog_text(&app);
    for want in [
        "Budget reached: workflow wf_both_1: $1.20 of $1.00; its limit will be set to $5.00",
        "Budget reached: step wf_both_1/build: 136.0k of 100.0k tokens; its limit will be set to 200.0k tokens",
    ] {
        assert!(said.contains(want), "{want:?} in {said}");
    }
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert!(
        matches!(done.as_slice(), [Op::Approve { raise: Some(b), .. }]
            if b.cost_micros == Some(5_000_000) && b.tokens == Some(200_000)),
        "{done:?}"
    );
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert!(
        f.text.contains("approved into marvin's inbox"),
        "{}",
        f.text
    );
    let st = state(r, "wf_both_1");
    assert_eq!(
        st["budget"],
        json!({"workflow": {"cost_micros": 5_000_000}, "steps": {"build": {"tokens": 200_000}}}),
        "{st}"
    );
}

#[test]
fn an_engine_refusal_of_a_raise_is_flashed_and_nothing_is_approved() {
    // The console's own check passes ($5 and tokens above what the snapshot shows), but the ledger
    // moved on since: the engine computes at approval time and refuses, and nothing is approved.
    let root = root();
    let r = root.path();
    let op = EngineOperator::acting_as(Root::at(r), "alice");
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, BUDGET_HELD);
    app.on_key(key('p'));
    type_text(&mut app, "$5, 140000 tokens");
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Confirm(_)), "{:?}", app.mode());
    // Meanwhile 10,000 more tokens are recorded against the build step (in its state, as the
    // engine records a report), after the console's snapshot was taken.
    let p = r.join("conductor/state/wf_both_1.json");
    let mut st: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    st["usage"]["steps"]["build"]["input_tokens"] = json!(146_000);
    std::fs::write(&p, st.to_string()).unwrap();
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    run(&mut app, &op, effects);
    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "{}", f.text);
    assert!(
        f.text.contains("would leave a budget reached")
            && f.text.contains("step wf_both_1/build: 146,000 tokens used"),
        "{}",
        f.text
    );
    assert!(
        r.join(format!("conductor/pending/_quarantine/{BUDGET_HELD}.json"))
            .exists()
    );
    assert_eq!(state(r, "wf_both_1")["status"], "awaiting_approval");
}

#[test]
fn bulk_approve_names_the_dispatches_held_for_a_budget_and_asks_their_raise() {
    let root = root();
    let r = root.path();
    let op = EngineOperator::acting_as(Root::at(r), "alice");
    let mut app = app_for(r, chrono::Utc::now());
    for hid in [BUDGET_HELD, STEP_HELD] {
        select_dispatch(&mut app, hid);
        app.dispatch(Action::ToggleMark);
    }
    app.on_key(key('p'));
    let Mode::Prompt(p) = &app.mode() else {
        panic!(
            "marks with a budget hold ask for the raise: {:?}",
            app.mode()
        )
    };
    assert_eq!(
        p.title,
        "Approve 2 marked dispatch(es): 1 held for a budget"
    );
    assert_eq!(
        p.context,
        [
            "hof_20260614_b07400: workflow wf_both_1: $1.20 of $1.00 reached",
            "hof_20260614_b07400: step wf_both_1/build: 136.0k of 100.0k tokens reached"
        ]
    );
    type_text(&mut app, "$3, 300000 tokens");
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Confirm(_)), "{:?}", app.mode());
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    let Some(Op::Bulk { items, .. }) = done.first() else {
        panic!("one bulk op: {done:?}")
    };
    let raises: Vec<(String, Option<u64>)> = items
        .iter()
        .map(|(_, o)| match o {
            Op::Approve { handoff_id, raise } => {
                (handoff_id.to_string(), raise.and_then(|b| b.cost_micros))
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        raises.contains(&(BUDGET_HELD.to_owned(), Some(3_000_000)))
            && raises.contains(&(STEP_HELD.to_owned(), None)),
        "{raises:?}"
    );
    assert_eq!(state(r, "wf_both_1")["status"], "waiting_for_ack");
    assert_eq!(state(r, "wf_gate_1")["status"], "waiting_for_ack");
    assert_eq!(
        state(r, "wf_both_1")["budget"]["steps"]["build"]["tokens"],
        300_000
    );
}

#[test]
fn enter_on_a_reached_budget_warning_lands_where_p_approves() {
    let root = root();
    let r = root.path();
    let mut app = app_for(r, chrono::Utc::now());
    let items = app.attention_all();
    let row = app
        .attention()
        .iter()
        .position(|i| i.kind == Kind::BudgetWarning && i.ids.get("budget") == Some("wf_both_1"))
        .unwrap_or_else(|| panic!("no budget warning of wf_both_1 in {items:?}"));
    app.dispatch(Action::GoPane(Pane::Attention));
    app.dispatch(Action::Top);
    for _ in 0..row {
        app.dispatch(Action::Down);
    }
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.pane(), Pane::Inboxes);
    let keys: Vec<String> = app
        .keys(Pane::Inboxes)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        keys.get(app.selected(Pane::Inboxes)).map(String::as_str),
        Some("_quarantine/hof_20260614_b07400")
    );
    // `p` there opens the raise dialog.
    app.on_key(key('p'));
    assert!(
        matches!(&app.mode(), Mode::Prompt(p) if p.title.starts_with("Raise the budgets of hof_20260614_b07400")),
        "{:?}",
        app.mode()
    );
}

/// In a real terminal (tmux): `Enter` on the reached budget warning lands on its held dispatch,
/// `p` opens the raise dialog with each budget reached, a dollars-only answer is refused naming the
/// token budget, and the confirmation of both says what each becomes. Nothing is approved (Esc).
#[test]
fn the_raise_dialog_in_a_real_terminal() {
    let root = root();
    let r = root.path();
    let bin = assert_cmd::cargo::cargo_bin!("pantheon").to_path_buf();
    let script = format!(
        "{} --root {} console; echo EXITED=$?; sleep 600",
        bin.display(),
        r.display()
    );
    let t = crate::tmux::Tmux::start("raise", &script);
    t.wait("the console", |s| s.contains("1 Workflows"));
    t.keys(&["7"]);
    t.wait("the budget warning", |s| s.contains("budget_warning"));
    t.keys(&["/"]);
    t.type_text("budget_warning");
    t.keys(&["Enter"]);
    t.wait("the filtered attention list", |s| {
        s.contains("/budget_warning")
    });
    t.keys(&["Enter"]);
    t.wait("the held dispatch in pane 2", |s| {
        s.contains("hof_20260614_b07400")
    });
    t.keys(&["p"]);
    let s = t.wait("the raise dialog", |s| {
        s.contains("Raise the budgets of hof_20260614_b07400")
    });
    for want in [
        "Reached: workflow wf_both_1: $1.20 of $1.00",
        "Reached: step wf_both_1/build: 136.0k of 100.0k tokens",
        "New limit in dollars and tokens",
    ] {
        assert!(s.contains(want), "{want:?}:\n{s}");
    }
    t.type_text("$5");
    t.keys(&["Enter"]);
    t.wait("the refusal naming the token budget", |s| {
        s.contains("give tokens too") && s.contains("Raise the budgets")
    });
    t.keys(&["C-u"]);
    t.type_text("$5, 200000 tokens");
    t.keys(&["Enter"]);
    t.wait("the confirmation", |s| {
        s.contains("its limit will be set to $5.00")
            && s.contains("its limit will be set to 200.0k")
    });
    t.keys(&["Escape"]);
    t.wait("the cancelled approval", |s| s.contains("cancelled"));
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
    assert!(
        r.join("conductor/pending/_quarantine/hof_20260614_b07400.json")
            .exists()
    );
}
