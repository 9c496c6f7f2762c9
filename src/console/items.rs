//! The rows each pane lists, filtered: computed from a snapshot in one place so the views draw exactly
//! what the actions act on.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::rowkey::RowKey;
use crate::engine::{
    AckStatus, Assessment, Envelope, LockEntry, Vote, WorkerEntry, WorkflowStatus,
};
use crate::live::snapshot::{BoardView, DispatchView, Snapshot, TrackView, WorkflowView};

/// A pane filter: free words that must all appear (case-insensitive), and for the bus `type:X` and
/// `source:Y` terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    words: Vec<String>,
    kind: Option<String>,
    source: Option<String>,
    /// The time the rows' labels (OVERDUE, STALE, EXPIRED) are computed at.
    now: Option<DateTime<Utc>>,
    /// The column the rows are ordered by (else each list's own order).
    sort: Option<Sort>,
    /// Leave out finished workflows (completed, aborted).
    hide_finished: bool,
    /// Only the dispatches of this inbox (a god, or `_quarantine`).
    god: Option<String>,
}

/// A list ordered by one of its columns (`:sort COLUMN`, or Shift + the column's letter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sort {
    pub column: Column,
    pub descending: bool,
}

/// A column rows can be ordered by. Each pane names its own ([`sort_columns`]); the header text
/// is only what the column is called on screen and on the `:sort` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Column {
    Workflow,
    Definition,
    Status,
    Step,
    God,
    Age,
    Ack,
    Handoff,
    From,
    Track,
    Path,
    Holder,
    Type,
    Acquired,
    TimeLeft,
    Worker,
    Progress,
    Task,
    Subtask,
    Beat,
    Deliveries,
    DeadSince,
    LastTarget,
}

impl Column {
    /// The column's header, as the tables show it.
    pub fn header(self) -> &'static str {
        match self {
            Column::Workflow => "WORKFLOW",
            Column::Definition => "DEFINITION",
            Column::Status => "STATUS",
            Column::Step => "STEP",
            Column::God => "GOD",
            Column::Age => "AGE",
            Column::Ack => "ACK",
            Column::Handoff => "HANDOFF",
            Column::From => "FROM",
            Column::Track => "TRACK",
            Column::Path => "PATH",
            Column::Holder => "HOLDER",
            Column::Type => "TYPE",
            Column::Acquired => "ACQUIRED",
            Column::TimeLeft => "TIME LEFT",
            Column::Worker => "WORKER",
            Column::Progress => "PROGRESS",
            Column::Task => "TASK",
            Column::Subtask => "SUBTASK",
            Column::Beat => "BEAT",
            Column::Deliveries => "DELIVERIES",
            Column::DeadSince => "DEAD SINCE",
            Column::LastTarget => "LAST TARGET",
        }
    }

    /// How `:sort` and its completion spell it: lower case, `-` for a space.
    pub fn word(self) -> String {
        self.header().to_ascii_lowercase().replace(' ', "-")
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.header())
    }
}

/// The columns a pane's rows can be sorted by; none for the bus tail (arrival order) and the
/// board.
pub(crate) fn sort_columns(pane: crate::console::keymap::Pane) -> &'static [Column] {
    pane.view().sort_columns()
}

/// The column of `pane` that `word` names: case-insensitive, a prefix, `-` or `_` for a space.
pub(crate) fn sort_column(pane: crate::console::keymap::Pane, word: &str) -> Option<Column> {
    let w = word.trim().to_uppercase().replace(['-', '_'], " ");
    if w.is_empty() {
        return None;
    }
    let cols = sort_columns(pane);
    cols.iter()
        .find(|c| c.header() == w)
        .or_else(|| cols.iter().find(|c| c.header().starts_with(&w)))
        .copied()
}

/// Orders `v` by the text `key` gives each row for the sort's column, in natural order (stable:
/// rows with the same key keep the list's own order).
fn apply_sort<T>(v: &mut Vec<T>, sort: Option<&Sort>, key: impl Fn(&T, Column) -> String) {
    let Some(s) = sort else { return };
    let mut keyed: Vec<(String, T)> = v.drain(..).map(|x| (key(&x, s.column), x)).collect();
    keyed.sort_by(|a, b| {
        let o = natural_cmp(&a.0, &b.0);
        if s.descending { o.reverse() } else { o }
    });
    v.extend(keyed.into_iter().map(|(_, x)| x));
}

