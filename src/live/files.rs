//! Incremental file tracking: a JSON file is re-read only when its fingerprint changes and keeps its
//! last good value when caught mid-write; an append-only log is read from the offset where the last
//! read stopped, with truncation and rotation detected.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::engine::read_json_once;

/// What identifies one version of a file without reading it: inode, size and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub ino: u64,
    /// The size plus one: never zero, so an `Option<Fingerprint>` (kept per record file, 200,000
    /// of them in a large root) is no larger than a fingerprint.
    len_1: std::num::NonZeroU64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Fingerprint {
    /// The size in bytes (a file of `u64::MAX` bytes reads as one byte less; none exists).
    pub(crate) fn size(&self) -> u64 {
        self.len_1.get() - 1
    }

    /// Stats `path`; `None` when it does not exist (or cannot be stat'ed).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let m = std::fs::metadata(path).ok()?;
        Self::from_metadata(&m)
    }

    /// The fingerprint of a file's metadata (an open handle's, say); `None` when it is not a
    /// regular file.
    pub(crate) fn from_metadata(m: &std::fs::Metadata) -> Option<Self> {
        if !m.is_file() {
            return None;
        }
        Some(Self {
            ino: m.ino(),
            len_1: std::num::NonZeroU64::new(m.len().saturating_add(1))
                .unwrap_or(std::num::NonZeroU64::MAX),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            ctime_ns: m
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.ctime_nsec()),
        })
    }
}

/// What a refresh found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Same fingerprint: nothing was read.
    Unchanged,
    /// Re-read and parsed into a new value.
    Updated,
    /// Re-read but did not parse: the last good value (if any) is kept and a warning set.
    Broken,
    /// The file is gone.
    Removed,
}

/// Appended to a file's warning when the model keeps showing the value it last parsed from it.
pub(crate) const LAST_GOOD_NOTE: &str = " (showing the last good version)";

/// One JSON file and the last value that parsed, re-read only when it changes.
#[derive(Debug, Clone)]
pub(crate) struct JsonFile<T> {
    path: PathBuf,
    file: RecordFile<T>,
}

impl<T> JsonFile<T> {
    /// A cache for `path`, not read yet.
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            file: RecordFile::default(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The last value that parsed.
    pub(crate) fn value(&self) -> Option<&Arc<T>> {
        self.file.value()
    }

    /// Why the current file content is not the value shown (mid-write, corrupt), if it is not.
    pub(crate) fn warning(&self) -> Option<&str> {
        self.file.warning()
    }

    /// Re-reads the file if its fingerprint changed, parsing the JSON with `parse`.
    pub(crate) fn refresh<E: Into<String>>(
        &mut self,
        parse: impl FnOnce(Value) -> Result<T, E>,
    ) -> Refresh {
        self.file.refresh(&self.path, parse)
    }
}

/// A [`JsonFile`] that does not keep its path: the owner knows it (a record file of a directory
/// with thousands of them, whose path is the directory and its key), which saves a path per file.
#[derive(Debug, Clone)]
pub struct RecordFile<T> {
    fingerprint: Option<Fingerprint>,
    value: Option<Arc<T>>,
    /// Boxed once more, so the rare warning costs one pointer in every record (48 bytes in all).
    #[allow(
        clippy::box_collection,
        reason = "a thin pointer: a `String` or `Box<str>` here costs every record 16 more bytes"
    )]
    warning: Option<Box<String>>,
}

impl<T> Default for RecordFile<T> {
    fn default() -> Self {
        Self {
            fingerprint: None,
            value: None,
            warning: None,
        }
    }
}

impl<T> RecordFile<T> {
    /// The last value that parsed.
    pub fn value(&self) -> Option<&Arc<T>> {
        self.value.as_ref()
    }

