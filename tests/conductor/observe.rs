//! `pantheon status` and `pantheon check` (docs/OBSERVABILITY.md) on healthy, degraded and broken
//! roots made by the real binary's acts: each status line and each monitoring-plugin exit code.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A definition whose `build` step has an ack deadline of `ack_wait` and one delivery.
fn deadline_flow(ack_wait: &str) -> String {
    format!(
        r#"
workflow:
  id: obs-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: {ack_wait}
      max_deliveries: 1
"#
    )
}

fn status(env: &Env, format: &str) -> String {
    let out = env.run(&["status", "--format", format], None);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

fn status_json(env: &Env) -> Value {
    serde_json::from_str(&status(env, "json")).unwrap()
}

/// `check`'s exit code and its one line.
fn check(env: &Env, args: &[&str]) -> (i32, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let out = env.run(&all, None);
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "one line: {line:?}");
    (out.status.code().unwrap(), line.trim_end().to_owned())
}

/// Moves the `dispatched_at` of the dispatch at `rel` `mins` minutes into the past, as an old
/// dispatch would carry it.
fn age(env: &Env, rel: &str, mins: i64) {
    let mut d = env.read(rel);
    let at = chrono::Utc::now() - chrono::Duration::minutes(mins);
    d["dispatched_at"] = Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    env.write(rel, &serde_json::to_string_pretty(&d).unwrap());
}

#[test]
fn a_healthy_root_is_all_clear_and_ok() {
    let env = Env::dispatched("wf_obs_ok", "hof_20260614_ob0001");
    assert_eq!(status(&env, "line"), "✓");
    assert_eq!(status(&env, "tmux"), "#[fg=green]✓#[default]");
    let j = status_json(&env);
    assert_eq!(j["waiting"], 1, "{j:#}");
    assert_eq!(j["attention"], 0);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.starts_with(
            "PANTHEON OK - 1 waiting, 0 held, 0 supervisors alive; journal chain intact | "
        ),
        "{line}"
    );
    assert!(line.contains(" waiting=1;;;0; "), "{line}");
}

#[test]
fn held_overdue_and_dead_lettered_dispatches_show_in_the_line_and_warn() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/obs-flow.yaml", &deadline_flow("1s"));
    // A dead letter: one delivery, its 1 s ack deadline passed, one supervisor pass.
    env.start("obs-flow", "wf_obs_dead", "hof_20260614_ob0002", &[]);
    let inbox = "conductor/pending/hephaestus/hof_20260614_ob0002.json";
    std::thread::sleep(Duration::from_millis(1100));
    let r = env.ok(&["tick"], None);
    assert_eq!(
        r["dead_lettered"].as_array().map(Vec::len),
        Some(1),
        "{r:#}"
    );
    assert!(!env.exists(inbox));
    // An unacked dispatch waiting ten minutes: overdue by the unacked limit (5 minutes).
    env.submit(&plan_handoff("hof_20260614_ob0003", "wf_obs_late"));
    age(
        &env,
        "conductor/pending/hephaestus/hof_20260614_ob0003.json",
        10,
    );
    // A held one, just held: not overdue (the held limit is 30 minutes).
    env.write(
        "conductor/rules/hold.yaml",
        "rules:\n  - id: hold-all\n    then: {handling_mode: approval_required}\n",
    );
    env.submit(&handoff(
        "hof_20260614_ob0004",
        "wf_obs_held",
        "thoth",
        "marvin",
        "x",
        &[],
    ));
    // attention: 1 held + 1 overdue + 1 dead letter; alerts: the overdue one.
    assert_eq!(status(&env, "line"), "@3 ‖1 ▲1 ☠1");
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 1, "{line}");
    assert!(
        line.starts_with("PANTHEON WARNING - 1 overdue dispatch; 1 dead letter | overdue=1;0;;0; dead_letters=1;0;;0; "),
        "{line}"
    );

    // Held past the held limit: counted once in attention, and as an alert.
    age(
        &env,
        "conductor/pending/_quarantine/hof_20260614_ob0004.json",
        45,
    );
    assert_eq!(status(&env, "line"), "@3 ‖1 ▲2 ☠1");
    let j = status_json(&env);
    assert_eq!(
        (j["overdue"].as_u64(), j["overdue_held"].as_u64()),
        (Some(2), Some(1))
    );

    // Thresholds: on the command line, then in the root config.
    let (code, line) = check(&env, &["--crit", "dead_letters=1"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - 1 dead letter; 2 overdue dispatches |"),
        "{line}"
    );
    env.write(
        "conductor/config.yaml",
        "check:\n  overdue: {warn: 5}\n  dead_letters: {warn: 2, crit: 10}\n",
    );
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.contains(" overdue=2;4;;0; dead_letters=1;1;9;0; "),
        "{line}"
    );
}

#[test]
fn unenforced_deadlines_and_a_broken_journal_are_critical() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/obs-flow.yaml", &deadline_flow("1h"));
    env.start("obs-flow", "wf_obs_nosup", "hof_20260614_ob0005", &[]);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - no supervisor alive to enforce 1 ack deadline |"),
        "{line}"
    );
    assert_eq!(status(&env, "line"), "@1 ▲1");
    assert_eq!(check(&env, &["--supervisor", "never"]).0, 0);

    // A real supervisor beating: the deadline is enforced, the check is OK again.
    let serve = Serve::start(&env);
    serve.wait_for_heartbeat(&env);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(line.contains("1 supervisor alive"), "{line}");
    assert_eq!(status(&env, "line"), "✓");
    drop(serve);

    // An edited journal entry breaks the chain.
    let journal = env.path("conductor/journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains("\"submit\""), "{text}");
    std::fs::write(&journal, text.replacen("\"submit\"", "\"sUbmit\"", 1)).unwrap();
    let (code, line) = check(&env, &["--supervisor", "never"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - journal chain broken: "),
        "{line}"
    );
    assert_eq!(check(&env, &["--supervisor", "never", "--no-journal"]).0, 0);
}

#[test]
fn a_check_that_cannot_judge_is_unknown() {
    let env = Env::with_test_flow();
    let missing = env.path("no-such-root");
    let out = std::process::Command::new(bin())
        .args(["--root", missing.to_str().unwrap(), "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("PANTHEON UNKNOWN - ") && line.contains("not a pantheon root"),
        "{line}"
    );

    let (code, line) = check(&env, &["--warn", "overdue=many"]);
    assert_eq!(code, 3, "{line}");
    assert!(line.contains("expected FIGURE=N"), "{line}");
    env.write("conductor/config.yaml", "check:\n  overdue: {warn: -1}\n");
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 3, "{line}");
    assert!(
        line.contains("check.overdue.warn: -1 is not a count"),
        "{line}"
    );
}

/// `pantheon serve` on the root, killed and reaped on drop.
struct Serve(Child);

impl Serve {
    fn start(env: &Env) -> Self {
        let child = env
            .command(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn wait_for_heartbeat(&self, env: &Env) {
        let until = Instant::now() + Duration::from_secs(20);
        while env.names("conductor/supervisor").is_empty() {
            assert!(Instant::now() < until, "serve wrote no heartbeat");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
