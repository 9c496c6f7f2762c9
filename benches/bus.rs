//! Benchmarks of the message bus, a plain program: `cargo bench --bench bus`.
//!
//! 1. Append throughput, 1 and 8 writer processes: `pantheon bus post --count N` (batched) and
//!    `Bus::post` per message vs the seed's Python `post_message` (tests/bus/python) vs a raw
//!    `O_APPEND` write loop in Rust (the floor).
//! 2. `pantheon bus read --tail 100` on a generated ~1 GB queue vs GNU `tail -n 100`: wall time and
//!    max RSS of the child (from `wait4`).
//! 3. Lock acquire/release cycles per second with 8 contending processes (engine calls, 3 paths).
//!
//! `BUS_BENCH_QUICK=1` shrinks every size for a smoke run. The bench re-executes itself for its
//! child processes (`__raw-writer`, `__post-writer`, `__lock-worker`).

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pantheon::engine::{Bus, LockKey, MessageType, Root, WorkerId};

const PANTHEON: &str = env!("CARGO_BIN_EXE_pantheon");

fn quick() -> bool {
    std::env::var_os("BUS_BENCH_QUICK").is_some()
}

fn line(i: usize) -> String {
    format!(
        "{{\"id\": \"msg-{:08x}-0000-4000-8000-{:012x}\", \"type\": \"PROGRESS\", \"source\": \"worker-1.1-20260201120800\", \"timestamp\": \"2026-02-01T12:00:00.000000Z\", \"payload\": {{\"task_id\": \"1.1\", \"progress_pct\": {}, \"current_subtask\": \"Stripe client wrapper with retries and idempotency keys\"}}}}\n",
        i,
        i,
        i % 100
    )
}

/// Waits for a child and returns (exit ok, CPU seconds user+sys) from `wait4`.
fn wait_rusage(child: Child) -> (bool, f64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 failed");
    std::mem::forget(child);
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu(usage.ru_utime) + cpu(usage.ru_stime),
    )
}

/// Waits for every child; returns their total CPU seconds.
fn run_all(children: Vec<Child>) -> f64 {
    children
        .into_iter()
        .map(|c| {
            let (ok, cpu) = wait_rusage(c);
            assert!(ok, "a writer failed");
            cpu
        })
        .sum()
}

fn fresh_bus(track: &str) -> (tempfile::TempDir, Bus) {
    let dir = tempfile::tempdir().unwrap();
    let bus = Bus::open(&Root::at(dir.path()), &track.parse().unwrap());
    bus.init().unwrap();
    (dir, bus)
}

