//! The shared foreign-root fixture (`../shared/fixtures/foreign-root`, a root as foreign writers leave
//! it). Included with `#[path]` by every test crate and by the library's unit tests, so all of them find
//! it the same way. Tests read it in place or copy it; they never write into it.

// Each includer uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `$PANTHEON_FIXTURE_ROOT` when set, else `shared/fixtures/foreign-root` beside the checkout (or one or
/// two levels up, for clones made inside the workspace).
pub fn fixture_root() -> PathBuf {
    if let Some(p) = std::env::var_os("PANTHEON_FIXTURE_ROOT").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    ["../shared", "../../shared", "shared"]
        .iter()
        .map(|rel| here.join(rel).join("fixtures/foreign-root"))
        .find(|p| p.exists())
        .unwrap_or_else(|| here.join("../shared/fixtures/foreign-root"))
}

/// Copies a directory tree (files by content; links are copied as what they point to).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}
