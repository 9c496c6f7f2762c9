//! Issue 42, item 11, the smaller things an operator meets first: the detail's footer and the help
//! say what `q` does there, a key bound elsewhere says where, `:pane work` says it is ambiguous,
//! flashes speak in words and ages, pane 2 shows a pending ack's ETA and message, and the ACK
//! column is right for workflows completed by handoff, aborted and stalled.

use std::path::Path;

use chrono::Utc;
use crossterm::event::KeyCode;
use pantheon::testing::console::keymap::{Action, Pane};
use serde_json::json;

use super::deadletters::{DL_FLOW, dead_letter_all, root_with};
use super::support::*;

fn flash(app: &pantheon::testing::console::app::App) -> String {
    app.shown_flash()
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default()
}

fn handoff(wf: &str, hid: &str, step: &str, from: &str, to: &str) -> String {
    json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": from, "to_god": to, "step": step,
        "context": {"summary": format!("{step} of {wf} done"), "decisions": [], "artifacts": [],
                    "open_questions": [], "gates_passed": []},
        "routing": {"workflow_definition": "dl-flow"}
    })
    .to_string()
}

fn ack(r: &Path, ack_id: &str, hid: &str, extra: serde_json::Value) {
    let mut a = json!({"ack_id": ack_id, "handoff_id": hid, "status": "accepted"});
    a.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    pantheon(r, &["ack", "-"], Some(&a.to_string()));
}

/// A root with one workflow of each kind the ACK column got wrong, through the real binary and the
/// engine: stalled (its dispatch dead-lettered), completed by its last god's handoff after an
/// `accepted` ack, aborted while its dispatch waited; and one acked `pending` with an ETA and a
/// message.
fn ack_root() -> tempfile::TempDir {
    // Stalled first: the supervisor's passes dead-letter every waiting dispatch of the root.
    let root = root_with(DL_FLOW, &[("wf_stall", "hof_20260614_aaa001")]);
    let r = root.path();
    dead_letter_all(r);
    let submit = |wf: &str, hid: &str, step: &str, from: &str, to: &str| {
        pantheon(
            r,
            &["handoff", "submit", "-"],
            Some(&handoff(wf, hid, step, from, to)),
        );
    };
    submit(
        "wf_done",
        "hof_20260614_bbb001",
        "plan",
        "thoth",
        "hephaestus",
    );
    ack(r, "ack_20260614_001", "hof_20260614_bbb001", json!({}));
    submit(
        "wf_done",
        "hof_20260614_bbb002",
        "build",
        "hephaestus",
        "apollo",
    );
    ack(r, "ack_20260614_002", "hof_20260614_bbb002", json!({}));
    submit("wf_done", "hof_20260614_bbb003", "ship", "apollo", "thoth");
    submit(
        "wf_abort",
        "hof_20260614_ccc001",
        "plan",
        "thoth",
        "hephaestus",
    );
    pantheon(r, &["abort", "wf_abort", "--reason", "superseded"], None);
    submit(
        "wf_wait",
        "hof_20260614_ddd001",
        "plan",
        "thoth",
        "hephaestus",
    );
    let eta = (Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    ack(
        r,
        "ack_20260614_003",
        "hof_20260614_ddd001",
        json!({"status": "pending", "eta": eta, "message": "waiting for the API keys"}),
    );
    root
}

fn row<'s>(screen: &'s str, id: &str) -> &'s str {
    screen
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_else(|| panic!("{id} not on screen:\n{screen}"))
}

/// The ACK column said `◐ accepted` for a workflow its last god completed by handoff, `? -` for an
/// aborted one and an earlier step's ack (or `? -`) for a stalled one.
#[test]
fn the_ack_column_is_right_for_completed_aborted_and_stalled_workflows() {
    let root = ack_root();
    let r = root.path();
    let app = app_for(r, Utc::now());
    let s = screen(&app, 200, 30, r);
    let state = |wf: &str| -> serde_json::Value {
        serde_json::from_slice(
            &std::fs::read(r.join(format!("conductor/state/{wf}.json"))).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(state("wf_done")["status"], "completed");
    assert_eq!(
        state("wf_done")["acks"].as_array().unwrap().last().unwrap()["status"],
        "accepted"
    );
    assert!(row(&s, "wf_done").contains("✔ completed"), "{s}");
    assert!(!row(&s, "wf_done").contains("accepted"), "{s}");
    assert!(row(&s, "wf_abort").contains("↩ withdrawn"), "{s}");
    assert!(row(&s, "wf_stall").contains("☠ dead"), "{s}");
    assert!(row(&s, "wf_wait").contains("… pending"), "{s}");
    assert!(!s.contains("? -"), "no unknown glyph: {s}");
}

/// Pane 2's list shows a pending ack's ETA and message (they were only in the detail).
#[test]
fn pane_2_shows_a_pending_acks_eta_and_message() {
    let root = ack_root();
    let r = root.path();
    let mut app = app_for(r, Utc::now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, 200, 30, r);
    let line = row(&s, "hof_20260614_ddd001");
    assert!(
        line.contains("eta in 1h5") || line.contains("eta in 2h"),
        "{line}"
    );
    assert!(line.contains("waiting for the API keys"), "{line}");
    assert!(
        line.contains("plan of wf_wait done"),
        "the summary stays: {line}"
    );
}

/// In a detail `q` goes back, and the footer said `q quit`; the help said nothing of it.
#[test]
fn the_detail_footer_and_the_help_say_q_goes_back_there() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    let s = screen(&app, 200, 50, root.path());
    assert!(s.lines().last().unwrap().contains("q quit"), "{s}");
    app.on_key(code(KeyCode::Enter));
    assert!(app.pane_state().detail);
    let s = screen(&app, 200, 50, root.path());
    let footer = s.lines().last().unwrap();
    assert!(footer.contains("Esc/q back"), "{footer}");
    assert!(!footer.contains("q quit"), "{footer}");
    let rows = app.keymap().help_rows(Pane::Workflows);
    assert!(rows.iter().any(|r| r.section.starts_with("In a detail")
        && r.keys == "q"
        && r.text.starts_with("back to the table")));
    assert!(rows.iter().any(|r| r.section == "Everywhere"
        && r.keys == "q C-c"
        && r.text.contains("in a detail or raw view: back")));
    // And the help overlay, drawn, says it under the detail's heading.
    app.on_key(key('?'));
    let s = screen(&app, 200, 50, root.path());
    assert!(s.contains("back to the table (as Esc; C-c quits)"), "{s}");
}

/// A key that does nothing here said nothing; now it says where it acts and how to get there.
#[test]
fn a_key_bound_elsewhere_says_where_it_acts() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    assert!(app.on_key(key('u')).is_empty());
    assert_eq!(
        flash(&app),
        "u does nothing here: it is force-unlock in pane 4 Locks (press 4 first)"
    );
    app.on_key(key('p'));
    assert!(
        flash(&app).contains("approve held in pane 2 Inboxes (press 2 first)"),
        "{}",
        flash(&app)
    );
    app.on_key(key('.'));
    assert!(
        flash(&app).contains("in replay (pantheon --at TS, :replay TS)"),
        "{}",
        flash(&app)
    );
    assert_eq!(app.pane(), Pane::Workflows, "nothing moved");
    // A key bound here acts as before, with no such flash.
    app.clear_flash();
    app.on_key(key('j'));
    assert!(app.shown_flash().is_none());
}

