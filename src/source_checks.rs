//! Rules about the source tree that the compiler cannot enforce, checked by reading the sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::layout;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The non-test part of a module: everything before its first `#[cfg(test)]` (test modules sit at the
/// end of a file here), without `include_str!` lines (paths next to the source, not in a root).
fn non_test_code(text: &str) -> String {
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.contains("include_str!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A protocol file name (`queue.jsonl`, `locks.json`, …) is spelled as a string literal in one non-test
/// module only: `store::layout` in the engine. Everyone else names its constant.
#[test]
fn protocol_file_names_are_spelled_in_one_module() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates/engine/src"), &mut files);
    assert!(files.len() > 50, "found only {} sources", files.len());
    let mut spelled: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for f in &files {
        let code = non_test_code(&std::fs::read_to_string(f).unwrap());
        let rel = f.strip_prefix(base).unwrap().display().to_string();
        for name in layout::FILE_NAMES {
            if code.contains(&format!("\"{name}\"")) {
                spelled.entry(name).or_default().push(rel.clone());
            }
        }
    }
    for name in layout::FILE_NAMES {
        let at = spelled.get(name).cloned().unwrap_or_default();
        assert_eq!(
            at,
            vec!["crates/engine/src/store/layout.rs".to_owned()],
            "{name:?} must be spelled only in store/layout.rs; use its constant"
        );
    }
}

/// The check above sees a second spelling (so it cannot pass vacuously).
#[test]
fn the_spelling_check_sees_a_literal() {
    let code =
        non_test_code("fn a() { x.join(\"locks.json\") }\n#[cfg(test)]\nmod t { \"queue.jsonl\" }");
    assert!(code.contains("\"locks.json\""));
    assert!(!code.contains("\"queue.jsonl\""));
}

/// The shells `cli` dispatches to (`demo`, `bridge`) and the layers below never import `cli` back, so
/// the module graph has no cycle through the command line.
#[test]
fn nothing_below_the_command_line_imports_it() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for d in ["demo", "bridge", "console", "live", "mcp"] {
        rust_files(&base.join(d), &mut files);
    }
    assert!(files.len() > 20, "found only {} sources", files.len());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("crate::cli"),
            "{} imports crate::cli",
            f.display()
        );
    }
}

/// The process environment is never written outside tests (`set_var` is unsound with threads; settings
/// live in the root's `Settings`): no non-test module of the shells, the engine or the benches
/// calls it.
#[test]
fn the_environment_is_written_only_in_tests() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in ["src", "crates/engine/src", "benches"] {
        rust_files(&base.join(d), &mut files);
    }
    assert!(files.len() > 50, "found only {} sources", files.len());
    // Spelled in two halves so this file does not find itself.
    let calls = [concat!("set", "_var("), concat!("remove", "_var(")];
    for f in files {
        let code = non_test_code(&std::fs::read_to_string(&f).unwrap());
        for call in calls {
            assert!(
                !code.contains(call),
                "{} calls {call}…) outside tests",
                f.display()
            );
        }
    }
}

/// Every package `name` depends on (normal and dev dependencies, transitively), read from Cargo.lock.
fn locked_dependencies(lock: &str, name: &str) -> std::collections::BTreeSet<String> {
    // One `[[package]]` block per package: its name and the names in its `dependencies` list (an entry
    // is `"name"` or `"name version"` when two versions are locked).
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let Some(pkg) = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
        else {
            continue;
        };
        let list = block
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or(""))
            .unwrap_or("");
        let names = list
            .lines()
            .filter_map(|l| l.trim().trim_end_matches(',').strip_prefix('"'))
            .filter_map(|l| l.strip_suffix('"'))
            .map(|l| l.split(' ').next().unwrap_or(l).to_owned())
            .collect();
        deps.entry(pkg.to_owned())
            .or_default()
            .extend::<Vec<String>>(names);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![name.to_owned()];
    while let Some(p) = todo.pop() {
        for d in deps.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// The engine crate pulls no terminal, async runtime, MCP or command-line crate, directly or through
/// another crate (Cargo.lock holds the whole resolved graph, so a crate pulled in indirectly counts).
#[test]
fn the_engine_depends_on_no_terminal_async_or_mcp_crate() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = std::fs::read_to_string(base.join("Cargo.lock")).unwrap();
    let engine = locked_dependencies(&lock, "pantheon-engine");
    assert!(
        engine.contains("serde_json") && engine.contains("rustix"),
        "the lock file parse found too little: {engine:?}"
    );
    let forbidden = [
        "ratatui",
        "crossterm",
        "termion",
        "tokio",
        "async-std",
        "futures",
        "rmcp",
        "clap",
        "async-nats",
    ];
    for f in forbidden {
        assert!(
            !engine.contains(f),
            "pantheon-engine depends on {f} (through Cargo.lock); the engine has no terminal, async or MCP code"
        );
    }
    // The check would see them: the console package pulls them.
    let shell = locked_dependencies(&lock, "pantheon");
    assert!(shell.contains("ratatui") && shell.contains("tokio"));
}

/// Every flash the console shows for an engine result (each action module's `Act::summarize`, per `Outcome` variant)
/// is asserted in a console test that drives the real engine (`EngineOperator`). A new `Outcome` variant fails here until a test asserts its flash and this list names it.
#[test]
fn every_console_flash_is_tested_against_the_engine() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Each variant, and pieces of its flash texts the engine tests assert.
    let asserted: [(&str, &[&str]); 17] = [
        (
            "Ack",
            &[": accepted, workflow", "(already recorded)", "rerouted to"],
        ),
        ("Approval", &["approved into", "rejected, workflow"]),
        ("Abort", &["aborted: ", "(already aborted)"]),
        ("Cleanup", &["cleaned: "]),
        ("Unlock", &[" unlocked (was held by"]),
        ("Advance", &["board ASSESSING -> DISCUSSING"]),
        ("Round", &["closed; round 2 of 3 begins"]),
        ("Resolve", &["board resolved: "]),
        ("Requeue", &["requeued into"]),
        ("Rerun", &["rerun from step"]),
        (
            "Outbox",
            &[
                ": retry asked; no bridge is running",
                " discarded: kept in ",
            ],
        ),
        ("Discard", &[" discarded: retired from "]),
        ("Pause", &["paused since "]),
        ("Resume", &["resumed after "]),
        ("Answer", &["answered "]),
        ("Link", &["approval link for "]),
        (
            "Bulk",
            &["approved 4, refused 1: ", "requeued 2, refused 1: "],
        ),
    ];
    let ops = std::fs::read_to_string(base.join("src/console/ops.rs")).unwrap();
    let enum_body = ops
        .split_once("pub enum Outcome {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("src/console/ops.rs declares `pub enum Outcome`");
    let variants: Vec<&str> = enum_body
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with("),"))
        .filter_map(|l| l.split_once('('))
        .map(|(v, _)| v)
        .collect();
    let listed: Vec<&str> = asserted.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        variants, listed,
        "every Outcome variant needs a flash asserted against the engine (and an entry here)"
    );
    let mut tests = Vec::new();
    rust_files(&base.join("tests/console"), &mut tests);
    let engine_tests: String = tests
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .filter(|t| t.contains("EngineOperator"))
        .collect();
    for (variant, pieces) in asserted {
        for piece in pieces {
            assert!(
                engine_tests.contains(piece),
                "no console test with the real engine asserts the {variant} flash {piece:?}"
            );
        }
    }
}

