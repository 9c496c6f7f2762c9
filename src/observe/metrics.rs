//! `/metrics`: the series, written from the live model's newest snapshot (kept current by file
//! notifications, never rescanned per scrape) and the journal's fold (read incrementally).
//!
//! Adding a series: write one more `e.family(..)` and its samples in the function of its group
//! that [`render`] calls in order (`workflow_series`, `dispatch_series`, …; a gauge from the
//! snapshot, a counter from [`JournalFold`], whose `apply` counts journal actions), with label
//! values that are ids the engine validated or words of a closed set; list it in
//! docs/OBSERVABILITY.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::engine::{GodName, Root, TrackName, WorkflowStatus, layout::QUARANTINE_DIR};
use crate::live::Snapshot;
use crate::live::snapshot::Stamp;

use super::exposition::{Exposition, Kind};
use super::journal::JournalFold;

/// What a scrape reads: the fold (behind a lock: one scrape or snapshot note at a time) and when
/// this `serve` started (the `_created` of the series that count from its start).
pub struct Metrics {
    pub root: Root,
    pub fold: Mutex<JournalFold>,
    pub started: f64,
    /// Snapshots whose dispatches were noted (by `seq`), so a snapshot is noted once.
    noted: Mutex<u64>,
    /// Scrapes served (counted by the server), and scrapes that failed to write.
    pub scrapes: std::sync::atomic::AtomicU64,
    /// The `--metrics` address is not a loopback one.
    pub exposed: bool,
    /// The span exporter's figures, when `--otlp` runs.
    pub traces: Option<Arc<super::export::TraceStats>>,
    /// The newest exposition of each format (text, OpenMetrics), computed once per snapshot.
    cache: Mutex<[Option<Cached>; 2]>,
    /// When the last scrape came (`None`: none yet), so texts are prepared only while scraped.
    last_scrape: Mutex<Option<Instant>>,
}

/// One exposition as computed: for which snapshot, when, and its text.
#[derive(Clone)]
struct Cached {
    seq: u64,
    at: Instant,
    text: Arc<str>,
}

/// How long a computed exposition is served for the same snapshot: the figures that move with the
/// clock alone (overdue dispatches, stale workers, live supervisors) are at most this late.
pub(crate) const CACHE_FOR: Duration = Duration::from_secs(1);

/// Texts are prepared ahead (on a new snapshot, and as they age) only while scrapes came within
/// this long; an unscraped `serve` computes nothing.
const PREPARE_WHILE_SCRAPED: Duration = Duration::from_secs(300);

impl Metrics {
    pub fn new(root: Root, exposed: bool) -> Self {
        Self {
            root,
            fold: Mutex::new(JournalFold::default()),
            started: unix(Utc::now()),
            noted: Mutex::new(u64::MAX),
            scrapes: Default::default(),
            exposed,
            traces: None,
            cache: Mutex::new([None, None]),
            last_scrape: Mutex::new(None),
        }
    }

