//! A root as Python gods and other engines leave it: the tools read it, report what is broken,
//! and the server never dies.

use serde_json::json;

use crate::harness::*;

const TRACK: &str = "stripe-checkout_20260201";

#[test]
fn tools_read_a_foreign_root_and_report_what_is_broken() {
    let root = TestRoot::foreign();
    let report = root.session(&[
        call("check_inbox", json!({"god_name": "iris"})),
        call("check_inbox", json!({"god_name": "marvin"})),
        call("list_workflows", json!({})),
        call("list_pending", json!({})),
        call("get_workflow_state", json!({"workflow_id": "wf_deploy_42"})),
        call("read_messages", json!({"track": TRACK})),
        call("board_status", json!({"track": TRACK})),
        call(
            "acquire_lock",
            json!({"track": TRACK, "filepath": "src/types/billing.ts", "worker_id": "worker-9"}),
        ),
        call("detect_deadlocks", json!({"track": TRACK})),
    ]);
    let r = &report.results;

    let iris = ok(&r[0]);
    assert_eq!(iris["count"], json!(0));
    let errors = iris["errors"].to_string();
    assert!(
        errors.contains("broken.json"),
        "unreadable dispatches are reported: {errors}"
    );

    let marvin = ok(&r[1]);
    assert_eq!(marvin["count"], json!(1));
    assert_eq!(marvin["dispatches"][0]["ack_status"], json!("pending"));

    let workflows = ok(&r[2]);
    assert!(
        workflows["errors"].to_string().contains("broken.yaml"),
        "a definition that does not parse is reported: {workflows}"
    );

    let pending = ok(&r[3]);
    for foreign in ["inbox", "_webhooks"] {
        assert!(
            pending["pending"].get(foreign).is_none(),
            "{foreign} is another engine's directory, not a god: {pending}"
        );
    }
    assert_eq!(ok(&r[4])["workflow_id"], json!("wf_deploy_42"));

    let messages = ok(&r[5]);
    assert!(
        messages["skipped"].as_u64().unwrap() >= 2,
        "bad lines are counted: {messages}"
    );
    assert!(messages["count"].as_u64().unwrap() > 0);

    let board = ok(&r[6]);
    assert_eq!(board["session"]["status"], json!("DISCUSSING"), "{board}");

    let held = refused(&r[7]);
    assert!(
        held.contains("worker-1.1"),
        "the live foreign lock is honoured: {held}"
    );
    ok(&r[8]);
}