/// The engine's lints (no unsafe code, no unwrap or panic, documented public items) are declared at its crate root (`clippy -D warnings` in
/// `.ci/run` then holds them), and `.ci/run` and the README lint and test the whole workspace.
#[test]
fn the_engine_lints_and_the_workspace_wide_ci_are_declared() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(base.join("crates/engine/src/lib.rs")).unwrap();
    for lint in [
        "#![deny(unsafe_code)]",
        "#![warn(missing_docs)]",
        "deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)",
    ] {
        assert!(lib.contains(lint), "crates/engine/src/lib.rs lost {lint}");
    }
    let manifest = std::fs::read_to_string(base.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("default-members = [\".\", \"crates/engine\"]"),
        "a plain `cargo test` must cover the engine crate too"
    );
    let ci = std::fs::read_to_string(base.join(".ci/run")).unwrap();
    assert!(ci.contains("cargo clippy --workspace --all-targets -- -D warnings"));
    assert!(ci.contains("cargo fmt --all -- --check"));
    assert!(ci.contains(" cargo test\n"), "the README's test command");
    let readme = std::fs::read_to_string(base.join("README.md")).unwrap();
    assert!(readme.contains("cargo clippy --workspace --all-targets -- -D warnings"));
}

/// The dependency names (as the code spells them: `-` becomes `_`, a `package =` rename keeps its key) of one
/// table of a manifest.
fn manifest_dependencies(manifest: &Path, table: &str) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc.get(table)
        .and_then(|t| t.as_table())
        .map(|t| t.keys().map(|k| k.replace('-', "_")).collect())
        .unwrap_or_default()
}

/// True when some Rust file under one of `dirs` names `krate` as a path (`krate::…`, `use krate`, `krate!`).
fn uses_crate(dirs: &[PathBuf], krate: &str) -> bool {
    let mut files = Vec::new();
    for d in dirs {
        rust_files(d, &mut files);
    }
    let forms = [
        format!("{krate}::"),
        format!("use {krate};"),
        format!("use {krate} as"),
        format!("extern crate {krate}"),
    ];
    files.iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        forms.iter().any(|form| {
            text.match_indices(form.as_str()).any(|(at, _)| {
                // The name starts a path: not the tail of a longer identifier (`my_serde::`).
                !text[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    })
}

/// Every dependency a manifest declares is used where it is declared for: a package's `[dependencies]` in its
/// `src/`, its `[dev-dependencies]` in its tests, benches, examples or `src/` tests. A crate nobody uses only
/// lengthens the build and the supply chain; one used only by tests belongs in `[dev-dependencies]`.
#[test]
fn every_declared_dependency_is_used() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let packages = [
        (base.to_path_buf(), "pantheon"),
        (base.join("crates/engine"), "pantheon-engine"),
    ];
    let mut unused = Vec::new();
    for (dir, name) in packages {
        let manifest = dir.join("Cargo.toml");
        let src = vec![dir.join("src")];
        let dev = vec![
            dir.join("src"),
            dir.join("tests"),
            dir.join("benches"),
            dir.join("examples"),
        ];
        for krate in manifest_dependencies(&manifest, "dependencies") {
            if !uses_crate(&src, &krate) {
                unused.push(format!(
                    "{name} [dependencies] {krate} (not used in its src/)"
                ));
            }
        }
        for krate in manifest_dependencies(&manifest, "dev-dependencies") {
            if !uses_crate(&dev, &krate) {
                unused.push(format!(
                    "{name} [dev-dependencies] {krate} (not used by its tests or benches)"
                ));
            }
        }
    }
    assert!(unused.is_empty(), "declared but unused: {unused:#?}");
}

#[test]
fn the_dependency_check_sees_a_use_and_a_lookalike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "use my_serde::X;\nfn f() { serde_json::json!({}); }\n",
    )
    .unwrap();
    let dirs = [dir.path().to_path_buf()];
    assert!(uses_crate(&dirs, "serde_json"));
    assert!(!uses_crate(&dirs, "serde"), "my_serde:: is not serde");
    assert!(!uses_crate(&dirs, "uuid"));
}

/// The longest a non-test source file may be, in lines.
const MAX_FILE_LINES: usize = 1200;
/// The longest a non-test function may be, in lines (signature to closing brace).
const MAX_FN_LINES: usize = 120;

/// No function is longer than this, exception or not.
const MAX_EXEMPT_FN_LINES: usize = 250;

/// Functions allowed past [`MAX_FN_LINES`] for good, each justified in CONTRIBUTING.md ("Files
/// and functions"): (repo-relative path, function name, its ceiling in lines). A ceiling is the
/// function's length when it was set plus a little, so an exception cannot grow unnoticed: past it,
/// the function is cut (or the ceiling raised, with a reason, in the same change).
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
    // The default key table: one `bind` line per key, read top to bottom like the help it makes.
    // Raised from 245 when the operator actions became one nested `OperatorAction` (bound as
    // `Do::X.into()`, one of which no longer fits on a line).
    ("src/console/keymap.rs", "default", 250),
    // The pure ack step: one `match` over the four decisions, each arm its effects in write order.
    // Raised from 215 when the hold rule's refusal (docs/PROTOCOL.md 2.5) and the retirement of a
    // finished workflow's dead letters joined the arms they guard.
    ("crates/engine/src/conductor/ack_step.rs", "ack_step", 232),
    // The abort's ordered writes (manifest, state, withdrawals, marks), each resumable.
    (
        "crates/engine/src/conductor/admin.rs",
        "abort_unjournaled",
        155,
    ),
    // A workflow definition read field by field, each field's tolerance next to it.
    (
        "crates/engine/src/conductor/definition.rs",
        "from_value",
        200,
    ),
    // An outbox record's moves: one arm per reply status.
    ("crates/engine/src/conductor/outbox.rs", "advance", 185),
    // The routing table of docs/PROTOCOL.md 2.3, in its order.
    ("crates/engine/src/conductor/route.rs", "route", 185),
    // A scripted demo scene, read top to bottom.
    ("src/demo/workers.rs", "deadlock_scenario", 135),
];

