//! A god on another machine, end to end: `pantheon serve --mcp` on one root, two agents as separate
//! processes over HTTP with their own credentials (thoth through the official Python SDK,
//! hephaestus through the official TypeScript SDK), through the whole `example-research-build`
//! sample workflow; thoth tries to ack hephaestus's dispatch and is refused; the console watches
//! the root in tmux all along.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::harness::*;
use crate::tmux::Tmux;

#[test]
fn two_remote_gods_run_a_sample_workflow_through_serve_while_the_console_watches() {
    let root = TestRoot::new();
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    let thoth = add_credential(&root, &file, "thoth", "--god");
    let heph = add_credential(&root, &file, "hephaestus", "--god");
    let server = HttpServer::start(
        root.path(),
        &[
            "serve",
            "--mcp",
            "127.0.0.1:0",
            "--credentials",
            file.to_str().unwrap(),
        ],
    );
    let bin: PathBuf = pantheon_bin();
    let mut console = Tmux::start(
        "remote",
        &format!(
            "{} --root {} console --read-only; sleep 600",
            bin.display(),
            root.path().display()
        ),
    );
    console.deadline = Duration::from_secs(20);
    console.wait("the console", |s| s.contains("1 Workflows"));

    let wf = "wf_remote_build_1";
    let (h1, h2) = (handoff_id(0xe01), handoff_id(0xe02));
    let research = json!({
        "handoff_id": h1, "workflow_id": wf, "from_god": "thoth", "to_god": "hephaestus",
        "step": "research",
        "context": {"summary": "Found the cause: the cache key ignores the locale.",
                    "decisions": ["key the cache by locale"], "artifacts": ["notes/cause.md"]},
        "routing": {"workflow_definition": "example-research-build", "workflow_version": "0.1.0"},
    });
    // Thoth, a Python agent: research done; then it tries to take hephaestus's work.
    let report = http_session(
        Sdk::Python,
        &server.url,
        Some(&thoth),
        &[("PANTHEON_MCP_CLIENT", "thoth-agent")],
        &[
            call("submit_handoff", json!({"handoff": research})),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0xe01), "handoff_id": h1, "status": "accepted"}}),
            ),
            call("check_inbox", json!({"god_name": "hephaestus"})),
        ],
    );
    let r = http_results(&report);
    let submitted = ok(&r[0]);
    assert_eq!(submitted["status"], "dispatched", "{submitted:#}");
    assert_eq!(submitted["target_god"], "hephaestus");
    let refusal = refused(&r[1]);
    assert!(
        refusal.contains("addressed to hephaestus") && refusal.contains("thoth cannot acknowledge"),
        "{refusal}"
    );
    assert!(refused(&r[2]).contains("`read_inbox`"));
    console.wait("the dispatch to hephaestus", |s| s.contains(wf));

    // Hephaestus, a TypeScript agent: its inbox, accept, build, complete.
    let report = http_session(
        Sdk::TypeScript,
        &server.url,
        Some(&heph),
        &[("PANTHEON_MCP_CLIENT", "hephaestus-agent")],
        &[
            call("check_inbox", json!({"god_name": "hephaestus"})),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0xe02), "handoff_id": h1, "status": "accepted",
                               "message": "building"}}),
            ),
            call(
                "submit_handoff",
                json!({"handoff": {
                    "handoff_id": h2, "workflow_id": wf, "from_god": "hephaestus",
                    "to_god": "thoth", "step": "build",
                    "context": {"summary": "Cache keyed by locale; tests pass.",
                                "decisions": ["locale in the key"], "artifacts": ["src/cache.rs"],
                                "gates_passed": ["logic_gate"]},
                    "routing": {"workflow_definition": "example-research-build",
                                "workflow_version": "0.1.0"},
                }}),
            ),
            call("get_workflow_state", json!({"workflow_id": wf})),
        ],
    );
    let r = http_results(&report);
    let inbox = ok(&r[0]);
    assert_eq!(inbox["count"], 1, "{inbox:#}");
    assert_eq!(inbox["dispatches"][0]["step"], "build");
    assert_eq!(ok(&r[1])["status"], "accepted", "{:#}", r[1]);
    assert_eq!(ok(&r[2])["status"], "completed", "{:#}", r[2]);
    let state = ok(&r[3]);
    assert_eq!(state["status"], "completed", "{state:#}");

    // The console saw it finish; the journal names each god; the state records only hephaestus's ack.
    console.wait("the finished workflow", |s| {
        s.lines()
            .any(|l| l.contains(wf) && l.to_lowercase().contains("complete"))
    });
    let j = root.cli_json(&["journal"]);
    let acts: Vec<(String, String)> = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] != "refused")
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_owned(),
                e["actor"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(acts.contains(&("submit".into(), "thoth".into())), "{j:#}");
    assert!(acts.contains(&("ack".into(), "hephaestus".into())), "{j:#}");
    assert!(
        acts.contains(&("submit".into(), "hephaestus".into())),
        "{j:#}"
    );
    assert!(
        !acts.iter().any(|(a, who)| a == "ack" && who == "thoth"),
        "thoth's refused ack is no act: {j:#}"
    );
    let acks = state["acks"].as_array().cloned().unwrap_or_default();
    assert!(
        !acks.is_empty() && acks.iter().all(|a| a["by"] == "hephaestus"),
        "{state:#}"
    );
    assert!(server.stop().success(), "serve exits 0 on SIGTERM");
}
