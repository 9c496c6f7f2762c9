//! Every tool, called with good and with bad arguments through both official MCP client SDKs
//! (TypeScript `@modelcontextprotocol/sdk`, whose `Client.callTool` checks any structured content
//! against the tool's `outputSchema`, error results included; and Python `mcp`), on a fresh root
//! and on a busy one. Every good answer must validate against the tool's declared schema (checked
//! by each SDK itself, and again by `jsonschema` in `session.py`), and every refusal must reach the
//! client as text naming the problem: a refusal whose structure broke the schema reached
//! TypeScript hosts as the SDK's own `-32602` "does not match the tool's output schema" instead.

use serde_json::{Value, json};

use crate::harness::*;

const TRACK: &str = "seams";
const DIRECTORS: [&str; 5] = ["CA", "CPO", "CSO", "COO", "CXO"];

/// What a step must answer.
enum Expect {
    /// A success that validates against the tool's `outputSchema`.
    Ok,
    /// A refusal whose text contains every one of these (the problem, named).
    Refused(&'static [&'static str]),
}

use Expect::{Ok as Good, Refused as Bad};

/// Runs `cases` in one session of `sdk` and returns every way an answer broke its contract.
fn check(root: &TestRoot, sdk: Sdk, label: &str, cases: &[(Value, Expect)]) -> Vec<String> {
    let steps: Vec<Value> = cases.iter().map(|(s, _)| s.clone()).collect();
    let report = root.session_with(sdk, &steps);
    let mut problems = Vec::new();
    for (i, ((step, expect), result)) in cases.iter().zip(&report.results).enumerate() {
        let tool = step["tool"].as_str().unwrap_or("?");
        let at = format!("{sdk:?} {label} #{i} {tool} {}", step["arguments"]);
        if result["schema_errors"] != json!([]) {
            problems.push(format!(
                "{at}: the answer breaks the outputSchema: {}",
                result["schema_errors"]
            ));
            continue;
        }
        match expect {
            Good if result["is_error"] != json!(false) => {
                problems.push(format!("{at}: expected success, got {result}"))
            }
            Good if !result["structured"].is_object() => {
                problems.push(format!("{at}: no structured content: {result}"))
            }
            Good => {}
            Bad(_) if result["is_error"] != json!(true) => {
                problems.push(format!("{at}: expected a refusal, got {result}"))
            }
            Bad(words) => {
                let text = result["text"].as_str().unwrap_or("");
                if !result["structured"].is_null() {
                    problems.push(format!(
                        "{at}: a refusal carries structured content: {result}"
                    ));
                }
                if !result["refusal"]["kind"].is_string() {
                    problems.push(format!("{at}: no refusal kind in _meta: {result}"));
                }
                for w in *words {
                    if !text.contains(w) {
                        problems.push(format!("{at}: the refusal does not name {w:?}: {text:?}"));
                    }
                }
            }
        }
    }
    problems
}

