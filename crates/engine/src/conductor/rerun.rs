//! `rerun`: start a failed, stalled or completed workflow again from a chosen step, optionally with
//! edited context (docs/PROTOCOL.md §2.11). The state keeps every attempt: the step history is only
//! appended to, and `attempts` records each rerun.

use super::model::RouteStatus;
use crate::journal::{Target, Verb};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Conductor;
use super::definition::find_definition;
use super::files;
use super::model::{Routed, StepRecord, StepStatus, WorkflowState, WorkflowStatus, lenient};
use crate::error::{Error, Result};
use crate::store::time::now_ts;
use crate::store::{GodName, HandoffId, StepId, WorkflowId};

/// `rerun`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RerunResult {
    /// `rerun`.
    pub status: String,
    /// The workflow.
    pub workflow_id: String,
    /// The step dispatched again.
    pub step: String,
    /// Its god.
    pub to_god: String,
    /// The handoff id of the new dispatch.
    pub handoff_id: String,
    /// The workflow's status before the rerun.
    pub previous_status: String,
    /// Which attempt this is (the first run is attempt 1).
    pub attempt: usize,
    /// The new dispatch.
    pub dispatch_path: String,
    /// For a fork (`rerun --as-of`): the moment whose context bag the rerun started from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// A fork: the rerun starts from the context bag the workflow had at a past moment (from the
/// root's history, docs/HISTORY.md) instead of the one it has now.
#[derive(Debug, Clone, PartialEq)]
pub struct AsOf {
    /// The moment, as the journal and the state's `attempts` name it (RFC 3339).
    pub at: String,
    /// The context bag the workflow had then.
    pub context_bag: super::model::ContextBag,
}

/// The next state of a rerun (pure): the record appended, the context edited, the status reset.
#[cfg(test)]
pub(crate) fn rerun_state(
    st: &WorkflowState,
    step: &str,
    god: &str,
    hid: &HandoffId,
    context: Option<&Map<String, Value>>,
    now: &str,
) -> Result<(WorkflowState, usize)> {
    rerun_state_as_of(st, step, god, hid, context, None, now)
}

