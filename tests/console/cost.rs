//! What the console shows of cost (docs/BUDGETS.md): the Ledger pane and the cost column drawn from
//! a fixture root with usage (insta, 80x24 and 200x50), the workflow detail's cost, `/over-budget`,
//! budget warnings as attention items, and approving a dispatch held for a budget with a raise,
//! against the real engine (the raise journaled).

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::Root;
use pantheon::testing::console::app::{App, FlashKind, Mode};
use pantheon::testing::console::attention::Kind;
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::ops::Op;
use pantheon::testing::console::rowkey::RowKey;
use serde_json::{Value, json};

use super::actions::{dialog_text, run, select_dispatch};
use super::support::*;

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 50)];

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn totals(cost_micros: u64, input: u64, output: u64, reports: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "cost_micros": cost_micros,
           "reports": reports})
}

/// One ledger line as the engine writes it.
fn line(key: &str, at: &str, wf: &str, step: &str, god: &str, cost_micros: u64) -> String {
    json!({"key": key, "at": at, "source": "handoff", "workflow_id": wf,
           "definition": "deploy-feature", "step": step, "god": god,
           "model": "claude-sonnet-4-5", "input_tokens": cost_micros / 10,
           "output_tokens": cost_micros / 100, "cache_read_tokens": 0, "cache_write_tokens": 0,
           "cost_micros": cost_micros, "priced": true})
    .to_string()
}

/// The fixture root with usage: deploy-feature declares a $2.50 budget, which wf_deploy_42 has
/// reached ($2.60: research $0.90 by thoth, architect $1.70 by hephaestus); wf_bug_7 spent $0.85
/// with marvin, whose $1 god budget is past its 80 % warning; the day has a $20 budget. The engine
/// fired the warnings of both.
pub(crate) fn cost_root() -> tempfile::TempDir {
    let root = fixture_root();
    let r = root.path();
    let def = r.join("conductor/workflows/deploy-feature.yaml");
    let text = std::fs::read_to_string(&def).unwrap().replacen(
        "  version: \"1.0.0\"\n",
        "  version: \"1.0.0\"\n  budget: {cost_usd: 2.5}\n",
        1,
    );
    std::fs::write(&def, text).unwrap();
    write(
        r,
        "conductor/config.yaml",
        "cost:\n  budgets:\n    day: {cost_usd: 20}\n    gods:\n      marvin: {cost_usd: 1}\n",
    );
    for (wf, usage) in [
        (
            "wf_deploy_42",
            json!({"total": totals(2_600_000, 260_000, 26_000, 3),
                   "steps": {"research": totals(900_000, 90_000, 9_000, 1),
                             "architect": totals(1_700_000, 170_000, 17_000, 2)},
                   "keys": ["handoff-a", "handoff-b", "handoff-c"]}),
        ),
        (
            "wf_bug_7",
            json!({"total": totals(850_000, 85_000, 8_500, 1),
                   "steps": {"fix": totals(850_000, 85_000, 8_500, 1)},
                   "keys": ["handoff-d"]}),
        ),
    ] {
        let p = r.join(format!("conductor/state/{wf}.json"));
        let mut st: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        st["usage"] = usage;
        std::fs::write(&p, st.to_string()).unwrap();
    }
    let lines = [
        line(
            "handoff-a",
            "2026-06-14T09:05:00Z",
            "wf_deploy_42",
            "research",
            "thoth",
            900_000,
        ),
        line(
            "handoff-b",
            "2026-06-14T10:02:00Z",
            "wf_deploy_42",
            "architect",
            "hephaestus",
            1_000_000,
        ),
        line(
            "handoff-d",
            "2026-06-14T10:12:00Z",
            "wf_bug_7",
            "fix",
            "marvin",
            850_000,
        ),
        line(
            "handoff-c",
            "2026-06-14T10:31:00Z",
            "wf_deploy_42",
            "architect",
            "hephaestus",
            700_000,
        ),
    ];
    write(r, "conductor/cost/ledger.jsonl", &(lines.join("\n") + "\n"));
    let warn = |scope: &str, name: &str, used: f64, limit: f64, at: &str| {
        json!({"scope": scope, "name": name, "metric": "cost_usd", "used": used, "limit": limit,
               "kind": "budget_warning", "key": format!("{scope}:{name}:cost_usd:{}", (limit * 1e6) as u64),
               "at": at, "warn_at": 0.8, "reached": used >= limit})
        .to_string()
    };
    write(
        r,
        "conductor/cost/attention.jsonl",
        &format!(
            "{}\n{}\n",
            warn("god", "marvin", 0.85, 1.0, "2026-06-14T10:12:00Z"),
            warn("workflow", "wf_deploy_42", 2.6, 2.5, "2026-06-14T10:31:00Z")
        ),
    );
    root
}

