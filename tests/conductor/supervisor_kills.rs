//! Every supervisor act is journaled exactly once, whatever is killed when: two `pantheon serve`
//! processes race over the same dispatches while the test kills them with SIGKILL at random moments
//! (and, on some runs, they kill themselves at one of the supervisor's crash points), and restarts
//! them; then clean `tick`s finish what is left. An adversarial run of 1,482 kills once found dead
//! letters done but never journaled and redeliveries and dead letters journaled twice with one intent
//! key.
//!
//! The loop runs `PANTHEON_KILL_LOOP_SECS` seconds (default 8); `scripts/supervisor-kill-loop.sh`
//! runs it for longer. `PANTHEON_KILL_LOOP_SEED` replays a run's random choices.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::races::Guard;

/// An ack deadline redelivers (then dead-letters) a dispatch of `kill-flow`; `timed-flow`'s dispatch is
/// accepted at once and its step timeout redelivers it (through `conductor/timers/`).
const FLOWS: &[(&str, &str)] = &[
    (
        "kill-flow",
        "workflow:\n  id: kill-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, max_deliveries: 3, fallback_gods: [marvin]}\n",
    ),
    (
        "timed-flow",
        "workflow:\n  id: timed-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, timeout: 1s, max_deliveries: 3}\n",
    ),
];

/// Where a supervisor may kill itself (`PANTHEON_TEST_CRASH_AT`): between the writes of a redelivery
/// or dead letter (by ack deadline or step timeout) and just before its journal entry.
const CRASH_POINTS: &[&str] = &[
    "redeliver:after-state",
    "redeliver:after-rewrite",
    "dead:after-state",
    "dead:after-rewrite",
    "timeout:after-state",
    "timeout:after-rewrite",
    "timeout:dead-after-state",
    "timeout:dead-after-rewrite",
    "timeout:before-timer-removed",
    "journal:before-append:redeliver",
    "journal:before-append:dead_letter",
];

/// A small xorshift generator, seeded from the clock unless `PANTHEON_KILL_LOOP_SEED` is set.
struct Rng(u64);