    /// Why the current file content is not the value shown (mid-write, corrupt), if it is not.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref().map(String::as_str)
    }

    /// Re-reads `path` (this record's file) if its fingerprint changed, parsing the JSON with `parse`.
    pub fn refresh<E: Into<String>>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(Value) -> Result<T, E>,
    ) -> Refresh {
        if self.fingerprint.is_none() {
            // Nothing read yet (or gone since): no fingerprint to compare, so the file is opened
            // straight away and the fingerprint taken from the handle, with no `stat` first.
            return match self.read_first(path, parse) {
                Ok(r) => r,
                Err(parse) => self.refresh_stat_first(path, parse),
            };
        }
        self.refresh_stat_first(path, parse)
    }

    /// The first read of a file this record holds nothing of: opened without following a link,
    /// its fingerprint from the open handle. `Err(parse)` (handed back) when it could not be opened
    /// so (a link, no permission): the caller's `stat`-first path decides then, as for any file.
    pub fn read_first<E: Into<String>, P: FnOnce(Value) -> Result<T, E>>(
        &mut self,
        path: &Path,
        parse: P,
    ) -> Result<Refresh, P> {
        let read = match crate::engine::read_json_nofollow(path) {
            Ok(Some(read)) => read,
            // Missing, or not a regular file: nothing was here and nothing is.
            Ok(None) => return Ok(Refresh::Unchanged),
            Err(_) => return Err(parse),
        };
        self.fingerprint = Fingerprint::from_metadata(&read.metadata);
        let parsed = read
            .value
            .map_err(|e| e.to_string())
            .and_then(|v| parse(v).map_err(Into::into));
        Ok(self.take_parsed(parsed))
    }

    /// Re-reads `path` if a `stat` says its fingerprint changed.
    fn refresh_stat_first<E: Into<String>>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(Value) -> Result<T, E>,
    ) -> Refresh {
        let Some(fp) = Fingerprint::of(path) else {
            let was = self.fingerprint.take().is_some() || self.value.is_some();
            self.value = None;
            self.warning = None;
            return if was {
                Refresh::Removed
            } else {
                Refresh::Unchanged
            };
        };
        if self.fingerprint == Some(fp) {
            return Refresh::Unchanged;
        }
        self.fingerprint = Some(fp);
        let parsed = match read_json_once(path) {
            Ok(Some(v)) => parse(v).map_err(Into::into),
            Ok(None) => {
                self.fingerprint = None;
                self.value = None;
                self.warning = None;
                return Refresh::Removed;
            }
            Err(e) => Err(e.to_string()),
        };
        self.take_parsed(parsed)
    }

    /// Keeps a parsed value, or the warning of one that did not parse (and the last good value).
    fn take_parsed(&mut self, parsed: Result<T, String>) -> Refresh {
        match parsed {
            Ok(v) => {
                self.value = Some(Arc::new(v));
                self.warning = None;
                Refresh::Updated
            }
            Err(msg) => {
                self.warning = Some(Box::new(if self.value.is_some() {
                    format!("{msg}{LAST_GOOD_NOTE}")
                } else {
                    msg
                }));
                Refresh::Broken
            }
        }
    }
}

/// Where an append-only log is read from: the file's identity and the offset of the first unread byte.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogCursor {
    ino: Option<u64>,
    offset: u64,
    /// Bytes skipped at the start when a large file was opened from its tail.
    pub skipped_head_bytes: u64,
}

/// How a log changed since the cursor last looked at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogChange {
    /// Nothing new.
    Unchanged,
    /// New bytes after the offset.
    Appended,
    /// A different file now has the name (rotation, archive) or it shrank (truncation): read from the start.
    Replaced,
    /// The file is gone.
    Removed,
}

impl LogCursor {
    /// A cursor that starts at the beginning of the file.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The offset of the first byte not yet consumed.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Records that everything before `offset` has been consumed.
    pub(crate) fn advance_to(&mut self, offset: u64) {
        self.offset = offset;
    }

    /// Compares the file with the cursor. On first sight of a file longer than `tail_bytes`, the
    /// cursor jumps to the first line that starts in the last `tail_bytes` (never reading the head).
    pub(crate) fn check(&mut self, path: &Path, tail_bytes: u64) -> LogChange {
        let Some(fp) = Fingerprint::of(path) else {
            let was = self.ino.take().is_some();
            self.offset = 0;
            return if was {
                LogChange::Removed
            } else {
                LogChange::Unchanged
            };
        };
        match self.ino {
            Some(ino) if ino == fp.ino && fp.size() >= self.offset => {
                if fp.size() > self.offset {
                    LogChange::Appended
                } else {
                    LogChange::Unchanged
                }
            }
            previous => {
                self.ino = Some(fp.ino);
                self.offset = 0;
                self.skipped_head_bytes = 0;
                if fp.size() > tail_bytes
                    && let Ok(start) = line_start_after(path, fp.size() - tail_bytes)
                {
                    self.offset = start;
                    self.skipped_head_bytes = start;
                }
                if previous.is_some() {
                    LogChange::Replaced
                } else if fp.size() > self.offset {
                    LogChange::Appended
                } else {
                    LogChange::Unchanged
                }
            }
        }
    }
}

