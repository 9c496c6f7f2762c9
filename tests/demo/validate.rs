//! `pantheon validate`: every file that breaks the protocol is reported; exit 1 when any does.

use serde_json::Value;

use crate::common::{copy_tree, fixture, pantheon};

fn validate(root: &std::path::Path) -> (i32, Value) {
    let out = pantheon()
        .arg("--root")
        .arg(root)
        .arg("validate")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), report)
}

fn has(report: &Value, path_end: &str, line: Option<u64>, words: &str) -> bool {
    report["problems"].as_array().unwrap().iter().any(|p| {
        p["severity"] == "error"
            && p["path"].as_str().unwrap().ends_with(path_end)
            && line.is_none_or(|l| p["line"] == l)
            && p["message"].as_str().unwrap().contains(words)
    })
}

#[test]
fn validate_reports_the_foreign_fixtures_known_problems_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let (code, r) = validate(dir.path());
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["valid"], false);
    assert!(
        has(&r, "pending/iris/broken.json", None, "truncated JSON"),
        "{r:#}"
    );
    assert!(
        has(&r, "pending/iris/notes.txt", None, "not a dispatch"),
        "{r:#}"
    );
    assert!(
        has(&r, "workflows/broken.yaml", None, "does not parse"),
        "{r:#}"
    );
    let q = "stripe-checkout_20260201/.message-bus/queue.jsonl";
    assert!(has(&r, q, Some(10), "not JSON"), "{r:#}");
    assert!(has(&r, q, Some(11), "torn last line"), "{r:#}");
    // Tolerated quirks are warnings, not errors.
    assert_eq!(r["errors"], 5, "{r:#}");
    let warned = |end: &str| {
        r["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["severity"] == "warning" && p["path"].as_str().unwrap().ends_with(end))
    };
    assert!(warned("locks.json"), "bare-string lock");
    assert!(warned("worker-status.json"), "COMPLETED status");
    assert!(
        warned("wf_1a2b3c4d_active-goals.json"),
        "foreign dispatch naming"
    );
}

#[test]
fn validate_passes_a_fresh_init_root() {
    let dir = tempfile::tempdir().unwrap();
    pantheon()
        .arg("--root")
        .arg(dir.path())
        .arg("init")
        .assert()
        .success();
    let (code, r) = validate(dir.path());
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["valid"], true);
    assert_eq!(r["problems"], serde_json::json!([]));
}

#[test]
fn validate_flags_bad_ids_wrong_types_and_mismatched_names() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    pantheon()
        .arg("--root")
        .arg(root)
        .arg("init")
        .assert()
        .success();
    let w = |rel: &str, body: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    w(
        "conductor/state/wf_x.json",
        r#"{"workflow_id": "wf_other", "status": "dancing", "step_history": []}"#,
    );
    w(
        "conductor/pending/thoth/hof_20260101_abcdef.json",
        r#"{"handoff_id": "HOF-1", "workflow_id": "wf_x", "to_god": "thoth", "step": "a", "context": {}, "ack_status": "maybe"}"#,
    );
    w(
        "conductor/tracks/t1/.message-bus/locks.json",
        r#"{"a.ts": 42}"#,
    );
    w(
        "conductor/tracks/t1/.message-bus/worker-status.json",
        r#"[]"#,
    );
    w(
        "conductor/tracks/t1/.message-bus/board/votes.json",
        r#"{"CA": {"final_verdict": "MAYBE", "confidence": 3}}"#,
    );
    let (code, r) = validate(root);
    assert_eq!(code, 1);
    assert!(
        has(&r, "state/wf_x.json", None, "differs from the file name"),
        "{r:#}"
    );
    assert!(has(&r, "state/wf_x.json", None, "`status`"), "{r:#}");
    assert!(
        has(&r, "hof_20260101_abcdef.json", None, "`handoff_id`"),
        "{r:#}"
    );
    assert!(
        has(&r, "hof_20260101_abcdef.json", None, "`ack_status`"),
        "{r:#}"
    );
    assert!(
        has(&r, "t1/.message-bus/locks.json", None, "must be an object"),
        "{r:#}"
    );
    assert!(
        has(&r, "worker-status.json", None, "expected a JSON object"),
        "{r:#}"
    );
    assert!(has(&r, "board/votes.json", None, "final_verdict"), "{r:#}");
    assert!(has(&r, "board/votes.json", None, "confidence"), "{r:#}");
}

#[test]
fn validate_refuses_a_root_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let out = pantheon()
        .arg("--root")
        .arg(dir.path().join("nope"))
        .arg("validate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(
        err.contains(" init`"),
        "the same hint as every command: {err}"
    );
}

#[test]
fn demo_refuses_a_zero_speed_and_duration_without_headless() {
    let out = pantheon()
        .args(["demo", "--headless", "--speed", "0"])
        .output()
        .unwrap();
    // A value the flag cannot take is bad usage (README: exit 2), before any root is made.
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--speed"));
    let out = pantheon()
        .args(["demo", "--duration", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--duration needs --headless");
}

/// The help said `--root` defaults to `$PANTHEON_ROOT`; the demo makes a fresh root.
#[test]
fn demo_help_says_a_fresh_temporary_root_is_made_without_root() {
    let out = pantheon().args(["demo", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("`demo` without --root makes a fresh temporary root"),
        "{help}"
    );
}

/// `pantheon --read-only` was once a usage error; it opens the console read-only, as
/// `pantheon` alone opens the console (here it reaches the console's root check).
#[test]
fn read_only_without_the_console_command_opens_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let out = pantheon()
        .arg("--root")
        .arg(dir.path().join("nope"))
        .arg("--read-only")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("init`"), "{err}");
    let beside = pantheon()
        .args(["--read-only", "pending"])
        .output()
        .unwrap();
    assert_eq!(
        beside.status.code(),
        Some(2),
        "console options only without a command"
    );
}
