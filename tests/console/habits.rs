//! Marks and bulk actions against the real engine, the mouse through crossterm events, yanking, and
//! the operator's config (remapped keys in the help and the footer).

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use pantheon::Root;
use pantheon::testing::console::app::{Effect, FlashKind, Mode};
use pantheon::testing::console::config;
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::ops::Op;
use pantheon::testing::console::rowkey::RowKey;

use super::actions::{dialog_text, held_files, held_handoff, run};
use super::support::*;

const HELD: [(&str, &str); 5] = [
    ("wf_ext_1", "hof_20260614_ddd441"),
    ("wf_ext_2", "hof_20260614_ddd442"),
    ("wf_ext_3", "hof_20260614_ddd443"),
    ("wf_ext_4", "hof_20260614_ddd444"),
    ("wf_ext_5", "hof_20260614_ddd445"),
];

fn five_held() -> tempfile::TempDir {
    let root = engine_root();
    for (wf, hid) in HELD {
        pantheon(
            root.path(),
            &["handoff", "submit", "-"],
            Some(&held_handoff(wf, hid)),
        );
    }
    root
}

#[test]
fn bulk_approve_of_five_held_dispatches_with_one_refused_reports_both() {
    let root = five_held();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    // "All matching the filter": the held rows only (the pane also lists two waiting dispatches).
    app.on_key(key('/'));
    type_text(&mut app, "held");
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.row_count(), 5);
    app.on_key(key('*'));
    assert_eq!(app.picked(Pane::Inboxes).len(), 5);
    app.clear_flash();
    let screen = text(&render(&app, 160, 40));
    assert!(screen.contains("● 5 marked"), "{screen}");
    assert_eq!(
        screen.lines().filter(|l| l.starts_with("●‖ ")).count(),
        5,
        "{screen}"
    );

    app.on_key(key('p'));
    let said = dialog_text(&app);
    assert!(said.starts_with("Approve 5 marked record(s)"), "{said}");
    for (_, hid) in HELD {
        assert!(
            said.contains(&format!("Approve held dispatch {hid}")),
            "{said}"
        );
    }
    // While the one confirmation is open, another operator refuses one of them.
    pantheon(
        r,
        &["approve", HELD[2].1, "--reject", "--reason", "not cleared"],
        None,
    );
    app.on_key(code(KeyCode::Tab));
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert!(matches!(done.as_slice(), [Op::Bulk { items, .. }] if items.len() == 5));

    let f = app.shown_flash().cloned().unwrap();
    assert_eq!(f.kind, FlashKind::Error, "a refusal is not a success");
    assert!(f.text.starts_with("approved 4, refused 1: "), "{}", f.text);
    assert!(f.text.contains(HELD[2].1), "{}", f.text);
    assert!(held_files(r).is_empty());
    for (i, (_, hid)) in HELD.iter().enumerate() {
        assert_eq!(
            r.join(format!("conductor/pending/caduceus/{hid}.json"))
                .exists(),
            i != 2,
            "{hid}"
        );
    }
    // The refused one stays marked, for a retry; the approved ones are unmarked.
    assert_eq!(
        app.picked(Pane::Inboxes),
        [RowKey::dispatch("_quarantine", HELD[2].1)]
    );
    // Each approval is in the journal, as the operator's.
    let journal = std::fs::read_to_string(r.join("conductor/journal.jsonl")).unwrap();
    assert_eq!(
        journal
            .lines()
            .filter(|l| l.contains("\"approve\"") && l.contains("\"console\""))
            .count(),
        4,
        "{journal}"
    );
}

