//! The recorder's own file watcher: inotify on every directory of the recorded trees, asking only
//! for the events that change something.
//!
//! A general watcher (the `notify` crate) also asks for `IN_OPEN`, so every reader of the root
//! raises an event: the engine opens about seventy directories in one submit + ack, each open
//! queued to the watcher and waking its thread, on the acting thread's own time. Here only
//! writes, closes after a write, attribute changes, creations, removals and renames are asked for,
//! and the reading thread sleeps [`GATHER`] after each batch it hands on, so the kernel queues (and
//! merges) what comes meanwhile instead of waking anybody for it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};

use super::recorder::{GATHER, Msg};
use crate::error::{Error, Result};

/// What each directory is watched for: no open, read or close-after-read events, never through a
/// link, and nothing for a file that was unlinked while open.
fn mask() -> WatchMask {
    WatchMask::CLOSE_WRITE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
        | WatchMask::EXCL_UNLINK
}

/// Deepest directory watched below a top.
const MAX_DEPTH: usize = 24;
/// Bytes read from the inotify descriptor at a time (room for several hundred events).
const BUFFER: usize = 64 * 1024;
/// Most paths handed on in one message: a storm of events is passed on in parts, never gathered
/// whole while it lasts.
const MAX_BATCH: usize = 8192;

/// The directories watched and what their descriptors name.
struct Dirs {
    watches: Watches,
    /// A watch could not be added for want of room (`fs.inotify.max_user_watches`); said once
    /// until a watch is added again.
    full: bool,
    tops: Vec<PathBuf>,
    paths: HashMap<WatchDescriptor, PathBuf>,
    skip: Vec<PathBuf>,
}

impl Dirs {
    /// How deep `path` lies below the top it is in.
    fn depth_of(&self, path: &Path) -> usize {
        self.tops
            .iter()
            .filter_map(|t| path.strip_prefix(t).ok())
            .map(|rel| rel.components().count())
            .min()
            .unwrap_or(MAX_DEPTH + 1)
    }

    /// Watches `dir` and every directory below it (links never followed, skipped paths left out).
    /// Adding a directory already watched (a directory moved within the tree) renames its entry.
    fn add_tree(&mut self, dir: &Path, depth: usize) -> std::io::Result<()> {
        if depth > MAX_DEPTH || self.skip.iter().any(|s| dir.starts_with(s)) {
            return Ok(());
        }
        let wd = match self.watches.add(dir, mask()) {
            Ok(wd) => wd,
            // Gone or replaced by a file meanwhile: nothing to watch.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.full = false;
        self.paths.insert(wd, dir.to_path_buf());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                self.add_tree(&e.path(), depth + 1)?;
            }
        }
        Ok(())
    }
}

/// A running watcher: a thread that reads the events and sends them to the recorder as
/// [`Msg::Changed`]. Stopped (and joined) when dropped.
pub(crate) struct TreeWatch {
    wake: Arc<OwnedFd>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for TreeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeWatch").finish_non_exhaustive()
    }
}

impl TreeWatch {
    /// Watches every directory of `tops` (but `skip` and what lies below them) and starts the
    /// thread. The watches are in place when this returns: a change made after it is seen.
    pub(crate) fn start(
        tops: &[PathBuf],
        skip: Vec<PathBuf>,
        tx: mpsc::Sender<Msg>,
    ) -> Result<Self> {
        let ino =
            Inotify::init().map_err(|e| Error::refused(format!("cannot watch the root: {e}")))?;
        let mut dirs = Dirs {
            watches: ino.watches(),
            full: false,
            paths: HashMap::new(),
            tops: tops.to_vec(),
            skip,
        };
        for t in tops {
            dirs.add_tree(t, 0)
                .map_err(|e| Error::refused(format!("cannot watch {}: {e}", t.display())))?;
        }
        let wake = Arc::new(
            rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
                .map_err(|e| Error::refused(format!("cannot watch the root: {e}")))?,
        );
        let w = wake.clone();
        let handle = std::thread::Builder::new()
            .name("history-watch".into())
            .spawn(move || read_loop(ino, dirs, &w, &tx))
            .map_err(|e| Error::io("history-watch", e))?;
        Ok(Self {
            wake,
            handle: Some(handle),
        })
    }
}

