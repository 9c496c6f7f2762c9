//! File-system change signals for the live model: `notify` (inotify on Linux) watching the root
//! recursively, or a slow poll when notifications are unavailable or `--poll` forces it.

use std::collections::BTreeSet;
use std::path::PathBuf;
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
    _notify: Option<RecommendedWatcher>,
    /// The mode actually in force.
    pub mode: WatchMode,
    /// Why notifications were not used, when they were wanted but failed.
    pub fallback_reason: Option<String>,
}

/// Starts sending [`Signal`]s for changes under `dirs` to `tx`. With [`WatchMode::Notify`], falls back
/// to polling at [`DEFAULT_POLL`] if the watcher cannot be set up (and says why).
pub fn watch(dirs: &[PathBuf], wanted: WatchMode, tx: Sender<Signal>) -> Watcher {
    if wanted == WatchMode::Notify {
        match notify_watcher(dirs, tx.clone()) {
            Ok(w) => {
                return Watcher {
                    _notify: Some(w),
                    mode: WatchMode::Notify,
                    fallback_reason: None,
                };
            }
            Err(e) => {
                tracing::warn!("file notifications unavailable, polling instead: {e}");
                spawn_poll(DEFAULT_POLL, tx);
                return Watcher {
                    _notify: None,
                    mode: WatchMode::Poll(DEFAULT_POLL),
                    fallback_reason: Some(e.to_string()),
                };
            }
        }
    }
    let WatchMode::Poll(every) = wanted else {
        unreachable!("notify handled above")
    };
    spawn_poll(every, tx);
    Watcher {
        _notify: None,
        mode: wanted,
        fallback_reason: None,
    }
}

fn notify_watcher(dirs: &[PathBuf], tx: Sender<Signal>) -> notify::Result<RecommendedWatcher> {
    let pending = PendingPaths::default();
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
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
    })?;
    for d in dirs {
        w.watch(d, RecursiveMode::Recursive)?;
    }
    Ok(w)
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
