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
    pub(crate) fn exclusive_within(root: &Root, path: &Path, timeout: Duration) -> Result<Self> {
        let file = super::atomic::open_append(root, path)?;
        lock_file(&file, path, timeout)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The locked file (for writers that lock the file they append to).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
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
}
