//! Every pane, detail view and dialog drawn on a `TestBackend` from fixture roots (insta), a small
//! terminal, and the colours that carry meaning.

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::testing::console::app::{App, Mode};
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::theme::Theme;
use pantheon::testing::console::views;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

use super::support::*;

const W: u16 = 160;
const H: u16 = 40;

fn at(app: &mut App, pane: Pane, row: usize) {
    app.dispatch(Action::GoPane(pane));
    app.dispatch(Action::Top);
    for _ in 0..row {
        app.dispatch(Action::Down);
    }
}

#[test]
fn fixture_root_panes_render_every_record_and_report_broken_files() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    assert_snapshot!("fixture_workflows", screen(&app, W, H, root.path()));
    app.dispatch(Action::GoPane(Pane::Inboxes));
    assert_snapshot!("fixture_inboxes", screen(&app, W, H, root.path()));
    app.dispatch(Action::GoPane(Pane::Bus));
    assert_snapshot!("fixture_bus", screen(&app, W, H, root.path()));
    app.dispatch(Action::GoPane(Pane::Locks));
    assert_snapshot!("fixture_locks", screen(&app, W, H, root.path()));
    app.dispatch(Action::GoPane(Pane::Workers));
    assert_snapshot!("fixture_workers", screen(&app, W, H, root.path()));
    app.dispatch(Action::GoPane(Pane::Board));
    assert_snapshot!("fixture_board", screen(&app, W, H, root.path()));
}

#[test]
fn detail_views_show_history_context_raw_state_and_director_cards() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    at(&mut app, Pane::Workflows, 2);
    app.dispatch(Action::Open);
    let s = screen(&app, W, H, root.path());
    assert!(s.contains("wf_deploy_42") && s.contains("OVERDUE"), "{s}");
    assert_snapshot!("fixture_workflow_detail", s);
    app.dispatch(Action::ToggleRaw);
    assert_snapshot!("fixture_workflow_raw", screen(&app, W, H, root.path()));
    app.dispatch(Action::Back);
    at(&mut app, Pane::Inboxes, 0);
    app.dispatch(Action::Open);
    assert_snapshot!("fixture_dispatch_detail", screen(&app, W, H, root.path()));
    at(&mut app, Pane::Bus, 3);
    app.dispatch(Action::Open);
    assert_snapshot!("fixture_message_detail", screen(&app, W, H, root.path()));
    at(&mut app, Pane::Board, 2);
    app.dispatch(Action::Open);
    let s = screen(&app, W, H, root.path());
    assert!(s.contains("vulnerabilities"), "CSO's extras are shown: {s}");
    assert_snapshot!("fixture_board_director_detail", s);
}

#[test]
fn bus_filter_keeps_only_matching_types_and_sources() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Bus));
    app.on_key(key('/'));
    type_text(&mut app, "type:PROG");
    app.on_key(code(KeyCode::Enter));
    let s = screen(&app, W, H, root.path());
    assert!(
        s.contains("PROGRESS") && !s.contains("TASK_COMPLETE"),
        "{s}"
    );
    assert_snapshot!("fixture_bus_filtered", s);
}

