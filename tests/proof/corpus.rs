//! The bad-input corpus (`tests/corpus/`), hostile arguments and planted symlinks, through the CLI,
//! the MCP server and the live model: a clear error or a skipped-and-reported item, never a panic,
//! never a file touched outside the root. Each test prints how many cases it ran.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use pantheon::Root;
use pantheon::testing::live::{LiveModel, ModelOptions};
use serde_json::{Value, json};

use crate::common::*;

/// The files of one corpus directory: (name, path, bytes), sorted.
fn cases(dir: &str) -> Vec<(String, PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(corpus_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&p).unwrap();
            (name, p, bytes)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 5, "corpus {dir} is missing");
    v
}

/// What an MCP argument carrying this file looks like: the parsed JSON, else the text.
fn as_argument(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(bytes)))
}

fn live_snapshot(env: &Env) -> std::sync::Arc<pantheon::testing::live::Snapshot> {
    LiveModel::open(Root::at(&env.root), ModelOptions::default()).snapshot()
}

/// All warnings of a snapshot (root, inboxes, tracks) as text.
fn all_warnings(s: &pantheon::testing::live::Snapshot) -> String {
    let mut out = String::new();
    for w in s.warnings.iter() {
        out += &format!("{}: {}\n", w.path.display(), w.message);
    }
    for i in s.inboxes.iter().chain(std::iter::once(&*s.quarantine)) {
        for w in &i.errors {
            out += &format!("{}: {}\n", w.path.display(), w.message);
        }
        for d in i.dispatches.iter() {
            if let Some(w) = &d.warning {
                out += &format!("{}: {w}\n", d.path().display());
            }
        }
    }
    for w in s.workflows.iter() {
        if let Some(m) = &w.warning {
            out += &format!("{}: {m}\n", w.path().display());
        }
    }
    for t in s.tracks.iter() {
        for w in &t.warnings {
            out += &format!("{}: {}\n", w.path.display(), w.message);
        }
        if let Some(n) = &t.queue_note {
            out += &format!("{} queue: {n}\n", t.name);
        }
    }
    for e in s.definition_errors.iter() {
        out += &format!("{}: {}\n", e.path.display(), e.message);
    }
    out
}

fn names_under(dir: &Path) -> Vec<String> {
    let mut v = vec![];
    walk(dir, &mut |p| v.push(p.to_string_lossy().into_owned()));
    v
}

