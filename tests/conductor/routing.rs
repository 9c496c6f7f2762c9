//! Submit and routing: by definition, by rules, direct; quarantine; completion; idempotency.

use serde_json::json;

use crate::common::*;

const WF: &str = "wf_route_1";

#[test]
fn definition_routes_to_the_next_step_with_all_context() {
    let env = Env::with_test_flow();
    let h = plan_handoff("hof_20260614_aaa001", WF);
    let r = env.submit(&h);
    assert_eq!(r["status"], "dispatched");
    assert_eq!(r["target_god"], "hephaestus");
    assert_eq!(r["target_step"], "build");
    assert_eq!(r["state_status"], "waiting_for_ack");
    assert_eq!(r["warnings"], json!([]));
    let d = env.read("conductor/pending/hephaestus/hof_20260614_aaa001.json");
    assert_eq!(d["step"], "build");
    assert_eq!(d["ack_status"], "unacked");
    assert!(d["dispatch_id"].as_str().unwrap().starts_with("disp_"));
    assert_eq!(d["context"]["decisions"], json!(["decision of plan"]));
    assert_eq!(d["context"]["history"][0]["step"], "plan");
    assert_eq!(d["routing"]["workflow_definition"], "test-flow");
    let s = env.state(WF);
    assert_eq!(s["definition_id"], "test-flow");
    assert_eq!(s["definition_version"], "2.0.0");
    assert_eq!(s["current_step"], "build");
    assert_eq!(s["dispatched_to"], "hephaestus");
    assert_eq!(s["step_history"][0]["handoff_id"], "hof_20260614_aaa001");
    assert_eq!(s["step_history"][0]["status"], "completed");
    assert_eq!(
        s["context_bag"]["artifacts"],
        json!([format!("out/{WF}/plan.md")])
    );
    assert_eq!(env.read(&format!("shared/handoffs/{WF}/plan.json")), h);
}

#[test]
fn definition_god_wins_over_to_god_with_a_warning() {
    let env = Env::with_test_flow();
    let h = def_handoff(
        handoff(
            "hof_20260614_aaa002",
            WF,
            "thoth",
            "marvin",
            "plan",
            &["state_gate"],
        ),
        "test-flow",
        None,
    );
    let r = env.submit(&h);
    assert_eq!(r["target_god"], "hephaestus");
    let w = r["warnings"][0].as_str().unwrap();
    assert!(w.contains("marvin") && w.contains("hephaestus"), "{w}");
    assert!(env.exists("conductor/pending/hephaestus/hof_20260614_aaa002.json"));
    assert!(!env.exists("conductor/pending/marvin/hof_20260614_aaa002.json"));
}

#[test]
fn routing_workflow_step_picks_the_target_and_a_version_mismatch_warns() {
    let env = Env::with_test_flow();
    let mut h = def_handoff(
        handoff(
            "hof_20260614_aaa003",
            WF,
            "thoth",
            "iris",
            "plan",
            &["state_gate"],
        ),
        "test-flow",
        Some("check"),
    );
    h["routing"]["workflow_version"] = json!("1.0.0");
    let r = env.submit(&h);
    assert_eq!(r["target_step"], "check");
    assert_eq!(r["target_god"], "iris");
    assert!(r["warnings"][0].as_str().unwrap().contains("2.0.0"), "{r}");
}

#[test]
fn last_step_completes_the_workflow() {
    let env = Env::with_test_flow();
    env.submit(&plan_handoff("hof_20260614_aaa004", WF));
    env.submit(&def_handoff(
        handoff(
            "hof_20260614_aaa005",
            WF,
            "hephaestus",
            "iris",
            "build",
            &[],
        ),
        "test-flow",
        None,
    ));
    let r = env.submit(&def_handoff(
        handoff(
            "hof_20260614_aaa006",
            WF,
            "iris",
            "thoth",
            "check",
            &["logic_gate"],
        ),
        "test-flow",
        None,
    ));
    assert_eq!(r["status"], "completed");
    assert_eq!(r["target_god"], json!(null));
    assert_eq!(r["dispatch_path"], json!(null));
    let s = env.state(WF);
    assert_eq!(s["status"], "completed");
    assert_eq!(s["current_step"], json!(null));
    assert_eq!(s["step_history"].as_array().unwrap().len(), 3);
    // The build dispatch to hephaestus was superseded by its handoff, the check dispatch by iris's.
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    assert!(env.names("conductor/pending/iris").is_empty());
    assert_eq!(
        env.read("conductor/archive/iris/hof_20260614_aaa005.json")["ack_status"],
        "completed"
    );
}

#[test]
fn a_completed_workflow_takes_no_more_handoffs() {
    let env = Env::with_test_flow();
    env.submit(&def_handoff(
        handoff(
            "hof_20260614_aaa007",
            WF,
            "iris",
            "thoth",
            "check",
            &["logic_gate"],
        ),
        "test-flow",
        None,
    ));
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&handoff("hof_20260614_aaa008", WF, "x", "y", "z", &[])),
    );
    assert!(err.contains("completed"), "{err}");
}

