//! Usage reports over MCP (docs/BUDGETS.md): both official client SDKs submit and ack with `usage`,
//! every answer validates against its tool's output schema, the dispatch the reports push over a
//! budget is held (listed under `awaiting_approval` with its figures), and a bad report is refused
//! naming the field.

use serde_json::{Value, json};

use crate::harness::*;

const BUDGETED: &str = r#"workflow:
  id: mcp-test
  budget: {cost_usd: 1.0}
  steps:
    - id: research
      god: thoth
    - id: implement
      god: hephaestus
    - id: review
      god: marvin
"#;

#[test]
fn both_sdks_take_usage_on_submit_and_ack_and_the_answers_fit_their_schemas() {
    for (n, sdk) in BOTH_SDKS.into_iter().enumerate() {
        let root = TestRoot::new();
        root.write("conductor/workflows/mcp-test.yaml", BUDGETED);
        let n = n as u32;
        let wf = format!("wf_usage_{n}");
        let h1 = handoff_id(0x700 + n);
        let mut first = handoff(&h1, &wf, "thoth", "hephaestus", "research", &[]);
        first["routing"] = json!({"workflow_definition": "mcp-test"});
        first["usage"] = json!({"input_tokens": 1200, "output_tokens": 300,
            "model": "claude-sonnet-4-5", "cost_usd": 0.4});
        let mut bad = handoff(
            &handoff_id(0x7f0 + n),
            "wf_bad",
            "thoth",
            "hephaestus",
            "research",
            &[],
        );
        bad["usage"] = json!({"output_tokens": -1});
        let steps = vec![
            call("submit_handoff", json!({"handoff": first})),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0x700 + n), "handoff_id": h1, "status": "accepted",
                               "usage": {"cost_usd": 0.3, "model": "gpt-4o"}}}),
            ),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0x710 + n), "handoff_id": h1, "status": "completed",
                               "message": "implemented", "context": {"gates_passed": ["logic_gate"]},
                               "usage": {"cost_usd": 0.3, "cache_read_tokens": 5000}}}),
            ),
            call("list_pending", json!({})),
            call("get_workflow_state", json!({"workflow_id": wf})),
            call("submit_handoff", json!({"handoff": bad})),
        ];
        let report = root.session_with(sdk, &steps);
        for (i, r) in report.results.iter().enumerate().take(5) {
            assert_eq!(r["schema_errors"], json!([]), "{sdk:?} #{i}: {r:#}");
            ok(r);
        }
        assert_eq!(ok(&report.results[0])["status"], "dispatched");
        let done = ok(&report.results[2]);
        assert_eq!(
            done["next"]["status"], "awaiting_approval",
            "{sdk:?}: {done:#}"
        );
        let pending = ok(&report.results[3]);
        let held: &Value = &pending["awaiting_approval"][0];
        assert!(
            held["held_because"]
                .as_str()
                .unwrap_or("")
                .starts_with(&format!("budget: workflow {wf}: $1.000000")),
            "{sdk:?}: {pending:#}"
        );
        let st = ok(&report.results[4]);
        assert_eq!(
            st["usage"]["total"]["cost_micros"], 1_000_000,
            "{sdk:?}: {st:#}"
        );
        assert_eq!(st["usage"]["total"]["cache_read_tokens"], 5000);
        let text = refused(&report.results[5]);
        assert!(text.contains("/usage/output_tokens"), "{sdk:?}: {text}");
    }
}

/// A hold is the operator's alone (docs/PROTOCOL.md 2.5): a god that moves its dispatch, held for a
/// budget, out of `_quarantine` into its own inbox gets its acks and its next handoff refused over
/// MCP, naming the hold and `pantheon approve`; the workflow stays `awaiting_approval`.
#[test]
fn an_agent_cannot_release_its_held_dispatch_by_moving_it_over_mcp_either() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", BUDGETED);
    let (wf, h1) = ("wf_moved_mcp", handoff_id(0x7a0));
    let mut first = handoff(&h1, wf, "thoth", "hephaestus", "research", &[]);
    first["routing"] = json!({"workflow_definition": "mcp-test"});
    first["usage"] = json!({"cost_usd": 1.5});
    let report = root.session(&[call("submit_handoff", json!({"handoff": first}))]);
    assert_eq!(ok(&report.results[0])["status"], "awaiting_approval");
    // The god moves it into its own inbox.
    let held = root
        .path()
        .join(format!("conductor/pending/_quarantine/{h1}.json"));
    let inbox = root
        .path()
        .join(format!("conductor/pending/hephaestus/{h1}.json"));
    std::fs::rename(&held, &inbox).unwrap();
    let mut next = handoff(
        &handoff_id(0x7a1),
        wf,
        "hephaestus",
        "marvin",
        "implement",
        &[],
    );
    next["routing"] = json!({"workflow_definition": "mcp-test"});
    let report = root.session(&[
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(0x7a0), "handoff_id": h1, "status": "accepted"}}),
        ),
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(0x7a1), "handoff_id": h1, "status": "completed",
                           "message": "done"}}),
        ),
        call("submit_handoff", json!({"handoff": next})),
        call("get_workflow_state", json!({"workflow_id": wf})),
    ]);
    for r in &report.results[..3] {
        let text = refused(r);
        assert!(text.contains("held for an operator's decision"), "{text}");
        assert!(text.contains(&format!("pantheon approve {h1}")), "{text}");
    }
    let st = ok(&report.results[3]);
    assert_eq!(st["status"], "awaiting_approval", "{st:#}");
    assert_eq!(st["acks"], json!([]), "{st:#}");
    assert!(inbox.exists());
}
