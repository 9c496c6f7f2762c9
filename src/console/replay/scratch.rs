//! The recorded tree laid out as a root of its own, in a private temporary directory outside the
//! real root, so the live model reads a past moment exactly as it reads the present: every pane
//! works unchanged. Moving to another moment rewrites only the files that differ (an append only
//! its new bytes) and names them, so the model re-reads only those.
//!
//! Only the files the console reads are laid out ([`read_by_console`]).
//!
//! The history is input like any file of a root: a key that is not a plain relative path under
//! `conductor/` or `shared/handoffs/` is skipped, never joined.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::engine::{FileVer, HistoryDir, HistoryTree, Root, layout};

/// A scratch root showing one tree of the history. Removed when dropped.
pub(crate) struct Scratch {
    dir: tempfile::TempDir,
    /// The scratch directory as a root (default layout).
    pub root: Root,
    /// What the directory shows now (the files the console reads).
    tree: HistoryTree,
    /// Directories known to exist (no `stat` per file written into them).
    made: std::cell::RefCell<std::collections::HashSet<PathBuf>>,
}

/// Where `key` goes under `dir`, or `None` when the key is not a plain relative path inside one of
/// the recorded trees (or names the history itself).
pub(crate) fn place(dir: &Path, key: &str) -> Option<PathBuf> {
    if !(under(key, layout::CONDUCTOR_DIR, None)
        || under(key, layout::SHARED_DIR, Some(layout::HANDOFFS_DIR)))
        || under(key, layout::CONDUCTOR_DIR, Some(layout::HISTORY_DIR))
        || key.contains('\0')
        || key.len() > 4096
    {
        return None;
    }
    // Every part a plain name: no empty part (`a//b`, a trailing `/`), no `.` or `..`.
    let plain = key
        .split('/')
        .all(|part| !part.is_empty() && part != "." && part != "..");
    plain.then(|| dir.join(key))
}

/// True for the files the console reads: not the handoffs (`shared/handoffs/`) nor the archives
/// (`conductor/archive/`), which neither the live model nor a pane opens, and which are most of a
/// large root's files.
pub(crate) fn read_by_console(key: &str) -> bool {
    !under(key, layout::SHARED_DIR, Some(layout::HANDOFFS_DIR))
        && !under(key, layout::CONDUCTOR_DIR, Some(layout::ARCHIVE_DIR))
}

/// True when `key` lies under `top/` (or `top/sub/`), tested in place: these run for every file of
/// a moment's tree, several times a seek (a `format!` of the prefixes per call made the sort of a
/// 10,000-workflow tree's keys allocate hundreds of thousands of times).
fn under(key: &str, top: &str, sub: Option<&str>) -> bool {
    let Some(rest) = key.strip_prefix(top).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    sub.is_none_or(|sub| rest.strip_prefix(sub).is_some_and(|r| r.starts_with('/')))
}

/// Where a file comes in the layout of a moment: the few files first, then the directories of many
/// records, workflow states (the first pane) before inbox dispatches.
fn is_record(key: &str) -> u8 {
    if under(key, layout::CONDUCTOR_DIR, Some(layout::STATE_DIR)) {
        1
    } else if under(key, layout::CONDUCTOR_DIR, Some(layout::PENDING_DIR)) {
        2
    } else {
        0
    }
}

/// The records a bounded layout ([`Scratch::show_until`]) lays out at the least: more rows than a
/// tall terminal shows.
const FIRST_RECORDS: usize = 100;

/// Where a rewritten file is made before it takes its place: beside `conductor/` and `shared/`,
/// where no recorded path goes ([`place`]).
const FRESH: &str = ".fresh";

/// The name of a scratch root starts with this, then the console's pid and `-`.
const PREFIX: &str = "pantheon-replay-";

