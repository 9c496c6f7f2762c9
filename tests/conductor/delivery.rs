//! Ack deadlines, redelivery, dead letters, requeue and rerun (docs/PROTOCOL.md §2.10-2.11), in real
//! time with a 1 s `ack_wait`, through `pantheon tick` and `pantheon serve`.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

const DELIVER_FLOW: &str = r#"
workflow:
  id: deliver-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      max_deliveries: 3
      fallback_gods: [marvin]
"#;

/// A root with the test flow and the definition `yaml` (named `id`).
fn flow_env(id: &str, yaml: &str) -> Env {
    let env = Env::with_test_flow();
    env.write(&format!("conductor/workflows/{id}.yaml"), yaml);
    env
}

fn env() -> Env {
    flow_env("deliver-flow", DELIVER_FLOW)
}

fn start(env: &Env, wf: &str, hid: &str) -> Value {
    env.start("deliver-flow", wf, hid, &[])
}

/// Waits past the time in the `field` of the dispatch at `rel`.
fn wait_past(env: &Env, rel: &str, field: &str) {
    let d = env.read(rel);
    let deadline = chrono::DateTime::parse_from_rfc3339(d[field].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    if let Ok(left) = (deadline - chrono::Utc::now()).to_std() {
        std::thread::sleep(left + Duration::from_millis(30));
    }
}

/// Waits past the ack deadline of the dispatch at `rel`.
fn wait_past_deadline(env: &Env, rel: &str) {
    wait_past(env, rel, "ack_deadline");
}

fn acts(env: &Env, action: &str, hid: &str) -> usize {
    env.journal_entries()
        .iter()
        .filter(|e| e["action"] == action && e["targets"]["handoff_id"] == hid)
        .count()
}

fn assert_valid(env: &Env) {
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
}

#[test]
fn tick_redelivers_to_the_same_god_then_the_fallback_then_dead_letters() {
    let env = env();
    let (wf, hid) = ("wf_deliver_tick", "hof_20260614_de0001");
    start(&env, wf, hid);
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    let d = env.read(&inbox);
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(d["deliveries"][0]["to"], "hephaestus");
    assert_eq!(d["ack_wait"], "1s");
    assert_eq!(d["max_deliveries"], 3);

    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"], json!([]), "nothing is due yet");
    assert_eq!(r["watched"], 1);
    assert!(r["next_deadline"].is_string());

    wait_past_deadline(&env, &inbox);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["to_god"], "hephaestus");
    assert_eq!(r["redelivered"][0]["delivery"], 2);
    assert_eq!(env.read(&inbox)["deliveries"].as_array().unwrap().len(), 2);

    wait_past_deadline(&env, &inbox);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["to_god"], "marvin");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/marvin".to_string()]
    );
    assert_eq!(env.state(wf)["dispatched_to"], "marvin");

    let moved = format!("conductor/pending/marvin/{hid}.json");
    wait_past_deadline(&env, &moved);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["dead_lettered"][0]["handoff_id"], hid);
    assert_eq!(env.copies(hid), vec!["conductor/dead/marvin".to_string()]);
    let dead = env.read(&format!("conductor/dead/marvin/{hid}.json"));
    assert_eq!(dead["deliveries"].as_array().unwrap().len(), 3);
    assert_eq!(
        dead["context"]["summary"], "thoth finished plan",
        "the whole payload"
    );
    assert!(
        dead["dead_reason"]
            .as_str()
            .unwrap()
            .contains("3 deliveries")
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "stalled");
    assert!(st["failure_reason"].as_str().unwrap().contains(hid));
    assert_eq!(acts(&env, "redeliver", hid), 2);
    assert_eq!(acts(&env, "dead_letter", hid), 1);
    let listed = env.ok(&["dead"], None);
    assert_eq!(listed["dead"][0]["dispatch"]["handoff_id"], hid);
    assert_valid(&env);

    // Another tick changes nothing.
    let r = env.ok(&["tick"], None);
    assert_eq!(
        (r["redelivered"].clone(), r["dead_lettered"].clone()),
        (json!([]), json!([]))
    );

    // A mistyped --to is refused (it would deliver into an inbox nobody reads), naming the gods.
    let before = env.snapshot();
    let err = env.refused(&["requeue", hid, "--to", "hermez"], None);
    assert!(err.contains("--to hermez: hermez has no inbox"), "{err}");
    assert!(
        err.contains("gods here: caduceus, hephaestus, hermes"),
        "{err}"
    );
    assert_eq!(env.snapshot(), before);

    // requeue puts it back, deliveries reset, journaled.
    let r = env.ok(
        &["--actor", "alice", "requeue", hid, "--to", "hermes"],
        None,
    );
    assert_eq!(r["to_god"], "hermes");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/hermes".to_string()]
    );
    let d = env.read(&format!("conductor/pending/hermes/{hid}.json"));
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 1);
    assert!(d.get("dead_reason").is_none());
    let st = env.state(wf);
    assert_eq!(st["status"], "waiting_for_ack");
    assert_eq!(st["dispatched_to"], "hermes");
    let requeued: Vec<Value> = env
        .journal_entries()
        .into_iter()
        .filter(|e| e["action"] == "requeue")
        .collect();
    assert_eq!(requeued.len(), 1);
    assert_eq!(requeued[0]["actor"], "alice");
    assert_valid(&env);
}

#[test]
fn a_pending_ack_with_an_eta_postpones_redelivery() {
    let env = env();
    let (wf, hid) = ("wf_deliver_eta", "hof_20260614_de0002");
    start(&env, wf, hid);
    let eta = chrono::Utc::now() + chrono::Duration::milliseconds(2500);
    let eta_text = eta.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let mut a = ack("ack_20260614_de2", hid, "pending", "on it, need 2.5 s");
    a["eta"] = json!(eta_text);
    let r = env.ack(&a);
    assert_eq!(
        r["deadline"], eta_text,
        "the ack result says when the deadline falls"
    );
    assert_eq!(r["deadline_kind"], "ack");
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    std::thread::sleep(Duration::from_millis(1300));
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"], json!([]), "the ETA moved the deadline");
    wait_past_deadline(&env, &inbox);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["handoff_id"], hid);
    assert_eq!(env.read(&inbox)["deliveries"].as_array().unwrap().len(), 2);

    // accepted ends the ack deadline: no more redelivery.
    let r = env.ack(&ack("ack_20260614_de3", hid, "accepted", ""));
    assert_eq!(r["state_status"], "in_progress");
    std::thread::sleep(Duration::from_millis(1100));
    let r = env.ok(&["tick"], None);
    assert_eq!(r["watched"], 0);
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()]
    );
}

