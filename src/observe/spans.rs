//! The spans of a workflow, read from what its state file records (docs/OBSERVABILITY.md, "Traces"):
//! every act journaled in a state by any process (the CLI, MCP, `serve`, a god's own engine, the
//! bridge) becomes a span, whoever did it.
//!
//! | span | when | parent |
//! |---|---|---|
//! | `submit STEP` | a step record (a handoff submitted, or recorded by a `completed` ack) | the handoff's `traceparent` (a `completed` ack's handoff: the ack's span), else the dispatch it answers |
//! | `dispatch STEP` | from the dispatch written to its first ack | its submit |
//! | `ack STATUS` | an ack record | the ack's `traceparent` (the god's span), else its dispatch |
//! | `step STEP` | from the dispatch written to its `completed` or `rejected` ack | its submit |
//! | `publish SUBJECT` | a `nats_publish` step sent to the outbox | the submit before it |
//!
//! Redeliveries, dead letters and a god's own `pending` write show in the inboxes, not the state:
//! [`super::inbox_spans`].
//!
//! Span ids come from the records ([`crate::engine::span_id`]), so the engine's
//! `traceparent` on a dispatch names the same span this module exports. No summary, message,
//! context or payload text goes into an attribute: ids, step and god names and closed words only.

use chrono::{DateTime, Utc};

use crate::engine::{StepRecord, TraceContext, WorkflowState, span_id, time::parse_ts, trace_of};

use super::otlp::{AttrValue, SpanData, SpanKind};

/// How far a workflow's records were turned into spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub steps: usize,
    pub acks: usize,
}

pub(super) fn nanos(t: Option<&str>) -> Option<(DateTime<Utc>, u64)> {
    let t = t.and_then(parse_ts)?;
    let n = t.timestamp_nanos_opt()?;
    Some((t, u64::try_from(n).ok()?))
}

pub(super) fn s(v: &str) -> AttrValue {
    AttrValue::Str(v.to_owned())
}

/// A span in some trace: (trace id, span id).
type SpanRef = ([u8; 16], [u8; 8]);

/// The parent (same trace) or link (another trace) a record's `traceparent` gives.
fn from_traceparent(tp: Option<&str>, trace: &[u8; 16]) -> (Option<[u8; 8]>, Vec<SpanRef>) {
    match tp.and_then(TraceContext::parse) {
        Some(c) if &c.trace_id == trace => (Some(c.span_id), vec![]),
        Some(c) => (None, vec![(c.trace_id, c.span_id)]),
        None => (None, vec![]),
    }
}

fn dispatched(r: &StepRecord) -> bool {
    r.routed.as_ref().is_some_and(|x| {
        matches!(
            x.status.as_str(),
            "dispatched" | "awaiting_approval" | "duplicate"
        )
    })
}

pub(super) struct Ctx<'a> {
    pub st: &'a WorkflowState,
    pub trace: [u8; 16],
    pub not_before: Option<DateTime<Utc>>,
}

