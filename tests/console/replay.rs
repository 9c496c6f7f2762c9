//! The console in the past: a root recorded by the real recorder, the replay thread laying its
//! moments out for the live model, the scrub line's keys in a real terminal (tmux), the refusal of
//! every act but the fork, and the fork itself against the real engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::Root;
use pantheon::engine::recorder::{self, Recorder};
use pantheon::testing::console::app::{App, Effect, FlashKind, Mode};
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::replay::{Cmd, Frame, ReplayHandle, ReplayView};
use pantheon::testing::live::ModelOptions;
use serde_json::{Value, json};

use super::actions::{confirm_text, run};
use super::deadletters::{DL_FLOW, dead_letter_all, root_with};
use super::support::*;
use crate::tmux::Tmux;

/// The real recorder on `r`, in this process: the test calls [`Recorder::rescan`] after each act,
/// so each act is recorded with its own files' times, in order, without waiting for notifications.
fn recorder(r: &Path) -> Recorder {
    let root = Root::at(r);
    let lease = recorder::lease_file(&root).unwrap();
    lease.try_lock().unwrap();
    Recorder::start(&root, lease).unwrap().0
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

fn ts(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn state(r: &Path, wf: &str) -> Value {
    serde_json::from_slice(&std::fs::read(r.join(format!("conductor/state/{wf}.json"))).unwrap())
        .unwrap()
}

fn journal(r: &Path) -> Vec<Value> {
    std::fs::read_to_string(r.join("conductor/journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A DL-flow workflow recorded from its first dispatch: `wf_dl_1` waits for `build`'s ack with
/// the decisions `["build it"]` at the returned moment; afterwards it is dead-lettered (stalled),
/// rerun with its decisions edited to `["build it twice"]`, and dead-lettered again.
fn recorded_story() -> (tempfile::TempDir, i64) {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    let mut rec = recorder(r);
    let then = now_us();
    std::thread::sleep(Duration::from_millis(20));
    dead_letter_all(r);
    rec.rescan(false).unwrap();
    std::fs::write(r.join("ctx.json"), r#"{"decisions": ["build it twice"]}"#).unwrap();
    let ctx = r.join("ctx.json");
    pantheon(
        r,
        &[
            "rerun",
            "wf_dl_1",
            "--from",
            "build",
            "--context",
            ctx.to_str().unwrap(),
        ],
        None,
    );
    rec.rescan(false).unwrap();
    dead_letter_all(r);
    rec.rescan(false).unwrap();
    assert_eq!(state(r, "wf_dl_1")["status"], "stalled");
    assert_eq!(
        state(r, "wf_dl_1")["context_bag"]["decisions"],
        json!(["build it twice"])
    );
    (root, then)
}

/// The next frame the replay publishes (each command publishes one).
fn next_frame(h: &mut ReplayHandle) -> Arc<Frame> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), h.frames.changed())
            .await
            .expect("a frame from the replay")
            .unwrap()
    });
    h.frames.borrow_and_update().clone()
}

/// The replay's next note (sent just after the frame it speaks of).
fn next_note(h: &mut ReplayHandle) -> (bool, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), h.notes.recv()).await })
        .expect("a note from the replay")
        .expect("the replay still running")
}

/// Runs a key's replay effects the way the event loop does; the frame they led to.
fn scrub(app: &mut App, h: &mut ReplayHandle, effects: Vec<Effect>) -> Option<Arc<Frame>> {
    let mut last = None;
    for e in effects {
        if let Effect::Replay(cmd) = e {
            h.send(cmd);
            let f = next_frame(h);
            app.show_frame(&f);
            last = Some(f);
        }
    }
    last
}

