//! Abort (markers, manifest, withdrawn dispatches) and cleanup (allowed roots only, symlinks never
//! followed, dry run).

use serde_json::json;

use crate::common::*;

#[test]
fn abort_marks_artifacts_writes_the_manifest_and_withdraws_dispatches() {
    let env = Env::with_test_flow();
    let outside = env.dir.path().join("outside/report.md");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    std::fs::write(&outside, "x").unwrap();
    env.write("out/plan.md", "plan");
    let mut h = plan_handoff("hof_20260614_ab0001", "wf_ab_1");
    h["context"]["artifacts"] = json!([
        "out/plan.md",
        outside.to_str().unwrap(),
        "out/never-written.md"
    ]);
    env.submit(&h);
    // A second, parallel dispatch of the same workflow held in quarantine.
    env.write(
        "conductor/rules/hold.yaml",
        "rules:\n  - id: hold-all\n    then: {handling_mode: approval_required}\n",
    );
    env.submit(&handoff(
        "hof_20260614_ab0002",
        "wf_ab_2",
        "thoth",
        "marvin",
        "x",
        &[],
    ));

    let r = env.ok(
        &["abort", "wf_ab_1", "--reason", "requirements changed"],
        None,
    );
    assert_eq!(r["status"], "aborted");
    let marked: Vec<String> = serde_json::from_value(r["artifacts_marked"].clone()).unwrap();
    assert_eq!(marked.len(), 1);
    assert!(marked[0].ends_with("out/plan.md"));
    assert!(env.exists("out/plan.md.aborted"));
    assert_eq!(
        std::fs::metadata(env.path("out/plan.md.aborted"))
            .unwrap()
            .len(),
        0
    );
    assert!(!outside.with_extension("md.aborted").exists());
    assert_eq!(r["dispatches_withdrawn"].as_array().unwrap().len(), 1);
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    let arch = env.read("conductor/archive/hephaestus/hof_20260614_ab0001.json");
    assert_eq!(arch["ack_status"], "withdrawn");

    let m = env.read("conductor/state/wf_ab_1.aborted.json");
    assert_eq!(m["workflow_id"], "wf_ab_1");
    assert_eq!(m["definition_id"], "test-flow");
    assert_eq!(m["status"], "aborted");
    assert_eq!(m["failed_step"], "build");
    assert_eq!(m["failure_reason"], "requirements changed");
    assert_eq!(
        m["completed_steps"],
        json!([{"step_id": "plan", "god": "thoth"}])
    );
    assert_eq!(m["aborted_by"], "operator");
    assert_eq!(m["requires_manual_review"], true);
    assert_eq!(m["artifacts_skipped"].as_array().unwrap().len(), 2);
    let s = env.state("wf_ab_1");
    assert_eq!(s["status"], "aborted");
    assert_eq!(s["aborted_by"], "operator");
    assert!(s["aborted_at"].as_str().unwrap().ends_with('Z'));

    // Aborting again returns the same manifest.
    let again = env.ok(&["abort", "wf_ab_1", "--reason", "other"], None);
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["artifacts_marked"], r["artifacts_marked"]);
    // The other workflow's held dispatch is withdrawn by its own abort.
    env.ok(&["abort", "wf_ab_2", "--reason", "stop"], None);
    assert!(env.names("conductor/pending/_quarantine").is_empty());
    assert_eq!(
        env.read("conductor/archive/marvin/hof_20260614_ab0002.json")["ack_status"],
        "withdrawn"
    );
}

