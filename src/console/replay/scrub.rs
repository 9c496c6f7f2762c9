//! The scrub line's arithmetic, pure: where a step lands, how fast playback goes, how far the
//! played moment moves in a stretch of real time, how long to wait for the next change, and how
//! the header writes the moment.

use std::time::Duration;

/// The playback speeds, slowest first (`-` and `+` move along them).
pub(crate) const SPEEDS: [u32; 6] = [1, 2, 5, 10, 20, 50];

/// While playing, the moment shown moves at least this often (the header's clock), even when no
/// change falls due.
pub(crate) const PLAY_TICK: Duration = Duration::from_millis(250);

/// Where the replay stands and how it plays: what the header and the scrub line show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayView {
    /// The position: every change numbered below it is applied.
    pub pos: u64,
    /// The first position (the oldest checkpoint kept).
    pub first: u64,
    /// The last position (every recorded change applied).
    pub end: u64,
    /// The moment shown (microseconds): the last change's time, or later while playing.
    pub moment_us: i64,
    /// The history's first and last moments (microseconds).
    pub first_us: i64,
    pub last_us: i64,
    pub playing: bool,
    /// Index into [`SPEEDS`].
    pub speed: usize,
    /// What the last change applied did (`put conductor/state/wf_x.json`; a journal entry in its
    /// own words, `ack accepted wf_x by ops`).
    pub change: Option<String>,
    /// Whether stepping stops at the supervisors' heartbeats too (off: `,` `.` step act by act).
    pub heartbeats: bool,
    /// While the first moment is still being laid out: the files shown so far and in all (a large
    /// root's first screen comes before the whole moment is read, as the live one's does).
    pub loading: Option<(usize, usize)>,
    /// The root the history belongs to: a path inside the scratch root the moment is laid out in
    /// is shown inside it (`App::shown_text`). `None` in views built without a replay.
    pub recorded: Option<std::path::PathBuf>,
}

impl ReplayView {
    /// A view standing at `pos` of `first..=end`, paused at 1x.
    pub fn new(pos: u64, first: u64, end: u64) -> Self {
        Self {
            pos: pos.clamp(first, end.max(first)),
            first,
            end: end.max(first),
            moment_us: 0,
            first_us: 0,
            last_us: 0,
            playing: false,
            speed: 0,
            change: None,
            heartbeats: false,
            loading: None,
            recorded: None,
        }
    }

    /// The position `delta` changes away, kept inside the timeline.
    pub fn step_target(&self, delta: i64) -> u64 {
        let to = if delta < 0 {
            self.pos.saturating_sub(delta.unsigned_abs())
        } else {
            self.pos.saturating_add(delta.unsigned_abs())
        };
        to.clamp(self.first, self.end)
    }

    /// The playback speed (1 to 50 times real time).
    pub fn speed(&self) -> u32 {
        SPEEDS[self.speed.min(SPEEDS.len() - 1)]
    }

    /// One speed up; false at the fastest.
    pub fn faster(&mut self) -> bool {
        let up = self.speed + 1 < SPEEDS.len();
        if up {
            self.speed += 1;
        }
        up
    }

    /// One speed down; false at the slowest.
    pub fn slower(&mut self) -> bool {
        let down = self.speed > 0;
        if down {
            self.speed -= 1;
        }
        down
    }

    /// The moment playback reaches after `elapsed` of real time at the current speed.
    pub fn advanced(&self, elapsed: Duration) -> i64 {
        let us = elapsed.as_micros().saturating_mul(u128::from(self.speed()));
        self.moment_us
            .saturating_add(i64::try_from(us).unwrap_or(i64::MAX))
    }

    /// How long playback waits before it looks again: until the next change falls due at the
    /// current speed, at most [`PLAY_TICK`] (so the clock moves); zero when it is due already.
    pub fn wait_for(&self, next_change_us: Option<i64>) -> Duration {
        let Some(next) = next_change_us else {
            return PLAY_TICK;
        };
        let gap = u64::try_from(next.saturating_sub(self.moment_us)).unwrap_or(0);
        Duration::from_micros(gap / u64::from(self.speed())).min(PLAY_TICK)
    }

    /// True at the last position.
    pub fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    /// The change number the header shows (1-based from the first kept) and how many there are.
    pub fn counter(&self) -> (u64, u64) {
        (self.pos - self.first, self.end - self.first)
    }
}

