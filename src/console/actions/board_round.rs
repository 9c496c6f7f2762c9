//! Close the board's discussion round (`n` on pane 6): the next one begins, or, after the last,
//! the discussion phase is complete.

use chrono::{DateTime, Utc};

use crate::engine::{Error, board::DISCUSSING};
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Effect, FlashKind, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::shown::Version;
use super::board_advance::{BoardAt, board_version, describe_session};
use super::{Act, Op, line};

/// `n` on the board.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    let Some(b) = BoardAt::selected(app) else {
        return Vec::new();
    };
    if b.moves.round.is_none() {
        let why = if b.moves.status == DISCUSSING {
            "all discussion rounds are closed; advance with >".to_owned()
        } else {
            format!(
                "rounds are for DISCUSSING sessions; this one is {}",
                b.moves.status
            )
        };
        app.flash(FlashKind::Error, why);
        return Vec::new();
    }
    app.confirm(Op::BoardNextRound {
        track: b.track,
        seen: b.seen,
    });
    Vec::new()
}

impl Act for super::BoardNextRound<'_> {
    fn title(&self) -> String {
        format!("Next discussion round on {}", self.track)
    }

    fn verb(&self) -> &'static str {
        "Next round"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        let Some((_, m)) = describe_session(out, self.track, snap) else {
            return;
        };
        out.push(line(
            Tone::Normal,
            match m.round {
                Some((cur, max)) if cur >= max => format!(
                    "Discussion round {cur} of {max}, the last, will be closed: the discussion phase is then complete (advance with >)."
                ),
                Some((cur, max)) => format!(
                    "Discussion round {cur} of {max} will be closed; round {} begins.",
                    cur + 1
                ),
                None => "No discussion round is open: the engine will refuse.".to_owned(),
            },
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        board_version(v, self.track, snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .board(self.track, self.seen)?
                .board_next_round(OPERATOR)?,
            summary,
            Outcome::Round,
        ))
    }

    fn subject(&self) -> String {
        self.track.to_string()
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::board::WriteResult) -> String {
    let d = &r.phases.discuss;
    if d.rounds >= d.max_rounds {
        format!(
            "discussion round {} of {} closed: the last one (advance with >)",
            d.rounds, d.max_rounds
        )
    } else {
        format!(
            "discussion round {} closed; round {} of {} begins",
            d.rounds,
            d.rounds.saturating_add(1),
            d.max_rounds
        )
    }
}
