//! Every pane, detail, the help overlay (unscrolled and scrolled) and every dialog at the two sizes
//! that matter: 80x24 (tmux splits, laptops) and 200x50. Snapshots of the fixture root at its fixed
//! time, plus one held dispatch so the approve and reject dialogs have something to act on.

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::testing::console::app::{App, Mode};
use pantheon::testing::console::keymap::{Action, Pane};

use super::support::*;

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 50)];

/// The fixture root with one dispatch held for approval (written as the engine writes it).
fn root_with_held() -> tempfile::TempDir {
    let root = fixture_root();
    let q = root.path().join("conductor/pending/_quarantine");
    std::fs::create_dir_all(&q).unwrap();
    std::fs::write(
        q.join("hof_20260614_ccc777.json"),
        serde_json::json!({
            "dispatch_id": "disp_20260614_100000_ccc777", "handoff_id": "hof_20260614_ccc777",
            "workflow_id": "wf_ext_9", "from_god": "thoth", "to_god": "caduceus",
            "step": "announce", "dispatched_at": "2026-06-14T09:30:00+00:00",
            "ack_status": "unacked", "held_because": "caduceus is a bridge god: an operator approves",
            "context": {"summary": "Tell the partner pantheon", "decisions": [], "artifacts": []}
        })
        .to_string(),
    )
    .unwrap();
    root
}

enum K {
    C(char),
    Code(KeyCode),
    Text(&'static str),
    Go(Pane, usize),
}

fn press(app: &mut App, keys: &[K]) {
    for k in keys {
        match k {
            K::C(c) => {
                app.on_key(key(*c));
            }
            K::Code(c) => {
                app.on_key(code(*c));
            }
            K::Text(t) => type_text(app, t),
            K::Go(p, row) => {
                app.dispatch(Action::GoPane(*p));
                app.dispatch(Action::Top);
                for _ in 0..*row {
                    app.dispatch(Action::Down);
                }
            }
        }
    }
}

fn shots(name: &str, keys: &[K], expect: impl Fn(&App) -> bool) {
    let root = root_with_held();
    for (w, h) in SIZES {
        let mut app = app_for(root.path(), fixture_now());
        press(&mut app, keys);
        assert!(expect(&app), "{name}: {:?}", app.mode());
        let s = screen(&app, w, h, root.path());
        assert!(!s.contains("Terminal too small"), "{name} {w}x{h}");
        assert_snapshot!(format!("matrix_{name}_{w}x{h}"), s);
    }
}

fn normal(a: &App) -> bool {
    matches!(a.mode(), Mode::Normal)
}

fn confirm(a: &App) -> bool {
    matches!(a.mode(), Mode::Confirm(_))
}

fn prompt(a: &App) -> bool {
    matches!(a.mode(), Mode::Prompt(_))
}

#[test]
fn every_pane_and_detail_at_80x24_and_200x50() {
    for p in Pane::ALL {
        let name = p.title().to_lowercase().replace(' ', "_");
        shots(&name, &[K::Go(p, 0)], normal);
        // The Board's cards are its detail; Enter on an attention item jumps to its record; this
        // root has no journal (pane 8 with entries: views::attention_and_journal_panes_…) and no
        // dead letter (pane 9 with some: deadletters::pane_9_…), no bridge (the Bridge pane with
        // records: bridge::the_bridge_pane_at_80x24_and_200x50), no usage (the Ledger with
        // some: views::the_ledger_pane_and_the_cost_column_…) and no foreign source (the Sources
        // pane with some, opened and detailed: sources::…).
        if !matches!(
            p,
            Pane::Board
                | Pane::Attention
                | Pane::Journal
                | Pane::DeadLetters
                | Pane::Bridge
                | Pane::Ledger
                | Pane::Sources
        ) {
            shots(
                &format!("{name}_detail"),
                &[K::Go(p, 0), K::Code(KeyCode::Enter)],
                |a| a.pane_state().detail,
            );
        }
    }
    shots(
        "workflows_raw",
        &[K::Go(Pane::Workflows, 0), K::C('v')],
        |a| a.pane_state().raw,
    );
    shots(
        "board_director_detail",
        &[K::Go(Pane::Board, 0), K::Code(KeyCode::Enter)],
        |a| a.pane_state().detail,
    );
}

#[test]
fn the_held_row_is_on_screen_at_80x24() {
    let root = root_with_held();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Inboxes));
    let s = screen(&app, 80, 24, root.path());
    assert!(s.contains("_quarantine"), "{s}");
    assert!(s.contains("‖ caduceus"), "the held row names its god: {s}");
    // Held for over an hour: flagged like an overdue ack.
    assert!(s.contains("held ▲ O"), "{s}");
}

