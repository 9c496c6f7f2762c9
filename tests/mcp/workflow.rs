//! A whole Conductor workflow driven through tool calls, as gods in separate sessions would.

use serde_json::{Value, json};

use crate::harness::*;

fn ids(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|e| e[key].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn workflow_runs_from_first_handoff_to_completion_through_tool_calls() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    let wf = "wf_mcp_flow_1";
    let (h1, h2) = (handoff_id(1), handoff_id(2));

    // Thoth finishes research.
    let thoth = root.session(&[call(
        "submit_handoff",
        json!({"handoff": handoff(&h1, wf, "thoth", "hephaestus", "research", &[])}),
    )]);
    let submitted = ok(&thoth.results[0]);
    assert_eq!(submitted["status"], json!("dispatched"));
    assert_eq!(submitted["target_god"], json!("hephaestus"));
    assert_eq!(submitted["target_step"], json!("implement"));

    // Hephaestus starts a session: inbox, ack accepted, work, submit the next step.
    let heph = root.session(&[
        call("check_inbox", json!({"god_name": "hephaestus"})),
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(1), "handoff_id": h1, "workflow_id": wf,
                           "status": "accepted", "eta": "2026-06-14T12:00:00Z",
                           "message": "Heard, pulling context now."}}),
        ),
        call("get_workflow_state", json!({"workflow_id": wf})),
        call(
            "submit_handoff",
            json!({"handoff": handoff(&h2, wf, "hephaestus", "marvin", "implement", &["logic_gate"])}),
        ),
    ]);
    let inbox = ok(&heph.results[0]);
    assert_eq!(inbox["god"], json!("hephaestus"));
    assert_eq!(inbox["count"], json!(1));
    let dispatch = &inbox["dispatches"][0];
    assert_eq!(dispatch["handoff_id"], json!(h1));
    assert_eq!(dispatch["step"], json!("implement"));
    assert_eq!(
        dispatch["context"]["decisions"],
        json!(["decision of research"]),
        "the dispatch carries the earlier decisions"
    );
    let accepted = ok(&heph.results[1]);
    assert_eq!(accepted["acknowledged"], json!(true));
    assert_eq!(accepted["state_status"], json!("in_progress"));
    assert_eq!(ok(&heph.results[2])["status"], json!("in_progress"));
    let next = ok(&heph.results[3]);
    assert_eq!(next["status"], json!("dispatched"));
    assert_eq!(next["target_god"], json!("marvin"));
    assert_eq!(next["target_step"], json!("review"));

    // Marvin reviews and closes the last step with a completed ack.
    let marvin = root.session(&[
        call("check_inbox", json!({"god_name": "marvin"})),
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(2), "handoff_id": h2, "status": "completed",
                           "message": "Reviewed: ship it."}}),
        ),
        call("get_workflow_state", json!({"workflow_id": wf})),
        call("check_inbox", json!({"god_name": "marvin"})),
    ]);
    assert_eq!(ok(&marvin.results[0])["count"], json!(1));
    assert_eq!(ok(&marvin.results[1])["state_status"], json!("completed"));
    let state = ok(&marvin.results[2]);
    assert_eq!(state["status"], json!("completed"));
    assert_eq!(state["current_step"], Value::Null);
    assert_eq!(
        ids(&state["step_history"], "step_id"),
        ["research", "implement", "review"]
    );
    let history = state["step_history"].as_array().unwrap();
    assert_eq!(history[0]["handoff_id"], json!(h1));
    assert_eq!(history[1]["handoff_id"], json!(h2));
    assert_eq!(history[2]["summary"], json!("Reviewed: ship it."));
    assert_eq!(ids(&state["acks"], "ack_id"), [ack_id(1), ack_id(2)]);
    assert_eq!(
        ids(&state["acks"], "by"),
        ["hephaestus", "marvin"],
        "acks via MCP are by the god"
    );
    assert_eq!(
        ok(&marvin.results[3])["count"],
        json!(0),
        "the inbox is empty again"
    );

    // The CLI sees the same state: one engine, one truth.
    let cli = root.cli_json(&["state", wf]);
    assert_eq!(&cli, state);
}

