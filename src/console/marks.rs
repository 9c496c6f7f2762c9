//! Marks and bulk actions: `Space` marks a row, `V` marks the range from the last mark to the
//! selected row, `*` marks every row the filter lists (again: unmarks them). While a pane has marks,
//! ack, approve, reject, abort and force-unlock apply to every marked record after ONE confirmation
//! that lists them; the engine is called once per record and the result is reported per item
//! ("approved 4, refused 1: hof_…: why"). Records that refused stay marked, so a retry is one key.
//!
//! A mark is the record's identity (a [`RowKey`], the same one the selection follows), so it stays
//! on its record when rows move, and a record that went away is reported as skipped, never replaced
//! by a neighbour.

use crate::engine::{GodName, HandoffId, LockKey, TrackName, WorkflowId};

use super::action::Pane;
use super::app::{App, FlashKind, Tone};
use super::items::{self, Filter};
use super::ops::{Op, Operator};
use super::rowkey::RowKey;

/// One record of a bulk action: its mark (identity) and the engine call for it.
pub type BulkItem = (RowKey, Op);

/// A marked record a bulk action skips, and why.
pub type Skipped = (RowKey, String);

/// Which marked rows an action can start from (its prompts are asked about the first one).
pub(crate) type MarkFits<'a> = (&'a dyn Fn(&App, &RowKey) -> bool, &'a str);

impl App {
    /// The marks of `pane`, in the order they were made.
    pub fn picked(&self, pane: Pane) -> &[RowKey] {
        &self.panes[pane].picked
    }

    /// True when the record at `row` of the current pane's list is marked.
    pub fn is_picked(&self, keys: &[RowKey], row: usize) -> bool {
        keys.get(row)
            .is_some_and(|k| self.pane_state().picked.contains(k))
    }

    /// Space: marks (or unmarks) the selected row and moves down.
    pub fn toggle_mark(&mut self) {
        if self.pane_state().detail {
            return;
        }
        let Some(key) = self.selected_key(self.pane) else {
            return self.flash(FlashKind::Info, "nothing to mark here");
        };
        if self.pane_state().gone.is_some() {
            return self.flash(
                FlashKind::Error,
                "the selected record went away: select a row",
            );
        }
        let st = self.pane_state_mut();
        if let Some(i) = st.picked.iter().position(|k| *k == key) {
            st.picked.remove(i);
        } else {
            st.picked.push(key);
        }
        self.dispatch(super::action::Action::Down);
        self.say_marks();
    }

    /// V: marks every row from the last mark to the selected one (both included).
    pub fn mark_range(&mut self) {
        let keys = self.keys(self.pane);
        let cur = self.selected(self.pane);
        let Some(anchor) = self
            .pane_state()
            .picked
            .iter()
            .rev()
            .find_map(|k| keys.iter().position(|x| x == k))
        else {
            return self.flash(
                FlashKind::Info,
                format!(
                    "mark a first row with {}, then {} marks the range to here",
                    self.keymap.key_for(&super::action::Action::ToggleMark),
                    self.keymap.key_for(&super::action::Action::MarkRange)
                ),
            );
        };
        let (a, b) = if anchor <= cur {
            (anchor, cur)
        } else {
            (cur, anchor)
        };
        let st = self.pane_state_mut();
        for k in keys.iter().take(b + 1).skip(a) {
            if !st.picked.contains(k) {
                st.picked.push(k.clone());
            }
        }
        self.say_marks();
    }

    /// `*`: marks every row the filter lists; when all of them are marked already, unmarks them.
    pub fn mark_all(&mut self) {
        let keys = self.keys(self.pane);
        if keys.is_empty() {
            return self.flash(FlashKind::Info, "nothing listed to mark");
        }
        let st = self.pane_state_mut();
        if keys.iter().all(|k| st.picked.contains(k)) {
            st.picked.retain(|k| !keys.contains(k));
        } else {
            for k in keys {
                if !st.picked.contains(&k) {
                    st.picked.push(k);
                }
            }
        }
        self.say_marks();
    }

    /// Drops the current pane's marks (Esc); true if there were some.
    pub fn clear_marks(&mut self) -> bool {
        let had = !self.pane_state().picked.is_empty();
        self.pane_state_mut().picked.clear();
        if had {
            self.flash(FlashKind::Info, "marks cleared");
        }
        had
    }

    fn say_marks(&mut self) {
        let n = self.pane_state().picked.len();
        let text = if n == 0 {
            "no row marked".to_owned()
        } else {
            format!(
                "{n} marked: an action now applies to every marked row · {} clears the marks",
                self.keymap.key_for(&super::action::Action::Back)
            )
        };
        self.flash(FlashKind::Info, text);
    }

