//! Pause and resume (docs/PROTOCOL.md §2.14) through the real binary: holds, frozen deadlines and
//! their exact shift, the supervisor, `--until`, tracks, `--rate`, hostile `paused.json`, and the
//! seeds' Python gods against a paused root.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// The test flow with a 1 s `ack_wait` on `build` (three deliveries, then the dead letters).
const QUICK_FLOW: &str = r#"
workflow:
  id: quick-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1s
      max_deliveries: 3
    - id: check
      god: iris
"#;

fn env() -> Env {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/quick-flow.yaml", QUICK_FLOW);
    env
}

fn start(env: &Env, wf: &str, hid: &str) -> Value {
    env.start("quick-flow", wf, hid, &[])
}

fn ts(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
        .unwrap()
        .with_timezone(&chrono::Utc)
}

fn entries(env: &Env, action: &str) -> Vec<Value> {
    env.journal_entries()
        .into_iter()
        .filter(|e| e["action"] == action)
        .collect()
}

#[test]
fn a_paused_god_gets_nothing_new_and_its_resume_releases_what_was_held_in_order() {
    let env = env();
    let p = env.ok(
        &["pause", "--god", "hephaestus", "--reason", "incident 12"],
        None,
    );
    assert_eq!(p["status"], "paused");
    assert_eq!(p["pause"]["kind"], "god");
    assert_eq!(p["pause"]["name"], "hephaestus");
    let file = env.read("conductor/paused.json");
    assert_eq!(file["version"], 1);
    assert_eq!(file["pauses"][0]["reason"], "incident 12");

    let hids = [
        "hof_20261206_aa0001",
        "hof_20261206_aa0002",
        "hof_20261206_aa0003",
    ];
    for (i, hid) in hids.iter().enumerate() {
        let r = start(&env, &format!("wf_paused_{i}"), hid);
        assert_eq!(r["status"], "awaiting_approval", "{r:#}");
        let d = env.read(&format!("conductor/pending/_quarantine/{hid}.json"));
        assert_eq!(d["held_because"], "paused: god hephaestus");
        assert!(d.get("ack_deadline").is_none(), "no clock runs while held");
        assert_eq!(
            env.state(&format!("wf_paused_{i}"))["status"],
            "awaiting_approval"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    // A repeat is a duplicate, not a second pause.
    let again = env.ok(&["pause", "--god", "hephaestus", "--reason", "x"], None);
    assert_eq!(again["status"], "duplicate");
    assert_eq!(again["pause"]["id"], p["pause"]["id"]);

    let listed = env.ok(&["paused"], None);
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["paused"][0]["held"], json!(hids));

    // Approve is refused, naming the resume.
    let err = env.refused(&["approve", hids[0]], None);
    assert!(err.contains("pantheon resume --god hephaestus"), "{err}");

    let r = env.ok(&["resume", "--god", "hephaestus"], None);
    assert_eq!(r["status"], "resumed", "{r:#}");
    assert_eq!(r["released"], json!(hids), "released in the order held");
    for (i, hid) in hids.iter().enumerate() {
        let d = env.read(&format!("conductor/pending/hephaestus/{hid}.json"));
        assert!(
            d["ack_deadline"].is_string(),
            "the first delivery starts now"
        );
        assert_eq!(
            env.state(&format!("wf_paused_{i}"))["status"],
            "waiting_for_ack"
        );
    }
    assert!(env.names("conductor/pending/_quarantine").is_empty());
    let file = env.read("conductor/paused.json");
    assert_eq!(file["pauses"], json!([]));
    assert_eq!(file["ended"][0]["id"], p["pause"]["id"]);
    // Journaled once each (the duplicate pause says so).
    let pauses = entries(&env, "pause");
    assert_eq!(pauses.len(), 2);
    assert_eq!(pauses[0]["outcome"], "paused");
    assert_eq!(pauses[1]["outcome"], "paused (duplicate)");
    let resumes = entries(&env, "resume");
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0]["targets"]["released"], "3");
    // Resuming again answers from the record.
    assert_eq!(
        env.ok(&["resume", "--god", "hephaestus"], None)["status"],
        "duplicate"
    );
    assert_eq!(entries(&env, "resume").len(), 1);
    let err = env.refused(&["resume", "--god", "iris"], None);
    assert!(err.contains("god iris is not paused"), "{err}");
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
}

