//! Resume a pause (`Z` on what is paused, `:resume`; started by `pause`'s flow): the confirmation
//! says what the pause holds; the engine releases it in the order held (docs/PROTOCOL.md §2.14).

use chrono::{DateTime, Utc};

use crate::engine::Error;
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::ops::{Done, Outcome};
use super::super::shown::Version;
use super::pause::is_paused;
use super::{Act, line};

/// The confirmation of the resume of `target` (what `Z` on a paused record, and `:resume`, open).
pub(crate) fn resume_confirm(app: &mut App, target: crate::engine::PauseTarget) {
    app.confirm(super::Op::Resume { target });
}

// Started by `pause`'s flow (`Z` on what is paused, `:resume`), never on its own.

impl Act for super::Resume<'_> {
    fn title(&self) -> String {
        format!("Resume {}", self.target.label())
    }

    fn verb(&self) -> &'static str {
        "Resume"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        match snap
            .paused
            .pauses
            .iter()
            .find(|p| p.target() == *self.target)
        {
            Some(p) => {
                out.push(line(
                    Normal,
                    format!(
                        "{} is paused since {} by {}: {}",
                        self.target.label(),
                        p.since,
                        p.by,
                        p.reason
                    ),
                ));
                let held = snap
                    .quarantine
                    .dispatches
                    .iter()
                    .filter(|d| {
                        crate::engine::held_by_pause(d.dispatch.held_because.as_deref())
                            && p.covers_dispatch(&d.dispatch.to_god, &d.dispatch.workflow_id)
                    })
                    .count();
                out.push(line(
                    Warn,
                    format!(
                        "{held} held dispatch(es) will be released in the order held; frozen ack deadlines move on by the paused time."
                    ),
                ));
            }
            None => out.push(line(Dim, "It is not paused (any more): nothing changes.")),
        }
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        v.push((
            format!("paused {}", self.target.label()),
            is_paused(snap, self.target).to_string(),
        ));
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine.conductor().resume(self.target, None)?,
            summary,
            Outcome::Resume,
        ))
    }

    fn subject(&self) -> String {
        self.target.label()
    }

    fn done_word(&self) -> &'static str {
        "resumed"
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::ResumeResult) -> String {
    format!(
        "{} resumed after {:.0}s: {} released, {} deadline(s) shifted{}",
        r.pause.target().label(),
        r.paused_secs,
        r.released.len(),
        r.shifted,
        if r.errors.is_empty() {
            String::new()
        } else {
            format!("; {} problem(s): repeat to finish", r.errors.len())
        }
    )
}
