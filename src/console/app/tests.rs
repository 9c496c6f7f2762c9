use super::*;
use crate::engine::Root;
use crate::live::{LiveModel, ModelOptions};
use crossterm::event::KeyModifiers;

#[test]
fn etas_are_durations_from_now_or_times_and_come_back_as_utc() {
    let now = "2026-06-14T10:00:00Z".parse::<DateTime<Utc>>().unwrap();
    for (typed, want) in [
        ("30m", "2026-06-14T10:30:00.000000Z"),
        ("in 2h", "2026-06-14T12:00:00.000000Z"),
        ("+1d", "2026-06-15T10:00:00.000000Z"),
        ("1h30m", "2026-06-14T11:30:00.000000Z"),
        ("2026-06-14T12:00:00Z", "2026-06-14T12:00:00.000000Z"),
        ("2026-06-14 14:00:00+02:00", "2026-06-14T12:00:00.000000Z"),
    ] {
        assert_eq!(parse_eta(typed, now).ok().as_deref(), Some(want), "{typed}");
    }
    for bad in ["soon", "in", "2x", "-5m", "2026-13-40"] {
        let err = parse_eta(bad, now).unwrap_err().to_string();
        assert!(err.contains(bad), "{bad}: {err}");
    }
}

#[test]
fn gates_are_split_on_commas_trimmed_and_deduplicated() {
    assert_eq!(
        parse_gates(" logic_gate, state_gate ,logic_gate,, ").unwrap(),
        vec!["logic_gate", "state_gate"]
    );
    assert!(parse_gates("").unwrap().is_empty());
    assert!(parse_gates("a\0b").is_err());
}

use crate::test_fixture::fixture_root as fixture;

fn app() -> App {
    let m = LiveModel::open(Root::at(fixture()), ModelOptions::default());
    App::new(m.snapshot(), false, "2026-06-14T10:36:00Z".parse().unwrap())
}