/// A root with a completed workflow whose definition lists dangerous temp paths.
fn aborted_with_temp_paths(extra_root: Option<&std::path::Path>) -> (Env, std::path::PathBuf) {
    let env = Env::with_test_flow();
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(outside.join("keep")).unwrap();
    std::fs::write(outside.join("keep/file"), "precious").unwrap();
    std::fs::write(env.home.join("homefile"), "home").unwrap();
    let extra = extra_root
        .map(|p| {
            format!(
                "      - \"{}/scratch\"\n      - \"{}\"\n",
                p.display(),
                p.display()
            )
        })
        .unwrap_or_default();
    env.write(
        "conductor/workflows/cleanup-flow.yaml",
        &format!(
            "id: cleanup-flow\nsteps:\n  - id: work\n    god: marvin\n    temp_artifacts:\n      - \"~\"\n      - \"~/homefile\"\n      - \"{{root}}/../outside\"\n      - \"{{root}}/escape/keep/file\"\n      - \"{{root}}/tmp/{{workflow_id}}/\"\n      - \"{{root}}/tmp/link-{{workflow_id}}\"\n      - \"{{root}}/tmp/missing-{{workflow_id}}\"\n{extra}  - id: review\n    god: iris\n"
        ),
    );
    env.write("tmp/wf_cl_1/a/b.txt", "temp");
    std::os::unix::fs::symlink(&outside, env.path("escape")).unwrap();
    std::os::unix::fs::symlink(&outside, env.path("tmp/link-wf_cl_1")).unwrap();
    env.submit(&def_handoff(
        handoff(
            "hof_20260614_c10001",
            "wf_cl_1",
            "marvin",
            "marvin",
            "work",
            &[],
        ),
        "cleanup-flow",
        None,
    ));
    env.ok(&["abort", "wf_cl_1", "--reason", "test"], None);
    (env, outside)
}

#[test]
fn cleanup_dry_run_deletes_nothing_and_lists_what_it_would() {
    let (env, _) = aborted_with_temp_paths(None);
    let before = env.snapshot();
    let r = env.ok(&["cleanup", "wf_cl_1", "--dry-run"], None);
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["status"], "dry_run", "{r}");
    assert_eq!(r["would_delete"].as_array().unwrap().len(), 2, "{r}");
    assert!(r.get("deleted").is_none(), "a dry run deletes nothing: {r}");
    assert_eq!(before, env.snapshot());
}

#[test]
fn cleanup_deletes_only_inside_the_root_and_never_follows_symlinks() {
    let (env, outside) = aborted_with_temp_paths(None);
    let r = env.ok(&["cleanup", "wf_cl_1"], None);
    assert_eq!(r["status"], "cleaned");
    assert!(r.get("would_delete").is_none(), "{r}");
    let deleted: Vec<String> = serde_json::from_value(r["deleted"].clone()).unwrap();
    assert_eq!(deleted.len(), 2, "{r}");
    assert!(!env.path("tmp/wf_cl_1").exists());
    assert!(
        env.path("tmp/link-wf_cl_1").symlink_metadata().is_err(),
        "the link itself is removed"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("keep/file")).unwrap(),
        "precious"
    );
    assert!(env.home.join("homefile").exists());
    assert!(env.root.is_dir());
    assert_eq!(r["missing"].as_array().unwrap().len(), 1);
    let refused: Vec<String> = r["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(refused.len(), 4, "{r}");
    assert!(refused.iter().any(|p| p.ends_with("escape/keep/file")));
    assert!(refused.iter().any(|p| p.ends_with("homefile")));
    assert_eq!(env.state("wf_cl_1")["status"], "aborted");
    assert!(env.exists("conductor/state/wf_cl_1.aborted.json"));
}

#[test]
fn cleanup_roots_allow_their_inside_but_never_themselves() {
    let extra = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(extra.path().join("scratch")).unwrap();
    let (env, _) = aborted_with_temp_paths(Some(extra.path()));
    let out = env
        .command(&["cleanup", "wf_cl_1"])
        .env("PANTHEON_CLEANUP_ROOTS", extra.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!extra.path().join("scratch").exists());
    assert!(extra.path().is_dir());
    assert_eq!(r["deleted"].as_array().unwrap().len(), 3, "{r}");
}
