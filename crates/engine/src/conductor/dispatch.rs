//! The dispatch a recorded state calls for (docs/PROTOCOL.md §2.4): built from the state, the
//! workflow's definition and the handoff the state recorded, written to the god's inbox or held in
//! `_quarantine`. Submit, ack, rerun and publish write it after their commit point; a repeat of any
//! of them writes it when a killed act left it unwritten ([`Conductor::repair_dispatch`]), and
//! `redispatch` writes it again after a foreign cleanup deleted it.

use serde_json::Value;

use super::Conductor;
use super::definition::{WorkflowDef, find_definition};
use super::files;
use super::model::{
    AckStatus, Dispatch, DispatchContext, Handoff, HistoryEntry, Routed, Routing, StepRecord,
    StepStatus, WorkflowState, WorkflowStatus, from_value,
};
use super::results::RedispatchStatus;
use super::submit::stored_handoff;
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::time::now_ts;
use crate::store::{GodName, HandoffId, StepId, WorkflowId, generate_dispatch_id};

impl Conductor {
    /// Writes again the dispatch a workflow `waiting_for_ack` waits on after it vanished from every
    /// inbox (a foreign cleanup deleted it outright), re-derived from the state exactly as crash repair
    /// does ([`Self::repair_dispatch`]). An operator act: refused while any dispatch of the workflow is
    /// in an inbox or `_quarantine`, or when the workflow is not waiting for an ack.
    pub(crate) fn redispatch_unjournaled(
        &self,
        wf: &WorkflowId,
    ) -> Result<super::RedispatchResult> {
        let wf = wf.clone();
        let _lock = files::lock_existing(&self.root, &wf)?;
        let st = files::require_state(&self.root, &wf)?;
        if let Some(request) = st.awaiting_reply()
            && st.status == WorkflowStatus::WaitingForAck
        {
            return Err(Error::refused(format!(
                "workflow {wf} is healthy: it waits at its await_ack step {:?} for the peer's reply to \
                 request {request}, and has no dispatch to write again. The bridge completes the step \
                 when the reply arrives (`pantheon bridge status` shows the request's outbox record); \
                 do not abort it for this",
                st.current_step.as_deref().unwrap_or("?")
            )));
        }
        if st.status != WorkflowStatus::WaitingForAck {
            return Err(Error::refused(format!(
                "workflow {wf} is {}, not waiting_for_ack: there is no dispatch to write again",
                st.status
            )));
        }
        if let Some(open) = self.open_dispatches(&wf).first() {
            return Err(Error::refused(format!(
                "workflow {wf} already has its dispatch at {}; nothing to redispatch",
                open.path.display()
            )));
        }
        let cannot = |why: String| {
            Error::refused(format!(
                "cannot re-derive the dispatch of {wf}: {why}; ack or abort the workflow instead \
                 (pantheon abort {wf} --reason …)"
            ))
        };
        let last = st
            .step_history
            .last()
            .ok_or_else(|| cannot("its state has no step_history".into()))?;
        let hid = last
            .handoff_id
            .as_deref()
            .and_then(|h| HandoffId::parse(h).ok())
            .ok_or_else(|| cannot("its last step has no handoff id".into()))?;
        let god = st
            .dispatched_to
            .as_deref()
            .and_then(|g| GodName::parse(g).ok())
            .ok_or_else(|| cannot("its state names no god in `dispatched_to`".into()))?;
        let step = st.current_step.clone().unwrap_or_default();
        let archived = self.root.archive_dir(&god).join(format!("{hid}.json"));
        if crate::store::read::exists(&archived) {
            return Err(cannot(format!(
                "its dispatch {hid} was closed and archived ({})",
                archived.display()
            )));
        }
        self.repair_dispatch(&wf, &st, &hid)?;
        let path = self.root.inbox_dir(&god).join(format!("{hid}.json"));
        if !crate::store::read::exists(&path) {
            return Err(cannot(format!(
                "its last handoff {hid} did not route to {god}'s step {step:?}, which it waits on"
            )));
        }
        Ok(super::RedispatchResult {
            status: RedispatchStatus::Redispatched,
            workflow_id: wf.clone(),
            handoff_id: hid.clone(),
            to_god: god.to_string(),
            step,
            dispatch_path: path.display().to_string(),
        })
    }