#[test]
fn corpus_handoffs_and_acks_are_refused_by_cli_and_mcp_and_reported_in_inboxes() {
    let env = Env::new();
    let before = env.outside_snapshot();
    let state_before = names_under(&env.path("conductor/state"));
    let handoffs_before = names_under(&env.path("shared/handoffs"));
    let mut mcp = Mcp::start(&env);
    let mut n = 0;
    for (dir, cmd, tool, key) in [
        ("handoffs", "handoff", "submit_handoff", "handoff"),
        ("acks", "ack", "ack_handoff", "ack"),
    ] {
        for (name, path, bytes) in cases(dir) {
            let args: Vec<OsString> = if cmd == "handoff" {
                vec!["handoff".into(), "submit".into(), path.clone().into()]
            } else {
                vec!["ack".into(), path.clone().into()]
            };
            let out = env.run(&args, None);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{dir}/{name} must be refused by the CLI; stdout {}",
                String::from_utf8_lossy(&out.stdout)
            );
            // The same bytes on stdin.
            let mut stdin_args = args.clone();
            *stdin_args.last_mut().unwrap() = "-".into();
            let out = env.run(&stdin_args, Some(&bytes));
            assert_eq!(out.status.code(), Some(1), "{dir}/{name} via stdin");
            let (is_error, text) = mcp.call(tool, json!({ key: as_argument(&bytes) }));
            assert!(is_error, "{dir}/{name} must be refused by MCP, got {text}");
            n += 3;
        }
    }
    assert_eq!(
        state_before,
        names_under(&env.path("conductor/state")),
        "no state written"
    );
    assert_eq!(
        handoffs_before,
        names_under(&env.path("shared/handoffs")),
        "no handoff written"
    );

    // The same files dropped into inboxes by a foreign writer: listed as errors, never fatal.
    for (dir, god) in [("handoffs", "thoth"), ("acks", "iris")] {
        for (name, _, bytes) in cases(dir) {
            env.write(&format!("conductor/pending/{god}/{name}"), &bytes);
        }
        let inbox = env.ok(&["inbox", god]);
        let (is_error, _) = mcp.call("check_inbox", json!({"god_name": god}));
        assert!(!is_error, "check_inbox {god} with junk must still answer");
        let broken = inbox["errors"].as_array().map(Vec::len).unwrap_or(0)
            + inbox["dispatches"].as_array().map(Vec::len).unwrap_or(0);
        assert_eq!(
            broken,
            cases(dir).len(),
            "every file of {god}'s inbox is shown or reported: {inbox}"
        );
        n += 2;
    }
    env.ok(&["pending"]);
    let snap = live_snapshot(&env);
    let text = all_warnings(&snap);
    for (name, _, bytes) in cases("handoffs") {
        if serde_json::from_slice::<Value>(&bytes)
            .map(|v| !v.is_object())
            .unwrap_or(true)
        {
            assert!(
                text.contains(&name),
                "live model must report {name}: {text}"
            );
        }
        n += 1;
    }
    mcp.close();
    assert_eq!(
        before,
        env.outside_snapshot(),
        "nothing outside the root changed"
    );
    eprintln!("corpus handoffs/acks: {n} checks");
}

