//! The pure steps of an ack (docs/PROTOCOL.md §2.5), as `submit::next_state` is for a handoff and
//! `delivery::decide` for a redelivery: from the state, the dispatch as found, the typed ack, who acks,
//! what the definition says and `now`, [`ack_start`] and [`ack_step`] decide everything an ack does:
//! the refusal, the answer, or the ordered file effects ([`AckEffect`]) that
//! `Conductor::ack_unjournaled` then applies under the workflow's lock. Nothing here reads or writes a
//! file, so every transition and refusal is unit-tested without a root.

use super::results::DeadlineKind;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::delivery::deadline_after_ack;
use super::files::{Found, Place};
use super::model::{AckRecord, AckStatus, Dispatch, WorkflowState, WorkflowStatus};
use super::request::{AckDecision, AckRequest};
use super::timers::StepTimer;
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
    /// `rejected`: the budget hold of the dispatch to the next fallback god, when a budget of the
    /// workflow, its steps, that god or the day is reached (the rejection's own usage counted).
    pub reroute_hold: Option<crate::cost::hook::Hold>,
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
    Reroute(GodName, Box<Dispatch>, bool),
}

/// A `completed` ack, to record through the submit path with the handoff it records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompletePlan {
    /// The state (the acking god as the addressee).
    pub state: WorkflowState,
    /// The ack record.
    pub record: AckRecord,
    /// The dispatch as found.
    pub found: Found,
    /// The dispatch as the ack leaves it.
    pub dispatch: Dispatch,
    /// The god the ack counts for.
    pub god: GodName,
}

/// What an ack does, decided by [`ack_step`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AckPlan {
    /// Nothing to write: the answer (a repeat of a settled ack).
    Answer(Box<AckResult>),
    /// A `completed` ack: recorded through the submit path with the handoff it records.
    Complete(Box<CompletePlan>),
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
        workflow_id: wf.clone(),
        status: rec.status.clone(),
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
        traceparent: a.traceparent.clone(),
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
    d.rerouted_from = Some(from.to_string());
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

/// Holds a rerouted dispatch for a budget, as routing holds a dispatch (docs/BUDGETS.md): it goes to
/// `_quarantine` with `held_because` and the figures, and the workflow awaits approval. An approval
/// the dispatch carried from an earlier hold does not carry over.
pub(crate) fn hold_reroute(
    st: &mut WorkflowState,
    d: &mut Dispatch,
    hold: &crate::cost::hook::Hold,
) {
    d.held_because = Some(hold.because.clone());
    if !hold.figures.is_null() {
        d.extra.insert("budget".into(), hold.figures.clone());
    }
    d.approved_by = None;
    d.approved_at = None;
    d.ack_deadline = None;
    d.deliveries.clear();
    st.status = WorkflowStatus::AwaitingApproval;
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
    d.step_deadline = Some(deadline.clone());
    d.step_timeout = Some(text.clone());
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
    if d.step_deadline.is_none() {
        return Err(refused());
    }
    let deadline = match rec.eta.as_deref().and_then(parse_ts).filter(|t| *t > now) {
        Some(t) => format_ts(t),
        None => {
            let timeout = d
                .step_timeout
                .as_deref()
                .and_then(parse_duration)
                .or_else(|| timeout.map(|t| t.0))
                .ok_or_else(refused)?;
            add(now, timeout).map(format_ts).ok_or_else(refused)?
        }
    };
    let god = GodName::parse(&d.to_god)?;
    d.step_deadline = Some(deadline.clone());
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

/// What [`rejected`] decides from.
pub(crate) struct RejectInput<'a> {
    /// The workflow's state.
    pub st: WorkflowState,
    /// The rejected dispatch.
    pub d: Dispatch,
    /// The ack record of the rejection.
    pub rec: AckRecord,
    /// The fallback god the step goes to, if any.
    pub fallback: Option<String>,
    /// True when the dispatch is the workflow's current one.
    pub is_current: bool,
    /// The god that rejected it.
    pub god: &'a GodName,
    /// The rejection's message.
    pub message: Option<&'a str>,
    /// When (RFC 3339).
    pub now: &'a str,
}

/// The pure step of a `rejected` ack: the ack is recorded with the fallback god it reroutes to; the
/// workflow waits for that god, or fails (with the god's message as the reason) when no fallback is
/// left. An ack of a dispatch that is not the workflow's current one changes no status (a warning says
/// so). The dispatch is marked for the archive with why.
pub(crate) fn rejected(input: RejectInput<'_>) -> RejectStep {
    let RejectInput {
        mut st,
        mut d,
        mut rec,
        fallback,
        is_current,
        god,
        message,
        now,
    } = input;
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
/// first), and any dispatch of a step the workflow is held at, wherever its file lies (`hold`), an unknown handoff, an archived dispatch whose status the ack would change, a dispatch of
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
            if super::hold::holds_step(&state, &f.dispatch.step) {
                return Err(super::hold::refusal(
                    wf,
                    &state,
                    &format!("an ack of handoff {hid}"),
                    Some(hid.as_str()),
                    None,
                ));
            }
            return Err(Error::refused(format!(
                "handoff {hid} is held for operator approval ({}); approve it first (pantheon approve {hid})",
                f.dispatch
                    .held_because
                    .as_deref()
                    .unwrap_or("approval required"),
            )));
        }
        // A hold is the operator's alone: a dispatch of the held step is not acked wherever its
        // file lies (a god may have moved it into an inbox, or into an archive).
        Located::Live(f) | Located::Archived(f)
            if super::hold::holds_step(&state, &f.dispatch.step) =>
        {
            return Err(super::hold::refusal(
                wf,
                &state,
                &format!("an ack of handoff {hid}"),
                Some(hid.as_str()),
                Some(&f.path),
            ));
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
                result.deadline_kind = Some(DeadlineKind::StepTimeout);
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
            return Ok(AckPlan::Complete(Box::new(CompletePlan {
                state,
                record: rec,
                found,
                dispatch: d,
                god,
            })));
        }
        AckDecision::Pending => {
            state.acks.push(rec.clone());
            state.updated = Some(now_text);
            let deadline = d.ack_deadline.clone();
            let kind = deadline.as_ref().map(|_| DeadlineKind::Ack);
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
            let kind = deadline.as_ref().map(|_| DeadlineKind::StepTimeout);
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
            let step = rejected(RejectInput {
                st: state,
                d,
                rec,
                fallback,
                is_current,
                god: &god,
                message: a.message.as_deref(),
                now: &now_text,
            });
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
            let mut st = step.state;
            if let Some(fb) = fb
                && !st.status.is_finished()
            {
                let mut d = rerouted(&step.dispatch, &god, &fb, &now_text, facts.dispatch_id);
                let held = facts.reroute_hold.as_ref().filter(|_| is_current);
                if let Some(hold) = held {
                    hold_reroute(&mut st, &mut d, hold);
                    if let Some(AckEffect::State(s)) = effects.first_mut() {
                        **s = st.clone();
                    }
                    confine.push(root.quarantine_dir().join(format!("{hid}.json")));
                }
                effects.push(AckEffect::Reroute(fb, Box::new(d), held.is_some()));
            }
            (effects, st, step.record, warnings, None, None)
        }
    };
    let mut result = ack_result(wf, &st, &rec, false, None);
    result.warnings = warnings;
    result.deadline = deadline;
    result.deadline_kind = kind;
    Ok(AckPlan::Write {
        confine,
        effects,
        result: Box::new(result),
    })
}

#[cfg(test)]
#[path = "ack_step_tests.rs"]
mod tests;
