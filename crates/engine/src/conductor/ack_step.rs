//! The pure steps of an ack (docs/PROTOCOL.md §2.5), as `submit::next_state` is for a handoff and
//! `delivery::decide` for a redelivery: from the state, the dispatch as found, the typed ack, who acks,
//! what the definition says and `now`, [`ack_start`] and [`ack_step`] decide everything an ack does:
//! the refusal, the answer, or the ordered file effects ([`AckEffect`]) that
//! `Conductor::ack_unjournaled` then applies under the workflow's lock. Nothing here reads or writes a
//! file, so every transition and refusal is unit-tested without a root.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::delivery::deadline_after_ack;
use super::files::{Found, Place};
use super::model::{AckRecord, AckStatus, Dispatch, WorkflowState, WorkflowStatus};
use super::request::{AckDecision, AckRequest};
use super::timers::{STEP_DEADLINE, STEP_TIMEOUT, StepTimer};
use super::{AckResult, Actor, Conductor};
use crate::error::{Error, Result};
use crate::store::time::{add, format_ts, parse_duration, parse_ts};
use crate::store::{GodName, HandoffId, Root, WorkflowId};

/// What an ack is, judged from the state alone (before any dispatch is looked up).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AckStart {
    /// The same ack (id, handoff and status) is recorded already: finish its file effects (`finish`:
    /// unless the workflow was aborted since) and answer from the record.
    Repeat {
        /// The recorded ack.
        record: Box<AckRecord>,
        /// Whether its effects are to be finished.
        finish: bool,
    },
    /// A new ack: look the dispatch up.
    Fresh,
}

/// The first pure step of an ack: a repeat of a recorded ack, or a new one. Refuses an `ack_id` used
/// before for another handoff or status, and any new ack of an aborted, completed or failed workflow.
pub(crate) fn ack_start(wf: &WorkflowId, st: &WorkflowState, a: &AckRequest) -> Result<AckStart> {
    if let Some(prev) = st.acks.iter().find(|r| r.ack_id == a.ack_id.as_str()) {
        if prev.handoff_id == a.handoff_id.as_str() && prev.status == a.decision.status() {
            return Ok(AckStart::Repeat {
                record: Box::new(prev.clone()),
                finish: st.status != WorkflowStatus::Aborted,
            });
        }
        return Err(Error::refused(format!(
            "ack_id {} was already used for handoff {} with status {}; a new ack needs a new ack_id",
            a.ack_id, prev.handoff_id, prev.status
        )));
    }
    match finished_refusal(wf, st) {
        Some(e) => Err(e),
        None => Ok(AckStart::Fresh),
    }
}

fn finished_refusal(wf: &WorkflowId, st: &WorkflowState) -> Option<Error> {
    match st.status {
        WorkflowStatus::Aborted => Some(Error::refused(format!(
            "workflow {wf} was aborted{}{}; acks are refused",
            st.aborted_at
                .as_deref()
                .map(|t| format!(" at {t}"))
                .unwrap_or_default(),
            st.failure_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ))),
        WorkflowStatus::Completed | WorkflowStatus::Failed => Some(Error::refused(format!(
            "workflow {wf} is {}; it takes no more acks",
            st.status
        ))),
        _ => None,
    }
}

/// Where the acked dispatch was found: in an inbox or `_quarantine` (first), else in an archive.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Located {
    /// In an inbox or in `_quarantine`.
    Live(Found),
    /// Only in an archive.
    Archived(Found),
    /// Nowhere.
    Nowhere,
}

/// What the definition and the clock say, read by the caller for [`ack_step`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AckFacts {
    /// `rejected`: the step's `fallback_gods`, in order (empty: none known).
    pub fallback_gods: Vec<String>,
    /// Why no fallback gods are known (the definition is missing or does not load).
    pub warnings: Vec<String>,
    /// `accepted` (and a progress ack without a recorded timeout): the step's `timeout` and its text.
    pub step_timeout: Option<(Duration, String)>,
    /// Now.
    pub now: DateTime<Utc>,
    /// A fresh dispatch id, for the dispatch a rejection reroutes.
    pub dispatch_id: String,
}

/// One file effect of an ack, applied in order by `Conductor::apply_ack`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AckEffect {
    /// Write the step timer `conductor/timers/{hid}.json` (before the ack commits).
    Timer(HandoffId, StepTimer),
    /// Write the workflow state: the ack commits.
    State(Box<WorkflowState>),
    /// The named crash point of the proof tests.
    CrashPoint(&'static str),
    /// Rewrite the dispatch where it lies.
    Dispatch(PathBuf, Box<Dispatch>),
    /// Move the (rewritten) dispatch to another path (an earlier target took it back).
    Move(PathBuf, PathBuf),
    /// Write the dispatch at `from`, then move it into `god`'s archive.
    Archive {
        /// Where it lies.
        from: PathBuf,
        /// Whose archive.
        god: GodName,
        /// Its handoff.
        hid: HandoffId,
        /// As archived.
        dispatch: Box<Dispatch>,
    },
    /// Write the dispatch a rejection reroutes to `god`'s inbox, unless that god already has one for
    /// the handoff (a repeat after a crash).
    Reroute(GodName, Box<Dispatch>),
}

/// What an ack does, decided by [`ack_step`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AckPlan {
    /// Nothing to write: the answer (a repeat of a settled ack).
    Answer(Box<AckResult>),
    /// A `completed` ack: recorded through the submit path with the handoff it records.
    Complete {
        /// The state (the acking god as the addressee).
        state: Box<WorkflowState>,
        /// The ack record.
        record: Box<AckRecord>,
        /// The dispatch as found.
        found: Box<Found>,
        /// The dispatch as the ack leaves it.
        dispatch: Box<Dispatch>,
        /// The god the ack counts for.
        god: GodName,
    },
    /// Refuse unless every path in `confine` stays in the root, apply `effects` in order, answer.
    Write {
        /// The paths written, checked before anything is.
        confine: Vec<PathBuf>,
        /// The file effects, in order.
        effects: Vec<AckEffect>,
        /// The answer.
        result: Box<AckResult>,
    },
}

