//! The session files of a track's `board/`: finding, loading and saving the current session, reading the
//! discussion, and moving an earlier session's files to `board/archive/{id}/`.

use std::path::{Path, PathBuf};

use chrono::Utc;
use serde_json::Value;

use crate::bus::Bus;
use crate::bus::model::{BoardSession, DiscussionLine, from_object};
use crate::error::{Error, Result};
use crate::store::atomic::{rename_durable, write_json};
use crate::store::ids::{encode_key, is_valid_name};
use crate::store::layout;
use crate::store::read::read_json;

use super::ops::ArchivedSession;

pub(super) fn session_file(board: &Path, id: &str) -> PathBuf {
    board.join(layout::session_file_name(id))
}

/// The session files in `board/` (not in the archive): (session id from the name, path).
pub(super) fn session_files(board: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(board)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let id = layout::session_id_of(&name)?.to_owned();
                    Some((id, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub(super) fn load_session(path: &Path) -> Result<BoardSession> {
    let v =
        read_json(path)?.ok_or_else(|| Error::not_found(format!("{} vanished", path.display())))?;
    from_object(&v).ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        message: "a session file must hold a JSON object".into(),
    })
}

/// The current session of a bus (the newest session file in `board/`), if any.
pub fn current_session(bus: &Bus) -> Result<Option<BoardSession>> {
    Ok(current(bus)?.map(|(_, s)| s))
}

fn current(bus: &Bus) -> Result<Option<(PathBuf, BoardSession)>> {
    let mut best: Option<(PathBuf, BoardSession)> = None;
    for (id, path) in session_files(&bus.board_dir()) {
        let mut s = load_session(&path)?;
        if s.session_id.is_empty() {
            s.session_id = id;
        }
        let newer = match &best {
            None => true,
            Some((_, b)) => {
                (s.started(), s.session_id.len(), &s.session_id)
                    >= (b.started(), b.session_id.len(), &b.session_id)
            }
        };
        if newer {
            best = Some((path, s));
        }
    }
    Ok(best)
}

pub(super) fn require_session(bus: &Bus) -> Result<(PathBuf, BoardSession)> {
    let found = current(bus)?.ok_or_else(|| {
        Error::not_found(format!(
            "track {} has no board session; open one with `pantheon board --track {} open --checkpoint EVALUATE_PLAN --proposal TEXT`",
            bus.track, bus.track
        ))
    })?;
    if let Some(seen) = &bus.expect_board {
        seen.check(&found.1)?;
    }
    Ok(found)
}

/// A board session as a caller saw it: its id, phase and discussion round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardSeen {
    /// The session's id.
    pub session_id: String,
    /// Its phase (`ASSESSING`, `DISCUSSING`, …).
    pub status: String,
    /// Discussion rounds closed.
    pub rounds: u32,
}

impl BoardSeen {
    /// What `s` is now, in the same terms.
    pub fn of(s: &BoardSession) -> Self {
        Self {
            session_id: s.session_id.clone(),
            status: s.status.clone(),
            rounds: s.phases.discuss.rounds,
        }
    }

    /// Refuses, saying what changed, when `s` is no longer the session seen.
    pub fn check(&self, s: &BoardSession) -> Result<()> {
        let now = Self::of(s);
        let mut changed = Vec::new();
        if now.session_id != self.session_id {
            changed.push(format!("session {} → {}", self.session_id, now.session_id));
        }
        if now.status != self.status {
            changed.push(format!("phase {} → {}", self.status, now.status));
        }
        if now.rounds != self.rounds {
            changed.push(format!(
                "discussion rounds closed {} → {}",
                self.rounds, now.rounds
            ));
        }
        if changed.is_empty() {
            Ok(())
        } else {
            Err(Error::refused(format!(
                "the board changed since it was shown ({}); nothing was done",
                changed.join(", ")
            )))
        }
    }
}

/// Reads `discussion.jsonl` tolerantly: (lines, lines skipped).
pub fn read_discussion(path: &Path) -> Result<(Vec<DiscussionLine>, usize)> {
    // Bounded like every JSON read; a FIFO or a device is refused, never waited on.
    let Some(bytes) = crate::store::read::read_bytes(path)? else {
        return Ok((Vec::new(), 0));
    };
    let mut lines = Vec::new();
    let mut skipped = 0;
    let ends_clean = bytes.last().is_none_or(|b| *b == b'\n');
    let mut parts: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if ends_clean {
        parts.pop();
    }
    for (i, line) in parts.iter().enumerate() {
        let last_unterminated = !ends_clean && i == parts.len() - 1;
        match serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| from_object::<DiscussionLine>(&v))
        {
            Some(l) if !last_unterminated => lines.push(l),
            _ => skipped += 1,
        }
    }
    Ok((lines, skipped))
}

impl Bus {
    pub(super) fn assessments_path(&self) -> PathBuf {
        self.board_dir().join(layout::ASSESSMENTS_FILE)
    }
    pub(super) fn votes_path(&self) -> PathBuf {
        self.board_dir().join(layout::VOTES_FILE)
    }
    pub(super) fn discussion_path(&self) -> PathBuf {
        self.board_dir().join(layout::DISCUSSION_FILE)
    }
    pub(super) fn resolution_path(&self) -> PathBuf {
        self.board_dir().join(layout::RESOLUTION_FILE)
    }

    pub(super) fn save_session(&self, path: &Path, s: &BoardSession) -> Result<()> {
        write_json(&self.root, path, s)
    }

    /// Moves the session files and their records out of `board/` into `board/archive/{id}/`.
    pub(super) fn archive_board_files(&self) -> Result<Option<ArchivedSession>> {
        let board = self.board_dir();
        let sessions = session_files(&board);
        let loose: Vec<PathBuf> = [
            self.assessments_path(),
            self.discussion_path(),
            self.votes_path(),
            self.resolution_path(),
        ]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
        if sessions.is_empty() && loose.is_empty() {
            return Ok(None);
        }
        let newest = current(self).ok().flatten();
        let (newest_id, status) = match &newest {
            Some((_, s)) => (s.session_id.clone(), Some(s.status.clone())),
            None => (
                format!("unknown-{}", Utc::now().format("%Y%m%d%H%M%S")),
                None,
            ),
        };
        let dir_name = |id: &str| {
            if is_valid_name(id) {
                id.to_owned()
            } else {
                encode_key(id)
            }
        };
        let unique_dir = |id: &str| {
            let mut d = board.join(layout::BOARD_ARCHIVE_DIR).join(dir_name(id));
            let mut n = 1;
            while d.exists() {
                n += 1;
                d = board
                    .join(layout::BOARD_ARCHIVE_DIR)
                    .join(format!("{}-{n}", dir_name(id)));
            }
            d
        };
        let main_dir = unique_dir(&newest_id);
        let mut files = Vec::new();
        for (id, path) in &sessions {
            let is_newest = newest.as_ref().is_some_and(|(p, _)| p == path);
            let dir = if is_newest {
                main_dir.clone()
            } else {
                unique_dir(id)
            };
            let Some(name) = path.file_name() else {
                continue;
            };
            rename_durable(&self.root, path, &dir.join(name))?;
            files.push(name.to_string_lossy().into_owned());
        }
        for p in loose {
            let Some(name) = p.file_name() else {
                continue;
            };
            rename_durable(&self.root, &p, &main_dir.join(name))?;
            files.push(name.to_string_lossy().into_owned());
        }
        Ok(Some(ArchivedSession {
            session_id: newest_id,
            status,
            dir: main_dir,
            files,
        }))
    }
}
