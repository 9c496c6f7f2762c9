//! The YAML loaders (workflow definitions and rules): any bytes, including alias bombs and deep
//! nesting, load to a definition or a reported error, never a panic or a hang.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use pantheon::engine::conductor::definition::{WorkflowDef, load_definition_file};
use pantheon::engine::conductor::rules::{first_match, load_rule_file};

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
    let _ = load_definition_file(f.path());
    let (rules, _errors) = load_rule_file(f.path());
    let event = serde_json::json!({"type": "handoff.completed", "source": "thoth",
        "target": "hephaestus", "workflow_id": "wf_x", "step": "research", "context": {}});
    let _ = first_match(&rules, &event);
    if let Ok(v) = serde_yaml::from_slice::<serde_json::Value>(data) {
        let _ = WorkflowDef::from_value(&v, f.path());
    }
});
