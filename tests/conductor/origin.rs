//! Workflow files shaped like the origin pantheon's (`tests/fixtures/origin-workflows/`): free-text
//! actions, step keys and context that reach the god, `context.required` naming standard fields, publish
//! steps that only the engine completes, and a workflow waiting for a peer's reply that is not an orphan.

use serde_json::{Value, json};

use crate::common::*;

const FIXTURES: &str = "tests/fixtures/origin-workflows";

/// A fresh root with every origin-shaped workflow file installed.
fn origin_env() -> Env {
    let env = Env::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURES);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        env.write(
            &format!("conductor/workflows/{name}"),
            &std::fs::read_to_string(&p).unwrap(),
        );
    }
    env
}

fn handoff_for(hid: &str, wf: &str, from: &str, step: &str, context: Value) -> Value {
    let mut ctx = json!({"summary": format!("{step} done"), "decisions": [], "artifacts": []});
    for (k, v) in context.as_object().unwrap() {
        ctx[k] = v.clone();
    }
    json!({"handoff_id": hid, "workflow_id": wf, "from_god": from, "to_god": "hermes",
           "step": step, "context": ctx})
}

fn validate(env: &Env) -> Value {
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report:#}");
    report
}

fn outbox(env: &Env) -> Vec<Value> {
    let Ok(rd) = std::fs::read_dir(env.path("conductor/outbox")) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
        .collect()
}

#[test]
fn the_origins_workflow_files_load_with_free_text_actions() {
    let env = origin_env();
    let w = env.ok(&["workflows"], None);
    assert_eq!(w["errors"], json!([]), "{w:#}");
    let ids: Vec<&str> = w["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    for id in [
        "deploy-feature",
        "morning-briefing",
        "retraction",
        "sprint-triage",
    ] {
        assert!(ids.contains(&id), "{id} did not load: {w:#}");
    }
    // A step's action must still be text: a mapping is refused with the reason.
    env.write(
        "conductor/workflows/zz-bad.yaml",
        "workflow:\n  id: zz-bad\n  steps:\n    - {id: a, god: thoth, action: {do: x}}\n",
    );
    let w = env.ok(&["workflows"], None);
    assert!(
        w["errors"].to_string().contains("action must be text"),
        "{w:#}"
    );
    std::fs::remove_file(env.path("conductor/workflows/zz-bad.yaml")).unwrap();
    assert_eq!(validate(&env)["problems"], json!([]));
}

#[test]
fn deploy_feature_starts_with_a_normal_handoff_and_the_god_sees_its_step_and_context() {
    let env = origin_env();
    let wf = "wf_origin_deploy_1";
    let mut start = handoff_for(
        "hof_20261201_or0001",
        wf,
        "thoth",
        "research",
        json!({"spec_summary": "fast boots", "ticket": "OPS-7", "budget": {"hours": 6}}),
    );
    start["routing"] = json!({"workflow_definition": "deploy-feature"});
    let r = env.submit(&start);
    assert_eq!(r["status"], "dispatched", "{r:#}");
    assert_eq!(r["target_god"], "hephaestus");
    let hid = "hof_20261201_or0001";

    // The whole dispatch, by every reader: the step's descriptive keys and the context beyond the
    // standard fields are there.
    let whole = env.ok(&["dispatch", "hephaestus", hid], None);
    let d = &whole["dispatch"];
    assert_eq!(
        d["step_def"],
        json!({"action": "implement", "skill": "code", "input_from": "research",
               "output": "build_report",
               "description": "Build it from the research notes; list every file you touch."}),
        "{d:#}"
    );
    assert_eq!(d["context"]["spec_summary"], "fast boots");
    assert_eq!(d["context"]["ticket"], "OPS-7");
    assert_eq!(d["context"]["budget"], json!({"hours": 6}));
    assert!(d.get("omitted").is_none(), "{d:#}");
    let inbox = env.ok(&["inbox", "hephaestus"], None);
    assert_eq!(inbox["dispatches"][0]["step_def"]["action"], "implement");
    assert_eq!(
        inbox["dispatches"][0]["context"]["spec_summary"],
        "fast boots"
    );
    let compact = env.ok(&["inbox", "hephaestus", "--compact"], None);
    let entry = compact["dispatches"][0].as_object().unwrap();
    assert!(
        !entry.contains_key("step_def") && !entry.contains_key("context"),
        "{entry:?}"
    );

    // Keys kept from the start reach later steps too; the latest handoff's keys come first.
    let mut implement = handoff_for(
        "hof_20261201_or0002",
        wf,
        "hephaestus",
        "implement",
        json!({"ticket": "OPS-8"}),
    );
    implement["context"]["artifacts"] = json!(["src/boot.rs"]);
    env.submit(&implement);
    let d = env.ok(&["dispatch", "mercer", "hof_20261201_or0002"], None)["dispatch"].clone();
    assert_eq!(d["step_def"]["action"], "review");
    assert_eq!(d["context"]["ticket"], "OPS-8");
    assert_eq!(d["context"]["spec_summary"], "fast boots");

    // Reaching the publish step: held for the operator (`operator_approval_required`).
    let r = env.submit(&handoff_for(
        "hof_20261201_or0003",
        wf,
        "mercer",
        "review",
        json!({}),
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    assert!(outbox(&env).is_empty(), "held: nothing published yet");
    // A god cannot mark the held publish done: nothing would be published.
    let before = env.snapshot();
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&handoff_for(
            "hof_20261201_or0004",
            wf,
            "mercer",
            "notify-enterprise",
            json!({}),
        )),
    );
    assert!(
        err.contains("nats_publish step") && err.contains("start_at_step: notify-enterprise"),
        "{err}"
    );
    assert_eq!(before, env.snapshot(), "a refusal writes nothing");

    env.ok(&["approve", "hof_20261201_or0003"], None);
    let ob = outbox(&env);
    assert_eq!(ob.len(), 1, "{ob:#?}");
    assert_eq!(ob[0]["subject"], "subspace.konan.outgoing.tallon");
    assert_eq!(ob[0]["payload"]["spec"], "fast boots");
    let st = env.state(wf);
    assert_eq!(st["current_step"], "await-tallon", "{st:#}");
    assert_eq!(st["status"], "waiting_for_ack");

    // Waiting for the peer's reply is healthy: validate is clean and redispatch says so.
    let report = validate(&env);
    assert_eq!(report["problems"], json!([]), "{report:#}");
    let err = env.refused(&["redispatch", wf], None);
    assert!(
        err.contains("healthy") && err.contains("await_ack"),
        "{err}"
    );
    assert!(!err.contains("pantheon abort"), "{err}");
}