fn k(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn kc(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

#[test]
fn key_at_and_position_of_agree_with_the_keys_of_every_pane() {
    let a = app();
    let mut seen = 0;
    for pane in Pane::ALL {
        let keys = a.keys(pane);
        for (i, key) in keys.iter().enumerate() {
            // The key alone says which pane lists it (where an attention item jumps).
            assert_eq!(key.pane(), pane, "{key:?}");
            assert_eq!(a.key_at(pane, i).as_ref(), Some(key), "{pane:?} row {i}");
            let (found, len) = a.position_of(pane, key);
            // A key listed twice is found at its first row, as `position` on the keys does.
            assert_eq!(found, keys.iter().position(|k| k == key), "{pane:?} {key}");
            assert_eq!(len, keys.len(), "{pane:?}");
            seen += 1;
        }
        // Past the last row: the last key; a key that is not there: not found.
        assert_eq!(a.key_at(pane, usize::MAX), keys.last().cloned(), "{pane:?}");
        assert_eq!(
            a.position_of(pane, &RowKey::workflow("no/such/row")).0,
            None,
            "{pane:?}"
        );
    }
    // Each pane's rows are of its own kind: a key another pane lists is never found in it, even
    // where the two read alike (a dispatch and its dead letter are both `god/file`).
    for pane in Pane::ALL {
        for other in Pane::ALL.into_iter().filter(|o| *o != pane) {
            for key in a.keys(other) {
                assert_eq!(a.position_of(pane, &key).0, None, "{key:?} in {pane:?}");
            }
        }
    }
    assert!(seen > 10, "the fixture lists rows ({seen})");
    let (wf, inbox) = (a.keys(Pane::Workflows), a.keys(Pane::Inboxes));
    assert!(
        !wf.is_empty() && !inbox.is_empty(),
        "both big panes have rows"
    );
}

#[test]
fn every_attention_item_jumps_to_a_row_its_key_names_the_pane_of() {
    let a = app();
    let items = a.attention_all();
    let mut rows = 0;
    for item in &items {
        if let Jump::Row(key) = &crate::console::attention::jump(item) {
            assert!(
                a.position_of(key.pane(), key).0.is_some(),
                "{} jumps to {key:?}, not listed in {:?}",
                item.key,
                key.pane()
            );
            rows += 1;
        }
    }
    assert!(
        rows >= 3,
        "the fixture has attention items with rows: {items:?}"
    );
}

#[test]
fn confirm_starts_on_cancel_and_enter_there_does_nothing() {
    let mut a = app();
    a.dispatch(Action::GoPane(Pane::Locks));
    a.on_key(k('u'));
    let Mode::Confirm(c) = &a.mode else {
        panic!("force-unlock confirms")
    };
    assert!(!c.confirm_focused);
    assert!(a.on_key(kc(KeyCode::Enter)).is_empty());
    assert!(matches!(a.mode, Mode::Normal));
    assert!(a.flash.as_ref().unwrap().text.starts_with("cancelled"));
}

/// The lock path is parsed where the op is built, so a lock listed under a path
/// that is no lock key (a hostile `locks.json`) is refused with the ids' words, with no confirmation.
#[test]
fn force_unlock_of_a_lock_whose_path_is_no_lock_key_is_refused_before_confirming() {
    let mut s = (*app().snapshot).clone();
    let mut tracks = (*s.tracks).clone();
    let t = tracks
        .iter_mut()
        .find(|t| !t.locks.is_empty())
        .expect("the fixture has a lock");
    let mut view = (**t).clone();
    let mut locks = (*view.locks).clone();
    for l in &mut locks {
        l.path = "./".into();
    }
    view.locks = Arc::new(locks);
    *t = Arc::new(view);
    s.tracks = Arc::new(tracks);
    let mut a = App::new(Arc::new(s), false, "2026-06-14T10:36:00Z".parse().unwrap());
    a.dispatch(Action::GoPane(Pane::Locks));
    let effects = a.on_key(k('u'));
    assert!(effects.is_empty(), "{effects:?}");
    assert!(matches!(a.mode, Mode::Normal), "no confirmation opens");
    let f = a.flash.clone().unwrap();
    assert_eq!(f.kind, FlashKind::Error);
    assert_eq!(
        f.text,
        "lock path \"./\" names no file; give a path such as src/app/x.ts"
    );
}

#[test]
fn a_confirmed_op_becomes_an_effect_and_its_result_a_flash() {
    let mut a = app();
    a.dispatch(Action::GoPane(Pane::Locks));
    a.on_key(k('u'));
    a.on_key(kc(KeyCode::Tab));
    let effects = a.on_key(kc(KeyCode::Enter));
    let [Effect::Execute(op)] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert!(
        matches!(&**op, Op::ForceUnlock { path, .. } if path.as_str() == "src/app/api/webhooks/stripe/route.ts")
    );
    assert_eq!(a.in_flight, 1);
    a.op_finished(
        op,
        Err(crate::engine::Error::Refused("lock timed out".into())),
    );
    let f = a.flash.clone().unwrap();
    assert_eq!(f.kind, FlashKind::Error);
    assert!(f.text.contains("refused: lock timed out"), "{}", f.text);
    assert_eq!(a.in_flight, 0);
}

#[test]
fn required_prompt_text_cannot_be_empty_and_esc_leaves_without_effect() {
    let mut a = app();
    a.on_key(k('x'));
    assert!(matches!(a.mode, Mode::Prompt(_)));
    assert!(a.on_key(kc(KeyCode::Enter)).is_empty());
    assert!(matches!(a.mode, Mode::Prompt(_)));
    assert!(a.on_key(kc(KeyCode::Esc)).is_empty());
    assert!(matches!(a.mode, Mode::Normal));
}

#[test]
fn approve_needs_a_held_dispatch_selected() {
    let mut a = app();
    a.dispatch(Action::GoPane(Pane::Inboxes));
    a.on_key(k('p'));
    assert!(matches!(a.mode, Mode::Normal));
    assert!(a.flash.as_ref().unwrap().text.contains("held dispatch"));
}

#[test]
fn bus_follow_stops_when_scrolling_up_and_resumes_at_the_bottom() {
    let mut a = app();
    a.dispatch(Action::GoPane(Pane::Bus));
    let n = a.row_count();
    assert!(a.panes.bus.follow);
    assert_eq!(a.selected(Pane::Bus), n - 1);
    a.dispatch(Action::Up);
    assert!(!a.panes.bus.follow);
    assert_eq!(a.selected(Pane::Bus), n - 2);
    a.dispatch(Action::Down);
    assert!(a.panes.bus.follow, "reaching the bottom resumes following");
    a.dispatch(Action::Top);
    assert!(!a.panes.bus.follow);
    a.dispatch(Action::Bottom);
    assert!(a.panes.bus.follow);
}

#[test]
fn command_line_maps_onto_actions_and_reports_unknown_ones() {
    let mut a = app();
    a.on_key(k(':'));
    for c in "pane locks".chars() {
        a.on_key(k(c));
    }
    a.on_key(kc(KeyCode::Enter));
    assert_eq!(a.pane, Pane::Locks);
    assert_eq!(a.run_command("q"), vec![Effect::Quit]);
    a.run_command("ack maybe");
    assert!(
        a.flash
            .as_ref()
            .unwrap()
            .text
            .contains("unknown ack status")
    );
    a.run_command("frobnicate");
    assert!(a.flash.as_ref().unwrap().text.contains("unknown command"));
}

#[test]
fn selection_follows_the_same_record_when_rows_shift() {
    let mut a = app();
    a.dispatch(Action::Down);
    a.dispatch(Action::Down);
    assert_eq!(
        a.keys(Pane::Workflows)[a.selected(Pane::Workflows)],
        RowKey::workflow("wf_deploy_42")
    );
    // A snapshot where a workflow sorting before it appeared.
    let mut s = (*a.snapshot).clone();
    let mut list = (*s.workflows).clone();
    let mut extra = list[0].clone();
    extra.id = "wf_0000".into();
    list.insert(0, extra);
    s.workflows = Arc::new(list);
    a.set_snapshot(Arc::new(s));
    assert_eq!(
        a.keys(Pane::Workflows)[a.selected(Pane::Workflows)],
        RowKey::workflow("wf_deploy_42")
    );
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(a: &mut App, text: &str) {
    for c in text.chars() {
        a.on_key(k(c));
    }
}

#[test]
fn every_input_edits_with_readline_keys_and_takes_pastes() {
    let mut a = app();
    a.on_key(k('x'));
    typed(&mut a, "wrong reason");
    a.on_key(ctrl('u'));
    a.on_paste("the build\nbroke");
    let Mode::Prompt(p) = &a.mode else { panic!() };
    assert_eq!(p.input.text(), "the build broke");
    assert!(p.title.starts_with("Abort wf_"), "{}", p.title);
    a.on_key(kc(KeyCode::Esc));
    a.on_key(k('/'));
    typed(&mut a, "deploy xyz");
    a.on_key(ctrl('w'));
    assert_eq!(a.pane_state().filter, "deploy ");
    assert_eq!(a.row_count(), 1);
    a.on_key(kc(KeyCode::Enter));
    a.on_key(k(':'));
    typed(&mut a, "pane 3");
    a.on_key(ctrl('a'));
    a.on_key(ctrl('k'));
    a.on_paste("pane 4");
    a.on_key(kc(KeyCode::Enter));
    assert_eq!(a.pane, Pane::Locks);
}

#[test]
fn command_history_recalls_with_up_and_down() {
    let mut a = app();
    a.run_command("pane 2");
    for line in ["pane 3", "time"] {
        a.on_key(k(':'));
        typed(&mut a, line);
        a.on_key(kc(KeyCode::Enter));
    }
    a.on_key(k(':'));
    typed(&mut a, "dra");
    let line = |a: &App| match &a.mode {
        Mode::Command(cl) => cl.edit.text().to_owned(),
        m => panic!("{m:?}"),
    };
    a.on_key(kc(KeyCode::Up));
    assert_eq!(line(&a), "time");
    a.on_key(kc(KeyCode::Up));
    assert_eq!(line(&a), "pane 3");
    a.on_key(kc(KeyCode::Up));
    assert_eq!(line(&a), "pane 3", "the oldest stays");
    a.on_key(kc(KeyCode::Down));
    a.on_key(kc(KeyCode::Down));
    assert_eq!(line(&a), "dra", "past the newest: what was being typed");
    a.on_key(kc(KeyCode::Up));
    a.on_key(kc(KeyCode::Up));
    a.on_key(kc(KeyCode::Enter));
    assert_eq!(a.pane, Pane::Bus);
}

#[test]
fn tab_completes_commands_panes_tracks_gods_and_workflow_ids() {
    let mut a = app();
    let line = |a: &App| match &a.mode {
        Mode::Command(cl) => cl.edit.text().to_owned(),
        m => panic!("{m:?}"),
    };
    a.on_key(k(':'));
    typed(&mut a, "pan");
    a.on_key(kc(KeyCode::Tab));
    assert_eq!(line(&a), "pane ");
    typed(&mut a, "wor");
    a.on_key(kc(KeyCode::Tab));
    assert_eq!(line(&a), "pane work", "workers and workflows share 'work'");
    // The candidates stay beside the open line (not in a flash hidden behind it).
    let cands = |a: &App| match &a.mode {
        Mode::Command(cl) => cl.candidates.clone(),
        m => panic!("{m:?}"),
    };
    assert!(
        cands(&a).is_some_and(|c| c.contains("workers  workflows")),
        "{:?}",
        cands(&a)
    );
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 20)).unwrap();
    t.draw(|f| super::super::views::draw(f, &a, &super::super::theme::Theme::plain(true)))
        .unwrap();
    let screen: String = t
        .backend()
        .buffer()
        .content
        .iter()
        .map(|c| c.symbol())
        .collect();
    let row = screen
        .split(":pane work")
        .nth(1)
        .unwrap_or_else(|| panic!("the open line is drawn: {screen}"));
    assert!(
        row.trim_start_matches(['▏', ' '])
            .starts_with("workers  workflows"),
        "the candidates are beside the open line: {screen}"
    );
    typed(&mut a, "f");
    assert_eq!(cands(&a), None, "an edit clears them");
    a.on_key(kc(KeyCode::Esc));
    assert_eq!(a.completions("ack p"), vec!["pending"]);
    let track = a.snapshot.tracks[0].name.clone();
    assert!(a.completions("track ").contains(&track));
    let wf = a.completions("filter wf_dep");
    assert_eq!(wf, vec!["wf_deploy_42"]);
    let god = a.snapshot.inboxes[0].god.clone();
    assert!(
        a.completions(&format!("filter {}", &god[..2]))
            .contains(&god)
    );
    assert!(a.completions("abort ").is_empty());
}

#[test]
fn every_command_in_the_table_is_understood() {
    for c in crate::console::commands::COMMANDS {
        let mut a = app();
        a.run_command(c.name);
        let text = a.flash.map(|f| f.text).unwrap_or_default();
        assert!(!text.contains("unknown command"), "{}: {text}", c.name);
    }
}

#[test]
fn a_cleanup_dry_run_that_finds_nothing_offers_no_delete_button() {
    let mut a = app();
    let wf = WorkflowId::parse("wf_deploy_42").unwrap();
    let dry = |deleted: &[&str], missing: &[&str]| CleanupResult {
        status: crate::engine::CleanupStatus::DryRun,
        workflow_id: wf.clone(),
        deleted: None,
        would_delete: Some(deleted.iter().map(|s| s.to_string()).collect()),
        missing: missing.iter().map(|s| s.to_string()).collect(),
        refused: Vec::new(),
        dry_run: true,
        warnings: Vec::new(),
    };
    a.cleanup_previewed(wf.clone(), Ok(dry(&[], &["a.md"])));
    assert!(matches!(a.mode, Mode::Normal));
    let f = a.flash.clone().unwrap();
    assert!(
        f.text.contains("found nothing to delete (1 already gone"),
        "{}",
        f.text
    );
    a.cleanup_previewed(wf.clone(), Ok(dry(&["a.md"], &[])));
    let Mode::Confirm(c) = &a.mode else {
        panic!("{:?}", a.mode)
    };
    assert!(c.lines.iter().any(|(_, l)| l.contains("Will be deleted")));
}

#[test]
fn confirmations_speak_of_what_will_happen_and_of_a_vanished_target() {
    let mut a = app();
    a.dispatch(Action::GoPane(Pane::Locks));
    a.on_key(k('u'));
    let Mode::Confirm(c) = &a.mode else { panic!() };
    let text: Vec<&str> = c.lines.iter().map(|(_, l)| l.as_str()).collect();
    assert!(
        text.iter().any(|l| l.contains("will be removed")),
        "{text:?}"
    );
    // The dispatch an ack was for went away before Enter: said, not `(step  of …)`.
    let mut request = crate::engine::AckRequest::new(
        HandoffId::parse("hof_20260614_zzz999").unwrap(),
        AckChoice::Accepted,
    );
    request.workflow_id = WorkflowId::parse("wf_deploy_42").ok();
    let op = Op::Ack {
        god: GodName::parse("hephaestus").unwrap(),
        request,
    };
    let lines = op.describe(&a.snapshot, a.now);
    assert!(
        lines[0].1.contains("is no longer in hephaestus's inbox"),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|(_, l)| l.contains("(step  of")));
}