/// Every tool refused once for a bad argument type (checked against the input schema) and once
/// by the engine, each naming what is wrong. On a fresh root nothing exists yet.
fn refusals() -> Vec<(Value, Expect)> {
    let t = TRACK;
    vec![
        // The Conductor.
        (
            call("submit_handoff", json!({"handoff": "not an object"})),
            Bad(&["/handoff"]),
        ),
        (
            call(
                "submit_handoff",
                json!({"handoff": {"handoff_id": handoff_id(1), "workflow_id": "wf_bad",
                                   "to_god": "marvin", "step": "review",
                                   "context": {"summary": "s", "decisions": [], "artifacts": []}}}),
            ),
            Bad(&["from_god"]),
        ),
        (
            call("check_inbox", json!({"god_name": 7})),
            Bad(&["/god_name"]),
        ),
        (
            call("check_inbox", json!({"god_name": "../etc"})),
            Bad(&["god", "../etc"]),
        ),
        (
            call(
                "check_inbox",
                json!({"god_name": "marvin", "cursor": "bogus"}),
            ),
            Bad(&["cursor", "bogus"]),
        ),
        (
            call("get_dispatch", json!({"god_name": "marvin"})),
            Bad(&["handoff_id"]),
        ),
        (
            call(
                "get_dispatch",
                json!({"god_name": "marvin", "handoff_id": handoff_id(0xdead)}),
            ),
            Bad(&["hof_20260614_00dead"]),
        ),
        (call("ack_handoff", json!({"ack": []})), Bad(&["/ack"])),
        (
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(1), "handoff_id": handoff_id(0xdead), "status": "maybe"}}),
            ),
            Bad(&["status"]),
        ),
        (
            call("get_workflow_state", json!({"workflow_id": true})),
            Bad(&["/workflow_id"]),
        ),
        (
            call("get_workflow_state", json!({"workflow_id": "wf_nowhere"})),
            Bad(&["wf_nowhere"]),
        ),
        (call("list_pending", json!({"limit": 0})), Bad(&["/limit"])),
        (
            call("list_pending", json!({"cursor": "00"})),
            Bad(&["cursor"]),
        ),
        (call("list_rules", json!({"all": true})), Bad(&["\"all\""])),
        (
            call("list_workflows", json!({"verbose": 1})),
            Bad(&["\"verbose\""]),
        ),
        (
            call("abort_workflow", json!({"workflow_id": "wf_nowhere"})),
            Bad(&["reason"]),
        ),
        (
            call(
                "abort_workflow",
                json!({"workflow_id": "wf_nowhere", "reason": "test"}),
            ),
            Bad(&["wf_nowhere"]),
        ),
        (
            call(
                "cleanup",
                json!({"workflow_id": "wf_nowhere", "dry_run": "yes"}),
            ),
            Bad(&["/dry_run"]),
        ),
        (
            call("cleanup", json!({"workflow_id": "wf_nowhere"})),
            Bad(&["wf_nowhere"]),
        ),
        // The operator's acts (an unbound server acts as the operator, as the CLI does).
        (
            call("approve_dispatch", json!({"handoff_id": 7})),
            Bad(&["/handoff_id"]),
        ),
        (
            call(
                "approve_dispatch",
                json!({"handoff_id": handoff_id(0xbeef)}),
            ),
            Bad(&["hof_20260614_00beef"]),
        ),
        (
            call(
                "approve_dispatch",
                json!({"handoff_id": handoff_id(0xbeef), "reject": true}),
            ),
            Bad(&["reason"]),
        ),
        (
            call("requeue_dead_letter", json!({"handoff_id": []})),
            Bad(&["/handoff_id"]),
        ),
        (
            call(
                "requeue_dead_letter",
                json!({"handoff_id": handoff_id(0xbeef)}),
            ),
            Bad(&["hof_20260614_00beef"]),
        ),
        (
            call(
                "requeue_dead_letter",
                json!({"handoff_id": handoff_id(0xbeef), "to": "nobody"}),
            ),
            Bad(&["nobody", "no inbox"]),
        ),
        // The bus.
        (
            call("post_message", json!({"track": t, "msg_type": "PROGRESS"})),
            Bad(&["source"]),
        ),
        (
            call(
                "post_message",
                json!({"track": t, "msg_type": "not-a-type", "source": "w1"}),
            ),
            Bad(&["not-a-type"]),
        ),
        (
            call(
                "post_message",
                json!({"track": "no_such_track", "msg_type": "PROGRESS", "source": "w1"}),
            ),
            Bad(&["no_such_track"]),
        ),
        (
            call("read_messages", json!({"track": t, "tail": -1})),
            Bad(&["/tail"]),
        ),
        (
            call("read_messages", json!({"track": t, "cursor": "x"})),
            Bad(&["cursor", "\"x\""]),
        ),
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": "w1", "ttl": 30}),
            ),
            Bad(&["/ttl"]),
        ),
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": "w1", "ttl": "forever"}),
            ),
            Bad(&["ttl", "forever"]),
        ),
        (
            call(
                "release_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": ["w1"]}),
            ),
            Bad(&["/worker_id"]),
        ),
        (
            call(
                "release_lock",
                json!({"track": t, "filepath": "src/unlocked.rs", "worker_id": "w1"}),
            ),
            Bad(&["src/unlocked.rs"]),
        ),
        (
            call(
                "update_worker_status",
                json!({"track": t, "worker_id": "w1", "task_id": "1", "status": "RUNNING",
                       "progress_pct": "half"}),
            ),
            Bad(&["/progress_pct"]),
        ),
        (
            call(
                "update_worker_status",
                json!({"track": t, "worker_id": "w1", "task_id": "1", "status": "SLEEPING"}),
            ),
            Bad(&["status", "SLEEPING"]),
        ),
        (
            call(
                "wait_for_event",
                json!({"track": t, "event_pattern": "X", "timeout": -1}),
            ),
            Bad(&["/timeout"]),
        ),
        (
            call(
                "wait_for_event",
                json!({"track": t, "event_pattern": "TASK_[1", "timeout": 0}),
            ),
            Bad(&["event_pattern", "TASK_[1"]),
        ),
        (call("detect_deadlocks", json!({})), Bad(&["track"])),
        (
            call("detect_deadlocks", json!({"track": "no_such_track"})),
            Bad(&["no_such_track"]),
        ),
        // The board (no session is open on a fresh track).
        (call("board_status", json!({"track": 1})), Bad(&["/track"])),
        (
            call("board_status", json!({"track": "no_such_track"})),
            Bad(&["no_such_track"]),
        ),
        (
            call(
                "board_open",
                json!({"track": t, "checkpoint": "EVALUATE_PLAN", "proposal": "p", "max_rounds": 0}),
            ),
            Bad(&["/max_rounds"]),
        ),
        (
            call(
                "board_open",
                json!({"track": t, "checkpoint": "WHENEVER", "proposal": "p"}),
            ),
            Bad(&["checkpoint", "WHENEVER"]),
        ),
        (
            call(
                "board_assess",
                json!({"track": t, "director": "CA", "verdict": "APPROVE", "score": "high"}),
            ),
            Bad(&["/score"]),
        ),
        (
            call(
                "board_assess",
                json!({"track": t, "director": "CA", "verdict": "MAYBE", "score": 5}),
            ),
            Bad(&["MAYBE"]),
        ),
        (
            call(
                "board_discuss",
                json!({"track": t, "from": "CA", "to": "ALL", "msg_type": "AGREE"}),
            ),
            Bad(&["message"]),
        ),
        (
            call(
                "board_discuss",
                json!({"track": t, "from": "CA", "to": "ALL", "msg_type": "SHOUT", "message": "m"}),
            ),
            Bad(&["SHOUT"]),
        ),
        (
            call("board_next_round", json!({"track": t, "source": 5})),
            Bad(&["/source"]),
        ),
        (
            call("board_next_round", json!({"track": t})),
            Bad(&["session"]),
        ),
        (
            call(
                "board_vote",
                json!({"track": t, "director": "CA", "final_verdict": "APPROVE"}),
            ),
            Bad(&["confidence"]),
        ),
        (
            call(
                "board_vote",
                json!({"track": t, "director": "CA", "final_verdict": "MAYBE", "confidence": 0.5}),
            ),
            Bad(&["MAYBE"]),
        ),
        (
            call("board_advance", json!({"track": t, "force": "yes"})),
            Bad(&["/force"]),
        ),
        (
            call("board_advance", json!({"track": t})),
            Bad(&["session"]),
        ),
        (
            call("board_resolve", json!({"track": t, "force": 1})),
            Bad(&["/force"]),
        ),
        (
            call("board_resolve", json!({"track": t})),
            Bad(&["session"]),
        ),
    ]
}

