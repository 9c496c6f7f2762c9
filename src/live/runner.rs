//! The model thread: waits for change signals (blocking, so an idle root costs no CPU), coalesces a
//! burst, refreshes the model and publishes only the newest snapshot.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::engine::Root;

use super::model::{FIRST_CHUNK, LOAD_CHUNK, LiveModel, ModelOptions, dirs_to_watch};
use super::snapshot::Snapshot;
use super::watch::{AnswerRequest, Signal, WatchMode, Watcher};
use crate::sources::hub::SourceHub;

/// `snap` carrying the sources' newest states (the same snapshot when there are none).
fn with_sources(snap: Arc<Snapshot>, sources: Option<&SourceHub>) -> Arc<Snapshot> {
    match sources {
        None => snap,
        Some(h) => {
            let mut s = (*snap).clone();
            s.sources = h.states();
            Arc::new(s)
        }
    }
}

/// A burst of events is considered over after this much quiet.
pub(crate) const DEBOUNCE_QUIET: Duration = Duration::from_millis(10);
/// A burst is never held back longer than this.
pub(crate) const DEBOUNCE_MAX: Duration = Duration::from_millis(30);
/// The console's leading edge: when no snapshot was published for this long, the next change is
/// published at once, with whatever signals are already queued, and not held for the debounce
/// window (the first event after a quiet moment is on screen within a frame). Changes that follow
/// a publish closer than this are gathered into bursts as before, so a busy root still costs one
/// snapshot per window.
pub(crate) const LEADING_QUIET: Duration = Duration::from_millis(50);
/// How often the model thread checks, between bursts, that the root is still the directory it
/// watches (a root deleted and re-created loses every notification watch; one `stat`, ~0 CPU).
pub(crate) const ROOT_CHECK: Duration = Duration::from_secs(1);

