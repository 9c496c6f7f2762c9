//! Durable submit + ack cycles, one `pantheon mcp` per god as hosts run them, on the disk.
//!
//! Each god is its own `pantheon mcp` process on one root (a directory under `DURABLE_BENCH_DIR`,
//! default `target/durable-bench`, on the disk: never a memory file system), driven over stdio with
//! raw JSON-RPC lines by one thread of this process. One cycle is a `submit_handoff` of a new
//! workflow addressed to the god, then its `ack_handoff` `completed`; each returns only once what it
//! wrote is durable. For 1, 4 and 16 gods at once: cycles a second over `DURABLE_BENCH_SECS` (default
//! 5) seconds, then the syncs per cycle counted over god 0's own process with
//! `strace -f -c` (the other gods untraced, running as before).
//!
//! `DURABLE_BASELINE_BIN` names a second `pantheon` binary (e.g. the build before the group commit)
//! measured the same way in the same run, on alternate rounds.
//!
//! Run: `cargo bench --bench durable`. Prints one line per figure and, with `DURABLE_BENCH_JSON`, writes
//! them as JSON for scripts/bench-report.sh.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct God {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl God {
    fn start(bin: &Path, root: &Path, strace_log: Option<&Path>) -> Self {
        let mut cmd = match strace_log {
            Some(log) => {
                let mut c = Command::new("strace");
                c.args([
                    "-f",
                    "-c",
                    "-e",
                    "trace=fsync,fdatasync,syncfs,sync,sync_file_range",
                ])
                .arg("-o")
                .arg(log)
                .arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = cmd
            .arg("--root")
            .arg(root)
            .arg("mcp")
            .env("PANTHEON_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pantheon mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut god = Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        god.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        );
        let r = god.recv();
        assert!(r["result"].is_object(), "{r}");
        god.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        god
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the server answers");
        serde_json::from_str(&line).expect("JSON-RPC")
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
        let r = self.recv();
        assert_eq!(r["id"], json!(id), "{r}");
        assert_eq!(r["result"]["isError"], json!(false), "{tool}: {r}");
        r
    }

    /// One submit + ack; `n` makes the ids unique across gods and runs.
    fn cycle(&mut self, god: usize, n: u64) {
        let k = (god as u64) << 24 | n;
        let hof = format!("hof_20260614_{k:08x}");
        self.call(
            "submit_handoff",
            json!({"handoff": {
                "handoff_id": hof, "workflow_id": format!("wf_durable_{k:x}"),
                "from_god": "hermes", "to_god": format!("god{god}"), "step": "triage",
                "context": {"summary": "bench", "decisions": ["d"], "artifacts": []}}}),
        );
        self.call(
            "ack_handoff",
            json!({"ack": {"ack_id": format!("ack_20260614_{k:08x}"), "handoff_id": hof,
                           "status": "completed", "message": "done"}}),
        );
    }

    fn close(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// Figures of one run: cycles a second of all gods, and syncs per cycle of god 0 when traced.
struct Run {
    cycles_per_s: f64,
    syncs_per_cycle: Option<f64>,
}

fn run(bin: &Path, root: &Path, gods: usize, secs: f64, base: u64, traced: bool) -> Run {
    let log = root.with_extension("strace");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Arc::new(std::sync::Barrier::new(gods + 1));
    let god0_cycles = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..gods)
        .map(|g| {
            let (bin, root, log) = (bin.to_path_buf(), root.to_path_buf(), log.clone());
            let (stop, done, started, god0) = (
                stop.clone(),
                done.clone(),
                started.clone(),
                god0_cycles.clone(),
            );
            std::thread::spawn(move || {
                let trace = (traced && g == 0).then_some(log.as_path());
                let mut god = God::start(&bin, &root, trace);
                started.wait();
                let mut n = base;
                while !stop.load(Ordering::Relaxed) {
                    god.cycle(g, n);
                    n += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                    if g == 0 {
                        god0.fetch_add(1, Ordering::Relaxed);
                    }
                }
                god.close();
            })
        })
        .collect();
    started.wait();
    let t = Instant::now();
    let at_start = done.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs_f64(secs));
    let cycles = done.load(Ordering::Relaxed) - at_start;
    let took = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let syncs_per_cycle = traced.then(|| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let syncs = strace_calls(&text);
        syncs as f64 / god0_cycles.load(Ordering::Relaxed).max(1) as f64
    });
    Run {
        cycles_per_s: cycles as f64 / took,
        syncs_per_cycle,
    }
}

/// The calls `strace -c` counted (its `total` line's `calls` column).
fn strace_calls(text: &str) -> u64 {
    text.lines()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors], total
            cols.get(3).and_then(|c| c.parse().ok())
        })
        .unwrap_or(0)
}

fn fresh_root(parent: &Path, name: &str, bin: &Path) -> PathBuf {
    let root = parent.join(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let init = Command::new(bin)
        .arg("--root")
        .arg(&root)
        .arg("init")
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    // A root in use, not one just made: the engine parses a definition, a rule or the schema again
    // at every act while the file changed within its clock's granularity (a rewrite of the same size
    // could keep its identity; `store::yaml::FileIdentity::racy`), which on a fresh root is the
    // first one to two seconds. Measured past that, as every root an operator runs is.
    std::thread::sleep(Duration::from_millis(2100));
    root
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs: f64 = std::env::var("DURABLE_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let parent = std::env::var_os("DURABLE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/durable-bench"));
    std::fs::create_dir_all(&parent).unwrap();
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_pantheon"));
    let baseline = std::env::var_os("DURABLE_BASELINE_BIN").map(PathBuf::from);
    let mut arms = vec![("ours", ours)];
    if let Some(b) = baseline {
        arms.push(("baseline", b));
    }
    let counts: Vec<usize> = std::env::var("DURABLE_BENCH_GODS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 4, 16]);
    let mut figures = Vec::new();
    let mut base = 0u64;
    for &gods in &counts {
        for (arm, bin) in &arms {
            let root = fresh_root(&parent, &format!("{arm}-{gods}"), bin);
            let r = run(bin, &root, gods, secs, base, false);
            base += 1 << 20;
            let traced = run(bin, &root, gods, secs.min(3.0), base, true);
            base += 1 << 20;
            let spc = traced.syncs_per_cycle.unwrap_or(f64::NAN);
            println!(
                "{arm:<9} {gods:>2} gods  {:>8.1} cycles/s  {spc:>6.2} syncs/cycle (god 0, traced run {:.1} cycles/s)",
                r.cycles_per_s, traced.cycles_per_s
            );
            figures.push(
                json!({"arm": arm, "gods": gods, "cycles_per_s": r.cycles_per_s,
                                "syncs_per_cycle": spc}),
            );
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    if let Some(path) = std::env::var_os("DURABLE_BENCH_JSON") {
        std::fs::write(path, serde_json::to_vec_pretty(&figures).unwrap()).unwrap();
    }
}
