//! What a demo run did: counts from the event log, and what the engine reads on disk at the end
//! (stale workers, the messages on each bus), printed by `pantheon demo --headless`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use super::board::SessionRecord;
use super::events::SimEvent;
use super::gods::WfOutcome;
use super::sim::{Sim, TICKS_PER_SECOND};
use crate::engine::{Bus, TrackName, queue::Filter};

/// The summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub root: String,
    pub seed: u64,
    pub speed: f64,
    /// `headless` or `console`.
    pub mode: String,
    pub ticks: u64,
    pub ticks_per_second: u64,
    /// Simulated seconds (ticks / ticks_per_second); wall time is this divided by `speed`.
    pub demo_seconds: f64,
    /// The staleness threshold in effect in this process (PANTHEON_STALE_AFTER_SECS).
    pub stale_after_secs: f64,
    pub operator: OperatorSummary,
    pub events_total: usize,
    /// Events of the simulation's log by kind.
    pub event_counts: BTreeMap<String, usize>,
    pub workflows: WorkflowSummary,
    /// Rejected dispatches re-dispatched to a fallback god.
    pub reroutes: usize,
    /// Dispatches held in `_quarantine` for approval.
    pub held_dispatches: usize,
    /// Dispatches in the dead letters at the end (the probe's unanswered pages), read from disk.
    pub dead_letters: usize,
    pub board_sessions: Vec<SessionRecord>,
    /// Workers the engine reports stale at the end.
    pub stale_workers: Vec<StaleWorker>,
    pub deadlocks: DeadlockSummary,
    pub locks: LockSummary,
    /// Messages on each track's bus at the end, by type (read through the engine).
    pub messages: BTreeMap<String, BTreeMap<String, usize>>,
    /// The whole event log (with `--events`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_log: Option<Vec<SimEvent>>,
}

