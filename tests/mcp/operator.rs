//! The operator's acts over MCP (`approve_dispatch`, `requeue_dead_letter`, `abort_workflow`): over
//! HTTP an operator's credential may, a god's is refused with the right named and nothing changes,
//! `mcp --as GOD` refuses them likewise on stdio, and the journal names the principal who acted.
//! Driven by the official Python SDK's streamable HTTP client against the real binary.

use serde_json::{Value, json};

use crate::harness::*;

/// The operator's acts on `items`: approve one held dispatch, reject the other, requeue one dead
/// letter and abort the other's workflow.
fn operator_acts(items: &OperatorItems) -> Vec<Value> {
    vec![
        call("approve_dispatch", json!({"handoff_id": items.held[0]})),
        call(
            "approve_dispatch",
            json!({"handoff_id": items.held[1], "reject": true, "reason": "too costly"}),
        ),
        call("requeue_dead_letter", json!({"handoff_id": items.dead[0]})),
        call(
            "abort_workflow",
            json!({"workflow_id": "wf_dead_flow_1", "reason": "the operator stops it"}),
        ),
    ]
}

/// The rights the acts of [`operator_acts`] need, in order.
const RIGHTS: [&str; 4] = ["approve", "approve", "requeue", "abort"];

#[test]
fn an_operator_credential_approves_requeues_and_aborts_and_a_god_credential_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    let root = TestRoot::new();
    let items = root.operator_items(2);
    let alice = add_credential(&root, &file, "alice", "--operator");
    let thoth = add_credential(&root, &file, "thoth", "--god");
    let server = HttpServer::start(
        root.path(),
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--credentials",
            file.to_str().unwrap(),
        ],
    );
    let acts = operator_acts(&items);

    let r = http_results(&http_session(
        Sdk::Python,
        &server.url,
        Some(&thoth),
        &[],
        &acts,
    ));
    for (result, right) in r.iter().zip(RIGHTS) {
        let text = refused(result);
        assert_eq!(result["refusal"]["kind"], "forbidden", "{result:#}");
        assert!(
            text.contains(&format!("the right `{right}`")) && text.contains("god thoth"),
            "{text}"
        );
    }
    // Nothing changed: both still held, both still dead.
    let pending = root.cli_json(&["pending"]);
    assert_eq!(
        pending["awaiting_approval"].as_array().map(Vec::len),
        Some(2),
        "{pending:#}"
    );
    let dead = root.cli_json(&["dead"]);
    assert_eq!(dead["dead"].as_array().map(Vec::len), Some(2), "{dead:#}");

    let mut steps = acts.clone();
    steps.push(call("list_pending", json!({})));
    let r = http_results(&http_session(
        Sdk::Python,
        &server.url,
        Some(&alice),
        &[],
        &steps,
    ));
    // `ok` checks each answer against the tool's outputSchema.
    let approved = ok(&r[0]);
    assert_eq!(approved["status"], "approved", "{approved:#}");
    assert_eq!(approved["target_god"], "ares");
    assert_eq!(ok(&r[1])["status"], "rejected", "{:#}", r[1]);
    let requeued = ok(&r[2]);
    assert_eq!(requeued["status"], "requeued", "{requeued:#}");
    assert_eq!(requeued["to_god"], "hades");
    assert_eq!(ok(&r[3])["status"], "aborted", "{:#}", r[3]);
    assert_eq!(ok(&r[4])["awaiting_approval"], json!([]), "{:#}", r[4]);
    drop(server);

    let j = root.cli_json(&["journal"]);
    let entries = j["entries"].as_array().unwrap();
    for action in ["approve", "reject", "requeue", "abort"] {
        let actors: Vec<&str> = entries
            .iter()
            .filter(|e| e["action"] == action)
            .map(|e| e["actor"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(actors, ["alice"], "{action}: {j:#}");
    }
    assert_eq!(root.cli_json(&["journal", "--verify"])["valid"], true);
}

#[test]
fn mcp_as_a_god_refuses_the_operator_acts_naming_the_right() {
    let root = TestRoot::new();
    let items = root.operator_items(2);
    let report = root
        .start_session_env(
            "auto",
            &operator_acts(&items),
            &[("PANTHEON_MCP_ARGS", r#"["--as", "thoth"]"#)],
        )
        .finish();
    for (result, right) in report.results.iter().zip(RIGHTS) {
        let text = refused(result);
        assert!(text.contains(&format!("the right `{right}`")), "{text}");
    }
    let pending = root.cli_json(&["pending"]);
    assert_eq!(
        pending["awaiting_approval"].as_array().map(Vec::len),
        Some(2)
    );
    // Unbound, as the CLI: the operator's acts go through.
    let report = root.session(&operator_acts(&items));
    assert_eq!(ok(&report.results[0])["status"], "approved");
    assert_eq!(ok(&report.results[2])["status"], "requeued");
}
