//! Hostile files on the Conductor side: planted links never lead a write outside the root
//! (a decoy tree outside is compared whole), `init` over a dangling link, file modes under the umask.

use std::os::unix::fs::{PermissionsExt, symlink};

use crate::common::*;
use crate::decoy::Decoy;

fn direct(hid: &str, wf: &str) -> serde_json::Value {
    handoff(hid, wf, "thoth", "hephaestus", "scratch", &[])
}

#[test]
fn a_planted_workflow_lock_link_creates_nothing_outside() {
    for target in ["planted.lock", "victim.txt"] {
        let env = Env::new();
        let decoy = Decoy::new();
        let before = decoy.tree();
        symlink(
            decoy.path(target),
            env.path("conductor/state/.wf_lk_1.lock"),
        )
        .unwrap();
        let err = env.refused(
            &["handoff", "submit", "-"],
            Some(&direct("hof_20260614_aa0001", "wf_lk_1")),
        );
        assert!(err.contains("symbolic link"), "{err}");
        decoy.assert_unchanged(&before, target);
        assert!(!env.exists("conductor/state/wf_lk_1.json"));
    }
}

#[test]
fn a_state_dir_linked_outside_gets_no_lock_file_created_there() {
    let env = Env::new();
    let decoy = Decoy::new();
    let before = decoy.tree();
    std::fs::remove_dir_all(env.path("conductor/state")).unwrap();
    symlink(decoy.path("sub"), env.path("conductor/state")).unwrap();
    let err = env.refused(
        &["handoff", "submit", "-"],
        Some(&direct("hof_20260614_aa0002", "wf_lk_2")),
    );
    assert!(err.contains("symbolic link"), "{err}");
    decoy.assert_unchanged(&before, "state dir link");
    // abort and ack take the same lock.
    env.refused(&["abort", "wf_lk_2", "--reason", "x"], None);
    decoy.assert_unchanged(&before, "state dir link, abort");
}

#[test]
fn init_over_a_dangling_link_refuses_as_outside_the_root() {
    let env = Env::bare();
    let decoy = Decoy::new();
    let before = decoy.tree();
    std::fs::create_dir_all(&env.root).unwrap();
    symlink(decoy.path("nowhere/conductor"), env.path("conductor")).unwrap();
    let err = env.refused(&["init"], None);
    assert!(!err.contains("File exists"), "{err}");
    assert!(
        err.contains("symbolic link") && err.contains("conductor"),
        "{err}"
    );
    decoy.assert_unchanged(&before, "dangling link");
}

