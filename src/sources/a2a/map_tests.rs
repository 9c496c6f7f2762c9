use serde_json::json;

use super::*;

fn card_v1() -> Value {
    json!({
        "name": "asker\u{1b}[31m",
        "supportedInterfaces": [
            {"url": "http://h:1/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h:1/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true},
        "futureField": {"kept": true}
    })
}

#[test]
fn a_1_0_card_prefers_its_json_rpc_1_x_interface() {
    let card = read_card(card_v1(), "http://h:1/.well-known/agent-card.json").unwrap();
    assert_eq!(card.rpc_url, "http://h:1/");
    assert_eq!(card.dialect, Dialect::V1);
    assert!(card.streaming);
    assert_eq!(card.name, "asker [31m", "the escape is gone");
    assert_eq!(
        card.raw["futureField"]["kept"], true,
        "unknown fields are kept raw"
    );
}

#[test]
fn a_0_3_card_speaks_0_3_at_its_url() {
    let raw = json!({"name": "old", "url": "/rpc", "protocolVersion": "0.3.0"});
    let card = read_card(raw, "http://h:2/.well-known/agent.json").unwrap();
    assert_eq!(card.rpc_url, "http://h:2/rpc");
    assert_eq!(card.dialect, Dialect::V03);
    assert!(!card.streaming);
    let raw = json!({"name": "old", "url": "http://h/g", "preferredTransport": "GRPC",
        "additionalInterfaces": [{"url": "http://h/j", "transport": "JSONRPC"}]});
    assert_eq!(
        read_card(raw, "http://h/c.json").unwrap().rpc_url,
        "http://h/j"
    );
}

#[test]
fn a_card_with_no_json_rpc_or_a_strange_url_is_refused_with_the_reason() {
    let raw = json!({"name": "g", "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "GRPC"}]});
    let err = read_card(raw, "http://h/c.json").unwrap_err();
    assert!(
        err.contains("no JSON-RPC interface") && err.contains("GRPC"),
        "{err}"
    );
    let raw = json!({"name": "g", "url": "file:///etc/passwd"});
    let err = read_card(raw, "http://h/c.json").unwrap_err();
    assert!(err.contains("only http:// and https://"), "{err}");
    assert!(
        read_card(json!([1, 2]), "http://h/c.json")
            .unwrap_err()
            .contains("not a JSON object")
    );
}

#[test]
fn states_of_both_generations_read_the_same() {
    assert_eq!(state_word("TASK_STATE_INPUT_REQUIRED"), "input-required");
    assert_eq!(state_word("input-required"), "input-required");
    assert_eq!(state_word("TASK_STATE_AUTH_REQUIRED"), "auth-required");
    assert_eq!(state_word("TASK_STATE_COMPLETED"), "completed");
    assert!(is_waiting("auth-required") && !is_waiting("working"));
    assert!(is_final("completed") && !is_final("input-required"));
}

fn waiting_task() -> Value {
    json!({
        "id": "t1", "contextId": "c1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "timestamp": "2026-12-06T14:47:08.650625Z",
            "message": {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "what name?\u{1b}]0;x\u{7}"}]}
        },
        "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi\nthere"}]}],
        "artifacts": [{"artifactId": "a1", "name": "draft", "parts": [{"data": {"k": 1}}]}]
    })
}

#[test]
fn a_waiting_task_is_an_answerable_item_with_a_stable_key() {
    let card = read_card(card_v1(), "http://h:1/c.json").unwrap();
    let task = waiting_task();
    let snap = snapshot(&card, "ok", std::iter::once(&task));
    assert_eq!(snap.agents.len(), 1);
    assert_eq!(snap.tasks.len(), 1);
    assert_eq!(snap.tasks[0].state, "input-required");
    assert_eq!(snap.tasks[0].title, "hi there");
    assert_eq!(snap.attention.len(), 1);
    let item = &snap.attention[0];
    assert!(item.answerable);
    assert_eq!(item.key, "t1#input-required@2026-12-06T14:47:08.650625Z");
    assert!(item.what.contains("what name?"), "{}", item.what);
    assert!(
        !item.what.contains('\u{1b}') && !item.what.contains('\u{7}'),
        "{}",
        item.what
    );
    assert!(item.since.is_some());
    let again = snapshot(&card, "ok", std::iter::once(&task));
    assert_eq!(
        again.attention[0].key, item.key,
        "the same wait, the same key"
    );
    // history, the question (not in the history) and the artifact
    let bodies: Vec<&str> = snap.messages.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["hi\nthere", "what name?]0;x", "{\"k\":1}"]);
    assert_eq!(snap.messages[0].from, "client");
    assert_eq!(snap.messages[1].from, card.name);
    assert!(snap.messages[1].at.is_some());
}