#[test]
fn the_ledger_pane_and_the_cost_column_at_80x24_and_200x50() {
    let root = cost_root();
    let r = root.path();
    for (w, h) in SIZES {
        let mut app = app_for(r, fixture_now());
        let s = screen(&app, w, h, r);
        assert!(s.contains("COST") && s.contains("$2.60"), "{s}");
        assert_snapshot!(format!("cost_workflows_{w}x{h}"), s);
        app.dispatch(Action::GoPane(Pane::Ledger));
        let s = screen(&app, w, h, r);
        assert!(s.contains("$3.45") && s.contains("hephaestus"), "{s}");
        assert_snapshot!(format!("cost_ledger_{w}x{h}"), s);
    }
    let mut app = app_for(r, fixture_now());
    app.dispatch(Action::GoPane(Pane::Ledger));
    let keys: Vec<String> = app
        .keys(Pane::Ledger)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        keys,
        [
            "god/hephaestus",
            "god/thoth",
            "god/marvin",
            "budget/day/2026-06-14/cost_usd",
            "budget/workflow/wf_deploy_42/cost_usd",
        ],
        "gods by cost, then the day's and each unfinished workflow's budget"
    );
    app.dispatch(Action::Open);
    let s = screen(&app, 120, 30, r);
    assert!(
        s.contains("$1.70") && s.contains("$1.70/h (the last hour)"),
        "hephaestus spent $1.70, all in the hour before 10:36: {s}"
    );
}

#[test]
fn the_workflow_detail_shows_its_cost_by_step_and_by_god_and_its_budget() {
    let root = cost_root();
    let r = root.path();
    let mut app = app_for(r, fixture_now());
    let at = app
        .keys(Pane::Workflows)
        .iter()
        .position(|k| *k == RowKey::workflow("wf_deploy_42"))
        .unwrap();
    app.dispatch(Action::Top);
    for _ in 0..at {
        app.dispatch(Action::Down);
    }
    app.dispatch(Action::Open);
    let s = screen(&app, 160, 60, r);
    assert_snapshot!("cost_workflow_detail", s);
    for want in [
        "research",
        "architect",
        "thoth",
        "hephaestus",
        "$0.90",
        "$1.70",
        "budget workflow wf_deploy_42: 104% ($2.60 of $2.50) · reached",
    ] {
        assert!(s.contains(want), "{want}: {s}");
    }
}

#[test]
fn over_budget_keeps_the_workflows_held_dispatches_and_ledger_rows_past_a_limit() {
    let root = cost_root();
    let r = root.path();
    // A dispatch of wf_bug_7 held for marvin's budget.
    write(
        r,
        "conductor/pending/_quarantine/hof_20260614_b0d9e7.json",
        &json!({"handoff_id": "hof_20260614_b0d9e7", "workflow_id": "wf_bug_7",
                "from_god": "thoth", "to_god": "marvin", "step": "fix",
                "dispatched_at": "2026-06-14T10:20:00Z", "ack_status": "unacked",
                "held_because": "budget: god marvin: $1.050000 of its $1.000000 budget",
                "budget": {"crossed": [{"scope": "god", "name": "marvin", "metric": "cost_usd",
                                        "used": 1.05, "limit": 1}]},
                "context": {"summary": "Fix it"}})
        .to_string(),
    );
    let mut app = app_for(r, fixture_now());
    let filter = |app: &mut App, pane: Pane| {
        app.dispatch(Action::GoPane(pane));
        app.on_key(key('/'));
        type_text(app, "over-budget");
        app.on_key(code(KeyCode::Enter));
        app.keys(pane)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        filter(&mut app, Pane::Workflows),
        ["wf_bug_7", "wf_deploy_42"],
        "one reached its own budget, the other's next dispatch is held for a god's"
    );
    assert_eq!(
        filter(&mut app, Pane::Inboxes),
        ["_quarantine/hof_20260614_b0d9e7"]
    );
    assert_eq!(
        filter(&mut app, Pane::Ledger),
        ["budget/workflow/wf_deploy_42/cost_usd"],
        "marvin is at 85 %: warned, not over"
    );
}