#[test]
fn dialogs_show_what_will_happen_with_cancel_focused() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    at(&mut app, Pane::Workflows, 2);
    app.on_key(key('x'));
    type_text(&mut app, "superseded by v2");
    assert_snapshot!(
        "dialog_abort_reason_prompt",
        screen(&app, W, H, root.path())
    );
    app.on_key(code(KeyCode::Enter));
    let s = screen(&app, W, H, root.path());
    assert!(
        s.contains("hof_20260614_abc123") && s.contains("report.md.aborted"),
        "{s}"
    );
    assert_snapshot!("dialog_abort_confirm", s);
    app.on_key(code(KeyCode::Esc));

    at(&mut app, Pane::Inboxes, 0);
    app.on_key(key('a'));
    assert_snapshot!("dialog_ack_menu", screen(&app, W, H, root.path()));
    app.on_key(key('j'));
    app.on_key(key('j'));
    app.on_key(code(KeyCode::Enter));
    type_text(&mut app, "no capacity");
    app.on_key(code(KeyCode::Enter));
    assert_snapshot!(
        "dialog_ack_rejected_confirm",
        screen(&app, W, H, root.path())
    );
    app.on_key(code(KeyCode::Esc));

    // pending: a message, then an ETA.
    at(&mut app, Pane::Inboxes, 0);
    app.on_key(key('a'));
    app.on_key(key('j'));
    app.on_key(code(KeyCode::Enter));
    type_text(&mut app, "after the freeze");
    app.on_key(code(KeyCode::Enter));
    type_text(&mut app, "2026-06-14T18:00:00Z");
    assert_snapshot!(
        "dialog_ack_pending_eta_prompt",
        screen(&app, W, H, root.path())
    );
    app.on_key(code(KeyCode::Enter));
    assert_snapshot!(
        "dialog_ack_pending_confirm",
        screen(&app, W, H, root.path())
    );
    app.on_key(code(KeyCode::Esc));

    at(&mut app, Pane::Locks, 0);
    app.on_key(key('u'));
    assert_snapshot!("dialog_force_unlock", screen(&app, W, H, root.path()));
    app.on_key(code(KeyCode::Esc));

    app.dispatch(Action::GoPane(Pane::Board));
    app.on_key(key('s'));
    let s = screen(&app, W, H, root.path());
    assert!(
        s.contains("Predicted verdict now: ESCALATE") && s.contains("abstains"),
        "{s}"
    );
    assert_snapshot!("dialog_board_resolve", s);
    app.on_key(code(KeyCode::Esc));

    app.on_key(key('?'));
    assert!(matches!(app.mode(), Mode::Help(_)));
    assert_snapshot!("dialog_help", screen(&app, W, H, root.path()));
}

#[test]
fn a_small_terminal_still_draws_and_a_tiny_one_gets_a_message() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    assert_snapshot!("small_80x24_workflows", screen(&app, 80, 24, root.path()));
    app.dispatch(Action::GoPane(Pane::Board));
    assert_snapshot!("small_80x24_board", screen(&app, 80, 24, root.path()));
    let tiny = screen(&app, 40, 10, root.path());
    assert!(
        tiny.contains("Terminal too small") && tiny.contains("40x10"),
        "{tiny}"
    );
    assert_snapshot!("too_small_40x10", tiny);
}

#[test]
fn read_only_console_hides_action_hints_and_says_so() {
    let root = fixture_root();
    let mut app = App::new(snapshot_of(root.path()), true, fixture_now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, W, H, root.path());
    assert!(s.contains("READ-ONLY"), "{s}");
    let footer = s.lines().last().unwrap();
    assert!(
        !footer.contains("ack") && footer.contains("quit"),
        "{footer}"
    );
}

#[test]
fn overdue_stale_and_expired_are_red_and_live_leases_green() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    let b = render(&app, W, H);
    assert_eq!(fg_of(&b, "wf_deploy_42"), Color::Red, "overdue workflow");
    assert_eq!(fg_of(&b, "▲ OVERDUE"), Color::Red);
    assert_ne!(
        fg_of(&b, "wf_bug_7"),
        Color::Red,
        "a pending ack is not overdue"
    );
    app.dispatch(Action::GoPane(Pane::Workers));
    let b = render(&app, W, H);
    assert_eq!(fg_of(&b, "▲ STALE"), Color::Red);
    app.dispatch(Action::GoPane(Pane::Locks));
    let b = render(&app, W, H);
    assert_eq!(fg_of(&b, "✗ EXPIRED"), Color::Red);
    assert_eq!(fg_of(&b, "◷"), Color::Green);
    assert_eq!(fg_of(&b, "∞ no expiry"), Color::DarkGray);
}

#[test]
fn no_color_keeps_every_state_readable_by_word() {
    let root = fixture_root();
    let app = app_for(root.path(), fixture_now());
    let mut t = Terminal::new(TestBackend::new(W, H)).unwrap();
    t.draw(|f| views::draw(f, &app, &Theme::plain(false)))
        .unwrap();
    let b = t.backend().buffer().clone();
    assert!(
        b.content.iter().all(|c| c.fg == Color::Reset),
        "no colour at all"
    );
    let s = text(&b);
    assert!(
        s.contains("▲ OVERDUE") && s.contains("waiting_for_ack"),
        "{s}"
    );
}

