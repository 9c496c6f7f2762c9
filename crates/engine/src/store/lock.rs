//! BSD `flock` on dedicated lock files, the same lock Python's `fcntl.flock` takes, waited for with a
//! bounded timeout.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Root;
use crate::error::{Error, Result};

/// An exclusive `flock` held until dropped. The lock file itself is never truncated, renamed or deleted.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

impl FileLock {
    /// Takes an exclusive lock on `path` (created if missing, never through a link, see
    /// `super::safe`), waiting up to the root's lock timeout ([`super::Settings::lock_timeout`]).
    pub fn exclusive(root: &Root, path: &Path) -> Result<Self> {
        Self::exclusive_within(root, path, root.settings.lock_timeout)
    }

    /// Takes an exclusive lock on `path`, waiting at most `timeout`.
    ///
    /// The lock file is opened for reading only (`flock` does not care how a file is open): closing
    /// a file that was open for writing is a change to file watchers (`IN_CLOSE_WRITE`), and a
    /// watched root's writers would raise one for every lock they take. Where an exclusive lock
    /// needs a file open for writing (`flock` emulated by byte-range locks, as on NFS: `EBADF`), it
    /// is opened again for writing.
    pub(crate) fn exclusive_within(root: &Root, path: &Path, timeout: Duration) -> Result<Self> {
        let file = super::atomic::open_lock_file(root, path, false)?;
        let file = match lock_file(&file, path, timeout) {
            Err(Error::Io { cause, .. }) if cause.raw_os_error() == Some(libc::EBADF) => {
                let file = super::atomic::open_lock_file(root, path, true)?;
                lock_file(&file, path, timeout)?;
                file
            }
            other => other.map(|()| file)?,
        };
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // The renames the current act holds are made before the lock is released: the next
        // holder reads what this one wrote (module `commit`). A failure is the act's: its end
        // reports it, and its later barriers refuse.
        let _ = super::commit::settle();
        let _ = self.file.unlock();
    }
}

/// How many times a busy lock is retried after only yielding the CPU before the waiter starts to sleep.
const YIELDS_BEFORE_SLEEP: u32 = 3;

/// Locks an already open file exclusively, waiting at most `timeout`.
///
/// The wait is `try_lock` in a loop (a blocking `flock` cannot be bounded without signals): a few
/// retries that only yield the CPU, which is enough when the holder is another process's one-line
/// append and gives a descheduled holder the core it needs, then sleeps doubling from 50 us to 5 ms.
pub(crate) fn lock_file(file: &File, path: &Path, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    let mut tries = 0u32;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                if start.elapsed() >= timeout {
                    return Err(Error::LockTimeout {
                        path: path.to_path_buf(),
                        waited: timeout,
                    });
                }
                tries += 1;
                if tries <= YIELDS_BEFORE_SLEEP {
                    std::thread::yield_now();
                    continue;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_times_out_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let p = dir.path().join(".lock");
        let _held = FileLock::exclusive(&root, &p).unwrap();
        let err = FileLock::exclusive_within(&root, &p, Duration::from_millis(30)).unwrap_err();
        assert!(matches!(err, Error::LockTimeout { .. }));
        assert!(err.to_string().contains(".lock"), "{err}");
    }

    #[test]
    fn lock_is_free_again_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let p = dir.path().join(".lock");
        drop(FileLock::exclusive(&root, &p).unwrap());
        FileLock::exclusive_within(&root, &p, Duration::from_millis(30)).unwrap();
        assert!(p.exists());
    }

    #[test]
    fn taking_a_lock_is_no_change_to_a_watcher() {
        // A watched root's writers take a lock for every act: were the lock file open for writing,
        // its close would be an `IN_CLOSE_WRITE` to every watcher of the directory.
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let p = dir.path().join(".lock");
        drop(FileLock::exclusive(&root, &p).unwrap());
        let seen = crate::store::watched_events(dir.path(), || {
            for _ in 0..3 {
                drop(FileLock::exclusive(&root, &p).unwrap());
            }
        });
        let changes: Vec<_> = seen
            .iter()
            .filter(|(mask, _)| !mask.contains("OPEN") && !mask.contains("CLOSE_NOWRITE"))
            .collect();
        assert!(changes.is_empty(), "{changes:?}");
        assert!(
            seen.iter().any(|(mask, _)| mask.contains("OPEN")),
            "{seen:?}"
        );
    }
}
