use super::*;

fn corpus(layout: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/claude-teams")
        .join(layout)
}

#[test]
fn each_layout_of_the_corpus_reads_as_its_expected_agents_tasks_and_items() {
    for layout in ["v2.1.39", "swarm-2026-01", "snake-case"] {
        let dir = corpus(layout);
        let expected: Value =
            serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
        let mut src = ClaudeTeams::new(dir.to_str().unwrap()).unwrap();
        let snap = src.read().unwrap_or_else(|e| panic!("{layout}: {e}"));
        let agents: BTreeMap<&str, Option<&str>> = snap
            .agents
            .iter()
            .map(|a| (a.name.as_str(), a.status.as_deref()))
            .collect();
        let want: BTreeMap<&str, Option<&str>> = expected["agents"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(agents, want, "{layout}: agents");
        assert_eq!(
            snap.messages.len() as u64,
            expected["messages"].as_u64().unwrap(),
            "{layout}"
        );
        assert_eq!(
            snap.tasks.len() as u64,
            expected["tasks"].as_u64().unwrap(),
            "{layout}"
        );
        let mut keys: Vec<&str> = snap.attention.iter().map(|a| a.key.as_str()).collect();
        keys.sort();
        let want: Vec<&str> = expected["attention"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(keys, want, "{layout}: {:#?}", snap.attention);
        for (key, names) in expected["attention_names"].as_object().unwrap() {
            let item = snap.attention.iter().find(|a| &a.key == key).unwrap();
            for n in names.as_array().unwrap() {
                assert!(
                    item.what.contains(n.as_str().unwrap()),
                    "{layout}: {} lacks {n}",
                    item.what
                );
            }
            assert!(item.since.is_some(), "{layout}: {key} is dated");
        }
        // Unknown fields are kept: the raw member and the raw task are the files' own.
        assert!(snap.agents.iter().all(|a| a.raw.is_object()));
        assert!(snap.tasks.iter().all(|t| t.raw.get("subject").is_some()));
        // A second read of unchanged files gives the same snapshot (from the cache).
        assert_eq!(src.read().unwrap(), snap, "{layout}");
    }
}

#[test]
fn a_response_closes_its_request_and_an_edit_is_seen_on_the_next_read() {
    let d = tempfile::tempdir().unwrap();
    let team = d.path().join("teams/t");
    std::fs::create_dir_all(team.join("inboxes")).unwrap();
    std::fs::write(
        team.join("config.json"),
        r#"{"name":"t","leadAgentId":"lead@t","members":[{"name":"lead"},{"name":"w"}]}"#,
    )
    .unwrap();
    let req = serde_json::json!({"type":"permission_request","requestId":"r1","workerName":"w","toolName":"Edit","input":{"file_path":"a.rs"}});
    let inbox = serde_json::json!([{"from":"w","text":req.to_string(),"timestamp":"2026-02-01T10:00:00Z","read":false}]);
    std::fs::write(team.join("inboxes/lead.json"), inbox.to_string()).unwrap();
    let mut src = ClaudeTeams::new(d.path().to_str().unwrap()).unwrap();
    let s = src.read().unwrap();
    assert_eq!(s.attention.len(), 1, "{:?}", s.attention);
    assert!(
        s.attention[0]
            .what
            .contains("w asks permission to use Edit"),
        "{}",
        s.attention[0].what
    );
    let resp = serde_json::json!({"type":"permission_response","requestId":"r1","approved":false});
    let back = serde_json::json!([{"from":"lead","text":resp.to_string(),"timestamp":"2026-02-01T10:01:00Z","read":false}]);
    std::fs::write(team.join("inboxes/w.json"), back.to_string()).unwrap();
    assert!(src.read().unwrap().attention.is_empty());
}

#[test]
fn a_missing_directory_is_an_error_and_a_broken_file_is_an_item_not_a_failure() {
    let d = tempfile::tempdir().unwrap();
    let mut gone = ClaudeTeams::new(d.path().join("nope").to_str().unwrap()).unwrap();
    let e = gone.read().unwrap_err();
    assert!(
        e.reason.contains("nope") && e.reason.contains("claude-teams:DIR"),
        "{e}"
    );
    let team = d.path().join("teams/t/inboxes");
    std::fs::create_dir_all(&team).unwrap();
    std::fs::write(team.join("a.json"), b"[{\"from\": \"x\", \"te").unwrap();
    std::fs::write(team.join("b.json"), b"{\"not\": \"an array\"}").unwrap();
    let s = ClaudeTeams::new(d.path().to_str().unwrap())
        .unwrap()
        .read()
        .unwrap();
    let whats: Vec<&str> = s.attention.iter().map(|a| a.what.as_str()).collect();
    assert_eq!(whats.len(), 2, "{whats:?}");
    assert!(whats[0].contains("truncated JSON"), "{whats:?}");
    assert!(whats[1].contains("JSON array of messages"), "{whats:?}");
}
