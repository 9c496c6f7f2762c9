//! What the bench programs share: their figures, printed as `BENCH` lines (one JSON object each) that
//! `scripts/bench-report.sh` collects and `cargo bench --bench proof -- render` turns into
//! BENCHMARKS.md. Each bench program includes this file with `mod common;`.

use std::io::Write;

use serde_json::json;

/// One figure of BENCHMARKS.md.
pub struct Figure<'a> {
    /// The figure's name (a row of the report).
    pub name: &'a str,
    /// The issue whose goal it measures (a column of the report).
    pub issue: u32,
    /// The goal, in words.
    pub goal: &'a str,
    /// The measured median.
    pub median: f64,
    /// Its unit.
    pub unit: &'a str,
    /// The baseline's figure and name, when there is one (the ratio is the median over it).
    pub baseline: Option<(f64, &'a str)>,
    /// Whether the goal is met, when it is a yes-or-no goal.
    pub met: Option<bool>,
    /// How it was measured.
    pub note: &'a str,
}

impl Figure<'_> {
    /// Prints the figure's `BENCH` line (and flushes, so a bench killed later keeps it).
    pub fn print(&self) {
        let ratio = self.baseline.map(|(b, _)| {
            if b != 0.0 {
                round(self.median / b)
            } else {
                f64::NAN
            }
        });
        let line = json!({"name": self.name, "issue": self.issue, "goal": self.goal,
            "median": round(self.median), "unit": self.unit,
            "baseline": self.baseline.map(|b| round(b.0)), "baseline_name": self.baseline.map(|b| b.1),
            "ratio": ratio, "met": self.met, "note": self.note});
        println!("BENCH {line}");
        let _ = std::io::stdout().flush();
    }
}

/// A figure as the report shows it: whole above 100, else to three decimals.
pub fn round(x: f64) -> f64 {
    if x.abs() >= 100.0 {
        x.round()
    } else {
        (x * 1000.0).round() / 1000.0
    }
}
