//! The `--on-attention` hook, bounded: one run at a time, a time limit, output kept up to a stated
//! size, and what happened reported back (shown in `:messages`).
//!
//! A hook that hangs or floods must not take the console with it: while a run is under way, new
//! items wait and go together to the next run (at most [`MAX_WAITING_ITEMS`]; beyond that the
//! oldest are dropped and the report says how many); a run longer than [`HOOK_TIMEOUT`] is killed
//! with its whole process group (`sh -c` and whatever it started); of its stdout and stderr the
//! first [`OUTPUT_KEPT`] bytes each are kept for the report and the rest is read and thrown away,
//! so the hook never blocks on a full pipe and the console's memory does not grow with it.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::attention::Item;

/// The longest a hook run may take before it is killed.
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of each of stdout and stderr kept for the report.
pub(crate) const OUTPUT_KEPT: usize = 4096;

/// Items that may wait for the next run while one is under way.
pub(crate) const MAX_WAITING_ITEMS: usize = 1000;

/// Fields added to an item's line of the hook's stdin (a held item's approval links): called once
/// per item per run, from the hook's thread.
pub(crate) type Enrich =
    Arc<dyn Fn(&Item) -> Option<serde_json::Map<String, serde_json::Value>> + Send + Sync>;

/// What one run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookReport {
    /// Items the run was given.
    pub items: usize,
    /// Items dropped while waiting (more than [`MAX_WAITING_ITEMS`] waited).
    pub dropped: usize,
    /// How long it ran.
    pub took: Duration,
    pub outcome: HookOutcome,
    /// The first [`OUTPUT_KEPT`] bytes of stderr (lossy UTF-8, control characters removed).
    pub stderr: String,
    /// How many bytes it wrote to stderr and stdout in all.
    pub stderr_bytes: u64,
    pub stdout_bytes: u64,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HookOutcome {
    /// It exited with this status (0: success).
    Exited(i32),
    /// A signal ended it.
    Signalled(i32),
    /// It ran past [`HOOK_TIMEOUT`] and was killed.
    TimedOut,
    /// It could not be started.
    NotStarted(String),
}

impl HookReport {
    /// True when the run succeeded.
    pub(crate) fn ok(&self) -> bool {
        self.outcome == HookOutcome::Exited(0)
    }

    /// One line for `:messages` and the flash.
    pub(crate) fn line(&self) -> String {
        let what = match &self.outcome {
            HookOutcome::Exited(0) => "ran".to_owned(),
            HookOutcome::Exited(c) => format!("failed (exit {c})"),
            HookOutcome::Signalled(s) => format!("was ended by signal {s}"),
            HookOutcome::TimedOut => {
                format!("timed out after {}s and was killed", HOOK_TIMEOUT.as_secs())
            }
            HookOutcome::NotStarted(e) => format!("could not start: {e}"),
        };
        let mut out = format!(
            "--on-attention {what} ({} item(s), {:.1}s",
            self.items,
            self.took.as_secs_f64()
        );
        if self.dropped > 0 {
            out.push_str(&format!(
                ", {} older item(s) dropped while it was busy",
                self.dropped
            ));
        }
        out.push(')');
        if self.stderr_bytes > 0 {
            let cut = if self.stderr_bytes > OUTPUT_KEPT as u64 {
                format!(" (first {OUTPUT_KEPT} of {} bytes)", self.stderr_bytes)
            } else {
                String::new()
            };
            out.push_str(&format!(": stderr{cut}: {}", self.stderr.trim()));
        }
        out
    }
}

#[derive(Default)]
struct Waiting {
    items: Vec<Item>,
    dropped: usize,
    closed: bool,
}