/// The answer to an ack from its record and the state it leaves.
pub(crate) fn ack_result(
    wf: &WorkflowId,
    st: &WorkflowState,
    rec: &AckRecord,
    duplicate: bool,
    next: Option<super::SubmitResult>,
) -> AckResult {
    let god = rec.god.clone().unwrap_or_default();
    AckResult {
        acknowledged: true,
        handoff_id: rec.handoff_id.clone(),
        ack_id: rec.ack_id.clone(),
        workflow_id: wf.to_string(),
        status: rec.status.to_string(),
        state_status: st.status.clone(),
        by: rec.by.clone().unwrap_or_else(|| god.clone()),
        god,
        duplicate,
        rerouted_to: rec.rerouted_to.clone(),
        next,
        deadline: None,
        deadline_kind: None,
        warnings: Vec::new(),
    }
}

/// The ack record of `a`, counted for `god`, at `now`.
pub(crate) fn record(a: &AckRequest, god: &str, by: &Actor, now: &str) -> AckRecord {
    AckRecord {
        ack_id: a.ack_id.to_string(),
        handoff_id: a.handoff_id.to_string(),
        god: Some(god.to_owned()),
        status: a.decision.status(),
        eta: a.eta.clone(),
        message: a.message.clone(),
        acked_at: Some(now.to_owned()),
        by: Some(by.label(god)),
        recorded_handoff_id: None,
        rerouted_to: None,
        extra: Default::default(),
    }
}

pub(crate) fn unknown_handoff(hid: &HandoffId) -> Error {
    Error::not_found(format!(
        "unknown handoff {hid}: no dispatch for it in any inbox, the quarantine or the archive \
         (pantheon pending lists the open ones)"
    ))
}

/// The god an ack counts for: the dispatch's addressee, or, for an open dispatch redelivered to other
/// gods, whichever of them acks (it becomes the addressee, docs/PROTOCOL.md §2.10). An operator acts for
/// the addressee. Refuses a god the dispatch was never delivered to.
pub(crate) fn ack_addressee(found: &Found, by: &Actor, hid: &HandoffId) -> Result<GodName> {
    let god = GodName::parse(&found.dispatch.to_god)?;
    match by {
        Actor::God(g) if g != god.as_str() && Conductor::may_ack(found, g) => GodName::parse(g),
        Actor::God(g) if g != god.as_str() => Err(Error::refused(format!(
            "handoff {hid} is addressed to {god}; {g} cannot acknowledge it"
        ))),
        _ => Ok(god),
    }
}

/// The dispatch as an ack leaves it: the acking god as addressee, the ack's status, ETA and message
/// (an absent ETA or message keeps the earlier one), who acked and when, and the next ack deadline
/// from `now`.
pub(crate) fn dispatch_after_ack(
    before: &Dispatch,
    a: &AckRequest,
    rec: &AckRecord,
    god: &GodName,
    now: DateTime<Utc>,
) -> Dispatch {
    let mut d = before.clone();
    let status = a.decision.status();
    d.ack_deadline = deadline_after_ack(&d, &status, a.eta.as_deref(), now);
    d.to_god = god.to_string();
    d.ack_status = status;
    d.eta = a.eta.clone().or(d.eta);
    d.message = a.message.clone().or(d.message);
    d.acked_at = rec.acked_at.clone();
    d.by = rec.by.clone();
    d
}

/// The dispatch still in an inbox as a recorded ack leaves it (the repair of a repeated ack).
pub(crate) fn settled_by(before: &Dispatch, rec: &AckRecord) -> Dispatch {
    let mut d = before.clone();
    d.ack_status = rec.status.clone();
    d.eta = rec.eta.clone().or(d.eta);
    d.message = rec.message.clone().or(d.message);
    d.acked_at = rec.acked_at.clone();
    d.by = rec.by.clone();
    d
}

/// The dispatch a rejection by `from` sends on to the fallback god `to`: a new dispatch id, unacked,
/// dispatched `now`, with who it came from and nothing of the earlier ack.
pub(crate) fn rerouted(
    archived: &Dispatch,
    from: &GodName,
    to: &GodName,
    now: &str,
    id: String,
) -> Dispatch {
    let mut d = archived.clone();
    d.dispatch_id = Some(id);
    d.to_god = to.to_string();
    d.ack_status = AckStatus::Unacked;
    d.dispatched_at = Some(now.to_owned());
    d.extra.insert("rerouted_from".into(), json!(from.as_str()));
    for f in [
        &mut d.eta,
        &mut d.message,
        &mut d.acked_at,
        &mut d.by,
        &mut d.archive_reason,
        &mut d.archived_at,
    ] {
        *f = None;
    }
    d
}

/// For an `accepted` dispatch whose step has a `timeout`: stamps `step_deadline` and `step_timeout`
/// into it and returns the deadline with the timer that names it (`None`: no timeout, or a deadline
/// past the calendar).
pub(crate) fn step_timer(
    d: &mut Dispatch,
    god: &GodName,
    timeout: Option<&(Duration, String)>,
    now: DateTime<Utc>,
) -> Option<(String, StepTimer)> {
    let (timeout, text) = timeout?;
    let deadline = add(now, *timeout).map(format_ts)?;
    d.extra.insert(STEP_DEADLINE.into(), json!(deadline));
    d.extra.insert(STEP_TIMEOUT.into(), json!(text));
    let timer = timer_of(d, god, &deadline);
    Some((deadline, timer))
}