/// Functions and files past the limits that are not cut to size YET (CONTRIBUTING.md names them):
/// the list only shrinks. An entry that is no longer long fails the check too, so it is removed
/// when its function is split.
const NOT_YET_CUT: &[(&str, &str)] = &[];

/// Files past [`MAX_FILE_LINES`] not cut to size yet (see [`NOT_YET_CUT`]).
const LONG_FILES_NOT_YET_CUT: &[&str] = &[];

/// Every function of `code` longer than `max` lines: (name, first line, length). A function runs
/// from its `fn` line to the first line that is its indentation and `}`.
fn long_functions(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let body = l.trim_start();
        let indent = &l[..l.len() - body.len()];
        let Some(at) = body.find("fn ") else { continue };
        let head = &body[..at];
        let words_ok = head.split_whitespace().all(|w| {
            matches!(w, "const" | "async" | "unsafe" | "extern" | "\"C\"") || w.starts_with("pub")
        });
        if !words_ok || body.trim_end().ends_with(';') {
            continue;
        }
        let name: String = body[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || (body.contains('{') && body.trim_end().ends_with('}')) {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|x| *x == close) {
            let len = end + 2;
            if len > max {
                out.push((name, i + 1, len));
            }
        }
    }
    out
}

/// What the size check says of the function `name` (of `rel`, at `line`, `len` lines long, past
/// [`MAX_FN_LINES`]): nothing when it is a named exception within its ceiling or not cut yet, else
/// why it fails.
fn long_function_problem(
    (rel, line, name, len): (&str, usize, &str, usize),
    exceptions: &[(&str, &str, usize)],
    not_yet: &[(&str, &str)],
) -> Option<String> {
    let exempt = exceptions.iter().find(|(p, n, _)| *p == rel && *n == name);
    match exempt {
        Some((_, _, ceiling)) if len > *ceiling => Some(format!(
            "{rel}:{line} fn {name}: {len} lines, past its ceiling of {ceiling} (cut it, or raise \
             the ceiling in LONG_FUNCTIONS with a reason)"
        )),
        Some(_) => None,
        None if not_yet.iter().any(|(p, n)| *p == rel && *n == name) => None,
        None => Some(format!(
            "{rel}:{line} fn {name}: {len} lines (the limit is {MAX_FN_LINES})"
        )),
    }
}

/// Files and functions a person can hold in their head: outside tests, no source file of the
/// root package or the engine is over [`MAX_FILE_LINES`] lines and no function over
/// [`MAX_FN_LINES`], but for the exceptions named above (and in CONTRIBUTING.md).
#[test]
fn files_and_functions_stay_within_their_size() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates/engine/src"), &mut files);
    let mut over = Vec::new();
    let mut long_fns: Vec<(String, String)> = Vec::new();
    let mut long_files: Vec<String> = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        // Test-only modules.
        if rel.ends_with("/tests.rs") || rel == "src/source_checks.rs" {
            continue;
        }
        let code = non_test_code(&std::fs::read_to_string(f).unwrap());
        let n = code.lines().count();
        if n > MAX_FILE_LINES {
            long_files.push(rel.clone());
            if !LONG_FILES_NOT_YET_CUT.contains(&rel.as_str()) {
                over.push(format!("{rel}: {n} lines (the limit is {MAX_FILE_LINES})"));
            }
        }
        for (name, line, len) in long_functions(&code, MAX_FN_LINES) {
            over.extend(long_function_problem(
                (&rel, line, &name, len),
                LONG_FUNCTIONS,
                NOT_YET_CUT,
            ));
            long_fns.push((rel.clone(), name));
        }
    }
    for (p, n, ceiling) in LONG_FUNCTIONS {
        if *ceiling > MAX_EXEMPT_FN_LINES {
            over.push(format!(
                "{p} fn {n}: a ceiling of {ceiling} lines is past {MAX_EXEMPT_FN_LINES}: cut it"
            ));
        }
    }
    let listed = LONG_FUNCTIONS.iter().map(|(p, n, _)| (p, n));
    for (p, n) in listed.chain(NOT_YET_CUT.iter().map(|(p, n)| (p, n))) {
        if !long_fns.iter().any(|(fp, fname)| fp == p && fname == n) {
            over.push(format!(
                "{p} fn {n} is listed as long but is not (any more): remove it from the list"
            ));
        }
    }
    for p in LONG_FILES_NOT_YET_CUT {
        if !long_files.iter().any(|f| f == p) {
            over.push(format!(
                "{p} is listed as long but is not (any more): remove it from the list"
            ));
        }
    }
    assert!(
        over.is_empty(),
        "split these (or name and justify an exception in CONTRIBUTING.md):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_size_check_holds_an_exception_to_its_ceiling() {
    let exceptions = [("src/a.rs", "table", 130)];
    let at = |name, len| long_function_problem(("src/a.rs", 7, name, len), &exceptions, &[]);
    assert_eq!(at("table", 130), None);
    assert_eq!(
        at("table", 131).as_deref(),
        Some(
            "src/a.rs:7 fn table: 131 lines, past its ceiling of 130 (cut it, or raise the \
             ceiling in LONG_FUNCTIONS with a reason)"
        )
    );
    assert_eq!(
        at("other", 121).as_deref(),
        Some("src/a.rs:7 fn other: 121 lines (the limit is 120)")
    );
    let not_yet = [("src/a.rs", "other")];
    assert_eq!(
        long_function_problem(("src/a.rs", 7, "other", 300), &[], &not_yet),
        None
    );
}

#[test]
fn the_size_check_measures_a_function_and_skips_one_liners() {
    let code = "fn short() { 1 }\npub(crate) fn long() {\n    a();\n    b();\n}\nfn decl();\n";
    // `long` runs from line 2 to its closing brace on line 5: four lines.
    assert_eq!(long_functions(code, 3), vec![("long".to_owned(), 2, 4)]);
    assert!(long_functions(code, 4).is_empty());
}

/// Files that still allow clippy's `too_many_arguments`: the list only shrinks, and an entry whose
/// file no longer has the allowance fails the check until it is removed. None is left.
const ARGUMENT_LISTS_NOT_YET_CUT: &[&str] = &[];

