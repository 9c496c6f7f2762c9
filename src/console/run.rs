//! The event loop: terminal input (a reader thread), snapshots (the live model's watch channel) and
//! engine results meet in one `select!`; the screen is redrawn once per wake-up with the newest
//! snapshot only, and nothing runs while nothing happens.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{Event, KeyEventKind};
use tokio::sync::mpsc;

use crate::engine::{Root, WorkflowId};
use crate::live::runner::LiveHandle;
use crate::live::{ModelOptions, WatchMode};

use super::app::{App, Effect, FlashKind};
use super::engine_ops::EngineOperator;
use super::ops::{Op, Operator};
use super::replay::{Cmd as ReplayCmd, Frame, Note, ReplayHandle};
use super::terminal::TerminalGuard;
use super::theme::Theme;
use super::views;

/// How the console is started.
#[derive(Debug, Clone, Default)]
pub struct ConsoleOptions {
    /// Disable every action that changes files.
    pub read_only: bool,
    /// Poll at this interval instead of using file notifications.
    pub poll: Option<Duration>,
    /// Say in one line what to do the first time a held dispatch, a deadlock or a vote appears.
    pub hints: bool,
    /// The operator's configuration (keys, theme, times, thresholds, notifications).
    pub config: super::config::Config,
    /// Bell, desktop notification and hook for new attention items (the operator's flags over the
    /// operator's config; never from the root).
    pub notify: super::notify::NotifySettings,
    /// Who the journal records for the console's acts: `--actor`, else the login name.
    pub actor: String,
    /// Open in the past: the moment (microseconds) the replay starts at (`pantheon --at TS`).
    pub at: Option<i64>,
}

/// The operator's command-line flags that the console and the demo share.
#[derive(Debug, Clone, Default)]
pub struct OperatorFlags {
    pub read_only: bool,
    /// Poll every this many milliseconds instead of file notifications.
    pub poll_ms: Option<u64>,
    pub hints: bool,
    pub bell: bool,
    pub notify_desktop: Option<super::notify::Desktop>,
    pub on_attention: Option<String>,
    pub notify_every: Option<u64>,
    /// The global `--actor` (checked by the command line).
    pub actor: Option<String>,
}

impl ConsoleOptions {
    /// The options of a console started by the operator: the operator's config (keys, theme, time
    /// format, thresholds, `[notify]`) with the operator's flags winning over it. Nothing comes from
    /// the root. `pantheon console` and `pantheon demo` both start this way.
    pub fn for_operator(config: super::config::Config, flags: OperatorFlags) -> Self {
        let notify = super::notify::NotifySettings {
            bell: flags.bell || config.notify.bell,
            desktop: flags.notify_desktop.or(config
                .notify
                .desktop
                .then_some(super::notify::Desktop::Osc9)),
            on_attention: flags
                .on_attention
                .or_else(|| config.notify.on_attention.clone())
                .filter(|c| !c.trim().is_empty()),
            min_interval: Duration::from_secs(
                flags.notify_every.unwrap_or(config.notify.rate_limit_secs),
            ),
            ..Default::default()
        };
        Self {
            actor: super::engine_ops::operator_name(flags.actor.as_deref()),
            read_only: flags.read_only,
            poll: flags.poll_ms.map(|ms| Duration::from_millis(ms.max(50))),
            hints: flags.hints,
            config,
            notify,
            at: None,
        }
    }
}

/// Where the console writes its log: `$PANTHEON_LOG`, else `$XDG_STATE_HOME/pantheon/console.log`,
/// else `~/.local/state/pantheon/console.log`. Never inside the root (the watcher would see it).
pub(crate) fn log_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PANTHEON_LOG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| crate::engine::home_dir().map(|h| h.join(".local").join("state")))?;
    Some(state.join("pantheon").join("console.log"))
}

fn init_logging() -> Option<PathBuf> {
    let path = log_path()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok()?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("PANTHEON_LOG_LEVEL")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(path)
}