fn serve(env: &Env, log: &str) -> Child {
    env.command(&["serve", "--log", env.path(log).to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn terminate(mut child: Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "serve exits 0 on SIGTERM");
}

#[test]
fn serve_redelivers_and_dead_letters_as_deadlines_fall_due_and_exits_on_sigterm() {
    let env = env();
    // A replace's temporary file that a writer killed two hours ago left, and one being written.
    std::fs::create_dir_all(env.path(".tmp")).unwrap();
    let left = env.path(".tmp/.tmp-00000000dead.part");
    std::fs::File::create(&left)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
    std::fs::write(env.path(".tmp/.tmp-00000000live.part"), b"{").unwrap();
    let child = serve(&env, "serve.log");
    wait_for("the heartbeat", Duration::from_secs(20), || {
        !env.names("conductor/supervisor").is_empty()
    });
    wait_for("the leftover's removal", Duration::from_secs(20), || {
        !left.exists()
    });
    assert!(env.path(".tmp/.tmp-00000000live.part").exists());
    let (wf, hid) = ("wf_deliver_serve", "hof_20260614_de0003");
    start(&env, wf, hid);
    // The act is journaled just after the file moves.
    wait_for("the dead letter", Duration::from_secs(30), || {
        acts(&env, "dead_letter", hid) == 1
    });
    assert_eq!(env.copies(hid).len(), 1);
    assert_eq!(acts(&env, "redeliver", hid), 2);
    assert_eq!(acts(&env, "dead_letter", hid), 1);
    assert_eq!(env.state(wf)["status"], "stalled");
    let dead = env.read(&format!("conductor/dead/marvin/{hid}.json"));
    let at: Vec<&str> = dead["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["to"].as_str().unwrap())
        .collect();
    assert_eq!(at, ["hephaestus", "hephaestus", "marvin"]);
    terminate(child);
    assert!(
        env.names("conductor/supervisor").is_empty(),
        "heartbeat removed on exit"
    );
    let log = std::fs::read_to_string(env.path("serve.log")).unwrap();
    assert!(log.contains("dead-lettered"), "{log}");
    assert!(log.contains("stopped"), "{log}");
    assert_valid(&env);
}

#[test]
fn two_supervisors_redeliver_each_dispatch_exactly_once() {
    let env = env();
    let a = serve(&env, "a.log");
    let b = serve(&env, "b.log");
    wait_for("two heartbeats", Duration::from_secs(20), || {
        env.names("conductor/supervisor").len() == 2
    });
    let n = 12;
    let ids: Vec<(String, String)> = (0..n)
        .map(|i| {
            (
                format!("wf_deliver_two_{i}"),
                format!("hof_20260614_df{i:04}"),
            )
        })
        .collect();
    for (wf, hid) in &ids {
        start(&env, wf, hid);
    }
    wait_for("every dead letter", Duration::from_secs(60), || {
        env.journal_entries()
            .iter()
            .filter(|e| e["action"] == "dead_letter")
            .count()
            >= n
    });
    for (wf, hid) in &ids {
        assert_eq!(
            env.copies(hid),
            vec!["conductor/dead/marvin".to_string()],
            "{hid}"
        );
        assert_eq!(
            acts(&env, "redeliver", hid),
            2,
            "{hid}: each redelivery once"
        );
        assert_eq!(acts(&env, "dead_letter", hid), 1, "{hid}");
        let dead = env.read(&format!("conductor/dead/marvin/{hid}.json"));
        assert_eq!(dead["deliveries"].as_array().unwrap().len(), 3, "{hid}");
        assert_eq!(env.state(wf)["status"], "stalled");
    }
    terminate(a);
    terminate(b);
    assert_valid(&env);
}

/// Runs `pantheon ARGS` with a crash point; returns whether the point was reached (SIGKILL).
fn killed_at(env: &Env, args: &[&str], point: &str) -> bool {
    let out = env
        .command(args)
        .env("PANTHEON_TEST_CRASH_AT", point)
        .output()
        .unwrap();
    out.status.signal() == Some(libc::SIGKILL)
}

/// Runs `tick` with a crash point; returns whether the point was reached (SIGKILL).
fn tick_killed_at(env: &Env, point: &str) -> bool {
    killed_at(env, &["tick"], point)
}

/// Starts `wf` and rejects its `build` dispatch through every god, so the workflow fails.
fn start_failed(env: &Env, wf: &str, hid: &str, ack_prefix: &str) {
    start(env, wf, hid);
    for i in 0..2 {
        env.ack(&ack(
            &format!("ack_20260614_{ack_prefix}{i}"),
            hid,
            "rejected",
            "cannot",
        ));
    }
    assert_eq!(env.state(wf)["status"], "failed");
}

/// Installs `deliver-once-flow`: one delivery, so the first deadline dead-letters.
fn install_once_flow(env: &Env) {
    env.write(
        "conductor/workflows/deliver-once-flow.yaml",
        &DELIVER_FLOW
            .replace("deliver-flow", "deliver-once-flow")
            .replace("max_deliveries: 3", "max_deliveries: 1"),
    );
}

#[test]
fn a_supervisor_killed_during_redelivery_or_dead_lettering_loses_and_doubles_nothing() {
    let env = env();
    for (i, (point, redeliveries)) in [
        ("redeliver:after-state", 1),
        ("redeliver:after-rewrite", 1),
        ("dead:after-state", 2),
        ("dead:after-rewrite", 2),
    ]
    .iter()
    .enumerate()
    {
        let wf = format!("wf_deliver_crash_{i}");
        let hid = format!("hof_20260614_dc{i:04}");
        start(&env, &wf, &hid);
        let mut at = format!("conductor/pending/hephaestus/{hid}.json");
        for _ in 0..*redeliveries {
            wait_past_deadline(&env, &at);
            env.ok(&["tick"], None);
            let c = env.copies(&hid);
            assert_eq!(c.len(), 1);
            at = format!("{}/{hid}.json", c[0]);
        }
        wait_past_deadline(&env, &at);
        assert!(tick_killed_at(&env, point), "{point} was not reached");
        assert_eq!(env.copies(&hid).len(), 1, "{point}: never a copy");
        env.assert_all_json_valid();
        // The next pass finishes the act.
        env.ok(&["tick"], None);
        let c = env.copies(&hid);
        assert_eq!(c.len(), 1, "{point}: {c:?}");
        let d = env.read(&format!("{}/{hid}.json", c[0]));
        let n = d["deliveries"].as_array().unwrap().len();
        if point.starts_with("dead") {
            assert_eq!(c[0], "conductor/dead/marvin", "{point}");
            assert_eq!(n, 3, "{point}");
            assert_eq!(env.state(&wf)["status"], "stalled", "{point}");
        } else {
            assert_eq!(c[0], "conductor/pending/marvin", "{point}");
            assert_eq!(n, 3, "{point}: delivery 3 recorded once");
            assert_eq!(env.state(&wf)["dispatched_to"], "marvin", "{point}");
        }
    }
    assert_valid(&env);
}

#[test]
fn rerun_from_a_step_with_edited_context_keeps_every_attempt() {
    let env = env();
    let (wf, hid) = ("wf_deliver_rerun", "hof_20260614_de0005");
    start_failed(&env, wf, hid, "dr");
    let before = env.state(wf);
    let history_before = before["step_history"].as_array().unwrap().len();

    env.write(
        "ctx.json",
        r#"{"summary": "retry with the smaller design", "decisions": ["use the smaller design"]}"#,
    );
    let ctx = env.path("ctx.json");
    let r = env.ok(
        &[
            "rerun",
            wf,
            "--from",
            "build",
            "--context",
            ctx.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(r["status"], "rerun");
    assert_eq!(r["previous_status"], "failed");
    assert_eq!(r["attempt"], 2);
    let new_hid = r["handoff_id"].as_str().unwrap().to_owned();
    let d = env.read(&format!("conductor/pending/hephaestus/{new_hid}.json"));
    assert_eq!(d["context"]["decisions"], json!(["use the smaller design"]));
    assert_eq!(d["context"]["summary"], "retry with the smaller design");
    assert_eq!(
        d["deliveries"].as_array().unwrap().len(),
        1,
        "a fresh delivery"
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "waiting_for_ack");
    assert_eq!(
        st["step_history"].as_array().unwrap().len(),
        history_before + 1
    );
    assert_eq!(st["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(st["attempts"][0]["previous_status"], "failed");
    assert_eq!(acts(&env, "rerun", &new_hid), 1);
    // A running workflow is not rerun.
    let e = env.refused(&["rerun", wf, "--from", "build"], None);
    assert!(e.contains("waiting_for_ack"), "{e}");
    assert_valid(&env);
}

#[test]
fn a_rerun_killed_between_its_state_and_its_dispatch_is_finished_by_repeating_it() {
    let env = env();
    let (wf, hid) = ("wf_deliver_rerun_crash", "hof_20260614_de0015");
    start_failed(&env, wf, hid, "rc");
    let history_before = env.state(wf)["step_history"].as_array().unwrap().len();
    assert!(
        killed_at(&env, &["rerun", wf, "--from", "build"], "rerun:after-state"),
        "the crash point was not reached"
    );
    env.assert_all_json_valid();
    let st = env.state(wf);
    let new_hid = st["attempts"][0]["handoff_id"].as_str().unwrap().to_owned();
    assert!(
        env.copies(&new_hid).is_empty(),
        "killed before its dispatch"
    );

    // The repeat finishes the same rerun: one attempt, one dispatch, one journal entry.
    let r = env.ok(&["rerun", wf, "--from", "build"], None);
    assert_eq!(r["handoff_id"], new_hid.as_str());
    assert_eq!(r["attempt"], 2);
    assert_eq!(r["previous_status"], "failed");
    assert_eq!(
        env.copies(&new_hid),
        vec!["conductor/pending/hephaestus".to_string()]
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "waiting_for_ack");
    assert_eq!(st["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(
        st["step_history"].as_array().unwrap().len(),
        history_before + 1
    );
    assert_eq!(acts(&env, "rerun", &new_hid), 1);
    // Once its dispatch exists, a further repeat is refused as before.
    let e = env.refused(&["rerun", wf, "--from", "build"], None);
    assert!(e.contains("waiting_for_ack"), "{e}");
    assert_valid(&env);
}

#[test]
fn a_requeue_killed_halfway_is_finished_by_repeating_it() {
    let env = env();
    install_once_flow(&env);
    for (i, point) in ["requeue:after-state", "requeue:after-rewrite"]
        .iter()
        .enumerate()
    {
        let wf = format!("wf_requeue_crash_{i}");
        let hid = format!("hof_20260614_rq{i:04}");
        env.submit(&def_handoff(
            handoff(&hid, &wf, "thoth", "hephaestus", "plan", &[]),
            "deliver-once-flow",
            None,
        ));
        wait_past_deadline(&env, &format!("conductor/pending/hephaestus/{hid}.json"));
        env.ok(&["tick"], None);
        assert_eq!(
            env.copies(&hid),
            vec!["conductor/dead/hephaestus".to_string()]
        );
        assert!(
            killed_at(&env, &["requeue", &hid, "--to", "hermes"], point),
            "{point} was not reached"
        );
        assert_eq!(env.copies(&hid).len(), 1, "{point}: never a copy");
        env.assert_all_json_valid();
        let r = env.ok(&["requeue", &hid, "--to", "hermes"], None);
        assert_eq!(r["to_god"], "hermes", "{point}");
        assert_eq!(
            env.copies(&hid),
            vec!["conductor/pending/hermes".to_string()],
            "{point}"
        );
        let d = env.read(&format!("conductor/pending/hermes/{hid}.json"));
        assert_eq!(d["deliveries"].as_array().unwrap().len(), 1, "{point}");
        assert!(d.get("dead_at").is_none(), "{point}");
        let st = env.state(&wf);
        assert_eq!(st["status"], "waiting_for_ack", "{point}");
        assert_eq!(st["dispatched_to"], "hermes", "{point}");
        assert_eq!(acts(&env, "requeue", &hid), 1, "{point}");
    }
    assert_valid(&env);
}

#[test]
fn a_requeue_or_rerun_killed_before_its_journal_entry_is_journaled_once_by_the_next_tick() {
    let env = env();
    install_once_flow(&env);
    let killed = |args: &[&str], point: &str| {
        assert!(killed_at(&env, args, point), "{point} was not reached");
    };

    // A requeue killed after its act, before its journal entry.
    let (wf, hid) = ("wf_requeue_journal", "hof_20260614_rj0001");
    env.submit(&def_handoff(
        handoff(hid, wf, "thoth", "hephaestus", "plan", &[]),
        "deliver-once-flow",
        None,
    ));
    wait_past_deadline(&env, &format!("conductor/pending/hephaestus/{hid}.json"));
    env.ok(&["tick"], None);
    killed(
        &["requeue", hid, "--to", "hermes"],
        "journal:before-append:requeue",
    );
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/hermes".to_string()],
        "the act was done"
    );
    assert_eq!(acts(&env, "requeue", hid), 0);
    // Its repeat is refused (nothing is dead any more) and leaves the intent for the tick.
    env.refused(&["requeue", hid], None);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 1, "{r:#}");
    assert_eq!(acts(&env, "requeue", hid), 1);
    let e = env
        .journal_entries()
        .into_iter()
        .find(|e| e["action"] == "requeue")
        .unwrap();
    assert_eq!(e["targets"]["to_god"], "hermes", "{e:#}");
    assert_eq!(e["outcome"], "requeued", "{e:#}");
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0, "{r:#}");
    assert_eq!(acts(&env, "requeue", hid), 1);

    // A rerun killed after its dispatch, before its journal entry.
    let (wf, hid) = ("wf_rerun_journal", "hof_20260614_rj0002");
    start_failed(&env, wf, hid, "rj");
    killed(
        &["rerun", wf, "--from", "build"],
        "journal:before-append:rerun",
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "waiting_for_ack", "the act was done");
    let new_hid = st["attempts"][0]["handoff_id"].as_str().unwrap().to_owned();
    assert_eq!(env.copies(&new_hid).len(), 1);
    assert_eq!(acts(&env, "rerun", &new_hid), 0);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 1, "{r:#}");
    assert_eq!(acts(&env, "rerun", &new_hid), 1);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0, "{r:#}");
    assert_eq!(env.names("conductor/journal-intents"), Vec::<String>::new());
    assert_valid(&env);
}

#[test]
fn root_config_sets_the_default_ack_wait_and_bad_values_are_warned() {
    let env = Env::with_test_flow();
    env.write(
        "conductor/config.yaml",
        "ack_wait: 1h\nmax_deliveries: 5\nlock_timeout: forever\nrun: rm -rf /\n",
    );
    let hid = "hof_20260614_de0006";
    env.submit(&plan_handoff(hid, "wf_deliver_cfg"));
    let d = env.read(&format!("conductor/pending/hephaestus/{hid}.json"));
    assert_eq!(d["ack_wait"], "3600s");
    assert_eq!(d["max_deliveries"], 5);
    // The environment overrides the file.
    let out = env
        .command(&["validate"])
        .env("PANTHEON_MAX_DELIVERIES", "7")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = report.to_string();
    assert!(text.contains("unknown key"), "{text}");
    assert!(text.contains("lock_timeout"), "{text}");
    assert!(text.contains("no supervisor is alive"), "{text}");
}

const THREE_STEP_FLOW: &str = r#"
workflow:
  id: three-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      max_deliveries: 5
      fallback_gods: [marvin]
    - id: ship
      god: iris
"#;

/// An ack through the engine as god `by` (what the MCP server and the demo gods do: `Actor::God`).
fn ack_as(env: &Env, by: &str, a: &Value) -> pantheon::engine::Result<Value> {
    use pantheon::engine::{Actor, Conductor};
    let c = Conductor::new(pantheon::engine::Root::at(&env.root));
    c.ack_handoff(a, Actor::God(by.to_owned()))
        .map(|r| serde_json::to_value(r).unwrap())
}

#[test]
fn an_ack_from_an_earlier_target_is_accepted_while_open_and_a_late_one_is_a_duplicate() {
    let env = flow_env("three-flow", THREE_STEP_FLOW);
    let (wf, hid) = ("wf_deliver_earlier", "hof_20260614_de0007");
    env.start("three-flow", wf, hid, &[]);
    // Deliveries 2 (hephaestus again) and 3 (the fallback, marvin).
    let mut at = format!("conductor/pending/hephaestus/{hid}.json");
    for to in ["hephaestus", "marvin"] {
        wait_past_deadline(&env, &at);
        let r = env.ok(&["tick"], None);
        assert_eq!(r["redelivered"][0]["to_god"], to);
        at = format!("conductor/pending/{to}/{hid}.json");
    }
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/marvin".to_string()]
    );
    assert_eq!(env.state(wf)["dispatched_to"], "marvin");

    // The first god acks the handoff while it is open in marvin's inbox: accepted, not forked.
    let r = ack_as(
        &env,
        "hephaestus",
        &ack("ack_20260614_ea1", hid, "accepted", "on it"),
    )
    .unwrap();
    assert_eq!(r["status"], "accepted");
    assert_eq!(r["duplicate"], false);
    assert_eq!(r["god"], "hephaestus");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()],
        "one dispatch, archived for the god that acked"
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "in_progress");
    assert_eq!(st["dispatched_to"], "hephaestus");
    // marvin can no longer ack it as accepted work of its own.
    let e = ack_as(
        &env,
        "marvin",
        &ack("ack_20260614_ea2", hid, "accepted", "me too"),
    );
    let e = e.unwrap_err().to_string();
    assert!(e.contains("cannot acknowledge"), "{e}");

    // hephaestus completes it: the workflow moves on once, to ship.
    let r = ack_as(
        &env,
        "hephaestus",
        &ack("ack_20260614_ea3", hid, "completed", "built"),
    )
    .unwrap();
    assert_eq!(r["status"], "completed");
    let st = env.state(wf);
    assert_eq!(st["current_step"], "ship");
    assert_eq!(st["dispatched_to"], "iris");
    let history = st["step_history"].as_array().unwrap().len();
    assert_eq!(
        env.names("conductor/pending/iris").len(),
        1,
        "one next dispatch"
    );

    // A late completed ack from the fallback god, after the dispatch completed: a duplicate, nothing moves.
    let r = ack_as(
        &env,
        "marvin",
        &ack("ack_20260614_ea4", hid, "completed", "built too"),
    )
    .unwrap();
    assert_eq!(r["duplicate"], true, "{r:#}");
    let st = env.state(wf);
    assert_eq!(st["current_step"], "ship");
    assert_eq!(st["step_history"].as_array().unwrap().len(), history);
    assert_eq!(
        env.names("conductor/pending/iris").len(),
        1,
        "still one next dispatch"
    );
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()]
    );
    assert_valid(&env);
}

