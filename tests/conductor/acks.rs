//! Every row of the ack table (docs/PROTOCOL.md §2.5), fallback rerouting, duplicates.

use serde_json::json;

use crate::common::*;

const WF: &str = "wf_ack_1";
const HID: &str = "hof_20260614_f00001";

/// A test-flow workflow with `build` dispatched to hephaestus.
fn dispatched() -> Env {
    Env::dispatched(WF, HID)
}

#[test]
fn ack_accepted_archives_the_dispatch_and_the_workflow_is_in_progress() {
    let env = dispatched();
    let mut a = ack(
        "ack_20260614_a01",
        HID,
        "accepted",
        "Heard, pulling context now.",
    );
    a["eta"] = json!("2026-06-14T12:00:00Z");
    let r = env.ack(&a);
    assert_eq!(r["acknowledged"], true);
    assert_eq!(r["status"], "accepted");
    assert_eq!(r["state_status"], "in_progress");
    assert_eq!(r["by"], "hephaestus");
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    let d = env.read(&format!("conductor/archive/hephaestus/{HID}.json"));
    assert_eq!(d["ack_status"], "accepted");
    assert_eq!(d["eta"], "2026-06-14T12:00:00Z");
    let s = env.state(WF);
    assert_eq!(s["status"], "in_progress");
    let rec = &s["acks"][0];
    assert_eq!(rec["ack_id"], "ack_20260614_a01");
    assert_eq!(rec["god"], "hephaestus");
    assert_eq!(rec["by"], "hephaestus");
    assert_eq!(rec["eta"], "2026-06-14T12:00:00Z");
    assert!(rec["acked_at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn ack_pending_keeps_the_dispatch_in_the_inbox() {
    let env = dispatched();
    let mut a = ack(
        "ack_20260614_a02",
        HID,
        "pending",
        "Queued behind a deploy.",
    );
    a["eta"] = json!("2026-06-14T15:00:00Z");
    let r = env.ack(&a);
    assert_eq!(r["state_status"], "waiting_for_ack");
    let d = env.read(&format!("conductor/pending/hephaestus/{HID}.json"));
    assert_eq!(d["ack_status"], "pending");
    assert_eq!(d["message"], "Queued behind a deploy.");
    assert_eq!(d["eta"], "2026-06-14T15:00:00Z");
    let inbox = env.ok(&["inbox", "hephaestus"], None);
    assert_eq!(inbox["count"], 1);
    // Accepting after pending is normal.
    assert_eq!(
        env.ack(&ack("ack_20260614_a03", HID, "accepted", ""))["state_status"],
        "in_progress"
    );
}

#[test]
fn ack_rejected_reroutes_to_fallback_gods_in_order_then_fails() {
    let env = dispatched();
    let r = env.ack(&ack("ack_20260614_a04", HID, "rejected", "not my area"));
    assert_eq!(r["rerouted_to"], "marvin");
    assert_eq!(r["state_status"], "waiting_for_ack");
    assert_eq!(
        env.read(&format!("conductor/archive/hephaestus/{HID}.json"))["ack_status"],
        "rejected"
    );
    let d = env.read(&format!("conductor/pending/marvin/{HID}.json"));
    assert_eq!(d["to_god"], "marvin");
    assert_eq!(d["ack_status"], "unacked");
    assert_eq!(env.state(WF)["dispatched_to"], "marvin");

    let r = env.ack(&ack("ack_20260614_a05", HID, "rejected", "busy"));
    assert_eq!(r["god"], "marvin");
    assert_eq!(r["rerouted_to"], "hermes");

    let r = env.ack(&ack(
        "ack_20260614_a06",
        HID,
        "rejected",
        "nobody can build this",
    ));
    assert_eq!(r["rerouted_to"], json!(null));
    assert_eq!(r["state_status"], "failed");
    let s = env.state(WF);
    assert_eq!(s["status"], "failed");
    assert_eq!(s["failure_reason"], "nobody can build this");
    assert_eq!(s["acks"].as_array().unwrap().len(), 3);
    for god in ["hephaestus", "marvin", "hermes"] {
        assert!(
            env.names(&format!("conductor/pending/{god}")).is_empty(),
            "{god}"
        );
    }
}

#[test]
fn ack_completed_records_the_step_and_dispatches_the_next() {
    let env = dispatched();
    env.ack(&ack("ack_20260614_a07", HID, "accepted", "on it"));
    let mut a = ack("ack_20260614_a08", HID, "completed", "Built the service.");
    a["context"] = json!({"decisions": ["Use Rust"], "artifacts": ["out/svc.tar"]});
    let r = env.ack(&a);
    assert_eq!(r["status"], "completed");
    let next = &r["next"];
    assert_eq!(next["status"], "dispatched");
    assert_eq!(next["target_god"], "iris");
    assert_eq!(next["target_step"], "check");
    let new_hid = next["handoff_id"].as_str().unwrap();
    assert_ne!(new_hid, HID);
    assert_eq!(
        env.read(&format!("conductor/archive/hephaestus/{HID}.json"))["ack_status"],
        "completed"
    );
    let h = env.read(&format!("shared/handoffs/{WF}/build.json"));
    assert_eq!(h["handoff_id"], new_hid);
    assert_eq!(h["from_god"], "hephaestus");
    assert_eq!(h["context"]["summary"], "Built the service.");
    let s = env.state(WF);
    let last = s["step_history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["step_id"], "build");
    assert_eq!(last["god"], "hephaestus");
    assert_eq!(last["summary"], "Built the service.");
    assert_eq!(
        s["context_bag"]["decisions"],
        json!(["decision of plan", "Use Rust"])
    );
    let d = env.read(&format!("conductor/pending/iris/{new_hid}.json"));
    assert_eq!(
        d["context"]["artifacts"],
        json!([format!("out/{WF}/plan.md"), "out/svc.tar"])
    );
    assert_eq!(s["acks"][1]["recorded_handoff_id"], new_hid);
}

#[test]
fn ack_completed_on_the_last_step_completes_the_workflow_and_gates_apply() {
    let env = Env::with_test_flow();
    env.submit(&def_handoff(
        handoff(HID, WF, "hephaestus", "iris", "build", &[]),
        "test-flow",
        None,
    ));
    // `check` declares logic_gate: a completed ack without it is refused and changes nothing.
    let before = env.snapshot();
    let err = env.refused(
        &["ack"],
        Some(&ack("ack_20260614_a09", HID, "completed", "checked")),
    );
    assert!(err.contains("logic_gate"), "{err}");
    assert_eq!(before, env.snapshot());
    let mut a = ack("ack_20260614_a10", HID, "completed", "checked");
    a["context"] = json!({"gates_passed": ["logic_gate"]});
    let r = env.ack(&a);
    assert_eq!(r["next"]["status"], "completed");
    assert_eq!(r["state_status"], "completed");
    assert_eq!(env.state(WF)["status"], "completed");
}

#[test]
fn repeating_an_ack_is_harmless_and_changing_a_finished_one_is_refused() {
    let env = dispatched();
    let a = ack("ack_20260614_a11", HID, "accepted", "ok");
    env.ack(&a);
    let again = env.ack(&a);
    assert_eq!(again["duplicate"], true);
    assert_eq!(env.state(WF)["acks"].as_array().unwrap().len(), 1);
    // The same ack_id with another status is refused.
    env.refused(
        &["ack"],
        Some(&ack("ack_20260614_a11", HID, "rejected", "")),
    );
    // Completed after accepted is normal; then anything else is refused.
    let mut done = ack("ack_20260614_a12", HID, "completed", "done");
    done["workflow_id"] = json!(WF);
    env.ack(&done);
    let err = env.refused(
        &["ack"],
        Some(&ack("ack_20260614_a13", HID, "rejected", "")),
    );
    assert!(err.contains("completed"), "{err}");
}

#[test]
fn operator_ack_is_recorded_as_operator() {
    let env = dispatched();
    let r = env.ok(
        &["ack", "-", "--operator"],
        Some(&ack("ack_20260614_a14", HID, "accepted", "")),
    );
    assert_eq!(r["by"], "operator");
    assert_eq!(r["god"], "hephaestus");
    assert_eq!(env.state(WF)["acks"][0]["by"], "operator");
}
