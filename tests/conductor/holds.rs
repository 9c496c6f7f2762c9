//! A hold is the operator's alone (docs/PROTOCOL.md §2.5, docs/THREAT-MODEL.md): a god
//! that moves its held dispatch out of `_quarantine` into an inbox gets no ack taken, no handoff
//! recorded, no redelivery or dead letter from the supervisor; `validate` names the file; the
//! operator still decides it where it lies. And what a budget raise changes is computed from the
//! ledger at approval time, never read from the dispatch, and a raise that leaves a budget
//! reached is refused naming it.

use serde_json::{Value, json};

use crate::common::*;

const HELD_FLOW: &str = r#"
workflow:
  id: held-flow
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      approval_required: true
      ack_wait: 1s
      max_deliveries: 1
    - id: check
      god: iris
"#;

const PAID: &str = r#"
workflow:
  id: paid
  budget: {cost_usd: 1.0}
  steps:
    - id: research
      god: thoth
    - id: build
      god: hephaestus
      budget: {tokens: 100000}
    - id: review
      god: iris
"#;

fn env_with(name: &str, flow: &str) -> Env {
    let env = Env::with_test_flow();
    env.write(&format!("conductor/workflows/{name}.yaml"), flow);
    env
}

fn step(hid: &str, wf: &str, def: &str, from: &str, step: &str, usage: Option<Value>) -> Value {
    let mut h = def_handoff(handoff(hid, wf, from, "x", step, &[]), def, None);
    if let Some(u) = usage {
        h["usage"] = u;
    }
    h
}

fn validate(env: &Env) -> Value {
    serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap()
}

fn moved_problems(report: &Value) -> Vec<Value> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["message"]
                .as_str()
                .unwrap_or("")
                .contains("held dispatch moved by hand")
        })
        .cloned()
        .collect()
}

/// The god moves its held dispatch from `_quarantine` into its own inbox, as a god with file access
/// can; `edit` changes the file on the way.
fn move_by_hand(env: &Env, hid: &str, god: &str, edit: impl FnOnce(&mut Value)) {
    let from = env.path(&format!("conductor/pending/_quarantine/{hid}.json"));
    let mut d: Value = serde_json::from_slice(&std::fs::read(&from).unwrap()).unwrap();
    edit(&mut d);
    env.write(
        &format!("conductor/pending/{god}/{hid}.json"),
        &serde_json::to_string_pretty(&d).unwrap(),
    );
    std::fs::remove_file(from).unwrap();
}

/// Every act a god has that could move a workflow held at `held_step`, after its held dispatch
/// `hid` was moved into `god`'s inbox: each is refused naming the hold and `pantheon approve`, and
/// the workflow stays `awaiting_approval` with nothing approved.
fn every_act_is_refused(env: &Env, wf: &str, hid: &str, god: &str, next: &Value) {
    let before = env.state(wf);
    for (i, status) in ["accepted", "pending", "completed", "rejected"]
        .iter()
        .enumerate()
    {
        let a = ack(&format!("ack_20261206_h{i}0001"), hid, status, "done");
        let err = env.refused(&["ack"], Some(&a));
        assert!(err.contains("held for an operator's decision"), "{err}");
        assert!(err.contains(&format!("pantheon approve {hid}")), "{err}");
        assert!(err.contains("moving it does not release it"), "{err}");
    }
    // A handoff for the held step (or any other) is not recorded either.
    let err = env.refused(&["handoff", "submit", "-"], Some(next));
    assert!(err.contains(&format!("pantheon approve {hid}")), "{err}");
    let after = env.state(wf);
    assert_eq!(after["status"], "awaiting_approval", "{after:#}");
    assert_eq!(after["acks"], before["acks"]);
    assert_eq!(after["step_history"], before["step_history"]);
    assert!(
        after.get("approvals").is_none_or(Value::is_null),
        "{after:#}"
    );
    assert!(
        !env.journal_entries()
            .iter()
            .any(|e| e["action"] == "approve" || e["action"] == "ack"),
        "nothing approved or acked in the journal"
    );
    assert!(env.exists(&format!("conductor/pending/{god}/{hid}.json")));
}

