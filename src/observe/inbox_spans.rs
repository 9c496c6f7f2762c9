//! Spans of what only the inboxes show (docs/OBSERVABILITY.md, "Traces"): a supervisor's
//! redelivery (the dispatch's `deliveries` grew), a dead letter (the dispatch reached
//! `conductor/dead/`), and a dispatch its god marked `pending` by rewriting the file itself (the one
//! Conductor write the protocol lets a god make; it records no ack in the state). Each is a child
//! of the dispatch's span, in the workflow's trace.
//!
//! The span watcher ([`super::span_watch`]) hands over each dispatch file an event named, read; this
//! module remembers what each open dispatch showed the last time (whether it was `pending`, how
//! many deliveries it had) and compares. A dispatch first seen after the exporter started has no
//! "last time": what it shows counts when it happened after the start (its `acked_at`, a
//! delivery's `at`, its `dead_at`, else the file's modification time).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::engine::{AckStatus, Dispatch, Root, WorkflowId, span_id, trace_of};

use super::otlp::{AttrValue, SpanData, SpanKind};
use super::spans::{Ctx, nanos, read_state, s};

/// What an open dispatch showed the last time its file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Open {
    /// The inbox it lay in (a redelivery to a fallback god moves it).
    god: String,
    pending: bool,
    deliveries: u32,
}

/// A dispatch file as read: its content, where it lies and when it was written.
pub(crate) struct Read<'a> {
    /// The file's name without `.json`: the handoff id the file is kept under.
    pub key: &'a str,
    /// The inbox (or dead-letter directory) it lies in.
    pub god: &'a str,
    pub dispatch: &'a Dispatch,
    /// The file's modification time: when a record without a time of its own was written.
    pub written: Option<DateTime<Utc>>,
}

/// What the open dispatches and dead letters showed, as last read; only dispatches whose file
/// changed since the exporter started are kept (and forgotten when their file goes).
#[derive(Default)]
pub(crate) struct InboxWatch {
    open: HashMap<String, Open>,
    dead: HashSet<String>,
}

impl InboxWatch {
    /// The spans of a dispatch file of `god`'s inbox that changed (or appeared).
    pub(crate) fn dispatch(
        &mut self,
        root: &Root,
        started: DateTime<Utc>,
        r: &Read<'_>,
        out: &mut dyn FnMut(SpanData),
    ) {
        let d = r.dispatch;
        let now = Open {
            god: r.god.to_owned(),
            pending: d.ack_status == AckStatus::Pending,
            deliveries: u32::try_from(d.deliveries.len()).unwrap_or(u32::MAX),
        };
        let before = self.open.insert(r.key.to_owned(), now.clone());
        // Happened since the exporter started: known by comparison, else by its time.
        let after_start = |t: Option<&str>| {
            nanos(t)
                .map(|(t, _)| t)
                .or(r.written)
                .is_some_and(|t| t >= started)
        };
        if now.pending
            && match &before {
                Some(b) => !b.pending,
                None => after_start(d.acked_at.as_deref()),
            }
        {
            direct_pending(root, r, out);
        }
        // The first delivery (0) is the dispatch itself, never a redelivery.
        let from = before.as_ref().map_or(1, |b| b.deliveries.max(1));
        for k in from..now.deliveries {
            let Some(delivery) = d.deliveries.get(k as usize) else {
                continue;
            };
            if before.is_some() || after_start(Some(&delivery.at)) {
                redelivered(root, r, k, out);
            }
        }
    }

    /// A dispatch file of `god`'s inbox is gone (acked and archived, moved, dead-lettered).
    pub(crate) fn gone(&mut self, key: &str, god: &str) {
        if self.open.get(key).is_some_and(|o| o.god == god) {
            self.open.remove(key);
        }
    }

    /// The span of a dispatch that reached `conductor/dead/` (once per dead letter).
    pub(crate) fn dead_letter(
        &mut self,
        root: &Root,
        started: DateTime<Utc>,
        r: &Read<'_>,
        out: &mut dyn FnMut(SpanData),
    ) {
        let was_open = self.open.remove(r.key).is_some();
        if !self.dead.insert(r.key.to_owned()) {
            return;
        }
        let dead_at = nanos(r.dispatch.dead_at.as_deref()).map(|(t, _)| t);
        if was_open || dead_at.or(r.written).is_some_and(|t| t >= started) {
            dead_letter(root, r, out);
        }
    }

    /// A dead letter's file is gone (requeued, removed).
    pub(crate) fn dead_gone(&mut self, key: &str) {
        self.dead.remove(key);
    }

    /// Forgets the dispatches and dead letters `keep` does not name (after a rescan listed them all).
    pub(crate) fn retain(&mut self, keep: &dyn Fn(&str, Option<&str>) -> bool) {
        self.open.retain(|k, o| keep(k, Some(&o.god)));
        self.dead.retain(|k| keep(k, None));
    }

    /// How many dispatches and dead letters are remembered.
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.open.len() + self.dead.len()
    }
}

fn now_nanos() -> u64 {
    Utc::now()
        .timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or_default()
}

