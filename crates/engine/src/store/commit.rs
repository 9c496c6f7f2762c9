//! Group commit: the syncs of one act made one, and shared with the acts that wait at the same time
//! in the root's other threads and processes (docs/DECISIONS.md, "Durable at every ack";
//! docs/PROTOCOL.md, "What covers a write").
//!
//! Outside an act every durable write syncs itself: its temporary file, then its directory after the
//! rename. Inside [`act`] nothing syncs on its own and the renames wait: a replace writes its
//! temporary file (in the root's private `.tmp/`) and holds its rename ([`hold`]); at the act's next
//! barrier ([`settle`]: the release of a protocol lock, an append, a removal, a move of a file not
//! held, a listing of a directory holding a waiting rename ([`settle_in`]), an unheld act inside
//! this one, a test crash point, the act's end) one shared round, the *data round*, makes
//! every held temporary file's data durable, and only then are the renames made, in the order the
//! act asked for them; when the outermost act ends a second shared round, the *names round*, covers
//! the renames, removals, new directories and appends. A crash of the machine thus never leaves a
//! name on an empty or torn file (no rename is made before a completed round covered its data), and
//! an act answers only after its names round. Readers see each file appear whole by its rename, as
//! before, only a little later (still under the act's lock: a lock's release is a barrier). The
//! act's own reads of a file it holds are answered from the temporary file ([`held_source`]).
//! Inside [`act_unheld`] (the acts whose code looks at what it wrote by means the store's readers
//! do not see) each temporary file's data is synced (`fdatasync`) before its rename, made at once,
//! and only the names round is shared.
//!
//! A round is one `syncfs(2)` of the file system. `syncfs` writes back every dirty inode of the file
//! system and, on ext4, commits its journal with a cache flush, so a completed round covers every
//! write made before it started, by this process or any other.
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
use std::ffi::OsString;
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
    /// The renames held until the next data round, in the order they were asked for.
    held: Vec<Held>,
    /// Why a barrier of this act failed (the act fails with it; later barriers refuse).
    failed: Option<(PathBuf, String)>,
    /// Whether the innermost open act holds its replaces' renames ([`act`]) or syncs each
    /// temporary file's data before its rename ([`act_unheld`]).
    holding: bool,
}

/// A rename an act holds until the data round that covers what it names ([`hold`]).
pub(crate) struct Held {
    /// The directory the file is renamed from (the root's temporary directory, for a replace).
    pub(crate) from_dir: OwnedFd,
    pub(crate) from: OsString,
    /// `from`'s path: a replace's temporary file, or a move's source.
    pub(crate) from_path: PathBuf,
    pub(crate) to_dir: OwnedFd,
    pub(crate) to: OsString,
    pub(crate) to_path: PathBuf,
    /// A replace's bytes and the mode kept, written again beside the target when the rename
    /// crosses a mount (`EXDEV`); `None` for a move of an existing file.
    pub(crate) written: Option<(Vec<u8>, Option<u32>)>,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Runs `work` as one act of `root`: its replaces' renames are held until a data round covered their
/// data, the syncs of names are noted, and made as one shared round when the outermost act ends,
/// before this returns. The act's own error wins over the
/// sync's; a failed sync is the act's error (what it wrote may not survive a crash of the machine).
pub(crate) fn act<T>(root: &Root, work: impl FnOnce() -> Result<T>) -> Result<T> {
    run(root, true, work)
}

/// Runs `work` as an act whose replaces sync their temporary file's data (`fdatasync`) before
/// renaming it at once, as [`act`] but with no held rename: for the acts whose code reads what it
/// just wrote by other means than the store's readers (a directory listing, an existence check),
/// which a held rename would hide (the bus's and the board's). Inside an [`act`] the outer act's
/// held renames are made first, in order. The names still wait for the shared round.
pub(crate) fn act_unheld<T>(root: &Root, work: impl FnOnce() -> Result<T>) -> Result<T> {
    settle()?;
    run(root, false, work)
}

fn run<T>(root: &Root, holding: bool, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let outer = PENDING.with(|p| std::mem::replace(&mut p.borrow_mut().holding, holding));
    let scope = Scope::enter(root);
    let out = work();
    // An act holding its renames inside one that does not: they are made before the outer act
    // goes on (it may list a directory they change).
    let settled = if holding && !outer { settle() } else { Ok(()) };
    let synced = scope.finish().and(settled);
    PENDING.with(|p| p.borrow_mut().holding = outer);
    let value = out?;
    synced.map(|()| value)
}

/// Whether the current thread's innermost act holds its replaces' renames until a data round
/// ([`hold`]); false outside an act.
pub(crate) fn holding() -> bool {
    PENDING.with(|p| {
        let p = p.borrow();
        p.depth > 0 && p.holding
    })
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

/// True when the current thread is inside an act: a durable replace then syncs no directory of its
/// own (the act's names round does), and either [`hold`]s its rename ([`holding`]) or syncs its
/// temporary file's data before the rename.
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
    // The outermost act's last barrier: its held renames, after their data round.
    let outermost = PENDING.with(|p| p.borrow().depth == 1);
    let settled = if outermost { settle() } else { Ok(()) };
    let due = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.depth = p.depth.saturating_sub(1);
        if p.depth > 0 {
            return None;
        }
        p.failed = None;
        let devices = std::mem::take(&mut p.devices);
        p.root.take().map(|root| (root, devices))
    });
    let committed = match due {
        Some((root, devices)) if !devices.is_empty() => commit(&root.0, root.1, &devices),
        _ => Ok(()),
    };
    settled.and(committed)
}

