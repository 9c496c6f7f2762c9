//! Shared helpers: a temp root, the binary, JSON results, the Python driver.

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};

use assert_cmd::Command;
use serde_json::Value;

/// A temp pantheon root with one initialised track.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub track: String,
}

impl Env {
    pub fn new() -> Self {
        let env = Self::empty();
        env.ok(&["init"]);
        env
    }

    /// A root with no bus yet.
    pub fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            track: "t1".into(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn bus_dir(&self) -> PathBuf {
        self.root()
            .join("conductor/tracks")
            .join(&self.track)
            .join(".message-bus")
    }

    /// `pantheon --root R` ready for more arguments.
    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("pantheon").unwrap();
        c.arg("--root").arg(self.root()).env_remove("PANTHEON_ROOT");
        c
    }

    pub(crate) fn run(&self, area: &str, args: &[&str]) -> Output {
        self.cmd()
            .arg(area)
            .args(["--track", &self.track])
            .args(args)
            .output()
            .unwrap()
    }

    /// `pantheon bus --track T ARGS`, which must succeed; its JSON.
    pub fn ok(&self, args: &[&str]) -> Value {
        json_of(self.run("bus", args), args)
    }

    /// `pantheon board --track T ARGS`, which must succeed; its JSON.
    pub fn board(&self, args: &[&str]) -> Value {
        json_of(self.run("board", args), args)
    }

    /// `pantheon bus … ARGS`, which must be refused (exit 1); its stderr.
    pub fn refused(&self, args: &[&str]) -> String {
        refused_of(self.run("bus", args), args)
    }

    /// `pantheon board … ARGS`, which must be refused (exit 1); its stderr.
    pub fn board_refused(&self, args: &[&str]) -> String {
        refused_of(self.run("board", args), args)
    }
}

fn json_of(out: Output, args: &[&str]) -> Value {
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn refused_of(out: Output, args: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} should be refused; stderr: {err}"
    );
    assert!(err.starts_with("error: "), "{err}");
    err
}

pub fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bus/python/driver.py")
}

/// Runs `python3 driver.py ARGS`.
pub fn python(args: &[&str]) -> Output {
    StdCommand::new("python3")
        .arg(driver())
        .args(args)
        .output()
        .expect("python3 must be installed")
}

/// Runs the driver and parses its JSON output (it must succeed).
pub fn python_json(args: &[&str]) -> Value {
    let out = python(args);
    assert!(
        out.status.success(),
        "python {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The path of the built binary.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("pantheon")
}

/// Every line of a JSONL file must be a JSON object; returns them.
pub fn strict_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} does not end in a newline",
        path.display()
    );
    text.lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}"));
            assert!(v.is_object());
            v
        })
        .collect()
}

/// The seed's own `read_messages` (`json.loads` on every line, no tolerance) must read the queue of
/// `bus` whole: as many messages as it has lines. Returns the count.
pub fn seed_reads_queue(bus: &Path) -> usize {
    let lines = strict_lines(&bus.join("queue.jsonl")).len();
    let got = python_json(&["read-messages", bus.to_str().unwrap()])["messages"]
        .as_u64()
        .unwrap() as usize;
    assert_eq!(
        got, lines,
        "the seed's read_messages read {got} of {lines} lines"
    );
    got
}

/// Held by every test that loads the machine on purpose (CPU burners), so two of them never run at once
/// and each measures what it means to.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}