/// The span `name` of a dispatch, child of the dispatch's span, with `id` as its record id; `None`
/// when its workflow's state cannot be read (the trace id is the state's).
fn child_span(root: &Root, r: &Read<'_>, name: String, kind: &str, id: &str) -> Option<SpanData> {
    let d = r.dispatch;
    let wf = WorkflowId::parse(&d.workflow_id).ok()?;
    let st = read_state(&root.state_path(&wf))?;
    let hid = handoff_id(r);
    // An ack the state records is the engine's: its span comes from the ack record.
    if kind == "ack"
        && st
            .acks
            .iter()
            .any(|a| a.handoff_id == hid && a.status == AckStatus::Pending)
    {
        return None;
    }
    let ctx = Ctx {
        st: &st,
        trace: trace_of(st.trace_id.as_deref(), &st.workflow_id),
        not_before: None,
    };
    let mut sp = ctx.base(name, SpanKind::Internal, span_id(kind, id), 0);
    sp.parent = Some(span_id("dispatch", hid));
    sp.attributes.extend([
        ("pantheon.handoff_id", s(hid)),
        ("pantheon.step", s(&d.step)),
    ]);
    Some(sp)
}

/// The dispatch's handoff id: as it records it, else its file's name.
fn handoff_id<'a>(r: &Read<'a>) -> &'a str {
    if r.dispatch.handoff_id.is_empty() {
        r.key
    } else {
        &r.dispatch.handoff_id
    }
}

fn at(sp: &mut SpanData, t: Option<&str>) {
    let at = nanos(t).map_or_else(now_nanos, |(_, n)| n);
    sp.start_nanos = at;
    sp.end_nanos = at;
}

fn direct_pending(root: &Root, r: &Read<'_>, out: &mut dyn FnMut(SpanData)) {
    let id = format!("direct:{}", handoff_id(r));
    let Some(mut sp) = child_span(root, r, "ack pending".into(), "ack", &id) else {
        return;
    };
    at(&mut sp, r.dispatch.acked_at.as_deref());
    sp.kind = SpanKind::Server;
    sp.attributes.extend([
        ("pantheon.status", s("pending")),
        ("pantheon.god", s(to_god(r))),
        ("pantheon.written_by", s("god")),
    ]);
    out(sp);
}

/// The god a dispatch is for: as it records it, else the inbox it lies in.
fn to_god<'a>(r: &Read<'a>) -> &'a str {
    if r.dispatch.to_god.is_empty() {
        r.god
    } else {
        &r.dispatch.to_god
    }
}

/// The span of delivery `k` (0 is the first delivery, so `k` ≥ 1 is a redelivery).
fn redelivered(root: &Root, r: &Read<'_>, k: u32, out: &mut dyn FnMut(SpanData)) {
    let Some(delivery) = r.dispatch.deliveries.get(k as usize) else {
        return;
    };
    let name = format!("redeliver {}", r.dispatch.step);
    let id = format!("{}:{k}", handoff_id(r));
    let Some(mut sp) = child_span(root, r, name, "redeliver", &id) else {
        return;
    };
    at(&mut sp, Some(&delivery.at));
    sp.attributes.extend([
        ("pantheon.delivery", AttrValue::Int(i64::from(k) + 1)),
        ("pantheon.god", s(&delivery.to)),
    ]);
    out(sp);
}

/// A dispatch never acked has no `dispatch STEP` span from its state (that span ends at its first
/// ack): its dead letter ends it here, so the parent its redeliveries and dead letter name is
/// exported. Nothing when the state records an ack of it (the state's span is the one).
fn unacked_dispatch(root: &Root, r: &Read<'_>, out: &mut dyn FnMut(SpanData)) {
    let d = r.dispatch;
    let Ok(wf) = WorkflowId::parse(&d.workflow_id) else {
        return;
    };
    let Some(st) = read_state(&root.state_path(&wf)) else {
        return;
    };
    let hid = handoff_id(r);
    if st.acks.iter().any(|a| a.handoff_id == hid) {
        return;
    }
    let ctx = Ctx {
        st: &st,
        trace: trace_of(st.trace_id.as_deref(), &st.workflow_id),
        not_before: None,
    };
    let first = d.deliveries.first().map(|x| x.at.as_str());
    let start = nanos(d.dispatched_at.as_deref())
        .or_else(|| nanos(first))
        .map_or_else(now_nanos, |(_, n)| n);
    let name = format!("dispatch {}", d.step);
    let mut sp = ctx.base(name, SpanKind::Internal, span_id("dispatch", hid), start);
    sp.end_nanos = nanos(d.dead_at.as_deref()).map_or(start, |(_, n)| n.max(start));
    sp.parent = Some(span_id("submit", hid));
    sp.attributes.extend([
        ("pantheon.handoff_id", s(hid)),
        ("pantheon.step", s(&d.step)),
        ("pantheon.god", s(to_god(r))),
        ("pantheon.first_ack", s("none")),
    ]);
    out(sp);
}

fn dead_letter(root: &Root, r: &Read<'_>, out: &mut dyn FnMut(SpanData)) {
    unacked_dispatch(root, r, out);
    let name = format!("dead letter {}", r.dispatch.step);
    let Some(mut sp) = child_span(root, r, name, "dead", handoff_id(r)) else {
        return;
    };
    at(&mut sp, r.dispatch.dead_at.as_deref());
    let deliveries = i64::try_from(r.dispatch.deliveries.len()).unwrap_or(i64::MAX);
    sp.attributes.extend([
        ("pantheon.god", s(to_god(r))),
        ("pantheon.deliveries", AttrValue::Int(deliveries)),
    ]);
    out(sp);
}