/// What finished in the background.
enum Done {
    /// Boxed: an engine result is large beside a preview.
    Op(Box<(Op, Result<super::ops::Done, crate::engine::Error>)>),
    Preview(
        WorkflowId,
        Result<crate::engine::CleanupResult, crate::engine::Error>,
    ),
}

/// Opens the console on `root` until the operator quits.
pub(crate) fn run(root: Root, opts: ConsoleOptions) -> anyhow::Result<()> {
    if !root.dir.is_dir() {
        anyhow::bail!(
            "{} is not a directory; create a root with `pantheon --root {} init`, or pass --root / set PANTHEON_ROOT",
            root.dir.display(),
            root.dir.display()
        );
    }
    let log = init_logging();
    // A long-lived process: parse each definition and rule file once per version, not per submit.
    crate::engine::enable_yaml_cache();
    tracing::info!(root = %root.dir.display(), ?opts, "console starting");
    let mode = match opts.poll {
        Some(d) => WatchMode::Poll(d),
        None => WatchMode::Notify,
    };
    let root = super::config::apply_thresholds(root, &opts.config.thresholds);
    let started = Instant::now();
    let thresholds = &opts.config.thresholds;
    let model = ModelOptions {
        overdue_after: thresholds.overdue_after(),
        held_after: thresholds.held_after(),
        ..ModelOptions::default()
    };
    // The past is opened before the terminal is taken, so a moment the history does not hold is
    // refused with the engine's words on stderr.
    let replay = match opts.at {
        Some(at) => Some(ReplayHandle::start(&root, at, model).map_err(|e| anyhow::anyhow!(e))?),
        None => None,
    };
    let live = LiveHandle::start_with_sources(root.clone(), mode, model, &opts.config.sources);
    tracing::info!(ready_ms = started.elapsed().as_millis() as u64, mode = %live.mode, "model ready");
    let past = Past {
        root: root.clone(),
        model,
        handle: replay,
    };
    let operator: Arc<dyn Operator> = Arc::new(EngineOperator::acting_as(root, &opts.actor));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("starting the event loop")?;
    let mut guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut app = App::new(live.latest(), opts.read_only, chrono::Utc::now());
    if opts.hints {
        app.show_first_time_hints();
        app.first_time_hints();
    }
    app.configure(&opts.config);
    app.set_actor(opts.actor.clone());
    if let Some(h) = &past.handle {
        app.show_frame(&h.latest());
    }
    let theme = Theme::with_palette(opts.config.palette);
    if let Some(why) = &live.fallback_reason {
        app.flash(
            FlashKind::Error,
            format!("file notifications unavailable ({why}); polling every second"),
        );
    }
    let sources = Sources {
        live,
        past,
        operator,
        theme,
        notifier: super::notify::Notifier::new(opts.notify.clone()),
    };
    let result = rt.block_on(event_loop(&mut guard, &mut app, sources));
    drop(guard);
    if let Err(e) = &result {
        tracing::error!("console stopped: {e:#}");
        if let Some(p) = log {
            eprintln!("see the log at {}", p.display());
        }
    }
    let _ = std::io::stdout().flush();
    result
}

fn spawn_input(tx: mpsc::UnboundedSender<Event>) {
    std::thread::Builder::new()
        .name("pantheon-input".into())
        .spawn(move || {
            while let Ok(ev) = crossterm::event::read() {
                if tx.send(ev).is_err() {
                    return;
                }
            }
        })
        .expect("spawning the input thread");
}

/// The replay, when the console shows the past, and what it needs to open one.
struct Past {
    root: Root,
    model: ModelOptions,
    handle: Option<ReplayHandle>,
}

/// What the replay sent.
enum FromPast {
    Frame(Arc<Frame>),
    /// A note, with the frame it came with when the console has not drawn that yet.
    Note(Note, Option<Arc<Frame>>),
    Stopped,
}

