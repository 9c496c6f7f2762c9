//! Refusals write nothing: each is checked by snapshotting the whole root before and after.

use serde_json::{Value, json};

use crate::common::*;

/// Runs a command that must be refused and asserts the root is byte-for-byte unchanged.
fn refused_unchanged(env: &Env, args: &[&str], stdin: Option<&Value>) -> String {
    let before = env.snapshot();
    let err = env.refused(args, stdin);
    assert_eq!(before, env.snapshot(), "pantheon {args:?} wrote something");
    err
}

fn good() -> Value {
    plan_handoff("hof_20260614_0a0001", "wf_ref_1")
}

#[test]
fn each_missing_required_field_is_refused_with_its_pointer() {
    let env = Env::with_test_flow();
    for field in [
        "handoff_id",
        "workflow_id",
        "from_god",
        "to_god",
        "step",
        "context",
    ] {
        let mut h = good();
        h.as_object_mut().unwrap().remove(field);
        let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
        assert!(err.contains(&format!("/{field}")), "{field}: {err}");
    }
    for field in ["summary", "decisions", "artifacts"] {
        let mut h = good();
        h["context"].as_object_mut().unwrap().remove(field);
        let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
        assert!(err.contains(&format!("/context/{field}")), "{field}: {err}");
    }
}

#[test]
fn every_violation_is_listed_and_unknown_top_level_keys_are_refused() {
    let env = Env::with_test_flow();
    let mut h = good();
    h["surprise"] = json!(1);
    h["context"]["decisions"] = json!("not a list");
    h["handoff_id"] = json!("hof_bad");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("surprise"), "{err}");
    assert!(err.contains("/context/decisions"), "{err}");
    assert!(err.contains("/handoff_id"), "{err}");
}

#[test]
fn bad_ids_and_path_tricks_in_any_name_are_refused() {
    let env = Env::with_test_flow();
    let cases: &[(&str, Value)] = &[
        ("/handoff_id", json!("hof_20260614_../../x")),
        ("/workflow_id", json!("wf_../../etc")),
        ("/workflow_id", json!("WF_upper")),
        ("/from_god", json!("../thoth")),
        ("/to_god", json!("a/b")),
        ("/step", json!("../../etc/passwd")),
        ("/step", json!("/abs")),
        ("/routing/workflow_definition", json!("../defs")),
        ("/routing/workflow_step", json!("/etc")),
    ];
    for (pointer, value) in cases {
        let mut h = good();
        if pointer.starts_with("/routing") {
            let key = pointer.rsplit('/').next().unwrap();
            h["routing"][key] = value.clone();
        } else {
            h[&pointer[1..]] = value.clone();
        }
        let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
        assert!(err.contains(pointer), "{pointer} {value}: {err}");
    }
    for args in [
        vec!["inbox", "../thoth"],
        vec!["inbox", "a/b"],
        vec!["state", "wf_../x"],
        vec!["state", "/etc/passwd"],
        vec!["abort", "wf_../x", "--reason", "r"],
        vec!["cleanup", "../wf_x"],
        vec!["approve", "hof_20260614_../x"],
    ] {
        let err = refused_unchanged(&env, &args, None);
        assert!(err.contains("must match"), "{args:?}: {err}");
    }
    let bad_ack =
        json!({"ack_id": "ack_1", "handoff_id": "hof_20260614_0a0001", "status": "accepted"});
    let err = refused_unchanged(&env, &["ack"], Some(&bad_ack));
    assert!(err.contains("/ack_id"), "{err}");
}

#[test]
fn unknown_definition_step_and_missing_gate_are_refused() {
    let env = Env::with_test_flow();
    let mut h = good();
    h["step"] = json!("nope");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(
        err.contains("nope") && err.contains("phase_detect"),
        "{err}"
    );
    let mut h = good();
    h["routing"]["workflow_step"] = json!("deploy");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(
        err.contains("deploy") && err.contains("plan, build, check"),
        "{err}"
    );
    let mut h = good();
    h["routing"]["workflow_definition"] = json!("no-such-flow");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("no-such-flow"), "{err}");
    let mut h = good();
    h["context"]["gates_passed"] = json!([]);
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("state_gate"), "{err}");
}

#[test]
fn same_handoff_id_with_other_content_is_refused() {
    let env = Env::with_test_flow();
    env.submit(&good());
    let mut h = good();
    h["context"]["summary"] = json!("something else");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("different content"), "{err}");
}

