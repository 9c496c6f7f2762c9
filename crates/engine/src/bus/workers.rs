//! Worker heartbeats in `worker-status.json` (docs/PROTOCOL.md §3.5): merged under `.lock_mutex`, so concurrent
//! workers never lose each other's entries, and fields a beat does not set are kept.

use chrono::Utc;
use serde::Serialize;
use serde_json::{Value, json};

use super::Bus;
use super::model::{WorkerEntry, WorkerStatus, parse_workers};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::ids::{WorkerId, check_free_text};
use crate::store::time::{now_ts, relative};

/// One heartbeat.
#[derive(Debug, Clone)]
pub struct Heartbeat<'a> {
    /// The worker's id (validated when parsed).
    pub worker_id: &'a WorkerId,
    /// The task it is on, if any.
    pub task_id: Option<&'a str>,
    /// `RUNNING`, `COMPLETE` (or `COMPLETED`), `FAILED` or `BLOCKED`.
    pub status: Option<&'a str>,
    /// 0–100.
    pub progress_pct: Option<f64>,
    /// What it is doing now (free text, bounded).
    pub current_subtask: Option<&'a str>,
}

/// A worker as shown to people and tools: the entry plus staleness.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerView {
    /// The entry as read from `worker-status.json`.
    #[serde(flatten)]
    pub entry: WorkerEntry,
    /// True when a running or blocked worker missed its heartbeat past the root's stale threshold.
    pub stale: bool,
    /// "3m ago", when the heartbeat is readable.
    pub last_seen: Option<String>,
}

impl WorkerView {
    fn of(entry: WorkerEntry, stale_after: std::time::Duration) -> Self {
        let now = Utc::now();
        Self {
            stale: entry.is_stale(now, stale_after),
            last_seen: entry.heartbeat().map(|t| relative(t, now)),
            entry,
        }
    }
}

/// Parses a status given on the command line or by a tool; only the four protocol words.
pub(crate) fn parse_status(s: &str) -> Result<WorkerStatus> {
    match WorkerStatus::parse(s) {
        WorkerStatus::Other(_) => Err(Error::refused(format!(
            "status {s:?} is not one of RUNNING, COMPLETE, FAILED, BLOCKED"
        ))),
        ok => Ok(ok),
    }
}

fn number(f: f64) -> Value {
    if f.fract() == 0.0 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

impl Bus {
    /// Every worker, sorted by id, with staleness.
    pub fn workers(&self) -> Result<Vec<WorkerView>> {
        let map = self.read_object(&self.workers_path())?;
        Ok(parse_workers(&map)
            .into_iter()
            .map(|e| WorkerView::of(e, self.root.settings.stale_after))
            .collect())
    }

    /// Merges a heartbeat into the worker's entry (keeping fields it does not set) and stamps
    /// `last_heartbeat`, under `.lock_mutex`.
    pub fn heartbeat(&self, beat: &Heartbeat<'_>) -> Result<WorkerView> {
        crate::store::commit::act_unheld(&self.root, || self.heartbeat_act(beat))
    }

    fn heartbeat_act(&self, beat: &Heartbeat<'_>) -> Result<WorkerView> {
        self.require()?;
        if let Some(t) = beat.task_id {
            check_free_text("task", t)?;
        }
        let status = beat.status.map(parse_status).transpose()?;
        if let Some(p) = beat.progress_pct
            && !(0.0..=100.0).contains(&p)
        {
            return Err(Error::refused(format!("progress {p} is outside 0–100")));
        }
        let _mutex = self.mutex()?;
        let mut all = self.read_object(&self.workers_path())?;
        let mut entry = match all.get(beat.worker_id.as_str()) {
            Some(Value::Object(m)) => m.clone(),
            _ => serde_json::Map::new(),
        };
        if let Some(t) = beat.task_id {
            entry.insert("task_id".into(), json!(t));
        }
        if let Some(s) = &status {
            entry.insert("status".into(), json!(s.as_str()));
        } else if !entry.contains_key("status") {
            entry.insert("status".into(), json!(WorkerStatus::Running.as_str()));
        }
        if let Some(p) = beat.progress_pct {
            entry.insert("progress_pct".into(), number(p));
        }
        if let Some(s) = beat.current_subtask {
            entry.insert("current_subtask".into(), json!(s));
        }
        entry.insert("last_heartbeat".into(), json!(now_ts()));
        let value = Value::Object(entry);
        all.insert(beat.worker_id.to_string(), value.clone());
        write_json(&self.root, &self.workers_path(), &all)?;
        Ok(WorkerView::of(
            WorkerEntry::from_value(beat.worker_id.as_str(), &value),
            self.root.settings.stale_after,
        ))
    }
}