#[test]
fn rules_dispatch_workflow_starts_the_definition_at_the_named_step() {
    let env = Env::new();
    let h = handoff(
        "hof_20260614_bbb001",
        "wf_rule_1",
        "thoth",
        "hephaestus",
        "research",
        &["state_gate"],
    );
    let r = env.submit(&h);
    assert_eq!(r["status"], "dispatched");
    assert_eq!(r["matched_rule"], "research-handoff-to-hephaestus");
    assert_eq!(r["target_step"], "architect");
    let s = env.state("wf_rule_1");
    assert_eq!(s["workflow_id"], "wf_rule_1");
    assert_eq!(s["definition_id"], "deploy-feature");
    // Later handoffs of the instance route by its definition without naming it.
    let r = env.submit(&handoff(
        "hof_20260614_bbb002",
        "wf_rule_1",
        "hephaestus",
        "marvin",
        "architect",
        &[],
    ));
    assert_eq!(r["target_step"], "implement");
    assert_eq!(r["target_god"], "marvin");
}

#[test]
fn rules_dispatch_god_and_log_only() {
    let env = Env::new();
    let r = env.submit(&handoff(
        "hof_20260614_bbb003",
        "wf_rule_2",
        "marvin",
        "hermes",
        "audit",
        &[],
    ));
    assert_eq!(r["matched_rule"], "security-findings-to-mercer");
    assert_eq!(r["target_god"], "mercer");
    assert_eq!(r["target_step"], "security-review");
    assert!(env.exists("conductor/pending/mercer/hof_20260614_bbb003.json"));

    let r = env.submit(&handoff(
        "hof_20260614_bbb004",
        "wf_rule_3",
        "marvin",
        "iris",
        "status-note",
        &[],
    ));
    assert_eq!(r["status"], "recorded");
    assert_eq!(r["dispatch_path"], json!(null));
    assert!(env.names("conductor/pending/iris").is_empty());
    let s = env.state("wf_rule_3");
    assert_eq!(s["step_history"][0]["handoff_id"], "hof_20260614_bbb004");
    assert_eq!(s["status"], "in_progress");
}

#[test]
fn direct_routing_without_definition_or_rule() {
    let env = Env::with_test_flow();
    let mut h = handoff(
        "hof_20260614_bbb005",
        "wf_direct_1",
        "hermes",
        "rheta",
        "draft",
        &[],
    );
    h["routing"] = json!({"workflow_step": "edit"});
    let r = env.submit(&h);
    assert_eq!(r["status"], "dispatched");
    assert_eq!(r["target_god"], "rheta");
    assert_eq!(r["target_step"], "edit");
    let r = env.submit(&handoff(
        "hof_20260614_bbb006",
        "wf_direct_2",
        "hermes",
        "rheta",
        "draft",
        &[],
    ));
    assert_eq!(r["target_step"], "draft");
}

#[test]
fn quarantine_by_rule_then_operator_approves() {
    let env = Env::new();
    let r = env.submit(&handoff(
        "hof_20260614_ccc001",
        "wf_q_1",
        "hephaestus",
        "caduceus",
        "package",
        &[],
    ));
    assert_eq!(r["status"], "awaiting_approval");
    assert_eq!(r["state_status"], "awaiting_approval");
    assert!(env.exists("conductor/pending/_quarantine/hof_20260614_ccc001.json"));
    assert!(env.names("conductor/pending/caduceus").is_empty());
    let p = env.ok(&["pending"], None);
    assert_eq!(
        p["awaiting_approval"][0]["handoff_id"],
        "hof_20260614_ccc001"
    );
    // A god cannot ack a held dispatch.
    let err = env.refused(
        &["ack"],
        Some(&ack(
            "ack_20260614_c01",
            "hof_20260614_ccc001",
            "accepted",
            "",
        )),
    );
    assert!(err.contains("approval"), "{err}");

    let a = env.ok(&["approve", "hof_20260614_ccc001"], None);
    assert_eq!(a["status"], "approved");
    assert_eq!(a["by"], "operator");
    assert_eq!(a["state_status"], "waiting_for_ack");
    assert!(!env.exists("conductor/pending/_quarantine/hof_20260614_ccc001.json"));
    let d = env.read("conductor/pending/caduceus/hof_20260614_ccc001.json");
    assert_eq!(d["approved_by"], "operator");
    assert_eq!(env.state("wf_q_1")["status"], "waiting_for_ack");
    // Approving again is harmless; rejecting now is refused.
    assert_eq!(
        env.ok(&["approve", "hof_20260614_ccc001"], None)["duplicate"],
        true
    );
    env.refused(
        &[
            "approve",
            "hof_20260614_ccc001",
            "--reject",
            "--reason",
            "no",
        ],
        None,
    );
    env.ack(&ack(
        "ack_20260614_c02",
        "hof_20260614_ccc001",
        "accepted",
        "on it",
    ));
}

