//! The root's health in a few figures, for a status line (`pantheon status`) and a monitoring check
//! (`pantheon check`): what waits on a human, read from the files that say so and nothing else.
//!
//! Cost is bounded by the open work, not by the root's history: one listing of `_quarantine` and of
//! each inbox (with their dispatch files read, since their ack status and time decide overdue), one
//! listing of each god's dead letters (names only), the supervisors' heartbeats, each track's
//! `worker-status.json` and `locks.json`, and the bridge's `status.json`. Workflow state files,
//! queues, archives and the journal are not read (the journal only by [`journal_chain`], which
//! `check` asks for).
//!
//! Overdue is the engine's one rule ([`crate::conductor::overdue::OverdueRule`]), the same the
//! console's panes, header and attention list apply.

use crate::error::Refusal;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::bus::{Bus, list_tracks};
use crate::conductor::delivery::live_supervisors;
use crate::conductor::files::{god_dirs, read_dispatch_dir};
use crate::conductor::model::AckStatus;
use crate::conductor::overdue::OverdueRule;
use crate::store::Root;
use crate::store::time::parse_ts;

/// The figures of one reading.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Dispatches held in `_quarantine` for an operator's approval (those a pause holds are
    /// counted in `paused_held`, not here).
    pub held: usize,
    /// Pauses in force (docs/PROTOCOL.md §2.14): the operator's own act, never an attention item.
    pub paused: usize,
    /// What each pause names and since when: `god hephaestus since 2026-12-06T10:00:00Z`.
    pub pauses: Vec<String>,
    /// Dispatches held in `_quarantine` by a pause (released by its resume).
    pub paused_held: usize,
    /// Dispatches overdue by the overdue rule (unacked in an inbox past the unacked limit, or held
    /// past the held limit).
    pub overdue: usize,
    /// Of `overdue`, those held (their cause is the held dispatch itself).
    pub overdue_held: usize,
    /// Dispatches waiting in gods' inboxes (held ones excluded).
    pub waiting: usize,
    /// Dead letters: dispatches out of deliveries, in `conductor/dead/{god}/`.
    pub dead_letters: usize,
    /// RUNNING or BLOCKED workers silent past the root's `stale_after`, over every track.
    pub stale_workers: usize,
    /// Locks past their expiry, over every track.
    pub expired_locks: usize,
    /// Supervisors (`pantheon serve`) whose heartbeat is alive.
    pub supervisors: usize,
    /// Open dispatches with an ack deadline (nobody enforces them when `supervisors` is 0).
    pub deadlines: usize,
    /// Files that should have been dispatches or bus files but could not be read.
    pub unreadable: usize,
    /// The bridge, when its status file exists.
    pub bridge: Option<BridgeHealth>,
    /// What makes the root unreadable as a whole, each with its reason: a protocol directory that is
    /// not a directory (`conductor/pending` as a file: nothing in it can be counted), a
    /// `conductor/config.yaml` that cannot be used (its settings and `check:` levels are not in
    /// force). `check` is CRITICAL on any.
    pub broken: Vec<String>,
    /// The history's recorder, while one runs (it holds the history's lease, or it stopped on an
    /// error and its process still runs).
    pub recorder: Option<RecorderHealth>,
}

pub use crate::history::recorder::RecorderHealth;

impl Health {
    /// True when the recorder that runs does not record (`pantheon status` shows `⚠recorder`,
    /// `check` warns).
    pub fn recorder_down(&self) -> bool {
        self.recorder.as_ref().is_some_and(|r| !r.up)
    }
}

/// Whether `root`'s history is being recorded (`None`: no recorder runs). A recorder holding the
/// history's lease is up unless its `writer.json` says it is down (it could not start and tries
/// again); one that stopped on an error is down while its process runs.
pub fn recorder_health(root: &Root) -> Option<RecorderHealth> {
    crate::history::recorder::health(root)
}

/// What the bridge's `status.json` says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BridgeHealth {
    /// True when the file was written within [`BRIDGE_SILENT_AFTER`] (the bridge rewrites it every
    /// few seconds while it runs).
    pub alive: bool,
    /// Messages the stream holds that the bridge has not mirrored yet.
    pub lag: u64,
    /// Outbox records waiting to be published.
    pub outbox_pending: u64,
    /// The outbox ids of the records the bridge could not publish (its status's `stuck`, from the
    /// first failed send), at most [`MAX_STUCK_NAMED`]; `check` names them.
    pub stuck: Vec<String>,
}

