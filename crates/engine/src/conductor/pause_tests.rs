//! Property tests of pauses through the real Conductor on temp roots: any interleaving of pause,
//! resume, submit, ack and supervisor passes (whose simulated clock runs far past every deadline,
//! so unpaused dispatches are redelivered and dead-lettered) loses no dispatch, delivers none to a
//! paused god, redelivers none while paused, and shifts every frozen deadline by exactly the time
//! it was frozen.

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::conductor::request::{AckDecision, AckRequest};
use crate::conductor::{Actor, Conductor};

const FLOW: &str = "workflow:\n  id: pflow\n  steps:\n    - id: plan\n      god: thoth\n    - id: build\n      god: hephaestus\n      ack_wait: 20s\n      max_deliveries: 3\n      fallback_gods: [marvin]\n";

#[derive(Debug, Clone)]
enum Op {
    Submit,
    Ack(usize),
    Pause(usize),
    Resume(usize),
    Tick(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Submit),
        2 => (0usize..8).prop_map(Op::Ack),
        2 => (0usize..5).prop_map(Op::Pause),
        2 => (0usize..5).prop_map(Op::Resume),
        3 => (0u32..120).prop_map(Op::Tick),
    ]
}

/// The targets the ops pick from: two gods, two workflows, everything.
fn target(i: usize) -> PauseTarget {
    match i % 5 {
        0 => PauseTarget::god(&GodName::parse("hephaestus").unwrap()),
        1 => PauseTarget::god(&GodName::parse("marvin").unwrap()),
        2 => PauseTarget::workflow(&WorkflowId::parse("wf_p0").unwrap()),
        3 => PauseTarget::workflow(&WorkflowId::parse("wf_p1").unwrap()),
        _ => PauseTarget::all(),
    }
}

fn root() -> (tempfile::TempDir, Conductor) {
    let d = tempfile::tempdir().unwrap();
    let c = Conductor::new(Root::at(d.path()));
    c.init().unwrap();
    for e in std::fs::read_dir(c.root().rules_dir()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    std::fs::write(c.root().workflows_dir().join("pflow.yaml"), FLOW).unwrap();
    (d, c)
}

/// Where each dispatch lies: `(dir, path, dispatch)` by handoff id, over the inboxes, the
/// quarantine, the archive and the dead letters.
fn places(root: &Root) -> BTreeMap<String, Vec<(String, PathBuf, Dispatch)>> {
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for top in [root.pending_root(), root.archive_root(), root.dead_root()] {
        let Ok(rd) = std::fs::read_dir(&top) else {
            continue;
        };
        for dir in rd.flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            for (path, d) in files::read_dispatch_dir(&dir.path()).0 {
                let place = format!("{}/{name}", top.file_name().unwrap().to_string_lossy());
                out.entry(d.handoff_id.clone())
                    .or_default()
                    .push((place, path, d));
            }
        }
    }
    out
}

