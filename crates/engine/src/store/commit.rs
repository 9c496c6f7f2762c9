//! Group commit: the syncs of one act made one, and shared with the acts that wait at the same time
//! in the root's other threads and processes (docs/DECISIONS.md, "Durable at every ack";
//! docs/PROTOCOL.md, "What covers a write").
//!
//! Outside an act every durable write syncs itself: its temporary file, then its directory after the
//! rename. Inside [`act`] the temporary file's data is still synced before its rename (`fdatasync`,
//! so a crash of the machine never leaves a name on an empty or torn file), but the syncs of names
//! are only noted: the act's renames and removals reach the page cache in their order, readers see
//! each file appear whole by its rename as before, and when the outermost act ends one `syncfs(2)`
//! of the file system they were made on covers them all, before the act returns. `syncfs` writes back every dirty inode of the file system and, on ext4,
//! commits its journal with a cache flush, so a completed round covers every write made before it
//! started, by this process or any other.
//!
//! The rounds are shared through a lock file in the root's private temporary directory,
//! `.tmp/commit.lock`, whose first eight bytes count the completed rounds:
//!
//! 1. under a shared lock (no round is running then: a round's leader holds the lock exclusively),
//!    read the count `seen`;
//! 2. take the lock exclusively; if the count is past `seen`, a round started after this act's
//!    writes and completed: they are covered, return;
//! 3. otherwise lead the round: `syncfs`, then the count `seen + 1`, then unlock.
//!
//! The acts that queued behind a running round thus share the next one. A lock that stays busy past
//! the root's lock timeout (a hung or hostile holder) is not waited for: the act syncs on its own.

use std::cell::RefCell;
use std::fs::{File, TryLockError};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use super::Root;
use super::layout::COMMIT_LOCK;
use crate::error::{Error, Result};

/// What the current thread's act has left to sync.
#[derive(Default)]
struct Pending {
    /// How many acts are open on this thread (an act may run inside another).
    depth: u32,
    /// The root of the outermost act: its temporary directory holds the commit lock.
    root: Option<(PathBuf, Duration)>,
    /// One open descriptor per file system written to, with its device.
    devices: Vec<(u64, OwnedFd)>,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Runs `work` as one act of `root`: the syncs its writes would make are noted, and made as one
/// shared round when the outermost act ends, before this returns. The act's own error wins over the
/// sync's; a failed sync is the act's error (what it wrote may not survive a crash of the machine).
pub(crate) fn act<T>(root: &Root, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let scope = Scope::enter(root);
    let out = work();
    let synced = scope.finish();
    let value = out?;
    synced.map(|()| value)
}

/// True when the current thread is inside an [`act`]: a durable write's sync is then noted for the
/// act's commit (the file system of `fd` recorded) instead of made now. False (sync now) outside an
/// act, or when `fd`'s file system cannot be told.
pub(crate) fn defer(fd: BorrowedFd<'_>) -> bool {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        if p.depth == 0 {
            return false;
        }
        let Ok(st) = rustix::fs::fstat(fd) else {
            return false;
        };
        #[allow(clippy::useless_conversion)]
        let dev = u64::from(st.st_dev);
        if p.devices.iter().any(|(d, _)| *d == dev) {
            return true;
        }
        match fd.try_clone_to_owned() {
            Ok(owned) => {
                p.devices.push((dev, owned));
                true
            }
            Err(_) => false,
        }
    })
}

/// True when the current thread is inside an [`act`]. A replace's temporary file asks this rather
/// than [`defer`] (inside an act it syncs its data only, before the rename): keeping a duplicate of
/// its descriptor until the commit would close it after the rename, a change (`IN_CLOSE_WRITE`) to
/// every watcher of the directory it was renamed into; the directory's own deferred sync, right
/// after the rename, notes the file system instead.
pub(crate) fn deferring() -> bool {
    PENDING.with(|p| p.borrow().depth > 0)
}

/// An open act on this thread; [`Scope::finish`] (or, when `work` panics, the drop) closes it.
struct Scope {
    open: bool,
}