impl Filter {
    pub fn parse(text: &str) -> Self {
        let mut f = Filter::default();
        for w in text.split_whitespace() {
            let lower = w.to_lowercase();
            if let Some(t) = lower.strip_prefix("type:") {
                f.kind = Some(t.to_owned());
            } else if let Some(s) = lower.strip_prefix("source:") {
                f.source = Some(s.to_owned());
            } else {
                f.words.push(lower);
            }
        }
        f
    }

    /// The same filter, with time-dependent labels computed at `now`.
    pub fn at(mut self, now: DateTime<Utc>) -> Self {
        self.now = Some(now);
        self
    }

    /// The same filter, ordering rows by `sort`.
    pub fn sorted(mut self, sort: Option<Sort>) -> Self {
        self.sort = sort;
        self
    }

    /// The same filter, leaving out finished workflows when `on`.
    pub fn hiding_finished(mut self, on: bool) -> Self {
        self.hide_finished = on;
        self
    }

    /// The same filter, keeping only the dispatches of `god`'s inbox.
    pub fn in_inbox(mut self, god: Option<String>) -> Self {
        self.god = god;
        self
    }

    /// The free words (lower case), for highlighting them.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.kind.is_none() && self.source.is_none()
    }

    /// True when some free word could match within `label` (a word has no space, so it matches
    /// within one word of the haystack): a label that costs work is worked out only then.
    pub fn may_match(&self, label: &str) -> bool {
        self.words.iter().any(|w| label.contains(w.as_str()))
    }

    /// True when every free word appears in `haystack` (which the caller lower-cases).
    pub fn matches_text(&self, haystack: &str) -> bool {
        let h = haystack.to_lowercase();
        self.words.iter().all(|w| h.contains(w.as_str()))
    }

    /// An attention item: `source:KIND` keeps the items of foreign sources whose `KIND:LOCATION`
    /// starts with it (`source:claude` the Claude Code teams'); words search its text.
    pub fn matches_item(&self, source: Option<&str>, haystack: &str) -> bool {
        if let Some(s) = &self.source
            && !source.is_some_and(|x| x.to_lowercase().starts_with(s.as_str()))
        {
            return false;
        }
        self.matches_text(haystack)
    }

    /// A bus message: `type:` and `source:` are prefixes of those fields; words search the whole line.
    pub fn matches_message(&self, m: &Envelope) -> bool {
        if let Some(k) = &self.kind
            && !m.kind.to_lowercase().starts_with(k.as_str())
        {
            return false;
        }
        if let Some(s) = &self.source
            && !m.source.to_lowercase().contains(s.as_str())
        {
            return false;
        }
        self.words.is_empty()
            || self.matches_text(&format!("{} {} {} {}", m.kind, m.source, m.id, m.payload))
    }
}

/// The label `/over-budget` finds: a workflow past a budget or held for one, a dispatch held for a
/// budget, a Ledger row at its limit.
pub(crate) const OVER_BUDGET: &str = "over-budget";

/// What an ack column shows: an ack's own status, or the console's word for a dispatch held for
/// approval (`held`), a workflow whose dispatch was dead-lettered (`dead`), or no ack (`-`). Its
/// text (`Display`) is the column's and the filter's; the theme colours the variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckShown {
    Status(AckStatus),
    Held,
    Dead,
    None,
}

impl AckShown {
    /// A dispatch's ack column: `held` in `_quarantine`, else its ack status.
    pub fn of_dispatch(status: &AckStatus, held: bool) -> Self {
        if held {
            AckShown::Held
        } else {
            AckShown::Status(status.clone())
        }
    }
}

impl std::fmt::Display for AckShown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Padded as its text was (`{:<10}`).
        f.pad(match self {
            AckShown::Status(s) => s.as_str(),
            AckShown::Held => "held",
            AckShown::Dead => "dead",
            AckShown::None => "-",
        })
    }
}

