//! Parsed dispatches kept between reads of the same inbox by a long-lived handle (the MCP server
//! answers `check_inbox` many times over an inbox that rarely changes).
//!
//! A dispatch is taken from the cache only while its file is the same file: same device, inode, size,
//! modification and change times (`lstat`, never following a link). A file modified less than
//! [`SETTLE`] before it was read is not kept, since a rewrite in place within the file system's
//! timestamp granularity would keep all five (git's "racily clean" index entries, the same answer).
//! Whatever is not a plain file goes through [`files::read_dispatch_dir`]'s rules unchanged.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::files::{self, FileError};
use super::model::Dispatch;

/// How long a file must have stood unchanged before its parsed form is kept.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);
/// The most inbox directories kept; past it the cache starts again empty.
const MAX_DIRS: usize = 256;
/// The most file bytes whose parsed dispatches are kept, over all directories; past it new files
/// are read but not kept.
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The identity of a file's content, as far as `lstat` can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// True when the file last changed at least `settle` before `now`.
    fn settled(&self, now: SystemTime, settle: Duration) -> bool {
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        let last = self.mtime_ns.max(self.ctime_ns);
        now_ns.saturating_sub(last) >= settle.as_nanos() as i128
    }
}

struct Cached {
    stamp: Stamp,
    dispatch: Arc<Dispatch>,
}

#[derive(Default)]
struct Dirs {
    dirs: HashMap<PathBuf, HashMap<OsString, Cached>>,
    bytes: u64,
}

/// The cache a [`super::Conductor`] keeps (shared by its clones' calls, cheap to lock: never held
/// while a file is read).
pub(crate) struct InboxCache {
    inner: Mutex<Dirs>,
    settle: Duration,
}

impl Default for InboxCache {
    fn default() -> Self {
        Self::settling(SETTLE)
    }
}

/// A directory of dispatches as [`files::read_dispatch_dir`] gives it, each dispatch shared.
pub(crate) type SharedListing = (Vec<(PathBuf, Arc<Dispatch>)>, Vec<FileError>);

impl InboxCache {
    /// A cache that keeps files unchanged for `settle`.
    fn settling(settle: Duration) -> Self {
        Self {
            inner: Mutex::default(),
            settle,
        }
    }

