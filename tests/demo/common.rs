//! Helpers shared by the demo tests.

pub use crate::fixture_root::fixture_root as fixture;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The speed the tests run the demo at: 20 demo seconds take 4 seconds of wall time.
pub const TEST_SPEED: &str = "5";

/// The `pantheon` binary with a clean environment for the variables the demo reads.
pub fn pantheon() -> Command {
    let mut c = Command::cargo_bin("pantheon").expect("the pantheon binary is built");
    c.env_remove("PANTHEON_ROOT")
        .env_remove("PANTHEON_STALE_AFTER_SECS");
    c
}

/// Runs `pantheon demo --headless` for `secs` demo seconds on `root` and returns the summary.
pub fn headless(root: &Path, seed: u64, secs: u64, events: bool) -> Value {
    let mut c = pantheon();
    c.args(["demo", "--headless", "--speed", TEST_SPEED])
        .args(["--duration", &secs.to_string(), "--seed", &seed.to_string()])
        .arg("--root")
        .arg(root);
    if events {
        c.arg("--events");
    }
    let out = c.output().expect("pantheon demo runs");
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the summary is JSON")
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Parses every JSON file under `dir` (the tests only call it on protocol directories).
pub fn json_files_under(dir: &Path) -> Vec<(PathBuf, Value)> {
    files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| {
            let v = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            Some((p, v))
        })
        .collect()
}

/// Every envelope of a track's queue.
pub fn queue(root: &Path, track: &str) -> Vec<Value> {
    let path = root
        .join("conductor/tracks")
        .join(track)
        .join(".message-bus/queue.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Copies a directory tree (files keep their bytes; permissions are made writable).
pub fn copy_tree(from: &Path, to: &Path) {
    for f in files_under(from) {
        let rel = f.strip_prefix(from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(&dest, std::fs::read(&f).unwrap()).unwrap();
    }
}
