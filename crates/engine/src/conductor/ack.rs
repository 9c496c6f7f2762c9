//! `ack_handoff` (docs/PROTOCOL.md §2.5) and the operator's approval or rejection of held dispatches.
//!
//! An ack commits by appending to the state's `acks`; moving the dispatch (archive, reroute, next
//! step) follows and is re-run when the same ack is repeated, so a crash is repaired by repeating it.

use super::ack_step::CompletePlan;
use super::results::ApprovalStatus;
use super::submit::SubmitLocked;
use serde_json::{Value, json};

use super::ack_step::{
    AckEffect, AckFacts, AckInput, AckPlan, AckStart, Located, ack_result, ack_start, ack_step,
    rerouted, settled_by, unknown_handoff,
};
use super::definition::find_definition;
use super::files;
use super::model::{AckRecord, AckStatus, Dispatch, WorkflowState, WorkflowStatus, lenient};
use super::request::{AckDecision, AckRequest};
use super::submit::{AckCommit, hid_of, name_violations, validate_handoff};
use super::timers::step_timeout;
use super::{AckResult, Actor, ApprovalResult, Conductor};
use crate::error::{Error, Result, Violation};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::time::{format_ts, now_ts};
use crate::store::{AckId, GodName, HandoffId, WorkflowId};
use chrono::{DateTime, Utc};

fn opt_text(v: &Value, k: &str) -> Option<String> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(x) => Some(lenient::text(x.clone())),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().cloned().map(lenient::text).collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// A deterministic handoff id for the handoff recorded on behalf of a `completed` ack, so repeating
/// the ack after a crash records the same handoff.
fn derived_handoff_id(ack_id: &AckId, hid: &HandoffId) -> HandoffId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ack_id
        .as_str()
        .bytes()
        .chain([b'|'])
        .chain(hid.as_str().bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let date = &ack_id.as_str()[4..12];
    HandoffId::parse(&format!("hof_{date}_{:06x}", h & 0xff_ffff)).expect("well-formed")
}

/// Why a `pending` ack's `eta` cannot be taken, if it cannot: the ETA becomes the ack deadline, so it must
/// be a time the supervisor can fire, at most [`MAX_DURATION`](crate::store::time::MAX_DURATION) (365
/// days) ahead. Never clamped: the god learns its ETA was not taken. An ETA in the past is taken (the
/// wait restarts, docs/PROTOCOL.md 2.10).
fn pending_eta_problem(eta: Option<&Value>, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let eta = eta.filter(|e| !e.is_null())?;
    let limit = crate::store::time::add(now, crate::store::time::MAX_DURATION)?;
    let shown: String = eta.to_string().chars().take(60).collect();
    match eta.as_str().and_then(crate::store::time::parse_ts) {
        None => Some(format!(
            "{shown} is not a time; a pending ack's eta is an RFC 3339 time at most 365d ahead, \
             e.g. 2026-06-14T15:00:00Z (or leave it out)"
        )),
        Some(t) if t > limit => Some(format!(
            "{shown} is more than 365d ahead, the limit for a pending ack's eta; give a nearer one"
        )),
        Some(_) => None,
    }
}

/// Every reason the ack document `v` cannot be taken: the root's ack schema, id names, the required
/// fields, the status (one of the four decisions) and a `pending` ack's ETA.
fn ack_violations(c: &Conductor, v: &Value) -> Result<Vec<Violation>> {
    let schemas = c.schemas()?;
    let mut violations = schemas.check_ack(v);
    let mut extra = name_violations(
        v,
        &[
            ("/ack_id", "ack_id"),
            ("/handoff_id", "handoff_id"),
            ("/workflow_id", "workflow_id"),
        ],
    );
    for p in ["/ack_id", "/handoff_id", "/status"] {
        if !matches!(v.pointer(p), Some(Value::String(s)) if !s.is_empty()) {
            extra.push(Violation {
                pointer: p.into(),
                message: "required: a non-empty string".into(),
            });
        }
    }
    let decision = AckDecision::parse(v.get("status").and_then(Value::as_str).unwrap_or(""));
    if decision.is_none() {
        extra.push(Violation {
            pointer: "/status".into(),
            message: "must be one of accepted, pending, rejected, completed".into(),
        });
    }
    if let Err(v) = crate::cost::usage::of_document(v, "/usage") {
        extra.extend(v);
    }
    extra.extend(crate::trace::violation(v, "/traceparent"));
    if decision == Some(AckDecision::Pending)
        && let Some(why) = pending_eta_problem(v.get("eta"), chrono::Utc::now())
    {
        extra.push(Violation {
            pointer: "/eta".into(),
            message: why,
        });
    }
    for x in extra {
        if !violations.iter().any(|s| s.pointer == x.pointer) {
            violations.push(x);
        }
    }
    Ok(violations)
}