const TIMEOUT_FLOW: &str = r#"
workflow:
  id: timeout-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      timeout: 1s
      max_deliveries: 3
      fallback_gods: [marvin]
"#;

fn timeout_env() -> Env {
    flow_env("timeout-flow", TIMEOUT_FLOW)
}

/// Starts `wf` in the timeout flow and has hephaestus accept its `build` step with `ack_id`:
/// the answer (with the step deadline).
fn start_accepted(env: &Env, wf: &str, hid: &str, ack_id: &str) -> Value {
    env.start("timeout-flow", wf, hid, &[]);
    env.ack(&ack(ack_id, hid, "accepted", "on it"))
}

/// Waits past the step deadline of the accepted dispatch at `rel`.
fn wait_past_step_deadline(env: &Env, rel: &str) {
    wait_past(env, rel, "step_deadline");
}

#[test]
fn tick_enforces_the_step_timeout_after_accepted_then_dead_letters() {
    let env = timeout_env();
    let (wf, hid) = ("wf_deliver_timeout", "hof_20260614_de0008");
    let r = start_accepted(&env, wf, hid, "ack_20260614_to1");
    assert_eq!(r["deadline_kind"], "step_timeout");
    let archived = format!("conductor/archive/hephaestus/{hid}.json");
    assert_eq!(env.read(&archived)["step_deadline"], r["deadline"]);
    assert_eq!(env.names("conductor/timers"), vec![format!("{hid}.json")]);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"], json!([]), "the timeout has not run out");
    assert_eq!(r["watched"], 1, "the timer is watched");

    // The timeout passes with no completion: delivery 2, to the same god, waiting for an ack again.
    wait_past_step_deadline(&env, &archived);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["to_god"], "hephaestus", "{r:#}");
    assert_eq!(r["redelivered"][0]["delivery"], 2);
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/pending/hephaestus".to_string()]
    );
    let d = env.read(&inbox);
    assert_eq!(d["ack_status"], "unacked");
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 2);
    assert!(d.get("step_deadline").is_none());
    let st = env.state(wf);
    assert_eq!(st["status"], "waiting_for_ack");
    assert!(
        env.names("conductor/timers").is_empty(),
        "the timer is spent"
    );
    // The same expiry never acts twice.
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"], json!([]));

    // Accepted again; a progress ack (pending with an ETA) after accepted moves the step deadline.
    env.ack(&ack("ack_20260614_to2", hid, "accepted", "again"));
    let eta = chrono::Utc::now() + chrono::Duration::milliseconds(2200);
    let eta_text = eta.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let mut p = ack("ack_20260614_to3", hid, "pending", "half way");
    p["eta"] = json!(eta_text);
    let r = env.ack(&p);
    assert_eq!(r["deadline"], eta_text);
    assert_eq!(r["deadline_kind"], "step_timeout");
    assert_eq!(env.read(&archived)["step_deadline"], eta_text);
    std::thread::sleep(Duration::from_millis(1200));
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"], json!([]), "the progress ack moved it");
    wait_past_step_deadline(&env, &archived);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["to_god"], "marvin", "{r:#}");
    assert_eq!(r["redelivered"][0]["delivery"], 3);
    assert_eq!(env.state(wf)["dispatched_to"], "marvin");

    // marvin accepts and never finishes: out of deliveries, dead-lettered, the workflow stalled.
    env.ack(&ack("ack_20260614_to4", hid, "accepted", "mine now"));
    let marvin = format!("conductor/archive/marvin/{hid}.json");
    wait_past_step_deadline(&env, &marvin);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["dead_lettered"][0]["handoff_id"], hid, "{r:#}");
    assert_eq!(env.copies(hid), vec!["conductor/dead/marvin".to_string()]);
    let dead = env.read(&format!("conductor/dead/marvin/{hid}.json"));
    assert!(
        dead["dead_reason"].as_str().unwrap().contains("timed out"),
        "{dead:#}"
    );
    let st = env.state(wf);
    assert_eq!(st["status"], "stalled");
    assert!(st["failure_reason"].as_str().unwrap().contains("timed out"));
    assert_eq!(acts(&env, "redeliver", hid), 2);
    assert_eq!(acts(&env, "dead_letter", hid), 1);
    assert_valid(&env);
}

