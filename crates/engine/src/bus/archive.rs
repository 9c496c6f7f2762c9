//! Archiving a finished track (docs/PROTOCOL.md §3.7): `queue.jsonl` becomes `queue.{ID}.archive.jsonl`;
//! `locks.json`, `worker-status.json` and the event files are removed; `board/` is kept. Refused while
//! a lock is live or a worker is `RUNNING`, unless forced.

use std::path::PathBuf;

use chrono::Utc;
use serde::Serialize;

use super::Bus;
use super::model::WorkerStatus;
use crate::error::{Error, Result};
use crate::store::atomic::{rename_durable, sync_dir};
use crate::store::ids::{NAME_PATTERN, is_valid_name};
use crate::store::lock::FileLock;

/// What `bus archive` did.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveResult {
    pub track: String,
    pub archive: PathBuf,
    /// Lines (complete or not) moved into the archive.
    pub archived_bytes: u64,
    pub removed: Vec<String>,
    pub forced: bool,
    /// Live locks and running workers that were present (only non-empty when forced).
    pub live_locks: Vec<String>,
    pub running_workers: Vec<String>,
}

impl Bus {
    /// Archives the track's queue under `track_id` and clears its locks, workers and events.
    pub fn archive(&self, track_id: &str, force: bool) -> Result<ArchiveResult> {
        self.require()?;
        if !is_valid_name(track_id) {
            return Err(Error::InvalidName {
                field: "track id",
                value: track_id.chars().take(80).collect(),
                pattern: NAME_PATTERN,
            });
        }
        let target = self.dir.join(format!("queue.{track_id}.archive.jsonl"));
        let _mutex = self.mutex()?;
        let now = Utc::now();
        let live_locks: Vec<String> = self
            .locks()?
            .into_iter()
            .filter(|l| l.entry.is_live(now))
            .map(|l| {
                format!(
                    "{} (held by {})",
                    l.entry.path,
                    l.entry.worker_id.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let running: Vec<String> = self
            .workers()?
            .into_iter()
            .filter(|w| w.entry.status == WorkerStatus::Running)
            .map(|w| w.entry.worker_id)
            .collect();
        if !force && (!live_locks.is_empty() || !running.is_empty()) {
            let mut why = Vec::new();
            if !live_locks.is_empty() {
                why.push(format!("live locks: {}", live_locks.join(", ")));
            }
            if !running.is_empty() {
                why.push(format!("running workers: {}", running.join(", ")));
            }
            return Err(Error::refused(format!(
                "track {} is still active ({}); wait for it to finish, or use --force",
                self.track,
                why.join("; ")
            )));
        }
        if target.exists() {
            return Err(Error::refused(format!(
                "{} already exists; choose another --track-id",
                target.display()
            )));
        }
        let queue = self.queue_path();
        let mut archived_bytes = 0;
        if queue.exists() {
            // Hold the queue's own lock so no writer is mid-line; ours re-open by name afterwards.
            let _q = FileLock::exclusive(&queue)?;
            archived_bytes = std::fs::metadata(&queue).map(|m| m.len()).unwrap_or(0);
            rename_durable(&self.root, &queue, &target)?;
            // Mark the archive read-only while still holding the lock: a writer that opened the queue
            // before the rename and locks it next sees the mark and goes back to the name (see
            // `queue::QueueWriter`). Only a file we do not own refuses this; the writer's check of the
            // name before locking then remains.
            use std::os::unix::fs::PermissionsExt;
            let _ = _q
                .file()
                .set_permissions(std::fs::Permissions::from_mode(0o444));
        }
        let mut removed = Vec::new();
        for p in [self.locks_path(), self.workers_path()] {
            match std::fs::remove_file(&p) {
                Ok(()) => removed.push(p.file_name().unwrap().to_string_lossy().into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&p, e)),
            }
        }
        for ev in self.events()? {
            let p = self.events_dir().join(&ev.name);
            match std::fs::remove_file(&p) {
                Ok(()) => removed.push(format!("events/{}", ev.name)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&p, e)),
            }
        }
        sync_dir(&self.dir)?;
        Ok(ArchiveResult {
            track: self.track.to_string(),
            archive: target,
            archived_bytes,
            removed,
            forced: force,
            live_locks: if force { live_locks } else { Vec::new() },
            running_workers: if force { running } else { Vec::new() },
        })
    }
}
