//! Regenerates `screenshots/*.png` and `screenshots/demo.gif` from the real render path: the demo's
//! simulation runs on a temp root up to a rich moment (a held dispatch, one held for its budget, a
//! deadlock, a vote under way, many workflows, the gods' usage), recorded by the real history
//! recorder as it goes; `console::views::draw` draws it on a `TestBackend`, each frame becomes an SVG
//! (`console::screenshot`) that `rsvg-convert` turns into a PNG; ImageMagick joins the recording's
//! frames into the GIF. Every picture is drawn at one fixed clock: [`SHOT_AFTER`] after the moment
//! the simulation stopped (the dead letters' supervisor passes fall before it, so nothing is dated
//! in the future). Run `scripts/screenshots.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use pantheon::Root;
use pantheon::engine::recorder::{self, Recorder};
use pantheon::testing::console::app::{App, Mode};
use pantheon::testing::console::keymap::{Action, OperatorAction, Pane};
use pantheon::testing::console::replay::{Cmd, ReplayHandle};
use pantheon::testing::console::screenshot::buffer_to_svg;
use pantheon::testing::console::theme::Theme;
use pantheon::testing::console::views;
use pantheon::testing::demo::{Sim, SimConfig};
use pantheon::testing::live::{LiveModel, ModelOptions, Snapshot};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The clock every picture is drawn at, after the moment the simulation stopped: past the dead
/// letters' supervisor passes ([`DEAD_PASSES`]), well within the demo's stale and overdue limits.
const SHOT_AFTER: chrono::Duration = chrono::Duration::seconds(90);

/// When, after the simulation stopped, the supervisor passes run that dead-letter two dispatches
/// (their step waits 15 s for an ack, delivered 3 times at most).
const DEAD_PASSES: [i64; 3] = [20, 40, 60];

const W: u16 = 150;
const H: u16 = 38;
const SEED: u64 = 1;

