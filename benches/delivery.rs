//! The delivery goal: `pantheon serve` on a root with 10,000 waiting dispatches redelivers within
//! 100 ms of the deadline (p99), idles under 1 % CPU, stays under 50 MB. Prints `BENCH {json}` lines
//! (scripts/bench-report.sh collects them), beside JetStream's default AckWait of 30 s.
//!
//! The root is built from one real submit, cloned: 10,000 dispatches whose deadline is an hour away,
//! plus `DUE` dispatches whose deadlines fall over 10 s once the supervisor runs. The delay of a
//! redelivery is the journal entry's time minus the deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

mod common;
use common::Figure;

const WAITING: usize = 10_000;
const DUE: usize = 200;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pantheon"))
}

fn pantheon(root: &Path, args: &[&str], stdin: Option<&Value>) -> Value {
    let mut c = Command::new(bin());
    c.arg("--root").arg(root).args(args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    if let Some(v) = stdin {
        serde_json::to_writer(child.stdin.take().unwrap(), v).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{args:?}");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

/// CPU time (user + system) of `pid` in seconds, from /proc.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

fn status_kb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    pantheon(root, &["init"], None);
    std::fs::write(
        root.join("conductor/workflows/bench-flow.yaml"),
        "workflow:\n  id: bench-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1h, max_deliveries: 3}\n",
    )
    .unwrap();
    for e in std::fs::read_dir(root.join("conductor/rules")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let hid0 = "hof_20260614_b00000";
    pantheon(
        root,
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": hid0, "workflow_id": "wf_bench_0", "from_god": "thoth",
            "to_god": "hephaestus", "step": "plan", "context": {"summary": "planned", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "bench-flow"}}),
        ),
    );
    let state0 = std::fs::read_to_string(root.join("conductor/state/wf_bench_0.json")).unwrap();
    let inbox = root.join("conductor/pending/hephaestus");
    let disp0 = std::fs::read_to_string(inbox.join(format!("{hid0}.json"))).unwrap();
    let total = WAITING + DUE;
    let t_build = Instant::now();
    let mut deadlines = std::collections::HashMap::new();
    // The waiting dispatches first, then the due ones, so their deadlines are set relative to the moment
    // the supervisor starts (a slow build of the root must not put them in the past).
    let mut start = Utc::now() + chrono::Duration::seconds(15);
    for i in (DUE + 1..total).chain(1..=DUE) {
        if i == 1 {
            start = Utc::now() + chrono::Duration::seconds(15);
        }
        let hid = format!("hof_20260614_b{i:05}");
        let wf = format!("wf_bench_{i}");
        let st: Value =
            serde_json::from_str(&state0.replace(hid0, &hid).replace("wf_bench_0", &wf)).unwrap();
        write(&root.join(format!("conductor/state/{wf}.json")), &st);
        let mut d: Value =
            serde_json::from_str(&disp0.replace(hid0, &hid).replace("wf_bench_0", &wf)).unwrap();
        if i <= DUE {
            // Deadlines spread over 10 s, starting 15 s from now (after the supervisor's first scan).
            let at = start + chrono::Duration::milliseconds((i as i64) * 10_000 / DUE as i64);
            d["ack_deadline"] = json!(ts(at));
            deadlines.insert(hid.clone(), at);
        }
        write(&inbox.join(format!("{hid}.json")), &d);
    }
    eprintln!(
        "built {total} dispatches in {:.1} s",
        t_build.elapsed().as_secs_f64()
    );

    let mut child = Command::new(bin())
        .arg("--root")
        .arg(root)
        .args(["serve", "--log"])
        .arg(root.join("serve.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let journal = root.join("conductor/journal.jsonl");
    let redelivered = |journal: &Path| -> Vec<Value> {
        std::fs::read_to_string(journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["action"] == "redeliver")
            .collect()
    };
    let wait_until = start + chrono::Duration::seconds(25);
    while Utc::now() < wait_until && redelivered(&journal).len() < DUE {
        std::thread::sleep(Duration::from_millis(200));
    }
    let entries = redelivered(&journal);
    let mut delays: Vec<f64> = entries
        .iter()
        .filter_map(|e| {
            let hid = e["targets"]["handoff_id"].as_str()?;
            let at = DateTime::parse_from_rfc3339(e["at"].as_str()?).ok()?;
            let due = deadlines.get(hid)?;
            Some((at.with_timezone(&Utc) - *due).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    delays.sort_by(|a, b| a.total_cmp(b));
    let p = |q: f64| -> f64 {
        if delays.is_empty() {
            f64::NAN
        } else {
            delays[((delays.len() - 1) as f64 * q).round() as usize]
        }
    };
    let (p50, p99) = (p(0.5), p(0.99));
    eprintln!(
        "redelivered {} of {}: delay after deadline p50 {p50:.1} ms, p99 {p99:.1} ms, max {:.1} ms",
        delays.len(),
        DUE,
        delays.last().copied().unwrap_or(f64::NAN)
    );

    // Idle: nothing due for an hour; measure CPU over 20 s.
    std::thread::sleep(Duration::from_secs(2));
    let c0 = cpu_secs(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(20));
    let idle_pct = (cpu_secs(pid) - c0) / t0.elapsed().as_secs_f64() * 100.0;
    let rss_mb = status_kb(pid, "VmHWM:") / 1024.0;
    eprintln!("idle CPU {idle_pct:.2} %, peak RSS {rss_mb:.1} MB");
    // SAFETY: kill(2) with a constant signal on our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "serve exits 0 on SIGTERM");

    let complete = delays.len() == DUE;
    Figure { name: "redelivery_delay_p99", issue: 16, goal: "supervisor on 10,000 waiting dispatches: redelivery within 100 ms of the deadline (p99)", median: p99, unit: "ms", baseline: Some((30_000.0, "JetStream default AckWait (30 s)")), met: Some(complete && p99 < 100.0), note: &format!(
            "{DUE} deadlines over 10 s among {WAITING} waiting; p50 {p50:.1} ms; {} of {DUE} redelivered",
            delays.len(),
        ) }.print();
    Figure {
        name: "supervisor_idle_cpu",
        issue: 16,
        goal: "supervisor idle CPU on 10,000 waiting dispatches < 1 %",
        median: idle_pct,
        unit: "%",
        baseline: None,
        met: Some(idle_pct < 1.0),
        note: "20 s with nothing due (deadlines 1 h away), /proc utime+stime",
    }
    .print();
    Figure {
        name: "supervisor_rss",
        issue: 16,
        goal: "supervisor memory on 10,000 waiting dispatches < 50 MB",
        median: rss_mb,
        unit: "MB",
        baseline: None,
        met: Some(rss_mb < 50.0),
        note: "peak RSS (VmHWM)",
    }
    .print();
}