/// The lines (1-based) of `text` that allow, expect or configure clippy's `too_many_arguments`
/// lint, in any attribute form (`#[allow(…)]`, `#![allow(…)]`, `cfg_attr`, spread over lines).
/// A comment that names the lint is not an allowance.
fn argument_list_allowances(text: &str) -> Vec<usize> {
    // Spelled in two halves so this file does not find itself.
    let lint = concat!("too_many", "_arguments");
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            code.contains(lint)
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// No function takes a list of arguments long enough for clippy to object, and no allowance hides
/// one: anywhere in `src/` and `crates/` (tests included), and in no manifest or clippy
/// configuration. A step or a commit with many inputs takes an input struct (CONTRIBUTING.md,
/// "Where new things go").
#[test]
fn no_function_allows_a_long_argument_list() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates"), &mut files);
    assert!(files.len() > 50, "found only {} sources", files.len());
    let mut found = Vec::new();
    let mut allowing = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        if rel == "src/source_checks.rs" {
            continue;
        }
        let lines = argument_list_allowances(&std::fs::read_to_string(f).unwrap());
        if lines.is_empty() {
            continue;
        }
        allowing.push(rel.clone());
        if !ARGUMENT_LISTS_NOT_YET_CUT.contains(&rel.as_str()) {
            found.extend(lines.iter().map(|n| format!("{rel}:{n}")));
        }
    }
    for p in ARGUMENT_LISTS_NOT_YET_CUT {
        if !allowing.iter().any(|f| f == p) {
            found.push(format!(
                "{p} no longer allows long argument lists: remove it from ARGUMENT_LISTS_NOT_YET_CUT"
            ));
        }
    }
    for config in [
        "Cargo.toml",
        "crates/engine/Cargo.toml",
        "clippy.toml",
        ".clippy.toml",
        "crates/engine/clippy.toml",
    ] {
        let text = std::fs::read_to_string(base.join(config)).unwrap_or_default();
        if text.contains(concat!("too_many", "_arguments"))
            || text.contains(concat!("too-many", "-arguments"))
        {
            found.push(format!("{config} configures the argument-count lint"));
        }
    }
    assert!(
        found.is_empty(),
        "pass an input struct instead of allowing a long argument list:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_argument_list_check_sees_every_attribute_form() {
    let lint = concat!("too_many", "_arguments");
    let sample = format!(
        "#[allow(clippy::{lint})]\nfn a() {{}}\n#![allow(clippy::{lint})]\n#[cfg_attr(test, allow(\n    \
         clippy::{lint},\n))]\n// clippy::{lint} is refused here\n#[allow(clippy::too_many_lines)]\n"
    );
    assert_eq!(argument_list_allowances(&sample), vec![1, 3, 5]);
}

/// The comments of `code`, each with its 1-based line: the text after `//` (and inside `/* */`)
/// that is not within a string or char literal. Raw strings (`r#"…"#`) and escapes are followed, so
/// a URL in a string is not a comment.
fn comments(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut line = 1usize;
    let mut i = 0usize;
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = code[i..].find('\n').map_or(b.len(), |n| i + n);
                out.push((line, code[i + 2..end].to_owned()));
                i = end;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = code[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n);
                let text = &code[i + 2..end];
                out.push((line, text.to_owned()));
                line += text.matches('\n').count();
                i = end + 2;
                continue;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && !(i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let start = i + 2 + hashes;
                    let end = code[start..].find(&close).map_or(b.len(), |n| start + n);
                    line += code[i..end].matches('\n').count();
                    i = end + close.len();
                    continue;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    if b.get(i) == Some(&b'\n') {
                        line += 1;
                    }
                    i += 1;
                }
            }
            // A char literal (`'"'`, `'\''`); a lifetime (`'a`) has no closing quote after one char.
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            _ => {}
        }
        i += 1;
    }
    out
}

/// Where `comment` cites a tracker issue by number: `issue 24`, `issues 3 and 5`, `issue #12`,
/// `(#31)`, `see #7`, `fixes #7`, … . A number after `#` counts only in those places, so a hex
/// colour (`#1a1b26`), an attribute (`#[derive]`), a doc heading (`# Safety`) or a rank (`` `#1` ``,
/// `ranked #1`) is not a citation.
fn cites_an_issue(comment: &str) -> bool {
    let c = comment.to_ascii_lowercase();
    let number_at = |rest: &str| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && !rest[digits..].starts_with(|ch: char| ch.is_ascii_alphanumeric())
    };
    let words: Vec<&str> = c.split_whitespace().collect();
    for pair in words.windows(2) {
        let word = pair[0].trim_start_matches(['(', '[', '`']);
        let next = pair[1].trim_start_matches('#');
        if matches!(word, "issue" | "issues") && number_at(next) {
            return true;
        }
    }
    c.match_indices('#').any(|(at, _)| {
        if !number_at(&c[at + 1..]) {
            return false;
        }
        let before = &c[..at];
        if before.ends_with('(') {
            return true;
        }
        let word = before
            .strip_suffix(' ')
            .and_then(|b| b.split_whitespace().next_back())
            .unwrap_or("");
        matches!(
            word,
            "see"
                | "issue"
                | "issues"
                | "fix"
                | "fixes"
                | "fixed"
                | "close"
                | "closes"
                | "closed"
                | "resolve"
                | "resolves"
                | "resolved"
                | "per"
                | "cf"
                | "cf."
                | "pr"
                | "ticket"
                | "bug"
        )
    })
}

