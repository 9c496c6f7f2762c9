//! Unit tests of `conductor::submit`.

use super::*;
use crate::conductor::dispatch::{bounded, carried_context};
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
    next_state(NextStateInput {
        wf: &wf(),
        state: st,
        handoff: h,
        route: r,
        def: d,
        ack: None,
        warnings: &["w".to_owned()],
        now: NOW,
    })
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
    assert_eq!(s.status, SubmitStatus::Dispatched);
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
    assert_eq!(routed.status, RouteStatus::Dispatched);
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
    assert_eq!(s.status, SubmitStatus::AwaitingApproval);
    assert_eq!(s.state.status, WorkflowStatus::AwaitingApproval);
    assert_eq!(s.state.definition_id.as_deref(), Some("flow"));
    let rec = s.state.record_of("hof_20261201_aaaaaa").unwrap();
    assert_eq!(
        rec.routed.as_ref().unwrap().held_because.as_deref(),
        Some("rule r1")
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
    let s = next_state(NextStateInput {
        wf: &wf(),
        state: Some(st),
        handoff: &h,
        route: &r,
        def: Some(&d),
        ack: Some(&ack),
        warnings: &[],
        now: NOW,
    })
    .unwrap();
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
        (
            Target::Complete,
            WorkflowStatus::Completed,
            SubmitStatus::Completed,
        ),
        (
            Target::Record,
            WorkflowStatus::InProgress,
            SubmitStatus::Recorded,
        ),
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
fn a_dispatch_carries_the_latest_handoffs_keys_then_the_kept_ones_never_over_a_standard_field() {
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
