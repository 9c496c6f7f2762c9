//! Timestamps: written as UTC RFC 3339 with microseconds and `Z`; read in every form foreign writers use.

use chrono::{DateTime, Datelike, NaiveDateTime, SecondsFormat, Utc};

/// A timestamp as the protocol writes it: `2026-06-14T10:30:00.123456Z`.
pub fn format_ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Now, formatted with [`format_ts`].
pub fn now_ts() -> String {
    format_ts(Utc::now())
}

/// Parses any timestamp a foreign writer may leave: any fraction precision, `Z`, `+00:00` or another
/// offset, no zone at all (taken as UTC), and a space instead of `T`. `None` if it is not a time, or
/// not one of the years 0000 to 9999 RFC 3339 can write (a signed year such as `+262142-…` would
/// make a reader's arithmetic on it overflow, and Python cannot read it back).
pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    parse_ts_any(s).filter(|t| (0..=9999).contains(&t.year()))
}

fn parse_ts_any(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    let normalized = s.replacen(' ', "T", 1);
    if let Ok(t) = DateTime::parse_from_rfc3339(&normalized) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(&normalized, fmt) {
            return Some(t.and_utc());
        }
    }
    if let Ok(t) = DateTime::parse_from_str(&normalized, "%Y-%m-%dT%H:%M:%S%.f%z") {
        return Some(t.with_timezone(&Utc));
    }
    None
}

/// Longest duration the engine accepts anywhere (lock TTLs, step timeouts, ETAs): 365 days, so every
/// time computed from one is a valid RFC 3339 instant Python can parse (docs/THREAT-MODEL.md).
pub(crate) const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);

/// Checks `d` against [`MAX_DURATION`], naming `what` in the refusal.
pub(crate) fn check_duration(what: &str, d: std::time::Duration) -> crate::error::Result<()> {
    if d > MAX_DURATION {
        return Err(crate::error::Error::refused(format!(
            "{what} of {}s is longer than the maximum of 365d ({}s); use a shorter one",
            d.as_secs(),
            MAX_DURATION.as_secs()
        )));
    }
    Ok(())
}

/// `t + d`, or `None` when the result is not a time the protocol can write (never panics).
pub(crate) fn add(t: DateTime<Utc>, d: std::time::Duration) -> Option<DateTime<Utc>> {
    let d = chrono::TimeDelta::from_std(d).ok()?;
    t.checked_add_signed(d).filter(|r| r.year_ce().1 <= 9999)
}

/// Parses a duration such as `30s`, `5m`, `2h`, `1d` (also `90` = seconds, `1h30m`). `None` when it is
/// not one or is longer than `MAX_DURATION`.
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    parse_duration_unbounded(s).filter(|d| *d <= MAX_DURATION)
}

/// Parses a duration given as `what` (e.g. `--ttl`), saying whether it is not one or too long.
pub fn parse_duration_checked(what: &str, s: &str) -> crate::error::Result<std::time::Duration> {
    match parse_duration_unbounded(s) {
        // Well formed but past what a u64 of seconds holds: only a number far too long does that.
        None if is_duration_text(s) => Err(crate::error::Error::refused(format!(
            "{what} {s:?} is longer than the maximum of 365d; use a shorter one"
        ))),
        None => {
            let t = s.trim();
            let sub_second =
                t.ends_with("ms") || t.ends_with("us") || t.ends_with("ns") || t.contains('.');
            Err(crate::error::Error::refused(format!(
                "{what} {s:?} is not a duration{}; use whole seconds or units, e.g. 30s, 5m, 2h or \
                 1d (at least 1s, at most 365d)",
                if sub_second {
                    " (durations are whole seconds: no fractions, no ms)"
                } else {
                    ""
                }
            )))
        }
        Some(d) => check_duration(what, d).map(|()| d),
    }
}

/// True when `s` has the shape of a duration (digits, or digit runs each followed by one of `smhdw`),
/// whatever its size.
fn is_duration_text(s: &str) -> bool {
    let s = s.trim();
    if s.is_empty() {
        return false;
    }
    let mut digits = false;
    for b in s.bytes() {
        if b.is_ascii_digit() {
            digits = true;
        } else if b"smhdw".contains(&b) && digits {
            digits = false;
        } else {
            return false;
        }
    }
    // Either all digits, or every unit was preceded by digits and nothing trails.
    !digits || s.bytes().all(|b| b.is_ascii_digit())
}

fn parse_duration_unbounded(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Some(std::time::Duration::from_secs(secs));
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    if !num.is_empty() {
        return None;
    }
    Some(std::time::Duration::from_secs(total))
}

/// The forms a moment takes wherever one is given (`--since`, `--at`, `--from`, `--to`, `--as-of`,
/// the console's `:replay`), as the one error text names them.
pub const MOMENT_FORMS: &str = "give RFC 3339 (2026-06-14T10:30:00Z), now, a duration back from now \
                                (-15m, -1h30m) or a local time today (10:30, 10:30:15)";