#[test]
fn the_fork_from_the_replay_reruns_from_the_context_bag_then_and_is_journaled_as_a_fork() {
    let (root, then) = recorded_story();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    let mut app = app_for(r, chrono::Utc::now());
    let mut h = ReplayHandle::start(&Root::at(r), then, ModelOptions::default()).unwrap();
    app.show_frame(&h.latest());
    // The past: the workflow waits for build's ack, as it did then.
    app.dispatch(Action::GoPane(Pane::Workflows));
    let w = app
        .snapshot()
        .workflows
        .iter()
        .find(|w| &*w.id == "wf_dl_1")
        .unwrap();
    assert_eq!(w.state.status.as_str(), "waiting_for_ack");
    // Every act that changes files is refused, before any dialog, saying why.
    let entries = journal(r).len();
    for (pane, k) in [
        (Pane::Workflows, 'x'),
        (Pane::Inboxes, 'a'),
        (Pane::Workflows, 'c'),
    ] {
        app.dispatch(Action::GoPane(pane));
        assert!(app.on_key(key(k)).is_empty());
        assert!(matches!(app.mode(), Mode::Normal));
        let f = app.shown_flash().unwrap();
        assert_eq!(f.kind, FlashKind::Error);
        assert!(
            f.text.contains("the console is in the past") && f.text.contains("L goes back to live"),
            "{}",
            f.text
        );
    }
    assert_eq!(journal(r).len(), entries, "nothing was acted on");
    // R forks: playback pauses, the step it was at then is offered.
    app.dispatch(Action::GoPane(Pane::Workflows));
    let effects = app.on_key(key('R'));
    assert_eq!(effects, vec![Effect::Replay(Cmd::Pause)]);
    scrub(&mut app, &mut h, effects);
    let Mode::Prompt(p) = &app.mode() else {
        panic!("a prompt, got {:?}", app.mode())
    };
    assert_eq!(p.input.text(), "build");
    assert!(p.title.starts_with("Fork wf_dl_1 as of "), "{}", p.title);
    app.on_key(code(KeyCode::Enter));
    let lines = confirm_text(&app);
    let moment = app.replay_moment().unwrap();
    assert!(lines.contains("LIVE root"), "{lines}");
    assert!(
        lines.contains(&format!(
            "pantheon rerun wf_dl_1 --from build --as-of {moment}"
        )),
        "{lines}"
    );
    assert!(app.on_key(code(KeyCode::Tab)).is_empty());
    let effects = app.on_key(code(KeyCode::Enter));
    let done = run(&mut app, &op, effects);
    assert_eq!(done.len(), 1);
    let f = app.shown_flash().unwrap();
    assert_eq!(f.kind, FlashKind::Success, "{}", f.text);
    assert!(
        f.text
            .contains(&format!("wf_dl_1 forked from step build as of {moment}")),
        "{}",
        f.text
    );
    // The live root: a new attempt from the bag of the moment, naming it; the fork journaled.
    let st = state(r, "wf_dl_1");
    assert_eq!(st["status"], "waiting_for_ack");
    assert_eq!(st["context_bag"]["decisions"], json!(["build it"]));
    assert_eq!(
        st["attempts"].as_array().unwrap().last().unwrap()["as_of"],
        moment.as_str()
    );
    let forks: Vec<Value> = journal(r)
        .into_iter()
        .filter(|e| e["action"] == "rerun" && e["targets"]["as_of"] == moment.as_str())
        .collect();
    assert_eq!(forks.len(), 1, "one journal entry naming the moment");
    assert_eq!(forks[0]["source"], "console");
    assert!(
        moment.starts_with(&ts(then)[..19]),
        "{moment} vs {}",
        ts(then)
    );
}