#[test]
fn marks_take_a_range_and_an_ack_skips_the_held_ones_it_cannot_ack() {
    let root = five_held();
    let r = root.path();
    let mut app = app_for(r, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let rows =
        pantheon::testing::console::items::dispatches(app.snapshot(), &app.filter(Pane::Inboxes));
    let waiting = rows.iter().filter(|r| !r.held).count();
    let n = rows.len();
    drop(rows);
    // Space on the first row, then V on the last: everything.
    app.on_key(key(' '));
    app.dispatch(Action::Bottom);
    app.on_key(key('V'));
    assert_eq!(app.picked(Pane::Inboxes).len(), n);
    app.on_key(key('a'));
    assert!(matches!(app.mode(), Mode::AckMenu { .. }));
    app.on_key(code(KeyCode::Enter));
    let said = dialog_text(&app);
    assert!(
        said.contains(&format!("{waiting} marked record(s) will be acked")),
        "{said}"
    );
    assert!(said.contains("5 marked record(s) are skipped"), "{said}");
    assert!(
        said.contains("held: approve (p) or reject (R) it"),
        "{said}"
    );
    app.on_key(code(KeyCode::Esc));
    // Esc clears the marks before it clears a filter.
    app.on_key(code(KeyCode::Esc));
    assert!(app.picked(Pane::Inboxes).is_empty());
}

#[test]
fn y_yanks_the_selected_id_and_every_marked_one_and_v_shows_the_raw_json() {
    let root = engine_root();
    let mut app = app_for(root.path(), chrono::Utc::now());
    let wf =
        pantheon::testing::console::items::workflows(app.snapshot(), &app.filter(Pane::Workflows))
            [0]
        .id
        .to_string();
    assert_eq!(app.on_key(key('y')), vec![Effect::Clipboard(wf.clone())]);
    assert!(app.shown_flash().unwrap().text.contains(&wf));
    app.on_key(key('*'));
    let Some(Effect::Clipboard(all)) = app.on_key(key('y')).pop() else {
        panic!("yank")
    };
    assert_eq!(all.lines().count(), app.row_count());
    app.on_key(key('v'));
    assert!(app.pane_state().raw && app.pane_state().detail);
    app.dispatch(Action::GoPane(Pane::Locks));
    assert_eq!(
        app.on_key(key('y')),
        vec![Effect::Clipboard("src/app.rs".into())]
    );
}

fn mouse(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
    MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

#[test]
fn clicks_select_tabs_and_rows_double_clicks_open_and_the_wheel_scrolls() {
    let root = five_held();
    let mut app = app_for(root.path(), chrono::Utc::now());
    let t0 = Instant::now();
    render(&app, 160, 40);
    // The tab bar is the second row: " 1 Workflows  2 Inboxes  3 Bus …".
    let buf = render(&app, 160, 40);
    let (x, y) = find(&buf, "2 Inboxes").unwrap();
    assert_eq!(y, 1);
    app.on_mouse(mouse(MouseEventKind::Down(MouseButton::Left), x + 2, y), t0);
    assert_eq!(app.pane(), Pane::Inboxes);

    // A click on the row showing a held dispatch selects that one.
    let buf = render(&app, 160, 40);
    let (hx, hy) = find(&buf, HELD[3].1).unwrap();
    app.on_mouse(mouse(MouseEventKind::Down(MouseButton::Left), hx, hy), t0);
    let rows =
        pantheon::testing::console::items::dispatches(app.snapshot(), &app.filter(Pane::Inboxes));
    assert_eq!(
        &*rows[app.selected(Pane::Inboxes)].view.dispatch.handoff_id,
        HELD[3].1
    );
    drop(rows);
    assert!(!app.pane_state().detail);
    // A second click soon after on the same row opens it; a late one does not.
    app.on_mouse(
        mouse(MouseEventKind::Down(MouseButton::Left), hx, hy),
        t0 + Duration::from_millis(1500),
    );
    assert!(!app.pane_state().detail, "too late for a double-click");
    app.on_mouse(
        mouse(MouseEventKind::Down(MouseButton::Left), hx, hy),
        t0 + Duration::from_millis(1700),
    );
    assert!(app.pane_state().detail, "double-click opens the detail");
    app.dispatch(Action::Back);

    // The wheel moves the selection three rows a notch.
    app.dispatch(Action::Top);
    render(&app, 160, 40);
    app.on_mouse(mouse(MouseEventKind::ScrollDown, 10, 20), t0);
    assert_eq!(app.selected(Pane::Inboxes), 3);
    app.on_mouse(mouse(MouseEventKind::ScrollUp, 10, 20), t0);
    assert_eq!(app.selected(Pane::Inboxes), 0);
    // A click below the last row, or on a border, selects nothing new.
    app.on_mouse(mouse(MouseEventKind::Down(MouseButton::Left), 0, hy), t0);
    assert_eq!(app.selected(Pane::Inboxes), 0);
    // Dialogs take no clicks.
    app.on_key(key('?'));
    app.on_mouse(mouse(MouseEventKind::Down(MouseButton::Left), x, y), t0);
    assert!(matches!(app.mode(), Mode::Help(_)));
}

#[test]
fn remapped_keys_are_what_the_help_and_the_footer_show_and_what_works() {
    let cfg = config::parse(
        "[keys]\nabort = \"X\"\nhelp = \"F1\"\nyank = \"Y\"\ntoggle_raw = \"F5\"\n",
        "test.toml",
    )
    .unwrap();
    let root = engine_root();
    let mut app = app_for(root.path(), chrono::Utc::now());
    app.configure(&cfg);
    let screen = text(&render(&app, 200, 40));
    let footer = screen.lines().last().unwrap();
    assert!(footer.contains("X abort"), "{footer}");
    assert!(footer.contains("F1 help"), "{footer}");
    assert!(!footer.contains("x abort"), "{footer}");
    app.on_key(code(KeyCode::F(1)));
    assert!(matches!(app.mode(), Mode::Help(_)));
    let help = text(&render(&app, 200, 60));
    assert!(help.contains("X") && help.contains("abort"), "{help}");
    let rows = app.keymap().help_rows(Pane::Workflows);
    assert!(rows.iter().any(|r| r.keys == "X" && r.text == "abort"));
    assert!(
        rows.iter()
            .any(|r| r.keys == "Y" && r.text.starts_with("yank"))
    );
    assert!(rows.iter().any(|r| r.keys == "F5" && r.text == "raw JSON"));
    app.on_key(code(KeyCode::Esc));
    app.on_key(key('X'));
    assert!(matches!(app.mode(), Mode::Prompt(_)), "X now aborts");
    app.on_key(code(KeyCode::Esc));
    assert!(app.on_key(key('x')).is_empty());
    assert!(
        matches!(app.mode(), Mode::Normal),
        "x does nothing any more"
    );
}

#[test]
fn the_printed_default_config_is_accepted_by_the_binary_and_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("pantheon");
    let out = std::process::Command::new(&bin)
        .args(["config", "--default"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let path = dir.path().join("config.toml");
    std::fs::write(&path, &out.stdout).unwrap();
    let check = std::process::Command::new(&bin)
        .args(["config", "--check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // One bad line: the console refuses to start, naming it, before touching the terminal.
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replace("\nabort = \"x\"", "\nabort = \"q\"");
    std::fs::write(&path, text.as_bytes()).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("abort = \"q\""))
        .unwrap()
        + 1;
    let root = engine_root();
    let run = std::process::Command::new(&bin)
        .arg("--root")
        .arg(root.path())
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains(&format!("config.toml line {line}: key \"q\" clashes: quit")),
        "{err}"
    );
}