#[test]
fn ack_for_an_unknown_handoff_and_on_an_aborted_workflow_are_refused() {
    let env = Env::with_test_flow();
    let err = refused_unchanged(
        &env,
        &["ack"],
        Some(&ack(
            "ack_20260614_b01",
            "hof_20260614_ffffff",
            "accepted",
            "",
        )),
    );
    assert!(err.contains("unknown handoff"), "{err}");
    env.submit(&good());
    env.ok(&["abort", "wf_ref_1", "--reason", "cancelled"], None);
    let err = refused_unchanged(
        &env,
        &["ack"],
        Some(
            &json!({"ack_id": "ack_20260614_b02", "handoff_id": "hof_20260614_0a0001",
                     "workflow_id": "wf_ref_1", "status": "accepted"}),
        ),
    );
    assert!(err.contains("aborted"), "{err}");
    let err = refused_unchanged(
        &env,
        &["handoff", "submit", "-"],
        Some(&def_handoff(
            handoff(
                "hof_20260614_0a0002",
                "wf_ref_1",
                "hephaestus",
                "iris",
                "build",
                &[],
            ),
            "test-flow",
            None,
        )),
    );
    assert!(err.contains("aborted"), "{err}");
}

#[test]
fn cleanup_of_a_running_workflow_and_abort_of_a_completed_one_are_refused() {
    let env = Env::with_test_flow();
    env.submit(&good());
    let err = refused_unchanged(&env, &["cleanup", "wf_ref_1"], None);
    assert!(err.contains("abort it first"), "{err}");
    env.submit(&def_handoff(
        handoff(
            "hof_20260614_0a0003",
            "wf_ref_2",
            "iris",
            "thoth",
            "check",
            &["logic_gate"],
        ),
        "test-flow",
        None,
    ));
    let err = refused_unchanged(&env, &["abort", "wf_ref_2", "--reason", "late"], None);
    assert!(err.contains("completed"), "{err}");
    let err = refused_unchanged(&env, &["state", "wf_nothing"], None);
    assert!(err.contains("unknown workflow"), "{err}");
}

#[test]
fn bad_usage_exits_2_and_bad_json_exits_1() {
    let env = Env::with_test_flow();
    assert_eq!(env.run(&["abort", "wf_x"], None).status.code(), Some(2));
    let out = env
        .command(&["handoff", "submit", "-"])
        .stdin(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
}

/// Replaces the directory `rel` under the root by a symbolic link to a fresh directory outside it.
fn plant_link(env: &Env, rel: &str) -> tempfile::TempDir {
    let outside = tempfile::tempdir().unwrap();
    let p = env.path(rel);
    if p.exists() {
        std::fs::remove_dir_all(&p).unwrap();
    }
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path(), &p).unwrap();
    outside
}

fn is_empty_dir(p: &std::path::Path) -> bool {
    std::fs::read_dir(p).unwrap().next().is_none()
}

#[test]
fn a_planted_inbox_link_refuses_the_submit_before_anything_is_recorded() {
    let env = Env::with_test_flow();
    // plan's next step, build, goes to hephaestus.
    let outside = plant_link(&env, "conductor/pending/hephaestus");
    let err = refused_unchanged(&env, &["handoff", "submit", "-"], Some(&good()));
    assert!(err.contains("leads outside the root"), "{err}");
    assert!(!env.exists("conductor/state/wf_ref_1.json"));
    assert!(is_empty_dir(outside.path()));
    // Once the link is gone the same submit goes through whole.
    std::fs::remove_file(env.path("conductor/pending/hephaestus")).unwrap();
    let r = env.submit(&good());
    assert_eq!(r["target_god"], "hephaestus", "{r}");
    assert!(env.exists("conductor/pending/hephaestus/hof_20260614_0a0001.json"));
}

#[test]
fn a_planted_archive_link_refuses_a_completed_ack_before_anything_is_recorded() {
    let env = Env::with_test_flow();
    env.submit(&good());
    let outside = plant_link(&env, "conductor/archive/hephaestus");
    let a = ack(
        "ack_20260614_aaa1",
        "hof_20260614_0a0001",
        "completed",
        "built",
    );
    let err = refused_unchanged(&env, &["ack", "-"], Some(&a));
    assert!(err.contains("leads outside the root"), "{err}");
    assert!(is_empty_dir(outside.path()));
    assert_eq!(env.state("wf_ref_1")["current_step"], "build");
}