/// The read-only tools on a root where nothing has happened yet (an initialised root and a
/// track's empty bus): empty inboxes, no board session, no messages, no workers.
fn fresh_reads() -> Vec<(Value, Expect)> {
    let t = TRACK;
    vec![
        (call("check_inbox", json!({"god_name": "marvin"})), Good),
        (call("check_inbox", json!({"god_name": "nobody"})), Good),
        (
            call(
                "check_inbox",
                json!({"god_name": "marvin", "compact": true}),
            ),
            Good,
        ),
        (call("list_pending", json!({})), Good),
        (call("list_rules", json!({})), Good),
        (call("list_workflows", json!({})), Good),
        (call("read_messages", json!({"track": t})), Good),
        (call("read_messages", json!({"track": t, "tail": 5})), Good),
        (call("detect_deadlocks", json!({"track": t})), Good),
        (call("board_status", json!({"track": t})), Good),
        (
            call(
                "wait_for_event",
                json!({"track": t, "event_pattern": "TASK_COMPLETE_*", "timeout": 0}),
            ),
            Good,
        ),
    ]
}

/// Every tool succeeding, on a root that fills up as the steps go: workflows in flight and done,
/// dispatches pending, acked, rejected and completed, locks taken and contested, a deadlock, and a
/// board session through every phase. The read-only tools are called again at each stage.
fn busy_sequence() -> Vec<(Value, Expect)> {
    let t = TRACK;
    let submit = |n: u32, wf: &str, from: &str, to: &str, step: &str, gates: &[&str]| {
        call(
            "submit_handoff",
            json!({"handoff": handoff(&handoff_id(n), wf, from, to, step, gates)}),
        )
    };
    let ack = |n: u32, h: u32, status: &str| {
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(n), "handoff_id": handoff_id(h), "status": status,
                           "message": format!("{status} by test")}}),
        )
    };
    let reads = || {
        vec![
            (call("check_inbox", json!({"god_name": "hephaestus"})), Good),
            (
                call(
                    "check_inbox",
                    json!({"god_name": "hephaestus", "compact": true, "limit": 2}),
                ),
                Good,
            ),
            (call("check_inbox", json!({"god_name": "marvin"})), Good),
            (call("list_pending", json!({"limit": 2})), Good),
            (call("read_messages", json!({"track": t, "limit": 2})), Good),
            (call("detect_deadlocks", json!({"track": t})), Good),
            (call("board_status", json!({"track": t})), Good),
        ]
    };
    let mut s = vec![
        (
            submit(0x100, "wf_busy_1", "thoth", "hephaestus", "research", &[]),
            Good,
        ),
        (
            submit(0x100, "wf_busy_1", "thoth", "hephaestus", "research", &[]),
            Good,
        ), // duplicate
        (
            submit(0x200, "wf_busy_2", "thoth", "hephaestus", "research", &[]),
            Good,
        ),
        (
            submit(0x300, "wf_busy_3", "thoth", "hephaestus", "research", &[]),
            Good,
        ),
        (
            call(
                "get_dispatch",
                json!({"god_name": "hephaestus", "handoff_id": handoff_id(0x100)}),
            ),
            Good,
        ),
        (ack(0x100, 0x100, "pending"), Good),
        (ack(0x101, 0x100, "accepted"), Good),
        (ack(0x101, 0x100, "accepted"), Good), // duplicate
        (ack(0x200, 0x200, "rejected"), Good),
        (
            call("get_workflow_state", json!({"workflow_id": "wf_busy_1"})),
            Good,
        ),
        (
            call("get_workflow_state", json!({"workflow_id": "wf_busy_2"})),
            Good,
        ),
        (
            submit(
                0x110,
                "wf_busy_1",
                "hephaestus",
                "marvin",
                "implement",
                &["logic_gate"],
            ),
            Good,
        ),
        (ack(0x110, 0x110, "completed"), Good),
        (
            call("get_workflow_state", json!({"workflow_id": "wf_busy_1"})),
            Good,
        ),
        (
            call(
                "abort_workflow",
                json!({"workflow_id": "wf_busy_3", "reason": "busy test", "by": "thoth"}),
            ),
            Good,
        ),
        (
            call(
                "abort_workflow",
                json!({"workflow_id": "wf_busy_3", "reason": "busy test", "by": "thoth"}),
            ),
            Good,
        ),
        (
            call(
                "cleanup",
                json!({"workflow_id": "wf_busy_3", "dry_run": true}),
            ),
            Good,
        ),
        (call("cleanup", json!({"workflow_id": "wf_busy_3"})), Good),
        // The operator's acts on the items `fresh_root` made: an approval (and its repeat), a
        // rejection, a requeue and a requeue to another god.
        (
            call("approve_dispatch", json!({"handoff_id": held_id(0)})),
            Good,
        ),
        (
            call("approve_dispatch", json!({"handoff_id": held_id(0)})),
            Good,
        ),
        (
            call(
                "approve_dispatch",
                json!({"handoff_id": held_id(1), "reject": true, "reason": "not now"}),
            ),
            Good,
        ),
        (
            call("requeue_dead_letter", json!({"handoff_id": dead_id(0)})),
            Good,
        ),
        (
            call(
                "requeue_dead_letter",
                json!({"handoff_id": dead_id(1), "to": "hephaestus"}),
            ),
            Good,
        ),
        (call("cleanup", json!({"workflow_id": "wf_busy_1"})), Good),
        (call("list_rules", json!({})), Good),
        (call("list_workflows", json!({})), Good),
        // The bus: locks held, taken over, contested, released; a deadlock between two workers.
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": "w1", "ttl": "5m"}),
            ),
            Good,
        ),
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": "w1", "lock_type": "exclusive"}),
            ),
            Good,
        ),
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/b.rs", "worker_id": "w2"}),
            ),
            Good,
        ),
        (
            call(
                "acquire_lock",
                json!({"track": t, "filepath": "src/a.rs", "worker_id": "w2"}),
            ),
            Bad(&["src/a.rs", "w1"]),
        ),
        (
            call(
                "post_message",
                json!({"track": t, "msg_type": "BLOCKED", "source": "w1",
                       "payload": {"task_id": "1", "waiting_for": "FILE_UNLOCK_src/b.rs", "resource": "src/b.rs"}}),
            ),
            Good,
        ),
        (
            call(
                "post_message",
                json!({"track": t, "msg_type": "BLOCKED", "source": "w2",
                       "payload": {"task_id": "2", "waiting_for": "file_lock", "resource": "src/a.rs"}}),
            ),
            Good,
        ),
        (
            call(
                "update_worker_status",
                json!({"track": t, "worker_id": "w1", "task_id": "1", "status": "BLOCKED"}),
            ),
            Good,
        ),
        (
            call(
                "update_worker_status",
                json!({"track": t, "worker_id": "w2", "task_id": "2", "status": "RUNNING",
                       "progress_pct": 40.5, "current_subtask": "parsing"}),
            ),
            Good,
        ),
    ];
    s.extend(reads());
    s.extend([
        (
            call(
                "release_lock",
                json!({"track": t, "filepath": "src/b.rs", "worker_id": "w2"}),
            ),
            Good,
        ),
        (
            call(
                "post_message",
                json!({"track": t, "msg_type": "TASK_COMPLETE", "source": "w2",
                       "payload": {"task_id": "2", "files_modified": ["src/b.rs"]}}),
            ),
            Good,
        ),
        (
            call(
                "wait_for_event",
                json!({"track": t, "event_pattern": "TASK_COMPLETE_*", "timeout": 5}),
            ),
            Good,
        ),
        (
            call(
                "read_messages",
                json!({"track": t, "msg_type": "BLOCKED", "source": "w1", "since": "2020-01-01T00:00:00Z"}),
            ),
            Good,
        ),
        // The board, phase by phase, with status read between phases.
        (
            call(
                "board_open",
                json!({"track": t, "checkpoint": "EVALUATE_PLAN", "proposal": "{\"ship\": true}",
                       "max_rounds": 2, "source": "thoth"}),
            ),
            Good,
        ),
        (call("board_status", json!({"track": t})), Good),
    ]);
    for (i, d) in DIRECTORS.iter().enumerate() {
        s.push((
            call(
                "board_assess",
                json!({"track": t, "director": d, "verdict": if i == 0 {"CONCERNS"} else {"APPROVE"},
                       "score": 7, "concerns": ["c"], "recommendations": ["r"], "key_points": ["k"],
                       "blocking": false, "extra": {"risk": "low"}}),
            ),
            Good,
        ));
        if i == 2 {
            s.push((call("board_status", json!({"track": t})), Good));
        }
    }
    s.extend([
        (call("board_advance", json!({"track": t})), Good),
        (
            call(
                "board_discuss",
                json!({"track": t, "from": "CA", "to": "CPO", "msg_type": "CHALLENGE",
                       "message": "why?", "changes_my_verdict": true}),
            ),
            Good,
        ),
        (call("board_status", json!({"track": t})), Good),
        (call("board_next_round", json!({"track": t})), Good),
        (
            call("board_advance", json!({"track": t, "force": true})),
            Good,
        ),
    ]);
    for (i, d) in DIRECTORS.iter().enumerate() {
        s.push((
            call(
                "board_vote",
                json!({"track": t, "director": d, "final_verdict": "APPROVE", "confidence": 0.8,
                       "conditions": ["tests pass"]}),
            ),
            Good,
        ));
        if i == 3 {
            s.push((call("board_status", json!({"track": t})), Good));
        }
    }
    s.extend([
        (call("board_resolve", json!({"track": t})), Good),
        (call("board_status", json!({"track": t})), Good),
        (
            call(
                "board_open",
                json!({"track": t, "checkpoint": "QUICK_REVIEW", "proposal": "small fix",
                       "directors": ["CA", "CSO"]}),
            ),
            Good,
        ),
        (call("board_status", json!({"track": t})), Good),
        (
            call("board_resolve", json!({"track": t, "force": true})),
            Good,
        ),
    ]);
    s.extend(reads());
    s
}

