//! Unit tests of `conductor::ack_step`.

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
        traceparent: None,
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
        rejected(RejectInput {
            st: held_state(),
            d: held_dispatch(),
            rec: rec(AckStatus::Rejected),
            fallback: fallback.map(str::to_owned),
            is_current: current,
            god: &hermes,
            message,
            now,
        })
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
        reroute_hold: None,
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
        f.dispatch.step_deadline = Some("2026-12-01T12:05:00Z".into());
        f.dispatch.step_timeout = Some("30m".into());
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
        e.contains("held for an operator's decision at step \"build\"")
            && e.contains("pantheon approve hof_20261201_aaaaaa"),
        "{e}"
    );
    // Held in a quarantine the state no longer holds (decided, its move killed): refused as before.
    let mut held = found(Place::Quarantine, &[]);
    held.dispatch.held_because = Some("publish step".into());
    let e = step(
        waiting(),
        &a,
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
    // The held dispatch moved into an inbox (or an archive) by hand: every ack is refused while
    // the state holds its step, naming where it lies.
    for decision in [
        AckDecision::Accepted,
        AckDecision::Pending,
        AckDecision::Rejected,
        AckDecision::Completed,
    ] {
        for located in [
            Located::Live(inbox()),
            Located::Archived(archived(AckStatus::Accepted, false)),
        ] {
            let e = step(
                held_state(),
                &ack(decision, None, None),
                Actor::Recipient,
                located,
                facts(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("moving it does not release it")
                    && e.contains("pantheon approve hof_20261201_aaaaaa"),
                "{e}"
            );
        }
    }
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
    assert_eq!(dispatch.step_deadline, Some(deadline.clone()));
    assert_eq!(effects.len(), 4);
    assert_eq!(result.deadline.as_deref(), Some(deadline.as_str()));
    assert_eq!(result.deadline_kind, Some(DeadlineKind::StepTimeout));
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
    assert_eq!(r.status, AckStatus::Accepted);
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
        assert_eq!(result.deadline_kind, Some(DeadlineKind::Ack));
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
    assert_eq!(d.step_deadline, Some(deadline.clone()));
    assert_eq!(d.ack_status, AckStatus::Accepted, "still accepted");
    assert_eq!(result.deadline.as_deref(), Some(deadline.as_str()));
    assert_eq!(result.deadline_kind, Some(DeadlineKind::StepTimeout));

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
    let AckEffect::Reroute(god, d, false) = &effects[3] else {
        panic!("{effects:?}")
    };
    assert_eq!(god.as_str(), "apollo");
    assert_eq!(d.to_god, "apollo");
    assert_eq!(d.ack_status, AckStatus::Unacked);
    assert_eq!(d.dispatch_id.as_deref(), Some("dsp_test"));
    assert_eq!(d.rerouted_from.as_deref(), Some("hermes"));
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
    let AckPlan::Complete(done) = plan else {
        panic!("{plan:?}")
    };
    let CompletePlan {
        record,
        dispatch,
        god,
        ..
    } = *done;
    assert_eq!(god.as_str(), "hermes");
    assert_eq!(record.status, AckStatus::Completed);
    assert_eq!(dispatch.ack_status, AckStatus::Completed);
    assert_eq!(dispatch.message.as_deref(), Some("done"));
}

#[test]
fn a_rejection_rerouted_past_a_reached_budget_is_held_like_any_routed_dispatch() {
    let a = ack(AckDecision::Rejected, None, Some("not mine"));
    let mut f = facts();
    f.fallback_gods = vec!["hermes".into(), "apollo".into()];
    f.reroute_hold = Some(crate::cost::hook::Hold {
        because: "budget: god apollo: $2.000000 of its $1.000000 budget".into(),
        figures: serde_json::json!({"crossed": [{"scope": "god", "name": "apollo",
            "metric": "cost_usd", "used": 2, "limit": 1}]}),
    });
    let (confine, effects, result) =
        written(step(waiting(), &a, Actor::Recipient, Located::Live(inbox()), f).unwrap());
    assert_eq!(
        confine.last().unwrap(),
        &Root::at("/r")
            .quarantine_dir()
            .join("hof_20261201_aaaaaa.json"),
        "it is written to _quarantine, not to apollo's inbox"
    );
    let st = state_of(&effects);
    assert_eq!(st.status, WorkflowStatus::AwaitingApproval);
    assert_eq!(st.dispatched_to.as_deref(), Some("apollo"));
    assert_eq!(result.state_status, WorkflowStatus::AwaitingApproval);
    let AckEffect::Reroute(god, d, true) = &effects[3] else {
        panic!("a held reroute: {effects:?}")
    };
    assert_eq!(god.as_str(), "apollo");
    assert_eq!(
        d.held_because.as_deref(),
        Some("budget: god apollo: $2.000000 of its $1.000000 budget")
    );
    assert_eq!(d.extra["budget"]["crossed"][0]["name"], "apollo");
    assert_eq!(
        (d.approved_by.as_ref(), d.ack_deadline.as_ref()),
        (None, None)
    );
    assert!(d.deliveries.is_empty());
    assert_eq!(d.rerouted_from.as_deref(), Some("hermes"));
}
