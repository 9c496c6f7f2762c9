//! The origin's envelope as the origin documents it (docs/NATS.md "The origin's envelope"): its
//! handoff doc addresses a god of the receiving root, and its `context.decisions` and
//! `context.artifacts` are the dispatch's own. And `validate` warns of what `workflows` warns of
//! (the origin's definitions carry a dangling `input_from`).

use super::peers::{core_publish, dead_letters, origin_msg, read_json, wait_stream};
use super::*;

#[test]
fn the_origins_envelope_addresses_a_god_and_carries_its_decisions_and_artifacts() {
    let server = Server::start();
    let url = server.url();
    let mut b = Machine::new("tallon");
    b.start_bridge(
        &url,
        &[
            "--peer",
            "konan:core:origin",
            "--subject",
            "subspace.*.outgoing.tallon",
        ],
    );
    wait_stream(&url, &b);
    let doc = origin_msg(
        "handoff-doc-1",
        "konan",
        "hephaestus",
        json!({"summary": "build the release",
               "decisions": ["ship on friday", {"why": "tests pass"}],
               "artifacts": ["dist/app.tar.gz"], "ticket": "T-1"}),
    );
    let nobody = origin_msg("handoff-doc-2", "konan", "nobody", json!({"summary": "x"}));
    core_publish(&url, "subspace.konan.outgoing.tallon", &[doc, nobody]);
    wait_for(
        "hephaestus's dispatch and the dead letter",
        Duration::from_secs(30),
        || b.files("conductor/pending/hephaestus").len() == 1 && dead_letters(&b).len() == 1,
    );
    let d = read_json(&b.files("conductor/pending/hephaestus")[0]);
    assert_eq!(d["to_god"], "hephaestus", "{d:#}");
    assert_eq!(
        d["context"]["decisions"],
        json!(["ship on friday", "{\"why\":\"tests pass\"}"]),
        "{d:#}"
    );
    assert_eq!(
        d["context"]["artifacts"],
        json!(["dist/app.tar.gz"]),
        "{d:#}"
    );
    assert_eq!(d["context"]["payload"]["ticket"], "T-1", "{d:#}");
    assert!(inbox(&b).is_empty(), "nothing went to --god hermes");
    let dead = &dead_letters(&b)[0];
    let reason = dead["reason"].as_str().unwrap();
    assert!(
        reason
            .contains("target \"nobody\" is neither this pantheon (tallon) nor a god of this root")
            && reason.contains("hephaestus"),
        "{reason}"
    );
}

#[test]
fn validate_shows_the_warnings_workflows_shows() {
    let m = Machine::new("solo");
    // The origin's deploy shape: `input_from: build` names no step of it.
    m.write("conductor/workflows/deploy-across.yaml", DEPLOY);
    let listed = m.ok(&["workflows"], None);
    let def = listed["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "deploy-across")
        .unwrap_or_else(|| panic!("{listed:#}"));
    let text = def["warnings"][0].as_str().unwrap();
    assert!(text.contains("input_from \"build\""), "{listed:#}");
    let out = m.command(&["validate"]).output().unwrap();
    assert!(
        out.status.success(),
        "a warning leaves the root valid: {out:?}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["message"] == text)
        .unwrap_or_else(|| panic!("validate shows {text:?}: {report:#}"));
    assert_eq!(p["severity"], "warning", "{p}");
    assert!(
        p["path"].as_str().unwrap().ends_with("deploy-across.yaml"),
        "{p}"
    );
    assert!(report["warnings"].as_u64().unwrap() >= 1, "{report:#}");
}
