//! The five-director board deliberation (docs/PROTOCOL.md §4): sessions move `ASSESSING → DISCUSSING → VOTING →
//! RESOLVING → COMPLETE`; every write is phase-checked, holds `.lock_mutex` and posts its `BOARD_*`
//! message. [`resolve_rule`] and [`quick_review_rule`] are pure, so the console can show the predicted
//! verdict before anyone resolves.
//!
//! - `rules`: the rules as pure functions (verdicts, phase order, input checks) with their exhaustive tests;
//! - `session`: the session files of `board/` (find, load, save, archive, the discussion);
//! - `ops`: the operations on a track (`Bus::board_*`), their inputs and results;
//! - `report`: the resolution (stored, posted, read back) and `resolution.md`.

pub(crate) mod ops;
pub(crate) mod report;
pub(crate) mod rules;
pub(crate) mod session;

pub(crate) use super::vocab::DEFAULT_DIRECTORS;
use super::vocab::{Checkpoint, PhaseStatus, SessionStatus};
pub(crate) use ops::{AdvanceResult, ResolveResult};
pub(crate) use session::{BoardSeen, current_session};

/// Session statuses as string constants for `match` on a tolerant record's field, derived from
/// `SessionStatus` (spelled there once).
pub const ASSESSING: &str = SessionStatus::Assessing.as_str();
/// See `SessionStatus::Discussing`.
pub const DISCUSSING: &str = SessionStatus::Discussing.as_str();
/// See `SessionStatus::Voting`.
pub const VOTING: &str = SessionStatus::Voting.as_str();
/// See [`SessionStatus::Resolving`].
pub(crate) const RESOLVING: &str = SessionStatus::Resolving.as_str();
/// See `SessionStatus::Complete`.
pub const COMPLETE: &str = SessionStatus::Complete.as_str();
/// See `Checkpoint::QuickReview`.
pub const QUICK_REVIEW: &str = Checkpoint::QuickReview.as_str();
/// See [`PhaseStatus::Skipped`].
pub(crate) const PHASE_SKIPPED: &str = PhaseStatus::Skipped.as_str();
