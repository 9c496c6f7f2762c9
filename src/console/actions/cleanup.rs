//! Clean up a finished workflow's artifacts (`D` on pane 1): the engine's dry run first, shown as
//! the confirmation, then the deletion.

use chrono::{DateTime, Utc};

use crate::engine::{CleanupResult, Error, WorkflowId};
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Confirm, Effect, FlashKind, Mode, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::ops::{Done, Outcome};
use super::super::shown::{self, Version};
use super::{Act, Op, line};

/// `D` on a workflow: asks the engine for the dry run.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    match app.selected_workflow() {
        Some(wf) => {
            app.flash(FlashKind::Info, format!("dry run of cleanup for {wf}…"));
            vec![Effect::PreviewCleanup(wf)]
        }
        None => Vec::new(),
    }
}

/// The engine answered a cleanup dry run: show it and ask for confirmation.
pub(crate) fn cleanup_previewed(
    app: &mut App,
    wf: WorkflowId,
    result: Result<CleanupResult, crate::engine::Error>,
) {
    match result {
        Ok(v) if cleanup_finds_nothing(&v) => app.flash(
            FlashKind::Info,
            format!(
                "cleanup of {wf}: the dry run found nothing to delete ({} already gone, {} refused)",
                v.missing.len(),
                v.refused.len()
            ),
        ),
        Ok(v) => {
            let op = Op::Cleanup { workflow_id: wf };
            let mut lines = cleanup_lines(&v);
            lines.push((Tone::Dim, app.recorded_as()));
            app.clear_flash();
            app.set_mode(Mode::Confirm(Confirm::new(op, lines, app.snapshot())));
        }
        Err(e) => app.flash(FlashKind::Error, format!("cleanup of {wf} refused: {e}")),
    }
}

impl Act for super::Cleanup<'_> {
    fn title(&self) -> String {
        format!("Clean up {}", self.workflow_id)
    }

    fn verb(&self) -> &'static str {
        "Delete"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    /// Its lines are the engine's dry run (see [`cleanup_lines`]).
    fn describe(&self, _out: &mut Vec<(Tone, String)>, _snap: &Snapshot, _now: DateTime<Utc>) {}

    fn described_from_snapshot(&self) -> bool {
        false
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::workflow(v, self.workflow_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine.conductor().cleanup(self.workflow_id, false)?,
            summary,
            Outcome::Cleanup,
        ))
    }

    fn subject(&self) -> String {
        self.workflow_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "cleaned up"
    }
}

/// True when a cleanup dry run found nothing to delete (no Delete button is offered then).
pub(crate) fn cleanup_finds_nothing(r: &CleanupResult) -> bool {
    r.paths().is_empty()
}

/// The dialog lines for a cleanup dry run returned by the engine.
pub(crate) fn cleanup_lines(r: &CleanupResult) -> Vec<(Tone, String)> {
    use Tone::*;
    let mut out = Vec::new();
    if r.paths().is_empty() {
        out.push(line(Dim, "Nothing to delete."));
    } else {
        out.push(line(Normal, "Will be deleted (the dry run found them):"));
        out.extend(r.paths().iter().map(|p| line(Danger, format!("  {p}"))));
    }
    if !r.missing.is_empty() {
        out.push(line(Dim, format!("Already gone: {}", r.missing.join(", "))));
    }
    if !r.refused.is_empty() {
        out.push(line(Warn, "Refused (outside the allowed roots):"));
        out.extend(
            r.refused
                .iter()
                .map(|p| line(Warn, format!("  {} ({})", p.path, p.reason))),
        );
    }
    out.push(line(Dim, "The .aborted markers will stay."));
    out
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::CleanupResult) -> String {
    format!(
        "{} cleaned: {} deleted, {} missing, {} refused",
        r.workflow_id,
        r.paths().len(),
        r.missing.len(),
        r.refused.len()
    )
}
