//! Approve a held dispatch of pane 2 (`p`): into its god's inbox; one held for a budget may have
//! the budget raised first (asked), as `pantheon approve --budget-usd/--budget-tokens`.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{Actor, ApprovalResult, ApprovalStatus, Budget, Error, HandoffId};
use crate::live::ledger::Bar;
use crate::live::snapshot::Snapshot;

use super::super::app::{
    AnswerError, App, Effect, FlashKind, PromptFor, Question, Tone, parse_budget,
};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::{self, Version};
use super::{Act, Op, line, marks_fit};

/// `p` on a held dispatch.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(
        app,
        &|a: &App, k: &RowKey| crate::console::marks::dispatch_is_held(a, k) == Some(true),
        "a held dispatch",
    ) {
        start_approve(app);
    }
    Vec::new()
}

/// The new limits of the budgets held dispatches would go past (empty: approve as they are): one
/// dispatch, or every marked one held for a budget (`held`: each with the budgets it reached).
#[derive(Debug, Clone)]
struct Raise {
    handoff_id: HandoffId,
    held: Vec<(String, Vec<Bar>)>,
}

impl Question for Raise {
    fn title(&self, marked: usize, _pane: Pane) -> String {
        if marked > 0 {
            format!(
                "Approve {marked} marked dispatch(es): {} held for a budget",
                self.held.len()
            )
        } else {
            format!("Raise the budgets of {} and approve it", self.handoff_id)
        }
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        raise_answered(app, self.handoff_id, &self.held, answer)
    }
}

/// The budgets held dispatch `handoff_id` would go past if it were approved now, as the snapshot
/// shows them (the Ledger's figures): its workflow's and steps' budgets (declared, or raised), the
/// budget of the god the workflow holds it for, and today's; reached ones only. The engine computes
/// the same from the ledger at approval time and refuses a raise that leaves one reached.
pub(crate) fn reached_for(snap: &Snapshot, handoff_id: &str, now: DateTime<Utc>) -> Vec<Bar> {
    let Some(d) = snap
        .quarantine
        .dispatches
        .iter()
        .find(|d| &*d.dispatch.handoff_id == handoff_id)
    else {
        return Vec::new();
    };
    let Some(w) = snap
        .workflows
        .iter()
        .find(|w| *w.id == *d.dispatch.workflow_id)
    else {
        return Vec::new();
    };
    let god = w.state.dispatched_to.as_deref();
    let mut out: Vec<Bar> = snap
        .workflow_bars(w)
        .into_iter()
        .filter(Bar::reached)
        .collect();
    out.extend(
        snap.root_bars(now)
            .into_iter()
            .filter(|b| b.reached() && (b.scope == "day" || Some(b.name.as_str()) == god)),
    );
    out
}

/// `workflow wf_x: $1.20 of $1.00`.
fn bar_text(b: &Bar) -> String {
    format!("{} {}: {}", b.scope, b.name, b.figures())
}

/// An amount of `metric` as the Ledger shows it.
fn amount(metric: &str, n: u64) -> String {
    if metric == "cost_usd" {
        crate::live::ledger::usd(n)
    } else {
        format!("{} tokens", crate::live::ledger::tokens(n))
    }
}

/// The prompt's lines: each budget reached, with its usage and limit (per dispatch when marked).
fn raise_context(held: &[(String, Vec<Bar>)], bulk: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (hid, bars) in held {
        for b in bars {
            out.push(match bulk {
                true => format!("{hid}: {} reached", bar_text(b)),
                false => format!("Reached: {}", bar_text(b)),
            });
        }
    }
    if out.len() > 8 {
        let more = out.len() - 7;
        out.truncate(7);
        out.push(format!("+{more} more"));
    }
    out
}

/// The prompt's label: a value for each metric reached, with an example above what is used.
fn raise_label(held: &[(String, Vec<Bar>)]) -> String {
    let bars = || held.iter().flat_map(|(_, b)| b.iter());
    let most = |metric: &str| {
        bars()
            .filter(|b| b.metric == metric)
            .map(|b| b.used.max(b.limit))
            .max()
    };
    let mut want = Vec::new();
    let mut example = Vec::new();
    if let Some(c) = most("cost_usd") {
        want.push("dollars");
        let cents = (c.saturating_mul(2) / 10_000).max(1);
        example.push(format!("${}.{:02}", cents / 100, cents % 100));
    }
    if let Some(t) = most("tokens") {
        want.push("tokens");
        example.push(format!("{} tokens", t.saturating_mul(2).max(1)));
    }
    format!(
        "New limit in {} (each reached budget is set to it; it must be above what is used), e.g. {}. \
         Empty: approve without a raise (the next dispatch is held again)",
        want.join(" and "),
        example.join(", ")
    )
}

