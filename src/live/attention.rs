//! The attention items: everything in a snapshot that waits on a human, newest first, each with
//! its reason, age, the action that resolves it and the record it is about. Computed from the
//! snapshot alone (a pure function), so an item is gone as soon as its cause is.
//!
//! [`items`] is the one place they are computed: the console's header, its Attention pane and its
//! `--on-attention` hook, `pantheon status` (every format) and `pantheon check`, and the
//! `pantheon_attention_items` metric all count what it returns ([`Tally`]), with the same kinds
//! ([`Kind::ALL`]). A kind added later joins here and every surface counts it.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::engine::time::parse_ts;
use crate::live::snapshot::{OverdueCause, Snapshot, Sym, WorkflowView, short_duration};

mod key;
pub(crate) use key::Key;

/// How long a board session may stay in `VOTING` (or wait in `RESOLVING`) after it started when the
/// session names no deadline of its own (`vote_deadline` or `deadline`).
pub(crate) const BOARD_VOTE_DEADLINE: Duration = Duration::hours(1);

/// Why an item waits on a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Held,
    Overdue,
    Orphaned,
    StaleWorker,
    ExpiredLock,
    Deadlock,
    VoteOverdue,
    DeadLetter,
    Unreadable,
    /// Ack deadlines exist and no `pantheon serve` is alive to enforce them.
    NoSupervisor,
    /// An outbox record the bridge cannot publish (it retries it alone, then dead-letters it).
    StuckOutbox,
    /// A budget passed its warning share (80 % unless the config says) or was reached: the
    /// engine's warning (`conductor/cost/attention.jsonl`), fired once per budget and limit.
    BudgetWarning,
    /// A dispatch lying in a god's inbox while its workflow is `awaiting_approval` at that step: a
    /// held dispatch moved out of `_quarantine` by hand (only `pantheon approve` releases it).
    HeldMoved,
    /// An item of a foreign source (`--source`) waiting for a human: a teammate's permission or
    /// plan approval request, a blocked task, an unacked message, a task asking for input.
    Foreign,
    /// A foreign source that cannot be read (gone, changed format, server down).
    SourceDown,
}

impl Kind {
    /// Every kind, in the order the surfaces list them (the metric gives each a series, 0
    /// included; `status --format json` each a count).
    pub const ALL: [Kind; 15] = [
        Kind::Held,
        Kind::HeldMoved,
        Kind::Overdue,
        Kind::Orphaned,
        Kind::StaleWorker,
        Kind::ExpiredLock,
        Kind::Deadlock,
        Kind::VoteOverdue,
        Kind::DeadLetter,
        Kind::Unreadable,
        Kind::NoSupervisor,
        Kind::StuckOutbox,
        Kind::BudgetWarning,
        Kind::Foreign,
        Kind::SourceDown,
    ];

    /// The word used in the pane, the filter and the hook's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Held => "held",
            Kind::Overdue => "overdue",
            Kind::Orphaned => "orphaned",
            Kind::StaleWorker => "stale_worker",
            Kind::ExpiredLock => "expired_lock",
            Kind::Deadlock => "deadlock",
            Kind::VoteOverdue => "vote_overdue",
            Kind::DeadLetter => "dead_letter",
            Kind::Unreadable => "unreadable_file",
            Kind::NoSupervisor => "no_supervisor",
            Kind::StuckOutbox => "stuck_outbox",
            Kind::BudgetWarning => "budget_warning",
            Kind::HeldMoved => "held_moved",
            Kind::Foreign => "foreign",
            Kind::SourceDown => "source_down",
        }
    }
}

/// How many items of each kind (every kind present, 0 included), and their sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally(BTreeMap<&'static str, usize>);

impl Tally {
    /// Counts `items` by kind.
    pub fn of<'a>(items: impl IntoIterator<Item = &'a Item>) -> Self {
        let mut t: BTreeMap<&'static str, usize> =
            Kind::ALL.iter().map(|k| (k.as_str(), 0)).collect();
        for i in items {
            *t.entry(i.kind.as_str()).or_default() += 1;
        }
        Self(t)
    }

    fn add(&mut self, kind: Kind, n: usize) {
        *self.0.entry(kind.as_str()).or_default() += n;
    }

    /// The items of kind `kind`.
    pub fn get(&self, kind: Kind) -> usize {
        self.0.get(kind.as_str()).copied().unwrap_or(0)
    }

    /// Every item.
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    /// Each kind's word and count, by word.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, usize)> + '_ {
        self.0.iter().map(|(k, n)| (*k, *n))
    }

    /// The counts `to_json` wrote (an unknown kind is left out, a missing one is 0).
    pub fn from_json(v: &Value) -> Option<Self> {
        let m = v.as_object()?;
        let mut t = Self::of(std::iter::empty());
        for (k, n) in t.0.iter_mut() {
            *n = match m.get(*k) {
                Some(v) => usize::try_from(v.as_u64()?).ok()?,
                None => 0,
            };
        }
        Some(t)
    }

    /// `{"kind": n, …}` for every kind.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, n)| ((*k).to_owned(), Value::from(*n)))
                .collect(),
        )
    }
}

