//! `submit_handoff` (docs/PROTOCOL.md §2.1, 2.3, 2.4): validation, gates, routing, recording and dispatch, with
//! idempotent resubmission that repairs a half-finished submit.
//!
//! Write order: the handoff file(s), then the state (the commit point: the handoff is "recorded" once
//! its id is in `step_history`), then the dispatch. Everything after the commit is derived from the
//! state and skipped when already on disk, so a resubmission finishes exactly what a killed submit left.

use super::model::RouteStatus;
use super::results::SubmitStatus;
use serde_json::Value;

use super::definition::WorkflowDef;
use super::files;
use super::model::{
    AckRecord, AckStatus, Dispatch, Handoff, Routed, StepRecord, StepStatus, WorkflowState,
    WorkflowStatus, from_value,
};
use super::route::{Route, Target, definition, route};
use super::{Conductor, SubmitResult};
use crate::error::{Error, Result, Violation};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{GodName, HandoffId, Root, StepId, WorkflowId, encode_key};

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
    extra.extend(crate::trace::violation(v, "/traceparent"));
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
                message: m.into(),
            }],
        )
    })?;
    Ok((h, schemas.warning.clone().into_iter().collect()))
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

/// The file that holds `hid`'s handoff for `step` (the step's latest handoff when it is `hid`'s,
/// else the copy kept under its id) and what reading it gave: the latest file is read once, not
/// once to choose it and again for its content.
pub(crate) fn stored_handoff(
    root: &Root,
    wf: &WorkflowId,
    step: &StepId,
    hid: &HandoffId,
) -> (std::path::PathBuf, Result<Option<Value>>) {
    let latest = root.handoff_path(wf, step);
    match read_json(&latest) {
        Ok(Some(v)) if v.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str()) => {
            (latest, Ok(Some(v)))
        }
        _ => {
            let kept = root.handoff_history_path(wf, step, hid);
            let read = read_json(&kept);
            (kept, read)
        }
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

/// Refuses a new handoff (a god's, or the one a `completed` ack records) while the workflow awaits an
/// operator's decision on a held dispatch: recording it would move the workflow past the hold
/// (docs/PROTOCOL.md §2.5). An exact resubmit of a recorded handoff is answered before this.
fn refuse_held(wf: &WorkflowId, st: &WorkflowState, ack: Option<&AckRecord>) -> Result<()> {
    if super::hold::undecided(st).is_none() {
        return Ok(());
    }
    let act = match ack {
        Some(a) => format!("a completed ack of handoff {}", a.handoff_id),
        None => "a new handoff".to_owned(),
    };
    Err(super::hold::refusal(wf, st, &act, None, None))
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
    /// What the submit does with the handoff.
    pub status: SubmitStatus,
    /// The dispatch to write: god, step, and whether it waits in `_quarantine`.
    pub dispatch: Option<(GodName, StepId, bool)>,
    /// The writes, in order.
    pub effects: Vec<SubmitEffect>,
}

/// Moves the state to where `target` sends the workflow: its status, current step and addressee.
/// Returns what the submit reports and the god and step dispatched to, if any.
fn move_to(
    st: &mut WorkflowState,
    target: &Target,
) -> (SubmitStatus, Option<String>, Option<String>) {
    match target {
        Target::Dispatch { god, step, hold } => {
            st.status = if hold.is_some() {
                WorkflowStatus::AwaitingApproval
            } else {
                WorkflowStatus::WaitingForAck
            };
            st.current_step = Some(step.clone());
            st.dispatched_to = Some(god.clone());
            let s = if hold.is_some() {
                SubmitStatus::AwaitingApproval
            } else {
                SubmitStatus::Dispatched
            };
            (s, Some(god.clone()), Some(step.clone()))
        }
        Target::Complete => {
            st.status = WorkflowStatus::Completed;
            st.current_step = None;
            st.dispatched_to = None;
            (SubmitStatus::Completed, None, None)
        }
        Target::Record => {
            st.status = WorkflowStatus::InProgress;
            st.current_step = None;
            st.dispatched_to = None;
            (SubmitStatus::Recorded, None, None)
        }
    }
}

/// What [`next_state`] decides from.
pub(crate) struct NextStateInput<'a> {
    /// The workflow.
    pub wf: &'a WorkflowId,
    /// Its state (`None` for a new workflow).
    pub state: Option<WorkflowState>,
    /// The validated handoff.
    pub handoff: &'a Handoff,
    /// Where it routes.
    pub route: &'a Route,
    /// The workflow's definition, if it has one.
    pub def: Option<&'a WorkflowDef>,
    /// The ack recorded with it (a `completed` ack's handoff).
    pub ack: Option<&'a AckRecord>,
    /// Warnings so far, recorded with the route.
    pub warnings: &'a [String],
    /// When (RFC 3339).
    pub now: &'a str,
}