/// One screenshot: its file name and the steps that bring the console there.
type Shot = (&'static str, Box<dyn Fn(&mut App)>);

fn key(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

fn snapshot(root: &Path) -> Arc<Snapshot> {
    let model = LiveModel::open(Root::at(root), ModelOptions::default());
    let mut snap = (*model.snapshot()).clone();
    snap.root = PathBuf::from("/home/ops/pantheon");
    snap.watch = "notify".into();
    Arc::new(snap)
}

/// How much a moment shows: a held dispatch, one held for its budget, a deadlock and a vote under
/// way count most.
fn richness(s: &Snapshot) -> (usize, usize) {
    let c = s.counts(chrono::Utc::now());
    let voting = s.tracks.iter().any(|t| {
        t.board
            .as_ref()
            .is_some_and(|b| b.session.status == pantheon::engine::board::VOTING)
    });
    let budget_held = s.quarantine.dispatches.iter().any(|d| {
        pantheon::testing::live::ledger::held_for_budget(d.dispatch.held_because.as_deref())
    });
    (
        (c.held > 0) as usize + budget_held as usize + (c.deadlocks > 0) as usize + voting as usize,
        c.workflows,
    )
}

/// Two dispatches nobody acks in time, dead-lettered through the engine as `pantheon serve` would
/// at `t0` + [`DEAD_PASSES`] (pane 9 has something to show; the demo's own steps have no ack
/// deadline).
fn dead_letters(root: &Path, t0: chrono::DateTime<chrono::Utc>) {
    let def = "workflow:\n  id: escalation\n  version: \"1\"\n  steps:\n    - id: intake\n      god: iris\n    \
               - id: triage\n      god: hermes\n      ack_wait: 15s\n      max_deliveries: 3\n      \
               fallback_gods: [apollo]\n";
    std::fs::write(root.join("conductor/workflows/escalation.yaml"), def).unwrap();
    let c = pantheon::engine::Conductor::new(Root::at(root));
    for (wf, hid, summary) in [
        (
            "wf_pager_17",
            "hof_20260614_e5c017",
            "Checkout 500s since the 14:02 deploy",
        ),
        (
            "wf_pager_18",
            "hof_20260614_e5c018",
            "Refund queue stuck at 312 items",
        ),
    ] {
        let h = serde_json::json!({
            "handoff_id": hid, "workflow_id": wf, "from_god": "iris", "to_god": "hermes",
            "step": "intake", "routing": {"workflow_definition": "escalation"},
            "context": {"summary": summary, "decisions": ["page the on-call god"],
                        "artifacts": [], "open_questions": ["roll back?"], "gates_passed": []}
        });
        c.submit_handoff(&h).expect("submit");
    }
    for s in DEAD_PASSES {
        c.tick(t0 + chrono::Duration::seconds(s));
    }
    // One more after the passes, in a definition whose triage waits 10 minutes: it waits for its
    // ack, with a deadline (pane 2 shows `1/3 due 8m`).
    let paging = def
        .replace("id: escalation", "id: paging")
        .replace("ack_wait: 15s", "ack_wait: 10m");
    std::fs::write(root.join("conductor/workflows/paging.yaml"), paging).unwrap();
    let h = serde_json::json!({
        "handoff_id": "hof_20260614_e5c019", "workflow_id": "wf_pager_19", "from_god": "iris",
        "to_god": "hermes", "step": "intake", "routing": {"workflow_definition": "paging"},
        "context": {"summary": "Search latency p99 at 4 s", "decisions": ["page the on-call god"],
                    "artifacts": [], "open_questions": [], "gates_passed": []}
    });
    c.submit_handoff(&h).expect("submit");
}

fn sim(root: &Path) -> Sim {
    Sim::new(Root::at(root), SimConfig::interactive(SEED, 1.0)).expect("demo simulation")
}

/// Draws `app` at `w`x`h` and writes `out/name.png` (or the SVG without rsvg-convert).
fn shoot(app: &App, w: u16, h: u16, out: &Path, name: &str) -> PathBuf {
    let theme = Theme::plain(true);
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| views::draw(f, app, &theme)).unwrap();
    let svg_path = out.join(format!("{name}.svg"));
    std::fs::write(&svg_path, buffer_to_svg(term.backend().buffer())).unwrap();
    let png = out.join(format!("{name}.png"));
    let ok = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(&svg_path)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "rsvg-convert failed on {} (apt-get install librsvg2-bin)",
        svg_path.display()
    );
    if std::env::var_os("KEEP_SVG").is_none() {
        std::fs::remove_file(&svg_path).unwrap();
    }
    png
}

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "screenshots".into()),
    );
    std::fs::create_dir_all(&out).unwrap();
    // Find the richest moment of the first 90 demo seconds (checked every second), then run the
    // same seed again to it: the simulation is deterministic.
    let probe = tempfile::tempdir().unwrap();
    let mut s = sim(probe.path());
    let (mut best, mut best_tick) = ((0, 0), 0);
    for t in 1..=90 * pantheon::testing::demo::TICKS_PER_SECOND {
        s.step();
        if t % pantheon::testing::demo::TICKS_PER_SECOND == 0 {
            let r = richness(&snapshot(probe.path()));
            if r > best {
                (best, best_tick) = (r, t);
            }
        }
    }
    eprintln!("richest moment: tick {best_tick} ({best:?})");

    // The recording: the demo from its start to that moment, switching panes as an operator would,
    // recorded by the real history recorder (the replay picture goes back into it).
    let tmp = tempfile::tempdir().unwrap();
    let mut s = sim(tmp.path());
    let lease = recorder::lease_file(&Root::at(tmp.path())).expect("the history's lease");
    lease.try_lock().expect("the history's lease is free");
    let mut rec = Recorder::start(&Root::at(tmp.path()), lease)
        .expect("the history recorder")
        .0;
    // The moment the replay picture shows: two thirds of the way.
    let mut replay_at = None;
    let frames = tempfile::tempdir().unwrap();
    let every = (best_tick / 36).max(1);
    let panes = [
        Pane::Workflows,
        Pane::Inboxes,
        Pane::Bus,
        Pane::Workers,
        Pane::Board,
    ];
    let mut app = App::new(snapshot(tmp.path()), false, chrono::Utc::now());
    let mut n = 0;
    while s.ticks() < best_tick {
        for _ in 0..every {
            if s.ticks() < best_tick {
                s.step();
            }
        }
        rec.rescan(false).expect("the recorder records");
        if replay_at.is_none() && s.ticks() * 3 >= best_tick * 2 {
            replay_at = Some(chrono::Utc::now().timestamp_micros());
        }
        app.set_now(chrono::Utc::now());
        app.set_snapshot(snapshot(tmp.path()));
        app.clear_flash();
        app.dispatch(Action::GoPane(panes[(n / 8) % panes.len()]));
        shoot(&app, 120, 32, frames.path(), &format!("f{n:03}"));
        n += 1;
    }
    let gif = out.join("demo.gif");
    let magick = std::env::var("PANTHEON_CONVERT").unwrap_or_else(|_| "convert".into());
    let mut cmd = Command::new(&magick);
    cmd.args(["-delay", "40", "-loop", "0"])
        .arg(frames.path().join("f*.png"))
        .args(["-colors", "48", "-layers", "Optimize"])
        .arg(&gif);
    match cmd.status() {
        Ok(st) if st.success() => println!("{} ({n} frames)", gif.display()),
        _ => eprintln!(
            "ImageMagick's convert is missing or failed: no demo.gif (apt-get install imagemagick)"
        ),
    }

    // The screenshots, at the richest moment, all at one clock: `SHOT_AFTER` past now, the
    // dead letters' supervisor passes falling between.
    let t0 = chrono::Utc::now();
    let clock = t0 + SHOT_AFTER;
    dead_letters(tmp.path(), t0);
    rec.rescan(false).expect("the recorder records");
    let mut app = App::new(snapshot(tmp.path()), false, clock);
    let held_row = items_held_row(&app);
    let budget_row = budget_held_row(&app);
    let shots: Vec<Shot> = vec![
        (
            "1-workflows",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Workflows));
            }),
        ),
        (
            "1-workflow-detail",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Down);
                a.dispatch(Action::Open);
            }),
        ),
        (
            "2-inboxes",
            Box::new(move |a: &mut App| {
                a.dispatch(Action::Back);
                a.dispatch(Action::GoPane(Pane::Inboxes));
                a.dispatch(Action::Top);
                for _ in 0..held_row {
                    a.dispatch(Action::Down);
                }
            }),
        ),
        (
            "2-dispatch-detail",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Open);
            }),
        ),
        (
            "3-bus",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Back);
                a.dispatch(Action::GoPane(Pane::Bus));
            }),
        ),
        (
            "4-locks",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Locks));
            }),
        ),
        (
            "5-workers",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Workers));
            }),
        ),
        (
            "6-board",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Board));
            }),
        ),
        (
            "dialog-resolve",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Operator(OperatorAction::BoardResolve));
            }),
        ),
        (
            "dialog-abort",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Workflows));
                a.dispatch(Action::Operator(OperatorAction::Abort));
                for c in "superseded by v2".chars() {
                    key(a, KeyCode::Char(c));
                }
                key(a, KeyCode::Enter);
            }),
        ),
        (
            "dialog-ack",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Inboxes));
                a.dispatch(Action::Top);
                // The first dispatch that can be acked (a held one is approved or rejected).
                let rows = pantheon::testing::console::items::dispatches(
                    a.snapshot(),
                    &a.filter(Pane::Inboxes),
                );
                let first = rows.iter().position(|r| !r.held).unwrap_or(0);
                for _ in 0..first {
                    a.dispatch(Action::Down);
                }
                a.dispatch(Action::Operator(OperatorAction::Ack(None)));
            }),
        ),
        (
            "help",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Workflows));
                a.dispatch(Action::Help);
            }),
        ),
        (
            "7-attention",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Attention));
            }),
        ),
        (
            "8-journal",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Journal));
            }),
        ),
        (
            "9-dead-letters",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::DeadLetters));
                a.dispatch(Action::Top);
            }),
        ),
        (
            "9-dead-letter-detail",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Open);
            }),
        ),
        (
            "dialog-requeue",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Back);
                a.dispatch(Action::Operator(OperatorAction::Requeue));
                key(a, KeyCode::Enter);
            }),
        ),
        (
            "11-ledger",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Ledger));
                a.dispatch(Action::Top);
            }),
        ),
        (
            "dialog-budget-raise",
            Box::new(move |a: &mut App| {
                // The dispatch held for its budget, in pane 2; `p` asks for the raise.
                a.dispatch(Action::GoPane(Pane::Inboxes));
                a.dispatch(Action::Top);
                for _ in 0..budget_row {
                    a.dispatch(Action::Down);
                }
                a.dispatch(Action::Operator(OperatorAction::Approve));
            }),
        ),
    ];
    let mut drawn: Vec<(String, String)> = Vec::new();
    let mut shots = shots;
    // The replay: the console two thirds of the way through the recording, one change stepped
    // back, with its header bar and scrub line.
    let replay_root = Root::at(tmp.path());
    let replay = std::cell::RefCell::new(None::<ReplayHandle>);
    shots.push((
        "replay",
        Box::new(move |a: &mut App| {
            key(a, KeyCode::Esc);
            let at = replay_at.expect("a moment of the recording");
            let mut h = ReplayHandle::start(&replay_root, at, ModelOptions::default())
                .expect("the recorded history opens");
            a.dispatch(Action::GoPane(Pane::Workflows));
            a.show_frame(&h.latest());
            h.send(Cmd::Step(-1));
            a.show_frame(&next_frame(&mut h));
            a.clear_flash();
            *replay.borrow_mut() = Some(h);
        }),
    ));
    for (name, step) in shots.iter() {
        step(&mut app);
        // Each picture shows what its name says, and no two are the same: a step that did not
        // reach its dialog or pane stops the script instead of leaving a stale picture.
        if let Err(why) = shows(&app, name) {
            eprintln!(
                "error: {name}.png would not show its subject: {why}{}",
                app.shown_flash()
                    .as_ref()
                    .map(|f| format!(" (the console said: {})", f.text))
                    .unwrap_or_default()
            );
            std::process::exit(1);
        }
        // No flash left over from an earlier step.
        app.clear_flash();
        let screen = text_of(&app, W, H);
        if let Some((other, _)) = drawn.iter().find(|(_, s)| *s == screen) {
            eprintln!("error: {name}.png would be the same picture as {other}.png");
            std::process::exit(1);
        }
        drawn.push(((*name).to_owned(), screen));
        let png = if matches!(app.mode(), Mode::Help(_)) {
            // The whole reference in one picture: as tall as its rows.
            shoot(&app, W, H, frames.path(), "probe");
            let h = (H as usize + app.drawn().help_max.get()).min(400) as u16;
            shoot(&app, W, h, &out, name)
        } else {
            shoot(&app, W, H, &out, name)
        };
        println!("{}", png.display());
    }
}

