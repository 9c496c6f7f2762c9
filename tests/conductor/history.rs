//! The history (docs/HISTORY.md): the recorder (`pantheon record`, a real process) against a random
//! workload of engine acts, redeliveries, Python-style direct writes, bus posts, locks and board
//! phases; replay at the moments seen compared with what the root held then; a recorder killed with
//! SIGKILL and restarted; the fork (`rerun --as-of`); replay's refusals.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pantheon_engine::{
    HistoryDir, Root, Seek, check_history, picture_at, replay_at, root_dirs, root_files,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::{Env, ack, handoff};

/// `pantheon record` on the root, killed when dropped.
struct Recorder(Child);

impl Recorder {
    fn start(env: &Env) -> Self {
        let child = env
            .command(&["record"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.kill();
    }
}

fn root_of(env: &Env) -> Root {
    Root::at(&env.root)
}

/// The files of the root by key, with their bytes (what the history must hold).
fn disk(root: &Root) -> BTreeMap<String, Vec<u8>> {
    root_files(root)
        .into_iter()
        .filter_map(|(k, (p, _))| std::fs::read(&p).ok().map(|b| (k, b)))
        .collect()
}

/// The files the history holds at `at_us`, by key, with their bytes.
fn recorded(root: &Root, at_us: i64) -> Option<BTreeMap<String, Vec<u8>>> {
    let hist = HistoryDir::of(root);
    let Seek::Found { tree, .. } = hist.seek(at_us).ok()? else {
        return None;
    };
    tree.iter()
        .filter(|(_, f)| !f.dir)
        .map(|(k, f)| Some((k.clone(), hist.content(f).ok()??)))
        .collect()
}

/// The directories the history holds at `at_us` (an inbox, an archive, a track, ...), by key.
fn recorded_dirs(root: &Root, at_us: i64) -> Option<BTreeSet<String>> {
    let hist = HistoryDir::of(root);
    let Seek::Found { tree, .. } = hist.seek(at_us).ok()? else {
        return None;
    };
    Some(
        tree.into_iter()
            .filter(|(_, f)| f.dir)
            .map(|(k, _)| k)
            .collect(),
    )
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// Waits until the history's newest moment holds exactly the root's files (the recorder caught up);
/// panics after 10 s.
fn caught_up(root: &Root) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let want = disk(root);
        let dirs = root_dirs(root);
        if recorded(root, now_us()).as_ref() == Some(&want)
            && recorded_dirs(root, now_us()).as_ref() == Some(&dirs)
        {
            return;
        }
        if Instant::now() > until {
            let got = recorded(root, now_us()).unwrap_or_default();
            let diff: Vec<&String> = want
                .keys()
                .chain(got.keys())
                .filter(|k| want.get(*k) != got.get(*k))
                .collect();
            let got_dirs = recorded_dirs(root, now_us()).unwrap_or_default();
            panic!(
                "the recorder never caught up; files that differ: {diff:?}; directories: {:?} \
                 recorded, {dirs:?} in the root",
                got_dirs
            );
        }
        std::thread::sleep(Duration::from_millis(15));
    }
}

/// The picture without its moment (compared across replay and the root).
fn without_moment(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("at");
        m.remove("history");
    }
    v
}

#[derive(Debug, Clone)]
enum Op {
    /// An engine act: start workflow `n` (thoth's plan handed to hephaestus).
    Submit(u8),
    /// An engine act: ack the oldest dispatch of an inbox.
    Ack(u8),
    /// A supervisor redelivery: a Python-style write moves an open dispatch's deadline to the past,
    /// then `tick` redelivers it.
    Redeliver,
    /// A Python-style direct write: a dispatch file written in place (no temp file, no rename).
    PythonDispatch(u8),
    /// A Python-style append to the queue.
    PythonAppend(u8),
    /// A bus post.
    Post(u8),
    /// A lock taken or released.
    Lock(u8, bool),
    /// A heartbeat.
    Beat(u8),
    /// The next board step (open, assess, advance, vote, resolve).
    Board,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4).prop_map(Op::Submit),
        (0u8..3).prop_map(Op::Ack),
        Just(Op::Redeliver),
        (0u8..4).prop_map(Op::PythonDispatch),
        (0u8..4).prop_map(Op::PythonAppend),
        (0u8..4).prop_map(Op::Post),
        ((0u8..3), any::<bool>()).prop_map(|(n, b)| Op::Lock(n, b)),
        (0u8..3).prop_map(Op::Beat),
        Just(Op::Board),
    ]
}

const FLOW: &str = r#"
workflow:
  id: rec-flow
  version: "1.0.0"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: 1h
      max_deliveries: 5
      fallback_gods: [marvin]
    - id: check
      god: iris
"#;