    /// Before an action on a pane with marks, selects the first marked row `fits` accepts (so the
    /// action's prompts are asked about a record it applies to). False (with a flash) when none does.
    pub(crate) fn select_first_mark(
        &mut self,
        fits: &dyn Fn(&App, &RowKey) -> bool,
        what: &str,
    ) -> bool {
        let keys = self.keys(self.pane);
        let picked = self.pane_state().picked.clone();
        let found = keys
            .iter()
            .enumerate()
            .find(|(_, k)| picked.contains(k) && fits(self, k));
        match found {
            Some((i, _)) => {
                let st = self.pane_state_mut();
                st.selected = i;
                st.gone = None;
                true
            }
            None => {
                self.flash(
                    FlashKind::Error,
                    format!(
                        "none of the {} marked rows listed here is {what}",
                        picked.len()
                    ),
                );
                false
            }
        }
    }

    /// True when a dispatch key of pane 2 is a held one.
    pub(crate) fn dispatch_is_held(&self, key: &RowKey) -> Option<bool> {
        items::dispatches(&self.snapshot, &Filter::default())
            .iter()
            .find(|r| r.is(key))
            .map(|r| r.held)
    }

    /// `op` made for every mark of the current pane (None: no marks, or an op that is not bulk).
    /// Marks it cannot apply to come back as skipped, with why.
    pub(crate) fn fan_out(&self, op: &Op) -> Option<(Vec<BulkItem>, Vec<Skipped>)> {
        let picked = self.pane_state().picked.clone();
        if picked.is_empty()
            || !matches!(
                op,
                Op::Ack { .. }
                    | Op::Approve { .. }
                    | Op::RejectHeld { .. }
                    | Op::Abort { .. }
                    | Op::ForceUnlock { .. }
                    | Op::Requeue { .. }
            )
        {
            return None;
        }
        let key = |a: super::action::Action| self.keymap.key_for(&a);
        let mut fan = FanOut {
            snap: &self.snapshot,
            all: Filter::default(),
            dead: items::dead_letters(&self.snapshot, &Filter::default()),
            dead_pane: self.pane == Pane::DeadLetters,
            held_why: format!(
                "held: approve ({}) or reject ({}) it",
                key(super::action::Action::Approve),
                key(super::action::Action::RejectHeld)
            ),
            not_held_why: format!(
                "not held (ack it with {})",
                key(super::action::Action::Ack(None))
            ),
            aborted: Vec::new(),
        };
        let mut items = Vec::new();
        let mut skipped = Vec::new();
        for mark in picked {
            match fan.made(op, &mark)? {
                Ok(op) => items.push((mark, op)),
                Err(why) => skipped.push((mark, why)),
            }
        }
        Some((items, skipped))
    }

    /// The engine answered a bulk action: one flash for all, per item; the records that refused
    /// stay marked (the others are unmarked).
    pub(crate) fn bulk_finished(&mut self, items: &[BulkItem], report: &BulkReport) {
        let Some((first, _)) = items.first() else {
            return;
        };
        let pane = first.pane();
        let failed: Vec<&RowKey> = report.refused_keys().collect();
        self.panes[pane].picked.retain(|k| failed.contains(&k));
    }
}

/// The past tense of a bulk action, for "approved 4, refused 1".
pub fn done_word(op: &Op) -> &'static str {
    match op {
        Op::Ack { .. } => "acked",
        Op::Approve { .. } => "approved",
        Op::RejectHeld { .. } => "rejected",
        Op::Abort { .. } => "aborted",
        Op::ForceUnlock { .. } => "unlocked",
        Op::Cleanup { .. } => "cleaned up",
        Op::Requeue { .. } => "requeued",
        Op::Rerun { .. } => "rerun",
        _ => "done",
    }
}

/// The short name of the record an op is for (the handoff, workflow or lock path).
pub fn subject(op: &Op) -> String {
    match op {
        Op::Ack { request, .. } => request.handoff_id.to_string(),
        Op::Approve { handoff_id, .. } | Op::RejectHeld { handoff_id, .. } => {
            handoff_id.to_string()
        }
        Op::Abort { workflow_id, .. } | Op::Cleanup { workflow_id } => workflow_id.to_string(),
        Op::ForceUnlock { path, .. } => path.to_string(),
        Op::Requeue { handoff_id, .. } => handoff_id.to_string(),
        Op::Rerun { workflow_id, .. } => workflow_id.to_string(),
        Op::Bulk { items, .. } => format!("{} records", items.len()),
        Op::BoardAdvance { track, .. }
        | Op::BoardNextRound { track, .. }
        | Op::BoardResolve { track, .. } => track.to_string(),
    }
}

