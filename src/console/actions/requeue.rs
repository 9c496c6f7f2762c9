//! Requeue a dead letter of pane 9 (`r`): back into an inbox (the god it was delivered to last, or
//! one typed, Tab completing), its deliveries counted again from 1.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{Error, GodName, HandoffId};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, FlashKind, Mode, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::super::times::when;
use super::{Act, Op, line, marks_fit};

/// `r` on a dead letter.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(app, &|_: &App, _: &RowKey| true, "listed") {
        start_requeue(app);
    }
    Vec::new()
}

/// Which god's inbox this dead letter goes back to (empty: the god it was delivered to last).
#[derive(Debug, Clone)]
struct Destination {
    handoff_id: HandoffId,
    from_god: GodName,
}

impl Question for Destination {
    fn title(&self, marked: usize, _pane: Pane) -> String {
        match marked {
            0 => format!("Requeue dead letter {}", self.handoff_id),
            n => format!("Requeue {n} marked dead letter(s)"),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        requeue_answered(app, self.handoff_id, self.from_god, answer)
    }
}

fn start_requeue(app: &mut App) {
    if app.refuse_if_gone(Pane::DeadLetters) {
        return;
    }
    let Some((god, hid, _)) = crate::console::panes::deadletters::selected_dead(app) else {
        return app.need("a dead letter in the Dead letters pane (9)");
    };
    let (handoff_id, from_god) = match (HandoffId::parse(&hid), GodName::parse(&god)) {
        (Ok(h), Ok(g)) => (h, g),
        (Err(e), _) | (_, Err(e)) => {
            return app.flash(FlashKind::Error, format!("cannot requeue this file: {e}"));
        }
    };
    let last = crate::console::panes::deadletters::dead_row_of(app, &handoff_id)
        .map(|(_, l)| l)
        .unwrap_or_else(|| god.clone());
    let marked = app.pane_state().picked.len();
    let label = if marked > 1 {
        "Requeue to god (empty: each to the god it was delivered to last; Tab completes)".to_owned()
    } else {
        format!("Requeue to god (the god it was delivered to last: {last}; Tab completes)")
    };
    let input = if marked > 1 { String::new() } else { last };
    app.ask(
        label,
        false,
        input,
        PromptFor::Action(Box::new(Destination {
            handoff_id,
            from_god,
        })),
    );
    let gods = app.known_gods();
    if let Mode::Prompt(p) = app.mode_mut() {
        p.completions = gods;
    }
}

/// The god was typed (or left empty): the confirmation.
pub(crate) fn requeue_answered(
    app: &mut App,
    handoff_id: HandoffId,
    from_god: GodName,
    answer: Option<String>,
) -> Result<(), AnswerError> {
    let to = match answer.as_deref() {
        None => None,
        Some(g) => Some(GodName::parse_as("god", g)?),
    };
    // The god it was delivered to last is the engine's own default: no `--to` (with
    // marks, each dead letter is compared with its own last god when fanned out).
    let last =
        crate::console::panes::deadletters::dead_row_of(app, &handoff_id).map(|(_, last)| last);
    let to = if app.pane_state().picked.is_empty() {
        to.filter(|g| last.as_deref() != Some(g.as_str()))
    } else {
        to
    };
    app.confirm(Op::Requeue {
        handoff_id,
        from_god,
        to,
    });
    Ok(())
}

impl Act for super::Requeue<'_> {
    fn title(&self) -> String {
        match self.to {
            Some(g) => format!("Requeue {} to {g}", self.handoff_id),
            None => format!("Requeue {}", self.handoff_id),
        }
    }

    fn verb(&self) -> &'static str {
        "Requeue"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>) {
        describe(out, self, snap, now)
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dead_letter(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .conductor()
                .requeue(self.handoff_id, self.to.as_ref())?,
            summary,
            Outcome::Requeue,
        ))
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "requeued"
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(self.marked(fan, mark))
    }
}

impl super::Requeue<'_> {
    /// A requeue of the marked dead letter (to `to` unless that is where it went last).
    fn marked(&self, fan: &FanOut<'_>, mark: &RowKey) -> Result<Op, SkipWhy> {
        let Some(r) = fan.dead.iter().find(|r| r.is(mark)) else {
            return Err(SkipWhy::NoLongerListed);
        };
        let d = &r.view.dispatch;
        let hid: &str = if d.handoff_id.is_empty() {
            &r.view.name
        } else {
            &d.handoff_id
        };
        let handoff_id = HandoffId::parse(hid).map_err(SkipWhy::from)?;
        let from_god = GodName::parse(r.god).map_err(SkipWhy::from)?;
        Ok(Op::Requeue {
            handoff_id,
            from_god,
            to: self.to.clone().filter(|g| g.as_str() != r.last_target()),
        })
    }
}

/// The confirmation lines of a requeue.
fn describe(
    out: &mut Vec<(Tone, String)>,
    op: &super::Requeue<'_>,
    snap: &Snapshot,
    now: DateTime<Utc>,
) {
    use Tone::*;
    let (handoff_id, from_god, to) = (op.handoff_id, op.from_god, op.to);
    let rows = items::dead_letters(snap, &items::Filter::default());
    let Some(r) = rows.iter().find(|r| {
        r.god == from_god.as_str()
            && (*r.view.dispatch.handoff_id == *handoff_id.as_str()
                || *r.view.name == *handoff_id.as_str())
    }) else {
        out.push(line(
            Warn,
            format!(
                "Dead letter {handoff_id} is no longer in {from_god}'s dead letters: it was requeued \
                 or removed since you selected it; the engine would refuse."
            ),
        ));
        return;
    };
    let d = &r.view.dispatch;
    let target = to
        .as_ref()
        .map_or_else(|| r.last_target().to_owned(), |g| g.to_string());
    out.push(line(
        Normal,
        format!(
            "Dead letter {handoff_id} (step {} of {}, {} deliveries, dead {})",
            d.step,
            d.workflow_id,
            r.deliveries(),
            when(r.dead_at(), now, false)
        ),
    ));
    out.push(line(
        Normal,
        format!(
            "will be put back into {target}'s inbox{}, its deliveries counted again from 1.",
            if to.is_some() {
                " (--to)"
            } else {
                ", the god it was delivered to last"
            }
        ),
    ));
    let status = snap
        .workflows
        .iter()
        .find(|w| *w.id == *d.workflow_id)
        .map(|w| w.state.status.to_string());
    match status.as_deref() {
        Some("stalled") | Some("waiting_for_ack") => out.push(line(
            Normal,
            format!("{} will wait for {target}'s ack again.", d.workflow_id),
        )),
        Some(st) => out.push(line(
            Warn,
            format!(
                "{} is {st}: the engine will refuse unless it is still running (rerun starts a finished one again).",
                d.workflow_id
            ),
        )),
        None => out.push(line(
            Warn,
            format!("{} has no state file here: the engine will refuse.", d.workflow_id),
        )),
    }
    if let Some(why) = r.reason() {
        out.push(line(Dim, format!("It died because: {why}")));
    }
    out.push(line(
        Dim,
        format!("Journaled as requeue by {OPERATOR} (console)."),
    ));
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::RequeueResult) -> String {
    format!(
        "{} requeued into {}'s inbox, workflow {} waits for its ack again{}",
        r.handoff_id,
        r.to_god,
        r.workflow_id,
        // The deadline as an age (`due in 5m`), not a raw timestamp.
        r.ack_deadline
            .as_deref()
            .map(|d| format!(
                " (ack due {})",
                crate::console::times::when(Some(d), chrono::Utc::now(), false)
            ))
            .unwrap_or_default()
    )
}
