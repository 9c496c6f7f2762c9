//! Ids at the CLI's edge: a bad track, lock path, worker id, message type, archive id or director is
//! refused before anything is touched, with an error naming the value and the rule (exit 1).

use crate::common::Env;

const NAME_RULE: &str = "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";
const FREE_TEXT_RULE: &str = "must match 1 to 512 bytes of text without NUL";

/// The root's files, as sorted relative paths (to show a refusal wrote nothing).
fn tree(env: &Env) -> Vec<String> {
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                walk(&p, base, out);
            }
        }
    }
    let mut out = Vec::new();
    // The parent too: a track of `../x` must not reach it.
    let parent = env.root().parent().unwrap();
    walk(env.root(), parent, &mut out);
    out.sort();
    out
}

#[test]
fn a_bad_track_is_refused_with_the_value_and_the_rule() {
    let env = Env::new();
    let before = tree(&env);
    for (track, shown) in [
        ("../etc", "\"../etc\""),
        ("a/b", "\"a/b\""),
        ("", "\"\""),
        ("-x", "\"-x\""),
        ("t\u{1b}[2J", "\"t\\u{1b}[2J\""),
    ] {
        for area in ["bus", "board"] {
            let out = env
                .cmd()
                .args([area, &format!("--track={track}"), "status"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{area} {track:?}: {err}");
            assert_eq!(
                err.trim_end(),
                format!("error: invalid track {shown}: {NAME_RULE}"),
                "{area} {track:?}"
            );
        }
    }
    let long = "t".repeat(65);
    let out = env
        .cmd()
        .args(["bus", "--track", &long, "init"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: invalid track ") && err.contains(NAME_RULE),
        "{err}"
    );
    assert_eq!(tree(&env), before, "a refused track touched no file");
}

#[test]
fn bad_lock_paths_worker_ids_and_message_types_name_the_value_and_the_rule() {
    let env = Env::new();
    let before = tree(&env);
    let err = env.refused(&["lock", "./", "--worker", "w1"]);
    assert!(
        err.starts_with("error: lock path \"./\" names no file"),
        "{err}"
    );
    let err = env.refused(&["lock", "src/a.ts", "--worker", ""]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid worker \"\": {FREE_TEXT_RULE}")
    );
    let long = "w".repeat(513);
    let err = env.refused(&["unlock", "src/a.ts", "--worker", &long]);
    assert!(
        err.starts_with(&format!("error: invalid worker \"{}\"", "w".repeat(80)))
            && err.trim_end().ends_with(FREE_TEXT_RULE),
        "the value is cut to 80 characters: {err}"
    );
    let err = env.refused(&[
        "heartbeat",
        "--worker",
        "",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
    ]);
    assert!(err.contains("invalid worker \"\""), "{err}");
    let err = env.refused(&["post", "progress", "--source", "w1"]);
    assert_eq!(
        err.trim_end(),
        "error: invalid message type \"progress\": must match ^[A-Z][A-Z0-9_]*$"
    );
    let err = env.refused(&["archive", "--track-id", "../old"]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid track id \"../old\": {NAME_RULE}")
    );
    // An event pattern is parsed at the edge like every id: the value and the rule, exit 1, at once
    // (before, a bad glob was refused in other words, with the glob parser's message).
    let pattern_rule =
        "must match a glob over event names (`*`, `?`, `[..]` closed), 1 to 1024 bytes without NUL";
    for bad in ["FILE_UNLOCK_[", ""] {
        let started = std::time::Instant::now();
        let err = env.refused(&["wait", bad, "--timeout", "60"]);
        assert_eq!(
            err.trim_end(),
            format!("error: invalid pattern {bad:?}: {pattern_rule}")
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "it waited"
        );
    }
    assert_eq!(tree(&env), before, "a refused id touched no file");
    // The protocol's free-text forms stay accepted: a worker id with dots and a slash.
    let held = env.ok(&["lock", "src/./a.ts", "--worker", "team/worker-1.1"]);
    assert_eq!(held["filepath"], "src/a.ts");
    assert_eq!(held["worker_id"], "team/worker-1.1");
}

#[test]
fn bad_director_names_are_refused_naming_the_field() {
    let env = Env::new();
    let err = env.board_refused(&[
        "open",
        "--checkpoint",
        "EVALUATE_PLAN",
        "--proposal",
        "x",
        "--director",
        "C/A",
    ]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid director \"C/A\": {NAME_RULE}")
    );
    env.board(&["open", "--checkpoint", "EVALUATE_PLAN", "--proposal", "x"]);
    let err = env.board_refused(&[
        "assess",
        "--director",
        "..",
        "--verdict",
        "APPROVE",
        "--score",
        "7",
    ]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid director \"..\": {NAME_RULE}")
    );
    let err = env.board_refused(&[
        "discuss",
        "--from",
        "CA",
        "--to",
        "a b",
        "--type",
        "AGREE",
        "--message",
        "ok",
    ]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid to \"a b\": {NAME_RULE}")
    );
    let err = env.board_refused(&[
        "vote",
        "--director",
        "",
        "--verdict",
        "APPROVE",
        "--confidence",
        "0.5",
    ]);
    assert_eq!(
        err.trim_end(),
        format!("error: invalid director \"\": {NAME_RULE}")
    );
    // A valid name that is not on the board is the engine's refusal, not the parser's.
    let err = env.board_refused(&[
        "assess",
        "--director",
        "CFO",
        "--verdict",
        "APPROVE",
        "--score",
        "7",
    ]);
    assert!(err.contains("CFO is not on the board"), "{err}");
}
