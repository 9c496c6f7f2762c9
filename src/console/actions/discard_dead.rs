//! Discard a dead letter of pane 9 (`D`): the reason is asked, the confirmation says it is retired
//! (moved to `conductor/retired/`, journaled), and the engine's `discard_dead` retires it.

use chrono::{DateTime, Utc};

use crate::engine::{Error, HandoffId};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::Pane;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::shown::{self, Version};
use super::super::times::when;
use super::{Act, Op, line};

/// `D` on a dead letter.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if !app.pane_state().picked.is_empty() {
        app.need("one dead letter (discard takes no marks)");
        return Vec::new();
    }
    if app.refuse_if_gone(Pane::DeadLetters) {
        return Vec::new();
    }
    let Some((_, hid, _)) = crate::console::panes::deadletters::selected_dead(app) else {
        app.need("a dead letter in the Dead letters pane (9)");
        return Vec::new();
    };
    match HandoffId::parse(&hid) {
        Ok(h) => app.ask(
            "Reason for discarding (required; kept with it and in the journal)",
            true,
            String::new(),
            PromptFor::Action(Box::new(Reason(h))),
        ),
        Err(e) => app.flash(
            super::super::app::FlashKind::Error,
            format!("cannot discard this file: {e}"),
        ),
    }
    Vec::new()
}

/// The reason a discard asks for, for this dead letter.
#[derive(Debug, Clone)]
struct Reason(HandoffId);

impl Question for Reason {
    fn title(&self, _marked: usize, _pane: Pane) -> String {
        format!("Discard dead letter {}", self.0)
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        app.confirm(Op::DiscardDead {
            handoff_id: self.0,
            reason: answer.unwrap_or_default(),
        });
        Ok(())
    }
}

impl Act for super::DiscardDead<'_> {
    fn title(&self) -> String {
        format!("Discard {}", self.handoff_id)
    }

    fn verb(&self) -> &'static str {
        "Discard"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>) {
        use Tone::*;
        let hid = self.handoff_id;
        let rows = items::dead_letters(snap, &items::Filter::default());
        match rows
            .iter()
            .find(|r| *r.view.dispatch.handoff_id == *hid.as_str() || *r.view.name == *hid.as_str())
        {
            Some(r) => {
                let d = &r.view.dispatch;
                out.push(line(
                    Normal,
                    format!(
                        "Dead letter {hid} (step {} of {}, {} deliveries, dead {})",
                        d.step,
                        d.workflow_id,
                        r.deliveries(),
                        when(r.dead_at(), now, false)
                    ),
                ));
                out.push(line(
                    Normal,
                    format!(
                        "will be retired: moved to conductor/retired/{}/, no longer requeueable \
                         and no longer counted as a dead letter (`pantheon dead --retired` lists it).",
                        r.god
                    ),
                ));
            }
            None => out.push(line(
                Warn,
                format!(
                    "Dead letter {hid} is no longer listed: it was requeued or retired since you \
                     selected it; the engine would refuse."
                ),
            )),
        }
        out.push(line(Normal, format!("Reason: {}", self.reason)));
        out.push(line(
            Dim,
            format!("Journaled as dead_retire by {OPERATOR} (console), with the reason."),
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dead_letter(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .conductor()
                .discard_dead(self.handoff_id, self.reason)?,
            summary,
            Outcome::Discard,
        ))
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "discarded"
    }

    fn words(&self) -> Option<String> {
        Some(self.reason.clone())
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::RetiredDead) -> String {
    format!(
        "{} discarded: retired from {}'s dead letters ({})",
        r.handoff_id, r.god, r.reason
    )
}
