//! The bus's on-disk records as tolerant types: every field may be missing or of an odd type (foreign
//! Python writers), unknown fields are kept in `extra`, and nothing here fails on a well-formed JSON
//! object. Writers use these types too, so what we write is what we read.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::vocab::{PhaseStatus, WORKER_COMPLETED_ALIAS, WorkerWord};
use crate::store::time::parse_ts;

/// Lenient field parsers: a wrong type degrades to "missing" instead of failing the whole record.
pub(crate) mod lenient {
    use super::*;
    use serde::Deserializer;

    /// A string; numbers and booleans are stringified; anything else is empty.
    pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(opt_string(d)?.unwrap_or_default())
    }

    /// An optional string; numbers and booleans are stringified; null, arrays and objects are `None`.
    pub(crate) fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(value_to_string(&Value::deserialize(d)?))
    }

    /// The text form of a scalar value.
    pub(crate) fn value_to_string(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// A number; a numeric string is parsed; anything else is `None`.
    pub(crate) fn opt_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Number>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Number(n) => Some(n),
            Value::String(s) => {
                let s = s.trim().trim_end_matches('%');
                s.parse::<i64>()
                    .ok()
                    .map(Number::from)
                    .or_else(|| s.parse::<f64>().ok().and_then(Number::from_f64))
            }
            _ => None,
        })
    }

    /// A list of strings; a single string is a one-item list; non-string items are shown as compact JSON.
    pub(crate) fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Array(items) => items
                .iter()
                .map(|v| value_to_string(v).unwrap_or_else(|| v.to_string()))
                .collect(),
            Value::String(s) => vec![s],
            _ => Vec::new(),
        })
    }

    /// A boolean; `"true"`/`"false"`, `"yes"`/`"no"` and 0/1 are accepted.
    pub(crate) fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Bool(b) => Some(b),
            Value::Number(n) => n.as_f64().map(|f| f != 0.0),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Some(true),
                "false" | "no" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        })
    }

    /// A boolean, false when missing or unreadable.
    pub(crate) fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(opt_bool(d)?.unwrap_or(false))
    }

    /// A non-negative integer; floats are truncated; anything else is 0.
    pub(crate) fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        Ok(opt_u32(d)?.unwrap_or(0))
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Ok(opt_number(d)?
            .and_then(|n| n.as_f64())
            .filter(|f| *f >= 0.0)
            .map(|f| f.min(u32::MAX as f64) as u32))
    }

    /// A list of strings (names); non-strings are dropped.
    pub(crate) fn names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Array(items) => items.iter().filter_map(value_to_string).collect(),
            _ => Vec::new(),
        })
    }
}

/// Parses a tolerant record from a JSON value; `None` only when it is not an object.
pub(crate) fn from_object<T: for<'de> Deserialize<'de>>(v: &Value) -> Option<T> {
    if !v.is_object() {
        return None;
    }
    serde_json::from_value(v.clone()).ok()
}

/// One message on the bus (docs/PROTOCOL.md §3.2): `{id, type, source, timestamp, payload}`, extra fields kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Envelope {
    /// The message's id (unique per queue; written by the poster).
    #[serde(default, deserialize_with = "lenient::string")]
    pub id: String,
    /// The message type (`PROGRESS`, `BOARD_VOTE`, or any other upper-case name).
    #[serde(rename = "type", default, deserialize_with = "lenient::string")]
    pub kind: String,
    /// Who posted it (a worker, director or `operator`).
    #[serde(default, deserialize_with = "lenient::string")]
    pub source: String,
    /// The timestamp exactly as written; compare with [`Envelope::instant`], never as a string.
    #[serde(default, deserialize_with = "lenient::string")]
    pub timestamp: String,
    /// The type-specific body.
    #[serde(default)]
    pub payload: Value,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Envelope {
    /// The parsed instant of `timestamp`, if it is a time.
    pub fn instant(&self) -> Option<DateTime<Utc>> {
        parse_ts(&self.timestamp)
    }

    /// A string field of the payload (`task_id`, `filepath`, …).
    pub(crate) fn payload_str(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
    }

    /// Parses one queue line; `None` for anything that is not a JSON object.
    pub(crate) fn parse_line(line: &[u8]) -> Option<Self> {
        let v: Value = serde_json::from_slice(line).ok()?;
        if !v.is_object() {
            return None;
        }
        serde_json::from_value(v).ok()
    }
}

