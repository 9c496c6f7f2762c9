//! `ack_handoff` (docs/PROTOCOL.md §2.5) and the operator's approval or rejection of held dispatches.
//!
//! An ack commits by appending to the state's `acks`; moving the dispatch (archive, reroute, next
//! step) follows and is re-run when the same ack is repeated, so a crash is repaired by repeating it.

use serde_json::{Value, json};

use super::definition::find_definition;
use super::files::{self, Found, Place};
use super::model::{AckRecord, AckStatus, WorkflowState, WorkflowStatus, lenient};
use super::submit::{AckCommit, hid_of, name_violations, validate_handoff};
use super::{AckResult, Actor, ApprovalResult, Conductor};
use crate::error::{Error, Result, Violation};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::time::now_ts;
use crate::store::{AckId, GodName, HandoffId, WorkflowId};

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
        let mut god = GodName::parse(&found.dispatch.to_god)?;
        // A redelivered dispatch may be acked by any god it was delivered to while it is open; the
        // ack makes that god its addressee (docs/PROTOCOL.md §2.10).
        let addressee_before = god.clone();
        if let Actor::God(g) = &by
            && g != god.as_str()
            && Self::may_ack(&found, g)
        {
            god = GodName::parse(g)?;
        }
        if let Actor::God(g) = &by
            && g != god.as_str()
        {
            return Err(Error::refused(format!(
                "handoff {} is addressed to {god}; {g} cannot acknowledge it",
                a.hid
            )));
        }
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
        let mut d = found.dispatch.clone();
        d.ack_deadline = super::delivery::deadline_after_ack(
            &d,
            &a.status,
            a.eta.as_deref(),
            chrono::Utc::now(),
        );
        d.to_god = god.to_string();
        d.ack_status = a.status.clone();
        d.eta = a.eta.clone().or(d.eta);
        d.message = a.message.clone().or(d.message);
        d.acked_at = rec.acked_at.clone();
        d.by = rec.by.clone();
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
                rec.rerouted_to = fallback.clone();
                st.acks.push(rec.clone());
                match &fallback {
                    _ if !is_current => warnings.push(format!(
                        "handoff {} is not the workflow's current dispatch; the workflow status is unchanged",
                        a.hid
                    )),
                    Some(fb) => {
                        st.dispatched_to = Some(fb.clone());
                        st.status = WorkflowStatus::WaitingForAck;
                    }
                    None => {
                        st.status = WorkflowStatus::Failed;
                        st.failure_reason = Some(a.message.clone().unwrap_or_else(|| {
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
                d.archived_at = Some(now.clone());
                st.updated = Some(now);
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
        handoff_id: &str,
        by: Actor,
    ) -> Result<ApprovalResult> {
        self.decide_held(handoff_id, None, by)
    }

    /// Refuses a held dispatch: it is archived as rejected and the workflow `failed` (an operator act).
    pub(crate) fn reject_held_unjournaled(
        &self,
        handoff_id: &str,
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
        handoff_id: &str,
        reject: Option<&str>,
        by: Actor,
    ) -> Result<ApprovalResult> {
        let hid = HandoffId::parse(handoff_id)?;
        let decision = if reject.is_some() {
            "rejected"
        } else {
            "approved"
        };
        let wf = self.workflow_of(&hid)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let mut st = files::require_state(&self.root, &wf)?;
        let prior = approvals(&st)
            .into_iter()
            .find(|a| a.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str()));
        let held = files::in_quarantine(&self.root, &hid)?;
        let Some(f) = held else {
            if let Some(p) = prior {
                let did = p
                    .get("decision")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if did != decision {
                    return Err(Error::refused(format!(
                        "held dispatch {hid} was already {did}; that cannot be changed"
                    )));
                }
                let target = p
                    .get("target_god")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let god = GodName::parse(target)?;
                let path = if decision == "approved" {
                    self.root.inbox_dir(&god).join(format!("{hid}.json"))
                } else {
                    self.root.archive_dir(&god).join(format!("{hid}.json"))
                };
                return Ok(ApprovalResult {
                    status: decision.into(),
                    handoff_id: hid.to_string(),
                    workflow_id: wf.to_string(),
                    target_god: target.into(),
                    target_step: p
                        .get("step")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                    state_status: st.status.clone(),
                    dispatch_path: path.display().to_string(),
                    by: p
                        .get("by")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                    duplicate: true,
                });
            }
            return Err(Error::not_found(format!(
                "no dispatch with handoff_id {hid} is held for approval (pantheon pending lists awaiting_approval)"
            )));
        };
        if st.status == WorkflowStatus::Aborted {
            return Err(Error::refused(format!(
                "workflow {wf} was aborted; nothing to approve"
            )));
        }
        let god = GodName::parse(&f.dispatch.to_god)?;
        let by_label = by.label("operator");
        let now = now_ts();
        let publish_def = match st.definition_id.as_deref() {
            Some(id) => super::definition::find_definition(&self.root, id)
                .ok()
                .flatten()
                .filter(|d| {
                    d.step(&f.dispatch.step)
                        .is_some_and(|s| s.publish.is_some())
                }),
            None => None,
        };
        files::refuse_unconfined(
            &self.root,
            &[
                self.root.state_path(&wf),
                f.path.clone(),
                match reject {
                    None => self.root.inbox_dir(&god).join(format!("{hid}.json")),
                    Some(_) => self.root.archive_dir(&god).join(format!("{hid}.json")),
                },
            ],
        )?;
        if prior.is_none() {
            let entry = json!({
                "handoff_id": hid.as_str(), "decision": decision, "by": by_label, "at": now,
                "target_god": god.as_str(), "step": f.dispatch.step, "reason": reject,
            });
            let list = st.extra.entry("approvals").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            list.as_array_mut().expect("array").push(entry);
            match reject {
                None => {
                    st.status = WorkflowStatus::WaitingForAck;
                    if let Some(def) = &publish_def {
                        super::outbox::advance(&self.root, def, &wf, &mut st)?;
                    }
                }
                Some(r) => {
                    st.status = WorkflowStatus::Failed;
                    st.failure_reason = Some(format!(
                        "held dispatch {hid} to {god} rejected by {by_label}: {r}"
                    ));
                }
            }
            st.updated = Some(now.clone());
            files::write_state(&self.root, &wf, &st)?;
        }
        let mut d = f.dispatch.clone();
        d.by = Some(by_label.clone());
        let path = match reject {
            None if publish_def.is_some() => {
                d.ack_status = AckStatus::Completed;
                d.archive_reason = Some(format!("approved by {by_label}: published"));
                d.archived_at = Some(now);
                let to = files::archive(&self.root, &f.path, &god, &hid_of(&f)?, &d)?;
                self.repair_tail(&wf, &st)?;
                to
            }
            None => {
                d.extra.insert("approved_by".into(), json!(by_label));
                d.extra.insert("approved_at".into(), json!(now));
                if d.deliveries.is_empty()
                    && let Some(p) = super::delivery::Policy::of_dispatch(&d)
                {
                    // The ack deadline starts when the dispatch reaches the inbox.
                    p.stamp(&mut d, chrono::Utc::now());
                }
                let to = self.root.inbox_dir(&god).join(format!("{hid}.json"));
                write_json(&self.root, &to, &d)?;
                files::remove_file(&self.root, &f.path)?;
                to
            }
            Some(r) => {
                d.ack_status = AckStatus::Rejected;
                d.archive_reason = Some(format!("held dispatch rejected by {by_label}: {r}"));
                d.archived_at = Some(now);
                files::archive(&self.root, &f.path, &god, &hid_of(&f)?, &d)?
            }
        };
        Ok(ApprovalResult {
            status: decision.into(),
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
}