/// What the operator did, and what the simulation's stand-in operator did in their place.
#[derive(Debug, Clone, Serialize)]
pub struct OperatorSummary {
    pub note: String,
    pub approvals_by_sim_operator: usize,
    pub force_unlocks_by_sim_operator: usize,
    pub approvals_by_operator: usize,
    pub rejections_by_operator: usize,
    pub board_resolved_by_orchestrator: usize,
    pub board_resolved_by_operator: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkflowSummary {
    pub started: usize,
    pub completed: usize,
    pub failed: usize,
    pub active: usize,
    pub completed_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StaleWorker {
    pub track: String,
    pub worker_id: String,
    pub status: String,
    pub last_heartbeat: Option<String>,
    pub last_seen: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadlockSummary {
    /// Cycles the bus's deadlock detection reported.
    pub detected: usize,
    /// Deadlocks broken by a force-unlock (by the operator or the stand-in).
    pub broken: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct LockSummary {
    pub acquired: usize,
    pub released: usize,
    pub expired_taken_over: usize,
    /// Locks a worker found taken away (force-released or expired) and retried after.
    pub lost: usize,
}

impl Sim {
    /// Workers the simulation made silent and that have not come back.
    fn silent_workers(&self) -> BTreeSet<String> {
        let mut s = BTreeSet::new();
        for e in self.log.events() {
            match e.kind.as_str() {
                "worker_silent" => {
                    s.insert(e.actor.clone());
                }
                "worker_returned" => {
                    s.remove(&e.actor);
                }
                _ => {}
            }
        }
        s
    }

    /// Waits (bounded by the threshold) until the engine sees every silent worker as stale: a run
    /// that lagged behind its schedule may end a moment before the threshold has really passed.
    pub fn settle(&self) {
        let silent = self.silent_workers();
        if silent.is_empty() {
            return;
        }
        let max = Duration::from_secs_f64(self.cfg.stale_after_secs() + 1.0);
        let buses: Vec<Bus> = self
            .workers
            .track_names()
            .iter()
            .filter_map(|t| TrackName::parse(t).ok())
            .map(|t| Bus::open(&self.root, &t))
            .collect();
        self.wait_until(max, || {
            let stale: BTreeSet<String> = buses
                .iter()
                .flat_map(|b| b.workers().unwrap_or_default())
                .filter(|w| w.stale)
                .map(|w| w.entry.worker_id)
                .collect();
            silent.is_subset(&stale)
        });
    }

    /// The summary of the run so far.
    pub fn summary(&self, mode: &str, with_log: bool) -> Summary {
        let log = &self.log;
        let wfs = &self.gods.workflows;
        let count = |o: WfOutcome| wfs.values().filter(|w| w.outcome == o).count();
        let mut stale_workers = Vec::new();
        let mut messages = BTreeMap::new();
        for track in self.workers.track_names() {
            let Ok(name) = TrackName::parse(&track) else {
                continue;
            };
            let bus = Bus::open(&self.root, &name);
            for w in bus.workers().unwrap_or_default() {
                if w.stale {
                    stale_workers.push(StaleWorker {
                        track: track.clone(),
                        worker_id: w.entry.worker_id.clone(),
                        status: w.entry.status.as_str().to_owned(),
                        last_heartbeat: w.entry.last_heartbeat.clone(),
                        last_seen: w.last_seen.clone(),
                    });
                }
            }
            let mut by_type: BTreeMap<String, usize> = BTreeMap::new();
            if let Ok(r) = bus.read(&Filter::default(), None) {
                for m in r.messages {
                    *by_type.entry(m.kind).or_insert(0) += 1;
                }
            }
            messages.insert(track, by_type);
        }
        Summary {
            root: self.root.dir.display().to_string(),
            seed: self.cfg.seed,
            speed: self.cfg.speed,
            mode: mode.to_owned(),
            ticks: self.tick,
            ticks_per_second: TICKS_PER_SECOND,
            demo_seconds: self.tick as f64 / TICKS_PER_SECOND as f64,
            stale_after_secs: self.root.settings.stale_after.as_secs_f64(),
            operator: OperatorSummary {
                note: match mode {
                    "headless" => "nobody was at a console: the simulation's stand-in operator \
                                   approved held dispatches and force-unlocked deadlocks after \
                                   waiting, and the board's orchestrator resolved sessions left at \
                                   RESOLVING"
                        .to_owned(),
                    _ => "the person at the console acted; the stand-in operator only stepped in \
                          after two minutes of nobody acting"
                        .to_owned(),
                },
                approvals_by_sim_operator: log.count("sim_operator_approved"),
                force_unlocks_by_sim_operator: log.count("sim_operator_force_unlock"),
                approvals_by_operator: log.count("operator_approved"),
                rejections_by_operator: log.count("operator_rejected"),
                board_resolved_by_orchestrator: self
                    .board
                    .sessions
                    .iter()
                    .filter(|s| s.resolved_by.as_deref() == Some(super::board::ORCHESTRATOR))
                    .count(),
                board_resolved_by_operator: self
                    .board
                    .sessions
                    .iter()
                    .filter(|s| {
                        s.resolved_by
                            .as_deref()
                            .is_some_and(|b| b != super::board::ORCHESTRATOR)
                    })
                    .count(),
            },
            events_total: log.events().len(),
            event_counts: log.counts(),
            workflows: WorkflowSummary {
                started: wfs.len(),
                completed: count(WfOutcome::Completed),
                failed: count(WfOutcome::Failed),
                active: count(WfOutcome::Active),
                completed_ids: wfs
                    .iter()
                    .filter(|(_, w)| w.outcome == WfOutcome::Completed)
                    .map(|(id, _)| id.clone())
                    .collect(),
            },
            reroutes: log.count("rerouted"),
            held_dispatches: log.count("dispatch_held"),
            dead_letters: crate::engine::list_dead(&self.root).dead.len(),
            board_sessions: self.board.sessions.clone(),
            stale_workers,
            deadlocks: DeadlockSummary {
                detected: log.count("deadlock_detected"),
                broken: log.count("deadlock_broken"),
            },
            locks: LockSummary {
                acquired: log.count("lock_acquired"),
                released: log.count("lock_released"),
                expired_taken_over: log.count("expired_lock_taken_over"),
                lost: log.count("lock_lost"),
            },
            messages,
            event_log: with_log.then(|| log.events().to_vec()),
        }
    }
}
