//! README's promise (Install): "a refusal prints `error: …` on stderr and exits 1 with nothing
//! written; bad usage exits 2". Each case once broke it: a refusal that left a lock file behind, a
//! value no flag takes that exited 1, a mistyped god answered with exit 0.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common::*;

/// Every path under the root (lock files included) with its bytes.
fn tree(env: &Env) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(&env.root, &mut |p| {
        let bytes = if p.is_dir() {
            b"<dir>".to_vec()
        } else {
            std::fs::read(p).unwrap_or_default()
        };
        out.insert(p.to_path_buf(), bytes);
    });
    out
}

/// Runs `args`, expecting `code` with `error: …` on stderr, nothing on stdout and nothing written.
fn refused_with(env: &Env, code: i32, args: &[&str]) -> String {
    let before = tree(env);
    let out = env.run(args, None);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "pantheon {args:?}: {err}");
    assert!(err.starts_with("error: "), "pantheon {args:?}: {err}");
    assert!(out.stdout.is_empty(), "pantheon {args:?}");
    let after = tree(env);
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, b)| before.get(*p) != Some(b))
        .map(|(p, _)| p.strip_prefix(&env.root).unwrap().to_owned())
        .chain(
            before
                .keys()
                .filter(|p| !after.contains_key(*p))
                .map(|p| p.strip_prefix(&env.root).unwrap().to_owned()),
        )
        .collect();
    assert!(changed.is_empty(), "pantheon {args:?} wrote {changed:?}");
    err
}

#[test]
fn refusals_of_unknown_workflows_and_gods_write_nothing_and_exit_1() {
    let env = Env::dispatched("wf_exit_1", "hof_20260614_ex0001");
    for args in [
        &["abort", "wf_nope", "--reason", "typo"][..],
        &["rerun", "wf_nope", "--from", "build"],
        &["cleanup", "wf_nope"],
        &["redispatch", "wf_nope"],
        &["state", "wf_nope"],
    ] {
        let err = refused_with(&env, 1, args);
        assert!(
            err.contains("unknown workflow wf_nope") && err.contains("workflows here: wf_exit_1"),
            "pantheon {args:?}: {err}"
        );
    }
    assert!(!env.exists("conductor/state/.wf_nope.lock"));
    // A mistyped god: refused, naming the one meant.
    let err = refused_with(&env, 1, &["inbox", "hephastus"]);
    assert!(err.contains("hephastus has no inbox"), "{err}");
    assert!(err.contains("(did you mean hephaestus?)"), "{err}");
    let err = refused_with(&env, 1, &["inbox", "zeus"]);
    assert!(!err.contains("did you mean"), "{err}");
}

#[test]
fn values_no_flag_takes_are_bad_usage_and_exit_2() {
    let env = Env::new();
    for (args, says) in [
        (
            &["cost", "--by", "gdo"][..],
            "possible values: workflow, god",
        ),
        (
            &["demo", "--speed", "0", "--headless"],
            "the pace is a number from 0.05 to 100",
        ),
        (
            &["demo", "--headless", "--duration", "0"],
            "above 0 and at most 86400",
        ),
        (
            &["replay", "--at", "yesterday"],
            "\"yesterday\" is not a moment",
        ),
        (
            &["replay", "--from", "now", "--to", "-1h"],
            "is before --from",
        ),
        (
            &["serve", "--metrics", "nonsense"],
            "expected PORT or HOST:PORT",
        ),
        (
            &["serve", "--otlp", "https://collector:4318"],
            "only http:// URLs are supported",
        ),
        (
            &["inbox", "thoth", "--limit", "nine"],
            "invalid value 'nine'",
        ),
        (
            &["inbox", "thoth", "--limit", "0"],
            "ask for 1 to 1000 entries a page",
        ),
        (
            &["pending", "--limit", "5000"],
            "ask for 1 to 1000 entries a page",
        ),
        (&["journal", "--verify", "--head", "bad"], "is not SEQ:HASH"),
        (
            &["cost", "--sinse", "-1h"],
            "tip: a similar argument exists: '--since'",
        ),
    ] {
        let err = refused_with(&env, 2, args);
        assert!(err.contains(says), "pantheon {args:?}: {err}");
    }
    // `demo` makes its root only once its flags are good.
    let bare = Env::bare();
    refused_with(&bare, 2, &["demo", "--speed", "0", "--headless"]);
    assert!(!bare.root.exists());
}

#[test]
fn a_rerun_whose_dispatch_would_pass_the_handoff_limit_is_refused_and_writes_nothing() {
    let env = Env::with_test_flow();
    let (wf, hid) = ("wf_exit_big", "hof_20260614_ex0002");
    // A plan whose summary is 200 KiB (a handoff field may be 256 KiB): its dispatch history
    // carries it.
    let mut h = plan_handoff(hid, wf);
    h["context"]["summary"] = serde_json::json!("p".repeat(200 * 1024));
    env.submit(&h);
    let mut st = env.state(wf);
    st["status"] = serde_json::json!("failed");
    env.write(&format!("conductor/state/{wf}.json"), &st.to_string());
    // A context under the 1 MiB a context may be (four decisions of 210 KiB) ...
    let big: Vec<String> = (0..4).map(|i| format!("{i}").repeat(210 * 1024)).collect();
    env.write(
        "ctx.json",
        &serde_json::json!({"summary": "retry", "decisions": big}).to_string(),
    );
    let ctx = env.path("ctx.json").display().to_string();
    // ... whose dispatch, with the plan's summary in its history, would be over 1 MiB.
    let err = refused_with(
        &env,
        1,
        &["rerun", wf, "--from", "build", "--context", &ctx],
    );
    assert!(
        err.contains("the rerun's dispatch to hephaestus would be")
            && err.contains("over the 1048576-byte limit of a handoff; nothing was written"),
        "{err}"
    );
    // A context that fits is taken.
    env.write(
        "ctx.json",
        &serde_json::json!({"summary": "retry", "decisions": ["smaller"]}).to_string(),
    );
    let r = env.ok(&["rerun", wf, "--from", "build", "--context", &ctx], None);
    assert_eq!(r["status"], "rerun");
}