const BOARD_STEPS: [&[&str]; 8] = [
    &[
        "open",
        "--checkpoint",
        "EVALUATE_PLAN",
        "--proposal",
        "ship it",
        "--director",
        "CA",
        "--director",
        "CPO",
    ],
    &[
        "assess",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--score",
        "8",
    ],
    &[
        "assess",
        "--director",
        "CPO",
        "--verdict",
        "CONCERNS",
        "--score",
        "6",
        "--concern",
        "cost",
    ],
    &["advance"],
    &[
        "discuss",
        "--from",
        "CA",
        "--to",
        "CPO",
        "--message",
        "the cost is bounded",
    ],
    &["advance", "--force"],
    &[
        "vote",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--confidence",
        "0.8",
    ],
    &[
        "vote",
        "--director",
        "CPO",
        "--verdict",
        "APPROVE",
        "--confidence",
        "0.6",
    ],
];

struct World {
    env: Env,
    next_hid: u32,
    board: usize,
}

impl World {
    fn hid(&mut self) -> String {
        self.next_hid += 1;
        format!("hof_20261201_{:06x}", self.next_hid)
    }

    fn apply(&mut self, op: &Op) {
        let env = &self.env;
        match op {
            Op::Submit(n) => {
                let hid = self.hid();
                let env = &self.env;
                let mut h = handoff(
                    &hid,
                    &format!("wf_rec_{n}_{}", self.next_hid),
                    "thoth",
                    "hephaestus",
                    "plan",
                    &[],
                );
                h["routing"] = json!({"workflow_definition": "rec-flow"});
                let _ = env.run(&["handoff", "submit", "-"], Some(&h));
            }
            Op::Ack(g) => {
                let god = ["hephaestus", "marvin", "thoth"][*g as usize % 3];
                let inbox = env.run(&["inbox", god], None);
                let v: Value = serde_json::from_slice(&inbox.stdout).unwrap_or(Value::Null);
                if let Some(hid) = v["dispatches"][0]["handoff_id"].as_str() {
                    self.next_hid += 1;
                    let status = ["accepted", "rejected", "completed"][self.next_hid as usize % 3];
                    let a = ack(
                        &format!("ack_20261201_{:06x}", self.next_hid),
                        hid,
                        status,
                        "ok",
                    );
                    let _ = env.run(&["ack", "-"], Some(&a));
                }
            }
            Op::Redeliver => {
                for e in std::fs::read_dir(env.path("conductor/pending/hephaestus"))
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let p = e.path();
                    if p.extension().is_some_and(|x| x == "json")
                        && let Ok(mut d) =
                            serde_json::from_slice::<Value>(&std::fs::read(&p).unwrap_or_default())
                        && d.get("ack_deadline").is_some()
                    {
                        d["ack_deadline"] = json!("2020-01-01T00:00:00Z");
                        std::fs::write(&p, serde_json::to_vec_pretty(&d).unwrap()).unwrap();
                        break;
                    }
                }
                let _ = env.run(&["tick"], None);
            }
            Op::PythonDispatch(n) => {
                let hid = self.hid();
                let dir = self.env.path("conductor/pending/hermes");
                std::fs::create_dir_all(&dir).unwrap();
                let d = json!({"handoff_id": hid, "workflow_id": format!("wf_py_{n}"), "from_god": "py",
                    "to_god": "hermes", "step": "s", "dispatched_at": chrono::Utc::now().to_rfc3339(),
                    "ack_status": "pending", "context": {"summary": "written by a Python god"}});
                std::fs::write(
                    dir.join(format!("{hid}.json")),
                    serde_json::to_vec(&d).unwrap(),
                )
                .unwrap();
            }
            Op::PythonAppend(n) => {
                let q = env.path("conductor/tracks/t1/.message-bus/queue.jsonl");
                std::fs::create_dir_all(q.parent().unwrap()).unwrap();
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&q)
                    .unwrap();
                let line = json!({"id": format!("py-{n}-{}", now_us()), "type": "PROGRESS", "source": "py",
                    "timestamp": chrono::Utc::now().to_rfc3339(), "payload": {"n": n}});
                writeln!(f, "{line}").unwrap();
            }
            Op::Post(n) => {
                let _ = env.run(
                    &[
                        "bus",
                        "--track",
                        "t1",
                        "post",
                        "STATUS",
                        "--source",
                        "w1",
                        "--payload",
                        &json!({"n": n}).to_string(),
                    ],
                    None,
                );
            }
            Op::Lock(n, take) => {
                let path = format!("src/f{n}.rs");
                let args: Vec<&str> = if *take {
                    vec!["bus", "--track", "t1", "lock", &path, "--worker", "w1"]
                } else {
                    vec!["bus", "--track", "t1", "unlock", &path, "--worker", "w1"]
                };
                let _ = env.run(&args, None);
            }
            Op::Beat(n) => {
                let w = format!("w{n}");
                let _ = env.run(
                    &[
                        "bus",
                        "--track",
                        "t1",
                        "heartbeat",
                        "--worker",
                        &w,
                        "--task",
                        "t",
                        "--status",
                        "RUNNING",
                    ],
                    None,
                );
            }
            Op::Board => {
                if self.board < BOARD_STEPS.len() {
                    let mut args = vec!["board", "--track", "t1"];
                    args.extend_from_slice(BOARD_STEPS[self.board]);
                    let _ = env.run(&args, None);
                    self.board += 1;
                } else if self.board == BOARD_STEPS.len() {
                    let _ = env.run(&["board", "--track", "t1", "advance"], None);
                    let _ = env.run(&["board", "--track", "t1", "resolve"], None);
                    self.board += 1;
                }
            }
        }
    }
}

