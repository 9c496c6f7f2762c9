//! Workers on the tracks' message buses, following the worker lifecycle: take a task, lock its files
//! (in sorted order, so ordinary tasks never deadlock), post `PROGRESS` and heartbeats, post `BLOCKED`
//! when a file is held by another, complete with `TASK_COMPLETE` (naming the tasks it `unblocks`) or
//! fail with `TASK_FAILED` and retry.
//!
//! Two scripted anomalies recur: on the first track two workers take the same two files in opposite
//! order (a real deadlock, broken by an operator's force-unlock; the worker whose lock was taken
//! notices and retries), and on the second a worker goes silent holding a short lease (it turns
//! STALE, its lock expires and another worker takes the file over).

use std::collections::VecDeque;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use super::sim::Sim;
use super::text;
use crate::engine::{
    Bus, DEFAULT_LOCK_TTL, Error, Heartbeat, LockKey, MessageType, OPERATOR, WorkerId,
};

/// Ticks between heartbeats of a running or blocked worker (5 protocol minutes).
const BEAT_EVERY: u64 = 30;
/// Ticks between retries of a refused lock.
const RETRY_LOCK: u64 = 3;
/// Ticks between deadlock scenarios, and between silent-worker scenarios.
const DEADLOCK_EVERY: u64 = 600;
const CRASH_EVERY: u64 = 750;
/// Lease of the lock a silent worker leaves behind (5 protocol minutes), and how long it stays silent.
const CRASH_TTL: u64 = 30;
const SILENT_FOR: u64 = 400;

/// Files the tasks of each track touch.
const POOLS: [&[&str]; 2] = [
    &[
        "src/checkout/session.ts",
        "src/checkout/webhook.ts",
        "src/lib/stripe.ts",
        "src/types/billing.ts",
        "src/components/checkout-button.tsx",
    ],
    &[
        "src/search/index.ts",
        "src/search/ranker.ts",
        "src/search/query.ts",
        "src/types/search.ts",
    ],
];
/// The two files of the deadlock scenario (first track).
const DEADLOCK_FILES: [&str; 2] = ["src/checkout/cart.ts", "src/checkout/pricing.ts"];
/// The file of the silent-worker scenario (second track).
const CRASH_FILE: &str = "data/search/index.manifest";

#[derive(Debug, Clone, PartialEq)]
enum TaskKind {
    Normal,
    Deadlock,
    Crash,
    Recovery,
}

#[derive(Debug, Clone)]
struct Task {
    id: String,
    files: Vec<String>,
    work: u64,
    fail: bool,
    attempt: u32,
    kind: TaskKind,
    /// Ticks between taking one lock and the next.
    gap: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Idle {
        until: u64,
    },
    Locking {
        next_at: u64,
        idx: usize,
    },
    Working {
        started: u64,
        until: u64,
        reported: u32,
    },
    /// Went silent (crashed): no beats, no messages, locks left behind.
    Silent {
        back_at: u64,
    },
}

#[derive(Debug, Clone)]
struct Worker {
    id: String,
    state: State,
    task: Option<Task>,
    held: Vec<String>,
    blocked_on: Option<String>,
    /// Kept free for a scenario: takes no new task from the backlog.
    reserved: bool,
    progress: u32,
    last_beat: u64,
}

#[derive(Debug, Clone)]
struct DeadlockRun {
    /// Workers picked so far (the first two to be free).
    picks: Vec<usize>,
    a: usize,
    b: usize,
    running: bool,
    blocked_at: Option<u64>,
    forced_by_sim: bool,
    broken: bool,
}

#[derive(Debug, Clone)]
struct CrashRun {
    worker: Option<usize>,
    running: bool,
    recovery_at: Option<u64>,
}

/// One track's workers and backlog.
struct TrackSim {
    bus: Bus,
    name: String,
    no: u32,
    idx: usize,
    workers: Vec<Worker>,
    backlog: VecDeque<Task>,
    next_task: u32,
    next_scenario: u64,
    deadlock: Option<DeadlockRun>,
    crash: Option<CrashRun>,
}

/// The workers' side of the simulation.
pub(crate) struct Workers {
    tracks: Vec<TrackSim>,
}

