//! Reading a root as foreign writers leave it never fails; problems are reported.

use serde_json::json;

use crate::common::*;

#[test]
fn foreign_inbox_with_junk_is_read_and_the_junk_reported() {
    let env = Env::foreign();
    let iris = env.ok(&["inbox", "iris"], None);
    assert_eq!(iris["count"], 0);
    assert_eq!(iris["errors"].as_array().unwrap().len(), 2);
    let thoth = env.ok(&["inbox", "thoth"], None);
    assert_eq!(thoth["count"], 1);
    assert_eq!(thoth["dispatches"][0]["from_god"], "conductor");
    let marvin = env.ok(&["inbox", "marvin"], None);
    assert_eq!(marvin["dispatches"][0]["ack_status"], "pending");
    let p = env.ok(&["pending"], None);
    assert_eq!(p["count"], 3);
    assert_eq!(p["errors"].as_array().unwrap().len(), 2);
}

#[test]
fn foreign_states_definitions_and_rules_are_read() {
    let env = Env::foreign();
    for wf in ["wf_deploy_42", "wf_bug_7", "wf_1a2b3c4d", "wf_old_3"] {
        let s = env.state(wf);
        assert_eq!(s["workflow_id"], wf);
    }
    assert_eq!(
        env.state("wf_1a2b3c4d")["step_history"][0]["v2_dispatched"],
        true
    );
    let w = env.ok(&["workflows"], None);
    assert_eq!(w["count"], 1);
    assert!(
        w["errors"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("broken.yaml")
    );
    let r = env.ok(&["rules"], None);
    assert_eq!(r["details"][0]["id"], "research-handoff-to-hephaestus");
}

#[test]
fn a_foreign_dispatch_can_be_acked_and_unknown_fields_survive() {
    let env = Env::foreign();
    let r = env.ack(
        &json!({"ack_id": "ack_20260614_9a1", "handoff_id": "hof_20260614_abc123",
                             "status": "accepted", "message": "on it"}),
    );
    assert_eq!(r["state_status"], "in_progress");
    let s = env.read("conductor/state/wf_deploy_42.json");
    assert_eq!(s["completion_target"], "2026-06-15T18:00:00Z");
    assert_eq!(s["acks"][0]["by"], "hephaestus");
    // No schema.json in the foreign root: the built-in one is used, with a warning.
    let mut h = def_handoff(
        handoff(
            "hof_20260614_9b0001",
            "wf_deploy_42",
            "hephaestus",
            "marvin",
            "architect",
            &[],
        ),
        "deploy-feature",
        None,
    );
    h["context"]["summary"] = json!("designed");
    let r = env.submit(&h);
    assert_eq!(r["target_god"], "marvin");
    assert!(
        r["warnings"][0].as_str().unwrap().contains("built-in"),
        "{r}"
    );
    env.assert_all_json_valid_except(&["conductor/pending/iris/broken.json"]);
}

#[test]
fn a_foreign_named_dispatch_is_found_by_its_handoff_id() {
    let env = Env::foreign();
    let r = env.ack(
        &json!({"ack_id": "ack_20260615_9c1", "handoff_id": "hof_20260615_1a2b3c",
                             "status": "accepted"}),
    );
    assert_eq!(r["god"], "thoth");
    assert!(env.names("conductor/pending/thoth").is_empty());
    assert_eq!(
        env.read("conductor/archive/thoth/hof_20260615_1a2b3c.json")["ack_status"],
        "accepted"
    );
}

#[test]
fn another_engines_directories_in_pending_are_warnings_never_gods() {
    // The fixture holds the origin engine's `_webhooks/` and `inbox/`; a plain root gets one more
    // underscore-prefixed directory of someone else's.
    for env in [Env::foreign(), Env::new()] {
        env.write(
            "conductor/pending/_scratch/x.json",
            r#"{"not": "a dispatch"}"#,
        );
        env.write("conductor/pending/inbox/m.json", r#"{"text": "hi"}"#);
        let p = env.ok(&["pending"], None);
        let gods: Vec<&String> = p["pending"].as_object().unwrap().keys().collect();
        assert!(
            gods.iter()
                .all(|g| !["inbox", "_webhooks", "_scratch"].contains(&g.as_str())),
            "{gods:?}"
        );
        let out = env.run(&["validate"], None);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for dir in ["pending/inbox", "pending/_scratch"] {
            let about: Vec<_> = r["problems"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["path"].as_str().unwrap().contains(dir))
                .collect();
            assert_eq!(about.len(), 1, "{dir}: {r:#}");
            assert_eq!(about[0]["severity"], "warning", "{r:#}");
            assert!(about[0]["path"].as_str().unwrap().ends_with(dir), "{r:#}");
            assert!(
                about[0]["message"]
                    .as_str()
                    .unwrap()
                    .contains("another engine"),
                "{r:#}"
            );
        }
    }
    let plain = Env::new();
    plain.write("conductor/pending/_webhooks/d.json", r#"{"event": "push"}"#);
    let out = plain.run(&["validate"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