/// The record an item is about, where a surface that shows records takes the operator (the
/// console maps it to the pane and row that lists it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A dispatch in a god's inbox or in `_quarantine`, by its file name.
    Dispatch { god: Sym, name: Sym },
    /// A workflow.
    Workflow(Sym),
    /// A worker on a track.
    Worker { track: Sym, worker: Sym },
    /// A lock on a track.
    Lock { track: Sym, path: Sym },
    /// The workers (a deadlock whose locks are not known).
    Workers,
    /// The inboxes (deadlines nobody enforces).
    Inboxes,
    /// A track's board.
    Board(String),
    /// A dead letter, by its file name.
    DeadLetter { god: Sym, name: Sym },
    /// An outbox record the bridge has not published.
    Outbox(Sym),
    /// A god (its budget).
    God(Sym),
    /// A budget with no record of its own (a day's).
    Budget { scope: Sym, name: Sym, metric: Sym },
    /// The files that could not be read.
    Issues,
    /// A foreign source (`KIND:LOCATION`) and, for an item of its own, the item's key.
    Source { source: Sym, key: Option<Sym> },
}

/// The ids of the records an item concerns (`workflow_id`, `handoff_id`, `god`, `track`, `path`,
/// …), in the order the item names them; shared with the snapshot's rows where they hold the same
/// text (a root with 20,000 overdue workflows has as many items, recomputed as time passes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids(Box<[(&'static str, Sym)]>);

impl Ids {
    /// The id named `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| &**v)
    }

    /// The ids, in the order the item names them.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(k, v)| (*k, &**v))
    }

    /// The ids' values, in the order the item names them.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, v)| &**v)
    }

    /// The ids as a JSON object, sorted by name (what a notification hook receives).
    pub fn to_json(&self) -> Value {
        let mut sorted: Vec<_> = self.iter().collect();
        sorted.sort_by_key(|(k, _)| *k);
        Value::Object(
            sorted
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Value::from(v)))
                .collect(),
        )
    }
}

impl std::ops::Index<&str> for Ids {
    type Output = str;
    /// The id named `name`; panics when the item names no such id (as a map's index does).
    fn index(&self, name: &str) -> &str {
        match self.get(name) {
            Some(v) => v,
            None => panic!("the item names no {name}"),
        }
    }
}

