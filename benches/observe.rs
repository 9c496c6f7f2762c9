//! Observability costs on a large root (docs/OBSERVABILITY.md):
//!
//! - `pantheon status` whole process, with the status cache (the second run on) and without
//!   (`--no-cache`, every dispatch file read);
//! - a `/metrics` scrape of `pantheon serve --metrics` (p50, p99) and serve's resident memory
//!   before and after many scrapes.
//!
//! `cargo bench --bench observe` builds a root of 100,000 workflows (the console bench's scale
//! shape: a state file each, a dispatch in one of 50 inboxes each, one in five unacked) in a
//! temporary directory (in `/dev/shm` when there); `-- N` another size; `-- --root DIR` an
//! existing root.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pantheon"))
}

fn scale_root(dir: &Path, n: usize) {
    let c = dir.join("conductor");
    std::fs::create_dir_all(c.join("state")).unwrap();
    for g in 0..50 {
        std::fs::create_dir_all(c.join(format!("pending/god{g}"))).unwrap();
    }
    std::fs::create_dir_all(c.join("tracks/bench/.message-bus")).unwrap();
    std::fs::write(c.join("tracks/bench/.message-bus/queue.jsonl"), "").unwrap();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    std::thread::scope(|s| {
        for t in 0..threads {
            let c = &c;
            s.spawn(move || {
                for i in (t..n).step_by(threads) {
                    let wf = format!("wf_scale_{i}");
                    let unfinished = i % 5 == 0;
                    let hof = format!("hof_20260614_{i:08x}");
                    let st = json!({
                        "workflow_id": wf, "definition_id": "deploy-feature", "definition_version": "1.0",
                        "status": if unfinished { "waiting_for_ack" } else { "completed" },
                        "current_step": "architect", "dispatched_to": format!("god{}", i % 50),
                        "created": "2026-06-14T09:00:00Z", "updated": "2026-06-14T10:30:00Z"
                    });
                    std::fs::write(c.join(format!("state/{wf}.json")), serde_json::to_vec_pretty(&st).unwrap()).unwrap();
                    let d = json!({
                        "dispatch_id": format!("disp_20260614_103000_{i:08x}"), "handoff_id": hof,
                        "workflow_id": wf, "from_god": "thoth", "to_god": format!("god{}", i % 50),
                        "step": "architect",
                        "context": {"summary": "design the payments service", "decisions": ["use postgres"]},
                        "dispatched_at": "2026-06-14T10:30:00Z",
                        "ack_status": if unfinished { "unacked" } else { "completed" }
                    });
                    std::fs::write(
                        c.join(format!("pending/god{}/{hof}.json", i % 50)),
                        serde_json::to_vec_pretty(&d).unwrap(),
                    )
                    .unwrap();
                }
            });
        }
    });
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn status_ms(root: &Path, home: &Path, extra: &[&str]) -> f64 {
    let t = Instant::now();
    let out = Command::new(bin())
        .arg("--root")
        .arg(root)
        .arg("status")
        .args(extra)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(out.status.success(), "{out:?}");
    ms
}

fn get(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let given = args
        .iter()
        .position(|a| a == "--root")
        .map(|i| PathBuf::from(&args[i + 1]));
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(100_000);
    let tmp = tempfile::Builder::new()
        .prefix("pantheon-observe-bench")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .unwrap();
    let root = match given {
        Some(r) => r,
        None => {
            let r = tmp.path().join("root");
            let t = Instant::now();
            scale_root(&r, n);
            eprintln!(
                "built a root of {n} workflows in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            r
        }
    };
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();

    // status: the first run fills the cache (directories settle after a second).
    std::thread::sleep(Duration::from_millis(1100));
    let first = status_ms(&root, &home, &[]);
    let mut cached: Vec<f64> = (0..15).map(|_| status_ms(&root, &home, &[])).collect();
    let mut full: Vec<f64> = (0..5)
        .map(|_| status_ms(&root, &home, &["--no-cache"]))
        .collect();
    let (c50, f50) = (pct(&mut cached, 0.5), pct(&mut full, 0.5));
    println!("status  first run (fills the cache): {first:.1} ms");
    println!(
        "status  cached: median {c50:.1} ms, max {:.1} ms (15 runs)",
        pct(&mut cached, 1.0)
    );
    println!(
        "status  --no-cache: median {f50:.1} ms (5 runs); cached is {:.3}x of it",
        c50 / f50
    );

    // /metrics: serve with the live model, once its first load is over.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Command::new(bin())
        .arg("--root")
        .arg(&root)
        .args(["serve", "--metrics", &port.to_string()])
        .env("HOME", &home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        if get(port).is_some_and(|b| b.contains("\npantheon_model_loaded 1\n")) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the model never loaded"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("serve   model loaded in {:.1} s", t.elapsed().as_secs_f64());
    for _ in 0..20 {
        get(port).unwrap();
    }
    let rss0 = rss_kib(serve.id());
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..1000 {
        let t = Instant::now();
        bytes = get(port).unwrap().len();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let rss1 = rss_kib(serve.id());
    println!(
        "scrape  {bytes} bytes: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (1000 scrapes)",
        pct(&mut times, 0.5),
        pct(&mut times, 0.99),
        pct(&mut times, 1.0)
    );
    println!(
        "serve   RSS {rss0} KiB after 20 scrapes, {rss1} KiB after 1020 ({:+} KiB)",
        rss1 as i64 - rss0 as i64
    );
    let _ = serve.kill();
    let _ = serve.wait();
}
