//! What a host sees when it connects: the server's name and the full tool list.

use serde_json::json;

use crate::harness::*;

#[test]
fn server_is_named_conductor_and_lists_every_protocol_tool() {
    let root = TestRoot::new();
    let report = root.session(&[list_tools()]);
    assert_eq!(report.server["name"], json!("conductor"));
    assert_eq!(report.server["tools_capability"], json!(true));

    let tools = report.results[0]["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names, ALL_TOOLS,
        "the tool set is exactly docs/PROTOCOL.md §5.2's list"
    );
    for name in &names {
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "tool name {name:?} must use [a-z_] only"
        );
    }
}

#[test]
fn every_tool_has_a_description_and_an_object_input_schema() {
    let root = TestRoot::new();
    let report = root.session(&[list_tools()]);
    for tool in report.results[0]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let description = tool["description"].as_str().unwrap_or("");
        assert!(
            description.len() > 40,
            "{name} needs a description a model can act on, got {description:?}"
        );
        assert_eq!(tool["input_schema"]["type"], json!("object"), "{name}");
    }
}

#[test]
fn arguments_are_named_as_in_the_seed() {
    let root = TestRoot::new();
    let report = root.session(&[list_tools()]);
    let tools = report.results[0]["tools"].as_array().unwrap();
    let schema = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == json!(name))
            .unwrap_or_else(|| panic!("no tool {name}"))["input_schema"]
            .clone()
    };
    let required = |name: &str| {
        let mut r: Vec<String> = schema(name)["required"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        r.sort();
        r
    };
    assert_eq!(required("submit_handoff"), ["handoff"]);
    assert_eq!(
        schema("submit_handoff")["properties"]["handoff"]["type"],
        json!("object")
    );
    assert_eq!(required("ack_handoff"), ["ack"]);
    assert_eq!(required("check_inbox"), ["god_name"]);
    assert_eq!(required("get_workflow_state"), ["workflow_id"]);
    assert_eq!(required("abort_workflow"), ["reason", "workflow_id"]);
    assert_eq!(required("cleanup"), ["workflow_id"]);
    assert!(schema("cleanup")["properties"]["dry_run"].is_object());
    for bus_tool in ALL_TOOLS.iter().filter(|t| {
        [
            "post_message",
            "read_messages",
            "acquire_lock",
            "release_lock",
            "update_worker_status",
            "wait_for_event",
            "detect_deadlocks",
        ]
        .contains(t)
            || t.starts_with("board_")
    }) {
        assert!(
            required(bus_tool).contains(&"track".to_string()),
            "{bus_tool} takes track"
        );
    }
}

#[test]
fn read_only_tools_are_annotated_and_release_lock_has_no_force() {
    let root = TestRoot::new();
    let report = root.session(&[list_tools()]);
    let tools = report.results[0]["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == json!(name))
            .unwrap()
            .clone()
    };
    for name in [
        "check_inbox",
        "get_workflow_state",
        "list_pending",
        "read_messages",
        "board_status",
    ] {
        assert_eq!(
            tool(name)["annotations"]["readOnlyHint"],
            json!(true),
            "{name}"
        );
    }
    assert_eq!(
        tool("abort_workflow")["annotations"]["destructiveHint"],
        json!(true)
    );
    // Force-releasing another worker's lock is an operator act: not on MCP.
    assert!(tool("release_lock")["input_schema"]["properties"]["force"].is_null());
}

#[test]
fn hosts_using_the_initialize_handshake_get_the_same_server() {
    let root = TestRoot::new();
    let report = root.start_session("legacy", &[list_tools()]).finish();
    assert_eq!(report.server["name"], json!("conductor"));
    assert_ne!(report.server["protocol_version"], json!("2026-07-28"));
    assert_eq!(
        report.results[0]["tools"].as_array().unwrap().len(),
        ALL_TOOLS.len()
    );
}
