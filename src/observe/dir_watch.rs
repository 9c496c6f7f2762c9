//! The span watcher's own inotify watches (Linux): a few directories, each non-recursively, told
//! only of what can change a record: a file closed after writing, renamed in or out, removed, made,
//! and the directory itself removed or moved. Not of opens, reads and each `write` call, which a
//! general-purpose watcher reports too: every act opens and locks files in `conductor/state/`, and
//! every reader of a state (the recorder, this watcher itself) opens it, so those would wake the
//! watcher several times per act for nothing.
//!
//! Events are not taken one by one: after the first, the watcher sleeps through the burst and reads
//! what gathered in the kernel's queue in a few reads. A queue that overflowed, or a watch that
//! could not be set, is reported, and the caller checks every file instead.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::live::watch_set::{WatchSet, Watches};

/// How often a burst's events are read from the kernel's queue while the burst gathers.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// What one burst named.
#[derive(Debug, Default)]
pub(crate) struct Burst {
    /// The paths events named (files in a watched directory, or a watched directory itself).
    pub paths: BTreeSet<PathBuf>,
    /// Events were lost (the queue overflowed): every file must be checked.
    pub overflow: bool,
}

/// The watches: an inotify instance and the directories it watches.
pub(crate) struct DirWatch {
    inotify: Inotify,
    /// Directory to its watch descriptor (the set the live model's watcher keeps too).
    watched: WatchSet<i32>,
    buf: Vec<MaybeUninit<u8>>,
}

/// The inotify instance and what its watch descriptors name.
struct Inotify {
    fd: OwnedFd,
    /// Watch descriptor to directory.
    dirs: HashMap<i32, PathBuf>,
}

impl Watches for Inotify {
    type Handle = i32;
    type Error = std::io::Error;

    fn watch(&mut self, dir: &Path) -> std::io::Result<Option<i32>> {
        match inotify::add_watch(&self.fd, dir, mask()) {
            Ok(wd) => {
                // A directory replaced in place may come back under the same descriptor.
                self.dirs.insert(wd, dir.to_path_buf());
                Ok(Some(wd))
            }
            // Removed (or replaced by a link) between the stat and the watch.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn unwatch(&mut self, dir: &Path, wd: i32) {
        if self.dirs.get(&wd).is_some_and(|d| d == dir) {
            self.dirs.remove(&wd);
        }
        let _ = inotify::remove_watch(&self.fd, wd);
    }
}

fn mask() -> WatchFlags {
    WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_TO
        | WatchFlags::MOVED_FROM
        | WatchFlags::DELETE
        | WatchFlags::CREATE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::DONT_FOLLOW
}

impl DirWatch {
    /// An inotify instance with no watch yet.
    pub(crate) fn new() -> std::io::Result<Self> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Self {
            inotify: Inotify {
                fd,
                dirs: HashMap::new(),
            },
            watched: WatchSet::default(),
            buf: vec![MaybeUninit::uninit(); 64 * 1024],
        })
    }

    /// Watches exactly the directories of `want` that exist (see [`WatchSet::sync`]). Returns the
    /// directories whose watch is new (what was written in them before must be read by the
    /// caller); an error when a watch could not be set (the user's inotify limit): the caller
    /// owns the fallback (it checks every file instead).
    pub(crate) fn sync(&mut self, want: &BTreeSet<PathBuf>) -> std::io::Result<Vec<PathBuf>> {
        self.watched.sync(&mut self.inotify, want)
    }

    /// How many directories are watched.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.watched.len()
    }

    /// Waits at most `idle` for an event, then gathers the burst for `settle` (reading the queue
    /// every [`DRAIN_EVERY`], so it cannot fill during a long burst). An empty burst: `idle` passed.
    pub(crate) fn next_burst(
        &mut self,
        idle: Duration,
        settle: Duration,
    ) -> std::io::Result<Burst> {
        let mut burst = Burst::default();
        if !self.readable(idle)? {
            return Ok(burst);
        }
        let started = Instant::now();
        loop {
            self.drain(&mut burst)?;
            let left = settle.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Ok(burst);
            }
            std::thread::sleep(left.min(DRAIN_EVERY));
        }
    }

    fn readable(&self, timeout: Duration) -> std::io::Result<bool> {
        let ts = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.inotify.fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => Ok(n > 0),
            Err(Errno::INTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads every event queued now into `burst`.
    fn drain(&mut self, burst: &mut Burst) -> std::io::Result<()> {
        let mut reader = inotify::Reader::new(&self.inotify.fd, &mut self.buf);
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::AGAIN | Errno::INTR) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let flags = ev.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                burst.overflow = true;
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                // The directory is gone (or its watch removed): the next sync sets it again, even
                // when a directory made in its place has the same inode.
                if let Some(dir) = self.inotify.dirs.remove(&ev.wd()) {
                    self.watched.forget(&dir, ev.wd());
                    burst.paths.insert(dir);
                }
                continue;
            }
            let Some(dir) = self.inotify.dirs.get(&ev.wd()) else {
                continue;
            };
            match ev.file_name() {
                Some(name) if !name.is_empty() => {
                    let name = OsStr::from_bytes(name.to_bytes());
                    burst.paths.insert(dir.join(name));
                }
                _ => {
                    burst.paths.insert(dir.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_names_the_files_written_renamed_and_removed_not_those_read() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("read.json"), "{}").unwrap();
        let mut w = DirWatch::new().unwrap();
        let added = w.sync(&[state.clone()].into()).unwrap();
        assert_eq!(added, vec![state.clone()]);
        assert!(w.sync(&[state.clone()].into()).unwrap().is_empty());
        let quiet = w.next_burst(Duration::ZERO, Duration::ZERO).unwrap();
        assert!(quiet.paths.is_empty());
        // Opening and reading a file is no event; a rename into the directory and a removal are.
        std::fs::read(state.join("read.json")).unwrap();
        let read = w.next_burst(Duration::ZERO, Duration::ZERO).unwrap();
        assert!(read.paths.is_empty(), "{:?}", read.paths);
        std::fs::write(dir.path().join("tmp"), "{}").unwrap();
        std::fs::rename(dir.path().join("tmp"), state.join("wf_a.json")).unwrap();
        std::fs::remove_file(state.join("read.json")).unwrap();
        let b = w
            .next_burst(Duration::from_secs(5), Duration::from_millis(10))
            .unwrap();
        assert_eq!(
            b.paths,
            [state.join("read.json"), state.join("wf_a.json")].into()
        );
        assert!(!b.overflow);
        // A directory removed and made again is watched anew.
        std::fs::remove_dir_all(&state).unwrap();
        std::fs::create_dir(&state).unwrap();
        let gone = w
            .next_burst(Duration::from_secs(5), Duration::from_millis(10))
            .unwrap();
        assert!(gone.paths.contains(&state));
        assert_eq!(
            w.sync(&[state.clone()].into()).unwrap(),
            vec![state.clone()]
        );
        std::fs::write(state.join("wf_b.json"), "{}").unwrap();
        let again = w
            .next_burst(Duration::from_secs(5), Duration::from_millis(10))
            .unwrap();
        assert_eq!(again.paths, [state.join("wf_b.json")].into());
        // A link is never watched.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        assert!(w.sync(&[state.clone(), link].into()).unwrap().is_empty());
        assert_eq!(w.count(), 1);
    }
}
