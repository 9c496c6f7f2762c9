//! The operator journal: who did what through which surface, hash-chained, with
//! `pantheon journal --verify` naming the first edited, removed or reordered entry.

use serde_json::Value;

use crate::common::*;

fn submit_as(env: &Env, actor: &str, n: u32) {
    let h = handoff(
        &format!("hof_20260614_{n:06x}"),
        &format!("wf_journal_{n}"),
        "thoth",
        "hephaestus",
        "plan",
        &[],
    );
    env.ok(&["--actor", actor, "handoff", "submit"], Some(&h));
}

fn journal_lines(env: &Env) -> Vec<String> {
    std::fs::read_to_string(env.root.join("conductor/journal.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn put_lines(env: &Env, lines: &[String]) {
    std::fs::write(
        env.root.join("conductor/journal.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
}

/// `journal --verify` must fail (exit 1) with a message containing every word of `expect`.
fn verify_fails(env: &Env, expect: &[&str]) {
    let out = env.run(&["journal", "--verify"], None);
    assert_eq!(out.status.code(), Some(1), "verify must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    for w in expect {
        assert!(err.contains(w), "{err:?} names {w:?}");
    }
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
}

#[test]
fn cli_acts_are_journaled_with_their_actor_and_filtered_by_actor() {
    let env = Env::new();
    submit_as(&env, "alice", 1);
    env.ok(
        &[
            "--actor",
            "bob",
            "abort",
            "wf_journal_1",
            "--reason",
            "wrong plan",
        ],
        None,
    );
    // A read changes nothing and is not journaled.
    env.ok(&["state", "wf_journal_1"], None);

    let all = env.ok(&["journal"], None);
    assert_eq!(all["count"], 2, "{all}");
    let e = &all["entries"];
    assert_eq!(e[0]["actor"], "alice");
    assert_eq!(e[0]["source"], "cli");
    assert_eq!(e[0]["action"], "submit");
    assert_eq!(e[0]["targets"]["workflow_id"], "wf_journal_1");
    assert_eq!(e[0]["targets"]["handoff_id"], "hof_20260614_000001");
    assert_eq!(e[1]["actor"], "bob");
    assert_eq!(e[1]["action"], "abort");
    assert_eq!(e[1]["reason"], "wrong plan");
    assert_eq!(e[1]["outcome"], "aborted");
    assert_eq!(e[1]["seq"], 2);
    assert_eq!(
        e[1]["prev"], e[0]["hash"],
        "each entry chains to the one before"
    );

    let bob = env.ok(&["journal", "--actor", "bob"], None);
    assert_eq!(bob["count"], 1);
    assert_eq!(bob["entries"][0]["action"], "abort");
    let later = env.ok(&["journal", "--since", "2999-01-01T00:00:00Z"], None);
    assert_eq!(later["count"], 0);

    // Without --actor, the user name is recorded.
    let out = env
        .command(&["handoff", "submit", "-"])
        .env("USER", "carol")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut ch| {
            use std::io::Write;
            let h = handoff(
                "hof_20260614_000009",
                "wf_journal_9",
                "thoth",
                "marvin",
                "x",
                &[],
            );
            ch.stdin
                .take()
                .unwrap()
                .write_all(&serde_json::to_vec(&h).unwrap())?;
            ch.wait_with_output()
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let carol = env.ok(&["journal", "--actor", "carol"], None);
    assert_eq!(carol["count"], 1, "{carol}");

    let v = env.ok(&["journal", "--verify"], None);
    assert_eq!(v["valid"], true);
    assert_eq!(v["entries"], 3);
}

/// A CLI act run where neither `USER` nor `LOGNAME` is set (a service, a container, cron) is
/// journaled as the login name of the process's uid, the same name the console records, never
/// `unknown`.
#[test]
fn without_user_or_logname_the_cli_journals_the_uid_login_name() {
    let env = Env::new();
    let h = handoff(
        "hof_20260614_00a001",
        "wf_journal_uid",
        "thoth",
        "hephaestus",
        "plan",
        &[],
    );
    let mut c = assert_cmd::Command::from_std(env.command(&["handoff", "submit"]));
    c.env_remove("USER").env_remove("LOGNAME");
    c.write_stdin(serde_json::to_vec(&h).unwrap());
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let login = String::from_utf8_lossy(&id.stdout).trim().to_owned();
    assert!(!login.is_empty());
    let all = env.ok(&["journal"], None);
    assert_eq!(all["entries"][0]["actor"], login.as_str(), "{all}");
    assert_eq!(all["entries"][0]["source"], "cli");
}

#[test]
fn verify_names_an_edited_a_removed_and_a_swapped_entry() {
    let env = Env::new();
    for n in 1..=5 {
        submit_as(&env, "alice", n);
    }
    let v = env.ok(&["journal", "--verify"], None);
    assert_eq!(v["entries"], 5);
    let orig = journal_lines(&env);

    let mut edited = orig.clone();
    edited[2] = edited[2].replace("\"alice\"", "\"mallory\"");
    assert_ne!(edited[2], orig[2]);
    put_lines(&env, &edited);
    verify_fails(&env, &["entry 3", "edited", "line 3"]);
    let out = env.run(&["validate"], None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "validate reports the broken chain"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "conductor/journal.jsonl")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(p["line"], 3);
    assert!(p["message"].as_str().unwrap().contains("edited"));

    let mut removed = orig.clone();
    removed.remove(1);
    put_lines(&env, &removed);
    verify_fails(&env, &["entry 2 was removed"]);

    let mut swapped = orig.clone();
    swapped.swap(3, 4);
    put_lines(&env, &swapped);
    verify_fails(&env, &["reordered", "entry 5", "entry 4"]);

    put_lines(&env, &orig);
    env.ok(&["journal", "--verify"], None);
}

#[test]
fn the_journal_rotates_into_segments_and_the_chain_runs_across_them() {
    let env = Env::new();
    for n in 1..=12 {
        let h = handoff(
            &format!("hof_20260614_{n:06x}"),
            &format!("wf_rot_{n}"),
            "thoth",
            "hephaestus",
            "plan",
            &[],
        );
        let out = env
            .command(&["--actor", "alice", "handoff", "submit"])
            .env("PANTHEON_JOURNAL_SEGMENT_BYTES", "1024")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut ch| {
                use std::io::Write;
                ch.stdin
                    .take()
                    .unwrap()
                    .write_all(&serde_json::to_vec(&h).unwrap())?;
                ch.wait_with_output()
            })
            .unwrap();
        assert!(out.status.success());
    }
    let segs: Vec<_> = std::fs::read_dir(env.root.join("conductor/journal"))
        .unwrap()
        .flatten()
        .collect();
    assert!(segs.len() >= 2, "rotated into {} segments", segs.len());
    for s in &segs {
        assert!(
            s.metadata().unwrap().len() < 2048,
            "a segment stays near the limit"
        );
    }
    let v = env.ok(&["journal", "--verify"], None);
    assert_eq!(v["entries"], 12, "{v}");
    assert_eq!(env.ok(&["journal"], None)["count"], 12);

    // Removing a whole segment breaks the chain at the next one.
    let mut names: Vec<_> = segs.iter().map(|s| s.path()).collect();
    names.sort();
    std::fs::remove_file(&names[1]).unwrap();
    verify_fails(&env, &["removed"]);
}

/// The journal is appended to like every other protocol file: never through a link planted at it (a
/// symbolic link or a hard link to a file outside the root), so no act writes outside the root. (Before
/// it went through `store::safe`, a hard link was followed.)
#[test]
fn a_journal_planted_as_a_link_is_never_written_through() {
    use crate::decoy::Decoy;
    for kind in ["symlink", "hardlink"] {
        let env = Env::new();
        let decoy = Decoy::new();
        std::fs::write(decoy.path("victim.txt"), "keep me\n").unwrap();
        let before = decoy.tree();
        let journal = env.root.join("conductor/journal.jsonl");
        let _ = std::fs::remove_file(&journal);
        match kind {
            "symlink" => std::os::unix::fs::symlink(decoy.path("victim.txt"), &journal).unwrap(),
            _ => std::fs::hard_link(decoy.path("victim.txt"), &journal).unwrap(),
        }
        let h = handoff(
            "hof_20260614_0a0001",
            "wf_journal_link",
            "thoth",
            "hephaestus",
            "plan",
            &[],
        );
        // The act is done (a journal that cannot be written never undoes it) and says why it was not
        // journaled; nothing outside the root changed.
        let r = env.ok(&["handoff", "submit"], Some(&h));
        let warnings = r["warnings"].to_string();
        assert!(
            warnings.contains("could not be journaled") && warnings.contains("link"),
            "{kind}: {r}"
        );
        decoy.assert_unchanged(&before, "victim.txt");
    }
}