#[test]
fn a_supervisor_killed_during_a_step_timeout_redelivery_or_dead_letter_loses_and_doubles_nothing() {
    let env = timeout_env();
    // The same flow with one delivery: the first timeout dead-letters.
    env.write(
        "conductor/workflows/timeout-dead-flow.yaml",
        &TIMEOUT_FLOW
            .replace("timeout-flow", "timeout-dead-flow")
            .replace("max_deliveries: 3", "max_deliveries: 1"),
    );
    for (i, point) in [
        "timeout:after-state",
        "timeout:after-rewrite",
        "timeout:before-timer-removed",
        "timeout:dead-after-state",
        "timeout:dead-after-rewrite",
    ]
    .iter()
    .enumerate()
    {
        let dead = point.starts_with("timeout:dead");
        let wf = format!("wf_timeout_crash_{i}");
        let hid = format!("hof_20260614_tc{i:04}");
        env.submit(&def_handoff(
            handoff(&hid, &wf, "thoth", "hephaestus", "plan", &[]),
            if dead {
                "timeout-dead-flow"
            } else {
                "timeout-flow"
            },
            None,
        ));
        env.ack(&ack(
            &format!("ack_20260614_tk{i:03}"),
            &hid,
            "accepted",
            "on it",
        ));
        let archived = format!("conductor/archive/hephaestus/{hid}.json");
        wait_past_step_deadline(&env, &archived);
        assert!(tick_killed_at(&env, point), "{point} was not reached");
        assert_eq!(env.copies(&hid).len(), 1, "{point}: never a copy");
        env.assert_all_json_valid();
        // The next pass finishes the act, once.
        env.ok(&["tick"], None);
        env.ok(&["tick"], None);
        let c = env.copies(&hid);
        let st = env.state(&wf);
        if dead {
            assert_eq!(c, vec!["conductor/dead/hephaestus".to_string()], "{point}");
            assert_eq!(st["status"], "stalled", "{point}");
            assert_eq!(acts(&env, "dead_letter", &hid), 1, "{point}");
        } else {
            assert_eq!(
                c,
                vec!["conductor/pending/hephaestus".to_string()],
                "{point}: {st:#}"
            );
            let d = env.read(&format!("conductor/pending/hephaestus/{hid}.json"));
            assert_eq!(d["deliveries"].as_array().unwrap().len(), 2, "{point}");
            assert_eq!(d["ack_status"], "unacked", "{point}");
            assert_eq!(st["status"], "waiting_for_ack", "{point}");
            assert_eq!(st["dispatched_to"], "hephaestus", "{point}");
            assert_eq!(acts(&env, "redeliver", &hid), 1, "{point}");
        }
        assert!(
            !env.names("conductor/timers")
                .contains(&format!("{hid}.json")),
            "{point}: the timer is spent"
        );
    }
    assert_valid(&env);
}