/// Comments explain the code to a reader of the repository; a tracker's issue number means nothing
/// there. No comment of the non-test code in `src/` or `crates/` cites one.
#[test]
fn no_comment_cites_an_issue_number() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates"), &mut files);
    assert!(files.len() > 50, "found only {} sources", files.len());
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        let test_only = rel == "src/source_checks.rs"
            || rel.ends_with("/tests.rs")
            || rel.ends_with("_tests.rs")
            || rel.contains("/tests/")
            || rel.contains("/benches/");
        if test_only {
            continue;
        }
        let code = non_test_code(&std::fs::read_to_string(f).unwrap());
        for (line, text) in comments(&code) {
            if cites_an_issue(&text) {
                found.push(format!("{rel}:{line}: //{text}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the code does and why, not which issue asked for it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_issue_number_check_flags_citations_and_nothing_else() {
    for cited in [
        " kept for issue 24",
        "/ see issue #12 for the reason",
        " the old bound (#31)",
        " see #7",
        "/ Fixes #3: the lock.",
        " issues 3 and 5 asked for it",
    ] {
        assert!(cites_an_issue(cited), "{cited:?}");
    }
    for plain in [
        " a file issue (a stray)",
        " #[derive(Debug)] on every row",
        "/ # Safety",
        " the background, #1a1b26",
        "/ `#1` is the top of the list",
        " ranked #1 by age",
        " 24 issues at most",
        " the issue is the size: 3 MiB",
    ] {
        assert!(!cites_an_issue(plain), "{plain:?}");
    }
    let code =
        "let u = \"http://x\"; // see #7\nlet c = '\"'; /* (#9) */ let r = r#\"// #8\"#;\n// ok\n";
    assert_eq!(
        comments(code),
        vec![
            (1, " see #7".to_owned()),
            (2, " (#9) ".to_owned()),
            (3, " ok".to_owned())
        ]
    );
}

/// Messages a person reads begin the way ripgrep's and cargo's do: `error: …`, `warning: …`, lower
/// case. No message in the shells or the engine is spelled `Error: …` or `Warning: …`.
#[test]
fn messages_say_error_in_lower_case() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates/engine/src"), &mut files);
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in non_test_code(&text).lines().enumerate() {
            if ["\"Error: ", "\"Warning: ", "\"ERROR: ", "\"WARNING: "]
                .iter()
                .any(|w| line.contains(w))
            {
                bad.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "say `error: …` / `warning: …`:\n{}",
        bad.join("\n")
    );
}

/// The leaves of the `use` tree that starts at `text` (after `use `): each path spelled out, and the byte
/// length of the tree up to its `;`. `a::{b, c::{d as e}}` gives `a::b` and `a::c::d`.
fn use_leaves(text: &str) -> (Vec<String>, usize) {
    let end = text.find(';').unwrap_or(text.len());
    let mut leaves = Vec::new();
    let mut stack: Vec<String> = vec![String::new()];
    let mut path = String::new();
    let mut skip_alias = false;
    let flush = |path: &mut String, stack: &[String], leaves: &mut Vec<String>| {
        if !path.is_empty() {
            let prefix = stack.last().map(String::as_str).unwrap_or("");
            let leaf = format!("{prefix}{path}");
            leaves.push(leaf.strip_suffix("::self").unwrap_or(&leaf).to_owned());
            path.clear();
        }
    };
    for token in text[..end]
        .split_inclusive(['{', '}', ','])
        .flat_map(|t| {
            let (body, sep) = t.split_at(t.len() - usize::from(t.ends_with(['{', '}', ','])));
            [body.trim(), sep]
        })
        .filter(|t| !t.is_empty())
    {
        match token {
            "{" => {
                let prefix = stack.last().cloned().unwrap_or_default();
                stack.push(format!("{prefix}{path}"));
                path.clear();
            }
            "}" => {
                flush(&mut path, &stack, &mut leaves);
                stack.pop();
            }
            "," => {
                flush(&mut path, &stack, &mut leaves);
                skip_alias = false;
            }
            words => {
                for word in words.split_whitespace() {
                    if word == "as" {
                        skip_alias = true;
                    } else if !skip_alias {
                        path.push_str(word);
                    }
                }
            }
        }
    }
    flush(&mut path, &stack, &mut leaves);
    (leaves, end)
}

/// What breaks the engine's curated surface in its `lib.rs`: a public module declared from a file (it would
/// publish every `pub` item in it), a facade module (`pub mod x { … }`) holding anything but re-exports and
/// facade modules, and a re-export of a whole module (`modules`, the engine's module paths), of a glob, or
/// of something that is not the engine's own (`crate::…`).
fn surface_problems(lib: &str, modules: &std::collections::BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut depth = 0usize;
    let mut rest = lib.trim_start();
    while !rest.is_empty() {
        let line_end = rest.find('\n').unwrap_or(rest.len());
        let line = rest[..line_end].trim_end();
        let taken = if let Some(tree) = rest.strip_prefix("pub use ") {
            let (leaves, len) = use_leaves(tree);
            for leaf in leaves {
                match leaf.strip_prefix("crate::") {
                    _ if leaf.contains('*') => problems.push(format!("glob re-export {leaf}")),
                    Some(path) if modules.contains(path) => {
                        problems.push(format!("re-export of the whole module {path}"));
                    }
                    Some(_) => {}
                    None => problems.push(format!("re-export of {leaf}, not the engine's own")),
                }
            }
            "pub use ".len() + len + 1
        } else if rest.starts_with('#') {
            // An attribute, to its closing bracket (`#![cfg_attr(` spans lines).
            let mut open = 0usize;
            rest.char_indices()
                .find_map(|(i, c)| {
                    open = match c {
                        '[' => open + 1,
                        ']' => open.saturating_sub(1),
                        _ => open,
                    };
                    (c == ']' && open == 0).then_some(i + 1)
                })
                .unwrap_or(rest.len())
        } else {
            if line.starts_with("pub mod ") && line.ends_with(';') {
                problems.push(format!("`{line}` publishes a whole module"));
            } else if line.starts_with("pub mod ") && line.ends_with('{') {
                depth += 1;
            } else if line == "}" && depth > 0 {
                depth -= 1;
            } else if depth > 0 && !line.starts_with("//") {
                problems.push(format!(
                    "a facade module holds `{line}`: it only re-exports"
                ));
            }
            line_end
        };
        rest = rest[taken.min(rest.len())..].trim_start();
    }
    problems
}

/// The engine's module paths (`bus`, `bus::queue`, …), from its source files.
fn engine_modules(src: &Path) -> std::collections::BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).ok()?.with_extension("");
            let parts: Vec<_> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let parts = match parts.split_last() {
                Some((last, init)) if last == "mod" || last == "lib" => init.to_vec(),
                _ => parts,
            };
            (!parts.is_empty()).then(|| parts.join("::"))
        })
        .collect()
}

/// The engine offers one list, its `lib.rs`: its modules are private (so a caller cannot reach past the
/// list; the compiler refuses `engine::bus::queue::…`), the `unreachable_pub` and `unnameable_types` lints
/// keep every `pub` item either listed or `pub(crate)`, and the list itself re-exports items, never a
/// whole module.
#[test]
fn the_engine_offers_one_curated_list() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = base.join("crates/engine/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let modules = engine_modules(&src);
    assert!(modules.contains("bus::queue"), "{modules:?}");
    assert_eq!(surface_problems(&lib, &modules), Vec::<String>::new());
    for lint in ["#![warn(unreachable_pub)]", "#![warn(unnameable_types)]"] {
        assert!(lib.contains(lint), "crates/engine/src/lib.rs lost {lint}");
    }
}

#[test]
fn the_surface_check_refuses_an_open_module_and_a_facade_with_code() {
    let modules = ["bus".to_owned(), "bus::queue".to_owned()].into();
    let good = "mod bus;\n// Bus.\npub use crate::bus::{Bus, queue::{Filter as QueueFilter, read}};\n\
                /// Reading.\npub mod queue {\n    pub use crate::bus::queue::{Page, tail};\n}\n";
    assert_eq!(surface_problems(good, &modules), Vec::<String>::new());
    let bad = "pub mod bus;\npub use crate::bus::queue;\npub use crate::bus::{self as b, queue::*};\n\
               pub use serde_json::Value;\npub mod queue {\n    pub use crate::bus::queue::Page;\n    \
               pub fn read() {}\n}\n";
    assert_eq!(
        surface_problems(bad, &modules),
        [
            "`pub mod bus;` publishes a whole module",
            "re-export of the whole module bus::queue",
            "re-export of the whole module bus",
            "glob re-export crate::bus::queue::*",
            "re-export of serde_json::Value, not the engine's own",
            "a facade module holds `pub fn read() {}`: it only re-exports",
        ]
    );
}