    /// Writes the dispatch the last step record routes to when the engine added that record itself
    /// (a publish or a reply moved the workflow on).
    pub(crate) fn repair_tail(&self, wf: &WorkflowId, st: &WorkflowState) -> Result<()> {
        if let Some(last) = st.step_history.last()
            && (last.extra.contains_key("outbox_id") || last.extra.contains_key("reply_id"))
            && let Some(hid) = &last.handoff_id
            && let Ok(hid) = HandoffId::parse(hid)
        {
            self.repair_dispatch(wf, st, &hid)?;
        }
        Ok(())
    }

    /// Writes the dispatch a recorded handoff routed to, unless it already exists anywhere or the
    /// workflow has moved on since. Safe to call any number of times.
    pub(crate) fn repair_dispatch(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        hid: &HandoffId,
    ) -> Result<()> {
        let Some(last) = st.step_history.last() else {
            return Ok(());
        };
        if last.handoff_id.as_deref() != Some(hid.as_str()) {
            return Ok(());
        }
        let Some(routed) = &last.routed else {
            return Ok(());
        };
        let held = match routed.status.as_str() {
            "dispatched" => false,
            "awaiting_approval" => true,
            _ => return Ok(()),
        };
        let (Some(god), Some(step)) = (&routed.target_god, &routed.target_step) else {
            return Ok(());
        };
        let want_status = if held {
            WorkflowStatus::AwaitingApproval
        } else {
            WorkflowStatus::WaitingForAck
        };
        if st.status != want_status
            || st.current_step.as_deref() != Some(step)
            || st.dispatched_to.as_deref() != Some(god)
        {
            return Ok(());
        }
        let god = GodName::parse(god)?;
        if files::dispatch_exists(&self.root, &god, hid) {
            return Ok(());
        }
        let d = self.build_dispatch(wf, st, last, &god, step, routed)?;
        let path = if held {
            self.root.quarantine_dir().join(format!("{hid}.json"))
        } else {
            self.root.inbox_dir(&god).join(format!("{hid}.json"))
        };
        write_json(&self.root, &path, &d)
    }

    pub(super) fn build_dispatch(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        rec: &StepRecord,
        god: &GodName,
        step: &str,
        routed: &Routed,
    ) -> Result<Dispatch> {
        let hid = rec.handoff_id.clone().unwrap_or_default();
        let step_id = StepId::parse(&rec.step_id)?;
        let handoff: Handoff = stored_handoff(&self.root, wf, &step_id, &HandoffId::parse(&hid)?)
            .1?
            .and_then(|v| from_value(v).ok())
            .unwrap_or_default();
        let history = st
            .step_history
            .iter()
            .filter(|r| r.status == StepStatus::Completed)
            .map(|r| HistoryEntry {
                step: r.step_id.clone(),
                god: r.god.clone(),
                summary: r.summary.clone().unwrap_or_default(),
                extra: Default::default(),
            })
            .collect();
        let held = routed.held_because.is_some();
        // Loaded once: its step gives the dispatch's `step_def` and the delivery policy.
        let def = st
            .definition_id
            .as_deref()
            .and_then(|id| find_definition(&self.root, id).ok().flatten());
        let step_def = def
            .as_ref()
            .and_then(|def| def.step(step))
            .map(super::definition::StepDef::descriptive_keys)
            .unwrap_or_default();
        let carried = carried_context(st, rec, &handoff);
        let traceparent = Some(crate::trace::traceparent_of(
            st.trace_id.as_deref(),
            &st.workflow_id,
            "dispatch",
            &hid,
        ));
        let mut d = Dispatch {
            dispatch_id: Some(generate_dispatch_id()),
            handoff_id: hid,
            workflow_id: wf.to_string(),
            from_god: rec.god.clone(),
            to_god: god.to_string(),
            step: step.to_owned(),
            context: DispatchContext {
                summary: rec.summary.clone().unwrap_or_default(),
                decisions: st.context_bag.decisions.clone(),
                artifacts: st.context_bag.artifacts.clone(),
                open_questions: handoff.context.open_questions.clone(),
                gates_passed: rec.gates_passed.clone(),
                history,
                extra: Default::default(),
            },
            routing: Some(Routing {
                workflow_definition: st.definition_id.clone(),
                workflow_version: st.definition_version.clone(),
                workflow_step: Some(step.to_owned()),
                priority: handoff.routing.and_then(|r| r.priority),
                extra: Default::default(),
            }),
            traceparent,
            dispatched_at: Some(now_ts()),
            ack_status: AckStatus::Unacked,
            held_because: routed.held_because.clone(),
            ..Default::default()
        };
        if let Some(b) = routed.extra.get("budget") {
            d.extra.insert("budget".into(), b.clone());
        }
        let mut omitted = Vec::new();
        d.context.extra = bounded(carried, MAX_CARRIED_CONTEXT, "context.", &mut omitted);
        let step_def = bounded(step_def, MAX_CARRIED_STEP_DEF, "step_def.", &mut omitted);
        if !step_def.is_empty() {
            d.step_def = Some(Value::Object(step_def));
        }
        if !omitted.is_empty() {
            d.omitted = Some(serde_json::json!(omitted));
        }
        if let Some(policy) = self.delivery_policy(def.as_ref(), step, routed) {
            policy.stamp(&mut d, chrono::Utc::now());
            if held {
                // The deadline starts when an operator releases it (approve).
                d.deliveries.clear();
                d.ack_deadline = None;
            }
        }
        Ok(d)
    }

