//! Protocol settings shared by every process on a root (docs/PROTOCOL.md §1.2): staleness, the lock
//! timeout, the default `ack_wait` and `max_deliveries`. Read once when a [`super::Root`] is built, from
//! built-in defaults, then `conductor/config.yaml` (hostile input: values only, bounded, unknown keys
//! warned), then environment variables; the last one that sets a value wins.

use crate::error::Refusal;
use std::io::Read;
use std::time::Duration;

use rustix::fs::OFlags;
use serde_json::Value;

use super::paths::Root;

/// How long a `RUNNING` or `BLOCKED` worker may stay silent before it is stale, by default.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(600);
/// Default bound on waiting for a protocol lock.
pub(crate) const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// How many deliveries (the first included) a dispatch gets before it is dead-lettered, by default.
pub(crate) const DEFAULT_MAX_DELIVERIES: u32 = 3;
/// Most deliveries any setting may ask for.
pub(crate) const MAX_MAX_DELIVERIES: u32 = 1000;
/// Largest `conductor/config.yaml` read.
pub(crate) const MAX_CONFIG_BYTES: u64 = 64 * 1024;
/// Longest `approvals.ttl` accepted (the approval links' own ceiling, 7 days).
const MAX_LINK_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest lock timeout accepted (a longer wait is a hang, not a timeout).
pub(crate) const MAX_LOCK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Environment variable overriding the staleness threshold, in seconds (fractions allowed).
pub const STALE_AFTER_ENV: &str = "PANTHEON_STALE_AFTER_SECS";
/// Environment variable overriding the lock timeout, in milliseconds.
pub(crate) const LOCK_TIMEOUT_ENV: &str = "PANTHEON_LOCK_TIMEOUT_MS";
/// Environment variable overriding the default `ack_wait` (a duration such as `30s`; `0` or `none`
/// turns the default off).
pub(crate) const ACK_WAIT_ENV: &str = "PANTHEON_ACK_WAIT";
/// Environment variable overriding the default `max_deliveries`.
pub(crate) const MAX_DELIVERIES_ENV: &str = "PANTHEON_MAX_DELIVERIES";

/// The keys `conductor/config.yaml` may hold.
pub(crate) const CONFIG_KEYS: [&str; 9] = [
    "approvals",
    "stale_after",
    "lock_timeout",
    "ack_wait",
    "max_deliveries",
    "check",
    "bridge",
    "history",
    "cost",
];

/// The `history:` mapping: whether `pantheon serve` records (`record`, default true) and the
/// retention bounds (`max_size`, bytes or `512MiB`/`2GiB`, default 1 GiB; `max_age`, a duration,
/// default 30 days).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistorySettings {
    /// `pantheon serve` runs the recorder.
    pub record: bool,
    /// Most bytes the history keeps.
    pub max_bytes: u64,
    /// Oldest history kept.
    pub max_age: Duration,
}

impl Default for HistorySettings {
    fn default() -> Self {
        Self {
            record: true,
            max_bytes: 1024 * 1024 * 1024,
            max_age: Duration::from_secs(30 * 86_400),
        }
    }
}

/// A size given as a number of bytes or with a unit (`512MiB`, `2GiB`, `100MB`, `64KiB`).
fn size_of(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => {
            let s = s.trim();
            let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (num, unit) = s.split_at(split);
            let n: u64 = num.parse().ok()?;
            let mult: u64 = match unit.trim() {
                "" | "B" => 1,
                "KB" => 1000,
                "KiB" | "K" => 1024,
                "MB" => 1000 * 1000,
                "MiB" | "M" => 1024 * 1024,
                "GB" => 1000 * 1000 * 1000,
                "GiB" | "G" => 1024 * 1024 * 1024,
                "TiB" | "T" => 1024u64.pow(4),
                _ => return None,
            };
            n.checked_mul(mult)
        }
        _ => None,
    }
}