#[test]
fn a_moment_before_the_history_opens_at_its_first_and_a_root_never_recorded_is_refused() {
    let (root, then) = recorded_story();
    let mut h = ReplayHandle::start(
        &Root::at(root.path()),
        then - 3_600_000_000,
        ModelOptions::default(),
    )
    .unwrap();
    let v = h.latest().view.clone();
    assert_eq!(v.pos, v.first, "the first moment");
    assert_eq!(v.moment_us, v.first_us);
    let (error, note) = h.notes.try_recv().expect("a note");
    assert!(!error, "{note}");
    assert!(
        note.contains("is before the history starts: showing its first moment"),
        "{note}"
    );
    // `:replay TS` before the history in an open replay: the same.
    h.send(Cmd::Seek(then - 3_600_000_000));
    let v = next_frame(&mut h).view.clone();
    assert_eq!(v.moment_us, v.first_us);
    let (error, note) = next_note(&mut h);
    assert!(
        !error && note.contains("is before the history starts"),
        "{note}"
    );
    drop(h);
    let bare = engine_root();
    let e = ReplayHandle::start(&Root::at(bare.path()), then, ModelOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("was never recorded"), "{e}");
    // The command line says the same before it looks for a terminal.
    let refused = |root: &Path, at: &str| {
        let out = assert_cmd::Command::cargo_bin("pantheon")
            .unwrap()
            .args(["--root", root.to_str().unwrap(), "--at", at])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = refused(bare.path(), "-1m");
    assert!(e.contains("was never recorded"), "{e}");
    // A moment before the history is not refused: past that check, the console asks for a
    // terminal, which a test's pipe is not.
    let e = refused(root.path(), "2020-01-01T00:00:00Z");
    assert!(!e.contains("before the history"), "{e}");
}

/// A recorded root where the supervisor's heartbeat changes between the acts: beat, beat,
/// dead-lettering (the supervisor's acts), beat, beat, rerun (an operator's act, journaled),
/// beat.
fn story_with_heartbeats() -> tempfile::TempDir {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_dd0001")]);
    let r = root.path();
    let mut rec = recorder(r);
    let mut n = 0;
    let mut beat = |rec: &mut Recorder| {
        n += 1;
        std::fs::create_dir_all(r.join("conductor/supervisor")).unwrap();
        std::fs::write(
            r.join("conductor/supervisor/pid-4242.json"),
            format!("{{\"pid\": 4242, \"beats\": {n}}}"),
        )
        .unwrap();
        rec.rescan(false).unwrap();
    };
    beat(&mut rec);
    beat(&mut rec);
    dead_letter_all(r);
    rec.rescan(false).unwrap();
    beat(&mut rec);
    beat(&mut rec);
    pantheon(r, &["rerun", "wf_dl_1", "--from", "build"], None);
    rec.rescan(false).unwrap();
    beat(&mut rec);
    root
}

#[test]
fn stepping_goes_act_by_act_past_heartbeats_and_a_journal_entry_reads_in_its_words() {
    let root = story_with_heartbeats();
    let r = root.path();
    let mut h = ReplayHandle::start(&Root::at(r), 0, ModelOptions::default()).unwrap();
    let _ = h.notes.try_recv();
    let total = {
        let v = &h.latest().view;
        v.end - v.first
    };
    let step = |h: &mut ReplayHandle, cmd: Cmd| {
        h.send(cmd);
        next_frame(h).view.clone()
    };
    // Forward to the end: no stop is a heartbeat, and there are fewer stops than changes.
    let mut labels = Vec::new();
    loop {
        let before = h.latest().view.pos;
        let v = step(&mut h, Cmd::Step(1));
        if v.pos == before {
            break;
        }
        labels.push(v.change.clone().unwrap_or_default());
    }
    assert!(!labels.is_empty());
    assert!(
        labels.iter().all(|l| !l.contains("conductor/supervisor/")),
        "{labels:#?}"
    );
    assert!(
        (labels.len() as u64) < total,
        "{} stops of {total}",
        labels.len()
    );
    // The rerun's journal entry, in its words, not the journal's file name.
    let rerun = journal(r)
        .into_iter()
        .rfind(|e| e["action"] == "rerun")
        .expect("the rerun is journaled");
    let words = pantheon::testing::console::replay::journal_words(&rerun).unwrap();
    assert!(
        words.starts_with("rerun ") && words.contains(" wf_dl_1 by "),
        "{words}"
    );
    // The rerun retires the dead letter it supersedes in the same act: the scrub line names the
    // act's last journal entry, the rerun's or the retirement's that follows it.
    let retire = journal(r)
        .into_iter()
        .rfind(|e| e["action"] == "dead_retire")
        .and_then(|e| pantheon::testing::console::replay::journal_words(&e));
    assert!(
        labels.contains(&words) || retire.as_ref().is_some_and(|w| labels.contains(w)),
        "{words:?} (or {retire:?}) in {labels:#?}"
    );
    assert!(
        labels.iter().all(|l| !l.contains("journal.jsonl")),
        "{labels:#?}"
    );
    // Back to the start, act by act as well.
    let mut back = 0;
    loop {
        let before = h.latest().view.pos;
        let v = step(&mut h, Cmd::Step(-1));
        if v.pos == before {
            break;
        }
        back += 1;
        assert!(
            v.change
                .as_deref()
                .is_none_or(|l| !l.contains("conductor/supervisor/")),
            "{:?}",
            v.change
        );
        assert!(back <= labels.len(), "more stops back than forward");
    }
    assert!(back > 0);
    assert_eq!(h.latest().view.pos, h.latest().view.first);
    // `}` jumps to the journal entry and names it in its words.
    let v = step(&mut h, Cmd::Journal(true));
    assert!(
        v.change
            .as_deref()
            .is_some_and(|c| !c.contains("journal.jsonl")),
        "{:?}",
        v.change
    );
    // `H`: the heartbeats too, one change at a time.
    h.send(Cmd::Heartbeats);
    let _ = next_frame(&mut h);
    // Notes of the steps before may still be on their way; this one follows them.
    let mut note = next_note(&mut h).1;
    while !note.contains("heartbeats") {
        note = next_note(&mut h).1;
    }
    assert!(note.contains("heartbeats too"), "{note}");
    let mut every = Vec::new();
    loop {
        let before = h.latest().view.pos;
        let v = step(&mut h, Cmd::Step(-1));
        if v.pos == before {
            break;
        }
    }
    loop {
        let before = h.latest().view.pos;
        let v = step(&mut h, Cmd::Step(1));
        if v.pos == before {
            break;
        }
        assert_eq!(v.pos, before + 1);
        every.push(v.change.clone().unwrap_or_default());
    }
    assert_eq!(every.len() as u64, total);
    // The moment is laid out where only its owner may look: 0700 directories, 0600 files.
    let scratch = h.latest().snapshot.root.clone();
    let mut stack = vec![scratch.clone()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let mode = e.metadata().unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", e.path().display());
                files += 1;
            }
        }
    }
    assert!(files > 0, "{}", scratch.display());
    assert!(
        every
            .iter()
            .any(|l| l == "put conductor/supervisor/pid-4242.json"),
        "{every:#?}"
    );
}

