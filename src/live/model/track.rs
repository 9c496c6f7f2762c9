//! Tracks: a message bus each (queue, locks, workers, board).

use crate::engine::{
    BoardSession, DiscussionLine, Envelope, LockEntry, Root, WorkerEntry, layout,
    parse_assessments, parse_locks, parse_votes, parse_workers,
};
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::files::{JsonFile, LogChange, LogCursor, Refresh};
use super::super::snapshot::{BoardView, FileWarning, TrackView};
use super::{LiveModel, ModelOptions, list_dir, object};

/// One track's bus files.
#[derive(Debug)]
pub(super) struct TrackTracker {
    name: String,
    bus: PathBuf,
    cursor: LogCursor,
    messages: VecDeque<Arc<Envelope>>,
    messages_read: u64,
    lines_skipped: u64,
    queue_note: Option<String>,
    locks: JsonFile<Vec<LockEntry>>,
    workers: JsonFile<Vec<WorkerEntry>>,
    session: Option<Arc<BoardSession>>,
    session_warning: Option<String>,
    board_fp: Vec<(String, crate::live::files::Fingerprint)>,
    assessments: JsonFile<Vec<(String, crate::engine::Assessment)>>,
    votes: JsonFile<Vec<(String, crate::engine::Vote)>>,
    discussion: Option<(crate::live::files::Fingerprint, Arc<Vec<DiscussionLine>>)>,
    /// Messages per second of their timestamps, oldest second first, over the newest
    /// [`crate::live::snapshot::RATE_SECONDS`] seconds seen.
    rate: VecDeque<(i64, u32)>,
    pub(super) view: Arc<TrackView>,
}

impl TrackTracker {
    pub(super) fn new(name: &str, bus: PathBuf) -> Self {
        let board = bus.join(layout::BOARD_DIR);
        Self {
            name: name.to_owned(),
            cursor: LogCursor::new(),
            messages: VecDeque::new(),
            rate: VecDeque::new(),
            messages_read: 0,
            lines_skipped: 0,
            queue_note: None,
            locks: JsonFile::new(bus.join(layout::LOCKS_FILE)),
            workers: JsonFile::new(bus.join(layout::WORKERS_FILE)),
            session: None,
            session_warning: None,
            board_fp: Vec::new(),
            assessments: JsonFile::new(board.join(layout::ASSESSMENTS_FILE)),
            votes: JsonFile::new(board.join(layout::VOTES_FILE)),
            discussion: None,
            bus,
            view: Arc::new(TrackView {
                name: name.to_owned(),
                ..TrackView::default()
            }),
        }
    }

    pub(super) fn queue_path(&self) -> PathBuf {
        self.bus.join(layout::QUEUE_FILE)
    }

    /// Reads what was appended to `queue.jsonl` since the last read; true if anything changed.
    pub(super) fn read_queue(&mut self, opts: &ModelOptions) -> bool {
        let path = self.queue_path();
        let mut changed = false;
        match self.cursor.check(&path, opts.tail_bytes) {
            LogChange::Unchanged => return false,
            LogChange::Removed => {
                self.queue_note = Some("queue.jsonl is gone (archived?)".into());
                return true;
            }
            LogChange::Replaced => {
                self.messages.clear();
                self.rate.clear();
                self.queue_note =
                    Some("queue.jsonl was replaced or truncated; reading the new file".into());
                changed = true;
            }
            LogChange::Appended => {}
        }
        // Far behind (writers outpace us): jump to the last `tail_bytes`, as on first open, so one
        // read never holds more than that in memory; what is jumped over could not stay in the
        // bounded buffer anyway, and it is counted in `head_bytes_skipped`.
        let len = std::fs::metadata(&path).map(|m| m.len()).ok();
        if let Some(len) = len
            && len.saturating_sub(self.cursor.offset()) > opts.tail_bytes
            && let Ok(start) = crate::live::files::line_start_after(&path, len - opts.tail_bytes)
            && start > self.cursor.offset()
        {
            self.cursor.skipped_head_bytes += start - self.cursor.offset();
            self.cursor.advance_to(start);
            changed = true;
        }
        // Read what the queue held when it was measured, not on to wherever writers have taken it since:
        // a model starved of CPU would chase them, holding every line it read (what they append
        // meanwhile wakes the model again).
        let upto = len.map_or(opts.tail_bytes, |len| {
            len.saturating_sub(self.cursor.offset())
                .clamp(1, opts.tail_bytes.max(1))
        });
        let keep = opts.buffer.max(1);
        match crate::live::engine_glue::read_queue(&path, self.cursor.offset(), upto, keep) {
            Ok(batch) => {
                // Only an unterminated line after the offset: nothing to show until it completes.
                changed |= !batch.messages.is_empty() || batch.skipped > 0;
                self.cursor.advance_to(batch.next_offset);
                self.lines_skipped += batch.skipped as u64;
                self.messages_read += (batch.earlier.len() + batch.messages.len()) as u64;
                for ts in &batch.earlier {
                    self.count_rate(ts);
                }
                for m in batch.messages {
                    self.count_rate(&m.timestamp);
                    if self.messages.len() == opts.buffer {
                        self.messages.pop_front();
                    }
                    self.messages.push_back(Arc::new(m));
                }
                if self
                    .queue_note
                    .as_deref()
                    .is_some_and(|n| n.contains("gone"))
                {
                    self.queue_note = None;
                    changed = true;
                }
            }
            Err(e) => {
                self.queue_note = Some(e.to_string());
                changed = true;
            }
        }
        changed
    }

