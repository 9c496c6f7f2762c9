//! Rerun a failed, stalled or completed workflow from a step (`e` on pane 1, the step asked with Tab
//! completion); from the replay, a fork from the moment shown (`rerun --from STEP --as-of TS`,
//! started by the replay's `start_fork`).

use chrono::{DateTime, Utc};

use crate::engine::{Error, StepId, WorkflowId};
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, FlashKind, Mode, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::shown::{self, Version};
use super::{Act, Op, line};

/// `e` on a workflow.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    start_rerun(app);
    Vec::new()
}

/// The step a workflow is dispatched again from; with a moment (RFC 3339), a fork from the
/// context bag it had then.
#[derive(Debug, Clone)]
struct FromStep {
    workflow_id: WorkflowId,
    as_of: Option<String>,
}

impl Question for FromStep {
    fn title(&self, _marked: usize, _pane: Pane) -> String {
        match &self.as_of {
            None => format!("Rerun {}", self.workflow_id),
            Some(at) => format!("Fork {} as of {at}", self.workflow_id),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        rerun_answered(app, self.workflow_id, self.as_of, answer)
    }
}

/// The question of a rerun of `workflow_id` (with `as_of`, the fork the replay offers).
pub(crate) fn step_question(workflow_id: WorkflowId, as_of: Option<String>) -> PromptFor {
    PromptFor::Action(Box::new(FromStep { workflow_id, as_of }))
}

fn start_rerun(app: &mut App) {
    let Some(wf) = app.selected_workflow() else {
        return;
    };
    let Some(w) = app
        .snapshot()
        .workflows
        .iter()
        .find(|w| &*w.id == wf.as_str())
    else {
        return app.need("a workflow");
    };
    use crate::engine::WorkflowStatus as S;
    let status = w.state.status.clone();
    if !matches!(status, S::Failed | S::Stalled | S::Completed) {
        return app.flash(
            FlashKind::Error,
            format!(
                "{wf} is {status}: only a failed, stalled or completed workflow is rerun (abort it first)"
            ),
        );
    }
    let steps = rerun_steps(app, &wf);
    // The step it failed or stalled at; a completed workflow starts again from its first step.
    let default = match status {
        S::Completed => steps.first().cloned(),
        _ => w
            .state
            .current_step
            .as_deref()
            .map(str::to_owned)
            .or_else(|| steps.first().cloned()),
    }
    .unwrap_or_default();
    let label = if steps.is_empty() {
        "Rerun from step (its definition is not loaded here)".to_owned()
    } else {
        format!("Rerun from step (Tab completes: {})", steps.join(", "))
    };
    app.ask(label, true, default, step_question(wf, None));
    if let Mode::Prompt(p) = app.mode_mut() {
        p.completions = steps;
    }
}

/// The step ids of a workflow's definition, in its order (empty when it is not loaded).
pub(crate) fn rerun_steps(app: &App, wf: &WorkflowId) -> Vec<String> {
    app.snapshot()
        .workflows
        .iter()
        .find(|w| &*w.id == wf.as_str())
        .and_then(|w| app.snapshot().definition(w.state.definition_id.as_deref()))
        .map(|d| d.steps.iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default()
}

/// The step was typed: it must be one of the definition's (when it is loaded).
pub(crate) fn rerun_answered(
    app: &mut App,
    workflow_id: WorkflowId,
    as_of: Option<String>,
    answer: Option<String>,
) -> Result<(), AnswerError> {
    let step = answer.unwrap_or_default();
    let steps = rerun_steps(app, &workflow_id);
    if !steps.is_empty() && !steps.contains(&step) {
        return Err(AnswerError::Unreadable(format!(
            "{step:?} is not a step of {workflow_id}'s definition (Tab completes: {})",
            steps.join(", ")
        )));
    }
    let step = StepId::parse_as("step", &step)?;
    app.confirm(Op::Rerun {
        workflow_id,
        step,
        as_of,
    });
    Ok(())
}

impl Act for super::Rerun<'_> {
    fn title(&self) -> String {
        let (workflow_id, step) = (self.workflow_id, self.step);
        match self.as_of {
            None => format!("Rerun {workflow_id} from step {step}"),
            Some(at) => format!("Fork {workflow_id} from step {step} as of {at}"),
        }
    }

    fn verb(&self) -> &'static str {
        match self.as_of {
            None => "Rerun",
            Some(_) => "Fork",
        }
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        match self.as_of {
            Some(at) => describe_fork(out, self.workflow_id, self.step, at, snap),
            None => describe(out, self.workflow_id, self.step, snap),
        }
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        // A fork is confirmed from the past, which does not move under it; the engine checks the
        // live workflow.
        if self.as_of.is_none() {
            shown::workflow(v, self.workflow_id.as_str(), snap)
        }
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        let conductor = engine.conductor();
        let Some(at) = self.as_of else {
            return Ok(Done::new(
                conductor.rerun(self.workflow_id, self.step, None)?,
                summary,
                Outcome::Rerun,
            ));
        };
        // A fork acts on the live root, from the context bag the history holds for the moment.
        let as_of = crate::engine::context_as_of(engine.root(), self.workflow_id, at)?;
        Ok(Done::new(
            conductor.rerun_as_of(self.workflow_id, self.step, None, &as_of)?,
            summary,
            Outcome::Rerun,
        ))
    }

