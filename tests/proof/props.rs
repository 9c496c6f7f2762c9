//! Property tests: the CI-sized twins of the `fuzz/` targets (handoff/ack validation, the JSONL
//! reader, the YAML loaders, event-name encoding, path safety). `PROPTEST_CASES` runs them longer.

use std::io::Write;
use std::path::Path;

use pantheon::Root;
use pantheon::engine::{
    Actor, Conductor, EventPattern, MAX_YAML_NODES, WorkflowId, decode_key, encode_key,
    event_file_name, load_definition_file, load_rule_file, normalize_lock_key, parse_yaml_bounded,
    queue::{self, Filter},
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Nodes of a parsed YAML value, counting mapping keys as the parser does.
fn nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(nodes).sum(),
        Value::Object(m) => m.values().map(|v| 1 + nodes(v)).sum(),
        _ => 0,
    }
}

/// Strings that mix path tricks, NUL, non-ASCII and plain id-like text.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9_]{0,12}",
        "hof_2026061[0-9]_[a-z0-9]{4,9}",
        "wf_[a-z0-9_./]{0,20}",
        Just("..".to_string()),
        Just("../../outside".to_string()),
        Just("/tmp/outside".to_string()),
        "\\PC{0,40}",
        "[a-z/.\u{0}\\\\]{0,20}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        hostile_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(hostile_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid handoff with one field replaced by a hostile value.
fn mutated_handoff() -> impl Strategy<Value = Value> {
    let fields = prop::sample::select(vec![
        "/handoff_id",
        "/workflow_id",
        "/from_god",
        "/to_god",
        "/step",
        "/context/summary",
        "/context/decisions",
        "/context/artifacts",
        "/routing/workflow_step",
        "/routing/workflow_definition",
        "/context",
        "/routing",
    ]);
    (fields, json_value()).prop_map(|(ptr, v)| {
        let mut h = json!({"handoff_id": "hof_20260614_ab12cd", "workflow_id": "wf_prop",
            "from_god": "thoth", "to_god": "hephaestus", "step": "research",
            "context": {"summary": "s", "decisions": ["d"], "artifacts": ["a.md"]},
            "routing": {"workflow_step": "build"}});
        if let Some(slot) = h.pointer_mut(ptr) {
            *slot = v;
        }
        h
    })
}