fn ms(t: &str) -> i64 {
    parse_ts(t).unwrap().timestamp_millis()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn no_dispatch_is_lost_none_reaches_or_is_redelivered_while_paused_and_shifts_are_exact(
        ops in prop::collection::vec(op(), 1..22),
    ) {
        let (_d, c) = root();
        let root = c.root().clone();
        let mut submitted: Vec<String> = Vec::new();
        for (step, o) in ops.iter().enumerate() {
            let before = places(&root);
            let active = Pauses::load(&root).unwrap();
            match o {
                Op::Submit => {
                    let i = submitted.len();
                    let hid = format!("hof_20261206_{i:06x}");
                    let wf = format!("wf_p{i}");
                    let h = json!({
                        "handoff_id": hid, "workflow_id": wf, "from_god": "thoth",
                        "to_god": "hephaestus", "step": "plan",
                        "context": {"summary": "s", "decisions": [], "artifacts": []},
                        "routing": {"workflow_definition": "pflow"},
                    });
                    let Ok(r) = c.submit_handoff(&h) else { continue };
                    submitted.push(hid.clone());
                    let held = active.holding("hephaestus", &wf).is_some();
                    prop_assert_eq!(r.status.as_str(),
                        if held { "awaiting_approval" } else { "dispatched" }, "op {}", step);
                }
                Op::Ack(k) => {
                    if let Some(hid) = submitted.get(k % submitted.len().max(1)) {
                        let a = AckRequest::new(HandoffId::parse(hid).unwrap(), AckDecision::Accepted);
                        let _ = c.ack(&a, Actor::Recipient);
                    }
                }
                Op::Pause(t) => {
                    c.pause(&target(*t), None, "prop").unwrap();
                }
                Op::Resume(t) => {
                    let t = target(*t);
                    let Some(p) = active.list().iter().find(|p| p.target() == t).cloned() else {
                        continue;
                    };
                    let r = c.resume(&t, None).unwrap();
                    prop_assert_eq!(r.status.as_str(), "resumed");
                    let after = places(&root);
                    for (hid, old) in before.iter().flat_map(|(h, v)| v.iter().map(move |x| (h, x))) {
                        let (place, _, od) = old;
                        if !place.starts_with("pending/") || place == "pending/_quarantine"
                            || !p.covers(&od.to_god, &od.workflow_id) || applied(od, &p.id) {
                            continue;
                        }
                        let (_, _, nd) = &after[hid][0];
                        let f = nd.frozen.iter().find(|f| f.pause == p.id);
                        let Some(f) = f else {
                            // Only a dispatch without a deadline is left alone.
                            prop_assert!(od.ack_deadline.is_none(), "{} not unfrozen", hid);
                            continue;
                        };
                        prop_assert_eq!(ms(&f.to), ms(r.pause.resumed_at.as_deref().unwrap()));
                        let delivered = delivered_at(od).map(|t| t.timestamp_millis()).unwrap();
                        prop_assert!(ms(&f.from) >= delivered.min(ms(&f.to)));
                        prop_assert!(ms(&f.from) <= ms(&p.since).max(delivered));
                        if f.shifted_ms != 0 || nd.frozen_since.is_none() {
                            let moved = ms(nd.ack_deadline.as_deref().unwrap())
                                - ms(od.ack_deadline.as_deref().unwrap());
                            // Exact to the millisecond the timestamps carry.
                            prop_assert!((moved - (ms(&f.to) - ms(&f.from))).abs() <= 1,
                                "{}: moved {} for a frozen stretch of {}", hid, moved, ms(&f.to) - ms(&f.from));
                            prop_assert!((f.shifted_ms - (ms(&f.to) - ms(&f.from))).abs() <= 1);
                            let others = active.list().iter().any(|q| q.id != p.id
                                && q.covers(&od.to_god, &od.workflow_id));
                            if !others && od.frozen_since.is_none() {
                                // From the later of the pause's start and the delivery, never past
                                // the resume (a supervisor pass on a clock ahead delivered it "later").
                                prop_assert_eq!(ms(&f.from), ms(&p.since).max(delivered).min(ms(&f.to)));
                            }
                        }
                    }
                }
                Op::Tick(secs) => {
                    let now = chrono::Utc::now() + chrono::Duration::seconds(i64::from(*secs));
                    let r = c.tick(now);
                    prop_assert!(r.errors.is_empty(), "{:?}", r.errors);
                    let after = places(&root);
                    for (hid, v) in &before {
                        let (place, _, od) = &v[0];
                        if !place.starts_with("pending/") || place == "pending/_quarantine" {
                            continue;
                        }
                        let frozen = active.freezing(od).is_some();
                        let (nplace, _, nd) = &after[hid][0];
                        if frozen {
                            prop_assert_eq!(nplace, place, "{} moved while paused", hid);
                            prop_assert_eq!(nd.deliveries.len(), od.deliveries.len(),
                                "{} redelivered while paused", hid);
                            prop_assert_eq!(&nd.ack_deadline, &od.ack_deadline);
                        }
                        if nd.deliveries.len() > od.deliveries.len() {
                            prop_assert!(active.holding(&nd.to_god, &nd.workflow_id).is_none(),
                                "{} delivered to a paused {}", hid, nd.to_god);
                        }
                    }
                }
            }
            // Nothing lost, nothing doubled; nothing new in a paused inbox.
            let now = places(&root);
            for hid in &submitted {
                let at = now.get(hid).map(Vec::len).unwrap_or(0);
                prop_assert_eq!(at, 1, "{} is in {} places after op {} {:?}", hid, at, step, o);
            }
            let paused = Pauses::load(&root).unwrap();
            for (hid, v) in &now {
                let (place, _, d) = &v[0];
                let in_inbox = place.starts_with("pending/") && place != "pending/_quarantine";
                let was_there = before.get(hid).is_some_and(|b| b[0].0 == *place);
                if in_inbox && !was_there {
                    prop_assert!(paused.holding(&d.to_god, &d.workflow_id).is_none(),
                        "{} reached paused {} at op {} {:?}", hid, d.to_god, step, o);
                }
            }
        }
    }
}