    fn cached(&self, seq: u64, open_metrics: bool, now: Instant) -> Option<Arc<str>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache[usize::from(open_metrics)]
            .as_ref()
            .filter(|c| c.seq == seq && now.duration_since(c.at) < CACHE_FOR)
            .map(|c| c.text.clone())
    }

    fn compute(&self, snap: &Snapshot, open_metrics: bool) -> Arc<str> {
        self.note(snap);
        let text: Arc<str> = {
            let mut fold = self.fold.lock().unwrap_or_else(|e| e.into_inner());
            fold.fold(&self.root);
            render(snap, &fold, self, Utc::now(), open_metrics).into()
        };
        self.cache.lock().unwrap_or_else(|e| e.into_inner())[usize::from(open_metrics)] =
            Some(Cached {
                seq: snap.seq,
                at: Instant::now(),
                text: text.clone(),
            });
        text
    }

    /// Computes ahead the formats scraped lately, for `snap`, when their text is not for it or
    /// has aged (called on each new snapshot and every quarter of [`CACHE_FOR`] by the notes thread), so a
    /// scrape finds its text ready.
    pub fn prepare(&self, snap: &Snapshot) {
        let now = Instant::now();
        let scraped = self
            .last_scrape
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| now.duration_since(t) < PREPARE_WHILE_SCRAPED);
        if !scraped {
            self.note(snap);
            return;
        }
        let asked: Vec<bool> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            (0..2)
                .filter(|&i| cache[i].is_some())
                .map(|i| i == 1)
                .collect()
        };
        for om in asked {
            // Renewed once half its time is over (the notes thread looks every quarter), so it
            // is made again before it ages out and a scrape does not wait for it, as long as
            // making it takes less than a quarter of `CACHE_FOR`.
            let fresh = now + CACHE_FOR / 2;
            if self.cached(snap.seq, om, fresh).is_none() {
                self.compute(snap, om);
            }
        }
    }

    /// Notes the definition and step of every dispatch the snapshot shows waiting (once per
    /// snapshot), so the end of each can be labelled when its ack is folded.
    pub fn note(&self, snap: &Snapshot) {
        {
            let mut n = self.noted.lock().unwrap_or_else(|e| e.into_inner());
            if *n == snap.seq {
                return;
            }
            *n = snap.seq;
        }
        let mut fold = self.fold.lock().unwrap_or_else(|e| e.into_inner());
        // Unfinished workflows sort first (the Workflows pane's order), and only they wait.
        for w in snap.workflows.iter() {
            if snap.workflows_in_order && w.state.status.is_finished() {
                break;
            }
            let Some(def) = snap.definition(w.state.definition_id.as_deref()) else {
                continue;
            };
            for (_, d) in &w.waiting {
                if let Some(step) = def.step(&d.step) {
                    let key: (Arc<str>, Arc<str>) =
                        (def.id.as_str().into(), step.id.as_str().into());
                    fold.note_step(&d.handoff_id, key);
                }
            }
        }
    }

    /// One scrape's text: the exposition computed for this snapshot within [`CACHE_FOR`], else
    /// computed now (and kept for the next scrapes).
    pub fn scrape(&self, snap: &Snapshot, open_metrics: bool) -> Arc<str> {
        let now = Instant::now();
        *self.last_scrape.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        match self.cached(snap.seq, open_metrics, now) {
            Some(text) => text,
            None => self.compute(snap, open_metrics),
        }
    }
}

fn unix(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

fn god_label(name: &str) -> Option<&str> {
    GodName::parse(name).ok().map(|_| name)
}

fn track_label(name: &str) -> Option<&str> {
    TrackName::parse(name).ok().map(|_| name)
}

/// What the pantheon costs: the ledger's totals (docs/BUDGETS.md) by god and definition. The
/// ledger only grows, so these are counters; a god or definition the engine does not know is
/// labelled `other`.
fn cost_series(e: &mut Exposition, m: &Metrics, snap: &Snapshot) {
    let Ok(rows) = crate::engine::cost_metric_totals(&m.root) else {
        return;
    };
    if rows.is_empty() {
        return;
    }
    let def_label = |d: &str| -> String {
        if snap.definition(Some(d)).is_some() {
            d.to_owned()
        } else {
            "other".to_owned()
        }
    };
    let mut cost: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut tokens: BTreeMap<(String, String, &str), u64> = BTreeMap::new();
    for (g, d, t) in &rows {
        let key = (god_label(g).unwrap_or("other").to_owned(), def_label(d));
        *cost.entry(key.clone()).or_default() += t.cost_micros as f64 / 1_000_000.0;
        for (kind, n) in [
            ("input", t.input_tokens),
            ("output", t.output_tokens),
            ("cache_read", t.cache_read_tokens),
            ("cache_write", t.cache_write_tokens),
        ] {
            let v = tokens
                .entry((key.0.clone(), key.1.clone(), kind))
                .or_default();
            *v = v.saturating_add(n);
        }
    }
    e.family(
        "pantheon_cost_usd",
        Kind::Counter,
        "Usage cost recorded in the ledger, in US dollars, by god and definition.",
    );
    for ((g, d), usd) in &cost {
        e.counter_f64(&[("god", g), ("definition", d)], *usd, None);
    }
    e.family(
        "pantheon_tokens",
        Kind::Counter,
        "Tokens recorded in the ledger, by god, definition and kind.",
    );
    for ((g, d, kind), n) in &tokens {
        e.counter(&[("god", g), ("definition", d), ("kind", kind)], *n, None);
    }
}

/// The span exporter's figures (`serve --otlp`), when it runs: counters from this `serve`'s start.
fn trace_series(e: &mut Exposition, m: &Metrics) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(t) = &m.traces else {
        return;
    };
    let since = Some(m.started);
    e.family(
        "pantheon_trace_spans_exported",
        Kind::Counter,
        "Spans the OTLP collector took (serve --otlp).",
    );
    e.counter(&[], t.exported.load(Relaxed), since);
    e.family(
        "pantheon_trace_spans_dropped",
        Kind::Counter,
        "Spans dropped: the export queue was full, or the collector did not take their request.",
    );
    e.counter(&[], t.dropped.load(Relaxed), since);
    e.family(
        "pantheon_trace_queue_spans",
        Kind::Gauge,
        "Spans waiting in the export queue (bounded; past it spans are dropped).",
    );
    e.gauge(&[], t.queued.load(Relaxed) as f64);
}

