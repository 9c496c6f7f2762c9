//! Crash repair: a submit killed at any point, then resubmitted, ends exactly as if the first had
//! succeeded, with exactly one dispatch.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

fn plan(wf: &str, hid: &str) -> Value {
    plan_handoff(hid, wf)
}

/// The state without the fields that differ between two runs (times, the workflow id).
fn normalized(mut s: Value, wf: &str, hid: &str) -> Value {
    let text = s.to_string().replace(wf, "wf_X").replace(hid, "hof_X");
    s = serde_json::from_str(&text).unwrap();
    for k in ["created", "updated", "trace_id"] {
        s.as_object_mut().unwrap().remove(k);
    }
    for r in s["step_history"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("completed_at");
    }
    s
}

/// Asserts `wf` looks exactly like the reference run, with one dispatch of `hid` to hephaestus.
fn assert_as_if_first_succeeded(env: &Env, reference: &Value, wf: &str, hid: &str, h: &Value) {
    assert_eq!(normalized(env.state(wf), wf, hid), *reference, "{wf}");
    let file = format!("{hid}.json");
    let copies: usize = [
        "conductor/pending/hephaestus",
        "conductor/archive/hephaestus",
        "conductor/pending/_quarantine",
    ]
    .iter()
    .map(|d| env.names(d).iter().filter(|n| **n == file).count())
    .sum();
    assert_eq!(copies, 1, "{wf}: exactly one dispatch");
    let d = env.read(&format!("conductor/pending/hephaestus/{file}"));
    assert_eq!(d["ack_status"], "unacked");
    assert_eq!(d["workflow_id"], wf);
    assert_eq!(env.read(&format!("shared/handoffs/{wf}/plan.json")), *h);
}

fn reference(env: &Env) -> Value {
    let h = plan("wf_crash_ref", "hof_20260614_ce0000");
    env.submit(&h);
    normalized(
        env.state("wf_crash_ref"),
        "wf_crash_ref",
        "hof_20260614_ce0000",
    )
}

#[test]
fn submit_killed_at_every_crash_point_is_repaired_by_resubmitting() {
    let env = Env::with_test_flow();
    let reference = reference(&env);
    for (i, point) in [
        "submit:after-handoff",
        "submit:after-state",
        "submit:after-supersede",
        "submit:after-dispatch",
    ]
    .iter()
    .enumerate()
    {
        let wf = format!("wf_crash_point_{i}");
        let hid = format!("hof_20260614_cf{i:04}");
        let h = plan(&wf, &hid);
        let mut c = env.command(&["handoff", "submit", "-"]);
        c.env("PANTHEON_TEST_CRASH_AT", point)
            .stdin(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        serde_json::to_writer(child.stdin.take().unwrap(), &h).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "{point} was not reached"
        );
        let r = env.submit(&h);
        let expect = if i == 0 { "dispatched" } else { "duplicate" };
        assert_eq!(r["status"], expect, "{point}");
        assert_as_if_first_succeeded(&env, &reference, &wf, &hid, &h);
    }
}

#[test]
fn completed_ack_killed_after_archiving_is_repaired_by_repeating_it() {
    let env = Env::with_test_flow();
    let hid = "hof_20260614_cd0001";
    env.submit(&plan("wf_crash_ack", hid));
    let a = ack("ack_20260614_cd1", hid, "completed", "built");
    let mut c = env.command(&["ack", "-"]);
    c.env("PANTHEON_TEST_CRASH_AT", "ack:after-archive")
        .stdin(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &a).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    let r = env.ack(&a);
    assert_eq!(r["duplicate"], true);
    let s = env.state("wf_crash_ack");
    assert_eq!(s["acks"].as_array().unwrap().len(), 1);
    assert_eq!(s["current_step"], "check");
    let next = s["acks"][0]["recorded_handoff_id"].as_str().unwrap();
    assert_eq!(
        env.names("conductor/pending/iris"),
        vec![format!("{next}.json")]
    );
}

#[test]
fn submit_killed_at_random_moments_is_repaired_by_resubmitting() {
    let env = Env::with_test_flow();
    let reference = reference(&env);
    // How long one submit takes here, to spread the kills over its whole run.
    let t0 = Instant::now();
    env.submit(&plan("wf_crash_timing", "hof_20260614_ce0001"));
    let span = t0.elapsed().as_micros() as u64 + 1;
    let iterations = 40;
    let mut killed_mid_way = 0;
    for i in 0..iterations {
        let wf = format!("wf_crash_rand_{i}");
        let hid = format!("hof_20260614_cr{i:04}");
        let h = plan(&wf, &hid);
        let mut c = env.command(&["handoff", "submit", "-"]);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = c.spawn().unwrap();
        serde_json::to_writer(child.stdin.take().unwrap(), &h).unwrap();
        let delay = rand_below(span * 12 / 10);
        std::thread::sleep(Duration::from_micros(delay));
        // SAFETY: kill(2) on our own child's pid; the child is not yet reaped, so the pid is its.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
        }
        let status = child.wait().unwrap();
        if status.signal() == Some(libc::SIGKILL)
            && env.path(&format!("shared/handoffs/{wf}")).exists()
        {
            killed_mid_way += 1;
        }
        env.submit(&h);
        assert_as_if_first_succeeded(&env, &reference, &wf, &hid, &h);
    }
    env.assert_all_json_valid();
    eprintln!("{killed_mid_way} of {iterations} submits were killed after their first write");
}

/// A cheap random number below `n` (no need for a generator crate in tests).
fn rand_below(n: u64) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) % n.max(1)
}