/// The pure step of a submit: from the current state (`None` for a new workflow), the validated
/// handoff, its route, the definition, the ack recorded with it and `now`, the state to commit and the
/// writes to apply. Refuses a handoff for a closed workflow, one out of step with a definition, one
/// that starts a workflow without its required context, and names that cannot become paths.
pub(crate) fn next_state(input: NextStateInput<'_>) -> Result<SubmitStep> {
    let NextStateInput {
        wf,
        state,
        handoff: h,
        route,
        def,
        ack,
        warnings,
        now,
    } = input;
    let hid = HandoffId::parse(&h.handoff_id)?;
    let step = StepId::parse(&h.step)?;
    let from = GodName::parse_as("from_god", &h.from_god)?;
    if let Some(st) = &state {
        refuse_closed(wf, st)?;
        refuse_held(wf, st, ack)?;
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
        trace_id: Some(crate::trace::trace_id_for(h.traceparent.as_deref())),
        ..Default::default()
    });
    if let Some((id, version)) = &route.definition {
        st.definition_id = Some(id.clone());
        st.definition_version = version.clone();
    }
    let (status, target_god, target_step) = move_to(&mut st, &route.target);
    st.failure_reason = None;
    push_unique(&mut st.context_bag.decisions, &h.context.decisions);
    push_unique(&mut st.context_bag.artifacts, &h.context.artifacts);
    st.context_bag.open_questions = h.context.open_questions.clone();
    let held_because = match &route.target {
        Target::Dispatch {
            hold: Some(why), ..
        } => Some(why.clone()),
        _ => None,
    };
    st.step_history.push(StepRecord {
        step_id: step.to_string(),
        god: from.to_string(),
        status: StepStatus::Completed,
        completed_at: Some(now.to_owned()),
        summary: Some(h.context.summary.clone()),
        gates_passed: h.context.gates_passed.clone(),
        handoff_id: Some(hid.to_string()),
        artifacts: h.context.artifacts.clone(),
        routed: Some(Routed {
            status: RouteStatus::parse(status.as_str()),
            target_god,
            target_step,
            warnings: warnings.to_vec(),
            rule: route.rule.clone(),
            held_because,
            extra: Default::default(),
        }),
        traceparent: h.traceparent.clone(),
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

/// What one submit records, read by its decisions and its writes: the workflow, the handoff's id,
/// step and text as received, and the definition the workflow runs under.
struct Recording<'a> {
    wf: &'a WorkflowId,
    hid: &'a HandoffId,
    step: &'a StepId,
    raw: &'a Value,
    def: Option<&'a WorkflowDef>,
}

/// The usage the handoff carries (its `usage`), priced as the ledger's line; `None` without one.
/// It counts before the handoff routes (docs/BUDGETS.md).
fn usage_report(
    root: &Root,
    r: &Recording<'_>,
    h: &Handoff,
    route: &Route,
) -> Option<crate::cost::hook::Report> {
    crate::cost::hook::Report::of_document(
        root,
        r.raw,
        crate::cost::hook::Origin {
            key: format!("handoff-{}", r.hid),
            source: "handoff",
            workflow_id: r.wf.as_str(),
            definition: route.definition.as_ref().map(|(d, _)| d.as_str()),
            step: Some(r.step.as_str()),
            god: &h.from_god,
            ..Default::default()
        },
    )
}

/// The budget decision: a budget the handoff's usage reaches holds the dispatch it produces, the
/// budget's reason joined to a hold the dispatch already had (docs/BUDGETS.md). No usage and no
/// budget: nothing is read.
fn budget_hold(
    root: &Root,
    r: &Recording<'_>,
    state: Option<&WorkflowState>,
    route: &mut Route,
    report: Option<&crate::cost::hook::Report>,
    warnings: &mut Vec<String>,
) -> Result<Option<crate::cost::hook::Hold>> {
    let Target::Dispatch { god, hold, .. } = &mut route.target else {
        return Ok(None);
    };
    let found = crate::cost::hook::hold(root, r.wf.as_str(), state, r.def, god, report, warnings)?;
    if let Some(b) = &found {
        *hold = Some(match hold.take() {
            Some(other) => format!("{other}; {}", b.because),
            None => b.because.clone(),
        });
    }
    Ok(found)
}

/// The pause decision: a dispatch to a paused god, or for a paused workflow, is held
/// (`held_because: "paused: …"`, joined to a hold it already had) until the pause is resumed
/// (docs/PROTOCOL.md §2.14). Nothing paused: one look for a file that is not there.
fn pause_hold(root: &Root, wf: &WorkflowId, route: &mut Route, warnings: &mut Vec<String>) {
    let Target::Dispatch { god, hold, .. } = &mut route.target else {
        return;
    };
    let pauses = super::pause::Pauses::load_or_warn(root, warnings);
    if let Some(p) = pauses.holding(god, wf.as_str()) {
        *hold = Some(super::pause::join_hold(hold.take(), p));
    }
}

/// The handoff's usage in the state and as the ledger's marker (written before the state, its
/// commit point), and the budget hold's figures on the step record `hid` made.
fn record_usage(
    root: &Root,
    st: &mut WorkflowState,
    hid: &HandoffId,
    report: Option<&crate::cost::hook::Report>,
    budget_hold: Option<&crate::cost::hook::Hold>,
) -> Result<()> {
    if let Some(r) = report {
        crate::cost::hook::record(st, r);
        crate::cost::ledger::write_marker(root, &r.line)?;
        super::crash_point("cost:after-marker");
    }
    if let Some(b) = budget_hold
        && let Some(rec) = st
            .step_history
            .iter_mut()
            .rev()
            .find(|r| r.handoff_id.as_deref() == Some(hid.as_str()))
        && let Some(routed) = rec.routed.as_mut()
    {
        routed.extra.insert("budget".into(), b.figures.clone());
    }
    Ok(())
}

/// What [`Conductor::submit_locked`] records: a validated handoff and what came with it.
pub(crate) struct SubmitLocked<'a> {
    /// The workflow (its lock is held).
    pub wf: &'a WorkflowId,
    /// The validated handoff.
    pub handoff: Handoff,
    /// The handoff as received, written as the handoff file.
    pub raw: Value,
    /// The workflow's state (`None` for a new workflow).
    pub state: Option<WorkflowState>,
    /// Warnings from validation.
    pub warnings: Vec<String>,
    /// The ack a `completed` ack records with its handoff.
    pub ack: Option<AckCommit>,
    /// How the handoff came in: held for an operator, a peer's inbound request.
    pub from: SubmitFrom,
}