#[test]
fn budget_warnings_are_attention_items_while_their_budget_stands() {
    let root = cost_root();
    let r = root.path();
    let app = app_for(r, fixture_now());
    let items: Vec<_> = app
        .attention()
        .into_iter()
        .filter(|i| i.kind == Kind::BudgetWarning)
        .collect();
    assert_eq!(items.len(), 2, "{items:?}");
    let wf = items
        .iter()
        .find(|i| i.ids.get("budget") == Some("wf_deploy_42"))
        .unwrap();
    assert_eq!(
        wf.key,
        "budget_warning/wf_deploy_42/workflow/cost_usd/2500000"
    );
    assert!(
        wf.reason
            .contains("reached its cost budget ($2.60 of $2.50)"),
        "{}",
        wf.reason
    );
    let god = items
        .iter()
        .find(|i| i.ids.get("budget") == Some("marvin"))
        .unwrap();
    assert!(
        god.reason.contains("used 85% of its cost budget"),
        "{}",
        god.reason
    );
    // `/metrics` counts the same standing warnings.
    let scraped = |app: &App| {
        pantheon::testing::observe::metrics::Metrics::new(Root::at(r), false)
            .scrape(app.snapshot(), false)
            .to_string()
    };
    let text = scraped(&app);
    assert!(
        text.contains("pantheon_attention_items{kind=\"budget_warning\"} 2"),
        "{text}"
    );
    // Raised since: the old warning no longer stands (the raise warns again at its own share).
    let p = r.join("conductor/state/wf_deploy_42.json");
    let mut st: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    st["budget"] = json!({"workflow": {"cost_micros": 10_000_000}});
    std::fs::write(&p, st.to_string()).unwrap();
    let app = app_for(r, fixture_now());
    let left: Vec<_> = app
        .attention()
        .into_iter()
        .filter(|i| i.kind == Kind::BudgetWarning)
        .map(|i| i.key)
        .collect();
    assert_eq!(left, ["budget_warning/marvin/god/cost_usd/1000000"]);
    let text = scraped(&app);
    assert!(
        text.contains("pantheon_attention_items{kind=\"budget_warning\"} 1"),
        "{text}"
    );
}

/// A root with a definition whose $1 budget the first handoff's usage reaches: its dispatch to
/// hephaestus is held in `_quarantine`.
fn held_for_budget_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    pantheon(r, &["init"], None);
    write(
        r,
        "conductor/workflows/budgeted.yaml",
        "workflow:\n  id: budgeted\n  version: \"1\"\n  budget: {cost_usd: 1}\n  steps:\n    \
         - id: research\n      god: thoth\n    - id: build\n      god: hephaestus\n    \
         - id: review\n      god: marvin\n",
    );
    let h = json!({"handoff_id": "hof_20260614_c05700", "workflow_id": "wf_budget_1",
                   "from_god": "thoth", "to_god": "hephaestus", "step": "research",
                   "routing": {"workflow_definition": "budgeted"},
                   "context": {"summary": "Researched", "decisions": [], "artifacts": []},
                   "usage": {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 1.2,
                             "model": "claude-sonnet-4-5"}});
    pantheon(r, &["handoff", "submit", "-"], Some(&h.to_string()));
    root
}

