//! Many servers on one root: every agent session runs its own `pantheon mcp`, and only the
//! engine's file locks keep them consistent.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::harness::*;

/// Four gods handing work round in a ring; no sample rule of `pantheon init` matches these
/// pairs, so every handoff is routed directly.
const GODS: [&str; 4] = ["hermes", "marvin", "rheta", "thoth"];
const WORKFLOWS: usize = 4;

fn wf(k: usize) -> String {
    format!("wf_mcp_shared_{k}")
}

/// The handoff god `i` submits on workflow `k`: direct routing to the next god.
fn shared_handoff(i: usize, k: usize) -> Value {
    json!({
        "handoff_id": handoff_id((i * 100 + k) as u32),
        "workflow_id": wf(k),
        "from_god": GODS[i],
        "to_god": GODS[(i + 1) % GODS.len()],
        "step": format!("step-{i}"),
        "context": {"summary": format!("{} on {}", GODS[i], wf(k)),
                    "decisions": [format!("d{i}{k}")], "artifacts": []},
    })
}

#[test]
fn four_servers_on_one_root_record_every_handoff_and_ack_exactly_once() {
    let root = TestRoot::new();

    // Phase 1: four sessions at once, each submitting its own handoff on every shared workflow
    // and resubmitting its neighbour's (same id, same content): duplicates race the originals.
    let sessions: Vec<Session> = (0..GODS.len())
        .map(|i| {
            let mut steps = Vec::new();
            for k in 0..WORKFLOWS {
                steps.push(call(
                    "submit_handoff",
                    json!({"handoff": shared_handoff(i, k)}),
                ));
                let n = (i + 1) % GODS.len();
                steps.push(call(
                    "submit_handoff",
                    json!({"handoff": shared_handoff(n, k)}),
                ));
            }
            root.start_session("auto", &steps)
        })
        .collect();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for s in sessions {
        for r in s.finish().results {
            *statuses
                .entry(ok(&r)["status"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    let n = GODS.len() * WORKFLOWS;
    assert_eq!(statuses.get("duplicate"), Some(&n), "{statuses:?}");
    assert_eq!(statuses.get("dispatched"), Some(&n), "{statuses:?}");

    // Phase 2: four sessions at once, each god acking (twice) everything in its inbox.
    let sessions: Vec<Session> = (0..GODS.len())
        .map(|j| {
            let mut steps = Vec::new();
            for k in 0..WORKFLOWS {
                let from = (j + GODS.len() - 1) % GODS.len();
                let ack = json!({"ack": {
                    "ack_id": ack_id((j * 100 + k) as u32),
                    "handoff_id": handoff_id((from * 100 + k) as u32),
                    "workflow_id": wf(k),
                    "status": "accepted",
                    "message": format!("{} on it", GODS[j]),
                }});
                steps.push(call("ack_handoff", ack.clone()));
                steps.push(call("ack_handoff", ack));
            }
            steps.push(call("check_inbox", json!({"god_name": GODS[j]})));
            root.start_session("auto", &steps)
        })
        .collect();
    for s in sessions {
        let results = s.finish().results;
        for r in &results[..results.len() - 1] {
            ok(r);
        }
        assert_eq!(
            ok(results.last().unwrap())["count"],
            json!(0),
            "every dispatch taken"
        );
    }

    // Every workflow records each of its four handoffs and four acks exactly once.
    for k in 0..WORKFLOWS {
        let state = root.cli_json(&["state", &wf(k)]);
        let mut handoffs: Vec<&str> = state["step_history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["handoff_id"].as_str().unwrap())
            .collect();
        handoffs.sort();
        let mut expected: Vec<String> = (0..GODS.len())
            .map(|i| handoff_id((i * 100 + k) as u32))
            .collect();
        expected.sort();
        assert_eq!(handoffs, expected, "{} step history", wf(k));

        let mut acks: Vec<(String, String)> = state["acks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["ack_id"].as_str().unwrap().into(),
                    a["by"].as_str().unwrap().into(),
                )
            })
            .collect();
        acks.sort();
        let mut expected: Vec<(String, String)> = (0..GODS.len())
            .map(|j| (ack_id((j * 100 + k) as u32), GODS[j].to_string()))
            .collect();
        expected.sort();
        assert_eq!(acks, expected, "{} acks", wf(k));
    }
}