#[test]
fn the_help_overlay_unscrolled_and_scrolled() {
    for p in [Pane::Workflows, Pane::Inboxes] {
        let n = p.title().to_lowercase();
        shots(&format!("help_{n}_top"), &[K::Go(p, 0), K::C('?')], |a| {
            matches!(a.mode(), Mode::Help(_))
        });
        shots(
            &format!("help_{n}_page2"),
            &[K::Go(p, 0), K::C('?'), K::Code(KeyCode::PageDown)],
            |a| matches!(&a.mode(), Mode::Help(h) if h.scroll > 0),
        );
        shots(
            &format!("help_{n}_bottom"),
            &[K::Go(p, 0), K::C('?'), K::C('G')],
            |a| matches!(&a.mode(), Mode::Help(h) if h.scroll > 0),
        );
    }
    shots(
        "help_search",
        &[K::C('?'), K::C('/'), K::Text("sort")],
        |a| matches!(a.mode(), Mode::Help(_)),
    );
}

#[test]
fn every_dialog_at_80x24_and_200x50() {
    use K::*;
    let wf = Go(Pane::Workflows, 2);
    let inbox = || Go(Pane::Inboxes, 1);
    shots("abort_prompt", &[wf, C('x'), Text("superseded")], prompt);
    shots(
        "abort_confirm",
        &[
            Go(Pane::Workflows, 2),
            C('x'),
            Text("superseded"),
            Code(KeyCode::Enter),
        ],
        confirm,
    );
    shots("ack_menu", &[inbox(), C('a')], |a| {
        matches!(a.mode(), Mode::AckMenu { .. })
    });
    shots(
        "ack_accepted_confirm",
        &[inbox(), C('a'), Code(KeyCode::Enter)],
        confirm,
    );
    shots(
        "ack_rejected_prompt",
        &[
            inbox(),
            C('a'),
            C('j'),
            C('j'),
            Code(KeyCode::Enter),
            Text("no capacity"),
        ],
        prompt,
    );
    shots(
        "ack_completed_prompt",
        &[
            inbox(),
            C('a'),
            C('j'),
            C('j'),
            C('j'),
            Code(KeyCode::Enter),
        ],
        prompt,
    );
    shots(
        "ack_pending_eta_prompt",
        &[
            inbox(),
            C('a'),
            C('j'),
            Code(KeyCode::Enter),
            Text("after the freeze"),
            Code(KeyCode::Enter),
        ],
        prompt,
    );
    // The held row is listed last, after every god's inbox.
    shots("approve_confirm", &[Go(Pane::Inboxes, 3), C('p')], confirm);
    shots(
        "reject_held_prompt",
        &[Go(Pane::Inboxes, 3), C('R'), Text("not today")],
        prompt,
    );
    shots("force_unlock", &[Go(Pane::Locks, 0), C('u')], confirm);
    shots("board_resolve", &[Go(Pane::Board, 0), C('s')], confirm);
    shots("file_issues", &[C('!')], |a| {
        matches!(a.mode(), Mode::Issues)
    });
    shots("command_line", &[C(':'), Text("so")], |a| {
        matches!(a.mode(), Mode::Command(_))
    });
    shots("filter_line", &[C('/'), Text("overdue")], |a| {
        matches!(a.mode(), Mode::Filter(_))
    });
}

#[test]
fn sorted_and_narrowed_lists() {
    shots(
        "workflows_by_status_desc",
        &[
            K::C(':'),
            K::Text("sort status"),
            K::Code(KeyCode::Enter),
            K::C('S'),
        ],
        normal,
    );
    shots(
        "inboxes_one_god",
        &[K::Go(Pane::Inboxes, 0), K::C(']'), K::C(']')],
        normal,
    );
    shots("workflows_finished_hidden", &[K::C('h')], |a| {
        a.panes().workflows.hide_finished
    });
}

