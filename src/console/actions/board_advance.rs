//! Advance a board session to its next phase (`>` on pane 6; `F` forces a phase that is not
//! complete, as `board advance --force`). What the three board acts share (the session as shown,
//! its confirmation's head, the version it is bound to) is here too.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::engine::{Error, TrackName, board::BoardSeen};
use crate::live::snapshot::{BoardView, Snapshot};

use super::super::app::{App, Effect, FlashKind, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items::{self, BoardMoves};
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::shown::Version;
use super::{Act, Op, line};

/// `>` or `F` on the board.
pub(super) fn start(app: &mut App, force_asked: bool) -> Vec<Effect> {
    let Some(b) = BoardAt::selected(app) else {
        return Vec::new();
    };
    let m = &b.moves;
    let Some(to) = m.next else {
        app.flash(
            FlashKind::Error,
            format!("the session is {}: resolve it with s", m.status),
        );
        return Vec::new();
    };
    let force = !m.complete;
    if force && !force_asked {
        app.flash(
            FlashKind::Error,
            format!(
                "the {} phase is not complete ({}); F forces {} -> {to}",
                m.status, m.missing, m.status
            ),
        );
        return Vec::new();
    }
    app.confirm(Op::BoardAdvance {
        track: b.track,
        force,
        seen: b.seen,
    });
    Vec::new()
}

/// The board session a board act starts from: the shown track's, not resolved yet.
pub(super) struct BoardAt {
    pub(super) name: String,
    pub(super) track: TrackName,
    pub(super) moves: BoardMoves,
    /// The session as shown: the engine refuses the act if it moved on before Enter.
    pub(super) seen: Option<BoardSeen>,
}

impl BoardAt {
    /// The shown track's session, or `None` once the operator was told why there is none to act on.
    pub(super) fn selected(app: &mut App) -> Option<BoardAt> {
        let Some(name) = app.track_name() else {
            app.need("a track with a board");
            return None;
        };
        let track = match TrackName::parse(&name) {
            Ok(t) => t,
            Err(e) => {
                app.flash(FlashKind::Error, e.to_string());
                return None;
            }
        };
        let Some(moves) = crate::console::panes::board::board_moves(app) else {
            app.flash(FlashKind::Error, format!("{name} has no board session"));
            return None;
        };
        if let Some(r) = &moves.resolved {
            app.flash(
                FlashKind::Error,
                format!("the session is {r}; nothing is left to do on it"),
            );
            return None;
        }
        let seen = board_of(app.snapshot(), &name).map(|b| BoardSeen::of(&b.session));
        Some(BoardAt {
            name,
            track,
            moves,
            seen,
        })
    }
}

/// The board session of `track` in `snap`.
pub(super) fn board_of(snap: &Snapshot, track: &str) -> Option<Arc<BoardView>> {
    items::track(snap, Some(track)).and_then(|t| t.board.clone())
}

/// The version of a board session a board act is bound to.
pub(super) fn board_version(v: &mut Version, track: &TrackName, snap: &Snapshot) {
    let what = format!("board of {track}");
    match items::track(snap, Some(track.as_str())).and_then(|t| t.board.as_ref()) {
        None => v.push((what, "no session".into())),
        Some(b) => {
            let s = &b.session;
            v.push((format!("{what}: session"), s.session_id.clone()));
            v.push((format!("{what}: phase"), s.status.clone()));
            v.push((
                format!("{what}: rounds closed"),
                s.phases.discuss.rounds.to_string(),
            ));
            v.push((format!("{what}: votes"), b.votes.len().to_string()));
            v.push((
                format!("{what}: assessments"),
                b.assessments.len().to_string(),
            ));
        }
    }
}

/// The head of a board act's confirmation (the session, its phases), and the session with its
/// moves for the rest of the lines (`None`: there is no session; the lines say so).
pub(super) fn describe_session(
    out: &mut Vec<(Tone, String)>,
    track: &TrackName,
    snap: &Snapshot,
) -> Option<(Arc<BoardView>, BoardMoves)> {
    use Tone::*;
    let Some(b) = board_of(snap, track.as_str()) else {
        out.push(line(Warn, format!("{track} has no board session.")));
        return None;
    };
    let s = &b.session;
    let p = &s.phases;
    out.push(line(
        Normal,
        format!(
            "Session {} ({}) is {}.",
            s.session_id, s.checkpoint, s.status
        ),
    ));
    out.push(line(
        Dim,
        format!(
            "assess {}/{} · rounds closed {}/{} · votes {}/{}",
            p.assess.complete,
            p.assess.of,
            p.discuss.rounds,
            p.discuss.max_rounds,
            p.vote.complete,
            p.vote.of
        ),
    ));
    let m = items::board_moves(&b);
    Some((b, m))
}

impl Act for super::BoardAdvance<'_> {
    fn title(&self) -> String {
        if *self.force {
            format!("Force the board of {} to its next phase", self.track)
        } else {
            format!("Advance the board of {}", self.track)
        }
    }

    fn verb(&self) -> &'static str {
        if *self.force {
            "Force advance"
        } else {
            "Advance"
        }
    }

    fn is_destructive(&self) -> bool {
        *self.force
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        let Some((_, m)) = describe_session(out, self.track, snap) else {
            return;
        };
        let to = m.next.unwrap_or("?");
        if !*self.force {
            out.push(line(
                Normal,
                format!("{} -> {to}: the {} phase is complete.", m.status, m.status),
            ));
            return;
        }
        out.push(line(
            Danger,
            format!("{} -> {to} although the phase is not complete.", m.status),
        ));
        out.push(line(Warn, format!("Still missing: {}.", m.missing)));
        out.push(line(
            Normal,
            "The move is recorded as forced by operator (as `board advance --force`).",
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        board_version(v, self.track, snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .board(self.track, self.seen)?
                .board_advance(*self.force, OPERATOR)?,
            summary,
            Outcome::Advance,
        ))
    }

    fn subject(&self) -> String {
        self.track.to_string()
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::board::AdvanceResult) -> String {
    format!(
        "board {} -> {}{}",
        r.from,
        r.to,
        if r.forced { " (forced)" } else { "" }
    )
}