impl Past {
    /// The replay's next frame or note; never, while the console is live.
    async fn next(&mut self) -> FromPast {
        let Some(h) = &mut self.handle else {
            return std::future::pending().await;
        };
        tokio::select! {
            changed = h.frames.changed() => match changed {
                Ok(()) => FromPast::Frame(h.frames.borrow_and_update().clone()),
                Err(_) => FromPast::Stopped,
            },
            note = h.notes.recv() => match note {
                // The frame a note speaks of was sent before it: both are drawn together.
                Some(n) => {
                    let fresh = h.frames.has_changed().unwrap_or(false);
                    FromPast::Note(n, fresh.then(|| h.frames.borrow_and_update().clone()))
                }
                None => FromPast::Stopped,
            },
        }
    }

    /// Opens the past at `at` (or moves the open replay there), moves it, or leaves it.
    fn apply(&mut self, effect: Effect, app: &mut App, live: &LiveHandle) {
        match effect {
            Effect::ReplayAt(at) => match &self.handle {
                Some(h) => h.send(ReplayCmd::Seek(at)),
                None => match ReplayHandle::start(&self.root, at, self.model) {
                    Ok(h) => {
                        app.show_frame(&h.latest());
                        self.handle = Some(h);
                    }
                    Err(e) => app.flash(FlashKind::Error, e.to_string()),
                },
            },
            Effect::Replay(cmd) => {
                if let Some(h) = &self.handle {
                    h.send(cmd);
                }
            }
            Effect::Live => {
                // Dropping the handle stops its thread and removes its scratch root.
                self.handle = None;
                app.back_to_live(live.latest());
            }
            _ => {}
        }
    }
}

/// What the event loop runs with, besides the terminal and the console's state.
struct Sources {
    live: LiveHandle,
    past: Past,
    operator: Arc<dyn Operator>,
    theme: Theme,
    notifier: super::notify::Notifier,
}

/// Starts the `--on-attention` hook, if there is one: it runs in one background thread, one run at
/// a time, bounded (see `hook`); each run's report comes back on `tx` for `:messages`.
fn start_hook(
    app: &mut App,
    notifier: &super::notify::Notifier,
    tx: mpsc::UnboundedSender<super::hook::HookReport>,
) -> Option<super::hook::HookRunner> {
    let cmd = notifier.settings.on_attention.as_ref()?;
    // A held item's line carries a fresh pair of approval links when a listener is recorded (a
    // read-only console mints none: minting writes into the root).
    let enrich = (!app.read_only()).then(|| {
        let root = crate::engine::Root::at(&app.snapshot().root);
        let key = crate::approvals::link_key(&root);
        if let Err(e) = &key {
            tracing::warn!("no approval links in the hook's lines: {e}");
        }
        crate::approvals::hook_links(root, key.ok())
    });
    match super::hook::HookRunner::start_enriched(
        cmd.clone(),
        super::hook::HOOK_TIMEOUT,
        enrich,
        move |r| {
            let _ = tx.send(r);
        },
    ) {
        Ok(h) => Some(h),
        Err(e) => {
            app.flash(
                FlashKind::Error,
                format!("--on-attention could not start: {e}"),
            );
            None
        }
    }
}

/// Looks at the items (when the files changed, and once a second: ages cross thresholds).
fn look_at_items(app: &mut App, notifier: &mut super::notify::Notifier) {
    app.set_wall(chrono::Utc::now());
    if app.replay().is_none() {
        app.sample_depth();
    }
    // The past's items were news then, not now: nothing is announced in replay.
    if notifier.settings.any() && app.replay().is_none() {
        notifier.observe(&app.attention_all(), Instant::now(), app.now());
    }
}

/// Sends the notifications that are due (to the terminal and the hook); true if there were some.
fn notify_due(
    guard: &mut TerminalGuard,
    app: &mut App,
    notifier: &mut super::notify::Notifier,
    hook: Option<&super::hook::HookRunner>,
) -> anyhow::Result<bool> {
    let Some(batch) = notifier.due(Instant::now()) else {
        return Ok(false);
    };
    let text = super::notify::summary(&batch);
    tracing::info!(items = batch.len(), "notifying: {text}");
    app.remember(FlashKind::Info, format!("▲ notified: {text}"));
    let bytes = super::notify::terminal_bytes(&notifier.settings, &batch);
    if !bytes.is_empty() {
        let out = guard.terminal.backend_mut();
        out.write_all(&bytes).context("writing a notification")?;
        out.flush().context("writing a notification")?;
    }
    if let Some(h) = hook {
        h.submit(batch);
    }
    Ok(true)
}

