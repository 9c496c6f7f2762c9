//! `pantheon status`'s figures kept between runs, so a status line run every second on a large
//! root does not read every dispatch file each time.
//!
//! The figures of each inbox, `_quarantine` and dead-letter directory (`status::DirFigures`) are kept
//! with the directory's identity and modification time. Every protocol write is a rename into the
//! directory or a removal from it, and each changes the directory's modification time, so a
//! directory whose identity and time are unchanged holds the same files with the same contents: its
//! figures are reused, and the overdue instants they keep make them right at any later time. A
//! directory is kept only when its last change is more than [`SETTLED`] older than its reading (a
//! change in the same tick of the file system's clock could otherwise go unseen), and only when it
//! did not change while it was read.
//!
//! The cache lives outside the root, in the user's cache directory (`$XDG_CACHE_HOME/pantheon/status/`
//! or `~/.cache/pantheon/status/`), one file per root; a cache that does not parse, names another
//! root or rule, or was written in the future is ignored. A writer that rewrites a dispatch in place
//! (against the protocol) is seen when its directory next changes; `status --no-cache` reads
//! everything.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::engine::{
    OverdueRule, Root,
    status::{self, DirFigures, DirKind, Health},
};

/// How long after its last change a directory's figures may be kept.
pub const SETTLED: chrono::Duration = chrono::Duration::seconds(1);
/// The largest cache file read.
const MAX_CACHE_BYTES: u64 = 32 << 20;
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct DirKey {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Kept {
    kind: DirKind,
    key: DirKey,
    figures: DirFigures,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    root: String,
    unacked_after_s: i64,
    held_after_s: i64,
    written_us: i64,
    dirs: BTreeMap<String, Kept>,
}

fn key_of(dir: &Path) -> Option<(DirKey, DateTime<Utc>)> {
    let m = std::fs::symlink_metadata(dir).ok()?;
    if !m.is_dir() {
        return None;
    }
    let changed = DateTime::from_timestamp(m.mtime(), u32::try_from(m.mtime_nsec()).ok()?)?;
    Some((
        DirKey {
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
        },
        changed,
    ))
}

/// Where the cache of `root` is kept, when the user has a cache directory.
pub fn cache_path(root: &Root) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    // FNV-1a of the root's path: a name of fixed length; the file names its root inside.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Some(
        base.join("pantheon")
            .join("status")
            .join(format!("{h:016x}.json")),
    )
}

fn load(path: &Path, root: &Root, rule: &OverdueRule, now: DateTime<Utc>) -> CacheFile {
    let read = || -> Option<CacheFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        f.take(MAX_CACHE_BYTES).read_to_end(&mut bytes).ok()?;
        serde_json::from_slice::<CacheFile>(&bytes).ok()
    };
    match read() {
        Some(c)
            if c.version == VERSION
                && c.root == root.dir.to_string_lossy()
                && c.unacked_after_s == rule.unacked_after.num_seconds()
                && c.held_after_s == rule.held_after.num_seconds()
                && c.written_us <= now.timestamp_micros() =>
        {
            c
        }
        _ => CacheFile::default(),
    }
}

fn save(path: &Path, c: &CacheFile) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
        return;
    };
    let Ok(bytes) = serde_json::to_vec(c) else {
        return;
    };
    if tmp.write_all(&bytes).is_ok() {
        let _ = tmp.persist(path);
    }
}

/// The root's health at `now`, reusing the figures of directories unchanged since the last run.
pub fn read(root: &Root, rule: &OverdueRule, now: DateTime<Utc>) -> Health {
    let Some(path) = cache_path(root) else {
        return status::read(root, rule, now);
    };
    let old = load(&path, root, rule, now);
    let mut new = CacheFile {
        version: VERSION,
        root: root.dir.to_string_lossy().into_owned(),
        unacked_after_s: rule.unacked_after.num_seconds(),
        held_after_s: rule.held_after.num_seconds(),
        written_us: now.timestamp_micros(),
        dirs: BTreeMap::new(),
    };
    let h = status::read_with(root, now, &mut |dir, kind| {
        let name = dir.to_string_lossy().into_owned();
        let before = key_of(dir);
        if let (Some((key, _)), Some(k)) = (before, old.dirs.get(&name))
            && k.key == key
            && k.kind == kind
        {
            new.dirs.insert(name, k.clone());
            return k.figures.clone();
        }
        let figures = DirFigures::read(dir, kind, rule, now);
        if let Some((key, changed)) = before
            && changed + SETTLED < now
            && key_of(dir).map(|(k, _)| k) == Some(key)
        {
            new.dirs.insert(
                name,
                Kept {
                    kind,
                    key,
                    figures: figures.clone(),
                },
            );
        }
        figures
    });
    if new.dirs != old.dirs {
        save(&path, &new);
    }
    h
}
