//! The console in a real terminal (tmux): it follows files changed by other processes, acks and
//! aborts through keys, and leaves the terminal as it found it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::support::*;

/// A private tmux server running the console in one window.
struct Tmux {
    socket: String,
    _log: tempfile::TempDir,
}

impl Tmux {
    fn start(root: &Path, extra: &str) -> Self {
        Self::start_with_env(root, "", extra)
    }

    /// Starts the console with `env` (`NAME=value …`) set for it.
    fn start_with_env(root: &Path, env: &str, extra: &str) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let socket = format!(
            "pantheon-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let log = tempfile::tempdir().unwrap();
        let bin: PathBuf = assert_cmd::cargo::cargo_bin("pantheon");
        let script = format!(
            "echo SHELL-BEFORE; {env} PANTHEON_LOG={} {} --root {} console {extra}; echo EXITED=$?; sleep 600",
            log.path().join("console.log").display(),
            bin.display(),
            root.display()
        );
        let ok = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "main",
                "-x",
                "160",
                "-y",
                "45",
                &script,
            ])
            .status()
            .expect("tmux is installed");
        assert!(ok.success());
        Self { socket, _log: log }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "main"])
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "main", k]);
        }
    }

    fn type_text(&self, s: &str) {
        self.tmux(&["send-keys", "-t", "main", "-l", s]);
    }

    /// Polls the screen until `pred` holds (tmux offers no change signal), with a deadline.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// Waits until `pred` holds for the file system, with a deadline.
fn wait_fs(what: &str, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn console_follows_other_processes_acks_and_aborts_by_keys_and_restores_the_terminal() {
    let root = engine_root();
    let r = root.path();
    let t = Tmux::start(r, "");
    t.wait("the console", |s| {
        s.contains("1 Workflows") && s.contains("wf_pay_1")
    });
    assert_eq!(
        t.tmux(&["display", "-p", "-t", "main", "#{alternate_on}"])
            .trim(),
        "1"
    );

    // Another process posts on the bus: the tail shows it.
    t.keys(&["3"]);
    t.wait("the bus pane", |s| s.contains("3 Bus · alpha"));
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "post",
            "TASK_COMPLETE",
            "--source",
            "worker-e2e",
            "--payload",
            r#"{"task_id":"7.7","commit_sha":"abc1234"}"#,
        ],
        None,
    );
    t.wait("the new message", |s| {
        s.contains("worker-e2e") && s.contains("task 7.7")
    });

    // Ack the first dispatch as accepted: a, Enter (accepted), Tab (to the Ack button), Enter.
    t.keys(&["2"]);
    t.wait("the inboxes", |s| s.contains("hof_20260614_aaa111"));
    t.keys(&["a"]);
    t.wait("the ack menu", |s| s.contains("Acknowledge as"));
    t.keys(&["Enter"]);
    t.wait("the confirmation", |s| s.contains("[ Cancel ]"));
    t.keys(&["Tab", "Enter"]);
    let archived = r.join("conductor/archive/hephaestus/hof_20260614_aaa111.json");
    wait_fs("the ack to archive the dispatch", || archived.exists());
    t.wait("the success flash", |s| s.contains("accepted"));

    // Abort the other workflow: 1, move to wf_pay_2, x, reason, Enter, Tab, Enter.
    t.keys(&["1", "g", "j"]);
    t.keys(&["x"]);
    t.wait("the reason prompt", |s| s.contains("Reason for aborting"));
    t.type_text("e2e abort");
    t.keys(&["Enter"]);
    t.wait("the abort confirmation", |s| s.contains("Abort wf_pay_2"));
    t.keys(&["Tab", "Enter"]);
    let manifest = r.join("conductor/state/wf_pay_2.aborted.json");
    wait_fs("the abort manifest", || manifest.exists());
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.join("conductor/state/wf_pay_2.json")).unwrap())
            .unwrap();
    assert_eq!(st["status"], "aborted");
    assert_eq!(st["failure_reason"], "e2e abort");
    t.wait("the aborted status on screen", |s| s.contains("✗ aborted"));

    // Quit: the alternate screen is left and the shell's earlier output is back.
    t.keys(&["q"]);
    let s = t.wait("the console to exit", |s| s.contains("EXITED=0"));
    assert!(s.contains("SHELL-BEFORE"), "{s}");
    assert_eq!(
        t.tmux(&["display", "-p", "-t", "main", "#{alternate_on}"])
            .trim(),
        "0"
    );
}

#[test]
fn console_names_an_overridden_stale_threshold_survives_resizes_and_quits_cleanly() {
    let root = fixture_root();
    let t = Tmux::start_with_env(root.path(), "PANTHEON_STALE_AFTER_SECS=6", "--read-only");
    t.wait("the console", |s| {
        s.contains("READ-ONLY") && s.contains("wf_deploy_42")
    });
    // An overridden staleness threshold is said where staleness is shown.
    t.keys(&["5"]);
    t.wait("the workers pane naming the threshold", |s| {
        s.contains("5 Workers (") && s.contains("stale after 6s")
    });
    t.keys(&["1"]);
    t.tmux(&["resize-window", "-t", "main", "-x", "40", "-y", "10"]);
    t.wait("the too-small message", |s| {
        s.contains("Terminal too small")
    });
    t.tmux(&["resize-window", "-t", "main", "-x", "120", "-y", "30"]);
    t.wait("the console again", |s| s.contains("1 Workflows"));
    // A malformed file written mid-session is reported, never fatal.
    std::fs::write(
        root.path().join("conductor/state/wf_broken_9.json"),
        "{\"workflow_id\": ",
    )
    .unwrap();
    t.wait("the warning count", |s| s.contains("⚠ 4"));
    // Read-only: the abort key is refused with a message.
    t.keys(&["x"]);
    t.wait("the read-only refusal", |s| s.contains("read-only console"));
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}