#[test]
fn malformed_handoff_is_refused_with_the_field_named_and_nothing_written() {
    let root = TestRoot::new();
    let wf = "wf_mcp_bad_1";
    let mut missing_summary = handoff(&handoff_id(3), wf, "thoth", "hephaestus", "research", &[]);
    missing_summary["context"]
        .as_object_mut()
        .unwrap()
        .remove("summary");
    let mut missing_from = handoff(&handoff_id(4), wf, "thoth", "hephaestus", "research", &[]);
    missing_from.as_object_mut().unwrap().remove("from_god");
    let mut bad_id = handoff("hof_nope", wf, "thoth", "hephaestus", "research", &[]);
    bad_id["context"]["summary"] = json!("bad id");

    let report = root.session(&[
        call("submit_handoff", json!({"handoff": missing_summary})),
        call("submit_handoff", json!({"handoff": missing_from})),
        call("submit_handoff", json!({"handoff": bad_id})),
        call("submit_handoff", json!({"handoff": "not an object"})),
    ]);
    let summary = refused(&report.results[0]);
    assert!(summary.contains("summary"), "names the field: {summary}");
    assert!(
        summary.contains("/context"),
        "with its JSON pointer: {summary}"
    );
    let from = refused(&report.results[1]);
    assert!(from.contains("from_god"), "names the field: {from}");
    let id = refused(&report.results[2]);
    assert!(id.contains("handoff_id"), "names the field: {id}");
    let not_object = refused(&report.results[3]);
    assert!(
        not_object.contains("/handoff"),
        "names the argument: {not_object}"
    );
    assert_eq!(
        report.results[3]["refusal"]["kind"],
        json!("invalid_arguments")
    );

    assert!(
        !root
            .path()
            .join("conductor/state")
            .join(format!("{wf}.json"))
            .exists(),
        "a refused handoff writes no state"
    );
    assert!(!root.path().join("shared/handoffs").join(wf).exists());
}

#[test]
fn server_keeps_serving_after_a_refusal_an_unknown_tool_and_invalid_arguments() {
    let root = TestRoot::new();
    let report = root.session(&[
        call(
            "get_workflow_state",
            json!({"workflow_id": "wf_never_started"}),
        ),
        call("conductor.submit_handoff", json!({"handoff": {}})),
        call("check_inbox", json!({"god_name": 42})),
        call("check_inbox", json!({"god": "thoth"})),
        call("check_inbox", json!({"god_name": "../../etc"})),
        call("list_workflows", json!({})),
        call("check_inbox", json!({"god_name": "thoth"})),
    ]);
    let missing = refused(&report.results[0]);
    assert!(missing.contains("wf_never_started"), "{missing}");
    let unknown = &report.results[1]["protocol_error"];
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("submit_handoff"),
        "an unknown tool is a JSON-RPC error listing the real tools: {unknown}"
    );
    let wrong_type = refused(&report.results[2]);
    assert!(wrong_type.contains("/god_name"), "{wrong_type}");
    let misspelt = refused(&report.results[3]);
    assert!(
        misspelt.contains("god_name") && misspelt.contains("unknown argument \"god\""),
        "{misspelt}"
    );
    let escape = refused(&report.results[4]);
    assert!(
        escape.contains("god"),
        "a path-escaping name is refused: {escape}"
    );
    assert_eq!(report.results[4]["refusal"]["kind"], json!("invalid_name"));
    assert!(ok(&report.results[5])["workflows"].is_array());
    assert_eq!(ok(&report.results[6])["god"], json!("thoth"));
}

#[test]
fn abort_and_cleanup_go_through_the_engine_and_record_who_aborted() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    let wf = "wf_mcp_abort_1";
    let report = root.session(&[
        call(
            "submit_handoff",
            json!({"handoff": handoff(&handoff_id(5), wf, "thoth", "hephaestus", "research", &[])}),
        ),
        call("cleanup", json!({"workflow_id": wf, "dry_run": true})),
        call(
            "abort_workflow",
            json!({"workflow_id": wf, "reason": "requirements withdrawn", "by": "thoth"}),
        ),
        call("get_workflow_state", json!({"workflow_id": wf})),
        call("check_inbox", json!({"god_name": "hephaestus"})),
        call("cleanup", json!({"workflow_id": wf, "dry_run": true})),
        call(
            "abort_workflow",
            json!({"workflow_id": wf, "reason": "requirements withdrawn", "by": "thoth"}),
        ),
    ]);
    assert_eq!(ok(&report.results[0])["status"], json!("dispatched"));
    refused(&report.results[1]); // cleanup only after abort or completion
    let aborted = ok(&report.results[2]);
    assert_eq!(aborted["status"], json!("aborted"));
    let state = ok(&report.results[3]);
    assert_eq!(state["status"], json!("aborted"));
    assert_eq!(state["failure_reason"], json!("requirements withdrawn"));
    assert_eq!(state["aborted_by"], json!("thoth"));
    assert_eq!(
        ok(&report.results[4])["count"],
        json!(0),
        "the dispatch was withdrawn"
    );
    let cleaned = ok(&report.results[5]);
    assert_eq!(cleaned["status"], json!("dry_run"));
    assert_eq!(cleaned["dry_run"], json!(true));
    assert!(cleaned["would_delete"].is_array() && cleaned.get("deleted").is_none());
    assert_eq!(
        ok(&report.results[6])["manifest_path"],
        aborted["manifest_path"],
        "aborting again returns the same manifest"
    );
}