#[test]
fn a_paused_god_still_acks_what_it_has_and_a_held_approval_hold_stays_for_the_operator() {
    let env = env();
    let (wf, hid) = ("wf_paused_ack", "hof_20261206_ab0001");
    start(&env, wf, hid);
    env.ok(&["pause", "--god", "hephaestus", "--reason", "r"], None);
    let r = env.ack(&ack("ack_20261206_ab1", hid, "accepted", "still on it"));
    assert_eq!(r["status"], "accepted");
    // Completing routes on to iris (not paused).
    let r = env.ack(&ack("ack_20261206_ab2", hid, "completed", "built"));
    assert_eq!(r["next"]["status"], "dispatched", "{r:#}");
    env.ok(&["resume", "--god", "hephaestus"], None);

    // A pause of a workflow on a step that also needs approval: the resume leaves the approval.
    env.write(
        "conductor/workflows/gated.yaml",
        "workflow:\n  id: gated\n  steps:\n    - id: plan\n      god: thoth\n    - id: ship\n      god: hermes\n      approval_required: true\n",
    );
    env.ok(&["pause", "--workflow", "wf_gated", "--reason", "r"], None);
    let r = env.start("gated", "wf_gated", "hof_20261206_ab0003", &[]);
    assert_eq!(r["status"], "awaiting_approval");
    let q = "conductor/pending/_quarantine/hof_20261206_ab0003.json";
    assert_eq!(
        env.read(q)["held_because"],
        "step \"ship\" of \"gated\" requires approval; paused: workflow wf_gated"
    );
    let r = env.ok(&["resume", "--workflow", "wf_gated"], None);
    assert_eq!(r["still_held"], json!(["hof_20261206_ab0003"]));
    assert_eq!(
        env.read(q)["held_because"],
        "step \"ship\" of \"gated\" requires approval"
    );
    let ok = env.ok(&["approve", "hof_20261206_ab0003"], None);
    assert_eq!(ok["status"], "approved");
}

/// The ten-minute pause of the issue, scaled: `ack_wait` 1 s, three deliveries, a pause five times
/// longer than every delivery together would take, with `serve` running all along.
#[test]
fn a_long_pause_gives_no_redelivery_and_no_dead_letter_and_deadlines_move_by_the_paused_time() {
    let env = env();
    let hids = [
        "hof_20261206_ac0001",
        "hof_20261206_ac0002",
        "hof_20261206_ac0003",
    ];
    for (i, hid) in hids.iter().enumerate() {
        start(&env, &format!("wf_long_{i}"), hid);
    }
    let before: Vec<Value> = hids
        .iter()
        .map(|h| env.read(&format!("conductor/pending/hephaestus/{h}.json")))
        .collect();
    env.ok(
        &["pause", "--all", "--reason", "deploy window closed"],
        None,
    );
    let mut serve = env
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(5));
    let tick = env.ok(&["tick"], None);
    assert_eq!(tick["redelivered"], json!([]), "{tick:#}");
    assert_eq!(tick["dead_lettered"], json!([]), "{tick:#}");
    assert_eq!(tick["paused"], 3, "{tick:#}");
    let r = env.ok(&["resume", "--all"], None);
    assert_eq!(r["shifted"], 3, "{r:#}");
    let resumed_at = ts(&r["pause"]["resumed_at"]);
    for (h, old) in hids.iter().zip(&before) {
        let d = env.read(&format!("conductor/pending/hephaestus/{h}.json"));
        let frozen = &d["frozen"][0];
        assert_eq!(frozen["pause"], r["pause"]["id"]);
        assert_eq!(ts(&frozen["to"]), resumed_at);
        // Frozen from the pause's start (the delivery came before it).
        assert_eq!(ts(&frozen["from"]), ts(&r["pause"]["since"]));
        let moved = ts(&d["ack_deadline"]) - ts(&old["ack_deadline"]);
        assert_eq!(
            moved,
            resumed_at - ts(&r["pause"]["since"]),
            "shifted exactly"
        );
        assert_eq!(
            moved.num_milliseconds(),
            frozen["shifted_ms"].as_i64().unwrap()
        );
        // The god acks in time after the resume.
        let a = env.ack(&ack(&format!("ack_{}", &h[4..]), h, "accepted", "back"));
        assert_eq!(a["status"], "accepted");
    }
    std::thread::sleep(Duration::from_millis(300));
    unsafe_kill_term(&serve);
    let status = serve.wait().unwrap();
    assert!(status.success());
    let mut log = String::new();
    use std::io::Read;
    serve
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!log.contains("redelivered"), "{log}");
    assert!(entries(&env, "redeliver").is_empty());
    assert!(entries(&env, "dead_letter").is_empty());
    assert!(env.names("conductor/dead").is_empty());
}