/// The engine's floors, lowest first: a module imports only modules of a lower floor, and one of its
/// own floor only when [`ENGINE_TIES`] names the pair. `lib` (the crate's curated list) is the top.
/// ARCHITECTURE.md ("Floors") says why each module stands where it does; a new top-level module
/// takes its place here. `scripts/module-graph.py` reads this table too.
const ENGINE_FLOORS: &[&[&str]] = &[
    &["error", "words"],
    &["store"],
    &["journal", "trace"],
    &["bus"],
    &["conductor", "cost"],
    &["bridge", "history"],
    &["validate"],
    &["health"],
    &["lib"],
];

/// Modules of one floor that import each other: submit and ack call `cost::hook`, and `cost` acts
/// through the `Conductor` (ARCHITECTURE.md, "Floors").
const ENGINE_TIES: &[(&str, &str)] = &[("conductor", "cost")];

/// `code` without its comments (doc comments included) and without the text of its string and char
/// literals (a string stays as `""`), as [`comments`] reads them: what a path in it names is code.
fn without_comments_and_strings(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0usize;
    let mut kept = 0usize;
    let cut = |out: &mut String, kept: &mut usize, from: usize, to: usize, keep: &str| {
        out.push_str(&code[*kept..from]);
        out.push_str(keep);
        *kept = to.min(b.len());
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = code[i..].find('\n').map_or(b.len(), |n| i + n);
                cut(&mut out, &mut kept, i, end, "");
                i = end;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = code[i + 2..].find("*/").map_or(b.len(), |n| i + 4 + n);
                cut(&mut out, &mut kept, i, end, " ");
                i = end;
                continue;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && !(i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let start = i + 2 + hashes;
                    let end = code[start..]
                        .find(&close)
                        .map_or(b.len(), |n| start + n + close.len());
                    cut(&mut out, &mut kept, i, end, "\"\"");
                    i = end;
                    continue;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                cut(&mut out, &mut kept, start, i + 1, "\"\"");
            }
            // A char literal (`'"'`, `'\''`); a lifetime (`'a`) has no closing quote after one char.
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                let start = i;
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                cut(&mut out, &mut kept, start, i + 1, "' '");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => {
                cut(&mut out, &mut kept, i, i + 3, "' '");
                i += 2;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&code[kept.min(b.len())..]);
    out
}

/// The crate-relative paths the code of the engine module `module` (`["conductor", "submit"]`; `[]`
/// for lib.rs) names: every leaf of its `use` trees and every path written in its code that starts
/// with `crate::`, `super::` or `self::`, spelled from the crate's root (`bus::queue::Filter`). A
/// path through an extern crate or a child module's name is left out (it stays in the module).
fn engine_paths(module: &[&str], code: &str) -> Vec<String> {
    let absolute = |path: &str| -> Option<String> {
        let mut segs: Vec<&str> = path.split("::").collect();
        let mut base: Vec<&str> = match segs.first() {
            Some(&"crate") => {
                segs.remove(0);
                Vec::new()
            }
            Some(&"super") | Some(&"self") => module.to_vec(),
            _ => return None,
        };
        while let Some(&s) = segs.first() {
            match s {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            segs.remove(0);
        }
        base.extend(segs);
        (!base.is_empty()).then(|| base.join("::"))
    };
    let code = without_comments_and_strings(code);
    let mut out = Vec::new();
    let mut rest_of_code = String::new();
    let mut rest = code.as_str();
    // The `use` items first (their trees are expanded into leaves), then the code between them.
    loop {
        let at = rest.match_indices("use ").find(|(i, _)| {
            let line_start = rest[..*i].rfind('\n').map_or(0, |n| n + 1);
            let before = rest[line_start..*i].trim();
            before.is_empty() || before == "pub" || before.starts_with("pub(")
        });
        let Some((at, _)) = at else {
            rest_of_code.push_str(rest);
            break;
        };
        rest_of_code.push_str(&rest[..at]);
        let tree = &rest[at + "use ".len()..];
        let (leaves, len) = use_leaves(tree);
        out.extend(
            leaves
                .iter()
                .filter_map(|l| absolute(l.trim_end_matches("::*"))),
        );
        rest = &tree[(len + 1).min(tree.len())..];
    }
    let b = rest_of_code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in rest_of_code.match_indices(start) {
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue;
            }
            let len = rest_of_code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest_of_code.len() - at);
            let path = rest_of_code[at..at + len].trim_end_matches(':');
            out.extend(absolute(path));
        }
    }
    out
}

/// Every import of `files` (path under `crates/engine/src`, text) against [`ENGINE_FLOORS`] and
/// [`ENGINE_TIES`]: to a module of a higher floor, to one of the same floor that is not a tie, to
/// an item through the crate's root (`crate::Conductor`: inside the engine an item is named by its
/// module), and from or to a module on no floor. Test code (from the first `#[cfg(test)]`) is not
/// read.
fn floor_problems(files: &[(String, String)], modules: &[&str]) -> Vec<String> {
    let floor_of = |m: &str| ENGINE_FLOORS.iter().position(|f| f.contains(&m));
    let tie = |a: &str, b: &str| {
        ENGINE_TIES
            .iter()
            .any(|&(x, y)| (x, y) == (a, b) || (y, x) == (a, b))
    };
    let mut problems = Vec::new();
    for (rel, text) in files {
        let mut module: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        if matches!(module.last(), Some(&"mod") | Some(&"lib")) {
            module.pop();
        }
        let from = module.first().copied().unwrap_or("lib");
        let Some(from_floor) = floor_of(from) else {
            problems.push(format!(
                "{rel}: module {from} is on no floor (add it to ENGINE_FLOORS)"
            ));
            continue;
        };
        let mut seen = std::collections::BTreeSet::new();
        for path in engine_paths(&module, &non_test_code(text)) {
            let to = path.split("::").next().unwrap_or_default().to_owned();
            if to == from || !seen.insert(path.clone()) {
                continue;
            }
            if !modules.contains(&to.as_str()) {
                problems.push(format!(
                    "{rel}: crate::{path} is reached through the crate's root; name its module"
                ));
                continue;
            }
            match floor_of(&to) {
                None => problems.push(format!(
                    "{rel}: module {to} is on no floor (add it to ENGINE_FLOORS)"
                )),
                Some(f) if f > from_floor || (f == from_floor && !tie(from, &to)) => {
                    problems.push(format!(
                        "{rel}: {from} (floor {from_floor}) imports {path} from {to} (floor {f})"
                    ));
                }
                Some(_) => {}
            }
        }
    }
    problems
}