/// Holds `rename` until the current act's next barrier ([`settle`]); gives it back when the thread
/// is in no act (the caller renames now).
pub(crate) fn hold(rename: Held) -> Option<Held> {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        if p.depth == 0 {
            return Some(rename);
        }
        p.held.push(rename);
        None
    })
}

/// Where the current act's own read of `path` finds its bytes while the act holds renames: `None`
/// when nothing held touches `path` (read it), `Some(None)` when a held rename takes it away (it is
/// not there for the act), `Some(Some(file))` when a held rename brings `file` there (a replace's
/// temporary file, or a moved file where it still is).
pub(crate) fn held_source(path: &Path) -> Option<Option<PathBuf>> {
    PENDING.with(|p| {
        let p = p.borrow();
        if p.held.is_empty() {
            return None;
        }
        let asked = super::paths::absolute(path);
        let mut path = asked.clone();
        for h in p.held.iter().rev() {
            if h.to_path == path {
                if h.written.is_some() {
                    return Some(Some(h.from_path.clone()));
                }
                // A move: what was at its source before it.
                path = h.from_path.clone();
            } else if h.from_path == path {
                return Some(None);
            }
        }
        (path != asked).then_some(Some(path))
    })
}

/// True when the current act holds a rename to or from `path` (a path as the store's directories
/// name it).
pub(crate) fn holds(path: &Path) -> bool {
    PENDING.with(|p| {
        p.borrow()
            .held
            .iter()
            .any(|h| h.to_path == path || h.from_path == path)
    })
}

/// Makes the renames the current act holds now when one of them is in directory `dir` (a path as
/// the store's directories name it): for a listing of `dir`, which cannot see a held rename.
pub(crate) fn settle_in(dir: &Path) -> Result<()> {
    let touched = PENDING.with(|p| {
        let p = p.borrow();
        if p.held.is_empty() {
            return false;
        }
        let dir = super::paths::absolute(dir);
        p.held.iter().any(|h| {
            h.to_path.parent() == Some(dir.as_path()) || h.from_path.parent() == Some(dir.as_path())
        })
    });
    if touched { settle() } else { Ok(()) }
}

/// The current act's barrier: one shared round makes the held temporary files' data durable, then
/// their renames are made in order (their directories noted for the names round). Nothing to do
/// outside an act or with nothing held. After a failure every later barrier of the act refuses
/// with it, so nothing that comes after a lost rename (a journal line) is written.
pub(crate) fn settle() -> Result<()> {
    let taken = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        if let Some((path, why)) = &p.failed {
            return Err(Error::io(path, std::io::Error::other(why.clone())));
        }
        Ok((std::mem::take(&mut p.held), p.root.clone()))
    })?;
    let (held, Some((root_dir, timeout))) = taken else {
        return Ok(());
    };
    if held.is_empty() {
        return Ok(());
    }
    let done = settle_held(&root_dir, timeout, held);
    if let Err(e) = &done {
        PENDING.with(|p| p.borrow_mut().failed = Some((root_dir.clone(), e.to_string())));
    }
    done
}

fn settle_held(root_dir: &Path, timeout: Duration, held: Vec<Held>) -> Result<()> {
    let mut devices: Vec<(u64, OwnedFd)> = Vec::new();
    for h in held.iter().filter(|h| h.written.is_some()) {
        let Ok(st) = rustix::fs::fstat(&h.from_dir) else {
            continue;
        };
        #[allow(clippy::useless_conversion)]
        let dev = u64::from(st.st_dev);
        if !devices.iter().any(|(d, _)| *d == dev)
            && let Ok(fd) = h.from_dir.try_clone()
        {
            devices.push((dev, fd));
        }
    }
    let mut rest = held.into_iter();
    let data = commit(root_dir, timeout, &devices);
    let renamed = data.and_then(|()| {
        for h in rest.by_ref() {
            rename_held(&h)?;
        }
        Ok(())
    });
    // What a failure left held: its temporary files removed (a move's source stays where it is).
    for h in rest.filter(|h| h.written.is_some()) {
        let _ = rustix::fs::unlinkat(&h.from_dir, &h.from, rustix::fs::AtFlags::empty());
    }
    renamed
}

/// One held rename, made now; its directories noted for the names round.
fn rename_held(h: &Held) -> Result<()> {
    match rustix::fs::renameat(&h.from_dir, &h.from, &h.to_dir, &h.to) {
        Ok(()) => {}
        // Another mount of the same file system (a bind mount inside the root): written again
        // beside the target, its data synced before its rename.
        Err(rustix::io::Errno::XDEV) if h.written.is_some() => {
            let _ = rustix::fs::unlinkat(&h.from_dir, &h.from, rustix::fs::AtFlags::empty());
            let (bytes, mode) = h
                .written
                .as_ref()
                .map(|(b, m)| (b.as_slice(), *m))
                .unwrap_or_default();
            let dir = h.to_path.parent().unwrap_or(&h.to_path);
            super::safe::replace_beside(&h.to_dir, dir, &h.to, bytes, mode)?;
        }
        Err(e) => {
            if h.written.is_some() {
                let _ = rustix::fs::unlinkat(&h.from_dir, &h.from, rustix::fs::AtFlags::empty());
            }
            return Err(Error::io(&h.to_path, std::io::Error::from(e)));
        }
    }
    if !defer(h.to_dir.as_fd()) || (h.written.is_none() && !defer(h.from_dir.as_fd())) {
        return Err(Error::io(
            &h.to_path,
            std::io::Error::other("the act's file system could not be noted for its sync"),
        ));
    }
    Ok(())
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
