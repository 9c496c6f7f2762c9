//! A newcomer's and an operator's first hour: bad roots and environments, typos, unknown ids, exit codes,
//! stdout/stderr discipline and closed pipes, through the real binary. Each test pins a behaviour that
//! once tripped someone (see CHANGELOG, Unreleased).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as Proc, Output, Stdio};

use serde_json::json;

use crate::common::{Env, bin, handoff};

/// The binary with no root anywhere in its environment, run in `cwd`.
fn bare_command(cwd: &Path, home: Option<&Path>) -> Proc {
    let mut c = Proc::new(bin());
    c.current_dir(cwd).stdin(Stdio::null());
    for v in [
        "PANTHEON_ROOT",
        "CONDUCTOR_BASE_DIR",
        "CONDUCTOR_HANDOFFS_DIR",
        "PANTHEON_CLEANUP_ROOTS",
        "HOME",
    ] {
        c.env_remove(v);
    }
    if let Some(h) = home {
        c.env("HOME", h);
    }
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One line, `error: …`, no panic and no backtrace.
fn one_line_error(out: &Output) -> String {
    let err = stderr(out);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn without_home_or_any_root_every_command_is_a_usage_error_and_writes_nothing() {
    let cwd = tempfile::tempdir().unwrap();
    // `init` used to make `./pantheon` in whatever directory it was run from.
    for args in [
        &["init"][..],
        &["pending"],
        &[],
        &["console", "--read-only"],
        &["mcp"],
    ] {
        let out = bare_command(cwd.path(), None).args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "pantheon {args:?}: {}",
            stderr(&out)
        );
        let err = one_line_error(&out);
        assert!(err.contains("HOME is not set"), "{err}");
        assert!(
            err.contains("pass --root DIR or set PANTHEON_ROOT"),
            "{err}"
        );
    }
    assert!(entries(cwd.path()).is_empty(), "{:?}", entries(cwd.path()));
    // Commands that read no root still work.
    let out = bare_command(cwd.path(), None)
        .args(["config", "--default"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_missing_root_error_says_where_the_root_was_taken_from() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let cases = [
        (
            None,
            vec![],
            "the default, ~/pantheon",
            home.join("pantheon"),
        ),
        (
            Some(dir.path().join("env-root")),
            vec![],
            "from $PANTHEON_ROOT",
            dir.path().join("env-root"),
        ),
        (
            Some(dir.path().join("env-root")),
            vec![
                "--root".to_owned(),
                dir.path().join("flag-root").display().to_string(),
            ],
            "given by --root",
            dir.path().join("flag-root"),
        ),
    ];
    for (env_root, flags, source, path) in cases {
        // No command at all starts the console: it must say what to run, not start on nothing.
        for cmd in [&["pending"][..], &[]] {
            let mut c = bare_command(dir.path(), Some(&home));
            if let Some(r) = &env_root {
                c.env("PANTHEON_ROOT", r);
            }
            let out = c.args(&flags).args(cmd).output().unwrap();
            assert_eq!(out.status.code(), Some(1));
            let err = one_line_error(&out);
            assert!(
                err.contains(&format!("{} ({source}) does not exist", path.display())),
                "{err}"
            );
            assert!(
                err.contains(&format!("`pantheon --root {} init`", path.display())),
                "{err}"
            );
        }
    }
}

#[test]
fn a_directory_of_another_program_is_no_root_and_nothing_is_written_into_it() {
    let env = Env::bare();
    std::fs::create_dir_all(env.root.join(".git")).unwrap();
    std::fs::write(env.root.join("README.md"), "someone's project\n").unwrap();
    let before = entries(&env.root);
    let h = handoff(
        "hof_20260614_abc001",
        "wf_not_here_1",
        "thoth",
        "hephaestus",
        "research",
        &[],
    );
    let hint = format!("`pantheon --root {} init`", env.root.display());
    for args in [
        &["handoff", "submit", "-"][..],
        &["pending"],
        &["validate"],
        &["bus", "--track", "t", "post", "PROGRESS", "--source", "w"],
        &["board", "--track", "t", "status"],
        &["console", "--read-only"],
        &["mcp"],
        &[],
    ] {
        let out = env.run(args, Some(&h));
        assert_eq!(
            out.status.code(),
            Some(1),
            "pantheon {args:?}: {}",
            stderr(&out)
        );
        let err = one_line_error(&out);
        assert!(err.contains("is not a pantheon root"), "{err}");
        assert!(err.contains("no conductor/ or shared/handoffs/"), "{err}");
        assert!(err.contains(&hint), "{err}");
        if args.first().is_some_and(|a| *a == "bus" || *a == "board") {
            // A bus alone is a root too: its own init is named beside the whole one.
            assert!(err.contains("bus --track t init` for a bus alone"), "{err}");
        }
        assert_eq!(
            entries(&env.root),
            before,
            "pantheon {args:?} wrote into the directory"
        );
    }
    // `init` is how it becomes one, on purpose.
    env.ok(&["init"], None);
    env.ok(&["pending"], None);
}

#[test]
fn init_on_a_file_or_a_dangling_link_refuses_in_one_line_and_writes_nothing() {
    let env = Env::bare();
    std::fs::write(&env.root, "a file\n").unwrap();
    let out = env.run(&["init"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = one_line_error(&out);
    assert!(
        err.contains("(given by --root) is not a directory"),
        "{err}"
    );
    assert!(err.contains("pass --root DIR naming a directory"), "{err}");
    assert_eq!(std::fs::read(&env.root).unwrap(), b"a file\n");
    std::fs::remove_file(&env.root).unwrap();

    let nowhere = env.dir.path().join("nowhere");
    std::os::unix::fs::symlink(&nowhere, &env.root).unwrap();
    for args in [&["init"][..], &["pending"]] {
        let out = env.run(args, None);
        assert_eq!(out.status.code(), Some(1));
        let err = one_line_error(&out);
        assert!(err.contains("is a symbolic link to nothing"), "{err}");
    }
    assert!(!nowhere.exists());
}

/// A file where init needs a directory refused init only after other directories were made.
#[test]
fn init_with_a_file_in_the_way_creates_nothing() {
    let env = Env::bare();
    std::fs::create_dir_all(&env.root).unwrap();
    std::fs::write(env.root.join("conductor"), "not a directory\n").unwrap();
    let out = env.run(&["init"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = one_line_error(&out);
    assert!(
        err.contains(&format!(
            "{} is not a directory",
            env.root.join("conductor").display()
        )),
        "{err}"
    );
    assert!(err.contains("nothing was created"), "{err}");
    assert_eq!(entries(&env.root), vec!["conductor".to_owned()]);
}

#[test]
fn init_twice_changes_nothing_and_a_linked_root_is_the_directory_it_names() {
    let env = Env::new();
    let before = env.snapshot();
    let again = env.ok(&["init"], None);
    assert_eq!(again["created"], json!([]));
    assert!(!again["kept"].as_array().unwrap().is_empty(), "{again}");
    assert_eq!(env.snapshot(), before);

    let link = env.dir.path().join("link");
    std::os::unix::fs::symlink(&env.root, &link).unwrap();
    let out = Proc::new(bin())
        .arg("--root")
        .arg(&link)
        .arg("validate")
        .env("HOME", &env.home)
        .env_remove("PANTHEON_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let real = std::fs::canonicalize(&env.root).unwrap();
    assert_eq!(report["root"], json!(real.display().to_string()));
}

#[test]
fn a_typo_in_a_command_or_a_flag_suggests_the_near_one_with_exit_2() {
    let env = Env::new();
    for (args, tip) in [
        (&["pendng"][..], "'pending'"),
        (&["inbox", "--limt", "3", "thoth"], "'--limit'"),
        (&["bus", "--track", "t", "wiat", "X"], "'wait'"),
        (&["board", "--track", "t", "stauts"], "'status'"),
        (&["abort", "wf_x", "--reson", "r"], "'--reason'"),
    ] {
        let out = env.run(args, None);
        assert_eq!(out.status.code(), Some(2), "pantheon {args:?}");
        assert!(out.stdout.is_empty());
        let err = stderr(&out);
        assert!(
            err.contains("a similar") && err.contains(tip),
            "pantheon {args:?}: {err}"
        );
    }
}

#[test]
fn an_unknown_workflow_god_or_track_names_the_ones_that_exist() {
    let env = Env::new();
    // No workflow yet: say how one starts (the old hint named `pantheon pending`, which lists no workflow).
    let err = env.refused(&["state", "wf_typo_1"], None);
    assert!(err.contains("there is no workflow here yet"), "{err}");
    assert!(err.contains("`pantheon handoff submit FILE`"), "{err}");
    env.submit(&handoff(
        "hof_20260614_abc002",
        "wf_real_1",
        "thoth",
        "hephaestus",
        "research",
        &["state_gate"],
    ));
    for args in [
        &["state", "wf_real_2"][..],
        &["abort", "wf_real_2", "--reason", "r"],
        &["cleanup", "wf_real_2", "--dry-run"],
    ] {
        let err = env.refused(args, None);
        assert!(
            err.contains("workflows here: wf_real_1"),
            "pantheon {args:?}: {err}"
        );
    }

    // A god without an inbox that no definition names: refused, with the god meant and the gods
    // that exist.
    let err = env.refused(&["inbox", "hephaistos"], None);
    assert!(err.starts_with("error: hephaistos has no inbox"), "{err}");
    assert!(err.contains("(did you mean hephaestus?)"), "{err}");
    assert!(
        err.contains("gods here: caduceus, hephaestus, hermes"),
        "{err}"
    );
    let err = env.refused(&["dispatch", "hephaistos", "hof_20260614_abc002"], None);
    assert!(err.contains("hephaistos has no inbox"), "{err}");
    assert!(
        err.contains("gods here: caduceus, hephaestus, hermes"),
        "{err}"
    );
    let out = env.run(&["inbox", "hephaestus"], None);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        stderr(&out)
    );

    // A track without a bus: the tracks that have one.
    let err = env.refused(&["bus", "--track", "mian", "status"], None);
    assert!(err.contains("(no track has one yet)"), "{err}");
    env.ok(&["bus", "--track", "main", "init"], None);
    let err = env.refused(&["bus", "--track", "mian", "status"], None);
    assert!(err.contains("(tracks here: main)"), "{err}");
    let err = env.refused(&["board", "--track", "mian", "status"], None);
    assert!(err.contains("(tracks here: main)"), "{err}");
}

/// `pantheon … | head -1`: the reader goes away after one line; the writer must end quietly, not panic.
#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_without_a_panic() {
    let env = Env::new();
    env.ok(&["bus", "--track", "main", "init"], None);
    env.ok(
        &[
            "bus",
            "--track",
            "main",
            "post",
            "PROGRESS",
            "--source",
            "w1",
            "--count",
            "20000",
            "--payload",
            r#"{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
        ],
        None,
    );
    for args in [
        &["bus", "--track", "main", "read"][..],
        &["pending", "--limit", "1000"],
        &["--help"],
        &["config", "--default"],
    ] {
        let mut child = env
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // stdout is dropped here: the pipe is closed with most of the output unread.
        let out = child.wait_with_output().unwrap();
        assert!(!first.is_empty(), "pantheon {args:?} printed nothing");
        let err = stderr(&out);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "pantheon {args:?}: {err}"
        );
        assert!(
            out.status.code().is_some(),
            "pantheon {args:?} died of a signal"
        );
        assert!(
            matches!(out.status.code(), Some(0)),
            "pantheon {args:?}: {:?} {err}",
            out.status
        );
    }
}

/// The ```sh blocks after `heading` in README.md, up to the next `## ` heading.
fn readme_blocks(heading: &str) -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let at = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README.md has no {heading:?}"));
    let mut rest = &readme[at + heading.len()..];
    if let Some(next) = rest.find("\n## ") {
        rest = &rest[..next];
    }
    let mut blocks = Vec::new();
    while let Some(start) = rest.find("```sh\n") {
        let start = start + "```sh\n".len();
        let end = rest[start..].find("```").expect("the block ends");
        blocks.push(rest[start..start + end].to_owned());
        rest = &rest[start + end + 3..];
    }
    blocks
}

/// README's quick start installs the binary before its first `pantheon` line (it began with
/// `pantheon init`, which fails with `pantheon: command not found` on a fresh machine), then its
/// block runs as written by `sh -e` with the binary on PATH, HOME a fresh directory and no
/// PANTHEON_ROOT: every line must succeed and leave the workflow where the comments say.
#[test]
fn the_readme_quick_start_installs_first_and_runs_as_written() {
    let blocks = readme_blocks("## Quick start");
    let first_pantheon = blocks
        .iter()
        .position(|b| b.lines().any(|l| l.trim_start().starts_with("pantheon ")))
        .expect("a block running pantheon");
    let install = blocks
        .iter()
        .position(|b| b.contains("cargo install --path ."))
        .expect("the quick start says how to install the binary");
    assert!(
        install < first_pantheon,
        "the quick start runs pantheon before it installs it: {blocks:?}"
    );
    let block = blocks[first_pantheon].clone();
    assert!(block.starts_with("pantheon init"), "{block}");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let out = Proc::new("sh")
        .args(["-e", "-c", &block])
        .current_dir(&work)
        .env_remove("PANTHEON_ROOT")
        .env_remove("CONDUCTOR_BASE_DIR")
        .env_remove("CONDUCTOR_HANDOFFS_DIR")
        .env("HOME", &home)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin().parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README quick start failed:\n{block}\nstderr: {}",
        stderr(&out)
    );
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(home.join("pantheon/conductor/state/wf_deploy_42.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["status"], json!("in_progress"), "{state}");
    assert_eq!(state["current_step"], json!("architect"), "{state}");
}

/// `pantheon` (the console) or `pantheon demo` with standard output in a pipe: one line saying what to run
/// instead, before any root is made (it failed with `No such device or address (os error 6)`, and the demo
/// left a root behind at each try).
#[test]
fn the_console_and_the_demo_without_a_terminal_say_what_to_run_instead() {
    let env = Env::new();
    for args in [&[][..], &["console", "--read-only"]] {
        let out = env.run(args, None);
        assert_eq!(out.status.code(), Some(1), "pantheon {args:?}");
        let err = one_line_error(&out);
        assert!(err.contains("the console needs a terminal"), "{err}");
        assert!(err.contains("`pantheon pending`"), "{err}");
    }
    let demo_root = env.dir.path().join("demo-root");
    let out = Proc::new(bin())
        .arg("--root")
        .arg(&demo_root)
        .arg("demo")
        .env("HOME", &env.home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = one_line_error(&out);
    assert!(err.contains("`pantheon demo --headless`"), "{err}");
    assert!(!demo_root.exists(), "the demo made its root before failing");
}

/// Every command's `--help` and `-h` answer alike and say where the root comes from, under one heading
/// (`--root` used to sit between a command's own options, in a different place in each command).
#[test]
fn every_help_says_where_the_root_comes_from_and_the_top_level_one_the_exit_codes() {
    for (path, _) in crate::help::all_commands() {
        let long = Proc::new(bin()).args(&path).arg("--help").output().unwrap();
        let short = Proc::new(bin()).args(&path).arg("-h").output().unwrap();
        assert!(long.status.success() && short.status.success(), "{path:?}");
        assert_eq!(
            long.stdout, short.stdout,
            "pantheon {path:?}: -h and --help differ"
        );
        let text = String::from_utf8_lossy(&long.stdout);
        let global = text.split("\nGlobal options:\n").nth(1).unwrap_or_else(|| {
            panic!(
                "pantheon {} --help has no Global options:\n{text}",
                path.join(" ")
            )
        });
        assert!(
            global.contains("--root <DIR>") && global.contains("$PANTHEON_ROOT, else ~/pantheon"),
            "pantheon {} --help:\n{text}",
            path.join(" ")
        );
    }
    let top = Proc::new(bin()).arg("--help").output().unwrap();
    // `pantheon help` and `pantheon help COMMAND` are the same texts.
    let help = Proc::new(bin()).arg("help").output().unwrap();
    assert_eq!(help.stdout, top.stdout);
    let inbox = Proc::new(bin()).args(["help", "inbox"]).output().unwrap();
    let inbox_help = Proc::new(bin()).args(["inbox", "--help"]).output().unwrap();
    assert_eq!(inbox.stdout, inbox_help.stdout);
    let text = String::from_utf8_lossy(&top.stdout);
    for words in [
        "Console options (with no command):",
        "Exit status: 0 done, 1 refused or failed",
        "2 bad usage",
        "`pantheon init`",
        "`pantheon demo`",
    ] {
        assert!(
            text.contains(words),
            "pantheon --help lacks {words:?}:\n{text}"
        );
    }
}

/// `bridge lock --ttl` takes a duration as `bus lock --ttl` does (it took bare seconds only, so the
/// `--ttl 30m` an operator knows from `bus lock` was a usage error); a bad one is still exit 2.
#[test]
fn bridge_lock_ttl_takes_the_durations_bus_lock_takes() {
    let cmd = <pantheon::testing::cli::Cli as clap::CommandFactory>::command();
    for (ttl, secs) in [("30m", 1800u64), ("90", 90), ("1h30m", 5400)] {
        let m = cmd
            .clone()
            .try_get_matches_from([
                "pantheon", "bridge", "lock", "--name", "a", "--track", "t", "--path", "x",
                "--worker", "w", "--ttl", ttl,
            ])
            .unwrap();
        let lock = m
            .subcommand_matches("bridge")
            .unwrap()
            .subcommand_matches("lock")
            .unwrap();
        assert_eq!(lock.get_one::<u64>("ttl"), Some(&secs), "--ttl {ttl}");
    }
    let env = Env::new();
    let out = env.run(
        &[
            "bridge", "lock", "--name", "a", "--track", "t", "--path", "x", "--worker", "w",
            "--ttl", "2x",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a duration"),
        "{}",
        stderr(&out)
    );
}

/// Runs the binary as an unprivileged user: directly when the tests are not root, else through
/// `setpriv` as `nobody` (root reads any directory, so permissions cannot be tested as root). `None`
/// when neither is possible.
fn unprivileged(args: &[&std::ffi::OsStr], home: &Path) -> Option<Output> {
    let uid = Proc::new("id").arg("-u").output().ok()?;
    let mut c = if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        let mut c = Proc::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin());
        c
    } else {
        Proc::new(bin())
    };
    let out = c
        .args(args)
        .env_remove("PANTHEON_ROOT")
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    // setpriv itself missing or refused: no answer from pantheon at all.
    (!String::from_utf8_lossy(&out.stderr).starts_with("setpriv:")).then_some(out)
}

#[test]
fn an_unreadable_or_unreachable_root_says_so_instead_of_does_not_exist() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let root = locked.join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(root.join("conductor")).unwrap();
    let unreadable = dir.path().join("unreadable");
    std::fs::create_dir(&unreadable).unwrap();
    std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let home = dir.path().to_path_buf();
    for (path, words) in [
        (&unreadable, "cannot be read: Permission denied"),
        (&root, "cannot be reached: Permission denied"),
    ] {
        for cmd in ["pending", "init"] {
            let args = [
                std::ffi::OsStr::new("--root"),
                path.as_os_str(),
                std::ffi::OsStr::new(cmd),
            ];
            let Some(out) = unprivileged(&args, &home) else {
                eprintln!("skipped: no way to run as an unprivileged user here");
                return;
            };
            assert_eq!(out.status.code(), Some(1), "{cmd} {}", stderr(&out));
            let err = one_line_error(&out);
            assert!(err.contains(words), "{cmd}: {err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
    }
    std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `pantheon ack` typed at a terminal with nothing piped in waited silently for standard input; it now says
/// what it reads and how to end it. Run under `script` for a terminal on standard input.
#[test]
fn reading_a_document_from_a_terminal_says_so_first() {
    let env = Env::new();
    let cmd = format!("{} --root {} ack", bin().display(), env.root.display());
    let Ok(out) = Proc::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("HOME", &env.home)
        .env_remove("PANTHEON_ROOT")
        .stdin(Stdio::null())
        .output()
    else {
        eprintln!("skipped: no script(1) for a terminal");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: reading the ack JSON from standard input; end it with Ctrl-D"),
        "{text}"
    );
    // Piped input gets no note: stderr stays for diagnostics about the input itself.
    let out = env.run(&["ack", "-"], Some(&json!({})));
    assert!(!stderr(&out).contains("note: reading"), "{}", stderr(&out));
}
