//! The test-only crash points every writer of the engine marks between two writes.

/// Test-only crash points: when `PANTHEON_TEST_CRASH_AT` names this point, the process kills itself
/// with SIGKILL there (used by the crash-repair tests to reach every point between two writes). The
/// shells mark theirs with it too (the approvals' file drop).
pub fn crash_point(name: &str) {
    if let Some(at) = std::env::var_os("PANTHEON_TEST_CRASH_AT")
        && at == name
    {
        // The renames the act holds are made first (module `commit`): the kill then leaves on disk
        // what the point names, as a kill during the act's settle leaves every prefix of them.
        let _ = super::commit::settle();
        // SAFETY: kill(2) on our own pid with a constant signal has no memory-safety preconditions.
        // The crate denies `unsafe_code`; this test hook is its one exception.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
