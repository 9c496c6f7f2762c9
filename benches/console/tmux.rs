//! The console in a real terminal (tmux): a large root until fully loaded (and its peak resident
//! memory), and an event until it is on screen. Each figure can be measured beside a baseline
//! binary in the same run (`PANTHEON_BENCH_BASELINE_BIN=/path/to/an/older/pantheon`), the two
//! alternating, so both see the same machine.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::common::Figure;

/// The binary measured: the one this bench was built with.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pantheon"))
}

/// The binary to compare with, if one is named.
pub fn baseline() -> Option<PathBuf> {
    std::env::var_os("PANTHEON_BENCH_BASELINE_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

pub fn have_tmux() -> bool {
    Command::new("tmux").arg("-V").output().is_ok()
}

/// One tmux server with the console in its only pane, 200x50; killed when dropped.
struct Session {
    sock: String,
    pid: Option<u32>,
}

impl Session {
    fn start(bin: &Path, root: &Path, tag: &str) -> Self {
        let sock = format!("pantheon-{tag}-{}", std::process::id());
        let cmd = format!(
            "exec env PANTHEON_LOG=/dev/null {} --root {} console",
            bin.display(),
            root.display()
        );
        Command::new("tmux")
            .args([
                "-L",
                &sock,
                "new-session",
                "-d",
                "-s",
                "b",
                "-x",
                "200",
                "-y",
                "50",
                &cmd,
            ])
            .status()
            .unwrap();
        let pid = Command::new("tmux")
            .args(["-L", &sock, "list-panes", "-F", "#{pane_pid}"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
        Self { sock, pid }
    }

    fn screen(&self) -> String {
        Command::new("tmux")
            .args(["-L", &self.sock, "capture-pane", "-p"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux")
            .args(["-L", &self.sock, "send-keys", keys])
            .status()
            .unwrap();
    }

    /// A line of the console's `/proc` status, in MiB.
    fn status_mib(&self, field: &str) -> Option<f64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid?)).ok()?;
        let kib: f64 = s
            .lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    }

    /// A control-mode client: every `%output` line of the pane, with the instant it was read.
    fn control(&self) -> (Child, mpsc::Receiver<(Instant, String)>) {
        let mut child = Command::new("tmux")
            .args(["-L", &self.sock, "-C", "attach", "-t", "b"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if line.starts_with("%output") && tx.send((Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        (child, rx)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .status();
    }
}

/// One console on `root` in tmux, until the header's "loading" note is gone: (first screen, fully
/// loaded) in ms and the peak resident memory (VmHWM) in MiB; `None` when it did not load in 10
/// minutes. The screen is read every 50 ms (`capture-pane`), so the times are that coarse.
fn load_once(bin: &Path, root: &Path) -> Option<(f64, f64, f64)> {
    let t = Instant::now();
    let s = Session::start(bin, root, "load");
    let mut first = None;
    loop {
        let screen = s.screen();
        let at = t.elapsed().as_secs_f64() * 1e3;
        if first.is_none() && screen.contains("Workflows") {
            first = Some(at);
        }
        if first.is_some() && !screen.contains("loading") {
            return Some((first?, at, s.status_mib("VmHWM:")?));
        }
        if t.elapsed() > Duration::from_secs(600) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The root of `n` workflows in the real console: fully loaded and peak memory, `runs` times
/// (alternating with the baseline binary when there is one); prints the figures and BENCH rows.
pub fn scale(root: &Path, n: usize, runs: usize) {
    if !have_tmux() {
        println!("scale in tmux: skipped (needs tmux)");
        return;
    }
    let base = baseline();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        if let Some(b) = &base
            && let Some(r) = load_once(b, root)
        {
            theirs.push(r);
        }
        if let Some(r) = load_once(&bin(), root) {
            ours.push(r);
        }
    }
    let show = |v: &[(f64, f64, f64)]| {
        v.iter()
            .map(|r| format!("{:.0}/{:.0} ms {:.1} MiB", r.0, r.1, r.2))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "scale {n} in tmux (first screen/fully loaded, peak RSS): ours {}",
        show(&ours)
    );
    if base.is_some() {
        println!("scale {n} in tmux, the baseline binary: {}", show(&theirs));
    }
    if ours.is_empty() {
        return;
    }
    let loaded = median(&mut ours.iter().map(|r| r.1).collect::<Vec<_>>());
    let peak = ours.iter().map(|r| r.2).fold(0.0, f64::max);
    let base_loaded =
        (!theirs.is_empty()).then(|| median(&mut theirs.iter().map(|r| r.1).collect::<Vec<_>>()));
    let base_peak = (!theirs.is_empty()).then(|| theirs.iter().map(|r| r.2).fold(0.0, f64::max));
    let label = format!("{}k", n / 1000);
    let baseline = "the baseline binary, alternating runs";
    Figure {
        name: &format!("console_loaded_{label}_tmux"),
        issue: 48,
        goal: &format!("the real console in tmux fully loaded on a root of {n} workflows < 5 s"),
        median: loaded,
        unit: "ms",
        baseline: base_loaded.map(|b| (b, baseline)),
        met: Some(loaded < 5000.0),
        note: &format!(
            "200x50 tmux pane, until the header's loading note is gone (screen read every 50 ms); median of {} runs",
            ours.len()
        ),
    }
    .print();
    Figure {
        name: &format!("console_peak_rss_{label}_tmux"),
        issue: 48,
        goal: &format!(
            "peak resident memory of the real console on a root of {n} workflows < 150 MiB"
        ),
        median: peak,
        unit: "MiB",
        baseline: base_peak.map(|b| (b, baseline)),
        met: Some(peak < 150.0),
        note: &format!(
            "VmHWM of the console process once loaded; the worst of {} runs",
            ours.len()
        ),
    }
    .print();
}

/// A marker of 12 letters for sample `i`: each letter differs from the same letter of the markers
/// of the 25 samples before, so the rows' shift redraws it whole (the terminal gets it as one run).
fn marker(i: usize) -> String {
    (0..12)
        .map(|k| (b'a' + ((i * 7 + k * 3) % 26) as u8) as char)
        .collect()
}

/// Event -> screen on one binary: `samples` bus posts, each after a quiet moment, until the
/// console's output carrying it reached the terminal (a tmux control-mode client reads the pane's
/// output as the console writes it). Latencies in ms.
fn screen_once(bin: &Path, root: &Path, samples: usize) -> Vec<f64> {
    use pantheon::engine::{Bus, MessageType};
    let s = Session::start(bin, root, "screen");
    std::thread::sleep(Duration::from_millis(1500));
    s.keys("3");
    std::thread::sleep(Duration::from_millis(500));
    let (mut control, rx) = s.control();
    std::thread::sleep(Duration::from_millis(300));
    let bus = Bus::open(&pantheon::Root::at(root), &"bench".parse().unwrap());
    let _ = bus.init();
    let mut out = Vec::new();
    for i in 0..samples {
        while rx.try_recv().is_ok() {}
        let m = marker(i);
        let t0 = Instant::now();
        bus.post(
            MessageType::Progress,
            "probe",
            json!({"current_subtask": m}),
        )
        .unwrap();
        let deadline = t0 + Duration::from_secs(2);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((at, line)) if line.contains(&m) => {
                    out.push((at - t0).as_secs_f64() * 1e3);
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // Quiet between events (and off the console's once-a-second redraw's beat).
        std::thread::sleep(Duration::from_millis(150 + (i % 7) as u64 * 17));
    }
    let _ = control.kill();
    let _ = control.wait();
    out
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

/// Event to screen in tmux: a message posted to a track until the console's Bus pane drew it, on
/// a root of 1,000 workflows (and the baseline binary's, when named, in alternating rounds).
pub fn screen(root: &Path) {
    if !have_tmux() {
        println!("event -> screen: skipped (needs tmux)");
        return;
    }
    let samples: usize = std::env::var("PANTHEON_BENCH_SCREEN_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let base = baseline();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        if let Some(b) = &base {
            theirs.extend(screen_once(b, root, samples / 2));
        }
        ours.extend(screen_once(&bin(), root, samples / 2));
    }
    let figures = |v: &mut Vec<f64>| {
        let max = v.iter().cloned().fold(f64::NAN, f64::max);
        (pct(v, 0.5), pct(v, 0.9), pct(v, 0.99), max, v.len())
    };
    let (p50, p90, p99, max, n) = figures(&mut ours);
    println!(
        "event -> screen in tmux: p50 {p50:.1} ms, p90 {p90:.1}, p99 {p99:.1}, max {max:.1} ({n} of {samples} seen)"
    );
    let base_p99 = (!theirs.is_empty()).then(|| {
        let (b50, b90, b99, bmax, bn) = figures(&mut theirs);
        println!("event -> screen in tmux, the baseline binary: p50 {b50:.1} ms, p90 {b90:.1}, p99 {b99:.1}, max {bmax:.1} ({bn} of {samples} seen)");
        b99
    });
    if n == 0 {
        return;
    }
    Figure {
        name: "event_to_screen_tmux_p99",
        issue: 48,
        goal: "a change to a watched file on screen in a real terminal within one frame at 60 Hz (p99 < 16 ms)",
        median: p99,
        unit: "ms",
        baseline: base_p99.map(|b| (b, "the baseline binary, alternating rounds")),
        met: Some(p99 < 16.0),
        note: &format!(
            "a bus post until the console's output carrying it reached tmux (a control-mode client); p50 {p50:.1} ms, p90 {p90:.1} ms, max {max:.1} ms; {n} of {samples} seen; 200x50, Bus pane, 1,000 workflows"
        ),
    }
    .print();
}