impl FromIterator<(&'static str, Sym)> for Ids {
    fn from_iter<I: IntoIterator<Item = (&'static str, Sym)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// One thing that waits on a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The kind of its key.
    pub kind: Kind,
    /// The identity of the cause (kind and record ids): the same cause keeps the same key.
    pub key: Key,
    /// The ids of the records it concerns: its key's, named.
    pub ids: Ids,
    pub reason: String,
    /// Since when the cause holds, when known.
    pub since: Option<DateTime<Utc>>,
    /// What resolves it, with its key in the pane Enter opens: a template whose `{name}` stands
    /// for the key bound to the action of that `[keys]` name (the console fills them in).
    pub action: &'static str,
    /// The record it is about.
    pub target: Target,
}

impl Item {
    /// The item of the cause `key`: its kind and ids are the key's.
    pub(crate) fn new(key: Key, reason: String, target: Target) -> Self {
        Self {
            kind: key.kind(),
            ids: key.ids(),
            key,
            reason,
            since: None,
            action: "",
            target,
        }
    }

    /// The id the pane shows for it (the record's own: handoff, workflow, worker, lock path…).
    pub fn record(&self) -> &str {
        let at = match self.kind {
            Kind::StaleWorker
            | Kind::ExpiredLock
            | Kind::Deadlock
            | Kind::VoteOverdue
            | Kind::Foreign => 1,
            _ => 0,
        };
        self.ids.0.get(at).map_or("", |(_, v)| &**v)
    }

    /// A held dispatch's item in the quarantine, for the notifier's and the hook's tests.
    #[cfg(test)]
    pub fn held(handoff_id: &str, reason: String) -> Self {
        Item::new(
            Key::Held {
                handoff_id: handoff_id.into(),
                workflow_id: "wf_1".into(),
            },
            reason,
            Target::Dispatch {
                god: "_quarantine".into(),
                name: handoff_id.into(),
            },
        )
    }

    fn since(mut self, t: Option<DateTime<Utc>>) -> Self {
        self.since = t;
        self
    }

    fn action(mut self, a: &'static str) -> Self {
        self.action = a;
        self
    }

    /// The foreign source (`KIND:LOCATION`) the item comes from; `None` for the root's own.
    pub fn source(&self) -> Option<&str> {
        match self.kind {
            Kind::Foreign | Kind::SourceDown => self.ids.get("source"),
            _ => None,
        }
    }

    /// The kind of the foreign source the item comes from (`claude-teams`), the `source` label of
    /// the metrics; `None` for the root's own.
    pub fn source_kind(&self) -> Option<&str> {
        self.source().map(|s| s.split(':').next().unwrap_or(s))
    }

    /// The compact JSON a notification hook receives (one object per line); a foreign item names
    /// its `source`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": self.kind.as_str(),
            "ids": self.ids.to_json(),
            "reason": self.reason,
            "since": self.since.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        });
        if let (Some(src), Some(m)) = (self.source(), v.as_object_mut()) {
            m.insert("source".into(), src.into());
        }
        v
    }

    /// The text the filter matches: kind, ids and reason.
    pub fn haystack(&self) -> String {
        let mut s = format!("{} {} {}", self.kind.as_str(), self.record(), self.reason);
        for v in self.ids.values() {
            s.push(' ');
            s.push_str(v);
        }
        s
    }
}

fn ts(s: Option<&str>) -> Option<DateTime<Utc>> {
    s.and_then(parse_ts)
}

/// The board deadline of a session: its own `vote_deadline` / `deadline`, else its start plus
/// [`BOARD_VOTE_DEADLINE`].
fn board_deadline(b: &crate::live::snapshot::BoardView) -> Option<DateTime<Utc>> {
    let s = &b.session;
    ["vote_deadline", "deadline"]
        .iter()
        .find_map(|k| s.extra.get(*k).and_then(Value::as_str).and_then(parse_ts))
        .or_else(|| s.started().map(|t| t + BOARD_VOTE_DEADLINE))
}

/// Everything that waits on a human now, newest first (items with no known time last).
pub fn items(s: &Snapshot, now: DateTime<Utc>) -> Vec<Item> {
    let mut out = Vec::new();
    for_each_kind_but_workflows(s, now, &mut out);
    workflow_items(s, now, &mut out);
    // Newest first; undated last; then by key so the order is stable.
    out.sort_by(|a, b| {
        b.since
            .is_some()
            .cmp(&a.since.is_some())
            .then(b.since.cmp(&a.since))
            .then_with(|| a.key.cmp(&b.key))
    });
    // Kept for as long as the snapshot and the clock stand still: no spare capacity.
    out.shrink_to_fit();
    out
}

/// How many items of each kind [`items`] gives for `s` at `now` (the same [`Tally::of`] would
/// count), without making the workflows' items: on a root of 100,000 workflows tens of thousands
/// may be overdue, and `/metrics` and `pantheon status` need their number, not their words. The
/// workflows' kinds are counted by the predicates [`items`] uses; every other kind is few and is
/// counted from its items.
pub fn tally(s: &Snapshot, now: DateTime<Utc>) -> Tally {
    let mut out = Vec::new();
    for_each_kind_but_workflows(s, now, &mut out);
    let mut t = Tally::of(&out);
    let (mut overdue, mut orphaned) = (0, 0);
    for w in s.workflows.iter() {
        overdue += usize::from(overdue_item_cause(s, w, now).is_some());
        orphaned += usize::from(orphaned_item(s, w));
    }
    t.add(Kind::Overdue, overdue);
    t.add(Kind::Orphaned, orphaned);
    t
}

/// The items of every kind but the workflows' own (`overdue`, `orphaned`), in no order.
fn for_each_kind_but_workflows(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    held_items(s, now, out);
    held_moved_items(s, out);
    track_items(s, now, out);
    dead_letter_items(s, out);
    no_supervisor_item(s, now, out);
    stuck_outbox_items(s, out);
    budget_warnings(s, now, out);
    unreadable_items(s, out);
    source_items(s, out);
}