#[test]
fn the_replay_header_and_scrub_line_80x24() {
    let root = fixture_root();
    let now = fixture_now();
    let mut app = app_for(root.path(), now);
    let moment = now - chrono::Duration::seconds(72 * 60 + 4);
    let mut v = ReplayView::new(418, 0, 2210);
    v.moment_us = moment.timestamp_micros();
    v.first_us = (now - chrono::Duration::hours(3)).timestamp_micros();
    v.last_us = now.timestamp_micros();
    v.speed = 3;
    v.change = Some("put conductor/state/wf_deploy_42.json".into());
    app.set_replay(Some(v));
    app.set_now(moment);
    app.set_wall(now);
    assert_snapshot!("replay_paused_80x24", screen(&app, 80, 24, root.path()));
    if let Some(v) = app.replay_mut() {
        v.playing = true;
    }
    let s = screen(&app, 80, 24, root.path());
    let last = s.lines().last().unwrap();
    assert!(last.starts_with(" ▶ 10x"), "{last}");
    assert!(last.contains("p pause"), "{last}");
    // Wide enough, the bar carries the alert counts the live header shows at that moment.
    let replayed = screen(&app, 240, 24, root.path());
    let bar = replayed.lines().next().unwrap().to_owned();
    app.set_replay(None);
    let live = screen(&app, 240, 24, root.path());
    let alerts = |line: &str| -> Vec<String> {
        line.split(['·', '—'])
            .map(str::trim)
            .filter(|p| p.starts_with('▲') && p.chars().nth(2).is_some_and(|c| c.is_ascii_digit()))
            .map(str::to_owned)
            .collect()
    };
    let want = alerts(live.lines().next().unwrap());
    assert!(!want.is_empty(), "the fixture has alerts then: {live}");
    assert_eq!(alerts(&bar), want, "{bar}");
}

/// The console in tmux on `root`, opened in the past with `extra` arguments.
fn console(root: &Path, extra: &str) -> Tmux {
    let bin: PathBuf = assert_cmd::cargo::cargo_bin("pantheon");
    let log = root.join("console.log");
    let script = format!(
        "PANTHEON_LOG={} {} --root {} {extra}; echo EXITED=$?; sleep 600",
        log.display(),
        bin.display(),
        root.display()
    );
    Tmux::start("replay", &script)
}

fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or("")
}

