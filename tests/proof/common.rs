//! Shared helpers: temp roots with a sentinel directory beside them, running the binary, checking
//! files, a raw MCP client.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// The `pantheon` binary under test.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pantheon"))
}

/// The bad-input corpus directory.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// A temp directory holding `root/` (the pantheon root), `home/` (HOME) and `outside/` (a sentinel
/// directory that nothing may ever touch, the target of every planted symlink).
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub outside: PathBuf,
}

impl Env {
    /// An initialised root.
    pub fn new() -> Self {
        let env = Self::bare();
        env.ok(&["init"]);
        env
    }

    /// An empty root (not initialised).
    pub fn bare() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let home = dir.path().join("home");
        let outside = dir.path().join("outside");
        for d in [&root, &home, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("keep.txt"), "sentinel\n").unwrap();
        std::fs::create_dir_all(outside.join("inbox")).unwrap();
        std::fs::write(outside.join("inbox/keep.json"), "{}\n").unwrap();
        std::fs::write(outside.join("q.jsonl"), "").unwrap();
        Self {
            dir,
            root,
            home,
            outside,
        }
    }

    /// A command for the binary on this root, with a clean environment.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(bin());
        c.arg("--root").arg(&self.root).args(args);
        for v in [
            "PANTHEON_ROOT",
            "CONDUCTOR_BASE_DIR",
            "CONDUCTOR_HANDOFFS_DIR",
            "PANTHEON_CLEANUP_ROOTS",
            "PANTHEON_TEST_CRASH_AT",
        ] {
            c.env_remove(v);
        }
        c.env("HOME", &self.home)
            .env("PANTHEON_LOCK_TIMEOUT_MS", "5000");
        c
    }

    /// Runs with `stdin` bytes; asserts the process did not panic or die by a signal.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S], stdin: Option<&[u8]>) -> Output {
        let mut c = self.command(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        let bytes = stdin.map(<[u8]>::to_vec).unwrap_or_default();
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(&bytes);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_sane_exit(&out, &format!("{:?}", debug_args(args)));
        out
    }

    /// Runs and expects success; returns the JSON printed.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> Value {
        let out = self.run(args, None);
        assert!(
            out.status.success(),
            "pantheon {:?} failed: {}",
            debug_args(args),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    /// Everything outside the root that a run could touch: the sentinel directory and HOME, and the
    /// names beside the root.
    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = tree_snapshot(&self.outside);
        out.extend(tree_snapshot(&self.home));
        for e in std::fs::read_dir(self.dir.path()).unwrap() {
            out.insert(e.unwrap().path(), "<entry>".into());
        }
        out
    }
}

fn debug_args<S: AsRef<OsStr>>(args: &[S]) -> Vec<String> {
    args.iter()
        .map(|a| {
            let s = a.as_ref().to_string_lossy();
            if s.len() > 80 {
                let head: String = s.chars().take(80).collect();
                format!("{head}…({} bytes)", s.len())
            } else {
                s.into_owned()
            }
        })
        .collect()
}

/// A process that exits by itself either succeeded (0), refused with `error: …` (1) or rejected its
/// usage (2); never a panic (101), a signal or a backtrace.
pub fn assert_sane_exit(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{what}: the process panicked: {stderr}"
    );
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{what}: exit {:?}; stderr: {stderr}",
        out.status
    );
    if code == Some(1) {
        assert!(
            stderr.starts_with("error: ") && stderr.trim().len() > "error: ".len() + 5,
            "{what}: a refusal must say what went wrong: {stderr:?}"
        );
    }
}

/// Every entry under `dir` with its kind, size, mtime and (for small files) content.
pub fn tree_snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    walk(dir, &mut |p| {
        let meta = std::fs::symlink_metadata(p).unwrap();
        let mtime = meta
            .modified()
            .unwrap_or(SystemTime::UNIX_EPOCH)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let content = if meta.is_file() && meta.len() < 1 << 16 {
            String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned()
        } else {
            String::new()
        };
        out.insert(
            p.to_path_buf(),
            format!("{:?} {} {mtime} {content}", meta.file_type(), meta.len()),
        );
    });
    out
}

/// Visits every entry under `dir` (symbolic links are reported, never followed).
pub fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        f(&p);
        if p.is_dir() && !p.is_symlink() {
            walk(&p, f);
        }
    }
}

/// A tiny deterministic generator (xorshift), seeded from `PROOF_SEED` or the clock; the seed is
/// printed so a failing run can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn from_env(what: &str) -> Self {
        let seed = std::env::var("PROOF_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("{what}: PROOF_SEED={seed}");
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `pantheon mcp` on a root, spoken to with newline-delimited JSON-RPC, no SDK in between.
pub struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    next_id: u64,
}

impl Mcp {
    pub fn start(env: &Env) -> Self {
        let mut child = env
            .command(&["mcp"])
            .env("PANTHEON_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pantheon mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let err_pipe = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut m = Self {
            child,
            stdin,
            lines,
            stderr,
            next_id: 1,
        };
        let id = m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "proof-corpus", "version": "0"}}),
        );
        let init = m.response(id);
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        m
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        id
    }

    /// The response to request `id` (notifications skipped); the server must still be alive.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| {
                    panic!(
                        "the MCP server stopped answering; stderr: {}",
                        self.stderr.lock().unwrap()
                    )
                });
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got {line:?}: {e}"));
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    /// Calls a tool; returns `(is_error, text)` for a tool result, or `(true, message)` for a
    /// JSON-RPC error. Either way the server must answer and must not have panicked.
    pub fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let id = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let v = self.response(id);
        self.assert_no_panic(tool);
        if let Some(err) = v.get("error") {
            let msg = err["message"].as_str().unwrap_or_default().to_owned();
            assert!(
                !msg.is_empty(),
                "{tool}: a JSON-RPC error without a message: {v}"
            );
            return (true, msg);
        }
        let r = &v["result"];
        let is_error = r["isError"].as_bool().unwrap_or(false);
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if is_error {
            assert!(
                !text.trim().is_empty(),
                "{tool}: an error result says nothing: {v}"
            );
        }
        (is_error, text)
    }

    pub fn assert_no_panic(&self, what: &str) {
        let s = self.stderr.lock().unwrap();
        assert!(
            !s.contains("panicked"),
            "{what}: the MCP server panicked: {s}"
        );
    }

    /// Closes stdin and expects a clean exit.
    pub fn close(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        self.assert_no_panic("shutdown");
        assert!(status.success(), "the MCP server exited with {status}");
    }
}