/// The foreign sources' items (kinds `foreign` and `source_down`), for the counts by source.
pub(crate) fn source_only_items(s: &Snapshot) -> Vec<Item> {
    let mut out = Vec::new();
    source_items(s, &mut out);
    out
}

/// The earliest instant after `now` at which time alone, with no file changing, may change how
/// many items of each kind [`items`] gives for `s`: a workflow going overdue, a lease running out,
/// a worker going stale, a board vote passing its deadline, a supervisor's heartbeat growing too
/// old, the UTC day turning (day budgets). `pantheon status` keeps its counts until then at most.
pub(crate) fn next_change(s: &Snapshot, now: DateTime<Utc>) -> DateTime<Utc> {
    let mut best = now
        .date_naive()
        .succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(now + Duration::hours(1), |d| d.and_utc());
    let mut consider = |t: DateTime<Utc>| {
        if t > now && t < best {
            best = t;
        }
    };
    match &s.tallies {
        Some(t) => {
            let i = t.overdue_from.partition_point(|at| *at <= now);
            if let Some(at) = t.overdue_from.get(i) {
                consider(*at);
            }
        }
        None => s
            .workflows
            .iter()
            .filter_map(|w| s.overdue_from(w))
            .for_each(&mut consider),
    }
    let stale_after = Duration::from_std(s.stale_threshold()).unwrap_or(Duration::MAX);
    for t in s.tracks.iter() {
        t.locks
            .iter()
            .filter_map(|l| l.expires())
            .for_each(&mut consider);
        for w in t.workers.iter().filter(|w| w.status.expects_heartbeat()) {
            if let Some(at) = w
                .heartbeat()
                .and_then(|b| b.checked_add_signed(stale_after))
            {
                consider(at);
            }
        }
        if let Some(d) = t.board.as_ref().and_then(|b| board_deadline(b)) {
            consider(d);
        }
    }
    let dead_after =
        Duration::from_std(crate::engine::SUPERVISOR_DEAD_AFTER).unwrap_or(Duration::MAX);
    for b in s.supervisors.iter() {
        if let Some(at) = b.last_beat.and_then(|t| t.checked_add_signed(dead_after)) {
            consider(at);
        }
    }
    best
}

/// Held dispatches: one item each (past the held limit it says so here, and its workflow gets no
/// second `overdue` item: nobody can ack a held dispatch).
fn held_items(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    for d in s.quarantine.dispatches.iter() {
        let x = &d.dispatch;
        // A pause's hold is the operator's own act, lifted by the resume: no attention item.
        if crate::engine::held_by_pause(x.held_because.as_deref()) {
            continue;
        }
        // A held dispatch is one item: past the held limit it says so here, and its workflow
        // gets no second `overdue` item (nobody can ack a held dispatch).
        let late = crate::console::items::dispatch_overdue(s, d, true, now)
            .map(|o| {
                format!(
                    "▲ OVERDUE, waiting {} (limit {}) · ",
                    short_duration(o.waited),
                    short_duration(o.limit)
                )
            })
            .unwrap_or_default();
        out.push(
            Item::new(
                Key::Held {
                    handoff_id: x.handoff_id.clone(),
                    workflow_id: Sym::from(&*x.workflow_id),
                },
                format!(
                    "{late}held for approval ({}): {} → {} step {}",
                    x.held_because.as_deref().unwrap_or("approval required"),
                    x.from_god,
                    x.to_god,
                    x.step
                ),
                Target::Dispatch {
                    god: s.quarantine.god.as_str().into(),
                    name: d.name.clone(),
                },
            )
            .since(x.dispatched_at.as_ref().and_then(|t| t.at()))
            .action("{approve} approve · {reject_held} reject"),
        );
    }
}