    fn subject(&self) -> String {
        self.workflow_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "rerun"
    }
}

/// The confirmation lines of a rerun.
fn describe(
    out: &mut Vec<(Tone, String)>,
    workflow_id: &WorkflowId,
    step: &StepId,
    snap: &Snapshot,
) {
    use Tone::*;
    let Some(w) = snap
        .workflows
        .iter()
        .find(|w| &*w.id == workflow_id.as_str())
    else {
        out.push(line(
            Warn,
            format!(
                "{workflow_id} is no longer listed (removed on disk); the engine would refuse."
            ),
        ));
        return;
    };
    let god = snap
        .definition(w.state.definition_id.as_deref())
        .and_then(|d| d.step(step.as_str()))
        .map(|s| s.god.clone());
    out.push(line(
        Normal,
        format!(
            "Workflow {workflow_id} ({}, now {}) will be dispatched again from step {step}{}.",
            w.state.definition_id.as_deref().unwrap_or("no definition"),
            w.state.status,
            god.as_deref()
                .map(|g| format!(" to {g}'s inbox"))
                .unwrap_or_default()
        ),
    ));
    out.push(line(
        Normal,
        "Its history keeps every attempt: this one is appended, nothing is removed.",
    ));
    out.push(line(
        Dim,
        format!(
            "The context stays as it is; to edit it, use the CLI: pantheon rerun {workflow_id} --from {step} --context FILE"
        ),
    ));
    out.push(line(
        Dim,
        format!("Journaled as rerun by {OPERATOR} (console)."),
    ));
}

/// The confirmation lines of a fork (a rerun with `as_of`), confirmed from the replay: the
/// snapshot is the past, the act is on the live root.
fn describe_fork(
    out: &mut Vec<(Tone, String)>,
    workflow_id: &WorkflowId,
    step: &StepId,
    at: &str,
    snap: &Snapshot,
) {
    use Tone::*;
    let then = snap
        .workflows
        .iter()
        .find(|w| &*w.id == workflow_id.as_str())
        .map(|w| {
            format!(
                "{} at step {}",
                w.state.status,
                w.state.current_step.as_deref().unwrap_or("-")
            )
        })
        .unwrap_or_else(|| "not listed".to_owned());
    out.push(line(
        Warn,
        "This acts on the LIVE root, not on the past the console shows.",
    ));
    out.push(line(
        Normal,
        format!(
            "Workflow {workflow_id} will be dispatched again from step {step}, starting from the \
             context bag it had at {at} (then: {then})."
        ),
    ));
    out.push(line(
        Normal,
        "The workflow must be failed, stalled or completed now; the engine refuses otherwise.",
    ));
    out.push(line(
        Dim,
        format!(
            "As the CLI's: pantheon rerun {workflow_id} --from {step} --as-of {at}; journaled as a \
             rerun whose status is fork, naming the moment."
        ),
    ));
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::RerunResult) -> String {
    format!(
        "{} {} from step {}{} (attempt {}, was {}): dispatched to {} as {}",
        r.workflow_id,
        if r.as_of.is_some() { "forked" } else { "rerun" },
        r.step,
        r.as_of
            .as_deref()
            .map(|t| format!(" as of {t}"))
            .unwrap_or_default(),
        r.attempt,
        r.previous_status,
        r.to_god,
        r.handoff_id
    )
}
