//! Marks and bulk actions: `Space` marks a row, `V` marks the range from the last mark to the
//! selected row, `*` marks every row the filter lists (again: unmarks them). While a pane has marks,
//! ack, approve, reject, abort and force-unlock apply to every marked record after ONE confirmation
//! that lists them; the engine is called once per record and the result is reported per item
//! ("approved 4, refused 1: hof_…: why"). Records that refused stay marked, so a retry is one key.
//!
//! A mark is the record's identity (a [`RowKey`], the same one the selection follows), so it stays
//! on its record when rows move, and a record that went away is reported as skipped, never replaced
//! by a neighbour.

use super::app::{App, FlashKind, Tone};
use super::items::{self, Filter};
use super::keymap::{OperatorAction, Pane};
use super::ops::{Op, Operator};
use super::rowkey::RowKey;

/// One record of a bulk action: its mark (identity) and the engine call for it.
pub(crate) type BulkItem = (RowKey, Op);

/// A marked record a bulk action skips, and why.
pub(crate) type Skipped = (RowKey, SkipWhy);

/// Why a bulk action skips a marked record (said in the confirmation and the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipWhy {
    /// The record went away since it was marked.
    NoLongerListed,
    /// An outbox record sent or dead-lettered since it was marked.
    NoLongerWaits,
    /// A record of the Bridge pane that is no waiting outbox record.
    NotWaitingOutbox,
    /// A held dispatch, which is approved or rejected, not acked: what to press, in words.
    Held(String),
    /// A dispatch not held, which is acked, not approved or rejected: what to press, in words.
    NotHeld(String),
    /// A dead letter whose workflow an earlier mark aborts already.
    AbortedOnce(String),
    /// Its file names an id the engine does not take, in the engine's words.
    Unreadable(String),
}

impl std::fmt::Display for SkipWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipWhy::NoLongerListed => f.write_str("no longer listed"),
            SkipWhy::NoLongerWaits => f.write_str("no longer waits"),
            SkipWhy::NotWaitingOutbox => f.write_str("not a waiting outbox record"),
            SkipWhy::Held(why) | SkipWhy::NotHeld(why) | SkipWhy::Unreadable(why) => {
                f.write_str(why)
            }
            SkipWhy::AbortedOnce(wf) => write!(f, "its workflow {wf} is aborted once already"),
        }
    }
}

impl From<crate::engine::Error> for SkipWhy {
    fn from(e: crate::engine::Error) -> Self {
        SkipWhy::Unreadable(e.to_string())
    }
}

/// True when the record at `row` of the current pane's list is marked.
pub(crate) fn is_picked(app: &App, keys: &[RowKey], row: usize) -> bool {
    keys.get(row)
        .is_some_and(|k| app.pane_state().picked.contains(k))
}

/// Space: marks (or unmarks) the selected row and moves down.
pub(crate) fn toggle_mark(app: &mut App) {
    if app.pane_state().detail {
        return;
    }
    let Some(key) = app.selected_key(app.pane()) else {
        return app.flash(FlashKind::Info, "nothing to mark here");
    };
    if app.pane_state().gone.is_some() {
        return app.flash(
            FlashKind::Error,
            "the selected record went away: select a row",
        );
    }
    let st = app.pane_state_mut();
    if let Some(i) = st.picked.iter().position(|k| *k == key) {
        st.picked.remove(i);
    } else {
        st.picked.push(key);
    }
    app.dispatch(super::keymap::Action::Down);
    say_marks(app);
}

/// V: marks every row from the last mark to the selected one (both included).
pub(crate) fn mark_range(app: &mut App) {
    let keys = app.keys(app.pane());
    let cur = app.selected(app.pane());
    let Some(anchor) = app
        .pane_state()
        .picked
        .iter()
        .rev()
        .find_map(|k| keys.iter().position(|x| x == k))
    else {
        return app.flash(
            FlashKind::Info,
            format!(
                "mark a first row with {}, then {} marks the range to here",
                app.keymap().key_for(&super::keymap::Action::ToggleMark),
                app.keymap().key_for(&super::keymap::Action::MarkRange)
            ),
        );
    };
    let (a, b) = if anchor <= cur {
        (anchor, cur)
    } else {
        (cur, anchor)
    };
    let st = app.pane_state_mut();
    for k in keys.iter().take(b + 1).skip(a) {
        if !st.picked.contains(k) {
            st.picked.push(k.clone());
        }
    }
    say_marks(app);
}

/// `*`: marks every row the filter lists; when all of them are marked already, unmarks them.
pub(crate) fn mark_all(app: &mut App) {
    let keys = app.keys(app.pane());
    if keys.is_empty() {
        return app.flash(FlashKind::Info, "nothing listed to mark");
    }
    let st = app.pane_state_mut();
    if keys.iter().all(|k| st.picked.contains(k)) {
        st.picked.retain(|k| !keys.contains(k));
    } else {
        for k in keys {
            if !st.picked.contains(&k) {
                st.picked.push(k);
            }
        }
    }
    say_marks(app);
}