#[test]
fn an_empty_root_says_what_to_run_and_offers_no_action_on_records() {
    let root = tempfile::tempdir().unwrap();
    let app = app_for(root.path(), fixture_now());
    for (w, h) in SIZES {
        let s = screen(&app, w, h, root.path());
        assert!(
            s.contains("pantheon init") && s.contains("pantheon demo"),
            "{s}"
        );
        // The command that starts a workflow, as it is spelled (`pantheon submit` does not exist).
        assert!(s.contains("`pantheon handoff submit FILE`"), "{s}");
        assert!(!s.contains("abort") && !s.contains("cleanup"), "{s}");
        assert_snapshot!(format!("matrix_empty_root_{w}x{h}"), s);
    }
}

#[test]
fn the_demo_hints_once_at_the_first_held_dispatch() {
    let root = root_with_held();
    let mut app = App::new(snapshot_of(root.path()), false, fixture_now());
    app.show_first_time_hints();
    app.first_time_hints();
    let hint = app
        .shown_flash()
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default();
    assert!(hint.contains("press 2, select the held row, p"), "{hint}");
    app.clear_flash();
    app.set_snapshot(snapshot_of(root.path()));
    // Not again for the same kind; the next one (a deadlock in the fixture) gets its own line.
    let next = app
        .shown_flash()
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default();
    assert!(!next.contains("held"), "{next}");
    // Without hints (the plain console) nothing is said.
    let mut plain = app_for(root.path(), fixture_now());
    plain.set_snapshot(snapshot_of(root.path()));
    assert!(plain.shown_flash().is_none());
}

#[test]
fn header_tabs_and_footer_drop_whole_items_at_any_width() {
    let root = root_with_held();
    let mut app = app_for(root.path(), fixture_now());
    let endings = [
        "pantheon",
        "overdue",
        "stale",
        "expired",
        "deadlock",
        "(redispatch)",
        "issues",
        "held",
        "wf",
        "active)",
        "waiting",
        "[notify]",
        "/s",
        "need you",
    ];
    for p in Pane::ALL {
        app.dispatch(Action::GoPane(p));
        for w in (60..=200).step_by(7) {
            let s = screen(&app, w, 24, root.path());
            let lines: Vec<&str> = s.lines().collect();
            let header = lines[0].trim_end();
            // A whole item, or an alert or count in its tight form (`‖1`, `⚠3`, `@7`).
            let last = header.rsplit(' ').next().unwrap_or_default();
            let tight = last
                .strip_prefix(['▲', '⊘', '◔', '✗', '⟲', '∅', '⚠', '‖', '@'])
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            assert!(
                (endings.iter().any(|e| header.ends_with(e)) || tight) && !header.contains('…'),
                "{w}: header cut mid-item: {header:?}"
            );
            for tab in lines[1]
                .split("  ")
                .map(str::trim)
                .filter(|t| !t.is_empty())
            {
                // Panes past 9 have no key: their tab is the title alone (`:pane NAME` opens them).
                let keyless = Pane::ALL
                    .iter()
                    .any(|p| p.number() > 9 && (p.title() == tab || p.short_title() == tab));
                if keyless {
                    continue;
                }
                let (n, title) = tab.split_once(' ').unwrap_or((tab, ""));
                assert!(n.parse::<usize>().is_ok(), "{w}: {tab:?}");
                // A whole title or its short form (narrow tab bars), with the Attention tab's
                // count after it: never a title cut mid-word.
                let title = title
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .trim_end_matches('@')
                    .trim_end();
                assert!(
                    title.is_empty()
                        || Pane::ALL
                            .iter()
                            .any(|p| p.title() == title || p.short_title() == title),
                    "{w}: tab cut: {tab:?}"
                );
            }
            let footer = lines[lines.len() - 1].trim_end();
            assert!(footer.ends_with("? help"), "{w}: footer {footer:?}");
        }
    }
}