/// Draws one frame.
fn draw(guard: &mut TerminalGuard, app: &mut App, theme: &Theme) -> anyhow::Result<()> {
    app.set_wall(chrono::Utc::now());
    let size = guard.terminal.size()?;
    app.set_page(size.height.saturating_sub(views::CHROME_ROWS + 3).max(1) as usize);
    // DEC mode 2026 (synchronized output): the terminal shows the frame whole, never half
    // drawn; a terminal without it ignores the unknown mode.
    crossterm::queue!(
        guard.terminal.backend_mut(),
        crossterm::terminal::BeginSynchronizedUpdate
    )
    .context("drawing")?;
    guard
        .terminal
        .draw(|f| views::draw(f, app, theme))
        .context("drawing")?;
    crossterm::execute!(
        guard.terminal.backend_mut(),
        crossterm::terminal::EndSynchronizedUpdate
    )
    .context("drawing")?;
    Ok(())
}

/// The instant time alone next brings an attention item (a lease running out, an ack going
/// overdue, a worker going stale): the loop wakes then, not on the next tick.
fn next_moment(app: &App) -> Option<tokio::time::Instant> {
    super::moments::next(app.snapshot(), chrono::Utc::now())
        .filter(|_| app.replay().is_none())
        .map(|at| {
            let wait = (at - chrono::Utc::now()).to_std().unwrap_or_default();
            tokio::time::Instant::now() + wait
        })
}

/// A terminal event: the effects the console asks for, and whether to draw again.
fn on_event(
    guard: &mut TerminalGuard,
    app: &mut App,
    ev: Option<Event>,
) -> anyhow::Result<(Vec<Effect>, bool)> {
    Ok(match ev {
        Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
            test_panic_on(&k);
            (app.on_key(k), true)
        }
        Some(Event::Mouse(m)) => (app.on_mouse(m, Instant::now()), true),
        Some(Event::Paste(text)) => {
            app.on_paste(&text);
            (Vec::new(), true)
        }
        Some(Event::Resize(..)) => {
            guard.terminal.autoresize()?;
            (Vec::new(), true)
        }
        Some(_) => (Vec::new(), false),
        None => anyhow::bail!("the terminal input closed"),
    })
}

/// What the replay sent.
fn from_past(app: &mut App, s: &mut Sources, from: FromPast) {
    match from {
        FromPast::Frame(f) => app.show_frame(&f),
        FromPast::Note((error, text), frame) => {
            if let Some(f) = frame {
                app.show_frame(&f);
            }
            let kind = if error {
                FlashKind::Error
            } else {
                FlashKind::Info
            };
            app.flash(kind, text);
        }
        FromPast::Stopped => {
            s.past.handle = None;
            app.back_to_live(s.live.latest());
            app.flash(FlashKind::Error, "the replay stopped; back to live");
        }
    }
}

/// A report of the `--on-attention` hook, kept for `:messages` (a failure also flashed).
fn hook_reported(app: &mut App, r: super::hook::HookReport) {
    let line = r.line();
    if r.ok() {
        tracing::info!("{line}");
        app.remember(FlashKind::Info, line);
    } else {
        tracing::warn!("{line}");
        app.flash(FlashKind::Error, line);
    }
}