impl Workers {
    /// Workers for each `(bus, track number, worker count)`.
    pub(crate) fn new(buses: Vec<(Bus, u32, u32)>) -> Self {
        let tracks = buses
            .into_iter()
            .enumerate()
            .map(|(idx, (bus, no, count))| TrackSim {
                name: bus.track.to_string(),
                workers: (1..=count)
                    .map(|n| Worker {
                        id: format!("worker-{no}.{n}-{}", bus.track),
                        state: State::Idle {
                            until: 2 + n as u64 * 4,
                        },
                        task: None,
                        held: Vec::new(),
                        blocked_on: None,
                        reserved: false,
                        progress: 0,
                        last_beat: 0,
                    })
                    .collect(),
                bus,
                no,
                idx,
                backlog: VecDeque::new(),
                next_task: 1,
                next_scenario: if idx == 0 { 60 } else { 40 },
                deadlock: None,
                crash: None,
            })
            .collect();
        Self { tracks }
    }

    /// The tracks' names.
    pub(crate) fn track_names(&self) -> Vec<String> {
        self.tracks.iter().map(|t| t.name.clone()).collect()
    }
}

/// The demo's lock path and worker id, parsed as a god's library call would (the demo's own names
/// are valid; a refusal is reported like any engine error).
fn lock_ids(file: &str, worker: &str) -> Result<(LockKey, WorkerId), Error> {
    Ok((LockKey::parse(file)?, WorkerId::parse(worker)?))
}

fn refused(e: &Error) -> bool {
    matches!(e, Error::Refused(_))
}

impl Sim {
    pub(crate) fn workers_tick(&mut self) {
        for t in 0..self.workers.tracks.len() {
            if self.tick.is_multiple_of(RETRY_LOCK) {
                self.check_lost_locks(t);
            }
            if self.workers.tracks[t].idx == 0 {
                self.deadlock_scenario(t);
            } else {
                self.crash_scenario(t);
            }
            for w in 0..self.workers.tracks[t].workers.len() {
                self.worker_step(t, w);
            }
        }
    }

    fn bus(&self, t: usize) -> Bus {
        self.workers.tracks[t].bus.clone()
    }

    fn wk(&mut self, t: usize, w: usize) -> &mut Worker {
        &mut self.workers.tracks[t].workers[w]
    }

    fn post(&mut self, t: usize, kind: MessageType, source: &str, payload: Value) {
        if let Err(e) = self.bus(t).post(kind, source, payload) {
            self.engine_error(source, &format!("post {kind}"), &e);
        }
    }

    fn beat(&mut self, t: usize, w: usize, status: &str, subtask: &str) {
        let tick = self.tick;
        let (id, task, progress) = {
            let wk = self.wk(t, w);
            wk.last_beat = tick;
            (
                wk.id.clone(),
                wk.task.as_ref().map(|t| t.id.clone()),
                wk.progress,
            )
        };
        let beat = WorkerId::parse(&id).and_then(|worker_id| {
            self.bus(t).heartbeat(&Heartbeat {
                worker_id: &worker_id,
                task_id: task.as_deref(),
                status: Some(status),
                progress_pct: Some(progress as f64),
                current_subtask: Some(subtask),
            })
        });
        match beat {
            Ok(_) => {
                self.log
                    .at(self.tick, "heartbeat", &id)
                    .track(&self.workers.tracks[t].name.clone())
                    .detail(status);
            }
            Err(e) => self.engine_error(&id, "heartbeat", &e),
        }
    }

    fn new_task(&mut self, t: usize) -> Task {
        let tr = &mut self.workers.tracks[t];
        let id = format!("task-{}.{}", tr.no, tr.next_task);
        tr.next_task += 1;
        let pool = POOLS[tr.idx.min(POOLS.len() - 1)];
        let n = self.rng.random_range(1..=2usize);
        let mut files: Vec<String> = Vec::new();
        while files.len() < n {
            let f = text::pick(&mut self.rng, pool).to_owned();
            if !files.contains(&f) {
                files.push(f);
            }
        }
        files.sort();
        Task {
            id,
            files,
            work: self.rng.random_range(30..=70),
            fail: self.rng.random_bool(0.15),
            attempt: 1,
            kind: TaskKind::Normal,
            gap: 2,
        }
    }

    fn special_task(&mut self, t: usize, kind: TaskKind, files: Vec<String>, work: u64) -> Task {
        let tr = &mut self.workers.tracks[t];
        let id = format!("task-{}.{}", tr.no, tr.next_task);
        tr.next_task += 1;
        Task {
            id,
            files,
            work,
            fail: false,
            attempt: 1,
            kind,
            gap: 4,
        }
    }