fn unsafe_kill_term(child: &std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

#[test]
fn a_pause_with_until_is_ended_by_the_supervisor_journaled_as_serve() {
    let env = env();
    let (wf, hid) = ("wf_until", "hof_20261206_ad0001");
    env.ok(
        &[
            "pause",
            "--god",
            "hephaestus",
            "--until",
            "1s",
            "--reason",
            "short",
        ],
        None,
    );
    assert_eq!(start(&env, wf, hid)["status"], "awaiting_approval");
    let t = env.ok(&["tick"], None);
    assert_eq!(t.get("resumed"), None, "not yet: {t:#}");
    std::thread::sleep(Duration::from_millis(1200));
    let t = env.ok(&["tick"], None);
    assert_eq!(t["resumed"].as_array().unwrap().len(), 1, "{t:#}");
    assert!(env.exists(&format!("conductor/pending/hephaestus/{hid}.json")));
    let r = entries(&env, "resume");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["actor"], "serve");
    assert_eq!(r[0]["source"], "supervisor");
    // Bad --until values are refused, writing nothing.
    for bad in ["yesterday", "2020-01-01T00:00:00Z", "400d"] {
        let err = env.refused(
            &["pause", "--god", "iris", "--until", bad, "--reason", "r"],
            None,
        );
        assert!(err.contains("--until"), "{bad}: {err}");
    }
    assert_eq!(env.read("conductor/paused.json")["pauses"], json!([]));
}

#[test]
fn a_paused_track_refuses_posts_naming_the_pause_and_tells_its_readers() {
    let env = Env::new();
    env.ok(&["bus", "--track", "main", "init"], None);
    env.ok(
        &[
            "bus", "--track", "main", "post", "PROGRESS", "--source", "w1",
        ],
        None,
    );
    env.ok(&["pause", "--track", "main", "--reason", "freeze"], None);
    let err = env.refused(
        &[
            "bus", "--track", "main", "post", "PROGRESS", "--source", "w1",
        ],
        None,
    );
    assert!(err.contains("track main is paused"), "{err}");
    assert!(err.contains("freeze"), "{err}");
    assert!(err.contains("pantheon resume --track main"), "{err}");
    // Heartbeats, locks released and reads go on.
    env.ok(
        &[
            "bus",
            "--track",
            "main",
            "heartbeat",
            "--worker",
            "w1",
            "--task",
            "t1",
            "--status",
            "RUNNING",
        ],
        None,
    );
    let read = env.ok(&["bus", "--track", "main", "read"], None);
    let types: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["PROGRESS", "PAUSED"]);
    // A repeated pause writes no second line.
    env.ok(&["pause", "--track", "main", "--reason", "freeze"], None);
    env.ok(&["resume", "--track", "main"], None);
    env.ok(
        &[
            "bus", "--track", "main", "post", "PROGRESS", "--source", "w1",
        ],
        None,
    );
    let read = env.ok(&["bus", "--track", "main", "read"], None);
    let types: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["PROGRESS", "PAUSED", "RESUMED", "PROGRESS"]);
    assert_eq!(read["messages"][2]["source"], "operator");
}

