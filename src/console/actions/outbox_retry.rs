//! Retry a waiting outbox record now (`R` on pane 10, the bridge): `pantheon bridge retry ID`. A
//! running bridge takes the request within a second; its backoff and give-up clock start over.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::Error;
use crate::live::snapshot::{BridgeKind, BridgeRow, Snapshot};

use super::super::app::{App, Effect, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::Version;
use super::{Act, Op, line, marks_fit};

/// True when `key` is a waiting outbox record of the bridge pane.
pub(super) fn is_waiting(_app: &App, key: &RowKey) -> bool {
    matches!(
        key,
        RowKey::Bridge {
            kind: BridgeKind::Pending,
            ..
        }
    )
}

/// The waiting record `id` as `snap` lists it.
pub(super) fn waiting<'a>(snap: &'a Snapshot, id: &str) -> Option<&'a BridgeRow> {
    snap.bridge_view
        .rows
        .iter()
        .find(|r| r.kind == BridgeKind::Pending && r.id == id)
}

/// The outbox id of the selected row of the bridge pane, when it is a waiting record (else the
/// flash says what is needed).
pub(super) fn selected_outbox(app: &mut App) -> Option<String> {
    if app.pane() == Pane::Bridge && app.refuse_if_gone(Pane::Bridge) {
        return None;
    }
    let id = crate::console::panes::bridge::bridge_rows(app)
        .get(app.selected(Pane::Bridge))
        .filter(|r| r.kind == BridgeKind::Pending)
        .map(|r| r.id.clone());
    if id.is_none() {
        app.need("a waiting outbox record in the Bridge pane (:pane bridge)");
    }
    id
}

/// What the confirmation says of the record: its subject and why it waits.
pub(super) fn describe_record(out: &mut Vec<(Tone, String)>, snap: &Snapshot, id: &str) {
    match waiting(snap, id) {
        Some(r) => {
            out.push(line(Tone::Normal, format!("Subject: {}", r.subject)));
            out.push(line(Tone::Dim, r.what.clone()));
        }
        None => out.push(line(
            Tone::Warn,
            format!("{id} no longer waits (sent or given up since you selected it); the engine would refuse."),
        )),
    }
}

/// The record as the confirmation showed it: waiting on its subject, or gone.
pub(super) fn version_of(v: &mut Version, snap: &Snapshot, id: &str) {
    let what = format!("outbox record {id}");
    match waiting(snap, id) {
        Some(r) => v.push((what, format!("waiting on {}", r.subject))),
        None => v.push((what, "gone".into())),
    }
}

/// `R` on a waiting outbox record.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(app, &is_waiting, "waiting outbox records")
        && let Some(outbox_id) = selected_outbox(app)
    {
        app.confirm(Op::OutboxRetry { outbox_id });
    }
    Vec::new()
}

impl Act for super::OutboxRetry<'_> {
    fn title(&self) -> String {
        format!("Retry {}", self.outbox_id)
    }

    fn verb(&self) -> &'static str {
        "Retry"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        out.push(line(
            Tone::Normal,
            format!(
                "The bridge will try {} again now; its backoff and give-up clock start over.",
                self.outbox_id
            ),
        ));
        describe_record(out, snap, self.outbox_id);
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        version_of(v, snap, self.outbox_id)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine.conductor().retry_outbox(self.outbox_id)?,
            summary,
            Outcome::Outbox,
        ))
    }

    fn subject(&self) -> String {
        self.outbox_id.clone()
    }

    fn done_word(&self) -> &'static str {
        "retried"
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(match mark {
            RowKey::Bridge {
                kind: BridgeKind::Pending,
                id,
            } if waiting(fan.snap, id).is_some() => Ok(Op::OutboxRetry {
                outbox_id: id.to_string(),
            }),
            RowKey::Bridge {
                kind: BridgeKind::Pending,
                ..
            } => Err(SkipWhy::NoLongerWaits),
            _ => Err(SkipWhy::NotWaitingOutbox),
        })
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::OutboxActResult) -> String {
    if r.bridge_running {
        format!("{} will be tried again within a second", r.outbox_id)
    } else {
        format!(
            "{}: retry asked; no bridge is running, the next one to start tries it at once",
            r.outbox_id
        )
    }
}