#[test]
fn a_repeated_first_accept_after_a_timeout_redelivery_arms_the_step_timeout_again() {
    let env = timeout_env();
    let (wf, hid) = ("wf_deliver_timeout_repeat", "hof_20260614_de0011");
    start_accepted(&env, wf, hid, "ack_20260614_tr1");
    let first = ack("ack_20260614_tr1", hid, "accepted", "on it");
    let archived = format!("conductor/archive/hephaestus/{hid}.json");
    wait_past_step_deadline(&env, &archived);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["delivery"], 2, "{r:#}");
    assert!(env.names("conductor/timers").is_empty());

    // The god repeats its first ack (same ack_id): a duplicate answer, and the redelivered
    // dispatch is accepted again with its step timeout running, not left without a deadline.
    let r = env.ack(&first);
    assert_eq!(r["duplicate"], true, "{r:#}");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()]
    );
    assert!(env.read(&archived)["step_deadline"].is_string());
    assert_eq!(env.names("conductor/timers"), vec![format!("{hid}.json")]);
    assert_eq!(env.state(wf)["status"], "in_progress");
    wait_past_step_deadline(&env, &archived);
    let r = env.ok(&["tick"], None);
    assert_eq!(r["redelivered"][0]["to_god"], "marvin", "{r:#}");
    assert_eq!(r["redelivered"][0]["delivery"], 3);
    assert_valid(&env);
}

