//! The same action on every marked record (see `marks`): made once per mark when a confirmation
//! opens on a pane with marks, one engine call per record, one report for all.

use chrono::{DateTime, Utc};

use crate::engine::Error;
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::marks::{describe_bulk, execute_bulk, summarize_bulk};
use super::super::ops::{Done, Outcome};
use super::super::shown::Version;
use super::{Act, Op};

// No key starts it: any action that applies to marks becomes one on a pane with marks.

/// `op` as it is confirmed: made for every mark of the current pane when it applies to marks.
pub(crate) fn on_marks(app: &App, op: Op) -> Op {
    match crate::console::marks::fan_out(app, &op) {
        Some((items, skipped)) => Op::Bulk { items, skipped },
        None => op,
    }
}

impl Act for super::Bulk<'_> {
    fn title(&self) -> String {
        match self.items.first() {
            Some((_, op)) => format!("{} {} marked record(s)", op.verb(), self.items.len()),
            None => "Nothing to do on the marked records".to_owned(),
        }
    }

    fn verb(&self) -> &'static str {
        self.items.first().map_or("OK", |(_, op)| op.verb())
    }

    fn is_destructive(&self) -> bool {
        self.items.iter().any(|(_, o)| o.is_destructive())
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, _snap: &Snapshot, _now: DateTime<Utc>) {
        out.extend(describe_bulk(self.items, self.skipped));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        for (_, item) in self.items {
            item.version(v, snap);
        }
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            execute_bulk(engine, self.items, self.skipped),
            |report| summarize_bulk(self.items, report),
            Outcome::Bulk,
        ))
    }

    fn subject(&self) -> String {
        format!("{} records", self.items.len())
    }

    fn is_bulk(&self) -> bool {
        true
    }

    fn finished(&self, app: &mut App, outcome: &Outcome) -> Vec<super::Effect> {
        if let Outcome::Bulk(report) = outcome {
            crate::console::marks::bulk_finished(app, self.items, report);
        }
        Vec::new()
    }
}
