//! "An act returned success => what it wrote survives a crash of the machine" (docs/PROTOCOL.md,
//! "What covers a write"), checked from a syscall trace of the real `pantheon mcp` driven by the
//! official Python client: every write, rename, removal and creation under the root that came before
//! an answer was covered by a sync that finished before the answer was written; then the power cut:
//! the root laid out as a crash at each answer leaves it (only what a completed sync covered), on
//! which every acknowledged act is there exactly once, also after the engine's repair (`tick`).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{TestRoot, ack_id, call, handoff_id, pantheon_bin, python};

const CYCLES: u32 = 12;

fn audit_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python/trace_audit.py")
}

fn strace_available() -> bool {
    Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The tool call of answer `answer` of the cycles: a submit (even) or an ack (odd) of cycle
/// `answer / 2`, as (tool, its argument's name, the document).
fn cycle_act(answer: u32) -> (&'static str, &'static str, Value) {
    let k = answer / 2;
    let h = handoff_id(0xd00 + k);
    if answer.is_multiple_of(2) {
        let handoff = json!({"handoff_id": h, "workflow_id": format!("wf_durable_{k}"),
                             "from_god": "thoth", "to_god": "marvin", "step": "triage",
                             "context": {"summary": "triaged", "decisions": ["d"], "artifacts": []}});
        ("submit_handoff", "handoff", handoff)
    } else {
        let ack = json!({"ack_id": ack_id(0xd00 + k), "handoff_id": h, "status": "completed",
                         "message": "done"});
        ("ack_handoff", "ack", ack)
    }
}

/// A wrapper that runs `pantheon` under strace, writing the trace to `log`.
fn traced_wrapper(work: &Path, log: &Path) -> std::path::PathBuf {
    let wrapper = work.join(format!(
        "pantheon-traced-{}",
        log.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec strace -f -y -qq -xx -s 1048576 -o '{}' -e trace=openat,write,pwrite64,\
             ftruncate,renameat,renameat2,unlinkat,mkdirat,fsync,fdatasync,syncfs '{}' \"$@\"\n",
            log.display(),
            pantheon_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// `steps` through the official Python client against `pantheon mcp` under strace; returns the
/// trace's path and the session's results.
fn traced_session(
    root: &TestRoot,
    work: &Path,
    name: &str,
    steps: &[Value],
) -> (std::path::PathBuf, Vec<Value>) {
    let log = work.join(format!("{name}.log"));
    let wrapper = traced_wrapper(work, &log);
    let mut cmd = Command::new(python());
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python/session.py"))
        .arg(&wrapper)
        .arg(root.path())
        .arg("auto");
    let report = root.spawn_session(cmd, steps).finish();
    (log, report.results)
}

/// `CYCLES` submit + ack cycles through the official Python client against `pantheon mcp` under
/// strace; returns the trace's path and the session's results.
fn traced_cycles(root: &TestRoot, work: &Path) -> (std::path::PathBuf, Vec<Value>) {
    let steps: Vec<Value> = (0..2 * CYCLES)
        .map(|a| {
            let (tool, arg, doc) = cycle_act(a);
            call(tool, json!({ arg: doc }))
        })
        .collect();
    traced_session(root, work, "cycles", &steps)
}

/// `pantheon --root ROOT ARGS` with `stdin`; its output.
fn cli(root: &Path, args: &[&str], stdin: Option<&Value>) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(pantheon_bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("PANTHEON_ROOT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(doc) = stdin {
        input.write_all(doc.to_string().as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn audit(log: &Path, root: &Path, cuts: Option<(&Path, &Path)>) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(audit_script()).arg(log).arg(root);
    if let Some((dir, initial)) = cuts {
        cmd.arg(dir).arg(initial);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "trace_audit.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The journal entries of `root`: (action, handoff_id) of each.
fn journal_acts(root: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root.join("conductor/journal.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_owned(),
                e["targets"]["handoff_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// Every act of the first `acked` answers is in `root` exactly once: its journal entry, the
/// workflow's state, the submitted handoff, and, for an ack, the dispatch archived.
fn assert_acked_there_once(root: &Path, acked: usize, what: &str) {
    let acts = journal_acts(root);
    for answer in 0..acked {
        let k = answer as u32 / 2;
        let h = handoff_id(0xd00 + k);
        let action = if answer % 2 == 0 { "submit" } else { "ack" };
        let n = acts
            .iter()
            .filter(|(a, id)| a == action && *id == h)
            .count();
        assert_eq!(
            n, 1,
            "{what}: {action} of {h} journaled {n} times: {acts:?}"
        );
        let state = root.join(format!("conductor/state/wf_durable_{k}.json"));
        let state: Value = serde_json::from_slice(&std::fs::read(&state).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{what}: the state of wf_durable_{k} is not whole: {e}"));
        let steps = state.to_string();
        assert!(steps.contains(&h), "{what}: {state:#}");
        if action == "ack" {
            assert!(
                steps.contains("completed"),
                "{what}: the ack of {h} is not in the state: {state:#}"
            );
        }
    }
}

/// The directory of the journal's intents: records an act writes, without a sync of their own,
/// before anything else and removes when it is journaled, only for the repair of a killed process
/// (docs/PROTOCOL.md). A crash of the machine may leave one empty or torn, as it always could: the
/// engine drops such an intent (it names no act) and the act's repeat writes it again.
const INTENTS: &str = "conductor/journal-intents";

/// The audit's `renamed_before_data` findings but the journal's intents ([`INTENTS`]).
fn renamed_before_data(report: &Value) -> Vec<Value> {
    let intents = format!("/{INTENTS}/");
    report["renamed_before_data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            !r["rename"][1]
                .as_str()
                .unwrap_or_default()
                .contains(&intents)
        })
        .cloned()
        .collect()
}

/// Every JSON file of `root` (its temporary directory and the journal's intents aside: see
/// [`INTENTS`]) is whole: not empty, no NUL byte, and parses; every line of a JSONL file too.
fn assert_whole(root: &Path, what: &str) {
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != ".tmp" && !path.ends_with(INTENTS) {
                    stack.push(path);
                }
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            if name.ends_with(".jsonl") {
                let text = String::from_utf8_lossy(&bytes);
                for line in text.lines() {
                    assert!(
                        serde_json::from_str::<Value>(line).is_ok(),
                        "{what}: {} holds a torn line {line:?}",
                        path.display()
                    );
                }
            } else if name.ends_with(".json") {
                assert!(
                    !bytes.is_empty() && !bytes.contains(&0),
                    "{what}: {} is empty or torn ({} bytes)",
                    path.display(),
                    bytes.len()
                );
                serde_json::from_slice::<Value>(&bytes)
                    .unwrap_or_else(|e| panic!("{what}: {} does not parse: {e}", path.display()));
                seen += 1;
            }
        }
    }
    assert!(seen > 0, "{what}: no JSON file in {}", root.display());
}

/// `pantheon tick` on `root` succeeds.
fn tick(root: &Path, what: &str) {
    let out = cli(root, &["tick"], None);
    assert!(
        out.status.success(),
        "tick on {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The crash of the machine in the middle of each act (the audit's `mid_cuts`): its names
/// committed, its unsynced data lost. No file is empty or torn, every act answered before is there
/// exactly once, also after `tick`, and the client's repeat of the act in flight (through the CLI,
/// as a god without an answer does) succeeds and leaves it there once too.
fn check_mid_act_crashes(report: &Value, first_tool_answer: usize) {
    let mut checked = 0;
    for mid in report["mid_cuts"].as_array().unwrap() {
        let k = mid["reply"].as_u64().unwrap() as usize;
        let Some(answer) = k.checked_sub(first_tool_answer) else {
            continue;
        };
        let cut = Path::new(mid["dir"].as_str().unwrap());
        let what = format!(
            "a crash in act {answer} at the {} of its round {} ({})",
            mid["at"],
            mid["round"],
            cut.display()
        );
        assert_whole(cut, &what);
        assert_acked_there_once(cut, answer, &what);
        tick(cut, &what);
        assert_whole(cut, &format!("{what}, after tick"));
        assert_acked_there_once(cut, answer, &format!("{what}, after tick"));
        let (tool, _, doc) = cycle_act(answer as u32);
        let args: &[&str] = if tool == "submit_handoff" {
            &["handoff", "submit", "-"]
        } else {
            &["ack"]
        };
        let out = cli(cut, args, Some(&doc));
        assert!(
            out.status.success(),
            "{what}: repeating it failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_whole(cut, &format!("{what}, repeated"));
        assert_acked_there_once(cut, answer + 1, &format!("{what}, repeated"));
        checked += 1;
    }
    // Not vacuous: every act of the cycles ran two rounds of its own (its data round, then its
    // names round), and was cut as each began and just before each finished.
    assert_eq!(checked, 4 * 2 * CYCLES as usize, "{report:#}");
}

#[test]
fn every_answered_act_was_synced_before_its_answer_and_survives_a_power_cut() {
    if !strace_available() {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let root = TestRoot::new();
    let work = tempfile::tempdir().unwrap();
    let initial = work.path().join("initial");
    crate::fixture_root::copy_dir(root.path(), &initial);
    let (log, results) = traced_cycles(&root, work.path());
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["is_error"], json!(false), "step {i}: {r:#}");
    }
    let report = audit(&log, root.path(), None);
    let replies = report["replies"].as_u64().unwrap();
    assert!(
        replies >= u64::from(2 * CYCLES),
        "the trace shows {replies} answers: {report:#}"
    );
    assert_eq!(report["uncovered"], json!([]), "{report:#}");
    // Not vacuous: each submit and ack answered after covering what it wrote.
    let covered: Vec<u64> = report["covered_per_reply"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(
        covered.iter().filter(|n| **n >= 3).count() >= 2 * CYCLES as usize,
        "{covered:?}"
    );
    // Every file renamed into place had its data covered by a completed sync before the rename.
    assert_eq!(
        renamed_before_data(&report),
        Vec::<Value>::new(),
        "{report:#}"
    );
    // The syncs the god's own process made: two shared rounds (`syncfs`) per act, its data round
    // and its names round, so at most four a cycle, and nothing else.
    let syncs = &report["syncs"];
    let count = |k: &str| syncs[k].as_u64().unwrap();
    assert!(
        count("syncfs") <= 4 * u64::from(CYCLES) && count("fsync") == 0,
        "{syncs} for {CYCLES} cycles"
    );
    assert_eq!(count("fdatasync"), 0, "{syncs} for {CYCLES} cycles");

    // The power cut at each answer: only what a completed sync covered.
    let cuts_dir = work.path().join("cuts");
    let report = audit(&log, root.path(), Some((&cuts_dir, &initial)));
    let cuts = report["cuts"].as_array().unwrap();
    // The answers of the tool calls, after the session's own (initialize, tools/list).
    let first_tool_answer = cuts.len() - 2 * CYCLES as usize;
    for (k, cut) in cuts.iter().enumerate().skip(first_tool_answer) {
        let cut = Path::new(cut.as_str().unwrap());
        let acked = k - first_tool_answer;
        assert_acked_there_once(cut, acked, &format!("cut before answer {k}"));
        // The engine's repair after the crash (what `serve` and `tick` run) neither loses nor
        // repeats an acknowledged act.
        tick(cut, &format!("the cut root {k}"));
        assert_acked_there_once(cut, acked, &format!("cut before answer {k}, after tick"));
    }
    // The last cut holds every act: the last answer's own sync finished before it.
    let last = Path::new(cuts.last().unwrap().as_str().unwrap());
    assert_acked_there_once(last, 2 * CYCLES as usize - 1, "the last cut");
    check_mid_act_crashes(&report, first_tool_answer);
}

/// A definition whose second step waits for the operator's approval.
const HELD_FLOW: &str = "workflow:\n  id: held-flow\n  steps:\n    - id: plan\n      god: thoth\n    \
    - id: build\n      god: hephaestus\n      approval_required: true\n";

/// The trace of `log` shows `acts` acts, each answered (its first write to standard output, the
/// `acts` last such answers when `first` is false) after a shared round covered everything it
/// wrote (at least one write each), and no sync but the rounds and the data syncs of the files
/// renamed into place.
fn assert_synced_by_rounds(log: &Path, root: &Path, acts: usize, first: bool, what: &str) {
    let report = audit(log, root, None);
    assert_eq!(report["uncovered"], json!([]), "{what}: {report:#}");
    let covered: Vec<u64> = report["covered_per_reply"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let answers = if first {
        covered.get(..acts)
    } else {
        covered.len().checked_sub(acts).map(|from| &covered[from..])
    };
    assert!(
        answers.is_some_and(|a| a.iter().all(|n| *n >= 1)),
        "{what}: {covered:?}"
    );
    let syncs = &report["syncs"];
    assert_eq!(syncs["fsync"], json!(0), "{what}: {syncs}");
    assert!(
        (1..=2 * acts as u64).contains(&syncs["syncfs"].as_u64().unwrap()),
        "{what}: two rounds per act at most: {syncs}"
    );
    assert_eq!(
        renamed_before_data(&report),
        Vec::<Value>::new(),
        "{what}: {report:#}"
    );
}

#[test]
fn approve_abort_bus_and_board_acts_are_synced_by_the_rounds_before_they_answer() {
    if !strace_available() {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let root = TestRoot::new();
    root.init_track("durable");
    root.write("conductor/workflows/held-flow.yaml", HELD_FLOW);
    let work = tempfile::tempdir().unwrap();
    let track = "durable";
    let held = handoff_id(0xe01);
    let steps = vec![
        call(
            "submit_handoff",
            json!({"handoff": {"handoff_id": handoff_id(0xe00), "workflow_id": "wf_durable_abort",
                               "from_god": "thoth", "to_god": "marvin", "step": "triage",
                               "context": {"summary": "s", "decisions": [], "artifacts": []}}}),
        ),
        call(
            "abort_workflow",
            json!({"workflow_id": "wf_durable_abort", "reason": "not needed"}),
        ),
        call(
            "post_message",
            json!({"track": track, "msg_type": "TASK_COMPLETE", "source": "worker-1",
                   "payload": {"task_id": "1.1", "commit_sha": "abc", "files_modified": [],
                               "unblocks": []}}),
        ),
        call(
            "acquire_lock",
            json!({"track": track, "filepath": "src/a.rs", "worker_id": "worker-1"}),
        ),
        call(
            "update_worker_status",
            json!({"track": track, "worker_id": "worker-1", "task_id": "1.1", "status": "RUNNING"}),
        ),
        call(
            "release_lock",
            json!({"track": track, "filepath": "src/a.rs", "worker_id": "worker-1"}),
        ),
        call(
            "board_open",
            json!({"track": track, "checkpoint": "EVALUATE_PLAN", "proposal": "Ship it"}),
        ),
        call(
            "board_assess",
            json!({"track": track, "director": "CA", "verdict": "APPROVE", "score": 8}),
        ),
        call(
            "submit_handoff",
            json!({"handoff": {"handoff_id": held, "workflow_id": "wf_durable_held",
                               "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
                               "context": {"summary": "s", "decisions": [], "artifacts": []},
                               "routing": {"workflow_definition": "held-flow"}}}),
        ),
    ];
    let (log, results) = traced_session(&root, work.path(), "acts", &steps);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["is_error"], json!(false), "step {i}: {r:#}");
    }
    let last = results.last().unwrap().to_string();
    assert!(last.contains("awaiting_approval"), "{last}");
    assert_synced_by_rounds(&log, root.path(), steps.len(), false, "the MCP acts");

    // The operator's approval, through the CLI under strace.
    let log = work.path().join("approve.log");
    let wrapper = traced_wrapper(work.path(), &log);
    let out = Command::new(&wrapper)
        .arg("--root")
        .arg(root.path())
        .args(["approve", &held])
        .env_remove("PANTHEON_ROOT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "approve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("approved"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_synced_by_rounds(&log, root.path(), 1, true, "approve");
}

#[test]
fn the_audit_finds_a_rename_no_sync_covered() {
    // The audit can fail: a trace whose rename was never synced before the answer.
    let work = tempfile::tempdir().unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("\\x{b:02x}")).collect::<String>();
    let root = work.path().join("r");
    std::fs::create_dir_all(root.join("d")).unwrap();
    let d = root.join("d").display().to_string();
    let log = work.path().join("trace.log");
    std::fs::write(
        &log,
        format!(
            "7 renameat2(3<{d}>, \"{a}\", 3<{d}>, \"{b}\", 0) = 0\n\
             7 write(1<{pipe}>, \"{reply}\", 2) = 2\n\
             7 renameat2(3<{d}>, \"{b}\", 3<{d}>, \"{a}\", 0) = 0\n\
             7 fsync(3<{d}>) = 0\n\
             7 write(1<{pipe}>, \"{reply}\", 2) = 2\n",
            d = hex(&d),
            a = hex("a"),
            b = hex("b"),
            pipe = hex("pipe:[1]"),
            reply = hex("{}")
        ),
    )
    .unwrap();
    let report = audit(&log, &root, None);
    assert_eq!(report["replies"], json!(2), "{report:#}");
    let uncovered = report["uncovered"].as_array().unwrap();
    assert_eq!(uncovered.len(), 1, "{report:#}");
    assert_eq!(uncovered[0]["reply"], json!(0));
    assert_eq!(report["covered_per_reply"], json!([0, 1]));
}

#[test]
fn the_audit_finds_a_file_renamed_into_place_before_its_data_round() {
    // A temporary file written, renamed into place, and only then synced (a data round after the
    // rename): the audit names the rename, and the crash just before that round finished leaves
    // the name on an empty file, which the power-cut proof's check refuses.
    let work = tempfile::tempdir().unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("\\x{b:02x}")).collect::<String>();
    let root = work.path().join("r");
    std::fs::create_dir_all(root.join(".tmp")).unwrap();
    std::fs::create_dir_all(root.join("d")).unwrap();
    let initial = work.path().join("initial");
    crate::fixture_root::copy_dir(&root, &initial);
    let t = root.join(".tmp").display().to_string();
    let d = root.join("d").display().to_string();
    let part = format!("{t}/.tmp-0123456789ab.part");
    let log = work.path().join("trace.log");
    let lines = |data_round_first: bool| {
        let open = format!(
            "7 openat(3<{t}>, \"{p}\", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0666) = 4<{f}>\n\
             7 write(4<{f}>, \"{body}\", 2) = 2\n",
            t = hex(&t),
            p = hex(".tmp-0123456789ab.part"),
            f = hex(&part),
            body = hex("{}")
        );
        let rename = format!(
            "7 renameat(3<{t}>, \"{p}\", 5<{d}>, \"{n}\") = 0\n",
            t = hex(&t),
            p = hex(".tmp-0123456789ab.part"),
            d = hex(&d),
            n = hex("x.json")
        );
        let round = format!("7 syncfs(5<{d}>) = 0\n", d = hex(&d));
        let reply = format!(
            "7 write(1<{pipe}>, \"{r}\", 2) = 2\n",
            pipe = hex("pipe:[1]"),
            r = hex("{}")
        );
        if data_round_first {
            format!("{open}{round}{rename}{round}{reply}")
        } else {
            format!("{open}{rename}{round}{reply}")
        }
    };
    // The order of the rounds: no finding, and every cut leaves the file whole or absent.
    std::fs::write(&log, lines(true)).unwrap();
    let cuts = work.path().join("cuts-ordered");
    let report = audit(&log, &root, Some((&cuts, &initial)));
    assert_eq!(report["uncovered"], json!([]), "{report:#}");
    assert_eq!(report["renamed_before_data"], json!([]), "{report:#}");
    let mids = report["mid_cuts"].as_array().unwrap();
    assert_eq!(mids.len(), 4, "{report:#}");
    for m in mids {
        let x = Path::new(m["dir"].as_str().unwrap()).join("d/x.json");
        if let Ok(bytes) = std::fs::read(&x) {
            assert_eq!(bytes, b"{}", "{m}");
        }
    }
    // The rename before its data round: named, and a cut leaves the name on an empty file.
    std::fs::write(&log, lines(false)).unwrap();
    let cuts = work.path().join("cuts-planted");
    let report = audit(&log, &root, Some((&cuts, &initial)));
    assert_eq!(report["uncovered"], json!([]), "{report:#}");
    let found = report["renamed_before_data"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{report:#}");
    assert!(found[0].to_string().contains("x.json"), "{report:#}");
    let empty = report["mid_cuts"].as_array().unwrap().iter().any(|m| {
        std::fs::read(Path::new(m["dir"].as_str().unwrap()).join("d/x.json"))
            .is_ok_and(|b| b.is_empty())
    });
    assert!(
        empty,
        "no cut left the planted rename on an empty file: {report:#}"
    );
}