/// Parses a moment: RFC 3339 (any form [`parse_ts`] reads), `now`, a duration back from `now`
/// (`-15m`, `-1h30m`, `-90s`), or a local wall-clock time of `now`'s day (`10:30`, `10:30:15`, in
/// the machine's time zone). Every refusal is the same text, naming the forms.
pub fn parse_moment(s: &str, now: DateTime<Utc>) -> crate::error::Result<DateTime<Utc>> {
    parse_moment_in(s, now, &chrono::Local)
}

/// [`parse_moment`] with the time zone of a wall-clock time given (tests use a fixed one).
pub fn parse_moment_in<Tz: chrono::TimeZone>(
    s: &str,
    now: DateTime<Utc>,
    zone: &Tz,
) -> crate::error::Result<DateTime<Utc>> {
    let t = s.trim();
    let not_a_moment = || {
        crate::error::Error::refused(format!(
            "{:?} is not a moment: {MOMENT_FORMS}",
            s.chars().take(80).collect::<String>()
        ))
    };
    if t == "now" {
        return Ok(now);
    }
    if let Some(rel) = t.strip_prefix('-') {
        let d = parse_duration(rel).ok_or_else(not_a_moment)?;
        let d = chrono::TimeDelta::from_std(d).map_err(|_| not_a_moment())?;
        return now.checked_sub_signed(d).ok_or_else(not_a_moment);
    }
    if let Some(clock) = wall_clock(t) {
        let day = now.with_timezone(zone).date_naive();
        return match day.and_time(clock).and_local_timezone(zone.clone()) {
            chrono::LocalResult::Single(at) => Ok(at.with_timezone(&Utc)),
            // A time the clock passes twice (the hour a clock goes back): the first of the two.
            chrono::LocalResult::Ambiguous(first, _) => Ok(first.with_timezone(&Utc)),
            chrono::LocalResult::None => Err(crate::error::Error::refused(format!(
                "{t:?} does not exist today in this time zone (the clock skips it); give RFC 3339"
            ))),
        };
    }
    parse_ts(t).ok_or_else(not_a_moment)
}

