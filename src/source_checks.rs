//! Rules about the source tree that the compiler cannot enforce, checked by reading the sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::store::layout;

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