/// The most stuck outbox ids `status` and `check` name (the status file is another process's).
pub(crate) const MAX_STUCK_NAMED: usize = 20;

pub use crate::conductor::outbox::BRIDGE_SILENT_AFTER;

impl Health {
    /// True when open dispatches have ack deadlines and no supervisor is alive to enforce them (the
    /// console's `▲ no supervisor`).
    pub fn unsupervised(&self) -> bool {
        self.deadlines > 0 && self.supervisors == 0
    }

    /// Alerts (the status line's `▲`, as in the console's header): overdue dispatches, stale
    /// workers, expired locks and the missing supervisor.
    pub fn alerts(&self) -> usize {
        self.overdue
            .saturating_add(self.stale_workers)
            .saturating_add(self.expired_locks)
            .saturating_add(usize::from(self.unsupervised()))
    }
}

/// Reads the root's health at `now`, applying `rule` to every waiting and held dispatch.
pub fn read(root: &Root, rule: &OverdueRule, now: DateTime<Utc>) -> Health {
    read_with(root, now, &mut |dir, kind| {
        DirFigures::read(dir, kind, rule, now)
    })
}

/// What a directory [`read_with`] asks about holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DirKind {
    /// A god's inbox, `conductor/pending/{god}/`.
    Inbox,
    /// `conductor/pending/_quarantine/`.
    Held,
    /// A god's dead letters, `conductor/dead/{god}/` (counted, not read).
    Dead,
}

/// The figures of one inbox, `_quarantine` or dead-letter directory as of the instant it was read:
/// the counts that do not change with the clock, and the instants at which each dispatch not yet
/// overdue becomes overdue (once overdue, a dispatch stays overdue until its file changes, which
/// changes the directory). A caller may keep them while the directory is unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirFigures {
    /// Dispatch files (dead letters: `*.json` names).
    pub files: usize,
    /// Files that should have been dispatches but could not be read.
    pub unreadable: usize,
    /// Open dispatches with an ack deadline.
    pub deadlines: usize,
    /// Overdue when read.
    pub overdue: usize,
    /// Held by a pause (`_quarantine` only; never overdue: the operator's own act).
    #[serde(default)]
    pub paused: usize,
    /// When each other dispatch that can become overdue does (unix microseconds, sorted): overdue
    /// at any later instant past it.
    pub overdue_at: Vec<i64>,
}

impl DirFigures {
    /// Reads `dir` at `now`.
    pub fn read(
        dir: &std::path::Path,
        kind: DirKind,
        rule: &OverdueRule,
        now: DateTime<Utc>,
    ) -> Self {
        let mut f = DirFigures::default();
        if kind == DirKind::Dead {
            f.files = json_files(dir);
            return f;
        }
        let held = kind == DirKind::Held;
        let (found, errors) = read_dispatch_dir(dir);
        f.files = found.len();
        f.unreadable = errors.len();
        for (_, d) in &found {
            if held && !crate::conductor::pause::pause_parts(d.held_because.as_deref()).is_empty() {
                f.paused += 1;
                continue;
            }
            let at = d.dispatched_at.as_deref().and_then(parse_ts);
            if rule.check(held, &d.ack_status, at, now).is_some() {
                f.overdue += 1;
            } else if let Some(t) = at.and_then(|at| rule.overdue_from(held, &d.ack_status, at)) {
                f.overdue_at.push(t.timestamp_micros());
            }
            if !held
                && d.ack_deadline.is_some()
                && matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending)
            {
                f.deadlines += 1;
            }
        }
        f.overdue_at.sort_unstable();
        f
    }

    /// Overdue dispatches at `now` (not before the instant the figures were read).
    pub(crate) fn overdue_at(&self, now: DateTime<Utc>) -> usize {
        let now = now.timestamp_micros();
        self.overdue
            .saturating_add(self.overdue_at.partition_point(|t| *t < now))
    }
}