#[test]
fn stream_events_fold_into_the_tasks_and_older_states_lose() {
    let mut tasks = BTreeMap::new();
    let task = waiting_task();
    assert_eq!(
        apply_event(&mut tasks, &json!({"task": task})).as_deref(),
        Some("t1")
    );
    let update = json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-06T14:47:13Z"}}});
    apply_event(&mut tasks, &update);
    assert_eq!(task_state(&tasks["t1"]), "completed");
    // a 0.3 artifact update replaces the artifact of the same id
    let art = json!({"kind": "artifact-update", "taskId": "t1",
        "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "final"}]}});
    apply_event(&mut tasks, &art);
    assert_eq!(tasks["t1"]["artifacts"].as_array().unwrap().len(), 1);
    assert_eq!(
        parts_text(tasks["t1"].pointer("/artifacts/0/parts")),
        "final"
    );
    // a listing read before the completion does not bring the wait back
    assert!(!not_older(&tasks["t1"], &task));
    apply_event(&mut tasks, &json!({"task": task}));
    assert_eq!(task_state(&tasks["t1"]), "completed");
    // hostile shapes are ignored
    for bad in [
        json!(null),
        json!({"task": 3}),
        json!({"statusUpdate": {"taskId": 1}}),
        json!({"kind": "x"}),
    ] {
        apply_event(&mut tasks, &bad);
    }
    assert_eq!(tasks.len(), 1);
}

#[test]
fn hostile_text_is_bounded_and_flat() {
    let long = "x".repeat(10_000);
    let line = clean_line(&long, 20);
    assert_eq!(line.chars().count(), 21);
    assert!(line.ends_with('…'));
    let bidi = clean_line("a\u{202e}b", 10);
    assert!(!bidi.contains('\u{202e}'), "{bidi:?}");
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    /// Text with what a hostile agent would send: escapes, bells, bidirectional overrides, line
    /// breaks, long runs.
    fn hostile_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,12}",
            Just("\u{1b}[2J\u{1b}]0;owned\u{7}".to_owned()),
            Just("a\u{202e}b\u{2066}c\u{9b}31m".to_owned()),
            Just("line\r\nbreak\ttab\u{0}nul".to_owned()),
            Just("TASK_STATE_INPUT_REQUIRED".to_owned()),
            Just("input-required".to_owned()),
            Just("ROLE_USER".to_owned()),
            Just("2026-12-06T14:47:08.650625Z".to_owned()),
            Just("x".repeat(20_000)),
        ]
    }

    /// JSON shaped like A2A's, with the protocol's keys at random places and of random types.
    fn a2a_like() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            hostile_text().prop_map(Value::String),
        ];
        let keys = prop_oneof![
            Just("id"),
            Just("contextId"),
            Just("taskId"),
            Just("status"),
            Just("state"),
            Just("timestamp"),
            Just("message"),
            Just("messageId"),
            Just("history"),
            Just("role"),
            Just("parts"),
            Just("text"),
            Just("data"),
            Just("file"),
            Just("artifacts"),
            Just("artifactId"),
            Just("name"),
            Just("kind"),
            Just("task"),
            Just("statusUpdate"),
            Just("artifactUpdate"),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..8).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    fn shown_clean(s: &str, body: bool) -> bool {
        s.chars()
            .all(|c| !(c.is_control() && !(body && c == '\n')) && !crate::text::is_bidi_control(c))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

        /// Ten thousand hostile documents: no panic, and nothing shown holds a control character or
        /// a bidirectional control (the raw JSON is kept as it came).
        #[test]
        fn hostile_a2a_json_never_panics_and_shows_no_escape(card in a2a_like(), docs in prop::collection::vec(a2a_like(), 0..4)) {
            let _ = read_card(card.clone(), "http://h/c.json");
            let fair = read_card(card_v1(), "http://h/c.json").unwrap();
            let mut tasks = BTreeMap::new();
            for d in &docs {
                apply_event(&mut tasks, d);
                let _ = attention_key(d);
            }
            let snap = snapshot(&fair, "ok", docs.iter().chain(tasks.values()));
            for t in &snap.tasks {
                prop_assert!(shown_clean(&t.title, false) && shown_clean(&t.state, false) && shown_clean(&t.id, false), "{t:?}");
            }
            for a in &snap.attention {
                prop_assert!(shown_clean(&a.what, false) && shown_clean(&a.key, false), "{a:?}");
                prop_assert!(a.what.chars().count() <= 330);
            }
            for m in &snap.messages {
                prop_assert!(shown_clean(&m.body, true) && shown_clean(&m.id, false), "{m:?}");
                prop_assert!(m.body.chars().count() <= 8 * 1024 + 1);
            }
        }
    }
}
