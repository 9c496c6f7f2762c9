//! The pause goals (docs/PROTOCOL.md §2.14), in process through the engine, each beside a baseline
//! measured in the same run. Prints `BENCH {json}` lines (scripts/bench-report.sh collects them).
//!
//! - `pause_effect_p99`: a god with 10,000 waiting dispatches (deadlines an hour away) is paused;
//!   the delay until the supervisor's check (`Pauses::load` + `god_paused`, what each pass of
//!   `serve` reads) sees it, p99 over repeated pause/resume rounds (as many as fit in
//!   `PAUSE_BENCH_SECS`, default 90 s). Baseline: the same rounds' median.
//! - `resume_rate_error`: `resume --rate 100/s` of `PAUSE_BENCH_HELD` held dispatches (default 1,000;
//!   10,000 is the goal's size and takes 100 s): the measured rate against the asked one.
//! - `pause_cycle_overhead`: the submit + ack cycle on a root whose `paused.json` holds 100 ended
//!   pauses and none in force, against the same cycle on a root with no `paused.json` (baseline).
//!
//! `cargo bench --bench pause`

use std::path::Path;
use std::time::{Duration, Instant};

use pantheon::engine::{Actor, Conductor, PauseTarget, Pauses, Root, parse_pause_rate};
use serde_json::{Value, json};

mod common;
use common::Figure;

const WAITING: usize = 10_000;

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

const FLOW: &str = "workflow:\n  id: bench-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1h, max_deliveries: 3}\n    - {id: check, god: iris}\n";

/// A root with the bench flow and no rules.
fn root(dir: &Path) -> Conductor {
    let c = Conductor::new(Root::at(dir));
    c.init().unwrap();
    std::fs::write(dir.join("conductor/workflows/bench-flow.yaml"), FLOW).unwrap();
    for e in std::fs::read_dir(dir.join("conductor/rules")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    c
}

fn handoff(hid: &str, wf: &str, step: &str, to: &str) -> Value {
    json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": to, "step": step,
           "context": {"summary": "bench", "decisions": [], "artifacts": []},
           "routing": {"workflow_definition": "bench-flow"}})
}