/// [`read`] (the overdue rule is the one `figures` applies), taking each inbox's, `_quarantine`'s and dead-letter directory's figures from
/// `figures` (which may read the directory, or reuse what it read while the directory did not
/// change: `pantheon status` keeps them between runs).
pub fn read_with(
    root: &Root,
    now: DateTime<Utc>,
    figures: &mut dyn FnMut(&std::path::Path, DirKind) -> DirFigures,
) -> Health {
    let mut h = Health {
        broken: broken(root),
        ..Health::default()
    };
    let held = figures(&root.quarantine_dir(), DirKind::Held);
    h.held = held.files.saturating_sub(held.paused);
    h.paused_held = held.paused;
    match crate::conductor::pause::Pauses::load(root) {
        Ok(p) => {
            h.paused = p.list().len();
            h.pauses = p
                .list()
                .iter()
                .map(|p| format!("{} since {}", p.target().label(), p.since))
                .collect();
        }
        Err(_) => h.unreadable += 1,
    }
    h.unreadable += held.unreadable;
    let n = held.overdue_at(now);
    h.overdue += n;
    h.overdue_held += n;
    for god in god_dirs(&root.pending_root()) {
        let f = figures(&root.inbox_dir(&god), DirKind::Inbox);
        h.unreadable += f.unreadable;
        h.waiting += f.files;
        h.overdue += f.overdue_at(now);
        h.deadlines += f.deadlines;
    }
    for god in god_dirs(&root.dead_root()) {
        h.dead_letters += figures(&root.dead_dir(&god), DirKind::Dead).files;
    }
    h.supervisors = live_supervisors(root, now).len();
    for track in list_tracks(root) {
        let bus = Bus::open(root, &track);
        match bus.workers() {
            Ok(ws) => {
                let after = root.settings.stale_after;
                h.stale_workers += ws.iter().filter(|w| w.entry.is_stale(now, after)).count();
            }
            Err(_) => h.unreadable += 1,
        }
        match bus.locks() {
            Ok(ls) => h.expired_locks += ls.iter().filter(|l| l.entry.is_expired(now)).count(),
            Err(_) => h.unreadable += 1,
        }
    }
    h.bridge = read_bridge(root, now);
    h.recorder = recorder_health(root);
    h
}

/// What keeps the figures from meaning anything: protocol directories that exist as something
/// other than a directory (never followed: a link is not one), and a config file that cannot be used.
fn broken(root: &Root) -> Vec<String> {
    let mut out = Vec::new();
    for (dir, name) in [
        (root.pending_root(), "conductor/pending"),
        (root.quarantine_dir(), "conductor/pending/_quarantine"),
        (root.dead_root(), "conductor/dead"),
        (root.supervisor_dir(), "conductor/supervisor"),
    ] {
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if !m.is_dir() => out.push(format!(
                "{name} is not a directory: no dispatch in it can be counted"
            )),
            _ => {}
        }
    }
    if let Some(e) = &root.settings.config_error {
        out.push(format!(
            "conductor/config.yaml cannot be used ({e}): its settings and check levels are not in force"
        ));
    }
    out
}

/// How many `*.json` files (not hidden) `dir` lists, without reading them.
fn json_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    !n.starts_with('.') && n.ends_with(".json")
                })
                .count()
        })
        .unwrap_or(0)
}

fn read_bridge(root: &Root, now: DateTime<Utc>) -> Option<BridgeHealth> {
    let s = crate::bridge::load_status(root).ok().flatten()?;
    let alive = s.updated().and_then(parse_ts).is_some_and(|t| {
        let age = now.signed_duration_since(t);
        age <= BRIDGE_SILENT_AFTER && -age <= BRIDGE_SILENT_AFTER
    });
    // Only ids that read as ids (letters, digits, `_`, `-`, `.`): the file is another process's.
    let stuck = s
        .stuck
        .iter()
        .map(|r| r.outbox_id.as_str())
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 128
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
        .take(MAX_STUCK_NAMED)
        .map(str::to_owned)
        .collect();
    Some(BridgeHealth {
        alive,
        lag: s.lag,
        outbox_pending: s.outbox_pending as u64,
        stuck,
    })
}

/// Whether the journal's hash chain holds; `Err` carries the first problem (reads the whole journal).
pub fn journal_chain(root: &Root) -> Result<u64, Refusal> {
    match crate::journal::verify(root) {
        Ok(r) if r.valid => Ok(r.entries),
        Ok(r) => Err(r
            .problem
            .unwrap_or_else(|| "the chain is broken".into())
            .into()),
        Err(e) => Err(e.to_string().into()),
    }
}