/// Writes every series, one family group after another (the order of the exposition).
pub fn render(
    snap: &Snapshot,
    fold: &JournalFold,
    m: &Metrics,
    now: DateTime<Utc>,
    open_metrics: bool,
) -> String {
    let mut e = Exposition::new(open_metrics);
    workflow_series(&mut e, snap);
    dispatch_series(&mut e, snap, now);
    attention_series(&mut e, snap, now);
    journal_series(&mut e, fold, m.started);
    track_series(&mut e, snap, m.started);
    worker_series(&mut e, snap, now);
    board_series(&mut e, snap);
    if let Some(b) = &snap.bridge {
        bridge_series(&mut e, snap, b, now);
    }
    recorder_series(&mut e, m);
    cost_series(&mut e, m, snap);
    trace_series(&mut e, m);
    exposition_series(&mut e, snap, m);
    e.finish()
}

/// Workflows by status: every known status (0 included, so a rate or an alert has a series).
fn workflow_series(e: &mut Exposition, snap: &Snapshot) {
    e.family(
        "pantheon_workflows",
        Kind::Gauge,
        "Workflows by status (from the state files, as the console shows them).",
    );
    let mut by_status: BTreeMap<&str, u64> = WorkflowStatus::ALL
        .iter()
        .map(|s| (s.as_str(), 0))
        .collect();
    let mut other = 0u64;
    for w in snap.workflows.iter() {
        match &w.state.status {
            WorkflowStatus::Other(_) => other += 1,
            s => *by_status.entry(s.as_str()).or_default() += 1,
        }
    }
    by_status.insert("other", other);
    for (s, n) in &by_status {
        e.gauge(&[("status", s)], *n as f64);
    }
}

