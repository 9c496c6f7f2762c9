//! Lease and staleness notices (docs/PROTOCOL.md §3.4, §3.5): what `pantheon serve` posts on a track's
//! bus when a held lock's lease runs out (`LOCK_EXPIRED`) or a worker's heartbeat goes stale
//! (`WORKER_STALE`), JetStream's advisories on plain files.
//!
//! Each cause is posted exactly once across every supervisor on the root: the cause has a key (the
//! lock's path, holder, token and expiry; the worker, its last heartbeat), and the post happens under
//! `conductor/supervisor/.notices.lock` only when the track's marker file
//! (`conductor/supervisor/notices/{track}.json`) does not hold the key yet; the key is recorded right
//! after. A renewed lease or a fresh heartbeat makes a new key, so its next expiry or staleness is
//! posted again. Markers of causes that no longer exist are pruned.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::Bus;
use super::model::{parse_locks, parse_workers};
use super::vocab::MessageType;
use crate::error::Result;
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::time::{add, format_ts};
use crate::store::{Root, TrackName};

/// `conductor/supervisor/notices/{track}.json`: the causes already posted on a track.
pub(crate) fn marker_path(root: &Root, track: &TrackName) -> PathBuf {
    root.supervisor_dir()
        .join("notices")
        .join(format!("{track}.json"))
}

fn lock_path(root: &Root) -> PathBuf {
    root.supervisor_dir().join(".notices.lock")
}

/// What one look at a track posted, and when its next cause falls due.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoticeReport {
    /// The messages posted (type and payload).
    pub posted: Vec<(MessageType, Value)>,
    /// The earliest future lease expiry or staleness on the track.
    pub next_due: Option<DateTime<Utc>>,
}

/// One cause on a track at a time.
struct Cause {
    key: String,
    kind: MessageType,
    payload: Value,
}

/// The causes present on `bus` at `now`, and the next time one will appear.
fn causes(
    bus: &Bus,
    root: &Root,
    now: DateTime<Utc>,
) -> Result<(Vec<Cause>, Option<DateTime<Utc>>)> {
    let mut out = Vec::new();
    let mut next: Option<DateTime<Utc>> = None;
    let mut soon = |t: DateTime<Utc>| next = Some(next.map_or(t, |n: DateTime<Utc>| n.min(t)));
    let locks = bus.read_object(&bus.locks_path())?;
    for l in parse_locks(&locks) {
        let (Some(holder), Some(exp)) = (l.worker_id.clone(), l.expires()) else {
            continue;
        };
        if exp > now {
            soon(exp);
            continue;
        }
        let token = l.extra.get("fencing_token").cloned().unwrap_or(Value::Null);
        let expired_at = l.expires_at.clone().unwrap_or_default();
        out.push(Cause {
            key: format!("lock|{}|{holder}|{token}|{expired_at}", l.path),
            kind: MessageType::LockExpired,
            payload: json!({"path": l.path, "holder": holder, "fencing_token": token,
                "expired_at": expired_at}),
        });
    }
    let stale_after = root.settings.stale_after;
    let workers = bus.read_object(&bus.workers_path())?;
    for w in parse_workers(&workers) {
        if !w.status.expects_heartbeat() {
            continue;
        }
        let Some(beat) = w.heartbeat() else {
            continue;
        };
        let Some(stale_at) = add(beat, stale_after) else {
            continue;
        };
        if stale_at >= now {
            // `is_stale` is "older than stale_after": due just after.
            soon(stale_at + chrono::Duration::milliseconds(1));
            continue;
        }
        let last = w.last_heartbeat.clone().unwrap_or_default();
        out.push(Cause {
            key: format!("worker|{}|{last}", w.worker_id),
            kind: MessageType::WorkerStale,
            payload: json!({"worker_id": w.worker_id, "last_heartbeat": last,
                "stale_after_secs": stale_after.as_secs(), "status": w.status.to_string(),
                "task_id": w.task_id, "stale_at": format_ts(stale_at)}),
        });
    }
    Ok((out, next))
}

/// Looks at track `track` at `now`: posts one `LOCK_EXPIRED` per held lock whose lease has run out and
/// one `WORKER_STALE` per worker whose heartbeat went stale, each cause once across every supervisor.
pub fn post_notices(root: &Root, track: &TrackName, now: DateTime<Utc>) -> Result<NoticeReport> {
    let bus = Bus::open_existing(root, track)?;
    let (found, next_due) = causes(&bus, root, now)?;
    let mut report = NoticeReport {
        posted: Vec::new(),
        next_due,
    };
    let marker = marker_path(root, track);
    let read_marker = || -> BTreeMap<String, Value> {
        crate::store::read::read_json(&marker)
            .ok()
            .flatten()
            .and_then(|v| v.get("posted").and_then(Value::as_object).cloned())
            .map(|m| m.into_iter().collect())
            .unwrap_or_default()
    };
    if found.is_empty() && read_marker().is_empty() {
        return Ok(report);
    }
    crate::store::atomic::ensure_dir(root, &root.supervisor_dir().join("notices"))?;
    let _lock = FileLock::exclusive(root, &lock_path(root))?;
    // Looked at again under the lock: a view taken before it may be older than the marker.
    let (found, next_due) = causes(&bus, root, Utc::now().max(now))?;
    report.next_due = next_due;
    let before = read_marker();
    let present: std::collections::HashSet<String> = found.iter().map(|c| c.key.clone()).collect();
    let mut kept: Map<String, Value> = before
        .iter()
        .filter(|(k, _)| present.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let pruned = kept.len() != before.len();
    for c in found {
        if kept.contains_key(&c.key) {
            continue;
        }
        let env = bus.post(c.kind, "supervisor", c.payload.clone())?;
        crate::store::crash_point("notice:after-post");
        kept.insert(
            c.key.clone(),
            json!({"at": format_ts(now), "message_id": env.id}),
        );
        // Recorded after each post, so a failure later in the loop never posts this one again.
        write_json(root, &marker, &json!({ "posted": kept }))?;
        report.posted.push((c.kind, c.payload));
    }
    if pruned && report.posted.is_empty() {
        write_json(root, &marker, &json!({ "posted": kept }))?;
    }
    Ok(report)
}