#[test]
fn resume_at_a_rate_releases_steadily_in_the_order_held() {
    let env = env();
    env.ok(&["pause", "--god", "hephaestus", "--reason", "r"], None);
    let mut hids = Vec::new();
    for i in 0..6 {
        let hid = format!("hof_20261206_ae000{i}");
        start(&env, &format!("wf_rate_{i}"), &hid);
        hids.push(hid);
        std::thread::sleep(Duration::from_millis(3));
    }
    let t0 = Instant::now();
    let r = env.ok(&["resume", "--god", "hephaestus", "--rate", "10/s"], None);
    let took = t0.elapsed();
    assert_eq!(r["released"], json!(hids));
    // Six releases at 10/s: the sixth is due 0.5 s after the first.
    assert!(took >= Duration::from_millis(500), "{took:?}");
    // Each reaches its inbox when it is due, a tenth of a second after the one before (by
    // schedule: the releases due together share one sync, none waits for another's).
    let at: Vec<_> = hids
        .iter()
        .map(|h| {
            ts(&env.read(&format!("conductor/pending/hephaestus/{h}.json"))["deliveries"][0]["at"])
        })
        .collect();
    for w in at.windows(2) {
        let gap = (w[1] - w[0]).num_milliseconds();
        assert!(
            (80..=400).contains(&gap),
            "{gap} ms between two releases: {at:?}"
        );
    }
    for bad in ["0/s", "fast", "10/d"] {
        let err = env.refused(&["resume", "--god", "iris", "--rate", bad], None);
        assert!(err.contains("--rate"), "{bad}: {err}");
    }
}

#[test]
fn a_hostile_paused_file_is_refused_by_name_and_loses_nothing() {
    let env = env();
    let (wf, hid) = ("wf_hostile", "hof_20261206_af0001");
    start(&env, wf, hid);
    let inbox = format!("conductor/pending/hephaestus/{hid}.json");
    env.write(
        "conductor/paused.json",
        "{\"pauses\": [{\"id\": \"../x\"}]}",
    );
    let err = env.refused(&["pause", "--god", "iris", "--reason", "r"], None);
    assert!(err.contains("paused.json"), "{err}");
    assert_eq!(
        std::fs::read_to_string(env.path("conductor/paused.json")).unwrap(),
        "{\"pauses\": [{\"id\": \"../x\"}]}",
        "never overwritten"
    );
    assert!(env.refused(&["paused"], None).contains("paused.json"));
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert!(
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["severity"] == "error"
                && p["path"].as_str().unwrap().ends_with("paused.json")),
        "{report:#}"
    );
    // The supervisor freezes rather than guess, and says why.
    std::thread::sleep(Duration::from_millis(1100));
    let t = env.ok(&["tick"], None);
    assert_eq!(t["redelivered"], json!([]));
    assert!(
        t["errors"][0].as_str().unwrap().contains("paused.json"),
        "{t:#}"
    );
    assert!(env.exists(&inbox));
    // A link in its place is refused, never followed.
    std::fs::remove_file(env.path("conductor/paused.json")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", env.path("conductor/paused.json")).unwrap();
    assert!(env.refused(&["paused"], None).contains("paused.json"));
    std::fs::remove_file(env.path("conductor/paused.json")).unwrap();
    let t = env.ok(&["tick"], None);
    assert_eq!(t["redelivered"][0]["handoff_id"], hid, "{t:#}");
}

fn python_reader(env: &Env, god: &str) -> Value {
    let out = std::process::Command::new("python3")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/conductor/python/paused_reader.py"),
        )
        .arg(&env.root)
        .arg(god)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "paused_reader.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_seeds_python_gods_work_against_a_paused_root() {
    let env = env();
    let (wf, hid) = ("wf_py_paused", "hof_20261206_ag0001");
    start(&env, wf, hid);
    env.ok(
        &[
            "pause",
            "--god",
            "iris",
            "--until",
            "1h",
            "--reason",
            "iris is misbehaving",
        ],
        None,
    );
    // A foreign reader sees the pause in the file as the protocol describes it.
    let seen = python_reader(&env, "iris");
    assert_eq!(seen["paused"], true);
    assert_eq!(seen["reason"], "iris is misbehaving");
    assert!(seen["until"].is_string());
    assert_eq!(python_reader(&env, "hephaestus")["paused"], false);
    // The seeds' god (through the CLI) does its step on the unpaused god; the next step, for the
    // paused iris, is held, and the reader sees it held.
    let out = std::process::Command::new("python3")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/conductor/python/usage_god.py"),
        )
        .arg(bin())
        .arg(&env.root)
        .args(["hephaestus", wf, "silent"])
        .env("HOME", &env.home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["next"]["status"], "awaiting_approval", "{done:#}");
    let seen = python_reader(&env, "iris");
    assert_eq!(seen["inbox"], json!([]));
    assert_eq!(seen["held"].as_array().unwrap().len(), 1);
    env.ok(&["resume", "--god", "iris"], None);
    let seen = python_reader(&env, "iris");
    assert_eq!(seen["paused"], false);
    assert_eq!(seen["inbox"].as_array().unwrap().len(), 1);
    assert_eq!(seen["held"], json!([]));
}