#[test]
fn a_root_that_is_a_link_and_a_base_dir_elsewhere_are_resolved_once_and_used() {
    let env = Env::bare();
    let real = env.dir.path().join("real-root");
    std::fs::create_dir_all(&real).unwrap();
    symlink(&real, &env.root).unwrap();
    env.ok(&["init"], None);
    env.submit(&direct("hof_20260614_aa0003", "wf_lk_3"));
    assert!(real.join("conductor/state/wf_lk_3.json").is_file());
    // A CONDUCTOR_BASE_DIR given as a link elsewhere is followed once and written under.
    let base = env.dir.path().join("base-real");
    std::fs::create_dir_all(&base).unwrap();
    let base_link = env.dir.path().join("base-link");
    symlink(&base, &base_link).unwrap();
    let mut c = assert_cmd::Command::from_std(env.command(&["handoff", "submit", "-"]));
    c.env("CONDUCTOR_BASE_DIR", &base_link)
        .write_stdin(serde_json::to_vec(&direct("hof_20260614_aa0004", "wf_lk_4")).unwrap());
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(base.join("state/wf_lk_4.json").is_file());
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Runs the binary under `umask`.
fn with_umask(env: &Env, umask: &str, args: &[&str], stdin: Option<&serde_json::Value>) {
    let inner = env.command(args);
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(inner.get_program())
        .args(inner.get_args());
    c.env_clear();
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut c = assert_cmd::Command::from_std(c);
    if let Some(v) = stdin {
        c.write_stdin(serde_json::to_vec(v).unwrap());
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn written_files_get_the_umask_mode_and_replaced_files_keep_theirs() {
    let env = Env::bare();
    with_umask(&env, "022", &["init"], None);
    assert_eq!(mode(&env.path("shared/handoffs/schema.json")), 0o644);
    with_umask(
        &env,
        "022",
        &["handoff", "submit", "-"],
        Some(&direct("hof_20260614_aa0005", "wf_md_1")),
    );
    assert_eq!(mode(&env.path("conductor/state/wf_md_1.json")), 0o644);
    assert_eq!(
        mode(&env.path("conductor/pending/hephaestus/hof_20260614_aa0005.json")),
        0o644
    );
    with_umask(
        &env,
        "027",
        &["handoff", "submit", "-"],
        Some(&direct("hof_20260614_aa0006", "wf_md_2")),
    );
    assert_eq!(mode(&env.path("conductor/state/wf_md_2.json")), 0o640);
    // A replaced file keeps the mode its owner gave it.
    let state = env.path("conductor/state/wf_md_1.json");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o604)).unwrap();
    let a = ack(
        "ack_20260614_bb1",
        "hof_20260614_aa0005",
        "accepted",
        "on it",
    );
    with_umask(&env, "077", &["ack"], Some(&a));
    assert_eq!(env.state("wf_md_1")["acks"].as_array().unwrap().len(), 1);
    assert_eq!(mode(&state), 0o604);
}

/// A definition whose step `work` (god marvin) declares `temp_artifacts`.
fn flow_with_temp(env: &Env, entries: &[&str]) {
    let list: String = entries
        .iter()
        .map(|e| format!("      - \"{e}\"\n"))
        .collect();
    env.write(
        "conductor/workflows/tmp-flow.yaml",
        &format!(
            "id: tmp-flow\nsteps:\n  - id: work\n    god: marvin\n    temp_artifacts:\n{list}  - id: review\n    god: iris\n"
        ),
    );
}

fn tmp_flow_handoff(hid: &str, wf: &str) -> serde_json::Value {
    def_handoff(
        handoff(hid, wf, "marvin", "marvin", "work", &[]),
        "tmp-flow",
        None,
    )
}

#[test]
fn a_definition_whose_temp_artifacts_name_the_protocol_is_refused_at_load() {
    for bad in [
        "{root}/conductor",
        "{root}/shared",
        "{root}/..",
        "/",
        "{root}",
        "conductor/state/x",
        "{root}/shared/handoffs/{workflow_id}",
    ] {
        let env = Env::new();
        flow_with_temp(&env, &["{root}/tmp/{workflow_id}/", bad]);
        let before = env.snapshot();
        let err = env.refused(
            &["handoff", "submit", "-"],
            Some(&tmp_flow_handoff("hof_20260614_cc0001", "wf_tmp_1")),
        );
        assert!(
            err.contains("temp_artifacts") && err.contains("refused"),
            "{bad}: {err}"
        );
        assert_eq!(before, env.snapshot(), "{bad}");
    }
}

#[test]
fn cleanup_never_deletes_a_protocol_directory_configured_elsewhere() {
    let env = Env::new();
    let decoy = Decoy::new();
    // The Conductor's directory lives in a cleanup root outside the root; a definition names it by
    // its absolute path (which no load-time check can know is the protocol's).
    let base = decoy.path("sub/conductor");
    let run = |args: &[&str], stdin: Option<&serde_json::Value>| {
        let mut c = assert_cmd::Command::from_std(env.command(args));
        c.env("CONDUCTOR_BASE_DIR", &base)
            .env("PANTHEON_CLEANUP_ROOTS", decoy.path("sub"));
        if let Some(v) = stdin {
            c.write_stdin(serde_json::to_vec(v).unwrap());
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    run(&["init"], None);
    let base_s = base.display().to_string();
    let state_s = format!("{base_s}/state");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(
        base.join("workflows/tmp-flow.yaml"),
        format!(
            "id: tmp-flow\nsteps:\n  - id: work\n    god: marvin\n    temp_artifacts:\n      - \"{base_s}\"\n      - \"{state_s}\"\n      - \"{}\"\n  - id: review\n    god: iris\n",
            decoy.path("sub").display()
        ),
    )
    .unwrap();
    run(
        &["handoff", "submit", "-"],
        Some(&tmp_flow_handoff("hof_20260614_cc0002", "wf_tmp_2")),
    );
    run(&["abort", "wf_tmp_2", "--reason", "x"], None);
    let r = run(&["cleanup", "wf_tmp_2"], None);
    assert_eq!(r["deleted"].as_array().unwrap().len(), 0, "{r}");
    assert_eq!(r["refused"].as_array().unwrap().len(), 3, "{r}");
    assert!(base.join("state/wf_tmp_2.json").is_file());
    assert!(decoy.path("victim.txt").is_file());
}

#[test]
fn a_replayed_handoff_for_an_earlier_step_is_refused_naming_the_current_step() {
    let env = Env::with_test_flow();
    let plan = plan_handoff("hof_20260614_dd0001", "wf_rp_1");
    assert_eq!(env.submit(&plan)["status"], "dispatched");
    // A new handoff of the step already handed off would re-dispatch build a second time.
    let again = plan_handoff("hof_20260614_dd0002", "wf_rp_1");
    let before = env.snapshot();
    let err = env.refused(&["handoff", "submit", "-"], Some(&again));
    assert!(err.contains("\"build\"") && err.contains("fork"), "{err}");
    assert_eq!(before, env.snapshot());
    // The exact resubmit of a recorded handoff still answers duplicate.
    assert_eq!(env.submit(&plan)["status"], "duplicate");
    // The current step's own handoff moves the workflow on; then build's replay is refused too.
    let build = def_handoff(
        handoff(
            "hof_20260614_dd0003",
            "wf_rp_1",
            "hephaestus",
            "iris",
            "build",
            &[],
        ),
        "test-flow",
        None,
    );
    assert_eq!(env.submit(&build)["target_step"], "check");
    let late = plan_handoff("hof_20260614_dd0004", "wf_rp_1");
    let err = env.refused(&["handoff", "submit", "-"], Some(&late));
    assert!(err.contains("\"check\""), "{err}");
    let st = env.state("wf_rp_1");
    assert_eq!(st["current_step"], "check", "{st}");
    // Once the current step is rejected for good, a handoff that dispatches it again is a retry.
    env.ack(&ack(
        "ack_20260614_dd7",
        "hof_20260614_dd0003",
        "rejected",
        "not now",
    ));
    assert_eq!(env.state("wf_rp_1")["status"], "failed");
    let retry = def_handoff(
        handoff(
            "hof_20260614_dd0007",
            "wf_rp_1",
            "hephaestus",
            "iris",
            "build",
            &[],
        ),
        "test-flow",
        None,
    );
    assert_eq!(env.submit(&retry)["target_step"], "check");
    // Directly routed workflows keep today's behaviour.
    env.submit(&handoff(
        "hof_20260614_dd0005",
        "wf_rp_2",
        "thoth",
        "hephaestus",
        "scratch",
        &[],
    ));
    env.submit(&handoff(
        "hof_20260614_dd0006",
        "wf_rp_2",
        "thoth",
        "hephaestus",
        "other",
        &[],
    ));
}

#[test]
fn input_that_could_not_be_read_back_is_refused_at_the_door() {
    let env = Env::new();
    let mut h = direct("hof_20260614_ee0001", "wf_big_1");
    h["context"]["summary"] = serde_json::json!("s".repeat(300 * 1024));
    let before = env.snapshot();
    let err = env.refused(&["handoff", "submit", "-"], Some(&h));
    assert!(
        err.contains("/context/summary") && err.contains("limit"),
        "{err}"
    );
    let mut h = direct("hof_20260614_ee0002", "wf_big_1");
    let many: Vec<String> = (0..12)
        .map(|i| format!("{i}{}", "d".repeat(200 * 1024)))
        .collect();
    h["context"]["decisions"] = serde_json::json!(many);
    let err = env.refused(&["handoff", "submit", "-"], Some(&h));
    assert!(err.contains("1048576-byte limit"), "{err}");
    assert_eq!(before, env.snapshot());
    // Within the limits the same shape goes through.
    let mut h = direct("hof_20260614_ee0003", "wf_big_1");
    h["context"]["summary"] = serde_json::json!("s".repeat(200 * 1024));
    env.submit(&h);
    env.ok(&["state", "wf_big_1"], None);
}

#[test]
fn abort_works_on_a_workflow_whose_state_is_too_big_to_read() {
    let env = Env::new();
    env.submit(&direct("hof_20260614_ee0004", "wf_big_2"));
    let state = env.path("conductor/state/wf_big_2.json");
    let mut v = env.read("conductor/state/wf_big_2.json");
    v["context_bag"]["notes"] = serde_json::json!("n".repeat(65 * 1024 * 1024));
    std::fs::write(&state, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = env.refused(&["state", "wf_big_2"], None);
    assert!(err.contains("limit"), "{err}");
    let r = env.ok(&["abort", "wf_big_2", "--reason", "too big"], None);
    assert_eq!(r["status"], "aborted", "{r}");
    assert_eq!(env.state("wf_big_2")["status"], "aborted");
    assert!(
        env.path("conductor/state/.wf_big_2.json.oversize")
            .metadata()
            .unwrap()
            .len()
            > 64 * 1024 * 1024
    );
    assert!(
        env.names("conductor/pending/hephaestus").is_empty(),
        "the dispatch is withdrawn"
    );
}

#[test]
fn abort_withdraws_a_dispatch_too_big_to_read_and_a_repeat_finishes_it() {
    let env = Env::new();
    env.submit(&direct("hof_20260614_ee0005", "wf_big_3"));
    let names = env.names("conductor/pending/hephaestus");
    assert_eq!(names.len(), 1, "{names:?}");
    // Another engine (or an agent with file access) grows the dispatch past the read limit.
    let rel = format!("conductor/pending/hephaestus/{}", names[0]);
    let mut d = env.read(&rel);
    d["context"]["notes"] = serde_json::json!("n".repeat(65 * 1024 * 1024));
    std::fs::write(env.path(&rel), serde_json::to_vec(&d).unwrap()).unwrap();
    let r = env.ok(&["abort", "wf_big_3", "--reason", "too big"], None);
    assert_eq!(r["status"], "aborted", "{r}");
    let withdrawn = r["dispatches_withdrawn"].to_string();
    assert!(withdrawn.contains(&names[0]), "{r}");
    assert!(
        env.names("conductor/pending/hephaestus").is_empty(),
        "the dispatch is withdrawn"
    );
    // Its archive record is readable and says where the whole file is kept.
    let rec = env.read(&format!("conductor/archive/hephaestus/{}", names[0]));
    assert_eq!(rec["ack_status"], "withdrawn", "{rec}");
    assert_eq!(rec["workflow_id"], "wf_big_3");
    assert!(
        rec["archive_reason"]
            .as_str()
            .unwrap()
            .contains("read limit"),
        "{rec}"
    );
    let aside = env.path(&format!(
        "conductor/archive/hephaestus/.{}.oversize",
        names[0]
    ));
    assert!(
        aside.metadata().unwrap().len() > 64 * 1024 * 1024,
        "kept whole"
    );
    // A repeat answers duplicate and changes nothing.
    let again = env.ok(&["abort", "wf_big_3", "--reason", "too big"], None);
    assert_eq!(again["duplicate"], true, "{again}");
    // Interrupted after the record, before the move: the repeat finishes it.
    env.submit(&direct("hof_20260614_ee0006", "wf_big_4"));
    let n4 = env.names("conductor/pending/hephaestus");
    let rel4 = format!("conductor/pending/hephaestus/{}", n4[0]);
    let mut d4 = env.read(&rel4);
    d4["context"]["notes"] = serde_json::json!("n".repeat(65 * 1024 * 1024));
    let big = serde_json::to_vec(&d4).unwrap();
    std::fs::write(env.path(&rel4), &big).unwrap();
    env.ok(&["abort", "wf_big_4", "--reason", "too big"], None);
    // Put the file back as if the rename had not happened.
    std::fs::rename(
        env.path(&format!("conductor/archive/hephaestus/.{}.oversize", n4[0])),
        env.path(&rel4),
    )
    .unwrap();
    let again = env.ok(&["abort", "wf_big_4", "--reason", "too big"], None);
    assert_eq!(again["duplicate"], true, "{again}");
    assert!(env.names("conductor/pending/hephaestus").is_empty());
    env.ok(&["validate"], None);
}