/// The ack column of a workflow: the waiting dispatch's state, else what its status says of its
/// step's ack (`dead` stalled, `completed`, `withdrawn` or none aborted), else the latest ack.
pub(crate) fn ack_state(w: &WorkflowView) -> AckShown {
    if let Some((god, d)) = w.waiting.first() {
        if &**god == crate::engine::layout::QUARANTINE_DIR {
            return AckShown::Held;
        }
        return AckShown::Status(d.ack_status.clone());
    }
    match w.state.status {
        // Its dispatch was dead-lettered: no ack came and none will (requeue or rerun it).
        WorkflowStatus::Stalled => AckShown::Dead,
        // Its last step was done (by a `completed` ack or by the god's handoff): an earlier
        // step's `accepted` is no ack state of it.
        WorkflowStatus::Completed => AckShown::Status(AckStatus::Completed),
        WorkflowStatus::Aborted
            if w.manifest
                .as_ref()
                .is_some_and(|m| !m.dispatches_withdrawn.is_empty()) =>
        {
            AckShown::Status(AckStatus::Withdrawn)
        }
        WorkflowStatus::Aborted => AckShown::None,
        _ => w
            .state
            .last_ack
            .as_ref()
            .map_or(AckShown::None, |a| AckShown::Status(a.status.clone())),
    }
}

/// Why a dispatch of the Inboxes pane is overdue, if it is: the engine's one rule (unacked past
/// the unacked limit in a god's inbox; held past the held limit in `_quarantine`).
pub(crate) fn dispatch_overdue(
    snap: &Snapshot,
    d: &DispatchView,
    held: bool,
    now: DateTime<Utc>,
) -> Option<crate::engine::Overdue> {
    let x = &d.dispatch;
    snap.overdue_rule().check(
        held,
        &x.ack_status,
        x.dispatched_at.as_ref().and_then(|t| t.at()),
        now,
    )
}

/// The delivery count and the ack deadline's countdown of a dispatch with an `ack_wait`
/// (docs/PROTOCOL.md §2.10): `2/3 due 12s`, `2/3 due now`; `None` without a deadline.
pub(crate) fn delivery_note(
    d: &crate::live::snapshot::DispatchRow,
    now: DateTime<Utc>,
) -> Option<String> {
    let (count, due) = delivery_parts(d, now)?;
    Some(match due {
        Some(due) => format!("{count} {due}"),
        None => count,
    })
}

/// [`delivery_note`]'s two parts, for cells that drop the count before they cut the deadline:
/// the count (`2/3`) and the deadline (`due 12s`, `due now`; `None` when the dispatch has none).
pub(crate) fn delivery_parts(
    d: &crate::live::snapshot::DispatchRow,
    now: DateTime<Utc>,
) -> Option<(String, Option<String>)> {
    if d.deliveries == 0 {
        return None;
    }
    let max = d
        .max_deliveries
        .map(|m| m.to_string())
        .unwrap_or_else(|| "?".into());
    let due = d.ack_deadline.as_ref().and_then(|t| t.at()).map(|t| {
        let left = (t - now).num_seconds();
        if left <= 0 {
            "due now".to_owned()
        } else if left < 120 {
            format!("due {left}s")
        } else if left < 7200 {
            format!("due {}m", left / 60)
        } else {
            format!("due {}h", left / 3600)
        }
    });
    Some((format!("{}/{max}", d.deliveries), due))
}

/// Workflows, unfinished first, then by id (or by the sort's column). The filter sees what the row shows, labels included
/// (`unacked`, `held`, `overdue`).
pub fn workflows<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<&'a WorkflowView> {
    let mut v: Vec<&WorkflowView> = snap
        .workflows
        .iter()
        .filter(|w| !(filter.hide_finished && w.state.status.is_finished()))
        .filter(|w| {
            filter.is_empty()
                || filter.matches_text(&format!(
                    "{} {} {} {} {} {} {} {}",
                    w.id,
                    w.state.definition_id.as_deref().unwrap_or(""),
                    w.state.status,
                    w.state.current_step.as_deref().unwrap_or(""),
                    w.state.dispatched_to.as_deref().unwrap_or(""),
                    ack_state(w),
                    match filter.now.and_then(|n| snap.overdue(w, n)) {
                        Some(why) => format!("overdue {why}"),
                        None => String::new(),
                    },
                    // Worked out only for a filter that can match it (a pass over 100,000 rows).
                    if filter.may_match(OVER_BUDGET) && snap.over_budget(w) {
                        OVER_BUDGET
                    } else {
                        ""
                    }
                ))
        })
        .collect();
    // The model publishes them in this order already (a filter keeps the order); a column sort
    // still orders them.
    if snap.workflows_in_order && filter.sort.is_none() {
        return v;
    }
    v.sort_by(|a, b| {
        a.state
            .status
            .is_finished()
            .cmp(&b.state.status.is_finished())
            .then_with(|| natural_cmp(&a.id, &b.id))
    });
    apply_sort(&mut v, filter.sort.as_ref(), |w, col| {
        let s = &w.state;
        match col {
            Column::Workflow => w.id.to_string(),
            Column::Definition => s.definition_id.as_deref().unwrap_or_default().to_owned(),
            Column::Status => s.status.to_string(),
            Column::Step => s.current_step.as_deref().unwrap_or_default().to_owned(),
            Column::God => s.dispatched_to.as_deref().unwrap_or_default().to_owned(),
            // Oldest first: the timestamps sort as text (RFC 3339 in UTC once parsed).
            Column::Age => s
                .created
                .as_ref()
                .or(s.updated.as_ref())
                .map(|t| t.text().into_owned())
                .unwrap_or_default(),
            Column::Ack => ack_state(w).to_string(),
            _ => String::new(),
        }
    });
    v
}

