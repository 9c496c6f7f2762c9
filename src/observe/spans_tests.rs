use serde_json::json;

use super::*;

fn state() -> WorkflowState {
    crate::engine::model_from_value(json!({
        "workflow_id": "wf_a", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "status": "in_progress",
        "step_history": [
            {"step_id": "research", "god": "thoth", "status": "completed",
             "completed_at": "2026-06-14T10:00:00Z", "handoff_id": "hof_20260614_aaa",
             "summary": "secret summary",
             "routed": {"status": "dispatched", "target_god": "hephaestus", "target_step": "build"}},
            {"step_id": "build", "god": "hephaestus", "status": "completed",
             "completed_at": "2026-06-14T10:05:00Z", "handoff_id": "hof_20260614_bbb",
             "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01",
             "routed": {"status": "completed"}}
        ],
        "acks": [
            {"ack_id": "ack_20260614_x1", "handoff_id": "hof_20260614_aaa", "status": "accepted",
             "acked_at": "2026-06-14T10:01:00Z", "god": "hephaestus", "by": "hephaestus",
             "message": "secret message"},
            {"ack_id": "ack_20260614_x2", "handoff_id": "hof_20260614_aaa", "status": "completed",
             "acked_at": "2026-06-14T10:05:00Z", "god": "hephaestus", "by": "hephaestus",
             "traceparent": "00-0000000000000000000000000000000a-2222222222222222-01"}
        ]
    }))
    .unwrap()
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:?}"))
}

#[test]
fn a_workflow_is_one_trace_with_its_parent_links() {
    let st = state();
    let (spans, cursor) = spans_since(&st, Cursor::default(), None);
    assert_eq!(cursor, Cursor { steps: 2, acks: 2 });
    let trace = trace_of(st.trace_id.as_deref(), &st.workflow_id);
    assert!(spans.iter().all(|s| s.trace_id == trace));
    let submit = named(&spans, "submit research");
    assert_eq!(submit.parent, None, "the first submit is the root");
    assert_eq!(submit.span_id, span_id("submit", "hof_20260614_aaa"));
    let dispatch = named(&spans, "dispatch build");
    assert_eq!(dispatch.parent, Some(submit.span_id));
    assert_eq!(dispatch.span_id, span_id("dispatch", "hof_20260614_aaa"));
    assert_eq!(
        dispatch.end_nanos - dispatch.start_nanos,
        60_000_000_000,
        "it waits from the submit to the first ack"
    );
    let accepted = named(&spans, "ack accepted");
    assert_eq!(accepted.parent, Some(dispatch.span_id));
    // An ack naming a span of another trace is linked to it, not parented.
    let completed = named(&spans, "ack completed");
    assert_eq!(completed.parent, Some(dispatch.span_id));
    assert_eq!(completed.links.len(), 1);
    let step = named(&spans, "step build");
    assert_eq!(step.end_nanos - step.start_nanos, 300_000_000_000);
    // The second submit's handoff named its parent.
    assert_eq!(
        named(&spans, "submit build").parent,
        Some([0x11; 8]),
        "the handoff's traceparent is the parent"
    );
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.name.starts_with("dispatch"))
            .count(),
        1
    );
    // No free text in any attribute.
    for s in &spans {
        for (_, v) in &s.attributes {
            assert!(!format!("{v:?}").contains("secret"), "{s:?}");
        }
    }
}

#[test]
fn only_new_records_become_spans_and_old_ones_are_passed_over() {
    let st = state();
    let (again, _) = spans_since(&st, Cursor { steps: 2, acks: 2 }, None);
    assert!(again.is_empty());
    let (one, _) = spans_since(&st, Cursor { steps: 2, acks: 1 }, None);
    let names: Vec<&str> = one.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ack completed", "step build"]);
    let late = parse_ts("2026-06-14T10:02:00Z");
    let (after, _) = spans_since(&st, Cursor::default(), late);
    let names: Vec<&str> = after.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["submit build", "ack completed", "step build"]);
    // A rewritten, shorter history starts over from its end.
    let (none, c) = spans_since(&st, Cursor { steps: 9, acks: 9 }, None);
    assert!(none.is_empty());
    assert_eq!(c, Cursor { steps: 2, acks: 2 });
}
