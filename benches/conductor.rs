//! Throughput of a Conductor submit + ack cycle, next to the floor set by the disk: the same number of
//! plain atomic writes of three files (handoff, state, dispatch).
//!
//! `cargo bench --bench conductor` (set `CONDUCTOR_BENCH_CYCLES` to change the count, default 300).

use std::time::Instant;

use pantheon::engine::{Actor, Conductor, Root, to_pretty_json, write_atomic};
use serde_json::json;

fn main() {
    let cycles: usize = std::env::var("CONDUCTOR_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().expect("temp dir");
    let c = Conductor::new(Root::at(dir.path().join("root")));
    c.init().expect("init");
    let workflows = 10;

    let t = Instant::now();
    for i in 0..cycles {
        let hid = format!("hof_20260614_{i:06x}");
        let wf = format!("wf_bench_{}", i % workflows);
        let h = json!({
            "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "marvin",
            "step": format!("s{i}"),
            "context": {"summary": "bench", "decisions": [format!("d{i}")], "artifacts": []},
        });
        c.submit_handoff(&h).expect("submit");
        let a = json!({"ack_id": format!("ack_20260614_{i:06x}"), "handoff_id": hid,
                       "workflow_id": wf, "status": "accepted"});
        c.ack_handoff(&a, Actor::Recipient).expect("ack");
    }
    let cycle_secs = t.elapsed().as_secs_f64();

    let floor_dir = dir.path().join("floor");
    let floor_root = Root::at(&floor_dir);
    let doc = json!({"handoff_id": "hof_20260614_000000", "context": {"summary": "bench"}});
    let t = Instant::now();
    for i in 0..cycles {
        for name in ["handoff", "state", "dispatch"] {
            write_atomic(
                &floor_root,
                &floor_dir.join(format!("{name}-{}.json", i % workflows)),
                &to_pretty_json(&doc),
            )
            .expect("write");
        }
    }
    let floor_secs = t.elapsed().as_secs_f64();

    println!("conductor submit + ack cycles: {cycles}");
    println!(
        "  submit + ack:           {:>8.1} cycles/s  ({:.2} ms per cycle)",
        cycles as f64 / cycle_secs,
        cycle_secs * 1000.0 / cycles as f64
    );
    println!(
        "  floor (3 atomic writes): {:>8.1} cycles/s  ({:.2} ms per cycle)",
        cycles as f64 / floor_secs,
        floor_secs * 1000.0 / cycles as f64
    );
    println!(
        "  submit + ack costs {:.1}x the floor",
        cycle_secs / floor_secs
    );
}