fn timer_of(d: &Dispatch, god: &GodName, deadline: &str) -> StepTimer {
    StepTimer {
        handoff_id: d.handoff_id.clone(),
        workflow_id: d.workflow_id.clone(),
        god: god.to_string(),
        step: d.step.clone(),
        deadline: deadline.to_owned(),
        delivery: d.deliveries.len(),
    }
}

/// A `pending` ack after `accepted` (a progress ack, JetStream's `+WPI`): moves the archived
/// dispatch's `step_deadline` to the ETA (when it is later than `now`), else restarts the step's
/// timeout (as recorded in the dispatch, else `timeout` from the definition). Returns the new deadline,
/// the dispatch and its timer. Refused when the dispatch has no step deadline: `pending` after
/// `accepted` means nothing then.
pub(crate) fn step_progress(
    before: &Dispatch,
    rec: &AckRecord,
    timeout: Option<&(Duration, String)>,
    now: DateTime<Utc>,
) -> Result<(String, Dispatch, StepTimer)> {
    let mut d = before.clone();
    let refused = || {
        Error::refused(format!(
            "handoff {} was already accepted by {} and its step has no timeout; it can now only be completed or rejected",
            d.handoff_id, d.to_god
        ))
    };
    if !d.extra.contains_key(STEP_DEADLINE) {
        return Err(refused());
    }
    let deadline = match rec.eta.as_deref().and_then(parse_ts).filter(|t| *t > now) {
        Some(t) => format_ts(t),
        None => {
            let timeout = d
                .extra
                .get(STEP_TIMEOUT)
                .and_then(|v| v.as_str())
                .and_then(parse_duration)
                .or_else(|| timeout.map(|t| t.0))
                .ok_or_else(refused)?;
            add(now, timeout).map(format_ts).ok_or_else(refused)?
        }
    };
    let god = GodName::parse(&d.to_god)?;
    d.extra.insert(STEP_DEADLINE.into(), json!(deadline));
    d.eta = rec.eta.clone().or(d.eta);
    d.message = rec.message.clone().or(d.message);
    let timer = timer_of(&d, &god, &deadline);
    Ok((deadline, d, timer))
}

/// The first of the step's fallback gods that has not yet had (and rejected) this handoff.
pub(crate) fn next_fallback(
    st: &WorkflowState,
    d: &Dispatch,
    hid: &HandoffId,
    fallback_gods: &[String],
) -> Option<String> {
    let mut tried: Vec<&str> = vec![d.to_god.as_str()];
    tried.extend(
        st.acks
            .iter()
            .filter(|r| r.handoff_id == hid.as_str() && r.status == AckStatus::Rejected)
            .filter_map(|r| r.god.as_deref()),
    );
    fallback_gods
        .iter()
        .find(|g| !tried.contains(&g.as_str()))
        .cloned()
}

/// What a `rejected` ack commits (see [`rejected`]).
pub(crate) struct RejectStep {
    pub state: WorkflowState,
    pub dispatch: Dispatch,
    pub record: AckRecord,
    pub warnings: Vec<String>,
}

/// The pure step of a `rejected` ack: the ack is recorded with the fallback god it reroutes to; the
/// workflow waits for that god, or fails (with the god's message as the reason) when no fallback is
/// left. An ack of a dispatch that is not the workflow's current one changes no status (a warning says
/// so). The dispatch is marked for the archive with why.
#[allow(clippy::too_many_arguments)] // each is one input of the one commit; a struct would only rename them
pub(crate) fn rejected(
    mut st: WorkflowState,
    mut d: Dispatch,
    mut rec: AckRecord,
    fallback: Option<String>,
    is_current: bool,
    god: &GodName,
    message: Option<&str>,
    now: &str,
) -> RejectStep {
    let mut warnings = Vec::new();
    rec.rerouted_to = fallback.clone();
    st.acks.push(rec.clone());
    match &fallback {
        _ if !is_current => warnings.push(format!(
            "handoff {} is not the workflow's current dispatch; the workflow status is unchanged",
            rec.handoff_id
        )),
        Some(fb) => {
            st.dispatched_to = Some(fb.clone());
            st.status = WorkflowStatus::WaitingForAck;
        }
        None => {
            st.status = WorkflowStatus::Failed;
            st.failure_reason = Some(message.map(str::to_owned).unwrap_or_else(|| {
                format!(
                    "{god} rejected step {:?} and no fallback god is left",
                    d.step
                )
            }));
        }
    }
    d.archive_reason = Some(match &fallback {
        Some(fb) => format!("rejected; rerouted to {fb}"),
        None => "rejected; no fallback god left".into(),
    });
    d.archived_at = Some(now.to_owned());
    st.updated = Some(now.to_owned());
    RejectStep {
        state: st,
        dispatch: d,
        record: rec,
        warnings,
    }
}

/// Everything [`ack_step`] decides from.
pub(crate) struct AckInput<'a> {
    /// The root the paths are in (only joined, never read).
    pub root: &'a Root,
    /// The workflow.
    pub wf: &'a WorkflowId,
    /// Its state, read under its lock ([`ack_start`] said `Fresh`).
    pub state: WorkflowState,
    /// The ack.
    pub ack: &'a AckRequest,
    /// Who acks.
    pub by: &'a Actor,
    /// Where the dispatch was found.
    pub located: Located,
    /// What the definition and the clock say.
    pub facts: AckFacts,
}