#[test]
fn status_and_check_say_what_is_paused_and_count_its_holds_as_paused_not_held() {
    let env = env();
    let status = |format: &str| {
        let out = env.run(&["status", "--format", format, "--no-cache"], None);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    };
    let check = |args: &[&str]| {
        let mut all = vec!["check", "--no-journal"];
        all.extend_from_slice(args);
        let out = env.run(&all, None);
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap().trim_end().to_owned(),
        )
    };
    assert_eq!(check(&[]).0, 0);
    env.ok(&["pause", "--god", "hephaestus", "--reason", "r"], None);
    start(&env, "wf_status", "hof_20261206_ah0001");
    let j: Value = serde_json::from_str(&status("json")).unwrap();
    assert_eq!(j["paused"], 1, "{j:#}");
    assert_eq!(j["paused_held"], 1, "{j:#}");
    assert_eq!(
        j["held"], 0,
        "a pause's hold is counted as paused, not held: {j:#}"
    );
    assert_eq!(j["attention"], 0, "a pause is no attention item: {j:#}");
    assert!(
        j["pauses"][0]
            .as_str()
            .unwrap()
            .starts_with("god hephaestus since ")
    );
    assert_eq!(status("line"), "⏸1");
    let (code, line) = check(&[]);
    assert_eq!(code, 1, "WARNING by default: {line}");
    assert!(line.contains("paused: god hephaestus since "), "{line}");
    assert!(line.contains("(1 dispatch held)"), "{line}");
    assert!(line.contains(" paused=1;0;;0;"), "{line}");
    // Configurable: a pause may be fine for this monitor.
    let (code, line) = check(&["--warn", "paused=5"]);
    assert_eq!(code, 0, "{line}");
    env.ok(&["resume", "--god", "hephaestus"], None);
    // Released with its ack deadline (and no supervisor running here: `▲`), no pause left.
    assert_eq!(status("line"), "@1 ▲1");
}

/// `pantheon ARGS` killed with SIGKILL at crash point `point` (it must be reached).
fn killed_at(env: &Env, args: &[&str], point: &str) {
    use std::os::unix::process::ExitStatusExt;
    let status = env
        .command(args)
        .env("PANTHEON_TEST_CRASH_AT", point)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(9), "{point} not reached");
}

