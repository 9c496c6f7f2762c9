//! The YAML loaders (workflow definitions and rules): any bytes, including alias bombs and deep
//! nesting, load to a definition or a reported error, never a panic or a hang; and no parse ever
//! builds more nodes than its expansion budget allows.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use pantheon::engine::conductor::definition::{WorkflowDef, load_definition_file};
use pantheon::engine::conductor::rules::{first_match, load_rule_file};
use pantheon::engine::store::yaml::parse_bounded;

/// A small budget, so the fuzzer reaches it with short inputs.
const BUDGET: usize = 1_000;

fn nodes(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Array(a) => a.iter().map(nodes).sum(),
        serde_json::Value::Object(m) => m.values().map(|v| 1 + nodes(v)).sum(),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
    let _ = load_definition_file(f.path());
    let (rules, _errors) = load_rule_file(f.path());
    let event = serde_json::json!({"type": "handoff.completed", "source": "thoth",
        "target": "hephaestus", "workflow_id": "wf_x", "step": "research", "context": {}});
    let _ = first_match(&rules, &event);
    if let Ok(v) = parse_bounded(data, BUDGET) {
        assert!(nodes(&v) <= BUDGET, "a parse built more nodes than its budget");
        let _ = WorkflowDef::from_value(&v, f.path());
    }
});
