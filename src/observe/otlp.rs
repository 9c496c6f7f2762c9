//! OTLP/HTTP protobuf: the `ExportTraceServiceRequest` of the OpenTelemetry protocol
//! (`opentelemetry/proto/collector/trace/v1/trace_service.proto` and `trace/v1/trace.proto`),
//! encoded by hand for the few messages and fields a span of ours uses. Field numbers and wire
//! types are the protocol's; the test suite decodes what this writes with the official Python
//! `opentelemetry-proto` package.

/// How a span relates to its neighbours (`Span.SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    Internal = 1,
    Server = 2,
    Producer = 4,
}

/// An attribute value: ids and closed words are strings; counts are integers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AttrValue {
    Str(String),
    Int(i64),
}

/// One span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanData {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start_nanos: u64,
    pub end_nanos: u64,
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// Contexts in other traces this span follows (a god's span in a trace of its own).
    pub links: Vec<([u8; 16], [u8; 8])>,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

/// `KeyValue { string key = 1; AnyValue value = 2; }`, `AnyValue { string_value = 1; int_value = 3 }`.
fn key_value(key: &str, v: &AttrValue) -> Vec<u8> {
    let mut any = Vec::new();
    match v {
        AttrValue::Str(s) => bytes_field(&mut any, 1, s.as_bytes()),
        AttrValue::Int(i) => varint_field(&mut any, 3, *i as u64),
    }
    let mut kv = Vec::new();
    bytes_field(&mut kv, 1, key.as_bytes());
    bytes_field(&mut kv, 2, &any);
    kv
}

fn span(s: &SpanData) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    bytes_field(&mut out, 1, &s.trace_id);
    bytes_field(&mut out, 2, &s.span_id);
    if let Some(p) = &s.parent {
        bytes_field(&mut out, 4, p);
    }
    bytes_field(&mut out, 5, s.name.as_bytes());
    varint_field(&mut out, 6, s.kind as u64);
    fixed64(&mut out, 7, s.start_nanos);
    fixed64(&mut out, 8, s.end_nanos.max(s.start_nanos));
    for (k, v) in &s.attributes {
        bytes_field(&mut out, 9, &key_value(k, v));
    }
    for (t, sp) in &s.links {
        let mut link = Vec::new();
        bytes_field(&mut link, 1, t);
        bytes_field(&mut link, 2, sp);
        bytes_field(&mut out, 13, &link);
    }
    out
}

/// The request body: one `ResourceSpans` (resource `service.name=pantheon` and the given
/// attributes), one `ScopeSpans` (scope `pantheon`), the spans.
pub(crate) fn export_request(
    resource: &[(&'static str, AttrValue)],
    spans: &[SpanData],
) -> Vec<u8> {
    let mut res = Vec::new();
    for (k, v) in resource {
        bytes_field(&mut res, 1, &key_value(k, v));
    }
    let mut scope = Vec::new();
    bytes_field(&mut scope, 1, b"pantheon");
    bytes_field(&mut scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
    let mut scope_spans = Vec::new();
    bytes_field(&mut scope_spans, 1, &scope);
    for s in spans {
        bytes_field(&mut scope_spans, 2, &span(s));
    }
    let mut rs = Vec::new();
    bytes_field(&mut rs, 1, &res);
    bytes_field(&mut rs, 2, &scope_spans);
    let mut req = Vec::new();
    bytes_field(&mut req, 1, &rs);
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_wire_format() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let mut f = Vec::new();
        fixed64(&mut f, 7, 1);
        assert_eq!(f, [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        let kv = key_value("a", &AttrValue::Str("b".into()));
        assert_eq!(kv, [0x0a, 1, b'a', 0x12, 3, 0x0a, 1, b'b']);
        let s = SpanData {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: None,
            name: "x".into(),
            kind: SpanKind::Internal,
            start_nanos: 5,
            end_nanos: 3,
            attributes: vec![],
            links: vec![],
        };
        let body = span(&s);
        // trace id, span id, name, kind, then the end never before the start.
        assert_eq!(&body[..2], [0x0a, 16]);
        assert_eq!(&body[body.len() - 9..], [0x41, 5, 0, 0, 0, 0, 0, 0, 0]);
    }
}