#[test]
fn a_completed_step_is_never_timed_out_and_serve_enforces_the_timeout() {
    let env = timeout_env();
    // Completed before its timeout: the timer finds nothing to do.
    let (wf1, hid1) = ("wf_deliver_timeout_done", "hof_20260614_de0009");
    start_accepted(&env, wf1, hid1, "ack_20260614_tc1");
    env.ack(&ack("ack_20260614_tc2", hid1, "completed", "done"));
    let child = serve(&env, "serve.log");
    // Accepted and left: serve redelivers it when the timeout runs out.
    let (wf2, hid2) = ("wf_deliver_timeout_serve", "hof_20260614_de0010");
    start_accepted(&env, wf2, hid2, "ack_20260614_ts1");
    wait_for("the timeout redelivery", Duration::from_secs(30), || {
        acts(&env, "redeliver", hid2) == 1
    });
    assert_eq!(
        env.copies(hid2),
        vec!["conductor/pending/hephaestus".to_string()]
    );
    assert_eq!(env.state(wf2)["status"], "waiting_for_ack");
    wait_for("the spent timers", Duration::from_secs(10), || {
        env.names("conductor/timers").is_empty()
    });
    terminate(child);
    assert_eq!(env.state(wf1)["status"], "completed");
    assert_eq!(acts(&env, "redeliver", hid1), 0);
    assert_eq!(
        env.copies(hid1),
        vec!["conductor/archive/hephaestus".to_string()]
    );
    assert_valid(&env);
}

fn bus_messages(env: &Env, track: &str, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path(&format!(
        "conductor/tracks/{track}/.message-bus/queue.jsonl"
    )))
    .unwrap_or_default()
    .lines()
    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    .filter(|m| m["type"] == kind)
    .collect()
}

/// On track t1: w1 takes a 1 s lease on `src/app.rs` (the answer), w2 beats once.
fn lease_and_beat(env: &Env) -> Value {
    let bus = |args: &[&str]| env.ok(&[&["bus", "--track", "t1"], args].concat(), None);
    let lock = bus(&["lock", "src/app.rs", "--worker", "w1", "--ttl", "1s"]);
    bus(&[
        "heartbeat",
        "--worker",
        "w2",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
    ]);
    lock
}

