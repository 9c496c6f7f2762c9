//! A private tmux server running one command in one window, for the end-to-end tests of the console
//! and the demo (included by both test crates with `#[path]`).

// Each test crate uses part of it.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: String,
    /// How long `wait` polls before failing.
    pub deadline: Duration,
    /// Pause after each key (the demo's screen changes continuously; keys need time to land).
    pub key_pause: Duration,
}

impl Tmux {
    /// Starts `script` (run by tmux's shell) in a 160x45 window on a fresh tmux server.
    pub fn start(label: &str, script: &str) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let socket = format!(
            "pantheon-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let ok = Command::new("tmux")
            .args(["-L", &socket, "new-session", "-d", "-s", "main"])
            .args(["-x", "160", "-y", "45", script])
            .status()
            .expect("tmux is installed");
        assert!(ok.success(), "tmux could not start {script}");
        Self {
            socket,
            // Generous: a wait that passes returns as soon as the screen shows it, and on a loaded
            // machine (CI beside a build) 10 s was once not enough for a replay to play through.
            deadline: Duration::from_secs(30),
            key_pause: Duration::ZERO,
        }
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "main"])
    }

    /// The window's scrollback and screen, oldest line first.
    pub fn history(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "main", "-S", "-2000"])
    }

    /// True while the program in the window is on the alternate screen.
    pub fn alternate_on(&self) -> bool {
        self.tmux(&["display", "-p", "-t", "main", "#{alternate_on}"])
            .trim()
            == "1"
    }

    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "main", k]);
            std::thread::sleep(self.key_pause);
        }
    }

    pub fn type_text(&self, s: &str) {
        self.tmux(&["send-keys", "-t", "main", "-l", s]);
    }

    /// Polls the screen until `pred` holds (tmux offers no change signal), up to `deadline`.
    pub fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + self.deadline;
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

/// Waits until `pred` holds for the file system, up to `within`.
pub fn wait_fs(what: &str, within: Duration, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}