/// The offset of the first line that starts at or after `from` (just after the first `\n` at or after
/// `from - 1`), so a tail read never begins mid-line.
pub(crate) fn line_start_after(path: &Path, from: u64) -> std::io::Result<u64> {
    if from == 0 {
        return Ok(0);
    }
    let mut f = File::open(path)?;
    let mut pos = from - 1;
    f.seek(SeekFrom::Start(pos))?;
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(pos);
        }
        if let Some(i) = buf[..n].iter().position(|b| *b == b'\n') {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_record_file_costs_48_bytes_and_keeps_a_files_size() {
        // Kept per state and dispatch file: 200,000 of them in a root of 100,000 workflows.
        assert_eq!(std::mem::size_of::<Option<Fingerprint>>(), 32);
        assert_eq!(std::mem::size_of::<RecordFile<Value>>(), 48);
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 1, 4096] {
            let p = dir.path().join(format!("f{len}"));
            std::fs::write(&p, vec![b'x'; len]).unwrap();
            assert_eq!(Fingerprint::of(&p).unwrap().size(), len as u64);
        }
    }

    fn parse_obj(v: Value) -> Result<Value, &'static str> {
        if v.is_object() {
            Ok(v)
        } else {
            Err("not an object")
        }
    }

    #[test]
    fn json_file_is_reread_only_on_change_and_keeps_last_good_value() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        let mut f = JsonFile::<Value>::new(&p);
        assert_eq!(f.refresh(parse_obj), Refresh::Unchanged);
        std::fs::write(&p, r#"{"n": 1}"#).unwrap();
        assert_eq!(f.refresh(parse_obj), Refresh::Updated);
        assert_eq!(f.refresh(parse_obj), Refresh::Unchanged);
        std::fs::write(&p, r#"{"n": "#).unwrap();
        assert_eq!(f.refresh(parse_obj), Refresh::Broken);
        assert_eq!(f.value().unwrap()["n"], 1);
        let w = f.warning().unwrap();
        assert!(w.contains("truncated") && w.contains("last good"), "{w}");
        std::fs::write(&p, r#"{"n": 22}"#).unwrap();
        assert_eq!(f.refresh(parse_obj), Refresh::Updated);
        assert_eq!(f.value().unwrap()["n"], 22);
        assert!(f.warning().is_none());
        std::fs::remove_file(&p).unwrap();
        assert_eq!(f.refresh(parse_obj), Refresh::Removed);
        assert!(f.value().is_none());
    }

    #[test]
    fn log_cursor_detects_append_truncation_and_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.jsonl");
        let mut c = LogCursor::new();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Unchanged);
        std::fs::write(&p, "a\n").unwrap();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Appended);
        c.advance_to(2);
        assert_eq!(c.check(&p, 1 << 20), LogChange::Unchanged);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Appended);
        c.advance_to(4);
        // Truncated in place.
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Replaced);
        assert_eq!(c.offset(), 0);
        // Rotated: a new file under the same name.
        std::fs::write(dir.path().join("new"), "x\n").unwrap();
        std::fs::rename(dir.path().join("new"), &p).unwrap();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Replaced);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(c.check(&p, 1 << 20), LogChange::Removed);
    }

    #[test]
    fn a_large_log_is_opened_at_a_line_start_near_its_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.jsonl");
        let line = "0123456789\n"; // 11 bytes
        std::fs::write(&p, line.repeat(100)).unwrap();
        let mut c = LogCursor::new();
        assert_eq!(c.check(&p, 50), LogChange::Appended);
        assert_eq!(c.offset() % 11, 0);
        assert!(c.offset() >= 1100 - 50 && c.offset() <= 1100);
        assert_eq!(c.skipped_head_bytes, c.offset());
        assert_eq!(line_start_after(&p, 11).unwrap(), 11);
        assert_eq!(line_start_after(&p, 12).unwrap(), 22);
    }
}
