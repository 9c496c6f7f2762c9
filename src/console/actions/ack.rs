//! Ack a dispatch of pane 2 (`a` opens the status menu; each status has its own key): the menu,
//! the message / ETA / gates prompts, and the engine's `ack` as the operator.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{
    AckRequest, Actor, Error, GodName, HandoffId, WorkflowId,
    time::{parse_ts, relative},
};
use crate::live::snapshot::Snapshot;

use super::super::app::{
    AckStage, AckTarget, AnswerError, App, Effect, FlashKind, Mode, PromptFor, Question, Tone,
    parse_eta, parse_gates,
};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::{AckChoice, Pane};
use super::super::marks::FanOut;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::{Act, Op, line, marks_fit};

/// The key of an ack's `context` that lists the gates the operator asserts passed
/// (docs/PROTOCOL.md §2.5, `completed`).
const GATES_PASSED: &str = "gates_passed";

/// The engine's ack of a dispatch as the operator answered the prompts: the gates that passed go
/// into its `context`, where the protocol has them.
pub(crate) fn ack_request(
    handoff_id: HandoffId,
    workflow_id: Option<WorkflowId>,
    decision: AckChoice,
    message: Option<String>,
    eta: Option<String>,
    gates_passed: Vec<String>,
) -> AckRequest {
    let mut ack = AckRequest::new(handoff_id, decision);
    ack.workflow_id = workflow_id;
    ack.message = message;
    ack.eta = eta;
    if !gates_passed.is_empty() {
        ack.context
            .insert(GATES_PASSED.into(), serde_json::json!(gates_passed));
    }
    ack
}