impl Rng {
    fn new() -> (Self, u64) {
        let seed = std::env::var("PANTHEON_KILL_LOOP_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        (Self(seed), seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

struct Supervisors<'a> {
    env: &'a Env,
    slots: [Option<Guard>; 2],
    started: usize,
    killed: usize,
    crashed: usize,
}

impl<'a> Supervisors<'a> {
    fn start(&mut self, i: usize, rng: &mut Rng) {
        let mut c = self.env.command(&[
            "serve",
            "--log",
            self.env
                .dir
                .path()
                .join(format!("serve-{i}.log"))
                .to_str()
                .unwrap(),
        ]);
        // One start in three kills itself at a crash point when it gets there.
        if rng.below(3) == 0 {
            let p = CRASH_POINTS[rng.below(CRASH_POINTS.len() as u64) as usize];
            c.env("PANTHEON_TEST_CRASH_AT", p);
        }
        c.stdout(Stdio::null()).stderr(Stdio::null());
        self.slots[i] = Some(Guard::spawn(c));
        self.started += 1;
    }

    /// Restarts supervisor `i` if it killed itself at its crash point.
    fn restart_if_dead(&mut self, i: usize, rng: &mut Rng) {
        let dead = self.slots[i]
            .as_mut()
            .and_then(|g| g.0.as_mut())
            .is_none_or(|c| c.try_wait().unwrap().is_some());
        if dead {
            self.crashed += 1;
            self.slots[i] = None;
            self.start(i, rng);
        }
    }

    /// SIGKILLs supervisor `i` and reaps it.
    fn kill(&mut self, i: usize) {
        if let Some(mut g) = self.slots[i].take()
            && let Some(mut c) = g.0.take()
        {
            let _ = c.kill();
            let _ = c.wait();
            self.killed += 1;
        }
    }
}

#[test]
fn two_supervisors_killed_at_random_moments_journal_every_act_exactly_once() {
    let secs: u64 = std::env::var("PANTHEON_KILL_LOOP_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let (mut rng, seed) = Rng::new();
    let env = Env::with_test_flow();
    for (name, text) in FLOWS {
        env.write(&format!("conductor/workflows/{name}.yaml"), text);
    }
    let mut sup = Supervisors {
        env: &env,
        slots: [None, None],
        started: 0,
        killed: 0,
        crashed: 0,
    };
    sup.start(0, &mut rng);
    sup.start(1, &mut rng);

    let mut hids: Vec<String> = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        // A new dispatch (every other one accepted at once, so its step timeout fires).
        let i = hids.len();
        let (wf, hid) = (format!("wf_kill_{i}"), format!("hof_20260614_k{i:05}"));
        let flow = FLOWS[i % 2].0;
        env.start(flow, &wf, &hid, &[]);
        if flow == "timed-flow" {
            // Accepted before its ack deadline (1 s) in all but a very slow run; a late accept is
            // refused or applies to a redelivery, and either way the step ends dead-lettered.
            let _ = env.run(
                &["ack"],
                Some(&ack(
                    &format!("ack_20260614_k{i}"),
                    &hid,
                    "accepted",
                    "on it",
                )),
            );
        }
        hids.push(hid);
        std::thread::sleep(Duration::from_millis(rng.below(120)));
        for s in 0..2 {
            sup.restart_if_dead(s, &mut rng);
        }
        match rng.below(6) {
            // Both at once: on restart both settle the same leftover intents.
            0 => {
                sup.kill(0);
                sup.kill(1);
                sup.start(0, &mut rng);
                sup.start(1, &mut rng);
            }
            1 | 2 => {
                let s = rng.below(2) as usize;
                sup.kill(s);
                sup.start(s, &mut rng);
            }
            _ => {}
        }
    }
    sup.kill(0);
    sup.kill(1);

    // Clean passes until every dispatch is dead-lettered (each waits at most 1 s per delivery).
    let settle_end = Instant::now() + Duration::from_secs(30);
    let mut late = 0;
    loop {
        let r = env.ok(&["tick"], None);
        late += r["journaled_late"].as_u64().unwrap();
        assert_eq!(r["errors"], serde_json::json!([]), "{r:#}");
        assert_eq!(r["warnings"], serde_json::json!([]), "{r:#}");
        let open = hids
            .iter()
            .filter(|h| {
                env.copies(h)
                    .iter()
                    .all(|d| !d.starts_with("conductor/dead/"))
            })
            .count();
        if open == 0 {
            break;
        }
        assert!(
            Instant::now() < settle_end,
            "{open} dispatches never reached the dead letters"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    let journal = env.journal_entries();
    let mut acts: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    for e in &journal {
        let action = e["action"].as_str().unwrap().to_owned();
        if action != "redeliver" && action != "dead_letter" {
            continue;
        }
        let t = &e["targets"];
        let hid = t["handoff_id"].as_str().unwrap().to_owned();
        let n = t["delivery"].as_str().unwrap().to_owned();
        *acts.entry((hid, action, n)).or_default() += 1;
        if let Some(k) = t["intent"].as_str() {
            *keys.entry(k.to_owned()).or_default() += 1;
        }
    }
    let mut problems = Vec::new();
    for hid in &hids {
        let place = env.copies(hid);
        assert_eq!(place.len(), 1, "{hid}: one dispatch, {place:?}");
        let d = env.read(&format!("{}/{hid}.json", place[0]));
        assert_eq!(d["deliveries"].as_array().unwrap().len(), 3, "{d:#}");
        for (action, n) in [("redeliver", "2"), ("redeliver", "3"), ("dead_letter", "3")] {
            let got = acts
                .get(&(hid.clone(), action.to_owned(), n.to_owned()))
                .copied()
                .unwrap_or(0);
            if got != 1 {
                problems.push(format!("{hid}: {action} {n} journaled {got} times"));
            }
        }
    }
    let extra = acts.values().sum::<usize>() - 3 * hids.len();
    let twice: Vec<_> = keys.iter().filter(|(_, n)| **n > 1).collect();
    eprintln!(
        "seed {seed}: {} dispatches, {} supervisor starts, {} SIGKILLs by the test, {} deaths at a crash point, {late} acts journaled late by the clean ticks",
        hids.len(),
        sup.started,
        sup.killed,
        sup.crashed
    );
    assert!(
        problems.is_empty() && extra == 0 && twice.is_empty(),
        "seed {seed}: {} acts not journaled exactly once ({extra} extra entries; intent keys journaled twice: {twice:?}):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(env.names("conductor/journal-intents").is_empty());
    assert!(sup.killed > 0);
    let v = env.ok(&["journal", "--verify"], None);
    assert_eq!(v["valid"], true, "{v:#}");
    crate::races::assert_valid(&env);
}