/// One entry of `locks.json`, read from an object or from a bare string (a holder without expiry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LockEntry {
    /// The lock key (a file path relative to the project).
    #[serde(default)]
    pub path: String,
    /// The holder; `None` for an entry a foreign writer left without one.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub worker_id: Option<String>,
    /// When the lease was taken, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub acquired_at: Option<String>,
    /// `None` means "no expiry" (a bare-string entry or a foreign writer that left it out).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub expires_at: Option<String>,
    /// `exclusive` or `shared`, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub lock_type: Option<String>,
    /// True when the file held a bare string rather than an object.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare: bool,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl LockEntry {
    /// Reads the entry stored under `path`: an object, a bare string (the holder), or anything else
    /// (an entry with no holder).
    pub fn from_value(path: &str, v: &Value) -> Self {
        let mut e = match v {
            Value::String(holder) => LockEntry {
                worker_id: Some(holder.clone()),
                bare: true,
                ..Default::default()
            },
            Value::Object(_) => from_object(v).unwrap_or_default(),
            _ => LockEntry::default(),
        };
        e.extra.remove("path");
        e.extra.remove("bare");
        e.path = path.to_owned();
        e
    }

    /// The object written to `locks.json` for this entry (no `path`, no `bare`).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(w) = &self.worker_id {
            m.insert("worker_id".into(), w.clone().into());
        }
        if let Some(t) = &self.acquired_at {
            m.insert("acquired_at".into(), t.clone().into());
        }
        if let Some(t) = &self.expires_at {
            m.insert("expires_at".into(), t.clone().into());
        }
        if let Some(t) = &self.lock_type {
            m.insert("lock_type".into(), t.clone().into());
        }
        for (k, v) in &self.extra {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }

    /// The parsed expiry; `None` when there is none or it is not a time.
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        self.expires_at.as_deref().and_then(parse_ts)
    }

    /// The parsed acquisition time.
    pub fn acquired(&self) -> Option<DateTime<Utc>> {
        self.acquired_at.as_deref().and_then(parse_ts)
    }

    /// True when the lease has run out. An entry without a readable expiry never expires.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires().is_some_and(|t| t <= now)
    }

    /// True when someone holds it and it has not expired.
    pub(crate) fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.worker_id.is_some() && !self.is_expired(now)
    }
}

/// Parses every entry of a `locks.json` object, sorted by path.
pub fn parse_locks(map: &Map<String, Value>) -> Vec<LockEntry> {
    let mut v: Vec<LockEntry> = map
        .iter()
        .map(|(k, v)| LockEntry::from_value(k, v))
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

/// A worker's state (docs/PROTOCOL.md §3.5); `COMPLETED` is read as `COMPLETE`, unknown words are kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum WorkerStatus {
    /// Working; expects heartbeats (the default).
    #[default]
    Running,
    /// Done (`COMPLETED` reads as this too).
    Complete,
    /// Gave up.
    Failed,
    /// Waiting on a lock or another task; still expects heartbeats.
    Blocked,
    /// A word this engine does not know, kept as written.
    Other(String),
}

impl WorkerStatus {
    /// Parses a status word (case-insensitive; `COMPLETED` is `COMPLETE`).
    pub fn parse(s: &str) -> Self {
        if s.trim().eq_ignore_ascii_case(WORKER_COMPLETED_ALIAS) {
            return Self::Complete;
        }
        match WorkerWord::parse_loose(s) {
            Some(WorkerWord::Running) => Self::Running,
            Some(WorkerWord::Complete) => Self::Complete,
            Some(WorkerWord::Failed) => Self::Failed,
            Some(WorkerWord::Blocked) => Self::Blocked,
            None => Self::Other(s.to_owned()),
        }
    }