#[test]
fn a_held_dispatch_moved_into_an_inbox_by_its_god_is_not_released_until_an_operator_approves() {
    let env = env_with("held-flow", HELD_FLOW);
    let (wf, hid) = ("wf_moved1", "hof_20261206_a00001");
    let r = env.submit(&step(hid, wf, "held-flow", "thoth", "plan", None));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    // The god takes it out of the quarantine, with a past deadline and no hold in the file, so the
    // supervisor would redeliver or dead-letter it if it judged by the file.
    move_by_hand(&env, hid, "hephaestus", |d| {
        d.as_object_mut().unwrap().remove("held_because");
        d["ack_deadline"] = json!("2020-01-01T00:00:00Z");
        d["deliveries"] = json!([{"at": "2020-01-01T00:00:00Z", "to": "hephaestus"}]);
    });
    let next = step(
        "hof_20261206_a00002",
        wf,
        "held-flow",
        "hephaestus",
        "build",
        None,
    );
    every_act_is_refused(&env, wf, hid, "hephaestus", &next);

    // validate names it (an error: the root is not valid while it lies there).
    let report = validate(&env);
    assert_eq!(report["valid"], false, "{report:#}");
    let moved = moved_problems(&report);
    assert_eq!(moved.len(), 1, "{report:#}");
    assert_eq!(moved[0]["severity"], "error");
    assert_eq!(
        moved[0]["path"],
        format!("conductor/pending/hephaestus/{hid}.json")
    );

    // The supervisor neither redelivers nor dead-letters it: the workflow stays held.
    let t = env.ok(&["tick"], None);
    assert_eq!(t["redelivered"], json!([]), "{t:#}");
    assert_eq!(t["dead_lettered"], json!([]), "{t:#}");
    assert_eq!(env.state(wf)["status"], "awaiting_approval");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/hephaestus".to_string()]
    );

    // The operator decides it where it lies; then the god's ack is taken.
    let a = env.ok(&["approve", hid], None);
    assert_eq!(a["status"], "approved", "{a:#}");
    assert_eq!(env.state(wf)["status"], "waiting_for_ack");
    assert_eq!(env.state(wf)["approvals"][0]["decision"], "approved");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/hephaestus".to_string()]
    );
    assert_eq!(moved_problems(&validate(&env)), Vec::<Value>::new());
    let r = env.ack(&ack("ack_20261206_a00009", hid, "accepted", "on it"));
    assert_eq!(r["state_status"], "in_progress", "{r:#}");
}

#[test]
fn a_dispatch_held_for_a_budget_moved_by_hand_is_refused_too_and_approve_raises_from_the_ledger() {
    let env = env_with("paid", PAID);
    let wf = "wf_moved2";
    env.submit(&step(
        "hof_20261206_b00001",
        wf,
        "paid",
        "thoth",
        "research",
        Some(json!({"cost_usd": 1.2})),
    ));
    let hid = "hof_20261206_b00001";
    assert_eq!(env.state(wf)["status"], "awaiting_approval");
    move_by_hand(&env, hid, "hephaestus", |d| {
        d.as_object_mut().unwrap().remove("budget");
    });
    let next = step(
        "hof_20261206_b00002",
        wf,
        "paid",
        "hephaestus",
        "build",
        None,
    );
    every_act_is_refused(&env, wf, hid, "hephaestus", &next);
    assert_eq!(moved_problems(&validate(&env)).len(), 1);
    // The raise is computed from the ledger, though the moved file lost its figures.
    let a = env.ok(&["approve", hid, "--budget-usd", "3"], None);
    assert_eq!(a["status"], "approved", "{a:#}");
    assert_eq!(
        a["budget_raised"]["raises"],
        json!([{"handoff_id": hid, "scope": "workflow", "name": wf, "from": {"cost_usd": 1},
                "to": {"cost_usd": 3}, "by": a["budget_raised"]["raises"][0]["by"],
                "at": a["budget_raised"]["raises"][0]["at"]}])
    );
    let r = env.ack(&ack("ack_20261206_b00009", hid, "accepted", "on it"));
    assert_eq!(r["state_status"], "in_progress", "{r:#}");
}

#[test]
fn a_forged_budget_crossed_in_a_held_dispatch_does_not_steer_the_raise() {
    let env = env_with("paid", PAID);
    env.write(
        "conductor/config.yaml",
        "cost:\n  budgets:\n    gods:\n      marvin: {cost_usd: 50}\n",
    );
    let (wf, hid) = ("wf_forged", "hof_20261206_c00001");
    env.submit(&step(
        hid,
        wf,
        "paid",
        "thoth",
        "research",
        Some(json!({"cost_usd": 1.5})),
    ));
    assert_eq!(env.state(wf)["status"], "awaiting_approval");
    // A god rewrites the held dispatch's figures: a god, a day and a step it never reached, and a
    // day named like a path.
    let path = format!("conductor/pending/_quarantine/{hid}.json");
    let mut d = env.read(&path);
    d["budget"]["crossed"] = json!([
        {"scope": "god", "name": "marvin", "metric": "cost_usd", "used": 99, "limit": 50},
        {"scope": "day", "name": "../../x", "metric": "cost_usd", "used": 9, "limit": 1},
        {"scope": "day", "name": "2020-01-01", "metric": "cost_usd", "used": 9, "limit": 1},
        {"scope": "step", "name": format!("{wf}/review"), "metric": "tokens", "used": 9, "limit": 1},
        {"scope": "workflow", "name": "wf_other", "metric": "cost_usd", "used": 9, "limit": 1}
    ]);
    env.write(&path, &serde_json::to_string(&d).unwrap());
    let a = env.ok(&["approve", hid, "--budget-usd", "4"], None);
    let raises = a["budget_raised"]["raises"].as_array().unwrap();
    assert_eq!(raises.len(), 1, "{a:#}");
    assert_eq!(raises[0]["scope"], "workflow");
    assert_eq!(raises[0]["name"], wf);
    assert_eq!(raises[0]["to"], json!({"cost_usd": 4}));
    // Nothing else was raised: no god or day budget stored, no step raise in the state.
    assert!(!env.exists("conductor/cost/budgets.json"));
    let st = env.state(wf);
    assert_eq!(
        st["budget"],
        json!({"workflow": {"cost_micros": 4_000_000}}),
        "{st:#}"
    );
    let journal = env.journal_entries();
    let raise = journal
        .iter()
        .find(|e| e["action"] == "budget_raise")
        .unwrap();
    let reason = raise["reason"].as_str().unwrap();
    assert!(
        !reason.contains("marvin") && !reason.contains("../"),
        "{reason}"
    );
}