/// A pause and a resume killed at every point between their writes, then repeated (or left to
/// the supervisor's next pass): nothing lost or doubled, each deadline shifted exactly once, and
/// the journal holds each act exactly once.
#[test]
fn a_pause_and_a_resume_killed_anywhere_finish_exactly_once_when_repeated() {
    for point in [
        "pause:after-file",
        "journal:before-append:pause",
        "resume:after-mark",
        "resume:after-shift",
        "journal:before-append:resume",
    ] {
        let env = env();
        let waiting = ["hof_20261206_ai0001", "hof_20261206_ai0002"];
        for (i, h) in waiting.iter().enumerate() {
            start(&env, &format!("wf_kill_{i}"), h);
        }
        let before: Vec<Value> = waiting
            .iter()
            .map(|h| env.read(&format!("conductor/pending/hephaestus/{h}.json")))
            .collect();
        let pause = ["pause", "--god", "hephaestus", "--reason", "kill test"];
        if point.contains("pause") {
            killed_at(&env, &pause, point);
        }
        let p = env.ok(&pause, None);
        // A dispatch routed while paused is held, whatever the kill left.
        let held = "hof_20261206_ai0003";
        assert_eq!(
            start(&env, "wf_kill_held", held)["status"],
            "awaiting_approval"
        );
        std::thread::sleep(Duration::from_millis(300));
        let resume = ["resume", "--god", "hephaestus"];
        if point.contains("resume") {
            killed_at(&env, &resume, point);
        }
        let r = env.ok(&resume, None);
        // Killed after the act and before its entry, the repeat finds it done (`duplicate`) and
        // the supervisor's pass journals the act from its intent.
        assert!(
            matches!(r["status"].as_str(), Some("resumed" | "duplicate")),
            "{point}: {r:#}"
        );
        // The supervisor's pass settles what a killed process left unjournaled.
        env.ok(&["tick"], None);
        let since = ts(&p["pause"]["since"]);
        let ended = env.read("conductor/paused.json")["ended"][0].clone();
        let resumed_at = ts(&ended["resumed_at"]);
        for (h, old) in waiting.iter().zip(&before) {
            let d = env.read(&format!("conductor/pending/hephaestus/{h}.json"));
            assert_eq!(d["frozen"].as_array().unwrap().len(), 1, "{point}: {d:#}");
            let moved = ts(&d["ack_deadline"]) - ts(&old["ack_deadline"]);
            assert_eq!(moved, resumed_at - since, "{point}: shifted exactly once");
        }
        assert!(
            env.exists(&format!("conductor/pending/hephaestus/{held}.json")),
            "{point}"
        );
        assert!(
            env.names("conductor/pending/_quarantine").is_empty(),
            "{point}"
        );
        let originals = |action: &str| {
            entries(&env, action)
                .iter()
                .filter(|e| !e["outcome"].as_str().unwrap().contains("duplicate"))
                .count()
        };
        assert_eq!(
            originals("pause"),
            1,
            "{point}: {:#?}",
            entries(&env, "pause")
        );
        assert_eq!(
            originals("resume"),
            1,
            "{point}: {:#?}",
            entries(&env, "resume")
        );
        let v: Value =
            serde_json::from_slice(&env.run(&["journal", "--verify"], None).stdout).unwrap();
        assert_eq!(v["valid"], true, "{point}: {v:#}");
    }
}

/// `serve` killed with SIGKILL again and again while a pause runs out (`--until`) and its resume
/// is under way: the pause ends once, each frozen deadline moves once, the held dispatch is
/// released once, and the journal holds one resume.
#[test]
fn serve_killed_again_and_again_during_a_pause_and_its_resume_loses_and_doubles_nothing() {
    // A 30 s ack wait: no deadline falls due during the test, so each one moves by the shift only.
    let env = env();
    env.write(
        "conductor/workflows/quick-flow.yaml",
        &QUICK_FLOW.replace("ack_wait: 1s", "ack_wait: 30s"),
    );
    let waiting = ["hof_20261206_aj0001", "hof_20261206_aj0002"];
    for (i, h) in waiting.iter().enumerate() {
        start(&env, &format!("wf_sk_{i}"), h);
    }
    let before: Vec<Value> = waiting
        .iter()
        .map(|h| env.read(&format!("conductor/pending/hephaestus/{h}.json")))
        .collect();
    let p = env.ok(
        &[
            "pause",
            "--god",
            "hephaestus",
            "--until",
            "2s",
            "--reason",
            "kill loop",
        ],
        None,
    );
    let held = "hof_20261206_aj0003";
    assert_eq!(
        start(&env, "wf_sk_held", held)["status"],
        "awaiting_approval"
    );
    let started = Instant::now();
    let mut round = 0u64;
    // Kill serve at varied moments until well past the until (the resume runs in one of them).
    while started.elapsed() < Duration::from_secs(4) {
        let mut child = env
            .command(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(60 + (round * 97) % 400));
        let _ = child.kill();
        let _ = child.wait();
        round += 1;
    }
    // Whatever the kills left, one clean pass finishes it.
    env.ok(&["tick"], None);
    let file = env.read("conductor/paused.json");
    assert_eq!(file["pauses"], json!([]), "{file:#}");
    assert_eq!(file["ended"].as_array().unwrap().len(), 1);
    assert_eq!(file["ended"][0]["resumed_by"], "serve");
    let since = ts(&p["pause"]["since"]);
    let resumed_at = ts(&file["ended"][0]["resumed_at"]);
    for (h, old) in waiting.iter().zip(&before) {
        assert_eq!(
            env.copies(h),
            vec!["conductor/pending/hephaestus".to_string()],
            "{h}"
        );
        let d = env.read(&format!("conductor/pending/hephaestus/{h}.json"));
        assert_eq!(d["frozen"].as_array().unwrap().len(), 1, "{d:#}");
        let moved = ts(&d["ack_deadline"]) - ts(&old["ack_deadline"]);
        assert_eq!(moved, resumed_at - since, "shifted exactly once");
    }
    assert_eq!(
        env.copies(held),
        vec!["conductor/pending/hephaestus".to_string()]
    );
    let resumes: Vec<Value> = entries(&env, "resume")
        .into_iter()
        .filter(|e| !e["outcome"].as_str().unwrap().contains("duplicate"))
        .collect();
    assert_eq!(resumes.len(), 1, "{resumes:#?} after {round} kills");
    assert!(entries(&env, "dead_letter").is_empty());
}

