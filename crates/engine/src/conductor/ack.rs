//! `ack_handoff` (docs/PROTOCOL.md §2.5) and the operator's approval or rejection of held dispatches.
//!
//! An ack commits by appending to the state's `acks`; moving the dispatch (archive, reroute, next
//! step) follows and is re-run when the same ack is repeated, so a crash is repaired by repeating it.

use serde_json::{Value, json};

use super::definition::find_definition;
use super::files::{self, Found, Place};
use super::model::{AckRecord, AckStatus, Dispatch, WorkflowState, WorkflowStatus, lenient};
use super::submit::{AckCommit, hid_of, name_violations, validate_handoff};
use super::{AckResult, Actor, ApprovalResult, Conductor};
use crate::error::{Error, Result, Violation};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::time::{format_ts, now_ts};
use crate::store::{AckId, GodName, HandoffId, WorkflowId};
use chrono::{DateTime, Utc};

/// A parsed, validated ack.
struct Ack {
    ack_id: AckId,
    hid: HandoffId,
    wf: Option<WorkflowId>,
    status: AckStatus,
    eta: Option<String>,
    message: Option<String>,
    context: serde_json::Map<String, Value>,
}

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

fn validate_ack(c: &Conductor, v: &Value) -> Result<Ack> {
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
    let status = AckStatus::parse(v.get("status").and_then(Value::as_str).unwrap_or(""));
    if !matches!(
        status,
        AckStatus::Accepted | AckStatus::Pending | AckStatus::Rejected | AckStatus::Completed
    ) {
        extra.push(Violation {
            pointer: "/status".into(),
            message: "must be one of accepted, pending, rejected, completed".into(),
        });
    }
    for x in extra {
        if !violations.iter().any(|s| s.pointer == x.pointer) {
            violations.push(x);
        }
    }
    if !violations.is_empty() {
        return Err(Error::invalid("ack", violations));
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    Ok(Ack {
        ack_id: AckId::parse(s("ack_id"))?,
        hid: HandoffId::parse(s("handoff_id"))?,
        wf: match v.get("workflow_id").and_then(Value::as_str) {
            Some(w) => Some(WorkflowId::parse(w)?),
            None => None,
        },
        status,
        eta: opt_text(v, "eta"),
        message: opt_text(v, "message"),
        context: v
            .get("context")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

fn unknown_handoff(hid: &HandoffId) -> Error {
    Error::not_found(format!(
        "unknown handoff {hid}: no dispatch for it in any inbox, the quarantine or the archive \
         (pantheon pending lists the open ones)"
    ))
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

/// The god an ack counts for: the dispatch's addressee, or, for an open dispatch redelivered to other
/// gods, whichever of them acks (it becomes the addressee, docs/PROTOCOL.md §2.10). An operator acts for
/// the addressee. Refuses a god the dispatch was never delivered to.
fn ack_addressee(found: &Found, by: &Actor, hid: &HandoffId) -> Result<GodName> {
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
fn dispatch_after_ack(
    before: &Dispatch,
    a: &Ack,
    rec: &AckRecord,
    god: &GodName,
    now: DateTime<Utc>,
) -> Dispatch {
    let mut d = before.clone();
    d.ack_deadline = super::delivery::deadline_after_ack(&d, &a.status, a.eta.as_deref(), now);
    d.to_god = god.to_string();
    d.ack_status = a.status.clone();
    d.eta = a.eta.clone().or(d.eta);
    d.message = a.message.clone().or(d.message);
    d.acked_at = rec.acked_at.clone();
    d.by = rec.by.clone();
    d
}

/// What a `rejected` ack commits (see [`rejected`]).
struct RejectStep {
    state: WorkflowState,
    dispatch: Dispatch,
    record: AckRecord,
    warnings: Vec<String>,
}

/// The pure step of a `rejected` ack: the ack is recorded with the fallback god it reroutes to; the
/// workflow waits for that god, or fails (with the god's message as the reason) when no fallback is
/// left. An ack of a dispatch that is not the workflow's current one changes no status (a warning says
/// so). The dispatch is marked for the archive with why.
#[allow(clippy::too_many_arguments)] // each is one input of the one commit; a struct would only rename them
fn rejected(
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

impl Conductor {
    /// Finds the workflow a handoff's dispatch belongs to, from the inboxes, quarantine or archive.
    fn workflow_of(&self, hid: &HandoffId) -> Result<WorkflowId> {
        let found = match files::find_live(&self.root, hid, None)? {
            Some(f) => Some(f),
            None => files::find_archived(&self.root, hid, None)?
                .into_iter()
                .next(),
        };
        let f = found.ok_or_else(|| unknown_handoff(hid))?;
        WorkflowId::parse(&f.dispatch.workflow_id)
    }

    /// Acknowledges a dispatch (docs/PROTOCOL.md §2.5). `by` is recorded in the ack (`Actor::Recipient`: the god
    /// the dispatch is addressed to).
    pub(crate) fn ack_unjournaled(&self, ack: &Value, by: Actor) -> Result<AckResult> {
        crate::store::limits::check_document("ack", ack, crate::store::limits::MAX_ACK_BYTES)?;
        let a = validate_ack(self, ack)?;
        let wf = match &a.wf {
            Some(w) => w.clone(),
            None => self.workflow_of(&a.hid)?,
        };
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let mut st = files::require_state(&self.root, &wf)?;

        if let Some(prev) = st
            .acks
            .iter()
            .find(|r| r.ack_id == a.ack_id.as_str())
            .cloned()
        {
            if prev.handoff_id == a.hid.as_str() && prev.status == a.status {
                if st.status != WorkflowStatus::Aborted {
                    self.finish_ack(&wf, &st, &prev)?;
                }
                let st = files::require_state(&self.root, &wf)?;
                return Ok(self.ack_result(&wf, &st, &prev, true, None));
            }
            return Err(Error::refused(format!(
                "ack_id {} was already used for handoff {} with status {}; a new ack needs a new ack_id",
                a.ack_id, prev.handoff_id, prev.status
            )));
        }
        if let Some(e) = finished_refusal(&wf, &st) {
            return Err(e);
        }
        if let Some(last) = st.step_history.last().and_then(|r| r.handoff_id.clone())
            && let Ok(last) = HandoffId::parse(&last)
        {
            self.repair_dispatch(&wf, &st, &last)?;
        }

        let current_god = st
            .dispatched_to
            .as_deref()
            .and_then(|g| GodName::parse(g).ok());
        let (found, was_accepted) = match files::find_live(
            &self.root,
            &a.hid,
            current_god.as_ref(),
        )? {
            Some(f) if f.place == Place::Quarantine => {
                return Err(Error::refused(format!(
                    "handoff {} is held for operator approval ({}); approve it first (pantheon approve {})",
                    a.hid,
                    f.dispatch
                        .held_because
                        .as_deref()
                        .unwrap_or("approval required"),
                    a.hid
                )));
            }
            Some(f) => (f, false),
            None => {
                let archived = files::find_archived(&self.root, &a.hid, current_god.as_ref())?;
                let Some(f) = archived.into_iter().next() else {
                    return Err(unknown_handoff(&a.hid));
                };
                let current = Some(f.dispatch.to_god.as_str()) == st.dispatched_to.as_deref();
                if f.dispatch.ack_status == AckStatus::Accepted && current {
                    (f, true)
                } else if f.dispatch.ack_status == a.status {
                    let rec = self.record(&a, &f.dispatch.to_god, &by, None);
                    return Ok(self.ack_result(&wf, &st, &rec, true, None));
                } else {
                    return Err(Error::refused(format!(
                        "handoff {} to {} is already {} ({}); an ack cannot change that",
                        a.hid,
                        f.dispatch.to_god,
                        f.dispatch.ack_status,
                        f.dispatch.archive_reason.as_deref().unwrap_or("archived")
                    )));
                }
            }
        };
        if found.dispatch.workflow_id != wf.as_str() {
            return Err(Error::refused(format!(
                "handoff {} belongs to workflow {:?}, not {wf}",
                a.hid, found.dispatch.workflow_id
            )));
        }
        let addressee_before = GodName::parse(&found.dispatch.to_god)?;
        let god = ack_addressee(&found, &by, &a.hid)?;
        // A workflow may have several open dispatches (parallel direct handoffs); only an ack of the
        // one the state points at moves the workflow's status.
        let is_current = st.current_step.as_deref() == Some(found.dispatch.step.as_str())
            && st.dispatched_to.as_deref() == Some(addressee_before.as_str());
        if is_current && god != addressee_before {
            st.dispatched_to = Some(god.to_string());
        }
        if was_accepted {
            match a.status {
                AckStatus::Accepted => {
                    let rec = self.record(&a, god.as_str(), &by, None);
                    return Ok(self.ack_result(&wf, &st, &rec, true, None));
                }
                AckStatus::Pending => {
                    // A progress ack on an accepted step with a timeout (docs/PROTOCOL.md §2.10).
                    let rec = self.record(&a, god.as_str(), &by, None);
                    let deadline =
                        self.step_progress(&wf, &mut st, &found, &rec, a.eta.as_deref())?;
                    let mut result = self.ack_result(&wf, &st, &rec, false, None);
                    result.deadline = Some(deadline);
                    result.deadline_kind = Some("step_timeout".to_owned());
                    return Ok(result);
                }
                _ => {}
            }
        }

        let mut rec = self.record(&a, god.as_str(), &by, None);
        let mut d = dispatch_after_ack(&found.dispatch, &a, &rec, &god, chrono::Utc::now());
        let now = now_ts();
        let mut warnings = Vec::new();
        let mut step_deadline = None;
        if a.status != AckStatus::Completed {
            // (completed goes through the submit path, which checks its own files.)
            files::refuse_unconfined(
                &self.root,
                &[
                    self.root.state_path(&wf),
                    found.path.clone(),
                    self.root.archive_dir(&god).join(format!("{}.json", a.hid)),
                ],
            )?;
        }
        match a.status {
            AckStatus::Pending => {
                st.acks.push(rec.clone());
                st.updated = Some(now);
                files::write_state(&self.root, &wf, &st)?;
                write_json(&self.root, &found.path, &d)?;
                if god != addressee_before {
                    // An earlier target took it back: the dispatch follows it to its inbox.
                    let to = self.root.inbox_dir(&god).join(format!("{}.json", a.hid));
                    crate::store::atomic::rename_durable(&self.root, &found.path, &to)?;
                }
            }
            AckStatus::Accepted => {
                if is_current {
                    st.status = WorkflowStatus::InProgress;
                }
                step_deadline = self.arm_step_timer(&mut d, &god, chrono::Utc::now())?;
                st.acks.push(rec.clone());
                st.updated = Some(now);
                files::write_state(&self.root, &wf, &st)?;
                super::crash_point("ack:after-state");
                files::archive(&self.root, &found.path, &god, &a.hid, &d)?;
            }
            AckStatus::Rejected => {
                let fallback = self.next_fallback(&st, &found, &a.hid, &mut warnings);
                if let Some(fb) = &fallback {
                    let fb = GodName::parse(fb)?;
                    files::refuse_unconfined(
                        &self.root,
                        &[self.root.inbox_dir(&fb).join(format!("{}.json", a.hid))],
                    )?;
                }
                let step = rejected(
                    st,
                    d,
                    rec,
                    fallback,
                    is_current,
                    &god,
                    a.message.as_deref(),
                    &now,
                );
                (st, d, rec) = (step.state, step.dispatch, step.record);
                warnings.extend(step.warnings);
                files::write_state(&self.root, &wf, &st)?;
                super::crash_point("ack:after-state");
                files::archive(&self.root, &found.path, &god, &a.hid, &d)?;
                self.finish_ack(&wf, &st, &rec)?;
            }
            AckStatus::Completed => {
                return self.ack_completed(&wf, st, a, rec, found, d, god);
            }
            _ => unreachable!("validated"),
        }
        let mut result = self.ack_result(&wf, &st, &rec, false, None);
        result.warnings = warnings;
        match a.status {
            AckStatus::Pending => {
                result.deadline = d.ack_deadline.clone();
                result.deadline_kind = d.ack_deadline.as_ref().map(|_| "ack".to_owned());
            }
            AckStatus::Accepted => {
                result.deadline = step_deadline;
                result.deadline_kind = result.deadline.as_ref().map(|_| "step_timeout".to_owned());
            }
            _ => {}
        }
        Ok(result)
    }

    fn record(&self, a: &Ack, god: &str, by: &Actor, rerouted: Option<String>) -> AckRecord {
        AckRecord {
            ack_id: a.ack_id.to_string(),
            handoff_id: a.hid.to_string(),
            god: Some(god.to_owned()),
            status: a.status.clone(),
            eta: a.eta.clone(),
            message: a.message.clone(),
            acked_at: Some(now_ts()),
            by: Some(by.label(god)),
            recorded_handoff_id: None,
            rerouted_to: rerouted,
            extra: Default::default(),
        }
    }

    /// The first of the step's `fallback_gods` that has not yet had (and rejected) this handoff.
    fn next_fallback(
        &self,
        st: &WorkflowState,
        found: &Found,
        hid: &HandoffId,
        warnings: &mut Vec<String>,
    ) -> Option<String> {
        let def_id = st.definition_id.as_deref()?;
        let def = match find_definition(&self.root, def_id) {
            Ok(Some(d)) => d,
            Ok(None) => {
                warnings.push(format!(
                    "definition {def_id:?} not found; no fallback gods known"
                ));
                return None;
            }
            Err(e) => {
                warnings.push(format!(
                    "definition {def_id:?} does not load: {}",
                    e.message
                ));
                return None;
            }
        };
        let step = def.step(&found.dispatch.step)?;
        let mut tried: Vec<&str> = vec![found.dispatch.to_god.as_str()];
        tried.extend(
            st.acks
                .iter()
                .filter(|r| r.handoff_id == hid.as_str() && r.status == AckStatus::Rejected)
                .filter_map(|r| r.god.as_deref()),
        );
        step.fallback_gods
            .iter()
            .find(|g| !tried.contains(&g.as_str()))
            .cloned()
    }

    #[allow(clippy::too_many_arguments)]
    fn ack_completed(
        &self,
        wf: &WorkflowId,
        st: WorkflowState,
        a: Ack,
        mut rec: AckRecord,
        found: Found,
        mut d: super::model::Dispatch,
        god: GodName,
    ) -> Result<AckResult> {
        let new_hid = derived_handoff_id(&a.ack_id, &a.hid);
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
            .submit_locked(wf, h, raw, Some(st), warnings, Some(commit), None)
            .map_err(|e| match e {
                Error::Invalid { what, violations } => Error::Invalid {
                    what: format!("{what}; for a completed ack put them in the ack's `context`"),
                    violations,
                },
                other => other,
            })?;
        let st = files::require_state(&self.root, wf)?;
        Ok(self.ack_result(wf, &st, &rec, false, Some(next)))
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
            let mut d = f.dispatch.clone();
            d.ack_status = rec.status.clone();
            d.eta = rec.eta.clone().or(d.eta);
            d.message = rec.message.clone().or(d.message);
            d.acked_at = rec.acked_at.clone();
            d.by = rec.by.clone();
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
                let mut d = old.dispatch;
                d.dispatch_id = Some(crate::store::generate_dispatch_id());
                d.to_god = fb.to_string();
                d.ack_status = AckStatus::Unacked;
                d.dispatched_at = Some(now_ts());
                d.extra.insert("rerouted_from".into(), json!(god.as_str()));
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

    fn ack_result(
        &self,
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
        let hid = hid.clone();
        let wf = self.workflow_of(&hid)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let mut st = files::require_state(&self.root, &wf)?;
        let held = files::in_quarantine(&self.root, &hid)?;
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
        let step = held_step(
            &wf,
            &hid,
            &st,
            held.as_ref().map(|f| &f.dispatch),
            reject,
            &by_label,
            publish_def.is_some(),
            chrono::Utc::now(),
        )?;
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
        if let Some(new) = state {
            st = *new;
            if let Some(def) = &publish_def
                && to == HeldMove::ArchivePublished
            {
                super::outbox::advance(&self.root, def, &wf, &mut st)?;
            }
            files::write_state(&self.root, &wf, &st)?;
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
                files::remove_file(&self.root, &f.path)?;
                to
            }
            HeldMove::ArchiveRejected => {
                files::archive(&self.root, &f.path, &god, &hid_of(&f)?, &dispatch)?
            }
        };
        Ok(ApprovalResult {
            status: if reject.is_some() {
                "rejected"
            } else {
                "approved"
            }
            .into(),
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            target_god: god.to_string(),
            target_step: f.dispatch.step.clone(),
            state_status: st.status.clone(),
            dispatch_path: path.display().to_string(),
            by: by_label,
            duplicate: false,
        })
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
        let path = if decision == "approved" {
            self.root.inbox_dir(&god).join(format!("{hid}.json"))
        } else {
            self.root.archive_dir(&god).join(format!("{hid}.json"))
        };
        Ok(ApprovalResult {
            status: decision.into(),
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
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

/// The pure step of an operator's decision on a held dispatch: from the state, the held dispatch (if
/// it is still in `_quarantine`), the decision (`reject`: its reason), who decides, whether the step
/// publishes, and `now`. Refuses a decision that differs from one already taken, a dispatch that is
/// not held (and never was), and any decision in an aborted workflow.
#[allow(clippy::too_many_arguments)] // each is one input of the one decision; a struct would only rename them
pub(crate) fn held_step(
    wf: &WorkflowId,
    hid: &HandoffId,
    st: &WorkflowState,
    held: Option<&Dispatch>,
    reject: Option<&str>,
    by_label: &str,
    publishes: bool,
    now: DateTime<Utc>,
) -> Result<HeldStep> {
    let decision = if reject.is_some() {
        "rejected"
    } else {
        "approved"
    };
    let prior = approvals(st)
        .into_iter()
        .find(|a| a.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str()));
    let Some(held) = held else {
        let Some(p) = prior else {
            return Err(Error::not_found(format!(
                "no dispatch with handoff_id {hid} is held for approval (pantheon pending lists awaiting_approval)"
            )));
        };
        let did = p
            .get("decision")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if did != decision {
            return Err(Error::refused(format!(
                "held dispatch {hid} was already {did}; that cannot be changed"
            )));
        }
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
            let entry = json!({
                "handoff_id": hid.as_str(), "decision": decision, "by": by_label, "at": now_text,
                "target_god": god.as_str(), "step": held.step, "reason": reject,
            });
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
            d.extra.insert("approved_by".into(), json!(by_label));
            d.extra.insert("approved_at".into(), json!(now_text));
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

/// The operator decisions on held dispatches recorded in a state (`approvals`).
pub fn approvals(st: &WorkflowState) -> Vec<serde_json::Map<String, Value>> {
    st.extra
        .get("approvals")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_object().cloned()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_handoff_ids_are_valid_and_stable() {
        let a = AckId::parse("ack_20260614_456").unwrap();
        let h = HandoffId::parse("hof_20260614_abc123").unwrap();
        let x = derived_handoff_id(&a, &h);
        assert_eq!(x, derived_handoff_id(&a, &h));
        assert!(x.as_str().starts_with("hof_20260614_"));
    }

    fn ids() -> (WorkflowId, HandoffId) {
        (
            WorkflowId::parse("wf_held").unwrap(),
            HandoffId::parse("hof_20261201_aaaaaa").unwrap(),
        )
    }

    fn held_state() -> WorkflowState {
        WorkflowState {
            workflow_id: "wf_held".into(),
            status: WorkflowStatus::AwaitingApproval,
            current_step: Some("build".into()),
            dispatched_to: Some("hermes".into()),
            ..Default::default()
        }
    }

    fn held_dispatch() -> Dispatch {
        Dispatch {
            handoff_id: "hof_20261201_aaaaaa".into(),
            workflow_id: "wf_held".into(),
            to_god: "hermes".into(),
            step: "build".into(),
            ack_wait: Some("10m".into()),
            ..Default::default()
        }
    }

    fn at() -> DateTime<Utc> {
        crate::store::time::parse_ts("2026-12-01T12:00:00Z").unwrap()
    }

    fn decide(
        st: &WorkflowState,
        held: Option<&Dispatch>,
        reject: Option<&str>,
        publishes: bool,
    ) -> Result<HeldStep> {
        let (wf, hid) = ids();
        held_step(&wf, &hid, st, held, reject, "operator", publishes, at())
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
        assert_eq!(dispatch.extra["approved_by"], "operator");
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

    fn ack(status: AckStatus, eta: Option<&str>, message: Option<&str>) -> Ack {
        let (_, hid) = ids();
        Ack {
            ack_id: AckId::parse("ack_20261201_abc").unwrap(),
            hid,
            wf: None,
            status,
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
        let a = ack(AckStatus::Pending, None, None);
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
            AckStatus::Accepted,
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
}
