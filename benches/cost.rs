//! What the ledger and the budget hook cost.
//!
//! 1. `pantheon cost --by god` on a root whose ledger holds the reports of 100,000 workflows (five a
//!    workflow: 500,000 lines), answered by the real binary, with the summary in place (the normal
//!    case) and without it (the whole ledger folded: what a lost or deleted summary costs once).
//! 2. A submit + ack cycle with no budget declared and no usage, next to the same cycle carrying a
//!    usage report, and one under a workflow budget; and the hook's own no-budget check, timed alone,
//!    as a share of the plain cycle.
//!
//! 3. The console on that ledger: the live model opened (the summary and the ledger's last 16 MiB
//!    read), one appended line followed (only it is read), and the Ledger pane drawn at 200x50.
//!
//! `cargo bench --bench cost` (`COST_BENCH_WORKFLOWS`, default 100000; `COST_BENCH_CYCLES`, default 300).

use std::process::Command;
use std::time::Instant;

use pantheon::engine::{
    Actor, Conductor, Root, budget_hold,
    ledger::{self, Line},
};

use serde_json::json;

mod common;
use common::Figure;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const GODS: [&str; 8] = [
    "thoth",
    "hephaestus",
    "marvin",
    "hermes",
    "iris",
    "caduceus",
    "mercer",
    "rheta",
];
const MODELS: [&str; 4] = [
    "claude-opus-4-5",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "gpt-4.1",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `pantheon --root ROOT cost --by god --json` `n` times; the median wall time in ms.
fn time_cost_command(root: &std::path::Path, n: usize) -> f64 {
    let bin = env!("CARGO_BIN_EXE_pantheon");
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let out = Command::new(bin)
            .arg("--root")
            .arg(root)
            .args(["cost", "--by", "god", "--json"])
            .output()
            .expect("pantheon cost runs");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    median(times)
}

fn ledger_bench() {
    let workflows = env_or("COST_BENCH_WORKFLOWS", 100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Root::at(dir.path().join("root"));
    Conductor::new(root.clone()).init().expect("init");
    let t = Instant::now();
    let mut lines = Vec::with_capacity(50_000);
    let mut n = 0usize;
    for w in 0..workflows {
        for s in 0..5 {
            lines.push(Line {
                key: format!("handoff-hof_20261201_{n:08x}"),
                at: format!("2026-11-{:02}T10:00:00.000000Z", 1 + (w % 28)),
                source: "handoff".into(),
                workflow_id: format!("wf_bench_{w}"),
                definition: Some(format!("def-{}", w % 12)),
                step: Some(format!("step{s}")),
                god: GODS[(w + s) % GODS.len()].into(),
                model: Some(MODELS[n % MODELS.len()].into()),
                input_tokens: 40_000 + (n % 997) as u64,
                output_tokens: 3_000,
                cache_read_tokens: 80_000,
                cost_micros: 250_000 + (n % 1000) as u64,
                priced: true,
                ..Default::default()
            });
            n += 1;
            if lines.len() == 50_000 {
                ledger::append_many(&root, &lines).expect("append");
                lines.clear();
            }
        }
    }
    ledger::append_many(&root, &lines).expect("append");
    let build = t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(ledger::ledger_path(&root))
        .map(|m| m.len())
        .unwrap_or(0);
    let warm = time_cost_command(&root.dir, 9);
    let t = Instant::now();
    let s = ledger::summary(&root).expect("summary");
    let in_process = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(s.total.reports as usize, n);
    // Without the summary: the first reader folds the whole ledger (and rewrites the summary).
    let mut cold = Vec::new();
    for _ in 0..3 {
        std::fs::remove_file(ledger::summary_path(&root)).expect("remove summary");
        cold.push(time_cost_command(&root.dir, 1));
    }
    let cold = median(cold);
    println!(
        "ledger: {workflows} workflows, {n} reports, {:.1} MiB (built in {build:.1} s)",
        bytes as f64 / 1048576.0
    );
    println!(
        "  pantheon cost --by god (summary in place):   {warm:>8.1} ms per command (median of 9; bound 200 ms)"
    );
    println!("  the summary read in process:                 {in_process:>8.2} ms");
    println!(
        "  pantheon cost --by god (no summary, cold):   {cold:>8.1} ms per command ({:.1}x the warm one)",
        cold / warm
    );
    Figure {
        name: "cost_by_god_100k_workflows",
        issue: 31,
        goal: "`pantheon cost --by god` on a root with 100,000 workflows < 200 ms",
        median: warm,
        unit: "ms",
        baseline: Some((
            cold,
            "the same command with no summary (the whole ledger folded)",
        )),
        met: Some(warm < 200.0),
        note: &format!(
            "{n} reports, {:.1} MiB ledger; the real binary, median of 9",
            bytes as f64 / 1048576.0
        ),
    }
    .print();
    console_bench(&root, warm);
}

/// The console on the ledger `root` holds (its summary in place): the live model's first read, one
/// appended line followed, and the Ledger pane drawn.
fn console_bench(root: &Root, warm_command_ms: f64) {
    use pantheon::testing::console::app::App;
    use pantheon::testing::console::keymap::{Action, Pane};
    use pantheon::testing::console::theme::Theme;
    use pantheon::testing::live::{LiveModel, ModelOptions};
    use std::io::Write;
    let opened: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            let m = LiveModel::open(Root::at(&root.dir), ModelOptions::default());
            assert!(m.snapshot().ledger.total.reports > 0);
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let opened = median(opened);
    let mut m = LiveModel::open(Root::at(&root.dir), ModelOptions::default());
    let path = ledger::ledger_path(root);
    let mut follow = Vec::new();
    for i in 0..50 {
        let line = Line {
            key: format!("handoff-hof_20261202_{i:06x}"),
            at: "2026-12-02T10:00:00Z".into(),
            source: "handoff".into(),
            workflow_id: format!("wf_bench_{i}"),
            god: GODS[i % GODS.len()].into(),
            cost_micros: 1_000,
            priced: true,
            ..Default::default()
        };
        let mut text = serde_json::to_vec(&line).expect("line");
        text.push(b'\n');
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("ledger");
        f.write_all(&text).expect("append");
        let t = Instant::now();
        assert!(m.apply(std::slice::from_ref(&path)).is_some());
        follow.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let follow = median(follow);
    let mut app = App::new(m.snapshot(), false, chrono::Utc::now());
    app.dispatch(Action::GoPane(Pane::Ledger));
    let theme = Theme::plain(true);
    let mut term =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 50)).expect("terminal");
    let draws: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            term.draw(|f| pantheon::testing::console::views::draw(f, &app, &theme))
                .expect("draw");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let draw = median(draws);
    println!(
        "  console: model opened on it in {opened:>8.1} ms (median of 3; {:.2}x the warm cost command)",
        opened / warm_command_ms
    );
    println!("  console: one appended line followed in {follow:>6.3} ms (median of 50)");
    println!("  console: the Ledger pane drawn at 200x50 in {draw:>6.3} ms (median of 200)");
}

fn cycle(c: &Conductor, i: usize, tag: &str, usage: bool, def: Option<&str>) {
    let hid = format!("hof_20261202_{i:06x}");
    // A definition's workflow takes one handoff per step: a workflow per cycle there.
    let wf = match def {
        Some(_) => format!("wf_{tag}_{i}"),
        None => format!("wf_{tag}_{}", i % 10),
    };
    let mut h = json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": "thoth",
        "to_god": "marvin", "step": format!("s{i}"),
        "context": {"summary": "bench", "decisions": [format!("d{i}")], "artifacts": []},
    });
    if let Some(d) = def {
        h["routing"] = json!({"workflow_definition": d, "workflow_step": "b"});
        h["step"] = json!("a");
    }
    if usage {
        h["usage"] =
            json!({"input_tokens": 1000, "output_tokens": 100, "model": "claude-sonnet-4-5"});
    }
    c.submit_handoff(&h).expect("submit");
    let a =
        json!({"ack_id": format!("ack_20261202_{i:06x}"), "handoff_id": hid, "status": "accepted"});
    c.ack_handoff(&a, Actor::Recipient).expect("ack");
}