/// The protocol settings of one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Silence after which a `RUNNING`/`BLOCKED` worker is stale.
    pub stale_after: Duration,
    /// Bound on waiting for any protocol lock.
    pub lock_timeout: Duration,
    /// `ack_wait` for steps and rules that declare none; `None`: such dispatches have no ack deadline.
    pub ack_wait: Option<Duration>,
    /// `max_deliveries` for steps and rules that declare none.
    pub max_deliveries: u32,
    /// The `check:` mapping: `pantheon check`'s thresholds (read by `health::Thresholds`).
    pub check: Option<Value>,
    /// The `history:` mapping (recording and retention, docs/HISTORY.md).
    pub history: HistorySettings,
    /// `approvals: {ttl: DURATION}`: how long an approval link lives unless told otherwise (`None`:
    /// the built-in 15 minutes); more than 0 s and at most 7 days.
    pub link_ttl: Option<Duration>,
    /// The `cost:` mapping: prices, god and day budgets, the warning share (read and checked by
    /// `cost::CostConfig`, docs/BUDGETS.md; its warnings are not in `warnings`).
    pub cost: Option<Value>,
    /// What was wrong with the config file or the environment (each value ignored, default kept),
    /// but for the `cost:` mapping, which `cost::CostConfig` checks.
    pub warnings: Vec<String>,
    /// Why `conductor/config.yaml` could not be used at all (it does not parse, is too large, is not
    /// a regular file): every setting it holds is at its default, `check:`'s levels included.
    pub config_error: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            stale_after: DEFAULT_STALE_AFTER,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            ack_wait: None,
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            check: None,
            history: HistorySettings::default(),
            link_ttl: None,
            cost: None,
            warnings: Vec::new(),
            config_error: None,
        }
    }
}

/// A duration given as a string (`30s`, `5m`, `1h30m`) or a number of seconds (fractions allowed),
/// positive and at most a year.
fn duration_of(v: &Value) -> Option<Duration> {
    let d = match v {
        Value::String(s) => super::time::parse_duration(s)?,
        Value::Number(n) => {
            let secs = n.as_f64()?;
            if !secs.is_finite() || secs < 0.0 {
                return None;
            }
            Duration::try_from_secs_f64(secs).ok()?
        }
        _ => return None,
    };
    (d <= super::time::MAX_DURATION).then_some(d)
}

fn count_of(v: &Value) -> Option<u32> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_MAX_DELIVERIES).contains(n))
}

impl Settings {
    /// Applies one key of the config file (or of an override); a bad value is a warning, never an error.
    fn apply(&mut self, source: &str, key: &str, v: &Value) {
        let bad = |what: &str| format!("{source}: {key} {v} is not {what}; the default is kept");
        match key {
            "stale_after" => match duration_of(v).filter(|d| !d.is_zero()) {
                Some(d) => self.stale_after = d,
                None => self.warnings.push(bad("a positive duration")),
            },
            "lock_timeout" => match duration_of(v).filter(|d| *d <= MAX_LOCK_TIMEOUT) {
                Some(d) => self.lock_timeout = d,
                None => self.warnings.push(bad("a duration of at most 1h")),
            },
            "ack_wait" => match v {
                Value::Null => self.ack_wait = None,
                Value::String(s) if s.trim() == "none" => self.ack_wait = None,
                _ => match duration_of(v) {
                    Some(d) if d.is_zero() => self.ack_wait = None,
                    Some(d) => self.ack_wait = Some(d),
                    None => self.warnings.push(bad("a duration")),
                },
            },
            "max_deliveries" => match count_of(v) {
                Some(n) => self.max_deliveries = n,
                None => self
                    .warnings
                    .push(bad(&format!("a count from 1 to {MAX_MAX_DELIVERIES}"))),
            },
            // Read by `pantheon bridge` (peers' transport and envelope, docs/NATS.md).
            "bridge" => {}
            "check" => self.check = Some(v.clone()),
            "history" => self.apply_history(source, v),
            "approvals" => self.apply_approvals(source, v),
            // Read and checked by `cost::CostConfig`; `pantheon validate` reports its warnings.
            "cost" => self.cost = Some(v.clone()),
            other => self.warnings.push(format!(
                "{source}: unknown key {other:?} ignored (known: {})",
                CONFIG_KEYS.join(", ")
            )),
        }
    }