/// `1 workflow (…)`, `3 workflows (…)`: a count with its noun in the right number, then `rest`.
pub(crate) fn plural(n: usize, noun: &str, rest: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    if rest.is_empty() {
        format!("{n} {noun}{s}")
    } else {
        format!("{n} {noun}{s} {rest}")
    }
}

/// Orders ids as people read them: runs of digits by value (`wf_bug_fix_5` before `wf_bug_fix_11`).
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a, b);
    loop {
        match (x.chars().next(), y.chars().next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.len() - x.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let m = y.len() - y.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (p, q) = (
                    x[..n].trim_start_matches('0'),
                    y[..m].trim_start_matches('0'),
                );
                let ord = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if ord != Ordering::Equal {
                    return ord;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(&d);
                }
                x = &x[c.len_utf8()..];
                y = &y[d.len_utf8()..];
            }
        }
    }
}

/// One dispatch row of the Inboxes pane.
#[derive(Debug, Clone, Copy)]
pub struct DispatchRow<'a> {
    /// The god whose inbox holds it (`_quarantine` for held ones).
    pub god: &'a str,
    pub view: &'a DispatchView,
    pub held: bool,
}

impl DispatchRow<'_> {
    /// The identity the selection and the marks follow: the god and the file name.
    pub fn key(&self) -> RowKey {
        RowKey::Dispatch {
            god: self.god.into(),
            name: self.view.name.clone(),
        }
    }

    /// True when `key` is this dispatch's.
    pub fn is(&self, key: &RowKey) -> bool {
        match key {
            RowKey::Dispatch { god, name } => **god == *self.god && *name == self.view.name,
            _ => false,
        }
    }
}

/// Every dispatch, grouped by god (gods in name order, each oldest first), the quarantine last.
pub fn dispatches<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<DispatchRow<'a>> {
    let inboxes = snap
        .inboxes
        .iter()
        .map(|i| (i, false))
        .chain(std::iter::once((&*snap.quarantine, true)));
    let mut out = Vec::new();
    for (inbox, held) in inboxes {
        if filter.god.as_deref().is_some_and(|g| g != inbox.god) {
            continue;
        }
        for d in inbox.dispatches.iter() {
            let x = &d.dispatch;
            if filter.is_empty()
                || filter.matches_text(&format!(
                    "{} {} {} {} {} {} {} {} {} {} {}",
                    inbox.god,
                    d.name,
                    x.handoff_id,
                    x.workflow_id,
                    x.step,
                    x.from_god,
                    x.to_god,
                    if held { "held" } else { "" },
                    x.ack_status,
                    if filter
                        .now
                        .is_some_and(|n| dispatch_overdue(snap, d, held, n).is_some())
                    {
                        "overdue"
                    } else {
                        ""
                    },
                    if crate::live::ledger::held_for_budget(x.held_because.as_deref()) {
                        OVER_BUDGET
                    } else {
                        ""
                    }
                ))
            {
                out.push(DispatchRow {
                    god: &inbox.god,
                    view: d,
                    held,
                });
            }
        }
    }
    apply_sort(&mut out, filter.sort.as_ref(), |r, col| {
        let d = &r.view.dispatch;
        match col {
            Column::God => r.god.to_owned(),
            Column::Handoff => d.handoff_id.to_string(),
            Column::Workflow => d.workflow_id.to_string(),
            Column::Step => d.step.to_string(),
            Column::From => d.from_god.to_string(),
            Column::Age => d
                .dispatched_at
                .as_ref()
                .map(|t| t.text().into_owned())
                .unwrap_or_default(),
            Column::Ack => {
                if r.held {
                    "held".into()
                } else {
                    d.ack_status.to_string()
                }
            }
            _ => String::new(),
        }
    });
    out
}

