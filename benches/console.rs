//! Console benchmarks. Run with `cargo bench --bench console`; the real-terminal
//! idle measurement also needs `cargo build --release` and tmux.
//!
//! 1. append -> snapshot latency at 10 and 1,000 messages/s (p50/p99),
//! 2. opening a root whose queue.jsonl is 1 GB (ready time, resident memory),
//! 3. frame render time at 200x50 with 1,000 workflows, 50 gods, 10,000 messages, 500 locks, 100 workers,
//! 4. CPU while idle on a quiet root,
//! 5. scale: first screen, resident memory and frame time on roots of 1,000, 10,000 and
//!    100,000 workflows, each with a dispatch and a handoff file, every fifth unfinished
//!    (`cargo bench --bench console -- scale`; each size is measured in three fresh child processes:
//!    first screen and frame time are their medians, resident memory the worst); the largest root
//!    also in the real console in tmux: fully loaded and peak resident memory ([`tmux::scale`]),
//! 6. event to screen in the real console in tmux (`cargo bench --bench console -- screen`).
//!
//! The tmux figures can be taken beside an older binary in the same run, alternating:
//! `PANTHEON_BENCH_BASELINE_BIN=/path/to/pantheon`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pantheon::Root;
use pantheon::engine::{Bus, MessageType};
use pantheon::testing::console::app::App;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::console::theme::Theme;
use pantheon::testing::console::views;
use pantheon::testing::live::runner::LiveHandle;
use pantheon::testing::live::{LiveModel, ModelOptions, WatchMode};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

mod common;
use common::Figure;

#[path = "console/tmux.rs"]
mod tmux;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn cpu_time_self() -> Duration {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// utime + stime of another process, from /proc/{pid}/stat (in clock ticks).
fn cpu_time_of(pid: u32) -> Option<Duration> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Some(Duration::from_millis(ticks * 1000 / hz.max(1)))
}

fn latency(rate: u32, count: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::at(dir.path());
    let bus = Bus::open(&root, &"bench".parse().unwrap());
    bus.init().unwrap();
    // A blocked worker in the buffer makes every rebuild run deadlock detection (the costly path).
    bus.post(
        MessageType::Blocked,
        "worker-blocked",
        json!({"task_id": "9", "waiting_for": "file_lock", "resource": "src/x.rs"}),
    )
    .unwrap();
    let mut handle = LiveHandle::start(root.clone(), WatchMode::Notify, ModelOptions::default());
    let written: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; count]));
    let w = written.clone();
    let writer = std::thread::spawn(move || {
        let gap = Duration::from_secs_f64(1.0 / rate as f64);
        let start = Instant::now();
        for i in 0..count {
            let due = start + gap * i as u32;
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            bus.post(MessageType::Progress, "bench-writer", json!({"seq": i}))
                .unwrap();
            w.lock().unwrap()[i] = Some(Instant::now());
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut seen = vec![None::<Instant>; count];
    let mut got = 0;
    rt.block_on(async {
        while got < count {
            if tokio::time::timeout(Duration::from_secs(10), handle.snapshots.changed())
                .await
                .is_err()
            {
                break;
            }
            let now = Instant::now();
            let snap = handle.snapshots.borrow_and_update().clone();
            if let Some(t) = snap.track("bench") {
                for m in t.messages.iter().rev() {
                    let Some(i) = m.payload.get("seq").and_then(|v| v.as_u64()) else {
                        continue;
                    };
                    let i = i as usize;
                    if seen[i].is_some() {
                        break;
                    }
                    seen[i] = Some(now);
                    got += 1;
                }
            }
        }
    });
    writer.join().unwrap();
    let written = written.lock().unwrap();
    let mut lat: Vec<f64> = written
        .iter()
        .zip(seen.iter())
        .filter_map(|(w, s)| {
            Some(
                s.as_ref()?
                    .saturating_duration_since(*w.as_ref()?)
                    .as_secs_f64()
                    * 1e3,
            )
        })
        .collect();
    let n = lat.len();
    println!(
        "latency append->snapshot @ {rate:>4} msg/s: n={n}/{count} p50={:.1} ms p99={:.1} ms max={:.1} ms",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );
}

fn big_queue(gib_target: u64) {
    let dir = tempfile::tempdir().unwrap();
    let q = dir
        .path()
        .join("conductor/tracks/big/.message-bus/queue.jsonl");
    std::fs::create_dir_all(q.parent().unwrap()).unwrap();
    let t = Instant::now();
    let mut f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&q).unwrap());
    let mut written = 0u64;
    let mut i = 0u64;
    while written < gib_target {
        let line = format!(
            "{{\"id\":\"msg-{i:032}\",\"type\":\"PROGRESS\",\"source\":\"worker-{}\",\"timestamp\":\"2026-02-01T12:00:00.000001Z\",\"payload\":{{\"task_id\":\"{}\",\"progress_pct\":{},\"current_subtask\":\"step {i}\"}}}}\n",
            i % 100,
            i % 1000,
            i % 101
        );
        f.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
        i += 1;
    }
    f.flush().unwrap();
    drop(f);
    println!(
        "big queue: wrote {} MiB ({i} lines) in {:.1} s",
        written >> 20,
        t.elapsed().as_secs_f64()
    );
    let before = rss_kib();
    let t = Instant::now();
    let model = LiveModel::open(Root::at(dir.path()), ModelOptions::default());
    let snap = model.snapshot();
    let mut app = App::new(snap.clone(), false, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Bus));
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    term.draw(|f| views::draw(f, &app, &Theme::plain(true)))
        .unwrap();
    let ready = t.elapsed();
    let after = rss_kib();
    let tv = snap.track("big").unwrap();
    println!(
        "open 1 GiB queue: ready (model + first frame) in {:.1} ms; RSS {} MiB total (+{} MiB); {} messages buffered, {} MiB of head skipped",
        ready.as_secs_f64() * 1e3,
        after >> 10,
        after.saturating_sub(before) >> 10,
        tv.messages.len(),
        tv.head_bytes_skipped >> 20
    );
}