/// True when process `pid` exists (ours or another user's).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists; it has no memory effects.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes the scratch roots that consoles killed before they could remove their own left in
/// `tmp`: only directories (never a link) named `pantheon-replay-{pid}-…` whose owner is `uid` and
/// whose pid is not a running process. Returns how many went.
pub(crate) fn remove_stale(tmp: &Path, uid: u32) -> usize {
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .filter(|(pid, tail)| !tail.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        let path = tmp.join(&name);
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid);
        if ours
            && u32::try_from(pid).is_ok_and(|p| p != std::process::id())
            && !alive(pid)
            && std::fs::remove_dir_all(&path).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// The mode of the scratch root and every directory made in it: the owner's alone (the history's
/// content is the recorded root's, whatever that root's own modes).
const PRIVATE_DIR: u32 = 0o700;
/// The mode of every file laid out in the scratch root.
const PRIVATE_FILE: u32 = 0o600;

/// Makes directory `d` and those missing above it, each [`PRIVATE_DIR`].
fn private_dirs(d: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(d)
}

/// Creates (or empties) file `p`, [`PRIVATE_FILE`].
fn private_file(p: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE)
        .open(p)
}

fn mtime(us: i64) -> SystemTime {
    let us = u64::try_from(us).unwrap_or(0);
    SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_micros(us))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The least room a memory file system must have free to take a scratch root (one moment's files
/// the console reads: about 20 MiB for 10,000 workflows, 200 MiB for 100,000).
const MEMORY_FS_ROOM: u64 = 1 << 30;

/// Where scratch roots go: a memory file system when one is ours to use and has
/// [`MEMORY_FS_ROOM`] free (`$XDG_RUNTIME_DIR`, the user's own, else `/dev/shm`), so a seek's
/// thousands of new files cost no disk (on a busy ext4 disk the console's seek took 2.4 times as
/// long as on tmpfs, its inode allocation waiting on the disk), and the recorded root's content is
/// never written to the disk; else the usual temporary directory (`$TMPDIR`, `/tmp`).
fn scratch_base() -> Option<PathBuf> {
    scratch_base_from(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from))
}

/// [`scratch_base`] with `runtime` as the user's runtime directory.
fn scratch_base_from(runtime: Option<PathBuf>) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let ours = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        // The user's own directory, no link, nobody else's: as the runtime directory must be.
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0)
    };
    let shared = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        // A shared directory must be sticky (nobody removes another's entries), as /dev/shm is.
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.mode() & 0o1000 != 0)
    };
    let candidates = runtime
        .filter(|p| p.is_absolute() && ours(p))
        .into_iter()
        .chain(Some(PathBuf::from("/dev/shm")).filter(|p| shared(p)));
    candidates.into_iter().find(|p| memory_fs_with_room(p))
}

/// The memory file systems a scratch root may have been made in ([`scratch_base_from`]'s
/// candidates, whatever their free room now), for [`remove_stale`].
fn scratch_bases(runtime: Option<PathBuf>) -> Vec<PathBuf> {
    runtime
        .filter(|p| p.is_absolute())
        .into_iter()
        .chain(Some(PathBuf::from("/dev/shm")))
        .filter(|p| p.is_dir())
        .collect()
}

/// True when `p` is on a memory file system (tmpfs) with [`MEMORY_FS_ROOM`] free.
fn memory_fs_with_room(p: &Path) -> bool {
    const TMPFS_MAGIC: i128 = 0x0102_1994;
    let Ok(st) = rustix::fs::statfs(p) else {
        return false;
    };
    #[allow(clippy::unnecessary_cast)]
    let (kind, free) = (
        st.f_type as i128,
        (st.f_bavail as i128).saturating_mul(st.f_bsize as i128),
    );
    kind == TMPFS_MAGIC && free >= i128::from(MEMORY_FS_ROOM)
}

