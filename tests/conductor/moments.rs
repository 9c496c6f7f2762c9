//! One time syntax (docs: README, "Install"): every flag that takes a moment (`--since`, `--at`,
//! `--from`, `--to`, `--as-of`) takes RFC 3339, `now`, a duration back from now and a local
//! `HH:MM[:SS]` of today, read by one parser with one error text; a bad one is bad usage (exit 2).

use chrono::{DateTime, Duration as Delta, Utc};
use serde_json::Value;

use crate::common::*;

/// The one error text, after the value.
const FORMS: &str = "is not a moment: give RFC 3339 (2026-06-14T10:30:00Z), now, a duration back \
                     from now (-15m, -1h30m) or a local time today (10:30, 10:30:15)";

/// Runs on `env` in the time zone `tz` (a POSIX TZ value).
fn run_tz(env: &Env, tz: &str, args: &[&str]) -> std::process::Output {
    env.command(args).env("TZ", tz).output().unwrap()
}

fn json_ok(env: &Env, tz: &str, args: &[&str]) -> Value {
    let out = run_tz(env, tz, args);
    assert!(
        out.status.success(),
        "pantheon {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ts(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn cost_since_takes_every_form() {
    let env = Env::new();
    let since = |v: &str| ts(&json_ok(&env, "UTC", &["cost", "--since", v, "--json"])["since"]);
    let near = |t: DateTime<Utc>, want: DateTime<Utc>| (t - want).num_seconds().abs() <= 60;
    assert!(near(since("-1h"), Utc::now() - Delta::hours(1)));
    assert!(near(since("-1h30m"), Utc::now() - Delta::minutes(90)));
    assert!(near(since("now"), Utc::now()));
    assert_eq!(
        since("2026-06-14T10:30:00Z").to_rfc3339(),
        "2026-06-14T10:30:00+00:00"
    );
    // A local time of today, in the machine's time zone: UTC, then UTC+2 (POSIX writes it UTC-2).
    let today = Utc::now().date_naive();
    assert_eq!(
        since("10:30"),
        today.and_hms_opt(10, 30, 0).unwrap().and_utc()
    );
    assert_eq!(
        since("9:05:07"),
        today.and_hms_opt(9, 5, 7).unwrap().and_utc()
    );
    let plus2 = (Utc::now() + Delta::hours(2)).date_naive();
    let v = json_ok(&env, "UTC-2", &["cost", "--since", "10:30", "--json"]);
    assert_eq!(
        ts(&v["since"]),
        plus2.and_hms_opt(8, 30, 0).unwrap().and_utc(),
        "10:30 at UTC+2 is 08:30Z"
    );
}

#[test]
fn journal_and_bus_since_take_relative_and_local_times() {
    let env = Env::dispatched("wf_moment_1", "hof_20260614_mm0001");
    let count = |args: &[&str]| json_ok(&env, "UTC", args)["count"].as_u64().unwrap();
    // The submit is journaled now: in the last 5 minutes, not after now.
    assert!(count(&["journal", "--since", "-5m"]) >= 1);
    assert_eq!(count(&["journal", "--since", "now"]), 0);
    assert!(count(&["journal", "--since", "00:00"]) >= 1);
    env.ok(&["bus", "--track", "main", "init"], None);
    env.ok(
        &[
            "bus", "--track", "main", "post", "PROGRESS", "--source", "worker-1",
        ],
        None,
    );
    let read = |since: &str| {
        json_ok(
            &env,
            "UTC",
            &["bus", "--track", "main", "read", "--since", since],
        )["messages"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(read("-5m"), 1);
    assert_eq!(read("now"), 0);
    assert_eq!(read("00:00"), 1);
}

#[test]
fn replay_rerun_and_the_console_parse_their_moments_before_reading_history() {
    let env = Env::new();
    // Parsed, then refused for what the root lacks (no history): exit 1, never a moment error.
    for args in [
        &["replay", "--at", "-15m"][..],
        &["replay", "--at", "10:30"],
        &["replay", "--at", "now"],
        &["replay", "--from", "-1h", "--to", "now"],
        &["replay", "--from", "09:00", "--to", "10:30:15"],
        &["rerun", "wf_none", "--from", "research", "--as-of", "-15m"],
        &["rerun", "wf_none", "--from", "research", "--as-of", "10:30"],
        &["--at", "-15m"],
        &["--at", "10:30"],
    ] {
        let out = run_tz(&env, "UTC", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "pantheon {args:?}: {err}");
        assert!(!err.contains("is not a moment"), "pantheon {args:?}: {err}");
    }
}

#[test]
fn a_bad_moment_is_bad_usage_with_one_error_text_for_every_flag() {
    let env = Env::new();
    for args in [
        &["cost", "--since", "yesterday"][..],
        &["journal", "--since", "yesterday"],
        &["bus", "--track", "main", "read", "--since", "yesterday"],
        &["replay", "--at", "yesterday"],
        &["replay", "--from", "yesterday", "--to", "now"],
        &["replay", "--from", "-1h", "--to", "yesterday"],
        &[
            "rerun",
            "wf_x",
            "--from",
            "research",
            "--as-of",
            "yesterday",
        ],
        &["--at", "yesterday"],
    ] {
        let out = run_tz(&env, "UTC", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "pantheon {args:?}: {err}");
        assert!(
            err.contains(&format!("\"yesterday\" {FORMS}")),
            "pantheon {args:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
    // Values that look like a moment but are not one get the same text.
    for bad in ["25:00", "10:61", "-15x", "+15m"] {
        let out = run_tz(&env, "UTC", &["cost", "--since", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(&format!("{bad:?} {FORMS}")), "{bad}: {err}");
    }
}
