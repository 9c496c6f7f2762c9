//! Benchmarks of shared tracks over NATS JetStream, a plain program:
//! `cargo bench --bench nats`. Needs `nats-server` (Debian's package) on PATH or in /usr/sbin.
//!
//! On one `nats-server` started here (loopback, JetStream in a temp dir), in the same run:
//! 1. Cross-root latency on a shared track: `Bus::post` on root A -> the line in root B's
//!    `queue.jsonl` (two `pantheon bridge --track` processes), p50/p99, next to a bare JetStream
//!    round trip (publish, await the server's ack, receive it on an ordered consumer).
//! 2. Mirrored throughput: a batch posted on A until every line is in B's queue, next to bare
//!    JetStream publish throughput (pipelined publishes, acks awaited in windows of 512), paired:
//!    `NATS_BENCH_TPUT_RUNS` runs (default 3), each bare then ours back to back; the median run is
//!    the figure and every run's ratio is in its note.
//!
//! Prints one `BENCH {json}` line per figure (collected by `scripts/bench-report.sh`).
//! `NATS_BENCH_QUICK=1` shrinks the sizes. `NATS_BENCH_TRACE=1` runs the bridges with
//! `PANTHEON_BRIDGE_TRACE` and prints (as `TRACE` lines) where the time of each latency sample went:
//! post -> A's bridge woken -> line read -> published -> acknowledged; -> received on B -> appended
//! -> seen by this program, and which background writes (cursor, status, outbox scan) overlapped it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, stream};
use futures_util::StreamExt;
use pantheon::engine::{Bus, MessageType, Root};
use serde_json::json;

mod common;
#[path = "common/nats.rs"]
mod nats_server;
use common::Figure;
use nats_server::{Kill, free_port, nats_server_bin};

const PANTHEON: &str = env!("CARGO_BIN_EXE_pantheon");

fn quick() -> bool {
    std::env::var_os("NATS_BENCH_QUICK").is_some()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn payload(i: usize) -> serde_json::Value {
    json!({"task_id": "1.1", "progress_pct": i % 100,
           "current_subtask": "Stripe client wrapper with retries and idempotency keys"})
}

/// Lines in a queue file (counted by newlines).
fn lines_in(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .unwrap_or(0)
}

/// Counts the lines of a growing file, reading only what was appended since the last call.
struct LineCounter {
    path: PathBuf,
    offset: u64,
    lines: usize,
}

impl LineCounter {
    fn count(&mut self) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        if let Ok(mut f) = std::fs::File::open(&self.path) {
            let _ = f.seek(SeekFrom::Start(self.offset));
            let mut buf = Vec::new();
            if f.read_to_end(&mut buf).is_ok() {
                self.offset += buf.len() as u64;
                self.lines += bytecount(&buf);
            }
        }
        self.lines
    }
}

fn bytecount(b: &[u8]) -> usize {
    b.iter().filter(|c| **c == b'\n').count()
}

fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// One bridge's trace: (stage, key, unix nanos) lines as `src/bridge/trace.rs` writes them.
fn read_trace(path: &Path) -> Vec<(String, String, u128)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            let (stage, key, at) = (it.next()?, it.next()?, it.next()?.parse().ok()?);
            Some((stage.to_owned(), key.to_owned(), at))
        })
        .collect()
}