/// The pure step of a new ack (after [`ack_start`] said `Fresh`). Refuses a held dispatch (approve it
/// first), an unknown handoff, an archived dispatch whose status the ack would change, a dispatch of
/// another workflow, a god the dispatch was never delivered to, a progress ack on an accepted step with
/// no timeout, and a rejection's fallback god with an invalid name. Otherwise:
/// - `pending`: the dispatch carries the ack and its next deadline (moved to the acking god's inbox when
///   an earlier target took it back); on an accepted step, the step deadline moves instead;
/// - `accepted`: the step timer is written, the workflow is in progress, the dispatch archived; a repeat
///   on the accepted dispatch answers as a duplicate;
/// - `rejected`: the dispatch is archived and rerouted to the next fallback god, or the workflow fails;
/// - `completed`: [`AckPlan::Complete`], recorded through the submit path.
pub(crate) fn ack_step(input: AckInput<'_>) -> Result<AckPlan> {
    let AckInput {
        root,
        wf,
        mut state,
        ack: a,
        by,
        located,
        facts,
    } = input;
    let hid = &a.handoff_id;
    let now_text = format_ts(facts.now);
    let (found, was_accepted) = match located {
        Located::Live(f) if f.place == Place::Quarantine => {
            return Err(Error::refused(format!(
                "handoff {hid} is held for operator approval ({}); approve it first (pantheon approve {hid})",
                f.dispatch
                    .held_because
                    .as_deref()
                    .unwrap_or("approval required"),
            )));
        }
        Located::Live(f) => (f, false),
        Located::Nowhere => return Err(unknown_handoff(hid)),
        Located::Archived(f) => {
            let current = Some(f.dispatch.to_god.as_str()) == state.dispatched_to.as_deref();
            if f.dispatch.ack_status == AckStatus::Accepted && current {
                (f, true)
            } else if f.dispatch.ack_status == a.decision.status() {
                let rec = record(a, &f.dispatch.to_god, by, &now_text);
                return Ok(AckPlan::Answer(Box::new(ack_result(
                    wf, &state, &rec, true, None,
                ))));
            } else {
                return Err(Error::refused(format!(
                    "handoff {hid} to {} is already {} ({}); an ack cannot change that",
                    f.dispatch.to_god,
                    f.dispatch.ack_status,
                    f.dispatch.archive_reason.as_deref().unwrap_or("archived")
                )));
            }
        }
    };
    if found.dispatch.workflow_id != wf.as_str() {
        return Err(Error::refused(format!(
            "handoff {hid} belongs to workflow {:?}, not {wf}",
            found.dispatch.workflow_id
        )));
    }
    let addressee_before = GodName::parse(&found.dispatch.to_god)?;
    let god = ack_addressee(&found, by, hid)?;
    // A workflow may have several open dispatches (parallel direct handoffs); only an ack of the
    // one the state points at moves the workflow's status.
    let is_current = state.current_step.as_deref() == Some(found.dispatch.step.as_str())
        && state.dispatched_to.as_deref() == Some(addressee_before.as_str());
    if is_current && god != addressee_before {
        state.dispatched_to = Some(god.to_string());
    }
    let rec = record(a, god.as_str(), by, &now_text);
    if was_accepted {
        match a.decision {
            AckDecision::Accepted => {
                return Ok(AckPlan::Answer(Box::new(ack_result(
                    wf, &state, &rec, true, None,
                ))));
            }
            AckDecision::Pending => {
                // A progress ack on an accepted step with a timeout (docs/PROTOCOL.md §2.10).
                let (deadline, d, timer) = step_progress(
                    &found.dispatch,
                    &rec,
                    facts.step_timeout.as_ref(),
                    facts.now,
                )?;
                state.acks.push(rec.clone());
                state.updated = Some(now_text);
                let mut result = ack_result(wf, &state, &rec, false, None);
                result.deadline = Some(deadline);
                result.deadline_kind = Some("step_timeout".to_owned());
                return Ok(AckPlan::Write {
                    confine: Vec::new(),
                    effects: vec![
                        AckEffect::Timer(hid.clone(), timer),
                        AckEffect::State(Box::new(state)),
                        AckEffect::Dispatch(found.path, Box::new(d)),
                    ],
                    result: Box::new(result),
                });
            }
            _ => {}
        }
    }

    let mut d = dispatch_after_ack(&found.dispatch, a, &rec, &god, facts.now);
    let archived_at = root.archive_dir(&god).join(format!("{hid}.json"));
    let mut confine = vec![root.state_path(wf), found.path.clone(), archived_at];
    let (effects, st, rec, warnings, deadline, kind) = match a.decision {
        AckDecision::Completed => {
            // (completed goes through the submit path, which checks its own files.)
            return Ok(AckPlan::Complete {
                state: Box::new(state),
                record: Box::new(rec),
                found: Box::new(found),
                dispatch: Box::new(d),
                god,
            });
        }
        AckDecision::Pending => {
            state.acks.push(rec.clone());
            state.updated = Some(now_text);
            let deadline = d.ack_deadline.clone();
            let kind = deadline.as_ref().map(|_| "ack");
            let mut effects = vec![
                AckEffect::State(Box::new(state.clone())),
                AckEffect::Dispatch(found.path.clone(), Box::new(d)),
            ];
            if god != addressee_before {
                // An earlier target took it back: the dispatch follows it to its inbox.
                let to = root.inbox_dir(&god).join(format!("{hid}.json"));
                effects.push(AckEffect::Move(found.path, to));
            }
            (effects, state, rec, Vec::new(), deadline, kind)
        }
        AckDecision::Accepted => {
            if is_current {
                state.status = WorkflowStatus::InProgress;
            }
            let mut effects = Vec::new();
            let deadline = match step_timer(&mut d, &god, facts.step_timeout.as_ref(), facts.now) {
                Some((deadline, timer)) => {
                    effects.push(AckEffect::Timer(hid.clone(), timer));
                    Some(deadline)
                }
                None => None,
            };
            let kind = deadline.as_ref().map(|_| "step_timeout");
            state.acks.push(rec.clone());
            state.updated = Some(now_text);
            effects.extend([
                AckEffect::State(Box::new(state.clone())),
                AckEffect::CrashPoint("ack:after-state"),
                AckEffect::Archive {
                    from: found.path,
                    god: god.clone(),
                    hid: hid.clone(),
                    dispatch: Box::new(d),
                },
            ]);
            (effects, state, rec, Vec::new(), deadline, kind)
        }
        AckDecision::Rejected => {
            let mut warnings = facts.warnings;
            let fallback = next_fallback(&state, &found.dispatch, hid, &facts.fallback_gods);
            let fb = fallback.as_deref().map(GodName::parse).transpose()?;
            if let Some(fb) = &fb {
                confine.push(root.inbox_dir(fb).join(format!("{hid}.json")));
            }
            let step = rejected(
                state,
                d,
                rec,
                fallback,
                is_current,
                &god,
                a.message.as_deref(),
                &now_text,
            );
            warnings.extend(step.warnings);
            let mut effects = vec![
                AckEffect::State(Box::new(step.state.clone())),
                AckEffect::CrashPoint("ack:after-state"),
                AckEffect::Archive {
                    from: found.path,
                    god: god.clone(),
                    hid: hid.clone(),
                    dispatch: Box::new(step.dispatch.clone()),
                },
            ];
            if let Some(fb) = fb
                && !step.state.status.is_finished()
            {
                let d = rerouted(&step.dispatch, &god, &fb, &now_text, facts.dispatch_id);
                effects.push(AckEffect::Reroute(fb, Box::new(d)));
            }
            (effects, step.state, step.record, warnings, None, None)
        }
    };
    let mut result = ack_result(wf, &st, &rec, false, None);
    result.warnings = warnings;
    result.deadline = deadline;
    result.deadline_kind = kind.map(str::to_owned);
    Ok(AckPlan::Write {
        confine,
        effects,
        result: Box::new(result),
    })
}

