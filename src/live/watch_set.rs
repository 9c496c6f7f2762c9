//! Which directories are watched: the one "watch exactly this set of directories" diff, shared by
//! the live model's watcher (`notify`, [`super::watch`]) and the span watcher's own inotify watches
//! (`observe::dir_watch`). Each keeps its own way of setting a watch ([`Watches`]) and its own
//! answer to a watch that cannot be set: the live model falls back to polling, the span watcher
//! hands the error to its caller, which polls instead.
//!
//! A directory is watched while it is wanted and is the same directory (device and inode) it was
//! when its watch was set; a link is never watched. The engine writes nothing through a link below
//! a root's anchors (`store/safe.rs` opens every component without following one, and the anchors
//! themselves are resolved when the root is built), so a linked directory receives no protocol
//! write: watching through it would only let a directory outside the root wake the reader.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The device and inode of a directory, not through a link: `None` when it is missing, a link or
/// not a directory.
pub(crate) fn dir_identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// A way of setting and removing one directory's watch (non-recursively).
pub(crate) trait Watches {
    /// What a watch is known by once set (inotify's watch descriptor; `()` where the watcher
    /// knows its watches by path).
    type Handle: Copy + PartialEq;
    /// Why a watch could not be set.
    type Error;

    /// Sets a watch on `dir`. `Ok(None)` when `dir` vanished (or was replaced by a link or a file)
    /// between its stat and the watch: the event of its parent's watch, or the next sync, sees it.
    fn watch(&mut self, dir: &Path) -> Result<Option<Self::Handle>, Self::Error>;

    /// Removes the watch `handle` set on `dir` (a watch the kernel already dropped is no error).
    fn unwatch(&mut self, dir: &Path, handle: Self::Handle);
}

/// The directories watched, each with its watch and the identity it had when the watch was set.
#[derive(Debug)]
pub(crate) struct WatchSet<H> {
    watched: BTreeMap<PathBuf, (H, (u64, u64))>,
}

impl<H> Default for WatchSet<H> {
    fn default() -> Self {
        Self {
            watched: BTreeMap::new(),
        }
    }
}

impl<H: Copy + PartialEq> WatchSet<H> {
    /// Watches exactly the directories of `want` that exist, through `w`: sets a watch on each new
    /// one and on each replaced since its watch was set (removed and made again: its old watch went
    /// with it), drops the others. Returns the directories whose watch is new, in `want`'s order:
    /// what was written in them before the watch existed must be read by the caller. At the first
    /// watch that cannot be set, returns its error; the watches set until then stay.
    pub(crate) fn sync<W: Watches<Handle = H>>(
        &mut self,
        w: &mut W,
        want: &BTreeSet<PathBuf>,
    ) -> Result<Vec<PathBuf>, W::Error> {
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|p| !want.contains(*p))
            .cloned()
            .collect();
        for p in gone {
            self.unwatch(w, &p);
        }
        let mut added = Vec::new();
        for d in want {
            let Some(id) = dir_identity(d) else {
                self.unwatch(w, d);
                continue;
            };
            if self.watched.get(d).is_some_and(|(_, was)| *was == id) {
                continue;
            }
            if let Some(handle) = w.watch(d)? {
                self.watched.insert(d.clone(), (handle, id));
                added.push(d.clone());
            }
        }
        Ok(added)
    }

    fn unwatch<W: Watches<Handle = H>>(&mut self, w: &mut W, dir: &Path) {
        if let Some((handle, _)) = self.watched.remove(dir) {
            w.unwatch(dir, handle);
        }
    }

    /// Forgets `dir`'s watch when it is `handle` (the watcher was told the watch is gone): the next
    /// sync sets it again, even when a directory made in its place has the same inode.
    pub(crate) fn forget(&mut self, dir: &Path, handle: H) {
        if self.watched.get(dir).is_some_and(|(h, _)| *h == handle) {
            self.watched.remove(dir);
        }
    }

    /// Forgets every watch (the watcher that held them is gone).
    pub(crate) fn clear(&mut self) {
        self.watched.clear();
    }

    /// True when `dir` is watched.
    pub(crate) fn contains(&self, dir: &Path) -> bool {
        self.watched.contains_key(dir)
    }

    /// How many directories are watched.
    pub(crate) fn len(&self) -> usize {
        self.watched.len()
    }
}