/// Reads an ack document into the typed request, refusing it with every violation when it cannot be
/// taken.
fn validate_ack(c: &Conductor, v: &Value) -> Result<AckRequest> {
    let violations = ack_violations(c, v)?;
    let decision = AckDecision::parse(v.get("status").and_then(Value::as_str).unwrap_or(""));
    let (true, Some(decision)) = (violations.is_empty(), decision) else {
        return Err(Error::invalid("ack", violations));
    };
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    Ok(AckRequest {
        ack_id: AckId::parse(s("ack_id"))?,
        handoff_id: HandoffId::parse(s("handoff_id"))?,
        workflow_id: match v.get("workflow_id").and_then(Value::as_str) {
            Some(w) => Some(WorkflowId::parse(w)?),
            None => None,
        },
        decision,
        eta: opt_text(v, "eta"),
        message: opt_text(v, "message"),
        traceparent: opt_text(v, "traceparent"),
        context: v
            .get("context")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

impl Conductor {
    /// Finds the workflow a handoff's dispatch belongs to, from the inboxes, quarantine or archive
    /// (before the workflow's lock is taken: see [`files::find_anywhere`]).
    fn workflow_of(&self, hid: &HandoffId) -> Result<WorkflowId> {
        let f = files::find_anywhere(&self.root, hid)?.ok_or_else(|| unknown_handoff(hid))?;
        WorkflowId::parse(&f.dispatch.workflow_id)
    }

    /// Acknowledges a dispatch (docs/PROTOCOL.md §2.5). `by` is recorded in the ack (`Actor::Recipient`: the god
    /// the dispatch is addressed to). The decisions are the pure steps [`ack_start`] and [`ack_step`];
    /// this reads what they decide from and applies the effects they return, under the workflow's lock.
    pub(crate) fn ack_unjournaled(&self, ack: &Value, by: Actor) -> Result<AckResult> {
        crate::store::limits::check_document("ack", ack, crate::store::limits::MAX_ACK_BYTES)?;
        let a = validate_ack(self, ack)?;
        self.ack_checked(a, ack, by)
    }

    /// [`Conductor::ack_unjournaled`] for a typed request. Its ids and decision are valid by
    /// construction; the document the protocol defines for it is built once, for the size limits and
    /// the root's ack schema (an operator may tighten it), and the request itself goes on as it is.
    pub(crate) fn ack_request_unjournaled(&self, a: &AckRequest, by: Actor) -> Result<AckResult> {
        let doc = a.to_json();
        crate::store::limits::check_document("ack", &doc, crate::store::limits::MAX_ACK_BYTES)?;
        let violations = ack_violations(self, &doc)?;
        if !violations.is_empty() {
            return Err(Error::invalid("ack", violations));
        }
        self.ack_checked(a.clone(), &doc, by)
    }

    /// Takes a checked ack (`ack` is its document, for the usage report it may carry): the pure
    /// steps decide, this applies their effects under the workflow's lock.
    fn ack_checked(&self, a: AckRequest, ack: &Value, by: Actor) -> Result<AckResult> {
        let wf = match &a.workflow_id {
            Some(w) => w.clone(),
            None => self.workflow_of(&a.handoff_id)?,
        };
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let st = files::require_state(&self.root, &wf)?;
        if let AckStart::Repeat { record, finish } = ack_start(&wf, &st, &a)? {
            if finish {
                self.finish_ack(&wf, &st, &record)?;
            }
            let st = files::require_state(&self.root, &wf)?;
            let mut r = ack_result(&wf, &st, &record, true, None);
            r.warnings
                .extend(self.settle_report(&st, &format!("ack-{}", a.ack_id)));
            let derived = derived_handoff_id(&a.ack_id, &a.handoff_id);
            r.warnings
                .extend(self.settle_report(&st, &format!("handoff-{derived}")));
            return Ok(r);
        }
        if let Some(last) = st.step_history.last().and_then(|r| r.handoff_id.clone())
            && let Ok(last) = HandoffId::parse(&last)
        {
            self.repair_dispatch(&wf, &st, &last)?;
        }
        let located = self.locate(&st, &a.handoff_id)?;
        // The god's and step's usage an ack that does not complete carries (a completed ack's goes
        // with the handoff it records, through the submit path).
        let usage = ack.get("usage").filter(|u| !u.is_null()).cloned();
        let report = match (&located, &usage) {
            (Located::Live(f) | Located::Archived(f), Some(_))
                if a.decision != AckDecision::Completed =>
            {
                crate::cost::hook::Report::of_document(
                    &self.root,
                    ack,
                    crate::cost::hook::Origin {
                        key: format!("ack-{}", a.ack_id),
                        source: "ack",
                        workflow_id: wf.as_str(),
                        definition: st.definition_id.as_deref(),
                        step: Some(f.dispatch.step.as_str()),
                        god: f.dispatch.to_god.as_str(),
                        ..Default::default()
                    },
                )
            }
            _ => None,
        };
        let facts = self.ack_facts(&st, &a, &located, report.as_ref());
        let plan = ack_step(AckInput {
            root: &self.root,
            wf: &wf,
            state: st,
            ack: &a,
            by: &by,
            located,
            facts,
        })?;
        match plan {
            AckPlan::Answer(result) => Ok(*result),
            AckPlan::Complete(plan) => self.ack_completed(&wf, a, *plan, usage),
            AckPlan::Write {
                confine,
                mut effects,
                result,
            } => {
                files::refuse_unconfined(&self.root, &confine)?;
                let mut committed = None;
                if let Some(r) = &report {
                    for e in &mut effects {
                        if let AckEffect::State(st) = e {
                            crate::cost::hook::record(st, r);
                            committed = Some(st.clone());
                        }
                    }
                    if committed.is_some() {
                        crate::cost::ledger::write_marker(&self.root, &r.line)?;
                    }
                }
                self.apply_ack(&wf, effects)?;
                let mut result = *result;
                if let (Some(r), Some(st)) = (&report, &committed) {
                    let def = st
                        .definition_id
                        .as_deref()
                        .and_then(|d| find_definition(&self.root, d).ok().flatten());
                    result
                        .warnings
                        .extend(self.after_report(st, def.as_ref(), r));
                }
                Ok(result)
            }
        }
    }

    /// The budget hold of the dispatch a rejection reroutes to the next fallback god (none when no
    /// fallback is left or no budget is reached); a budget that cannot be checked is a warning.
    fn reroute_hold(
        &self,
        st: &WorkflowState,
        a: &AckRequest,
        found: &files::Found,
        def: &crate::conductor::WorkflowDef,
        report: Option<&crate::cost::hook::Report>,
        facts: &mut AckFacts,
    ) {
        let Some(fb) = super::ack_step::next_fallback(
            st,
            &found.dispatch,
            &a.handoff_id,
            &facts.fallback_gods,
        ) else {
            return;
        };
        match crate::cost::hook::hold(
            &self.root,
            &found.dispatch.workflow_id,
            Some(st),
            Some(def),
            &fb,
            report,
            &mut facts.warnings,
        ) {
            Ok(h) => facts.reroute_hold = h,
            Err(e) => facts
                .warnings
                .push(format!("budgets not checked for the reroute to {fb}: {e}")),
        }
        // A reroute to a paused god (or of a paused workflow) is held as routing holds it.
        let pauses = super::pause::Pauses::load_or_warn(&self.root, &mut facts.warnings);
        if let Some(p) = pauses.holding(&fb, &found.dispatch.workflow_id) {
            let budget = facts.reroute_hold.take();
            facts.reroute_hold = Some(crate::cost::hook::Hold {
                because: super::pause::join_hold(budget.as_ref().map(|b| b.because.clone()), p),
                figures: budget.map(|b| b.figures).unwrap_or(Value::Null),
            });
        }
    }

    /// Finds an acked dispatch: in an inbox or `_quarantine` (the state's addressee's inbox first), else
    /// in an archive.
    fn locate(&self, st: &WorkflowState, hid: &HandoffId) -> Result<Located> {
        let current_god = st
            .dispatched_to
            .as_deref()
            .and_then(|g| GodName::parse(g).ok());
        if let Some(f) = files::find_live(&self.root, hid, current_god.as_ref())? {
            return Ok(Located::Live(f));
        }
        Ok(
            match files::find_archived(&self.root, hid, current_god.as_ref())?
                .into_iter()
                .next()
            {
                Some(f) => Located::Archived(f),
                None => Located::Nowhere,
            },
        )
    }

    /// Reads what [`ack_step`] needs from the definitions, for this ack only: the step's fallback gods
    /// for a rejection, its timeout for an acceptance or a progress ack on an archived dispatch.
    fn ack_facts(
        &self,
        st: &WorkflowState,
        a: &AckRequest,
        located: &Located,
        report: Option<&crate::cost::hook::Report>,
    ) -> AckFacts {
        let mut facts = AckFacts {
            fallback_gods: Vec::new(),
            warnings: Vec::new(),
            step_timeout: None,
            now: chrono::Utc::now(),
            dispatch_id: String::new(),
            reroute_hold: None,
        };
        let found = match located {
            Located::Live(f) | Located::Archived(f) => f,
            Located::Nowhere => return facts,
        };
        match a.decision {
            AckDecision::Rejected => {
                facts.dispatch_id = crate::store::generate_dispatch_id();
                let Some(def_id) = st.definition_id.as_deref() else {
                    return facts;
                };
                match find_definition(&self.root, def_id) {
                    Ok(Some(def)) => {
                        if let Some(step) = def.step(&found.dispatch.step) {
                            facts.fallback_gods = step.fallback_gods.clone();
                        }
                        self.reroute_hold(st, a, found, &def, report, &mut facts);
                    }
                    Ok(None) => facts.warnings.push(format!(
                        "definition {def_id:?} not found; no fallback gods known"
                    )),
                    Err(e) => facts.warnings.push(format!(
                        "definition {def_id:?} does not load: {}",
                        e.message
                    )),
                }
            }
            AckDecision::Accepted => {
                facts.step_timeout = step_timeout(&self.root, &found.dispatch);
            }
            AckDecision::Pending
                if matches!(located, Located::Archived(_))
                    && found.dispatch.step_timeout.is_none() =>
            {
                facts.step_timeout = step_timeout(&self.root, &found.dispatch);
            }
            AckDecision::Pending | AckDecision::Completed => {}
        }
        facts
    }

    /// Applies an ack's effects in order (see [`AckEffect`]).
    fn apply_ack(&self, wf: &WorkflowId, effects: Vec<AckEffect>) -> Result<()> {
        for e in effects {
            match e {
                AckEffect::Timer(hid, t) => self.write_timer(&hid, &t)?,
                AckEffect::State(st) => files::write_state(&self.root, wf, &st)?,
                AckEffect::CrashPoint(name) => super::crash_point(name),
                AckEffect::Dispatch(path, d) => write_json(&self.root, &path, &d)?,
                AckEffect::Move(from, to) => {
                    crate::store::atomic::rename_durable(&self.root, &from, &to)?;
                }
                AckEffect::Archive {
                    from,
                    god,
                    hid,
                    dispatch,
                } => {
                    files::archive(&self.root, &from, &god, &hid, &dispatch)?;
                }
                AckEffect::Reroute(god, d, held) => {
                    let hid = HandoffId::parse(&d.handoff_id)?;
                    if !files::dispatch_exists(&self.root, &god, &hid) {
                        let dir = match held {
                            true => self.root.quarantine_dir(),
                            false => self.root.inbox_dir(&god),
                        };
                        write_json(&self.root, &dir.join(format!("{hid}.json")), &d)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A `completed` ack: the handoff it records on the god's behalf goes through the submit path,
    /// which commits the ack with it.
    fn ack_completed(
        &self,
        wf: &WorkflowId,
        a: AckRequest,
        plan: CompletePlan,
        usage: Option<Value>,
    ) -> Result<AckResult> {
        let CompletePlan {
            state: st,
            record: mut rec,
            found,
            dispatch: mut d,
            god,
        } = plan;
        let new_hid = derived_handoff_id(&a.ack_id, &a.handoff_id);
        let def = match st.definition_id.as_deref() {
            Some(id) => find_definition(&self.root, id).ok().flatten(),
            None => None,
        };
        let to_god = def
            .as_ref()
            .and_then(|d| d.next_step(&found.dispatch.step))
            .map(|s| s.god.clone())
            .unwrap_or_else(|| found.dispatch.from_god.clone());
        let mut context = json!({
            "summary": a.message.clone().filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("{god} completed step {}", found.dispatch.step)),
            "decisions": strings(a.context.get("decisions")),
            "artifacts": strings(a.context.get("artifacts")),
        });
        for k in ["open_questions", "gates_passed"] {
            if a.context.contains_key(k) {
                context[k] = json!(strings(a.context.get(k)));
            }
        }
        let mut raw = json!({
            "handoff_id": new_hid.as_str(),
            "workflow_id": wf.as_str(),
            "from_god": god.as_str(),
            "to_god": to_god,
            "step": found.dispatch.step,
            "context": context,
        });
        if let Some(u) = usage {
            raw["usage"] = u;
        }
        // The recorded handoff's parent is the ack's span.
        raw["traceparent"] = json!(crate::trace::traceparent_of(
            st.trace_id.as_deref(),
            &st.workflow_id,
            "ack",
            a.ack_id.as_str(),
        ));
        if let Some(def) = &def {
            let mut routing = json!({ "workflow_definition": def.id });
            if let Some(v) = &st.definition_version {
                routing["workflow_version"] = json!(v);
            }
            raw["routing"] = routing;
        }
        let (h, warnings) = validate_handoff(self, &raw).map_err(|e| match e {
            Error::Invalid { what, violations } => Error::Invalid {
                what: format!("the handoff recorded for this completed ack ({what}); put the missing values in the ack's `context`"),
                violations,
            },
            other => other,
        })?;
        rec.recorded_handoff_id = Some(new_hid.to_string());
        d.archive_reason = Some(format!("completed; recorded as handoff {new_hid}"));
        d.archived_at = Some(now_ts());
        let commit = AckCommit {
            record: rec.clone(),
            closes: found,
            dispatch_update: d,
        };
        let next = self
            .submit_locked(SubmitLocked {
                wf,
                handoff: h,
                raw,
                state: Some(st),
                warnings,
                ack: Some(commit),
                from: Default::default(),
            })
            .map_err(|e| match e {
                Error::Invalid { what, violations } => Error::Invalid {
                    what: format!("{what}; for a completed ack put them in the ack's `context`"),
                    violations,
                },
                other => other,
            })?;
        let st = files::require_state(&self.root, wf)?;
        Ok(ack_result(wf, &st, &rec, false, Some(next)))
    }

    /// Finishes the file effects of a recorded ack (idempotent): archive the dispatch if still in the
    /// inbox, write the fallback god's dispatch, the next step's dispatch.
    fn finish_ack(&self, wf: &WorkflowId, st: &WorkflowState, rec: &AckRecord) -> Result<()> {
        let (Some(god), Ok(hid)) = (
            rec.god.as_deref().and_then(|g| GodName::parse(g).ok()),
            HandoffId::parse(&rec.handoff_id),
        ) else {
            return Ok(());
        };
        if rec.status != AckStatus::Pending
            && let Some(f) = files::in_inbox(&self.root, &god, &hid)?
        {
            let mut d = settled_by(&f.dispatch, rec);
            if rec.status == AckStatus::Accepted {
                // The step timeout starts with the acceptance this archive makes: after a crash
                // between state and archive, or for a dispatch redelivered after its step timed
                // out and accepted again by a repeat of the god's first ack (docs/PROTOCOL.md §2.10).
                self.arm_step_timer(&mut d, &god, chrono::Utc::now())?;
                // ... and the workflow is in progress again, as a fresh accept makes it.
                if st.status == WorkflowStatus::WaitingForAck
                    && st.current_step.as_deref() == Some(d.step.as_str())
                    && st.dispatched_to.as_deref() == Some(god.as_str())
                {
                    let mut st = st.clone();
                    st.status = WorkflowStatus::InProgress;
                    st.updated = Some(now_ts());
                    files::write_state(&self.root, wf, &st)?;
                }
            }
            files::archive(&self.root, &f.path, &god, &hid, &d)?;
        }
        if rec.status == AckStatus::Rejected
            && let Some(fb) = rec.rerouted_to.as_deref()
            && !st.status.is_finished()
        {
            let fb = GodName::parse(fb)?;
            if !files::dispatch_exists(&self.root, &fb, &hid)
                && let Some(old) = files::in_archive(&self.root, &god, &hid)?
            {
                let d = rerouted(
                    &old.dispatch,
                    &god,
                    &fb,
                    &now_ts(),
                    crate::store::generate_dispatch_id(),
                );
                write_json(
                    &self.root,
                    &self.root.inbox_dir(&fb).join(format!("{hid}.json")),
                    &d,
                )?;
            }
        }
        if let Some(next) = rec.recorded_handoff_id.as_deref()
            && let Ok(next) = HandoffId::parse(next)
        {
            self.repair_dispatch(wf, st, &next)?;
        }
        Ok(())
    }

    /// Releases a dispatch held in `_quarantine` into its god's inbox (an operator act).
    pub(crate) fn approve_unjournaled(
        &self,
        handoff_id: &HandoffId,
        by: Actor,
    ) -> Result<ApprovalResult> {
        self.decide_held(handoff_id, None, by)
    }

    /// Refuses a held dispatch: it is archived as rejected and the workflow `failed` (an operator act).
    pub(crate) fn reject_held_unjournaled(
        &self,
        handoff_id: &HandoffId,
        reason: &str,
        by: Actor,
    ) -> Result<ApprovalResult> {
        if reason.trim().is_empty() {
            return Err(Error::refused(
                "rejecting a held dispatch needs a reason (--reason TEXT)",
            ));
        }
        self.decide_held(handoff_id, Some(reason), by)
    }

    fn decide_held(
        &self,
        hid: &HandoffId,
        reject: Option<&str>,
        by: Actor,
    ) -> Result<ApprovalResult> {
        self.decide_held_as(hid, reject, by, None)
    }

    /// An operator's decision on a held dispatch, or (`resumed`: the pause's `held_because` part)
    /// the release of one a pause held, by its resume. An operator's approval of a dispatch a pause
    /// holds is refused, naming `pantheon resume`.
    pub(crate) fn decide_held_as(
        &self,
        hid: &HandoffId,
        reject: Option<&str>,
        by: Actor,
        resumed: Option<&str>,
    ) -> Result<ApprovalResult> {
        let wf = self.workflow_of(hid)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        self.decide_held_locked(&wf, hid, reject, by, resumed)
    }

    /// [`Self::decide_held_as`] under workflow `wf`'s lock, which the caller holds (an approval
    /// link checks its binding and decides in the same hold of the lock).
    pub(crate) fn decide_held_locked(
        &self,
        wf: &WorkflowId,
        hid: &HandoffId,
        reject: Option<&str>,
        by: Actor,
        resumed: Option<&str>,
    ) -> Result<ApprovalResult> {
        let (hid, wf) = (hid.clone(), wf.clone());
        let mut st = files::require_state(&self.root, &wf)?;
        let held = match files::in_quarantine(&self.root, &hid)? {
            Some(f) => Some(f),
            None => self.moved_held(&wf, &st, &hid)?,
        };
        if let Some(f) = &held
            && reject.is_none()
            && resumed.is_none()
        {
            refuse_pause_hold(&hid, &f.dispatch)?;
        }
        let by_label = by.label("operator");
        let publish_def = match (&held, st.definition_id.as_deref()) {
            (Some(f), Some(id)) => super::definition::find_definition(&self.root, id)
                .ok()
                .flatten()
                .filter(|d| {
                    d.step(&f.dispatch.step)
                        .is_some_and(|s| s.publish.is_some())
                }),
            _ => None,
        };
        let step = held_step(HeldInput {
            wf: &wf,
            hid: &hid,
            st: &st,
            held: held.as_ref().map(|f| &f.dispatch),
            reject,
            by_label: &by_label,
            publishes: publish_def.is_some(),
            now: chrono::Utc::now(),
        })?;
        let (state, dispatch, to) = match step {
            HeldStep::Repeat(p) => return self.repeated_decision(&wf, &hid, &st, &p),
            HeldStep::Decide {
                state,
                dispatch,
                to,
            } => (state, dispatch, to),
        };
        let Some(f) = held else {
            return Err(unknown_handoff(&hid));
        };
        let god = GodName::parse(&f.dispatch.to_god)?;
        files::refuse_unconfined(
            &self.root,
            &[
                self.root.state_path(&wf),
                f.path.clone(),
                match to {
                    HeldMove::ToInbox => self.root.inbox_dir(&god).join(format!("{hid}.json")),
                    _ => self.root.archive_dir(&god).join(format!("{hid}.json")),
                },
            ],
        )?;
        if let Some(mut new) = state {
            if let Some(text) = resumed
                && let Some(last) = new
                    .extra
                    .get_mut("approvals")
                    .and_then(Value::as_array_mut)
                    .and_then(|a| a.last_mut())
            {
                last["resumed"] = json!(text);
            }
            st = *new;
            if let Some(def) = &publish_def
                && to == HeldMove::ArchivePublished
            {
                super::outbox::advance(&self.root, def, &wf, &mut st)?;
            }
            files::write_state(&self.root, &wf, &st)?;
            super::crash_point("held:after-state");
        }
        let path = match to {
            HeldMove::ArchivePublished => {
                let to = files::archive(&self.root, &f.path, &god, &hid_of(&f)?, &dispatch)?;
                self.repair_tail(&wf, &st)?;
                to
            }
            HeldMove::ToInbox => {
                let to = self.root.inbox_dir(&god).join(format!("{hid}.json"));
                write_json(&self.root, &to, &dispatch)?;
                if f.path != to {
                    files::remove_file(&self.root, &f.path)?;
                }
                to
            }
            HeldMove::ArchiveRejected => {
                files::archive(&self.root, &f.path, &god, &hid_of(&f)?, &dispatch)?
            }
        };
        Ok(ApprovalResult {
            status: if reject.is_some() {
                ApprovalStatus::Rejected
            } else {
                ApprovalStatus::Approved
            },
            handoff_id: hid.clone(),
            workflow_id: wf.clone(),
            target_god: god.to_string(),
            target_step: f.dispatch.step.clone(),
            state_status: st.status.clone(),
            dispatch_path: path.display().to_string(),
            by: by_label,
            duplicate: false,
        })
    }

    /// The held dispatch of `hid` when a god moved it out of `_quarantine` into an inbox: the workflow
    /// is still held at its step (the state says so, docs/PROTOCOL.md §2.5), so the operator decides
    /// it where it lies. Refused when the file no longer says what the state holds (another workflow,
    /// step or god): the operator moves it back or aborts the workflow.
    fn moved_held(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        hid: &HandoffId,
    ) -> Result<Option<files::Found>> {
        let Some(h) = super::hold::undecided(st) else {
            return Ok(None);
        };
        if h.handoff_id.is_some_and(|held| held != hid.as_str()) {
            return Ok(None);
        }
        let first = h.god.and_then(|g| GodName::parse(g).ok());
        let Some(f) = files::find_live(&self.root, hid, first.as_ref())? else {
            return Ok(None);
        };
        let same = f.dispatch.workflow_id == wf.as_str()
            && f.dispatch.step == h.step
            && Some(f.dispatch.to_god.as_str()) == h.god;
        if !same {
            return Err(Error::refused(format!(
                "the held dispatch of handoff {hid} was moved by hand to {} and changed: it names \
                 workflow {:?}, step {:?}, god {:?}, while workflow {wf} is held at step {:?} for {}. \
                 Move the original back to conductor/pending/_quarantine/ or abort the workflow",
                f.path.display(),
                f.dispatch.workflow_id,
                f.dispatch.step,
                f.dispatch.to_god,
                h.step,
                h.god.unwrap_or("?")
            )));
        }
        // As a held dispatch is: no delivery yet (the approval starts its clock), whatever the
        // file was given on the way.
        let mut f = f;
        f.dispatch.deliveries.clear();
        f.dispatch.ack_deadline = None;
        Ok(Some(f))
    }

    /// The answer to a decision repeated after the dispatch has moved on, from its `approvals` record.
    fn repeated_decision(
        &self,
        wf: &WorkflowId,
        hid: &HandoffId,
        st: &WorkflowState,
        p: &serde_json::Map<String, Value>,
    ) -> Result<ApprovalResult> {
        let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
        let decision = text("decision");
        let god = GodName::parse(text("target_god"))?;
        let status = if decision == ApprovalStatus::Approved.as_str() {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Rejected
        };
        let path = if status == ApprovalStatus::Approved {
            self.root.inbox_dir(&god).join(format!("{hid}.json"))
        } else {
            self.root.archive_dir(&god).join(format!("{hid}.json"))
        };
        Ok(ApprovalResult {
            status,
            handoff_id: hid.clone(),
            workflow_id: wf.clone(),
            target_god: god.to_string(),
            target_step: text("step").into(),
            state_status: st.status.clone(),
            dispatch_path: path.display().to_string(),
            by: text("by").into(),
            duplicate: true,
        })
    }
}

/// Where an operator's decision sends a held dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldMove {
    /// Approved, and its step publishes: archived as completed (the outbox record carries it on).
    ArchivePublished,
    /// Approved: into its god's inbox, its delivery clock started now.
    ToInbox,
    /// Rejected: archived as rejected.
    ArchiveRejected,
}

/// The pure step of an approval or rejection (see [`held_step`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HeldStep {
    /// The same decision was taken before and the dispatch has left `_quarantine`: its record answers.
    Repeat(serde_json::Map<String, Value>),
    /// Decide now.
    Decide {
        /// The state with the decision recorded, to write (after the outbox advances for an approved
        /// publish step); `None` when the decision is already recorded (a repeat after a crash).
        state: Option<Box<WorkflowState>>,
        /// The dispatch as it is to be written.
        dispatch: Box<Dispatch>,
        /// Where it goes.
        to: HeldMove,
    },
}

/// What [`held_step`] decides from.
pub(crate) struct HeldInput<'a> {
    /// The workflow.
    pub wf: &'a WorkflowId,
    /// The held dispatch's handoff.
    pub hid: &'a HandoffId,
    /// The workflow's state.
    pub st: &'a WorkflowState,
    /// The held dispatch, if it is still in `_quarantine`.
    pub held: Option<&'a Dispatch>,
    /// `None`: approve; else reject, for this reason.
    pub reject: Option<&'a str>,
    /// Who decides.
    pub by_label: &'a str,
    /// True when the step publishes (approved, it is archived as completed).
    pub publishes: bool,
    /// When.
    pub now: DateTime<Utc>,
}

/// The pure step of an operator's decision on a held dispatch. Refuses a decision that differs from
/// one already taken, a dispatch that is not held (and never was), and any decision in an aborted
/// workflow.
pub(crate) fn held_step(input: HeldInput<'_>) -> Result<HeldStep> {
    let HeldInput {
        wf,
        hid,
        st,
        held,
        reject,
        by_label,
        publishes,
        now,
    } = input;
    let decision = if reject.is_some() {
        "rejected"
    } else {
        "approved"
    };
    let prior = prior_decision(st, hid, held);
    // A decision already recorded stands, also while its dispatch is still held (a decision killed
    // between its state and its move: the other decision moved the dispatch against the state).
    if let Some(p) = &prior {
        let did = p
            .get("decision")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if did != decision {
            return Err(Error::refused(format!(
                "held dispatch {hid} was already {did}; that cannot be changed"
            )));
        }
    }
    let Some(held) = held else {
        let Some(p) = prior else {
            return Err(Error::not_found(format!(
                "no dispatch with handoff_id {hid} is held for approval (pantheon pending lists awaiting_approval)"
            )));
        };
        return Ok(HeldStep::Repeat(p));
    };
    if st.status == WorkflowStatus::Aborted {
        return Err(Error::refused(format!(
            "workflow {wf} was aborted; nothing to approve"
        )));
    }
    let god = GodName::parse(&held.to_god)?;
    let now_text = format_ts(now);
    let state = match prior {
        Some(_) => None,
        None => {
            let mut st = st.clone();
            let mut entry = json!({
                "handoff_id": hid.as_str(), "decision": decision, "by": by_label, "at": now_text,
                "target_god": god.as_str(), "step": held.step, "reason": reject,
            });
            if let Some(id) = &held.dispatch_id {
                entry["dispatch_id"] = json!(id);
            }
            let list = st.extra.entry("approvals").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(list) = list.as_array_mut() {
                list.push(entry);
            }
            match reject {
                None => st.status = WorkflowStatus::WaitingForAck,
                Some(r) => {
                    st.status = WorkflowStatus::Failed;
                    st.failure_reason = Some(format!(
                        "held dispatch {hid} to {god} rejected by {by_label}: {r}"
                    ));
                }
            }
            st.updated = Some(now_text.clone());
            Some(Box::new(st))
        }
    };
    let mut d = held.clone();
    d.by = Some(by_label.to_owned());
    let to = match reject {
        None if publishes => {
            d.ack_status = AckStatus::Completed;
            d.archive_reason = Some(format!("approved by {by_label}: published"));
            d.archived_at = Some(now_text);
            HeldMove::ArchivePublished
        }
        None => {
            d.approved_by = Some(by_label.to_string());
            d.approved_at = Some(now_text.to_string());
            if d.deliveries.is_empty()
                && let Some(p) = super::delivery::Policy::of_dispatch(&d)
            {
                // The ack deadline starts when the dispatch reaches the inbox.
                p.stamp(&mut d, now);
            }
            HeldMove::ToInbox
        }
        Some(r) => {
            d.ack_status = AckStatus::Rejected;
            d.archive_reason = Some(format!("held dispatch rejected by {by_label}: {r}"));
            d.archived_at = Some(now_text);
            HeldMove::ArchiveRejected
        }
    };
    Ok(HeldStep::Decide {
        state,
        dispatch: Box::new(d),
        to,
    })
}

/// The decision already recorded on the held dispatch of `hid` (`held`: as it lies, if it still
/// does). A decision is on one held dispatch: a handoff held again later (its reroute held for a
/// budget, with a new dispatch id) is decided anew. Decisions recorded without a dispatch id match
/// any; the newest first, so the repeat of a decision whose dispatch has moved finds that decision. A
/// state still held at the dispatch's step has decided nothing (a decision changes the status in the
/// write that records it), whatever a dispatch file's id says: its file may be forged.
fn prior_decision(
    st: &WorkflowState,
    hid: &HandoffId,
    held: Option<&Dispatch>,
) -> Option<serde_json::Map<String, Value>> {
    if held.is_some_and(|d| super::hold::holds_step(st, &d.step)) {
        return None;
    }
    let held_id = held.and_then(|d| d.dispatch_id.as_deref());
    approvals(st).into_iter().rev().find(|a| {
        a.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str())
            && match (a.get("dispatch_id").and_then(Value::as_str), held_id) {
                (Some(decided), Some(now)) => decided == now,
                _ => true,
            }
    })
}

/// Refuses an operator's approval of a dispatch a pause holds, naming the resume that releases it.
fn refuse_pause_hold(hid: &HandoffId, d: &Dispatch) -> Result<()> {
    let parts = super::pause::pause_parts(d.held_because.as_deref());
    let Some(part) = parts.first() else {
        return Ok(());
    };
    let what = part.trim_start_matches(super::pause::HOLD_PREFIX);
    let flag = match what.split_once(' ') {
        _ if *part == super::pause::BARE_HOLD => {
            "with the pause's selector (`pantheon paused` lists them)".to_owned()
        }
        Some((kind, name)) => format!("--{kind} {name}"),
        None => format!("--{what}"),
    };
    Err(Error::refused(format!(
        "held dispatch {hid} is held by a pause ({part}), not for approval; `pantheon resume {flag}` releases it"
    )))
}

/// The operator decisions on held dispatches recorded in a state (`approvals`).
pub(crate) fn approvals(st: &WorkflowState) -> Vec<serde_json::Map<String, Value>> {
    st.extra
        .get("approvals")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_object().cloned()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn derived_handoff_ids_are_valid_and_stable() {
        let a = AckId::parse("ack_20260614_456").unwrap();
        let h = HandoffId::parse("hof_20260614_abc123").unwrap();
        let x = derived_handoff_id(&a, &h);
        assert_eq!(x, derived_handoff_id(&a, &h));
        assert!(x.as_str().starts_with("hof_20260614_"));
    }

    pub(crate) fn ids() -> (WorkflowId, HandoffId) {
        (
            WorkflowId::parse("wf_held").unwrap(),
            HandoffId::parse("hof_20261201_aaaaaa").unwrap(),
        )
    }

    pub(crate) fn held_state() -> WorkflowState {
        WorkflowState {
            workflow_id: "wf_held".into(),
            status: WorkflowStatus::AwaitingApproval,
            current_step: Some("build".into()),
            dispatched_to: Some("hermes".into()),
            ..Default::default()
        }
    }

    pub(crate) fn held_dispatch() -> Dispatch {
        Dispatch {
            handoff_id: "hof_20261201_aaaaaa".into(),
            workflow_id: "wf_held".into(),
            to_god: "hermes".into(),
            step: "build".into(),
            ack_wait: Some("10m".into()),
            ..Default::default()
        }
    }

    pub(crate) fn at() -> DateTime<Utc> {
        crate::store::time::parse_ts("2026-12-01T12:00:00Z").unwrap()
    }

    fn decide(
        st: &WorkflowState,
        held: Option<&Dispatch>,
        reject: Option<&str>,
        publishes: bool,
    ) -> Result<HeldStep> {
        let (wf, hid) = ids();
        held_step(HeldInput {
            wf: &wf,
            hid: &hid,
            st,
            held,
            reject,
            by_label: "operator",
            publishes,
            now: at(),
        })
    }

    #[test]
    fn approving_records_the_decision_and_sends_the_dispatch_to_the_inbox_with_its_clock_started() {
        let HeldStep::Decide {
            state,
            dispatch,
            to,
        } = decide(&held_state(), Some(&held_dispatch()), None, false).unwrap()
        else {
            panic!("a held dispatch is decided");
        };
        assert_eq!(to, HeldMove::ToInbox);
        let st = state.unwrap();
        assert_eq!(st.status, WorkflowStatus::WaitingForAck);
        let rec = &approvals(&st)[0];
        assert_eq!(rec["decision"], "approved");
        assert_eq!(rec["by"], "operator");
        assert_eq!(rec["target_god"], "hermes");
        assert_eq!(rec["at"], format_ts(at()));
        assert_eq!(dispatch.approved_by.as_deref(), Some("operator"));
        assert_eq!(
            dispatch.deliveries.len(),
            1,
            "the first delivery is stamped"
        );
        assert_eq!(
            dispatch.ack_deadline,
            Some(format_ts(at() + chrono::Duration::minutes(10)))
        );
    }

    #[test]
    fn an_approved_publish_step_is_archived_as_completed() {
        let HeldStep::Decide { dispatch, to, .. } =
            decide(&held_state(), Some(&held_dispatch()), None, true).unwrap()
        else {
            panic!("decided");
        };
        assert_eq!(to, HeldMove::ArchivePublished);
        assert_eq!(dispatch.ack_status, AckStatus::Completed);
        assert_eq!(
            dispatch.archive_reason.as_deref(),
            Some("approved by operator: published")
        );
    }

    #[test]
    fn rejecting_fails_the_workflow_with_the_reason_and_archives_the_dispatch() {
        let HeldStep::Decide {
            state,
            dispatch,
            to,
        } = decide(
            &held_state(),
            Some(&held_dispatch()),
            Some("too risky"),
            false,
        )
        .unwrap()
        else {
            panic!("decided");
        };
        assert_eq!(to, HeldMove::ArchiveRejected);
        let st = state.unwrap();
        assert_eq!(st.status, WorkflowStatus::Failed);
        assert_eq!(
            st.failure_reason.as_deref(),
            Some("held dispatch hof_20261201_aaaaaa to hermes rejected by operator: too risky")
        );
        assert_eq!(approvals(&st)[0]["reason"], "too risky");
        assert_eq!(dispatch.ack_status, AckStatus::Rejected);
    }

    #[test]
    fn repeats_answer_from_the_record_and_a_changed_mind_or_an_unknown_dispatch_is_refused() {
        let HeldStep::Decide {
            state: Some(st), ..
        } = decide(&held_state(), Some(&held_dispatch()), None, false).unwrap()
        else {
            panic!("decided");
        };
        // The dispatch has left the quarantine: the same decision is a repeat, another is refused.
        assert!(matches!(
            decide(&st, None, None, false).unwrap(),
            HeldStep::Repeat(p) if p["decision"] == "approved"
        ));
        let e = decide(&st, None, Some("no"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("was already approved"), "{e}");
        // Still held after a crash: decided again, the state not written twice.
        assert!(matches!(
            decide(&st, Some(&held_dispatch()), None, false).unwrap(),
            HeldStep::Decide { state: None, .. }
        ));
        let e = decide(&held_state(), None, None, false).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }

    #[test]
    fn an_aborted_workflow_takes_no_decision() {
        let mut st = held_state();
        st.status = WorkflowStatus::Aborted;
        let e = decide(&st, Some(&held_dispatch()), None, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("was aborted; nothing to approve"), "{e}");
    }
}