/// The gates an ack asserts passed (see [`ack_request`]).
pub(crate) fn gates_passed(ack: &AckRequest) -> Vec<String> {
    ack.context
        .get(GATES_PASSED)
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The ack of `t` as answered.
fn ack_op(
    t: AckTarget,
    status: AckChoice,
    message: Option<String>,
    eta: Option<String>,
    gates_passed: Vec<String>,
) -> Op {
    Op::Ack {
        god: t.god,
        request: ack_request(
            t.handoff_id,
            t.workflow_id,
            status,
            message,
            eta,
            gates_passed,
        ),
    }
}

/// `a` (the menu) or a status's own key, on a dispatch that is not held.
pub(super) fn start(app: &mut App, choice: Option<AckChoice>) -> Vec<Effect> {
    if marks_fit(
        app,
        &|a: &App, k: &RowKey| crate::console::marks::dispatch_is_held(a, k) == Some(false),
        "a dispatch to ack",
    ) {
        start_ack(app, choice);
    }
    Vec::new()
}

/// A question of an ack (its message, a pending ack's ETA, a completed ack's gates); the earlier
/// answers ride along in `stage`.
#[derive(Debug, Clone)]
struct AckQuestion {
    target: AckTarget,
    status: AckChoice,
    stage: AckStage,
}

impl Question for AckQuestion {
    fn title(&self, marked: usize, _pane: Pane) -> String {
        match marked {
            0 => format!("Ack {} as {}", self.target.handoff_id, self.status.as_str()),
            n => format!("Ack {n} marked dispatch(es) as {}", self.status.as_str()),
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        let AckQuestion {
            target,
            status,
            stage,
        } = *self;
        ack_answered(app, target, status, stage, answer)
    }
}

fn start_ack(app: &mut App, choice: Option<AckChoice>) {
    if app.refuse_if_gone(Pane::Inboxes) {
        return;
    }
    let Some((god, d, held)) = app.selected_dispatch() else {
        return app.need("a dispatch in the Inboxes pane (2)");
    };
    if held {
        app.flash(
            FlashKind::Error,
            "a held dispatch is approved (p) or rejected (R), not acked",
        );
        return;
    }
    let target = match (GodName::parse(&god), HandoffId::parse(&d.handoff_id)) {
        (Ok(god), Ok(handoff_id)) => AckTarget {
            god,
            handoff_id,
            workflow_id: WorkflowId::parse(&d.workflow_id).ok(),
            step: d.step.to_string(),
        },
        (Err(e), _) | (_, Err(e)) => {
            app.flash(FlashKind::Error, format!("cannot ack this dispatch: {e}"));
            return;
        }
    };
    match choice {
        Some(c) => choose_ack(app, target, c),
        None => app.set_mode(Mode::AckMenu { target, choice: 0 }),
    }
}

/// A status taken from the ack menu: its message prompt, or the confirmation.
pub(crate) fn choose_ack(app: &mut App, target: AckTarget, status: AckChoice) {
    match crate::console::keymap::ack_message_prompt(status) {
        Some((label, required)) => app.ask(
            label,
            required,
            String::new(),
            PromptFor::Action(Box::new(AckQuestion {
                target,
                status,
                stage: AckStage::Message,
            })),
        ),
        None => app.confirm(ack_op(target, status, None, None, Vec::new())),
    }
}

/// The gates the step of a dispatch declares in its workflow's definition (empty when unknown).
fn declared_gates(app: &App, t: &AckTarget) -> Vec<String> {
    let Some(wf) = &t.workflow_id else {
        return Vec::new();
    };
    app.snapshot()
        .workflows
        .iter()
        .find(|w| *w.id == *wf.as_str())
        .and_then(|w| app.snapshot().definition(w.state.definition_id.as_deref()))
        .and_then(|d| d.step(&t.step))
        .map(|s| s.gates.clone())
        .unwrap_or_default()
}

/// An answer of the ack's prompts: the next question (the ETA of a pending ack, the gates of a
/// completed one when its step declares some) or the confirmation.
pub(crate) fn ack_answered(
    app: &mut App,
    target: AckTarget,
    status: AckChoice,
    stage: AckStage,
    answer: Option<String>,
) -> Result<(), AnswerError> {
    let op = match stage {
        AckStage::Message if status == AckChoice::Pending => {
            app.ask(
                "ETA (optional): in 30m / 2h / 1d, or a time like 2026-06-14T12:00:00Z",
                false,
                String::new(),
                PromptFor::Action(Box::new(AckQuestion {
                    target,
                    status,
                    stage: AckStage::Eta { message: answer },
                })),
            );
            return Ok(());
        }
        AckStage::Message if status == AckChoice::Completed => {
            let declared = declared_gates(app, &target);
            if declared.is_empty() {
                ack_op(target, status, answer, None, Vec::new())
            } else {
                app.ask(
                    format!(
                        "Gates passed (step {} declares: {}; comma-separated, edit to what really passed)",
                        target.step,
                        declared.join(", ")
                    ),
                    false,
                    declared.join(", "),
                    PromptFor::Action(Box::new(AckQuestion {
                        target,
                        status,
                        stage: AckStage::Gates {
                            message: answer,
                            declared,
                        },
                    })),
                );
                return Ok(());
            }
        }
        AckStage::Message => ack_op(target, status, answer, None, Vec::new()),
        AckStage::Eta { message } => {
            let eta = match answer {
                Some(a) => Some(parse_eta(&a, app.now())?),
                None => None,
            };
            ack_op(target, status, message, eta, Vec::new())
        }
        AckStage::Gates { message, .. } => {
            let gates = parse_gates(answer.as_deref().unwrap_or(""))?;
            ack_op(target, status, message, None, gates)
        }
    };
    app.confirm(op);
    Ok(())
}

impl Act for super::Ack<'_> {
    fn title(&self) -> String {
        format!(
            "Ack {} as {}",
            self.request.handoff_id,
            self.request.decision.as_str()
        )
    }

    fn verb(&self) -> &'static str {
        "Ack"
    }

    fn is_destructive(&self) -> bool {
        self.request.decision == AckChoice::Rejected
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>) {
        describe(out, self.god, self.request, snap, now)
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dispatch(v, self.request.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine.conductor().ack(self.request, Actor::Operator)?,
            summary,
            Outcome::Ack,
        ))
    }

    fn subject(&self) -> String {
        self.request.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "acked"
    }

    fn words(&self) -> Option<String> {
        self.request.message.clone()
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(self.marked(fan, mark))
    }
}