/// `change N/M` of the header.
fn change_of(screen: &str) -> (u64, u64) {
    let h = header(screen);
    let at = h.find("change ").expect("a change counter") + 7;
    let nm: String = h[at..].chars().take_while(|c| *c != ' ').collect();
    let (n, m) = nm.split_once('/').unwrap();
    (n.parse().unwrap(), m.parse().unwrap())
}

#[test]
fn in_tmux_the_past_opens_steps_jumps_plays_refuses_acts_and_goes_back_to_live() {
    let (root, then) = recorded_story();
    let r = root.path();
    let t = console(r, &format!("--at {}", ts(then)));
    // The bar comes with the first frame; the rows once the model has read the moment.
    let s = t.wait("the replay", |s| {
        header(s).contains("REPLAY") && s.contains("wf_dl_1")
    });
    assert!(header(&s).contains("read-only"), "{s}");
    let (n0, total) = change_of(&s);
    assert!(total > n0, "{s}");
    // One change forward, one back.
    t.keys(&["."]);
    t.wait("one change forward", |s| change_of(s).0 == n0 + 1);
    t.keys(&[","]);
    t.wait("one change back", |s| change_of(s).0 == n0);
    // The next journal entry: the scrub line names the change that led there.
    t.keys(&["}"]);
    // In the entry's words (`dead … by …`), not the journal's file name.
    let words: Vec<String> = journal(r)
        .iter()
        .filter_map(pantheon::testing::console::replay::journal_words)
        .map(|w| w.chars().take(12).collect())
        .collect();
    let s = t.wait("the next journal entry", |s| {
        s.lines()
            .last()
            .is_some_and(|l| !l.contains("journal.jsonl") && words.iter().any(|w| l.contains(w)))
    });
    assert!(change_of(&s).0 > n0, "{s}");
    // The next attention item: the dead letter the supervisor's pass made.
    t.keys(&[")"]);
    let s = t.wait("the next attention item", |s| {
        header(s).contains("needed you then")
    });
    t.keys(&["9"]);
    t.wait("the dead letter in pane 9", |s| {
        s.contains("hof_20260614_dd0001")
    });
    let _ = s;
    // A mutating key is refused and nothing is written.
    t.keys(&["1", "x"]);
    t.wait("the refusal", |s| s.contains("the console is in the past"));
    // Play at 50x to the end of the recorded history.
    t.keys(&["+", "+", "+", "+", "+"]);
    t.wait("50x", |s| {
        s.lines().last().is_some_and(|l| l.contains("50x"))
    });
    t.keys(&["p"]);
    let s = t.wait("the end of the history", |s| {
        s.contains("end of the recorded history")
    });
    let (n, m) = change_of(&s);
    assert_eq!(n, m, "{s}");
    // One key back to live: the live header, the present state.
    t.keys(&["L"]);
    let s = t.wait("live", |s| {
        header(s).contains("◈ pantheon") && s.contains("back to live")
    });
    assert!(!s.contains("REPLAY"), "{s}");
    assert_eq!(
        state(r, "wf_dl_1")["status"],
        "stalled",
        "the replay wrote nothing"
    );
    t.keys(&["q"]);
    t.wait("the exit", |s| s.contains("EXITED=0"));
    // The scratch root is gone with the replay.
    let _ = then;
}