/// Dispatches: pending per god (what `pantheon inbox GOD` lists), held, overdue per god, dead.
fn dispatch_series(e: &mut Exposition, snap: &Snapshot, now: DateTime<Utc>) {
    let rule = snap.overdue_rule();
    let overdue_of = |held: bool, d: &crate::live::snapshot::DispatchRow| {
        d.dispatched_at
            .as_ref()
            .and_then(Stamp::at)
            .and_then(|at| rule.overdue_from(held, &d.ack_status, at))
            .is_some_and(|t| t <= now)
    };
    e.family(
        "pantheon_dispatches_pending",
        Kind::Gauge,
        "Dispatches in a god's inbox (what `pantheon inbox GOD` lists; an accepted one has left it).",
    );
    let mut overdue: Vec<(&str, u64)> = Vec::new();
    for inbox in snap.inboxes.iter() {
        let Some(god) = god_label(&inbox.god) else {
            continue;
        };
        e.gauge(&[("god", god)], inbox.dispatches.len() as f64);
        let mut n = 0u64;
        for d in inbox.dispatches.iter() {
            if overdue_of(false, &d.dispatch) {
                n += 1;
            }
        }
        overdue.push((god, n));
    }
    e.family(
        "pantheon_dispatches_held",
        Kind::Gauge,
        "Dispatches held in _quarantine for an operator's approval (not those a pause holds).",
    );
    let by_pause = |d: &&_| {
        let d: &crate::live::snapshot::DispatchView = d;
        crate::engine::held_by_pause(d.dispatch.held_because.as_deref())
    };
    let paused_held = snap.quarantine.dispatches.iter().filter(by_pause).count();
    let held = snap.quarantine.dispatches.len() - paused_held;
    e.gauge(&[], held as f64);
    e.family(
        "pantheon_dispatches_paused",
        Kind::Gauge,
        "Dispatches held in _quarantine by a pause (released by its resume, not by approve).",
    );
    e.gauge(&[], paused_held as f64);
    e.family(
        "pantheon_paused",
        Kind::Gauge,
        "Pauses in force (conductor/paused.json), by what they pause.",
    );
    for kind in crate::engine::PauseKind::ALL {
        let n = snap
            .paused
            .pauses
            .iter()
            .filter(|p| p.kind == *kind)
            .count();
        e.gauge(&[("kind", kind.as_str())], n as f64);
    }
    let held_overdue = snap
        .quarantine
        .dispatches
        .iter()
        .filter(|d| !by_pause(d) && overdue_of(true, &d.dispatch))
        .count();
    e.family(
        "pantheon_dispatches_overdue",
        Kind::Gauge,
        "Dispatches overdue by the engine's one rule (unacked past 5 min, held past 30 min); held ones under god=\"_quarantine\".",
    );
    for (god, n) in &overdue {
        e.gauge(&[("god", god)], *n as f64);
    }
    e.gauge(&[("god", QUARANTINE_DIR)], held_overdue as f64);
    e.family(
        "pantheon_dead_letters",
        Kind::Gauge,
        "Dispatches out of deliveries, in conductor/dead/{god}/.",
    );
    for inbox in snap.dead_letters.iter() {
        let Some(god) = god_label(&inbox.god) else {
            continue;
        };
        e.gauge(&[("god", god)], inbox.dispatches.len() as f64);
    }
}

/// The attention items by kind, as every surface counts them (`live::attention::items`: the
/// console's header and pane 7, `pantheon status` and `check`), and the live supervisors.
fn attention_series(e: &mut Exposition, snap: &Snapshot, now: DateTime<Utc>) {
    let supervisors = snap.supervisors.iter().filter(|s| s.alive(now)).count();
    e.family(
        "pantheon_attention_items",
        Kind::Gauge,
        "Things waiting on a human, by kind (the console's attention list, pantheon status's @).",
    );
    // Counted, not listed: the same counts as the items' (`attention::tally`), without making an
    // item for each of a large root's overdue workflows on every scrape.
    let tally = crate::live::attention::tally(snap, now);
    let foreign_items = crate::live::attention::source_only_items(snap);
    // A foreign source's items are counted by its kind too (`source` label); the root's own kinds,
    // and a foreign kind with no item, keep their one series.
    let mut foreign: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for i in &foreign_items {
        if let Some(src) = i.source_kind() {
            *foreign.entry((i.kind.as_str(), src)).or_default() += 1;
        }
    }
    for (kind, n) in tally.iter() {
        let by_source: Vec<_> = foreign.iter().filter(|((k, _), _)| *k == kind).collect();
        if by_source.is_empty() {
            e.gauge(&[("kind", kind)], n as f64);
        }
        for ((_, src), n) in by_source {
            e.gauge(&[("kind", kind), ("source", src)], *n as f64);
        }
    }
    e.family(
        "pantheon_supervisors",
        Kind::Gauge,
        "Supervisors (pantheon serve) whose heartbeat is alive.",
    );
    e.gauge(&[], supervisors as f64);
}

