//! The journal anchored outside the root (`serve --journal-anchor`, `journal --verify --anchor/--head`):
//! the attacks of an adversarial pass, replayed against the real binary. Someone who can write the
//! root edits an actor, deletes an entry and inserts a forged `approve`, then recomputes the chain
//! (tests/conductor/python/forge_journal.py); truncates the tail; deletes the whole journal; hides
//! later edits behind a garbage line. The chain alone passes the first three; the anchor fails each,
//! naming the entry.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::races::Guard;

fn submit_as(env: &Env, actor: &str, n: u32) {
    let h = handoff(
        &format!("hof_20260614_{n:06x}"),
        &format!("wf_anchor_{n}"),
        "thoth",
        "hephaestus",
        "plan",
        &[],
    );
    env.ok(&["--actor", actor, "handoff", "submit"], Some(&h));
}

fn journal_lines(env: &Env) -> Vec<String> {
    std::fs::read_to_string(env.path("conductor/journal.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn put_lines(env: &Env, lines: &[String]) {
    std::fs::write(
        env.path("conductor/journal.jsonl"),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

/// A directory outside the root that only this user can write.
fn private_dir(env: &Env, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = env.dir.path().join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn serve_anchored(env: &Env, anchor: &Path, log: &str) -> Guard {
    let mut c = env.command(&[
        "serve",
        "--log",
        env.dir.path().join(log).to_str().unwrap(),
        "--journal-anchor",
        anchor.to_str().unwrap(),
    ]);
    // Anchor every head in this test (the default interval, 2 s, would anchor some of them).
    c.env("PANTHEON_JOURNAL_ANCHOR_EVERY_MS", "100");
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    Guard::spawn(c)
}

fn sigterm(mut g: Guard) {
    let child = g.0.take().unwrap();
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "serve exits 0 on SIGTERM: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_anchored(anchor: &Path) -> u64 {
    std::fs::read_to_string(anchor)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["seq"].as_u64())
        .next_back()
        .unwrap_or(0)
}

/// `pantheon journal --verify ARGS`: exit code, report, stderr.
fn verify(env: &Env, args: &[&str]) -> (i32, Value, String) {
    let mut a = vec!["journal", "--verify"];
    a.extend_from_slice(args);
    let out = env.run(&a, None);
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn forge(env: &Env, mode: &str) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conductor/python/forge_journal.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env.path("conductor/journal.jsonl"))
        .arg(mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_fails(env: &Env, args: &[&str], expect: &[&str]) -> Value {
    let (code, report, err) = verify(env, args);
    assert_eq!(code, 1, "{args:?} must fail: {report:#} {err}");
    assert_eq!(report["valid"], false);
    for w in expect {
        assert!(err.contains(w), "{args:?}: {err:?} names {w:?}");
    }
    report
}

fn assert_passes(env: &Env, args: &[&str]) -> Value {
    let (code, report, err) = verify(env, args);
    assert_eq!(code, 0, "{args:?} must pass: {report:#} {err}");
    report
}

#[test]
fn a_journal_rewritten_truncated_or_deleted_by_a_root_writer_fails_against_its_anchor_and_kept_head()
 {
    let env = Env::new();
    let anchor = private_dir(&env, "anchors").join("head.jsonl");
    let a = anchor.to_str().unwrap();
    let g = serve_anchored(&env, &anchor, "serve.log");
    for n in 1..=6 {
        submit_as(&env, "alice", n);
        wait_for("the head anchored", || {
            last_anchored(&anchor) == u64::from(n)
        });
    }
    sigterm(g);
    let ok = assert_passes(&env, &["--anchor", a]);
    assert_eq!(ok["anchor"]["anchors"], 6, "{ok:#}");
    assert_eq!(ok["anchor"]["matched"], 6, "{ok:#}");
    assert_eq!(ok["anchor"]["unanchored"], 0, "{ok:#}");
    let head = ok["head_ref"].as_str().unwrap().to_owned();
    assert!(head.starts_with("6:"), "{head}");
    let orig = journal_lines(&env);

    // 1. Entry 2's actor edited, entry 4 deleted, a forged approve inserted, the chain recomputed.
    forge(&env, "rewrite");
    let forged = journal_lines(&env);
    assert!(
        forged
            .iter()
            .any(|l| l.contains("\"approve\"") && l.contains("mallory"))
    );
    // The chain alone (and validate) cannot see it: that is the attack.
    assert_passes(&env, &[]);
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !report["problems"].to_string().contains("journal"),
        "{report:#}"
    );
    let r = assert_fails(
        &env,
        &["--anchor", a],
        &["journal entry 2 ", "anchored", "rewritten"],
    );
    assert_eq!(r["problem_line"], 2, "{r:#}");
    assert!(r["problem"].as_str().unwrap().contains("entry 2 "), "{r:#}");
    assert_fails(&env, &["--head", &head], &["journal entry 6 ", "--head"]);

    // 2. The tail truncated (no recomputing needed).
    put_lines(&env, &orig[..4]);
    assert_passes(&env, &[]);
    assert_fails(
        &env,
        &["--anchor", a],
        &[
            "journal entry 6 is missing though it was anchored",
            "truncated after entry 4",
        ],
    );
    assert_fails(
        &env,
        &["--head", &head],
        &["journal entry 6 is missing", "truncated"],
    );

    // 3. The whole journal deleted.
    std::fs::remove_file(env.path("conductor/journal.jsonl")).unwrap();
    let empty = assert_passes(&env, &[]);
    assert_eq!(empty["entries"], 0);
    assert_fails(
        &env,
        &["--anchor", a],
        &["journal entry 6 is missing", "deleted"],
    );
    assert_fails(&env, &["--head", &head], &["deleted"]);

    // A supervisor started on it says so at once (and anchors nothing: there is no head).
    let g = serve_anchored(&env, &anchor, "restart.log");
    let log = env.dir.path().join("restart.log");
    wait_for("the warning", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("does not extend its anchor")
    });
    sigterm(g);
    assert_eq!(last_anchored(&anchor), 6);

    // Put back, the journal passes both again.
    put_lines(&env, &orig);
    assert_passes(&env, &["--anchor", a, "--head", &head]);

    // 4. A missing or empty anchor file says so and fails.
    let none = anchor.with_file_name("none.jsonl");
    assert_fails(
        &env,
        &["--anchor", none.to_str().unwrap()],
        &["does not exist"],
    );
    std::fs::write(&none, "").unwrap();
    assert_fails(&env, &["--anchor", none.to_str().unwrap()], &["is empty"]);
    // A value --head cannot take is bad usage.
    let out = env.run(&["journal", "--verify", "--head", "6:xyz"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SEQ:HASH"));

    // 5. Entries after the last anchor (written while no supervisor anchored) are reported as such.
    submit_as(&env, "alice", 7);
    let (code, r, err) = verify(&env, &["--anchor", a]);
    assert_eq!(code, 0, "{r:#} {err}");
    assert_eq!(r["anchor"]["unanchored"], 1, "{r:#}");
    assert!(err.contains("come after the newest anchor"), "{err}");
}

#[test]
fn verify_lists_every_problem_so_a_garbage_line_hides_no_later_edit() {
    let env = Env::new();
    for n in 1..=5 {
        submit_as(&env, "alice", n);
    }
    let mut l = journal_lines(&env);
    l.insert(1, "not json at all".into());
    l[4] = l[4].replace("\"alice\"", "\"mallory\"");
    put_lines(&env, &l);
    let r = assert_fails(
        &env,
        &[],
        &[
            "line 2 is not a journal entry",
            "journal entry 4 (journal.jsonl line 5) was edited",
        ],
    );
    assert_eq!(r["problems_total"], 2, "{r:#}");
    assert_eq!(r["problems"][1]["line"], 5, "{r:#}");
    // validate lists both too.
    let out = env.run(&["validate"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines: Vec<_> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["path"] == "conductor/journal.jsonl")
        .map(|p| p["line"].clone())
        .collect();
    assert_eq!(lines, vec![Value::from(2), Value::from(5)], "{report:#}");
}

/// Runs `serve ARGS` and expects it to refuse at once (exit 1); returns stderr.
fn serve_refused(env: &Env, anchor: &Path) -> String {
    let mut c = env.command(&["serve", "--journal-anchor", anchor.to_str().unwrap()]);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut g = Guard::spawn(c);
    wait_for("serve to refuse", || {
        g.0.as_mut().unwrap().try_wait().unwrap().is_some()
    });
    let out = g.output();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn serve_refuses_an_anchor_inside_the_root_and_warns_when_others_can_write_it() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let inside = env.path("conductor/anchor.jsonl");
    let err = serve_refused(&env, &inside);
    assert!(err.contains("inside the root"), "{err}");
    assert!(!inside.exists());
    // A link outside the root that leads into it is resolved and refused too.
    let dir = private_dir(&env, "anchors");
    let link = dir.join("link.jsonl");
    std::os::unix::fs::symlink(env.path("conductor"), dir.join("into-root")).unwrap();
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let err = serve_refused(&env, &link);
    assert!(err.contains("inside the root"), "{err}");
    let err = serve_refused(&env, &dir.join("into-root/anchor.jsonl"));
    assert!(err.contains("inside the root"), "{err}");
    assert!(!inside.exists());

    // Writable by others: served, with a warning in the log.
    let open = dir.join("open.jsonl");
    std::fs::write(&open, "").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    let g = serve_anchored(&env, &open, "open.log");
    let log = env.dir.path().join("open.log");
    wait_for("the warning", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("group or others can write the journal anchor")
    });
    submit_as(&env, "alice", 1);
    wait_for("the head anchored", || last_anchored(&open) == 1);
    sigterm(g);
    assert_passes(&env, &["--anchor", open.to_str().unwrap()]);
}
