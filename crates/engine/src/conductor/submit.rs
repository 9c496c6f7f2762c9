//! `submit_handoff` (docs/PROTOCOL.md §2.1, 2.3, 2.4): validation, gates, routing, recording and dispatch, with
//! idempotent resubmission that repairs a half-finished submit.
//!
//! Write order: the handoff file(s), then the state (the commit point: the handoff is "recorded" once
//! its id is in `step_history`), then the dispatch. Everything after the commit is derived from the
//! state and skipped when already on disk, so a resubmission finishes exactly what a killed submit left.

use serde_json::Value;

use super::definition::{LoadError, WorkflowDef, find_definition};
use super::files;
use super::model::{
    AckRecord, AckStatus, Dispatch, DispatchContext, Handoff, HistoryEntry, Routed, Routing,
    StepRecord, WorkflowState, WorkflowStatus, from_value,
};
use super::rules::{first_match, handoff_event, load_rules};
use super::{Conductor, SubmitResult};
use crate::error::{Error, Result, Violation};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{
    DefinitionId, GodName, HandoffId, Root, StepId, WorkflowId, encode_key, generate_dispatch_id,
};

/// Where a handoff goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// Dispatch `step` to `god`; `hold` names why it waits in `_quarantine`.
    Dispatch {
        god: String,
        step: String,
        hold: Option<String>,
    },
    /// The definition's last step is done.
    Complete,
    /// Nothing to route to (`log_only`).
    Record,
}

/// The routing decision for one handoff.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub target: Target,
    /// The definition the workflow is (now) an instance of.
    pub definition: Option<(String, Option<String>)>,
    pub rule: Option<String>,
    pub warnings: Vec<String>,
}

/// Name checks the engine adds on top of the schema: every value that becomes part of a path.
pub(crate) fn name_violations(v: &Value, fields: &[(&str, &'static str)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (pointer, kind) in fields {
        let Some(Value::String(s)) = v.pointer(pointer) else {
            continue;
        };
        let err = match *kind {
            "handoff_id" => HandoffId::parse(s).err(),
            "workflow_id" => WorkflowId::parse(s).err(),
            "ack_id" => crate::store::AckId::parse(s).err(),
            _ => GodName::parse_as("name", s).err(),
        };
        if let Some(Error::InvalidName { value, pattern, .. }) = err {
            out.push(Violation {
                pointer: (*pointer).to_owned(),
                message: format!("{value:?} must match {pattern}"),
            });
        }
    }
    out
}

fn required_string(v: &Value, pointer: &str, out: &mut Vec<Violation>) {
    if !matches!(v.pointer(pointer), Some(Value::String(s)) if !s.is_empty()) {
        out.push(Violation {
            pointer: pointer.to_owned(),
            message: "required: a non-empty string".into(),
        });
    }
}

/// Validates a handoff (schema + names + the fields the engine needs); returns it parsed.
pub(crate) fn validate_handoff(c: &Conductor, v: &Value) -> Result<(Handoff, Vec<String>)> {
    crate::store::limits::check_document("handoff", v, crate::store::limits::MAX_HANDOFF_BYTES)?;
    let schemas = c.schemas()?;
    let mut violations = schemas.check_handoff(v);
    let mut extra = name_violations(
        v,
        &[
            ("/handoff_id", "handoff_id"),
            ("/workflow_id", "workflow_id"),
            ("/from_god", "god"),
            ("/to_god", "god"),
            ("/step", "step"),
            ("/routing/workflow_definition", "name"),
            ("/routing/workflow_step", "name"),
        ],
    );
    for p in [
        "/handoff_id",
        "/workflow_id",
        "/from_god",
        "/to_god",
        "/step",
    ] {
        required_string(v, p, &mut extra);
    }
    if !matches!(v.get("context"), Some(Value::Object(_))) {
        extra.push(Violation {
            pointer: "/context".into(),
            message: "required: an object with summary, decisions, artifacts".into(),
        });
    }
    // Usage is checked by the engine too, so a root on an older schema (which does not declare it)
    // still bounds it.
    if let Err(v) = crate::cost::usage::of_document(v, "/usage") {
        extra.extend(v);
    }
    for x in extra {
        if !violations.iter().any(|s| s.pointer == x.pointer) {
            violations.push(x);
        }
    }
    if !violations.is_empty() {
        return Err(Error::invalid("handoff (gate `handoff`)", violations));
    }
    let h: Handoff = from_value(v.clone()).map_err(|m| {
        Error::invalid(
            "handoff",
            vec![Violation {
                pointer: String::new(),
                message: m,
            }],
        )
    })?;
    Ok((h, schemas.warning.clone().into_iter().collect()))
}

fn definition(root: &Root, id: &str) -> Result<Option<WorkflowDef>> {
    find_definition(root, id).map_err(|LoadError { path, message }| Error::Corrupt {
        path,
        message: format!("workflow definition does not load: {message}"),
    })
}

fn check_gates(def: &WorkflowDef, h: &Handoff) -> Result<()> {
    let Some(step) = def.step(&h.step) else {
        return Ok(());
    };
    let missing: Vec<&String> = step
        .gates
        .iter()
        .filter(|g| !h.context.gates_passed.contains(g))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        format!("handoff for step {:?} of {:?} (gates)", h.step, def.id),
        missing
            .iter()
            .map(|g| Violation {
                pointer: "/context/gates_passed".into(),
                message: format!(
                    "gate {g:?} declared by step {:?} is not in context.gates_passed; pass it and list it",
                    h.step
                ),
            })
            .collect(),
    ))
}

fn dispatch_to_step(def: &WorkflowDef, step_id: &str, hold_rule: Option<String>) -> Target {
    let step = def.step(step_id).expect("caller checked the step exists");
    let hold = hold_rule.or_else(|| {
        step.approval_required
            .then(|| format!("step {:?} of {:?} requires approval", step.id, def.id))
    });
    Target::Dispatch {
        god: step.god.clone(),
        step: step.id.clone(),
        hold,
    }
}