    /// The delivery policy of a dispatch to `step`: the step's (in `def`, the workflow's definition)
    /// or the routing rule's declaration, the root's settings filling in; `None` when no `ack_wait`
    /// applies.
    pub(crate) fn delivery_policy(
        &self,
        def: Option<&WorkflowDef>,
        step: &str,
        routed: &Routed,
    ) -> Option<super::delivery::Policy> {
        let by_rule = match routed.rule.as_deref() {
            Some(rule) => super::rules::load_rules(&self.root)
                .0
                .into_iter()
                .find(|r| r.id == rule)
                .map(|r| r.action.delivery)
                .unwrap_or_default(),
            None => Default::default(),
        };
        let declared = if by_rule.is_empty() {
            def.and_then(|def| def.step(step).map(|s| s.delivery.clone()))
                .unwrap_or_default()
        } else {
            by_rule
        };
        declared.resolve(&self.root.settings)
    }
}

/// The most a dispatch carries of context keys beyond the standard ones: a handoff's limit, so the
/// latest handoff's keys always fit whole; keys kept from the workflow's start come after them.
pub(crate) const MAX_CARRIED_CONTEXT: usize = crate::store::limits::MAX_HANDOFF_BYTES;

/// The most a dispatch carries of a step's descriptive keys (one field's limit).
pub(crate) const MAX_CARRIED_STEP_DEF: usize = crate::store::limits::MAX_FIELD_BYTES;

/// The names a dispatch's `context` gives its own fields: a handoff's key of the same name is not
/// carried over them.
const DISPATCH_CONTEXT_FIELDS: [&str; 6] = [
    "summary",
    "decisions",
    "artifacts",
    "open_questions",
    "gates_passed",
    "history",
];

/// The context keys beyond the standard ones that a dispatch carries, in order: the latest
/// handoff's (an inbound request's `payload` and `nats` among them), then those the workflow kept
/// from its starting handoff (`context.required` / `optional`) that the latest one does not
/// repeat, then, after an `await_ack` step, the peer's `reply` (`{from, status, payload}`).
pub(crate) fn carried_context(
    st: &WorkflowState,
    rec: &StepRecord,
    handoff: &Handoff,
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let kept = st.extra.get("context").and_then(Value::as_object);
    for (k, v) in handoff
        .context
        .extra
        .iter()
        .chain(kept.into_iter().flatten())
    {
        if !DISPATCH_CONTEXT_FIELDS.contains(&k.as_str()) && !v.is_null() && !out.contains_key(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    if rec.extra.contains_key("reply_id") && !out.contains_key("reply") {
        let field = |k: &str| rec.extra.get(k).cloned().unwrap_or(Value::Null);
        out.insert(
            "reply".into(),
            serde_json::json!({"from": field("reply_from"), "status": field("reply_status"),
                               "payload": field("reply_payload")}),
        );
    }
    out
}

/// The entries of `map`, in order, while their JSON stays within `limit` bytes; a key that does not
/// fit is named in `omitted` (with `prefix`) and the ones after it still get their chance.
pub(crate) fn bounded(
    map: serde_json::Map<String, Value>,
    limit: usize,
    prefix: &str,
    omitted: &mut Vec<String>,
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let mut used = 0usize;
    for (k, v) in map {
        let size = crate::store::json_text(&v, false)
            .len()
            .saturating_add(k.len());
        match used.checked_add(size) {
            Some(total) if total <= limit => {
                used = total;
                out.insert(k, v);
            }
            _ => omitted.push(format!("{prefix}{k}")),
        }
    }
    out
}