fn count_lines(p: &Path) -> usize {
    std::fs::read(p)
        .unwrap()
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

struct Row {
    name: String,
    writers: usize,
    total: usize,
    secs: f64,
    cpu: f64,
}

fn append_case(
    name: &str,
    writers: usize,
    per: usize,
    spawn: impl Fn(&Bus, usize) -> Child,
) -> Row {
    let (_dir, bus) = fresh_bus("bench");
    let start = Instant::now();
    let cpu = run_all((0..writers).map(|i| spawn(&bus, i)).collect());
    let secs = start.elapsed().as_secs_f64();
    let total = writers * per;
    assert_eq!(count_lines(&bus.queue_path()), total, "{name}: lines lost");
    Row {
        name: name.into(),
        writers,
        total,
        secs,
        cpu,
    }
}

fn bench_append() {
    let total = if quick() { 4_000 } else { 40_000 };
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bus/python/driver.py");
    let me = std::env::current_exe().unwrap();
    println!("## Append throughput ({total} messages per case, all writers together)\n");
    println!(
        "Wall time is what a user waits; CPU time (user+sys of the writers, from wait4) is steadier"
    );
    println!("on a loaded machine. Both include process start-up.\n");
    println!(
        "| writer | processes | messages | wall s | msg/s (wall) | vs raw | CPU s | msg/CPU-s | vs raw |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for writers in [1usize, 8] {
        let per = total / writers;
        let raw = append_case("raw O_APPEND loop (Rust)", writers, per, |bus, _| {
            Command::new(&me)
                .args(["__raw-writer"])
                .arg(bus.queue_path())
                .arg(per.to_string())
                .spawn()
                .unwrap()
        });
        let ours = append_case("pantheon bus post --count", writers, per, |bus, i| {
            Command::new(PANTHEON)
                .arg("--root")
                .arg(&bus.root.dir)
                .args(["bus", "--track", "bench", "post", "PROGRESS", "--source"])
                .arg(format!("worker-{i}"))
                .args(["--payload", r#"{"task_id":"1.1","progress_pct":50,"current_subtask":"Stripe client wrapper with retries and idempotency keys"}"#])
                .args(["--count", &per.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        });
        let single = append_case(
            "engine Bus::post, one call per message",
            writers,
            per,
            |bus, i| {
                Command::new(&me)
                    .args(["__post-writer"])
                    .arg(&bus.root.dir)
                    .arg(format!("worker-{i}"))
                    .arg(per.to_string())
                    .spawn()
                    .unwrap()
            },
        );
        let py = append_case("seed post_message (Python)", writers, per, |bus, i| {
            Command::new("python3")
                .arg(&driver)
                .args(["post"])
                .arg(&bus.dir)
                .arg(per.to_string())
                .arg(format!("worker-{i}"))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        });
        let raw_rate = raw.total as f64 / raw.secs;
        let raw_cpu_rate = raw.total as f64 / raw.cpu;
        for r in [&raw, &ours, &single, &py] {
            let rate = r.total as f64 / r.secs;
            let cpu_rate = r.total as f64 / r.cpu;
            println!(
                "| {} | {} | {} | {:.3} | {:.0} | {:.2}x | {:.3} | {:.0} | {:.2}x |",
                r.name,
                r.writers,
                r.total,
                r.secs,
                rate,
                rate / raw_rate,
                r.cpu,
                cpu_rate,
                cpu_rate / raw_cpu_rate
            );
        }
    }
    println!();
}

fn raw_writer(path: &Path, n: usize) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    for i in 0..n {
        f.write_all(line(i).as_bytes()).unwrap();
    }
}

fn post_writer(root: &Path, source: &str, n: usize) {
    let bus = Bus::open(&Root::at(root), &"bench".parse().unwrap());
    let payload = serde_json::json!({"task_id": "1.1", "progress_pct": 50,
        "current_subtask": "Stripe client wrapper with retries and idempotency keys"});
    for _ in 0..n {
        bus.post(MessageType::Progress, source, payload.clone())
            .unwrap();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn bench_tail() {
    let target: u64 = if quick() { 50 << 20 } else { 1 << 30 };
    let (_dir, bus) = fresh_bus("big");
    let q = bus.queue_path();
    let gen_start = Instant::now();
    let mut lines = 0usize;
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&q).unwrap());
        let mut written = 0u64;
        while written < target {
            let l = line(lines);
            w.write_all(l.as_bytes()).unwrap();
            written += l.len() as u64;
            lines += 1;
        }
        w.flush().unwrap();
    }
    let size = std::fs::metadata(&q).unwrap().len();
    println!(
        "## `read --tail 100` on a {:.2} GB queue ({lines} lines, generated in {:.1}s)\n",
        size as f64 / 1e9,
        gen_start.elapsed().as_secs_f64()
    );
    println!("| reader | median ms (of 7) | max RSS MiB |");
    println!("|---|---|---|");
    let mut results = Vec::new();
    for (name, make) in [("pantheon bus read --tail 100", 0), ("GNU tail -n 100", 1)] {
        let mut times = Vec::new();
        let mut rss = 0i64;
        let rss_file = tempfile::NamedTempFile::new().unwrap();
        for _ in 0..7 {
            // GNU time reports the max RSS of its own child, which is forked from the small `time`
            // process (a child forked from this bench would count the bench's memory).
            let mut c = Command::new("/usr/bin/time");
            c.args(["-f", "%M", "-o"]).arg(rss_file.path());
            if make == 0 {
                c.arg(PANTHEON)
                    .arg("--root")
                    .arg(&bus.root.dir)
                    .args(["bus", "--track", "big", "read", "--tail", "100"]);
            } else {
                c.args(["tail", "-n", "100"]).arg(&q);
            }
            let start = Instant::now();
            let status = c.stdout(Stdio::null()).status().unwrap();
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            assert!(status.success(), "{name} failed");
            let kb: i64 = std::fs::read_to_string(rss_file.path())
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            rss = rss.max(kb);
        }
        let m = median(times);
        println!("| {name} | {m:.2} | {:.1} |", rss as f64 / 1024.0);
        results.push((m, rss));
    }
    println!(
        "\nratio pantheon/tail: {:.2}x time, {:.2}x RSS\n",
        results[0].0 / results[1].0,
        results[0].1 as f64 / results[1].1 as f64
    );
    // Sanity: the tail really is the end of the file.
    let out = Command::new(PANTHEON)
        .arg("--root")
        .arg(&bus.root.dir)
        .args(["bus", "--track", "big", "read", "--tail", "100"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["count"], 100);
    assert_eq!(
        v["messages"][99]["id"],
        format!("msg-{:08x}-0000-4000-8000-{:012x}", lines - 1, lines - 1)
    );
}

fn bench_locks() {
    let secs = if quick() { 1.0 } else { 4.0 };
    let (dir, _bus) = fresh_bus("locks");
    let me = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..8)
        .map(|i| {
            Command::new(&me)
                .args(["__lock-worker"])
                .arg(dir.path())
                .arg(format!("w{i}"))
                .arg(secs.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut cycles = 0u64;
    let mut refused = 0u64;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        cycles += it.next().unwrap();
        refused += it.next().unwrap();
    }
    println!("## Lock acquire/release with 8 contending processes, 3 paths, {secs}s\n");
    println!(
        "{cycles} acquire+release cycles ({:.0}/s), {refused} refusals (held by another; {:.0}/s)\n",
        cycles as f64 / secs,
        refused as f64 / secs
    );
}

fn lock_worker(root: &Path, worker: &str, secs: f64) {
    let bus = Bus::open(&Root::at(root), &"locks".parse().unwrap());
    let paths = ["src/a.ts", "src/b.ts", "src/c.ts"];
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut cycles, mut refused, mut i) = (0u64, 0u64, 0usize);
    let worker: WorkerId = worker.parse().unwrap();
    while Instant::now() < deadline {
        // Parsed (normalised) per cycle, as a caller at the edge does.
        let p: LockKey = paths[i % 3].parse().unwrap();
        i += 1;
        match bus.acquire_lock(&p, &worker, Duration::from_secs(1800), None) {
            Ok(_) => {
                bus.release_lock(&p, &worker, false).unwrap();
                cycles += 1;
            }
            Err(pantheon::Error::Refused(_)) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    println!("{cycles} {refused}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__raw-writer") => {
            return raw_writer(&PathBuf::from(&args[2]), args[3].parse().unwrap());
        }
        Some("__post-writer") => {
            return post_writer(Path::new(&args[2]), &args[3], args[4].parse().unwrap());
        }
        Some("__lock-worker") => {
            return lock_worker(Path::new(&args[2]), &args[3], args[4].parse().unwrap());
        }
        _ => {}
    }
    // `cargo bench -- <filter>` passes extra args; a filter picks sections by name.
    let want = |s: &str| {
        let filters: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
        filters.is_empty() || filters.iter().any(|f| s.contains(f.as_str()))
    };
    println!(
        "# bus bench ({} cores)\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    if want("append") {
        bench_append();
    }
    if want("tail") {
        bench_tail();
    }
    if want("locks") {
        bench_locks();
    }
}
