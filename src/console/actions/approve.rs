//! Approve a held dispatch of pane 2 (`p`): into its god's inbox; one held for a budget may have
//! the budget raised first (asked), as `pantheon approve --budget-usd/--budget-tokens`.

use chrono::{DateTime, Utc};

use crate::engine::{ApprovalResult, ApprovalStatus, Actor, Budget, Error, HandoffId};
use crate::live::snapshot::Snapshot;

use super::super::keymap::{Action, Pane};
use super::super::app::{App, Effect, FlashKind, PromptFor, Question, Tone, parse_budget};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::marks::FanOut;
use super::super::ops::Outcome;
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::{Act, Op, line, marks_fit};

/// `p` on a held dispatch.
pub(super) fn start(app: &mut App, action: &Action) -> Option<Vec<Effect>> {
    if *action != Action::Approve {
        return None;
    }
    if marks_fit(
        app,
        &|a: &App, k: &RowKey| a.dispatch_is_held(k) == Some(true),
        "a held dispatch",
    ) {
        app.start_approve();
    }
    Some(Vec::new())
}

/// The new limits of the budget this held dispatch was held for (empty: approve it as it is).
#[derive(Debug, Clone)]
struct Raise(HandoffId);

impl Question for Raise {
    fn title(&self, _marked: usize, _pane: Pane) -> String {
        format!("Approve {}, held for a budget", self.0)
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), String> {
        app.raise_answered(self.0, answer)
    }
}

impl App {
    fn start_approve(&mut self) {
        if self.refuse_if_gone(Pane::Inboxes) {
            return;
        }
        match self.selected_dispatch() {
            // Held for a budget, one dispatch: the operator may raise the budget first.
            Some((_, d, true))
                if crate::live::ledger::held_for_budget(d.held_because.as_deref())
                    && self.pane_state().picked.is_empty() =>
            {
                match HandoffId::parse(&d.handoff_id) {
                    Ok(h) => self.ask(
                        "Raise the budget to (e.g. $5, 3000000 tokens, or both; empty: approve as it is)",
                        false,
                        String::new(),
                        PromptFor::Action(Box::new(Raise(h))),
                    ),
                    Err(e) => self.flash(FlashKind::Error, e.to_string()),
                }
            }
            Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
                Ok(handoff_id) => self.confirm(Op::Approve {
                    handoff_id,
                    raise: None,
                }),
                Err(e) => self.flash(FlashKind::Error, e.to_string()),
            },
            _ => self.need("a held dispatch (the _quarantine rows of pane 2)"),
        }
    }

    /// The new limits of the budget a held dispatch was held for (empty: approve it as it is).
    pub(crate) fn raise_answered(
        &mut self,
        handoff_id: HandoffId,
        answer: Option<String>,
    ) -> Result<(), String> {
        let raise = answer.as_deref().map(parse_budget).transpose()?;
        self.confirm(Op::Approve { handoff_id, raise });
        Ok(())
    }
}

impl Act for super::Approve<'_> {
    fn title(&self) -> String {
        let handoff_id = self.handoff_id;
        match self.raise {
            None => format!("Approve held dispatch {handoff_id}"),
            Some(_) => format!("Raise the budget and approve held dispatch {handoff_id}"),
        }
    }

    fn verb(&self) -> &'static str {
        "Approve"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        describe(out, self.handoff_id, self.raise.as_ref(), snap)
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dispatch(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Outcome, Error> {
        let conductor = engine.conductor();
        let Some(to) = self.raise else {
            return Ok(Outcome::Approval(
                conductor.approve(self.handoff_id, Actor::Operator)?,
            ));
        };
        // As `approve --budget-usd/--budget-tokens`: the raise (journaled), then the approval.
        let actor = conductor.origin().actor.clone();
        let raised = conductor.raise_budget(self.handoff_id, *to, &actor)?;
        let raises = raise_texts(&raised);
        Ok(Outcome::RaisedAndApproved {
            raises,
            approval: conductor.approve(self.handoff_id, Actor::Operator)?,
        })
    }

    fn summarize(&self, outcome: &Outcome) -> String {
        match outcome {
            Outcome::RaisedAndApproved { raises, approval } => format!(
                "budget raised ({}); {}",
                raises.join("; "),
                approval_summary(approval)
            ),
            Outcome::Approval(r) => approval_summary(r),
            _ => String::new(),
        }
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "approved"
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, String>> {
        Some(held(fan, mark).map(|handoff_id| Op::Approve {
            handoff_id,
            raise: None,
        }))
    }
}

/// The marked held dispatch (an approval or a rejection of it), or why the mark is skipped.
pub(super) fn held(fan: &FanOut<'_>, mark: &RowKey) -> Result<HandoffId, String> {
    let rows = items::dispatches(fan.snap, &fan.all);
    let Some(r) = rows.iter().find(|r| r.is(mark)) else {
        return Err("no longer listed".into());
    };
    if !r.held {
        return Err(fan.not_held_why.clone());
    }
    HandoffId::parse(&r.view.dispatch.handoff_id).map_err(|e| e.to_string())
}

/// The flash of the engine's answer to an approval or a rejection of a held dispatch.
pub(super) fn approval_summary(r: &ApprovalResult) -> String {
    if r.status == ApprovalStatus::Approved {
        format!(
            "{} approved into {}'s inbox (step {}), workflow {}",
            r.handoff_id, r.target_god, r.target_step, r.state_status
        )
    } else {
        format!("{} {}, workflow {}", r.handoff_id, r.status, r.state_status)
    }
}

/// Each raise of `Conductor::raise_budget`'s answer as `scope name -> {cost_usd, tokens}`.
fn raise_texts(raised: &serde_json::Value) -> Vec<String> {
    raised
        .get("raises")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
            format!(
                "{} {} -> {}",
                s("scope"),
                s("name"),
                r.get("to").cloned().unwrap_or_default()
            )
        })
        .collect()
}