#[test]
fn a_planted_archive_link_refuses_an_accept_and_an_abort_whole() {
    let env = Env::with_test_flow();
    env.submit(&good());
    let outside = plant_link(&env, "conductor/archive/hephaestus");
    let a = ack(
        "ack_20260614_aaa2",
        "hof_20260614_0a0001",
        "accepted",
        "on it",
    );
    let err = refused_unchanged(&env, &["ack", "-"], Some(&a));
    assert!(err.contains("leads outside the root"), "{err}");
    // The abort would withdraw the dispatch into that archive: refused before any marker or manifest.
    let err = refused_unchanged(&env, &["abort", "wf_ref_1", "--reason", "scope cut"], None);
    assert!(err.contains("leads outside the root"), "{err}");
    assert!(is_empty_dir(outside.path()));
    assert_eq!(env.state("wf_ref_1")["status"], "waiting_for_ack");
}

/// A missing root used to give an empty answer and exit 0.
#[test]
fn every_command_but_those_creating_a_root_refuses_a_missing_root_with_the_init_hint() {
    let env = Env::bare();
    let hint = format!("pantheon --root {} init", env.root.display());
    let commands: &[&[&str]] = &[
        &["inbox", "thoth"],
        &["pending"],
        &["workflows"],
        &["rules"],
        &["state", "wf_missing_root"],
        &["validate"],
        &["abort", "wf_missing_root", "--reason", "r"],
        &["cleanup", "wf_missing_root", "--dry-run"],
        &["approve", "hof_20260614_abcdef"],
        &["handoff", "submit", "-"],
        &["ack", "-"],
        &["bus", "--track", "t", "read"],
        &["bus", "--track", "t", "status"],
        &["board", "--track", "t", "status"],
        &["console", "--read-only"],
        &["mcp"],
    ];
    for args in commands {
        let err = env.refused(args, Some(&json!({})));
        assert!(err.contains(&hint), "pantheon {args:?}: {err}");
        assert!(!env.root.exists(), "pantheon {args:?} created the root");
    }
    // A file where the root should be is no root either.
    std::fs::write(&env.root, "not a directory").unwrap();
    for args in [&["pending"][..], &["workflows"], &["inbox", "thoth"]] {
        let err = env.refused(args, None);
        assert!(err.contains("is not a directory"), "{err}");
        assert!(err.contains(&hint), "{err}");
    }
}

#[test]
fn an_existing_empty_directory_is_no_root_and_init_creates_a_missing_one() {
    let env = Env::bare();
    std::fs::create_dir_all(&env.root).unwrap();
    // Newcomer pass: an empty directory (or any other program's) is not taken for a root; `init` makes it one.
    let hint = format!("pantheon --root {} init", env.root.display());
    for args in [&["pending"][..], &["workflows"]] {
        let err = env.refused(args, None);
        assert!(err.contains("is not a pantheon root"), "{err}");
        assert!(err.contains(&hint), "{err}");
    }
    assert_eq!(std::fs::read_dir(&env.root).unwrap().count(), 0);
    std::fs::remove_dir(&env.root).unwrap();
    env.ok(&["bus", "--track", "t", "init"], None);
    assert!(env.root.join("conductor/tracks/t/.message-bus").is_dir());
    let other = Env::bare();
    other.ok(&["init"], None);
    assert!(other.root.join("conductor/pending/thoth").is_dir());
}

#[test]
fn the_inbox_of_a_god_with_no_inbox_says_the_god_is_unknown() {
    let env = Env::new();
    // No inbox and no definition naming it: refused, nothing written.
    let err = env.refused(&["inbox", "nobody"], None);
    assert!(err.contains("nobody has no inbox"), "{err}");
    assert!(!env.exists("conductor/pending/nobody"));
    // A god a definition names whose inbox is not made yet: an empty answer and a warning.
    std::fs::remove_dir(env.path("conductor/pending/thoth")).unwrap();
    let out = env.run(&["inbox", "thoth"], None);
    assert!(out.status.success());
    let unknown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(unknown["known_god"], json!(false), "{unknown}");
    assert_eq!(unknown["count"], json!(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a definition names it"));
    std::fs::create_dir(env.path("conductor/pending/thoth")).unwrap();
    let known = env.ok(&["inbox", "thoth"], None);
    assert_eq!(known["known_god"], json!(true), "{known}");
}
