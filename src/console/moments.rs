//! When time alone will change the attention list: the next instant a dispatch goes overdue, a
//! lock's lease runs out or a worker goes stale, with no file changing. The event loop wakes at
//! that instant (as the supervisor's deadline index does), so an item that comes from time passing
//! is seen, and announced, at its moment rather than on the next one-second tick.

use chrono::{DateTime, Duration, Utc};

use crate::live::snapshot::Snapshot;

/// Wake this long after a moment: the checks compare strictly (`waited > limit`).
pub(crate) const AFTER: Duration = Duration::milliseconds(2);

/// The earliest instant after `now` at which a time-based attention item appears in `s`.
pub(crate) fn next(s: &Snapshot, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut best: Option<DateTime<Utc>> = None;
    let mut consider = |t: DateTime<Utc>| {
        if t > now && best.is_none_or(|b| t < b) {
            best = Some(t);
        }
    };
    // Workflows going overdue: the model's sorted instants when it has them (one binary search).
    match &s.tallies {
        Some(t) => {
            let i = t.overdue_from.partition_point(|at| *at <= now);
            if let Some(at) = t.overdue_from.get(i) {
                consider(*at);
            }
        }
        None => {
            for w in s.workflows.iter() {
                if let Some(at) = s.overdue_from(w) {
                    consider(at);
                }
            }
        }
    }
    let stale_after = Duration::from_std(s.stale_threshold()).unwrap_or(Duration::MAX);
    for t in s.tracks.iter() {
        for l in t.locks.iter() {
            if let Some(at) = l.expires() {
                consider(at);
            }
        }
        for w in t.workers.iter() {
            if w.status.expects_heartbeat()
                && let Some(at) = w
                    .heartbeat()
                    .and_then(|b| b.checked_add_signed(stale_after))
            {
                consider(at);
            }
        }
    }
    best.map(|t| t + AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::LockEntry;
    use crate::live::snapshot::TrackView;
    use std::sync::Arc;

    #[test]
    fn the_next_moment_is_the_earliest_lease_to_run_out() {
        let now: DateTime<Utc> = "2026-06-14T10:00:00Z".parse().unwrap();
        let lock = |path: &str, exp: &str| LockEntry {
            path: path.into(),
            worker_id: Some("w1".into()),
            expires_at: Some(exp.into()),
            ..LockEntry::default()
        };
        let track = TrackView {
            name: "t1".into(),
            locks: Arc::new(vec![
                lock("a", "2026-06-14T10:05:00Z"),
                lock("b", "2026-06-14T10:00:03Z"),
                lock("c", "2026-06-14T09:59:00Z"),
            ]),
            ..TrackView::default()
        };
        let s = Snapshot {
            tracks: Arc::new(vec![Arc::new(track)]),
            ..Snapshot::default()
        };
        let at: DateTime<Utc> = "2026-06-14T10:00:03Z".parse().unwrap();
        assert_eq!(next(&s, now), Some(at + AFTER));
        assert_eq!(next(&s, "2026-06-14T10:06:00Z".parse().unwrap()), None);
    }
}