impl Scope {
    fn enter(root: &Root) -> Self {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            if p.depth == 0 {
                p.root = Some((root.dir.clone(), root.settings.lock_timeout));
            }
            p.depth = p.depth.saturating_add(1);
        });
        Self { open: true }
    }

    /// Closes the act; the outermost one syncs what the acts noted.
    fn finish(mut self) -> Result<()> {
        self.open = false;
        close()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if self.open {
            let _ = close();
        }
    }
}

fn close() -> Result<()> {
    let due = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.depth = p.depth.saturating_sub(1);
        if p.depth > 0 {
            return None;
        }
        let devices = std::mem::take(&mut p.devices);
        p.root.take().map(|root| (root, devices))
    });
    match due {
        Some((root, devices)) if !devices.is_empty() => commit(&root.0, root.1, &devices),
        _ => Ok(()),
    }
}

/// Syncs each file system in `devices`: the root's through a shared round, any other on its own.
fn commit(root_dir: &Path, timeout: Duration, devices: &[(u64, OwnedFd)]) -> Result<()> {
    let temps = super::safe::private_temp_dir(root_dir);
    for (dev, fd) in devices {
        match &temps {
            Some((dir, _, temps_dev)) if temps_dev == dev => {
                shared_round(dir.as_fd(), root_dir, fd.as_fd(), timeout)?
            }
            _ => sync_fs(fd.as_fd(), root_dir)?,
        }
    }
    Ok(())
}

/// One `syncfs(2)` of `fd`'s file system.
fn sync_fs(fd: BorrowedFd<'_>, root_dir: &Path) -> Result<()> {
    rustix::fs::syncfs(fd).map_err(|e| {
        Error::io(
            root_dir,
            std::io::Error::other(format!(
                "syncing the file system failed ({e}); what the act wrote may not survive a crash \
                 of the machine: check the disk (dmesg) and repeat the act"
            )),
        )
    })
}

/// Makes everything written before this call durable, through a round shared with the acts of every
/// process waiting at the same time (see the module's doc).
fn shared_round(
    temps: BorrowedFd<'_>,
    root_dir: &Path,
    fd: BorrowedFd<'_>,
    timeout: Duration,
) -> Result<()> {
    let Some(lock) = open_lock(temps) else {
        return sync_fs(fd, root_dir);
    };
    let deadline = Instant::now() + timeout;
    if !wait_for(&lock, false, deadline) {
        return sync_fs(fd, root_dir);
    }
    let seen = rounds(&lock);
    let _ = lock.unlock();
    if !wait_for(&lock, true, deadline) {
        return sync_fs(fd, root_dir);
    }
    if rounds(&lock) != seen {
        let _ = lock.unlock();
        return Ok(());
    }
    let synced = sync_fs(fd, root_dir);
    if synced.is_ok() {
        let _ = lock.write_all_at(&seen.wrapping_add(1).to_le_bytes(), 0);
    }
    let _ = lock.unlock();
    synced
}

/// The commit lock, opened for this round (a lock is held by an open file description, so every
/// round opens its own: two threads sharing one would not exclude each other).
fn open_lock(temps: BorrowedFd<'_>) -> Option<File> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(temps, COMMIT_LOCK, flags, Mode::from_raw_mode(0o600))
        .ok()
        .map(File::from)
}

/// The completed rounds the lock file counts (0 when it is shorter than a count).
fn rounds(lock: &File) -> u64 {
    let mut bytes = [0u8; 8];
    match lock.read_exact_at(&mut bytes, 0) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => 0,
    }
}

/// Most time a waiter sleeps between two tries: a round takes about a millisecond on a local disk.
const MAX_PAUSE: Duration = Duration::from_micros(500);

/// Takes `lock` (exclusively or shared), trying until `deadline`; false when it stayed busy.
fn wait_for(lock: &File, exclusive: bool, deadline: Instant) -> bool {
    let mut pause = Duration::from_micros(20);
    loop {
        let tried = if exclusive {
            lock.try_lock()
        } else {
            lock.try_lock_shared()
        };
        match tried {
            Ok(()) => return true,
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