/// Refuses a handoff that names a `nats_publish` step as the step it completed: only the engine
/// completes such a step, by writing its outbox record for the bridge. Accepting the handoff would
/// mark the message sent while nothing was published (and would step past an approval hold).
fn refuse_publish_step(def: &WorkflowDef, step: &str) -> Result<()> {
    if def.step(step).is_none_or(|s| s.publish.is_none()) {
        return Ok(());
    }
    Err(Error::refused(format!(
        "step {step:?} of {:?} is a nats_publish step: the engine completes it by publishing (an \
         outbox record the bridge sends), so a handoff cannot mark it done. To start {:?} at its \
         publish step, route a handoff of another step there with a rule: `then: {{dispatch_workflow: \
         {}, start_at_step: {step}}}` (docs/PROTOCOL.md 2.3); inside a running workflow, submit the \
         handoff of the step before it and the engine publishes [gate phase_detect]",
        def.id, def.id, def.id
    )))
}

fn unknown_step(def: &WorkflowDef, step: &str, what: &str) -> Error {
    Error::refused(format!(
        "{what} {step:?} is not a step of workflow definition {:?} (steps: {}) [gate phase_detect]",
        def.id,
        def.steps
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Decides where a handoff goes (docs/PROTOCOL.md §2.3). Reads definitions and rules; writes nothing.
pub(crate) fn route(root: &Root, h: &Handoff, state: Option<&WorkflowState>) -> Result<Route> {
    let routing = h.routing.clone().unwrap_or_default();
    let mut warnings = Vec::new();
    let named = routing.workflow_definition.clone();
    let inherited = state.and_then(|s| s.definition_id.clone());
    let def = match (&named, &inherited) {
        (Some(id), _) => {
            DefinitionId::parse(id)?;
            Some(definition(root, id)?.ok_or_else(|| {
                Error::not_found(format!(
                    "routing.workflow_definition {id:?} is not in {} (pantheon workflows lists them)",
                    root.workflows_dir().display()
                ))
            })?)
        }
        (None, Some(id)) => match definition(root, id) {
            Ok(Some(d)) => Some(d),
            Ok(None) => {
                warnings.push(format!(
                    "the workflow's definition {id:?} is not in {}; routed by rules instead",
                    root.workflows_dir().display()
                ));
                None
            }
            Err(e) => return Err(e),
        },
        (None, None) => None,
    };
    if let Some(def) = def {
        if def.step(&h.step).is_none() {
            return Err(unknown_step(&def, &h.step, "step"));
        }
        refuse_publish_step(&def, &h.step)?;
        check_gates(&def, h)?;
        if let (Some(want), Some(have)) = (&routing.workflow_version, &def.version)
            && want != have
        {
            warnings.push(format!(
                "routing.workflow_version {want:?} differs from definition {:?} version {have:?}; the definition on disk is used",
                def.id
            ));
        }
        let target = match &routing.workflow_step {
            Some(s) => {
                if def.step(s).is_none() {
                    return Err(unknown_step(&def, s, "routing.workflow_step"));
                }
                dispatch_to_step(&def, s, None)
            }
            None => match def.next_step(&h.step) {
                Some(next) => dispatch_to_step(&def, &next.id, None),
                None => Target::Complete,
            },
        };
        if let Target::Dispatch { god, step, .. } = &target
            && *god != h.to_god
        {
            warnings.push(format!(
                "to_god {:?} ignored: definition {:?} assigns step {step:?} to {god:?}",
                h.to_god, def.id
            ));
        }
        return Ok(Route {
            target,
            definition: Some((def.id.clone(), def.version.clone())),
            rule: None,
            warnings,
        });
    }
    // An inbound request of the bridge ends at its reply: the handoff back to the peer that sent it
    // (what a `completed` ack records) finishes the workflow; the bridge sends the reply. It is
    // never dispatched to a god named after the peer.
    if let Some(st) = state
        && crate::bridge::inbound_peer(st) == Some(h.to_god.as_str())
    {
        return Ok(Route {
            target: Target::Complete,
            definition: None,
            rule: None,
            warnings,
        });
    }
    let (rules, errors) = load_rules(root);
    for e in &errors {
        warnings.push(format!(
            "rule file {} skipped: {}",
            e.path.display(),
            e.message
        ));
    }
    let context = serde_json::to_value(&h.context).unwrap_or(Value::Null);
    let event = handoff_event(&h.from_god, &h.to_god, &h.workflow_id, &h.step, &context);
    let direct_step = routing
        .workflow_step
        .clone()
        .unwrap_or_else(|| h.step.clone());
    if let Some(rule) = first_match(&rules, &event) {
        let a = &rule.action;
        let hold = a
            .approval_required
            .then(|| format!("rule {:?} requires approval", rule.id));
        let (target, definition) = if let Some(def_id) = &a.dispatch_workflow {
            let def = definition(root, def_id)?.ok_or_else(|| {
                Error::refused(format!(
                    "rule {:?} ({}) dispatches workflow {def_id:?}, which is not in {}; fix the rule or add the definition",
                    rule.id,
                    rule.file.display(),
                    root.workflows_dir().display()
                ))
            })?;
            if def.step(&h.step).is_some() {
                refuse_publish_step(&def, &h.step)?;
                check_gates(&def, h)?;
            }
            let start = match &a.start_at_step {
                Some(s) => {
                    if def.step(s).is_none() {
                        return Err(unknown_step(
                            &def,
                            s,
                            &format!("rule {:?} start_at_step", rule.id),
                        ));
                    }
                    s.clone()
                }
                None => def.steps[0].id.clone(),
            };
            let t = dispatch_to_step(&def, &start, hold);
            if let Target::Dispatch { god, step, .. } = &t
                && *god != h.to_god
            {
                warnings.push(format!(
                    "to_god {:?} ignored: rule {:?} starts {:?} at {step:?}, assigned to {god:?}",
                    h.to_god, rule.id, def.id
                ));
            }
            (t, Some((def.id.clone(), def.version.clone())))
        } else if let Some(god) = &a.dispatch_god {
            let step = a.step.clone().unwrap_or(direct_step);
            (
                Target::Dispatch {
                    god: god.clone(),
                    step,
                    hold,
                },
                None,
            )
        } else if a.log_only {
            (Target::Record, None)
        } else {
            (
                Target::Dispatch {
                    god: h.to_god.clone(),
                    step: direct_step,
                    hold,
                },
                None,
            )
        };
        return Ok(Route {
            target,
            definition,
            rule: Some(rule.id.clone()),
            warnings,
        });
    }
    Ok(Route {
        target: Target::Dispatch {
            god: h.to_god.clone(),
            step: direct_step,
            hold: None,
        },
        definition: None,
        rule: None,
        warnings,
    })
}

/// True when the handoff's `context` carries `key`. The standard fields count too: `summary`,
/// `decisions` and `artifacts` are always there (the `handoff` gate requires them), `open_questions`
/// and `gates_passed` when not empty; so `context.required: [spec_summary, artifacts, decisions]`, as
/// the origin's files write it, is met by a handoff with `spec_summary`.
fn has_context_key(h: &Handoff, key: &str) -> bool {
    match key {
        "summary" | "decisions" | "artifacts" => true,
        "open_questions" => !h.context.open_questions.is_empty(),
        "gates_passed" => !h.context.gates_passed.is_empty(),
        _ => !matches!(h.context.extra.get(key), None | Some(Value::Null)),
    }
}

/// Refuses a handoff that starts a workflow without a key its definition's `context.required` lists.
fn check_required_context(def: &WorkflowDef, h: &Handoff, starting: bool) -> Result<()> {
    let missing: Vec<&String> = def
        .context_required
        .iter()
        .filter(|k| !has_context_key(h, k))
        .collect();
    if starting && !missing.is_empty() {
        return Err(Error::invalid(
            format!("handoff starting workflow {:?}", def.id),
            missing
                .iter()
                .map(|k| Violation {
                    pointer: format!("/context/{k}"),
                    message: format!(
                        "required by the definition's context.required; add context.{k} to the handoff"
                    ),
                })
                .collect(),
        ));
    }
    Ok(())
}

/// Keeps the context keys a definition declares (`context.required` / `optional`) in the state's
/// `context`, so publish templates can use them.
fn keep_context(def: &WorkflowDef, h: &Handoff, st: &mut WorkflowState) {
    if def.context_required.is_empty() && def.context_optional.is_empty() {
        return;
    }
    let kept = st
        .extra
        .entry("context")
        .or_insert_with(|| Value::Object(Default::default()));
    if !kept.is_object() {
        *kept = Value::Object(Default::default());
    }
    let map = kept.as_object_mut().expect("object");
    for k in def.context_required.iter().chain(&def.context_optional) {
        if let Some(v) = h.context.extra.get(k)
            && !v.is_null()
        {
            map.insert(k.clone(), v.clone());
        }
    }
}

fn push_unique(into: &mut Vec<String>, items: &[String]) {
    for i in items {
        if !into.contains(i) {
            into.push(i.clone());
        }
    }
}

fn path_text(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// The path of the file that holds `hid`'s handoff for `step`, if any.
fn stored_handoff_path(
    root: &Root,
    wf: &WorkflowId,
    step: &StepId,
    hid: &HandoffId,
) -> std::path::PathBuf {
    let latest = root.handoff_path(wf, step);
    match read_json(&latest) {
        Ok(Some(v)) if v.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str()) => latest,
        _ => root.handoff_history_path(wf, step, hid),
    }
}

/// Extra work done in the same commit as a handoff recorded on behalf of an ack.
pub(crate) struct AckCommit {
    pub record: AckRecord,
    /// The dispatch the ack closes (archived after the commit).
    pub closes: files::Found,
    pub dispatch_update: Dispatch,
}

/// For a workflow routed by a definition, refuses a new handoff for any step but the one currently
/// dispatched (or, once that step was rejected for good, one that dispatches it again): a late or
/// replayed handoff of an earlier step would otherwise rewind the workflow while the current dispatch
/// stays live. Restarting from an earlier step is an operator's explicit act.
fn refuse_out_of_step(
    wf: &WorkflowId,
    st: &WorkflowState,
    h: &Handoff,
    route: &Route,
) -> Result<()> {
    let (Some(_), Some(current)) = (&route.definition, st.current_step.as_deref()) else {
        return Ok(());
    };
    if h.step == current {
        return Ok(());
    }
    let retries_current = st.status == WorkflowStatus::Failed
        && matches!(&route.target, Target::Dispatch { step, .. } if step == current);
    if retries_current {
        return Ok(());
    }
    Err(Error::refused(format!(
        "workflow {wf} is at step {current:?} (dispatched to {}); a new handoff for step {:?} would \
         fork it. Submit the handoff of step {current:?} when it is done (resubmitting a recorded \
         handoff unchanged is fine)",
        st.dispatched_to.as_deref().unwrap_or("?"),
        h.step
    )))
}

/// Refuses any handoff for a workflow that is aborted or completed.
fn refuse_closed(wf: &WorkflowId, st: &WorkflowState) -> Result<()> {
    match st.status {
        WorkflowStatus::Aborted => Err(Error::refused(format!(
            "workflow {wf} was aborted{}; it takes no more handoffs",
            st.failure_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ))),
        WorkflowStatus::Completed => Err(Error::refused(format!(
            "workflow {wf} is completed; start a new workflow_id for new work"
        ))),
        _ => Ok(()),
    }
}

/// One write (or group of writes) of a submit, in the order the shell applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubmitEffect {
    /// The handoff file (an earlier handoff for the step is kept under its own id).
    WriteHandoff,
    /// A publish step is reached: its outbox record, noted in the state before the commit.
    AdvanceOutbox,
    /// The state: the commit point.
    WriteState,
    /// The dispatch the ack closes goes to the archive.
    ArchiveAcked,
    /// A dispatch made obsolete by this handoff goes to the archive.
    SupersedeStale,
    /// The dispatch the state names (and the tail a half-finished submit left) is written.
    DispatchFromState,
}

/// What a submit decides before any file is written (see [`next_state`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SubmitStep {
    /// The state to commit (before a publish step adds its outbox record).
    pub state: WorkflowState,
    /// `dispatched`, `awaiting_approval`, `completed` or `recorded`.
    pub status: &'static str,
    /// The dispatch to write: god, step, and whether it waits in `_quarantine`.
    pub dispatch: Option<(GodName, StepId, bool)>,
    /// The writes, in order.
    pub effects: Vec<SubmitEffect>,
}

/// The pure step of a submit: from the current state (`None` for a new workflow), the validated
/// handoff, its route, the definition, the ack recorded with it and `now`, the state to commit and the
/// writes to apply. Refuses a handoff for a closed workflow, one out of step with a definition, one
/// that starts a workflow without its required context, and names that cannot become paths.
#[allow(clippy::too_many_arguments)] // each is one input of the one commit; a struct would only rename them
pub(crate) fn next_state(
    wf: &WorkflowId,
    state: Option<WorkflowState>,
    h: &Handoff,
    route: &Route,
    def: Option<&WorkflowDef>,
    ack: Option<&AckRecord>,
    warnings: &[String],
    now: &str,
) -> Result<SubmitStep> {
    let hid = HandoffId::parse(&h.handoff_id)?;
    let step = StepId::parse(&h.step)?;
    let from = GodName::parse_as("from_god", &h.from_god)?;
    if let Some(st) = &state {
        refuse_closed(wf, st)?;
        refuse_out_of_step(wf, st, h, route)?;
    }
    if let Some(def) = def {
        check_required_context(def, h, state.is_none())?;
    }
    let dispatch = match &route.target {
        Target::Dispatch { god, step, hold } => Some((
            GodName::parse_as("target god", god)?,
            StepId::parse_as("target step", step)?,
            hold.is_some(),
        )),
        _ => None,
    };
    let mut st = state.unwrap_or_else(|| WorkflowState {
        workflow_id: wf.to_string(),
        created: Some(now.to_owned()),
        ..Default::default()
    });
    if let Some((id, version)) = &route.definition {
        st.definition_id = Some(id.clone());
        st.definition_version = version.clone();
    }
    let (status, target_god, target_step) = match &route.target {
        Target::Dispatch { god, step, hold } => {
            st.status = if hold.is_some() {
                WorkflowStatus::AwaitingApproval
            } else {
                WorkflowStatus::WaitingForAck
            };
            st.current_step = Some(step.clone());
            st.dispatched_to = Some(god.clone());
            let s = if hold.is_some() {
                "awaiting_approval"
            } else {
                "dispatched"
            };
            (s, Some(god.clone()), Some(step.clone()))
        }
        Target::Complete => {
            st.status = WorkflowStatus::Completed;
            st.current_step = None;
            st.dispatched_to = None;
            ("completed", None, None)
        }
        Target::Record => {
            st.status = WorkflowStatus::InProgress;
            st.current_step = None;
            st.dispatched_to = None;
            ("recorded", None, None)
        }
    };
    st.failure_reason = None;
    push_unique(&mut st.context_bag.decisions, &h.context.decisions);
    push_unique(&mut st.context_bag.artifacts, &h.context.artifacts);
    st.context_bag.open_questions = h.context.open_questions.clone();
    let mut routed_extra = serde_json::Map::new();
    if let Some(r) = &route.rule {
        routed_extra.insert("rule".into(), Value::String(r.clone()));
    }
    if let Target::Dispatch {
        hold: Some(why), ..
    } = &route.target
    {
        routed_extra.insert("held_because".into(), Value::String(why.clone()));
    }
    st.step_history.push(StepRecord {
        step_id: step.to_string(),
        god: from.to_string(),
        status: "completed".into(),
        completed_at: Some(now.to_owned()),
        summary: Some(h.context.summary.clone()),
        gates_passed: h.context.gates_passed.clone(),
        handoff_id: Some(hid.to_string()),
        artifacts: h.context.artifacts.clone(),
        routed: Some(Routed {
            status: status.into(),
            target_god,
            target_step,
            warnings: warnings.to_vec(),
            extra: routed_extra,
        }),
        extra: Default::default(),
    });
    if let Some(a) = ack {
        st.acks.push(a.clone());
    }
    st.updated = Some(now.to_owned());
    let mut effects = vec![SubmitEffect::WriteHandoff];
    if let Some(def) = def {
        keep_context(def, h, &mut st);
        if matches!(route.target, Target::Dispatch { hold: None, .. }) {
            effects.push(SubmitEffect::AdvanceOutbox);
        }
    }
    effects.push(SubmitEffect::WriteState);
    if ack.is_some() {
        effects.push(SubmitEffect::ArchiveAcked);
    }
    effects.extend([
        SubmitEffect::SupersedeStale,
        SubmitEffect::DispatchFromState,
    ]);
    Ok(SubmitStep {
        state: st,
        status,
        dispatch,
        effects,
    })
}

impl Conductor {
    /// Submits a handoff (docs/PROTOCOL.md §2.1): validates it, records it, routes it and dispatches it,
    /// holding the dispatch for approval when `hold` gives a reason (the bridge holds inbound work when
    /// its operator asks). Journaled by [`Conductor::submit_handoff_held`].
    pub(crate) fn submit_held_unjournaled(
        &self,
        handoff: &Value,
        hold: Option<String>,
    ) -> Result<SubmitResult> {
        let (h, warnings) = validate_handoff(self, handoff)?;
        let wf = WorkflowId::parse(&h.workflow_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let state = files::load_state(&self.root, &wf)?;
        self.submit_locked(&wf, h, handoff.clone(), state, warnings, None, hold)
    }

    /// Records and routes a validated handoff; the caller holds the workflow's lock.
    #[allow(clippy::too_many_arguments)] // each is one input of the one commit; a struct would only rename them
    pub(crate) fn submit_locked(
        &self,
        wf: &WorkflowId,
        h: Handoff,
        raw: Value,
        state: Option<WorkflowState>,
        mut warnings: Vec<String>,
        ack: Option<AckCommit>,
        hold: Option<String>,
    ) -> Result<SubmitResult> {
        let root = &self.root;
        let hid = HandoffId::parse(&h.handoff_id)?;
        let step = StepId::parse(&h.step)?;
        GodName::parse_as("from_god", &h.from_god)?;
        GodName::parse_as("to_god", &h.to_god)?;

        if let Some(st) = &state
            && let Some(rec) = st.record_of(hid.as_str())
        {
            let rec_step = StepId::parse(&rec.step_id)?;
            let stored_path = stored_handoff_path(root, wf, &rec_step, &hid);
            match read_json(&stored_path) {
                Ok(Some(stored)) if stored == raw => {}
                Ok(None) => warnings.push(format!(
                    "handoff {hid} is recorded but {} is missing; compared by id only",
                    stored_path.display()
                )),
                _ => {
                    return Err(Error::refused(format!(
                        "handoff_id {hid} was already recorded for workflow {wf} (step {:?}) with different content; \
                         a new handoff needs a new handoff_id",
                        rec.step_id
                    )));
                }
            }
            self.repair_dispatch(wf, st, &hid)?;
            self.repair_tail(wf, st)?;
            warnings.extend(self.settle_report(st, &format!("handoff-{hid}")));
            return Ok(self.result_of(wf, st, rec, &stored_path, "duplicate", warnings));
        }
        if let Some(st) = &state {
            refuse_closed(wf, st)?;
        }
        let mut route = route(root, &h, state.as_ref())?;
        if let (Some(why), Target::Dispatch { hold: h @ None, .. }) = (hold, &mut route.target) {
            *h = Some(why);
        }
        let def = match &route.definition {
            Some((def_id, _)) => definition(root, def_id)?,
            None => None,
        };
        warnings.extend(route.warnings.iter().cloned());
        // Usage the handoff carries counts before it routes: a budget it reaches holds the
        // dispatch it produces (docs/BUDGETS.md). No usage and no budget: nothing is read.
        let report = crate::cost::hook::Report::of_document(
            root,
            &raw,
            crate::cost::hook::Origin {
                key: format!("handoff-{hid}"),
                source: "handoff",
                workflow_id: wf.as_str(),
                definition: route.definition.as_ref().map(|(d, _)| d.as_str()),
                step: Some(step.as_str()),
                god: &h.from_god,
                ..Default::default()
            },
        );
        let budget_hold = match &mut route.target {
            Target::Dispatch { god, hold, .. } => {
                let found = crate::cost::hook::hold(
                    root,
                    wf.as_str(),
                    state.as_ref(),
                    def.as_ref(),
                    god,
                    report.as_ref(),
                    &mut warnings,
                )?;
                if let Some(b) = &found {
                    *hold = Some(match hold.take() {
                        Some(other) => format!("{other}; {}", b.because),
                        None => b.because.clone(),
                    });
                }
                found
            }
            _ => None,
        };
        let SubmitStep {
            state: mut st,
            status,
            dispatch,
            effects,
        } = next_state(
            wf,
            state,
            &h,
            &route,
            def.as_ref(),
            ack.as_ref().map(|a| &a.record),
            &warnings,
            &now_ts(),
        )?;

        let mut will_write = vec![root.handoff_path(wf, &step), root.state_path(wf)];
        if let Some((god, _, held)) = &dispatch {
            will_write.push(match held {
                true => root.quarantine_dir().join(format!("{hid}.json")),
                false => root.inbox_dir(god).join(format!("{hid}.json")),
            });
        }
        if let Some(a) = &ack {
            let god = GodName::parse(&a.dispatch_update.to_god)?;
            will_write.push(a.closes.path.clone());
            will_write.push(
                root.archive_dir(&god)
                    .join(format!("{}.json", hid_of(&a.closes)?)),
            );
        }
        // A symbolic link planted on the way to any of these files is refused before anything is
        // written, rather than after the commit point (each write checks again).
        files::refuse_unconfined(&self.root, &will_write)?;

        if let Some(r) = &report {
            crate::cost::hook::record(&mut st, r);
            crate::cost::ledger::write_marker(root, &r.line)?;
            super::crash_point("cost:after-marker");
        }
        if let Some(b) = &budget_hold
            && let Some(rec) = st
                .step_history
                .iter_mut()
                .rev()
                .find(|r| r.handoff_id.as_deref() == Some(hid.as_str()))
            && let Some(routed) = rec.routed.as_mut()
        {
            routed.extra.insert("budget".into(), b.figures.clone());
        }
        let latest = root.handoff_path(wf, &step);
        let mut ack = ack;
        for effect in effects {
            match effect {
                SubmitEffect::WriteHandoff => {
                    self.write_handoff(wf, &step, &hid, &raw)?;
                    super::crash_point("submit:after-handoff");
                }
                SubmitEffect::AdvanceOutbox => {
                    if let Some(def) = &def {
                        super::outbox::advance(root, def, wf, &mut st)?;
                    }
                }
                SubmitEffect::WriteState => {
                    files::write_state(root, wf, &st)?;
                    super::crash_point("submit:after-state");
                }
                SubmitEffect::ArchiveAcked => {
                    if let Some(a) = ack.take() {
                        let god = GodName::parse(&a.dispatch_update.to_god)?;
                        files::archive(
                            root,
                            &a.closes.path,
                            &god,
                            &hid_of(&a.closes)?,
                            &a.dispatch_update,
                        )?;
                        super::crash_point("ack:after-archive");
                    }
                }
                SubmitEffect::SupersedeStale => {
                    self.supersede_stale(wf, &st, &hid)?;
                    super::crash_point("submit:after-supersede");
                }
                SubmitEffect::DispatchFromState => {
                    self.repair_dispatch(wf, &st, &hid)?;
                    self.repair_tail(wf, &st)?;
                    super::crash_point("submit:after-dispatch");
                }
            }
        }
        if let Some(r) = &report {
            warnings.extend(self.after_report(&st, def.as_ref(), r));
        }
        let rec = st.record_of(hid.as_str()).expect("just recorded");
        // Reaching a publish or await_ack step turns `dispatched` into what the engine did there
        // (the record's `routed.status`, which the journal's entry and a repeat also report).
        let status = match rec.routed.as_ref().map(|r| r.status.as_str()) {
            Some("publishing") => "publishing",
            Some("awaiting_reply") => "awaiting_reply",
            _ => status,
        };
        Ok(self.result_of(wf, &st, rec, &latest, status, warnings))
    }

    /// Writes the handoff file of `step`; an earlier handoff for the step (another id) is kept under
    /// its own id first, and an unreadable one is copied aside.
    fn write_handoff(
        &self,
        wf: &WorkflowId,
        step: &StepId,
        hid: &HandoffId,
        raw: &Value,
    ) -> Result<()> {
        let root = &self.root;
        let latest = root.handoff_path(wf, step);
        if let Some(old) = read_json(&latest).ok().flatten() {
            let old_id = old
                .get("handoff_id")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if old_id != hid.as_str() {
                let keep = root
                    .handoff_dir(wf)
                    .join(format!("{step}.{}.json", encode_key(old_id)));
                if !keep.exists() {
                    write_json(&self.root, &keep, &old)?;
                    super::crash_point("submit:after-keep-old");
                }
            }
        } else if latest.exists() {
            let keep = root.handoff_dir(wf).join(format!(
                "{step}.unreadable-{}.json",
                chrono::Utc::now().timestamp_micros()
            ));
            std::fs::copy(&latest, &keep).map_err(|e| Error::io(&keep, e))?;
        }
        write_json(&self.root, &latest, raw)
    }

    fn result_of(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        rec: &StepRecord,
        handoff_path: &std::path::Path,
        status: &str,
        warnings: Vec<String>,
    ) -> SubmitResult {
        let routed = rec.routed.clone().unwrap_or_default();
        // Only `dispatched` and `awaiting_approval` write a dispatch; a publish or an await_ack
        // step is performed by the engine and the bridge, never from an inbox.
        let writes_dispatch = matches!(routed.status.as_str(), "dispatched" | "awaiting_approval");
        let dispatch_path = match (&routed.target_god, rec.handoff_id.as_deref()) {
            (Some(god), Some(hid)) if writes_dispatch => {
                let held = routed.status == "awaiting_approval";
                let inbox = self
                    .root
                    .pending_root()
                    .join(god)
                    .join(format!("{hid}.json"));
                let q = self.root.quarantine_dir().join(format!("{hid}.json"));
                Some(path_text(if held && !inbox.exists() { &q } else { &inbox }))
            }
            _ => None,
        };
        SubmitResult {
            status: status.to_owned(),
            workflow_id: wf.to_string(),
            handoff_id: rec.handoff_id.clone().unwrap_or_default(),
            target_god: routed.target_god.clone(),
            target_step: routed.target_step.clone(),
            state_status: st.status.clone(),
            handoff_path: path_text(handoff_path),
            dispatch_path,
            matched_rule: routed
                .extra
                .get("rule")
                .and_then(Value::as_str)
                .map(str::to_owned),
            warnings,
        }
    }

    /// Archives a dispatch made obsolete by this handoff: the one that asked for the step just done,
    /// if it is still in an inbox (the god submitted without acking).
    fn supersede_stale(&self, wf: &WorkflowId, st: &WorkflowState, hid: &HandoffId) -> Result<()> {
        let Some(pos) = st
            .step_history
            .iter()
            .position(|r| r.handoff_id.as_deref() == Some(hid.as_str()))
        else {
            return Ok(());
        };
        let this = &st.step_history[pos];
        let Some(prev) = st.step_history[..pos]
            .iter()
            .rev()
            .find(|r| r.routed.is_some())
        else {
            return Ok(());
        };
        let routed = prev.routed.as_ref().expect("filtered");
        let (Some(god), Some(step), Some(prev_hid)) =
            (&routed.target_god, &routed.target_step, &prev.handoff_id)
        else {
            return Ok(());
        };
        if *step != this.step_id {
            return Ok(());
        }
        let (Ok(god), Ok(prev_hid)) = (GodName::parse(god), HandoffId::parse(prev_hid)) else {
            return Ok(());
        };
        for found in [
            files::in_inbox(&self.root, &god, &prev_hid)?,
            files::in_quarantine(&self.root, &prev_hid)?,
        ]
        .into_iter()
        .flatten()
        {
            if found.dispatch.workflow_id != wf.as_str() {
                continue;
            }
            let mut d = found.dispatch.clone();
            d.ack_status = AckStatus::Completed;
            d.archive_reason = Some(format!("superseded: handoff {hid} completed step {step:?}"));
            d.archived_at = Some(now_ts());
            files::archive(&self.root, &found.path, &god, &prev_hid, &d)?;
        }
        Ok(())
    }

    /// Writes again the dispatch a workflow `waiting_for_ack` waits on after it vanished from every
    /// inbox (a foreign cleanup deleted it outright), re-derived from the state exactly as crash repair
    /// does ([`Self::repair_dispatch`]). An operator act: refused while any dispatch of the workflow is
    /// in an inbox or `_quarantine`, or when the workflow is not waiting for an ack.
    pub(crate) fn redispatch_unjournaled(
        &self,
        wf: &WorkflowId,
    ) -> Result<super::RedispatchResult> {
        let wf = wf.clone();
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
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
        if archived.exists() {
            return Err(cannot(format!(
                "its dispatch {hid} was closed and archived ({})",
                archived.display()
            )));
        }
        self.repair_dispatch(&wf, &st, &hid)?;
        let path = self.root.inbox_dir(&god).join(format!("{hid}.json"));
        if !path.exists() {
            return Err(cannot(format!(
                "its last handoff {hid} did not route to {god}'s step {step:?}, which it waits on"
            )));
        }
        Ok(super::RedispatchResult {
            status: "redispatched".into(),
            workflow_id: wf.to_string(),
            handoff_id: hid.to_string(),
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

    fn build_dispatch(
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
        let handoff: Handoff = read_json(&stored_handoff_path(
            &self.root,
            wf,
            &step_id,
            &HandoffId::parse(&hid)?,
        ))?
        .and_then(|v| from_value(v).ok())
        .unwrap_or_default();
        let history = st
            .step_history
            .iter()
            .filter(|r| r.status == "completed")
            .map(|r| HistoryEntry {
                step: r.step_id.clone(),
                god: r.god.clone(),
                summary: r.summary.clone().unwrap_or_default(),
                extra: Default::default(),
            })
            .collect();
        let held = routed.extra.contains_key("held_because");
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
            dispatched_at: Some(now_ts()),
            ack_status: AckStatus::Unacked,
            held_because: routed
                .extra
                .get("held_because")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..Default::default()
        };
        if let Some(b) = routed.extra.get("budget") {
            d.extra.insert("budget".into(), b.clone());
        }
        let mut omitted = Vec::new();
        d.context.extra = bounded(carried, MAX_CARRIED_CONTEXT, "context.", &mut omitted);
        let step_def = bounded(step_def, MAX_CARRIED_STEP_DEF, "step_def.", &mut omitted);
        if !step_def.is_empty() {
            d.extra.insert(STEP_DEF.into(), Value::Object(step_def));
        }
        if !omitted.is_empty() {
            d.extra.insert(OMITTED.into(), serde_json::json!(omitted));
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
        let by_rule = match routed.extra.get("rule").and_then(Value::as_str) {
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

/// The dispatch field holding the step's descriptive keys from its definition (`action`, `skill`, …).
pub const STEP_DEF: &str = "step_def";

/// The dispatch field naming the carried keys left out for size (`context.KEY`, `step_def.KEY`).
pub const OMITTED: &str = "omitted";

/// The most a dispatch carries of context keys beyond the standard ones: a handoff's limit, so the
/// latest handoff's keys always fit whole; keys kept from the workflow's start come after them.
pub const MAX_CARRIED_CONTEXT: usize = crate::store::limits::MAX_HANDOFF_BYTES;

/// The most a dispatch carries of a step's descriptive keys (one field's limit).
pub const MAX_CARRIED_STEP_DEF: usize = crate::store::limits::MAX_FIELD_BYTES;

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
fn carried_context(
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
fn bounded(
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

/// The handoff id of a found dispatch.
pub(crate) fn hid_of(f: &files::Found) -> Result<HandoffId> {
    HandoffId::parse(&f.dispatch.handoff_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-12-01T12:00:00Z";

    fn wf() -> WorkflowId {
        WorkflowId::parse("wf_pure").unwrap()
    }

    fn handoff(step: &str, id: &str) -> Handoff {
        from_value(json!({
            "handoff_id": id, "workflow_id": "wf_pure", "from_god": "athena", "to_god": "hermes",
            "step": step,
            "context": {"summary": "did it", "decisions": ["d1", "d1"], "artifacts": ["a.txt"],
                        "open_questions": ["q?"], "ticket": "T-1"}
        }))
        .unwrap()
    }

    fn route(target: Target, definition: Option<&str>) -> Route {
        Route {
            target,
            definition: definition.map(|d| (d.to_owned(), Some("1".to_owned()))),
            rule: None,
            warnings: Vec::new(),
        }
    }

    fn dispatch(god: &str, step: &str, hold: Option<&str>) -> Target {
        Target::Dispatch {
            god: god.into(),
            step: step.into(),
            hold: hold.map(str::to_owned),
        }
    }

    fn def(required: &[&str]) -> WorkflowDef {
        WorkflowDef::from_value(
            &json!({"id": "flow", "name": "Flow", "version": "1",
                    "context": {"required": required},
                    "steps": [{"id": "plan", "god": "athena"}, {"id": "build", "god": "hermes"}]}),
            std::path::Path::new("flow.yaml"),
        )
        .unwrap()
    }

    fn state(status: WorkflowStatus, current: Option<&str>) -> WorkflowState {
        WorkflowState {
            workflow_id: "wf_pure".into(),
            status,
            current_step: current.map(str::to_owned),
            dispatched_to: current.map(|_| "athena".to_owned()),
            context_bag: super::super::model::ContextBag {
                decisions: vec!["d0".into(), "d1".into()],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn step_of(
        st: Option<WorkflowState>,
        h: &Handoff,
        r: &Route,
        d: Option<&WorkflowDef>,
    ) -> Result<SubmitStep> {
        next_state(&wf(), st, h, r, d, None, &["w".to_owned()], NOW)
    }

    #[test]
    fn a_first_handoff_starts_the_workflow_and_dispatches_the_next_step() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        let s = step_of(
            None,
            &h,
            &route(dispatch("hermes", "build", None), None),
            None,
        )
        .unwrap();
        assert_eq!(s.status, "dispatched");
        assert_eq!(s.state.status, WorkflowStatus::WaitingForAck);
        assert_eq!(s.state.created.as_deref(), Some(NOW));
        assert_eq!(s.state.updated.as_deref(), Some(NOW));
        assert_eq!(s.state.current_step.as_deref(), Some("build"));
        assert_eq!(s.state.dispatched_to.as_deref(), Some("hermes"));
        assert_eq!(
            s.state.context_bag.decisions,
            ["d1"],
            "decisions are kept once"
        );
        assert_eq!(s.state.context_bag.open_questions, ["q?"]);
        let rec = s.state.record_of("hof_20261201_aaaaaa").unwrap();
        assert_eq!((rec.step_id.as_str(), rec.god.as_str()), ("plan", "athena"));
        let routed = rec.routed.clone().unwrap();
        assert_eq!(routed.status, "dispatched");
        assert_eq!(routed.target_god.as_deref(), Some("hermes"));
        assert_eq!(routed.warnings, ["w"]);
        let (god, step, held) = s.dispatch.unwrap();
        assert_eq!(
            (god.as_str(), step.as_str(), held),
            ("hermes", "build", false)
        );
        assert_eq!(
            s.effects,
            [
                SubmitEffect::WriteHandoff,
                SubmitEffect::WriteState,
                SubmitEffect::SupersedeStale,
                SubmitEffect::DispatchFromState
            ]
        );
    }

    #[test]
    fn a_held_dispatch_awaits_approval_and_names_why() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        let r = route(dispatch("hermes", "build", Some("rule r1")), Some("flow"));
        let s = step_of(None, &h, &r, Some(&def(&[]))).unwrap();
        assert_eq!(s.status, "awaiting_approval");
        assert_eq!(s.state.status, WorkflowStatus::AwaitingApproval);
        assert_eq!(s.state.definition_id.as_deref(), Some("flow"));
        let rec = s.state.record_of("hof_20261201_aaaaaa").unwrap();
        assert_eq!(
            rec.routed.as_ref().unwrap().extra["held_because"],
            json!("rule r1")
        );
        assert!(s.dispatch.unwrap().2, "held");
        assert!(
            !s.effects.contains(&SubmitEffect::AdvanceOutbox),
            "a held dispatch reaches no publish step"
        );
    }

    #[test]
    fn a_definition_dispatch_advances_the_outbox_and_an_ack_is_archived_after_the_commit() {
        let h = handoff("build", "hof_20261201_bbbbbb");
        let st = state(WorkflowStatus::WaitingForAck, Some("build"));
        let ack = AckRecord {
            ack_id: "ack_20261201_abc".into(),
            handoff_id: "hof_20261201_aaaaaa".into(),
            status: AckStatus::Completed,
            ..Default::default()
        };
        let r = route(dispatch("athena", "plan", None), Some("flow"));
        let d = def(&[]);
        let s = next_state(&wf(), Some(st), &h, &r, Some(&d), Some(&ack), &[], NOW).unwrap();
        assert_eq!(s.state.acks, [ack]);
        assert_eq!(
            s.effects,
            [
                SubmitEffect::WriteHandoff,
                SubmitEffect::AdvanceOutbox,
                SubmitEffect::WriteState,
                SubmitEffect::ArchiveAcked,
                SubmitEffect::SupersedeStale,
                SubmitEffect::DispatchFromState
            ]
        );
    }

    #[test]
    fn complete_and_record_clear_the_current_step() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        for (target, status, word) in [
            (Target::Complete, WorkflowStatus::Completed, "completed"),
            (Target::Record, WorkflowStatus::InProgress, "recorded"),
        ] {
            let mut st = state(WorkflowStatus::Failed, None);
            st.failure_reason = Some("earlier".into());
            let s = step_of(Some(st), &h, &route(target, None), None).unwrap();
            assert_eq!((s.status, s.state.status), (word, status));
            assert_eq!(s.state.current_step, None);
            assert_eq!(s.state.dispatched_to, None);
            assert_eq!(
                s.state.failure_reason, None,
                "a new handoff clears the failure"
            );
            assert_eq!(s.dispatch, None);
        }
    }

    #[test]
    fn closed_workflows_refuse_every_handoff() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        let r = route(Target::Record, None);
        let mut aborted = state(WorkflowStatus::Aborted, None);
        aborted.failure_reason = Some("operator said so".into());
        let e = step_of(Some(aborted), &h, &r, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("was aborted (operator said so)"), "{e}");
        let e = step_of(Some(state(WorkflowStatus::Completed, None)), &h, &r, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is completed"), "{e}");
    }

    #[test]
    fn a_handoff_out_of_step_with_its_definition_is_refused_unless_it_retries_a_failed_step() {
        let h = handoff("plan", "hof_20261201_cccccc");
        let d = def(&[]);
        let r = route(dispatch("hermes", "build", None), Some("flow"));
        let at_build = state(WorkflowStatus::WaitingForAck, Some("build"));
        let e = step_of(Some(at_build), &h, &r, Some(&d))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is at step \"build\""), "{e}");
        let failed = state(WorkflowStatus::Failed, Some("build"));
        assert!(step_of(Some(failed), &h, &r, Some(&d)).is_ok());
        let no_definition = route(dispatch("hermes", "build", None), None);
        let at_build = state(WorkflowStatus::WaitingForAck, Some("build"));
        assert!(step_of(Some(at_build), &h, &no_definition, None).is_ok());
    }

    #[test]
    fn a_starting_handoff_needs_the_required_context_and_keeps_the_declared_keys() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        let r = route(dispatch("hermes", "build", None), Some("flow"));
        let e = step_of(None, &h, &r, Some(&def(&["budget"])))
            .unwrap_err()
            .to_string();
        assert!(e.contains("context.budget"), "{e}");
        let s = step_of(None, &h, &r, Some(&def(&["ticket"]))).unwrap();
        assert_eq!(s.state.extra["context"], json!({"ticket": "T-1"}));
        // Only a starting handoff is held to it.
        let st = state(WorkflowStatus::WaitingForAck, Some("plan"));
        assert!(step_of(Some(st), &h, &r, Some(&def(&["budget"]))).is_ok());
    }

    #[test]
    fn names_that_cannot_become_paths_are_refused() {
        let r = route(dispatch("../etc", "build", None), None);
        let e = step_of(None, &handoff("plan", "hof_20261201_aaaaaa"), &r, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("target god"), "{e}");
        let r = route(Target::Record, None);
        let e = step_of(None, &handoff("plan", "not-an-id"), &r, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("handoff_id"), "{e}");
    }

    #[test]
    fn required_context_counts_the_standard_handoff_fields() {
        let h = handoff("plan", "hof_20261201_aaaaaa");
        let r = route(dispatch("hermes", "build", None), Some("flow"));
        // decisions, artifacts and summary are always there; open_questions here is not empty.
        let d = def(&[
            "summary",
            "artifacts",
            "decisions",
            "open_questions",
            "ticket",
        ]);
        assert!(step_of(None, &h, &r, Some(&d)).is_ok());
        let e = step_of(None, &h, &r, Some(&def(&["decisions", "gates_passed"])))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/context/gates_passed") && !e.contains("/context/decisions"),
            "{e}"
        );
    }

    #[test]
    fn carried_keys_are_bounded_and_the_ones_left_out_are_named() {
        let mut map = serde_json::Map::new();
        map.insert("small".into(), json!("x"));
        map.insert("big".into(), json!("y".repeat(100)));
        map.insert("after".into(), json!([1, 2]));
        let mut omitted = Vec::new();
        let out = bounded(map, 40, "context.", &mut omitted);
        assert_eq!(Value::Object(out), json!({"small": "x", "after": [1, 2]}));
        assert_eq!(omitted, ["context.big"]);
    }

    #[test]
    fn a_dispatch_carries_the_latest_handoffs_keys_then_the_kept_ones_never_over_a_standard_field()
    {
        let h: Handoff = from_value(json!({
            "handoff_id": "hof_20261201_aaaaaa", "workflow_id": "wf_pure", "from_god": "a",
            "to_god": "b", "step": "plan",
            "context": {"summary": "s", "decisions": [], "artifacts": [], "ticket": "T-2",
                        "history": "forged", "payload": {"n": 1}, "gone": null}
        }))
        .unwrap();
        let mut st = state(WorkflowStatus::WaitingForAck, Some("build"));
        st.extra.insert(
            "context".into(),
            json!({"ticket": "T-1", "spec_summary": "fast"}),
        );
        let rec = StepRecord::default();
        let out = carried_context(&st, &rec, &h);
        assert_eq!(
            Value::Object(out),
            json!({"ticket": "T-2", "payload": {"n": 1}, "spec_summary": "fast"})
        );
    }
}