/// Clones the workflow `wf0` (its state and the dispatch `hid0` at `rel`) `n` times.
fn clone_many(dir: &Path, wf0: &str, hid0: &str, rel: &str, n: usize, tag: &str) {
    let state0 = std::fs::read_to_string(dir.join(format!("conductor/state/{wf0}.json"))).unwrap();
    let disp0 = std::fs::read_to_string(dir.join(rel).join(format!("{hid0}.json"))).unwrap();
    for i in 1..=n {
        let hid = format!("hof_20261206_{tag}{i:05}");
        let wf = format!("wf_{tag}_{i}");
        let st: Value =
            serde_json::from_str(&state0.replace(hid0, &hid).replace(wf0, &wf)).unwrap();
        write(&dir.join(format!("conductor/state/{wf}.json")), &st);
        let d: Value = serde_json::from_str(&disp0.replace(hid0, &hid).replace(wf0, &wf)).unwrap();
        write(&dir.join(rel).join(format!("{hid}.json")), &d);
    }
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn pause_effect() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let c = root(dir);
    c.submit_handoff(&handoff(
        "hof_20261206_w00000",
        "wf_w_0",
        "plan",
        "hephaestus",
    ))
    .unwrap();
    clone_many(
        dir,
        "wf_w_0",
        "hof_20261206_w00000",
        "conductor/pending/hephaestus",
        WAITING - 1,
        "w",
    );
    let god = PauseTarget::god(&pantheon::engine::GodName::parse("hephaestus").unwrap());
    let budget = Duration::from_secs(
        std::env::var("PAUSE_BENCH_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(90),
    );
    let start = Instant::now();
    let (mut delays, mut resumes) = (Vec::new(), Vec::new());
    while delays.len() < 3 || (start.elapsed() < budget && delays.len() < 100) {
        let r = Root::at(dir);
        let t0 = Instant::now();
        let watcher = std::thread::spawn(move || {
            loop {
                if Pauses::load(&r).unwrap().god_paused("hephaestus").is_some() {
                    return Instant::now();
                }
            }
        });
        c.pause(&god, None, "bench").unwrap();
        let seen = watcher.join().unwrap();
        delays.push((seen - t0).as_secs_f64() * 1000.0);
        let t1 = Instant::now();
        let res = c.resume(&god, None).unwrap();
        assert!(res.errors.is_empty(), "{:?}", res.errors);
        resumes.push(t1.elapsed().as_secs_f64());
    }
    let n = delays.len();
    let p50 = percentile(&mut delays.clone(), 0.5);
    let p99 = percentile(&mut delays, 0.99);
    let resume_med = percentile(&mut resumes, 0.5);
    eprintln!(
        "pause effect over {n} rounds: p50 {p50:.2} ms, p99 {p99:.2} ms; resume of {WAITING} frozen: median {resume_med:.2} s"
    );
    Figure { name: "pause_effect_p99", issue: 44, goal: "a pause of a god with 10,000 waiting dispatches takes effect for the supervisor within 50 ms (p99)", median: p99, unit: "ms", baseline: Some((p50, "median of the same rounds")), met: Some(p99 < 50.0), note: &format!(
            "{n} pause/resume rounds; each resume shifted {WAITING} frozen deadlines in {resume_med:.2} s (median)"
        ) }.print();
}

fn resume_rate() {
    let held: usize = std::env::var("PAUSE_BENCH_HELD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let c = root(dir);
    let iris = PauseTarget::god(&pantheon::engine::GodName::parse("iris").unwrap());
    c.pause(&iris, None, "bench").unwrap();
    let r = c
        .submit_handoff(&handoff("hof_20261206_h00000", "wf_h_0", "build", "iris"))
        .unwrap();
    assert_eq!(
        serde_json::to_value(&r).unwrap()["status"],
        "awaiting_approval"
    );
    clone_many(
        dir,
        "wf_h_0",
        "hof_20261206_h00000",
        "conductor/pending/_quarantine",
        held - 1,
        "h",
    );
    let asked = parse_pause_rate("100/s").unwrap();
    let t = Instant::now();
    let res = c.resume(&iris, Some(asked)).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(res.released.len(), held, "{:?}", res.errors);
    // The n-th release is due at n / rate: n releases span (n - 1) / rate.
    let rate = (held - 1) as f64 / secs;
    let off = (rate - asked).abs() / asked * 100.0;
    eprintln!("resume of {held} held at 100/s: {secs:.2} s, {rate:.2}/s ({off:.2} % off)");
    Figure {
        name: "resume_rate_error",
        issue: 44,
        goal: "resume of held dispatches at 100/s within 5 % of the rate",
        median: rate,
        unit: "/s",
        baseline: Some((asked, "the asked rate")),
        met: Some(off <= 5.0),
        note: &format!(
            "{held} held dispatches released in {secs:.2} s ({off:.2} % off the asked rate)"
        ),
    }
    .print();
}

fn cycles(c: &Conductor, n: usize, tag: &str) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        let hid = format!("hof_20261206_{tag}{i:05}");
        let wf = format!("wf_{tag}_{}", i % 10);
        let h = json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "marvin",
            "step": format!("s{i}"), "context": {"summary": "bench", "decisions": [format!("d{i}")], "artifacts": []}});
        c.submit_handoff(&h).unwrap();
        let a = json!({"ack_id": format!("ack_20261206_{tag}{i:05}"), "handoff_id": hid,
                       "workflow_id": wf, "status": "accepted"});
        c.ack_handoff(&a, Actor::Recipient).unwrap();
    }
    t.elapsed().as_secs_f64() * 1000.0 / n as f64
}

fn cycle_overhead() {
    let n: usize = std::env::var("CONDUCTOR_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plain = Conductor::new(Root::at(a.path()));
    plain.init().unwrap();
    let ended = Conductor::new(Root::at(b.path()));
    ended.init().unwrap();
    // 100 pauses made and ended: paused.json holds them, nothing is in force.
    let t = PauseTarget::peer("elsewhere").unwrap();
    for _ in 0..100 {
        ended.pause(&t, None, "bench").unwrap();
        ended.resume(&t, None).unwrap();
    }
    // Alternate the two roots in rounds so drift of the machine hits both.
    let (mut base, mut with) = (Vec::new(), Vec::new());
    for round in 0..5 {
        base.push(cycles(&plain, n / 5, &format!("a{round}")));
        with.push(cycles(&ended, n / 5, &format!("b{round}")));
    }
    let base_med = percentile(&mut base, 0.5);
    let with_med = percentile(&mut with, 0.5);
    let over = (with_med - base_med) / base_med * 100.0;
    eprintln!(
        "submit + ack: {base_med:.3} ms without paused.json, {with_med:.3} ms with 100 ended pauses ({over:+.1} %)"
    );
    Figure {
        name: "pause_cycle_overhead",
        issue: 44,
        goal: "pause adds nothing measurable to the submit + ack cycle when nothing is paused",
        median: with_med,
        unit: "ms",
        baseline: Some((base_med, "the same cycle, no paused.json")),
        met: Some(over < 5.0),
        note: &format!("median of 5 rounds of {} cycles each; {over:+.1} %", n / 5),
    }
    .print();
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    if "pause_effect".contains(&filter) || filter.is_empty() {
        pause_effect();
    }
    if "resume_rate".contains(&filter) || filter.is_empty() {
        resume_rate();
    }
    if "cycle_overhead".contains(&filter) || filter.is_empty() {
        cycle_overhead();
    }
}
