//! How times read in the panes and dialogs: relative to now, or absolute in local time.

use crate::engine::time::{parse_ts, relative};
use chrono::{DateTime, Utc};

use crate::live::snapshot::Stamp;

/// Formats an instant relative to now, or absolute in local time: `HH:MM:SS` on the same local
/// day as now, with the date before it otherwise.
pub(crate) fn when(ts: Option<&str>, now: DateTime<Utc>, absolute: bool) -> String {
    match ts.and_then(parse_ts) {
        Some(t) => when_time(t, now, absolute),
        None => ts.map(|s| format!("{s}?")).unwrap_or_else(|| "-".into()),
    }
}

/// [`when`] of a time a compact row keeps (parsed once when its file was read).
pub(crate) fn when_at(ts: Option<&Stamp>, now: DateTime<Utc>, absolute: bool) -> String {
    match ts {
        Some(Stamp::At(t)) => when_time(*t, now, absolute),
        Some(Stamp::Unparsed(s)) => format!("{s}?"),
        None => "-".into(),
    }
}

/// A parsed time as [`when`] shows it.
fn when_time(t: DateTime<Utc>, now: DateTime<Utc>, absolute: bool) -> String {
    if !absolute {
        return relative(t, now);
    }
    let (t, today) = (
        t.with_timezone(&chrono::Local),
        now.with_timezone(&chrono::Local),
    );
    if t.date_naive() == today.date_naive() {
        t.format("%H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    }
}