fn world() -> World {
    let env = Env::new();
    env.write("conductor/workflows/rec-flow.yaml", FLOW);
    env.ok(&["bus", "--track", "t1", "init"], None);
    World {
        env,
        next_hid: 0,
        board: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, failure_persistence: None, .. ProptestConfig::default() })]

    /// For every moment seen, the replay equals what the root held then: the same files, byte for
    /// byte, and the same picture (workflows, inboxes, held, dead, locks, workers, boards).
    #[test]
    fn replay_at_every_moment_equals_the_root_then(ops in prop::collection::vec(op(), 6..12)) {
        let mut w = world();
        let root = root_of(&w.env);
        let _rec = Recorder::start(&w.env);
        let mut seen = Vec::new();
        caught_up(&root);
        for op in &ops {
            w.apply(op);
            caught_up(&root);
            let at = now_us();
            seen.push((at, disk(&root), root_dirs(&root), without_moment(picture_at(&root, at))));
            // The next change is stamped after this moment (file times come from the kernel's coarse
            // clock, a few milliseconds behind).
            std::thread::sleep(Duration::from_millis(25));
        }
        for (at, files, dirs, pic) in &seen {
            let got = recorded(&root, *at).expect("a moment inside the history");
            let differ: Vec<&String> = files.keys().chain(got.keys())
                .filter(|k| files.get(*k) != got.get(*k)).collect();
            prop_assert!(differ.is_empty(), "files that differ at {}: {:?}", at, differ);
            let got_dirs = recorded_dirs(&root, *at);
            prop_assert_eq!(got_dirs.as_ref(), Some(dirs), "directories at {}", at);
            let replay = without_moment(replay_at(&root, *at).unwrap());
            prop_assert_eq!(&replay, pic);
        }
        let (errors, _) = check_history(&root);
        prop_assert!(errors.is_empty(), "{:?}", errors);
    }
}

/// Every record's sequence number, in order, across the segments.
fn seqs(root: &Root) -> Vec<u64> {
    let hist = HistoryDir::of(root);
    hist.segments()
        .into_iter()
        .flat_map(|s| {
            hist.segment(s)
                .unwrap()
                .records
                .into_iter()
                .map(|(_, c)| c.seq)
        })
        .collect()
}

#[test]
fn a_recorder_killed_mid_burst_and_restarted_doubles_and_loses_nothing() {
    let env = Env::new();
    env.ok(&["bus", "--track", "t1", "init"], None);
    let root = root_of(&env);
    let q = env.path("conductor/tracks/t1/.message-bus/queue.jsonl");
    let mut rng = 0x9e37_79b9_u64;
    for round in 0..3 {
        let mut rec = Recorder::start(&env);
        // A burst of Python-style appends and atomic rewrites while the recorder is killed.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let kill_after = 20 + (rng % 150) as usize;
        for i in 0..200 {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&q).unwrap();
            writeln!(
                f,
                "{}",
                json!({"id": format!("m{round}-{i}"), "type": "STATUS", "source": "py",
                "timestamp": "2026-12-01T00:00:00Z", "payload": {}})
            )
            .unwrap();
            if i % 10 == 0 {
                env.write(
                    "conductor/tracks/t1/.message-bus/locks.json",
                    &json!({format!("f{i}"): {"worker_id": "w1"}}).to_string(),
                );
            }
            if i == kill_after {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &rec.0.id().to_string()])
                    .status();
            }
        }
        rec.kill();
        let mut rec = Recorder::start(&env);
        caught_up(&root);
        rec.kill();
        let s = seqs(&root);
        assert_eq!(
            s,
            (0..s.len() as u64).collect::<Vec<_>>(),
            "consecutive, none doubled"
        );
        // The directories (the inboxes `init` made, the track's) are recorded once, however many
        // recorders were killed and restarted.
        let hist = HistoryDir::of(&root);
        let mut dirs: Vec<String> = hist
            .segments()
            .into_iter()
            .flat_map(|s| hist.segment(s).unwrap().records)
            .filter(|(_, c)| c.kind == pantheon_engine::ChangeKind::Dir)
            .map(|(_, c)| c.path)
            .collect();
        let n = dirs.len();
        dirs.sort();
        dirs.dedup();
        assert_eq!((n, dirs.len()), (root_dirs(&root).len(), n), "{dirs:?}");
        let (errors, _) = check_history(&root);
        assert!(errors.is_empty(), "{errors:?}");
        // The queue as recorded has each line once.
        let got = recorded(&root, now_us()).unwrap();
        let queue = &got["conductor/tracks/t1/.message-bus/queue.jsonl"];
        let lines = queue
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(lines, 200 * (round + 1));
    }
    // A second recorder stands by while one writes, and writes nothing meanwhile.
    let mut a = Recorder::start(&env);
    caught_up(&root);
    let mut b = Recorder::start(&env);
    std::thread::sleep(Duration::from_millis(300));
    env.write("conductor/tracks/t1/.message-bus/locks.json", "{}");
    caught_up(&root);
    a.kill();
    env.write(
        "conductor/tracks/t1/.message-bus/locks.json",
        r#"{"x": {"worker_id": "w2"}}"#,
    );
    // The stand-by took over.
    caught_up(&root);
    b.kill();
    let s = seqs(&root);
    assert_eq!(s, (0..s.len() as u64).collect::<Vec<_>>());
}

