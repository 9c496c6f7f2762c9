//! The same seed gives the same sequence of events; another seed another one.

use serde_json::Value;

use crate::common::headless;

fn event_log(seed: u64) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let s = headless(&dir.path().join("root"), seed, 12, true);
    s["event_log"].as_array().unwrap().clone()
}

#[test]
fn same_seed_gives_the_same_event_sequence_and_another_seed_a_different_one() {
    // Three processes at once: contention on the machine must not change the sequence.
    let runs: Vec<_> = [7u64, 7, 8]
        .into_iter()
        .map(|seed| std::thread::spawn(move || event_log(seed)))
        .collect();
    let logs: Vec<Vec<Value>> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(logs[0].len() > 50, "a 12-second run has plenty of events");
    if logs[0] != logs[1] {
        let at = logs[0].iter().zip(&logs[1]).position(|(a, b)| a != b);
        panic!(
            "same seed, different events; first difference at {at:?}: {:?} vs {:?}",
            at.map(|i| &logs[0][i]),
            at.map(|i| &logs[1][i])
        );
    }
    assert_ne!(logs[0], logs[2]);
}

#[test]
fn the_event_log_holds_no_timestamps_or_random_ids() {
    let log = event_log(3);
    let text = serde_json::to_string(&log).unwrap();
    for needle in ["hof_", "ack_2", "msg-", "disp_", "board-2", "T0", "Z\""] {
        assert!(!text.contains(needle), "the event log contains {needle:?}");
    }
    assert!(
        log.iter()
            .all(|e| e["tick"].is_u64() && e["kind"].is_string())
    );
}