/// A monitoring plugin's state, as its exit code (Nagios, Icinga, Sensu, the monitoring-plugins
/// guidelines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    /// Exit 0.
    Ok,
    /// Exit 1.
    Warning,
    /// Exit 2.
    Critical,
    /// Exit 3: the check could not tell (no root, a bad threshold).
    Unknown,
}

impl State {
    /// The exit code.
    pub fn code(self) -> u8 {
        match self {
            State::Ok => 0,
            State::Warning => 1,
            State::Critical => 2,
            State::Unknown => 3,
        }
    }

    /// The word of the output line.
    pub fn word(self) -> &'static str {
        match self {
            State::Ok => "OK",
            State::Warning => "WARNING",
            State::Critical => "CRITICAL",
            State::Unknown => "UNKNOWN",
        }
    }
}

/// The warning and critical levels of one figure: the state is reached when the figure is at or
/// above the level; `None` never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Level {
    /// WARNING at or above this.
    pub warn: Option<u64>,
    /// CRITICAL at or above this.
    pub crit: Option<u64>,
}

impl Level {
    const fn warn_at(n: u64) -> Self {
        Self {
            warn: Some(n),
            crit: None,
        }
    }

    fn state(&self, value: u64) -> State {
        if self.crit.is_some_and(|c| value >= c) {
            State::Critical
        } else if self.warn.is_some_and(|w| value >= w) {
            State::Warning
        } else {
            State::Ok
        }
    }

    /// The perfdata threshold (`N` alerts above N, so "at or above w" is `w-1`).
    fn perf(l: Option<u64>) -> String {
        l.map(|n| n.saturating_sub(1).to_string())
            .unwrap_or_default()
    }
}

/// When a missing supervisor matters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SupervisorRule {
    /// CRITICAL when open dispatches have ack deadlines and no supervisor is alive (the default).
    #[default]
    Deadlines,
    /// CRITICAL whenever no supervisor is alive.
    Always,
    /// Never checked.
    Never,
}

/// `pantheon check`'s thresholds: the defaults, then the root config's `check:` mapping, then the
/// command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Thresholds {
    /// Overdue dispatches (default: WARNING at 1).
    pub overdue: Level,
    /// Dead letters (default: WARNING at 1).
    pub dead_letters: Level,
    /// Stale workers (default: WARNING at 1).
    pub stale_workers: Level,
    /// Expired locks (default: WARNING at 1).
    pub expired_locks: Level,
    /// The bridge's lag in messages, while it runs (default: WARNING at 1000).
    pub bridge_lag: Level,
    /// The attention items, every kind (the console's `@ N need you`; default: no level, the
    /// figures of their own kinds judge).
    pub attention: Level,
    /// Pauses in force (default: WARNING at 1).
    pub paused: Level,
    /// When a missing supervisor is CRITICAL.
    pub supervisor: SupervisorRule,
    /// Whether the journal's hash chain is verified (a broken chain is CRITICAL; default: yes).
    pub journal: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            overdue: Level::warn_at(1),
            dead_letters: Level::warn_at(1),
            stale_workers: Level::warn_at(1),
            expired_locks: Level::warn_at(1),
            bridge_lag: Level::warn_at(1000),
            attention: Level::default(),
            paused: Level::warn_at(1),
            supervisor: SupervisorRule::Deadlines,
            journal: true,
        }
    }
}

/// The names of the figures a `check:` mapping (and `--warn`/`--crit`) may set.
pub const LEVEL_NAMES: [&str; 7] = [
    "overdue",
    "dead_letters",
    "stale_workers",
    "expired_locks",
    "bridge_lag",
    "attention",
    "paused",
];

impl Thresholds {
    /// The level named `name` (one of [`LEVEL_NAMES`]).
    pub fn level_mut(&mut self, name: &str) -> Option<&mut Level> {
        Some(match name {
            "overdue" => &mut self.overdue,
            "dead_letters" => &mut self.dead_letters,
            "stale_workers" => &mut self.stale_workers,
            "expired_locks" => &mut self.expired_locks,
            "bridge_lag" => &mut self.bridge_lag,
            "attention" => &mut self.attention,
            "paused" => &mut self.paused,
            _ => return None,
        })
    }