#[test]
fn two_supervisors_post_each_lease_expiry_and_staleness_once_and_rearm_on_renewal() {
    let env = Env::new();
    env.write("conductor/config.yaml", "stale_after: 2s\n");
    env.ok(&["bus", "--track", "t1", "init"], None);
    let a = serve(&env, "a.log");
    let b = serve(&env, "b.log");
    wait_for("two heartbeats", Duration::from_secs(20), || {
        env.names("conductor/supervisor").len() >= 2
    });
    let lock = lease_and_beat(&env);
    wait_for("the lease notice", Duration::from_secs(20), || {
        !bus_messages(&env, "t1", "LOCK_EXPIRED").is_empty()
    });
    wait_for("the staleness notice", Duration::from_secs(20), || {
        !bus_messages(&env, "t1", "WORKER_STALE").is_empty()
    });
    // Give the other supervisor every chance to post a second one.
    std::thread::sleep(Duration::from_millis(1500));
    let expired = bus_messages(&env, "t1", "LOCK_EXPIRED");
    assert_eq!(expired.len(), 1, "{expired:#?}");
    let p = &expired[0]["payload"];
    assert_eq!(p["path"], "src/app.rs");
    assert_eq!(p["holder"], "w1");
    assert_eq!(p["fencing_token"], lock["fencing_token"]);
    assert_eq!(p["expired_at"], lock["expires_at"]);
    assert_eq!(expired[0]["source"], "supervisor");
    let stale = bus_messages(&env, "t1", "WORKER_STALE");
    assert_eq!(stale.len(), 1, "{stale:#?}");
    assert_eq!(stale[0]["payload"]["worker_id"], "w2");

    // A renewed lease and a fresh heartbeat re-arm: their next expiry and staleness are posted again, once.
    lease_and_beat(&env);
    wait_for("the second lease notice", Duration::from_secs(20), || {
        bus_messages(&env, "t1", "LOCK_EXPIRED").len() >= 2
    });
    wait_for(
        "the second staleness notice",
        Duration::from_secs(20),
        || bus_messages(&env, "t1", "WORKER_STALE").len() >= 2,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let again = bus_messages(&env, "t1", "LOCK_EXPIRED");
    assert_eq!(again.len(), 2, "{again:#?}");
    assert_eq!(bus_messages(&env, "t1", "WORKER_STALE").len(), 2);
    terminate(a);
    terminate(b);
    // A tick afterwards finds every cause already posted.
    let r = env.ok(&["tick"], None);
    assert_eq!(r["notices"], json!([]));
    assert_valid(&env);
}

/// Deadlines that can never fire. A `pending` ack whose ETA is not a time or is more
/// than 365 days ahead is refused at the door (exit 1, naming the limit; nothing written, never clamped);
/// a dispatch someone else wrote with an `ack_deadline` or `ack_wait` that can never fire is named by
/// `tick` (`never_due`) and by `validate` (an error), and left as it is.
#[test]
fn deadlines_that_can_never_fire_are_refused_at_the_door_and_flagged_in_files() {
    let env = env();
    let (wf, hid) = ("wf_deliver_never", "hof_20260614_de0n01");
    start(&env, wf, hid);
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    let before = env.read(&inbox);
    let far = (chrono::Utc::now() + chrono::Duration::days(366))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for (i, eta) in [
        json!("not a time"),
        json!("9999-12-31T00:00:00Z"),
        json!("+10000-01-01T00:00:00Z"),
        json!(9999),
        json!(far),
    ]
    .into_iter()
    .enumerate()
    {
        let mut a = ack(&format!("ack_20260614_dn{i}"), hid, "pending", "later");
        a["eta"] = eta.clone();
        let err = env.refused(&["ack"], Some(&a));
        // A number is refused by the schema already ("not of types null, string").
        assert!(
            err.contains("/eta") && (eta.is_number() || err.contains("365d")),
            "{eta}: {err}"
        );
        assert_eq!(env.read(&inbox), before, "{eta}: nothing written");
    }
    // 364 days ahead is taken as it is.
    let near = chrono::Utc::now() + chrono::Duration::days(364);
    let near_text = near.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let mut a = ack("ack_20260614_dn9", hid, "pending", "in a while");
    a["eta"] = json!(near_text);
    assert_eq!(env.ack(&a)["deadline"], near_text);
    assert_valid(&env);
    assert!(env.ok(&["tick"], None).get("never_due").is_none());

    // Files written by others: each is named by tick and validate, and never redelivered.
    for (field, value, says) in [
        ("ack_deadline", json!("not a time"), "not a time"),
        (
            "ack_deadline",
            json!("+10000-01-01T00:00:00Z"),
            "not a time",
        ),
        ("ack_deadline", json!(9999), "not a time"),
        (
            "ack_deadline",
            json!("9999-12-31T00:00:00Z"),
            "more than 365d ahead",
        ),
        ("ack_wait", json!("-1s"), "not a duration"),
    ] {
        let mut d = before.clone();
        d[field] = value.clone();
        env.write(&inbox, &d.to_string());
        let r = env.ok(&["tick"], None);
        let named = r["never_due"].as_array().cloned().unwrap_or_default();
        assert!(
            named.len() == 1
                && named[0].as_str().unwrap().contains(hid)
                && named[0].as_str().unwrap().contains(says),
            "{field}={value}: {r:#}"
        );
        assert_eq!(r["redelivered"], json!([]));
        let out = env.run(&["validate"], None);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let problems = report["problems"].to_string();
        assert!(
            report["errors"].as_u64() >= Some(1) && problems.contains(says),
            "{field}={value}: {report:#}"
        );
    }
}

/// Dead-letters a fresh `deliver-once-flow` workflow: one delivery, its deadline passed, a tick.
fn dead_lettered(env: &Env, wf: &str, hid: &str) {
    env.submit(&def_handoff(
        handoff(hid, wf, "thoth", "hephaestus", "plan", &[]),
        "deliver-once-flow",
        None,
    ));
    wait_past_deadline(env, &format!("conductor/pending/hephaestus/{hid}.json"));
    env.ok(&["tick"], None);
    assert_eq!(
        env.copies(hid),
        vec!["conductor/dead/hephaestus".to_string()]
    );
}

/// The `dead_retire` entries of `hid`: (outcome, reason, superseded_by).
fn retirements(env: &Env, hid: &str) -> Vec<(String, String, Option<String>)> {
    env.journal_entries()
        .iter()
        .filter(|e| e["action"] == "dead_retire" && e["targets"]["handoff_id"] == hid)
        .map(|e| {
            (
                e["outcome"].as_str().unwrap_or_default().to_owned(),
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["targets"]["superseded_by"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn dead_ids(v: &Value) -> Vec<String> {
    v["dead"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dispatch"]["handoff_id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_dead_letter_ends_when_a_rerun_supersedes_it_its_workflow_is_aborted_or_it_is_discarded() {
    let env = env();
    install_once_flow(&env);
    let status_dead = |env: &Env| {
        let out = env.run(&["status", "--format", "json", "--no-cache"], None);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["dead_letters"].clone()
    };

    // A rerun supersedes the stalled workflow's dead letter: retired, journaled naming the rerun's
    // dispatch; `dead` no longer lists it, `dead --retired` does; its requeue is refused naming
    // the newer dispatch.
    let (wf, hid) = ("wf_retire_rerun", "hof_20261206_rt0001");
    dead_lettered(&env, wf, hid);
    assert_eq!(env.state(wf)["status"], "stalled");
    assert_eq!(dead_ids(&env.ok(&["dead"], None)), [hid]);
    assert_eq!(status_dead(&env), 1);
    let r = env.ok(&["rerun", wf, "--from", "build"], None);
    let newer = r["handoff_id"].as_str().unwrap().to_owned();
    assert_eq!(
        env.copies(hid),
        vec!["conductor/retired/hephaestus".to_string()]
    );
    let why = format!("superseded by {newer}, the rerun's dispatch of step build");
    assert_eq!(
        retirements(&env, hid),
        [("retired".to_owned(), why.clone(), Some(newer.clone()))]
    );
    assert!(dead_ids(&env.ok(&["dead"], None)).is_empty());
    assert_eq!(status_dead(&env), 0);
    let retired = env.ok(&["dead", "--retired"], None);
    assert_eq!(dead_ids(&retired), [hid]);
    assert_eq!(retired["dead"][0]["status"], "retired");
    assert_eq!(
        retired["dead"][0]["dispatch"]["superseded_by"],
        newer.as_str()
    );
    assert_eq!(
        retired["dead"][0]["dispatch"]["retired_reason"],
        why.as_str()
    );
    let e = env.refused(&["requeue", hid], None);
    assert!(
        e.contains(&format!(
            "the dead letter {hid} is retired: it was superseded by {newer}"
        )),
        "{e}"
    );
    assert_valid(&env);

    // A dead letter put back by hand beside the newer dispatch (as a rerun of an older engine left
    // it): its requeue is refused naming the newer dispatch, and a second open dispatch of one
    // step is an error of `validate`.
    let mut back = env.read(&format!("conductor/retired/hephaestus/{hid}.json"));
    for k in ["retired_at", "retired_reason", "superseded_by"] {
        back.as_object_mut().unwrap().remove(k);
    }
    env.write(
        &format!("conductor/dead/hephaestus/{hid}.json"),
        &back.to_string(),
    );
    let e = env.refused(&["requeue", hid], None);
    assert!(
        e.contains(&format!(
            "dead letter {hid} is superseded by {newer}, an open dispatch of step build of {wf}"
        )),
        "{e}"
    );
    let mut twin = env.read(&format!("conductor/pending/hephaestus/{newer}.json"));
    twin["handoff_id"] = json!("hof_20261206_tw0001");
    env.write(
        "conductor/pending/hermes/hof_20261206_tw0001.json",
        &twin.to_string(),
    );
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doubled: Vec<&Value> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!("a second open dispatch of step build of {wf}"))
        })
        .collect();
    assert_eq!(doubled.len(), 2, "{report:#}");
    assert!(
        doubled.iter().all(|p| p["severity"] == "error"),
        "{report:#}"
    );
    std::fs::remove_file(env.path("conductor/pending/hermes/hof_20261206_tw0001.json")).unwrap();

    // Aborting a workflow retires its dead letter.
    let (wf2, hid2) = ("wf_retire_abort", "hof_20261206_rt0002");
    dead_lettered(&env, wf2, hid2);
    env.ok(&["abort", wf2, "--reason", "not this quarter"], None);
    assert_eq!(
        env.copies(hid2),
        vec!["conductor/retired/hephaestus".to_string()]
    );
    assert_eq!(
        retirements(&env, hid2),
        [(
            "retired".to_owned(),
            "its workflow was aborted".to_owned(),
            None
        )]
    );
    let e = env.refused(&["requeue", hid2], None);
    assert!(
        e.contains(&format!(
            "the dead letter {hid2} is retired: its workflow was aborted"
        )),
        "{e}"
    );

    // Discarded by hand, with a reason (required, and not empty).
    let (wf3, hid3) = ("wf_retire_discard", "hof_20261206_rt0003");
    dead_lettered(&env, wf3, hid3);
    let usage = env.run(&["dead", "discard", hid3], None);
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
    let e = env.refused(&["dead", "discard", hid3, "--reason", "  "], None);
    assert!(e.contains("a retirement needs a reason"), "{e}");
    let r = env.ok(&["dead", "discard", hid3, "--reason", "obsolete"], None);
    assert_eq!(r["status"], "retired");
    assert_eq!(r["handoff_id"], hid3);
    assert_eq!(r["reason"], "obsolete");
    assert_eq!(
        env.copies(hid3),
        vec!["conductor/retired/hephaestus".to_string()]
    );
    assert_eq!(
        retirements(&env, hid3),
        [("retired".to_owned(), "obsolete".to_owned(), None)]
    );
    let e = env.refused(&["dead", "discard", hid3, "--reason", "again"], None);
    assert!(
        e.contains(&format!("the dead letter {hid3} is retired: obsolete")),
        "{e}"
    );
    assert_eq!(
        dead_ids(&env.ok(&["dead", "--retired"], None)),
        [hid, hid2, hid3]
    );
    assert!(!dead_ids(&env.ok(&["dead"], None)).contains(&hid3.to_owned()));

    // The ack that completes a workflow retires a dead letter of it still lying there (one left
    // by hand beside its live dispatch).
    let (wf4, hid4) = ("wf_retire_done", "hof_20261206_rt0004");
    start(&env, wf4, hid4);
    let mut stray = env.read(&format!("conductor/pending/hephaestus/{hid4}.json"));
    stray["handoff_id"] = json!("hof_20261206_st0004");
    stray["dead_at"] = json!("2026-12-06T10:00:00Z");
    env.write(
        "conductor/dead/hephaestus/hof_20261206_st0004.json",
        &stray.to_string(),
    );
    env.ack(&ack("ack_20261206_rt0004", hid4, "completed", "built"));
    assert_eq!(env.state(wf4)["status"], "completed");
    assert_eq!(
        env.copies("hof_20261206_st0004"),
        vec!["conductor/retired/hephaestus".to_string()]
    );
    assert_eq!(
        retirements(&env, "hof_20261206_st0004"),
        [(
            "retired".to_owned(),
            "its workflow is completed".to_owned(),
            None
        )]
    );
}

/// A retirement (`dead discard`) killed at every point between its writes, then either repeated or
/// left to the supervisor's pass: the dead letter ends retired (or, killed before anything was
/// written, stays dead), and the journal holds its `dead_retire` entry exactly once, naming the
/// retirement's intent, which no pass leaves behind.
#[test]
fn a_retirement_killed_anywhere_is_journaled_exactly_once() {
    let env = env();
    install_once_flow(&env);
    let points = [
        "retire:before-stamp",
        "retire:after-stamp",
        "journal:before-append:dead_retire",
    ];
    for (i, point) in points.iter().enumerate() {
        for repeat in [true, false] {
            let n = i * 2 + usize::from(repeat);
            let (wf, hid) = (
                format!("wf_retire_crash_{n}"),
                format!("hof_20261206_rc{n:04}"),
            );
            dead_lettered(&env, &wf, &hid);
            assert!(
                killed_at(
                    &env,
                    &["dead", "discard", &hid, "--reason", "obsolete"],
                    point
                ),
                "{point} was not reached"
            );
            assert!(
                retirements(&env, &hid).is_empty(),
                "{point}: not journaled yet"
            );
            let mut reason = "obsolete";
            if repeat {
                let out = env.run(&["dead", "discard", &hid, "--reason", "again"], None);
                let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                match *point {
                    // Nothing was written: the repeat is a retirement of its own.
                    "retire:before-stamp" => {
                        assert_eq!(answer["reason"], "again", "{point}: {out:?}");
                        reason = "again";
                    }
                    // The repeat finishes the cut-short one, with its stamp and reason.
                    "retire:after-stamp" => {
                        assert_eq!(answer["reason"], "obsolete", "{point}: {out:?}")
                    }
                    // Done already: refused, naming the retirement; the pass journals it.
                    _ => {
                        let e = String::from_utf8_lossy(&out.stderr);
                        assert!(e.contains("is retired: obsolete"), "{point}: {e}");
                    }
                }
            }
            env.ok(&["tick"], None);
            let untouched = !repeat && *point == "retire:before-stamp";
            if untouched {
                // Killed before its stamp: nothing happened, and nothing is journaled.
                assert_eq!(
                    env.copies(&hid),
                    vec!["conductor/dead/hephaestus".to_string()]
                );
                assert!(retirements(&env, &hid).is_empty(), "{point}");
            } else {
                assert_eq!(
                    env.copies(&hid),
                    vec!["conductor/retired/hephaestus".to_string()],
                    "{point} repeat={repeat}"
                );
                assert_eq!(
                    retirements(&env, &hid),
                    [("retired".to_owned(), reason.to_owned(), None)],
                    "{point} repeat={repeat}"
                );
                let e = env
                    .journal_entries()
                    .into_iter()
                    .find(|e| e["action"] == "dead_retire" && e["targets"]["handoff_id"] == *hid)
                    .unwrap();
                let key = e["targets"]["intent"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                assert!(key.starts_with(&format!("retire-{hid}-")), "{e:#}");
            }
            let r = env.ok(&["tick"], None);
            assert_eq!(r["journaled_late"], 0, "{point}: {r:#}");
            assert_eq!(
                retirements(&env, &hid).len(),
                usize::from(!untouched),
                "{point}"
            );
            assert!(
                !env.names("conductor/journal-intents")
                    .iter()
                    .any(|k| k.contains(&hid)),
                "{point} repeat={repeat}: an intent was left behind"
            );
        }
    }
    assert_valid(&env);
}