/// Writes a root with 1,000 workflows, 50 gods, 10,000 messages, 500 locks and 100 workers.
fn big_root(dir: &Path) {
    let c = dir.join("conductor");
    std::fs::create_dir_all(c.join("state")).unwrap();
    for i in 0..1000 {
        let st = json!({
            "workflow_id": format!("wf_bench_{i}"), "definition_id": "deploy-feature",
            "status": if i % 5 == 0 { "completed" } else { "waiting_for_ack" },
            "current_step": "architect", "dispatched_to": format!("god{}", i % 50),
            "context_bag": {"decisions": ["a", "b"], "artifacts": ["x.md"]},
            "step_history": [{"step_id": "research", "god": "thoth", "status": "completed"}],
            "created": "2026-06-14T09:00:00Z", "acks": []
        });
        std::fs::write(
            c.join(format!("state/wf_bench_{i}.json")),
            serde_json::to_vec_pretty(&st).unwrap(),
        )
        .unwrap();
    }
    // 200 dead letters over 20 gods (pane 9), with their delivery history.
    for g in 0..20 {
        let d = c.join(format!("dead/god{g}"));
        std::fs::create_dir_all(&d).unwrap();
        for j in 0..10 {
            let i = 900 + g * 10 + j;
            let dead = json!({
                "handoff_id": format!("hof_20260614_{i:06x}"), "workflow_id": format!("wf_bench_{i}"),
                "from_god": "thoth", "to_god": format!("god{g}"), "step": "architect",
                "context": {"summary": "bench", "decisions": [], "artifacts": []},
                "dispatched_at": "2026-06-14T10:30:00Z", "ack_status": "unacked",
                "ack_wait": "30s", "max_deliveries": 3,
                "deliveries": [{"at": "2026-06-14T10:29:00Z", "to": format!("god{g}")},
                               {"at": "2026-06-14T10:29:30Z", "to": format!("god{g}")},
                               {"at": "2026-06-14T10:30:00Z", "to": format!("god{g}")}],
                "dead_at": "2026-06-14T10:30:30Z", "dead_reason": "not acked after 3 deliveries"
            });
            std::fs::write(
                d.join(format!("hof_20260614_{i:06x}.json")),
                serde_json::to_vec_pretty(&dead).unwrap(),
            )
            .unwrap();
        }
    }
    for g in 0..50 {
        let d = c.join(format!("pending/god{g}"));
        std::fs::create_dir_all(&d).unwrap();
        for j in 0..4 {
            let i = g * 4 + j;
            let disp = json!({
                "dispatch_id": format!("disp_20260614_103000_{i:06x}"),
                "handoff_id": format!("hof_20260614_{i:06x}"), "workflow_id": format!("wf_bench_{i}"),
                "from_god": "thoth", "to_god": format!("god{g}"), "step": "architect",
                "context": {"summary": "bench", "decisions": [], "artifacts": []},
                "dispatched_at": "2026-06-14T10:30:00Z", "ack_status": "unacked"
            });
            std::fs::write(
                d.join(format!("hof_20260614_{i:06x}.json")),
                serde_json::to_vec(&disp).unwrap(),
            )
            .unwrap();
        }
    }
    let b = c.join("tracks/bench/.message-bus");
    std::fs::create_dir_all(&b).unwrap();
    let mut q = String::new();
    for i in 0..10_000 {
        q.push_str(&format!(
            "{{\"id\":\"msg-{i}\",\"type\":\"PROGRESS\",\"source\":\"worker-{}\",\"timestamp\":\"2026-02-01T12:00:00Z\",\"payload\":{{\"task_id\":\"{i}\",\"progress_pct\":50}}}}\n",
            i % 100
        ));
    }
    std::fs::write(b.join("queue.jsonl"), q).unwrap();
    let locks: serde_json::Map<String, serde_json::Value> = (0..500)
        .map(|i| {
            (
                format!("src/file{i}.rs"),
                json!({"worker_id": format!("worker-{}", i % 100), "acquired_at": "2026-02-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}),
            )
        })
        .collect();
    std::fs::write(b.join("locks.json"), serde_json::to_vec(&locks).unwrap()).unwrap();
    let workers: serde_json::Map<String, serde_json::Value> = (0..100)
        .map(|i| {
            (
                format!("worker-{i}"),
                json!({"task_id": format!("{i}"), "status": "RUNNING", "progress_pct": i, "last_heartbeat": "2026-02-01T12:00:00Z"}),
            )
        })
        .collect();
    std::fs::write(
        b.join("worker-status.json"),
        serde_json::to_vec(&workers).unwrap(),
    )
    .unwrap();
}

fn render_times() {
    let dir = tempfile::tempdir().unwrap();
    big_root(dir.path());
    let t = Instant::now();
    let model = LiveModel::open(Root::at(dir.path()), ModelOptions::default());
    println!(
        "render root: model opened in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut app = App::new(model.snapshot(), false, chrono::Utc::now());
    let theme = Theme::plain(true);
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    let mut all = Vec::new();
    for pane in Pane::ALL {
        app.dispatch(Action::GoPane(pane));
        app.dispatch(Action::Bottom);
        let mut v = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            term.draw(|f| views::draw(f, &app, &theme)).unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        all.extend(v.iter().copied());
        println!(
            "render 200x50 {:<9}: median {:.2} ms p99 {:.2} ms",
            pane.title(),
            pct(&mut v, 0.5),
            pct(&mut v, 0.99)
        );
    }
    let median = pct(&mut all, 0.5);
    println!("render 200x50 all panes: median {median:.2} ms");
    // Collected by scripts/bench-report.sh into BENCHMARKS.md.
    Figure {
        name: "frame_render_200x50",
        issue: 4,
        goal: "frame render at 200x50 with 1,000 workflows, 50 gods, 10,000 messages, 500 locks, 100 workers: median < 5 ms",
        median,
        unit: "ms",
        baseline: None,
        met: Some(median < 5.0),
        note: "every pane, 200 draws each, ratatui TestBackend",
    }
    .print();
}

fn idle_cpu() {
    let dir = tempfile::tempdir().unwrap();
    big_root(dir.path());
    let handle = LiveHandle::start(
        Root::at(dir.path()),
        WatchMode::Notify,
        ModelOptions::default(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let (c0, t0) = (cpu_time_self(), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_time_self() - c0;
    println!(
        "idle CPU, live model (in process): {:.3}% over {:.1} s",
        used.as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0,
        t0.elapsed().as_secs_f64()
    );
    drop(handle);

    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/pantheon");
    if !bin.exists()
        || std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_err()
    {
        println!("idle CPU, real console: skipped (needs `cargo build --release` and tmux)");
        return;
    }
    let sock = format!("pantheon-bench-{}", std::process::id());
    let cmd = format!(
        "exec env PANTHEON_LOG=/dev/null {} --root {} console",
        bin.display(),
        dir.path().display()
    );
    std::process::Command::new("tmux")
        .args([
            "-L",
            &sock,
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            &cmd,
        ])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let pid = std::process::Command::new("tmux")
        .args(["-L", &sock, "list-panes", "-F", "#{pane_pid}"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u32>()
                .ok()
        });
    if let Some(pid) = pid
        && let Some(c0) = cpu_time_of(pid)
    {
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(10));
        if let Some(c1) = cpu_time_of(pid) {
            println!(
                "idle CPU, real console at 200x50 (1 redraw/s for relative times): {:.3}% over {:.1} s",
                (c1 - c0).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    let _ = std::process::Command::new("tmux")
        .args(["-L", &sock, "kill-server"])
        .status();
}

/// Event -> hook: a file change that makes an attention item (an expired lock written into
/// `locks.json`), until the `--on-attention` command has started (it writes the time it started);
/// then time -> hook: a lock whose lease runs out with no file changing, from its `expires_at`
/// until the hook started. The real console in tmux, `--notify-every 0`.
fn hook_latency() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_pantheon"));
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        println!("event -> hook: skipped (needs tmux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let run = |args: &[&str]| {
        let ok = std::process::Command::new(&bin)
            .arg("--root")
            .arg(&root)
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "pantheon {args:?}");
    };
    std::fs::create_dir_all(&root).unwrap();
    run(&["init"]);
    run(&["bus", "--track", "alpha", "init"]);
    let locks_path = root.join("conductor/tracks/alpha/.message-bus/locks.json");
    let out = dir.path().join("hook.out");
    let write_locks = |locks: &serde_json::Map<String, serde_json::Value>| {
        let tmp = locks_path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(locks).unwrap()).unwrap();
        let at = std::time::SystemTime::now();
        std::fs::rename(&tmp, &locks_path).unwrap();
        at
    };
    let sock = format!("pantheon-hook-bench-{}", std::process::id());
    let cmd = format!(
        "exec env PANTHEON_LOG=/dev/null {} --root {} console --notify-every 0 --on-attention 'date +%s%N >> {}'",
        bin.display(),
        root.display(),
        out.display()
    );
    std::process::Command::new("tmux")
        .args([
            "-L",
            &sock,
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            &cmd,
        ])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let started = |n: usize| -> Option<Vec<u128>> {
        let t0 = Instant::now();
        loop {
            let lines: Vec<u128> = std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if lines.len() >= n {
                return Some(lines);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let ns = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let mut locks = serde_json::Map::new();
    let entry = |exp: chrono::DateTime<chrono::Utc>| {
        serde_json::json!({"worker_id": "w1", "acquired_at": (exp - chrono::Duration::minutes(1)).to_rfc3339(),
                           "expires_at": exp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)})
    };
    let samples = 30;
    let mut event = Vec::new();
    for i in 0..samples {
        locks.insert(
            format!("event/{i}.rs"),
            entry(chrono::Utc::now() - chrono::Duration::minutes(5)),
        );
        let at = write_locks(&locks);
        match started(i + 1) {
            Some(lines) => event.push((lines[i] as f64 - ns(at) as f64) / 1e6),
            None => {
                println!("event -> hook: the hook did not run for sample {i}");
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let mut timed = Vec::new();
    for i in 0..samples {
        let exp = chrono::Utc::now() + chrono::Duration::milliseconds(700);
        locks.insert(format!("lease/{i}.rs"), entry(exp));
        write_locks(&locks);
        match started(samples + i + 1) {
            Some(lines) => {
                let exp_ns = exp.timestamp_nanos_opt().unwrap() as f64;
                timed.push((lines[samples + i] as f64 - exp_ns) / 1e6);
            }
            None => {
                println!("time -> hook: the hook did not run for sample {i}");
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let _ = std::process::Command::new("tmux")
        .args(["-L", &sock, "kill-server"])
        .status();
    for (name, what, mut v) in [
        (
            "event_to_hook",
            "file change (an expired lock written into locks.json) to the hook started",
            event,
        ),
        (
            "time_to_hook",
            "a lease running out with no file changing, from its expires_at to the hook started",
            timed,
        ),
    ] {
        if v.is_empty() {
            continue;
        }
        let (p50, p99) = (pct(&mut v, 0.50), pct(&mut v, 0.99));
        let max = v.iter().cloned().fold(f64::MIN, f64::max);
        Figure {
            name: &format!("{name}_p99"),
            issue: 27,
            goal: "an attention item's `--on-attention` hook starts within 50 ms (p99) of its cause (peers refresh every 2 to 60 s)",
            median: p99,
            unit: "ms",
            baseline: Some((1000.0, "the console's 1 s tick (how time-based items were seen before)")),
            met: Some(p99 < 50.0),
            note: &format!("{what}; p50 {p50:.1} ms, max {max:.1} ms over {} samples; the real console in tmux, `--notify-every 0`", v.len()),
        }
        .print();
    }
}

/// Event to screen in the real console ([`tmux::screen`]) on a root of 1,000 workflows.
fn screen_latency() {
    let dir = tempfile::tempdir().unwrap();
    scale_root(dir.path(), 1_000);
    tmux::screen(dir.path());
}

/// Writes a root of `n` workflows (every fifth waiting for an ack, the rest completed), each with a
/// dispatch in one of 50 inboxes and a handoff file in its own `shared/handoffs/` directory. The
/// files are written by one thread per core (100,000 workflows are some 300,000 files).
fn scale_root(dir: &Path, n: usize) {
    let c = dir.join("conductor");
    std::fs::create_dir_all(c.join("state")).unwrap();
    for g in 0..50 {
        std::fs::create_dir_all(c.join(format!("pending/god{g}"))).unwrap();
    }
    std::fs::create_dir_all(c.join("tracks/bench/.message-bus")).unwrap();
    std::fs::write(c.join("tracks/bench/.message-bus/queue.jsonl"), "").unwrap();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let c = &c;
            scope.spawn(move || {
                for i in (t..n).step_by(threads) {
                    scale_workflow(dir, c, i);
                }
            });
        }
    });
}

/// The three files of workflow `i` of [`scale_root`].
fn scale_workflow(dir: &Path, c: &Path, i: usize) {
    let wf = format!("wf_scale_{i}");
    let unfinished = i.is_multiple_of(5);
    let hof = format!("hof_20260614_{i:08x}");
    let st = json!({
        "workflow_id": wf, "definition_id": "deploy-feature", "definition_version": "1.0",
        "status": if unfinished { "waiting_for_ack" } else { "completed" },
        "current_step": "architect", "dispatched_to": format!("god{}", i % 50),
        "context_bag": {"decisions": ["use postgres", "ship behind a flag"], "artifacts": ["docs/design.md", "src/payments.rs"], "open_questions": []},
        "step_history": [
            {"step_id": "research", "god": "thoth", "status": "completed", "handoff_id": format!("hof_20260614_r{i:07x}"), "completed_at": "2026-06-14T09:30:00Z", "artifacts": ["docs/research.md"]},
            {"step_id": "architect", "god": format!("god{}", i % 50), "status": if unfinished { "dispatched" } else { "completed" }, "handoff_id": hof}
        ],
        "acks": [{"handoff_id": format!("hof_20260614_r{i:07x}"), "status": "completed", "god": "thoth", "acked_at": "2026-06-14T09:30:00Z"}],
        "created": "2026-06-14T09:00:00Z", "updated": "2026-06-14T10:30:00Z"
    });
    std::fs::write(
        c.join(format!("state/{wf}.json")),
        serde_json::to_vec_pretty(&st).unwrap(),
    )
    .unwrap();
    let disp = json!({
        "dispatch_id": format!("disp_20260614_103000_{i:08x}"), "handoff_id": hof,
        "workflow_id": wf, "from_god": "thoth", "to_god": format!("god{}", i % 50),
        "step": "architect",
        "context": {"summary": "design the payments service", "decisions": ["use postgres"], "artifacts": ["docs/research.md"]},
        "dispatched_at": "2026-06-14T10:30:00Z",
        "ack_status": if unfinished { "unacked" } else { "completed" }
    });
    std::fs::write(
        c.join(format!("pending/god{}/{hof}.json", i % 50)),
        serde_json::to_vec_pretty(&disp).unwrap(),
    )
    .unwrap();
    let h = dir.join(format!("shared/handoffs/{wf}"));
    std::fs::create_dir_all(&h).unwrap();
    std::fs::write(
        h.join("research.json"),
        serde_json::to_vec_pretty(&json!({"handoff_id": format!("hof_20260614_r{i:07x}"), "workflow_id": wf, "from_god": "thoth", "summary": "research done"})).unwrap(),
    )
    .unwrap();
}

/// Where the scale roots are written: a directory in `/dev/shm` when it is there with room for
/// the largest root (about 1.5 GB of small files for 100,000 workflows), else the default temp dir.
fn scale_dir(n: usize) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let need = n as u64 * 16 * 1024;
    let room = {
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        let p = std::ffi::CString::new("/dev/shm").unwrap();
        if unsafe { libc::statvfs(p.as_ptr(), &mut s) } == 0 {
            s.f_bavail as u64 * s.f_frsize as u64
        } else {
            0
        }
    };
    if shm.is_dir()
        && room > need.saturating_mul(2)
        && let Ok(d) = tempfile::Builder::new()
            .prefix("pantheon-scale-")
            .tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// What glibc's malloc takes for a request of `len` bytes (16-byte steps, 32 at least).
fn chunk(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (len + 8).div_ceil(16).max(2) * 16
    }
}

/// Where the bytes of a loaded root go: the size of each part of a workflow row and of a dispatch
/// row (structs, their allocations, their strings), averaged over the snapshot, as counted from
/// the types (the model's maps' nodes and the allocator's free lists come on top; `rows_mib` is
/// the sum, to compare with the resident size).
fn row_bytes(s: &pantheon::testing::live::Snapshot) -> serde_json::Value {
    use pantheon::engine::WorkflowState;
    use pantheon::testing::live::files::RecordFile;
    use pantheon::testing::live::snapshot::{
        DispatchRecord, DispatchView, Record, Stamp, Sym, WorkflowRow, WorkflowView,
    };
    use std::mem::size_of;
    let n = s.workflows.len().max(1);
    // Only a time that did not parse keeps its text.
    let stamp = |o: Option<&Stamp>| match o {
        Some(Stamp::Unparsed(t)) => chunk(t.len()),
        _ => 0,
    };
    let mut wf_strings = 0;
    let mut waiting = 0;
    for w in s.workflows.iter() {
        wf_strings += chunk(16 + w.id.len())
            + stamp(w.state.created.as_ref())
            + stamp(w.state.updated.as_ref())
            + stamp(w.state.last_ack.as_ref().and_then(|a| a.acked_at.as_ref()));
        // A range of one list the rows share: its entries, no allocation per row.
        waiting += w.waiting.len() * size_of::<(Sym, Arc<DispatchRecord>)>();
    }
    let record = chunk(16 + size_of::<Record<WorkflowRow, WorkflowState>>());
    let model_entry = size_of::<(Sym, RecordFile<Record<WorkflowRow, WorkflowState>>)>();
    let per_wf = size_of::<WorkflowView>() + record + model_entry + (wf_strings + waiting) / n;
    let ds: Vec<&DispatchView> = s
        .inboxes
        .iter()
        .chain(std::iter::once(&*s.quarantine))
        .flat_map(|i| i.dispatches.iter())
        .collect();
    let m = ds.len().max(1);
    let mut d_strings = 0;
    for d in &ds {
        let x = &d.dispatch;
        // The file name and the handoff id are one allocation when they agree.
        let name = chunk(16 + d.name.len());
        d_strings +=
            name + if Arc::ptr_eq(&x.handoff_id, &d.name) {
                0
            } else {
                chunk(16 + x.handoff_id.len())
            } + chunk(x.workflow_id.len())
                + chunk(x.summary.len())
                + stamp(x.dispatched_at.as_ref())
                + stamp(x.ack_deadline.as_ref())
                + x.dead.as_ref().map_or(0, |_| chunk(32));
    }
    let dispatch = chunk(16 + size_of::<DispatchRecord>());
    let model_file = size_of::<(Sym, RecordFile<DispatchRecord>)>();
    let per_d = dispatch + size_of::<DispatchView>() + model_file + d_strings / m;
    let rows = per_wf * s.workflows.len() + per_d * ds.len();
    json!({
        "workflow_view": size_of::<WorkflowView>(), "workflow_record": record,
        "workflow_model_entry": model_entry, "workflow_strings": wf_strings / n,
        "workflow_waiting": waiting / n, "per_workflow": per_wf,
        "dispatch_record": dispatch, "dispatch_view": size_of::<DispatchView>(),
        "dispatch_model_file": model_file, "dispatch_strings": d_strings / m,
        "per_dispatch": per_d, "dispatches": ds.len(),
        "rows_mib": (rows as f64 / 1048576.0 * 10.0).round() / 10.0,
    })
}

/// One size, in a fresh process (so resident memory is this root's alone): prints
/// `SCALE {json}` with the first screen, the full load, resident memory and frame times.
fn scale_child(root: &Path, n: usize) {
    let theme = Theme::plain(true);
    let t = Instant::now();
    let mut handle = LiveHandle::start(Root::at(root), WatchMode::Notify, ModelOptions::default());
    let first = handle.latest();
    let mut app = App::new(first.clone(), false, chrono::Utc::now());
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    term.draw(|f| views::draw(f, &app, &theme)).unwrap();
    let first_screen = t.elapsed();
    let first_rows = first.workflows.len();
    let first_loading = first.loading.is_some();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let full = rt.block_on(async {
        loop {
            let s = handle.snapshots.borrow_and_update().clone();
            if s.loading.is_none() {
                return s;
            }
            if tokio::time::timeout(Duration::from_secs(600), handle.snapshots.changed())
                .await
                .is_err()
            {
                panic!("the load did not finish");
            }
        }
    });
    let loaded = t.elapsed();
    assert_eq!(full.workflows.len(), n, "every workflow is in the snapshot");
    app.set_snapshot(full.clone());
    let mut frames = Vec::new();
    for pane in [Pane::Workflows, Pane::Inboxes] {
        app.dispatch(Action::GoPane(pane));
        app.dispatch(Action::Bottom);
        for _ in 0..100 {
            let t = Instant::now();
            term.draw(|f| views::draw(f, &app, &theme)).unwrap();
            frames.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let frame_median = pct(&mut frames, 0.5);
    let rss = rss_kib();
    // The allocator's own count over every arena (to stderr, read by the parent): bytes it took
    // from the system and bytes handed out (live data); the difference is kept free.
    unsafe { libc::malloc_stats() };
    let bytes = row_bytes(&full);
    // How much of it is memory the allocator keeps after frees (not live data): the resident size
    // once glibc has given its free pages back. Diagnosis only: the goal is `rss` above.
    unsafe { libc::malloc_trim(0) };
    let rss_trimmed = rss_kib();
    let watches = handle.watch_count();
    // Profiling: exit here, nothing dropped, so a heap profiler's "leaked" report is exactly what
    // was live when the figures above were taken (`heaptrack BENCH --bench scale-child DIR N`, with BENCH
    // built by `cargo bench --profile profiling`, which keeps line tables).
    if std::env::var_os("PANTHEON_BENCH_EXIT_AT_MEASURE").is_some() {
        std::process::exit(0);
    }
    drop(handle);
    println!(
        "SCALE {}",
        json!({
            "n": n, "first_screen_ms": first_screen.as_secs_f64() * 1e3,
            "first_rows": first_rows, "first_loading": first_loading,
            "loaded_ms": loaded.as_secs_f64() * 1e3, "rss_mib": rss as f64 / 1024.0,
            "frame_median_ms": frame_median, "watches": watches, "bytes": bytes,
            "rss_trimmed_mib": rss_trimmed as f64 / 1024.0
        })
    );
}

/// One `scale-child` process on `root`: its figures, with the allocator's counts added; `None` (and
/// why, printed) when it failed.
fn scale_run(exe: &Path, root: &Path, n: usize) -> Option<serde_json::Value> {
    let out = std::process::Command::new(exe)
        .args(["--bench", "scale-child"])
        .arg(root)
        .arg(n.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("SCALE ")) else {
        println!(
            "scale {n}: the child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    };
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    // `malloc_stats`' totals (its last two counts): system bytes and bytes in use.
    let err = String::from_utf8_lossy(&out.stderr);
    let count = |what: &str| {
        err.lines()
            .filter_map(|l| l.trim().strip_prefix(what))
            .filter_map(|x| x.trim_start_matches([' ', '=']).trim().parse::<f64>().ok())
            .next_back()
            .unwrap_or(0.0)
            / 1048576.0
    };
    let (system, in_use) = (count("system bytes"), count("in use bytes"));
    v["heap_in_use_mib"] = json!(in_use);
    v["heap_free_mib"] = json!(system - in_use);
    Some(v)
}

fn scale() {
    let exe = std::env::current_exe().unwrap();
    let sizes: Vec<usize> = std::env::var("PANTHEON_BENCH_SCALE")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    let mut results: Vec<serde_json::Value> = Vec::new();
    for &n in &sizes {
        let dir = scale_dir(n);
        let t = Instant::now();
        scale_root(dir.path(), n);
        println!(
            "scale: wrote a root of {n} workflows in {:.1} s ({})",
            t.elapsed().as_secs_f64(),
            dir.path().display()
        );
        // Three fresh processes per size (`PANTHEON_BENCH_SCALE_RUNS`): one run right after a
        // root of 100,000 workflows was written read 446 ms for a first screen that takes ~150.
        // The first screen and frame time are the runs' medians; resident memory is the worst.
        let runs: usize = std::env::var("PANTHEON_BENCH_SCALE_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3)
            .max(1);
        let mut all: Vec<serde_json::Value> = Vec::new();
        for _ in 0..runs {
            if let Some(v) = scale_run(&exe, dir.path(), n) {
                all.push(v);
            }
        }
        let Some(mut v) = all.first().cloned() else {
            continue;
        };
        let field = |k: &str| -> Vec<f64> { all.iter().filter_map(|x| x[k].as_f64()).collect() };
        v["first_screen_ms"] = json!(pct(&mut field("first_screen_ms"), 0.5));
        v["frame_median_ms"] = json!(pct(&mut field("frame_median_ms"), 0.5));
        v["rss_mib"] = json!(field("rss_mib").into_iter().fold(0.0, f64::max));
        v["runs"] = json!(all.len());
        println!(
            "scale {n:>7} runs: first screen {:?} ms, RSS {:?} MiB, frame median {:?} ms",
            field("first_screen_ms")
                .iter()
                .map(|x| x.round())
                .collect::<Vec<_>>(),
            field("rss_mib").iter().collect::<Vec<_>>(),
            field("frame_median_ms").iter().collect::<Vec<_>>()
        );
        println!(
            "scale {n:>7} workflows: first screen {:.0} ms ({} rows, loading: {}), fully loaded {:.0} ms, RSS {:.1} MiB, frame median {:.2} ms, {} watches",
            v["first_screen_ms"].as_f64().unwrap_or(0.0),
            v["first_rows"],
            v["first_loading"],
            v["loaded_ms"].as_f64().unwrap_or(0.0),
            v["rss_mib"].as_f64().unwrap_or(0.0),
            v["frame_median_ms"].as_f64().unwrap_or(0.0),
            v["watches"]
        );
        println!(
            "scale {n:>7} row bytes: {}; RSS after malloc_trim {:.1} MiB; heap in use {:.1} MiB, free in the allocator {:.1} MiB",
            v["bytes"],
            v["rss_trimmed_mib"].as_f64().unwrap_or(0.0),
            v["heap_in_use_mib"].as_f64().unwrap_or(0.0),
            v["heap_free_mib"].as_f64().unwrap_or(0.0)
        );
        if n >= 100_000 {
            tmux::scale(dir.path(), n, runs);
        }
        results.push(v);
    }
    let base = results
        .iter()
        .find(|v| v["n"] == 1_000)
        .and_then(|v| v["first_screen_ms"].as_f64());
    for v in &results {
        let n = v["n"].as_u64().unwrap_or(0);
        if n == 1_000 {
            continue;
        }
        let label = if n >= 1000 && n % 1000 == 0 {
            format!("{}k", n / 1000)
        } else {
            n.to_string()
        };
        let first = v["first_screen_ms"].as_f64().unwrap_or(f64::NAN);
        Figure {
            name: &format!("scale_first_screen_{label}"),
            issue: 14,
            goal: &format!("first screen on a root of {n} workflows within 3x of a 1,000-workflow root"),
            median: first,
            unit: "ms",
            baseline: base.map(|b| (b, "1,000 workflows")),
            met: Some(base.is_some_and(|b| first / b <= 3.0)),
            note: &format!(
                "LiveHandle::start + first 200x50 frame, median of {} runs (the 1,000 root's too); fully loaded after {:.0} ms",
                v["runs"],
                v["loaded_ms"].as_f64().unwrap_or(0.0)
            ),
        }
        .print();
        let limit = if n >= 100_000 { 150.0 } else { 60.0 };
        let rss = v["rss_mib"].as_f64().unwrap_or(f64::NAN);
        Figure {
            name: &format!("scale_rss_{label}"),
            issue: 14,
            goal: &format!("resident memory with {n} workflows loaded < {limit} MiB"),
            median: rss,
            unit: "MiB",
            baseline: None,
            met: Some(rss < limit),
            note: &format!(
                "VmRSS of a fresh process after the whole root is read; the worst of {} runs",
                v["runs"]
            ),
        }
        .print();
        let fm = v["frame_median_ms"].as_f64().unwrap_or(f64::NAN);
        Figure {
            name: &format!("scale_frame_{label}"),
            issue: 14,
            goal: &format!("frame render at 200x50 with {n} workflows: median < 5 ms"),
            median: fm,
            unit: "ms",
            baseline: None,
            met: Some(fm < 5.0),
            note: &format!(
                "Workflows and Inboxes panes, 100 draws each; median of {} runs",
                v["runs"]
            ),
        }
        .print();
    }
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench` absent: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("console bench: pass --bench (cargo bench --bench console) to run");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "scale-child") {
        let root = PathBuf::from(&args[i + 1]);
        let n = args[i + 2].parse().unwrap();
        return scale_child(&root, n);
    }
    // `scale-root DIR N`: writes the scale bench's root of N workflows into DIR and keeps it, to
    // profile a `scale-child` run of it (e.g. under heaptrack).
    if let Some(i) = args.iter().position(|a| a == "scale-root") {
        let root = PathBuf::from(&args[i + 1]);
        std::fs::create_dir_all(&root).unwrap();
        return scale_root(&root, args[i + 2].parse().unwrap());
    }
    if args.iter().any(|a| a == "scale") {
        return scale();
    }
    if args.iter().any(|a| a == "render") {
        return render_times();
    }
    if args.iter().any(|a| a == "hook") {
        return hook_latency();
    }
    if args.iter().any(|a| a == "screen") {
        return screen_latency();
    }
    latency(10, 50);
    latency(1000, 3000);
    render_times();
    hook_latency();
    screen_latency();
    idle_cpu();
    let gib = std::env::var("PANTHEON_BENCH_QUEUE_MIB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1024);
    big_queue(gib << 20);
    scale();
}
