//! File-system change signals for the live model: `notify` (inotify on Linux) watching the
//! directories the model reads, each non-recursively (a few dozen watches whatever the number of
//! workflows: inotify watches are a per-user limit shared by every process), or a slow poll when
//! notifications are unavailable or `--poll` forces it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode};

use super::watch_set::{WatchSet, Watches};

/// One signal to the model: these paths changed, or everything should be re-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Paths named directly (the runner's tests send these; the watcher sends [`Signal::Pending`]).
    #[cfg(test)]
    Paths(Vec<PathBuf>),
    /// Paths named by file-system events, collected in a shared set: the watcher adds to the set and
    /// sends this signal only when the set was empty, so a burst of writes faster than the model can
    /// read costs one set entry per distinct file, never an unbounded queue of events.
    Pending(PendingPaths),
    /// Re-check every file (poll tick, event overflow, or an operator's refresh).
    Rescan,
    /// A foreign source's state changed (`crate::sources::hub`): publish the snapshot again with it.
    Sources,
    /// An operator's answer to a foreign item, for its source's reader.
    Answer(AnswerRequest),
    /// Stop the model thread.
    Stop,
}

/// An operator's answer to item `key` of source number `index`; the result goes to `reply`.
#[derive(Debug, Clone)]
pub(crate) struct AnswerRequest {
    pub index: usize,
    pub key: String,
    pub text: String,
    pub reply: Sender<Result<crate::sources::Answered, crate::sources::SourceError>>,
}

impl PartialEq for AnswerRequest {
    fn eq(&self, other: &Self) -> bool {
        (self.index, &self.key, &self.text) == (other.index, &other.key, &other.text)
    }
}

impl Eq for AnswerRequest {}

/// Changed paths not yet taken by the model (see [`Signal::Pending`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingPaths(Arc<Mutex<BTreeSet<PathBuf>>>);

impl PendingPaths {
    /// Adds `paths`; true when the set was empty (the model must be woken).
    fn add(&self, paths: Vec<PathBuf>) -> bool {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = set.is_empty();
        set.extend(paths);
        was_empty
    }

    /// Takes every pending path.
    pub(crate) fn take(&self) -> Vec<PathBuf> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *set).into_iter().collect()
    }
}

impl PartialEq for PendingPaths {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PendingPaths {}

/// How changes are noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// File-system notifications.
    Notify,
    /// A stat of every tracked file at this interval.
    Poll(Duration),
}

impl std::fmt::Display for WatchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchMode::Notify => f.write_str("notify"),
            WatchMode::Poll(d) => write!(f, "poll {}ms", d.as_millis()),
        }
    }
}

/// Default interval of the poll fallback.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_millis(1000);

/// Keeps the change source alive; dropping it stops notifications (the poll thread ends when its
/// receiver is gone).
pub(crate) struct Watcher {
    notify: Option<RecommendedWatcher>,
    /// The directories watched (`notify` knows its watches by path).
    watched: WatchSet<()>,
    tx: Sender<Signal>,
    /// The mode actually in force.
    pub mode: WatchMode,
    /// Why notifications were not used, when they were wanted but failed.
    pub fallback_reason: Option<String>,
}

/// Starts sending [`Signal`]s to `tx`: with [`WatchMode::Notify`] for the directories later given to
/// [`Watcher::sync`], falling back to polling at [`DEFAULT_POLL`] if notifications cannot be set up
/// (and saying why).
pub(crate) fn watch(wanted: WatchMode, tx: Sender<Signal>) -> Watcher {
    let mut w = Watcher {
        notify: None,
        watched: WatchSet::default(),
        tx: tx.clone(),
        mode: wanted,
        fallback_reason: None,
    };
    match wanted {
        WatchMode::Notify => match notify_watcher(tx) {
            Ok(n) => w.notify = Some(n),
            Err(e) => w.fall_back(e.to_string()),
        },
        WatchMode::Poll(every) => spawn_poll(every, tx),
    }
    w
}

impl Watcher {
    fn fall_back(&mut self, why: String) {
        tracing::warn!("file notifications unavailable, polling instead: {why}");
        self.notify = None;
        self.watched.clear();
        self.mode = WatchMode::Poll(DEFAULT_POLL);
        self.fallback_reason = Some(why);
        spawn_poll(DEFAULT_POLL, self.tx.clone());
    }