/// Prints where the time of each latency sample went (see the module comment).
fn print_trace(samples: &[(String, u128, u128)], a: &Path, b: &Path) {
    use std::collections::HashMap;
    let (ta, tb) = (read_trace(a), read_trace(b));
    let by = |t: &[(String, String, u128)], stage: &str| -> HashMap<String, u128> {
        t.iter()
            .filter(|e| e.0 == stage)
            .map(|e| (e.1.clone(), e.2))
            .collect()
    };
    let (read, sent, acked) = (by(&ta, "read"), by(&ta, "sent"), by(&ta, "acked"));
    let (recv, applied) = (by(&tb, "recv"), by(&tb, "applied"));
    let mut wakes: Vec<u128> = ta.iter().filter(|e| e.0 == "wake").map(|e| e.2).collect();
    wakes.sort();
    // Background work of one side: (start, end, what) intervals.
    let spans = |t: &[(String, String, u128)], side: &str| -> Vec<(u128, u128, String)> {
        let mut out = Vec::new();
        for what in ["cursor", "status", "outbox"] {
            let done = format!("{what}_done");
            let mut open = None;
            for e in t {
                if e.0 == what {
                    open = Some(e.2);
                } else if e.0 == done
                    && let Some(s) = open.take()
                {
                    out.push((s, e.2, format!("{side}.{what}")));
                }
            }
        }
        out
    };
    let mut bg = spans(&ta, "A");
    bg.extend(spans(&tb, "B"));
    let ms = |x: Option<u128>, y: Option<u128>| match (x, y) {
        (Some(x), Some(y)) if y >= x => Some((y - x) as f64 / 1e6),
        _ => None,
    };
    let names = [
        "wake", "read", "publish", "ack", "to B", "append", "observe", "total",
    ];
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rows = Vec::new();
    for (id, t0, t1) in samples {
        let w = wakes.iter().copied().find(|w| w >= t0);
        let (r, s, k) = (
            read.get(id).copied(),
            sent.get(id).copied(),
            acked.get(id).copied(),
        );
        let (rv, ap) = (recv.get(id).copied(), applied.get(id).copied());
        let seg = [
            ms(Some(*t0), w),
            ms(w, r),
            ms(r, s),
            ms(s, k),
            ms(s, rv),
            ms(rv, ap),
            ms(ap, Some(*t1)),
            ms(Some(*t0), Some(*t1)),
        ];
        for (c, v) in cols.iter_mut().zip(seg) {
            if let Some(v) = v {
                c.push(v);
            }
        }
        let overlaps: Vec<String> = bg
            .iter()
            .filter(|(s, e, _)| s < t1 && e > t0)
            .map(|(s, e, w)| format!("{w} {:.3}ms", (e - s) as f64 / 1e6))
            .collect();
        rows.push((seg, overlaps));
    }
    for (n, c) in names.iter().zip(cols.iter_mut()) {
        if c.is_empty() {
            continue;
        }
        let (p50, p99, max) = (percentile(c, 0.5), percentile(c, 0.99), percentile(c, 1.0));
        println!(
            "TRACE stage {n:>8}: p50 {p50:.3} ms  p99 {p99:.3} ms  max {max:.3} ms  (n={})",
            c.len()
        );
    }
    rows.sort_by(|a, b| b.0[7].partial_cmp(&a.0[7]).unwrap());
    for (seg, overlaps) in rows.iter().take(12) {
        let f = |v: &Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or("-".into());
        let cells: Vec<String> = names
            .iter()
            .zip(seg)
            .map(|(n, v)| format!("{n} {}", f(v)))
            .collect();
        println!("TRACE slow: {} | {}", cells.join(", "), overlaps.join(", "));
    }
}