#[test]
fn approving_a_dispatch_held_for_a_budget_shows_its_figures_and_raises_it_journaled() {
    let root = held_for_budget_root();
    let r = root.path();
    assert_eq!(held_files_of(r), ["hof_20260614_c05700.json"]);
    let op = EngineOperator::acting_as(Root::at(r), "alice");
    let mut app = app_for(r, chrono::Utc::now());
    select_dispatch(&mut app, "hof_20260614_c05700");
    assert!(app.on_key(key('p')).is_empty());
    let Mode::Prompt(p) = &app.mode() else {
        panic!("a budget hold asks for the raise first: {:?}", app.mode())
    };
    assert_eq!(
        p.title,
        "Raise the budgets of hof_20260614_c05700 and approve it"
    );
    // The dialog lists the budget reached, with its usage and limit, and asks for dollars.
    assert_eq!(p.context, ["Reached: workflow wf_budget_1: $1.20 of $1.00"]);
    assert!(p.label.starts_with("New limit in dollars"), "{}", p.label);
    // A bare number says neither dollars nor tokens: refused, the prompt stays.
    type_text(&mut app, "5");
    app.on_key(code(KeyCode::Enter));
    assert!(matches!(app.mode(), Mode::Prompt(_)), "{:?}", app.mode());
    app.on_key(code(KeyCode::Backspace));
    type_text(&mut app, "$5");
    app.on_key(code(KeyCode::Enter));
    let said = dialog_text(&app);
    assert!(
        said.contains(
            "Budget reached: workflow wf_budget_1: $1.20 of $1.00; its limit will be set to $5.00"
        ),
        "{said}"
    );
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert!(
        matches!(done.as_slice(), [Op::Approve { raise: Some(b), .. }] if b.cost_micros == Some(5_000_000)),
        "{done:?}"
    );
    let flash = app.shown_flash().cloned().unwrap();
    assert_eq!(flash.kind, FlashKind::Success, "{}", flash.text);
    assert!(
        flash
            .text
            .contains("budget raised (workflow wf_budget_1 -> {\"cost_usd\":5})")
            && flash.text.contains("approved into hephaestus's inbox"),
        "{}",
        flash.text
    );
    assert!(held_files_of(r).is_empty());
    assert!(
        r.join("conductor/pending/hephaestus/hof_20260614_c05700.json")
            .exists()
    );
    let st: Value =
        serde_json::from_slice(&std::fs::read(r.join("conductor/state/wf_budget_1.json")).unwrap())
            .unwrap();
    assert_eq!(st["budget"]["workflow"]["cost_micros"], 5_000_000, "{st}");
    assert_eq!(st["budget_raises"][0]["by"], "alice", "{st}");
    let journal: Vec<Value> = std::fs::read_to_string(r.join("conductor/journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let actions: Vec<&str> = journal
        .iter()
        .filter(|e| e["source"] == "console")
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["budget_raise", "approve"], "{journal:?}");
    let raise = journal
        .iter()
        .find(|e| e["action"] == "budget_raise")
        .unwrap();
    assert_eq!(raise["actor"], "alice");
    assert_eq!(raise["targets"]["handoff_id"], "hof_20260614_c05700");
    assert!(
        raise["reason"]
            .as_str()
            .unwrap()
            .contains("workflow wf_budget_1 -> {\"cost_usd\":5}"),
        "{raise}"
    );
}

fn held_files_of(r: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(r.join("conductor/pending/_quarantine"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn the_model_follows_the_ledger_and_the_warnings_from_where_it_read_and_starts_over_when_replaced()
{
    use pantheon::testing::live::{LiveModel, ModelOptions};
    let root = cost_root();
    let r = root.path();
    let mut m = LiveModel::open(Root::at(r), ModelOptions::default());
    let total = |m: &LiveModel| m.snapshot().ledger.total.cost_micros;
    assert_eq!(total(&m), 3_450_000);
    let ledger = r.join("conductor/cost/ledger.jsonl");
    let append = |text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&ledger)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    // A new line: only it is read (a line torn mid-write waits for its end).
    let next = line(
        "ack-e",
        "2026-06-14T10:35:00Z",
        "wf_bug_7",
        "fix",
        "marvin",
        150_000,
    );
    let (head, tail) = next.split_at(40);
    append(head);
    assert!(m.apply(std::slice::from_ref(&ledger)).is_some());
    assert_eq!(total(&m), 3_450_000, "a torn line is not counted");
    append(&format!("{tail}\n"));
    m.apply(std::slice::from_ref(&ledger));
    let s = m.snapshot();
    assert_eq!(s.ledger.total.cost_micros, 3_600_000);
    assert_eq!(s.ledger.gods["marvin"].total.cost_micros, 1_000_000);
    assert_eq!(s.ledger.workflows["wf_bug_7"]["marvin"].reports, 2);
    // marvin's budget is reached now: its row and `/over-budget` say so.
    let bars = s.root_bars(fixture_now());
    assert!(
        bars.iter().any(|b| b.name == "marvin" && b.reached()),
        "{bars:?}"
    );
    // A warning appended by the engine; a line that is not one is left out.
    let warnings = r.join("conductor/cost/attention.jsonl");
    let mut text = std::fs::read_to_string(&warnings).unwrap();
    text.push_str("{\"kind\": \"something_else\"}\nnot json\n");
    text.push_str(
        &(json!({"kind": "budget_warning", "key": "god:marvin:cost_usd:1000000", "scope": "god",
                 "name": "marvin", "metric": "cost_usd", "used": 1.0, "limit": 1, "warn_at": 0.8,
                 "reached": true, "at": "2026-06-14T10:35:00Z"})
        .to_string()
            + "\n"),
    );
    std::fs::write(&warnings, text).unwrap();
    m.apply(std::slice::from_ref(&warnings));
    assert_eq!(
        m.snapshot().ledger.warnings.len(),
        2,
        "one per key, the duplicate key left out"
    );
    // The ledger replaced by a shorter one: read again from its start.
    std::fs::write(
        &ledger,
        line(
            "handoff-z",
            "2026-06-14T10:00:00Z",
            "wf_deploy_42",
            "research",
            "thoth",
            10_000,
        ) + "\n",
    )
    .unwrap();
    m.apply(std::slice::from_ref(&ledger));
    let s = m.snapshot();
    assert_eq!(s.ledger.total.cost_micros, 10_000);
    assert_eq!(s.ledger.gods.keys().collect::<Vec<_>>(), ["thoth"]);
}

#[test]
fn tab_reaches_the_ledger_only_in_a_root_that_records_cost() {
    let plain = fixture_root();
    let mut app = app_for(plain.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bridge));
    app.dispatch(Action::NextPane);
    assert_eq!(
        app.pane(),
        Pane::Workflows,
        "no usage: the Ledger is passed over"
    );
    app.dispatch(Action::PrevPane);
    assert_eq!(app.pane(), Pane::Bridge);
    let costed = cost_root();
    let mut app = app_for(costed.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bridge));
    app.dispatch(Action::NextPane);
    assert_eq!(app.pane(), Pane::Ledger);
    app.dispatch(Action::NextPane);
    assert_eq!(app.pane(), Pane::Workflows);
    app.dispatch(Action::PrevPane);
    assert_eq!(app.pane(), Pane::Ledger);
}

#[test]
fn a_name_with_bidirectional_controls_in_the_ledger_is_shown_escaped() {
    let root = cost_root();
    let r = root.path();
    // A ledger line written by hand: its god's name holds a right-to-left override and an isolate.
    let ledger = r.join("conductor/cost/ledger.jsonl");
    let mut text = std::fs::read_to_string(&ledger).unwrap();
    text.push_str(&line(
        "handoff-e",
        "2026-06-14T10:33:00Z",
        "wf_bug_7",
        "fix",
        "mar\u{202e}nivram\u{2066}x\u{2069}",
        9_000_000,
    ));
    text.push('\n');
    std::fs::write(&ledger, text).unwrap();
    let mut app = app_for(r, fixture_now());
    app.dispatch(Action::GoPane(Pane::Ledger));
    let s = screen(&app, 200, 50, r);
    assert!(
        s.contains("mar\\u{202e}nivram\\u{2066}x\\u{2069}"),
        "the name is shown with its controls written out: {s}"
    );
    assert!(
        !s.contains(['\u{202e}', '\u{2066}', '\u{2069}']),
        "a raw control reached the terminal: {s:?}"
    );
    // Its detail too (the costliest god is first).
    app.dispatch(Action::Top);
    app.dispatch(Action::Open);
    let s = screen(&app, 160, 40, r);
    assert!(s.contains("mar\\u{202e}nivram"), "{s}");
    assert!(!s.contains('\u{202e}'), "{s:?}");
    // And the workflow detail's cost by god.
    let mut app = app_for(r, fixture_now());
    let at = app
        .keys(Pane::Workflows)
        .iter()
        .position(|k| *k == RowKey::workflow("wf_bug_7"))
        .unwrap();
    app.dispatch(Action::Top);
    for _ in 0..at {
        app.dispatch(Action::Down);
    }
    app.dispatch(Action::Open);
    let s = screen(&app, 160, 60, r);
    assert!(
        s.contains("by god") && s.contains("mar\\u{202e}nivram"),
        "{s}"
    );
    assert!(!s.contains('\u{202e}'), "{s:?}");
}