    fn worker_step(&mut self, t: usize, w: usize) {
        let state = self.wk(t, w).state.clone();
        match state {
            State::Silent { back_at } => {
                if self.tick >= back_at {
                    self.worker_returns(t, w);
                }
                return;
            }
            State::Idle { until } if self.tick >= until => self.take_task(t, w),
            State::Locking { next_at, idx } if self.tick >= next_at => self.take_lock(t, w, idx),
            State::Working {
                started,
                until,
                reported,
            } => self.work(t, w, started, until, reported),
            _ => {}
        }
        let wk = self.wk(t, w).clone();
        let expects_beat = matches!(wk.state, State::Locking { .. } | State::Working { .. });
        if expects_beat && self.tick >= wk.last_beat + BEAT_EVERY {
            let status = if wk.blocked_on.is_some() {
                "BLOCKED"
            } else {
                "RUNNING"
            };
            let sub = match &wk.blocked_on {
                Some(f) => format!("waiting for {f}"),
                None => text::subtask(&mut self.rng, wk.progress).to_owned(),
            };
            self.beat(t, w, status, &sub);
        }
    }

    fn take_task(&mut self, t: usize, w: usize) {
        let (retry, reserved) = {
            let wk = self.wk(t, w);
            (wk.task.clone(), wk.reserved)
        };
        let task = match retry {
            Some(task) => task,
            None if reserved => return,
            None => match self.workers.tracks[t].backlog.pop_front() {
                Some(task) => task,
                None => self.new_task(t),
            },
        };
        self.start_task(t, w, task);
    }

    fn start_task(&mut self, t: usize, w: usize, task: Task) {
        let track = self.workers.tracks[t].name.clone();
        let id = {
            let wk = self.wk(t, w);
            wk.task = Some(task.clone());
            wk.held.clear();
            wk.blocked_on = None;
            wk.progress = 0;
            wk.state = State::Locking { next_at: 0, idx: 0 };
            wk.id.clone()
        };
        let next_at = self.tick + 1;
        self.wk(t, w).state = State::Locking { next_at, idx: 0 };
        let kind = if task.attempt > 1 {
            "task_retry"
        } else {
            "task_started"
        };
        self.log
            .at(self.tick, kind, &id)
            .track(&track)
            .task(&task.id)
            .detail(task.files.join(", "));
        let sub = text::subtask(&mut self.rng, 0);
        self.beat(t, w, "RUNNING", sub);
        self.post(
            t,
            MessageType::Progress,
            &id,
            json!({"task_id": task.id, "progress_pct": 0, "current_subtask": sub}),
        );
    }