    /// True when `path` is one of the watched directories.
    pub(crate) fn is_watched(&self, path: &Path) -> bool {
        self.watched.contains(path)
    }

    /// How many directories are watched.
    pub(crate) fn watch_count(&self) -> usize {
        self.watched.len()
    }

    /// Watches exactly the directories of `want` that exist (each non-recursively; see
    /// [`WatchSet::sync`]). Returns the directories whose watch is new: what was written in them
    /// before the watch existed must be read again by the caller. When a watch cannot be set (the
    /// user's inotify limit), falls back to polling: this watcher owns the poll thread, so it
    /// switches itself rather than handing the error on.
    pub(crate) fn sync(&mut self, want: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
        let Some(n) = self.notify.as_mut() else {
            return Vec::new();
        };
        match self.watched.sync(n, want) {
            Ok(added) => added,
            Err(why) => {
                self.fall_back(why);
                // Everything must be re-checked by the poll from now on.
                let _ = self.tx.send(Signal::Rescan);
                Vec::new()
            }
        }
    }
}

impl Watches for RecommendedWatcher {
    type Handle = ();
    type Error = String;

    fn watch(&mut self, dir: &Path) -> Result<Option<()>, String> {
        match notify::Watcher::watch(self, dir, RecursiveMode::NonRecursive) {
            Ok(()) => Ok(Some(())),
            Err(e) if matches!(&e.kind, notify::ErrorKind::PathNotFound) => Ok(None),
            Err(e) if matches!(&e.kind, notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound) => {
                Ok(None)
            }
            Err(e) => Err(format!("watching {}: {e}", dir.display())),
        }
    }

    fn unwatch(&mut self, dir: &Path, (): ()) {
        let _ = notify::Watcher::unwatch(self, dir);
    }
}

fn notify_watcher(tx: Sender<Signal>) -> notify::Result<RecommendedWatcher> {
    let pending = PendingPaths::default();
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let signal = match res {
            Ok(ev) if ev.need_rescan() => Signal::Rescan,
            Ok(ev) => {
                if matches!(ev.kind, notify::EventKind::Access(_)) || !pending.add(ev.paths) {
                    return;
                }
                Signal::Pending(pending.clone())
            }
            Err(e) => {
                tracing::warn!("watch error, rescanning: {e}");
                Signal::Rescan
            }
        };
        let _ = tx.send(signal);
    })
}

fn spawn_poll(every: Duration, tx: Sender<Signal>) {
    std::thread::Builder::new()
        .name("pantheon-poll".into())
        .spawn(move || {
            loop {
                std::thread::sleep(every);
                if tx.send(Signal::Rescan).is_err() {
                    return;
                }
            }
        })
        .expect("spawning the poll thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_watches_exactly_the_wanted_directories_and_a_replaced_one_anew() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (tx, _rx) = std::sync::mpsc::channel();
        let mut w = watch(WatchMode::Notify, tx);
        assert_eq!(w.mode, WatchMode::Notify, "{:?}", w.fallback_reason);
        let both: BTreeSet<PathBuf> = [a.clone(), b.clone()].into();
        assert_eq!(w.sync(&both), vec![a.clone(), b.clone()]);
        assert!(w.sync(&both).is_empty(), "nothing new");
        // One no longer wanted is dropped; a missing one is not watched.
        let missing = dir.path().join("missing");
        assert!(w.sync(&[a.clone(), missing.clone()].into()).is_empty());
        assert!(w.is_watched(&a) && !w.is_watched(&b) && !w.is_watched(&missing));
        // Replaced (moved away, so the new directory cannot have its inode, and made again):
        // watched anew. A link to a directory is never watched.
        std::fs::rename(&a, dir.path().join("a.old")).unwrap();
        std::fs::create_dir(&a).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&b, &link).unwrap();
        assert_eq!(w.sync(&[a.clone(), link.clone()].into()), vec![a.clone()]);
        assert!(!w.is_watched(&link));
        assert_eq!(w.watch_count(), 1);
    }
}