/// What the step asks (`step_def`) and the handoff's context beyond the standard fields reach the god
/// through `check_inbox` and `get_dispatch` (validated by the official client against the tools'
/// output schemas), and `compact` leaves them out.
#[test]
fn step_keys_and_extra_context_reach_the_god_over_mcp() {
    let root = TestRoot::new();
    root.write(
        "conductor/workflows/mcp-test.yaml",
        &TEST_WORKFLOW.replace(
            "      god: hephaestus\n",
            "      god: hephaestus\n      action: implement\n      skill: code\n      output: build_report\n",
        ),
    );
    let wf = "wf_mcp_keys_1";
    let h1 = handoff_id(31);
    let mut h = handoff(&h1, wf, "thoth", "hephaestus", "research", &[]);
    h["context"]["payload"] = json!({"feature_summary": "fast boots"});
    h["context"]["spec_summary"] = json!("boot in under a second");
    let report = root.session(&[
        call("submit_handoff", json!({"handoff": h})),
        call("check_inbox", json!({"god_name": "hephaestus"})),
        call(
            "check_inbox",
            json!({"god_name": "hephaestus", "compact": true}),
        ),
        call(
            "get_dispatch",
            json!({"god_name": "hephaestus", "handoff_id": h1}),
        ),
    ]);
    assert_eq!(ok(&report.results[0])["status"], json!("dispatched"));
    let full = &ok(&report.results[1])["dispatches"][0];
    assert_eq!(
        full["step_def"],
        json!({"action": "implement", "skill": "code", "output": "build_report"}),
        "{full:#}"
    );
    assert_eq!(
        full["context"]["payload"]["feature_summary"],
        json!("fast boots")
    );
    assert_eq!(
        full["context"]["spec_summary"],
        json!("boot in under a second")
    );
    let compact = ok(&report.results[2])["dispatches"][0]
        .as_object()
        .unwrap()
        .clone();
    assert!(
        !compact.contains_key("step_def") && !compact.contains_key("context"),
        "{compact:?}"
    );
    let one = &ok(&report.results[3])["dispatch"];
    assert_eq!(one["step_def"]["action"], json!("implement"));
    assert_eq!(one["context"]["payload"], full["context"]["payload"]);
}

/// A paused god's `check_inbox` says it is paused, why and until when (docs/PROTOCOL.md §2.14);
/// the answer still passes the tool's output schema, and another god's says nothing.
#[test]
fn a_paused_gods_inbox_says_it_is_paused_and_until_when() {
    let root = TestRoot::new();
    let out = root.pantheon(&[
        "pause",
        "--god",
        "hephaestus",
        "--until",
        "2h",
        "--reason",
        "budget burning",
    ]);
    assert!(out.status.success(), "{out:?}");
    let r = root.session(&[
        call("check_inbox", json!({"god_name": "hephaestus"})),
        call(
            "check_inbox",
            json!({"god_name": "hephaestus", "compact": true}),
        ),
        call("check_inbox", json!({"god_name": "thoth"})),
    ]);
    for i in 0..2 {
        let inbox = ok(&r.results[i]);
        let p = &inbox["paused"];
        assert_eq!(p["what"], json!("god hephaestus"), "{inbox}");
        assert_eq!(p["reason"], json!("budget burning"));
        assert!(p["until"].is_string());
        assert!(
            p["note"]
                .as_str()
                .unwrap()
                .contains("hephaestus is paused until "),
            "{p}"
        );
    }
    assert!(ok(&r.results[2]).get("paused").is_none());
}
