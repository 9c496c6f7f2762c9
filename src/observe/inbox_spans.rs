//! Spans of what only the inboxes show (docs/OBSERVABILITY.md, "Traces"): a supervisor's
//! redelivery (the dispatch's `deliveries` grew), a dead letter (the dispatch reached
//! `conductor/dead/`), and a dispatch its god marked `pending` by rewriting the file itself (the one
//! Conductor write the protocol lets a god make; it records no ack in the state). Each is a child
//! of the dispatch's span, in the workflow's trace.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::Utc;

use crate::engine::{AckStatus, Dispatch, Root, WorkflowId, span_id, trace_of};
use crate::live::Snapshot;
use crate::live::snapshot::{DispatchView, Sym};

use super::otlp::{SpanData, SpanKind};
use super::spans::{Ctx, nanos, read_state, s};

/// What an open dispatch showed the last time its inbox changed.
#[derive(Debug, Clone, Copy)]
struct Open {
    pending: bool,
    deliveries: u32,
}

/// The inboxes' and dead letters' lists as last looked at, and what their dispatches showed.
#[derive(Default)]
pub struct InboxWatch {
    lists: HashMap<String, usize>,
    open: HashMap<Sym, Open>,
    dead: HashSet<Sym>,
}

impl InboxWatch {
    /// The spans of what changed in the inboxes since the previous snapshot; before `primed`
    /// (the model's first load) only remembers what it sees.
    pub fn observe(&mut self, snap: &Snapshot, primed: bool, out: &mut dyn FnMut(SpanData)) {
        for inbox in snap.inboxes.iter() {
            let list = Arc::as_ptr(&inbox.dispatches) as usize;
            if self.lists.insert(inbox.god.clone(), list) == Some(list) {
                continue;
            }
            for d in inbox.dispatches.iter() {
                let row = &d.dispatch.row;
                let now = Open {
                    pending: row.ack_status == AckStatus::Pending,
                    deliveries: row.deliveries,
                };
                let before = self.open.insert(row.handoff_id.clone(), now);
                if !primed {
                    continue;
                }
                if now.pending && !before.is_some_and(|b| b.pending) {
                    direct_pending(snap, d, out);
                }
                if let Some(b) = before
                    && now.deliveries > b.deliveries
                {
                    redelivered(snap, d, b.deliveries, out);
                }
            }
        }
        for inbox in snap.dead_letters.iter() {
            let list = Arc::as_ptr(&inbox.dispatches) as usize;
            let key = format!("dead/{}", inbox.god);
            if self.lists.insert(key, list) == Some(list) {
                continue;
            }
            for d in inbox.dispatches.iter() {
                let hid = d.dispatch.row.handoff_id.clone();
                if self.dead.insert(hid.clone()) && primed {
                    dead_letter(snap, d, out);
                }
                self.open.remove(&hid);
            }
        }
        let open_now: usize = snap.inboxes.iter().map(|i| i.dispatches.len()).sum();
        if self.open.len() > 4 * open_now + 1024 {
            let live: HashSet<&str> = snap
                .inboxes
                .iter()
                .flat_map(|i| i.dispatches.iter().map(|d| &*d.dispatch.row.handoff_id))
                .collect();
            self.open.retain(|k, _| live.contains(&**k));
        }
        let dead_now: usize = snap.dead_letters.iter().map(|i| i.dispatches.len()).sum();
        if self.dead.len() > 4 * dead_now + 1024 {
            let live: HashSet<&str> = snap
                .dead_letters
                .iter()
                .flat_map(|i| i.dispatches.iter().map(|d| &*d.dispatch.row.handoff_id))
                .collect();
            self.dead.retain(|k| live.contains(&**k));
        }
    }
}

fn now_nanos() -> u64 {
    Utc::now()
        .timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or_default()
}

