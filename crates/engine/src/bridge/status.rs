//! The bridge's status file (`conductor/bridge/status.json`, docs/NATS.md): the running bridge's
//! report of its connection, counts, shared tracks and stuck outbox records, rewritten every few
//! seconds. Another process's file, so it is read tolerantly: a field of the wrong type reads as its
//! default, an entry of another shape as an empty one, a field this engine does not know is kept in
//! `extra`, and a foreign or older file still loads.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{bridge_dir, dead_dir};
use crate::conductor::outbox;
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::read::read_json;

/// The bridge's status file (`conductor/bridge/status.json`), written by the running bridge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// This pantheon's bridge name.
    #[serde(deserialize_with = "lenient")]
    pub name: String,
    /// The server URL with any user or password removed.
    #[serde(deserialize_with = "lenient")]
    pub server: String,
    /// True while the bridge holds a connection to the server.
    #[serde(deserialize_with = "lenient")]
    pub connected: bool,
    /// The bridge process's id.
    #[serde(deserialize_with = "lenient")]
    pub pid: u32,
    /// Messages published since the bridge started.
    #[serde(deserialize_with = "lenient")]
    pub published: u64,
    /// Messages received since the bridge started.
    #[serde(deserialize_with = "lenient")]
    pub received: u64,
    /// Messages moved to dead letters since the bridge started.
    #[serde(deserialize_with = "lenient")]
    pub dead_lettered: u64,
    /// Outbox records waiting to be published.
    #[serde(deserialize_with = "lenient")]
    pub outbox_pending: usize,
    /// Messages the consumer has not delivered yet (from the server).
    #[serde(deserialize_with = "lenient")]
    pub lag: u64,
    /// The last error the bridge met, if any.
    #[serde(deserialize_with = "lenient")]
    pub last_error: Option<String>,
    /// When the file was last written (RFC 3339); an old time means the bridge is gone.
    #[serde(deserialize_with = "lenient")]
    pub updated: String,
    /// Each shared track's counts, by track name (written only when the bridge shares tracks).
    #[serde(
        deserialize_with = "lenient_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tracks: BTreeMap<String, TrackCounts>,
    /// The outbox records the bridge could not publish and retries, oldest failure first
    /// (written only while there are some).
    #[serde(
        deserialize_with = "lenient_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub stuck: Vec<StuckRecord>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A shared track's counts in the status file (`tracks.T`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrackCounts {
    /// Lines of this pantheon's queue published since the bridge started.
    #[serde(deserialize_with = "lenient")]
    pub published: u64,
    /// Lines of the peers mirrored into the queue since the bridge started.
    #[serde(deserialize_with = "lenient")]
    pub mirrored: u64,
    /// The stream sequence the track's consumer reached.
    #[serde(deserialize_with = "lenient")]
    pub stream_seq: u64,
    /// Lines the server holds that the track has not mirrored yet.
    #[serde(deserialize_with = "lenient")]
    pub lag: u64,
}

/// An outbox record the bridge could not publish (an entry of the status file's `stuck`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StuckRecord {
    /// The record's outbox id.
    #[serde(deserialize_with = "lenient")]
    pub outbox_id: String,
    /// The subject it is published on.
    #[serde(deserialize_with = "lenient")]
    pub subject: String,
    /// Tries so far.
    #[serde(deserialize_with = "lenient")]
    pub attempts: u64,
    /// When the first try failed (RFC 3339).
    #[serde(deserialize_with = "lenient")]
    pub since: String,
    /// Seconds until the next try.
    #[serde(deserialize_with = "lenient")]
    pub retry_in_s: u64,
    /// What the last try met.
    #[serde(deserialize_with = "lenient")]
    pub error: String,
    /// What to do about it, when the bridge knows.
    #[serde(deserialize_with = "lenient")]
    pub hint: Option<String>,
}

impl StuckRecord {
    /// Why it is stuck, as an operator reads it: the hint when there is one, else the error.
    pub fn why(&self) -> &str {
        match self.hint.as_deref() {
            Some(h) if !h.is_empty() => h,
            _ => &self.error,
        }
    }
}

impl Status {
    /// Reads a status file's JSON tolerantly (see the module's doc); never fails: a value that is not
    /// an object reads as the default status.
    pub fn from_value(v: &Value) -> Self {
        match v {
            Value::Object(_) => Self::deserialize(v).unwrap_or_default(),
            _ => Self::default(),
        }
    }

    /// The bridge's lag with its shared tracks' (the sum saturates: the file is input).
    pub fn total_lag(&self) -> u64 {
        self.tracks
            .values()
            .map(|t| t.lag)
            .fold(self.lag, u64::saturating_add)
    }

    /// `updated`, or `None` when the file leaves it empty.
    pub fn updated(&self) -> Option<&str> {
        Some(self.updated.as_str()).filter(|u| !u.is_empty())
    }
}

/// A field as its type reads it, or its default when the file holds another type there.
fn lenient<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let v = Value::deserialize(d)?;
    Ok(T::deserialize(v).unwrap_or_default())
}