/// Drops the current pane's marks (Esc); true if there were some.
pub(crate) fn clear_marks(app: &mut App) -> bool {
    let had = !app.pane_state().picked.is_empty();
    app.pane_state_mut().picked.clear();
    if had {
        app.flash(FlashKind::Info, "marks cleared");
    }
    had
}

fn say_marks(app: &mut App) {
    let n = app.pane_state().picked.len();
    let text = if n == 0 {
        "no row marked".to_owned()
    } else {
        format!(
            "{n} marked: an action now applies to every marked row · {} clears the marks",
            app.keymap().key_for(&super::keymap::Action::Back)
        )
    };
    app.flash(FlashKind::Info, text);
}

/// Before an action on a pane with marks, selects the first marked row `fits` accepts (so the
/// action's prompts are asked about a record it applies to). False (with a flash) when none does.
pub(crate) fn select_first_mark(
    app: &mut App,
    fits: &dyn Fn(&App, &RowKey) -> bool,
    what: &str,
) -> bool {
    let keys = app.keys(app.pane());
    let picked = app.pane_state().picked.clone();
    let found = keys
        .iter()
        .enumerate()
        .find(|(_, k)| picked.contains(k) && fits(app, k));
    match found {
        Some((i, _)) => {
            let st = app.pane_state_mut();
            st.selected = i;
            st.gone = None;
            true
        }
        None => {
            app.flash(
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
pub(crate) fn dispatch_is_held(app: &App, key: &RowKey) -> Option<bool> {
    items::dispatches(app.snapshot(), &Filter::default())
        .iter()
        .find(|r| r.is(key))
        .map(|r| r.held)
}

/// `op` made for every mark of the current pane (None: no marks, or an op that is not bulk).
/// Marks it cannot apply to come back as skipped, with why.
pub(crate) fn fan_out(app: &App, op: &Op) -> Option<(Vec<BulkItem>, Vec<Skipped>)> {
    let picked = app.pane_state().picked.clone();
    if picked.is_empty() {
        return None;
    }
    let key = |a: super::keymap::Action| app.keymap().key_for(&a);
    let mut fan = FanOut {
        snap: app.snapshot(),
        all: Filter::default(),
        dead: items::dead_letters(app.snapshot(), &Filter::default()),
        dead_pane: app.pane() == Pane::DeadLetters,
        held_why: format!(
            "held: approve ({}) or reject ({}) it",
            key(OperatorAction::Approve.into()),
            key(OperatorAction::RejectHeld.into())
        ),
        not_held_why: format!(
            "not held (ack it with {})",
            key(OperatorAction::Ack(None).into())
        ),
        aborted: Vec::new(),
    };
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    // The first mark says whether the action applies to marks at all (`Act::mark`).
    for mark in picked {
        match op.mark(&mut fan, &mark)? {
            Ok(op) => items.push((mark, op)),
            Err(why) => skipped.push((mark, why)),
        }
    }
    Some((items, skipped))
}

/// The engine answered a bulk action: one flash for all, per item; the records that refused
/// stay marked (the others are unmarked).
pub(crate) fn bulk_finished(app: &mut App, items: &[BulkItem], report: &BulkReport) {
    let Some((first, _)) = items.first() else {
        return;
    };
    let pane = first.pane();
    let failed: Vec<&RowKey> = report.refused_keys().collect();
    app.panes_mut()[pane].picked.retain(|k| failed.contains(&k));
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
    /// The short name of the record (see [`Op::subject`]).
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
pub(crate) fn execute_bulk(
    operator: &dyn Operator,
    items: &[BulkItem],
    skipped: &[Skipped],
) -> BulkReport {
    let results = items
        .iter()
        .map(|(key, op)| BulkResult {
            key: key.clone(),
            subject: op.subject(),
            error: operator.execute(op).err().map(|e| e.to_string()),
        })
        .collect();
    BulkReport {
        results,
        skipped: skipped.to_vec(),
    }
}

/// "approved 4, refused 1: hof_x: why; skipped 1: god/file: not held".
pub(crate) fn summarize_bulk(items: &[BulkItem], report: &BulkReport) -> String {
    let word = items.first().map_or("done", |(_, op)| op.done_word());
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
pub(crate) fn describe_bulk(items: &[BulkItem], skipped: &[Skipped]) -> Vec<(Tone, String)> {
    const SHOWN: usize = 12;
    let mut out = Vec::new();
    let first = items.first().map(|(_, op)| op);
    let word = first.map_or("changed", Op::done_word);
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
    let words = first.and_then(Op::words);
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

/// What a bulk action is fanned out against: the records shown, and why a mark is skipped (each
/// action's module makes it for a mark, `Act::mark`).
pub(crate) struct FanOut<'a> {
    pub(crate) snap: &'a crate::live::snapshot::Snapshot,
    pub(crate) all: Filter,
    pub(crate) dead: Vec<items::DeadRow<'a>>,
    /// The marks are dead letters (pane 9): an abort there aborts each one's workflow.
    pub(crate) dead_pane: bool,
    pub(crate) held_why: String,
    pub(crate) not_held_why: String,
    /// Workflows aborted by an earlier mark (two dead letters of one workflow abort it once).
    pub(crate) aborted: Vec<String>,
}