impl Drop for TreeWatch {
    fn drop(&mut self) {
        let _ = rustix::io::write(&*self.wake, &1u64.to_ne_bytes());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Waits for events (or the stop), hands each batch on, then sleeps [`GATHER`] so what comes next
/// is queued by the kernel rather than waking this thread event by event.
fn read_loop(mut ino: Inotify, mut dirs: Dirs, wake: &OwnedFd, tx: &mpsc::Sender<Msg>) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let mut fds = [
            PollFd::new(&ino, PollFlags::IN),
            PollFd::new(wake, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                let _ = tx.send(Msg::Warning(format!("the watcher stopped: {e}")));
                return;
            }
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        let mut batch = Batch::default();
        loop {
            match ino.read_events(&mut buf) {
                Ok(events) => {
                    let mut any = false;
                    for ev in events {
                        any = true;
                        batch.take(&mut dirs, ev.wd, ev.mask, ev.name);
                    }
                    if !any || batch.paths.len() >= MAX_BATCH {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.send(Msg::Warning(format!("the watcher stopped: {e}")));
                    return;
                }
            }
        }
        for w in batch.warnings.drain(..) {
            let _ = tx.send(Msg::Warning(w));
        }
        if (batch.rescan || !batch.paths.is_empty())
            && tx
                .send(Msg::Changed {
                    paths: batch.paths,
                    rescan: batch.rescan,
                })
                .is_err()
        {
            return;
        }
        // The stop is looked at again before sleeping, so a stop never waits a whole gathering.
        let mut stop = [PollFd::new(wake, PollFlags::IN)];
        if rustix::event::poll(&mut stop, Some(&timespec(GATHER))).is_ok_and(|n| n > 0) {
            return;
        }
    }
}

fn timespec(d: std::time::Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// What one read of the descriptor named.
#[derive(Default)]
struct Batch {
    paths: Vec<PathBuf>,
    rescan: bool,
    warnings: Vec<String>,
}

impl Batch {
    fn take(
        &mut self,
        dirs: &mut Dirs,
        wd: WatchDescriptor,
        mask: EventMask,
        name: Option<&std::ffi::OsStr>,
    ) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            // Events were lost: only a walk of everything can tell what changed.
            self.rescan = true;
            return;
        }
        if mask.contains(EventMask::IGNORED) {
            dirs.paths.remove(&wd);
            return;
        }
        let Some(dir) = dirs.paths.get(&wd) else {
            return;
        };
        let path = match name {
            Some(n) => dir.join(n),
            None => dir.clone(),
        };
        if mask.contains(EventMask::ISDIR)
            && mask.intersects(EventMask::CREATE | EventMask::MOVED_TO)
            && let Err(e) = dirs.add_tree(&path, dirs.depth_of(&path))
            && !dirs.full
        {
            // Out of watches (`fs.inotify.max_user_watches`) or refused: changes below it are seen
            // only by the next walk. Said once, not once per directory of a flood.
            dirs.full = true;
            self.warnings.push(format!(
                "cannot watch {} (further directories unwatched are not named): {e}",
                path.display()
            ));
        }
        self.paths.push(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn changed(rx: &mpsc::Receiver<Msg>, wait: Duration) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let until = std::time::Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(Msg::Changed { paths, .. }) => out.extend(paths),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        out
    }

    #[test]
    fn reads_wake_nobody_and_writes_are_named() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("conductor");
        std::fs::create_dir_all(top.join("state")).unwrap();
        std::fs::write(top.join("state/a.json"), b"{}").unwrap();
        let (tx, rx) = mpsc::channel();
        let w = TreeWatch::start(std::slice::from_ref(&top), Vec::new(), tx).unwrap();
        // Readers of the root: opening, reading and listing change nothing.
        for _ in 0..20 {
            let _ = std::fs::read(top.join("state/a.json")).unwrap();
            let _ = std::fs::read_dir(top.join("state")).unwrap().count();
        }
        assert_eq!(
            changed(&rx, Duration::from_millis(300)),
            Vec::<PathBuf>::new()
        );
        std::fs::write(top.join("state/a.json"), b"{\"x\":1}").unwrap();
        std::fs::write(top.join("state/.b.json.tmp"), b"{}").unwrap();
        std::fs::rename(top.join("state/.b.json.tmp"), top.join("state/b.json")).unwrap();
        let seen = changed(&rx, Duration::from_millis(500));
        assert!(seen.contains(&top.join("state/a.json")), "{seen:?}");
        assert!(seen.contains(&top.join("state/b.json")), "{seen:?}");
        drop(w);
    }

    #[test]
    fn new_and_moved_directories_are_watched_below_and_skipped_ones_never() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("conductor");
        let skip = top.join("history");
        std::fs::create_dir_all(&skip).unwrap();
        let (tx, rx) = mpsc::channel();
        let _w = TreeWatch::start(std::slice::from_ref(&top), vec![skip.clone()], tx).unwrap();
        std::fs::create_dir_all(top.join("pending/hermes/deep")).unwrap();
        let seen = changed(&rx, Duration::from_millis(300));
        assert!(seen.contains(&top.join("pending")), "{seen:?}");
        std::fs::write(top.join("pending/hermes/deep/h.json"), b"{}").unwrap();
        let seen = changed(&rx, Duration::from_millis(300));
        assert!(
            seen.contains(&top.join("pending/hermes/deep/h.json")),
            "{seen:?}"
        );
        // A directory moved within the tree is named by its new path from then on.
        std::fs::rename(top.join("pending/hermes"), top.join("pending/thoth")).unwrap();
        let _ = changed(&rx, Duration::from_millis(300));
        std::fs::write(top.join("pending/thoth/deep/i.json"), b"{}").unwrap();
        let seen = changed(&rx, Duration::from_millis(300));
        assert!(
            seen.contains(&top.join("pending/thoth/deep/i.json")),
            "{seen:?}"
        );
        // The skipped directory (the history itself) raises nothing, nor what is made below it.
        std::fs::create_dir_all(skip.join("segments")).unwrap();
        std::fs::write(skip.join("segments/1.log"), b"x").unwrap();
        std::fs::write(skip.join("w.json"), b"x").unwrap();
        let seen = changed(&rx, Duration::from_millis(300));
        assert!(
            seen.iter().all(|p| !p.starts_with(&skip)),
            "the history's own writes were reported: {seen:?}"
        );
    }