/// Dispatches in a god's inbox whose workflow is `awaiting_approval` at their step: a held
/// dispatch moved out of `_quarantine` by hand. The engine refuses its ack; only the operator's
/// `pantheon approve` (or reject) decides it.
fn held_moved_items(s: &Snapshot, out: &mut Vec<Item>) {
    use std::collections::HashMap;
    let awaiting: HashMap<&str, &crate::live::snapshot::WorkflowView> = s
        .workflows
        .iter()
        .filter(|w| w.state.status == crate::engine::WorkflowStatus::AwaitingApproval)
        .map(|w| (&*w.id, w))
        .collect();
    if awaiting.is_empty() {
        return;
    }
    for inbox in s.inboxes.iter() {
        for d in inbox.dispatches.iter() {
            let x = &d.dispatch;
            let Some(w) = awaiting.get(&*x.workflow_id) else {
                continue;
            };
            if w.state.current_step.as_deref() != Some(&*x.step) {
                continue;
            }
            out.push(
                Item::new(
                    Key::HeldMoved {
                        handoff_id: x.handoff_id.clone(),
                        god: inbox.god.as_str().into(),
                        workflow_id: w.id.clone(),
                    },
                    format!(
                        "held dispatch moved by hand: step {} of {} awaits approval, but its dispatch lies in {}'s inbox",
                        x.step, w.id, inbox.god
                    ),
                    Target::Dispatch {
                        god: inbox.god.as_str().into(),
                        name: d.name.clone(),
                    },
                )
                .since(w.state.updated.as_ref().and_then(|t| t.at()))
                .action("`pantheon approve` or `reject` it: its ack is refused until then"),
            );
        }
    }
}

/// Workflows overdue (for a cause other than a held dispatch) and orphaned ones.
/// Why `w` has an `overdue` item at `now`, if it has one (a held dispatch's cause belongs to its
/// `held` item).
fn overdue_item_cause(s: &Snapshot, w: &WorkflowView, now: DateTime<Utc>) -> Option<OverdueCause> {
    s.overdue_cause(w, now).filter(|c| !c.is_held())
}

/// True when `w` has an `orphaned` item.
fn orphaned_item(s: &Snapshot, w: &WorkflowView) -> bool {
    s.loading.is_none() && Snapshot::orphaned(w)
}

fn workflow_items(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    for w in s.workflows.iter() {
        if let Some(why) = overdue_item_cause(s, w, now) {
            // The oldest unacked dispatch, else the last ack, dates it.
            let since = w
                .waiting
                .iter()
                .filter_map(|(_, d)| d.dispatched_at.as_ref().and_then(|t| t.at()))
                .min()
                .or_else(|| {
                    w.state
                        .last_ack
                        .as_ref()
                        .and_then(|a| a.acked_at.as_ref().and_then(|t| t.at()))
                });
            out.push(
                Item::new(
                    Key::Overdue(w.id.clone()),
                    format!("overdue: {why}"),
                    Target::Workflow(w.id.clone()),
                )
                .since(since)
                .action("{abort} abort · ack it in {pane_2} Inboxes"),
            );
        }
        if orphaned_item(s, w) {
            out.push(
                Item::new(
                    Key::Orphaned(w.id.clone()),
                    "waits for an ack but its dispatch is in no inbox".into(),
                    Target::Workflow(w.id.clone()),
                )
                .since(w.state.updated.as_ref().and_then(|t| t.at()))
                .action("{abort} abort · `pantheon redispatch` writes it again"),
            );
        }
    }
}

