//! Archiving a finished track (docs/PROTOCOL.md §3.7): `queue.jsonl` becomes `queue.{ID}.archive.jsonl`;
//! `locks.json`, `worker-status.json` and the event files are removed; `board/` is kept. Refused while
//! a lock is live or a worker is `RUNNING`, unless forced. Resumable: a run killed part way is finished
//! by repeating it (the archive exists and the queue is gone: only the clearing is left to do).

use std::path::PathBuf;

use chrono::Utc;
use serde::Serialize;

use super::Bus;
use super::model::WorkerStatus;
use crate::error::{Error, Result};
use std::os::unix::fs::PermissionsExt;

use rustix::fs::OFlags;

use crate::store::atomic::{remove_file, rename_durable};
use crate::store::ids::TrackName;
use crate::store::lock::lock_file;
use crate::store::safe::{open_file, require_single_link};

/// What `bus archive` did.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveResult {
    /// The track archived.
    pub track: String,
    /// The archive file the queue was moved into.
    pub archive: PathBuf,
    /// Lines (complete or not) moved into the archive.
    pub archived_bytes: u64,
    /// The locks, workers and event files cleared.
    pub removed: Vec<String>,
    /// True when live locks or running workers were overridden; without force they refuse the archive.
    pub forced: bool,
    /// True when this run finished an archive an interrupted run had started.
    pub resumed: bool,
    /// Live locks and running workers that were present (only non-empty when forced).
    pub live_locks: Vec<String>,
    /// Workers that were running (only non-empty when forced).
    pub running_workers: Vec<String>,
}

impl Bus {
    /// Archives the track's queue under `track_id` (the archive's name, which follows the track
    /// name pattern; parse it with `TrackName::parse_as("track id", …)`) and clears its locks,
    /// workers and events.
    pub fn archive(&self, track_id: &TrackName, force: bool) -> Result<ArchiveResult> {
        self.require()?;
        let target = self
            .dir
            .join(crate::store::layout::queue_archive_name(track_id.as_str()));
        let queue = self.queue_path();
        let _mutex = self.mutex()?;
        // An archive that exists while the queue is gone or still empty is one a killed run left half
        // done: the decision to archive was taken then, so this run only finishes it.
        let queue_len = std::fs::symlink_metadata(&queue).map(|m| m.len()).ok();
        let resumed = target.symlink_metadata().is_ok() && queue_len.unwrap_or(0) == 0;
        if target.symlink_metadata().is_ok() && !resumed {
            return Err(Error::refused(format!(
                "{} already exists and the track has a new queue; choose another --track-id",
                target.display()
            )));
        }
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
        if !force && !resumed && (!live_locks.is_empty() || !running.is_empty()) {
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
        let mut archived_bytes = 0;
        if resumed {
            if let Some(f) = open_file(&self.root, &target, OFlags::RDONLY | OFlags::NONBLOCK)? {
                require_single_link(&f, &target)?;
                archived_bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o444));
            }
            if queue_len == Some(0) {
                remove_file(&self.root, &queue)?;
            }
        } else if let Some(q) = open_file(&self.root, &queue, OFlags::RDONLY | OFlags::NONBLOCK)? {
            require_single_link(&q, &queue)?;
            // Hold the queue's own lock so no writer is mid-line; ours re-open by name afterwards.
            lock_file(&q, &queue, self.root.settings.lock_timeout)?;
            archived_bytes = q.metadata().map(|m| m.len()).unwrap_or(0);
            rename_durable(&self.root, &queue, &target)?;
            crate::store::crash_point("archive:after-rename");
            // Mark the archive read-only while still holding the lock: a writer that opened the queue
            // before the rename and locks it next sees the mark and goes back to the name (see
            // `queue::QueueWriter`). Only a file we do not own refuses this; the writer's check of the
            // name before locking then remains.
            let _ = q.set_permissions(std::fs::Permissions::from_mode(0o444));
        }
        let mut removed = Vec::new();
        for p in [self.locks_path(), self.workers_path()] {
            if remove_file(&self.root, &p)? {
                removed.push(
                    p.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
            crate::store::crash_point("archive:after-clear-one");
        }
        for ev in self.events()? {
            if remove_file(&self.root, &self.events_dir().join(&ev.name))? {
                removed.push(format!("events/{}", ev.name));
            }
            crate::store::crash_point("archive:after-event");
        }
        Ok(ArchiveResult {
            track: self.track.to_string(),
            archive: target,
            archived_bytes,
            removed,
            forced: force,
            resumed,
            live_locks: if force { live_locks } else { Vec::new() },
            running_workers: if force { running } else { Vec::new() },
        })
    }
}
