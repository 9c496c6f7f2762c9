//! The simulated pantheon behind `pantheon demo`: gods run workflows, workers lock files and report on
//! the tracks' buses, a board deliberates — all through the same engine calls real agents make, on
//! real files in a root, so the console shows genuine protocol traffic and every operator action
//! really changes the run.
//!
//! - [`sim`]: the one simulation thread (seeded RNG, discrete ticks, wall-clock pacing).
//! - [`gods`], [`workers`], [`board`]: the actors.
//! - [`events`]: the deterministic event log; [`summary`]: what `--headless` prints.
//! - [`text`]: plausible words for the simulation (topics, summaries, decisions, remarks).

pub(crate) mod board;
pub(crate) mod events;
pub(crate) mod gods;
pub(crate) mod sim;
pub(crate) mod summary;
pub(crate) mod text;
pub(crate) mod workers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};

pub(crate) use sim::{Sim, SimConfig, TICKS_PER_SECOND};

use crate::engine::{Root, STALE_AFTER_ENV};
use crate::outcome::Outcome;

/// Options of `pantheon demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Pace factor: 2 runs twice as fast (ticks, short leases and the staleness threshold all
    /// scale); the sequence of events is the same at any speed.
    #[arg(long, value_name = "X", default_value_t = 1.0, value_parser = speed)]
    pub speed: f64,
    /// Seed of the simulation: the same seed gives the same sequence of events.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Run the simulation without the console and print a JSON summary.
    #[arg(long)]
    pub headless: bool,
    /// With --headless: how many demo seconds to simulate (default 60); wall time is SECS / speed.
    #[arg(long, value_name = "SECS", requires = "headless", value_parser = duration)]
    pub duration: Option<f64>,
    /// With --headless: include the whole event log in the summary (`event_log`).
    #[arg(long, requires = "headless")]
    pub events: bool,
    /// Read the console's configuration (keys, theme, time format, thresholds, `[notify]`) from
    /// PATH instead of $XDG_CONFIG_HOME/pantheon/config.toml, as `pantheon console --config` does.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// `--speed X`: a number from 0.05 to 100 (a usage error otherwise: exit 2).
fn speed(s: &str) -> Result<f64, crate::engine::Refusal> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.05..=100.0).contains(&x) => Ok(x),
        _ => Err("the pace is a number from 0.05 to 100 (2 runs twice as fast)".into()),
    }
}

/// `--duration SECS`: demo seconds, more than 0 and at most 86400 (a usage error otherwise).
fn duration(s: &str) -> Result<f64, crate::engine::Refusal> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 86_400.0 => Ok(x),
        _ => Err("a number of demo seconds above 0 and at most 86400".into()),
    }
}

/// Runs `pantheon demo`. `explicit_root` is `--root`; without it a fresh temporary root is created
/// (and kept), never `$PANTHEON_ROOT`, so a demo cannot mix with a real pantheon by accident.
pub(crate) fn run(args: DemoArgs, explicit_root: Option<&Path>) -> anyhow::Result<Outcome> {
    if !(args.speed.is_finite() && (0.05..=100.0).contains(&args.speed)) {
        bail!("--speed {} must be between 0.05 and 100", args.speed);
    }
    let duration = args.duration.unwrap_or(60.0);
    if !(duration.is_finite() && duration > 0.0 && duration <= 86_400.0) {
        bail!("--duration {duration} must be a number of seconds between 0 and 86400");
    }
    let cfg = if args.headless {
        SimConfig::headless(args.seed, args.speed)
    } else {
        SimConfig::interactive(args.seed, args.speed)
    };
    // The operator's config, read as the console reads it (a bad one stops here, with its line),
    // before any root is made.
    let config = if args.headless {
        None
    } else {
        Some(crate::console::config::load(args.config.as_deref())?)
    };
    // No terminal: say so before any root is made (a temporary one was left behind at each try).
    if !args.headless {
        crate::console::terminal::require_terminal(
            "`pantheon demo`",
            "run it in a terminal, or `pantheon demo --headless` for a JSON summary",
        )?;
    }
    let dir = demo_root(explicit_root)?;
    let mut root = Root::at(&dir);
    if std::env::var_os(STALE_AFTER_ENV).is_none() {
        // The demo compresses time: staleness shows within its minute (through the root's settings,
        // which the simulation and the console both read).
        if let Ok(d) = std::time::Duration::try_from_secs_f64(cfg.stale_after_secs()) {
            root.settings.stale_after = d;
        }
    }
    let mut sim = Sim::new(root.clone(), cfg)
        .with_context(|| format!("could not set up the demo root {}", dir.display()))?;
    // The demo records its history (docs/HISTORY.md), so its board can be replayed afterwards.
    let recorder = if root.settings.history.record {
        crate::engine::recorder::Background::start(&root, Box::new(|_| {})).ok()
    } else {
        None
    };

    if args.headless {
        let ticks = (duration * TICKS_PER_SECOND as f64).round() as u64;
        sim.run(Some(ticks), &AtomicBool::new(false));
        sim.settle();
        if let Some(r) = recorder {
            // Let the last changes reach the history before it stops.
            std::thread::sleep(crate::engine::recorder::GATHER * 5);
            r.stop();
        }
        let summary = sim.summary("headless", args.events);
        return Ok(Outcome::Json(serde_json::to_value(summary)?));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("demo-sim".into())
        .spawn(move || {
            sim.run(None, &flag);
            sim
        })
        .context("could not start the simulation thread")?;
    let console = crate::console::run::run(
        root,
        crate::console::run::ConsoleOptions::for_operator(
            config.unwrap_or_default(),
            crate::console::run::OperatorFlags {
                hints: true,
                ..Default::default()
            },
        ),
    );
    stop.store(true, Ordering::Relaxed);
    let joined = handle.join();
    if let Some(r) = recorder {
        r.stop();
    }
    let me = crate::console::terminal::program_name();
    // The replay starts where the demo's history does: its first recorded moment.
    let start = crate::engine::Timeline::open(&crate::engine::Root::at(&dir))
        .map(|t| crate::engine::time::format_ts(crate::engine::time::instant(t.first_us())))
        .unwrap_or_else(|_| "-10m".to_owned());
    println!(
        "pantheon demo: the root is kept at {0}\n  look again: {me} --root {0}\n  check it:   {me} --root {0} validate\n  replay it:  {me} --root {0} --at {start}   (the console in the past: 6 for the board, }} to its next phase, p to play, L back to live)\n  or as JSON: {me} --root {0} replay --from {start} --to now --track TRACK",
        dir.display()
    );
    console?;
    if joined.is_err() {
        bail!("the simulation thread panicked; see the console log");
    }
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

/// The root to run in: `--root` (created if missing), else a fresh kept temporary directory.
fn demo_root(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    match explicit {
        Some(p) => {
            std::fs::create_dir_all(p)
                .with_context(|| format!("could not create the demo root {}", p.display()))?;
            Ok(crate::engine::absolute_path(p))
        }
        None => Ok(tempfile::Builder::new()
            .prefix("pantheon-demo-")
            .tempdir()
            .context("could not create a temporary directory for the demo")?
            .keep()),
    }
}
