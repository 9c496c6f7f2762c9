//! Orphaned waits: a workflow `waiting_for_ack` whose dispatch a foreign cleanup deleted outright.

use serde_json::Value;

use crate::common::*;

const WF: &str = "wf_orphan_1";
const HID: &str = "hof_20260614_0a0001";
const DISPATCH: &str = "conductor/pending/hephaestus/hof_20260614_0a0001.json";

/// A test-flow workflow with `build` dispatched to hephaestus.
fn dispatched() -> Env {
    Env::dispatched(WF, HID)
}

fn validate(env: &Env) -> (bool, Value) {
    let out = env.run(&["validate"], None);
    (
        out.status.success(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

fn orphan_warnings(report: &Value) -> Vec<Value> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["message"].as_str().unwrap().contains("redispatch"))
        .cloned()
        .collect()
}

#[test]
fn a_deleted_dispatch_is_a_validate_warning_and_redispatch_writes_it_again() {
    let env = dispatched();
    let original = env.read(DISPATCH);
    assert_eq!(orphan_warnings(&validate(&env).1), Vec::<Value>::new());
    let err = env.refused(&["redispatch", WF], None);
    assert!(
        err.contains("already has its dispatch") && err.contains(HID),
        "{err}"
    );

    std::fs::remove_file(env.path(DISPATCH)).unwrap();
    let (ok, report) = validate(&env);
    assert!(ok, "a warning, not an error: {report:#}");
    let w = orphan_warnings(&report);
    assert_eq!(w.len(), 1, "{report:#}");
    assert_eq!(w[0]["severity"], "warning");
    assert!(
        w[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("conductor/state/wf_orphan_1.json"),
        "{w:?}"
    );
    assert!(w[0]["message"].as_str().unwrap().contains("hephaestus"));

    let r = env.ok(&["redispatch", WF], None);
    assert_eq!(r["status"], "redispatched");
    assert_eq!(r["handoff_id"], HID);
    assert_eq!(r["to_god"], "hephaestus");
    assert_eq!(r["step"], "build");
    assert!(r["dispatch_path"].as_str().unwrap().ends_with(DISPATCH));
    let again = env.read(DISPATCH);
    for k in [
        "handoff_id",
        "workflow_id",
        "from_god",
        "to_god",
        "step",
        "context",
        "routing",
        "ack_status",
    ] {
        assert_eq!(again[k], original[k], "{k}");
    }
    assert_eq!(orphan_warnings(&validate(&env).1), Vec::<Value>::new());

    // Repeating changes nothing and says why.
    let before = env.snapshot();
    let err = env.refused(&["redispatch", WF], None);
    assert!(err.contains("already has its dispatch"), "{err}");
    assert_eq!(env.snapshot(), before);

    // The re-derived dispatch is a real one: its ack moves the workflow on.
    let r = env.ack(&ack("ack_20260614_0a1", HID, "accepted", "On it."));
    assert_eq!(r["state_status"], "in_progress");
    let err = env.refused(&["redispatch", WF], None);
    assert!(err.contains("not waiting_for_ack"), "{err}");
    let err = env.refused(&["redispatch", "wf_nowhere"], None);
    assert!(err.contains("unknown workflow"), "{err}");
}

/// A workflow waiting at an `await_ack` step for a peer's reply has no dispatch by design: `validate`
/// is clean (no warning at all), and `redispatch` calls it healthy instead of pointing at `abort`.
#[test]
fn a_workflow_waiting_at_await_ack_for_a_reply_is_not_an_orphan() {
    let env = Env::new();
    env.write(
        "conductor/workflows/ask-partner.yaml",
        "workflow:\n  id: ask-partner\n  steps:\n    - {id: package, god: hephaestus}\n    - {id: ask, type: nats_publish, subject: subspace.konan.outgoing.tallon}\n    - {id: wait, god: hermes, action: await_ack, timeout: 24h}\n    - {id: announce, god: hermes}\n",
    );
    let mut h = handoff(
        "hof_20260614_0a0101",
        "wf_await_1",
        "hephaestus",
        "hermes",
        "package",
        &[],
    );
    h["routing"] = serde_json::json!({"workflow_definition": "ask-partner"});
    h["context"]["artifacts"] = serde_json::json!([]);
    let r = env.submit(&h);
    assert_eq!(r["status"], "publishing", "{r:#}");
    let st = env.state("wf_await_1");
    assert_eq!(
        (st["status"].as_str(), st["current_step"].as_str()),
        (Some("waiting_for_ack"), Some("wait"))
    );
    let (ok, report) = validate(&env);
    assert!(ok, "{report:#}");
    assert_eq!(report["problems"], serde_json::json!([]), "{report:#}");
    let err = env.refused(&["redispatch", "wf_await_1"], None);
    assert!(
        err.contains("healthy") && !err.contains("pantheon abort"),
        "{err}"
    );
}