fn cycles_bench() {
    let cycles = env_or("COST_BENCH_CYCLES", 300);
    let dir = tempfile::tempdir().expect("temp dir");
    let c = Conductor::new(Root::at(dir.path().join("root")));
    c.init().expect("init");
    std::fs::write(
        c.root().workflows_dir().join("budgeted.yaml"),
        "workflow:\n  id: budgeted\n  budget: {cost_usd: 1000000}\n  steps:\n    - id: a\n      god: thoth\n    - id: b\n      god: marvin\n",
    )
    .expect("definition");
    let mut rates = Vec::new();
    let runs: [(&str, bool, Option<&str>); 3] = [
        ("plain", false, None),
        ("usage", true, None),
        ("budget", true, Some("budgeted")),
    ];
    for (k, (tag, usage, def)) in runs.iter().enumerate() {
        let t = Instant::now();
        for i in 0..cycles {
            cycle(&c, k * 100_000 + i, tag, *usage, *def);
        }
        rates.push(t.elapsed().as_secs_f64() * 1000.0 / cycles as f64);
    }
    // The no-budget check alone, as submit runs it for every dispatch.
    let n = 200_000;
    let mut warnings = Vec::new();
    let t = Instant::now();
    for _ in 0..n {
        let h = budget_hold(
            c.root(),
            "wf_plain_1",
            None,
            None,
            "marvin",
            None,
            &mut warnings,
        )
        .expect("hold");
        std::hint::black_box(h);
    }
    let check_ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    println!("submit + ack cycles: {cycles} each");
    println!(
        "  no usage, no budget:         {:>7.2} ms per cycle (baseline)",
        rates[0]
    );
    println!(
        "  usage report, no budget:     {:>7.2} ms per cycle ({:.2}x)",
        rates[1],
        rates[1] / rates[0]
    );
    println!(
        "  usage report, under budget:  {:>7.2} ms per cycle ({:.2}x)",
        rates[2],
        rates[2] / rates[0]
    );
    println!(
        "  the no-budget check alone:   {check_ns:>7.0} ns per dispatch ({:.5}% of the baseline cycle)",
        check_ns / (rates[0] * 1e6) * 100.0
    );
    Figure {
        name: "budget_check_share_of_submit_ack",
        issue: 31,
        goal: "no budget declared: no measurable cost in the submit + ack cycle",
        median: check_ns / 1000.0,
        unit: "us",
        baseline: Some((
            rates[0] * 1000.0,
            "one submit + ack cycle with no usage and no budget",
        )),
        met: Some(check_ns / (rates[0] * 1e6) < 0.01),
        note: &format!(
            "the hook's no-budget check timed alone, {n} runs; the cycle median of {cycles}"
        ),
    }
    .print();
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if only.as_deref().is_none_or(|f| "ledger".contains(f)) {
        ledger_bench();
    }
    if only.as_deref().is_none_or(|f| "cycles".contains(f)) {
        cycles_bench();
    }
}