#[test]
fn corpus_workflow_and_rule_files_are_reported_and_skipped_everywhere() {
    let env = Env::new();
    let before = env.outside_snapshot();
    let samples = env.ok(&["workflows"])["count"].as_u64().unwrap();
    let mut all = vec![];
    for (dir, into) in [
        ("workflows", "conductor/workflows"),
        ("rules", "conductor/rules"),
    ] {
        for (name, _, bytes) in cases(dir) {
            env.write(&format!("{into}/zz-corpus-{name}"), &bytes);
            all.push((dir, format!("zz-corpus-{name}")));
        }
    }
    // Over 1 MiB: refused before parsing.
    let big = format!(
        "workflow:\n  id: big\n  description: \"{}\"\n  steps: []\n",
        "x".repeat(1_100_000)
    );
    env.write("conductor/workflows/zz-corpus-over-1mib.yaml", big);
    all.push(("workflows", "zz-corpus-over-1mib.yaml".into()));

    let started = std::time::Instant::now();
    let wfs = env.ok(&["workflows"]);
    let rules = env.ok(&["rules"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "YAML bombs must be refused quickly"
    );
    assert_eq!(
        wfs["count"].as_u64().unwrap(),
        samples,
        "the good definitions still load: {wfs}"
    );
    let mut mcp = Mcp::start(&env);
    let (e1, mcp_wfs) = mcp.call("list_workflows", json!({}));
    let (e2, mcp_rules) = mcp.call("list_rules", json!({}));
    assert!(!e1 && !e2);
    let snap = live_snapshot(&env);
    let live = all_warnings(&snap);
    let mut n = 0;
    for (dir, file) in &all {
        let (cli, via_mcp) = if *dir == "workflows" {
            (&wfs, &mcp_wfs)
        } else {
            (&rules, &mcp_rules)
        };
        assert!(
            cli["errors"].to_string().contains(file.as_str()),
            "pantheon {dir} must report {file}: {}",
            cli["errors"]
        );
        assert!(
            via_mcp.contains(file.as_str()),
            "MCP list_{dir} must report {file}"
        );
        if *dir == "workflows" {
            assert!(
                live.contains(file.as_str()),
                "the live model must report {file}: {live}"
            );
        }
        n += 3;
    }
    // Routing still works with all that junk around (rules are loaded on a direct handoff).
    let h = json!({"handoff_id": "hof_20260614_c0ffe1", "workflow_id": "wf_corpus_ok",
        "from_god": "marvin", "to_god": "iris", "step": "review",
        "context": {"summary": "s", "decisions": [], "artifacts": []}});
    let out = env.run(
        &["handoff", "submit", "-"],
        Some(&serde_json::to_vec(&h).unwrap()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    mcp.close();
    assert_eq!(before, env.outside_snapshot());
    eprintln!("corpus workflows/rules: {} files, {n} checks", all.len());
}

#[test]
fn corpus_queue_files_are_read_with_bad_lines_skipped_and_counted() {
    let env = Env::new();
    let before = env.outside_snapshot();
    let mut mcp = Mcp::start(&env);
    let mut n = 0;
    let mut big = Vec::new();
    big.extend_from_slice(b"{\"id\":\"msg-big\",\"type\":\"PROGRESS\",\"payload\":\"");
    big.extend(std::iter::repeat_n(b'x', 2_000_000));
    big.extend_from_slice(b"\n");
    let mut files = cases("queue");
    files.push(("huge_unterminated_line.jsonl".into(), PathBuf::new(), big));
    for (i, (name, _, bytes)) in files.iter().enumerate() {
        let track = format!("q{i}");
        env.ok(&["bus", "--track", &track, "init"]);
        let q = format!("conductor/tracks/{track}/.message-bus/queue.jsonl");
        env.write(&q, bytes);
        let read = env.ok(&["bus", "--track", &track, "read"]);
        assert!(
            read["skipped"].as_u64().unwrap() >= 1,
            "{name}: bad lines are counted: {read}"
        );
        let tail = env.ok(&["bus", "--track", &track, "read", "--tail", "2"]);
        let all_msgs = read["messages"].as_array().unwrap();
        let want: Vec<_> = all_msgs
            .iter()
            .rev()
            .take(2)
            .rev()
            .map(|m| &m["id"])
            .collect();
        let got: Vec<_> = tail["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["id"])
            .collect();
        assert_eq!(got, want, "{name}: the tail agrees with the whole read");
        env.ok(&["bus", "--track", &track, "status"]);
        env.ok(&["bus", "--track", &track, "deadlocks"]);
        let (is_error, _) = mcp.call("read_messages", json!({"track": track, "tail": 5}));
        assert!(!is_error, "{name}: read_messages");
        // The next append starts on a line of its own and is read back.
        env.ok(&[
            "bus",
            "--track",
            &track,
            "post",
            "PROGRESS",
            "--source",
            "proof",
            "--payload",
            "{\"after\":1}",
        ]);
        let again = env.ok(&["bus", "--track", &track, "read", "--tail", "1"]);
        assert_eq!(
            again["messages"][0]["payload"]["after"], 1,
            "{name}: {again}"
        );
        let after = env.ok(&["bus", "--track", &track, "read"]);
        assert_eq!(
            after["count"].as_u64().unwrap(),
            read["count"].as_u64().unwrap() + 1,
            "{name}: nothing lost, the old lines still read"
        );
        n += 7;
    }
    let snap = live_snapshot(&env);
    for (i, (name, _, _)) in files.iter().enumerate() {
        let t = snap.track(&format!("q{i}")).expect("track shown");
        assert!(
            t.lines_skipped >= 1 || t.queue_note.is_some() || t.head_bytes_skipped > 0,
            "{name}: the live model counts what it skipped"
        );
        n += 1;
    }
    mcp.close();
    assert_eq!(before, env.outside_snapshot());
    eprintln!("corpus queue: {} files, {n} checks", files.len());
}

/// Runs `args`; a mutation of a file the engine cannot parse must be refused and leave it as it was.
fn mutate_or_refuse(env: &Env, rel: &str, original: &[u8], args: &[&str]) {
    let out = env.run(args, None);
    let parses = serde_json::from_slice::<Value>(original).is_ok_and(|v| v.is_object());
    if !parses {
        assert_eq!(
            out.status.code(),
            Some(1),
            "{rel} ({:?}) does not parse; `{}` must refuse rather than overwrite it",
            String::from_utf8_lossy(&original[..original.len().min(60)]),
            args.join(" ")
        );
        assert_eq!(
            std::fs::read(env.path(rel)).unwrap(),
            original,
            "{rel} kept as it was"
        );
    }
}

#[test]
fn corpus_lock_status_state_and_board_files_never_crash_or_get_overwritten() {
    let env = Env::new();
    let before = env.outside_snapshot();
    let mut mcp = Mcp::start(&env);
    let mut n = 0;
    let mut unparsable = 0;
    for (kind, file) in [
        ("locks", "locks.json"),
        ("status", "worker-status.json"),
        ("board", "board/session-board-20260101000000.json"),
    ] {
        for (i, (_name, _, bytes)) in cases(kind).into_iter().enumerate() {
            let track = format!("{kind}{i}");
            env.ok(&["bus", "--track", &track, "init"]);
            let rel = format!("conductor/tracks/{track}/.message-bus/{file}");
            env.write(&rel, &bytes);
            let t = track.as_str();
            env.run(&["bus", "--track", t, "status"], None);
            env.run(&["bus", "--track", t, "deadlocks"], None);
            env.run(&["board", "--track", t, "status"], None);
            match kind {
                "locks" => {
                    mutate_or_refuse(
                        &env,
                        &rel,
                        &bytes,
                        &["bus", "--track", t, "lock", "src/x", "--worker", "w9"],
                    );
                    mutate_or_refuse(
                        &env,
                        &rel,
                        &bytes,
                        &[
                            "bus", "--track", t, "unlock", "src/x", "--worker", "w9", "--force",
                        ],
                    );
                    mcp.call(
                        "acquire_lock",
                        json!({"track": t, "filepath": "src/y", "worker_id": "w9"}),
                    );
                }
                "status" => {
                    mutate_or_refuse(
                        &env,
                        &rel,
                        &bytes,
                        &[
                            "bus",
                            "--track",
                            t,
                            "heartbeat",
                            "--worker",
                            "w1",
                            "--task",
                            "t",
                            "--status",
                            "RUNNING",
                        ],
                    );
                    mcp.call(
                        "update_worker_status",
                        json!({"track": t, "worker_id": "w2", "task_id": "t", "status": "RUNNING"}),
                    );
                }
                _ => {
                    mutate_or_refuse(
                        &env,
                        &rel,
                        &bytes,
                        &[
                            "board",
                            "--track",
                            t,
                            "assess",
                            "--director",
                            "CA",
                            "--verdict",
                            "APPROVE",
                            "--score",
                            "7",
                        ],
                    );
                    mcp.call("board_status", json!({"track": t}));
                    mcp.call("board_vote", json!({"track": t, "director": "CA", "final_verdict": "APPROVE", "confidence": 0.5}));
                }
            }
            unparsable += usize::from(serde_json::from_slice::<Value>(&bytes).is_err());
            n += 6;
        }
    }
    for (i, (name, _, bytes)) in cases("state").into_iter().enumerate() {
        let wf = format!("wf_corpus_{i}");
        let rel = format!("conductor/state/{wf}.json");
        env.write(&rel, &bytes);
        env.run(&["state", &wf], None);
        env.run(&["pending"], None);
        mutate_or_refuse(&env, &rel, &bytes, &["abort", &wf, "--reason", "corpus"]);
        env.run(&["cleanup", &wf, "--dry-run"], None);
        let a = json!({"ack_id": "ack_20260614_c01", "handoff_id": "hof_20260614_c0ffee", "workflow_id": wf, "status": "accepted"});
        env.run(&["ack", "-"], Some(&serde_json::to_vec(&a).unwrap()));
        mcp.call("get_workflow_state", json!({"workflow_id": wf}));
        mcp.call(
            "abort_workflow",
            json!({"workflow_id": wf, "reason": "corpus"}),
        );
        mcp.call("cleanup", json!({"workflow_id": wf, "dry_run": false}));
        assert_eq!(
            before,
            env.outside_snapshot(),
            "state/{name}: nothing outside the root changed"
        );
        unparsable += usize::from(serde_json::from_slice::<Value>(&bytes).is_err());
        n += 8;
    }
    let snap = live_snapshot(&env);
    let warnings = all_warnings(&snap);
    let reported = warnings.lines().count();
    assert!(
        reported >= unparsable,
        "the live model reports every unparsable file ({unparsable}), got {reported}: {warnings}"
    );
    mcp.close();
    assert_eq!(before, env.outside_snapshot());
    eprintln!(
        "corpus locks/status/board/state: {n} checks, {unparsable} unparsable files reported"
    );
}

#[test]
fn hostile_ids_and_paths_in_arguments_are_refused_by_cli_and_mcp() {
    let env = Env::new();
    env.ok(&["bus", "--track", "t", "init"]);
    let before = env.outside_snapshot();
    let long = "a".repeat(70_000);
    let non_utf8 = OsString::from_vec(b"th\xffoth".to_vec());
    let up = "../../outside".to_string();
    let abs = env.outside.to_string_lossy().into_owned();
    let s = |v: &[&str]| -> Vec<OsString> { v.iter().map(OsString::from).collect() };
    let mut refused: Vec<Vec<OsString>> = vec![];
    for bad in [
        up.as_str(),
        abs.as_str(),
        long.as_str(),
        "..",
        ".",
        "a/b",
        "",
    ] {
        refused.push(s(&["inbox", bad]));
        refused.push(s(&["state", bad]));
        refused.push(s(&["abort", bad, "--reason", "x"]));
        refused.push(s(&["cleanup", bad, "--dry-run"]));
        refused.push(s(&["approve", bad]));
        refused.push(s(&["bus", "--track", bad, "init"]));
        refused.push(s(&[
            "bus", "--track", bad, "post", "PROGRESS", "--source", "w",
        ]));
        refused.push(s(&["board", "--track", bad, "status"]));
        refused.push(s(&[
            "board",
            "--track",
            "t",
            "assess",
            "--director",
            bad,
            "--verdict",
            "APPROVE",
            "--score",
            "5",
        ]));
    }
    for bad in [long.as_str(), ""] {
        refused.push(s(&["bus", "--track", "t", "lock", bad, "--worker", "w"]));
        refused.push(s(&[
            "bus",
            "--track",
            "t",
            "heartbeat",
            "--worker",
            bad,
            "--task",
            "t",
            "--status",
            "RUNNING",
        ]));
        refused.push(s(&[
            "bus", "--track", "t", "post", "PROGRESS", "--source", bad,
        ]));
    }
    refused.push(s(&["bus", "--track", "t", "post", "../X", "--source", "w"]));
    refused.push(s(&["bus", "--track", "t", "read", "--since", "not a time"]));
    refused.push(s(&[
        "bus",
        "--track",
        "t",
        "post",
        "PROGRESS",
        "--source",
        "w",
        "--payload",
        "{not json",
    ]));
    refused.push(vec!["inbox".into(), non_utf8.clone()]);
    refused.push(vec![
        "bus".into(),
        "--track".into(),
        non_utf8.clone(),
        "init".into(),
    ]);
    let mut n = 0;
    for args in &refused {
        let out = env.run(args, None);
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?} must be refused; stdout {}",
            String::from_utf8_lossy(&out.stdout)
        );
        n += 1;
    }
    // Free-text values that only live inside JSON are fine, and stay inside it.
    for key in [abs.as_str(), "../../outside/keep.txt", "/etc/passwd"] {
        env.ok(&["bus", "--track", "t", "lock", key, "--worker", "w"]);
        env.ok(&["bus", "--track", "t", "unlock", key, "--worker", "w"]);
        env.ok(&[
            "bus",
            "--track",
            "t",
            "post",
            "TASK_COMPLETE",
            "--source",
            "w",
            "--payload",
            &json!({"task_id": key}).to_string(),
        ]);
        n += 3;
    }
    let events = names_under(&env.path("conductor/tracks/t/.message-bus/events"));
    assert!(
        events
            .iter()
            .all(|e| !e.contains("/../") && Path::new(e).starts_with(&env.root)),
        "{events:?}"
    );

    let mut mcp = Mcp::start(&env);
    let nul = "w\u{0}1";
    let h = |field: &str, v: &str| {
        let mut h = json!({"handoff_id": "hof_20260614_c0ffe2", "workflow_id": "wf_hostile",
            "from_god": "thoth", "to_god": "hephaestus", "step": "research",
            "context": {"summary": "s", "decisions": [], "artifacts": []}});
        h[field] = json!(v);
        h
    };
    let mut calls = vec![];
    for bad in [up.as_str(), abs.as_str(), long.as_str(), nul, "..", ""] {
        for f in ["handoff_id", "workflow_id", "from_god", "to_god", "step"] {
            calls.push(("submit_handoff", json!({"handoff": h(f, bad)})));
        }
        calls.push(("check_inbox", json!({"god_name": bad})));
        calls.push(("get_workflow_state", json!({"workflow_id": bad})));
        calls.push(("abort_workflow", json!({"workflow_id": bad, "reason": "x"})));
        calls.push(("cleanup", json!({"workflow_id": bad, "dry_run": false})));
        calls.push((
            "post_message",
            json!({"track": bad, "msg_type": "PROGRESS", "source": "w"}),
        ));
        calls.push(("read_messages", json!({"track": bad})));
        calls.push(("board_status", json!({"track": bad})));
        calls.push((
            "wait_for_event",
            json!({"track": bad, "event_pattern": "*", "timeout": 0}),
        ));
    }
    for bad in [long.as_str(), nul, ""] {
        calls.push((
            "acquire_lock",
            json!({"track": "t", "filepath": bad, "worker_id": "w"}),
        ));
        calls.push((
            "acquire_lock",
            json!({"track": "t", "filepath": "x", "worker_id": bad}),
        ));
        calls.push((
            "update_worker_status",
            json!({"track": "t", "worker_id": bad, "task_id": "t", "status": "RUNNING"}),
        ));
        calls.push((
            "post_message",
            json!({"track": "t", "msg_type": "PROGRESS", "source": bad}),
        ));
    }
    for (tool, args) in &calls {
        let (is_error, text) = mcp.call(tool, args.clone());
        assert!(
            is_error,
            "{tool} {:.200} must be refused, got {text:.200}",
            args.to_string()
        );
        n += 1;
    }
    // Globs that try to climb out only ever look inside the events directory.
    let (is_error, text) = mcp.call(
        "wait_for_event",
        json!({"track": "t", "event_pattern": "../../*", "timeout": 0}),
    );
    assert!(is_error || text.contains("false"), "{text}");
    mcp.close();
    assert_eq!(
        before,
        env.outside_snapshot(),
        "nothing outside the root changed"
    );
    eprintln!(
        "hostile arguments: {n} cases ({} CLI, {} MCP)",
        refused.len(),
        calls.len()
    );
}

#[test]
fn symlinks_planted_in_the_root_never_lead_writes_outside_it() {
    let env = Env::new();
    env.ok(&["bus", "--track", "t", "init"]);
    let out = &env.outside;
    let link = |target: &Path, at: &str| {
        let p = env.path(at);
        let _ = std::fs::remove_dir_all(&p);
        let _ = std::fs::remove_file(&p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    };
    // An inbox, a whole track, a queue file, a handoff directory, an artifact directory.
    link(&out.join("inbox"), "conductor/pending/hephaestus");
    link(out, "conductor/tracks/evil");
    link(
        &out.join("q.jsonl"),
        "conductor/tracks/t/.message-bus/queue.jsonl",
    );
    link(&out.join("inbox"), "conductor/tracks/t/.message-bus/events");
    link(out, "shared/handoffs/wf_symlinked");
    link(out, "art");
    let before = env.outside_snapshot();
    let mut n = 0;
    let direct = |hid: &str, wf: &str, to: &str| {
        serde_json::to_vec(
            &json!({"handoff_id": hid, "workflow_id": wf, "from_god": "mercer",
            "to_god": to, "step": "research",
            "context": {"summary": "s", "decisions": [], "artifacts": ["art/keep.txt"]}}),
        )
        .unwrap()
    };
    let runs: Vec<(Vec<&str>, Option<Vec<u8>>)> = vec![
        (
            vec!["handoff", "submit", "-"],
            Some(direct("hof_20260614_5e1001", "wf_sym_inbox", "hephaestus")),
        ),
        (
            vec!["handoff", "submit", "-"],
            Some(direct("hof_20260614_5e1002", "wf_symlinked", "marvin")),
        ),
        (vec!["abort", "wf_sym_inbox", "--reason", "symlinks"], None),
        (vec!["abort", "wf_symlinked", "--reason", "symlinks"], None),
        (vec!["inbox", "hephaestus"], None),
        (vec!["bus", "--track", "evil", "init"], None),
        (
            vec![
                "bus", "--track", "evil", "post", "PROGRESS", "--source", "w",
            ],
            None,
        ),
        (
            vec!["bus", "--track", "evil", "lock", "a", "--worker", "w"],
            None,
        ),
        (
            vec!["bus", "--track", "t", "post", "PROGRESS", "--source", "w"],
            None,
        ),
        (
            vec![
                "bus",
                "--track",
                "t",
                "post",
                "TASK_COMPLETE",
                "--source",
                "w",
                "--payload",
                "{\"task_id\":\"x\"}",
            ],
            None,
        ),
        (
            vec!["bus", "--track", "t", "lock", "a", "--worker", "w"],
            None,
        ),
        (
            vec!["bus", "--track", "t", "unlock", "a", "--worker", "w"],
            None,
        ),
        (
            vec![
                "bus",
                "--track",
                "t",
                "archive",
                "--track-id",
                "x1",
                "--force",
            ],
            None,
        ),
    ];
    let mut report = vec![];
    for (args, stdin) in &runs {
        let o = env.run(args, stdin.as_deref());
        report.push(format!(
            "{:?} -> {:?} {}",
            args,
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
        let now = env.outside_snapshot();
        assert_eq!(
            before,
            now,
            "`pantheon {}` touched a file outside the root\n{}",
            args.join(" "),
            report.join("\n")
        );
        n += 1;
    }
    let mut mcp = Mcp::start(&env);
    for (tool, args) in [
        (
            "post_message",
            json!({"track": "evil", "msg_type": "PROGRESS", "source": "w"}),
        ),
        (
            "acquire_lock",
            json!({"track": "evil", "filepath": "b", "worker_id": "w"}),
        ),
        (
            "update_worker_status",
            json!({"track": "evil", "worker_id": "w", "task_id": "t", "status": "RUNNING"}),
        ),
        ("check_inbox", json!({"god_name": "hephaestus"})),
    ] {
        mcp.call(tool, args);
        assert_eq!(
            before,
            env.outside_snapshot(),
            "MCP {tool} touched a file outside the root"
        );
        n += 1;
    }
    mcp.close();
    let _ = live_snapshot(&env);
    assert_eq!(before, env.outside_snapshot());
    eprintln!(
        "symlinks: {n} operations, nothing outside touched\n{}",
        report.join("\n")
    );
}