/// How long before `now_us` the moment `at_us` was, as the header writes it: `-1h12m`, `-4m05s`,
/// `-12s`, `now`.
pub(crate) fn ago(now_us: i64, at_us: i64) -> String {
    let secs = now_us.saturating_sub(at_us) / 1_000_000;
    if secs <= 0 {
        return "now".into();
    }
    let (d, h, m, s) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("-{d}d{h:02}h")
    } else if h > 0 {
        format!("-{h}h{m:02}m")
    } else if m > 0 {
        format!("-{m}m{s:02}s")
    } else {
        format!("-{s}s")
    }
}

/// A bar of `width` cells with the share `done` of `total` filled and the rest ruled.
pub(crate) fn bar(done: u64, total: u64, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let filled = if total == 0 {
        width
    } else {
        let w = u128::try_from(width).unwrap_or(u128::MAX);
        usize::try_from(u128::from(done.min(total)) * w / u128::from(total)).unwrap_or(width)
    };
    let mut s = "━".repeat(filled.min(width));
    if filled < width {
        s.push('●');
        s.push_str(&"─".repeat(width - filled - 1));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_stay_inside_the_timeline() {
        let v = ReplayView::new(5, 2, 9);
        assert_eq!(v.step_target(1), 6);
        assert_eq!(v.step_target(-1), 4);
        assert_eq!(v.step_target(-10), 2, "clamped at the first position");
        assert_eq!(v.step_target(100), 9, "clamped at the last");
        assert_eq!(v.step_target(i64::MIN), 2);
        assert_eq!(v.step_target(i64::MAX), 9);
        assert_eq!(ReplayView::new(0, 2, 9).pos, 2);
        assert_eq!(ReplayView::new(20, 2, 9).pos, 9);
        assert_eq!(v.counter(), (3, 7));
        assert!(!v.at_end());
        assert!(ReplayView::new(9, 2, 9).at_end());
    }

    #[test]
    fn speeds_run_from_one_to_fifty_and_stop_at_both_ends() {
        let mut v = ReplayView::new(0, 0, 1);
        assert_eq!(v.speed(), 1);
        assert!(!v.slower());
        let mut seen = vec![v.speed()];
        while v.faster() {
            seen.push(v.speed());
        }
        assert_eq!(seen, SPEEDS);
        assert_eq!(v.speed(), 50);
        assert!(v.slower());
        assert_eq!(v.speed(), 20);
    }

    #[test]
    fn playback_moves_the_moment_by_real_time_times_the_speed() {
        let mut v = ReplayView::new(0, 0, 10);
        v.moment_us = 1_000_000;
        assert_eq!(v.advanced(Duration::from_millis(500)), 1_500_000);
        v.speed = 3; // 10x
        assert_eq!(v.advanced(Duration::from_millis(500)), 6_000_000);
        // A change 2 s of history away is due in 200 ms at 10x; one 20 ms away in 2 ms.
        assert_eq!(v.wait_for(Some(3_000_000)), Duration::from_millis(200));
        assert_eq!(v.wait_for(Some(1_020_000)), Duration::from_millis(2));
        // Further than a tick: the clock still moves every tick; a past change is due now.
        assert_eq!(v.wait_for(Some(60_000_000)), PLAY_TICK);
        assert_eq!(v.wait_for(Some(0)), Duration::ZERO);
        assert_eq!(v.wait_for(None), PLAY_TICK);
        v.moment_us = i64::MAX - 1;
        assert_eq!(v.advanced(Duration::from_secs(10)), i64::MAX);
    }

    #[test]
    fn the_header_writes_how_long_ago() {
        let s = 1_000_000;
        assert_eq!(ago(100 * s, 100 * s), "now");
        assert_eq!(ago(100 * s, 200 * s), "now");
        assert_eq!(ago(100 * s, 88 * s), "-12s");
        assert_eq!(ago(1000 * s, 755 * s), "-4m05s");
        assert_eq!(ago(10_000 * s, 10_000 * s - 4_320 * s), "-1h12m");
        assert_eq!(ago(200_000 * s, 200_000 * s - 90_000 * s), "-1d01h");
    }

    #[test]
    fn the_bar_fills_with_the_position() {
        assert_eq!(bar(0, 10, 5), "●────");
        assert_eq!(bar(5, 10, 6), "━━━●──");
        assert_eq!(bar(10, 10, 4), "━━━━");
        assert_eq!(bar(0, 0, 3), "━━━");
        assert_eq!(bar(3, 10, 0), "");
        assert_eq!(bar(u64::MAX, u64::MAX, 3), "━━━");
    }
}