    /// The word written on disk.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Running => WorkerWord::Running.as_str(),
            Self::Complete => WorkerWord::Complete.as_str(),
            Self::Failed => WorkerWord::Failed.as_str(),
            Self::Blocked => WorkerWord::Blocked.as_str(),
            Self::Other(s) => s,
        }
    }

    /// True for the statuses that must keep beating (`RUNNING`, `BLOCKED`).
    pub fn expects_heartbeat(&self) -> bool {
        matches!(self, Self::Running | Self::Blocked)
    }
}

impl std::fmt::Display for WorkerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WorkerStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for WorkerStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(lenient::opt_string(d)?
            .map(|s| Self::parse(&s))
            .unwrap_or(Self::Other(String::new())))
    }
}

/// How long a `RUNNING` or `BLOCKED` worker may stay silent before it is stale, unless the root's
/// settings say otherwise ([`crate::store::Settings::stale_after`]).
pub const STALE_AFTER: Duration = Duration::minutes(10);

/// One worker's entry in `worker-status.json`, extra fields kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WorkerEntry {
    /// The key of the entry in `worker-status.json`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub worker_id: String,
    /// The task the worker is on, if it said.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub task_id: Option<String>,
    /// Its state; a missing status reads as an empty `Other`.
    #[serde(default = "missing_status")]
    pub status: WorkerStatus,
    /// Progress 0–100, as written (integers and floats both occur).
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub progress_pct: Option<Number>,
    /// What it is doing now, in its own words.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub current_subtask: Option<String>,
    /// Its last heartbeat, as written; see [`WorkerEntry::heartbeat`].
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub last_heartbeat: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn missing_status() -> WorkerStatus {
    WorkerStatus::Other(String::new())
}

impl WorkerEntry {
    /// Reads the entry stored under `worker_id` (a non-object becomes an entry with an empty status).
    pub fn from_value(worker_id: &str, v: &Value) -> Self {
        let mut e: WorkerEntry = from_object(v).unwrap_or(WorkerEntry {
            status: missing_status(),
            ..Default::default()
        });
        e.worker_id = worker_id.to_owned();
        e
    }

    /// The parsed last heartbeat.
    pub fn heartbeat(&self) -> Option<DateTime<Utc>> {
        self.last_heartbeat.as_deref().and_then(parse_ts)
    }

    /// Progress as a float, if readable.
    pub fn progress(&self) -> Option<f64> {
        self.progress_pct.as_ref().and_then(Number::as_f64)
    }

    /// A `RUNNING` or `BLOCKED` worker silent for more than `after` (the root's
    /// [`crate::store::Settings::stale_after`]), or with no readable heartbeat.
    pub fn is_stale(&self, now: DateTime<Utc>, after: std::time::Duration) -> bool {
        let after = Duration::from_std(after).unwrap_or(STALE_AFTER);
        self.status.expects_heartbeat() && self.heartbeat().is_none_or(|t| now - t > after)
    }
}

/// Parses every entry of a `worker-status.json` object, sorted by worker id.
pub fn parse_workers(map: &Map<String, Value>) -> Vec<WorkerEntry> {
    let mut v: Vec<WorkerEntry> = map
        .iter()
        .map(|(k, v)| WorkerEntry::from_value(k, v))
        .collect();
    v.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
    v
}

