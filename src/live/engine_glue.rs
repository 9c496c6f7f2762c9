//! The engine functions the live model leans on, in one place: queue reading from an offset,
//! the discussion reader, the current board session, deadlock detection and the resolve rule all
//! come from `engine::bus`.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::engine::{
    Assessment, BoardSession, Bus, DiscussionLine, Envelope, Error, LockEntry, Root, TrackName,
    Vote, WorkerEntry,
    board::{self, QUICK_REVIEW, quick_review_rule, resolve_rule},
    detect_deadlocks,
    queue::LastRead,
};

/// Reads the complete lines appended at or after `offset`, up to the first line end past
/// `max_bytes` (writers faster than a starved model never keep it reading): the last `keep`
/// messages in full, the timestamps of those before (`queue::read_last_upto`).
pub(crate) fn read_queue(
    path: &Path,
    offset: u64,
    max_bytes: u64,
    keep: usize,
) -> Result<LastRead, Error> {
    crate::engine::queue::read_last_upto(path, offset, max_bytes, keep)
}

/// Reads `discussion.jsonl` (`bus::board::read_discussion`): the lines and how many were skipped.
pub(crate) fn read_discussion(path: &Path) -> Result<(Vec<DiscussionLine>, usize), Error> {
    board::read_discussion(path)
}

/// The current board session of a track, chosen by the engine's rule.
pub(crate) fn current_session(root: &Root, track: &str) -> Result<Option<BoardSession>, Error> {
    let track = TrackName::parse(track)?;
    let bus = Bus::open(root, &track);
    board::current_session(&bus)
}

/// The wait-for cycles among a track's workers, each as a readable chain (`detect_deadlocks`), and
/// for each cycle the paths of the locks in it (the resources waited for that are locked).
pub(crate) fn deadlocks(
    messages: &[Arc<Envelope>],
    locks: &[LockEntry],
    workers: &[WorkerEntry],
    now: DateTime<Utc>,
) -> (Vec<String>, Vec<Vec<String>>) {
    // The engine takes owned envelopes; copying the whole buffer on every append would cost
    // milliseconds, so it is only done when some worker is blocked at all.
    if !messages.iter().any(|m| m.kind == "BLOCKED") {
        return (Vec::new(), Vec::new());
    }
    let owned: Vec<Envelope> = messages.iter().map(|m| (**m).clone()).collect();
    let norm = |p: &str| crate::engine::normalize_lock_key(p).unwrap_or_else(|_| p.to_owned());
    detect_deadlocks(&owned, locks, workers, now)
        .cycles
        .into_iter()
        .map(|c| {
            let mut parts = Vec::new();
            for (w, r) in c.workers.iter().zip(c.resources.iter()) {
                parts.push(format!("{w} waits for {r}"));
            }
            let held: Vec<String> = c
                .resources
                .iter()
                .filter_map(|r| {
                    locks
                        .iter()
                        .find(|l| norm(&l.path) == norm(r))
                        .map(|l| l.path.clone())
                })
                .collect();
            (parts.join(" → "), held)
        })
        .unzip()
}

/// The verdict the resolve rule (or the quick-review rule) would give now.
pub(crate) fn predicted_verdict(
    session: &BoardSession,
    assessments: &[(String, Assessment)],
    votes: &[(String, Vote)],
) -> Option<String> {
    if session.directors.is_empty() {
        return None;
    }
    let outcome = if session.checkpoint == QUICK_REVIEW {
        quick_review_rule(&session.directors, assessments)
    } else {
        resolve_rule(&session.directors, votes)
    };
    Some(outcome.verdict.as_str().to_owned())
}