impl Scratch {
    /// An empty scratch root (mode 0700: the history's content is the root's, not the world's),
    /// named with the console's pid, so that the next console removes it if this one is killed
    /// before it can ([`remove_stale`], run here first); on a memory file system when there is
    /// one ([`scratch_base`]).
    pub(crate) fn new(settings: crate::engine::Settings) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let prefix = format!("{PREFIX}{}-", std::process::id());
        let mut builder = tempfile::Builder::new();
        builder
            .prefix(&prefix)
            .permissions(std::fs::Permissions::from_mode(PRIVATE_DIR));
        let dir = match scratch_base() {
            Some(base) => builder.tempdir_in(base).or_else(|_| builder.tempdir())?,
            None => builder.tempdir()?,
        };
        // Whatever the umask or the temporary directory's defaults: the owner's alone.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(PRIVATE_DIR))?;
        // A killed console's scratch root is removed wherever it was made: in the memory file
        // system (where it holds memory) even when this one lands in the temporary directory.
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir.path())?);
        let mut bases: Vec<PathBuf> = dir
            .path()
            .parent()
            .map(Path::to_path_buf)
            .into_iter()
            .collect();
        bases.extend(scratch_bases(
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        ));
        bases.push(std::env::temp_dir());
        bases.dedup();
        for base in &bases {
            remove_stale(base, uid);
        }
        private_dirs(&dir.path().join(layout::CONDUCTOR_DIR))?;
        private_dirs(
            &dir.path()
                .join(layout::SHARED_DIR)
                .join(layout::HANDOFFS_DIR),
        )?;
        let root = Root::at(dir.path()).with_settings(settings);
        Ok(Self {
            dir,
            root,
            tree: HistoryTree::new(),
            made: Default::default(),
        })
    }

    /// The scratch directory.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes the scratch root show `tree`, its contents read from `hist`; returns the paths of the
    /// files written or removed and of the directories made, for the model to read again. A file
    /// whose content the history did not keep (too large, forgotten) is shown empty.
    pub(crate) fn show(&mut self, hist: &HistoryDir, tree: &HistoryTree) -> Vec<PathBuf> {
        self.show_until(hist, tree, None).0
    }

    /// [`Self::show`], stopping once `until` has passed: the files of the record directories
    /// (workflow states, inbox dispatches) come last, as the live model's first load reads them
    /// last. Returns the paths touched and how many files are left to write (shown by a later call).
    pub(crate) fn show_until(
        &mut self,
        hist: &HistoryDir,
        tree: &HistoryTree,
        until: Option<Instant>,
    ) -> (Vec<PathBuf>, usize) {
        let mut touched = Vec::new();
        let gone: Vec<(String, bool)> = self
            .tree
            .iter()
            .filter(|(k, v)| tree.get(*k).is_none_or(|n| n.dir != v.dir) || !read_by_console(k))
            .map(|(k, v)| (k.clone(), v.dir))
            .collect();
        // Deepest first: a file before the directory holding it, so a directory recorded as gone is
        // empty when its turn comes.
        for (key, dir) in gone.into_iter().rev() {
            self.tree.remove(&key);
            if let Some(p) = place(self.dir.path(), &key)
                && self.remove(&p, dir)
            {
                touched.push(p);
            }
        }
        let mut due: Vec<(&String, &FileVer)> = tree
            .iter()
            .filter(|(k, v)| read_by_console(k) && self.tree.get(*k) != Some(*v))
            .collect();
        due.sort_by_key(|(k, _)| (is_record(k), *k));
        let mut left = due.len();
        // A first screen shows rows: past `until`, the layout still goes on to a screenful of
        // records (workflow states come first among them), however long the few files took.
        let mut records = 0usize;
        for (i, (key, new)) in due.into_iter().enumerate() {
            if i % 32 == 0 && records >= FIRST_RECORDS && until.is_some_and(|u| Instant::now() >= u)
            {
                break;
            }
            records += usize::from(is_record(key) > 0);
            left -= 1;
            let Some(p) = place(self.dir.path(), key) else {
                tracing::warn!(
                    key,
                    "replay: a recorded path that is not a plain relative path; skipped"
                );
                continue;
            };
            let old = self.tree.get(key.as_str());
            match self.write(hist, &p, old, new, &mut touched) {
                Ok(()) => {
                    touched.push(p);
                    self.tree.insert(key.clone(), new.clone());
                }
                Err(e) => tracing::warn!(key, "replay: cannot lay out a recorded file: {e}"),
            }
        }
        (touched, left)
    }

    /// Removes the file, or the recorded directory once it is empty (a directory that still holds
    /// something stays); true when it went.
    fn remove(&self, p: &Path, dir: bool) -> bool {
        if !dir {
            return std::fs::remove_file(p).is_ok();
        }
        if std::fs::remove_dir(p).is_err() {
            return false;
        }
        self.made.borrow_mut().retain(|d| !d.starts_with(p));
        true
    }

    /// Makes directory `d` and those missing above it, naming each one made in `made`.
    fn make_dir(&self, d: &Path, made: &mut Vec<PathBuf>) -> std::io::Result<()> {
        if self.made.borrow().contains(d) {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut at = d;
        while !at.exists() && at.starts_with(self.dir.path()) {
            missing.push(at.to_path_buf());
            match at.parent() {
                Some(up) => at = up,
                None => break,
            }
        }
        private_dirs(d)?;
        made.extend(missing.into_iter().rev());
        self.made.borrow_mut().insert(d.to_path_buf());
        Ok(())
    }

    /// Writes one file's version `new` at `p` (only the appended blobs when `old` is its prefix),
    /// with its recorded mtime; a recorded directory is made.
    fn write(
        &self,
        hist: &HistoryDir,
        p: &Path,
        old: Option<&FileVer>,
        new: &FileVer,
        made: &mut Vec<PathBuf>,
    ) -> std::io::Result<()> {
        if new.dir {
            return self.make_dir(p, made);
        }
        if let Some(parent) = p.parent() {
            self.make_dir(parent, made)?;
        }
        let grows = old.filter(|o| {
            !o.blobs.is_empty()
                && new.blobs.len() > o.blobs.len()
                && new.blobs.starts_with(&o.blobs)
        });
        let mut f = match grows {
            Some(o) => {
                let mut f = std::fs::OpenOptions::new().append(true).open(p)?;
                for b in &new.blobs[o.blobs.len()..] {
                    f.write_all(&hist.blob(b).ok().flatten().unwrap_or_default())?;
                }
                f
            }
            None => {
                let bytes = hist.content(new).ok().flatten().unwrap_or_default();
                // A new file, never the old one truncated: a reader of an append-only log (the
                // model's queue cursor) must see another file (another inode), not a longer one to
                // read on from its offset; and ext4 writes back a file truncated to nothing when it
                // is closed (its `auto_da_alloc`), a disk write per file of the moment. It is made
                // beside the recorded trees (no recorded path is there), while the old one still
                // holds its inode, then put in the old one's place (removed first: a rename over a
                // file is written back by ext4 as well).
                let fresh = self.dir.path().join(FRESH);
                let mut f = private_file(&fresh)?;
                f.write_all(&bytes)?;
                match std::fs::remove_file(p) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
                std::fs::rename(&fresh, p)?;
                f
            }
        };
        f.flush()?;
        f.set_modified(mtime(new.mtime_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{HistoryWriter, Retention};

    /// A root in a temporary directory and a writer of its history (keep the directory alive).
    fn history() -> (tempfile::TempDir, Root, HistoryWriter) {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: Duration::from_secs(3600),
        };
        let w = HistoryWriter::open(&root, ret, 1_000).unwrap();
        (d, root, w)
    }

    #[test]
    fn only_plain_paths_inside_the_recorded_trees_are_placed() {
        let d = Path::new("/scratch");
        assert_eq!(
            place(d, "conductor/state/wf_x.json"),
            Some(PathBuf::from("/scratch/conductor/state/wf_x.json"))
        );
        assert!(place(d, "shared/handoffs/wf_x/build.json").is_some());
        assert!(read_by_console("conductor/pending/thoth/hof_1.json"));
        assert!(!read_by_console("conductor/archive/thoth/hof_1.json"));
        assert!(!read_by_console("shared/handoffs/wf_x/build.json"));
        for bad in [
            "conductor/../../etc/passwd",
            "conductor/./x",
            "/etc/passwd",
            "etc/passwd",
            "shared/other/x",
            "conductor/history/blobs/aa/bb",
            "conductor//x",
            "conductor/x/",
            "conductor/a\0b",
        ] {
            assert_eq!(place(d, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_moment_is_laid_out_in_parts_records_last_and_appends_grow_in_place() {
        let (_d, root, mut w) = history();
        let mut tree = HistoryTree::new();
        let mut put = |tree: &mut HistoryTree, key: &str, blobs: &[&[u8]], mtime_us: i64| {
            let blobs: Vec<String> = blobs.iter().map(|b| w.put_blob(b).unwrap()).collect();
            let len = blobs.len() as u64;
            tree.insert(
                key.into(),
                FileVer {
                    blobs,
                    len,
                    mtime_us,
                    dir: false,
                },
            );
        };
        put(
            &mut tree,
            "conductor/state/wf_a.json",
            &[b"{}"],
            1_500_000_000_000_000,
        );
        put(
            &mut tree,
            "conductor/journal.jsonl",
            &[b"a\n"],
            1_500_000_000_000_000,
        );
        put(&mut tree, "shared/handoffs/wf_a/plan.json", &[b"{}"], 1);
        let hist = HistoryDir::of(&root);
        let mut s = Scratch::new(Default::default()).unwrap();
        // No time left, and under a screenful of records: all of it is written all the same (a
        // first screen shows rows, however long the few files took).
        let (_, left) = s.show_until(&hist, &tree, Some(Instant::now()));
        assert_eq!(left, 0);
        // Many records and no time: a screenful of them and the few files first, the rest left.
        let mut many = tree.clone();
        for i in 0..FIRST_RECORDS + 40 {
            put(
                &mut many,
                &format!("conductor/state/wf_m{i:04}.json"),
                &[b"{}"],
                1,
            );
        }
        let mut m = Scratch::new(Default::default()).unwrap();
        let (touched, left) = m.show_until(&hist, &many, Some(Instant::now()));
        let states = touched
            .iter()
            .filter(|p| p.to_string_lossy().contains("/conductor/state/"))
            .count();
        assert!(
            states >= FIRST_RECORDS && left > 0,
            "{states} states, {left} left"
        );
        assert!(m.path().join("conductor/journal.jsonl").is_file());
        assert!(m.path().join("conductor/state/wf_m0000.json").is_file());
        let (_, left) = m.show_until(&hist, &many, None);
        assert_eq!(left, 0);
        let journal = s.path().join("conductor/journal.jsonl");
        assert_eq!(std::fs::read(&journal).unwrap(), b"a\n");
        assert!(s.path().join("conductor/state/wf_a.json").is_file());
        assert!(
            !s.path().join("shared/handoffs/wf_a").exists(),
            "the console never reads handoffs"
        );
        let m = std::fs::metadata(&journal).unwrap().modified().unwrap();
        assert_eq!(m, mtime(1_500_000_000_000_000));
        // An append adds its tail to the file in place; a delete removes it.
        let mut next = tree.clone();
        put(
            &mut next,
            "conductor/journal.jsonl",
            &[b"a\n", b"b\n"],
            1_500_000_000_000_001,
        );
        next.remove("conductor/state/wf_a.json");
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&journal).unwrap());
        let touched = s.show(&hist, &next);
        assert_eq!(std::fs::read(&journal).unwrap(), b"a\nb\n");
        let same = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&journal).unwrap());
        assert_eq!(ino, same, "appended in place");
        assert!(!s.path().join("conductor/state/wf_a.json").exists());
        assert_eq!(touched.len(), 2);
    }

    #[test]
    fn the_scratch_root_is_its_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, root, mut w) = history();
        let mut tree = HistoryTree::new();
        for (key, text) in [
            ("conductor/state/wf_a.json", "{}"),
            (
                "conductor/pending/thoth/hof_1.json",
                "{\"summary\": \"secret\"}",
            ),
            ("conductor/tracks/t1/.message-bus/queue.jsonl", "a\n"),
        ] {
            let blob = w.put_blob(text.as_bytes()).unwrap();
            tree.insert(
                key.into(),
                FileVer {
                    blobs: vec![blob],
                    len: text.len() as u64,
                    mtime_us: 1_500_000_000_000_000,
                    dir: false,
                },
            );
        }
        tree.insert(
            "conductor/dead/thoth".into(),
            FileVer {
                dir: true,
                ..FileVer::default()
            },
        );
        let hist = HistoryDir::of(&root);
        // Under the usual umask (022) the defaults were 0755 and 0644: readable by all.
        let mut s = Scratch::new(Default::default()).unwrap();
        s.show(&hist, &tree);
        // A file replaced by another version is made anew: that one too.
        let mut next = tree.clone();
        let blob = w.put_blob(b"{\"v\": 2}").unwrap();
        next.get_mut("conductor/state/wf_a.json").unwrap().blobs = vec![blob];
        s.show(&hist, &next);
        let mut seen = (0, 0);
        let mut stack = vec![s.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
            seen.0 += 1;
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let mode = e.metadata().unwrap().permissions().mode() & 0o777;
                    assert_eq!(mode, 0o600, "{}", e.path().display());
                    seen.1 += 1;
                }
            }
        }
        assert!(seen.0 >= 8 && seen.1 == 3, "{seen:?}");
    }

    #[test]
    fn a_queue_rewritten_longer_is_read_as_another_file_not_an_append() {
        use crate::live::{ModelOptions, model::LiveModel};
        let (_d, root, mut w) = history();
        let line = |id: &str| {
            format!(
                "{{\"id\":\"{id}\",\"type\":\"PROGRESS\",\"source\":\"w\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"payload\":{{}}}}\n"
            )
        };
        let key = "conductor/tracks/t1/.message-bus/queue.jsonl";
        let mut version = |ids: &[&str]| {
            let text: String = ids.iter().map(|id| line(id)).collect();
            let mut tree = HistoryTree::new();
            tree.insert(
                key.into(),
                FileVer {
                    blobs: vec![w.put_blob(text.as_bytes()).unwrap()],
                    len: text.len() as u64,
                    mtime_us: 1_000,
                    dir: false,
                },
            );
            tree
        };
        // The queue at one moment, and at another after it was archived and a longer one began.
        let before = version(&["old1", "old2"]);
        let after = version(&["new1", "new2", "new3", "new4"]);
        let hist = HistoryDir::of(&root);
        let mut s = Scratch::new(Default::default()).unwrap();
        s.show(&hist, &before);
        let mut model = LiveModel::open(s.root.clone(), ModelOptions::default());
        let ids = |snap: &crate::live::Snapshot| -> Vec<String> {
            snap.tracks[0]
                .messages
                .iter()
                .map(|m| m.id.clone())
                .collect()
        };
        assert_eq!(ids(&model.snapshot()), ["old1", "old2"]);
        let touched = s.show(&hist, &after);
        let snap = model.apply(&touched).expect("the queue changed");
        assert_eq!(
            ids(&snap),
            ["new1", "new2", "new3", "new4"],
            "read from its start, not on from the old file's length"
        );
    }

    #[test]
    fn a_recorded_directory_is_made_empty_and_removed_once_gone() {
        let (_d, root, mut w) = history();
        let dir = |tree: &mut HistoryTree, key: &str| {
            tree.insert(
                key.into(),
                FileVer {
                    dir: true,
                    ..FileVer::default()
                },
            );
        };
        let mut tree = HistoryTree::new();
        dir(&mut tree, "conductor/pending/thoth");
        dir(&mut tree, "conductor/pending/hermes");
        let blob = w.put_blob(b"{}").unwrap();
        tree.insert(
            "conductor/pending/hermes/hof_1.json".into(),
            FileVer {
                blobs: vec![blob],
                len: 2,
                mtime_us: 1_000,
                dir: false,
            },
        );
        let hist = HistoryDir::of(&root);
        let mut s = Scratch::new(Default::default()).unwrap();
        let touched = s.show(&hist, &tree);
        let thoth = s.path().join("conductor/pending/thoth");
        assert!(thoth.is_dir(), "an inbox that never held a file is there");
        assert!(touched.contains(&thoth), "and named for the model to read");
        // Both directories go (one with its file): each is removed, deepest first.
        let touched = s.show(&hist, &HistoryTree::new());
        assert!(!thoth.exists());
        let hermes = s.path().join("conductor/pending/hermes");
        assert!(
            !hermes.exists(),
            "emptied by its file's removal, then removed"
        );
        assert!(touched.contains(&hermes) && touched.contains(&thoth));
        // Made again later: the directory and a file in it come back.
        let touched = s.show(&hist, &tree);
        assert!(hermes.join("hof_1.json").is_file());
        assert!(touched.contains(&hermes));
    }

    #[test]
    fn a_scratch_root_goes_to_a_memory_file_system_that_is_ours_and_has_room() {
        let shm = Path::new("/dev/shm");
        if !memory_fs_with_room(shm) {
            // Nothing to choose from here: the scratch root stays in the temporary directory.
            assert_eq!(scratch_base_from(None), None);
            return;
        }
        // The runtime directory when it is the user's alone; /dev/shm otherwise.
        let run = tempfile::tempdir_in(shm).unwrap();
        let own = run.path().join("own");
        private_dirs(&own).unwrap();
        assert_eq!(scratch_base_from(Some(own.clone())), Some(own.clone()));
        let open = run.path().join("open");
        std::fs::create_dir(&open).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(scratch_base_from(Some(open)), Some(shm.to_path_buf()));
        let link = run.path().join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert_eq!(scratch_base_from(Some(link)), Some(shm.to_path_buf()));
        // A directory on the disk is no memory file system, however much room it has.
        let disk = Path::new(env!("CARGO_MANIFEST_DIR"));
        #[allow(clippy::unnecessary_cast)]
        let on_tmpfs = rustix::fs::statfs(disk).unwrap().f_type as i128 == 0x0102_1994;
        if !on_tmpfs {
            assert!(!memory_fs_with_room(disk));
        }
        // A killed console's scratch root left there is removed by the next one's, wherever
        // that one lands (no process has the pid i32::MAX: above any pid_max).
        let stale = shm.join(format!("{PREFIX}{}-left", i32::MAX));
        private_dirs(&stale.join("conductor")).unwrap();
        let _next = Scratch::new(Default::default()).unwrap();
        assert!(!stale.exists(), "{} was left", stale.display());
        // And the scratch root itself lands there, private.
        let s = Scratch::new(Default::default()).unwrap();
        assert!(
            memory_fs_with_room(s.path().parent().unwrap()),
            "{}",
            s.path().display()
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(s.path()).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_killed_consoles_scratch_root_is_removed_and_nothing_else() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let uid = std::fs::metadata(tmp.path()).unwrap().uid();
        // A pid that was running and is not any more: a child that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let mk = |name: &str| {
            let p = tmp.path().join(name);
            std::fs::create_dir_all(p.join("conductor/state")).unwrap();
            std::fs::write(p.join("conductor/state/wf.json"), b"{}").unwrap();
            p
        };
        let stale = mk(&format!("{PREFIX}{dead}-aB3xYz"));
        let mine = mk(&format!("{PREFIX}{}-q1w2e3", std::process::id()));
        let living = mk(&format!("{PREFIX}1-r4t5y6"));
        let other = mk("pantheon-replayx");
        let unnamed = mk(&format!("{PREFIX}{dead}-"));
        let file = tmp.path().join(format!("{PREFIX}{dead}-file"));
        std::fs::write(&file, b"not a directory").unwrap();
        // A link to a directory, named as ours: the link is not followed nor removed.
        let target = mk("target");
        let link = tmp.path().join(format!("{PREFIX}{dead}-link"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Another owner's directory stays (the owner given is not the directory's).
        assert_eq!(remove_stale(tmp.path(), uid.wrapping_add(1)), 0);
        assert!(stale.exists());
        assert_eq!(remove_stale(tmp.path(), uid), 1);
        assert!(!stale.exists(), "the killed console's scratch root went");
        for kept in [&mine, &living, &other, &unnamed, &file, &link, &target] {
            assert!(
                std::fs::symlink_metadata(kept).is_ok(),
                "{}",
                kept.display()
            );
        }
        assert!(target.join("conductor/state/wf.json").is_file());
    }
}