    /// The dispatches of `dir` in [`files::dispatch_order`], read afresh where their file changed.
    pub(crate) fn read_dir(&self, dir: &Path) -> SharedListing {
        let mut found = Vec::new();
        let mut errors = Vec::new();
        let _ = crate::store::commit::settle_in(dir);
        let Ok(rd) = std::fs::read_dir(dir) else {
            self.forget(dir);
            return (found, errors);
        };
        let now = SystemTime::now();
        let known = self.take(dir);
        let mut kept: HashMap<OsString, Cached> = HashMap::with_capacity(known.len());
        let mut known = known;
        for entry in rd.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let plain = entry
                .metadata()
                .ok()
                .filter(|m| m.file_type().is_file())
                .map(|m| Stamp::of(&m));
            let (Some(stamp), true) = (plain, name.to_string_lossy().ends_with(".json")) else {
                // Links, directories, other names: the uncached reader's rules.
                let (one, errs) = files::read_dispatch_entry(&entry);
                found.extend(one.map(|(p, d)| (p, Arc::new(d))));
                errors.extend(errs);
                continue;
            };
            let path = entry.path();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if let Some(c) = known.remove(&name).filter(|c| c.stamp == stamp) {
                found.push((path, c.dispatch.clone()));
                kept.insert(name, c);
                continue;
            }
            match files::read_model::<Dispatch>(&path) {
                Ok(Some(d)) => {
                    let d = Arc::new(d);
                    if stamp.settled(now, self.settle) {
                        kept.insert(
                            name,
                            Cached {
                                stamp,
                                dispatch: d.clone(),
                            },
                        );
                    }
                    found.push((path, d));
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        self.put(dir, kept);
        found.sort_by_cached_key(|(p, d)| files::dispatch_order(p, d));
        (found, errors)
    }

    fn take(&self, dir: &Path) -> HashMap<OsString, Cached> {
        let Ok(mut g) = self.inner.lock() else {
            return HashMap::new();
        };
        let taken = g.dirs.remove(dir).unwrap_or_default();
        g.bytes = g
            .bytes
            .saturating_sub(taken.values().map(|c| c.stamp.len).sum());
        taken
    }

    fn put(&self, dir: &Path, mut kept: HashMap<OsString, Cached>) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if g.dirs.len() >= MAX_DIRS {
            g.dirs.clear();
            g.bytes = 0;
        }
        let mut bytes: u64 = kept.values().map(|c| c.stamp.len).sum();
        if g.bytes.saturating_add(bytes) > MAX_BYTES {
            kept.clear();
            bytes = 0;
        }
        g.bytes = g.bytes.saturating_add(bytes);
        // Two calls reading the same directory at once: the later one's view is as good.
        if let Some(old) = g.dirs.insert(dir.to_path_buf(), kept) {
            let old_bytes: u64 = old.values().map(|c| c.stamp.len).sum();
            g.bytes = g.bytes.saturating_sub(old_bytes);
        }
    }

    fn forget(&self, dir: &Path) {
        drop(self.take(dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn dispatch(id: &str, summary: &str) -> String {
        serde_json::json!({"handoff_id": id, "workflow_id": "wf_1", "from_god": "a", "to_god": "b",
            "step": "s", "context": {"summary": summary}, "dispatched_at": "2026-01-01T00:00:00Z"})
        .to_string()
    }

    /// Back-dates a file's modification time.
    fn age(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    fn summaries(l: &SharedListing) -> Vec<String> {
        l.0.iter().map(|(_, d)| d.context.summary.clone()).collect()
    }

    #[test]
    fn a_settled_file_is_parsed_once_and_a_changed_one_again() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hof_1.json");
        fs::write(&p, dispatch("hof_1", "first")).unwrap();
        age(&p);
        // Backdating moved the change time to now: this cache keeps files at once.
        let cache = InboxCache::settling(Duration::ZERO);
        assert_eq!(summaries(&cache.read_dir(dir.path())), ["first"]);
        let a = cache.read_dir(dir.path()).0[0].1.clone();
        let b = cache.read_dir(dir.path()).0[0].1.clone();
        assert!(
            Arc::ptr_eq(&a, &b),
            "a settled, unchanged file is not parsed again"
        );
        // Rewritten in place with the same size: the change time moves, so it is read again.
        fs::write(&p, dispatch("hof_1", "fresh")).unwrap();
        assert_eq!(summaries(&cache.read_dir(dir.path())), ["fresh"]);
        // Replaced by a rename: a new inode.
        let tmp = dir.path().join(".tmp");
        fs::write(&tmp, dispatch("hof_1", "third")).unwrap();
        fs::rename(&tmp, &p).unwrap();
        assert_eq!(summaries(&cache.read_dir(dir.path())), ["third"]);
        fs::remove_file(&p).unwrap();
        assert!(cache.read_dir(dir.path()).0.is_empty());
    }

    #[test]
    fn a_file_changed_just_now_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hof_1.json");
        fs::write(&p, dispatch("hof_1", "first")).unwrap();
        let cache = InboxCache::default();
        let a = cache.read_dir(dir.path()).0[0].1.clone();
        let b = cache.read_dir(dir.path()).0[0].1.clone();
        assert!(!Arc::ptr_eq(&a, &b), "a fresh file is read again each time");
    }

    #[test]
    fn links_and_foreign_names_keep_the_uncached_rules() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hof_1.json");
        fs::write(&p, dispatch("hof_1", "first")).unwrap();
        age(&p);
        std::os::unix::fs::symlink(&p, dir.path().join("hof_2.json")).unwrap();
        fs::write(dir.path().join("notes.txt"), "x").unwrap();
        fs::write(dir.path().join("hof_3.json"), "{ torn").unwrap();
        let cache = InboxCache::default();
        let (found, errors) = cache.read_dir(dir.path());
        let (plain_found, plain_errors) = files::read_dispatch_dir(dir.path());
        assert_eq!(found.len(), plain_found.len());
        let paths = |e: &[FileError]| {
            let mut v: Vec<PathBuf> = e.iter().map(|e| e.path.clone()).collect();
            v.sort();
            v
        };
        assert_eq!(paths(&errors), paths(&plain_errors));
        assert_eq!(
            errors.len(),
            2,
            "the torn file and the foreign name: {errors:?}"
        );
    }
}