#[test]
fn a_raise_that_leaves_a_budget_reached_is_refused_naming_it_and_changes_nothing() {
    let env = env_with("paid", PAID);
    let wf = "wf_both";
    env.submit(&step(
        "hof_20261206_d00001",
        wf,
        "paid",
        "thoth",
        "research",
        Some(json!({"cost_usd": 0.2})),
    ));
    env.ack(&ack(
        "ack_20261206_d00001",
        "hof_20261206_d00001",
        "accepted",
        "",
    ));
    // Hephaestus's build reaches both the workflow's dollars and the step's tokens.
    let r = env.submit(&step(
        "hof_20261206_d00002",
        wf,
        "paid",
        "hephaestus",
        "build",
        Some(json!({"cost_usd": 1.0, "input_tokens": 136000})),
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    let hid = "hof_20261206_d00002";
    let before = env.state(wf);
    let entries = env.journal_entries().len();
    // Dollars only: the token budget would stay reached.
    let err = env.refused(&["approve", hid, "--budget-usd", "5"], None);
    assert!(err.contains("would leave a budget reached"), "{err}");
    assert!(err.contains(&format!("step {wf}/build")), "{err}");
    assert!(err.contains("136,000 tokens used"), "{err}");
    assert!(err.contains("--budget-tokens above 136,000"), "{err}");
    // Below what is spent: refused too, naming the usage.
    let err = env.refused(
        &[
            "approve",
            hid,
            "--budget-usd",
            "1",
            "--budget-tokens",
            "200000",
        ],
        None,
    );
    assert!(err.contains(&format!("workflow {wf}: $1.20 used")), "{err}");
    assert!(err.contains("--budget-usd above $1.20"), "{err}");
    // Nothing changed, nothing journaled, still held.
    assert_eq!(env.state(wf), before);
    assert_eq!(env.journal_entries().len(), entries);
    assert!(!env.exists("conductor/cost/budgets.json"));
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/_quarantine".to_string()]
    );
    // Both, above what is used: raised and approved, and the next dispatch is not held.
    let a = env.ok(
        &[
            "approve",
            hid,
            "--budget-usd",
            "2",
            "--budget-tokens",
            "200000",
        ],
        None,
    );
    assert_eq!(a["status"], "approved", "{a:#}");
    let scopes: Vec<&str> = a["budget_raised"]["raises"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scope"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["workflow", "step"], "{a:#}");
    env.ack(&ack("ack_20261206_d00002", hid, "accepted", ""));
    let r = env.submit(&step(
        "hof_20261206_d00003",
        wf,
        "paid",
        "iris",
        "review",
        None,
    ));
    assert_eq!(r["status"], "completed", "{r:#}");
}

#[test]
fn a_raise_with_no_budget_reached_is_refused() {
    let env = env_with("held-flow", HELD_FLOW);
    let hid = "hof_20261206_e00001";
    env.submit(&step(
        hid,
        "wf_nobudget",
        "held-flow",
        "thoth",
        "plan",
        None,
    ));
    let err = env.refused(&["approve", hid, "--budget-usd", "5"], None);
    assert!(err.contains("nothing to raise"), "{err}");
    assert_eq!(env.state("wf_nobudget")["status"], "awaiting_approval");
}

#[test]
fn a_bare_approve_says_which_budgets_stay_reached() {
    let env = env_with("paid", PAID);
    let hid = "hof_20261206_f00001";
    env.submit(&step(
        hid,
        "wf_bare",
        "paid",
        "thoth",
        "research",
        Some(json!({"cost_usd": 1.25})),
    ));
    let a = env.ok(&["approve", hid], None);
    assert_eq!(a["status"], "approved", "{a:#}");
    assert_eq!(
        a["budgets_reached"],
        json!([{"scope": "workflow", "name": "wf_bare", "metric": "cost_usd",
                "used": 1_250_000, "limit": 1_000_000}]),
        "{a:#}"
    );
    assert!(a["note"].as_str().unwrap().contains("held again"), "{a:#}");
}