#[cfg(test)]
mod tests {
    use super::super::ack::tests::{at, held_dispatch, held_state, ids};
    use super::*;

    fn found(place: Place, delivered_to: &[&str]) -> Found {
        let mut d = held_dispatch();
        d.deliveries = delivered_to
            .iter()
            .map(|g| super::super::delivery::Delivery {
                at: format_ts(at()),
                to: (*g).to_owned(),
            })
            .collect();
        Found {
            place,
            path: "pending/hermes/hof_20261201_aaaaaa.json".into(),
            dispatch: d,
        }
    }

    #[test]
    fn an_ack_counts_for_the_addressee_or_a_god_the_open_dispatch_was_redelivered_to() {
        let (_, hid) = ids();
        let inbox = Place::Inbox(GodName::parse("hermes").unwrap());
        let f = found(inbox.clone(), &["hermes", "apollo"]);
        let god = |by: Actor| ack_addressee(&f, &by, &hid).map(|g| g.to_string());
        assert_eq!(god(Actor::Recipient).unwrap(), "hermes");
        assert_eq!(god(Actor::Operator).unwrap(), "hermes");
        assert_eq!(god(Actor::God("hermes".into())).unwrap(), "hermes");
        assert_eq!(god(Actor::God("apollo".into())).unwrap(), "apollo");
        let e = god(Actor::God("zeus".into())).unwrap_err().to_string();
        assert!(
            e.contains("addressed to hermes; zeus cannot acknowledge it"),
            "{e}"
        );
        // Once archived, only the addressee may ack it.
        let archived = found(
            Place::Archive(GodName::parse("hermes").unwrap()),
            &["hermes", "apollo"],
        );
        assert!(ack_addressee(&archived, &Actor::God("apollo".into()), &hid).is_err());
    }

    fn ack(decision: AckDecision, eta: Option<&str>, message: Option<&str>) -> AckRequest {
        let (_, hid) = ids();
        AckRequest {
            ack_id: crate::store::AckId::parse("ack_20261201_abc").unwrap(),
            handoff_id: hid,
            workflow_id: None,
            decision,
            eta: eta.map(str::to_owned),
            message: message.map(str::to_owned),
            context: Default::default(),
        }
    }

