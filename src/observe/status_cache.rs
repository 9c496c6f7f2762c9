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
pub(crate) const SETTLED: chrono::Duration = chrono::Duration::seconds(1);
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
pub(crate) fn cache_path(root: &Root) -> Option<PathBuf> {
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
pub(crate) fn read(root: &Root, rule: &OverdueRule, now: DateTime<Utc>) -> Health {
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

/// The attention counts kept between runs: reused while nothing the live model reads changed
/// (each directory it reads, and the files of the directories written in place: queues, the
/// ledger, board files, definitions, the config) and no time-based item can have come or gone
/// (`live::attention::next_change`), for at most [`ATTENTION_MAX_AGE`].
pub(crate) const ATTENTION_MAX_AGE: chrono::Duration = chrono::Duration::seconds(60);
const ATTENTION_VERSION: u32 = 1;

/// What one directory or file was when the counts were read (all zero: not there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    path: String,
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_ns: i64,
    size: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct AttentionFile {
    version: u32,
    root: String,
    written_us: i64,
    until_us: i64,
    seen: Vec<Seen>,
    counts: serde_json::Value,
}

fn seen(path: &Path) -> Seen {
    let mut s = Seen {
        path: path.to_string_lossy().into_owned(),
        ..Seen::default()
    };
    if let Ok(m) = std::fs::symlink_metadata(path) {
        s.dev = m.dev();
        s.ino = m.ino();
        s.mtime = m.mtime();
        s.mtime_ns = m.mtime_nsec();
        s.size = m.len();
    }
    s
}

/// Every directory the live model reads, and each file of those written in place.
fn fingerprint(root: &Root) -> Vec<Seen> {
    use crate::engine::layout::{BOARD_DIR, BUS_DIR};
    let in_place = |d: &Path| {
        let name = d.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        name == BUS_DIR
            || name == BOARD_DIR
            || *d == root.workflows_dir()
            || *d == crate::engine::ledger::cost_dir(root)
    };
    let mut out = Vec::new();
    for dir in crate::live::model::dirs_to_watch(root) {
        out.push(seen(&dir));
        if in_place(&dir)
            && let Ok(rd) = std::fs::read_dir(&dir)
        {
            let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            out.extend(files.iter().map(|f| seen(f)));
        }
    }
    out.push(seen(&root.config_path()));
    out
}

fn load_attention(path: &Path) -> Option<AttentionFile> {
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
    serde_json::from_slice(&bytes).ok()
}

/// The attention counts of `root` at `now`: those of the last run while they still hold, else
/// `count()` (the one attention function over a fresh snapshot) and its next change.
pub(crate) fn attention(
    root: &Root,
    now: DateTime<Utc>,
    count: impl FnOnce() -> (crate::live::attention::Tally, DateTime<Utc>),
) -> crate::live::attention::Tally {
    let Some(path) = cache_path(root).map(|p| p.with_extension("attention.json")) else {
        return count().0;
    };
    let root_name = root.dir.to_string_lossy().into_owned();
    let before = fingerprint(root);
    if let Some(kept) = load_attention(&path)
        && kept.version == ATTENTION_VERSION
        && kept.root == root_name
        && kept.written_us <= now.timestamp_micros()
        && now.timestamp_micros() < kept.until_us
        && kept.seen == before
        && let Some(t) = crate::live::attention::Tally::from_json(&kept.counts)
    {
        return t;
    }
    let (tally, next) = count();
    // Kept only when nothing changed while it was read, nor within the file system's clock tick
    // before (a change in the same tick would leave the times as they were).
    let settled = now - SETTLED;
    let quiet = before.iter().all(|s| {
        DateTime::from_timestamp(s.mtime, u32::try_from(s.mtime_ns).unwrap_or(0))
            .is_none_or(|t| t < settled)
    });
    if quiet && fingerprint(root) == before {
        let until = next.min(now + ATTENTION_MAX_AGE);
        let file = AttentionFile {
            version: ATTENTION_VERSION,
            root: root_name,
            written_us: now.timestamp_micros(),
            until_us: until.timestamp_micros(),
            seen: before,
            counts: tally.to_json(),
        };
        let Some(dir) = path.parent() else {
            return tally;
        };
        if std::fs::create_dir_all(dir).is_ok()
            && let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir)
            && let Ok(bytes) = serde_json::to_vec(&file)
            && tmp.write_all(&bytes).is_ok()
        {
            let _ = tmp.persist(&path);
        }
    }
    tally
}
