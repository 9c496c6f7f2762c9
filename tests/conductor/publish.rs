//! `nats_publish` and `await_ack` steps (docs/NATS.md): templates checked at load, context kept, the
//! outbox committed by the state, publishes held for approval.

use serde_json::{Value, json};

use crate::common::*;

const FLOW: &str = r#"workflow:
  id: pub-flow
  context:
    required: [feature_summary]
    optional: [ticket, partner]
  steps:
    - id: package
      god: hephaestus
      input_from: nowhere
    - id: notify
      type: nats_publish
      subject: "subspace.konan.outgoing.${context.partner}"
      message: "Deploy ${workflow_id}: ${message}"
      payload: {feature: "${context.feature_summary}", ticket: "${context.ticket}", built: "${step.package.output}"}
    - id: await
      god: hermes
      action: await_ack
    - id: announce
      god: hermes
"#;

fn start(hid: &str, wf: &str, context: Value) -> Value {
    let mut ctx = json!({"summary": "v1 packaged", "decisions": [], "artifacts": []});
    for (k, v) in context.as_object().unwrap() {
        ctx[k] = v.clone();
    }
    json!({"handoff_id": hid, "workflow_id": wf, "from_god": "hephaestus", "to_god": "hermes",
           "step": "package", "context": ctx, "routing": {"workflow_definition": "pub-flow"}})
}

fn env_with(flow: &str) -> Env {
    let env = Env::new();
    env.write("conductor/workflows/pub-flow.yaml", flow);
    env
}

fn outbox(env: &Env) -> Vec<Value> {
    let mut v: Vec<Value> = std::fs::read_dir(env.path("conductor/outbox"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|r: &Value| r["outbox_id"].as_str().unwrap_or_default().to_owned());
    v
}

#[test]
fn reaching_a_publish_step_writes_the_outbox_and_moves_on_to_await() {
    let env = env_with(FLOW);
    let r = env.submit(&start(
        "hof_20261201_p00001",
        "wf_pub_1",
        json!({"feature_summary": "fast boots", "partner": "tallon"}),
    ));
    assert_eq!(r["status"], "publishing", "{r}");
    assert_eq!(r["target_god"], "bridge", "{r}");
    assert_eq!(
        r["dispatch_path"],
        Value::Null,
        "no dispatch is written for a publish: {r}"
    );
    let st = env.state("wf_pub_1");
    assert_eq!(st["current_step"], "await");
    assert_eq!(st["status"], "waiting_for_ack");
    assert_eq!(
        st["context"],
        json!({"feature_summary": "fast boots", "partner": "tallon"})
    );
    let ob = outbox(&env);
    assert_eq!(ob.len(), 1);
    assert_eq!(ob[0]["message"], "Deploy wf_pub_1: v1 packaged");
    assert_eq!(
        ob[0]["payload"],
        json!({"feature": "fast boots", "ticket": "", "built": "v1 packaged"})
    );
    let rec = st["step_history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["step_id"] == "notify")
        .unwrap();
    assert_eq!(rec["outbox_id"], ob[0]["outbox_id"]);
    // The await step is not dispatched to hermes: it waits for the reply.
    assert!(!env.exists("conductor/pending/hermes/hof_20261201_p00001.json"));
    let status = env.ok(&["bridge", "status"], None);
    assert_eq!(status["outbox_pending"], 1, "{status}");
}

#[test]
fn missing_required_context_refuses_the_starting_submit_and_writes_nothing() {
    let env = env_with(FLOW);
    let before = env.snapshot();
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&start("hof_20261201_p00002", "wf_pub_2", json!({}))),
    );
    assert!(err.contains("/context/feature_summary"), "{err}");
    assert_eq!(before, env.snapshot());
}

#[test]
fn unknown_placeholders_refuse_the_file_with_its_line() {
    let env = env_with(&FLOW.replace("${message}", "${mesage}"));
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&start(
            "hof_20261201_p00003",
            "wf_pub_3",
            json!({"feature_summary": "x"}),
        )),
    );
    assert!(err.contains("pub-flow.yaml:13"), "{err}");
    assert!(err.contains("${mesage}"), "{err}");
    let bad_step = FLOW.replace("${step.package.output}", "${step.nope.output}");
    let env = env_with(&bad_step);
    let w = env.ok(&["workflows"], None);
    assert!(w.to_string().contains("\\\"nope\\\" is not a step"), "{w}");
}

#[test]
fn a_value_that_would_inject_a_subject_separator_is_refused() {
    let env = env_with(FLOW);
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&start(
            "hof_20261201_p00004",
            "wf_pub_4",
            json!({"feature_summary": "x", "partner": "tallon.>"}),
        )),
    );
    assert!(err.contains("one token"), "{err}");
    assert!(outbox(&env).is_empty());
    let ok = env.submit(&start(
        "hof_20261201_p00005",
        "wf_pub_5",
        json!({"feature_summary": "x", "partner": "tallon"}),
    ));
    assert_eq!(ok["status"], "publishing");
    assert_eq!(outbox(&env)[0]["subject"], "subspace.konan.outgoing.tallon");
}

#[test]
fn a_held_publish_waits_for_approval_and_publishes_when_approved() {
    let flow = FLOW.replace(
        "      type: nats_publish\n",
        "      type: nats_publish\n      approval_required: true\n",
    );
    let env = env_with(&flow);
    let hid = "hof_20261201_p00006";
    let r = env.submit(&start(
        hid,
        "wf_pub_6",
        json!({"feature_summary": "x", "partner": "tallon"}),
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r}");
    assert!(outbox(&env).is_empty());
    assert!(env.exists(&format!("conductor/pending/_quarantine/{hid}.json")));
    let w = env.ok(&["workflows"], None);
    assert!(
        w["workflows"]
            .to_string()
            .contains("input_from \\\"nowhere\\\" is not a step"),
        "a dangling input_from is a warning: {w}"
    );
    let a = env.ok(&["approve", hid], None);
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(outbox(&env).len(), 1);
    assert_eq!(env.state("wf_pub_6")["current_step"], "await");
    assert!(!env.exists(&format!("conductor/pending/_quarantine/{hid}.json")));
    assert!(!env.exists(&format!("conductor/pending/bridge/{hid}.json")));
}

#[test]
fn a_crash_between_the_outbox_record_and_the_state_neither_loses_nor_doubles_it() {
    let env = env_with(FLOW);
    let h = start(
        "hof_20261201_p00007",
        "wf_pub_7",
        json!({"feature_summary": "x", "partner": "tallon"}),
    );
    let mut c = env.command(&["handoff", "submit", "-"]);
    c.env("PANTHEON_TEST_CRASH_AT", "publish:after-outbox");
    let out = assert_cmd::Command::from_std(c)
        .write_stdin(serde_json::to_vec(&h).unwrap())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let status = env.ok(&["bridge", "status"], None);
    assert_eq!(
        status["outbox_pending"], 0,
        "not live before the state commits: {status}"
    );
    assert_eq!(status["outbox_uncommitted"], 1, "{status}");
    env.submit(&h);
    let status = env.ok(&["bridge", "status"], None);
    assert_eq!(status["outbox_pending"], 1, "{status}");
    assert_eq!(status["outbox_uncommitted"], 0, "{status}");
    assert_eq!(outbox(&env).len(), 1);
}