/// One row of the Dead letters pane: a dispatch in `conductor/dead/{god}/`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeadRow<'a> {
    /// The god whose dead letters hold it.
    pub god: &'a str,
    pub view: &'a DispatchView,
}

impl DeadRow<'_> {
    /// The identity the selection and the marks follow: the god and the file name.
    pub(crate) fn key(&self) -> RowKey {
        RowKey::DeadLetter {
            god: self.god.into(),
            name: self.view.name.clone(),
        }
    }

    /// True when `key` is this dead letter's.
    pub(crate) fn is(&self, key: &RowKey) -> bool {
        match key {
            RowKey::DeadLetter { god, name } => **god == *self.god && *name == self.view.name,
            _ => false,
        }
    }

    /// When it was dead-lettered (`dead_at`, as written).
    pub(crate) fn dead_at(&self) -> Option<&str> {
        self.view.dispatch.dead.as_ref()?.at.as_deref()
    }

    /// Why (`dead_reason`).
    pub(crate) fn reason(&self) -> Option<&str> {
        self.view.dispatch.dead.as_ref()?.reason.as_deref()
    }

    /// The god of its last delivery.
    pub(crate) fn last_target(&self) -> &str {
        self.view.dispatch.last_target()
    }

    /// `3/3`: deliveries made of the most allowed.
    pub(crate) fn deliveries(&self) -> String {
        let d = &self.view.dispatch;
        match d.max_deliveries {
            Some(m) => format!("{}/{m}", d.deliveries),
            None => d.deliveries.to_string(),
        }
    }
}

/// Every dead letter, oldest first (by `dead_at`, then god and file), as `pantheon dead` lists them.
pub(crate) fn dead_letters<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<DeadRow<'a>> {
    let mut out: Vec<DeadRow> = snap
        .dead_letters
        .iter()
        .flat_map(|i| {
            i.dispatches.iter().map(move |d| DeadRow {
                god: i.god.as_str(),
                view: d,
            })
        })
        .filter(|r| {
            let x = &r.view.dispatch;
            filter.is_empty()
                || filter.matches_text(&format!(
                    "{} {} {} {} {} {} {} {}",
                    r.god,
                    r.view.name,
                    x.handoff_id,
                    x.workflow_id,
                    x.step,
                    x.from_god,
                    r.last_target(),
                    r.reason().unwrap_or("")
                ))
        })
        .collect();
    out.sort_by(|a, b| {
        let t = |r: &DeadRow| r.dead_at().and_then(crate::engine::time::parse_ts);
        t(a).cmp(&t(b))
            .then_with(|| a.god.cmp(b.god))
            .then_with(|| a.view.name.cmp(&b.view.name))
    });
    apply_sort(&mut out, filter.sort.as_ref(), |r, col| {
        let d = &r.view.dispatch;
        match col {
            Column::God => r.god.to_owned(),
            Column::Handoff => d.handoff_id.to_string(),
            Column::Workflow => d.workflow_id.to_string(),
            Column::Step => d.step.to_string(),
            Column::Deliveries => d.deliveries.to_string(),
            Column::DeadSince => r.dead_at().unwrap_or_default().to_owned(),
            Column::LastTarget => r.last_target().to_owned(),
            _ => String::new(),
        }
    });
    out
}

/// The track shown by the Bus and Board panes: the named one, else the first.
pub(crate) fn track<'a>(snap: &'a Snapshot, name: Option<&str>) -> Option<&'a Arc<TrackView>> {
    name.and_then(|n| snap.track(n))
        .or_else(|| snap.tracks.first())
}

/// The bus messages of a track that pass the filter, oldest first.
pub(crate) fn messages<'a>(track: &'a TrackView, filter: &Filter) -> Vec<&'a Arc<Envelope>> {
    track
        .messages
        .iter()
        .filter(|m| filter.is_empty() || filter.matches_message(m))
        .collect()
}

