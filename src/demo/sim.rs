//! The simulation core: one thread, one seeded RNG, discrete ticks.
//!
//! Every tick the gods, the workers of each track and the board orchestrator take their turn, in a
//! fixed order, through the public engine handles ([`Conductor`], [`Bus`]) only. Decisions depend on
//! the RNG and on what the engine answers; the engine's answers depend on the files, which only the
//! simulation writes in headless mode, so a seed fixes the whole event sequence. The two things that
//! depend on the wall clock (a lock's expiry, a worker's staleness) are waited for, never raced: the
//! simulation sleeps until the engine agrees before it acts on them. The third (an ack deadline
//! running out) is the supervisor pass's, whose acts stay out of the event log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::board::BoardSim;
use super::events::EventLog;
use super::gods::Gods;
use super::workers::Workers;
use crate::engine::{
    Bus, Conductor, Error, Origin, Result, Root, TrackName, time::format_ts, write_atomic,
    write_supervisor_heartbeat,
};

/// Ticks per demo second (at speed 1 a tick is 100 ms).
pub const TICKS_PER_SECOND: u64 = 10;

/// One demo second stands for this many seconds of a real pantheon: a worker beats every 3 demo
/// seconds (5 minutes), goes stale after 6 (10 minutes), a step takes 2–4 (an hour or so, roughly).
pub(crate) const COMPRESSION: f64 = 100.0;

/// How the simulation runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// 2.0 runs twice as fast in wall-clock time; the event sequence is the same.
    pub speed: f64,
    /// Ticks a held dispatch or a deadlock waits for a person before the simulation's stand-in
    /// operator approves it or force-unlocks; `None`: never.
    pub operator_patience: Option<u64>,
    /// Ticks a board waits at RESOLVING before the orchestrator resolves it.
    pub orchestrator_patience: u64,
}

impl SimConfig {
    /// Headless: nobody is at a console, so the stand-in operator acts after 4 demo seconds.
    pub fn headless(seed: u64, speed: f64) -> Self {
        Self {
            seed,
            speed,
            operator_patience: Some(4 * TICKS_PER_SECOND),
            orchestrator_patience: 3 * TICKS_PER_SECOND,
        }
    }

    /// With the console: the person at it approves, resolves and force-unlocks; the stand-in only
    /// steps in after two minutes so a demo left alone keeps moving.
    pub fn interactive(seed: u64, speed: f64) -> Self {
        Self {
            seed,
            speed,
            operator_patience: Some(120 * TICKS_PER_SECOND),
            orchestrator_patience: 30 * TICKS_PER_SECOND,
        }
    }

    /// Wall-clock length of `ticks`.
    pub fn real(&self, ticks: u64) -> Duration {
        Duration::from_secs_f64(ticks as f64 / (TICKS_PER_SECOND as f64 * self.speed))
    }

    /// The staleness threshold (docs/PROTOCOL.md §3.5: 10 minutes) on the demo's compressed, sped-up clock, never
    /// below one second: past the speed the disk keeps up with, ticks fall behind their schedule and a
    /// shorter threshold would call workers stale that beat on time.
    pub fn stale_after_secs(&self) -> f64 {
        (600.0 / COMPRESSION / self.speed).max(1.0)
    }
}

/// The two tracks whose workers the simulation runs: (name, track number, worker count).
pub(crate) const TRACKS: [(&str, u32, u32); 2] = [("checkout", 1, 3), ("search", 2, 2)];

/// The track whose board deliberates.
pub(crate) const BOARD_TRACK: &str = "checkout";

/// The whole simulated pantheon.
pub struct Sim {
    pub(crate) root: Root,
    pub(crate) conductor: Conductor,
    pub(crate) cfg: SimConfig,
    pub(crate) rng: StdRng,
    pub(crate) tick: u64,
    pub(crate) log: EventLog,
    pub(crate) gods: Gods,
    pub(crate) workers: Workers,
    pub(crate) board: BoardSim,
    /// When the simulation's supervisor pass first beat.
    started: Option<String>,
}

impl Sim {
    /// Initialises `root` (conductor layout, samples, the tracks' buses) and prepares the actors.
    pub fn new(root: Root, cfg: SimConfig) -> Result<Self> {
        let origin = Origin::new(Some("demo"), "demo");
        let conductor = Conductor::new(root.clone()).with_origin(origin.clone());
        conductor.init()?;
        let probe = root
            .workflows_dir()
            .join(format!("{}.yaml", super::gods::PROBE));
        if !probe.exists() {
            write_atomic(&root, &probe, super::gods::probe_yaml(cfg.speed).as_bytes())?;
        }
        let mut buses = Vec::new();
        for (name, no, count) in TRACKS {
            let bus = Bus::open(&root, &TrackName::parse(name)?).with_origin(origin.clone());
            bus.init()?;
            buses.push((bus, no, count));
        }
        let board_bus = Bus::open(&root, &TrackName::parse(BOARD_TRACK)?).with_origin(origin);
        Ok(Self {
            gods: Gods::new(&root)?,
            workers: Workers::new(buses),
            board: BoardSim::new(board_bus),
            rng: StdRng::seed_from_u64(cfg.seed),
            conductor,
            root,
            cfg,
            tick: 0,
            log: EventLog::default(),
            started: None,
        })
    }