/// Per track: stale workers, expired locks, deadlocks and a board vote past its deadline.
fn track_items(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    for t in s.tracks.iter() {
        for w in t
            .workers
            .iter()
            .filter(|w| w.is_stale(now, s.stale_threshold()))
        {
            let beat = w.heartbeat();
            out.push(
                Item::new(
                    Key::StaleWorker {
                        track: t.name.as_str().into(),
                        worker_id: w.worker_id.as_str().into(),
                    },
                    format!(
                        "{} {} and silent for {}",
                        w.worker_id,
                        w.status,
                        beat.map_or("ever".into(), |b| short_duration(now - b))
                    ),
                    Target::Worker {
                        track: t.name.as_str().into(),
                        worker: w.worker_id.as_str().into(),
                    },
                )
                .since(beat)
                .action("{worker_locks} its locks · check the worker"),
            );
        }
        for l in t.locks.iter().filter(|l| l.is_expired(now)) {
            out.push(
                Item::new(
                    Key::ExpiredLock {
                        track: t.name.as_str().into(),
                        path: l.path.as_str().into(),
                    },
                    format!(
                        "lock expired, still held by {}",
                        l.worker_id.as_deref().unwrap_or("-")
                    ),
                    Target::Lock {
                        track: t.name.as_str().into(),
                        path: l.path.as_str().into(),
                    },
                )
                .since(l.expires())
                .action("{force_unlock} force-unlock"),
            );
        }
        for (i, cycle) in t.deadlocks.iter().enumerate() {
            let locks = t.deadlock_locks.get(i).cloned().unwrap_or_default();
            let jump = match locks.first() {
                Some(p) => Target::Lock {
                    track: t.name.as_str().into(),
                    path: p.as_str().into(),
                },
                None => Target::Workers,
            };
            let mut reason = format!("deadlock: {cycle}");
            if !locks.is_empty() {
                reason.push_str(&format!(" (locks: {})", locks.join(", ")));
            }
            // A cycle dates from its newest BLOCKED message.
            let since = t
                .messages
                .iter()
                .rev()
                .find(|m| m.kind == "BLOCKED")
                .and_then(|m| parse_ts(&m.timestamp));
            out.push(
                Item::new(
                    Key::Deadlock {
                        track: t.name.as_str().into(),
                        cycle: cycle.as_str().into(),
                    },
                    reason,
                    jump,
                )
                .since(since)
                .action("{force_unlock} force-unlock a lock of the cycle"),
            );
        }
        if let Some(b) = &t.board {
            let status = b.session.status.as_str();
            if matches!(status, "VOTING" | "RESOLVING")
                && let Some(deadline) = board_deadline(b)
                && deadline <= now
            {
                out.push(
                    Item::new(
                        Key::VoteOverdue {
                            track: t.name.as_str().into(),
                            session_id: b.session.session_id.as_str().into(),
                        },
                        format!(
                            "board {status} past its deadline ({} votes of {})",
                            b.votes.len(),
                            b.session.directors.len()
                        ),
                        Target::Board(t.name.clone()),
                    )
                    .since(Some(deadline))
                    .action("{board_resolve} resolve · {board_force_advance} force advance"),
                );
            }
        }
    }
}

/// Every live dead letter (`conductor/dead/{god}/`): one that was retired (superseded by a rerun,
/// its workflow finished or aborted, discarded by hand) lies in the retired archive and is none.
/// A dead letter still here waits on the operator whatever its workflow's state: requeued, or
/// discarded (`pantheon dead discard`), the same count `pantheon status` and the metrics give.
fn dead_letter_items(s: &Snapshot, out: &mut Vec<Item>) {
    for inbox in s.dead_letters.iter() {
        for d in inbox.dispatches.iter() {
            let x = &d.dispatch;
            // Dead letters are few: their whole file (delivery history, reason) is read on demand
            // and cached with the snapshot's record.
            let raw = d.whole().map(|w| w.raw.clone()).unwrap_or_default();
            let extra = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_owned);
            let deliveries = raw
                .get("deliveries")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let mut reason = format!(
                "dead-lettered after {deliveries} deliveries: step {} for {}",
                x.step, inbox.god
            );
            if let Some(why) = extra("reason").or_else(|| extra("dead_reason")) {
                reason.push_str(&format!(" ({why})"));
            }
            let since = ts(extra("dead_at")
                .or_else(|| extra("dead_lettered_at"))
                .as_deref())
            .or_else(|| x.dispatched_at.as_ref().and_then(|t| t.at()));
            out.push(
                Item::new(
                    Key::DeadLetter {
                        handoff_id: d.name.clone(),
                        god: inbox.god.as_str().into(),
                        workflow_id: Sym::from(&*x.workflow_id),
                    },
                    reason,
                    Target::DeadLetter {
                        god: inbox.god.as_str().into(),
                        name: d.name.clone(),
                    },
                )
                .since(since)
                .action("{requeue} requeue · {discard_dead} discard · {abort} abort its workflow"),
            );
        }
    }
}

/// Ack deadlines that no live supervisor enforces.
fn no_supervisor_item(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    if let Some(n) = s.unsupervised_deadlines(now) {
        // Dated from the last beat of the newest supervisor that was alive once, if any.
        let since = s.supervisors.iter().filter_map(|b| b.last_beat).max();
        let mut reason = format!(
            "{n} dispatch(es) have an ack deadline and no supervisor is alive to enforce it"
        );
        if let Some(t) = since {
            reason.push_str(&format!(" (last beat {} ago)", short_duration(now - t)));
        }
        out.push(
            Item::new(Key::NoSupervisor, reason, Target::Inboxes)
                .since(since)
                .action("run `pantheon serve` for this root"),
        );
    }
}

