//! What a confirmation dialog says will happen: the files, dispatches and verdicts involved, taken
//! from the snapshot (and, for cleanup, from the engine's dry run).

use crate::engine::{
    AckRequest, CleanupResult, LockKey,
    time::{parse_ts, relative},
};
use chrono::{DateTime, Utc};

use crate::live::snapshot::{Snapshot, Stamp};

use super::action::AckChoice;
use super::app::Tone;
use super::items;
use super::ops::{OPERATOR, Op};

fn line(t: Tone, s: impl Into<String>) -> (Tone, String) {
    (t, s.into())
}

/// The lines of the confirmation dialog for `op`.
pub fn describe(op: &Op, snap: &Snapshot, now: DateTime<Utc>) -> Vec<(Tone, String)> {
    let mut out = Vec::new();
    match op {
        Op::Bulk { items, skipped } => return super::marks::describe_bulk(items, skipped),
        Op::Ack { .. } => describe_ack(&mut out, op, snap, now),
        Op::Approve { .. } => describe_approve(&mut out, op, snap),
        Op::RejectHeld { .. } => describe_reject_held(&mut out, op),
        Op::Abort { .. } => describe_abort(&mut out, op, snap),
        Op::Requeue { .. } => describe_requeue(&mut out, op, snap, now),
        Op::Rerun { .. } => describe_rerun(&mut out, op, snap),
        Op::Cleanup { .. } => {}
        Op::ForceUnlock { .. } => describe_force_unlock(&mut out, op, snap, now),
        Op::BoardAdvance { .. } | Op::BoardNextRound { .. } | Op::BoardResolve { .. } => {
            describe_board(&mut out, op, snap)
        }
    }
    out
}

/// The confirmation lines of [`Op::Ack`].
fn describe_ack(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot, now: DateTime<Utc>) {
    use Tone::*;
    let Op::Ack { god, request } = op else {
        return;
    };
    let AckRequest {
        handoff_id,
        workflow_id,
        decision: status,
        message,
        eta,
        ..
    } = request;
    let gates_passed = super::ops::gates_passed(request);
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

/// The confirmation lines of [`Op::Approve`].
fn describe_approve(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot) {
    use Tone::*;
    let Op::Approve { handoff_id, raise } = op else {
        return;
    };
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
            describe_budget_hold(out, d, raise.as_ref());
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
    raise: Option<&crate::engine::Budget>,
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

/// The confirmation lines of [`Op::RejectHeld`].
fn describe_reject_held(out: &mut Vec<(Tone, String)>, op: &Op) {
    use Tone::*;
    let Op::RejectHeld { handoff_id, reason } = op else {
        return;
    };
    out.push(line(
        Danger,
        format!("Held dispatch {handoff_id} will be archived as rejected and its workflow marked failed."),
    ));
    out.push(line(Dim, format!("Reason: {reason}")));
}

/// The confirmation lines of [`Op::Abort`].
fn describe_abort(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot) {
    use Tone::*;
    let Op::Abort {
        workflow_id,
        reason,
    } = op
    else {
        return;
    };
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
                "Its dead letter(s) will stay in conductor/dead/ as a record: {}",
                dead.join(", ")
            ),
        ));
    }
    out.push(line(Dim, format!("Reason: {reason}")));
}

