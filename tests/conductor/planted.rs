//! Intent files planted in `conductor/journal-intents/` never make the supervisor write a forged
//! journal entry: an intent whose act is already journaled, or whose claims (key, action, source,
//! targets) disagree with the act or the state, is dropped with a warning (the `tick` report's
//! `warnings`) and never journaled. An adversarial pass once got two extra `submit` entries by an
//! actor who never acted this way. A real crash's intent is still journaled once (tests/conductor/crash.rs).

use serde_json::{Value, json};

use crate::common::*;

/// A pid that is surely not running: a child that already exited and was reaped.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn plant(
    env: &Env,
    name: &str,
    key: &str,
    action: &str,
    source: &str,
    targets: Value,
    check: Value,
) {
    let body = json!({
        "key": key,
        "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "pid": dead_pid(),
        "actor": "mallory",
        "source": source,
        "action": action,
        "targets": targets,
        "outcome": "dispatched",
        "check": check,
    });
    std::fs::create_dir_all(env.path("conductor/journal-intents")).unwrap();
    std::fs::write(
        env.path(&format!("conductor/journal-intents/{name}.json")),
        serde_json::to_vec_pretty(&body).unwrap(),
    )
    .unwrap();
}

fn by_mallory(env: &Env) -> Vec<Value> {
    env.journal_entries()
        .into_iter()
        .filter(|e| e["actor"] == "mallory")
        .collect()
}

#[test]
fn planted_intents_for_journaled_acts_or_with_false_claims_are_dropped_with_a_warning() {
    let (wf, hid) = ("wf_planted", "hof_20260614_pl0001");
    let env = Env::with_test_flow();
    env.write(
        "conductor/workflows/quick-flow.yaml",
        "workflow:\n  id: quick-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, max_deliveries: 3}\n",
    );
    env.start("quick-flow", wf, hid, &[]);
    // The real redelivery 2, journaled by the supervisor.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"].as_array().unwrap().len(), 1, "{r:#}");
    let before = env.journal_entries().len();
    let submit_check = json!({"kind": "submit", "workflow_id": wf, "handoff_id": hid});
    let ids = json!({"workflow_id": wf, "handoff_id": hid});

    // The forgery: submits of a recorded handoff under keys of their own.
    plant(
        &env,
        "forged-1",
        "forged-1",
        "submit",
        "cli",
        ids.clone(),
        submit_check.clone(),
    );
    plant(
        &env,
        "forged-2",
        "forged-2",
        "submit",
        "mcp",
        ids.clone(),
        submit_check.clone(),
    );
    // The right key, for a submit whose entry is there: it only goes away.
    plant(
        &env,
        &format!("submit-{hid}"),
        &format!("submit-{hid}"),
        "submit",
        "cli",
        ids.clone(),
        submit_check.clone(),
    );
    // The right key for redelivery 2, which is journaled already (under that key too).
    let delivery = json!({"workflow_id": wf, "handoff_id": hid, "from_god": "hephaestus", "to_god": "hephaestus", "delivery": "2"});
    plant(
        &env,
        &format!("redeliver-{hid}-2"),
        &format!("redeliver-{hid}-2"),
        "redeliver",
        "supervisor",
        delivery.clone(),
        json!({"kind": "delivery", "handoff_id": hid, "delivery": 2}),
    );
    // A supervisor act claimed by a cli source.
    plant(
        &env,
        &format!("dead-{hid}-2"),
        &format!("dead-{hid}-2"),
        "dead_letter",
        "cli",
        delivery.clone(),
        json!({"kind": "dead", "handoff_id": hid}),
    );
    // A file whose name is not its key, and an action the engine never journals.
    plant(
        &env,
        "elsewhere",
        "ack-ack_20260614_pl1",
        "ack",
        "cli",
        ids.clone(),
        json!({"kind": "ack", "ack_id": "ack_20260614_pl1", "handoff_id": hid}),
    );
    plant(
        &env,
        "ack-ack_20260614_pl2",
        "ack-ack_20260614_pl2",
        "force_unlock",
        "cli",
        ids.clone(),
        json!({"kind": "ack", "ack_id": "ack_20260614_pl2", "handoff_id": hid}),
    );
    // A redelivery that never happened (3): nothing to journal, dropped quietly.
    plant(
        &env,
        &format!("redeliver-{hid}-3"),
        &format!("redeliver-{hid}-3"),
        "redeliver",
        "supervisor",
        json!({"workflow_id": wf, "handoff_id": hid, "to_god": "hephaestus", "delivery": "3"}),
        json!({"kind": "delivery", "handoff_id": hid, "delivery": 3}),
    );

    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0, "{r:#}");
    let warnings = r["warnings"].as_array().unwrap();
    let text = r["warnings"].to_string();
    assert_eq!(warnings.len(), 5, "{r:#}");
    for w in [
        "forged-1",
        "forged-2",
        &format!("dead-{hid}-2"),
        "elsewhere",
        "ack_20260614_pl2",
    ] {
        assert!(text.contains(w), "{w}: {text}");
    }
    assert!(text.contains("not journaled"), "{text}");
    assert!(by_mallory(&env).is_empty(), "{:#?}", by_mallory(&env));
    assert_eq!(env.journal_entries().len(), before);
    assert_eq!(env.names("conductor/journal-intents"), Vec::<String>::new());
    assert_eq!(env.ok(&["journal", "--verify"], None)["valid"], true);
}

#[test]
fn a_real_crash_intent_with_its_claims_edited_is_dropped_not_journaled() {
    let (wf, hid) = ("wf_planted_2", "hof_20260614_pl0002");
    let env = Env::with_test_flow();
    env.write(
        "conductor/workflows/quick-flow.yaml",
        "workflow:\n  id: quick-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, max_deliveries: 3}\n",
    );
    env.start("quick-flow", wf, hid, &[]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // A tick killed before its entry leaves the real intent of redelivery 2 ...
    let out = env
        .command(&["tick"])
        .env("PANTHEON_TEST_CRASH_AT", "journal:before-append:redeliver")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "killed at its crash point");
    let name = format!("conductor/journal-intents/redeliver-{hid}-2.json");
    let mut intent = env.read(&name);
    // ... which someone edits to claim the dispatch went to another god.
    intent["targets"]["to_god"] = json!("marvin");
    intent["actor"] = json!("mallory");
    env.write(&name, &serde_json::to_string_pretty(&intent).unwrap());
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0, "{r:#}");
    let text = r["warnings"].to_string();
    assert!(text.contains("disagrees"), "{r:#}");
    assert!(by_mallory(&env).is_empty());
    assert!(
        env.journal_entries()
            .iter()
            .all(|e| e["action"] != "redeliver")
    );
}