/// [`rerun_state`], from the context bag of `as_of` when given (a fork), then edited by `context`.
pub(crate) fn rerun_state_as_of(
    st: &WorkflowState,
    step: &str,
    god: &str,
    hid: &HandoffId,
    context: Option<&Map<String, Value>>,
    as_of: Option<&AsOf>,
    now: &str,
) -> Result<(WorkflowState, usize)> {
    if !matches!(
        st.status,
        WorkflowStatus::Failed | WorkflowStatus::Stalled | WorkflowStatus::Completed
    ) {
        return Err(Error::refused(format!(
            "workflow {} is {}; only a failed, stalled or completed workflow is rerun (abort it first, \
             or requeue its dead letter)",
            st.workflow_id, st.status
        )));
    }
    let mut next = st.clone();
    if let Some(a) = as_of {
        next.context_bag = a.context_bag.clone();
    }
    let strings = |v: Option<&Value>| -> Option<Vec<String>> {
        match v? {
            Value::Array(a) => Some(a.iter().cloned().map(lenient::text).collect()),
            Value::String(s) => Some(vec![s.clone()]),
            _ => None,
        }
    };
    let mut summary = match as_of {
        Some(a) => format!(
            "rerun from step {step}, forked from the context of {}",
            a.at
        ),
        None => format!("rerun from step {step}"),
    };
    if let Some(c) = context {
        if let Some(d) = strings(c.get("decisions")) {
            next.context_bag.decisions = d;
        }
        if let Some(a) = strings(c.get("artifacts")) {
            next.context_bag.artifacts = a;
        }
        if let Some(q) = strings(c.get("open_questions")) {
            next.context_bag.open_questions = q;
        }
        if let Some(Value::String(s)) = c.get("summary") {
            summary = s.clone();
        }
    }
    let attempts = next.extra.entry("attempts").or_insert_with(|| json!([]));
    if !attempts.is_array() {
        *attempts = json!([]);
    }
    let list = match attempts.as_array_mut() {
        Some(l) => l,
        None => return Err(Error::refused("attempts is not a list")),
    };
    let mut record = json!({
        "at": now, "from_step": step, "previous_status": st.status.as_str(),
        "failure_reason": st.failure_reason, "handoff_id": hid.as_str(),
        "edited_context": context.is_some(),
    });
    if let Some(a) = as_of {
        record["as_of"] = json!(a.at);
    }
    list.push(record);
    let attempt = list.len() + 1;
    next.step_history.push(StepRecord {
        step_id: step.to_owned(),
        god: "operator".into(),
        status: StepStatus::Rerun,
        completed_at: Some(now.to_owned()),
        summary: Some(summary),
        handoff_id: Some(hid.to_string()),
        routed: Some(Routed {
            status: RouteStatus::Dispatched,
            target_god: Some(god.to_owned()),
            target_step: Some(step.to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    });
    next.status = WorkflowStatus::WaitingForAck;
    next.current_step = Some(step.to_owned());
    next.dispatched_to = Some(god.to_owned());
    next.failure_reason = None;
    next.updated = Some(now.to_owned());
    Ok((next, attempt))
}

impl Conductor {
    /// Reruns `workflow_id` from `step` (unjournaled; see [`Conductor::rerun`]).
    pub(crate) fn rerun_unjournaled(
        &self,
        wf: &WorkflowId,
        step: &StepId,
        context: Option<&Value>,
        as_of: Option<&AsOf>,
    ) -> Result<RerunResult> {
        let step = step.as_str();
        let context = match context {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                return Err(Error::refused(format!(
                    "--context must hold a JSON object (summary, decisions, artifacts, open_questions), found {}",
                    crate::store::read::kind(other)
                )));
            }
        };
        if let Some(c) = context {
            crate::store::limits::check_document(
                "context",
                &Value::Object(c.clone()),
                crate::store::limits::MAX_HANDOFF_BYTES,
            )?;
        }
        let _lock = files::lock_existing(&self.root, wf)?;
        let st = files::require_state(&self.root, wf)?;
        let def_id = st.definition_id.clone().ok_or_else(|| {
            Error::refused(format!(
                "workflow {wf} follows no definition; rerun needs one to know the step's god"
            ))
        })?;
        let def = find_definition(&self.root, &def_id)
            .map_err(|e| {
                Error::refused(format!(
                    "definition {def_id:?} of workflow {wf} does not load: {}",
                    e.message
                ))
            })?
            .ok_or_else(|| {
                Error::not_found(format!("definition {def_id:?} of workflow {wf} is gone"))
            })?;
        let sd = def.step(step).ok_or_else(|| {
            Error::refused(format!(
                "{step:?} is not a step of definition {def_id:?} (steps: {})",
                def.steps
                    .iter()
                    .map(|s| s.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        // A publish or await_ack step is performed by the engine and the bridge: a dispatch to it
        // would sit in an inbox nobody reads while nothing is published or awaited.
        if sd.publish.is_some() || sd.await_ack {
            let before = def
                .step_index(step)
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| def.steps.get(i))
                .map(|s| format!("rerun from {:?}, the step before it", s.id))
                .unwrap_or_else(|| {
                    format!(
                        "start a new workflow with a rule `then: {{dispatch_workflow: {def_id}, \
                         start_at_step: {step}}}`"
                    )
                });
            return Err(Error::refused(format!(
                "step {step:?} of {def_id:?} is {}: the engine performs it when the workflow reaches \
                 it, so no god can be dispatched to it; {before}",
                if sd.publish.is_some() {
                    "a nats_publish step"
                } else {
                    "an await_ack step"
                }
            )));
        }
        let god = GodName::parse(&sd.god)?;
        if let Some(r) = self.finish_interrupted_rerun(wf, &st, step, &god)? {
            return Ok(r);
        }
        let hid = HandoffId::generate();
        let (next, attempt) =
            rerun_state_as_of(&st, step, god.as_str(), &hid, context, as_of, &now_ts())?;
        self.refuse_oversized_dispatch(wf, &next, step, &god)?;
        let path = self.root.inbox_dir(&god).join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[self.root.state_path(wf), path.clone()])?;
        let r = RerunResult {
            status: if as_of.is_some() { "fork" } else { "rerun" }.into(),
            workflow_id: wf.to_string(),
            step: step.to_owned(),
            to_god: god.to_string(),
            handoff_id: hid.to_string(),
            previous_status: st.status.to_string(),
            attempt,
            dispatch_path: path.display().to_string(),
            as_of: as_of.map(|a| a.at.clone()),
        };
        // The intent, before the first write: a kill before the journal entry is journaled by the
        // next pass (a kill before the dispatch is finished by the repeat, which finds it by key).
        self.intend(
            &rerun_key(&r),
            &rerun_act(&r),
            super::intents::Check::Rerun {
                workflow_id: r.workflow_id.clone(),
                handoff_id: r.handoff_id.clone(),
            },
        );
        files::write_state(&self.root, wf, &next)?;
        super::crash_point("rerun:after-state");
        self.repair_dispatch(wf, &next, &hid)?;
        Ok(r)
    }

    /// Refuses a rerun whose dispatch (the context bag, edited or forked, and the history it
    /// carries) would be over the limit a submitted handoff has, before anything is written: the
    /// god could not be handed more than a submit could.
    fn refuse_oversized_dispatch(
        &self,
        wf: &WorkflowId,
        next: &WorkflowState,
        step: &str,
        god: &GodName,
    ) -> Result<()> {
        let Some(rec) = next.step_history.last() else {
            return Ok(());
        };
        let Some(routed) = &rec.routed else {
            return Ok(());
        };
        let d = self.build_dispatch(wf, next, rec, god, step, routed)?;
        let len = serde_json::to_vec(&d).map_or(usize::MAX, |v| v.len());
        let max = crate::store::limits::MAX_HANDOFF_BYTES;
        if len > max {
            return Err(Error::refused(format!(
                "the rerun's dispatch to {god} would be {len} bytes, over the {max}-byte limit of a \
                 handoff; nothing was written: give a smaller --context (put large content in a file \
                 and list it in artifacts)"
            )));
        }
        Ok(())
    }

    /// The repeat of a rerun of `step` killed between its state and its dispatch: the state already
    /// records the rerun (its last step record and attempt name the new handoff) but no dispatch of
    /// that handoff exists. Writes the dispatch and answers as the first run would have; `None` when
    /// the state shows no such interrupted rerun.
    fn finish_interrupted_rerun(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        step: &str,
        god: &GodName,
    ) -> Result<Option<RerunResult>> {
        let Some(last) = st.step_history.last() else {
            return Ok(None);
        };
        let Some(hid) = last
            .handoff_id
            .as_deref()
            .and_then(|h| HandoffId::parse(h).ok())
        else {
            return Ok(None);
        };
        let attempts = st
            .extra
            .get("attempts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some(record) = attempts.last() else {
            return Ok(None);
        };
        let interrupted = st.status == WorkflowStatus::WaitingForAck
            && last.status == StepStatus::Rerun
            && last.god == "operator"
            && last.step_id == step
            && st.current_step.as_deref() == Some(step)
            && st.dispatched_to.as_deref() == Some(god.as_str())
            && record.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str())
            && record.get("from_step").and_then(Value::as_str) == Some(step)
            && !files::dispatch_exists(&self.root, god, &hid);
        if !interrupted {
            return Ok(None);
        }
        self.repair_dispatch(wf, st, &hid)?;
        let path = self.root.inbox_dir(god).join(format!("{hid}.json"));
        Ok(Some(RerunResult {
            status: "rerun".into(),
            workflow_id: wf.to_string(),
            step: step.to_owned(),
            to_god: god.to_string(),
            handoff_id: hid.to_string(),
            previous_status: record
                .get("previous_status")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            attempt: attempts.len() + 1,
            dispatch_path: path.display().to_string(),
            as_of: record
                .get("as_of")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }))
    }

    /// Reruns a failed, stalled or completed workflow from `step`, with `context` (a JSON object of
    /// `summary`, `decisions`, `artifacts`, `open_questions`) replacing those of the context bag. An
    /// operator act, journaled.
    pub fn rerun(
        &self,
        workflow_id: &WorkflowId,
        step: &StepId,
        context: Option<&Value>,
    ) -> Result<RerunResult> {
        let r = self.rerun_unjournaled(workflow_id, step, context, None)?;
        let intent = self.intent_of(&rerun_key(&r));
        self.journal_intent(intent, rerun_act(&r));
        self.retire_superseded(&r);
        Ok(r)
    }

    /// A fork: [`Conductor::rerun`] starting from the context bag the workflow had at `as_of.at`
    /// (read from the root's history by the caller), then edited by `context`. Journaled as a
    /// `rerun` whose status is `fork` and whose targets name the moment (`as_of`).
    pub fn rerun_as_of(
        &self,
        workflow_id: &WorkflowId,
        step: &StepId,
        context: Option<&Value>,
        as_of: &AsOf,
    ) -> Result<RerunResult> {
        let r = self.rerun_unjournaled(workflow_id, step, context, Some(as_of))?;
        let intent = self.intent_of(&rerun_key(&r));
        self.journal_intent(intent, rerun_act(&r));
        self.retire_superseded(&r);
        Ok(r)
    }

    /// The dead letters of a rerun workflow end: its new dispatch supersedes them (retired, each
    /// journaled naming the rerun's handoff). One that cannot be moved now stays listed, and its
    /// requeue is still refused while the newer dispatch is open.
    fn retire_superseded(&self, r: &RerunResult) {
        let Ok(wf) = WorkflowId::parse(&r.workflow_id) else {
            return;
        };
        let reason = format!(
            "superseded by {}, the rerun's dispatch of step {}",
            r.handoff_id, r.step
        );
        // Each retirement is journaled through its own intent; one that fails stays listed.
        let _ = self.retire_dead_of(&wf, &reason, Some(&r.handoff_id));
    }
}

/// The intent key of a rerun: one per workflow and attempt, the same for its repeat.
fn rerun_key(r: &RerunResult) -> String {
    format!("rerun-{}-{}", r.workflow_id, r.attempt)
}

/// The journal entry of a rerun.
fn rerun_act(r: &RerunResult) -> crate::journal::Act {
    crate::journal::Act::new(Verb::Rerun, r.status.clone())
        .workflow(&r.workflow_id)
        .handoff(&r.handoff_id)
        .target(Target::Step, Some(&r.step))
        .target(Target::ToGod, Some(&r.to_god))
        .target(Target::Attempt, Some(&r.attempt.to_string()))
        .target(Target::AsOf, r.as_of.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerun_appends_and_edits_the_context() {
        let st = WorkflowState {
            workflow_id: "wf_x".into(),
            status: WorkflowStatus::Stalled,
            failure_reason: Some("no ack".into()),
            ..Default::default()
        };
        let hid = HandoffId::parse("hof_20260101_abcdef").unwrap();
        let ctx = json!({"decisions": ["use B"]});
        let (next, attempt) =
            rerun_state(&st, "build", "hephaestus", &hid, ctx.as_object(), "t").unwrap();
        assert_eq!(attempt, 2);
        assert_eq!(next.status, WorkflowStatus::WaitingForAck);
        assert_eq!(next.context_bag.decisions, vec!["use B".to_string()]);
        assert_eq!(next.step_history.len(), 1);
        assert_eq!(next.extra["attempts"][0]["previous_status"], "stalled");
        let running = WorkflowState {
            status: WorkflowStatus::WaitingForAck,
            ..Default::default()
        };
        assert!(rerun_state(&running, "build", "h", &hid, None, "t").is_err());
    }
}