/// The engine's modules keep their floors ([`ENGINE_FLOORS`]): no import runs up a floor or across
/// one, but for the conductor/cost tie, so the one import loop between modules is that tie.
#[test]
fn engine_modules_keep_their_floors() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = base.join("crates/engine/src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(&src)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let test_file = rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs");
            (!test_file).then(|| Some((rel, std::fs::read_to_string(p).ok()?)))?
        })
        .collect();
    let modules: std::collections::BTreeSet<String> = engine_modules(&src)
        .iter()
        .map(|m| m.split("::").next().unwrap_or_default().to_owned())
        .collect();
    let modules: Vec<&str> = modules.iter().map(String::as_str).collect();
    assert!(
        modules.contains(&"conductor") && modules.contains(&"store"),
        "{modules:?}"
    );
    for m in &modules {
        assert!(
            ENGINE_FLOORS.iter().any(|f| f.contains(m)),
            "the engine module {m} is on no floor: add it to ENGINE_FLOORS (and ARCHITECTURE.md)"
        );
    }
    // The check reads real imports: the conductor stands on the store.
    let conductor = files.iter().find(|(r, _)| r == "conductor/mod.rs").unwrap();
    assert!(
        engine_paths(&["conductor"], &conductor.1)
            .iter()
            .any(|p| p.starts_with("store::")),
        "the floor check found no import of the store in conductor/mod.rs"
    );
    let problems = floor_problems(&files, &modules);
    assert!(
        problems.is_empty(),
        "imports against the engine's floors (move the item to the floor that owns it, or, for a \
         new module, give it a floor in ENGINE_FLOORS and ARCHITECTURE.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_floor_check_sees_an_import_against_the_floors() {
    let modules = [
        "bus",
        "conductor",
        "cost",
        "journal",
        "store",
        "trace",
        "validate",
    ];
    let file = |rel: &str, text: &str| (rel.to_owned(), text.to_owned());
    let files = [
        // Down a floor, a tie, a comment, a string, test code, an extern crate: all fine.
        file(
            "conductor/submit.rs",
            "use crate::{bus::Bus, store::{Root, time::now_ts}};\nuse serde::Serialize;\n\
             fn f() { crate::cost::hook::after(); super::crash_point(\"crate::bridge::x\"); }\n\
             // crate::bridge::inbound_peer\n#[cfg(test)]\nmod tests { use crate::bridge::x; }\n",
        ),
        file("cost/hook.rs", "use crate::conductor::Conductor;\n"),
        // Up a floor: in a use tree, inline, through `super::super`.
        file(
            "bus/archive.rs",
            "use crate::{store::Root, conductor::crash_point};\nfn f() {}\n",
        ),
        file(
            "store/settings.rs",
            "fn f() { let c = crate::cost::CostConfig::parse(None); }\n",
        ),
        file("store/paths.rs", "pub(crate) use super::super::bus::Bus;\n"),
        // Across one floor without a tie; through the crate's root.
        file("trace.rs", "use crate::journal::Origin;\n"),
        file("journal.rs", "fn f() -> crate::Problem { todo!() }\n"),
        file("metrics/mod.rs", "use crate::store::Root;\n"),
    ];
    assert_eq!(
        floor_problems(&files, &modules),
        [
            "bus/archive.rs: bus (floor 3) imports conductor::crash_point from conductor (floor 4)",
            "store/settings.rs: store (floor 1) imports cost::CostConfig::parse from cost (floor 4)",
            "store/paths.rs: store (floor 1) imports bus::Bus from bus (floor 3)",
            "trace.rs: trace (floor 2) imports journal::Origin from journal (floor 2)",
            "journal.rs: crate::Problem is reached through the crate's root; name its module",
            "metrics/mod.rs: module metrics is on no floor (add it to ENGINE_FLOORS)",
        ]
    );
}

/// The modules `text` declares from other files (`mod x;`, `pub(crate) mod x;`, …), but test
/// modules (`mod tests;`, or one right after a `#[cfg(test)]` line).
fn declared_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_test_attr = false;
    for line in text.lines() {
        let t = line.trim();
        let vis_end = if t.starts_with("pub(") {
            t.find(") ").map_or(0, |n| n + 2)
        } else if t.starts_with("pub ") {
            4
        } else {
            0
        };
        let decl = t[vis_end..]
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
            .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if let Some(name) = decl
            && !after_test_attr
            && name != "tests"
        {
            out.push(name.to_owned());
        }
        if t.starts_with('#') {
            after_test_attr |= t.starts_with("#[cfg(test)]");
        } else if !t.is_empty() {
            after_test_attr = false;
        }
    }
    out
}

/// The modules a file's module map leaves out. A file has a map when its `//!` header lists its
/// modules in bullets (a `//! - ` line naming one of them in backticks, `[`x`]` or `` `x` ``); then
/// every module it declares is named in that header.
fn module_map_misses(text: &str) -> Vec<String> {
    let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
    let declared = declared_modules(text);
    let names = |line: &str| -> Vec<String> {
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(|n| n.trim_start_matches('[').trim_end_matches(']').to_owned())
            .collect()
    };
    let has_map = header
        .iter()
        .any(|l| l.starts_with("//! - ") && names(l).iter().any(|n| declared.contains(n)));
    if !has_map {
        return Vec::new();
    }
    let named: Vec<String> = header.iter().flat_map(|l| names(l)).collect();
    declared
        .into_iter()
        .filter(|m| !named.contains(m))
        .collect()
}

/// Module maps are true: a module whose doc lists its modules (`//! - [`x`]: …`) names every module
/// it declares, so a newcomer reading the map sees the whole of it.
#[test]
fn module_maps_name_every_module() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    rust_files(&base.join("crates/engine/src"), &mut files);
    let mut maps = 0;
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(base).unwrap().display().to_string();
        if text.lines().any(|l| l.starts_with("//! - ")) {
            maps += 1;
        }
        for m in module_map_misses(&text) {
            problems.push(format!("{rel}: its module map does not name `{m}`"));
        }
    }
    assert!(maps >= 5, "found only {maps} module maps");
    assert!(
        problems.is_empty(),
        "name each module in its parent's map (a `//! - [`x`]: what it holds` line):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_module_map_check_sees_a_module_left_out() {
    let text = "//! The console.\n//!\n//! - [`app`]: the state; [`views`]: drawing.\n//! - `actions`: \
                one per action.\n\npub mod app;\npub(crate) mod actions;\nmod views;\npub mod theme;\n\
                #[cfg(test)]\n#[path = \"snapshot_tests.rs\"]\nmod snapshot_tests;\nmod tests;\n";
    assert_eq!(declared_modules(text), ["app", "actions", "views", "theme"]);
    assert_eq!(module_map_misses(text), ["theme"]);
    // A header without a bulleted map of its modules asks nothing.
    let no_map = "//! The bus: [`queue`] and more.\n//! - a bullet about nothing\n\nmod queue;\nmod locks;\n";
    assert_eq!(module_map_misses(no_map), Vec::<String>::new());
}