    /// The root the simulation works on.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The event log so far.
    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Ticks run so far.
    pub fn ticks(&self) -> u64 {
        self.tick
    }

    /// Runs one tick: gods, then workers, then the board.
    pub fn step(&mut self) {
        if self.tick.is_multiple_of(TICKS_PER_SECOND) {
            self.supervise();
        }
        self.gods_tick();
        self.workers_tick();
        self.board_tick();
        self.tick += 1;
    }

    /// The supervisor's pass (what `pantheon serve` does), once a demo second: ack deadlines on the
    /// wall clock, so redeliveries and dead letters happen as on a real root. Its acts are not in the
    /// event log, which stays the same for a seed however fast the machine is.
    fn supervise(&mut self) {
        let now = chrono::Utc::now();
        let report = self.conductor.tick(now);
        for act in &report.dead_lettered {
            self.gods.released.insert(act.handoff_id.clone());
        }
        if self.tick.is_multiple_of(10 * TICKS_PER_SECOND) {
            let started = self.started.get_or_insert_with(|| format_ts(now)).clone();
            let _ = write_supervisor_heartbeat(
                &self.root,
                "demo",
                &started,
                report.next_deadline.as_deref(),
            );
        }
    }

    /// Runs ticks paced on the wall clock (tick k starts no earlier than k tick-lengths after the
    /// start) until `limit` ticks have run or `stop` is set. A late tick is never skipped.
    pub fn run(&mut self, limit: Option<u64>, stop: &AtomicBool) {
        let start = Instant::now();
        let first = self.tick;
        loop {
            if stop.load(Ordering::Relaxed) || limit.is_some_and(|n| self.tick >= n) {
                return;
            }
            let due = start + self.cfg.real(self.tick - first);
            loop {
                let now = Instant::now();
                if now >= due || stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep((due - now).min(Duration::from_millis(50)));
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            self.step();
        }
    }

    /// Records a refusal or failure of an engine call: the event names the act (deterministic), the
    /// full message goes to the log file.
    pub(crate) fn engine_error(&mut self, actor: &str, act: &str, e: &Error) {
        tracing::warn!(actor, act, error = %e, "demo: engine refused");
        let kind = match e {
            Error::Refused(_) | Error::NotFound(_) => "refused",
            _ => "engine_error",
        };
        self.log.at(self.tick, kind, actor).detail(act);
    }

    /// Waits (bounded by `max`) until `ready` holds; for conditions that follow the wall clock.
    pub(crate) fn wait_until(&self, max: Duration, mut ready: impl FnMut() -> bool) -> bool {
        let until = Instant::now() + max;
        loop {
            if ready() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/DEMO.md states each patience of both modes; the figures are these.
    #[test]
    fn demo_doc_states_the_patience_of_both_modes() {
        let doc = include_str!("../../docs/DEMO.md").replace('\n', " ");
        let secs = |t: u64| t / TICKS_PER_SECOND;
        let (i, h) = (SimConfig::interactive(1, 1.0), SimConfig::headless(1, 1.0));
        assert_eq!(secs(i.operator_patience.unwrap()), 120);
        assert!(doc.contains("deadlock after two minutes"));
        assert!(doc.contains(&format!(
            "RESOLVING after {} seconds",
            secs(i.orchestrator_patience)
        )));
        assert!(doc.contains(&format!(
            "stand-in acts after {} demo seconds and the orchestrator after {}.",
            secs(h.operator_patience.unwrap()),
            secs(h.orchestrator_patience)
        )));
    }

    #[test]
    fn staleness_threshold_compresses_ten_minutes_and_scales_with_speed_but_not_below_a_second() {
        assert_eq!(SimConfig::headless(1, 1.0).stale_after_secs(), 6.0);
        assert_eq!(SimConfig::headless(1, 3.0).stale_after_secs(), 2.0);
        assert_eq!(SimConfig::headless(1, 50.0).stale_after_secs(), 1.0);
    }

    #[test]
    fn tick_lengths_follow_the_speed() {
        let c = SimConfig::interactive(1, 2.0);
        assert_eq!(c.real(TICKS_PER_SECOND), Duration::from_millis(500));
        assert!(
            c.operator_patience.unwrap() > SimConfig::headless(1, 2.0).operator_patience.unwrap()
        );
    }

    #[test]
    fn stepping_the_same_seed_twice_gives_the_same_log_and_another_seed_another() {
        let run = |seed: u64| {
            let dir = tempfile::tempdir().unwrap();
            let mut sim = Sim::new(Root::at(dir.path()), SimConfig::headless(seed, 50.0)).unwrap();
            for _ in 0..120 {
                sim.step();
            }
            sim.log().events().to_vec()
        };
        let a = run(11);
        assert!(a.len() > 20);
        assert_eq!(a, run(11));
        assert_ne!(a, run(12));
    }
}