    /// Applies the `approvals:` mapping (`ttl`); a bad value is a warning and keeps the default.
    fn apply_approvals(&mut self, source: &str, v: &Value) {
        let Some(m) = v.as_object() else {
            self.warnings.push(format!(
                "{source}: approvals {v} is not a mapping (ttl); the default is kept"
            ));
            return;
        };
        for (k, v) in m {
            match k.as_str() {
                "ttl" => match duration_of(v).filter(|d| !d.is_zero() && *d <= MAX_LINK_TTL) {
                    Some(d) => self.link_ttl = Some(d),
                    None => self.warnings.push(format!(
                        "{source}: approvals.ttl {v} is not a duration from 1s to 7d; the default (15m) is kept"
                    )),
                },
                other => self.warnings.push(format!(
                    "{source}: unknown key approvals.{other} ignored (known: ttl)"
                )),
            }
        }
    }

    /// Applies the `history:` mapping; a bad value is a warning and keeps the default.
    fn apply_history(&mut self, source: &str, v: &Value) {
        let Some(m) = v.as_object() else {
            self.warnings.push(format!(
                "{source}: history {v} is not a mapping (record, max_size, max_age); the defaults are kept"
            ));
            return;
        };
        for (k, v) in m {
            let bad = |what: &str| {
                format!("{source}: history.{k} {v} is not {what}; the default is kept")
            };
            match k.as_str() {
                "record" => match v {
                    Value::Bool(b) => self.history.record = *b,
                    _ => self.warnings.push(bad("true or false")),
                },
                "max_size" => match size_of(v).filter(|n| *n >= 1024 * 1024) {
                    Some(n) => self.history.max_bytes = n,
                    None => self.warnings.push(bad("a size of at least 1MiB (bytes, or 512MiB, 2GiB)")),
                },
                "max_age" => match duration_of(v).filter(|d| !d.is_zero()) {
                    Some(d) => self.history.max_age = d,
                    None => self.warnings.push(bad("a positive duration")),
                },
                other => self.warnings.push(format!(
                    "{source}: unknown key history.{other} ignored (known: record, max_size, max_age)"
                )),
            }
        }
    }

    /// Applies a parsed config document (an object of values).
    pub(crate) fn apply_config(&mut self, source: &str, doc: &Value) {
        match doc {
            Value::Null => {}
            Value::Object(m) => {
                for (k, v) in m {
                    self.apply(source, k, v);
                }
            }
            other => self.warnings.push(format!(
                "{source}: expected a mapping of settings, found {}; ignored",
                super::read::kind(other)
            )),
        }
    }

    /// Applies environment overrides read through `get` (the process environment in
    /// [`Settings::load`], a map in tests).
    pub(crate) fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        if let Some(v) = get(STALE_AFTER_ENV) {
            match v.trim().parse::<f64>() {
                Ok(s) => self.apply(STALE_AFTER_ENV, "stale_after", &serde_json::json!(s)),
                Err(_) => self.warnings.push(format!(
                    "{STALE_AFTER_ENV}={v:?} is not a number of seconds; ignored"
                )),
            }
        }
        if let Some(v) = get(LOCK_TIMEOUT_ENV) {
            match v.trim().parse::<u64>() {
                Ok(ms) => self.apply(
                    LOCK_TIMEOUT_ENV,
                    "lock_timeout",
                    &serde_json::json!(ms as f64 / 1000.0),
                ),
                Err(_) => self.warnings.push(format!(
                    "{LOCK_TIMEOUT_ENV}={v:?} is not a number of milliseconds; ignored"
                )),
            }
        }
        if let Some(v) = get(ACK_WAIT_ENV) {
            self.apply(ACK_WAIT_ENV, "ack_wait", &Value::String(v));
        }
        if let Some(v) = get(MAX_DELIVERIES_ENV) {
            self.apply(MAX_DELIVERIES_ENV, "max_deliveries", &Value::String(v));
        }
    }

    /// The settings of `root`: defaults, then `conductor/config.yaml`, then the environment.
    pub fn load(root: &Root) -> Self {
        let mut s = Self::default();
        match read_config(root) {
            Ok(Some(doc)) => s.apply_config("conductor/config.yaml", &doc),
            Ok(None) => {}
            Err(e) => {
                s.warnings
                    .push(format!("conductor/config.yaml: {e}; defaults used"));
                s.config_error = Some(e.into());
            }
        }
        s.apply_env(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
        s
    }
}