/// The confirmation lines of [`Op::Requeue`].
fn describe_requeue(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot, now: DateTime<Utc>) {
    use Tone::*;
    let Op::Requeue {
        handoff_id,
        from_god,
        to,
    } = op
    else {
        return;
    };
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

/// The confirmation lines of [`Op::Rerun`].
fn describe_rerun(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot) {
    use Tone::*;
    let Op::Rerun {
        workflow_id,
        step,
        as_of,
    } = op
    else {
        return;
    };
    if let Some(at) = as_of {
        return describe_fork(out, workflow_id, step, at, snap);
    }
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

/// The confirmation lines of a fork ([`Op::Rerun`] with `as_of`), confirmed from the replay: the
/// snapshot is the past, the act is on the live root.
fn describe_fork(
    out: &mut Vec<(Tone, String)>,
    workflow_id: &crate::engine::WorkflowId,
    step: &crate::engine::StepId,
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

/// The confirmation lines of [`Op::ForceUnlock`].
fn describe_force_unlock(
    out: &mut Vec<(Tone, String)>,
    op: &Op,
    snap: &Snapshot,
    now: DateTime<Utc>,
) {
    use Tone::*;
    let Op::ForceUnlock { track, path } = op else {
        return;
    };
    let lock = snap.track(track.as_str()).and_then(|t| {
        t.locks
            .iter()
            .find(|l| l.path == path.as_str() || LockKey::parse(&l.path).is_ok_and(|k| k == *path))
    });
    match lock {
        Some(l) => {
            out.push(line(
                Danger,
                format!(
                    "Lock on {path} held by {} will be removed from {track}'s locks.json.",
                    l.worker_id.as_deref().unwrap_or("nobody")
                ),
            ));
            let exp = match l.expires() {
                Some(t) if t <= now => format!("expired {}", relative(t, now)),
                Some(t) => format!("would expire {}", relative(t, now)),
                None => "has no expiry".to_owned(),
            };
            out.push(line(Normal, format!("The lease {exp}.")));
        }
        None => out.push(line(
            Warn,
            format!("{path} is no longer locked on {track} (released since you selected it)."),
        )),
    }
    out.push(line(
        Normal,
        format!(
            "FILE_UNLOCK will be posted with forced_by: {OPERATOR}; waiters on it will wake up."
        ),
    ));
}

/// The confirmation lines of [`Op::BoardAdvance`].
fn describe_board(out: &mut Vec<(Tone, String)>, op: &Op, snap: &Snapshot) {
    use Tone::*;
    let (Op::BoardAdvance { track, .. }
    | Op::BoardNextRound { track, .. }
    | Op::BoardResolve { track, .. }) = op
    else {
        return;
    };
    let board = items::track(snap, Some(track.as_str())).and_then(|t| t.board.clone());
    let Some(b) = board else {
        out.push(line(Warn, format!("{track} has no board session.")));
        return;
    };
    let s = &b.session;
    let p = &s.phases;
    out.push(line(
        Normal,
        format!(
            "Session {} ({}) is {}.",
            s.session_id, s.checkpoint, s.status
        ),
    ));
    out.push(line(
        Dim,
        format!(
            "assess {}/{} · rounds closed {}/{} · votes {}/{}",
            p.assess.complete,
            p.assess.of,
            p.discuss.rounds,
            p.discuss.max_rounds,
            p.vote.complete,
            p.vote.of
        ),
    ));
    let m = items::board_moves(&b);
    let to = m.next.unwrap_or("?");
    match op {
        Op::BoardAdvance { force: false, .. } => out.push(line(
            Normal,
            format!("{} -> {to}: the {} phase is complete.", m.status, m.status),
        )),
        Op::BoardAdvance { force: true, .. } => {
            out.push(line(
                Danger,
                format!("{} -> {to} although the phase is not complete.", m.status),
            ));
            out.push(line(Warn, format!("Still missing: {}.", m.missing)));
            out.push(line(
                Normal,
                "The move is recorded as forced by operator (as `board advance --force`).",
            ));
        }
        Op::BoardNextRound { .. } => out.push(line(
            Normal,
            match m.round {
                Some((cur, max)) if cur >= max => format!(
                    "Discussion round {cur} of {max}, the last, will be closed: the discussion phase is then complete (advance with >)."
                ),
                Some((cur, max)) => format!(
                    "Discussion round {cur} of {max} will be closed; round {} begins.",
                    cur + 1
                ),
                None => "No discussion round is open: the engine will refuse.".to_owned(),
            },
        )),
        Op::BoardResolve { force, .. } => {
            out.push(line(
                Danger,
                format!(
                    "Predicted verdict now: {}",
                    b.predicted.as_deref().unwrap_or("unknown")
                ),
            ));
            for c in items::directors(&b) {
                let v = c
                    .vote
                    .map(|v| {
                        format!(
                            "{} ({})",
                            v.final_verdict,
                            v.confidence
                                .as_ref()
                                .and_then(|n| n.as_f64())
                                .map(|f| format!("{f:.2}"))
                                .unwrap_or_else(|| "-".into())
                        )
                    })
                    .unwrap_or_else(|| "abstains".into());
                out.push(line(Dim, format!("  {:<4} {v}", c.director)));
            }
            if *force {
                out.push(line(
                    Warn,
                    "Not every director voted: resolving records them as abstained (forced).",
                ));
            }
            out.push(line(
                Normal,
                "BOARD_RESOLVE is posted and resolution.md written; the session becomes COMPLETE.",
            ));
        }
        _ => {}
    }
}

/// The dialog lines for a cleanup dry run returned by the engine.
/// True when a cleanup dry run found nothing to delete (no Delete button is offered then).
pub fn cleanup_finds_nothing(r: &CleanupResult) -> bool {
    r.paths().is_empty()
}

pub fn cleanup_lines(r: &CleanupResult) -> Vec<(Tone, String)> {
    use Tone::*;
    let mut out = Vec::new();
    if r.paths().is_empty() {
        out.push(line(Dim, "Nothing to delete."));
    } else {
        out.push(line(Normal, "Will be deleted (the dry run found them):"));
        out.extend(r.paths().iter().map(|p| line(Danger, format!("  {p}"))));
    }
    if !r.missing.is_empty() {
        out.push(line(Dim, format!("Already gone: {}", r.missing.join(", "))));
    }
    if !r.refused.is_empty() {
        out.push(line(Warn, "Refused (outside the allowed roots):"));
        out.extend(
            r.refused
                .iter()
                .map(|p| line(Warn, format!("  {} ({})", p.path, p.reason))),
        );
    }
    out.push(line(Dim, "The .aborted markers will stay."));
    out
}

/// Formats an instant relative to now, or absolute in local time: `HH:MM:SS` on the same local
/// day as now, with the date before it otherwise.
pub fn when(ts: Option<&str>, now: DateTime<Utc>, absolute: bool) -> String {
    match ts.and_then(parse_ts) {
        Some(t) => when_time(t, now, absolute),
        None => ts.map(|s| format!("{s}?")).unwrap_or_else(|| "-".into()),
    }
}

/// [`when`] of a time a compact row keeps (parsed once when its file was read).
pub fn when_at(ts: Option<&Stamp>, now: DateTime<Utc>, absolute: bool) -> String {
    match ts {
        Some(Stamp::At(t)) => when_time(*t, now, absolute),
        Some(Stamp::Unparsed(s)) => format!("{s}?"),
        None => "-".into(),
    }
}

/// A parsed time as [`when`] shows it.
fn when_time(t: DateTime<Utc>, now: DateTime<Utc>, absolute: bool) -> String {
    if !absolute {
        return relative(t, now);
    }
    let (t, today) = (
        t.with_timezone(&chrono::Local),
        now.with_timezone(&chrono::Local),
    );
    if t.date_naive() == today.date_naive() {
        t.format("%H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    }
}