    fn rec(status: AckStatus) -> AckRecord {
        AckRecord {
            ack_id: "ack_20261201_abc".into(),
            handoff_id: "hof_20261201_aaaaaa".into(),
            god: Some("apollo".into()),
            status,
            acked_at: Some("2026-12-01T12:00:01Z".into()),
            by: Some("apollo".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_dispatch_after_an_ack_carries_the_status_the_new_addressee_and_the_next_deadline() {
        let mut before = held_dispatch();
        before.eta = Some("earlier".into());
        before.message = Some("kept".into());
        let apollo = GodName::parse("apollo").unwrap();
        let a = ack(AckDecision::Pending, None, None);
        let d = dispatch_after_ack(&before, &a, &rec(AckStatus::Pending), &apollo, at());
        assert_eq!(d.to_god, "apollo");
        assert_eq!(d.ack_status, AckStatus::Pending);
        assert_eq!(
            (d.eta.as_deref(), d.message.as_deref()),
            (Some("earlier"), Some("kept"))
        );
        assert_eq!(d.by.as_deref(), Some("apollo"));
        assert_eq!(d.acked_at.as_deref(), Some("2026-12-01T12:00:01Z"));
        assert_eq!(
            d.ack_deadline,
            Some(format_ts(at() + chrono::Duration::minutes(10))),
            "a progress ack restarts the wait"
        );
        let a = ack(
            AckDecision::Accepted,
            Some("2026-12-02T00:00:00Z"),
            Some("on it"),
        );
        let d = dispatch_after_ack(&before, &a, &rec(AckStatus::Accepted), &apollo, at());
        assert_eq!(
            d.ack_deadline, None,
            "an accepted dispatch has no ack deadline"
        );
        assert_eq!(
            (d.eta.as_deref(), d.message.as_deref()),
            (Some("2026-12-02T00:00:00Z"), Some("on it"))
        );
    }

    #[test]
    fn a_rejection_reroutes_to_the_fallback_or_fails_the_workflow_and_leaves_others_alone() {
        let hermes = GodName::parse("hermes").unwrap();
        let now = "2026-12-01T12:00:02Z";
        let step = |fallback: Option<&str>, current: bool, message: Option<&str>| {
            rejected(
                held_state(),
                held_dispatch(),
                rec(AckStatus::Rejected),
                fallback.map(str::to_owned),
                current,
                &hermes,
                message,
                now,
            )
        };
        let r = step(Some("apollo"), true, None);
        assert_eq!(r.state.status, WorkflowStatus::WaitingForAck);
        assert_eq!(r.state.dispatched_to.as_deref(), Some("apollo"));
        assert_eq!(r.record.rerouted_to.as_deref(), Some("apollo"));
        assert_eq!(r.state.acks, std::slice::from_ref(&r.record));
        assert_eq!(
            r.dispatch.archive_reason.as_deref(),
            Some("rejected; rerouted to apollo")
        );
        assert_eq!(r.dispatch.archived_at.as_deref(), Some(now));
        assert_eq!(r.state.updated.as_deref(), Some(now));
        assert!(r.warnings.is_empty());

        let r = step(None, true, None);
        assert_eq!(r.state.status, WorkflowStatus::Failed);
        assert_eq!(
            r.state.failure_reason.as_deref(),
            Some("hermes rejected step \"build\" and no fallback god is left")
        );
        assert_eq!(
            r.dispatch.archive_reason.as_deref(),
            Some("rejected; no fallback god left")
        );
        let r = step(None, true, Some("cannot do it"));
        assert_eq!(r.state.failure_reason.as_deref(), Some("cannot do it"));

        let r = step(Some("apollo"), false, None);
        assert_eq!(
            r.state.status,
            WorkflowStatus::AwaitingApproval,
            "unchanged"
        );
        assert_eq!(r.state.dispatched_to.as_deref(), Some("hermes"));
        assert!(r.warnings[0].contains("not the workflow's current dispatch"));
    }

    fn waiting() -> WorkflowState {
        WorkflowState {
            status: WorkflowStatus::WaitingForAck,
            ..held_state()
        }
    }

    fn facts() -> AckFacts {
        AckFacts {
            fallback_gods: Vec::new(),
            warnings: Vec::new(),
            step_timeout: None,
            now: at(),
            dispatch_id: "dsp_test".into(),
        }
    }

    fn inbox() -> Found {
        found(Place::Inbox(GodName::parse("hermes").unwrap()), &["hermes"])
    }

    fn archived(status: AckStatus, step_deadline: bool) -> Found {
        let mut f = found(
            Place::Archive(GodName::parse("hermes").unwrap()),
            &["hermes"],
        );
        f.path = "pending/hermes/archive/hof_20261201_aaaaaa.json".into();
        f.dispatch.ack_status = status;
        f.dispatch.archive_reason = Some("accepted".into());
        if step_deadline {
            f.dispatch
                .extra
                .insert(STEP_DEADLINE.into(), json!("2026-12-01T12:05:00Z"));
            f.dispatch.extra.insert(STEP_TIMEOUT.into(), json!("30m"));
        }
        f
    }

    /// The step of `a` by `by` on `st` with the dispatch `located`.
    fn step(
        st: WorkflowState,
        a: &AckRequest,
        by: Actor,
        located: Located,
        facts: AckFacts,
    ) -> Result<AckPlan> {
        let root = Root::at("/r");
        let (wf, _) = ids();
        ack_step(AckInput {
            root: &root,
            wf: &wf,
            state: st,
            ack: a,
            by: &by,
            located,
            facts,
        })
    }

    fn written(plan: AckPlan) -> (Vec<PathBuf>, Vec<AckEffect>, AckResult) {
        match plan {
            AckPlan::Write {
                confine,
                effects,
                result,
            } => (confine, effects, *result),
            other => panic!("expected writes, got {other:?}"),
        }
    }

    fn state_of(effects: &[AckEffect]) -> &WorkflowState {
        effects
            .iter()
            .find_map(|e| match e {
                AckEffect::State(st) => Some(&**st),
                _ => None,
            })
            .expect("the state is written")
    }

    #[test]
    fn a_repeated_ack_is_finished_and_answered_unless_aborted_and_a_reused_ack_id_is_refused() {
        let (wf, _) = ids();
        let a = ack(AckDecision::Accepted, None, None);
        let mut st = waiting();
        assert_eq!(ack_start(&wf, &st, &a).unwrap(), AckStart::Fresh);
        st.acks.push(AckRecord {
            handoff_id: "hof_20261201_aaaaaa".into(),
            ..rec(AckStatus::Accepted)
        });
        assert!(matches!(
            ack_start(&wf, &st, &a).unwrap(),
            AckStart::Repeat { finish: true, .. }
        ));
        let e = ack_start(&wf, &st, &ack(AckDecision::Rejected, None, None))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ack_id ack_20261201_abc was already used"),
            "{e}"
        );
        // A repeat after an abort answers from the record and moves nothing.
        st.status = WorkflowStatus::Aborted;
        assert!(matches!(
            ack_start(&wf, &st, &a).unwrap(),
            AckStart::Repeat { finish: false, .. }
        ));
    }

    #[test]
    fn a_new_ack_of_an_aborted_completed_or_failed_workflow_is_refused() {
        let (wf, _) = ids();
        let a = ack(AckDecision::Accepted, None, None);
        let mut st = waiting();
        st.status = WorkflowStatus::Aborted;
        st.aborted_at = Some("2026-12-01T11:00:00Z".into());
        st.failure_reason = Some("wrong plan".into());
        let e = ack_start(&wf, &st, &a).unwrap_err().to_string();
        assert!(
            e.contains("was aborted at 2026-12-01T11:00:00Z (wrong plan); acks are refused"),
            "{e}"
        );
        for status in [WorkflowStatus::Completed, WorkflowStatus::Failed] {
            st.status = status;
            let e = ack_start(&wf, &st, &a).unwrap_err().to_string();
            assert!(e.contains("it takes no more acks"), "{e}");
        }
    }

    #[test]
    fn refusals_wrong_god_held_unknown_archived_other_workflow() {
        let a = ack(AckDecision::Accepted, None, None);
        let e = step(
            waiting(),
            &a,
            Actor::God("zeus".into()),
            Located::Live(inbox()),
            facts(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("addressed to hermes; zeus cannot acknowledge it"),
            "{e}"
        );
        // Any ack of a held dispatch, a completed one too, waits for the operator's approval.
        let mut held = found(Place::Quarantine, &[]);
        held.dispatch.held_because = Some("publish step".into());
        let done = ack(AckDecision::Completed, None, None);
        let e = step(
            held_state(),
            &done,
            Actor::Recipient,
            Located::Live(held),
            facts(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("is held for operator approval (publish step); approve it first"),
            "{e}"
        );
        let e = step(waiting(), &a, Actor::Recipient, Located::Nowhere, facts()).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        // An archived (rejected, withdrawn by an abort, …) dispatch cannot change status.
        let e = step(
            waiting(),
            &a,
            Actor::Recipient,
            Located::Archived(archived(AckStatus::Withdrawn, false)),
            facts(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("is already withdrawn (accepted); an ack cannot change that"),
            "{e}"
        );
        let mut other = inbox();
        other.dispatch.workflow_id = "wf_other".into();
        let e = step(
            waiting(),
            &a,
            Actor::Recipient,
            Located::Live(other),
            facts(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("belongs to workflow \"wf_other\", not wf_held"),
            "{e}"
        );
    }

    #[test]
    fn an_accepted_ack_arms_the_step_timer_commits_the_state_then_archives() {
        let a = ack(AckDecision::Accepted, None, None);
        let mut f = facts();
        f.step_timeout = Some((Duration::from_secs(1800), "30m".into()));
        let (confine, effects, result) =
            written(step(waiting(), &a, Actor::Recipient, Located::Live(inbox()), f).unwrap());
        let root = Root::at("/r");
        let hermes = GodName::parse("hermes").unwrap();
        assert_eq!(
            confine,
            [
                root.state_path(&ids().0),
                inbox().path,
                root.archive_dir(&hermes).join("hof_20261201_aaaaaa.json"),
            ]
        );
        let deadline = format_ts(at() + chrono::Duration::minutes(30));
        let AckEffect::Timer(hid, timer) = &effects[0] else {
            panic!("the timer first: {effects:?}")
        };
        assert_eq!(
            (hid, timer.deadline.as_str()),
            (&ids().1, deadline.as_str())
        );
        assert_eq!(timer.god, "hermes");
        let st = state_of(&effects);
        assert_eq!(st.status, WorkflowStatus::InProgress);
        assert_eq!(st.acks.len(), 1);
        assert!(matches!(effects[1], AckEffect::State(_)));
        assert_eq!(effects[2], AckEffect::CrashPoint("ack:after-state"));
        let AckEffect::Archive { god, dispatch, .. } = &effects[3] else {
            panic!("then the archive: {effects:?}")
        };
        assert_eq!(god.as_str(), "hermes");
        assert_eq!(dispatch.ack_status, AckStatus::Accepted);
        assert_eq!(dispatch.extra[STEP_DEADLINE], json!(deadline));
        assert_eq!(effects.len(), 4);
        assert_eq!(result.deadline.as_deref(), Some(deadline.as_str()));
        assert_eq!(result.deadline_kind.as_deref(), Some("step_timeout"));
        assert!(!result.duplicate);

        // No timeout: no timer, no deadline.
        let (_, effects, result) = written(
            step(
                waiting(),
                &a,
                Actor::Recipient,
                Located::Live(inbox()),
                facts(),
            )
            .unwrap(),
        );
        assert!(matches!(effects[0], AckEffect::State(_)));
        assert_eq!((result.deadline, result.deadline_kind), (None, None));
    }

    #[test]
    fn a_repeated_accept_of_the_accepted_dispatch_is_a_duplicate_writing_nothing() {
        let a = ack(AckDecision::Accepted, None, None);
        let plan = step(
            waiting(),
            &a,
            Actor::Recipient,
            Located::Archived(archived(AckStatus::Accepted, false)),
            facts(),
        )
        .unwrap();
        let AckPlan::Answer(r) = plan else {
            panic!("answered: {plan:?}")
        };
        assert!(r.duplicate);
        assert_eq!(r.status, "accepted");
        // The same status on a dispatch that is no longer the current one: also a duplicate.
        let mut st = waiting();
        st.dispatched_to = Some("apollo".into());
        let r = ack(AckDecision::Rejected, None, None);
        let plan = step(
            st,
            &r,
            Actor::Recipient,
            Located::Archived(archived(AckStatus::Rejected, false)),
            facts(),
        )
        .unwrap();
        assert!(matches!(plan, AckPlan::Answer(r) if r.duplicate));
    }

    #[test]
    fn a_pending_ack_moves_the_ack_deadline_to_the_eta_or_restarts_the_wait() {
        let eta = "2026-12-01T15:00:00Z";
        for (given, expected) in [
            (
                Some(eta),
                format_ts(crate::store::time::parse_ts(eta).unwrap()),
            ),
            (None, format_ts(at() + chrono::Duration::minutes(10))),
            // An ETA in the past restarts the wait too.
            (
                Some("2026-12-01T11:00:00Z"),
                format_ts(at() + chrono::Duration::minutes(10)),
            ),
        ] {
            let a = ack(AckDecision::Pending, given, Some("later"));
            let (_, effects, result) = written(
                step(
                    waiting(),
                    &a,
                    Actor::Recipient,
                    Located::Live(inbox()),
                    facts(),
                )
                .unwrap(),
            );
            assert_eq!(effects.len(), 2, "{effects:?}");
            let st = state_of(&effects);
            assert_eq!(st.status, WorkflowStatus::WaitingForAck, "unchanged");
            assert_eq!(st.acks[0].status, AckStatus::Pending);
            let AckEffect::Dispatch(path, d) = &effects[1] else {
                panic!("the dispatch rewritten in place: {effects:?}")
            };
            assert_eq!(path, &inbox().path);
            assert_eq!(d.ack_deadline.as_deref(), Some(expected.as_str()));
            assert_eq!(d.message.as_deref(), Some("later"));
            assert_eq!(result.deadline.as_deref(), Some(expected.as_str()));
            assert_eq!(result.deadline_kind.as_deref(), Some("ack"));
        }
    }

    #[test]
    fn a_pending_ack_by_an_earlier_target_takes_the_dispatch_back_to_its_inbox() {
        let a = ack(AckDecision::Pending, None, None);
        let f = found(
            Place::Inbox(GodName::parse("hermes").unwrap()),
            &["apollo", "hermes"],
        );
        let mut st = waiting();
        st.dispatched_to = Some("hermes".into());
        let (_, effects, result) = written(
            step(
                st,
                &a,
                Actor::God("apollo".into()),
                Located::Live(f),
                facts(),
            )
            .unwrap(),
        );
        assert_eq!(state_of(&effects).dispatched_to.as_deref(), Some("apollo"));
        assert_eq!(
            effects[2],
            AckEffect::Move(
                inbox().path,
                Root::at("/r")
                    .inbox_dir(&GodName::parse("apollo").unwrap())
                    .join("hof_20261201_aaaaaa.json")
            )
        );
        assert_eq!(result.god, "apollo");
    }

    #[test]
    fn a_progress_ack_on_an_accepted_step_moves_its_deadline_and_is_refused_without_a_timeout() {
        let a = ack(AckDecision::Pending, None, None);
        let (confine, effects, result) = written(
            step(
                waiting(),
                &a,
                Actor::Recipient,
                Located::Archived(archived(AckStatus::Accepted, true)),
                facts(),
            )
            .unwrap(),
        );
        assert!(confine.is_empty());
        let deadline = format_ts(at() + chrono::Duration::minutes(30));
        assert!(matches!(&effects[0], AckEffect::Timer(_, t) if t.deadline == deadline));
        assert_eq!(state_of(&effects).acks.len(), 1);
        let AckEffect::Dispatch(_, d) = &effects[2] else {
            panic!("{effects:?}")
        };
        assert_eq!(d.extra[STEP_DEADLINE], json!(deadline));
        assert_eq!(d.ack_status, AckStatus::Accepted, "still accepted");
        assert_eq!(result.deadline.as_deref(), Some(deadline.as_str()));
        assert_eq!(result.deadline_kind.as_deref(), Some("step_timeout"));

        let e = step(
            waiting(),
            &a,
            Actor::Recipient,
            Located::Archived(archived(AckStatus::Accepted, false)),
            facts(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("its step has no timeout; it can now only be completed or rejected"),
            "{e}"
        );
    }

    #[test]
    fn a_rejection_archives_then_reroutes_to_the_first_untried_fallback_or_fails() {
        let a = ack(AckDecision::Rejected, None, None);
        let mut f = facts();
        f.fallback_gods = vec!["hermes".into(), "apollo".into()];
        let (confine, effects, result) =
            written(step(waiting(), &a, Actor::Recipient, Located::Live(inbox()), f).unwrap());
        assert_eq!(
            confine.last().unwrap(),
            &Root::at("/r")
                .inbox_dir(&GodName::parse("apollo").unwrap())
                .join("hof_20261201_aaaaaa.json")
        );
        assert_eq!(state_of(&effects).dispatched_to.as_deref(), Some("apollo"));
        assert!(matches!(effects[2], AckEffect::Archive { .. }));
        let AckEffect::Reroute(god, d) = &effects[3] else {
            panic!("{effects:?}")
        };
        assert_eq!(god.as_str(), "apollo");
        assert_eq!(d.to_god, "apollo");
        assert_eq!(d.ack_status, AckStatus::Unacked);
        assert_eq!(d.dispatch_id.as_deref(), Some("dsp_test"));
        assert_eq!(d.extra["rerouted_from"], json!("hermes"));
        assert_eq!((d.archive_reason.as_ref(), d.by.as_ref()), (None, None));
        assert_eq!(result.rerouted_to.as_deref(), Some("apollo"));

        // No fallback left (and a definition that did not load): failed, nothing rerouted.
        let mut f = facts();
        f.warnings
            .push("definition \"x\" not found; no fallback gods known".into());
        let (_, effects, result) =
            written(step(waiting(), &a, Actor::Recipient, Located::Live(inbox()), f).unwrap());
        assert_eq!(effects.len(), 3, "{effects:?}");
        assert_eq!(state_of(&effects).status, WorkflowStatus::Failed);
        assert_eq!(result.state_status, WorkflowStatus::Failed);
        assert_eq!(result.warnings.len(), 1);
    }

    #[test]
    fn a_completed_ack_goes_to_the_submit_path_with_the_dispatch_it_closes() {
        let a = ack(AckDecision::Completed, None, Some("done"));
        let plan = step(
            waiting(),
            &a,
            Actor::Recipient,
            Located::Live(inbox()),
            facts(),
        )
        .unwrap();
        let AckPlan::Complete {
            record,
            dispatch,
            god,
            ..
        } = plan
        else {
            panic!("{plan:?}")
        };
        assert_eq!(god.as_str(), "hermes");
        assert_eq!(record.status, AckStatus::Completed);
        assert_eq!(dispatch.ack_status, AckStatus::Completed);
        assert_eq!(dispatch.message.as_deref(), Some("done"));
    }
}