#[test]
fn engine_built_root_panes() {
    let root = engine_root();
    let mut app = app_for(root.path(), chrono::Utc::now());
    let shot = |app: &App| redact(&screen(app, W, H, root.path()));
    assert_snapshot!("engine_workflows", shot(&app));
    app.dispatch(Action::GoPane(Pane::Inboxes));
    assert_snapshot!("engine_inboxes", shot(&app));
    app.dispatch(Action::GoPane(Pane::Bus));
    let s = shot(&app);
    assert!(s.contains("PROGRESS") && s.contains("FILE_LOCK"), "{s}");
    app.dispatch(Action::GoPane(Pane::Locks));
    assert_snapshot!("engine_locks", shot(&app));
    app.dispatch(Action::GoPane(Pane::Workers));
    assert_snapshot!("engine_workers", shot(&app));
    app.dispatch(Action::GoPane(Pane::Board));
    assert_snapshot!("engine_board", shot(&app));
}

#[test]
fn workers_pane_names_an_overridden_staleness_threshold() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Workers));
    let s = screen(&app, W, H, root.path());
    assert!(
        !s.contains("stale after"),
        "the protocol's 10 minutes go unsaid: {s}"
    );
    let mut snap = (**app.snapshot()).clone();
    snap.stale_after = Some(chrono::Duration::seconds(6));
    app.set_snapshot(std::sync::Arc::new(snap));
    let s = screen(&app, W, H, root.path());
    assert!(
        s.contains("5 Workers (") && s.contains("stale after 6s"),
        "{s}"
    );
    app.dispatch(Action::Open);
    let s = screen(&app, W, H, root.path());
    assert!(
        s.contains("silent for more than 6s") || !s.contains("STALE"),
        "{s}"
    );
}

#[test]
fn wide_terminals_show_whole_cells_and_narrow_ones_cut_with_an_ellipsis() {
    // A cut cell ends in `…` right after its text (the pending glyph `…` starts a cell).
    let cut = |s: &str| {
        s.lines()
            .find(|l| {
                let c: Vec<char> = l.chars().collect();
                c.windows(2).any(|w| w[1] == '…' && w[0] != ' ')
            })
            .map(str::to_owned)
    };
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    for pane in [Pane::Workflows, Pane::Inboxes, Pane::Locks, Pane::Workers] {
        app.dispatch(Action::GoPane(pane));
        let s = screen(&app, W, H, root.path());
        assert_eq!(
            cut(&s),
            None,
            "nothing is cut at {W} columns in {pane:?}:\n{s}"
        );
    }
    app.dispatch(Action::GoPane(Pane::Locks));
    let s = screen(&app, 60, 24, root.path());
    assert!(
        s.contains("src/app/api/webhooks/stripe/route.ts"),
        "the lock path (its identity) stays whole:\n{s}"
    );
    assert!(
        cut(&s).is_some(),
        "something had to give at 60 columns:\n{s}"
    );
}

#[test]
fn detail_keys_scroll_the_record_and_j_k_capitals_step_records() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    at(&mut app, Pane::Workflows, 2);
    app.dispatch(Action::Open);
    // At 80x24 the workflow's detail is longer than the screen.
    let first = screen(&app, 80, 24, root.path());
    assert!(first.contains("record 3/4 · lines 1-"), "{first}");
    app.dispatch(Action::Bottom);
    let bottom = screen(&app, 80, 24, root.path());
    assert!(
        bottom.contains("wf_deploy_42"),
        "G keeps the same record: {bottom}"
    );
    assert!(bottom.contains("record 3/4"), "{bottom}");
    let max = app.drawn().detail_max.get();
    assert!(max > 0);
    app.dispatch(Action::Down);
    assert_eq!(
        app.pane_state().scroll,
        max,
        "G went to the last line, and not past it"
    );
    app.dispatch(Action::Up);
    assert_eq!(app.pane_state().scroll, max - 1);
    app.dispatch(Action::PageUp);
    app.dispatch(Action::Top);
    assert_eq!(app.pane_state().scroll, 0);
    app.dispatch(Action::PageDown);
    assert!(app.pane_state().scroll > 0);
    app.dispatch(Action::NextRecord);
    assert_eq!(
        app.pane_state().scroll,
        0,
        "another record starts at its top"
    );
    let next = screen(&app, 80, 24, root.path());
    assert!(next.contains("record 4/4"), "{next}");
    app.dispatch(Action::PrevRecord);
    assert!(screen(&app, 80, 24, root.path()).contains("record 3/4"));
}