/// Every lock of every track: (track, entry).
pub fn locks<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<(&'a str, &'a LockEntry)> {
    let mut v: Vec<(&str, &LockEntry)> = snap
        .tracks
        .iter()
        .flat_map(|t| t.locks.iter().map(move |l| (t.name.as_str(), l)))
        .filter(|(t, l)| {
            filter.is_empty()
                || filter.matches_text(&format!(
                    "{t} {} {} {}",
                    l.path,
                    l.worker_id.as_deref().unwrap_or(""),
                    if filter.now.is_some_and(|n| l.is_expired(n)) {
                        "expired"
                    } else {
                        ""
                    }
                ))
        })
        .collect();
    apply_sort(&mut v, filter.sort.as_ref(), |(t, l), col| match col {
        Column::Track => t.to_string(),
        Column::Path => l.path.clone(),
        Column::Holder => l.worker_id.clone().unwrap_or_default(),
        Column::Type => l.lock_type.clone().unwrap_or_else(|| "exclusive".into()),
        Column::Acquired => l.acquired_at.clone().unwrap_or_default(),
        Column::TimeLeft => l.expires_at.clone().unwrap_or_else(|| "~".into()),
        _ => String::new(),
    });
    v
}

/// Every worker of every track: (track, entry).
pub(crate) fn workers<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<(&'a str, &'a WorkerEntry)> {
    let mut v: Vec<(&str, &WorkerEntry)> = snap
        .tracks
        .iter()
        .flat_map(|t| t.workers.iter().map(move |w| (t.name.as_str(), w)))
        .filter(|(t, w)| {
            filter.is_empty()
                || filter.matches_text(&format!(
                    "{t} {} {} {} {} {}",
                    w.worker_id,
                    w.status,
                    w.task_id.as_deref().unwrap_or(""),
                    w.current_subtask.as_deref().unwrap_or(""),
                    if filter
                        .now
                        .is_some_and(|n| w.is_stale(n, snap.stale_threshold()))
                    {
                        "stale"
                    } else {
                        ""
                    }
                ))
        })
        .collect();
    apply_sort(&mut v, filter.sort.as_ref(), |(t, w), col| match col {
        Column::Track => t.to_string(),
        Column::Worker => w.worker_id.clone(),
        Column::Status => w.status.to_string(),
        // Whole percents, so the natural order compares them as numbers.
        Column::Progress => w
            .progress()
            .map(|p| format!("{}", p.clamp(0.0, 100.0) as u32))
            .unwrap_or_default(),
        Column::Task => w.task_id.clone().unwrap_or_default(),
        Column::Subtask => w.current_subtask.clone().unwrap_or_default(),
        Column::Beat => w.last_heartbeat.clone().unwrap_or_default(),
        _ => String::new(),
    });
    v
}

/// What the session's phase allows now, so the console offers only the moves the engine takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardMoves {
    pub status: String,
    /// Where `advance` goes (None once RESOLVING or COMPLETE).
    pub next: Option<&'static str>,
    /// The current phase is complete: advancing needs no force.
    pub complete: bool,
    /// Why it is not complete (who has not assessed or voted, rounds left).
    pub missing: String,
    /// While DISCUSSING with rounds left: (the round in progress, counted from 1; the last round).
    pub round: Option<(u32, u32)>,
    /// `resolved: VERDICT by WHO at WHEN` once the session is COMPLETE.
    pub resolved: Option<String>,
}