#[test]
fn the_scrub_keys_move_the_replay_only_in_the_past_and_are_remappable() {
    let root = fixture_root();
    let now = fixture_now();
    let mut app = app_for(root.path(), now);
    // Live: the scrub keys are not bound; `:live` says where the past is.
    assert!(app.on_key(key('.')).is_empty());
    assert!(app.run_command("live").is_empty());
    assert!(
        app.shown_flash().unwrap().text.contains("only in replay"),
        "{:?}",
        app.shown_flash()
    );
    // `:replay -15m` opens the past at that moment; `:live` and `L` leave it.
    let effects = app.run_command("replay -15m");
    let want = (now - chrono::Duration::minutes(15)).timestamp_micros();
    assert_eq!(effects, vec![Effect::ReplayAt(want)]);
    assert!(app.run_command("replay yesterday").is_empty());
    assert!(app.shown_flash().unwrap().text.contains("is not a moment"));
    app.set_replay(Some(ReplayView::new(5, 0, 10)));
    for (k, cmd) in [
        (',', Cmd::Step(-1)),
        ('.', Cmd::Step(1)),
        ('{', Cmd::Journal(false)),
        ('}', Cmd::Journal(true)),
        ('(', Cmd::Attention(false)),
        (')', Cmd::Attention(true)),
        ('p', Cmd::TogglePlay),
        ('-', Cmd::Slower),
        ('+', Cmd::Faster),
        ('=', Cmd::Faster),
        ('H', Cmd::Heartbeats),
    ] {
        app.dispatch(Action::GoPane(Pane::Inboxes));
        assert_eq!(app.on_key(key(k)), vec![Effect::Replay(cmd)], "{k}");
    }
    assert_eq!(app.on_key(key('L')), vec![Effect::Live]);
    assert_eq!(app.run_command("live"), vec![Effect::Live]);
    // The operator's remap applies to the scrub keys as to any.
    let cfg = pantheon::testing::console::config::parse("[keys]\nreplay_live = \"F12\"\n", "test")
        .unwrap();
    app.configure(&cfg);
    assert_eq!(app.on_key(code(KeyCode::F(12))), vec![Effect::Live]);
    assert_ne!(app.on_key(key('L')), vec![Effect::Live]);
}

/// What a snapshot shows, as text: every part a pane reads, the counts at `now`, the root's path
/// written `ROOT` (the scratch root is elsewhere). Left out: the snapshot's number, when it was
/// taken, the watch mode and the loading state, which say how it was read, not what it shows.
fn shown(s: &pantheon::testing::live::snapshot::Snapshot, now: i64) -> String {
    let now = chrono::DateTime::from_timestamp_micros(now).unwrap();
    let inboxes = &s.inboxes;
    format!(
        "{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}\n{:#?}",
        s.workflows,
        inboxes,
        s.quarantine,
        s.definitions,
        s.definition_errors,
        s.tracks,
        s.warnings,
        s.dead_letters,
        s.journal,
        s.bridge,
        s.supervisors,
        s.deadlines,
        s.tallies,
        s.ledger,
        s.counts(now),
    )
    .replace(&s.root.display().to_string(), "ROOT")
}

/// The fidelity goal: at each recorded moment, the replayed snapshot equals the snapshot the live
/// model held of the root then (same workflows, inboxes, dead letters, journal, tracks, counts).
#[test]
fn the_replayed_snapshot_of_a_moment_equals_the_live_models_snapshot_then() {
    let root = root_with(
        DL_FLOW,
        &[
            ("wf_dl_1", "hof_20260614_ee0001"),
            ("wf_dl_2", "hof_20260614_ee0002"),
        ],
    );
    let r = root.path();
    let mut rec = recorder(r);
    let mut moments = Vec::new();
    let mut take = |rec: &mut Recorder| {
        rec.rescan(false).unwrap();
        let live = pantheon::testing::live::LiveModel::open(Root::at(r), ModelOptions::default());
        let at = now_us();
        moments.push((at, shown(&live.snapshot(), at)));
        std::thread::sleep(Duration::from_millis(20));
    };
    take(&mut rec);
    dead_letter_all(r);
    take(&mut rec);
    pantheon(r, &["rerun", "wf_dl_1", "--from", "build"], None);
    take(&mut rec);
    pantheon(r, &["abort", "wf_dl_2", "--reason", "not needed"], None);
    take(&mut rec);
    dead_letter_all(r);
    take(&mut rec);
    // The moments differ from each other, so the comparison below tells them apart.
    for w in moments.windows(2) {
        assert_ne!(w[0].1, w[1].1);
    }
    for (at, live) in &moments {
        let mut h = ReplayHandle::start(&Root::at(r), *at, ModelOptions::default()).unwrap();
        let mut f = h.latest();
        while f.snapshot.loading.is_some() {
            f = next_frame(&mut h);
        }
        assert_eq!(&shown(&f.snapshot, *at), live, "at {}", ts(*at));
    }
}

