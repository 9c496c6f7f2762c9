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