/// One entry of a list or map: an object as its type reads it, anything else (serde would read a
/// list as a struct's fields in order) as the default entry.
fn entry<T: DeserializeOwned + Default>(v: Value) -> T {
    match v {
        Value::Object(_) => T::deserialize(v).unwrap_or_default(),
        _ => T::default(),
    }
}

/// A list read entry by entry: an entry of another shape reads as the default entry (so a count
/// of the list stays true); a value that is not a list reads as none.
fn lenient_list<'de, D, T>(d: D) -> std::result::Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(match Value::deserialize(d)? {
        Value::Array(v) => v.into_iter().map(entry).collect(),
        _ => Vec::new(),
    })
}

/// A map read entry by entry, like [`lenient_list`].
fn lenient_map<'de, D, T>(d: D) -> std::result::Result<BTreeMap<String, T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(match Value::deserialize(d)? {
        Value::Object(m) => m.into_iter().map(|(k, e)| (k, entry(e))).collect(),
        _ => BTreeMap::new(),
    })
}

/// `conductor/bridge/status.json`.
pub fn status_path(root: &Root) -> std::path::PathBuf {
    bridge_dir(root).join("status.json")
}

/// The status file as the running bridge last wrote it, if there is one: a bounded, no-follow read
/// (`read_json`), refused when the file is unreadable or not JSON, read tolerantly otherwise
/// ([`Status::from_value`]).
pub fn load_status(root: &Root) -> Result<Option<Status>> {
    Ok(read_json(&status_path(root))?.map(|v| Status::from_value(&v)))
}

/// Writes the bridge's status file atomically but without fsync: it is a report the running bridge
/// rewrites every few seconds (a kill leaves the old or the new file, never a torn one; a power
/// loss may leave an older one, which the next write replaces), and an fsync per write cost the
/// bridge's loops milliseconds on a busy disk.
pub fn write_status(root: &Root, s: &Status) -> Result<()> {
    let path = status_path(root);
    let (dir, name) = crate::store::safe::SafeDir::parent_of(root, &path, true)?
        .ok_or_else(|| Error::refused(format!("{} has no parent directory", path.display())))?;
    dir.replace_volatile(&name, &crate::store::atomic::to_pretty_json(s))
}

/// The status file if any, with the outbox and dead-letter counts taken from disk now.
pub fn read_status(root: &Root) -> Result<Value> {
    let status = load_status(root)?;
    let (pending, inert) = outbox::pending(root);
    let dead = crate::conductor::definition::config_files(&dead_dir(root)).len();
    Ok(json!({
        "running": status.is_some(),
        "status": status,
        "outbox_pending": pending.len(),
        "outbox_uncommitted": inert,
        "dead_letters": dead,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_or_older_status_still_loads_field_by_field() {
        let v = json!({
            "name": "konan", "connected": "yes", "pid": -1, "published": 3, "lag": 1.5,
            "last_error": 7, "updated": "2026-12-06T10:00:00Z", "future": {"x": 1},
            "tracks": {"t1": {"lag": 4, "published": "many"}, "t2": [1], "t3": {"lag": u64::MAX}},
            "stuck": [{"outbox_id": "o1", "hint": "", "error": "no route"}, "junk"],
        });
        let s = Status::from_value(&v);
        assert_eq!(s.name, "konan");
        assert!(!s.connected, "a bool of another type reads as false");
        assert_eq!((s.pid, s.published, s.lag), (0, 3, 0));
        assert_eq!(s.last_error, None);
        assert_eq!(s.updated(), Some("2026-12-06T10:00:00Z"));
        assert_eq!(s.extra.get("future"), Some(&json!({"x": 1})));
        assert_eq!(s.tracks.len(), 3);
        assert_eq!(s.tracks["t1"].lag, 4);
        assert_eq!(s.tracks["t1"].published, 0);
        assert_eq!(s.tracks["t2"], TrackCounts::default());
        assert_eq!(s.total_lag(), u64::MAX, "the sum saturates");
        assert_eq!(s.stuck.len(), 2);
        assert_eq!(s.stuck[0].why(), "no route");
        assert_eq!(s.stuck[1], StuckRecord::default());
        let odd = json!({"tracks": "none", "stuck": {"a": 1}, "name": null});
        let s = Status::from_value(&odd);
        assert!(s.tracks.is_empty() && s.stuck.is_empty() && s.name.is_empty());
        assert_eq!(Status::from_value(&json!([1, 2])), Status::default());
    }

    #[test]
    fn a_status_written_reads_back_the_same() {
        let mut s = Status {
            name: "tallon".into(),
            updated: "2026-12-06T10:00:00Z".into(),
            ..Default::default()
        };
        s.extra.insert("peers".into(), json!([]));
        let bare = serde_json::to_value(&s).unwrap();
        assert!(bare.get("tracks").is_none() && bare.get("stuck").is_none());
        s.tracks.insert(
            "t1".into(),
            TrackCounts {
                lag: 2,
                ..Default::default()
            },
        );
        s.stuck.push(StuckRecord {
            outbox_id: "o1".into(),
            hint: Some("add the peer".into()),
            ..Default::default()
        });
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["tracks"]["t1"]["lag"], 2);
        assert_eq!(v["stuck"][0]["hint"], "add the peer");
        assert_eq!(Status::from_value(&v), s);
    }
}