/// The screen as text, for comparing two pictures.
fn text_of(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| views::draw(f, app, &Theme::plain(true)))
        .unwrap();
    term.backend()
        .buffer()
        .content
        .iter()
        .map(|c| c.symbol())
        .collect()
}

/// Whether `app` shows what the picture `name` says: its pane (`3-bus`), a detail (`-detail`), the
/// dialog (`dialog-ack`: a dialog open, titled for it) or the help.
fn shows(app: &App, name: &str) -> Result<(), String> {
    let dialog = |want: &str| -> Result<(), String> {
        let screen = text_of(app, W, H);
        let open = !matches!(app.mode(), Mode::Normal | Mode::Help(_));
        if open && screen.to_lowercase().contains(want) {
            Ok(())
        } else {
            Err(format!("no {want} dialog is open ({:?})", app.mode()))
        }
    };
    match name {
        "help" => matches!(app.mode(), Mode::Help(_))
            .then_some(())
            .ok_or_else(|| "the help is not open".to_owned()),
        "dialog-ack" => dialog("acknowledge as"),
        "dialog-abort" => dialog("abort"),
        "dialog-resolve" => dialog("resolve"),
        "dialog-requeue" => dialog("requeue"),
        "dialog-budget-raise" => dialog("budget"),
        "replay" => {
            let screen = text_of(app, W, H);
            match (&app.replay(), &app.mode()) {
                (Some(_), Mode::Normal) if screen.contains("REPLAY") => Ok(()),
                _ => Err(format!("the replay is not shown ({:?})", app.mode())),
            }
        }
        _ => {
            let number: usize = name
                .split('-')
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{name} names no pane"))?;
            if app.pane().number() != number {
                return Err(format!(
                    "pane {} is shown, not {number}",
                    app.pane().number()
                ));
            }
            if name.ends_with("-detail") != app.pane_state().detail {
                return Err(format!("detail open: {}", app.pane_state().detail));
            }
            if !matches!(app.mode(), Mode::Normal) {
                return Err(format!("a dialog is open: {:?}", app.mode()));
            }
            Ok(())
        }
    }
}

/// The replay's next frame after a command (waits at most 20 s).
fn next_frame(h: &mut ReplayHandle) -> Arc<pantheon::testing::console::replay::Frame> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), h.frames.changed())
            .await
            .expect("a frame from the replay")
            .unwrap()
    });
    h.frames.borrow_and_update().clone()
}

/// The row of the first dispatch held for its budget in the Inboxes list (the held ones come after
/// every god's inbox).
fn budget_held_row(app: &App) -> usize {
    let s = &app.snapshot();
    let rows = pantheon::testing::console::items::dispatches(s, &app.filter(Pane::Inboxes));
    rows.iter()
        .position(|r| {
            r.held
                && pantheon::testing::live::ledger::held_for_budget(
                    r.view.dispatch.held_because.as_deref(),
                )
        })
        .unwrap_or_else(|| {
            eprintln!("error: no dispatch is held for its budget at the chosen moment");
            std::process::exit(1)
        })
}

/// The row of the first held dispatch in the Inboxes list (they come after every god's inbox).
fn items_held_row(app: &App) -> usize {
    let s = &app.snapshot();
    if s.quarantine.dispatches.is_empty() {
        return 0;
    }
    s.inboxes.iter().map(|i| i.dispatches.len()).sum()
}