/// What a bulk action did: one result per item, in order, and the marked records it skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    pub results: Vec<BulkResult>,
    pub skipped: Vec<Skipped>,
}

/// One item of a [`BulkReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkResult {
    /// The record's mark (its identity).
    pub key: RowKey,
    /// The short name of the record (see [`subject`]).
    pub subject: String,
    /// Why the engine refused it (`None`: done).
    pub error: Option<String>,
}

impl BulkReport {
    /// True when an item was refused or a record skipped.
    pub fn has_failures(&self) -> bool {
        self.results.iter().any(|r| r.error.is_some()) || !self.skipped.is_empty()
    }

    /// The marks of the items the engine refused.
    pub fn refused_keys(&self) -> impl Iterator<Item = &RowKey> {
        self.results
            .iter()
            .filter(|r| r.error.is_some())
            .map(|r| &r.key)
    }
}

/// Runs every item of a bulk action, one engine call each, in order; a refusal does not stop the
/// others. The report lists each item and the skipped records.
pub fn execute_bulk(
    operator: &dyn Operator,
    items: &[BulkItem],
    skipped: &[Skipped],
) -> BulkReport {
    let results = items
        .iter()
        .map(|(key, op)| BulkResult {
            key: key.clone(),
            subject: subject(op),
            error: operator.execute(op).err().map(|e| e.to_string()),
        })
        .collect();
    BulkReport {
        results,
        skipped: skipped.to_vec(),
    }
}

/// "approved 4, refused 1: hof_x: why; skipped 1: god/file: not held".
pub fn summarize_bulk(items: &[BulkItem], report: &BulkReport) -> String {
    let word = items.first().map_or("done", |(_, op)| done_word(op));
    let ok = report.results.iter().filter(|r| r.error.is_none()).count();
    let refused: Vec<String> = report
        .results
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.subject, r.error.as_ref()?)))
        .collect();
    let skipped: Vec<String> = report
        .skipped
        .iter()
        .map(|(key, why)| format!("{key}: {why}"))
        .collect();
    let mut out = format!("{word} {ok}");
    if !refused.is_empty() {
        out.push_str(&format!(
            ", refused {}: {}",
            refused.len(),
            refused.join("; ")
        ));
    }
    if !skipped.is_empty() {
        out.push_str(&format!(
            ", skipped {}: {}",
            skipped.len(),
            skipped.join("; ")
        ));
    }
    out
}

/// The confirmation of a bulk action: what it does to each record, and what is skipped.
pub fn describe_bulk(items: &[BulkItem], skipped: &[Skipped]) -> Vec<(Tone, String)> {
    const SHOWN: usize = 12;
    let mut out = Vec::new();
    let first = items.first().map(|(_, op)| op);
    let word = first.map_or("changed", done_word);
    out.push((
        Tone::Normal,
        format!(
            "{} marked record(s) will be {word}, one engine call each:",
            items.len()
        ),
    ));
    for (_, op) in items.iter().take(SHOWN) {
        out.push((Tone::Normal, format!("  • {}", op.title())));
    }
    if items.len() > SHOWN {
        out.push((Tone::Dim, format!("  … and {} more", items.len() - SHOWN)));
    }
    let words = match first {
        Some(Op::Ack { request, .. }) => request.message.as_ref(),
        Some(Op::RejectHeld { reason: m, .. }) | Some(Op::Abort { reason: m, .. }) => Some(m),
        _ => None,
    };
    if let Some(m) = words {
        out.push((Tone::Dim, format!("With the same words for each: {m}")));
    }
    if !skipped.is_empty() {
        out.push((
            Tone::Warn,
            format!("{} marked record(s) are skipped:", skipped.len()),
        ));
        for (k, why) in skipped.iter().take(SHOWN) {
            out.push((Tone::Warn, format!("  • {k}: {why}")));
        }
    }
    if first.is_some_and(Op::is_destructive) {
        out.push((Tone::Danger, "This cannot be undone.".to_owned()));
    }
    out.push((
        Tone::Dim,
        "Each result is reported; the records that refuse stay marked.".to_owned(),
    ));
    out
}

/// What a bulk action is fanned out against: the records shown, and why a mark is skipped.
struct FanOut<'a> {
    snap: &'a crate::live::snapshot::Snapshot,
    all: Filter,
    dead: Vec<items::DeadRow<'a>>,
    /// The marks are dead letters (pane 9): an abort there aborts each one's workflow.
    dead_pane: bool,
    held_why: String,
    not_held_why: String,
    /// Workflows aborted by an earlier mark (two dead letters of one workflow abort it once).
    aborted: Vec<String>,
}