/// `held_because` as the engine writes it is `paused: {kind} {name}`; a bare `paused` part (the short
/// form, or another writer's) is read as a hold of the pause in force that covers the dispatch.
#[test]
fn a_bare_paused_hold_is_read_as_a_pause_and_released_by_its_resume() {
    let env = env();
    env.ok(&["pause", "--god", "hephaestus", "--reason", "r"], None);
    let hid = "hof_20261206_bb0001";
    start(&env, "wf_bare", hid);
    let path = format!("conductor/pending/_quarantine/{hid}.json");
    let mut d = env.read(&path);
    assert_eq!(d["held_because"], "paused: god hephaestus");
    d["held_because"] = json!("paused");
    env.write(&path, &serde_json::to_string_pretty(&d).unwrap());
    let listed = env.ok(&["paused"], None);
    assert_eq!(listed["paused"][0]["held"], json!([hid]), "{listed:#}");
    let err = env.refused(&["approve", hid], None);
    assert!(err.contains("held by a pause (paused)"), "{err}");
    assert!(err.contains("pantheon paused"), "{err}");
    let r = env.ok(&["resume", "--god", "hephaestus"], None);
    assert_eq!(r["released"], json!([hid]), "{r:#}");
    assert!(
        env.read(&format!("conductor/pending/hephaestus/{hid}.json"))["ack_deadline"].is_string()
    );
    assert!(env.names("conductor/pending/_quarantine").is_empty());
    assert_eq!(env.state("wf_bare")["status"], "waiting_for_ack");
}

/// A seed-written god whose own god is paused (the whole root) still acks what it already has, through
/// the CLI as the seeds do; what its completion routes onward is held, and the foreign reader sees it.
#[test]
fn a_paused_seed_god_acks_what_it_has_and_the_next_dispatch_is_held() {
    let env = env();
    let (wf, hid) = ("wf_py_all", "hof_20261206_ag0002");
    start(&env, wf, hid);
    assert_eq!(python_reader(&env, "hephaestus")["inbox"], json!([hid]));
    env.ok(&["pause", "--all", "--reason", "freeze everything"], None);
    assert_eq!(python_reader(&env, "hephaestus")["paused"], true);
    let out = std::process::Command::new("python3")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/conductor/python/usage_god.py"),
        )
        .arg(bin())
        .arg(&env.root)
        .args(["hephaestus", wf, "silent"])
        .env("HOME", &env.home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the paused god's acks: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["next"]["status"], "awaiting_approval", "{done:#}");
    assert_eq!(python_reader(&env, "hephaestus")["inbox"], json!([]));
    let iris = python_reader(&env, "iris");
    assert_eq!(iris["inbox"], json!([]));
    assert_eq!(iris["held"].as_array().unwrap().len(), 1, "{iris}");
    assert_eq!(
        entries(&env, "ack").len(),
        2,
        "accepted and completed, journaled"
    );
    env.ok(&["resume", "--all"], None);
    let iris = python_reader(&env, "iris");
    assert_eq!(iris["inbox"].as_array().unwrap().len(), 1, "{iris}");
    assert_eq!(iris["held"], json!([]));
}

/// A flow whose `build` step has a 2 s `timeout` after `accepted` (its `ack_wait` an hour).
const STEP_TIMEOUT_FLOW: &str = r#"
workflow:
  id: step-timeout-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1h
      timeout: 2s
      max_deliveries: 3