    #[test]
    fn dropping_the_watch_stops_its_thread() {
        let t = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel();
        let w = TreeWatch::start(&[t.path().to_path_buf()], Vec::new(), tx).unwrap();
        drop(w);
        // The thread held the only sender: once joined, the channel is closed.
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(5)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        ));
    }

    #[test]
    fn a_submit_and_ack_cycle_is_few_changes_to_the_recorders_watches() {
        // What the recorder is woken for, per cycle, is what every watcher of a root pays for on
        // the acting thread (docs/HISTORY.md, "What watching costs the writers"): a replace is one
        // rename (its temporary file lives in the root's `.tmp/`), a lock is no change.
        use crate::{Actor, Conductor, Root};
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let c = Conductor::new(root.clone());
        c.init().unwrap();
        let cycle = |i: usize| {
            let hid = format!("hof_20260614_{i:06x}");
            let wf = format!("wf_watch_{}", i % 2);
            let h = serde_json::json!({
                "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "marvin",
                "step": format!("s{i}"),
                "context": {"summary": "cycle", "decisions": [], "artifacts": []},
            });
            c.submit_handoff(&h).unwrap();
            let a = serde_json::json!({"ack_id": format!("ack_20260614_{i:06x}"),
                "handoff_id": hid, "workflow_id": wf, "status": "accepted"});
            c.ack_handoff(&a, Actor::Recipient).unwrap();
        };
        // Every directory the cycles write in exists before the watches are set.
        (0..2).for_each(cycle);
        let mut inotify = Inotify::init().unwrap();
        let mut todo = vec![root.conductor.clone(), root.handoffs.clone()];
        while let Some(d) = todo.pop() {
            // As the recorder: neither the history nor the journal's intents are watched.
            if d.starts_with(super::super::HistoryDir::of(&root).dir)
                || d.starts_with(crate::conductor::intents::intents_dir(&root))
            {
                continue;
            }
            inotify.watches().add(&d, mask()).unwrap();
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    todo.push(e.path());
                }
            }
        }
        let n = 10;
        (2..2 + n).for_each(cycle);
        let mut buffer = vec![0u8; BUFFER];
        let mut events = Vec::new();
        while let Ok(batch) = inotify.read_events(&mut buffer) {
            let before = events.len();
            events.extend(batch.map(|e| (e.mask, e.name.map(|n| n.to_os_string()))));
            if events.len() == before {
                break;
            }
        }
        // Per cycle (11): five replaces, one rename each (the handoff, the state twice, the
        // dispatch twice), the journal appended twice (a write and its close each), the dispatch
        // moved to the archive (two renames). With the temporary files beside their targets the
        // same cycles raised 31.
        assert!(
            events.len() <= 12 * n,
            "{} events in {n} cycles: {events:?}",
            events.len()
        );
        assert!(events.len() >= 4 * n, "{events:?}");
        assert!(
            events.iter().all(|(_, name)| name
                .as_ref()
                .is_none_or(|n| !n.to_string_lossy().starts_with(".tmp-"))),
            "{events:?}"
        );
    }
}
