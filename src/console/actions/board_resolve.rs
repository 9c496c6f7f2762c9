//! Resolve a board session (`s` on pane 6): `BOARD_RESOLVE` posted and `resolution.md` written;
//! directors who have not voted are recorded as abstained (forced).

use chrono::{DateTime, Utc};

use crate::engine::Error;
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Effect, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::shown::Version;
use super::board_advance::{BoardAt, board_of, board_version, describe_session};
use super::{Act, Op, line};

/// `s` on the board.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    let Some(b) = BoardAt::selected(app) else {
        return Vec::new();
    };
    let missing = board_of(app.snapshot(), &b.name)
        .map(|s| items::directors(&s).iter().any(|c| c.vote.is_none()))
        .unwrap_or(false);
    app.confirm(Op::BoardResolve {
        track: b.track,
        force: missing,
        seen: b.seen,
    });
    Vec::new()
}

impl Act for super::BoardResolve<'_> {
    fn title(&self) -> String {
        format!("Resolve the board of {}", self.track)
    }

    fn verb(&self) -> &'static str {
        "Resolve"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        let Some((b, _)) = describe_session(out, self.track, snap) else {
            return;
        };
        out.push(line(
            Danger,
            format!(
                "Predicted verdict now: {}",
                b.predicted.as_deref().unwrap_or("unknown")
            ),
        ));
        for c in items::directors(&b) {
            let v = c
                .vote
                .map(|v| {
                    format!(
                        "{} ({})",
                        v.final_verdict,
                        v.confidence
                            .as_ref()
                            .and_then(|n| n.as_f64())
                            .map(|f| format!("{f:.2}"))
                            .unwrap_or_else(|| "-".into())
                    )
                })
                .unwrap_or_else(|| "abstains".into());
            out.push(line(Dim, format!("  {:<4} {v}", c.director)));
        }
        if *self.force {
            out.push(line(
                Warn,
                "Not every director voted: resolving records them as abstained (forced).",
            ));
        }
        out.push(line(
            Normal,
            "BOARD_RESOLVE is posted and resolution.md written; the session becomes COMPLETE.",
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        board_version(v, self.track, snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .board(self.track, self.seen)?
                .board_resolve(*self.force, OPERATOR)?,
            summary,
            Outcome::Resolve,
        ))
    }

    fn subject(&self) -> String {
        self.track.to_string()
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::board::ResolveResult) -> String {
    format!(
        "board resolved: {}{}",
        r.resolution.outcome.verdict.as_str(),
        if r.resolution.forced { " (forced)" } else { "" }
    )
}
