//! Abort a workflow (`X` on pane 1, or on a dead letter of pane 9: its workflow): the reason is
//! asked; the confirmation lists what is withdrawn and marked.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{Actor, Error, WorkflowId};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::{Act, Op, line, marks_fit};

/// `X` on a workflow or a dead letter.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(app, &|_: &App, _: &RowKey| true, "listed")
        && let Some(wf) = app.selected_workflow()
    {
        app.ask(
            "Reason for aborting (required)",
            true,
            String::new(),
            PromptFor::Action(Box::new(Reason(wf))),
        );
    }
    Vec::new()
}

/// The reason an abort asks for, for this workflow.
#[derive(Debug, Clone)]
struct Reason(WorkflowId);

impl Question for Reason {
    fn title(&self, marked: usize, pane: Pane) -> String {
        match marked {
            0 => format!("Abort {}", self.0),
            n if pane == Pane::DeadLetters => {
                format!("Abort the workflows of {n} marked dead letter(s)")
            }
            n => format!("Abort {n} marked workflow(s)"),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        abort_answered(app, self.0, answer);
        Ok(())
    }
}

/// The reason was given: the confirmation.
pub(crate) fn abort_answered(app: &mut App, workflow_id: WorkflowId, answer: Option<String>) {
    app.confirm(Op::Abort {
        workflow_id,
        reason: answer.unwrap_or_default(),
    });
}

impl Act for super::Abort<'_> {
    fn title(&self) -> String {
        format!("Abort {}", self.workflow_id)
    }

    fn verb(&self) -> &'static str {
        "Abort"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        describe(out, self.workflow_id, self.reason, snap)
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::workflow(v, self.workflow_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .conductor()
                .abort_workflow(self.workflow_id, self.reason, Actor::Operator)?,
            summary,
            Outcome::Abort,
        ))
    }

    fn subject(&self) -> String {
        self.workflow_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "aborted"
    }

    fn words(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(if fan.dead_pane {
            abort_dead(fan, self.reason, mark)
        } else {
            match mark {
                RowKey::Workflow(id) if fan.snap.workflows.iter().any(|w| w.id == *id) => {
                    WorkflowId::parse(id)
                        .map_err(SkipWhy::from)
                        .map(|workflow_id| Op::Abort {
                            workflow_id,
                            reason: self.reason.clone(),
                        })
                }
                _ => Err(SkipWhy::NoLongerListed),
            }
        })
    }
}

/// An abort of the marked dead letter's workflow, once per workflow.
fn abort_dead(fan: &mut FanOut<'_>, reason: &str, mark: &RowKey) -> Result<Op, SkipWhy> {
    let Some(r) = fan.dead.iter().find(|r| r.is(mark)) else {
        return Err(SkipWhy::NoLongerListed);
    };
    let wf = r.view.dispatch.workflow_id.to_string();
    if fan.aborted.contains(&wf) {
        return Err(SkipWhy::AbortedOnce(wf));
    }
    fan.aborted.push(wf.clone());
    WorkflowId::parse(&wf)
        .map_err(SkipWhy::from)
        .map(|workflow_id| Op::Abort {
            workflow_id,
            reason: reason.to_owned(),
        })
}

/// The confirmation lines of an abort.
fn describe(
    out: &mut Vec<(Tone, String)>,
    workflow_id: &WorkflowId,
    reason: &str,
    snap: &Snapshot,
) {
    use Tone::*;
    let w = snap
        .workflows
        .iter()
        .find(|w| *w.id == *workflow_id.as_str());
    match w {
        Some(w) => {
            out.push(line(
                Danger,
                format!(
                    "{workflow_id} ({}) will be marked aborted (now {}, step {}).",
                    w.state.definition_id.as_deref().unwrap_or("no definition"),
                    w.state.status,
                    w.state.current_step.as_deref().unwrap_or("-")
                ),
            ));
            if w.waiting.is_empty() {
                out.push(line(Dim, "No dispatch of it is waiting in an inbox."));
            } else {
                out.push(line(Normal, "Will be withdrawn to the archive:"));
                for (god, d) in &w.waiting {
                    out.push(line(
                        Warn,
                        format!("  {} ({} in {god})", d.handoff_id, d.step),
                    ));
                }
            }
            // The snapshot keeps a compact state: the artifacts are in the whole file.
            let whole = w.whole().ok();
            let mut artifacts: Vec<&String> = whole
                .iter()
                .flat_map(|x| {
                    x.typed
                        .step_history
                        .iter()
                        .flat_map(|s| s.artifacts.iter())
                        .chain(x.typed.context_bag.artifacts.iter())
                })
                .collect();
            artifacts.sort();
            artifacts.dedup();
            if artifacts.is_empty() {
                out.push(line(Dim, "No artifacts to mark."));
            } else {
                out.push(line(
                    Normal,
                    "A zero-byte .aborted marker will be put beside each artifact that exists inside the root:",
                ));
                for a in artifacts.iter().take(8) {
                    out.push(line(Warn, format!("  {a}.aborted")));
                }
                if artifacts.len() > 8 {
                    out.push(line(Dim, format!("  … and {} more", artifacts.len() - 8)));
                }
            }
            out.push(line(
                Normal,
                format!("A manifest will be written: conductor/state/{workflow_id}.aborted.json"),
            ));
        }
        None => out.push(line(
            Warn,
            format!(
                "{workflow_id} is no longer listed (removed on disk since you selected it); the engine would refuse."
            ),
        )),
    }
    let dead: Vec<String> = items::dead_letters(snap, &items::Filter::default())
        .iter()
        .filter(|r| *r.view.dispatch.workflow_id == *workflow_id.as_str())
        .map(|r| r.key().to_string())
        .collect();
    if !dead.is_empty() {
        out.push(line(
            Dim,
            format!(
                "Its dead letter(s) will be retired (moved to conductor/retired/, journaled): {}",
                dead.join(", ")
            ),
        ));
    }
    out.push(line(Dim, format!("Reason: {reason}")));
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::AbortResult) -> String {
    format!(
        "{} aborted: {} artifact(s) marked, {} dispatch(es) withdrawn{}",
        r.workflow_id,
        r.artifacts_marked.len(),
        r.dispatches_withdrawn.len(),
        if r.duplicate {
            " (already aborted)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_workflow_or_says_it_is_asked_for_every_mark() {
        let q = Reason(WorkflowId::parse("wf_deploy_42").unwrap());
        assert_eq!(q.title(0, Pane::Workflows), "Abort wf_deploy_42");
        assert_eq!(q.title(3, Pane::Workflows), "Abort 3 marked workflow(s)");
        assert_eq!(
            q.title(2, Pane::DeadLetters),
            "Abort the workflows of 2 marked dead letter(s)"
        );
    }
}