/// `HH:MM` or `HH:MM:SS` (one or two digits for the hour), nothing else.
fn wall_clock(s: &str) -> Option<chrono::NaiveTime> {
    let parts: Vec<&str> = s.split(':').collect();
    let field = |p: &str, max: u32, digits: std::ops::RangeInclusive<usize>| {
        (digits.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u32>().ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    let (h, m, sec) = match parts.as_slice() {
        [h, m] => (field(h, 23, 1..=2)?, field(m, 59, 2..=2)?, 0),
        [h, m, sec] => (
            field(h, 23, 1..=2)?,
            field(m, 59, 2..=2)?,
            field(sec, 59, 2..=2)?,
        ),
        _ => return None,
    };
    chrono::NaiveTime::from_hms_opt(h, m, sec)
}

/// "3m ago" style age of an instant relative to `now`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    // Past times count whole seconds elapsed; future ones are rounded to the nearest second, so an
    // ETA typed as "in 2h" (a few microseconds short of it once stored) still reads "in 2h".
    let secs = if t > now {
        ((now - t).num_milliseconds() as f64 / 1000.0).round() as i64
    } else {
        (now - t).num_seconds()
    };
    let (abs, future) = if secs < 0 {
        (-secs, true)
    } else {
        (secs, false)
    };
    let text = if abs < 60 {
        format!("{abs}s")
    } else if abs < 3600 {
        format!("{}m", abs / 60)
    } else if abs < 86_400 {
        format!("{}h", abs / 3600)
    } else {
        format!("{}d", abs / 86_400)
    };
    if future {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_takes_every_form_and_one_error_text() {
        let now = parse_ts("2026-06-14T12:00:00Z").unwrap();
        let zone = chrono::FixedOffset::east_opt(2 * 3600).unwrap();
        let at = |s: &str| parse_moment_in(s, now, &zone);
        assert_eq!(at("now").unwrap(), now);
        assert_eq!(
            at("-15m").unwrap(),
            parse_ts("2026-06-14T11:45:00Z").unwrap()
        );
        assert_eq!(
            at(" -1h30m ").unwrap(),
            parse_ts("2026-06-14T10:30:00Z").unwrap()
        );
        assert_eq!(
            at("2026-06-14T10:30:00Z").unwrap(),
            parse_ts("2026-06-14T10:30:00Z").unwrap()
        );
        // Local wall-clock times of today, in the zone given (UTC+2 here).
        assert_eq!(
            at("10:30").unwrap(),
            parse_ts("2026-06-14T08:30:00Z").unwrap()
        );
        assert_eq!(
            at("9:05:07").unwrap(),
            parse_ts("2026-06-14T07:05:07Z").unwrap()
        );
        assert_eq!(
            at("00:00").unwrap(),
            parse_ts("2026-06-13T22:00:00Z").unwrap()
        );
        for bad in [
            "yesterday",
            "",
            "-",
            "-x",
            "10:60",
            "24:00",
            "10:3",
            "10:30:5",
            "1:2:3:4",
            "-99999999999w",
            "+15m",
            "10h",
            "10:30pm",
        ] {
            let e = at(bad).unwrap_err().to_string();
            assert!(e.ends_with(MOMENT_FORMS), "{bad:?}: {e}");
            assert!(
                e.starts_with(&format!("{:?} is not a moment", bad)),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn parses_every_variant_to_the_same_instant() {
        let want = parse_ts("2026-02-01T12:00:00Z").unwrap();
        for s in [
            "2026-02-01T12:00:00+00:00",
            "2026-02-01T12:00:00",
            "2026-02-01T12:00:00.0Z",
            "2026-02-01T12:00:00.000Z",
            "2026-02-01T12:00:00.000000",
            "2026-02-01 12:00:00",
            "2026-02-01T13:00:00+01:00",
        ] {
            assert_eq!(parse_ts(s), Some(want), "{s}");
        }
        assert!(parse_ts("yesterday").is_none());
    }

    #[test]
    fn years_rfc_3339_cannot_write_are_not_times() {
        for s in [
            "+262142-12-31T23:30:00",
            "+10000-01-01T00:00:00Z",
            "-0001-01-01T00:00:00",
            "-262143-01-01 00:00:00",
        ] {
            assert_eq!(parse_ts(s), None, "{s}");
        }
        // The edges of the range still parse, and a reader may add an hour to the last one.
        let last = parse_ts("9999-12-31T23:59:59.999999Z").unwrap();
        assert!(
            last.checked_add_signed(chrono::TimeDelta::hours(1))
                .is_some()
        );
        assert!(parse_ts("0000-01-01T00:00:00Z").is_some());
    }

    #[test]
    fn precision_is_compared_as_instants() {
        let a = parse_ts("2026-02-01T12:08:20.5Z").unwrap();
        let b = parse_ts("2026-02-01T12:08:20.123Z").unwrap();
        assert!(b < a);
        assert_eq!(format_ts(a), "2026-02-01T12:08:20.500000Z");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap().as_secs(), 30);
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("2h").unwrap().as_secs(), 7200);
        assert_eq!(parse_duration("1d").unwrap().as_secs(), 86400);
        assert_eq!(parse_duration("1h30m").unwrap().as_secs(), 5400);
        assert!(parse_duration("5x").is_none());
        assert!(parse_duration("m").is_none());
        assert_eq!(parse_duration("365d"), Some(MAX_DURATION));
        assert!(parse_duration("366d").is_none());
        assert!(parse_duration("99999999999d").is_none());
        assert!(parse_duration("99999999999999999999d").is_none());
        let err = parse_duration_checked("--ttl", "99999999999d")
            .unwrap_err()
            .to_string();
        assert!(err.contains("longer than the maximum of 365d"), "{err}");
        let err = parse_duration_checked("--ttl", "soon")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a duration"), "{err}");
        // Sub-second and malformed values are "not a duration", never "longer than the maximum".
        for bad in ["300ms", "1.5s", "0.5", "5m30", "-1s", "ms", "1sm", "10 s"] {
            let err = parse_duration_checked("--ttl", bad)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("not a duration") && !err.contains("longer"),
                "{bad}: {err}"
            );
        }
        let err = parse_duration_checked("--ttl", "300ms")
            .unwrap_err()
            .to_string();
        assert!(err.contains("whole seconds"), "{err}");
        assert!(
            parse_duration_checked("--ttl", "99999999999999999999s")
                .unwrap_err()
                .to_string()
                .contains("longer than the maximum")
        );
        assert_eq!(
            parse_duration_checked("--ttl", "1m30s").unwrap().as_secs(),
            90
        );
    }

    proptest::proptest! {
        /// No duration text, and no instant plus any duration, panics; what is accepted stays a time
        /// the protocol can write and parse back.
        #[test]
        fn durations_and_time_arithmetic_never_panic(
            n in proptest::prelude::any::<u64>(),
            unit in proptest::sample::select(vec!["", "s", "m", "h", "d", "w", "x"]),
            secs in proptest::prelude::any::<u64>(),
            nanos in 0u32..1_000_000_000,
            base in -8_000_000_000_000i64..250_000_000_000i64,
        ) {
            let text = format!("{n}{unit}");
            if let Some(d) = parse_duration(&text) {
                proptest::prop_assert!(d <= MAX_DURATION);
                proptest::prop_assert!(check_duration("ttl", d).is_ok());
            }
            let d = std::time::Duration::new(secs, nanos);
            let _ = check_duration("ttl", d);
            if let Some(t) = DateTime::from_timestamp(base, 0)
                && let Some(r) = add(t, d)
            {
                let written = format_ts(r);
                proptest::prop_assert_eq!(parse_ts(&written), Some(r), "{}", written);
            }
            let _ = relative(DateTime::<Utc>::MAX_UTC, DateTime::<Utc>::MIN_UTC);
        }
    }
}