#[test]
fn rejected_ack_killed_after_its_commit_is_repaired_by_repeating_it() {
    let env = Env::with_test_flow();
    let hid = "hof_20260614_cd0002";
    env.submit(&plan("wf_crash_rej", hid));
    let a = ack("ack_20260614_cd2", hid, "rejected", "not mine");
    let mut c = env.command(&["ack", "-"]);
    c.env("PANTHEON_TEST_CRASH_AT", "ack:after-state")
        .stdin(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &a).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    // The state is committed but the dispatch has not moved yet.
    assert_eq!(env.names("conductor/pending/hephaestus").len(), 1);
    let r = env.ack(&a);
    assert_eq!(r["duplicate"], true);
    assert_eq!(r["rerouted_to"], "marvin");
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    assert_eq!(
        env.read(&format!("conductor/archive/hephaestus/{hid}.json"))["ack_status"],
        "rejected"
    );
    assert_eq!(
        env.names("conductor/pending/marvin"),
        vec![format!("{hid}.json")]
    );
    assert_eq!(
        env.state("wf_crash_rej")["acks"].as_array().unwrap().len(),
        1
    );
}

/// Runs `args` with stdin `input` and the crash point `point`; asserts the process was killed there.
fn killed_at(env: &Env, args: &[&str], input: Option<&Value>, point: &str) {
    use std::io::Write;
    let mut c = env.command(args);
    c.env("PANTHEON_TEST_CRASH_AT", point)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    if let Some(v) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(v.to_string().as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{point} was not reached"
    );
}

fn entries(env: &Env, action: &str, key: &str, id: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path("conductor/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["action"] == action && e["targets"][key] == id)
        .collect()
}

fn assert_chain_valid(env: &Env) {
    let out = env.run(&["journal", "--verify"], None);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_act_killed_before_its_journal_entry_is_journaled_once_by_its_repeat_or_the_next_tick() {
    let env = Env::with_test_flow();
    // submit killed after the act, before the append; the resubmit journals it once.
    let (wf, hid) = ("wf_crash_journal", "hof_20260614_cj0001");
    let h = plan(wf, hid);
    killed_at(
        &env,
        &["handoff", "submit", "-"],
        Some(&h),
        "journal:before-append:submit",
    );
    assert!(entries(&env, "submit", "handoff_id", hid).is_empty());
    env.submit(&h);
    let e = entries(&env, "submit", "handoff_id", hid);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["outcome"], "dispatched");
    assert_eq!(env.names("conductor/journal-intents"), Vec::<String>::new());

    // ack killed before the append; its repeat journals the original act (not a duplicate), once.
    let a = ack("ack_20260614_cj1", hid, "accepted", "on it");
    killed_at(&env, &["ack"], Some(&a), "journal:before-append:ack");
    assert!(entries(&env, "ack", "ack_id", "ack_20260614_cj1").is_empty());
    assert_eq!(
        env.names("conductor/journal-intents").len(),
        1,
        "the intent stays"
    );
    let r = env.ack(&a);
    assert_eq!(r["duplicate"], true, "the act was done");
    let e = entries(&env, "ack", "ack_id", "ack_20260614_cj1");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["outcome"], "accepted");
    // A second repeat is an ordinary duplicate.
    env.ack(&a);
    let e = entries(&env, "ack", "ack_id", "ack_20260614_cj1");
    assert_eq!(e.len(), 2);
    assert_eq!(e[1]["outcome"], "accepted (duplicate)");
    assert_chain_valid(&env);

    // An ack killed before the append and never repeated: the next tick journals it, once.
    let (wf2, hid2) = ("wf_crash_journal_2", "hof_20260614_cj0002");
    env.submit(&plan(wf2, hid2));
    let a2 = ack("ack_20260614_cj2", hid2, "accepted", "");
    killed_at(&env, &["ack"], Some(&a2), "journal:before-append:ack");
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 1);
    let e = entries(&env, "ack", "ack_id", "ack_20260614_cj2");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["outcome"], "accepted");
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0);
    assert_eq!(entries(&env, "ack", "ack_id", "ack_20260614_cj2").len(), 1);
    assert_chain_valid(&env);

    // A refused act leaves no intent behind.
    let bad = ack("ack_20260614_cj3", "hof_20260614_cj9999", "accepted", "");
    env.refused(&["ack"], Some(&bad));
    assert_eq!(env.names("conductor/journal-intents"), Vec::<String>::new());
}

#[test]
fn a_redelivery_killed_before_its_journal_entry_is_journaled_once_by_the_next_tick() {
    let env = Env::with_test_flow();
    env.write(
        "conductor/workflows/quick-flow.yaml",
        "workflow:\n  id: quick-flow\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, max_deliveries: 2}\n",
    );
    let (wf, hid) = ("wf_crash_journal_3", "hof_20260614_cj0003");
    env.start("quick-flow", wf, hid, &[]);
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    for (point, action, n) in [
        ("journal:before-append:redeliver", "redeliver", 2),
        ("journal:before-append:dead_letter", "dead_letter", 2),
    ] {
        std::thread::sleep(Duration::from_millis(1100));
        killed_at(&env, &["tick"], None, point);
        assert!(
            entries(&env, action, "handoff_id", hid).is_empty(),
            "{point}"
        );
        let r = env.ok(&["tick"], None);
        assert_eq!(r["journaled_late"], 1, "{point}: {r:#}");
        let e = entries(&env, action, "handoff_id", hid);
        assert_eq!(e.len(), 1, "{point}: {e:#?}");
        assert_eq!(e[0]["targets"]["delivery"], n.to_string());
        assert_eq!(e[0]["source"], "supervisor");
        assert_chain_valid(&env);
    }
    assert!(!env.exists(&inbox));
    assert!(env.exists(&format!("conductor/dead/hephaestus/{hid}.json")));
    assert_eq!(env.state(wf)["status"], "stalled");
}