/// Outbox records the bridge cannot publish.
fn stuck_outbox_items(s: &Snapshot, out: &mut Vec<Item>) {
    // Outbox records the bridge cannot publish (`stuck` in its status): each says why and what to do.
    let stuck = s.bridge.as_deref().map(|b| b.stuck.as_slice());
    for r in stuck.unwrap_or_default() {
        let id = r.outbox_id.as_str();
        let why = r.why();
        let attempts = r.attempts;
        out.push(
            Item::new(
                Key::StuckOutbox(id.into()),
                format!("outbox record {id} cannot be published (attempt {attempts}): {why}"),
                Target::Outbox(id.into()),
            )
            .since(ts(Some(r.since.as_str())))
            .action(
                "fix what the hint names, then `R` retries it now; `D` discards it (bridge pane)",
            ),
        );
    }
}

/// Files the live model cannot read.
fn unreadable_items(s: &Snapshot, out: &mut Vec<Item>) {
    for w in s.warnings.iter() {
        // Shown from the root (the protocol's own names), whole when it lies elsewhere.
        let full = w.path.to_string_lossy();
        let path = match w.path.strip_prefix(&s.root) {
            Ok(rel) => rel.to_string_lossy(),
            Err(_) => match full.find("/conductor/") {
                Some(i) => full[i + 1..].to_owned().into(),
                None => full.clone(),
            },
        };
        out.push(
            Item::new(
                Key::Unreadable(path.as_ref().into()),
                format!("cannot read the file: {}", w.message),
                Target::Issues,
            )
            .since(w.since)
            .action("fix or remove the file"),
        );
    }
}

/// The foreign sources' items: each waiting item of a source (its last good read's, also while it
/// is broken: the state it showed still waits), and each source that cannot be read.
fn source_items(s: &Snapshot, out: &mut Vec<Item>) {
    for src in s.sources.iter() {
        let spec: Sym = Sym::from(src.spec());
        if let crate::sources::Health::Error { reason, since } = &src.health {
            out.push(
                Item::new(
                    Key::SourceDown(spec.clone()),
                    format!("source {spec} cannot be read: {reason}"),
                    Target::Source {
                        source: spec.clone(),
                        key: None,
                    },
                )
                .since(Some(*since))
                .action("fix what the reason names (`pantheon sources` probes it)"),
            );
        }
        for a in &src.snapshot.attention {
            let key: Sym = Sym::from(a.key.as_str());
            let mut item = Item::new(
                Key::Foreign {
                    source: spec.clone(),
                    key: key.clone(),
                },
                a.what.clone(),
                Target::Source {
                    source: spec.clone(),
                    key: Some(key),
                },
            )
            .since(a.since);
            item.action = if a.answerable {
                "its source takes an answer (`Source::answer`)"
            } else {
                "answer it where the agents run (this source is read-only)"
            };
            out.push(item);
        }
    }
}

