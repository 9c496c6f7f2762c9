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
use std::time::{Duration, SystemTime};

use crate::engine::history::HistoryDir;
use crate::engine::history::store::{FileVer, Tree};
use crate::engine::store::{Root, layout};

/// A scratch root showing one tree of the history. Removed when dropped.
pub struct Scratch {
    dir: tempfile::TempDir,
    /// The scratch directory as a root (default layout).
    pub root: Root,
    tree: Tree,
}

/// Where `key` goes under `dir`, or `None` when the key is not a plain relative path inside one of
/// the recorded trees (or names the history itself).
pub fn place(dir: &Path, key: &str) -> Option<PathBuf> {
    let handoffs = format!("{}/{}/", layout::SHARED_DIR, layout::HANDOFFS_DIR);
    let conductor = format!("{}/", layout::CONDUCTOR_DIR);
    let history = format!("{}/{}/", layout::CONDUCTOR_DIR, layout::HISTORY_DIR);
    if !(key.starts_with(&conductor) || key.starts_with(&handoffs))
        || key.starts_with(&history)
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
pub fn read_by_console(key: &str) -> bool {
    let handoffs = format!("{}/{}/", layout::SHARED_DIR, layout::HANDOFFS_DIR);
    let archive = format!("{}/{}/", layout::CONDUCTOR_DIR, layout::ARCHIVE_DIR);
    !key.starts_with(&handoffs) && !key.starts_with(&archive)
}

fn mtime(us: i64) -> SystemTime {
    let us = u64::try_from(us).unwrap_or(0);
    SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_micros(us))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

impl Scratch {
    /// An empty scratch root (mode 0700: the history's content is the root's, not the world's).
    pub fn new() -> std::io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("pantheon-replay-")
            .tempdir()?;
        std::fs::create_dir_all(dir.path().join(layout::CONDUCTOR_DIR))?;
        std::fs::create_dir_all(
            dir.path()
                .join(layout::SHARED_DIR)
                .join(layout::HANDOFFS_DIR),
        )?;
        let root = Root::at(dir.path());
        Ok(Self {
            dir,
            root,
            tree: Tree::new(),
        })
    }

    /// The scratch directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes the scratch root show `tree`, its contents read from `hist`; returns the paths of the
    /// files written or removed and of the directories made, for the model to read again. A file
    /// whose content the history did not keep (too large, forgotten) is shown empty.
    pub fn show(&mut self, hist: &HistoryDir, mut tree: Tree) -> Vec<PathBuf> {
        tree.retain(|key, _| read_by_console(key));
        let mut touched = Vec::new();
        for key in self.tree.keys() {
            if tree.contains_key(key) {
                continue;
            }
            if let Some(p) = place(self.dir.path(), key)
                && std::fs::remove_file(&p).is_ok()
            {
                touched.push(p);
            }
        }
        for (key, new) in &tree {
            let old = self.tree.get(key);
            if old == Some(new) {
                continue;
            }
            let Some(p) = place(self.dir.path(), key) else {
                tracing::warn!(
                    key,
                    "replay: a recorded path that is not a plain relative path; skipped"
                );
                continue;
            };
            match self.write(hist, &p, old, new, &mut touched) {
                Ok(()) => touched.push(p),
                Err(e) => tracing::warn!(key, "replay: cannot lay out a recorded file: {e}"),
            }
        }
        self.tree = tree;
        touched
    }

    /// Writes one file's version `new` at `p` (only the appended blobs when `old` is its prefix),
    /// with its recorded mtime.
    fn write(
        &self,
        hist: &HistoryDir,
        p: &Path,
        old: Option<&FileVer>,
        new: &FileVer,
        made: &mut Vec<PathBuf>,
    ) -> std::io::Result<()> {
        if let Some(parent) = p.parent() {
            let mut missing = Vec::new();
            let mut d = parent;
            while !d.exists() && d.starts_with(self.dir.path()) {
                missing.push(d.to_path_buf());
                match d.parent() {
                    Some(up) => d = up,
                    None => break,
                }
            }
            std::fs::create_dir_all(parent)?;
            made.extend(missing.into_iter().rev());
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
                let mut f = std::fs::File::create(p)?;
                f.write_all(&bytes)?;
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
}