#[test]
fn fork_reruns_from_the_context_bag_of_a_past_moment_and_journals_the_moment() {
    let env = Env::new();
    env.write("conductor/workflows/rec-flow.yaml", FLOW);
    let root = root_of(&env);
    let _rec = Recorder::start(&env);
    let wf = "wf_fork";
    let mut h = handoff(
        "hof_20261201_f00001",
        wf,
        "thoth",
        "hephaestus",
        "plan",
        &[],
    );
    h["routing"] = json!({"workflow_definition": "rec-flow"});
    h["context"]["decisions"] = json!(["use design A"]);
    env.submit(&h);
    let reject = |id: &str, hid: &str| {
        env.ack(&ack(id, hid, "rejected", "cannot"));
    };
    reject("ack_20261201_f00001", "hof_20261201_f00001");
    let st = env.state(wf);
    let hid2 = st["step_history"].as_array().unwrap().last().unwrap()["handoff_id"]
        .as_str()
        .map(str::to_owned);
    let pending: Vec<String> = env.names("conductor/pending/marvin");
    let hid2 = hid2
        .filter(|h| pending.contains(&format!("{h}.json")))
        .unwrap_or_else(|| pending[0].trim_end_matches(".json").to_owned());
    reject("ack_20261201_f00002", &hid2);
    assert_eq!(env.state(wf)["status"], "failed");
    caught_up(&root);
    let moment = chrono::Utc::now();
    let ts = moment.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    std::thread::sleep(Duration::from_millis(25));
    // A plain rerun with an edited context changes the bag; then it fails again.
    env.write("ctx.json", r#"{"decisions": ["use design B"]}"#);
    let r = env.ok(
        &[
            "rerun",
            wf,
            "--from",
            "build",
            "--context",
            env.path("ctx.json").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(
        env.state(wf)["context_bag"]["decisions"],
        json!(["use design B"])
    );
    let h3 = r["handoff_id"].as_str().unwrap().to_owned();
    reject("ack_20261201_f00003", &h3);
    let pending: Vec<String> = env.names("conductor/pending/marvin");
    reject("ack_20261201_f00004", pending[0].trim_end_matches(".json"));
    assert_eq!(env.state(wf)["status"], "failed");
    caught_up(&root);
    // The fork: the bag as it was at the moment, edited as --context allows.
    env.write("ctx2.json", r#"{"open_questions": ["is A still right?"]}"#);
    let f = env.ok(
        &[
            "rerun",
            wf,
            "--from",
            "build",
            "--as-of",
            &ts,
            "--context",
            env.path("ctx2.json").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(f["status"], "fork");
    assert_eq!(f["as_of"], ts.as_str());
    let d = env.read(&format!(
        "conductor/pending/hephaestus/{}.json",
        f["handoff_id"].as_str().unwrap()
    ));
    assert_eq!(d["context"]["decisions"], json!(["use design A"]), "{d:#}");
    let st = env.state(wf);
    assert_eq!(
        st["context_bag"]["open_questions"],
        json!(["is A still right?"])
    );
    assert_eq!(st["context_bag"]["decisions"], json!(["use design A"]));
    assert_eq!(
        st["attempts"].as_array().unwrap().last().unwrap()["as_of"],
        ts.as_str()
    );
    let forks: Vec<Value> = env
        .journal_entries()
        .into_iter()
        .filter(|e| e["action"] == "rerun" && e["targets"]["as_of"] == ts.as_str())
        .collect();
    assert_eq!(forks.len(), 1, "one journal entry naming the moment");
    assert_eq!(forks[0]["targets"]["as_of"], ts.as_str());
    // Before the history: refused, naming the first moment.
    let e = env.refused(
        &[
            "rerun",
            wf,
            "--from",
            "build",
            "--as-of",
            "2020-01-01T00:00:00Z",
        ],
        None,
    );
    assert!(e.contains("first moment kept is"), "{e}");
}

#[test]
fn replay_refuses_a_root_never_recorded_and_shows_a_moment_before_the_history_at_its_first() {
    let env = Env::new();
    let out = env.run(&["replay", "--at", "-15m", "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never recorded"));
    let root = root_of(&env);
    let mut rec = Recorder::start(&env);
    caught_up(&root);
    rec.kill();
    // A moment before the history: its first moment, said on standard error (exit 0).
    let out = env.run(&["replay", "--at", "2020-01-01T00:00:00Z", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2020-01-01T00:00:00")
            && err.contains("is before the history starts: showing its first moment"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["at"], v["history"]["first"], "{v:#}");
    assert!(
        v.get("note").is_none(),
        "the note is on standard error only: {v:#}"
    );
    let v: Value =
        serde_json::from_slice(&env.run(&["replay", "--at", "now", "--json"], None).stdout)
            .unwrap();
    for k in [
        "at",
        "workflows",
        "inboxes",
        "held",
        "dead",
        "locks",
        "workers",
        "boards",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from {v:#}");
    }
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
    // A segment damaged by hand is an error of validate.
    let seg = HistoryDir::of(&root).segment_path(0);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(b"garbage\n");
    std::fs::write(&seg, bytes).unwrap();
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert!(report["errors"].as_u64().unwrap() > 0, "{report:#}");
    let _ = Path::new("");
}

#[test]
fn the_headless_demo_records_and_its_board_replays_phase_by_phase() {
    let env = Env::bare();
    let out = env.run(
        &["demo", "--headless", "--duration", "30", "--speed", "10"],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tracks: Vec<String> = std::fs::read_dir(env.path("conductor/tracks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut phases = Vec::new();
    for t in &tracks {
        let v = env.ok(
            &["replay", "--from", "-1h", "--to", "now", "--track", t],
            None,
        );
        for c in v["changes"].as_array().unwrap() {
            let p = c["path"].as_str().unwrap();
            if p.contains("/board/session-")
                && let Some(s) = c["value"]["status"].as_str()
                && phases.last().is_none_or(|l: &String| l != s)
            {
                phases.push(s.to_owned());
            }
        }
    }
    for want in ["ASSESSING", "DISCUSSING", "VOTING"] {
        assert!(
            phases.iter().any(|p| p == want),
            "{want} not replayed: {phases:?}"
        );
    }
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    let history_errors: Vec<&Value> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["severity"] == "error" && p["path"].as_str().unwrap_or("").contains("history")
        })
        .collect();
    assert!(history_errors.is_empty(), "{history_errors:?}");
}

#[test]
fn forget_drops_a_cleaned_up_workflows_recorded_context() {
    let env = Env::new();
    env.write("conductor/workflows/rec-flow.yaml", FLOW);
    let root = root_of(&env);
    let mut rec = Recorder::start(&env);
    let wf = "wf_forget";
    let mut h = handoff(
        "hof_20261201_fa0001",
        wf,
        "thoth",
        "hephaestus",
        "plan",
        &[],
    );
    h["routing"] = json!({"workflow_definition": "rec-flow"});
    h["context"]["decisions"] = json!(["a secret decision"]);
    env.submit(&h);
    caught_up(&root);
    let before = now_us();
    std::thread::sleep(Duration::from_millis(25));
    // Still running: refused.
    let e = env.refused(&["record", "--forget", wf], None);
    assert!(e.contains("only a finished workflow"), "{e}");
    env.ok(&["abort", wf, "--reason", "done with it"], None);
    env.ok(&["cleanup", wf], None);
    caught_up(&root);
    rec.kill();
    let at = chrono::DateTime::from_timestamp_micros(before)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let v = env.ok(&["replay", "--at", &at, "--json"], None);
    assert_eq!(v["workflows"][wf]["status"], "waiting_for_ack");
    let r = env.ok(&["record", "--forget", wf], None);
    assert!(r["files"].as_u64().unwrap() >= 3, "{r}");
    assert!(r["blobs_removed"].as_u64().unwrap() >= 3, "{r}");
    let v = env.ok(&["replay", "--at", &at, "--json"], None);
    assert_eq!(v["workflows"][wf]["status"], "forgotten");
    // No blob of the history holds the decision any more.
    let hist = HistoryDir::of(&root);
    let mut found = false;
    crate::common::walk(&hist.dir, &mut |p| {
        if std::fs::read(p).is_ok_and(|b| b.windows(17).any(|w| w == b"a secret decision")) {
            found = true;
        }
    });
    assert!(!found, "the forgotten context is still in the history");
    let e = env.refused(&["rerun", wf, "--from", "build", "--as-of", &at], None);
    assert!(
        e.contains("forgotten") || e.contains("no readable state"),
        "{e}"
    );
}

/// A directory of `conductor/` removed and made again (as `journal-intents/` is, by an act that is
/// refused) is watched again: files written in it afterwards are recorded. A directory moved out of
/// the root takes its recorded files with it, even beside a sibling whose name extends its own.
#[test]
fn a_directory_removed_and_made_again_is_still_recorded() {
    let env = Env::new();
    let root = root_of(&env);
    let _rec = Recorder::start(&env);
    caught_up(&root);
    let dir = env.path("conductor/scratch-made-again");
    for round in 0..3 {
        std::fs::create_dir(&dir).unwrap();
        caught_up(&root);
        // Written after the directory was noticed, so only its watch can see it.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(dir.join(format!("f{round}.json")), b"{}").unwrap();
        caught_up(&root);
        std::fs::remove_file(dir.join(format!("f{round}.json"))).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        caught_up(&root);
    }
    let kept = env.path("conductor/moved/hermes-2");
    let moved = env.path("conductor/moved/hermes");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::write(kept.join("b.json"), b"{}").unwrap();
    std::fs::write(moved.join("a.json"), b"{}").unwrap();
    caught_up(&root);
    let away = tempfile::tempdir().unwrap();
    std::fs::rename(&moved, away.path().join("hermes")).unwrap();
    caught_up(&root);
}

/// `replay --at TS --json` lists an inbox, empty or not, exactly when `pantheon inbox GOD` knew the
/// god then: the eight empty inboxes `init` made, an empty inbox made later, one removed; and the
/// changes between two moments name the directory that appeared.
#[test]
fn replay_lists_an_empty_inbox_exactly_when_inbox_listed_it_then() {
    let env = Env::new();
    let root = root_of(&env);
    let _rec = Recorder::start(&env);
    caught_up(&root);
    let gods = ["thoth", "zeus", "hermes"];
    let listed = |env: &Env| -> Vec<(bool, Vec<Value>)> {
        gods.iter()
            .map(|g| {
                // A god no inbox and no definition names is refused (exit 1): not known.
                let out = env.run(&["inbox", g], None);
                if out.status.code() == Some(1) {
                    return (false, Vec::new());
                }
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                let known = v["known_god"].as_bool().unwrap();
                let ids = v["dispatches"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d["handoff_id"].clone())
                    .collect();
                (known, ids)
            })
            .collect()
    };
    let mut moments = Vec::new();
    let mut take = |env: &Env| {
        caught_up(&root);
        moments.push((now_us(), listed(env)));
        std::thread::sleep(Duration::from_millis(25));
    };
    take(&env);
    std::fs::create_dir(env.path("conductor/pending/zeus")).unwrap();
    take(&env);
    std::fs::remove_dir(env.path("conductor/pending/hermes")).unwrap();
    take(&env);
    assert_eq!(
        moments.iter().map(|(_, l)| l[1].0).collect::<Vec<_>>(),
        [false, true, true],
        "zeus's inbox appears"
    );
    assert_eq!(
        moments.iter().map(|(_, l)| l[2].0).collect::<Vec<_>>(),
        [true, true, false],
        "hermes's inbox goes"
    );
    for (at, then) in &moments {
        let stamp = chrono::DateTime::from_timestamp_micros(*at)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let v = env.ok(&["replay", "--at", &stamp, "--json"], None);
        for (g, (known, ids)) in gods.iter().zip(then) {
            let shown = v["inboxes"].get(g);
            assert_eq!(
                shown.is_some(),
                *known,
                "{g} at {stamp}: {:#}",
                v["inboxes"]
            );
            if let Some(s) = shown {
                assert_eq!(s.as_array().unwrap(), ids, "{g} at {stamp}");
            }
        }
    }
    let from = chrono::DateTime::from_timestamp_micros(moments[0].0)
        .unwrap()
        .to_rfc3339();
    let changes = env.ok(&["replay", "--from", &from, "--to", "now", "--json"], None);
    let kinds: Vec<(String, String)> = changes["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("dir".into(), "conductor/pending/zeus".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("del".into(), "conductor/pending/hermes".into())),
        "{kinds:?}"
    );
    // The summary for a person lists what was open: no line for an empty inbox.
    let out = env.run(&["replay", "--at", "now"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("AS OF ") && !text.contains("inbox thoth"),
        "{text}"
    );
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
}

/// Runs `pantheon ARGS` and measures its peak resident memory: its exit code, standard error and
/// peak in KiB. Measured by a small Python parent (`RUSAGE_CHILDREN`), not by this test process: a
/// process's `ru_maxrss` starts at the resident size of the memory it was forked or spawned from, and
/// this test process, running with the rest of the suite, may be larger than what is measured.
fn run_measured(env: &Env, args: &[&str]) -> (Option<i32>, String, i64) {
    let inner = env.command(args);
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(
            "import resource, subprocess, sys\n\
             r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n\
             sys.stderr.buffer.write(r.stderr)\n\
             peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n\
             sys.stdout.write(f'{r.returncode} {peak}')\n",
        )
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(d) = inner.get_current_dir() {
        cmd.current_dir(d);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut it = text.split_whitespace();
    let code = it.next().and_then(|c| c.parse::<i32>().ok());
    let peak = it
        .next()
        .and_then(|p| p.parse::<i64>().ok())
        .unwrap_or(i64::MAX);
    (
        code,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        peak,
    )
}

/// The lines of `pantheon record --log` (or `serve --log`) so far.
fn log_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn a_hard_link_planted_as_the_newest_segment_is_set_aside_and_the_file_it_leads_to_never_written() {
    let env = Env::new();
    let root = root_of(&env);
    let log = env.dir.path().join("record.log");
    let mut rec = Recorder::start(&env);
    caught_up(&root);
    rec.kill();
    let hist = HistoryDir::of(&root);
    let seg = *hist.segments().last().unwrap();
    // A file outside the root, of the same file system, hard-linked in as the newest segment.
    let outside = env.dir.path().join("outside.txt");
    let text = "the operator's own file: never to be cut or written\n".repeat(1000);
    std::fs::write(&outside, &text).unwrap();
    std::fs::remove_file(hist.segment_path(seg)).unwrap();
    std::fs::hard_link(&outside, hist.segment_path(seg)).unwrap();
    let child = env
        .command(&["record", "--log", log.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut rec = Recorder(child);
    env.write("conductor/notes.json", r#"{"after": "the planted link"}"#);
    caught_up(&root);
    rec.kill();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), text);
    let meta = std::fs::metadata(&outside).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::nlink(&meta),
        2,
        "the link is kept aside, for a look"
    );
    let aside: Vec<String> = std::fs::read_dir(hist.dir.join("aside"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(
        aside[0].starts_with(&format!("{seg:020}.log.")),
        "{aside:?}"
    );
    let said = log_text(&log);
    assert!(
        said.contains("hard links") && said.contains("set aside") && said.contains("begun anew"),
        "{said}"
    );
    let (errors, _) = check_history(&root);
    assert!(errors.is_empty(), "{errors:?}");
    let report: Value = serde_json::from_slice(&env.run(&["validate"], None).stdout).unwrap();
    assert_eq!(report["errors"], 0, "{report:#}");
}

#[test]
fn a_forged_blob_list_is_refused_naming_the_checkpoint_in_bounded_memory() {
    let env = Env::new();
    env.ok(&["bus", "--track", "t1", "init"], None);
    let root = root_of(&env);
    let mut rec = Recorder::start(&env);
    caught_up(&root);
    rec.kill();
    let hist = HistoryDir::of(&root);
    let seg = *hist.segments().last().unwrap();
    // One blob of 60 MiB (sparse: it costs no disk), named 200 times by the newest checkpoint.
    let h = "0123456789abcdef0123456789abcdef";
    let blob = hist.dir.join("blobs").join(&h[..2]).join(&h[2..]);
    std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
    std::fs::File::create(&blob)
        .unwrap()
        .set_len(60 << 20)
        .unwrap();
    let cp_path = hist.dir.join(format!("checkpoints/{seg:020}.json"));
    let mut cp: Value = serde_json::from_slice(&std::fs::read(&cp_path).unwrap()).unwrap();
    cp["files"]["conductor/tracks/t1/.message-bus/queue.jsonl"] =
        json!({"b": vec![h; 200], "n": 200u64 * (60 << 20), "m": 0});
    std::fs::write(&cp_path, serde_json::to_vec(&cp).unwrap()).unwrap();
    let named = format!("checkpoints/{seg:020}.json");
    for args in [
        vec!["replay", "--at", "now", "--json"],
        vec!["replay", "--at", "now"],
        vec!["rerun", "wf_gone", "--from", "build", "--as-of", "now"],
        // The console refuses it before it asks for a terminal.
        vec!["--at", "now"],
    ] {
        let (code, err, peak_kib) = run_measured(&env, &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&named) && err.contains("200 blobs"),
            "{args:?}: {err}"
        );
        assert!(peak_kib < 256 * 1024, "{args:?}: a peak of {peak_kib} KiB");
    }
}

#[test]
fn max_size_bounds_the_history_when_one_large_file_is_rewritten() {
    let env = Env::new();
    let cfg = env.path("conductor/config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\nhistory:\n  max_size: 1MiB\n");
    std::fs::write(&cfg, text).unwrap();
    let root = Root::at(&env.root);
    let mut rec = Recorder::start(&env);
    caught_up(&root);
    let hist = HistoryDir::of(&root);
    let file = 2_000_000usize;
    let mut largest = 0;
    for i in 0..40u8 {
        // Rewritten whole, as an atomic writer does; each version differs.
        // Made beside the recorded trees (not recorded), then renamed into place.
        let tmp = env.root.join(".big.json.part");
        let mut bytes = vec![b' '; file];
        bytes[0] = b'"';
        bytes[1] = b'a' + (i % 26);
        bytes[2] = b'0' + i / 26;
        bytes[file - 1] = b'"';
        std::fs::write(&tmp, &bytes).unwrap();
        std::fs::rename(&tmp, env.path("conductor/big.json")).unwrap();
        caught_up(&root);
        largest = largest.max(hist.size());
    }
    rec.kill();
    // 80 MB written; the history stays within max_size plus one segment (whose blobs pass a
    // quarter of max_size by at most the one file).
    let bound = (1 << 20) + 2 * file as u64 + 256 * 1024;
    assert!(
        largest <= bound,
        "the history reached {largest} bytes (bound {bound})"
    );
    assert!(hist.size() <= bound);
    let got = recorded(&root, now_us()).unwrap();
    assert_eq!(
        got["conductor/big.json"],
        std::fs::read(env.path("conductor/big.json")).unwrap()
    );
    let (errors, _) = check_history(&root);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn a_garbage_checkpoint_does_not_stop_the_recorder() {
    let env = Env::new();
    let root = root_of(&env);
    let log = env.dir.path().join("record.log");
    let mut rec = Recorder::start(&env);
    caught_up(&root);
    rec.kill();
    let hist = HistoryDir::of(&root);
    let seg = *hist.segments().last().unwrap();
    let cp = hist.dir.join(format!("checkpoints/{seg:020}.json"));
    std::fs::write(&cp, b"{\"seq\": 0, \"files\": garbage").unwrap();
    let child = env
        .command(&["record", "--log", log.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut rec = Recorder(child);
    env.write("conductor/notes.json", r#"{"after": "the garbage"}"#);
    caught_up(&root);
    eventually("the recorder says it records", || {
        log_text(&log).contains("history: recording")
    });
    let said = log_text(&log);
    assert!(
        said.contains("set aside") && said.contains("begun anew"),
        "{said}"
    );
    let v: Value =
        serde_json::from_slice(&env.run(&["status", "--format", "json"], None).stdout).unwrap();
    assert_eq!(v["recorder"]["up"], true, "{v:#}");
    assert_eq!(v["recorder_down"], false, "{v:#}");
    rec.kill();
    let (errors, _) = check_history(&root);
    assert!(errors.is_empty(), "{errors:?}");
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of `GET /metrics` on 127.0.0.1:port.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut all = String::new();
    s.read_to_string(&mut all).ok()?;
    all.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// Waits (up to 30 s) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn status_check_and_the_metrics_say_when_the_recorder_is_down_and_it_comes_back() {
    let env = Env::new();
    // The history cannot be opened: its segments directory is a file.
    std::fs::create_dir_all(env.path("conductor/history")).unwrap();
    std::fs::write(env.path("conductor/history/segments"), b"not a directory").unwrap();
    let port = free_port();
    let log = env.dir.path().join("serve.log");
    let child = env
        .command(&[
            "serve",
            "--metrics",
            &format!("127.0.0.1:{port}"),
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut serve = Recorder(child);
    let status = |env: &Env| -> Value {
        serde_json::from_slice(&env.run(&["status", "--format", "json"], None).stdout).unwrap()
    };
    eventually("status says the recorder is down", || {
        status(&env)["recorder"]["up"] == false
    });
    let v = status(&env);
    assert_eq!(v["recorder_down"], true, "{v:#}");
    assert!(
        v["recorder"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("segments") && p.contains("not a directory")),
        "{v:#}"
    );
    let line = String::from_utf8_lossy(&env.run(&["status"], None).stdout).into_owned();
    assert!(line.contains("⚠recorder"), "{line}");
    let out = env.run(&["check", "--no-journal"], None);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("PANTHEON WARNING") && said.contains("history recorder down"),
        "{said}"
    );
    assert!(said.contains("recorder_up=0"), "{said}");
    eventually("the metrics say it is down", || {
        scrape(port).is_some_and(|m| m.lines().any(|l| l == "pantheon_recorder_up 0"))
    });
    assert!(
        log_text(&log).contains("the recorder is down"),
        "{}",
        log_text(&log)
    );
    // Repaired by hand: the recorder tries again by itself and records.
    std::fs::remove_file(env.path("conductor/history/segments")).unwrap();
    eventually("status says the recorder is up", || {
        status(&env)["recorder"]["up"] == true
    });
    let root = root_of(&env);
    env.write("conductor/notes.json", r#"{"recorded": true}"#);
    caught_up(&root);
    let line = String::from_utf8_lossy(&env.run(&["status"], None).stdout).into_owned();
    assert!(!line.contains("⚠recorder"), "{line}");
    eventually("the metrics say it is up", || {
        scrape(port).is_some_and(|m| m.lines().any(|l| l == "pantheon_recorder_up 1"))
    });
    serve.kill();
}
