//! The contract a host can check mechanically: every tool refuses arguments it does not declare,
//! declares an `outputSchema`, and every result it returns fits that schema (validated by the
//! official client and by `jsonschema` in `session.py`, see [`ok`]).

use serde_json::{Value, json};

use crate::harness::*;

const TRACK: &str = "schemas";

#[test]
fn every_tool_refuses_an_argument_it_does_not_declare() {
    let root = TestRoot::new();
    root.init_track(TRACK);
    let steps: Vec<Value> = ALL_TOOLS
        .iter()
        .map(|t| call(t, json!({"track": TRACK, "no_such_argument": 1})))
        .collect();
    let report = root.session(&steps);
    for (tool, result) in ALL_TOOLS.iter().zip(&report.results) {
        let text = refused(result);
        assert_eq!(
            result["refusal"]["kind"],
            json!("invalid_arguments"),
            "{tool}: {result:#}"
        );
        assert!(
            text.contains("no_such_argument"),
            "{tool} names the unknown argument: {text}"
        );
    }
}

#[test]
fn every_tool_declares_an_object_output_schema() {
    let root = TestRoot::new();
    let report = root.session(&[list_tools()]);
    for tool in report.results[0]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let schema = &tool["output_schema"];
        assert_eq!(schema["type"], json!("object"), "{name}: {schema}");
        assert!(
            schema["required"].as_array().is_some_and(|r| !r.is_empty()),
            "{name} names the fields every result has: {schema}"
        );
    }
}

/// Calls every tool with arguments it accepts, in an order where each succeeds; `ok` checks each
/// result against the tool's declared schema.
#[test]
fn every_tool_result_fits_its_declared_output_schema() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    root.init_track(TRACK);
    let items = root.operator_items(1);
    let steps = every_tool_steps(TRACK, &items);
    let report = root.session(&steps);
    if std::env::var_os("PANTHEON_DUMP_RESULTS").is_some() {
        for (step, result) in steps.iter().zip(&report.results) {
            eprintln!("{}: {}", step["tool"], result["structured"]);
        }
    }
    all_fit(&steps, &report.results);
}

/// Every result is a success that fits its tool's schema, and every tool was called.
pub fn all_fit(steps: &[Value], results: &[Value]) {
    assert_eq!(steps.len(), results.len(), "one result per step");
    let mut covered: Vec<&str> = Vec::new();
    for (step, result) in steps.iter().zip(results) {
        let tool = step["tool"].as_str().unwrap();
        ok(result);
        covered.push(tool);
    }
    covered.sort();
    covered.dedup();
    assert_eq!(covered, ALL_TOOLS, "every tool's result is checked");
}

/// A call of every tool with arguments it accepts, in an order where each succeeds, on a root
/// with [`TEST_WORKFLOW`], the bus of `track` and `items` (one held dispatch, one dead letter, for the
/// operator's tools).
pub fn every_tool_steps(track: &str, items: &OperatorItems) -> Vec<Value> {
    let wf = "wf_schemas_1";
    let h1 = handoff_id(0x5c1);
    let directors = ["CA", "CPO", "CSO", "COO", "CXO"];
    let mut steps = vec![
        call(
            "submit_handoff",
            json!({"handoff": handoff(&h1, wf, "thoth", "hephaestus", "research", &[])}),
        ),
        call("check_inbox", json!({"god_name": "hephaestus"})),
        call(
            "check_inbox",
            json!({"god_name": "hephaestus", "compact": true, "limit": 1}),
        ),
        call(
            "get_dispatch",
            json!({"god_name": "hephaestus", "handoff_id": h1}),
        ),
        call("list_pending", json!({})),
        call("list_rules", json!({})),
        call("list_workflows", json!({})),
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(0x5c1), "handoff_id": h1, "status": "accepted"}}),
        ),
        call("get_workflow_state", json!({"workflow_id": wf})),
        call(
            "abort_workflow",
            json!({"workflow_id": wf, "reason": "schema test", "by": "thoth"}),
        ),
        call("cleanup", json!({"workflow_id": wf, "dry_run": true})),
        call("approve_dispatch", json!({"handoff_id": items.held[0]})),
        call("requeue_dead_letter", json!({"handoff_id": items.dead[0]})),
        call(
            "post_message",
            json!({"track": track, "msg_type": "TASK_COMPLETE", "source": "w1",
                   "payload": {"task_id": "1.1"}}),
        ),
        call("read_messages", json!({"track": track})),
        call(
            "acquire_lock",
            json!({"track": track, "filepath": "src/a.rs", "worker_id": "w1"}),
        ),
        call(
            "release_lock",
            json!({"track": track, "filepath": "src/a.rs", "worker_id": "w1"}),
        ),
        call(
            "update_worker_status",
            json!({"track": track, "worker_id": "w1", "task_id": "1.2", "status": "RUNNING",
                   "progress_pct": 10, "current_subtask": "reading"}),
        ),
        call(
            "wait_for_event",
            json!({"track": track, "event_pattern": "TASK_COMPLETE_*", "timeout": 5}),
        ),
        call("detect_deadlocks", json!({"track": track})),
        call(
            "board_open",
            json!({"track": track, "checkpoint": "EVALUATE_PLAN", "proposal": "Ship it"}),
        ),
        call("board_status", json!({"track": track})),
    ];
    for d in directors {
        steps.push(call(
            "board_assess",
            json!({"track": track, "director": d, "verdict": "APPROVE", "score": 8}),
        ));
    }
    steps.push(call("board_advance", json!({"track": track})));
    steps.push(call(
        "board_discuss",
        json!({"track": track, "from": "CA", "to": "ALL", "msg_type": "AGREE", "message": "ok"}),
    ));
    steps.push(call("board_next_round", json!({"track": track})));
    steps.push(call(
        "board_advance",
        json!({"track": track, "force": true}),
    ));
    for d in directors {
        steps.push(call(
            "board_vote",
            json!({"track": track, "director": d, "final_verdict": "APPROVE", "confidence": 0.9}),
        ));
    }
    steps.push(call(
        "board_resolve",
        json!({"track": track, "force": true}),
    ));
    steps.push(call("board_status", json!({"track": track})));

    steps
}