impl FanOut<'_> {
    /// `op` made for `mark`, or why the mark is skipped; `None` for an op that is not bulk.
    fn made(&mut self, op: &Op, mark: &RowKey) -> Option<Result<Op, String>> {
        Some(match op {
            Op::Ack { request, .. } => self.ack(request, mark),
            Op::Approve { .. } | Op::RejectHeld { .. } => self.decide_held(op, mark),
            Op::Requeue { to, .. } => self.requeue(to.as_ref(), mark),
            Op::Abort { reason, .. } if self.dead_pane => self.abort_dead(reason, mark),
            Op::Abort { reason, .. } => match mark {
                RowKey::Workflow(id) if self.snap.workflows.iter().any(|w| w.id == *id) => {
                    WorkflowId::parse(id)
                        .map_err(|e| e.to_string())
                        .map(|workflow_id| Op::Abort {
                            workflow_id,
                            reason: reason.clone(),
                        })
                }
                _ => Err("no longer listed".into()),
            },
            Op::ForceUnlock { .. } => match items::locks(self.snap, &self.all)
                .iter()
                .find(|(t, l)| mark.is_lock(t, &l.path))
            {
                None => Err("no longer listed".into()),
                Some((t, l)) => TrackName::parse(t)
                    .and_then(|track| Ok((track, LockKey::parse(&l.path)?)))
                    .map_err(|e| e.to_string())
                    .map(|(track, path)| Op::ForceUnlock { track, path }),
            },
            _ => return None,
        })
    }

    /// The same answers, in a new ack (its own id) of the marked dispatch.
    fn ack(&self, request: &crate::engine::AckRequest, mark: &RowKey) -> Result<Op, String> {
        let rows = items::dispatches(self.snap, &self.all);
        let Some(r) = rows.iter().find(|r| r.is(mark)) else {
            return Err("no longer listed".into());
        };
        if r.held {
            return Err(self.held_why.clone());
        }
        let god = GodName::parse(r.god).map_err(|e| e.to_string())?;
        let handoff_id =
            HandoffId::parse(&r.view.dispatch.handoff_id).map_err(|e| e.to_string())?;
        Ok(Op::Ack {
            god,
            request: super::ops::ack_request(
                handoff_id,
                WorkflowId::parse(&r.view.dispatch.workflow_id).ok(),
                request.decision,
                request.message.clone(),
                request.eta.clone(),
                super::ops::gates_passed(request),
            ),
        })
    }

    /// An approval or a rejection of the marked held dispatch.
    fn decide_held(&self, op: &Op, mark: &RowKey) -> Result<Op, String> {
        let rows = items::dispatches(self.snap, &self.all);
        let Some(r) = rows.iter().find(|r| r.is(mark)) else {
            return Err("no longer listed".into());
        };
        if !r.held {
            return Err(self.not_held_why.clone());
        }
        let handoff_id =
            HandoffId::parse(&r.view.dispatch.handoff_id).map_err(|e| e.to_string())?;
        Ok(match op {
            Op::RejectHeld { reason, .. } => Op::RejectHeld {
                handoff_id,
                reason: reason.clone(),
            },
            _ => Op::Approve {
                handoff_id,
                raise: None,
            },
        })
    }

    /// A requeue of the marked dead letter (to `to` unless that is where it went last).
    fn requeue(&self, to: Option<&GodName>, mark: &RowKey) -> Result<Op, String> {
        let Some(r) = self.dead.iter().find(|r| r.is(mark)) else {
            return Err("no longer listed".into());
        };
        let d = &r.view.dispatch;
        let hid: &str = if d.handoff_id.is_empty() {
            &r.view.name
        } else {
            &d.handoff_id
        };
        let handoff_id = HandoffId::parse(hid).map_err(|e| e.to_string())?;
        let from_god = GodName::parse(r.god).map_err(|e| e.to_string())?;
        Ok(Op::Requeue {
            handoff_id,
            from_god,
            to: to.cloned().filter(|g| g.as_str() != r.last_target()),
        })
    }

    /// An abort of the marked dead letter's workflow, once per workflow.
    fn abort_dead(&mut self, reason: &str, mark: &RowKey) -> Result<Op, String> {
        let Some(r) = self.dead.iter().find(|r| r.is(mark)) else {
            return Err("no longer listed".into());
        };
        let wf = r.view.dispatch.workflow_id.to_string();
        if self.aborted.contains(&wf) {
            return Err(format!("its workflow {wf} is aborted once already"));
        }
        self.aborted.push(wf.clone());
        WorkflowId::parse(&wf)
            .map_err(|e| e.to_string())
            .map(|workflow_id| Op::Abort {
                workflow_id,
                reason: reason.to_owned(),
            })
    }
}
