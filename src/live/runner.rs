//! The model thread: waits for change signals (blocking, so an idle root costs no CPU), coalesces a
//! burst, refreshes the model and publishes only the newest snapshot.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::engine::store::Root;

use super::model::{LiveModel, ModelOptions};
use super::snapshot::Snapshot;
use super::watch::{Signal, WatchMode, Watcher};

/// A burst of events is considered over after this much quiet.
pub const DEBOUNCE_QUIET: Duration = Duration::from_millis(10);
/// A burst is never held back longer than this.
pub const DEBOUNCE_MAX: Duration = Duration::from_millis(30);
/// How often the model thread checks, between bursts, that the root is still the directory it
/// watches (a root deleted and re-created loses every notification watch; one `stat`, ~0 CPU).
pub const ROOT_CHECK: Duration = Duration::from_secs(1);

/// The running model: the newest snapshot, and a way to ask for a rescan or stop.
pub struct LiveHandle {
    /// Always holds the newest snapshot; a reader that falls behind skips the ones in between.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    signals: Sender<Signal>,
    /// How changes are noticed.
    pub mode: WatchMode,
    /// Why notifications could not be used, if they were wanted.
    pub fallback_reason: Option<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveHandle {
    /// Starts watching `root` and publishes the first snapshot before returning.
    pub fn start(root: Root, mode: WatchMode, opts: ModelOptions) -> Self {
        let (tx, rx) = mpsc::channel();
        // Watch first, then read: a change between the two is seen twice, never missed.
        // The conductor directory may live outside the root (`CONDUCTOR_BASE_DIR`): watch it too.
        let mut dirs = vec![root.dir.clone()];
        if !root.conductor.starts_with(&root.dir) && root.conductor.is_dir() {
            dirs.push(root.conductor.clone());
        }
        let identity = dir_identity(&root.dir);
        let watcher = super::watch::watch(&dirs, mode, tx.clone());
        let (mode, fallback_reason) = (watcher.mode, watcher.fallback_reason.clone());
        let mut model = LiveModel::open(root.clone(), opts);
        model.set_watch_mode(mode.to_string());
        let (snap_tx, snap_rx) = watch::channel(model.snapshot());
        let watched = Watched {
            root: root.dir,
            dirs,
            tx: tx.clone(),
            identity,
            watcher,
        };
        let thread = std::thread::Builder::new()
            .name("pantheon-live".into())
            .spawn(move || run(model, rx, snap_tx, watched))
            .expect("spawning the live model thread");
        Self {
            snapshots: snap_rx,
            signals: tx,
            mode,
            fallback_reason,
            thread: Some(thread),
        }
    }

    /// Asks for every file to be re-checked now.
    pub fn rescan(&self) {
        let _ = self.signals.send(Signal::Rescan);
    }

    /// The newest snapshot.
    pub fn latest(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }
}

impl Drop for LiveHandle {
    fn drop(&mut self) {
        let _ = self.signals.send(Signal::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The device and inode of a directory, `None` when it is missing.
fn dir_identity(p: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// The change source and what it watches, kept by the model thread so it can start it again.
struct Watched {
    root: PathBuf,
    dirs: Vec<PathBuf>,
    tx: Sender<Signal>,
    identity: Option<(u64, u64)>,
    watcher: Watcher,
}

impl Watched {
    /// True when the root is no longer the directory the watches were set on (deleted, or deleted and
    /// re-created): the watches are set again on what is there now, and the model must rescan.
    fn root_changed(&mut self) -> bool {
        let now = dir_identity(&self.root);
        if now == self.identity {
            return false;
        }
        tracing::info!(root = %self.root.display(), present = now.is_some(), "root changed; watching again");
        self.identity = now;
        if now.is_some() && self.watcher.mode == WatchMode::Notify {
            // Replaced before the rescan, so a change in between is seen twice, never missed.
            self.watcher = super::watch::watch(&self.dirs, WatchMode::Notify, self.tx.clone());
        }
        true
    }
}

/// Collects one burst: the first signal (waiting at most `idle`), then whatever follows within the
/// debounce window. Returns `None` on stop, an empty burst when `idle` passed with no signal.
fn next_burst(rx: &Receiver<Signal>, idle: Duration) -> Option<(bool, Vec<PathBuf>)> {
    let first = match rx.recv_timeout(idle) {
        Ok(s) => s,
        Err(RecvTimeoutError::Timeout) => return Some((false, Vec::new())),
        Err(RecvTimeoutError::Disconnected) => return None,
    };
    let started = Instant::now();
    let mut rescan = false;
    let mut paths = Vec::new();
    let take = |s: Signal, rescan: &mut bool, paths: &mut Vec<PathBuf>| match s {
        Signal::Stop => false,
        Signal::Rescan => {
            *rescan = true;
            true
        }
        Signal::Paths(p) => {
            paths.extend(p);
            true
        }
        Signal::Pending(p) => {
            paths.extend(p.take());
            true
        }
    };
    if !take(first, &mut rescan, &mut paths) {
        return None;
    }
    loop {
        let left = DEBOUNCE_MAX.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(DEBOUNCE_QUIET.min(left)) {
            Ok(s) => {
                if !take(s, &mut rescan, &mut paths) {
                    return None;
                }
            }
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
    Some((rescan, paths))
}

fn run(
    mut model: LiveModel,
    rx: Receiver<Signal>,
    out: watch::Sender<Arc<Snapshot>>,
    mut watched: Watched,
) {
    while let Some((mut rescan, mut paths)) = next_burst(&rx, ROOT_CHECK) {
        rescan |= watched.root_changed();
        if !rescan && paths.is_empty() {
            continue;
        }
        paths.sort();
        paths.dedup();
        let started = Instant::now();
        let snap = if rescan {
            model.rescan()
        } else {
            model.apply(&paths)
        };
        if let Some(s) = snap {
            tracing::debug!(
                seq = s.seq,
                paths = paths.len(),
                rescan,
                took_us = started.elapsed().as_micros() as u64,
                "snapshot"
            );
            if out.send(s).is_err() {
                return;
            }
        }
    }
}