/// The device and inode of the root, through a link: the root is the operator's path (resolved
/// when the `Root` was built), and one swapped for a link to a directory is still watched.
fn root_identity(p: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// The running model: the newest snapshot, and a way to ask for a rescan or stop.
pub struct LiveHandle {
    /// Always holds the newest snapshot; a reader that falls behind skips the ones in between.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    signals: Sender<Signal>,
    /// How changes are noticed.
    pub mode: WatchMode,
    /// Why notifications could not be used, if they were wanted.
    pub fallback_reason: Option<String>,
    /// How many directories are watched now (each non-recursively).
    watches: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveHandle {
    /// Starts watching `root` and publishes the first snapshot before returning.
    pub fn start(root: Root, mode: WatchMode, opts: ModelOptions) -> Self {
        Self::start_with_sources(root, mode, opts, &[])
    }

    /// [`LiveHandle::start`] with the foreign sources `specs` (`KIND:LOCATION`) beside the root:
    /// each read by its own thread ([`SourceHub`]), their states carried by every snapshot.
    pub fn start_with_sources(
        root: Root,
        mode: WatchMode,
        opts: ModelOptions,
        specs: &[String],
    ) -> Self {
        fix_mmap_threshold();
        let (tx, rx) = mpsc::channel();
        let sources = (!specs.is_empty()).then(|| {
            let wake = tx.clone();
            SourceHub::start(
                specs,
                Arc::new(move || {
                    let _ = wake.send(Signal::Sources);
                }),
            )
        });
        // Watch first, then read: a change between the two is seen twice, never missed.
        let identity = root_identity(&root.dir);
        let mut watcher = super::watch::watch(mode, tx.clone());
        watcher.sync(&dirs_to_watch(&root));
        let watches = Arc::new(AtomicUsize::new(watcher.watch_count()));
        let (mode, fallback_reason) = (watcher.mode, watcher.fallback_reason.clone());
        let settle = opts.settle.unwrap_or(DEBOUNCE_MAX);
        let mut model = LiveModel::open_progressive(root.clone(), opts, FIRST_CHUNK);
        model.set_watch_mode(mode.to_string());
        let (snap_tx, snap_rx) = watch::channel(with_sources(model.snapshot(), sources.as_ref()));
        let watched = Watched {
            sources,
            root,
            tx: tx.clone(),
            identity,
            watcher,
            layout: model.layout_generation(),
            watches: watches.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("pantheon-live".into())
            .spawn(move || run(model, rx, snap_tx, watched, settle))
            .expect("spawning the live model thread");
        Self {
            snapshots: snap_rx,
            signals: tx,
            mode,
            fallback_reason,
            watches,
            thread: Some(thread),
        }
    }

    /// Answers item `key` of source number `index` with `text` (its own thread sends it).
    pub fn answer_source(
        &self,
        index: usize,
        key: &str,
        text: &str,
    ) -> Result<crate::sources::Answered, crate::sources::SourceError> {
        let (reply, rx) = mpsc::channel();
        self.signals
            .send(Signal::Answer(AnswerRequest {
                index,
                key: key.to_owned(),
                text: text.to_owned(),
                reply,
            }))
            .map_err(|_| crate::sources::SourceError::new("the live model has stopped"))?;
        rx.recv_timeout(crate::sources::hub::ANSWER_TIMEOUT)
            .map_err(|_| {
                crate::sources::SourceError::new(
                    "the source did not take the answer in time; it may still arrive",
                )
            })?
    }

    /// Asks for every file to be re-checked now.
    pub fn rescan(&self) {
        let _ = self.signals.send(Signal::Rescan);
    }

    /// How many directories are watched now (a few per god and track, none per workflow).
    pub fn watch_count(&self) -> usize {
        self.watches.load(Ordering::Relaxed)
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

/// The change source and what it watches, kept by the model thread so it can follow the root's
/// directories as they appear and vanish.
struct Watched {
    /// The foreign sources' readers, when `--source` named any.
    sources: Option<SourceHub>,
    root: Root,
    tx: Sender<Signal>,
    identity: Option<(u64, u64)>,
    watcher: Watcher,
    /// The model's layout generation when the watches were last synced.
    layout: u64,
    /// Shared with the handle: how many directories are watched.
    watches: Arc<AtomicUsize>,
}

impl Watched {
    /// True when the root is no longer the directory the watches were set on (deleted, or deleted and
    /// re-created): the watches are set again on what is there now, and the model must rescan.
    fn root_changed(&mut self) -> bool {
        let now = root_identity(&self.root.dir);
        if now == self.identity {
            return false;
        }
        tracing::info!(root = %self.root.dir.display(), present = now.is_some(), "root changed; watching again");
        self.identity = now;
        if now.is_some() && self.watcher.mode == WatchMode::Notify {
            // Replaced before the rescan, so a change in between is seen twice, never missed.
            self.watcher = super::watch::watch(WatchMode::Notify, self.tx.clone());
            self.watcher.sync(&dirs_to_watch(&self.root));
            self.watches
                .store(self.watcher.watch_count(), Ordering::Relaxed);
        }
        true
    }

    /// Follows the directories of the root after the model took a burst: when a directory appeared,
    /// vanished or was replaced (the model's layout changed, or an event named a watched directory),
    /// the watches are synced; the directories newly watched are returned, to be read again.
    fn follow(&mut self, model: &LiveModel, rescan: bool, paths: &[PathBuf]) -> Vec<PathBuf> {
        let layout = model.layout_generation();
        if !rescan && layout == self.layout && !paths.iter().any(|p| self.watcher.is_watched(p)) {
            return Vec::new();
        }
        self.layout = layout;
        let fresh = self.watcher.sync(&dirs_to_watch(&self.root));
        self.watches
            .store(self.watcher.watch_count(), Ordering::Relaxed);
        fresh
    }
}

/// Whether a burst may be taken on its leading edge: allowed at all (the console's window, no load
/// under way), and when a snapshot was last published.
#[derive(Debug, Clone, Copy)]
struct Edge {
    allowed: bool,
    published: Option<Instant>,
}

impl Edge {
    /// True when the first signal, arriving now, comes after a quiet moment: judged when it
    /// arrives, not when the wait for it began.
    fn leading(&self) -> bool {
        self.allowed && self.published.is_none_or(|t| t.elapsed() >= LEADING_QUIET)
    }
}

/// Collects one burst: the first signal (waiting at most `idle`), then whatever follows within the
/// debounce window, or, on the leading `edge`, only what is already queued. Returns `None` on stop,
/// an empty burst when `idle` passed with no signal.
fn next_burst(
    rx: &Receiver<Signal>,
    idle: Duration,
    settle: Duration,
    edge: Edge,
) -> Option<Burst> {
    let first = match rx.recv_timeout(idle) {
        Ok(s) => s,
        Err(RecvTimeoutError::Timeout) => return Some(Burst::default()),
        Err(RecvTimeoutError::Disconnected) => return None,
    };
    let leading = edge.leading();
    let started = Instant::now();
    let mut burst = Burst::default();
    let take = |s: Signal, b: &mut Burst| match s {
        Signal::Stop => false,
        Signal::Rescan => {
            b.rescan = true;
            true
        }
        Signal::Sources => {
            b.sources = true;
            true
        }
        Signal::Answer(a) => {
            b.answers.push(a);
            true
        }
        #[cfg(test)]
        Signal::Paths(p) => {
            b.paths.extend(p);
            true
        }
        Signal::Pending(p) => {
            b.paths.extend(p.take());
            true
        }
    };
    if !take(first, &mut burst) {
        return None;
    }
    if leading {
        // The first change after a quiet moment: what is queued now, and nothing waited for.
        loop {
            match rx.try_recv() {
                Ok(s) => {
                    if !take(s, &mut burst) {
                        return None;
                    }
                }
                Err(mpsc::TryRecvError::Empty) => return Some(burst),
                Err(mpsc::TryRecvError::Disconnected) => return None,
            }
        }
    }
    loop {
        let left = settle.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        // The console's window ends at the first quiet moment; a longer one gathers the burst.
        let quiet = if settle > DEBOUNCE_MAX {
            left
        } else {
            DEBOUNCE_QUIET.min(left)
        };
        match rx.recv_timeout(quiet) {
            Ok(s) => {
                if !take(s, &mut burst) {
                    return None;
                }
            }
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
    Some(burst)
}

/// One burst of signals: a rescan asked, a source's state changed, changed paths, answers to send.
#[derive(Default)]
struct Burst {
    rescan: bool,
    sources: bool,
    paths: Vec<PathBuf>,
    answers: Vec<AnswerRequest>,
}

fn run(
    mut model: LiveModel,
    rx: Receiver<Signal>,
    out: watch::Sender<Arc<Snapshot>>,
    mut watched: Watched,
    settle: Duration,
) {
    // When a snapshot was last published: a change after a quiet moment is published at once
    // (the console's window only; a reader with a longer one gathers every burst).
    let mut published: Option<Instant> = None;
    loop {
        // While the first load is still reading, take what signals there are and go on reading.
        let idle = if model.is_loading() {
            Duration::ZERO
        } else {
            ROOT_CHECK
        };
        let edge = Edge {
            allowed: settle <= DEBOUNCE_MAX && !model.is_loading(),
            published,
        };
        let Some(Burst {
            mut rescan,
            sources,
            mut paths,
            answers,
        }) = next_burst(&rx, idle, settle, edge)
        else {
            return;
        };
        answer_sources(watched.sources.as_ref(), answers);
        rescan |= watched.root_changed();
        if sources && !rescan && paths.is_empty() {
            let s = with_sources(model.snapshot(), watched.sources.as_ref());
            if out.send(s).is_err() {
                return;
            }
        }
        if rescan || !paths.is_empty() {
            paths.sort();
            paths.dedup();
            let started = Instant::now();
            let mut snap = if rescan {
                model.rescan()
            } else {
                model.apply(&paths)
            };
            let mode = watched.watcher.mode;
            let mut fresh = watched.follow(&model, rescan, &paths);
            // Files written in a new directory before its watch existed are read now; reading
            // them may find directories made meanwhile (`init` makes a tree): follow those too.
            for _ in 0..16 {
                if fresh.is_empty() {
                    break;
                }
                snap = model.apply(&fresh).or(snap);
                fresh = watched.follow(&model, false, &fresh);
            }
            if watched.watcher.mode != mode {
                model.set_watch_mode(watched.watcher.mode.to_string());
                snap = Some(model.snapshot());
            }
            if let Some(s) = snap {
                tracing::debug!(
                    seq = s.seq,
                    paths = paths.len(),
                    rescan,
                    took_us = started.elapsed().as_micros() as u64,
                    "snapshot"
                );
                if out.send(with_sources(s, watched.sources.as_ref())).is_err() {
                    return;
                }
                published = Some(Instant::now());
            }
        }
        if model.is_loading() {
            if let Some(s) = model.load_more(LOAD_CHUNK)
                && out.send(with_sources(s, watched.sources.as_ref())).is_err()
            {
                return;
            }
            if !model.is_loading() {
                release_free_memory();
            }
        }
    }
}

/// Hands each answer to its source's reader, which replies to the asker itself: the model thread
/// never waits for a source.
fn answer_sources(sources: Option<&SourceHub>, answers: Vec<AnswerRequest>) {
    for a in answers {
        match sources {
            Some(hub) => hub.send_answer(a.index, &a.key, &a.text, a.reply),
            None => {
                let _ = a.reply.send(Err(crate::sources::SourceError::new(
                    "no source is open in this console; start it with --source KIND:LOCATION",
                )));
            }
        }
    }
}

/// The size from which glibc serves an allocation with its own mapping: its default, fixed.
pub(crate) const MMAP_THRESHOLD: usize = 128 * 1024;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] (once per process). By default glibc raises
/// the threshold to the size of every mapped block freed, up to 32 MiB: after the first publish of
/// a large root frees its lists of rows (a few MiB each), every later list comes from the heap
/// instead, and the holes they leave when the next publish replaces them fill with small rows that
/// pin them. At 100,000 workflows that kept 21–38 MiB free but resident, varying run to run; with
/// the threshold fixed each large list is its own mapping, returned whole when freed (measured in
/// the console bench's scale part: free space after load ~9 MiB, RSS 137 MiB instead of 144–160).
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let size = libc::c_int::try_from(MMAP_THRESHOLD).unwrap_or(libc::c_int::MAX);
            // SAFETY: `mallopt` takes two integers and only changes the allocator's tuning; glibc
            // documents it as safe to call at any time, from any thread.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, size);
            }
        });
    }
}

/// Hands the memory the allocator keeps free back to the system, once the first load is over: a
/// load of 100,000 rows frees as much as it keeps (each file's parse, each step's superseded
/// snapshot lists), and glibc keeps those pages resident in the model thread's arena otherwise.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer and only returns free pages of the allocator's own
    // arenas to the kernel; it is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(b: &Burst) -> Vec<PathBuf> {
        b.paths.clone()
    }

    #[test]
    fn the_first_change_after_quiet_is_taken_at_once_and_a_burst_is_gathered() {
        let (tx, rx) = mpsc::channel();
        let (a, b, c) = (PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c"));
        // On the leading edge: what is queued, at once, though the window is ten seconds long.
        tx.send(Signal::Paths(vec![a.clone()])).unwrap();
        tx.send(Signal::Paths(vec![b.clone()])).unwrap();
        let t = Instant::now();
        let quiet = Edge {
            allowed: true,
            published: None,
        };
        let burst = next_burst(&rx, ROOT_CHECK, Duration::from_secs(10), quiet).unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert_eq!(paths(&burst), [a.clone(), b.clone()]);
        // Within a burst (a publish was recent): what follows the first signal within the window
        // is gathered with it.
        tx.send(Signal::Paths(vec![a.clone()])).unwrap();
        let late = tx.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            late.send(Signal::Paths(vec![PathBuf::from("c")])).unwrap();
        });
        let busy = Edge {
            allowed: true,
            published: Some(Instant::now() + Duration::from_secs(60)),
        };
        let burst = next_burst(&rx, ROOT_CHECK, Duration::from_secs(2), busy).unwrap();
        sender.join().unwrap();
        assert_eq!(paths(&burst), [a.clone(), c]);
        // The edge is judged when the signal arrives, not when the wait began: a publish just
        // before the wait, and a signal well after it, is a leading edge (taken at once).
        let recent = Edge {
            allowed: true,
            published: Some(Instant::now()),
        };
        let late = tx.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(LEADING_QUIET * 2);
            late.send(Signal::Paths(vec![PathBuf::from("a")])).unwrap();
        });
        let t = Instant::now();
        let burst = next_burst(&rx, ROOT_CHECK * 10, Duration::from_secs(10), recent).unwrap();
        sender.join().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert_eq!(paths(&burst), [a]);
        // A stop ends the thread on either edge.
        tx.send(Signal::Stop).unwrap();
        assert!(next_burst(&rx, ROOT_CHECK, DEBOUNCE_MAX, quiet).is_none());
    }
}