fn fresh_root() -> TestRoot {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    root.init_track(TRACK);
    root.operator_items(2);
    root
}

/// The tools each case list calls, to prove every tool is covered.
fn tools_of(cases: &[(Value, Expect)], good: bool) -> Vec<String> {
    let mut tools: Vec<String> = cases
        .iter()
        .filter(|(_, e)| matches!(e, Good) == good)
        .map(|(s, _)| s["tool"].as_str().unwrap().to_owned())
        .collect();
    tools.sort();
    tools.dedup();
    tools
}

#[test]
fn the_cases_cover_every_tool_good_and_bad() {
    let mut good = tools_of(&busy_sequence(), true);
    good.extend(tools_of(&fresh_reads(), true));
    good.sort();
    good.dedup();
    assert_eq!(good, ALL_TOOLS, "every tool answers at least once");
    assert_eq!(
        tools_of(&refusals(), false),
        ALL_TOOLS,
        "every tool is refused at least once"
    );
}

/// Each SDK on its own fresh root: the fresh reads and every refusal, then the busy sequence, then
/// every refusal again on the busy root.
fn every_tool_through(sdk: Sdk) {
    let root = fresh_root();
    let mut problems = check(&root, sdk, "fresh", &fresh_reads());
    problems.extend(check(&root, sdk, "fresh", &refusals()));
    problems.extend(check(&root, sdk, "busy", &busy_sequence()));
    let mut again = refusals();
    // On the busy root a board session is resolved rather than missing: its acts are refused
    // for that, which each names.
    for (step, expect) in &mut again {
        if matches!(
            step["tool"].as_str(),
            Some("board_next_round" | "board_advance" | "board_resolve")
        ) && matches!(expect, Bad(w) if w == &["session"])
        {
            *expect = Bad(&[]);
        }
    }
    problems.extend(check(&root, sdk, "busy", &again));
    assert!(
        problems.is_empty(),
        "{} problem(s) through the {sdk:?} SDK:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_tool_good_and_bad_through_the_typescript_sdk() {
    every_tool_through(Sdk::TypeScript);
}

#[test]
fn every_tool_good_and_bad_through_the_python_sdk() {
    every_tool_through(Sdk::Python);
}

/// A paging cursor continues only the listing that gave it: another god's inbox, `list_pending`,
/// another track's `read_messages` and another tool refuse it, saying whose it is (an inbox cursor
/// used to be taken by another god's inbox and by `list_pending`, which answered an empty last page,
/// so the client believed it had everything).
#[test]
fn a_cursor_is_refused_by_any_other_listing_through_both_sdks() {
    let root = TestRoot::new();
    for track in ["t", "u"] {
        root.init_track(track);
        for _ in 0..3 {
            root.cli_json(&[
                "bus", "--track", track, "post", "PROGRESS", "--source", "w1",
            ]);
        }
    }
    for god in ["marvin", "thoth"] {
        for n in 0..3u32 {
            let id = handoff_id(if god == "marvin" { 0x900 } else { 0xa00 } + n);
            root.write(
                &format!("conductor/pending/{god}/{id}.json"),
                &json!({"handoff_id": id, "workflow_id": format!("wf_cursor_{god}_{n}"),
                        "from_god": "hermes", "to_god": god, "step": "review",
                        "context": {"summary": "s", "decisions": [], "artifacts": []},
                        "dispatched_at": format!("2026-06-14T10:00:0{n}Z"), "ack_status": "unacked"})
                .to_string(),
            );
        }
    }
    for sdk in BOTH_SDKS {
        let first = root.session_with(
            sdk,
            &[
                call("check_inbox", json!({"god_name": "marvin", "limit": 1})),
                call("list_pending", json!({"limit": 1})),
                call("read_messages", json!({"track": "t", "limit": 1})),
            ],
        );
        let read_cursor = ok(&first.results[2])["next_cursor"].clone();
        let inbox_cursor = ok(&first.results[0])["next_cursor"].clone();
        let pending_cursor = ok(&first.results[1])["next_cursor"].clone();
        assert!(inbox_cursor.is_string() && pending_cursor.is_string());
        let r = root.session_with(
            sdk,
            &[
                call(
                    "check_inbox",
                    json!({"god_name": "marvin", "limit": 1, "cursor": inbox_cursor}),
                ),
                call(
                    "check_inbox",
                    json!({"god_name": "marvin", "compact": true, "limit": 1, "cursor": inbox_cursor}),
                ),
                call(
                    "check_inbox",
                    json!({"god_name": "thoth", "limit": 1, "cursor": inbox_cursor}),
                ),
                call("list_pending", json!({"limit": 1, "cursor": inbox_cursor})),
                call(
                    "check_inbox",
                    json!({"god_name": "marvin", "cursor": pending_cursor}),
                ),
                call("read_messages", json!({"track": "t", "cursor": inbox_cursor})),
                call("read_messages", json!({"track": "t", "cursor": read_cursor})),
                call("read_messages", json!({"track": "u", "cursor": read_cursor})),
                call("check_inbox", json!({"god_name": "marvin", "cursor": read_cursor})),
            ],
        );
        assert_eq!(
            ok(&r.results[0])["dispatches"][0]["handoff_id"],
            json!(handoff_id(0x901)),
            "{sdk:?}: the cursor continues its own listing"
        );
        assert_eq!(
            ok(&r.results[1])["dispatches"][0]["handoff_id"],
            json!(handoff_id(0x901)),
            "{sdk:?}: compact or not, the same listing"
        );
        let other_god = refused(&r.results[2]);
        assert!(
            other_god.contains("given out by check_inbox for \"marvin\"")
                && other_god.contains("not by check_inbox for \"thoth\""),
            "{sdk:?}: {other_god}"
        );
        let pending = refused(&r.results[3]);
        assert!(
            pending.contains("given out by check_inbox for \"marvin\"")
                && pending.contains("not by list_pending"),
            "{sdk:?}: {pending}"
        );
        let inbox = refused(&r.results[4]);
        assert!(
            inbox.contains("given out by list_pending"),
            "{sdk:?}: {inbox}"
        );
        let not_a_read = refused(&r.results[5]);
        assert!(
            not_a_read.contains("not one this reader gave"),
            "{sdk:?}: {not_a_read}"
        );
        assert_eq!(
            ok(&r.results[6])["messages"].as_array().map(Vec::len),
            Some(2),
            "{sdk:?}: the read cursor continues its own track"
        );
        let other_track = refused(&r.results[7]);
        assert!(
            other_track.contains("given out by a read of track \"t\", not of track \"u\""),
            "{sdk:?}: {other_track}"
        );
        let not_an_inbox = refused(&r.results[8]);
        assert!(
            not_an_inbox.contains("not one this listing gave"),
            "{sdk:?}: {not_an_inbox}"
        );
    }
}

/// A root as Python gods and other engines leave it (the foreign-root fixture: quirky dispatches,
/// states with missing fields, a track with a board and a queue written by others): every read
/// answer fits its schema through both SDKs.
#[test]
fn a_foreign_root_reads_fit_through_both_sdks() {
    let root = TestRoot::foreign();
    let t = "stripe-checkout_20260201";
    let mut cases: Vec<(Value, Expect)> = Vec::new();
    for god in ["hephaestus", "marvin", "thoth", "iris"] {
        cases.push((call("check_inbox", json!({"god_name": god})), Good));
        cases.push((
            call("check_inbox", json!({"god_name": god, "compact": true})),
            Good,
        ));
    }
    for wf in ["wf_1a2b3c4d", "wf_bug_7", "wf_deploy_42", "wf_old_3"] {
        cases.push((call("get_workflow_state", json!({"workflow_id": wf})), Good));
    }
    cases.extend([
        (call("list_pending", json!({})), Good),
        (call("list_workflows", json!({})), Good),
        (call("list_rules", json!({})), Good),
        (call("read_messages", json!({"track": t})), Good),
        (call("read_messages", json!({"track": t, "tail": 3})), Good),
        (call("board_status", json!({"track": t})), Good),
        (call("detect_deadlocks", json!({"track": t})), Good),
        (
            call(
                "update_worker_status",
                json!({"track": t, "worker_id": "worker-9", "task_id": "9", "status": "RUNNING"}),
            ),
            Good,
        ),
    ]);
    for sdk in BOTH_SDKS {
        let problems = check(&root, sdk, "foreign", &cases);
        assert!(
            problems.is_empty(),
            "{} problem(s) through the {sdk:?} SDK:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
}
