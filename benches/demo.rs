//! Benchmarks of the demo simulation and the root validator, a plain program:
//! `cargo bench --bench demo`.
//!
//! 1. Cost of one simulation tick, unpaced (`Sim::step` in a loop): the speed above which a paced run
//!    falls behind its schedule is about `100 ms / cost`.
//! 2. `validate_root` on the root the simulation left behind (files per second).
//!
//! `DEMO_BENCH_QUICK=1` runs fewer ticks.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use pantheon::engine::{Root, validate_root};
use pantheon::testing::demo::{Sim, SimConfig, TICKS_PER_SECOND};

fn main() {
    let ticks: u64 = if std::env::var_os("DEMO_BENCH_QUICK").is_some() {
        300
    } else {
        1200
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = Root::at(dir.path());
    // Speed 100: the short leases the simulation waits on expire quickly, so waits do not distort
    // the per-tick cost.
    let mut sim = Sim::new(root.clone(), SimConfig::headless(1, 100.0)).expect("the demo root");
    let start = Instant::now();
    for _ in 0..ticks {
        sim.step();
    }
    let took = start.elapsed();
    let per_tick = took.as_secs_f64() * 1000.0 / ticks as f64;
    let events = sim.log().events().len();
    println!(
        "simulation: {ticks} ticks ({} demo s) in {:.2} s: {per_tick:.2} ms/tick, {events} events; \
         paced runs keep their schedule up to --speed {:.1}",
        ticks / TICKS_PER_SECOND,
        took.as_secs_f64(),
        100.0 / per_tick
    );
    // Pacing overhead is nothing but sleeping: run the remaining loop once to be sure it returns.
    sim.run(Some(sim.ticks()), &AtomicBool::new(false));

    let mut best = f64::MAX;
    let mut files = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let r = validate_root(&root).expect("validate");
        best = best.min(t.elapsed().as_secs_f64());
        files = r.files_checked;
        assert!(r.valid, "the demo root is valid: {:?}", r.problems);
    }
    println!(
        "validate: {files} files in {:.1} ms (best of 5): {:.0} files/s",
        best * 1000.0,
        files as f64 / best
    );
}