/// What the board's phase allows now.
pub(crate) fn board_moves(b: &BoardView) -> BoardMoves {
    use crate::engine::{board, board::COMPLETE, board::DISCUSSING};
    let s = &b.session;
    let assessed = |d: &str| b.assessments.iter().any(|(n, _)| n == d);
    let voted = |d: &str| b.votes.iter().any(|(n, _)| n == d);
    let complete = board::phase_complete_with(s, assessed, voted);
    let d = &s.phases.discuss;
    let missing = match s.status.as_str() {
        board::ASSESSING => format!(
            "no assessment from {}",
            s.directors
                .iter()
                .filter(|x| !assessed(x))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DISCUSSING => format!("{} of {} discussion rounds closed", d.rounds, d.max_rounds),
        board::VOTING => format!(
            "no vote from {}",
            s.directors
                .iter()
                .filter(|x| !voted(x))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    };
    let round = (s.status == DISCUSSING && d.rounds < d.max_rounds)
        .then(|| (d.rounds.saturating_add(1), d.max_rounds));
    let resolved = (s.status == COMPLETE).then(|| {
        let r = s.resolution.as_ref();
        let get = |p: &str| {
            r.and_then(|r| r.pointer(p))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
                .to_owned()
        };
        let forced = r
            .and_then(|r| r.get("forced"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        format!(
            "resolved: {} by {} at {}{}",
            get("/verdict"),
            get("/resolved_by"),
            crate::engine::time::parse_ts(&get("/resolved_at"))
                .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_else(|| get("/resolved_at")),
            if forced { " (forced)" } else { "" }
        )
    });
    BoardMoves {
        status: s.status.clone(),
        next: board::next_phase(s),
        complete,
        missing,
        round,
        resolved,
    }
}

/// A director on the board with what they said so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DirectorCard<'a> {
    pub director: &'a str,
    pub assessment: Option<&'a Assessment>,
    pub vote: Option<&'a Vote>,
}

/// The board's directors (the session's list, then anyone else who assessed or voted).
pub(crate) fn directors(board: &BoardView) -> Vec<DirectorCard<'_>> {
    let mut names: Vec<&str> = board.session.directors.iter().map(String::as_str).collect();
    for (d, _) in board.assessments.iter().chain(std::iter::empty()) {
        if !names.contains(&d.as_str()) {
            names.push(d);
        }
    }
    for (d, _) in board.votes.iter() {
        if !names.contains(&d.as_str()) {
            names.push(d);
        }
    }
    names
        .into_iter()
        .map(|d| DirectorCard {
            director: d,
            assessment: board
                .assessments
                .iter()
                .find(|(n, _)| n == d)
                .map(|(_, a)| a),
            vote: board.votes.iter().find(|(n, _)| n == d).map(|(_, v)| v),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_in_natural_order() {
        let mut ids = vec![
            "wf_bug_fix_11",
            "wf_bug_fix_5",
            "wf_bug_fix_05b",
            "wf_a",
            "wf_bug_fix_100",
        ];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            ids,
            vec![
                "wf_a",
                "wf_bug_fix_5",
                "wf_bug_fix_05b",
                "wf_bug_fix_11",
                "wf_bug_fix_100"
            ]
        );
        assert_eq!(natural_cmp("x1", "x01"), "x1".cmp("x01"), "a total order");
    }

    #[test]
    fn sort_columns_are_named_by_prefix_and_with_dashes() {
        use crate::console::keymap::Pane;
        assert_eq!(sort_column(Pane::Workflows, "age"), Some(Column::Age));
        assert_eq!(sort_column(Pane::Workflows, "st"), Some(Column::Status));
        assert_eq!(sort_column(Pane::Workflows, "step"), Some(Column::Step));
        assert_eq!(
            sort_column(Pane::Locks, "time-left"),
            Some(Column::TimeLeft)
        );
        assert_eq!(sort_column(Pane::Bus, "time"), None);
        assert_eq!(sort_column(Pane::Workflows, ""), None);
        let mut v = vec!["b10", "b9", "a"];
        let s = Sort {
            column: Column::Age,
            descending: true,
        };
        apply_sort(&mut v, Some(&s), |x, _| x.to_string());
        assert_eq!(v, ["b10", "b9", "a"]);
        apply_sort(
            &mut v,
            Some(&Sort {
                descending: false,
                ..s
            }),
            |x, _| x.to_string(),
        );
        assert_eq!(v, ["a", "b9", "b10"]);
    }

    #[test]
    fn filter_terms_select_type_source_and_words() {
        let m: Envelope = serde_json::from_value(serde_json::json!({
            "id": "msg-1", "type": "PROGRESS", "source": "worker-1.1",
            "payload": {"current_subtask": "Stripe client"}
        }))
        .unwrap();
        assert!(Filter::parse("type:prog").matches_message(&m));
        assert!(!Filter::parse("type:task").matches_message(&m));
        assert!(Filter::parse("source:worker-1 stripe").matches_message(&m));
        assert!(!Filter::parse("source:worker-2").matches_message(&m));
        assert!(!Filter::parse("refund").matches_message(&m));
        assert!(Filter::parse("").is_empty());
    }
}