/// The set of paths under `dir`.
fn listing(dir: &Path) -> Vec<String> {
    let mut v = vec![];
    crate::common::walk(dir, &mut |p| {
        // Lock files are created by taking a lock (before validation can run), never data.
        if !p.to_string_lossy().ends_with(".lock") {
            v.push(p.to_string_lossy().into_owned())
        }
    });
    v
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Any handoff or ack value: refused with nothing written, or accepted with every file inside
    /// the root; never a panic.
    #[test]
    fn handoff_and_ack_validation_never_panics_or_escapes(h in mutated_handoff(), a in json_value()) {
        let dir = tempfile::tempdir().unwrap();
        let root_dir = dir.path().join("root");
        let c = Conductor::new(Root::at(&root_dir));
        c.init().unwrap();
        let before = listing(dir.path());
        match c.submit_handoff(&h) {
            Ok(_) => {
                for p in listing(dir.path()) {
                    prop_assert!(Path::new(&p).starts_with(&root_dir), "{p} outside the root");
                }
            }
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                prop_assert_eq!(&before, &listing(dir.path()), "a refused handoff wrote something");
            }
        }
        let _ = c.ack_handoff(&a, Actor::Recipient);
        let _ = c.ack_handoff(&json!({"ack_id": "ack_20260614_p01", "handoff_id": "hof_20260614_ab12cd", "status": a}), Actor::Recipient);
        for p in listing(dir.path()) {
            prop_assert!(Path::new(&p).starts_with(&root_dir), "{p} outside the root");
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Any bytes in a queue: the forward read, the tail and the cursor agree, and never panic.
    #[test]
    fn jsonl_reader_agrees_with_itself_on_any_bytes(
        lines in prop::collection::vec(prop_oneof![
            Just(r#"{"id":"m","type":"PROGRESS","source":"s","timestamp":"2026-06-14T10:00:00Z","payload":{}}"#.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..40),
            Just(b"{\"id\": \"torn".to_vec()),
            Just(Vec::new()),
        ], 0..30),
        terminated in any::<bool>(),
    ) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut bytes = lines.join(&b'\n');
        if terminated { bytes.push(b'\n'); }
        f.write_all(&bytes).unwrap();
        f.flush().unwrap();
        let all = queue::read(f.path(), &Filter::default()).unwrap();
        let complete_lines = bytes.iter().filter(|b| **b == b'\n').count();
        prop_assert!(all.count + all.skipped >= complete_lines.min(all.count + all.skipped));
        prop_assert!(all.count <= complete_lines);
        for n in [1usize, 2, 7, 100] {
            let t = queue::tail(f.path(), n, &Filter::default()).unwrap();
            let want: Vec<_> = all.messages.iter().rev().take(n).rev().map(|m| m.id.clone()).collect();
            let got: Vec<_> = t.messages.iter().map(|m| m.id.clone()).collect();
            prop_assert_eq!(got, want);
        }
        let mut cursor = queue::QueueCursor::new(f.path());
        prop_assert_eq!(cursor.poll().unwrap().len(), all.count);
    }

    /// Any YAML text loads as a definition / rules or a reported error.
    #[test]
    fn yaml_loaders_report_instead_of_panicking(
        text in prop_oneof![
            "\\PC{0,200}",
            "(workflow:\n  id: [a-z./]{1,8}\n  steps:\n(    - id: [a-z./]{1,6}\n      god: [a-z./]{1,6}\n){0,3})",
            "(rules:\n(  - id: [a-z./]{1,6}\n    when: \\{\\}\n    then: \\{dispatch_god: [a-z./]{1,8}\\}\n){0,3})",
            "([&*a-z: \\[\\],\n-]{0,120})",
        ],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.yaml");
        std::fs::write(&p, &text).unwrap();
        if let Ok(def) = load_definition_file(&p) {
            for s in &def.steps {
                prop_assert!(!s.id.contains('/') && !s.god.contains('/'), "{text:?}");
            }
        }
        let (rules, _) = load_rule_file(&p);
        let _ = rules;
    }

    /// Anchors and aliases nested to any width and depth: the loaders either load the file or refuse it
    /// by the expansion budget, and a bounded parse never builds more nodes than its budget.
    #[test]
    fn yaml_expansion_stays_within_the_budget(
        widths in proptest::collection::vec(1usize..60, 1..7),
        budget in 10usize..5_000,
        rule_file in proptest::bool::ANY,
    ) {
        let mut text = String::from(if rule_file { "rules: []\n" } else { "workflow:\n  id: wf\n" });
        text.push_str("l0: &l0 [x, y]\n");
        for (i, w) in widths.iter().enumerate() {
            let refs = vec![format!("*l{i}"); *w].join(", ");
            text.push_str(&format!("l{}: &l{} [{refs}]\n", i + 1, i + 1));
        }
        match parse_yaml_bounded(text.as_bytes(), budget) {
            Ok(v) => prop_assert!(nodes(&v) <= budget),
            Err(e) => prop_assert!(e.as_str().contains("alias"), "{e}"),
        }
        // The loaders use the engine's budget: a 2-item list copied through the layers either fits or is
        // refused with the budget named, within the time proptest allows.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.yaml");
        std::fs::write(&p, &text).unwrap();
        let expanded: u128 = widths.iter().fold(3u128, |n, w| n * *w as u128 + 1);
        let message = if rule_file {
            load_rule_file(&p).1.first().map(|e| e.message.clone())
        } else {
            load_definition_file(&p).err().map(|e| e.message)
        };
        // Refused by the budget, or first by the parser's own alias repetition limit.
        if expanded > MAX_YAML_NODES as u128 {
            let m = message.unwrap_or_default();
            prop_assert!(m.contains("alias") || m.contains("repetition limit"), "{text:?}: {m}");
        }
    }

    /// Any key: a single safe file-name component that decodes back to itself.
    #[test]
    fn event_names_are_one_safe_component(key in "\\PC{0,60}", pattern in "\\PC{0,30}") {
        let enc = encode_key(&key);
        prop_assert!(enc.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b)));
        prop_assert!(enc != "." && enc != "..");
        prop_assert_eq!(decode_key(&enc), key.clone());
        let name = event_file_name("FILE_UNLOCK", Some(&key));
        prop_assert!(!name.contains('/'));
        if let Ok(p) = EventPattern::new(&pattern) {
            let _ = p.matches(&name);
        }
    }

    /// Any artifact path: confined strictly inside the root (symlinks resolved) or refused; any lock
    /// key normalised or refused.
    #[test]
    fn path_safety_confines_or_refuses(raw in prop_oneof![
        "\\PC{0,40}",
        "(\\{root\\}|~|/|\\.\\.|link|tmp|[a-z]{1,3}|/){0,8}",
    ].prop_map(|s: String| s.replace(")(", "/"))) {
        let dir = tempfile::tempdir().unwrap();
        let root_dir = dir.path().join("root");
        std::fs::create_dir_all(root_dir.join("tmp")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), root_dir.join("link")).unwrap();
        let canon = std::fs::canonicalize(&root_dir).unwrap();
        let root = Root::at(&root_dir);
        let p = root.expand(&raw, &WorkflowId::parse("wf_prop").unwrap());
        if let Ok(real) = root.confine(&p) {
            prop_assert!(real.starts_with(&canon) && real != canon, "{raw:?} -> {}", real.display());
            let rel = real.strip_prefix(&canon).unwrap();
            prop_assert!(!(rel.starts_with("link") && rel.components().count() > 1), "{raw:?} went through a symlink");
        }
        if let Ok(k) = normalize_lock_key(&raw) {
            prop_assert!(!k.is_empty() && !k.contains("//") && !k.starts_with("./"));
        }
    }
}