/// The operator actions the `actions!` table registers: (the `Op` variant, its module).
fn registered_actions(registration: &str) -> Vec<(String, String)> {
    let Some((_, table)) = registration.split_once("\nactions! {\n") else {
        return Vec::new();
    };
    let table = table.split_once("\n}").map_or(table, |(t, _)| t);
    let mut out = Vec::new();
    let mut variant = None;
    for l in table.lines() {
        let t = l.trim_start();
        if l.len() - t.len() == 4 && t.starts_with(|c: char| c.is_ascii_uppercase()) {
            variant = t.split([' ', '{']).next().map(str::to_owned);
        }
        if let (Some(v), Some((_, m))) = (&variant, t.split_once("} => ")) {
            out.push((v.clone(), m.trim_end_matches(',').trim().to_owned()));
            variant = None;
        }
    }
    out
}

/// Where an `Op` variant is named outside its action's module: `(file, variant)` for every
/// `Op::Variant` in the non-test, non-comment code of `files` (repo-relative path, text) that is
/// not `src/console/actions/<its module>.rs`.
fn ops_outside_their_module(
    actions: &[(String, String)],
    files: &[(String, String)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let code: String = non_test_code(text)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (variant, module) in actions {
            if *rel == format!("src/console/actions/{module}.rs") {
                continue;
            }
            let named = code
                .match_indices(&format!("Op::{variant}"))
                .any(|(at, m)| {
                    let before = code[..at].chars().next_back();
                    let after = code[at + m.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
            if named {
                out.push(format!("{rel}: Op::{variant} (its module is {module})"));
            }
        }
    }
    out
}

/// An operator action is handled in its own module only (`src/console/actions/<action>.rs`):
/// everyone else asks an `Op` through the methods the `actions!` table generates, so adding an
/// action is its module plus its registration. Test code may build ops of any kind.
#[test]
fn every_op_is_handled_in_its_module() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let registration = std::fs::read_to_string(base.join("src/console/actions/mod.rs")).unwrap();
    let actions = registered_actions(&registration);
    assert!(
        actions.len() >= 12 && actions.iter().any(|(v, m)| v == "Ack" && m == "ack"),
        "the actions! table is read: {actions:?}"
    );
    let mut paths = Vec::new();
    rust_files(&base.join("src"), &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(base)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let test_file = rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs");
            (!test_file && rel != "src/source_checks.rs")
                .then(|| Some((rel, std::fs::read_to_string(p).ok()?)))?
        })
        .collect();
    let outside = ops_outside_their_module(&actions, &files);
    assert!(
        outside.is_empty(),
        "an Op is handled outside its action's module (ask it through `Op`'s methods, or move \
         the code into the module):\n{}",
        outside.join("\n")
    );
}

#[test]
fn the_action_check_sees_a_variant_and_a_lookalike() {
    let registration = "//! the table\nactions! {\n    /// doc\n    Abort { workflow_id: WorkflowId, reason: String } => abort,\n    Approve {\n        handoff_id: HandoffId,\n    } => approve,\n}\n";
    let actions = registered_actions(registration);
    assert_eq!(
        actions,
        [
            ("Abort".into(), "abort".into()),
            ("Approve".into(), "approve".into())
        ]
    );
    let file = |rel: &str, text: &str| (rel.to_owned(), text.to_owned());
    let files = [
        file("src/console/actions/abort.rs", "let op = Op::Abort { .. };"),
        file(
            "src/console/app/flows.rs",
            "if let Op::Abort { .. } = op {}",
        ),
        file(
            "src/console/marks.rs",
            "// Op::Approve in a comment\nOp::Approved; MyOp::Approve;",
        ),
        file(
            "src/console/shown.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests { Op::Approve {} }",
        ),
    ];
    assert_eq!(
        ops_outside_their_module(&actions, &files),
        ["src/console/app/flows.rs: Op::Abort (its module is abort)"]
    );
}

/// Where `App` is implemented outside `src/console/app/` (`impl App`, `impl … for App`): the
/// lines, 1-based, of `code` (comments and strings blanked).
fn app_impls(code: &str) -> Vec<usize> {
    let code = without_comments_and_strings(code);
    let words = |l: &str| -> Vec<String> {
        l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let w = words(line);
        if w.first().map(String::as_str) != Some("impl") {
            continue;
        }
        // `impl App {`, `impl<'a> App {`, `impl Trait for App {` (not `App` inside another name).
        let target = match w.iter().position(|x| x == "for") {
            Some(at) => w.get(at + 1),
            None => w
                .iter()
                .skip(1)
                .find(|x| x.chars().next().is_some_and(char::is_uppercase)),
        };
        if target.map(String::as_str) == Some("App") {
            out.push(i + 1);
        }
    }
    out
}

/// `App`'s fields declared with any `pub` in `src/console/app/mod.rs`: their names.
fn pub_app_fields(text: &str) -> Vec<String> {
    let Some((_, rest)) = text.split_once("\npub struct App {\n") else {
        return vec!["<no `pub struct App {` found>".to_owned()];
    };
    let body = rest.split("\n}\n").next().unwrap_or("");
    body.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("pub ") || l.starts_with("pub("))
        .filter_map(|l| {
            let after = l.split_once(' ')?.1;
            Some(after.split(':').next()?.trim().to_owned())
        })
        .collect()
}

/// `App` is a host: it is implemented only under `src/console/app/` (an action, a pane or a helper
/// is a free function of its module taking the `App`), and its fields are not `pub` (read through
/// its methods).
#[test]
fn the_app_is_implemented_in_its_module_and_keeps_its_fields() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&base.join("src"), &mut files);
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(base).unwrap().display().to_string();
        if rel.starts_with("src/console/app/") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for line in app_impls(&non_test_code(&text)) {
            problems.push(format!(
                "{rel}:{line}: `App` is implemented outside src/console/app/; make it a free \
                 function of this module taking `app: &App` / `&mut App`"
            ));
        }
    }
    let app = std::fs::read_to_string(base.join("src/console/app/mod.rs")).unwrap();
    let public = pub_app_fields(&app);
    for f in &public {
        problems.push(format!(
            "src/console/app/mod.rs: `App::{f}` is `pub`; keep it private and give the others a \
             method (`app.{f}()`, a setter for what they change)"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_app_check_sees_an_impl_outside_and_a_pub_field() {
    let code = "use x;\nimpl App {\n    fn f(&self) {}\n}\nimpl<'a> App {\n}\nimpl fmt::Debug for App \
                {\n}\nimpl AppState {\n}\nimpl Act for Abort<'_> {\n}\n// impl App {\nlet s = \"impl App\";\n";
    assert_eq!(app_impls(code), [2, 5, 7]);
    let text = "/// The state.\npub struct App {\n    pub mode: Mode,\n    pub(crate) seen: Cell<u16>,\n    \
                hidden: bool,\n    /// pub doc: not a field\n}\n";
    assert_eq!(pub_app_fields(text), ["mode", "seen"]);
}