    /// Counts a message in the second its timestamp names (one parse per message read).
    fn count_rate(&mut self, timestamp: &str) {
        let Some(sec) = crate::engine::time::parse_ts(timestamp).map(|t| t.timestamp()) else {
            return;
        };
        let window = crate::live::snapshot::RATE_SECONDS as i64;
        let newest = self.rate.back().map_or(sec, |(s, _)| (*s).max(sec));
        if sec <= newest.saturating_sub(window) {
            return;
        }
        match self.rate.iter().rposition(|(s, _)| *s <= sec) {
            Some(i) if self.rate[i].0 == sec => self.rate[i].1 = self.rate[i].1.saturating_add(1),
            Some(i) => self.rate.insert(i + 1, (sec, 1)),
            None => self.rate.push_front((sec, 1)),
        }
        while self
            .rate
            .front()
            .is_some_and(|(s, _)| *s <= newest.saturating_sub(window))
        {
            self.rate.pop_front();
        }
    }

    pub(super) fn refresh_locks(&mut self) -> bool {
        self.locks.refresh(|v| object(v).map(|m| parse_locks(&m))) != Refresh::Unchanged
    }

    pub(super) fn refresh_workers(&mut self) -> bool {
        self.workers
            .refresh(|v| object(v).map(|m| parse_workers(&m)))
            != Refresh::Unchanged
    }

    /// Refreshes the board: the current session (chosen by the engine) when a session file changed,
    /// then assessments, votes and the discussion.
    pub(super) fn refresh_board(&mut self, root: &Root) -> bool {
        let board = self.bus.join(layout::BOARD_DIR);
        let mut fps: Vec<(String, crate::live::files::Fingerprint)> = list_dir(&board, false)
            .into_iter()
            .filter(|n| layout::session_id_of(n).is_some())
            .filter_map(|n| crate::live::files::Fingerprint::of(&board.join(&n)).map(|f| (n, f)))
            .collect();
        fps.sort_by(|a, b| a.0.cmp(&b.0));
        let mut changed = false;
        if fps != self.board_fp {
            self.board_fp = fps;
            changed = true;
            match crate::live::engine_glue::current_session(root, &self.name) {
                Ok(s) => {
                    self.session = s.map(Arc::new);
                    self.session_warning = None;
                }
                Err(e) => {
                    self.session_warning = Some(if self.session.is_some() {
                        format!("{e}{}", crate::live::files::LAST_GOOD_NOTE)
                    } else {
                        e.to_string()
                    });
                }
            }
        }
        changed |= self
            .assessments
            .refresh(|v| object(v).map(|m| parse_assessments(&m)))
            != Refresh::Unchanged;
        changed |= self.votes.refresh(|v| object(v).map(|m| parse_votes(&m))) != Refresh::Unchanged;
        let disc = board.join(layout::DISCUSSION_FILE);
        let fp = crate::live::files::Fingerprint::of(&disc);
        match (fp, &self.discussion) {
            (None, None) => {}
            (None, Some(_)) => {
                self.discussion = None;
                changed = true;
            }
            (Some(fp), Some((old, _))) if *old == fp => {}
            (Some(fp), _) => {
                match crate::live::engine_glue::read_discussion(&disc) {
                    Ok((lines, _skipped)) => self.discussion = Some((fp, Arc::new(lines))),
                    Err(e) => self.session_warning = Some(e.to_string()),
                }
                changed = true;
            }
        }
        changed
    }