/// `check_inbox` and `list_pending` page (`limit`, `cursor`, `next_cursor`, `count`
/// the total), `compact` cuts each dispatch down, `get_dispatch` fetches one whole.
#[test]
fn inbox_and_pending_page_through_the_official_client() {
    let root = TestRoot::new();
    for n in 0..25u32 {
        let id = handoff_id(0x700 + n);
        root.write(
            &format!("conductor/pending/marvin/{id}.json"),
            &json!({"handoff_id": id, "workflow_id": format!("wf_page_{n}"), "from_god": "thoth",
                    "to_god": "marvin", "step": "review",
                    "context": {"summary": format!("line one {n}\nline two"), "decisions": [], "artifacts": []},
                    "dispatched_at": format!("2026-06-14T10:00:{n:02}Z"), "ack_status": "unacked"})
            .to_string(),
        );
    }
    let first = root.session(&[
        call("check_inbox", json!({"god_name": "marvin"})),
        call(
            "check_inbox",
            json!({"god_name": "marvin", "compact": true, "limit": 3}),
        ),
        call("list_pending", json!({"limit": 10})),
        call(
            "get_dispatch",
            json!({"god_name": "marvin", "handoff_id": handoff_id(0x700)}),
        ),
        call(
            "get_dispatch",
            json!({"god_name": "marvin", "handoff_id": handoff_id(0x7ff)}),
        ),
    ]);
    let page = ok(&first.results[0]);
    assert_eq!(page["count"], json!(25));
    assert_eq!(
        page["dispatches"].as_array().unwrap().len(),
        20,
        "default limit 20"
    );
    assert_eq!(
        page["dispatches"][0]["handoff_id"],
        json!(handoff_id(0x700)),
        "oldest first"
    );
    let compact = ok(&first.results[1]);
    assert_eq!(compact["dispatches"][0]["summary"], json!("line one 0"));
    assert!(compact["dispatches"][0]["context"].is_null(), "{compact}");
    let pending = ok(&first.results[2]);
    assert_eq!(pending["count"], json!(25));
    assert_eq!(pending["pending"]["marvin"].as_array().unwrap().len(), 10);
    let whole = ok(&first.results[3]);
    assert_eq!(
        whole["dispatch"]["context"]["summary"],
        json!("line one 0\nline two")
    );
    assert!(refused(&first.results[4]).contains("no dispatch"));

    let cursor = page["next_cursor"].as_str().unwrap();
    let next = root.session(&[
        call(
            "check_inbox",
            json!({"god_name": "marvin", "cursor": cursor}),
        ),
        call(
            "check_inbox",
            json!({"god_name": "marvin", "cursor": "bogus"}),
        ),
    ]);
    let rest = ok(&next.results[0]);
    assert_eq!(rest["dispatches"].as_array().unwrap().len(), 5);
    assert_eq!(
        rest["dispatches"][0]["handoff_id"],
        json!(handoff_id(0x700 + 20))
    );
    assert_eq!(rest["next_cursor"], Value::Null);
    assert!(refused(&next.results[1]).contains("cursor"));
}