/// How a submitted handoff came in, beyond its own fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct SubmitFrom {
    /// Why its dispatch is to be held for an operator, when it is.
    pub hold: Option<String>,
    /// The peer pantheon whose inbound request this is (the bridge): marked in the state the submit
    /// commits, before its dispatch is written, so an ack however quick routes back to the peer.
    pub inbound_peer: Option<String>,
}

impl Conductor {
    /// Submits a handoff (docs/PROTOCOL.md §2.1): validates it, records it, routes it and dispatches it,
    /// holding the dispatch for approval when `hold` gives a reason (the bridge holds inbound work when
    /// its operator asks). Journaled by [`Conductor::submit_handoff_held`].
    pub(crate) fn submit_held_unjournaled(
        &self,
        handoff: &Value,
        from: SubmitFrom,
    ) -> Result<SubmitResult> {
        let (h, warnings) = validate_handoff(self, handoff)?;
        let wf = WorkflowId::parse(&h.workflow_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let state = files::load_state(&self.root, &wf)?;
        self.submit_locked(SubmitLocked {
            wf: &wf,
            handoff: h,
            raw: handoff.clone(),
            state,
            warnings,
            ack: None,
            from,
        })
    }

    /// Records and routes a validated handoff; the caller holds the workflow's lock.
    pub(crate) fn submit_locked(&self, input: SubmitLocked<'_>) -> Result<SubmitResult> {
        let SubmitLocked {
            wf,
            handoff: h,
            raw,
            state,
            mut warnings,
            ack,
            from: SubmitFrom { hold, inbound_peer },
        } = input;
        let root = &self.root;
        let hid = HandoffId::parse(&h.handoff_id)?;
        let step = StepId::parse(&h.step)?;
        GodName::parse_as("from_god", &h.from_god)?;
        GodName::parse_as("to_god", &h.to_god)?;

        if let Some(st) = &state
            && let Some(rec) = st.record_of(hid.as_str())
        {
            return self.resubmitted(wf, st, rec, &raw, warnings);
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
        let r = Recording {
            wf,
            hid: &hid,
            step: &step,
            raw: &raw,
            def: def.as_ref(),
        };
        warnings.extend(route.warnings.iter().cloned());
        let report = usage_report(root, &r, &h, &route);
        let budget_hold = budget_hold(
            root,
            &r,
            state.as_ref(),
            &mut route,
            report.as_ref(),
            &mut warnings,
        )?;
        pause_hold(root, wf, &mut route, &mut warnings);
        let SubmitStep {
            state: mut st,
            status,
            dispatch,
            effects,
        } = next_state(NextStateInput {
            wf,
            state,
            handoff: &h,
            route: &route,
            def: r.def,
            ack: ack.as_ref().map(|a| &a.record),
            warnings: &warnings,
            now: &now_ts(),
        })?;
        self.refuse_planted(&r, dispatch.as_ref(), ack.as_ref())?;
        if let Some(peer) = inbound_peer
            && super::route::inbound_peer(&st).is_none()
        {
            st.extra.insert(
                super::route::INBOUND_MARK.into(),
                serde_json::json!({ "peer": peer }),
            );
        }
        record_usage(root, &mut st, &hid, report.as_ref(), budget_hold.as_ref())?;
        self.apply_submit(&r, &mut st, effects, ack)?;
        if let Some(report) = &report {
            warnings.extend(self.after_report(&st, r.def, report));
        }
        let rec = st.record_of(hid.as_str()).expect("just recorded");
        // Reaching a publish or await_ack step turns `dispatched` into what the engine did there
        // (the record's `routed.status`, which the journal's entry and a repeat also report).
        let status = match rec.routed.as_ref().map(|r| &r.status) {
            Some(RouteStatus::Publishing) => SubmitStatus::Publishing,
            Some(RouteStatus::AwaitingReply) => SubmitStatus::AwaitingReply,
            _ => status,
        };
        let latest = root.handoff_path(wf, &step);
        Ok(self.result_of(wf, &st, rec, &latest, status, warnings))
    }

    /// A symbolic link planted on the way to any file this submit writes (the handoff, the state,
    /// the dispatch, the acked dispatch and its archive) is refused before anything is written,
    /// rather than after the commit point (each write checks again).
    fn refuse_planted(
        &self,
        r: &Recording<'_>,
        dispatch: Option<&(GodName, StepId, bool)>,
        ack: Option<&AckCommit>,
    ) -> Result<()> {
        let root = &self.root;
        let mut will_write = vec![root.handoff_path(r.wf, r.step), root.state_path(r.wf)];
        if let Some((god, _, held)) = dispatch {
            will_write.push(match held {
                true => root.quarantine_dir().join(format!("{}.json", r.hid)),
                false => root.inbox_dir(god).join(format!("{}.json", r.hid)),
            });
        }
        if let Some(a) = ack {
            let god = GodName::parse(&a.dispatch_update.to_god)?;
            will_write.push(a.closes.path.clone());
            will_write.push(
                root.archive_dir(&god)
                    .join(format!("{}.json", hid_of(&a.closes)?)),
            );
        }
        files::refuse_unconfined(root, &will_write)
    }

    /// The writes of a submit: the effects [`next_state`] listed, in their order (the module's
    /// write order), each followed by its crash point.
    fn apply_submit(
        &self,
        r: &Recording<'_>,
        st: &mut WorkflowState,
        effects: Vec<SubmitEffect>,
        mut ack: Option<AckCommit>,
    ) -> Result<()> {
        let root = &self.root;
        for effect in effects {
            match effect {
                SubmitEffect::WriteHandoff => {
                    self.write_handoff(r.wf, r.step, r.hid, r.raw)?;
                    super::crash_point("submit:after-handoff");
                }
                SubmitEffect::AdvanceOutbox => {
                    if let Some(def) = r.def {
                        super::outbox::advance(root, def, r.wf, st)?;
                    }
                }
                SubmitEffect::WriteState => {
                    files::write_state(root, r.wf, st)?;
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
                    self.supersede_stale(r.wf, st, r.hid)?;
                    super::crash_point("submit:after-supersede");
                }
                SubmitEffect::DispatchFromState => {
                    self.repair_dispatch(r.wf, st, r.hid)?;
                    self.repair_tail(r.wf, st)?;
                    super::crash_point("submit:after-dispatch");
                }
            }
        }
        Ok(())
    }

    /// A handoff already recorded (`rec`): the first result again, after finishing what a killed
    /// submit left; refused when the same id now carries other content.
    fn resubmitted(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        rec: &StepRecord,
        raw: &Value,
        mut warnings: Vec<String>,
    ) -> Result<SubmitResult> {
        let hid = HandoffId::parse(rec.handoff_id.as_deref().unwrap_or_default())?;
        let rec_step = StepId::parse(&rec.step_id)?;
        let (stored_path, stored) = stored_handoff(&self.root, wf, &rec_step, &hid);
        match stored {
            Ok(Some(stored)) if stored == *raw => {}
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
        Ok(self.result_of(wf, st, rec, &stored_path, SubmitStatus::Duplicate, warnings))
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
                if !crate::store::read::exists(&keep) {
                    write_json(&self.root, &keep, &old)?;
                    super::crash_point("submit:after-keep-old");
                }
            }
        } else if crate::store::read::exists(&latest) {
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
        status: SubmitStatus,
        warnings: Vec<String>,
    ) -> SubmitResult {
        let routed = rec.routed.clone().unwrap_or_default();
        // Only `dispatched` and `awaiting_approval` write a dispatch; a publish or an await_ack
        // step is performed by the engine and the bridge, never from an inbox.
        let writes_dispatch = matches!(
            routed.status,
            RouteStatus::Dispatched | RouteStatus::AwaitingApproval
        );
        let dispatch_path = match (&routed.target_god, rec.handoff_id.as_deref()) {
            (Some(god), Some(hid)) if writes_dispatch => {
                let held = routed.status == RouteStatus::AwaitingApproval;
                let inbox = self
                    .root
                    .pending_root()
                    .join(god)
                    .join(format!("{hid}.json"));
                let q = self.root.quarantine_dir().join(format!("{hid}.json"));
                Some(path_text(if held && !crate::store::read::exists(&inbox) {
                    &q
                } else {
                    &inbox
                }))
            }
            _ => None,
        };
        SubmitResult {
            status,
            workflow_id: wf.clone(),
            handoff_id: rec.handoff_id.clone().unwrap_or_default(),
            target_god: routed.target_god.clone(),
            target_step: routed.target_step.clone(),
            state_status: st.status.clone(),
            handoff_path: path_text(handoff_path),
            dispatch_path,
            matched_rule: routed.rule.clone(),
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
}

/// The handoff id of a found dispatch.
pub(crate) fn hid_of(f: &files::Found) -> Result<HandoffId> {
    HandoffId::parse(&f.dispatch.handoff_id)
}

#[cfg(test)]
#[path = "submit_tests.rs"]
mod tests;