#[test]
fn help_is_a_scrollable_searchable_reference_at_any_size() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.on_key(key('?'));
    for (w, h) in [(80, 24), (200, 50)] {
        let s = screen(&app, w, h, root.path());
        assert!(s.contains("2 Inboxes (this pane)"), "this pane first: {s}");
        assert_snapshot!(format!("help_{w}x{h}_top"), s);
    }
    // Scrolled to the end at 80x24: the last commands are there.
    app.on_key(key('G'));
    let s = screen(&app, 80, 24, root.path());
    assert!(s.contains(":requeue") && s.contains(":rerun"), "{s}");
    assert_snapshot!("help_80x24_bottom", s);
    app.on_key(key('g'));
    // `/` narrows it; Esc in the search clears it, Esc again closes the help.
    app.on_key(key('/'));
    type_text(&mut app, "unlock");
    let s = screen(&app, 80, 24, root.path());
    assert!(
        s.contains("force-unlock") && !s.contains("approve held"),
        "{s}"
    );
    app.on_key(code(KeyCode::Esc));
    app.on_key(code(KeyCode::Esc));
    assert!(matches!(app.mode(), Mode::Normal));
    // Read-only: the keys that change files are marked.
    let mut ro = app_for(root.path(), fixture_now());
    ro.set_read_only(true);
    ro.dispatch(Action::GoPane(Pane::Inboxes));
    ro.on_key(key('?'));
    let s = screen(&ro, 200, 50, root.path());
    assert!(s.contains("ack (disabled: read-only)"), "{s}");
    assert!(s.contains("q C-c"), "C-c is listed: {s}");
}

#[test]
fn the_filter_matches_the_labels_on_screen_highlights_them_and_n_steps() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.on_key(key('/'));
    type_text(&mut app, "overdue");
    app.on_key(code(KeyCode::Enter));
    let s = screen(&app, W, H, root.path());
    assert_eq!(app.row_count(), 1, "{s}");
    assert!(s.contains("wf_deploy_42") && s.contains("OVERDUE"), "{s}");
    let buf = render(&app, W, H);
    let (x, y) = find(&buf, "OVERDUE").expect("the label");
    assert!(
        buf[(x, y)]
            .modifier
            .contains(ratatui::style::Modifier::UNDERLINED),
        "the matched word is marked"
    );
    // Dispatches are found by the ack words they show.
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.run_command("filter pending");
    assert_eq!(app.row_count(), 1);
    app.run_command("filter unacked");
    let n = app.row_count();
    assert_eq!(n, 2);
    app.dispatch(Action::Top);
    app.on_key(key('n'));
    assert_eq!(app.selected(Pane::Inboxes), 1);
    assert_eq!(app.shown_flash().unwrap().text, format!("match 2/{n}"));
    app.on_key(key('N'));
    app.on_key(key('N'));
    assert_eq!(app.selected(Pane::Inboxes), n - 1, "N wraps around");
    // The board is shown whole: no filter there.
    app.dispatch(Action::GoPane(Pane::Board));
    app.on_key(key('/'));
    assert!(matches!(app.mode(), Mode::Normal));
}

#[test]
fn long_flashes_wrap_and_narrow_board_cards_cut_with_an_ellipsis() {
    let root = fixture_root();
    let mut app = app_for(root.path(), fixture_now());
    app.flash(
        pantheon::testing::console::app::FlashKind::Error,
        "cleanup refused: the workflow wf_deploy_42 is still waiting_for_ack; abort it first (x) or wait until it is finished",
    );
    let s = screen(&app, 80, 24, root.path());
    assert!(
        s.contains("wait until it is finished"),
        "the flash wraps: {s}"
    );
    app.clear_flash();
    app.dispatch(Action::GoPane(Pane::Board));
    let s = screen(&app, 60, 24, root.path());
    assert!(
        s.contains("1 concern…") && !s.contains("1 concern("),
        "a card line too wide for its card is cut with …: {s}"
    );
}