#[test]
fn filter_narrows_rows_as_typed_and_esc_clears_it() {
    let mut a = app();
    let all = a.row_count();
    a.on_key(k('/'));
    for c in "deploy".chars() {
        a.on_key(k(c));
    }
    assert_eq!(a.row_count(), 1);
    a.on_key(kc(KeyCode::Enter));
    assert_eq!(a.row_count(), 1, "Enter keeps the filter");
    a.on_key(kc(KeyCode::Esc));
    assert_eq!(a.row_count(), all, "Esc in normal mode clears it");
}

#[test]
fn a_raised_budget_is_typed_in_dollars_tokens_or_both() {
    let b = parse_budget("$5").unwrap();
    assert_eq!((b.cost_micros, b.tokens), (Some(5_000_000), None));
    let b = parse_budget("2.5usd, 3000000 tokens").unwrap();
    assert_eq!(
        (b.cost_micros, b.tokens),
        (Some(2_500_000), Some(3_000_000))
    );
    assert_eq!(parse_budget("3m tokens").unwrap().tokens, Some(3_000_000));
    assert_eq!(parse_budget("500ktok").unwrap().tokens, Some(500_000));
    for bad in ["5", "five dollars", "$-1", "1.5 tokens", "", "$5 7"] {
        assert!(parse_budget(bad).is_err(), "{bad:?} is refused");
    }
}