/// The confirmation lines of an approval.
fn describe(
    out: &mut Vec<(Tone, String)>,
    handoff_id: &HandoffId,
    raise: Option<&Budget>,
    snap: &Snapshot,
) {
    use Tone::*;
    let held = snap
        .quarantine
        .dispatches
        .iter()
        .find(|d| *d.dispatch.handoff_id == *handoff_id.as_str());
    match held {
        Some(d) => {
            let x = &d.dispatch;
            out.push(line(
                Normal,
                format!(
                    "Held dispatch {handoff_id} (step {} of {}, from {})",
                    x.step, x.workflow_id, x.from_god
                ),
            ));
            out.push(line(
                Normal,
                format!(
                    "will move from _quarantine into {}'s inbox; the workflow will then wait for its ack.",
                    x.to_god
                ),
            ));
            if let Some(why) = &x.held_because {
                out.push(line(Dim, format!("Held because: {why}")));
            }
            describe_budget_hold(out, d, raise);
        }
        None => out.push(line(
            Warn,
            format!(
                "{handoff_id} is no longer held (approved, rejected or removed since you selected it); the engine would refuse."
            ),
        )),
    }
}

/// The figures of a dispatch held for a budget (its `budget.crossed`: which budget, used, limit)
/// and what a raise will set.
fn describe_budget_hold(
    out: &mut Vec<(Tone, String)>,
    d: &crate::live::snapshot::DispatchView,
    raise: Option<&Budget>,
) {
    use Tone::*;
    let whole = d.whole().ok();
    let crossed = whole
        .as_ref()
        .and_then(|w| w.raw.pointer("/budget/crossed"))
        .and_then(serde_json::Value::as_array);
    for c in crossed.into_iter().flatten().take(8) {
        let s = |k: &str| c.get(k).and_then(serde_json::Value::as_str).unwrap_or("?");
        let n = |k: &str| {
            c.get(k)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into())
        };
        let (used, limit) = if s("metric") == "cost_usd" {
            (format!("${}", n("used")), format!("${}", n("limit")))
        } else {
            (
                format!("{} tokens", n("used")),
                format!("{} tokens", n("limit")),
            )
        };
        out.push(line(
            Warn,
            format!(
                "Budget reached: {} {} used {used} of its {limit} ({})",
                s("scope"),
                s("name"),
                s("metric")
            ),
        ));
    }
    match raise {
        Some(b) => {
            let mut to = Vec::new();
            if let Some(c) = b.cost_micros {
                to.push(crate::live::ledger::usd(c));
            }
            if let Some(t) = b.tokens {
                to.push(format!("{t} tokens"));
            }
            out.push(line(
                Normal,
                format!(
                    "Each budget it reached will first be set to {} (the other metric keeps its limit), journaled as budget_raise.",
                    to.join(" and ")
                ),
            ));
        }
        None if crossed.is_some_and(|c| !c.is_empty()) => out.push(line(
            Dim,
            "The budget stays reached: the workflow's next dispatch will be held again.",
        )),
        None => {}
    }
}