/// `:pane work` went to Workflows although Workers begins so too.
#[test]
fn pane_work_is_ambiguous_and_says_so() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bus));
    for cmd in ["pane work", "work"] {
        app.run_command(cmd);
        assert_eq!(app.pane(), Pane::Bus, ":{cmd} went somewhere");
        let f = flash(&app);
        assert!(
            f.contains("\"work\" is ambiguous") && f.contains("1 Workflows or 5 Workers"),
            ":{cmd}: {f}"
        );
    }
    app.run_command("pane workf");
    assert_eq!(app.pane(), Pane::Workflows);
    app.run_command("pane workers");
    assert_eq!(app.pane(), Pane::Workers);
    app.run_command("pane zzz");
    assert!(
        flash(&app).starts_with("no pane \"zzz\""),
        "{}",
        flash(&app)
    );
}

/// `@` flashed `overdue: overdue: …` and internal kinds (`stale_worker`); a snooze flashed the
/// item's internal key and a UTC date.
#[test]
fn flashes_speak_in_words_and_ages() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    let n = app.attention_all().len();
    assert!(n >= 3, "{n}");
    let mut seen = Vec::new();
    for _ in 0..n {
        app.dispatch(Action::NextAttention);
        seen.push(flash(&app));
    }
    for f in &seen {
        assert!(!f.contains("overdue: overdue"), "{f}");
        assert!(
            ![
                "stale_worker",
                "expired_lock",
                "unreadable_file",
                "dead_letter",
                "no_supervisor"
            ]
            .iter()
            .any(|k| f.contains(k)),
            "{f}"
        );
    }
    assert!(
        seen.iter().any(|f| f.starts_with("stale worker")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|f| f.starts_with("overdue")), "{seen:?}");
    // Snooze the overdue workflow's item from pane 7: the flash names it in words, for how long.
    app.dispatch(Action::GoPane(Pane::Attention));
    let i = app
        .attention()
        .iter()
        .position(|i| i.kind.as_str() == "overdue")
        .expect("an overdue item");
    app.dispatch(Action::Top);
    for _ in 0..i {
        app.dispatch(Action::Down);
    }
    app.dispatch(Action::Snooze);
    // Whatever the prompt suggests, the answer is 15m.
    app.on_key(crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        crossterm::event::KeyModifiers::CONTROL,
    ));
    type_text(&mut app, "15m");
    app.on_key(code(KeyCode::Enter));
    let f = flash(&app);
    assert!(
        f.starts_with("snoozed overdue wf_deploy_42 for 15m (until "),
        "{f}"
    );
    assert!(!f.contains("overdue/") && !f.contains("UTC"), "{f}");
}

/// The default configuration's comment read `[keys.in_help]   # in the this help`.
#[test]
fn the_default_config_says_in_the_help() {
    let out = assert_cmd::Command::cargo_bin("pantheon")
        .unwrap()
        .args(["config", "--default"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[keys.in_help]   # in the help\n"), "{text}");
    assert!(!text.contains("the this"), "{text}");
}

/// Every picture README.md and docs/*.md show is in `screenshots/` (scripts/screenshots.sh makes
/// them), the new scenes included: the Ledger, the budget raise and the replay.
#[test]
fn every_picture_the_docs_show_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![repo.join("README.md")];
    for e in std::fs::read_dir(repo.join("docs")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            docs.push(e.path());
        }
    }
    let mut shown = Vec::new();
    for d in &docs {
        let text = std::fs::read_to_string(d).unwrap();
        for part in text.split("screenshots/").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            if name.ends_with(".png") || name.ends_with(".gif") {
                assert!(
                    repo.join("screenshots").join(&name).is_file(),
                    "{} shows screenshots/{name}, which is missing",
                    d.display()
                );
                shown.push(name);
            }
        }
    }
    for scene in [
        "11-ledger.png",
        "dialog-budget-raise.png",
        "replay.png",
        "demo.gif",
    ] {
        assert!(shown.iter().any(|s| s == scene), "no doc shows {scene}");
    }
}
