//! Races between real processes on one record, the way an operator and a pantheon of agents make
//! them: two `pantheon` processes (or the console's engine operator against one) act on the same
//! dispatch or workflow, released together through a gate, over many rounds.
//!
//! The check is linearizability: every race must end exactly like one of the two serial orders —
//! the same answers (exit code, `duplicate`), the same state, the same files in every inbox, the
//! quarantine, the dead letters and the archive, and the same journal entries (one per act that took
//! effect) — and `pantheon validate` must be clean afterwards. An act lost or applied twice matches
//! neither order.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// A child process killed (and reaped) when dropped, so no racer outlives a failed assertion.
pub struct Guard(pub Option<Child>);

impl Guard {
    pub fn spawn(mut c: Command) -> Self {
        Self(Some(c.spawn().unwrap()))
    }

    /// Waits for the child and collects what it printed.
    pub fn output(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `c` behind a gate: a shell that waits for one line on its stdin, then `exec`s the command (same
/// arguments and environment), so every racer is started and waiting before any of them runs.
pub fn gated(c: &Command) -> Command {
    let mut g = Command::new("sh");
    g.arg("-c")
        .arg("read _gate && exec \"$@\"")
        .arg("sh")
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => g.env(k, v),
            None => g.env_remove(k),
        };
    }
    g.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    g
}

/// A racer: a command of the binary, or an act in this process (the console's engine operator).
pub enum Racer {
    Cli(Command),
    /// A program that says "ready" on stderr once it has started, then reads the gate's line itself
    /// (a Python god: its interpreter starts far slower than the binary).
    SelfGated(Command),
    InProcess(Box<dyn FnOnce() -> Output + Send>),
}

/// Starts every racer behind its gate, opens the gates together, and returns their outputs in order.
/// Racer `i` is released `delays[i]` after the others (none if missing), to sweep the window across
/// rounds.
pub fn race(racers: Vec<Racer>, delays: &[Duration]) -> Vec<Output> {
    let barrier = Barrier::new(racers.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = racers
            .into_iter()
            .enumerate()
            .map(|(i, r)| (delays.get(i).copied().unwrap_or_default(), r))
            .map(|(delay, r)| match r {
                Racer::Cli(_) | Racer::SelfGated(_) => {
                    let self_gated = matches!(r, Racer::SelfGated(_));
                    let mut guard = Guard::spawn(match r {
                        Racer::Cli(c) => gated(&c),
                        Racer::SelfGated(mut c) => {
                            c.stdin(Stdio::piped())
                                .stdout(Stdio::piped())
                                .stderr(Stdio::piped());
                            c
                        }
                        Racer::InProcess(_) => unreachable!(),
                    });
                    let mut stdin = guard.0.as_mut().unwrap().stdin.take().unwrap();
                    let barrier = &barrier;
                    s.spawn(move || {
                        if self_gated {
                            // Its "ready" line: it has started and waits for the gate.
                            let err = guard.0.as_mut().unwrap().stderr.as_mut().unwrap();
                            let mut b = [0u8];
                            while err.read(&mut b).unwrap() == 1 && b[0] != b'\n' {}
                        }
                        barrier.wait();
                        std::thread::sleep(delay);
                        stdin.write_all(b"go\n").unwrap();
                        drop(stdin);
                        guard.output()
                    })
                }
                Racer::InProcess(f) => {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        std::thread::sleep(delay);
                        f()
                    })
                }
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// An output made from an engine call in this process, shaped like the CLI's (JSON on stdout, exit 0;
/// `error: …` on stderr, exit 1).
pub fn engine_output<T: serde::Serialize>(r: pantheon::engine::Result<T>) -> Output {
    use std::os::unix::process::ExitStatusExt;
    match r {
        Ok(v) => Output {
            status: std::process::ExitStatus::from_raw(0),
            stdout: serde_json::to_vec(&v).unwrap(),
            stderr: Vec::new(),
        },
        Err(e) => Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: format!("error: {e}\n").into_bytes(),
        },
    }
}

/// One act of a race: `pantheon ARGS` on the round's root (`{dir}` in an argument is the round's
/// temp dir, where `files` are written first), or an engine call in this process.
#[derive(Clone)]
pub struct Act {
    pub label: &'static str,
    pub args: Vec<String>,
    pub files: Vec<(String, Value)>,
    pub in_process: Option<fn(&Path) -> Output>,
    /// Another program than the binary (`{root}` in an argument is the round's root).
    pub program: Option<String>,
    /// The crash point (`PANTHEON_TEST_CRASH_AT`) where the binary kills itself.
    pub crash_at: Option<&'static str>,
}

impl Act {
    pub fn cli(label: &'static str, args: &[&str]) -> Self {
        Self {
            label,
            args: args.iter().map(|s| s.to_string()).collect(),
            files: Vec::new(),
            in_process: None,
            program: None,
            crash_at: None,
        }
    }

    /// `python3 tests/conductor/python/SCRIPT ARGS`: a foreign god.
    pub fn python(label: &'static str, script: &str, args: &[&str]) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/conductor/python")
            .join(script);
        let mut a = vec![script.to_str().unwrap().to_owned()];
        a.extend(args.iter().map(|s| s.to_string()));
        Self {
            label,
            args: a,
            files: Vec::new(),
            in_process: None,
            program: Some("python3".into()),
            crash_at: None,
        }
    }

    /// `pantheon ack FILE` with `ack` written to FILE.
    pub fn ack(label: &'static str, ack: Value) -> Self {
        let name = format!("{label}.ack.json");
        Self {
            label,
            args: vec!["ack".into(), format!("{{dir}}/{name}")],
            files: vec![(name, ack)],
            in_process: None,
            program: None,
            crash_at: None,
        }
    }

    /// An engine call in this process on the round's root.
    pub fn engine(label: &'static str, f: fn(&Path) -> Output) -> Self {
        Self {
            label,
            args: Vec::new(),
            files: Vec::new(),
            in_process: Some(f),
            program: None,
            crash_at: None,
        }
    }

    fn racer(&self, env: &Env) -> Racer {
        for (name, v) in &self.files {
            std::fs::write(env.dir.path().join(name), serde_json::to_vec(v).unwrap()).unwrap();
        }
        if let Some(f) = self.in_process {
            let root = env.root.clone();
            return Racer::InProcess(Box::new(move || f(&root)));
        }
        let dir = env.dir.path().to_str().unwrap().to_owned();
        let root = env.root.to_str().unwrap().to_owned();
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| a.replace("{dir}", &dir).replace("{root}", &root))
            .collect();
        if let Some(p) = &self.program {
            let mut c = Command::new(p);
            c.args(&args).arg("--gate");
            return Racer::SelfGated(c);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut c = env.command(&refs);
        if let Some(point) = self.crash_at {
            c.env("PANTHEON_TEST_CRASH_AT", point);
        }
        Racer::Cli(c)
    }

    /// This act, killed with SIGKILL at crash point `point`.
    pub fn killed_at(&self, point: &'static str) -> Self {
        Self {
            crash_at: Some(point),
            ..self.clone()
        }
    }

    /// Runs the act alone and waits for it.
    fn run(&self, env: &Env) -> Output {
        race(vec![self.racer(env)], &[]).pop().unwrap()
    }
}

/// A fresh round: a copy of the template root in a new temp dir.
pub fn copy_of(template: &Env) -> Env {
    let env = Env::bare();
    copy_dir(&template.root, &env.root);
    env
}

fn is_stamp(s: &str) -> bool {
    s.len() >= 19
        && s.as_bytes()[4] == b'-'
        && s.as_bytes()[10] == b'T'
        && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// `s` with every handoff id the engine made up (a rerun's: today's date, random) as `hof_<new>`;
/// the tests' own ids and those derived from an ack id are dated 2026-06-14.
fn generic_ids(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("hof_") {
        out.push_str(&rest[..i]);
        let id: String = rest[i..].chars().take(19).collect();
        let b = id.as_bytes();
        let made_up = b.len() == 19
            && b[4..12].iter().all(u8::is_ascii_digit)
            && b[12] == b'_'
            && &id[4..12] != "20260614";
        if made_up {
            out.push_str("hof_<new>");
            rest = &rest[i + 19..];
        } else {
            out.push_str("hof_");
            rest = &rest[i + 4..];
        }
    }
    out.push_str(rest);
    out
}

/// `v` without what differs between two equal runs: times, random ids, the root's path, hashes.
fn normalized(v: &Value, root: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let x = match k.as_str() {
                        "dispatch_id" | "hash" | "prev" | "pid" | "intent" | "age_secs"
                        | "trace_id" | "traceparent" => {
                            json!("<x>")
                        }
                        _ => normalized(x, root),
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| normalized(x, root)).collect()),
        Value::String(s) if is_stamp(s) => json!("<time>"),
        Value::String(s) => json!(generic_ids(&s.replace(root, "{root}"))),
        x => x.clone(),
    }
}

/// Every JSON file of the conductor's records (state, inboxes, quarantine, dead letters, archive,
/// shared handoffs), normalised, by path; the journal's entries without their chain; and what each
/// racer answered.
pub fn outcome(env: &Env, outs: &[Output]) -> Value {
    let root = env.root.to_str().unwrap();
    let mut files = serde_json::Map::new();
    for top in [
        "conductor/state",
        "conductor/pending",
        "conductor/dead",
        "conductor/archive",
    ] {
        walk(&env.path(top), &mut |p| {
            let name = p.file_name().unwrap().to_string_lossy();
            if p.is_file() && !name.starts_with('.') {
                let rel = generic_ids(&p.strip_prefix(&env.root).unwrap().to_string_lossy());
                let v = serde_json::from_slice::<Value>(&std::fs::read(p).unwrap())
                    .unwrap_or_else(|e| json!(format!("<not JSON: {e}>")));
                files.insert(rel, normalized(&v, root));
            }
        });
    }
    // Entries are appended after the workflow's lock is released, so two racers' entries may come in
    // either order: compared as a multiset (the state's `acks` keep the order of the acts).
    let mut journal: Vec<Value> = std::fs::read_to_string(env.path("conductor/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            // Which entry names the crash-repair intent is not part of the act (a duplicate answered
            // while the act's own attempt still runs does not name it).
            if let Some(t) = e["targets"].as_object_mut() {
                t.remove("intent");
            }
            normalized(
                &json!({"action": e["action"], "outcome": e["outcome"], "targets": e["targets"],
                        "reason": e["reason"], "actor": e["actor"], "source": e["source"]}),
                root,
            )
        })
        .collect();
    journal.sort_by_key(|e| e.to_string());
    let intents = env.names("conductor/journal-intents");
    let answers: Vec<Value> = outs.iter().map(answer).collect();
    json!({"answers": answers, "files": files, "journal": journal, "intents_left": intents})
}

/// What a racer answered: its exit code and, on success, its `status`/`duplicate`.
fn answer(o: &Output) -> Value {
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    json!({
        "code": o.status.code(),
        "status": v.get("status").cloned().unwrap_or(Value::Null),
        "duplicate": v.get("duplicate").cloned().unwrap_or(Value::Null),
    })
}

fn explain(outs: &[Output]) -> String {
    outs.iter()
        .map(|o| {
            format!(
                "exit {:?}\n  stdout: {}\n  stderr: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn assert_valid(env: &Env) {
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
}

/// How much later each of two racers goes in round `round`: 0 to 35 ms, swept over the rounds, for
/// one racer and then the other (a racer that starts faster, such as a Python god already running,
/// or an act that reaches the lock sooner, would otherwise win every round).
fn delays(round: usize) -> [Duration; 2] {
    let d = Duration::from_millis(5 * ((round / 2) % 8) as u64);
    if round.is_multiple_of(2) {
        [Duration::ZERO, d]
    } else {
        [d, Duration::ZERO]
    }
}

/// The outcome of `first` then `second` run alone on a copy of `template`, answers in the order
/// (a, b) given by `swap`.
fn serial(template: &Env, first: &Act, second: &Act, swap: bool) -> Value {
    let env = copy_of(template);
    let o1 = first.run(&env);
    let o2 = second.run(&env);
    let outs = if swap { vec![o2, o1] } else { vec![o1, o2] };
    outcome(&env, &outs)
}

/// Races `a` against `b` on copies of `template` for `rounds` rounds (fewer if the rounds take longer
/// than `budget`, at least 5). Every race must end as `a` then `b` or as `b` then `a` did alone, and
/// validate clean. Returns how many rounds ended in each order.
pub fn race_pair(
    template: &Env,
    a: &Act,
    b: &Act,
    rounds: usize,
    budget: Duration,
) -> (usize, usize) {
    let ab = serial(template, a, b, false);
    let ba = serial(template, b, a, true);
    let start = Instant::now();
    let (mut n_ab, mut n_ba) = (0, 0);
    for round in 0..rounds {
        if round >= 5 && start.elapsed() > budget {
            break;
        }
        let env = copy_of(template);
        let outs = race(vec![a.racer(&env), b.racer(&env)], &delays(round));
        let got = outcome(&env, &outs);
        if got == ab {
            n_ab += 1;
        } else if got == ba {
            n_ba += 1;
        } else {
            panic!(
                "round {round}: {} against {} ended in neither serial order\n\
                 race: {got:#}\n{}\n\n{} then {}: {ab:#}\n\n{} then {}: {ba:#}",
                a.label,
                b.label,
                explain(&outs),
                a.label,
                b.label,
                b.label,
                a.label
            );
        }
        assert_valid(&env);
    }
    eprintln!(
        "{} vs {}: {n_ab} rounds as {} first, {n_ba} as {} first",
        a.label, b.label, a.label, b.label
    );
    (n_ab, n_ba)
}

/// Like [`race_pair`], but `a` kills itself at `point` (when it gets there) while `b` runs: a killed `a`
/// is then repeated alone and a supervisor pass (`tick`) settles what a killed act left. The files and the
/// journal must end as one serial order of `a` and `b` did (the answers differ: `a`'s first run
/// died), with no intent left.
pub fn race_pair_killed(
    template: &Env,
    a: &Act,
    point: &'static str,
    b: &Act,
    rounds: usize,
    budget: Duration,
) -> (usize, usize) {
    race_pair_killed_then(template, a, point, b, rounds, budget, true)
}

/// [`race_pair_killed`]; `repeat`: whether the killed act is repeated before the supervisor's pass
/// (without, the pass alone settles what it left).
pub fn race_pair_killed_then(
    template: &Env,
    a: &Act,
    point: &'static str,
    b: &Act,
    rounds: usize,
    budget: Duration,
    repeat: bool,
) -> (usize, usize) {
    // Without a repeat, a killed act's later attempt may journal the act instead of its own duplicate
    // answer: entries of duplicates (acts that changed nothing) are then left out of the comparison.
    let without_answers = |mut v: Value| {
        v.as_object_mut().unwrap().remove("answers");
        if !repeat {
            v["journal"]
                .as_array_mut()
                .unwrap()
                .retain(|e| !e["outcome"].as_str().unwrap_or("").contains("duplicate"));
        }
        v
    };
    let ab = without_answers(serial(template, a, b, false));
    let ba = without_answers(serial(template, b, a, true));
    let killed = a.killed_at(point);
    let start = Instant::now();
    let (mut n_ab, mut n_ba, mut kills) = (0, 0, 0);
    for round in 0..rounds {
        if round >= 5 && start.elapsed() > budget {
            break;
        }
        let env = copy_of(template);
        let mut outs = race(vec![killed.racer(&env), b.racer(&env)], &delays(round));
        let was_killed = {
            use std::os::unix::process::ExitStatusExt;
            outs[0].status.signal() == Some(libc::SIGKILL)
        };
        if was_killed {
            kills += 1;
            if repeat {
                outs.push(a.run(&env));
            }
        }
        env.ok(&["tick"], None);
        let got = without_answers(outcome(&env, &outs));
        if got == ab {
            n_ab += 1;
        } else if got == ba {
            n_ba += 1;
        } else {
            panic!(
                "round {round}: {} killed at {point} against {} ended in neither serial order\n\
                 race: {got:#}\n{}\n\n{} then {}: {ab:#}\n\n{} then {}: {ba:#}\njournal:\n{}",
                a.label,
                b.label,
                explain(&outs),
                a.label,
                b.label,
                b.label,
                a.label,
                std::fs::read_to_string(env.path("conductor/journal.jsonl")).unwrap_or_default()
            );
        }
        assert_valid(&env);
    }
    eprintln!(
        "{} killed at {point} vs {}: {kills} kills; {n_ab} rounds as {} first, {n_ba} as {} first",
        a.label, b.label, a.label, b.label
    );
    assert!(kills > 0, "{point} was never reached");
    (n_ab, n_ba)
}

const ROUNDS: usize = 20;
const BUDGET: Duration = Duration::from_secs(3);

const HID: &str = "hof_20260614_ra0001";
const WF: &str = "wf_race";

fn acked(label: &'static str, ack_id: &str, status: &str) -> Act {
    Act::ack(label, ack(ack_id, HID, status, label))
}

/// A test-flow root with `build` dispatched to hephaestus as `HID`.
fn dispatched() -> Env {
    Env::dispatched(WF, HID)
}

#[test]
fn two_acks_of_one_dispatch_at_once_end_as_one_serial_order() {
    let template = dispatched();
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let reject = acked("reject", "ack_20260614_rej1", "rejected");
    let complete = acked("complete", "ack_20260614_com1", "completed");
    race_pair(&template, &accept, &reject, ROUNDS, BUDGET);
    race_pair(&template, &complete, &reject, ROUNDS, BUDGET);
    race_pair(&template, &accept, &complete, ROUNDS, BUDGET);
}

#[test]
fn the_same_ack_twice_at_once_is_applied_once_and_answered_as_a_duplicate_once() {
    let template = dispatched();
    for status in ["accepted", "completed", "rejected"] {
        let one = acked("first", "ack_20260614_same1", status);
        let two = acked("second", "ack_20260614_same1", status);
        let (n_ab, n_ba) = race_pair(&template, &one, &two, ROUNDS, BUDGET);
        // Both orders look alike but for which racer saw the duplicate.
        assert!(n_ab + n_ba >= 5);
    }
    // The same ack id with two statuses: one wins, the other is refused.
    let accept = acked("accept", "ack_20260614_same2", "accepted");
    let reject = acked("reject", "ack_20260614_same2", "rejected");
    race_pair(&template, &accept, &reject, ROUNDS, BUDGET);
}

#[test]
fn abort_racing_an_ack_or_another_abort_ends_as_one_serial_order() {
    let template = dispatched();
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    let abort2 = Act::cli("abort-again", &["abort", WF, "--reason", "other reason"]);
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let complete = acked("complete", "ack_20260614_com1", "completed");
    race_pair(&template, &abort, &accept, ROUNDS, BUDGET);
    race_pair(&template, &abort, &complete, ROUNDS, BUDGET);
    race_pair(&template, &abort, &abort2, ROUNDS, BUDGET);
}

/// The test flow with its `build` step held for approval.
fn held() -> Env {
    let env = Env::with_test_flow();
    env.write(
        "conductor/workflows/test-flow.yaml",
        &TEST_FLOW.replace(
            "      fallback_gods: [marvin, hermes]\n",
            "      fallback_gods: [marvin, hermes]\n      approval_required: true\n",
        ),
    );
    let r = env.submit(&plan_handoff(HID, WF));
    assert_eq!(r["status"], "awaiting_approval", "{r}");
    assert!(env.exists(&format!("conductor/pending/_quarantine/{HID}.json")));
    env
}

fn console_op(root: &Path, op: pantheon::testing::console::ops::Op) -> Output {
    use pantheon::testing::console::engine_ops::EngineOperator;
    use pantheon::testing::console::ops::{Operator, Outcome};
    let operator = EngineOperator::new(pantheon::Root::at(root));
    match operator.execute(&op).map(|done| done.outcome) {
        Ok(Outcome::Approval(r)) => engine_output(Ok(r)),
        Ok(Outcome::Abort(r)) => engine_output(Ok(r)),
        Ok(other) => panic!("unexpected outcome {other:?}"),
        Err(e) => engine_output::<Value>(Err(e)),
    }
}

fn console_approve(root: &Path) -> Output {
    let handoff_id = pantheon::engine::HandoffId::parse(HID).unwrap();
    console_op(
        root,
        pantheon::testing::console::ops::Op::Approve {
            handoff_id,
            raise: None,
        },
    )
}

fn console_reject(root: &Path) -> Output {
    let handoff_id = pantheon::engine::HandoffId::parse(HID).unwrap();
    let reason = "not now".to_owned();
    console_op(
        root,
        pantheon::testing::console::ops::Op::RejectHeld { handoff_id, reason },
    )
}

#[test]
fn approve_racing_reject_or_abort_of_a_held_dispatch_ends_as_one_serial_order() {
    let template = held();
    let approve = Act::cli("approve", &["approve", HID]);
    let reject = Act::cli(
        "reject",
        &["approve", HID, "--reject", "--reason", "too risky"],
    );
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    race_pair(&template, &approve, &reject, ROUNDS, BUDGET);
    race_pair(&template, &approve, &abort, ROUNDS, BUDGET);
    race_pair(&template, &approve, &approve.clone(), ROUNDS, BUDGET);
}

#[test]
fn the_consoles_engine_operator_racing_a_cli_decision_ends_as_one_serial_order() {
    let template = held();
    let approve = Act::cli("approve", &["approve", HID]);
    let reject = Act::cli(
        "reject",
        &["approve", HID, "--reject", "--reason", "too risky"],
    );
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    // The console's engine operator in this process against a CLI process.
    let console_approve = Act::engine("console-approve", console_approve);
    let console_reject = Act::engine("console-reject", console_reject);
    race_pair(&template, &console_approve, &reject, ROUNDS, BUDGET);
    race_pair(&template, &console_reject, &approve, ROUNDS, BUDGET);
    race_pair(&template, &console_approve, &abort, ROUNDS, BUDGET);
}

/// A test-flow root whose workflow failed: `build` rejected by hephaestus and both fallbacks.
fn failed() -> Env {
    let env = dispatched();
    for (i, god) in ["hephaestus", "marvin", "hermes"].iter().enumerate() {
        let r = env.ack(&ack(&format!("ack_20260614_f{i}0"), HID, "rejected", god));
        assert_eq!(r["status"], "rejected", "{r}");
    }
    assert_eq!(env.state(WF)["status"], "failed");
    // Something for cleanup to delete.
    env.write(&format!("tmp/{WF}/scratch.txt"), "x");
    env
}

#[test]
fn rerun_racing_abort_and_cleanup_racing_abort_end_as_one_serial_order() {
    let template = failed();
    let rerun = Act::cli("rerun", &["rerun", WF, "--from", "build"]);
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    let cleanup = Act::cli("cleanup", &["cleanup", WF]);
    race_pair(&template, &rerun, &abort, ROUNDS, BUDGET);
    race_pair(&template, &rerun, &rerun.clone(), ROUNDS, BUDGET);
    race_pair(&template, &cleanup, &abort, ROUNDS, BUDGET);
}

const ONCE_FLOW: &str = r#"
workflow:
  id: once-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      max_deliveries: 1
      fallback_gods: [marvin]
"#;

/// A root whose `build` dispatch ran out of deliveries: a dead letter of hephaestus.
fn dead_lettered() -> Env {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/once-flow.yaml", ONCE_FLOW);
    env.start("once-flow", WF, HID, &[]);
    let rel = format!("conductor/pending/hephaestus/{HID}.json");
    let deadline = env.read(&rel)["ack_deadline"].as_str().unwrap().to_owned();
    let deadline = chrono::DateTime::parse_from_rfc3339(&deadline).unwrap();
    let start = Instant::now();
    while !env.exists(&format!("conductor/dead/hephaestus/{HID}.json")) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never dead-lettered"
        );
        if chrono::Utc::now() > deadline {
            env.ok(&["tick"], None);
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    env
}

#[test]
fn requeue_racing_an_ack_of_the_dead_letter_ends_as_one_serial_order() {
    let template = dead_lettered();
    let requeue = Act::cli("requeue", &["requeue", HID]);
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let complete = acked("complete", "ack_20260614_com1", "completed");
    race_pair(&template, &requeue, &accept, ROUNDS, BUDGET);
    race_pair(&template, &requeue, &complete, ROUNDS, BUDGET);
    race_pair(&template, &requeue, &requeue.clone(), ROUNDS, BUDGET);
}

/// Deadlines of 3 s: long enough to set every round up before the first falls due.
const TIMED_FLOWS: &str = r#"
workflow:
  id: acked-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 3s
      max_deliveries: 3
      fallback_gods: [marvin]
"#;

fn stamp_of(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc)
}

fn serve(env: &Env, log: &str) -> Guard {
    let mut c = env.command(&["serve", "--log", env.path(log).to_str().unwrap()]);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    Guard::spawn(c)
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(mut g: Guard) {
    let child = g.0.take().unwrap();
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "serve exits 0 on SIGTERM");
}

#[test]
fn acks_landing_as_two_supervisors_time_the_dispatch_out_are_applied_once() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/acked-flow.yaml", TIMED_FLOWS);
    env.write(
        "conductor/workflows/timed-flow.yaml",
        &TIMED_FLOWS
            .replace("acked-flow", "timed-flow")
            .replace("ack_wait: 3s\n", "ack_wait: 3s\n      timeout: 3s\n"),
    );
    let a = serve(&env, "a.log");
    let b = serve(&env, "b.log");
    wait_for("two heartbeats", Duration::from_secs(20), || {
        env.names("conductor/supervisor").len() >= 2
    });
    // Round i: an `accepted` ack sent near the ack deadline of a dispatch (acked-flow), and a
    // `completed` ack sent near the step deadline of an accepted one (timed-flow), each offset
    // from -150 ms to +150 ms across the rounds.
    let n = 12;
    let mut events: Vec<(chrono::DateTime<chrono::Utc>, Value)> = Vec::new();
    for i in 0..n {
        let offset = chrono::Duration::milliseconds(-150 + 300 * i / (n - 1));
        let (wf, hid) = (format!("wf_race_ad_{i}"), format!("hof_20260614_ad{i:04}"));
        env.start("acked-flow", &wf, &hid, &[]);
        let d = env.read(&format!("conductor/pending/hephaestus/{hid}.json"));
        let a = ack(&format!("ack_20260614_ad{i}"), &hid, "accepted", "late");
        events.push((stamp_of(&d["ack_deadline"]) + offset, a));

        let (wf, hid) = (format!("wf_race_st_{i}"), format!("hof_20260614_st{i:04}"));
        env.start("timed-flow", &wf, &hid, &[]);
        let r = env.ack(&ack(
            &format!("ack_20260614_sa{i}"),
            &hid,
            "accepted",
            "on it",
        ));
        assert_eq!(r["deadline_kind"], "step_timeout", "{r}");
        let c = ack(
            &format!("ack_20260614_sc{i}"),
            &hid,
            "completed",
            "done, late",
        );
        events.push((stamp_of(&r["deadline"]) + offset, c));
    }
    events.sort_by_key(|(at, _)| *at);
    let mut racers = Vec::new();
    for (i, (at, a)) in events.iter().enumerate() {
        if let Ok(left) = (*at - chrono::Utc::now()).to_std() {
            std::thread::sleep(left);
        }
        let file = env.dir.path().join(format!("event{i}.json"));
        std::fs::write(&file, serde_json::to_vec(a).unwrap()).unwrap();
        let mut c = env.command(&["ack", file.to_str().unwrap()]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        racers.push((a.clone(), Guard::spawn(c)));
    }
    for (a, g) in racers {
        let out = g.output();
        assert!(
            out.status.success(),
            "{a}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Nothing is due any more once every step is accepted or completed: let the supervisors settle.
    wait_for(
        "no timer and no intent left",
        Duration::from_secs(20),
        || {
            env.names("conductor/timers").is_empty()
                && env.names("conductor/journal-intents").is_empty()
        },
    );
    sigterm(a);
    sigterm(b);

    let journal = env.journal_entries();
    let acts = |action: &str, key: &str, value: &str| {
        journal
            .iter()
            .filter(|e| e["action"] == action && e["targets"][key] == value)
            .count()
    };
    // One workflow's outcome: its status and acks as expected, one dispatch with the ack's status
    // (archived), each redelivery journaled once, the ack recorded once. True when the ack landed
    // after a redelivery.
    let check = |wf: &str, hid: &str, status: &str, acks: usize, ack_status: &str, ack_id: &str| {
        let s = env.state(wf);
        assert_eq!(s["status"], status, "{wf}: {s:#}");
        assert_eq!(s["acks"].as_array().unwrap().len(), acks, "{wf}: {s:#}");
        let place = env.copies(hid);
        assert_eq!(place.len(), 1, "{hid}: one dispatch, {place:?}");
        assert!(place[0].starts_with("conductor/archive/"), "{place:?}");
        let d = env.read(&format!("{}/{hid}.json", place[0]));
        assert_eq!(d["ack_status"], ack_status, "{d:#}");
        let deliveries = d["deliveries"].as_array().unwrap().len();
        assert_eq!(
            acts("redeliver", "handoff_id", hid),
            deliveries - 1,
            "{hid}"
        );
        assert_eq!(acts("ack", "ack_id", ack_id), 1, "{ack_id}");
        deliveries > 1
    };
    let (mut late_accepts, mut late_completes) = (0, 0);
    for i in 0..n {
        // The accepted ack, and the completed one whatever the step timeout did.
        late_accepts += usize::from(check(
            &format!("wf_race_ad_{i}"),
            &format!("hof_20260614_ad{i:04}"),
            "in_progress",
            1,
            "accepted",
            &format!("ack_20260614_ad{i}"),
        ));
        late_completes += usize::from(check(
            &format!("wf_race_st_{i}"),
            &format!("hof_20260614_st{i:04}"),
            "completed",
            2,
            "completed",
            &format!("ack_20260614_sc{i}"),
        ));
    }
    assert!(journal.iter().all(|e| e["action"] != "dead_letter"));
    assert!(env.names("conductor/timers").is_empty());
    eprintln!(
        "{n} accepts at the ack deadline: {late_accepts} after a redelivery; \
         {n} completes at the step deadline: {late_completes} after a timeout"
    );
    assert_valid(&env);
}

#[test]
fn a_foreign_python_god_rewriting_its_inbox_races_our_acks_and_abort_as_one_serial_order() {
    let template = dispatched();
    let god = Act::python(
        "python-pending",
        "foreign_god.py",
        &["{root}", "hephaestus", WF, HID],
    );
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let pending = acked("pending", "ack_20260614_pen1", "pending");
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    race_pair(&template, &god, &accept, ROUNDS, BUDGET);
    race_pair(&template, &god, &pending, ROUNDS, BUDGET);
    race_pair(&template, &god, &abort, ROUNDS, BUDGET);
}

#[test]
fn a_racer_killed_mid_act_and_repeated_ends_as_one_serial_order() {
    let template = dispatched();
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let complete = acked("complete", "ack_20260614_com1", "completed");
    let reject = acked("reject", "ack_20260614_rej1", "rejected");
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    race_pair_killed(
        &template,
        &complete,
        "ack:after-archive",
        &reject,
        ROUNDS,
        BUDGET,
    );
    race_pair_killed(
        &template,
        &complete,
        "ack:after-archive",
        &abort,
        ROUNDS,
        BUDGET,
    );
    race_pair_killed(
        &template,
        &accept,
        "journal:before-append:ack",
        &accept.clone(),
        ROUNDS,
        BUDGET,
    );
}

#[test]
fn a_requeue_killed_mid_act_and_repeated_ends_as_one_serial_order() {
    let accept = acked("accept", "ack_20260614_acc1", "accepted");
    let template = dead_lettered();
    let requeue = Act::cli("requeue", &["requeue", HID]);
    race_pair_killed(
        &template,
        &requeue,
        "requeue:after-state",
        &requeue.clone(),
        ROUNDS,
        BUDGET,
    );
    race_pair_killed(
        &template,
        &requeue,
        "requeue:after-rewrite",
        &accept,
        ROUNDS,
        BUDGET,
    );
}

#[test]
fn the_same_submit_twice_at_once_and_cleanup_racing_a_submit_end_as_one_serial_order() {
    let template = Env::with_test_flow();
    let h = plan_handoff(HID, WF);
    let submit = |label| Act {
        label,
        args: vec![
            "handoff".into(),
            "submit".into(),
            format!("{{dir}}/{label}.json"),
        ],
        files: vec![(format!("{label}.json"), h.clone())],
        in_process: None,
        program: None,
        crash_at: None,
    };
    race_pair(
        &template,
        &submit("first"),
        &submit("second"),
        ROUNDS,
        BUDGET,
    );
    // Killed mid-act: repeated, or settled by the supervisor's pass alone.
    let (first, second) = (submit("first"), submit("second"));
    race_pair_killed(
        &template,
        &first,
        "submit:after-state",
        &second,
        ROUNDS,
        BUDGET,
    );
    let point = "journal:before-append:submit";
    race_pair_killed_then(&template, &first, point, &second, ROUNDS, BUDGET, false);

    // An aborted workflow: cleanup against a late handoff of the same workflow.
    let template = failed();
    template.ok(&["abort", WF, "--reason", "changed plans"], None);
    let late = handoff(
        "hof_20260614_ra0009",
        WF,
        "hephaestus",
        "iris",
        "build",
        &[],
    );
    let late = Act {
        label: "late-submit",
        args: vec!["handoff".into(), "submit".into(), "{dir}/late.json".into()],
        files: vec![("late.json".into(), late)],
        in_process: None,
        program: None,
        crash_at: None,
    };
    let cleanup = Act::cli("cleanup", &["cleanup", WF]);
    race_pair(&template, &cleanup, &late, ROUNDS, BUDGET);
}

#[test]
fn an_approval_killed_between_its_state_and_its_move_and_repeated_ends_as_one_serial_order() {
    let template = held();
    let approve = Act::cli("approve", &["approve", HID]);
    let reject = Act::cli(
        "reject",
        &["approve", HID, "--reject", "--reason", "too risky"],
    );
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    race_pair_killed(
        &template,
        &approve,
        "held:after-state",
        &reject,
        ROUNDS,
        BUDGET,
    );
    race_pair_killed(
        &template,
        &reject,
        "held:after-state",
        &approve,
        ROUNDS,
        BUDGET,
    );
    // Against an abort, an approval killed before its move leaves the dispatch in `_quarantine`, and
    // the abort withdraws it from there (serially it is withdrawn from the inbox, with `approved_by`):
    // not one serial order's files, so checked act by act.
    let killed = approve.killed_at("held:after-state");
    let start = Instant::now();
    let mut kills = 0;
    for round in 0..ROUNDS {
        if round >= 5 && start.elapsed() > BUDGET {
            break;
        }
        let env = copy_of(&template);
        let outs = race(vec![killed.racer(&env), abort.racer(&env)], &delays(round));
        assert_eq!(outs[1].status.code(), Some(0), "{}", explain(&outs));
        if outs[0].status.code().is_none() {
            kills += 1;
            approve.run(&env);
        }
        env.ok(&["tick"], None);
        let s = env.state(WF);
        assert_eq!(s["status"], "aborted");
        let approvals = s["approvals"].as_array().map_or(0, Vec::len);
        let journal = env.journal_entries();
        let acts = |action: &str, outcome: &str| {
            journal
                .iter()
                .filter(|e| e["action"] == action && e["outcome"] == outcome)
                .count()
        };
        assert_eq!(acts("approve", "approved"), approvals, "{journal:#?}");
        assert_eq!(acts("abort", "aborted"), 1, "{journal:#?}");
        assert_eq!(env.copies(HID), vec!["conductor/archive/hephaestus"]);
        let d = env.read(&format!("conductor/archive/hephaestus/{HID}.json"));
        assert_eq!(d["ack_status"], "withdrawn");
        assert!(env.names("conductor/journal-intents").is_empty());
        assert_valid(&env);
    }
    assert!(kills > 0, "held:after-state was never reached");
}

#[test]
fn aborts_landing_as_two_supervisors_redeliver_withdraw_the_one_dispatch() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/acked-flow.yaml", TIMED_FLOWS);
    let a = serve(&env, "a.log");
    let b = serve(&env, "b.log");
    wait_for("two heartbeats", Duration::from_secs(20), || {
        env.names("conductor/supervisor").len() >= 2
    });
    // Round i: an abort sent near the ack deadline, offset from -150 ms to +150 ms.
    let n = 12;
    let mut events = Vec::new();
    for i in 0..n {
        let offset = chrono::Duration::milliseconds(-150 + 300 * i / (n - 1));
        let (wf, hid) = (format!("wf_race_ab_{i}"), format!("hof_20260614_ab{i:04}"));
        env.start("acked-flow", &wf, &hid, &[]);
        let d = env.read(&format!("conductor/pending/hephaestus/{hid}.json"));
        events.push((stamp_of(&d["ack_deadline"]) + offset, wf));
    }
    let mut racers = Vec::new();
    for (at, wf) in &events {
        if let Ok(left) = (*at - chrono::Utc::now()).to_std() {
            std::thread::sleep(left);
        }
        let mut c = env.command(&["abort", wf, "--reason", "late abort"]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        racers.push((wf.clone(), Guard::spawn(c)));
    }
    for (wf, g) in racers {
        let out = g.output();
        assert!(
            out.status.success(),
            "{wf}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wait_for("no intent left", Duration::from_secs(20), || {
        env.names("conductor/journal-intents").is_empty()
    });
    sigterm(a);
    sigterm(b);

    let journal = env.journal_entries();
    let mut redelivered = 0;
    for i in 0..n {
        let (wf, hid) = (format!("wf_race_ab_{i}"), format!("hof_20260614_ab{i:04}"));
        let s = env.state(&wf);
        assert_eq!(s["status"], "aborted", "{wf}: {s:#}");
        let place = env.copies(&hid);
        assert_eq!(place.len(), 1, "{hid}: one dispatch, {place:?}");
        assert!(place[0].starts_with("conductor/archive/"), "{place:?}");
        let d = env.read(&format!("{}/{hid}.json", place[0]));
        assert_eq!(d["ack_status"], "withdrawn", "{d:#}");
        let deliveries = d["deliveries"].as_array().unwrap().len();
        let count = |action: &str| {
            journal
                .iter()
                .filter(|e| e["action"] == action && e["targets"]["workflow_id"] == wf)
                .count()
        };
        assert_eq!(count("redeliver"), deliveries - 1, "{hid}");
        assert_eq!(count("abort"), 1, "{wf}");
        let m = env.read(&format!("conductor/state/{wf}.aborted.json"));
        assert_eq!(
            m["dispatches_withdrawn"].as_array().unwrap().len(),
            1,
            "{m:#}"
        );
        redelivered += usize::from(deliveries > 1);
    }
    assert!(journal.iter().all(|e| e["action"] != "dead_letter"));
    eprintln!("{n} aborts at the ack deadline: {redelivered} after a redelivery");
    assert_valid(&env);
}

#[test]
fn an_ack_killed_before_its_journal_entry_is_journaled_in_its_own_words_by_the_next_pass() {
    // The same ack id with another status races the killed ack (and is refused); no repeat: the
    // supervisor's pass journals the ack from its intent, whichever attempt wrote it last.
    let template = dispatched();
    let accept = acked("accept", "ack_20260614_same3", "accepted");
    let reject = acked("reject", "ack_20260614_same3", "rejected");
    let point = "journal:before-append:ack";
    race_pair_killed_then(&template, &accept, point, &reject, ROUNDS, BUDGET, false);
    let approve = Act::cli("approve", &["approve", HID]);
    let refuse = Act::cli(
        "reject",
        &["approve", HID, "--reject", "--reason", "too risky"],
    );
    let point = "journal:before-append:approve";
    race_pair_killed_then(&held(), &approve, point, &refuse, ROUNDS, BUDGET, false);
}

#[test]
fn a_rerun_killed_between_its_state_and_its_dispatch_races_abort_and_rerun_as_one_serial_order() {
    let template = failed();
    let rerun = Act::cli("rerun", &["rerun", WF, "--from", "build"]);
    let abort = Act::cli("abort", &["abort", WF, "--reason", "changed plans"]);
    race_pair_killed(
        &template,
        &rerun,
        "rerun:after-state",
        &abort,
        ROUNDS,
        BUDGET,
    );
    race_pair_killed(
        &template,
        &rerun,
        "rerun:after-state",
        &rerun.clone(),
        ROUNDS,
        BUDGET,
    );
}