    /// The defaults with the root config's `check:` mapping applied; an unknown key or a value that
    /// is not a count is an error (a check must not run on thresholds nobody meant).
    pub fn from_config(check: Option<&serde_json::Value>) -> Result<Self, Refusal> {
        use serde_json::Value;
        let mut t = Self::default();
        let Some(check) = check else {
            return Ok(t);
        };
        let Value::Object(m) = check else {
            return Err("check: expected a mapping".into());
        };
        for (k, v) in m {
            match k.as_str() {
                "supervisor" => {
                    t.supervisor = match v.as_str() {
                        Some("deadlines") => SupervisorRule::Deadlines,
                        Some("always") => SupervisorRule::Always,
                        Some("never") => SupervisorRule::Never,
                        _ => {
                            return Err(format!(
                                "check.supervisor: {v} is not deadlines, always or never"
                            )
                            .into());
                        }
                    }
                }
                "journal" => {
                    t.journal = v
                        .as_bool()
                        .ok_or_else(|| format!("check.journal: {v} is not true or false"))?
                }
                name => {
                    let level = t.level_mut(name).ok_or_else(|| {
                        format!(
                            "check: unknown key {name:?} (known: {}, supervisor, journal)",
                            LEVEL_NAMES.join(", ")
                        )
                    })?;
                    let Value::Object(lm) = v else {
                        return Err(format!("check.{name}: expected {{warn: N, crit: N}}").into());
                    };
                    for (lk, lv) in lm {
                        let n = match lv {
                            Value::Null => None,
                            Value::Number(n) => Some(n.as_u64().ok_or_else(|| {
                                format!("check.{name}.{lk}: {lv} is not a count")
                            })?),
                            _ => {
                                return Err(
                                    format!("check.{name}.{lk}: {lv} is not a count").into()
                                );
                            }
                        };
                        match lk.as_str() {
                            "warn" => level.warn = n,
                            "crit" => level.crit = n,
                            _ => {
                                return Err(format!(
                                    "check.{name}: unknown key {lk:?} (known: warn, crit)"
                                )
                                .into());
                            }
                        }
                    }
                }
            }
        }
        Ok(t)
    }
}

/// What a check found: its state, the reasons (worst first) and the perfdata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The worst state of any figure.
    pub state: State,
    /// One phrase per figure past a level, worst first (or what is fine, when all is).
    pub reasons: Vec<String>,
    /// `label=value;warn;crit;0;` items.
    pub perfdata: Vec<String>,
}

impl Verdict {
    /// The plugin's one output line: `PANTHEON STATE - reasons | perfdata`.
    pub fn line(&self) -> String {
        format!(
            "PANTHEON {} - {} | {}",
            self.state.word(),
            self.reasons.join("; "),
            self.perfdata.join(" ")
        )
    }
}

/// What a check judges besides the [`Health`] figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Judged<'a> {
    /// The journal's chain, when it was verified: its entries, or the first problem.
    pub journal: Option<&'a Result<u64, Refusal>>,
    /// The attention items by kind (every kind, 0 included), as the console counts them.
    pub attention: &'a [(&'a str, usize)],
}

/// The attention items' total and the kinds present with their counts (`held 1, dead_letter 2`).
fn attention_figure(by_kind: &[(&str, usize)]) -> (usize, String) {
    let total = by_kind.iter().map(|(_, n)| n).sum();
    let kinds: Vec<String> = by_kind
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    (total, kinds.join(", "))
}

/// What `check` finds in the root as a whole: a broken journal chain and what breaks the root
/// (CRITICAL); outbox records the bridge cannot publish, by outbox id, a recorder that runs and does
/// not record, unreadable files (WARNING); the recorder's perfdata.
fn root_problems(
    h: &Health,
    journal: Option<&std::result::Result<u64, Refusal>>,
    found: &mut Vec<(State, String)>,
    perfdata: &mut Vec<String>,
) {
    match journal {
        Some(Err(problem)) => {
            found.push((State::Critical, format!("journal chain broken: {problem}")))
        }
        Some(Ok(entries)) => perfdata.push(format!("journal_entries={entries};;;0;")),
        None => {}
    }
    if let Some(b) = h.bridge.as_ref().filter(|b| !b.stuck.is_empty()) {
        found.push((
            State::Warning,
            format!(
                "outbox records the bridge cannot publish: {} (`pantheon bridge status` says why; `pantheon bridge retry ID` or `discard ID --reason TEXT`)",
                b.stuck.join(", ")
            ),
        ));
    }
    for why in &h.broken {
        found.push((State::Critical, why.clone()));
    }
    if let Some(r) = h.recorder.as_ref().filter(|r| !r.up) {
        found.push((
            State::Warning,
            format!(
                "history recorder down: {}",
                r.problem.as_deref().unwrap_or("nothing records the root")
            ),
        ));
    }
    if let Some(r) = &h.recorder {
        perfdata.push(format!("recorder_up={};;;0;1", u8::from(r.up)));
    }
    if h.unreadable > 0 {
        let n = h.unreadable;
        found.push((
            State::Warning,
            format!("{n} unreadable {}", if n == 1 { "file" } else { "files" }),
        ));
    }
}