#[test]
fn context_required_counts_the_standard_fields_and_names_the_missing_one() {
    let env = origin_env();
    let mut h = handoff_for(
        "hof_20261201_or0010",
        "wf_origin_req_1",
        "thoth",
        "research",
        json!({}),
    );
    h["routing"] = json!({"workflow_definition": "deploy-feature"});
    let err = env.refused(&["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("/context/spec_summary"), "{err}");
    assert!(
        !err.contains("/context/decisions") && !err.contains("/context/artifacts"),
        "standard fields are present: {err}"
    );
    // `context.required: [decisions]` alone is met by any valid handoff.
    let mut t = handoff_for(
        "hof_20261201_or0011",
        "wf_origin_triage_1",
        "hermes",
        "triage",
        json!({}),
    );
    t["routing"] = json!({"workflow_definition": "sprint-triage"});
    let r = env.submit(&t);
    assert_eq!(r["target_god"], "athena", "{r:#}");
    let d = env.ok(&["dispatch", "athena", "hof_20261201_or0011"], None)["dispatch"].clone();
    assert_eq!(d["step_def"]["action"], "update_sprint");
    assert_eq!(
        d["step_def"]["priority_rules"],
        json!(["security first", "then customer bugs"])
    );
}

#[test]
fn a_workflow_that_starts_with_its_publish_step_is_started_by_a_rule_and_publishes() {
    let env = origin_env();
    let wf = "wf_origin_retract_1";
    // Naming the publish step as done is refused, and the refusal names the rule to use.
    let mut direct = handoff_for(
        "hof_20261201_or0020",
        wf,
        "hermes",
        "send-correction",
        json!({"retracts": "wf_8a0b5f28"}),
    );
    direct["routing"] = json!({"workflow_definition": "retraction"});
    let before = env.snapshot();
    let err = env.refused(&["handoff", "submit", "-"], Some(&direct));
    assert!(
        err.contains("dispatch_workflow: retraction, start_at_step: send-correction"),
        "{err}"
    );
    assert_eq!(before, env.snapshot());
    assert!(outbox(&env).is_empty());

    env.write(
        "conductor/rules/50-retract.yaml",
        "rules:\n  - id: retract\n    when: {step: draft-correction}\n    then: {dispatch_workflow: retraction, start_at_step: send-correction}\n",
    );
    let r = env.submit(&handoff_for(
        "hof_20261201_or0021",
        wf,
        "hermes",
        "draft-correction",
        json!({"retracts": "wf_8a0b5f28"}),
    ));
    // The submit result, the state and the journal agree: published through the outbox, no
    // dispatch written.
    assert_eq!(r["status"], "publishing", "{r:#}");
    assert_eq!(r["target_god"], "bridge");
    assert_eq!(r["target_step"], "send-correction");
    assert_eq!(r["dispatch_path"], Value::Null, "{r:#}");
    assert_eq!(r["matched_rule"], "retract");
    assert!(!env.exists("conductor/pending/bridge/hof_20261201_or0021.json"));
    let ob = outbox(&env);
    assert_eq!(ob.len(), 1);
    assert_eq!(ob[0]["payload"]["retracts"], "wf_8a0b5f28");
    let st = env.state(wf);
    assert_eq!(st["current_step"], "await-receipt");
    let entry = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "submit")
        .unwrap();
    assert_eq!(entry["outcome"], "publishing", "{entry:#}");
    assert_eq!(entry["targets"]["to_god"], "bridge", "{entry:#}");

    // The repeat answers the same, with no dispatch path either.
    let again = env.submit(&handoff_for(
        "hof_20261201_or0021",
        wf,
        "hermes",
        "draft-correction",
        json!({"retracts": "wf_8a0b5f28"}),
    ));
    assert_eq!(again["status"], "duplicate");
    assert_eq!(again["dispatch_path"], Value::Null);
    assert_eq!(validate(&env)["problems"], json!([]));
}

/// A god written in Python from the seed documents reads its inbox as plain JSON: the carried keys are
/// ordinary dict entries beside the fields it already knew (an inbound request's shape here).
#[test]
fn a_python_god_sees_the_carried_keys_as_plain_dict_entries() {
    let env = origin_env();
    let mut h = handoff_for(
        "hof_20261201_or0030",
        "wf_origin_py_1",
        "hermes",
        "triage",
        json!({"payload": {"feature_summary": "fast boots"},
               "nats": {"from_pantheon": "konan", "subject": "subspace.konan.outgoing.tallon"}}),
    );
    h["routing"] = json!({"workflow_definition": "sprint-triage"});
    env.submit(&h);
    let reader = r#"
import json, os, sys
inbox = os.path.join(sys.argv[1], "conductor", "pending", "athena")
for name in sorted(os.listdir(inbox)):
    if name.endswith(".json") and not name.startswith("."):
        with open(os.path.join(inbox, name)) as f:
            d = json.load(f)
        print(json.dumps({"summary": d["context"]["summary"],
                          "action": d.get("step_def", {}).get("action"),
                          "payload": d["context"].get("payload"),
                          "from": d["context"].get("nats", {}).get("from_pantheon")}))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", reader])
        .arg(&env.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen,
        json!({"summary": "triage done", "action": "update_sprint",
               "payload": {"feature_summary": "fast boots"}, "from": "konan"})
    );
}

/// The briefing runs through its free-text steps to the publish that ends it; a rerun from the publish
/// step is refused (no god can be dispatched to it) and names the step to rerun from instead.
#[test]
fn the_briefing_runs_to_its_closing_publish_and_a_rerun_never_dispatches_a_publish_step() {
    let env = origin_env();
    let wf = "wf_origin_brief_1";
    let mut h = handoff_for(
        "hof_20261201_or0040",
        wf,
        "thoth",
        "active-goals",
        json!({}),
    );
    h["routing"] = json!({"workflow_definition": "morning-briefing"});
    env.submit(&h);
    let d = env.ok(&["dispatch", "thoth", "hof_20261201_or0040"], None)["dispatch"].clone();
    assert_eq!(
        d["step_def"],
        json!({"action": "research", "skill": "web-research", "input_from": "active-goals",
               "output": "news_digest"})
    );
    env.submit(&handoff_for(
        "hof_20261201_or0041",
        wf,
        "thoth",
        "news-scan",
        json!({}),
    ));
    let r = env.submit(&handoff_for(
        "hof_20261201_or0042",
        wf,
        "rheta",
        "write-briefing",
        json!({}),
    ));
    assert_eq!(r["status"], "publishing", "{r:#}");
    assert_eq!(r["state_status"], "completed", "{r:#}");
    assert_eq!(outbox(&env)[0]["message"], "write-briefing done");

    let before = env.snapshot();
    let err = env.refused(&["rerun", wf, "--from", "deliver"], None);
    assert!(
        err.contains("nats_publish step") && err.contains("rerun from \"write-briefing\""),
        "{err}"
    );
    assert_eq!(before, env.snapshot());
    let r = env.ok(&["rerun", wf, "--from", "write-briefing"], None);
    assert_eq!(r["to_god"], "rheta", "{r:#}");
}