/// Why a raise to `to` would leave a budget of `held` reached (none: it frees every one).
fn still_reached(held: &[(String, Vec<Bar>)], to: &Budget) -> Option<String> {
    let mut why = Vec::new();
    for (_, bars) in held {
        for b in bars {
            let (given, flag) = if b.metric == "cost_usd" {
                (to.cost_micros, "dollars")
            } else {
                (to.tokens, "tokens")
            };
            let text = match given {
                None => format!(
                    "{} {} reached its {} ({}): give {flag} too, above {}",
                    b.scope,
                    b.name,
                    amount(b.metric, b.limit),
                    b.figures(),
                    amount(b.metric, b.used)
                ),
                Some(n) if n <= b.used => format!(
                    "{} {} has used {}: {} would leave it reached; give more",
                    b.scope,
                    b.name,
                    amount(b.metric, b.used),
                    amount(b.metric, n)
                ),
                Some(_) => continue,
            };
            if !why.contains(&text) {
                why.push(text);
            }
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

fn start_approve(app: &mut App) {
    if app.refuse_if_gone(Pane::Inboxes) {
        return;
    }
    let marked = !app.pane_state().picked.is_empty() && !app.pane_state().detail;
    match app.selected_dispatch() {
        Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
            Ok(handoff_id) => {
                // Each dispatch that would go past a reached budget: the operator may raise it
                // first (with marks, one raise for every marked one held for a budget).
                let held = if marked {
                    marked_budget_holds(app)
                } else {
                    let bars = reached_for(app.snapshot(), &d.handoff_id, app.now());
                    match bars.is_empty() {
                        true => Vec::new(),
                        false => vec![(d.handoff_id.to_string(), bars)],
                    }
                };
                if held.is_empty() {
                    app.confirm(Op::Approve {
                        handoff_id,
                        raise: None,
                    });
                } else {
                    let context = raise_context(&held, marked);
                    let label = raise_label(&held);
                    app.ask_about(
                        context,
                        label,
                        String::new(),
                        PromptFor::Action(Box::new(Raise { handoff_id, held })),
                    );
                }
            }
            Err(e) => app.flash(FlashKind::Error, e.to_string()),
        },
        _ => app.need("a held dispatch (the _quarantine rows of pane 2)"),
    }
}

/// The marked held dispatches that would go past a reached budget, each with those budgets.
fn marked_budget_holds(app: &App) -> Vec<(String, Vec<Bar>)> {
    let rows = items::dispatches(app.snapshot(), &Default::default());
    let mut out = Vec::new();
    for mark in &app.pane_state().picked {
        let Some(r) = rows.iter().find(|r| r.is(mark) && r.held) else {
            continue;
        };
        let hid = r.view.dispatch.handoff_id.to_string();
        let bars = reached_for(app.snapshot(), &hid, app.now());
        if !bars.is_empty() {
            out.push((hid, bars));
        }
    }
    out
}

/// The new limits of the budgets a held dispatch (or the marked ones) would go past (empty:
/// approve as they are). A raise that would leave a budget reached is refused here, naming it,
/// and the prompt stays open (the engine refuses it too).
pub(crate) fn raise_answered(
    app: &mut App,
    handoff_id: HandoffId,
    held: &[(String, Vec<Bar>)],
    answer: Option<String>,
) -> Result<(), AnswerError> {
    let raise = answer.as_deref().map(parse_budget).transpose()?;
    if let Some(to) = &raise
        && let Some(why) = still_reached(held, to)
    {
        return Err(AnswerError::Unreadable(why));
    }
    app.confirm(Op::Approve { handoff_id, raise });
    Ok(())
}

impl Act for super::Approve<'_> {
    fn title(&self) -> String {
        let handoff_id = self.handoff_id;
        match self.raise {
            None => format!("Approve held dispatch {handoff_id}"),
            Some(_) => format!("Raise the budgets and approve held dispatch {handoff_id}"),
        }
    }

    fn verb(&self) -> &'static str {
        "Approve"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>) {
        describe(out, self.handoff_id, self.raise.as_ref(), snap, now)
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dispatch(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        let conductor = engine.conductor();
        let Some(to) = self.raise else {
            return Ok(Done::new(
                conductor.approve(self.handoff_id, Actor::Operator)?,
                approval_summary,
                Outcome::Approval,
            ));
        };
        // As `approve --budget-usd/--budget-tokens`: the raise (journaled), then the approval.
        let actor = conductor.origin().actor.clone();
        let raised = conductor.raise_budget(self.handoff_id, *to, &actor)?;
        let raises = raise_texts(&raised);
        let approval = conductor.approve(self.handoff_id, Actor::Operator)?;
        let flash = format!(
            "budget raised ({}); {}",
            raises.join("; "),
            approval_summary(&approval)
        );
        Ok(Done {
            outcome: Outcome::RaisedAndApproved { raises, approval },
            flash,
        })
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "approved"
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        // The raise asked for the marks goes to each one that would go past a reached budget.
        Some(held(fan, mark).map(|handoff_id| {
            let raise = self.raise.filter(|_| {
                !reached_for(fan.snap, handoff_id.as_str(), chrono::Utc::now()).is_empty()
            });
            Op::Approve { handoff_id, raise }
        }))
    }
}

/// The marked held dispatch (an approval or a rejection of it), or why the mark is skipped.
pub(super) fn held(fan: &FanOut<'_>, mark: &RowKey) -> Result<HandoffId, SkipWhy> {
    let rows = items::dispatches(fan.snap, &fan.all);
    let Some(r) = rows.iter().find(|r| r.is(mark)) else {
        return Err(SkipWhy::NoLongerListed);
    };
    if !r.held {
        return Err(SkipWhy::NotHeld(fan.not_held_why.clone()));
    }
    HandoffId::parse(&r.view.dispatch.handoff_id).map_err(SkipWhy::from)
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
    now: DateTime<Utc>,
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
            describe_budget_hold(out, &reached_for(snap, handoff_id.as_str(), now), raise);
        }
        None => out.push(line(
            Warn,
            format!(
                "{handoff_id} is no longer held (approved, rejected or removed since you selected it); the engine would refuse."
            ),
        )),
    }
}