/// Judges `h` (with the journal's chain, when it was verified, and the attention items) against `t`.
pub fn evaluate(h: &Health, judged: &Judged<'_>, t: &Thresholds) -> Verdict {
    let journal = judged.journal;
    let mut found: Vec<(State, String)> = Vec::new();
    let mut perfdata = Vec::new();
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut figure = |label: &str, value: u64, level: &Level, what: String| {
        perfdata.push(format!(
            "{label}={value};{};{};0;",
            Level::perf(level.warn),
            Level::perf(level.crit)
        ));
        let s = level.state(value);
        if s != State::Ok {
            found.push((s, what));
        }
    };
    let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    figure(
        "overdue",
        n(h.overdue),
        &t.overdue,
        plural(n(h.overdue), "overdue dispatch", "overdue dispatches"),
    );
    figure(
        "dead_letters",
        n(h.dead_letters),
        &t.dead_letters,
        plural(n(h.dead_letters), "dead letter", "dead letters"),
    );
    figure(
        "stale_workers",
        n(h.stale_workers),
        &t.stale_workers,
        plural(n(h.stale_workers), "stale worker", "stale workers"),
    );
    figure(
        "expired_locks",
        n(h.expired_locks),
        &t.expired_locks,
        plural(n(h.expired_locks), "expired lock", "expired locks"),
    );
    if let Some(b) = h.bridge.as_ref().filter(|b| b.alive) {
        figure(
            "bridge_lag",
            b.lag,
            &t.bridge_lag,
            format!("bridge lag {}", plural(b.lag, "message", "messages")),
        );
    }
    let (attention, kinds) = attention_figure(judged.attention);
    figure(
        "attention",
        n(attention),
        &t.attention,
        format!(
            "{} ({kinds})",
            plural(n(attention), "attention item", "attention items")
        ),
    );
    figure(
        "paused",
        n(h.paused),
        &t.paused,
        format!(
            "paused: {}{}",
            h.pauses.join(", "),
            if h.paused_held > 0 {
                format!(
                    " ({})",
                    plural(n(h.paused_held), "dispatch held", "dispatches held")
                )
            } else {
                String::new()
            }
        ),
    );
    perfdata.push(format!("held={};;;0;", h.held));
    perfdata.push(format!("waiting={};;;0;", h.waiting));
    perfdata.push(format!("supervisors={};;;0;", h.supervisors));
    match t.supervisor {
        SupervisorRule::Deadlines if h.unsupervised() => found.push((
            State::Critical,
            format!(
                "no supervisor alive to enforce {}",
                plural(n(h.deadlines), "ack deadline", "ack deadlines")
            ),
        )),
        SupervisorRule::Always if h.supervisors == 0 => {
            found.push((State::Critical, "no supervisor alive".into()))
        }
        _ => {}
    }
    root_problems(h, journal, &mut found, &mut perfdata);
    // Worst first; a stable sort keeps the order above among equals.
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    let state = found.first().map_or(State::Ok, |(s, _)| *s);
    let reasons = if found.is_empty() {
        let mut ok = vec![format!(
            "{} waiting, {} held, {}",
            h.waiting,
            h.held,
            plural(n(h.supervisors), "supervisor alive", "supervisors alive")
        )];
        if matches!(journal, Some(Ok(_))) {
            ok.push("journal chain intact".into());
        }
        ok
    } else {
        found.into_iter().map(|(_, r)| r).collect()
    };
    Verdict {
        state,
        reasons,
        perfdata,
    }
}
