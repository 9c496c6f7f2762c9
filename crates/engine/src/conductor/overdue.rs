//! When a dispatch waiting in an inbox is overdue: the one rule every reader applies (the console's
//! panes, header and attention list, `pantheon validate`, and whatever counts overdue dispatches).
//!
//! A dispatch in a god's inbox is overdue once it has waited unacknowledged longer than the unacked
//! limit (5 minutes by default); once acked (`accepted`, `pending`) it no longer is. A dispatch held
//! in `_quarantine` waits for an operator, not for the god: it is overdue only after the held limit
//! (30 minutes by default), whatever its ack status says, and never by the unacked limit (nobody can
//! ack a held dispatch). Each dispatch is overdue for one reason at most.

use chrono::{DateTime, Duration, Utc};

use super::model::AckStatus;

/// The default unacked limit: a dispatch unacknowledged this long is overdue.
pub const UNACKED_AFTER: Duration = Duration::minutes(5);

/// The default held limit: a dispatch held for approval this long is overdue.
pub const HELD_AFTER: Duration = Duration::minutes(30);

/// The two limits of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverdueRule {
    /// How long a dispatch in a god's inbox may stay unacknowledged.
    pub unacked_after: Duration,
    /// How long a dispatch may stay held in `_quarantine`.
    pub held_after: Duration,
}

impl Default for OverdueRule {
    fn default() -> Self {
        Self {
            unacked_after: UNACKED_AFTER,
            held_after: HELD_AFTER,
        }
    }
}

/// What an overdue dispatch waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// The god's first ack.
    Ack,
    /// An operator's approval or rejection (the dispatch is held).
    Approval,
}

/// Why one dispatch is overdue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overdue {
    /// What it waits for.
    pub waits: Waits,
    /// How long it has waited.
    pub waited: Duration,
    /// The limit it passed.
    pub limit: Duration,
}

impl std::fmt::Display for Overdue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.waits {
            Waits::Ack => "unacked",
            Waits::Approval => "held for approval",
        };
        write!(
            f,
            "{what} for {} (limit {})",
            short(self.waited),
            short(self.limit)
        )
    }
}

impl OverdueRule {
    /// The limit that applies to a dispatch, or `None` when it cannot become overdue (an acked
    /// dispatch in a god's inbox).
    fn limit(&self, held: bool, ack: &AckStatus) -> Option<(Waits, Duration)> {
        if held {
            Some((Waits::Approval, self.held_after))
        } else if *ack == AckStatus::Unacked {
            Some((Waits::Ack, self.unacked_after))
        } else {
            None
        }
    }

    /// The instant after which the dispatch is overdue (`held`: it lies in `_quarantine`).
    pub fn overdue_from(
        &self,
        held: bool,
        ack: &AckStatus,
        dispatched_at: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let (_, limit) = self.limit(held, ack)?;
        dispatched_at.checked_add_signed(limit)
    }

    /// Whether the dispatch is overdue at `now`, and why.
    pub fn check(
        &self,
        held: bool,
        ack: &AckStatus,
        dispatched_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<Overdue> {
        let (waits, limit) = self.limit(held, ack)?;
        let waited = now.signed_duration_since(dispatched_at?);
        (waited > limit).then_some(Overdue {
            waits,
            waited,
            limit,
        })
    }
}

/// `90s` -> `1m`, `2h05m`, `3d4h`.
fn short(d: Duration) -> String {
    let s = d.num_seconds().unsigned_abs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_dispatches_use_the_held_limit_and_acked_ones_are_never_overdue() {
        let r = OverdueRule::default();
        let t0: DateTime<Utc> = "2026-06-14T10:00:00Z".parse().unwrap();
        let at = |m: i64| t0 + Duration::minutes(m);
        // Unacked in a god's inbox: after 5 minutes.
        assert!(
            r.check(false, &AckStatus::Unacked, Some(t0), at(5))
                .is_none()
        );
        let o = r
            .check(false, &AckStatus::Unacked, Some(t0), at(6))
            .unwrap();
        assert_eq!(o.waits, Waits::Ack);
        assert_eq!(o.to_string(), "unacked for 6m (limit 5m)");
        // Held (its ack status says unacked): not after 5 minutes, after 30.
        assert!(
            r.check(true, &AckStatus::Unacked, Some(t0), at(29))
                .is_none()
        );
        let h = r
            .check(true, &AckStatus::Unacked, Some(t0), at(45))
            .unwrap();
        assert_eq!(h.waits, Waits::Approval);
        assert_eq!(h.to_string(), "held for approval for 45m (limit 30m)");
        assert_eq!(r.overdue_from(true, &AckStatus::Unacked, t0), Some(at(30)));
        // Acked: never.
        assert!(
            r.check(false, &AckStatus::Accepted, Some(t0), at(600))
                .is_none()
        );
        assert_eq!(r.overdue_from(false, &AckStatus::Pending, t0), None);
        // No time: never.
        assert!(r.check(false, &AckStatus::Unacked, None, at(600)).is_none());
    }
}