/// Reads and parses `conductor/config.yaml` (never through a link, at most [`MAX_CONFIG_BYTES`]).
pub(crate) fn read_config(root: &Root) -> Result<Option<Value>, Refusal> {
    let path = root.config_path();
    // NONBLOCK: a FIFO planted here must not hang every command that builds a root.
    let file = super::safe::open_file(
        root,
        &path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
    )
    .map_err(|e| e.to_string())?;
    let Some(file) = file else {
        return Ok(None);
    };
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("over {MAX_CONFIG_BYTES} bytes").into());
    }
    super::yaml::parse_bounded(&bytes, 1000).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_as_the_config_is_a_warning_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        std::fs::create_dir_all(root.config_path().parent().unwrap()).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            root.config_path(),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Settings::load(&root));
        });
        let s = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("loading the settings blocked on a FIFO");
        assert_eq!(s.ack_wait, None);
        assert!(
            s.warnings.iter().any(|w| w.contains("not a regular file")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn config_then_env_with_warnings_for_bad_values() {
        let mut s = Settings::default();
        let doc: Value = serde_json::json!({
            "stale_after": "2m", "lock_timeout": 3, "ack_wait": "30s", "max_deliveries": 5,
            "run": "rm -rf /"
        });
        s.apply_config("cfg", &doc);
        assert_eq!(s.stale_after, Duration::from_secs(120));
        assert_eq!(s.lock_timeout, Duration::from_secs(3));
        assert_eq!(s.ack_wait, Some(Duration::from_secs(30)));
        assert_eq!(s.max_deliveries, 5);
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("unknown key \"run\""));
        s.apply_env(|k| match k {
            STALE_AFTER_ENV => Some("1.5".into()),
            ACK_WAIT_ENV => Some("none".into()),
            MAX_DELIVERIES_ENV => Some("0".into()),
            _ => None,
        });
        assert_eq!(s.stale_after, Duration::from_millis(1500));
        assert_eq!(s.ack_wait, None);
        assert_eq!(s.max_deliveries, 5, "0 is refused");
        assert_eq!(s.warnings.len(), 2);
    }

    #[test]
    fn hostile_values_are_bounded() {
        let mut s = Settings::default();
        s.apply_config(
            "cfg",
            &serde_json::json!({"stale_after": -1, "lock_timeout": "1000d",
                "max_deliveries": 99999999999u64, "ack_wait": [1]}),
        );
        assert_eq!(
            s,
            Settings {
                warnings: s.warnings.clone(),
                ..Settings::default()
            }
        );
        assert_eq!(s.warnings.len(), 4);
        let mut t = Settings::default();
        t.apply_config("cfg", &serde_json::json!(["a"]));
        assert_eq!(t.warnings.len(), 1);
    }

    #[test]
    fn the_approvals_ttl_with_its_bounds() {
        let mut s = Settings::default();
        s.apply_config("c", &serde_json::json!({"approvals": {"ttl": "30m"}}));
        assert_eq!(s.link_ttl, Some(Duration::from_secs(1800)));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let mut t = Settings::default();
        t.apply_config(
            "c",
            &serde_json::json!({"approvals": {"ttl": "8d", "x": 1}}),
        );
        assert_eq!(t.link_ttl, None);
        assert_eq!(t.warnings.len(), 2, "{:?}", t.warnings);
        assert!(t.warnings[0].contains("approvals.ttl"), "{:?}", t.warnings);
    }

    #[test]
    fn the_history_mapping_with_defaults_and_bad_values() {
        let mut s = Settings::default();
        assert_eq!(s.history, HistorySettings::default());
        s.apply_config(
            "cfg",
            &serde_json::json!({"history": {"record": false, "max_size": "512MiB", "max_age": "7d"}}),
        );
        assert!(!s.history.record);
        assert_eq!(s.history.max_bytes, 512 * 1024 * 1024);
        assert_eq!(s.history.max_age, Duration::from_secs(7 * 86_400));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let mut t = Settings::default();
        t.apply_config(
            "cfg",
            &serde_json::json!({"history": {"record": "yes", "max_size": 10, "max_age": "forever", "x": 1}}),
        );
        assert_eq!(t.history, HistorySettings::default());
        assert_eq!(t.warnings.len(), 4, "{:?}", t.warnings);
    }
}