/// One bare JetStream round trip: publish with a message id, await the server's ack, receive the
/// message on the ordered consumer; milliseconds.
async fn bare_round<S, E>(js: &jetstream::Context, msgs: &mut S, i: usize, sample: &[u8]) -> f64
where
    S: futures_util::Stream<Item = Result<jetstream::Message, E>> + Unpin,
    E: std::fmt::Debug,
{
    let t = Instant::now();
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Msg-Id", format!("rtt-{i}").as_str());
    js.publish_with_headers("bare.rtt", h, sample.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
    msgs.next().await.unwrap().unwrap();
    t.elapsed().as_secs_f64() * 1000.0
}

/// Bare JetStream publish throughput: `n` publishes with message ids, acks awaited in windows of
/// 512; messages a second.
async fn bare_throughput(js: &jetstream::Context, n: usize, run: usize, sample: &[u8]) -> f64 {
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let mut acks = Vec::new();
        for i in done..(done + 512).min(n) {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("tp-{run}-{i}").as_str());
            acks.push(
                js.publish_with_headers("bare.tput", h, sample.to_vec().into())
                    .await
                    .unwrap(),
            );
        }
        done += acks.len();
        for a in acks {
            a.await.unwrap();
        }
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let (lat_n, mut tput_n) = if quick() { (100, 2_000) } else { (400, 20_000) };
    // NATS_BENCH_TPUT_N: lines per throughput run (a longer run to profile the bridges under).
    if let Some(n) = std::env::var("NATS_BENCH_TPUT_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
    {
        tput_n = n;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _server = Kill(
        Command::new(nats_server_bin())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir.path().join("js"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nats-server"),
    );
    wait_for("nats-server", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = format!("nats://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // ---- bare JetStream, same server, same run
    let sample = serde_json::to_vec(&json!({"id": "msg-00000000-0000-4000-8000-000000000000",
        "type": "PROGRESS", "source": "worker-1", "timestamp": "2026-02-01T12:00:00.000000Z",
        "payload": payload(1)}))
    .unwrap();
    // NATS_BENCH_INTERLEAVE=1: each bare round trip is taken right before one of ours (same
    // measurement, same count, same warm-up), so both see the same load on a busy machine.
    let interleave = std::env::var_os("NATS_BENCH_INTERLEAVE").is_some();
    let (mut bare_rtt, bare_js, mut bare_msgs) = rt.block_on(async {
        let client = async_nats::connect(&url).await.unwrap();
        let js = jetstream::new(client);
        let st = js
            .get_or_create_stream(stream::Config {
                name: "BARE".into(),
                subjects: vec!["bare.>".into()],
                storage: stream::StorageType::File,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .unwrap();
        let consumer = st
            .create_consumer(pull::OrderedConfig {
                filter_subject: "bare.rtt".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut msgs = consumer.messages().await.unwrap();
        let mut rtt = Vec::new();
        // Interleaved, only the warm-up is done here; the samples are taken next to ours below.
        let rounds = if interleave { 20 } else { lat_n + 20 };
        for i in 0..rounds {
            let ms = bare_round(&js, &mut msgs, i, &sample).await;
            if i >= 20 {
                rtt.push(ms);
            }
        }
        (rtt, js, msgs)
    });

    // ---- ours: two roots, two bridges, one shared track
    let roots: Vec<Root> = ["a", "b"]
        .iter()
        .map(|n| Root::at(dir.path().join(n)))
        .collect();
    let buses: Vec<Bus> = roots
        .iter()
        .map(|r| {
            let b = Bus::open(r, &"bench".parse().unwrap());
            b.init().unwrap();
            b
        })
        .collect();
    let traced = std::env::var_os("NATS_BENCH_TRACE").is_some();
    let trace_of = |name: &str| dir.path().join(format!("trace-{name}.log"));
    let _bridges: Vec<Kill> = roots
        .iter()
        .zip(["konan", "tallon"])
        .map(|(r, name)| {
            // NATS_BENCH_PANTHEON=PATH runs another build of the bridge (to compare two versions).
            let mut cmd = Command::new(
                std::env::var_os("NATS_BENCH_PANTHEON").unwrap_or_else(|| PANTHEON.into()),
            );
            if traced {
                cmd.env("PANTHEON_BRIDGE_TRACE", trace_of(name));
            }
            Kill(
                cmd.arg("--root")
                    .arg(&r.dir)
                    .args(["bridge", "--nats", &url, "--name", name, "--track", "bench"])
                    .args(["--peer", if name == "konan" { "tallon" } else { "konan" }])
                    .env_remove("PANTHEON_ROOT")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("starting pantheon bridge"),
            )
        })
        .collect();
    let qb = buses[1].queue_path();
    // Warm up until the bridges carry lines.
    buses[0]
        .post(MessageType::Progress, "warm", payload(0))
        .unwrap();
    wait_for("the bridges", Duration::from_secs(60), || {
        lines_in(&qb) >= 1
    });
    let mut ours = Vec::new();
    let mut traced_samples = Vec::new();
    let mut seen = lines_in(&qb);
    let mut len_b = std::fs::metadata(&qb).unwrap().len();
    for i in 0..lat_n + 20 {
        if interleave && i >= 20 {
            bare_rtt.push(rt.block_on(bare_round(&bare_js, &mut bare_msgs, i, &sample)));
        }
        let t = Instant::now();
        let t0 = unix_nanos();
        let env = buses[0]
            .post(MessageType::Progress, "worker-1", payload(i))
            .unwrap();
        // Spin on B's queue length (a stat per 50 µs), then confirm the line is complete.
        loop {
            let l = std::fs::metadata(&qb).map(|m| m.len()).unwrap_or(0);
            if l > len_b {
                len_b = l;
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "line {i} never arrived"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
        if i >= 20 {
            ours.push(t.elapsed().as_secs_f64() * 1000.0);
            if traced {
                traced_samples.push((env.id, t0, unix_nanos()));
            }
        }
    }
    seen += lat_n + 20;
    if traced {
        print_trace(&traced_samples, &trace_of("konan"), &trace_of("tallon"));
    }
    // Throughput, paired: each run times bare JetStream publishing, then ours, back to back, so
    // both see the same load on a busy machine; the figure is the median run, the spread is shown.
    let runs: usize = std::env::var("NATS_BENCH_TPUT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(3);
    let mut counter = LineCounter {
        path: qb.clone(),
        offset: 0,
        lines: 0,
    };
    let mut paired = Vec::new();
    for run in 0..runs {
        let bare_tput = rt.block_on(bare_throughput(&bare_js, tput_n, run, &sample));
        let t = Instant::now();
        buses[0]
            .post_repeated(MessageType::Progress, "worker-1", payload(7), tput_n)
            .unwrap();
        wait_for("every mirrored line", Duration::from_secs(600), || {
            counter.count() >= seen + tput_n
        });
        let our_tput = tput_n as f64 / t.elapsed().as_secs_f64();
        seen += tput_n;
        assert_eq!(lines_in(&qb), seen, "B has every line exactly once");
        println!(
            "throughput run {}: ours {our_tput:.0} msg/s, bare {bare_tput:.0} msg/s, {:.3}x",
            run + 1,
            our_tput / bare_tput
        );
        paired.push((our_tput / bare_tput, our_tput, bare_tput));
    }
    paired.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, our_tput, bare_tput) = paired[paired.len() / 2];
    let spread: Vec<String> = paired.iter().map(|p| format!("{:.3}x", p.0)).collect();

    let mut bare = bare_rtt.clone();
    let (b50, b99) = (percentile(&mut bare, 0.5), percentile(&mut bare, 0.99));
    let (o50, o99) = (percentile(&mut ours, 0.5), percentile(&mut ours, 0.99));
    let note = format!(
        "p50 {o50:.3} ms / p99 {o99:.3} ms vs bare p50 {b50:.3} ms / p99 {b99:.3} ms; {lat_n} posts, one at a time{}",
        if interleave {
            ", each next to a bare round trip"
        } else {
            ""
        }
    );
    Figure {
        name: "shared track latency p50 (A append -> B queue.jsonl)",
        issue: 17,
        goal: "within 3x of a bare JetStream round trip",
        median: o50,
        unit: "ms",
        baseline: Some((b50, "bare JetStream publish+ack+consume p50")),
        met: Some(o50 <= 3.0 * b50),
        note: &note,
    }
    .print();
    Figure {
        name: "shared track latency p99 (A append -> B queue.jsonl)",
        issue: 17,
        goal: "within 3x of a bare JetStream round trip",
        median: o99,
        unit: "ms",
        baseline: Some((b99, "bare JetStream publish+ack+consume p99")),
        met: Some(o99 <= 3.0 * b99),
        note: &note,
    }
    .print();
    Figure { name: "shared track mirrored throughput (A batch -> B queue.jsonl)", issue: 17, goal: ">= 0.6x bare JetStream publish throughput", median: our_tput, unit: "msg/s", baseline: Some((bare_tput, "bare JetStream publish, acks in windows of 512")), met: Some(ratio >= 0.6), note: &format!(
            "{tput_n} lines posted in one batch on A, counted in B's queue; the median of {runs} runs, each next to a bare run (ratios {})",
            spread.join(", ")
        ) }.print();
}