    pub(super) fn rescan(&mut self, root: &Root, opts: &ModelOptions) -> bool {
        let mut changed = self.read_queue(opts);
        changed |= self.refresh_locks();
        changed |= self.refresh_workers();
        changed |= self.refresh_board(root);
        changed
    }

    pub(super) fn rebuild(&mut self, now: chrono::DateTime<chrono::Utc>) {
        let mut warnings = Vec::new();
        let mut warn = |path: &Path, w: Option<&str>| {
            if let Some(w) = w {
                warnings.push(FileWarning {
                    path: path.to_path_buf(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        };
        warn(self.locks.path(), self.locks.warning());
        warn(self.workers.path(), self.workers.warning());
        warn(self.assessments.path(), self.assessments.warning());
        warn(self.votes.path(), self.votes.warning());
        let board_dir = self.bus.join(layout::BOARD_DIR);
        warn(&board_dir, self.session_warning.as_deref());
        let locks = self.locks.value().cloned().unwrap_or_default();
        let workers = self.workers.value().cloned().unwrap_or_default();
        let messages: Vec<Arc<Envelope>> = self.messages.iter().cloned().collect();
        let (deadlocks, deadlock_locks) =
            crate::live::engine_glue::deadlocks(&messages, &locks, &workers, now);
        let board = self.session.as_ref().map(|session| {
            let votes = self.votes.value().cloned().unwrap_or_default();
            let assessments = self.assessments.value().cloned().unwrap_or_default();
            let predicted =
                crate::live::engine_glue::predicted_verdict(session, &assessments, &votes);
            Arc::new(BoardView {
                session: session.clone(),
                session_path: board_dir.join(layout::session_file_name(&session.session_id)),
                assessments,
                votes,
                discussion: self
                    .discussion
                    .as_ref()
                    .map(|(_, d)| d.clone())
                    .unwrap_or_default(),
                predicted,
                resolved: session
                    .resolution
                    .as_ref()
                    .and_then(crate::engine::board::ResolvedVotes::read),
            })
        });
        let head = self.cursor.skipped_head_bytes;
        self.view = Arc::new(TrackView {
            name: self.name.clone(),
            messages: Arc::new(messages),
            messages_read: self.messages_read,
            lines_skipped: self.lines_skipped,
            head_bytes_skipped: head,
            queue_note: self.queue_note.clone(),
            locks,
            workers,
            deadlocks: Arc::new(deadlocks),
            deadlock_locks: Arc::new(deadlock_locks),
            rate: Arc::new(self.rate.iter().copied().collect()),
            board,
            warnings,
        });
    }
}

impl LiveModel {
    pub(super) fn rescan_tracks(&mut self) {
        let dir = self.root.tracks_dir();
        let names: BTreeSet<String> = list_dir(&dir, true)
            .into_iter()
            .filter(|t| dir.join(t).join(layout::BUS_DIR).is_dir())
            .collect();
        let before = self.tracks.len();
        self.tracks.retain(|t, _| names.contains(t));
        if before != self.tracks.len() {
            self.dirty_tracks = true;
        }
        let opts = self.opts;
        let root = self.root.clone();
        for n in &names {
            let fresh = !self.tracks.contains_key(n);
            let t = self
                .tracks
                .entry(n.clone())
                .or_insert_with(|| TrackTracker::new(n, dir.join(n).join(layout::BUS_DIR)));
            if t.rescan(&root, &opts) || fresh {
                t.rebuild(chrono::Utc::now());
                self.dirty_tracks = true;
            }
        }
    }
}