/// Runs the hook in one background thread, one run at a time.
pub(crate) struct HookRunner {
    shared: Arc<(Mutex<Waiting>, Condvar)>,
    /// The process group of the run under way (0: none), killed when the console quits.
    running: Arc<std::sync::atomic::AtomicI32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HookRunner {
    /// A runner of `cmd` (through `sh -c`); `report` is called after every run, from its thread.
    #[cfg(test)]
    pub(crate) fn start(
        cmd: String,
        timeout: Duration,
        report: impl Fn(HookReport) + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::start_enriched(cmd, timeout, None, report)
    }

    /// [`Self::start`], each item's line given what `enrich` adds.
    pub(crate) fn start_enriched(
        cmd: String,
        timeout: Duration,
        enrich: Option<Enrich>,
        report: impl Fn(HookReport) + Send + 'static,
    ) -> std::io::Result<Self> {
        let shared: Arc<(Mutex<Waiting>, Condvar)> = Arc::default();
        let theirs = shared.clone();
        let running: Arc<std::sync::atomic::AtomicI32> = Arc::default();
        let group = running.clone();
        let thread = std::thread::Builder::new()
            .name("pantheon-hook".into())
            .spawn(move || {
                loop {
                    let (batch, dropped) = {
                        let (lock, cv) = &*theirs;
                        let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
                        while w.items.is_empty() && !w.closed {
                            w = cv.wait(w).unwrap_or_else(|e| e.into_inner());
                        }
                        if w.items.is_empty() {
                            return;
                        }
                        (std::mem::take(&mut w.items), std::mem::take(&mut w.dropped))
                    };
                    let mut r = run_in(&cmd, &batch, timeout, &group, enrich.as_ref());
                    r.dropped = dropped;
                    report(r);
                }
            })?;
        Ok(Self {
            shared,
            running,
            thread: Some(thread),
        })
    }

    /// Hands a batch to the next run (at once when none is under way).
    pub(crate) fn submit(&self, batch: Vec<Item>) {
        let (lock, cv) = &*self.shared;
        let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
        w.items.extend(batch);
        if w.items.len() > MAX_WAITING_ITEMS {
            let extra = w.items.len() - MAX_WAITING_ITEMS;
            w.items.drain(..extra);
            w.dropped += extra;
        }
        cv.notify_one();
    }
}

impl Drop for HookRunner {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        cv.notify_one();
        // A run under way goes with the console: no hook outlives it.
        let pgid = self.running.load(std::sync::atomic::Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill has no memory effects; a negative pid names the hook's process group.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        // A run under way ends within its time limit; the console does not wait for it on quit.
        drop(self.thread.take());
    }
}

/// Reads `r` to its end, keeping the first `keep` bytes; returns them and the total.
fn drain(mut r: impl Read, keep: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total = total.saturating_add(n as u64);
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

/// One run of `cmd` with `batch` on its stdin, bounded by `timeout`.
#[cfg(test)]
pub(crate) fn run_once(cmd: &str, batch: &[Item], timeout: Duration) -> HookReport {
    run_in(
        cmd,
        batch,
        timeout,
        &std::sync::atomic::AtomicI32::new(0),
        None,
    )
}

/// [`run_once`], publishing the run's process group in `running` while it runs.
fn run_in(
    cmd: &str,
    batch: &[Item],
    timeout: Duration,
    running: &std::sync::atomic::AtomicI32,
    enrich: Option<&Enrich>,
) -> HookReport {
    let started = Instant::now();
    let mut report = HookReport {
        items: batch.len(),
        dropped: 0,
        took: Duration::ZERO,
        outcome: HookOutcome::Exited(0),
        stderr: String::new(),
        stderr_bytes: 0,
        stdout_bytes: 0,
    };
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a timeout kills whatever the shell started too.
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            report.outcome = HookOutcome::NotStarted(e.to_string());
            return report;
        }
    };
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Vec<u8>, u64)>();
    for (is_err, pipe) in [
        (
            false,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            true,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        if let Some(pipe) = pipe {
            let tx = tx.clone();
            let _ = std::thread::Builder::new()
                .name("pantheon-hook-output".into())
                .spawn(move || {
                    let (kept, total) = drain(pipe, OUTPUT_KEPT);
                    let _ = tx.send((is_err, kept, total));
                });
        }
    }
    drop(tx);
    if let Some(mut stdin) = child.stdin.take() {
        let input = super::notify::hook_input_with(batch, enrich);
        let _ = std::thread::Builder::new()
            .name("pantheon-hook-input".into())
            .spawn(move || {
                // A hook that does not read its stdin gets EPIPE or is killed at the timeout.
                let _ = stdin.write_all(input.as_bytes());
            });
    }
    let pgid = child.id() as i32;
    running.store(pgid, std::sync::atomic::Ordering::SeqCst);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() >= timeout => {
                // SAFETY: kill has no memory effects; a negative pid names the process group the
                // hook was started in (its own, see `process_group(0)`).
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                let _ = child.wait();
                report.outcome = HookOutcome::TimedOut;
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                report.outcome = HookOutcome::NotStarted(e.to_string());
                break None;
            }
        }
    };
    running.store(0, std::sync::atomic::Ordering::SeqCst);
    if let Some(s) = status {
        use std::os::unix::process::ExitStatusExt;
        report.outcome = match (s.code(), s.signal()) {
            (Some(c), _) => HookOutcome::Exited(c),
            (None, Some(sig)) => HookOutcome::Signalled(sig),
            (None, None) => HookOutcome::Exited(-1),
        };
    }
    // The pipes close when the hook's processes are gone; one that a background process of the
    // hook keeps open is not waited for long.
    let until = Instant::now() + Duration::from_secs(1);
    while let Ok((is_err, kept, total)) =
        rx.recv_timeout(until.saturating_duration_since(Instant::now()))
    {
        if is_err {
            report.stderr = super::notify::clean(&String::from_utf8_lossy(&kept), OUTPUT_KEPT);
            report.stderr_bytes = total;
        } else {
            report.stdout_bytes = total;
        }
    }
    report.took = started.elapsed();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str) -> Item {
        Item::held(key, format!("held {key}"))
    }

    #[test]
    fn a_hanging_hook_is_killed_at_its_time_limit_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let r = run_once(&cmd, &[item("a")], Duration::from_millis(300));
        assert_eq!(r.outcome, HookOutcome::TimedOut, "{r:?}");
        assert!(r.took < Duration::from_secs(3), "{r:?}");
        assert!(r.line().contains("timed out"), "{}", r.line());
        // The background `sleep` of the hook went with it (its process group was killed).
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Gone, or a zombie waiting for a reaper that is not ours (the shell that started it died).
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        });
        assert!(!alive, "the hook's child {pid} outlived the timeout");
    }

    #[test]
    fn a_flooding_hook_costs_at_most_the_kept_output_and_says_how_much_it_wrote() {
        // 8 MiB to stderr: the report keeps 4 KiB and counts the rest.
        let r = run_once(
            "head -c 8388608 /dev/zero | tr '\\0' x >&2; exit 3",
            &[item("a")],
            Duration::from_secs(20),
        );
        assert_eq!(r.outcome, HookOutcome::Exited(3), "{r:?}");
        assert_eq!(r.stderr_bytes, 8 * 1024 * 1024);
        assert_eq!(r.stderr.len(), OUTPUT_KEPT);
        let line = r.line();
        assert!(line.contains("failed (exit 3)"), "{line}");
        assert!(line.contains("first 4096 of 8388608 bytes"), "{line}");
    }

    #[test]
    fn one_run_at_a_time_and_items_that_wait_go_together() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("runs");
        let cmd = format!(
            "cat >> {}; echo run >> {}.n; sleep 0.3",
            log.display(),
            log.display()
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let runner = HookRunner::start(cmd, Duration::from_secs(5), move |r| {
            let _ = tx.send(r);
        })
        .unwrap();
        runner.submit(vec![item("a")]);
        // The first run has read its item (it then sleeps).
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&log).map_or(0, |s| s.lines().count()) < 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the first run started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // While the first run sleeps, three batches arrive: they go to one second run.
        runner.submit(vec![item("b")]);
        runner.submit(vec![item("c")]);
        runner.submit(vec![item("d")]);
        let first = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let second = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((first.items, second.items), (1, 3));
        assert!(first.ok() && second.ok());
        let runs = std::fs::read_to_string(format!("{}.n", log.display())).unwrap();
        assert_eq!(runs.lines().count(), 2);
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 4);
        drop(runner);
    }
}
