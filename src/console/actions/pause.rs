//! Pause and resume (`Z` on panes 1, 2, 3 and 5; `:pause`, `:resume`): the selection's workflow
//! (pane 1), god (pane 2: the selected dispatch's) or track (panes 3 and 5) is paused with a reason
//! asked for, or resumed when it is paused already; each confirmed (docs/PROTOCOL.md §2.14).

use chrono::{DateTime, Utc};

use crate::engine::{Error, GodName, PauseKind, PauseTarget, TrackName};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, FlashKind, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::ops::{Done, Outcome};
use super::super::shown::Version;
use super::{Act, Op, line};

/// What the selection names, for a pause: the workflow of pane 1, the god of the dispatch
/// selected in pane 2, the track of panes 3 and 5; `None` (and a flash saying what to select)
/// elsewhere.
fn selected_target(app: &mut App) -> Option<PauseTarget> {
    match app.pane() {
        Pane::Workflows => app.selected_workflow().map(|w| PauseTarget::workflow(&w)),
        Pane::Inboxes => {
            let Some((god, _, _)) = app.selected_dispatch() else {
                app.need("a dispatch (its god is paused)");
                return None;
            };
            match GodName::parse(&god) {
                Ok(g) => Some(PauseTarget::god(&g)),
                Err(e) => {
                    app.flash(FlashKind::Error, e.to_string());
                    None
                }
            }
        }
        Pane::Bus | Pane::Workers => {
            let Some(t) = app.track_name() else {
                app.need("a track");
                return None;
            };
            match TrackName::parse(&t) {
                Ok(t) => Some(PauseTarget::track(&t)),
                Err(e) => {
                    app.flash(FlashKind::Error, e.to_string());
                    None
                }
            }
        }
        _ => {
            app.need("a workflow (1), a dispatch (2) or a track (3, 5) to pause");
            None
        }
    }
}

/// Whether `target` is paused, as the snapshot's `paused.json` says.
pub(super) fn is_paused(snap: &Snapshot, target: &PauseTarget) -> bool {
    snap.paused.pauses.iter().any(|p| p.target() == *target)
}

/// `Z` (pause, or resume what is paused) and `:resume`.
pub(super) fn start(app: &mut App, resume_only: bool) -> Vec<Effect> {
    let Some(target) = selected_target(app) else {
        return Vec::new();
    };
    let paused = is_paused(app.snapshot(), &target);
    match (resume_only, paused) {
        (_, true) => crate::console::actions::resume::resume_confirm(app, target),
        (true, false) => app.flash(
            FlashKind::Error,
            format!("{} is not paused", target.label()),
        ),
        _ => app.ask(
            "Reason for pausing (required)",
            true,
            String::new(),
            PromptFor::Action(Box::new(Reason(target))),
        ),
    }
    Vec::new()
}

/// The reason a pause asks for.
#[derive(Debug, Clone)]
struct Reason(PauseTarget);

impl Question for Reason {
    fn title(&self, _marked: usize, _pane: Pane) -> String {
        format!("Pause {}", self.0.label())
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        app.confirm(Op::Pause {
            target: self.0,
            reason: answer.unwrap_or_default(),
        });
        Ok(())
    }
}

impl Act for super::Pause<'_> {
    fn title(&self) -> String {
        format!("Pause {}", self.target.label())
    }

    fn verb(&self) -> &'static str {
        "Pause"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        out.push(line(
            Warn,
            match self.target.kind {
                PauseKind::God => format!(
                    "Nothing new reaches {}'s inbox: what is routed to it is held until the resume; what it has keeps its ack deadline frozen (no redelivery, no dead letter).",
                    self.target.name.as_deref().unwrap_or_default()
                ),
                PauseKind::Workflow => format!(
                    "Nothing new is dispatched for {}: its next dispatch is held until the resume; its open dispatches keep their deadlines frozen.",
                    self.target.name.as_deref().unwrap_or_default()
                ),
                PauseKind::Track => format!(
                    "New posts on track {} are refused (reads, lock releases and heartbeats go on); a PAUSED line tells its readers.",
                    self.target.name.as_deref().unwrap_or_default()
                ),
                _ => "Everything is paused.".to_owned(),
            },
        ));
        if is_paused(snap, self.target) {
            out.push(line(Dim, "It is paused already: nothing changes."));
        }
        out.push(line(
            Dim,
            "Resume with Z again or :resume; nothing is lost.",
        ));
        out.push(line(Dim, format!("Reason: {}", self.reason)));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        v.push((
            format!("paused {}", self.target.label()),
            is_paused(snap, self.target).to_string(),
        ));
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine.conductor().pause(self.target, None, self.reason)?,
            summary,
            Outcome::Pause,
        ))
    }

    fn subject(&self) -> String {
        self.target.label()
    }

    fn done_word(&self) -> &'static str {
        "paused"
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::PauseResult) -> String {
    format!(
        "{} paused since {}{}",
        r.pause.target().label(),
        r.pause.since,
        if r.status == "duplicate" {
            " (already paused)"
        } else {
            ""
        }
    )
}
