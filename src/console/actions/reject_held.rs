//! Reject a held dispatch of pane 2 (`R`): archived as rejected, its workflow failed; the reason is
//! asked.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{Actor, Error, HandoffId};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, FlashKind, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::approve::{approval_summary, held};
use super::{Act, Op, line, marks_fit};

/// `R` on a held dispatch.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(
        app,
        &|a: &App, k: &RowKey| crate::console::marks::dispatch_is_held(a, k) == Some(true),
        "a held dispatch",
    ) {
        start_reject_held(app);
    }
    Vec::new()
}

/// The reason a rejection of this held dispatch asks for.
#[derive(Debug, Clone)]
struct Reason(HandoffId);

impl Question for Reason {
    fn title(&self, marked: usize, _pane: Pane) -> String {
        match marked {
            0 => format!("Reject held {}", self.0),
            n => format!("Reject {n} marked held dispatch(es)"),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        reject_held_answered(app, self.0, answer);
        Ok(())
    }
}

fn start_reject_held(app: &mut App) {
    if app.refuse_if_gone(Pane::Inboxes) {
        return;
    }
    match app.selected_dispatch() {
        Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
            Ok(h) => app.ask(
                "Reason for rejecting (required)",
                true,
                String::new(),
                PromptFor::Action(Box::new(Reason(h))),
            ),
            Err(e) => app.flash(FlashKind::Error, e.to_string()),
        },
        _ => app.need("a held dispatch (the _quarantine rows of pane 2)"),
    }
}

/// The reason was given: the confirmation.
pub(crate) fn reject_held_answered(app: &mut App, handoff_id: HandoffId, answer: Option<String>) {
    app.confirm(Op::RejectHeld {
        handoff_id,
        reason: answer.unwrap_or_default(),
    });
}

impl Act for super::RejectHeld<'_> {
    fn title(&self) -> String {
        format!("Reject held dispatch {}", self.handoff_id)
    }

    fn verb(&self) -> &'static str {
        "Reject"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, _snap: &Snapshot, _now: DateTime<Utc>) {
        out.push(line(
            Tone::Danger,
            format!(
                "Held dispatch {} will be archived as rejected and its workflow marked failed.",
                self.handoff_id
            ),
        ));
        out.push(line(Tone::Dim, format!("Reason: {}", self.reason)));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dispatch(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .conductor()
                .reject_held(self.handoff_id, self.reason, Actor::Operator)?,
            approval_summary,
            Outcome::Approval,
        ))
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "rejected"
    }

    fn words(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(held(fan, mark).map(|handoff_id| Op::RejectHeld {
            handoff_id,
            reason: self.reason.clone(),
        }))
    }
}