/// Progress of the assess or vote phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CountPhase {
    /// `NOT_STARTED`, `IN_PROGRESS`, `COMPLETE` or `SKIPPED`.
    #[serde(default = "not_started", deserialize_with = "lenient::string")]
    pub status: String,
    /// Records in so far.
    #[serde(default, deserialize_with = "lenient::u32")]
    pub complete: u32,
    /// Records expected (the number of directors).
    #[serde(default, deserialize_with = "lenient::u32")]
    pub of: u32,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Progress of the discussion phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscussPhase {
    /// `NOT_STARTED`, `IN_PROGRESS`, `COMPLETE` or `SKIPPED`.
    #[serde(default = "not_started", deserialize_with = "lenient::string")]
    pub status: String,
    /// Rounds held so far.
    #[serde(default, deserialize_with = "lenient::u32")]
    pub rounds: u32,
    /// Rounds allowed; the discussion ends when reached.
    #[serde(default = "default_max_rounds", deserialize_with = "lenient::u32")]
    pub max_rounds: u32,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for DiscussPhase {
    fn default() -> Self {
        Self {
            status: not_started(),
            rounds: 0,
            max_rounds: DEFAULT_MAX_ROUNDS,
            extra: Map::new(),
        }
    }
}

/// Progress of the resolve phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvePhase {
    /// `NOT_STARTED`, `IN_PROGRESS` or `COMPLETE`.
    #[serde(default = "not_started", deserialize_with = "lenient::string")]
    pub status: String,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for ResolvePhase {
    fn default() -> Self {
        Self {
            status: not_started(),
            extra: Map::new(),
        }
    }
}

/// Discussion rounds allowed by default.
pub(crate) const DEFAULT_MAX_ROUNDS: u32 = 3;

fn not_started() -> String {
    PHASE_NOT_STARTED.to_owned()
}
fn default_max_rounds() -> u32 {
    DEFAULT_MAX_ROUNDS
}

/// Phase status words as constants for `match`, derived from [`PhaseStatus`] (spelled there once).
pub(crate) const PHASE_NOT_STARTED: &str = PhaseStatus::NotStarted.as_str();
/// See `PhaseStatus::InProgress`.
pub const PHASE_IN_PROGRESS: &str = PhaseStatus::InProgress.as_str();
/// See `PhaseStatus::Complete`.
pub const PHASE_COMPLETE: &str = PhaseStatus::Complete.as_str();

/// The four phases of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Phases {
    /// Assessment progress.
    #[serde(default)]
    pub assess: CountPhase,
    /// Discussion progress.
    #[serde(default)]
    pub discuss: DiscussPhase,
    /// Vote progress.
    #[serde(default)]
    pub vote: CountPhase,
    /// Resolution progress.
    #[serde(default)]
    pub resolve: ResolvePhase,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A board session file, `board/session-{session_id}.json` (docs/PROTOCOL.md §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct BoardSession {
    /// The session's id; it names the session file.
    #[serde(default, deserialize_with = "lenient::string")]
    pub session_id: String,
    /// What is being decided.
    #[serde(default, deserialize_with = "lenient::string")]
    pub checkpoint: String,
    /// `ASSESSING`, `DISCUSSING`, `VOTING`, `RESOLVING` or `COMPLETE` (other words kept as written).
    #[serde(default, deserialize_with = "lenient::string")]
    pub status: String,
    /// The proposal: text, or an object with a `proposal`/`title`/`summary` field.
    #[serde(default)]
    pub proposal: Value,
    /// The directors on this board, in order.
    #[serde(default, deserialize_with = "lenient::names")]
    pub directors: Vec<String>,
    /// When the session was opened, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub started_at: Option<String>,
    /// Progress of each phase.
    #[serde(default)]
    pub phases: Phases,
    /// Stored when the session is resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Value>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl BoardSession {
    /// The proposal's text: the string itself, or its `proposal`/`title`/`summary` field.
    pub fn proposal_text(&self) -> String {
        match &self.proposal {
            Value::String(s) => s.clone(),
            Value::Object(m) => ["proposal", "title", "summary", "text"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .map(str::to_owned)
                .unwrap_or_else(|| self.proposal.to_string()),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }

    /// The parsed start time.
    pub fn started(&self) -> Option<DateTime<Utc>> {
        self.started_at.as_deref().and_then(parse_ts)
    }
}

/// A director's assessment (`assessments.json[director]`), director-specific extras kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Assessment {
    /// The director; when missing, the key it is stored under names it.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub director: Option<String>,
    /// `APPROVE`, `CONCERNS` or `REJECT` (other words kept as written).
    #[serde(default, deserialize_with = "lenient::string")]
    pub verdict: String,
    /// 1–10; foreign writers use floats.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub score: Option<Number>,
    /// Concerns raised.
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub concerns: Vec<String>,
    /// Recommendations made.
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub recommendations: Vec<String>,
    /// The points that weighed most.
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub key_points: Vec<String>,
    /// True when a concern blocks approval.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub blocking: Option<bool>,
    /// When it was written, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub timestamp: Option<String>,
    /// Director-specific fields, kept as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Parses `assessments.json` (`{director: assessment}`) in file order; the key names the director.
pub fn parse_assessments(map: &Map<String, Value>) -> Vec<(String, Assessment)> {
    map.iter()
        .map(|(k, v)| {
            let mut a: Assessment = from_object(v).unwrap_or_default();
            a.director.get_or_insert_with(|| k.clone());
            (k.clone(), a)
        })
        .collect()
}

/// One line of `discussion.jsonl`; every field may be missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DiscussionLine {
    /// The director speaking.
    #[serde(default, deserialize_with = "lenient::string")]
    pub from: String,
    /// A director or `ALL`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub to: String,
    /// `CHALLENGE`, `AGREE`, `QUESTION` or `CLARIFY`.
    #[serde(rename = "type", default, deserialize_with = "lenient::string")]
    pub kind: String,
    /// The message text.
    #[serde(default, deserialize_with = "lenient::string")]
    pub message: String,
    /// True when the speaker means to change its verdict.
    #[serde(default, deserialize_with = "lenient::bool")]
    pub changes_my_verdict: bool,
    /// The discussion round it belongs to.
    #[serde(default, deserialize_with = "lenient::opt_u32")]
    pub round: Option<u32>,
    /// When it was written, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub timestamp: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A director's final vote (`votes.json[director]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Vote {
    /// The director; when missing, the key it is stored under names it.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub director: Option<String>,
    /// `APPROVE` or `REJECT` (other words kept as written).
    #[serde(default, deserialize_with = "lenient::string")]
    pub final_verdict: String,
    /// 0–1.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub confidence: Option<Number>,
    /// Conditions attached to the vote.
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub conditions: Vec<String>,
    /// When it was written, as written.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub timestamp: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Parses `votes.json` (`{director: vote}`) in file order; the key names the director.
pub fn parse_votes(map: &Map<String, Value>) -> Vec<(String, Vote)> {
    map.iter()
        .map(|(k, v)| {
            let mut vote: Vote = from_object(v).unwrap_or_default();
            vote.director.get_or_insert_with(|| k.clone());
            (k.clone(), vote)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_keeps_extras_and_tolerates_odd_fields() {
        let e = Envelope::parse_line(
            br#"{"id": 7, "type": "PROGRESS", "timestamp": "2026-02-01T12:00:00.5", "x": 1}"#,
        )
        .unwrap();
        assert_eq!(e.id, "7");
        assert_eq!(e.source, "");
        assert_eq!(e.extra["x"], json!(1));
        assert_eq!(
            e.instant().unwrap(),
            parse_ts("2026-02-01T12:00:00.500000Z").unwrap()
        );
        assert!(Envelope::parse_line(b"[1,2]").is_none());
        assert!(Envelope::parse_line(b"{\"id\": \"msg-torn\", \"type\": \"PROG").is_none());
    }

    #[test]
    fn lock_entry_reads_bare_strings_and_missing_times() {
        let bare = LockEntry::from_value("a", &json!("worker-9"));
        assert!(bare.bare && bare.worker_id.as_deref() == Some("worker-9"));
        assert!(bare.is_live(Utc::now()));
        let no_times = LockEntry::from_value("b", &json!({"worker_id": "w"}));
        assert!(no_times.expires().is_none() && !no_times.is_expired(Utc::now()));
        let expired = LockEntry::from_value(
            "c",
            &json!({"worker_id": "w", "expires_at": "2026-02-01T12:38:21Z", "note": 1}),
        );
        assert!(expired.is_expired(parse_ts("2026-02-01T12:38:22").unwrap()));
        assert_eq!(expired.to_value()["note"], json!(1));
        assert!(expired.to_value().get("path").is_none());
    }

    #[test]
    fn worker_status_words_and_staleness() {
        assert_eq!(WorkerStatus::parse("COMPLETED"), WorkerStatus::Complete);
        assert_eq!(WorkerStatus::parse("running"), WorkerStatus::Running);
        assert_eq!(
            WorkerStatus::parse("PAUSED"),
            WorkerStatus::Other("PAUSED".into())
        );
        let now = parse_ts("2026-02-01T12:30:00Z").unwrap();
        let w = WorkerEntry::from_value(
            "w",
            &json!({"status": "RUNNING", "last_heartbeat": "2026-02-01T12:19:59Z"}),
        );
        assert!(w.is_stale(now, std::time::Duration::from_secs(600)));
        let w = WorkerEntry::from_value(
            "w",
            &json!({"status": "BLOCKED", "last_heartbeat": "2026-02-01T12:20:00Z"}),
        );
        assert!(!w.is_stale(now, std::time::Duration::from_secs(600)));
        let w = WorkerEntry::from_value(
            "w",
            &json!({"status": "FAILED", "last_heartbeat": "2020-01-01T00:00:00Z"}),
        );
        assert!(!w.is_stale(now, std::time::Duration::from_secs(600)));
        let w = WorkerEntry::from_value("w", &json!({"status": "RUNNING", "progress_pct": "40"}));
        assert!(
            w.is_stale(now, std::time::Duration::from_secs(600)),
            "no heartbeat at all counts as stale"
        );
        assert_eq!(w.progress(), Some(40.0));
    }

    /// The fixture root's bus (read only).
    fn fixture_bus() -> std::path::PathBuf {
        crate::test_fixture::fixture_root()
            .join("conductor/tracks/stripe-checkout_20260201/.message-bus")
    }

    #[test]
    fn parses_every_bus_file_of_the_fixture() {
        use crate::store::read::read_json_object;
        let bus = fixture_bus();
        assert!(bus.is_dir(), "fixture missing at {}", bus.display());

        let queue = std::fs::read(bus.join("queue.jsonl")).unwrap();
        let parsed: Vec<Envelope> = queue
            .split(|b| *b == b'\n')
            .filter_map(Envelope::parse_line)
            .collect();
        assert_eq!(parsed.len(), 8);
        assert_eq!(parsed[0].id, "msg-init");
        assert!(parsed.iter().all(|e| e.instant().is_some()));

        let locks = parse_locks(&read_json_object(&bus.join("locks.json")).unwrap());
        assert_eq!(locks.len(), 3);
        let legacy = locks
            .iter()
            .find(|l| l.path == "src/lib/legacy.ts")
            .unwrap();
        assert!(legacy.bare && legacy.expires_at.is_none());
        let now = parse_ts("2026-06-01T00:00:00Z").unwrap();
        assert_eq!(locks.iter().filter(|l| l.is_expired(now)).count(), 1);

        let workers = parse_workers(&read_json_object(&bus.join("worker-status.json")).unwrap());
        let statuses: Vec<_> = workers.iter().map(|w| w.status.clone()).collect();
        assert_eq!(
            statuses,
            vec![
                WorkerStatus::Running,
                WorkerStatus::Complete,
                WorkerStatus::Failed
            ]
        );
        assert!(workers[0].is_stale(now, std::time::Duration::from_secs(600)));

        let board = bus.join("board");
        let session: BoardSession = from_object(
            &crate::store::read::read_json(&board.join("session-board-20260201120005.json"))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(session.status, "DISCUSSING");
        assert_eq!(session.phases.discuss.rounds, 1);
        assert!(session.proposal_text().starts_with("Stripe checkout"));

        let assessments =
            parse_assessments(&read_json_object(&board.join("assessments.json")).unwrap());
        assert_eq!(assessments.len(), 5);
        let (_, cso) = assessments.iter().find(|(d, _)| d == "CSO").unwrap();
        assert_eq!(cso.score.as_ref().and_then(Number::as_f64), Some(6.5));
        assert!(cso.extra.contains_key("vulnerabilities"));

        let lines: Vec<DiscussionLine> = std::fs::read(board.join("discussion.jsonl"))
            .unwrap()
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .filter_map(|v| from_object(&v))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2].to, "ALL");
        assert!(!lines[2].changes_my_verdict);

        assert!(parse_votes(&read_json_object(&board.join("votes.json")).unwrap()).is_empty());
    }
}
