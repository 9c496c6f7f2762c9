//! File-system change signals for the live model: `notify` (inotify on Linux) watching the
//! directories the model reads, each non-recursively (a few dozen watches whatever the number of
//! workflows: inotify watches are a per-user limit shared by every process), or a slow poll when
//! notifications are unavailable or `--poll` forces it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

/// One signal to the model: these paths changed, or everything should be re-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Paths named by file-system events.
    Paths(Vec<PathBuf>),
    /// Paths named by file-system events, collected in a shared set: the watcher adds to the set and
    /// sends this signal only when the set was empty, so a burst of writes faster than the model can
    /// read costs one set entry per distinct file, never an unbounded queue of events.
    Pending(PendingPaths),
    /// Re-check every file (poll tick, event overflow, or an operator's refresh).
    Rescan,
    /// Stop the model thread.
    Stop,
}

/// Changed paths not yet taken by the model (see [`Signal::Pending`]).
#[derive(Debug, Clone, Default)]
pub struct PendingPaths(Arc<Mutex<BTreeSet<PathBuf>>>);

impl PendingPaths {
    /// Adds `paths`; true when the set was empty (the model must be woken).
    fn add(&self, paths: Vec<PathBuf>) -> bool {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = set.is_empty();
        set.extend(paths);
        was_empty
    }

    /// Takes every pending path.
    pub fn take(&self) -> Vec<PathBuf> {
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
pub const DEFAULT_POLL: Duration = Duration::from_millis(1000);

/// Keeps the change source alive; dropping it stops notifications (the poll thread ends when its
/// receiver is gone).
pub struct Watcher {
    notify: Option<RecommendedWatcher>,
    /// The directories watched, with the identity (device, inode) each had when its watch was set.
    watched: BTreeMap<PathBuf, (u64, u64)>,
    tx: Sender<Signal>,
    /// The mode actually in force.
    pub mode: WatchMode,
    /// Why notifications were not used, when they were wanted but failed.
    pub fallback_reason: Option<String>,
}

/// The device and inode of a directory, `None` when it is missing (or not a directory).
pub fn dir_identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// Starts sending [`Signal`]s to `tx`: with [`WatchMode::Notify`] for the directories later given to
/// [`Watcher::sync`], falling back to polling at [`DEFAULT_POLL`] if notifications cannot be set up
/// (and saying why).
pub fn watch(wanted: WatchMode, tx: Sender<Signal>) -> Watcher {
    let mut w = Watcher {
        notify: None,
        watched: BTreeMap::new(),
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
    pub fn is_watched(&self, path: &Path) -> bool {
        self.watched.contains_key(path)
    }

    /// How many directories are watched.
    pub fn watch_count(&self) -> usize {
        self.watched.len()
    }

    /// Watches exactly the directories of `want` that exist (each non-recursively): sets a watch on
    /// each new one and on each replaced since its watch was set (a directory deleted and created
    /// again loses its watch), drops the others. Returns the directories whose watch is new: what
    /// was written in them before the watch existed must be read again by the caller. When a watch
    /// cannot be set (the user's inotify limit), falls back to polling.
    pub fn sync(&mut self, want: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
        let Some(n) = self.notify.as_mut() else {
            return Vec::new();
        };
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|p| !want.contains(*p))
            .cloned()
            .collect();
        for p in gone {
            self.watched.remove(&p);
            let _ = n.unwatch(&p);
        }
        let mut added = Vec::new();
        let mut failed = None;
        for d in want {
            let Some(id) = dir_identity(d) else {
                if self.watched.remove(d).is_some() {
                    let _ = n.unwatch(d);
                }
                continue;
            };
            if self.watched.get(d) == Some(&id) {
                continue;
            }
            match n.watch(d, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(d.clone(), id);
                    added.push(d.clone());
                }
                // Removed between the stat and the watch: its parent's watch reports it.
                Err(e) if matches!(&e.kind, notify::ErrorKind::PathNotFound) => {}
                Err(e) if matches!(&e.kind, notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound) =>
                    {}
                Err(e) => {
                    failed = Some(format!("watching {}: {e}", d.display()));
                    break;
                }
            }
        }
        if let Some(why) = failed {
            self.fall_back(why);
            // Everything must be re-checked by the poll from now on.
            let _ = self.tx.send(Signal::Rescan);
            return Vec::new();
        }
        added
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