/// Counters folded from the journal: every act by any process, across restarts (the step
/// durations only from this `serve`'s start, `started`).
fn journal_series(e: &mut Exposition, fold: &JournalFold, started: f64) {
    let created = fold.first_at;
    e.family(
        "pantheon_acks",
        Kind::Counter,
        "Acks journaled, by status (duplicates not counted).",
    );
    for s in ["accepted", "pending", "rejected", "completed"] {
        e.counter(
            &[("status", s)],
            fold.acks.get(s).copied().unwrap_or(0),
            created,
        );
    }
    if let Some(n) = fold.acks.get("other") {
        e.counter(&[("status", "other")], *n, created);
    }
    e.family(
        "pantheon_submits",
        Kind::Counter,
        "Submits journaled, by outcome.",
    );
    for (o, n) in &fold.submits {
        e.counter(&[("outcome", o)], *n, created);
    }
    e.family(
        "pantheon_redeliveries",
        Kind::Counter,
        "Redeliveries of unacknowledged dispatches by a supervisor.",
    );
    e.counter(&[], fold.redeliveries, created);
    e.family(
        "pantheon_dead_lettered",
        Kind::Counter,
        "Dispatches moved to dead letters after their last delivery.",
    );
    e.counter(&[], fold.dead_lettered, created);
    e.family(
        "pantheon_journal_entries",
        Kind::Counter,
        "Journal entries folded.",
    );
    e.counter(&[], fold.entries, created);
    e.family(
        "pantheon_ack_latency_seconds",
        Kind::Histogram,
        "From a dispatch written (submit, or the ack that routed to it) to its first ack.",
    );
    e.histogram(&[], &fold.ack_latency, created);
    e.family(
        "pantheon_step_duration_seconds",
        Kind::Histogram,
        "From a step's dispatch to its completed or rejected ack, for steps that ended while this serve ran.",
    );
    for ((def, step), h) in &fold.steps {
        e.histogram(&[("definition", def), ("step", step)], h, Some(started));
    }
}

/// Tracks: the messages on each track's bus (counted from this `serve`'s start, `started`) and
/// the locks held.
fn track_series(e: &mut Exposition, snap: &Snapshot, started: f64) {
    e.family(
        "pantheon_bus_messages",
        Kind::Counter,
        "Messages appended to a track's queue since this serve started watching it.",
    );
    for t in snap.tracks.iter() {
        if let Some(track) = track_label(&t.name) {
            e.counter(&[("track", track)], t.messages_read, Some(started));
        }
    }
    e.family("pantheon_locks_held", Kind::Gauge, "Locks held, by track.");
    for t in snap.tracks.iter() {
        if let Some(track) = track_label(&t.name) {
            e.gauge(&[("track", track)], t.locks.len() as f64);
        }
    }
}

/// A track's workers by state (every state listed, 0 included).
fn worker_series(e: &mut Exposition, snap: &Snapshot, now: DateTime<Utc>) {
    e.family(
        "pantheon_workers",
        Kind::Gauge,
        "Workers by track and state (stale: RUNNING or BLOCKED and silent past stale_after).",
    );
    let stale_after = snap.stale_threshold();
    for t in snap.tracks.iter() {
        let Some(track) = track_label(&t.name) else {
            continue;
        };
        let mut by: BTreeMap<&str, u64> =
            ["running", "blocked", "complete", "failed", "stale", "other"]
                .into_iter()
                .map(|s| (s, 0))
                .collect();
        for w in t.workers.iter() {
            use crate::engine::WorkerStatus as S;
            let state = if w.is_stale(now, stale_after) {
                "stale"
            } else {
                match w.status {
                    S::Running => "running",
                    S::Blocked => "blocked",
                    S::Complete => "complete",
                    S::Failed => "failed",
                    S::Other(_) => "other",
                }
            };
            *by.entry(state).or_default() += 1;
        }
        for (state, n) in by {
            e.gauge(&[("track", track), ("state", state)], n as f64);
        }
    }
}