impl Ctx<'_> {
    pub(super) fn base(&self, name: String, kind: SpanKind, id: [u8; 8], at: u64) -> SpanData {
        let mut attributes = vec![("pantheon.workflow_id", s(&self.st.workflow_id))];
        if let Some(d) = &self.st.definition_id {
            attributes.push(("pantheon.definition", s(d)));
        }
        SpanData {
            trace_id: self.trace,
            span_id: id,
            parent: None,
            name,
            kind,
            start_nanos: at,
            end_nanos: at,
            attributes,
            links: vec![],
        }
    }

    fn too_old(&self, t: DateTime<Utc>) -> bool {
        self.not_before.is_some_and(|nb| t < nb)
    }

    fn step_span(&self, i: usize, out: &mut Vec<SpanData>) {
        let r = &self.st.step_history[i];
        let (Some(hid), Some((t, at))) = (&r.handoff_id, nanos(r.completed_at.as_deref())) else {
            return;
        };
        if self.too_old(t) {
            return;
        }
        let prev = i
            .checked_sub(1)
            .and_then(|p| self.st.step_history.get(p))
            .and_then(|p| Some((p, p.handoff_id.as_deref()?)));
        if let Some(outbox) = r.extra.get("outbox_id").and_then(|v| v.as_str()) {
            let subject = r.extra.get("subject").and_then(|v| v.as_str());
            let mut sp = self.base(
                format!("publish {}", subject.unwrap_or(&r.step_id)),
                SpanKind::Producer,
                span_id("publish", outbox),
                at,
            );
            sp.parent = prev.map(|(_, h)| span_id("submit", h));
            sp.attributes.push(("pantheon.step", s(&r.step_id)));
            sp.attributes.push(("pantheon.outbox_id", s(outbox)));
            if let Some(subj) = subject {
                sp.attributes.push(("messaging.destination.name", s(subj)));
            }
            out.push(sp);
            return;
        }
        let mut sp = self.base(
            format!("submit {}", r.step_id),
            SpanKind::Server,
            span_id("submit", hid),
            at,
        );
        let (parent, links) = from_traceparent(r.traceparent.as_deref(), &self.trace);
        sp.parent = parent.or_else(|| {
            prev.map(|(p, h)| span_id(if dispatched(p) { "dispatch" } else { "submit" }, h))
        });
        sp.links = links;
        sp.attributes.extend([
            ("pantheon.handoff_id", s(hid)),
            ("pantheon.step", s(&r.step_id)),
            ("pantheon.god", s(&r.god)),
        ]);
        if let Some(routed) = &r.routed {
            sp.attributes
                .push(("pantheon.outcome", s(routed.status.as_str())));
            if let Some(g) = &routed.target_god {
                sp.attributes.push(("pantheon.target_god", s(g)));
            }
            if let Some(st) = &routed.target_step {
                sp.attributes.push(("pantheon.target_step", s(st)));
            }
        }
        out.push(sp);
    }

    fn ack_spans(&self, j: usize, out: &mut Vec<SpanData>) {
        let a = &self.st.acks[j];
        let Some((t, at)) = nanos(a.acked_at.as_deref()) else {
            return;
        };
        if self.too_old(t) || a.ack_id.is_empty() || a.handoff_id.is_empty() {
            return;
        }
        let hid = a.handoff_id.as_str();
        let status = a.status.as_str();
        let mut sp = self.base(
            format!("ack {status}"),
            SpanKind::Server,
            span_id("ack", &a.ack_id),
            at,
        );
        let (parent, links) = from_traceparent(a.traceparent.as_deref(), &self.trace);
        sp.parent = parent.or(Some(span_id("dispatch", hid)));
        sp.links = links;
        sp.attributes.extend([
            ("pantheon.handoff_id", s(hid)),
            ("pantheon.ack_id", s(&a.ack_id)),
            ("pantheon.status", s(status)),
        ]);
        if let Some(g) = &a.god {
            sp.attributes.push(("pantheon.god", s(g)));
        }
        if let Some(b) = &a.by {
            sp.attributes.push((
                "pantheon.by",
                s(if b == "operator" { "operator" } else { "god" }),
            ));
        }
        out.push(sp);
        let earlier = &self.st.acks[..j];
        let rec = self.st.record_of(hid);
        let start = rec
            .and_then(|r| nanos(r.completed_at.as_deref()))
            .map_or(at, |(_, n)| n);
        let step = rec
            .and_then(|r| r.routed.as_ref()?.target_step.clone())
            .unwrap_or_default();
        let waiting = |name: &str, kind: &str| {
            let mut sp = self.base(
                format!("{name} {step}"),
                SpanKind::Internal,
                span_id(kind, hid),
                start,
            );
            sp.end_nanos = at;
            sp.parent = Some(span_id("submit", hid));
            sp.attributes
                .extend([("pantheon.handoff_id", s(hid)), ("pantheon.step", s(&step))]);
            if let Some(g) = &a.god {
                sp.attributes.push(("pantheon.god", s(g)));
            }
            sp
        };
        if !earlier.iter().any(|e| e.handoff_id == hid) {
            let mut d = waiting("dispatch", "dispatch");
            d.attributes.push(("pantheon.first_ack", s(status)));
            out.push(d);
        }
        let ends = |x: &str| matches!(x, "completed" | "rejected");
        if ends(status)
            && !earlier
                .iter()
                .any(|e| e.handoff_id == hid && ends(e.status.as_str()))
        {
            let mut d = waiting("step", "step");
            d.attributes.push(("pantheon.status", s(status)));
            out.push(d);
        }
    }
}

/// The spans of the records `st` gained since `from` (a record older than `not_before` is passed
/// over: it happened before the exporter started), and the cursor after them.
pub(crate) fn spans_since(
    st: &WorkflowState,
    from: Cursor,
    not_before: Option<DateTime<Utc>>,
) -> (Vec<SpanData>, Cursor) {
    let ctx = Ctx {
        st,
        trace: trace_of(st.trace_id.as_deref(), &st.workflow_id),
        not_before,
    };
    let mut out = Vec::new();
    let (steps, acks) = (st.step_history.len(), st.acks.len());
    // A history shorter than the cursor was rewritten by someone: start over from its end.
    let from = if from.steps > steps || from.acks > acks {
        Cursor { steps, acks }
    } else {
        from
    };
    for i in from.steps..steps {
        ctx.step_span(i, &mut out);
    }
    for j in from.acks..acks {
        ctx.ack_spans(j, &mut out);
    }
    (out, Cursor { steps, acks })
}

/// A state file, through a bounded, no-follow read ([`super::span_watch::read_record`]); `None`
/// when it cannot be used (missing, a link, too large, torn, not a state).
pub(super) fn read_state(path: &std::path::Path) -> Option<WorkflowState> {
    let (bytes, _) = super::span_watch::read_record(path)?;
    parse_state(&bytes)
}

/// A state file's bytes as a state; `None` when they do not parse as one.
pub(super) fn parse_state(bytes: &[u8]) -> Option<WorkflowState> {
    parse_object(bytes)
}

/// A record file's bytes as `T`, straight from the bytes (no intermediate JSON tree); `None` unless
/// they hold one JSON object that parses as `T` (a list would fill a struct field by field).
pub(super) fn parse_object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    serde_json::from_slice::<T>(bytes).ok()
}

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;