impl super::Ack<'_> {
    /// The same answers, in a new ack (its own id) of the marked dispatch.
    fn marked(&self, fan: &FanOut<'_>, mark: &RowKey) -> Result<Op, SkipWhy> {
        let rows = items::dispatches(fan.snap, &fan.all);
        let Some(r) = rows.iter().find(|r| r.is(mark)) else {
            return Err(SkipWhy::NoLongerListed);
        };
        if r.held {
            return Err(SkipWhy::Held(fan.held_why.clone()));
        }
        let god = GodName::parse(r.god).map_err(SkipWhy::from)?;
        let handoff_id = HandoffId::parse(&r.view.dispatch.handoff_id).map_err(SkipWhy::from)?;
        let request = self.request;
        Ok(Op::Ack {
            god,
            request: ack_request(
                handoff_id,
                WorkflowId::parse(&r.view.dispatch.workflow_id).ok(),
                request.decision,
                request.message.clone(),
                request.eta.clone(),
                gates_passed(request),
            ),
        })
    }
}

/// The confirmation lines of an ack.
fn describe(
    out: &mut Vec<(Tone, String)>,
    god: &GodName,
    request: &AckRequest,
    snap: &Snapshot,
    now: DateTime<Utc>,
) {
    use Tone::*;
    let AckRequest {
        handoff_id,
        workflow_id,
        decision: status,
        message,
        eta,
        ..
    } = request;
    let gates_passed = gates_passed(request);
    let wf = workflow_id.as_ref().map(|w| w.as_str()).unwrap_or("?");
    let step = snap
        .inboxes
        .iter()
        .find(|i| i.god == god.as_str())
        .and_then(|i| {
            i.dispatches
                .iter()
                .find(|d| *d.dispatch.handoff_id == *handoff_id.as_str())
        })
        .map(|d| d.dispatch.step.clone());
    let Some(step) = step else {
        out.push(line(
            Warn,
            format!(
                "Dispatch {handoff_id} of {wf} is no longer in {god}'s inbox: it was acked, \
                 withdrawn or moved since you selected it."
            ),
        ));
        out.push(line(
            Dim,
            "Acking it now would be refused; cancel and pick a row again.",
        ));
        return;
    };
    out.push(line(
        Normal,
        format!("Dispatch {handoff_id} (step {step} of {wf}) in {god}'s inbox"),
    ));
    out.push(line(
        Normal,
        format!(
            "will be acknowledged {} on {god}'s behalf (by: {OPERATOR}).",
            status.as_str()
        ),
    ));
    let effect = match status {
        AckChoice::Accepted => format!(
            "The dispatch will move to conductor/archive/{god}/; {wf} will become in_progress."
        ),
        AckChoice::Pending => {
            "The dispatch will stay in the inbox marked pending; the workflow will keep waiting."
                .to_owned()
        }
        AckChoice::Rejected => format!(
            "The dispatch will be archived as rejected; {wf} will go to the step's next fallback god, or fail if none is left."
        ),
        AckChoice::Completed => format!(
            "Step {step} will be recorded done with your message as its summary, and {wf} routed to its next step."
        ),
    };
    out.push(line(
        if *status == AckChoice::Rejected {
            Warn
        } else {
            Normal
        },
        effect,
    ));
    if let Some(m) = message {
        out.push(line(Dim, format!("Message: {m}")));
    }
    if let Some(e) = eta {
        let when = parse_ts(e)
            .map(|t| format!(" ({})", relative(t, now)))
            .unwrap_or_default();
        out.push(line(Dim, format!("ETA: {e}{when}")));
    }
    if *status == AckChoice::Completed {
        out.push(line(
            Dim,
            if gates_passed.is_empty() {
                "Gates passed: none asserted".to_owned()
            } else {
                format!(
                    "Gates passed (asserted by {OPERATOR}): {}",
                    gates_passed.join(", ")
                )
            },
        ));
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::AckResult) -> String {
    let mut out = format!("{}: {}", r.handoff_id, r.status);
    if r.duplicate {
        out.push_str(" (already recorded)");
    }
    out.push_str(&format!(", workflow {}", r.state_status));
    if let Some(g) = &r.rerouted_to {
        out.push_str(&format!(", rerouted to {g}"));
    }
    out
}