/// A track's current board session, by phase (a phase the engine does not name is `other`).
fn board_series(e: &mut Exposition, snap: &Snapshot) {
    e.family(
        "pantheon_board_sessions",
        Kind::Gauge,
        "A track's current board session, by phase.",
    );
    for t in snap.tracks.iter() {
        let Some(track) = track_label(&t.name) else {
            continue;
        };
        if let Some(b) = &t.board {
            let phase = match b.session.status.to_ascii_lowercase().as_str() {
                p @ ("assessing" | "discussing" | "voting" | "resolving" | "complete") => {
                    p.to_owned()
                }
                _ => "other".to_owned(),
            };
            e.gauge(&[("track", track), ("phase", &phase)], 1.0);
        }
    }
}

/// The history's recorder, while one runs (docs/HISTORY.md): read from the history's lease and
/// `writer.json` at each exposition, as `pantheon status` reads it.
fn recorder_series(e: &mut Exposition, m: &Metrics) {
    let Some(r) = crate::engine::status::recorder_health(&m.root) else {
        return;
    };
    e.family(
        "pantheon_recorder_up",
        Kind::Gauge,
        "1 while the history's recorder records the root; 0 when it is down (see `pantheon check`).",
    );
    e.gauge(&[], f64::from(u8::from(r.up)));
}

/// The bridge, from its status file `b` (only when that file exists).
fn bridge_series(
    e: &mut Exposition,
    snap: &Snapshot,
    b: &crate::engine::nats::Status,
    now: DateTime<Utc>,
) {
    let alive = b
        .updated()
        .and_then(crate::engine::time::parse_ts)
        .is_some_and(|t| (now - t).abs() <= crate::engine::status::BRIDGE_SILENT_AFTER);
    e.family(
        "pantheon_bridge_up",
        Kind::Gauge,
        "1 while the bridge's status file is fresh and it holds a connection.",
    );
    e.gauge(&[], f64::from(u8::from(alive && b.connected)));
    e.family(
        "pantheon_bridge_published",
        Kind::Counter,
        "Messages the bridge published since it started.",
    );
    e.counter(&[], b.published, None);
    e.family(
        "pantheon_bridge_mirrored",
        Kind::Counter,
        "Messages the bridge received and mirrored since it started.",
    );
    e.counter(&[], b.received, None);
    e.family(
        "pantheon_bridge_lag",
        Kind::Gauge,
        "Messages the server holds that the bridge has not mirrored yet.",
    );
    e.gauge(&[], b.lag as f64);
    e.family(
        "pantheon_bridge_outbox_waiting",
        Kind::Gauge,
        "Outbox records waiting to be published.",
    );
    e.gauge(&[], snap.bridge_view.pending as f64);
    e.family(
        "pantheon_bridge_outbox_stuck",
        Kind::Gauge,
        "Outbox records the bridge could not publish and retries (its status's `stuck`).",
    );
    e.gauge(&[], b.stuck.len() as f64);
    e.family(
        "pantheon_bridge_dead",
        Kind::Gauge,
        "The bridge's dead letters.",
    );
    e.gauge(&[], snap.bridge_view.dead as f64);
}

/// About the exposition itself: whether the model is loaded, the address exposed, the series
/// the per-family cap left out (counted last, so it covers every family before it).
fn exposition_series(e: &mut Exposition, snap: &Snapshot, m: &Metrics) {
    e.family(
        "pantheon_model_loaded",
        Kind::Gauge,
        "0 while serve's live model is still reading the root for the first time (figures partial).",
    );
    e.gauge(&[], f64::from(u8::from(snap.loading.is_none())));
    e.family(
        "pantheon_metrics_exposed",
        Kind::Gauge,
        "1 when --metrics listens on an address that is not loopback.",
    );
    e.gauge(&[], f64::from(u8::from(m.exposed)));
    let dropped = e.dropped();
    e.family(
        "pantheon_metrics_series_dropped",
        Kind::Gauge,
        "Series left out of this scrape by the per-family cap.",
    );
    e.gauge(&[], dropped as f64);
}