async fn event_loop(
    guard: &mut TerminalGuard,
    app: &mut App,
    mut s: Sources,
) -> anyhow::Result<()> {
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    spawn_input(in_tx);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
    let (hook_tx, mut hook_rx) = mpsc::unbounded_channel::<super::hook::HookReport>();
    let hook = start_hook(app, &s.notifier, hook_tx);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    // Items are looked at when the files change and once a second (ages cross thresholds).
    let mut look = true;
    loop {
        if look {
            look_at_items(app, &mut s.notifier);
            look = false;
        }
        dirty |= notify_due(guard, app, &mut s.notifier, hook.as_ref())?;
        if dirty {
            draw(guard, app, &s.theme)?;
            dirty = false;
        }
        let moment = next_moment(app);
        let mut effects = Vec::new();
        tokio::select! {
            () = tokio::time::sleep_until(moment.unwrap_or_else(tokio::time::Instant::now)), if moment.is_some() => {
                dirty = true;
                look = true;
            },
            ev = in_rx.recv() => {
                let redraw;
                (effects, redraw) = on_event(guard, app, ev)?;
                dirty |= redraw;
            },
            changed = s.live.snapshots.changed() => {
                if changed.is_err() {
                    anyhow::bail!("the live model stopped");
                }
                // Only the newest snapshot is kept by the channel; a burst is drawn once. In
                // replay the present waits here for the operator's way back.
                let snap = s.live.snapshots.borrow_and_update().clone();
                if app.replay().is_none() {
                    app.set_snapshot(snap);
                    dirty = true;
                    look = true;
                }
            },
            from = s.past.next() => {
                from_past(app, &mut s, from);
                dirty = true;
            },
            Some(r) = hook_rx.recv() => {
                hook_reported(app, r);
                dirty = true;
            },
            Some(done) = done_rx.recv() => {
                match done {
                    Done::Op(done) => effects = app.op_finished(&done.0, done.1),
                    Done::Preview(wf, r) => app.cleanup_previewed(wf, r),
                }
                dirty = true;
            },
            _ = tick.tick() => {
                // Relative times and flash expiry move once a second.
                app.expire_flash(Instant::now());
                dirty = true;
                look = true;
            },
        }
        for e in effects {
            if apply(guard, app, &mut s, &done_tx, e)? {
                return Ok(());
            }
        }
    }
}

/// Carries out one effect the console asked for; true to quit.
fn apply(
    guard: &mut TerminalGuard,
    app: &mut App,
    s: &mut Sources,
    done_tx: &mpsc::UnboundedSender<Done>,
    e: Effect,
) -> anyhow::Result<bool> {
    match e {
        Effect::Quit => return Ok(true),
        Effect::Rescan => s.live.rescan(),
        Effect::Execute(op) => {
            let (tx, operator) = (done_tx.clone(), s.operator.clone());
            tracing::info!(op = ?op, "operator action");
            tokio::task::spawn_blocking(move || {
                let r = operator.execute(&op);
                if let Err(e) = &r {
                    tracing::warn!(op = ?op, "refused: {e}");
                }
                let _ = tx.send(Done::Op(Box::new((*op, r))));
            });
        }
        Effect::Clipboard(text) => {
            // Straight to the terminal: ratatui's buffer has no place for it.
            let out = guard.terminal.backend_mut();
            out.write_all(super::clipboard::osc52(&text).as_bytes())
                .and_then(|()| out.flush())
                .context("writing to the terminal")?;
        }
        Effect::Mouse(on) => {
            let out = guard.terminal.backend_mut();
            if on {
                crossterm::execute!(out, crossterm::event::EnableMouseCapture)?;
            } else {
                crossterm::execute!(out, crossterm::event::DisableMouseCapture)?;
            }
        }
        e @ (Effect::ReplayAt(_) | Effect::Replay(_) | Effect::Live) => {
            s.past.apply(e, app, &s.live);
        }
        Effect::PreviewCleanup(wf) => {
            let (tx, operator) = (done_tx.clone(), s.operator.clone());
            tokio::task::spawn_blocking(move || {
                let r = operator.cleanup_preview(&wf);
                let _ = tx.send(Done::Preview(wf, r));
            });
        }
    }
    Ok(false)
}

/// Test hook: panics when the key named by `PANTHEON_TEST_PANIC_ON_KEY` (one character) is pressed, so
/// the end-to-end tests can check that a panic still gives the terminal back.
fn test_panic_on(k: &crossterm::event::KeyEvent) {
    if let Some(want) = std::env::var_os("PANTHEON_TEST_PANIC_ON_KEY")
        && let crossterm::event::KeyCode::Char(c) = k.code
        && want.to_str().and_then(|w| w.chars().next()) == Some(c)
    {
        panic!("test panic requested with PANTHEON_TEST_PANIC_ON_KEY={c}");
    }
}