/// The engine's budget warnings whose budget still stands as it was when it fired: a workflow's or
/// step's while the workflow is unfinished, a god's, and today's day budget; a raised budget's old
/// warning is gone (the raise warns again at its own share).
fn budget_warnings(s: &Snapshot, now: DateTime<Utc>, out: &mut Vec<Item>) {
    for (w, view, bar) in s.standing_budget_warnings(now) {
        let jump = match view {
            Some(v) => Target::Workflow(v.id.clone()),
            None if w.scope == "god" => Target::God(w.name.as_str().into()),
            None => Target::Budget {
                scope: w.scope.as_str().into(),
                name: w.name.as_str().into(),
                metric: w.metric.as_str().into(),
            },
        };
        let what = if w.metric == "cost_usd" {
            "cost"
        } else {
            "token"
        };
        let reason = if bar.reached() {
            format!(
                "{} {} reached its {what} budget ({}): its next dispatch is held for approval",
                w.scope,
                w.name,
                bar.figures()
            )
        } else {
            format!(
                "{} {} used {:.0}% of its {what} budget ({}; warns at {:.0}%)",
                w.scope,
                w.name,
                bar.share() * 100.0,
                bar.figures(),
                w.warn_at * 100.0
            )
        };
        out.push(
            Item::new(
                Key::BudgetWarning {
                    budget: w.name.as_str().into(),
                    scope: w.scope.as_str().into(),
                    metric: w.metric.as_str().into(),
                    limit: bar.limit,
                },
                reason,
                jump,
            )
            .since(w.at)
            .action(
                "{approve} approves a held dispatch (a budget raise is asked) · `pantheon cost`",
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_the_items_order_for_the_record_and_the_key_and_sort_for_the_hook() {
        let dead = Item::new(
            Key::DeadLetter {
                handoff_id: "h1".into(),
                god: "zeus".into(),
                workflow_id: "wf_1".into(),
            },
            String::new(),
            Target::Issues,
        );
        assert_eq!(dead.kind, Kind::DeadLetter);
        assert_eq!(dead.record(), "h1");
        assert_eq!(dead.key.to_string(), "dead_letter/h1/zeus/wf_1");
        assert_eq!(&dead.ids["god"], "zeus");
        assert_eq!(dead.ids.get("track"), None);
        assert_eq!(
            dead.to_json()["ids"].to_string(),
            r#"{"god":"zeus","handoff_id":"h1","workflow_id":"wf_1"}"#
        );
        let stale = Item::new(
            Key::StaleWorker {
                track: "main".into(),
                worker_id: "w9".into(),
            },
            String::new(),
            Target::Issues,
        );
        assert_eq!(stale.record(), "w9");
        assert_eq!(stale.haystack(), "stale_worker w9  main w9");
    }

    #[test]
    fn a_workflows_item_shares_its_id_instead_of_copying_it() {
        // A root with 20,000 overdue workflows has as many items, made again as time passes: each
        // names its workflow through the snapshot's own copy of the id.
        use crate::live::snapshot::{Record, WorkflowRow, WorkflowView};
        let row = WorkflowRow {
            status: crate::engine::WorkflowStatus::WaitingForAck,
            ..Default::default()
        };
        let w = WorkflowView {
            id: Sym::from("wf_orphan_1"),
            state: std::sync::Arc::new(Record::new(row)),
            manifest: None,
            warning: None,
            waiting: Default::default(),
            dir: std::sync::Arc::from(std::path::Path::new("/nowhere")),
        };
        let s = Snapshot {
            workflows: std::sync::Arc::new(vec![w.clone()]),
            ..Default::default()
        };
        let items = items(&s, Utc::now());
        let [item] = items.as_slice() else {
            panic!("one orphaned workflow, one item: {items:?}");
        };
        assert_eq!(item.kind, Kind::Orphaned);
        assert_eq!(item.record(), "wf_orphan_1");
        assert_eq!(item.key, Key::Orphaned(w.id.clone()));
        assert_eq!(item.key.to_string(), "orphaned/wf_orphan_1");
        let shared = |v: &Sym| std::sync::Arc::ptr_eq(v, &w.id);
        assert!(item.ids.0.iter().all(|(_, v)| shared(v)), "{item:?}");
        assert!(
            matches!(&item.key, Key::Orphaned(k) if shared(k)),
            "{item:?}"
        );
        assert!(
            matches!(&item.target, Target::Workflow(k) if shared(k)),
            "{item:?}"
        );
    }

    #[test]
    fn a_record_the_bridge_cannot_publish_is_an_item_naming_the_fix() {
        let status = json!({"name": "konan", "stuck": [{
            "outbox_id": "ob_1", "attempts": 3, "since": "2026-12-01T10:00:00Z",
            "error": "no stream found for given subject",
            "hint": "no stream holds subject subspace.konan.inbox: create one that does"}]});
        let s = Snapshot {
            bridge: Some(std::sync::Arc::new(
                crate::engine::nats::Status::from_value(&status),
            )),
            ..Default::default()
        };
        let items = items(&s, Utc::now());
        let [item] = items.as_slice() else {
            panic!("one stuck record, one item: {items:?}");
        };
        assert_eq!(item.kind, Kind::StuckOutbox);
        assert_eq!(item.key.to_string(), "stuck_outbox/ob_1");
        assert!(
            item.reason
                .contains("no stream holds subject subspace.konan.inbox")
        );
        assert!(matches!(&item.target, Target::Outbox(id) if &**id == "ob_1"));
    }

    #[test]
    fn a_board_started_at_the_end_of_time_has_no_deadline_instead_of_a_panic() {
        // A session file is agents' input: its start plus the vote deadline must not overflow.
        for started in ["+262142-12-31T23:30:00", "9999-12-31T23:30:00Z"] {
            let session = crate::engine::BoardSession {
                started_at: Some(started.to_owned()),
                ..Default::default()
            };
            let b = crate::live::snapshot::BoardView {
                session: std::sync::Arc::new(session),
                session_path: std::path::PathBuf::from("board/session-x.json"),
                assessments: Default::default(),
                votes: Default::default(),
                discussion: Default::default(),
                predicted: None,
                resolved: None,
            };
            let d = board_deadline(&b);
            assert_eq!(d.is_some(), started.starts_with("9999"), "{started}: {d:?}");
        }
    }
}