/// The span `name` of a dispatch, child of the dispatch's span, with `id` as its record id.
fn child_span(
    snap: &Snapshot,
    d: &DispatchView,
    name: String,
    kind: &str,
    id: &str,
    at: u64,
) -> Option<(SpanData, Dispatch)> {
    let row = &d.dispatch.row;
    let wf = WorkflowId::parse(&row.workflow_id).ok()?;
    let st = read_state(&Root::at(&snap.root).state_path(&wf))?;
    let ctx = Ctx {
        st: &st,
        trace: trace_of(&st),
        not_before: None,
    };
    let hid = &*row.handoff_id;
    let mut sp = ctx.base(name, SpanKind::Internal, span_id(kind, id), at);
    sp.parent = Some(span_id("dispatch", hid));
    sp.attributes.extend([
        ("pantheon.handoff_id", s(hid)),
        ("pantheon.step", s(&row.step)),
    ]);
    let written: Dispatch = crate::engine::read_json_once(&d.path())
        .ok()
        .flatten()
        .and_then(|v| crate::engine::model_from_value(v).ok())
        .unwrap_or_default();
    // An ack the state records is the engine's: its span comes from the ack record.
    if kind == "ack"
        && st
            .acks
            .iter()
            .any(|a| a.handoff_id == hid && a.status == AckStatus::Pending)
    {
        return None;
    }
    Some((sp, written))
}

fn direct_pending(snap: &Snapshot, d: &DispatchView, out: &mut dyn FnMut(SpanData)) {
    let row = &d.dispatch.row;
    let id = format!("direct:{}", row.handoff_id);
    let Some((mut sp, written)) = child_span(snap, d, "ack pending".into(), "ack", &id, 0) else {
        return;
    };
    let at = nanos(written.acked_at.as_deref()).map_or_else(now_nanos, |(_, n)| n);
    sp.start_nanos = at;
    sp.end_nanos = at;
    sp.kind = SpanKind::Server;
    sp.attributes.extend([
        ("pantheon.status", s("pending")),
        ("pantheon.god", s(&row.to_god)),
        ("pantheon.written_by", s("god")),
    ]);
    out(sp);
}

fn redelivered(snap: &Snapshot, d: &DispatchView, from: u32, out: &mut dyn FnMut(SpanData)) {
    let row = &d.dispatch.row;
    let name = format!("redeliver {}", row.step);
    let first = format!("{}:{from}", row.handoff_id);
    let Some((template, written)) = child_span(snap, d, name, "redeliver", &first, 0) else {
        return;
    };
    for k in from..row.deliveries {
        let Some(delivery) = written.deliveries.get(k as usize) else {
            continue;
        };
        let at = nanos(Some(&delivery.at)).map_or_else(now_nanos, |(_, n)| n);
        let mut sp = template.clone();
        sp.span_id = span_id("redeliver", &format!("{}:{k}", row.handoff_id));
        sp.start_nanos = at;
        sp.end_nanos = at;
        sp.attributes.extend([
            (
                "pantheon.delivery",
                super::otlp::AttrValue::Int(i64::from(k) + 1),
            ),
            ("pantheon.god", s(&delivery.to)),
        ]);
        out(sp);
    }
}

fn dead_letter(snap: &Snapshot, d: &DispatchView, out: &mut dyn FnMut(SpanData)) {
    let row = &d.dispatch.row;
    let name = format!("dead letter {}", row.step);
    let Some((mut sp, written)) = child_span(snap, d, name, "dead", &row.handoff_id, 0) else {
        return;
    };
    let at = nanos(written.dead_at.as_deref()).map_or_else(now_nanos, |(_, n)| n);
    sp.start_nanos = at;
    sp.end_nanos = at;
    sp.attributes.extend([
        ("pantheon.god", s(&row.to_god)),
        (
            "pantheon.deliveries",
            super::otlp::AttrValue::Int(i64::from(row.deliveries)),
        ),
    ]);
    out(sp);
}