"#;

/// A pause longer than a step's own `timeout` fires no timeout: the supervisor parks the timer
/// while paused, and the resume shifts the archived dispatch's `step_deadline` and its timer's
/// `deadline` by the paused time (where a foreign reader sees them), exactly once even when the
/// resume is killed between the two writes and repeated; the timeout then runs again and fires.
#[test]
fn a_pause_longer_than_a_step_timeout_fires_no_timeout_and_shifts_the_step_deadline() {
    let env = env();
    env.write(
        "conductor/workflows/step-timeout-flow.yaml",
        STEP_TIMEOUT_FLOW,
    );
    let (wf, hid) = ("wf_step_pause", "hof_20261206_st0001");
    env.start("step-timeout-flow", wf, hid, &[]);
    let a = env.ack(&ack("ack_20261206_st0001", hid, "accepted", "on it"));
    assert_eq!(a["deadline_kind"], "step_timeout", "{a:#}");
    let archived = format!("conductor/archive/hephaestus/{hid}.json");
    let timer = format!("conductor/timers/{hid}.json");
    let before = ts(&env.read(&archived)["step_deadline"]);
    assert_eq!(ts(&env.read(&timer)["deadline"]), before);

    env.ok(
        &["pause", "--god", "hephaestus", "--reason", "budget burn"],
        None,
    );
    // Well past the step's timeout while paused: nothing fires.
    std::thread::sleep(Duration::from_millis(3000));
    let tick = env.ok(&["tick"], None);
    assert_eq!(tick["redelivered"], json!([]), "{tick:#}");
    assert_eq!(tick["dead_lettered"], json!([]), "{tick:#}");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()]
    );

    // The resume killed between the dispatch's shift and its timer's: the repeat writes the timer
    // from the dispatch and shifts nothing twice.
    killed_at(
        &env,
        &["resume", "--god", "hephaestus"],
        "resume:after-step-shift",
    );
    let half = env.read(&archived);
    assert_eq!(half["frozen"].as_array().unwrap().len(), 1, "{half:#}");
    assert_eq!(
        ts(&env.read(&timer)["deadline"]),
        before,
        "the timer not yet"
    );
    let r = env.ok(&["resume", "--god", "hephaestus"], None);
    assert_eq!(r["status"], "resumed", "{r:#}");
    assert_eq!(r["shifted"], 0, "shifted by the killed attempt: {r:#}");
    let d = env.read(&archived);
    assert_eq!(d["frozen"], half["frozen"], "shifted once");
    let frozen = &d["frozen"][0];
    assert_eq!(frozen["pause"], r["pause"]["id"]);
    let resumed_at = ts(&r["pause"]["resumed_at"]);
    assert_eq!(ts(&frozen["to"]), resumed_at);
    // Frozen from the pause's start (the acceptance came before it).
    assert_eq!(ts(&frozen["from"]), ts(&r["pause"]["since"]));
    let after = ts(&d["step_deadline"]);
    assert_eq!(
        after - before,
        resumed_at - ts(&r["pause"]["since"]),
        "shifted exactly"
    );
    assert_eq!(
        (after - before).num_milliseconds(),
        frozen["shifted_ms"].as_i64().unwrap()
    );
    assert!((after - before).num_milliseconds() >= 3000, "{frozen:#}");
    assert_eq!(
        ts(&env.read(&timer)["deadline"]),
        after,
        "the timer says it too"
    );

    // Right after the resume the step still has the time it had left: no timeout yet.
    let tick = env.ok(&["tick"], None);
    assert_eq!(tick["redelivered"], json!([]), "{tick:#}");
    assert_eq!(
        env.copies(hid),
        vec!["conductor/archive/hephaestus".to_string()]
    );
    // Past the shifted deadline the timeout fires as it would have without the pause.
    let wait = after - chrono::Utc::now() + chrono::Duration::milliseconds(100);
    std::thread::sleep(wait.to_std().unwrap_or_default());
    let tick = env.ok(&["tick"], None);
    assert_eq!(tick["redelivered"][0]["handoff_id"], hid, "{tick:#}");
    assert_eq!(tick["redelivered"][0]["delivery"], 2, "{tick:#}");
    assert!(entries(&env, "dead_letter").is_empty());
}
