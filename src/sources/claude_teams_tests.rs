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
        // Each teammate's cost from the session logs (a streamed request once, a torn line and
        // the lines before the team left out), priced by the shipped table.
        let costs = expected["costs"].as_object().cloned().unwrap_or_default();
        assert_eq!(snap.costs.len(), costs.len(), "{layout}: {:#?}", snap.costs);
        for (agent, want) in &costs {
            let c = snap
                .costs
                .iter()
                .find(|c| c.agent == *agent)
                .unwrap_or_else(|| panic!("{layout}: no cost for {agent}: {:#?}", snap.costs));
            let got = c.totals.to_json();
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&got[k], v, "{layout}: {agent}'s {k}");
            }
            assert!(c.totals.cost_micros > 0 && c.totals.unpriced == 0, "{c:?}");
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

/// Every string of a snapshot that a row shows.
fn shown(s: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for a in &s.agents {
        out.extend([
            a.name.clone(),
            a.group.clone().unwrap_or_default(),
            a.status.clone().unwrap_or_default(),
        ]);
    }
    for m in &s.messages {
        out.extend([
            m.id.clone(),
            m.from.clone(),
            m.body.clone(),
            m.subject.clone().unwrap_or_default(),
        ]);
        out.extend(m.to.iter().cloned());
    }
    for t in &s.tasks {
        out.extend([
            t.id.clone(),
            t.title.clone(),
            t.state.clone(),
            t.owner.clone().unwrap_or_default(),
        ]);
    }
    for a in &s.attention {
        out.extend([a.key.clone(), a.agent.clone(), a.what.clone()]);
    }
    out
}

/// A hostile piece of JSON text: escape sequences, controls, wrong types, huge or truncated.
fn hostile(rng: &mut rand::rngs::StdRng) -> String {
    use rand::Rng;
    const EVIL: [&str; 8] = [
        "\u{1b}[2J\u{1b}]0;pwned\u{7}",
        "\u{9b}31m",
        "\u{202e}txt.exe",
        "\r\n\t",
        "\u{0}",
        "💥",
        "\u{1b}P+q\u{1b}\\",
        "",
    ];
    let s = || EVIL[rand::rng().random_range(0..EVIL.len())].to_owned();
    let text = serde_json::Value::String(format!("{}{}{}", s(), s(), s()));
    let perm = serde_json::json!({"type": "permission_request", "requestId": text, "workerName": text,
        "toolName": text, "input": {"command": text}, "from": text});
    let v = match rng.random_range(0..9) {
        0 => serde_json::json!([{"from": text, "text": perm.to_string(), "timestamp": text}]),
        1 => {
            serde_json::json!([{"from": 7, "text": {"type": "permission_request"}, "timestamp": -1e300}])
        }
        2 => {
            serde_json::json!({"members": [{"name": text, "isActive": text}, 3, null], "leadAgentId": text})
        }
        3 => {
            serde_json::json!({"id": text, "subject": text, "status": text, "owner": text, "blockedBy": [text, 1, null]})
        }
        4 => serde_json::json!({"id": 1e308, "subject": [], "status": {}, "blockedBy": "x"}),
        5 => {
            serde_json::json!([{"from": "w", "text": format!("{{\"type\":\"plan_approval_request\",\"planContent\":{text},\"timestamp\":{}}}", i64::MAX)}])
        }
        6 => serde_json::json!("just a string"),
        7 => serde_json::Value::String("x".repeat(rng.random_range(0..200_000))),
        _ => serde_json::json!([{"from": text, "text": text, "timestamp": 1e20}]),
    };
    let mut out = v.to_string();
    if rng.random_bool(0.3) {
        let cut = rng.random_range(0..=out.len());
        while !out.is_char_boundary(cut.min(out.len())) {
            out.pop();
        }
        out.truncate(cut.min(out.len()));
    }
    out
}

#[test]
fn ten_thousand_hostile_files_give_no_panic_and_no_escape_sequence_on_screen() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(47);
    let d = tempfile::tempdir().unwrap();
    let team = d.path().join("teams/t");
    let tasks = d.path().join("tasks/t");
    std::fs::create_dir_all(team.join("inboxes")).unwrap();
    std::fs::create_dir_all(&tasks).unwrap();
    let mut src = ClaudeTeams::new(d.path().to_str().unwrap()).unwrap();
    let mut files = 0;
    for round in 0..2_000 {
        for (i, path) in [
            team.join("config.json"),
            team.join("inboxes/lead.json"),
            team.join(format!("inboxes/w{}.json", round % 3)),
            tasks.join("1.json"),
            tasks.join(format!("{}.json", round % 5 + 2)),
        ]
        .into_iter()
        .enumerate()
        {
            let _ = i;
            std::fs::write(&path, hostile(&mut rng)).unwrap();
            files += 1;
        }
        let snap =
            super::super::read_guarded(&mut src).unwrap_or_else(|e| panic!("round {round}: {e}"));
        for text in shown(&snap) {
            assert!(
                !text
                    .chars()
                    .any(|c| c.is_control() || crate::text::is_bidi_control(c)),
                "round {round}: {text:?}"
            );
        }
    }
    assert_eq!(files, 10_000);
}