    fn take_lock(&mut self, t: usize, w: usize, idx: usize) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let Some(task) = wk.task.clone() else { return };
        let Some(file) = task.files.get(idx).cloned() else {
            return self.begin_work(t, w);
        };
        let bus = self.bus(t);
        if task.kind == TaskKind::Recovery {
            // The file's last holder went silent with a short lease: wait until it has really expired.
            let expired = |bus: &Bus| {
                bus.locks()
                    .map(|ls| !ls.iter().any(|l| l.entry.path == file && l.live))
                    .unwrap_or(true)
            };
            self.wait_until(Duration::from_secs(30), || expired(&bus));
        }
        let ttl = match task.kind {
            TaskKind::Crash => self.cfg.real(CRASH_TTL),
            _ => DEFAULT_LOCK_TTL,
        };
        match lock_ids(&file, &wk.id).and_then(|(k, w)| bus.acquire_lock(&k, &w, ttl, None)) {
            Ok(r) => {
                self.wk(t, w).held.push(file.clone());
                self.log
                    .at(self.tick, "lock_acquired", &wk.id)
                    .track(&track)
                    .task(&task.id)
                    .detail(file.clone());
                if let Some(p) = &r.previous_holder {
                    self.log
                        .at(self.tick, "expired_lock_taken_over", &wk.id)
                        .track(&track)
                        .task(&task.id)
                        .detail(format!("{file} from {p}"));
                }
                if self.wk(t, w).blocked_on.take().is_some() {
                    self.log
                        .at(self.tick, "unblocked", &wk.id)
                        .track(&track)
                        .task(&task.id)
                        .detail(file.clone());
                    self.beat(t, w, "RUNNING", "got the lock, resuming");
                    self.post(
                        t,
                        MessageType::Progress,
                        &wk.id,
                        json!({"task_id": task.id, "progress_pct": wk.progress,
                               "current_subtask": format!("got the lock on {file}, resuming")}),
                    );
                }
                if idx + 1 >= task.files.len() {
                    self.begin_work(t, w);
                } else {
                    self.wk(t, w).state = State::Locking {
                        next_at: self.tick + task.gap,
                        idx: idx + 1,
                    };
                }
            }
            Err(e) if refused(&e) => {
                if wk.blocked_on.as_deref() != Some(file.as_str()) {
                    self.wk(t, w).blocked_on = Some(file.clone());
                    self.post(
                        t,
                        MessageType::Blocked,
                        &wk.id,
                        json!({"task_id": task.id, "waiting_for": format!("FILE_UNLOCK_{file}"),
                               "resource": file}),
                    );
                    self.beat(t, w, "BLOCKED", &format!("waiting for {file}"));
                    self.log
                        .at(self.tick, "blocked", &wk.id)
                        .track(&track)
                        .task(&task.id)
                        .detail(file.clone());
                }
                self.wk(t, w).state = State::Locking {
                    next_at: self.tick + RETRY_LOCK,
                    idx,
                };
            }
            Err(e) => {
                self.engine_error(&wk.id, "acquire_lock", &e);
                self.wk(t, w).state = State::Locking {
                    next_at: self.tick + 5,
                    idx,
                };
            }
        }
    }

    fn begin_work(&mut self, t: usize, w: usize) {
        let work = self.wk(t, w).task.as_ref().map_or(30, |t| t.work);
        self.wk(t, w).state = State::Working {
            started: self.tick,
            until: self.tick + work,
            reported: 0,
        };
    }

    fn work(&mut self, t: usize, w: usize, started: u64, until: u64, reported: u32) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let Some(task) = wk.task.clone() else { return };
        if task.kind == TaskKind::Crash && self.tick >= started + 5 {
            self.wk(t, w).progress = 30;
            self.post(
                t,
                MessageType::Progress,
                &wk.id,
                json!({"task_id": task.id, "progress_pct": 30, "current_subtask": "rebuilding the index"}),
            );
            self.beat(t, w, "RUNNING", "rebuilding the index");
            self.wk(t, w).state = State::Silent {
                back_at: self.tick + SILENT_FOR,
            };
            self.log
                .at(self.tick, "worker_silent", &wk.id)
                .track(&track)
                .task(&task.id)
                .detail(format!("holds {CRASH_FILE} on a short lease"));
            if let Some(c) = &mut self.workers.tracks[t].crash {
                c.recovery_at = Some(self.tick + CRASH_TTL + 15);
            }
            return;
        }
        if self.tick >= until {
            return if task.fail {
                self.fail_task(t, w)
            } else {
                self.complete_task(t, w)
            };
        }
        let total = (until - started).max(1);
        let pct = ((self.tick - started) * 100 / total) as u32;
        let mark = [25, 50, 75]
            .into_iter()
            .filter(|m| pct >= *m && *m > reported)
            .max();
        if let Some(m) = mark {
            self.wk(t, w).progress = m;
            let sub = text::subtask(&mut self.rng, m);
            self.post(
                t,
                MessageType::Progress,
                &wk.id,
                json!({"task_id": task.id, "progress_pct": m, "current_subtask": sub}),
            );
            self.log
                .at(self.tick, "progress", &wk.id)
                .track(&track)
                .task(&task.id)
                .detail(format!("{m}%"));
            self.beat(t, w, "RUNNING", sub);
            self.wk(t, w).state = State::Working {
                started,
                until,
                reported: m,
            };
        }
    }

    /// Releases every lock the worker holds (its own release, not forced).
    fn release_all(&mut self, t: usize, w: usize) {
        let track = self.workers.tracks[t].name.clone();
        let (id, held, task) = {
            let wk = self.wk(t, w);
            (
                wk.id.clone(),
                std::mem::take(&mut wk.held),
                wk.task.as_ref().map(|t| t.id.clone()).unwrap_or_default(),
            )
        };
        for f in held {
            match lock_ids(&f, &id).and_then(|(k, w)| self.bus(t).release_lock(&k, &w, false)) {
                Ok(_) => {
                    self.log
                        .at(self.tick, "lock_released", &id)
                        .track(&track)
                        .task(&task)
                        .detail(f);
                }
                Err(e) => self.engine_error(&id, "release_lock", &e),
            }
        }
    }

    fn complete_task(&mut self, t: usize, w: usize) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let Some(task) = wk.task.clone() else { return };
        let mut unblocks: Vec<String> = self.workers.tracks[t]
            .workers
            .iter()
            .filter(|o| o.id != wk.id)
            .filter(|o| o.blocked_on.as_ref().is_some_and(|f| wk.held.contains(f)))
            .filter_map(|o| o.task.as_ref().map(|t| t.id.clone()))
            .collect();
        unblocks.sort();
        unblocks.dedup();
        self.release_all(t, w);
        let sha: String = (0..7)
            .map(|_| char::from_digit(self.rng.random_range(0..16), 16).unwrap_or('0'))
            .collect();
        self.post(
            t,
            MessageType::TaskComplete,
            &wk.id,
            json!({"task_id": task.id, "commit_sha": sha, "files_modified": task.files,
                   "unblocks": unblocks}),
        );
        self.wk(t, w).progress = 100;
        self.beat(t, w, "COMPLETE", "done");
        self.log
            .at(self.tick, "task_complete", &wk.id)
            .track(&track)
            .task(&task.id)
            .detail(format!("unblocks [{}]", unblocks.join(", ")));
        let until = self.tick + self.rng.random_range(5..=20);
        let wk = self.wk(t, w);
        wk.task = None;
        wk.state = State::Idle { until };
        self.scenario_task_done(t, w);
    }

    fn fail_task(&mut self, t: usize, w: usize) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let Some(task) = wk.task.clone() else { return };
        self.release_all(t, w);
        let (error, trace) = text::failure(&mut self.rng);
        self.post(
            t,
            MessageType::TaskFailed,
            &wk.id,
            json!({"task_id": task.id, "error": error, "stack_trace": trace}),
        );
        self.beat(t, w, "FAILED", "failed; will retry");
        self.log
            .at(self.tick, "task_failed", &wk.id)
            .track(&track)
            .task(&task.id)
            .detail(format!("attempt {}", task.attempt));
        self.requeue(t, w, 15);
    }

    /// Keeps the worker's task for a retry after `pause` ticks (a retry never fails on purpose, and
    /// takes its locks in sorted order).
    fn requeue(&mut self, t: usize, w: usize, pause: u64) {
        let tick = self.tick;
        let wk = self.wk(t, w);
        if let Some(task) = &mut wk.task {
            task.attempt += 1;
            task.fail = false;
            task.files.sort();
        }
        wk.held.clear();
        wk.blocked_on = None;
        wk.state = State::Idle {
            until: tick + pause,
        };
    }

    /// Notices locks taken away from their holder (force-released by an operator, or expired and
    /// taken over): the worker reports the failure, lets go of the rest and retries.
    fn check_lost_locks(&mut self, t: usize) {
        let holding = self.workers.tracks[t]
            .workers
            .iter()
            .any(|w| !w.held.is_empty() && !matches!(w.state, State::Silent { .. }));
        if !holding {
            return;
        }
        let locks = match self.bus(t).locks() {
            Ok(l) => l,
            Err(e) => return self.engine_error("workers", "read locks", &e),
        };
        for w in 0..self.workers.tracks[t].workers.len() {
            let wk = self.wk(t, w).clone();
            if matches!(wk.state, State::Silent { .. }) {
                continue;
            }
            let lost = wk.held.iter().find(|f| {
                !locks.iter().any(|l| {
                    &l.entry.path == *f && l.entry.worker_id.as_deref() == Some(wk.id.as_str())
                })
            });
            if let Some(f) = lost.cloned() {
                self.lock_lost(t, w, &f);
            }
        }
    }

    fn lock_lost(&mut self, t: usize, w: usize, file: &str) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let task = wk.task.as_ref().map(|t| t.id.clone()).unwrap_or_default();
        self.log
            .at(self.tick, "lock_lost", &wk.id)
            .track(&track)
            .task(&task)
            .detail(file);
        self.wk(t, w).held.retain(|f| f != file);
        self.release_all(t, w);
        self.post(
            t,
            MessageType::TaskFailed,
            &wk.id,
            json!({"task_id": task,
                   "error": format!("lost the lock on {file} (released by someone else); retrying"),
                   "stack_trace": ""}),
        );
        self.beat(t, w, "FAILED", "lost a lock; will retry");
        self.requeue(t, w, 10);
        let tick = self.tick;
        if let Some(d) = &mut self.workers.tracks[t].deadlock
            && d.running
            && !d.broken
            && (d.a == w || d.b == w)
        {
            d.broken = true;
            let by = if d.forced_by_sim {
                "sim-operator"
            } else {
                OPERATOR
            };
            self.log
                .at(tick, "deadlock_broken", by)
                .track(&track)
                .detail(format!("{} lost {file}", wk.id));
        }
    }

    fn scenario_task_done(&mut self, t: usize, _w: usize) {
        let tr = &mut self.workers.tracks[t];
        if let Some(d) = &tr.deadlock
            && d.running
            && tr.workers[d.a].task.is_none()
            && tr.workers[d.b].task.is_none()
        {
            tr.workers[d.a].reserved = false;
            tr.workers[d.b].reserved = false;
            tr.deadlock = None;
        }
    }

    fn idle_free(w: &Worker) -> bool {
        matches!(w.state, State::Idle { .. }) && w.task.is_none()
    }

    /// Two workers take the deadlock files in opposite order.
    fn deadlock_scenario(&mut self, t: usize) {
        let tick = self.tick;
        let track = self.workers.tracks[t].name.clone();
        let n = self.workers.tracks[t].workers.len();
        if n < 2 {
            return;
        }
        if self.workers.tracks[t].deadlock.is_none() {
            if tick < self.workers.tracks[t].next_scenario {
                return;
            }
            self.workers.tracks[t].deadlock = Some(DeadlockRun {
                picks: Vec::new(),
                a: 0,
                b: 0,
                running: false,
                blocked_at: None,
                forced_by_sim: false,
                broken: false,
            });
        }
        let d = self.workers.tracks[t].deadlock.clone().expect("set above");
        if !d.running {
            // The first two workers to be free take part; a picked worker takes no new task.
            let tr = &mut self.workers.tracks[t];
            let mut picks = d.picks.clone();
            for (i, w) in tr.workers.iter_mut().enumerate() {
                if picks.len() < 2 && !picks.contains(&i) && Self::idle_free(w) {
                    w.reserved = true;
                    picks.push(i);
                }
            }
            let ready = picks.len() == 2 && picks.iter().all(|&i| Self::idle_free(&tr.workers[i]));
            if let Some(dl) = &mut tr.deadlock {
                dl.picks = picks.clone();
            }
            if !ready {
                return;
            }
            let (a, b) = (picks[0], picks[1]);
            let fa = vec![DEADLOCK_FILES[0].to_owned(), DEADLOCK_FILES[1].to_owned()];
            let fb = vec![DEADLOCK_FILES[1].to_owned(), DEADLOCK_FILES[0].to_owned()];
            let ta = self.special_task(t, TaskKind::Deadlock, fa, 40);
            let tb = self.special_task(t, TaskKind::Deadlock, fb, 40);
            self.start_task(t, a, ta);
            self.start_task(t, b, tb);
            self.wk(t, b).state = State::Locking {
                next_at: tick + 2,
                idx: 0,
            };
            let tr = &mut self.workers.tracks[t];
            tr.next_scenario = tick + DEADLOCK_EVERY;
            if let Some(d) = &mut tr.deadlock {
                d.running = true;
                d.a = a;
                d.b = b;
            }
            return;
        }
        if d.broken {
            return;
        }
        let tr = &self.workers.tracks[t];
        let (wa, wb) = (&tr.workers[d.a], &tr.workers[d.b]);
        let both_blocked = wa.blocked_on.is_some()
            && wb.blocked_on.is_some()
            && wa
                .task
                .as_ref()
                .is_some_and(|t| t.kind == TaskKind::Deadlock)
            && wb
                .task
                .as_ref()
                .is_some_and(|t| t.kind == TaskKind::Deadlock);
        if !both_blocked {
            return;
        }
        let (ida, idb) = (wa.id.clone(), wb.id.clone());
        let a_holds = wa.held.first().cloned();
        match d.blocked_at {
            None => {
                if let Some(dl) = &mut self.workers.tracks[t].deadlock {
                    dl.blocked_at = Some(tick);
                }
                match self.bus(t).detect_deadlocks() {
                    Ok(r) if r.deadlocked => {
                        let cycle = r
                            .cycles
                            .first()
                            .map(|c| c.workers.join(" <-> "))
                            .unwrap_or_default();
                        self.log
                            .at(tick, "deadlock_detected", "bus")
                            .track(&track)
                            .detail(cycle);
                    }
                    Ok(_) => {
                        self.log
                            .at(tick, "deadlock_missed", "bus")
                            .track(&track)
                            .detail(format!("{ida} <-> {idb}"));
                    }
                    Err(e) => self.engine_error("bus", "detect_deadlocks", &e),
                }
            }
            Some(since) => {
                let due = self
                    .cfg
                    .operator_patience
                    .is_some_and(|p| tick >= since + p);
                if let (true, Some(file)) = (due, a_holds) {
                    let forced = LockKey::parse(&file)
                        .and_then(|k| self.bus(t).release_lock(&k, &WorkerId::operator(), true));
                    match forced {
                        Ok(_) => {
                            if let Some(dl) = &mut self.workers.tracks[t].deadlock {
                                dl.forced_by_sim = true;
                            }
                            self.log
                                .at(tick, "sim_operator_force_unlock", "sim-operator")
                                .track(&track)
                                .detail(file);
                        }
                        Err(e) => self.engine_error("sim-operator", "force unlock", &e),
                    }
                }
            }
        }
    }

    /// A worker goes silent holding a short lease; another takes the file over once it expired.
    fn crash_scenario(&mut self, t: usize) {
        let tick = self.tick;
        let n = self.workers.tracks[t].workers.len();
        match self.workers.tracks[t].crash.clone() {
            None => {
                if tick < self.workers.tracks[t].next_scenario || n == 0 {
                    return;
                }
                self.workers.tracks[t].crash = Some(CrashRun {
                    worker: None,
                    running: false,
                    recovery_at: None,
                });
            }
            Some(c) if !c.running => {
                // The first worker to be free goes silent.
                let tr = &mut self.workers.tracks[t];
                let Some(w) = c
                    .worker
                    .or_else(|| tr.workers.iter().position(Self::idle_free))
                else {
                    return;
                };
                tr.workers[w].reserved = true;
                if let Some(c) = &mut tr.crash {
                    c.worker = Some(w);
                }
                if !Self::idle_free(&tr.workers[w]) {
                    return;
                }
                let task = self.special_task(t, TaskKind::Crash, vec![CRASH_FILE.to_owned()], 100);
                self.start_task(t, w, task);
                let tr = &mut self.workers.tracks[t];
                tr.next_scenario = tick + CRASH_EVERY;
                if let Some(c) = &mut tr.crash {
                    c.running = true;
                }
            }
            Some(c) => {
                if c.recovery_at.is_some_and(|at| tick >= at) {
                    let task =
                        self.special_task(t, TaskKind::Recovery, vec![CRASH_FILE.to_owned()], 30);
                    let tr = &mut self.workers.tracks[t];
                    tr.backlog.push_front(task);
                    if let Some(c) = &mut tr.crash {
                        c.recovery_at = None;
                    }
                }
            }
        }
    }

    fn worker_returns(&mut self, t: usize, w: usize) {
        let track = self.workers.tracks[t].name.clone();
        let wk = self.wk(t, w).clone();
        let task = wk.task.as_ref().map(|t| t.id.clone()).unwrap_or_default();
        self.post(
            t,
            MessageType::TaskFailed,
            &wk.id,
            json!({"task_id": task,
                   "error": format!("worker restarted after going silent; its lease on {CRASH_FILE} had expired"),
                   "stack_trace": ""}),
        );
        self.beat(t, w, "FAILED", "restarted");
        self.log
            .at(self.tick, "worker_returned", &wk.id)
            .track(&track)
            .task(&task);
        let tick = self.tick;
        let tr = &mut self.workers.tracks[t];
        let wk = &mut tr.workers[w];
        wk.task = None;
        wk.held.clear();
        wk.blocked_on = None;
        wk.reserved = false;
        wk.state = State::Idle { until: tick + 10 };
        tr.crash = None;
    }
}