/// Each budget the dispatch would go past (which, used, limit), as the Ledger shows it now, and
/// what the raise sets each to.
fn describe_budget_hold(out: &mut Vec<(Tone, String)>, bars: &[Bar], raise: Option<&Budget>) {
    use Tone::*;
    for b in bars.iter().take(8) {
        let set = raise.map(|r| {
            if b.metric == "cost_usd" {
                r.cost_micros
            } else {
                r.tokens
            }
        });
        let after = match set {
            None => String::new(),
            Some(Some(n)) if n > b.used => {
                format!("; its limit will be set to {}", amount(b.metric, n))
            }
            Some(Some(n)) => format!(
                "; {} is not above what is used: the engine will refuse",
                amount(b.metric, n)
            ),
            Some(None) => {
                "; no new limit given for it: it stays reached, the engine will refuse".into()
            }
        };
        out.push(line(
            Warn,
            format!("Budget reached: {}{after}", bar_text(b)),
        ));
    }
    match raise {
        Some(_) => out.push(line(
            Normal,
            "The raise is journaled as budget_raise, then the dispatch is approved.",
        )),
        None if !bars.is_empty() => out.push(line(
            Dim,
            "The budget stays reached: the workflow's next dispatch will be held again.",
        )),
        None => {}
    }
}

/// Where `Enter` on a budget warning lands: the held dispatch `p` approves (pane 2's `_quarantine`
/// row) when one waits on that budget (a dispatch of the warned workflow, a dispatch to the warned
/// god, any dispatch for the day's budget) and the budget is reached; `None` otherwise.
pub(crate) fn budget_hold_row(
    snap: &Snapshot,
    scope: &str,
    name: &str,
    now: DateTime<Utc>,
) -> Option<RowKey> {
    let workflow = match scope {
        "workflow" => Some(name),
        "step" => name.rsplit_once('/').map(|(wf, _)| wf),
        _ => None,
    };
    let d = snap.quarantine.dispatches.iter().find(|d| {
        let x = &d.dispatch;
        let ours = match (scope, workflow) {
            (_, Some(wf)) => *x.workflow_id == *wf,
            ("god", None) => *x.to_god == *name,
            _ => true,
        };
        ours && reached_for(snap, &x.handoff_id, now)
            .iter()
            .any(|b| b.scope == scope && b.name == name)
    })?;
    Some(RowKey::Dispatch {
        god: snap.quarantine.god.as_str().into(),
        name: d.name.clone(),
    })
}