#[test]
fn quarantine_by_step_then_operator_rejects() {
    let env = Env::new();
    let h = def_handoff(
        handoff(
            "hof_20260614_ccc002",
            "wf_q_2",
            "hephaestus",
            "hermes",
            "review",
            &["logic_gate"],
        ),
        "deploy-feature",
        None,
    );
    let r = env.submit(&h);
    assert_eq!(r["status"], "awaiting_approval");
    assert_eq!(r["target_step"], "deploy");
    let q = env.read("conductor/pending/_quarantine/hof_20260614_ccc002.json");
    assert!(q["held_because"].as_str().unwrap().contains("deploy"));
    let out = env.run(&["approve", "hof_20260614_ccc002", "--reject"], None);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--reject without --reason is a usage error"
    );
    let a = env.ok(
        &[
            "approve",
            "hof_20260614_ccc002",
            "--reject",
            "--reason",
            "freeze week",
        ],
        None,
    );
    assert_eq!(a["status"], "rejected");
    assert_eq!(a["state_status"], "failed");
    let s = env.state("wf_q_2");
    assert_eq!(s["status"], "failed");
    assert!(
        s["failure_reason"]
            .as_str()
            .unwrap()
            .contains("freeze week")
    );
    let arch = env.read("conductor/archive/hermes/hof_20260614_ccc002.json");
    assert_eq!(arch["ack_status"], "rejected");
    assert!(!env.exists("conductor/pending/_quarantine/hof_20260614_ccc002.json"));
}

#[test]
fn resubmitting_returns_the_first_result_and_a_new_handoff_keeps_the_old_file() {
    let env = Env::with_test_flow();
    let h1 = handoff(
        "hof_20260614_ddd001",
        "wf_dup_1",
        "thoth",
        "marvin",
        "draft",
        &[],
    );
    let first = env.submit(&h1);
    let again = env.submit(&h1);
    assert_eq!(again["status"], "duplicate");
    for k in ["target_god", "target_step", "dispatch_path", "handoff_path"] {
        assert_eq!(first[k], again[k], "{k}");
    }
    assert_eq!(
        env.state("wf_dup_1")["step_history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let h2 = handoff(
        "hof_20260614_ddd002",
        "wf_dup_1",
        "thoth",
        "marvin",
        "draft",
        &[],
    );
    env.submit(&h2);
    assert_eq!(env.read("shared/handoffs/wf_dup_1/draft.json"), h2);
    assert_eq!(
        env.read("shared/handoffs/wf_dup_1/draft.hof_20260614_ddd001.json"),
        h1
    );
    // The first is still recognised as a duplicate after being superseded.
    assert_eq!(env.submit(&h1)["status"], "duplicate");
}

#[test]
fn init_is_idempotent_and_never_overwrites() {
    let env = Env::new();
    env.write(
        "conductor/workflows/bug-fix.yaml",
        "workflow: {id: bug-fix, steps: [{id: a, god: thoth}]}\n",
    );
    let r = env.ok(&["init"], None);
    assert_eq!(r["created"], json!([]));
    assert!(r["kept"].as_array().unwrap().len() >= 9);
    assert!(
        std::fs::read_to_string(env.path("conductor/workflows/bug-fix.yaml"))
            .unwrap()
            .contains("id: a")
    );
    for god in [
        "thoth",
        "hephaestus",
        "marvin",
        "hermes",
        "iris",
        "caduceus",
        "mercer",
        "rheta",
    ] {
        assert!(
            env.path(&format!("conductor/pending/{god}")).is_dir(),
            "{god}"
        );
    }
    assert!(env.exists("shared/handoffs/schema.json"));
    let w = env.ok(&["workflows"], None);
    assert_eq!(w["count"], 5);
    assert_eq!(w["errors"], json!([]));
    let rules = env.ok(&["rules"], None);
    assert_eq!(rules["errors"], json!([]));
    assert!(rules["details"].as_array().unwrap().len() >= 4);
}

#[test]
fn a_tightened_root_schema_is_used_and_without_one_the_builtin_warns() {
    let env = Env::with_test_flow();
    let mut schema = env.read("shared/handoffs/schema.json");
    schema["$defs"]["handoff"]["properties"]["context"]["properties"]["summary"]["maxLength"] =
        json!(5);
    env.write("shared/handoffs/schema.json", &schema.to_string());
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&handoff(
            "hof_20260614_eee001",
            "wf_s_1",
            "thoth",
            "marvin",
            "draft",
            &[],
        )),
    );
    assert!(err.contains("/context/summary"), "{err}");
    std::fs::remove_file(env.path("shared/handoffs/schema.json")).unwrap();
    let r = env.submit(&handoff(
        "hof_20260614_eee002",
        "wf_s_1",
        "thoth",
        "marvin",
        "draft",
        &[],
    ));
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("built-in schema"),
        "{r}"
    );
}