/// In replay the console reads a scratch root, but what it shows names the recorded root's files:
/// a workflow's detail and its raw view, the file issues overlay, the Attention pane's reason and
/// the yanked text never show the scratch directory.
#[test]
fn in_replay_details_and_file_issues_name_the_recorded_roots_files_80x24_and_wider() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_ff0001")]);
    let r = root.path();
    let mut rec = recorder(r);
    std::fs::write(r.join("conductor/state/wf_bad.json"), "{not json").unwrap();
    rec.rescan(false).unwrap();
    let at = now_us();
    let mut h = ReplayHandle::start(&Root::at(r), at, ModelOptions::default()).unwrap();
    let mut f = h.latest();
    while f.snapshot.loading.is_some() {
        f = next_frame(&mut h);
    }
    let scratch = f.snapshot.root.display().to_string();
    assert!(!r.starts_with(&scratch) && scratch.contains("pantheon-replay-"));
    let mut app = app_for(r, chrono::Utc::now());
    app.show_frame(&f);
    let live_root = r.display().to_string();
    // The workflow's detail: its title names the state file in the recorded root.
    app.dispatch(Action::GoPane(Pane::Workflows));
    for _ in 0..app.row_count() {
        if app.on_key(key('y')) == vec![Effect::Clipboard("wf_dl_1".into())] {
            break;
        }
        app.on_key(code(KeyCode::Down));
    }
    app.on_key(code(KeyCode::Enter));
    let s = text(&render(&app, 80, 24));
    let state = format!("{live_root}/conductor/state/wf_dl_1.json");
    assert!(
        s.replace('\n', "").contains(&state[..state.len().min(60)]),
        "{s}"
    );
    assert!(!s.contains("pantheon-replay-"), "{s}");
    // The raw view's first line is the file's path.
    app.on_key(key('v'));
    let s = text(&render(&app, 160, 30));
    assert!(s.contains(&state), "{s}");
    assert!(!s.contains(&scratch), "{s}");
    // The unreadable file: the Attention pane's reason and the issues overlay.
    app.on_key(code(KeyCode::Esc));
    app.dispatch(Action::GoPane(Pane::Attention));
    let s = text(&render(&app, 240, 30));
    assert!(s.contains("cannot read the file"), "{s}");
    assert!(!s.contains(&scratch), "{s}");
    app.on_key(key('!'));
    let s = text(&render(&app, 240, 30));
    assert!(s.contains("conductor/state/wf_bad.json"), "{s}");
    assert!(!s.contains(&scratch), "{s}");
    // A flash naming a scratch path (an error the replay reports) names the recorded root's.
    app.flash(
        FlashKind::Error,
        format!("{scratch}/conductor/state/wf_bad.json: unreadable"),
    );
    assert_eq!(
        app.shown_flash().unwrap().text,
        format!("{live_root}/conductor/state/wf_bad.json: unreadable")
    );
    // Back to live, nothing is mapped any more.
    app.back_to_live(app.snapshot().clone());
    assert_eq!(app.shown_text(&scratch), scratch);
}

/// The time machine shows a pause in the past: a pause and its resume recorded, the moment inside it
/// replays with the pause in force (what the header's `⏸ PAUSED` badge and the paused rows read), the
/// moments before and after without it.
#[test]
fn the_past_shows_a_pause_that_was_in_force_then() {
    let root = root_with(DL_FLOW, &[("wf_dl_1", "hof_20260614_pp0001")]);
    let r = root.path();
    let mut rec = recorder(r);
    rec.rescan(false).unwrap();
    let before = now_us();
    std::thread::sleep(Duration::from_millis(20));
    pantheon(
        r,
        &["pause", "--all", "--reason", "incident in the past"],
        None,
    );
    rec.rescan(false).unwrap();
    let during = now_us();
    std::thread::sleep(Duration::from_millis(20));
    pantheon(r, &["resume", "--all"], None);
    rec.rescan(false).unwrap();
    let after = now_us();
    let paused_at = |at: i64| -> Vec<String> {
        let mut h = ReplayHandle::start(&Root::at(r), at, ModelOptions::default()).unwrap();
        let mut f = h.latest();
        while f.snapshot.loading.is_some() {
            f = next_frame(&mut h);
        }
        assert!(f.snapshot.paused.error.is_none(), "{:?}", f.snapshot.paused);
        f.snapshot
            .paused
            .pauses
            .iter()
            .map(|p| format!("{} {}", p.kind, p.reason))
            .collect()
    };
    assert!(paused_at(before).is_empty(), "before the pause");
    assert_eq!(paused_at(during), vec!["all incident in the past"]);
    assert!(paused_at(after).is_empty(), "after the resume");
}