/// The fixture root with a dead letter and a few journal entries (fixed times).
fn attention_root() -> tempfile::TempDir {
    let root = fixture_root();
    let r = root.path();
    let dead = r.join("conductor/dead/hephaestus");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(
        dead.join("hof_20260614_dead01.json"),
        serde_json::json!({"handoff_id": "hof_20260614_dead01", "workflow_id": "wf_bug_7",
            "from_god": "thoth", "to_god": "hephaestus", "step": "fix",
            "context": {"summary": "fix the bug"}, "dispatched_at": "2026-06-14T09:00:00Z",
            "ack_status": "unacked",
            "deliveries": [{"at": "2026-06-14T09:00:00Z", "to": "hephaestus"},
                           {"at": "2026-06-14T09:10:00Z", "to": "hephaestus"},
                           {"at": "2026-06-14T09:20:00Z", "to": "marvin"}],
            "dead_at": "2026-06-14T09:30:00Z", "reason": "not acked after 3 deliveries"})
        .to_string(),
    )
    .unwrap();
    let entry = |seq: u64,
                 at: &str,
                 actor: &str,
                 source: &str,
                 action: &str,
                 t: &str,
                 outcome: &str| {
        serde_json::json!({"seq": seq, "at": at, "actor": actor, "source": source, "action": action,
            "targets": {"workflow_id": t}, "reason": null, "outcome": outcome,
            "prev": "0", "hash": "0"})
        .to_string()
    };
    std::fs::write(
        r.join("conductor/journal.jsonl"),
        [
            entry(
                1,
                "2026-06-14T10:00:00Z",
                "alice",
                "cli",
                "submit",
                "wf_deploy_42",
                "dispatched",
            ),
            entry(
                2,
                "2026-06-14T10:20:00Z",
                "claude-desktop",
                "mcp",
                "ack",
                "wf_bug_7",
                "accepted",
            ),
            entry(
                3,
                "2026-06-14T10:35:00Z",
                "bob",
                "console",
                "abort",
                "wf_old_3",
                "aborted",
            ),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    root
}

#[test]
fn attention_and_journal_panes_at_80x24_and_200x50() {
    let root = attention_root();
    let mut app = app_for(root.path(), fixture_now());
    // When a file became unreadable is the model's clock: fixed here, as the rest is.
    let mut snap = (**app.snapshot()).clone();
    snap.warnings = std::sync::Arc::new(
        snap.warnings
            .iter()
            .cloned()
            .map(|mut w| {
                w.since = Some(fixture_now() - chrono::Duration::minutes(90));
                w
            })
            .collect(),
    );
    app.set_snapshot(std::sync::Arc::new(snap));
    for (w, h) in [(80, 24), (200, 50)] {
        app.dispatch(Action::GoPane(Pane::Attention));
        assert_snapshot!(
            format!("attention_{w}x{h}"),
            screen(&app, w, h, root.path())
        );
        app.dispatch(Action::GoPane(Pane::Journal));
        assert_snapshot!(format!("journal_{w}x{h}"), screen(&app, w, h, root.path()));
    }
    // The tab bar lists every pane at 80 columns (abbreviated) and whole at 200.
    let narrow = screen(&app, 80, 24, root.path());
    let tabs = narrow.lines().nth(1).unwrap();
    for n in 1..=8 {
        assert!(tabs.contains(&format!(" {n} ")), "{tabs}");
    }
    let wide = screen(&app, 200, 50, root.path());
    assert!(wide.lines().nth(1).unwrap().contains("8 Journal"));
    assert!(wide.lines().nth(1).unwrap().contains("7 Attention"));
}

#[test]
fn the_header_shows_the_bridge_and_the_bus_names_the_machine_of_a_mirrored_line() {
    let root = fixture_root();
    // A bridge status as `pantheon bridge` writes it, and a line mirrored from another machine.
    let status = serde_json::json!({
        "name": "tallon", "server": "nats://10.0.0.7:4222", "connected": true, "lag": 3,
        "tracks": {"shared": {"lag": 2}}, "last_error": null,
    });
    let dir = root.path().join("conductor/bridge");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("status.json"), status.to_string()).unwrap();
    let bus = pantheon::engine::Bus::open(
        &pantheon::engine::Root::at(root.path()),
        &"shared".parse().unwrap(),
    );
    bus.init().unwrap();
    std::fs::write(
        bus.queue_path(),
        "{\"id\":\"msg-r1\",\"type\":\"PROGRESS\",\"source\":\"worker-9\",\"timestamp\":\"2026-02-01T12:00:00Z\",\"payload\":{},\"from_pantheon\":\"konan\"}\n",
    )
    .unwrap();
    let mut app = app_for(root.path(), fixture_now());
    let s = screen(&app, 320, H, root.path());
    assert!(
        s.contains("⇄ tallon ● connected nats://10.0.0.7:4222 lag 5"),
        "{s}"
    );
    app.dispatch(Action::GoPane(Pane::Bus));
    for _ in 0..20 {
        if app.panes().bus.track.as_deref() == Some("shared") {
            break;
        }
        app.dispatch(Action::NextTrack);
    }
    let s = screen(&app, 320, H, root.path());
    assert!(s.contains("worker-9@konan"), "{s}");

    let mut down = status.clone();
    down["connected"] = false.into();
    down["last_error"] = "nats: disconnected".into();
    std::fs::write(dir.join("status.json"), down.to_string()).unwrap();
    let app = app_for(root.path(), fixture_now());
    let s = screen(&app, 320, H, root.path());
    assert!(
        s.contains("○ disconnected") && s.contains("(nats: disconnected)"),
        "{s}"
    );
}

/// The dispatch detail shows what the step asks (`step_def`) and the context keys beyond the standard
/// ones (an inbound request's payload), each value on one line, control characters blanked, long
/// values cut.
#[test]
fn the_dispatch_detail_shows_the_step_and_the_carried_context() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    pantheon(r, &["init"], None);
    std::fs::write(
        r.join("conductor/workflows/carry.yaml"),
        "workflow:\n  id: carry\n  steps:\n    - {id: research, god: thoth}\n    - {id: implement, god: hephaestus, action: implement, skill: code, output: build_report}\n",
    )
    .unwrap();
    let handoff = serde_json::json!({
        "handoff_id": "hof_20260614_ca0001", "workflow_id": "wf_carry_1", "from_god": "thoth",
        "to_god": "hephaestus", "step": "research",
        "context": {"summary": "Researched", "decisions": [], "artifacts": [],
                    "payload": {"feature_summary": "fast boots"},
                    "note": "line one\u{1b}[31mred\nline two",
                    "long": "Z".repeat(1000)},
        "routing": {"workflow_definition": "carry"}
    });
    pantheon(r, &["handoff", "submit", "-"], Some(&handoff.to_string()));
    let mut app = app_for(r, fixture_now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    app.dispatch(Action::Top);
    let mut s = String::new();
    for _ in 0..20 {
        app.dispatch(Action::Open);
        s = screen(&app, W, 60, r);
        if s.contains("hof_20260614_ca0001") && s.contains("Summary") {
            break;
        }
        app.dispatch(Action::Back);
        app.dispatch(Action::Down);
    }
    assert!(s.contains("Summary"), "no dispatch detail found: {s}");
    for needle in [
        "Step",
        "action",
        "implement",
        "skill",
        "build_report",
        "Context (3)",
        "payload",
        r#"{"feature_summary":"fast boots"}"#,
        "line one [31mred line two",
    ] {
        assert!(s.contains(needle), "{needle:?} missing: {s}");
    }
    assert!(!s.contains('\u{1b}'), "control characters are blanked");
    assert_eq!(
        s.matches('Z').count(),
        400,
        "a long value is cut at 400 characters: {s}"
    );
    assert!(s.contains("ZZZ…"), "{s}");
}
