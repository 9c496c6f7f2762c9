//! Roots written by earlier versions: `init` upgrades an unedited schema we shipped, never an edited one.

use serde_json::Value;

use crate::common::*;

const SCHEMA: &str = "shared/handoffs/schema.json";

fn shipped(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/engine/src/conductor")
            .join(name),
    )
    .unwrap()
}

#[test]
fn init_upgrades_the_schema_an_earlier_version_shipped_and_says_so() {
    let env = Env::bare();
    env.write(SCHEMA, &shipped("schema-v1.json"));
    let out = env.run(&["init"], None);
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = env.path(SCHEMA).display().to_string();
    assert_eq!(r["upgraded"], serde_json::json!([path]), "{r:#}");
    assert!(!r["kept"].to_string().contains("schema.json"), "{r:#}");
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("upgraded to version 6")
    );
    assert_eq!(
        std::fs::read_to_string(env.path(SCHEMA)).unwrap(),
        shipped("schema.json")
    );
    let doc = env.read(SCHEMA);
    assert_eq!(doc["version"], 6);
    assert!(doc["$defs"]["usage"]["properties"]["cost_usd"].is_object());
    assert!(doc["$defs"]["handoff"]["properties"]["traceparent"].is_object());
    assert!(doc["$defs"]["rule_event"].is_object());
    assert!(doc["$defs"]["event_envelope"]["required"].is_array());

    let again = env.ok(&["init"], None);
    assert_eq!(again["upgraded"], serde_json::json!([]));
    assert_eq!(again["notes"], serde_json::json!([]));
    assert!(again["kept"].to_string().contains("schema.json"));
}

#[test]
fn init_never_touches_an_edited_schema_and_says_why() {
    let env = Env::bare();
    let edited = shipped("schema-v1.json").replacen("{0,63}", "{0,31}", 1);
    env.write(SCHEMA, &edited);
    let out = env.run(&["init"], None);
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["upgraded"], serde_json::json!([]));
    assert!(r["kept"].to_string().contains("schema.json"), "{r:#}");
    let note = r["notes"][0].as_str().unwrap();
    assert!(
        note.contains("left as it is") && note.contains(SCHEMA),
        "{note}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: ") && stderr.contains("left as it is"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(env.path(SCHEMA)).unwrap(), edited);
}

#[test]
fn a_root_still_on_schema_five_takes_a_traceparent_and_still_checks_it() {
    let env = Env::with_test_flow();
    env.write(SCHEMA, &shipped("schema-v5.json"));
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut h = plan_handoff("hof_20261202_tp0001", "wf_tp_old");
    h["traceparent"] = serde_json::json!(tp);
    let r = env.ok(&["handoff", "submit", "-"], Some(&h));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    let st = env.ok(&["state", "wf_tp_old"], None);
    assert_eq!(st["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736", "{st:#}");
    assert_eq!(st["step_history"][0]["traceparent"], tp);
    let mut bad = plan_handoff("hof_20261202_tp0002", "wf_tp_old2");
    bad["traceparent"] =
        serde_json::json!("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01");
    let err = env.refused(&["handoff", "submit", "-"], Some(&bad));
    assert!(err.contains("/traceparent"), "{err}");
}
