//! Give a waiting outbox record up (`D` on pane 10, the bridge): `pantheon bridge discard ID
//! --reason TEXT`. The reason is asked; the record is dead-lettered with it and never published.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::Error;
use crate::live::snapshot::{BridgeKind, Snapshot};

use super::super::app::{AnswerError, App, Effect, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::Version;
use super::outbox_retry::{describe_record, is_waiting, selected_outbox, version_of, waiting};
use super::{Act, Op, line, marks_fit};

/// `D` on a waiting outbox record.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(app, &is_waiting, "waiting outbox records")
        && let Some(outbox_id) = selected_outbox(app)
    {
        app.ask(
            "Reason for discarding (required)",
            true,
            String::new(),
            PromptFor::Action(Box::new(Reason(outbox_id))),
        );
    }
    Vec::new()
}

/// The reason a discard asks for, for this record.
#[derive(Debug, Clone)]
struct Reason(String);

impl Question for Reason {
    fn title(&self, marked: usize, _pane: Pane) -> String {
        match marked {
            0 => format!("Discard {}", self.0),
            n => format!("Discard {n} marked outbox record(s)"),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        app.confirm(Op::OutboxDiscard {
            outbox_id: self.0,
            reason: answer.unwrap_or_default(),
        });
        Ok(())
    }
}

impl Act for super::OutboxDiscard<'_> {
    fn title(&self) -> String {
        format!("Discard {}", self.outbox_id)
    }

    fn verb(&self) -> &'static str {
        "Discard"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        out.push(line(
            Tone::Danger,
            format!(
                "{} will never be published: it moves to conductor/bridge/dead/outbox_{}.json with the reason.",
                self.outbox_id, self.outbox_id
            ),
        ));
        describe_record(out, snap, self.outbox_id);
        out.push(line(
            Tone::Dim,
            "A workflow waiting for its reply (await_ack) keeps waiting.",
        ));
        out.push(line(Tone::Dim, format!("Reason: {}", self.reason)));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        version_of(v, snap, self.outbox_id)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .conductor()
                .discard_outbox(self.outbox_id, self.reason)?,
            summary,
            Outcome::Outbox,
        ))
    }

    fn subject(&self) -> String {
        self.outbox_id.clone()
    }

    fn done_word(&self) -> &'static str {
        "discarded"
    }

    fn words(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(match mark {
            RowKey::Bridge {
                kind: BridgeKind::Pending,
                id,
            } if waiting(fan.snap, id).is_some() => Ok(Op::OutboxDiscard {
                outbox_id: id.to_string(),
                reason: self.reason.clone(),
            }),
            RowKey::Bridge {
                kind: BridgeKind::Pending,
                ..
            } => Err(SkipWhy::NoLongerWaits),
            _ => Err(SkipWhy::NotWaitingOutbox),
        })
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::OutboxActResult) -> String {
    format!(
        "{} discarded: kept in {}",
        r.outbox_id,
        r.dead_letter.as_deref().unwrap_or("the dead letters")
    )
}
