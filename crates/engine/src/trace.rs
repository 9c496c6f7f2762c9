//! W3C trace context (`traceparent`) for workflows: each workflow is one trace (docs/OBSERVABILITY.md,
//! "Traces"; docs/PROTOCOL.md §2.13).
//!
//! The engine records, never exports: a workflow's trace id in its state (`trace_id`, taken from the
//! first handoff's `traceparent`, else a new random one), the `traceparent` a handoff or an ack
//! carried in its step or ack record, and on every dispatch the `traceparent` of the dispatch's own
//! span, so a god that passes it on joins the trace. Span ids are derived from the record they
//! stand for ([`span_id`]: a handoff id, an ack id), so any reader of the state files (the exporter
//! of `pantheon serve --otlp`) names the same spans without being told.

use sha2::{Digest, Sha256};

use crate::error::Violation;

/// A parsed `traceparent` (version `00`): the trace, the parent span and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// 16 bytes, never all zero.
    pub trace_id: [u8; 16],
    /// 8 bytes, never all zero.
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

/// The longest `traceparent` taken (version 00 is 55 bytes; a later version may append fields).
pub(crate) const MAX_TRACEPARENT: usize = 512;

fn hex_bytes<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl TraceContext {
    /// Parses a `traceparent` header value by the W3C rules: lower-case hex, version not `ff`,
    /// version `00` exactly four fields, ids not all zero. `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() > MAX_TRACEPARENT {
            return None;
        }
        let mut it = s.split('-');
        let version: [u8; 1] = hex_bytes(it.next()?)?;
        let trace_id: [u8; 16] = hex_bytes(it.next()?)?;
        let span_id: [u8; 8] = hex_bytes(it.next()?)?;
        let flags: [u8; 1] = hex_bytes(it.next()?)?;
        let rest = it.next();
        if version[0] == 0xff
            || (version[0] == 0 && rest.is_some())
            || trace_id == [0; 16]
            || span_id == [0; 8]
        {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags: flags[0],
        })
    }

    /// The `traceparent` text of this context (version `00`).
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id),
            self.flags
        )
    }
}

/// The span id of the record `kind` (`submit`, `dispatch`, `ack`, `publish`) with the id `id`:
/// the first 8 bytes of SHA-256 of `kind:id`, never all zero.
pub fn span_id(kind: &str, id: &str) -> [u8; 8] {
    let d = Sha256::digest(format!("{kind}:{id}").as_bytes());
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    if out == [0; 8] {
        out[7] = 1;
    }
    out
}

/// A new random trace id, as the state's `trace_id` text (32 lower-case hex digits).
pub(crate) fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The trace id a new workflow takes: the first handoff's, when it carried a valid `traceparent`,
/// else a new one (the engine starts the trace).
pub(crate) fn trace_id_for(traceparent: Option<&str>) -> String {
    traceparent
        .and_then(TraceContext::parse)
        .map_or_else(new_trace_id, |c| hex::encode(c.trace_id))
}

/// A workflow's trace id: the `trace_id` its state records, or, for a state written before traces
/// (or by another engine), one derived from the workflow id, so every reader agrees on it.
pub fn trace_of(trace_id: Option<&str>, workflow_id: &str) -> [u8; 16] {
    if let Some(t) = trace_id.and_then(hex_bytes::<16>)
        && t != [0; 16]
    {
        return t;
    }
    let d = Sha256::digest(format!("workflow:{workflow_id}").as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The `traceparent` of the span `kind:id` in a workflow's trace (sampled): its recorded
/// `trace_id` and its id, as [`trace_of`] takes them.
pub(crate) fn traceparent_of(
    trace_id: Option<&str>,
    workflow_id: &str,
    kind: &str,
    id: &str,
) -> String {
    TraceContext {
        trace_id: trace_of(trace_id, workflow_id),
        span_id: span_id(kind, id),
        flags: 1,
    }
    .header()
}

/// The violation of a document's optional `traceparent` at `pointer` (a string of the W3C form),
/// if any. Checked by the engine on every root, so a root whose schema predates the field still
/// refuses a malformed one.
pub(crate) fn violation(doc: &serde_json::Value, pointer: &str) -> Option<Violation> {
    match doc.pointer(pointer) {
        None => None,
        Some(serde_json::Value::String(s)) if TraceContext::parse(s).is_some() => None,
        Some(_) => Some(Violation {
            pointer: pointer.to_owned(),
            message: "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zero"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_by_the_w3c_rules() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = TraceContext::parse(ok).unwrap();
        assert_eq!(c.header(), ok);
        assert_eq!(c.flags, 1);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(TraceContext::parse(bad).is_none(), "{bad}");
        }
        // A later version may append fields.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
    }

    #[test]
    fn a_workflow_keeps_the_trace_its_first_handoff_named() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(trace_id_for(Some(tp)), "4bf92f3577b34da6a3ce929d0e0e4736");
        let fresh = trace_id_for(Some("garbage"));
        assert_eq!(fresh.len(), 32);
        assert_ne!(fresh, trace_id_for(None));
        let recorded = Some("4bf92f3577b34da6a3ce929d0e0e4736");
        let d = traceparent_of(recorded, "wf_a", "dispatch", "hof_20260614_abc");
        let c = TraceContext::parse(&d).unwrap();
        assert_eq!(hex::encode(c.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id, span_id("dispatch", "hof_20260614_abc"));
        assert_ne!(c.span_id, span_id("submit", "hof_20260614_abc"));
        // A state without one: derived from its id, the same for every reader.
        assert_eq!(trace_of(None, "wf_a"), trace_of(None, "wf_a"));
        assert_ne!(trace_of(None, "wf_a"), trace_of(recorded, "wf_a"));
    }
}
