//! The foreign-root fixture (`tests/fixtures/foreign-root`, a root as foreign writers leave it; its
//! README lists what it holds). Included with `#[path]` by every test crate and by the library's unit
//! tests, so all of them find it the same way. Tests read it in place or copy it; they never write into it.

// Each includer uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The fixture in this repository. `$PANTHEON_FIXTURE_ROOT` (opt-in, never needed) points the tests at
/// another root of the same shape instead, for example a newer copy kept outside the repository.
pub fn fixture_root() -> PathBuf {
    if let Some(p) = std::env::var_os("PANTHEON_FIXTURE_ROOT").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    repo_dir().join("tests/fixtures/foreign-root")
}

/// The repository's top directory: the manifest directory of the package being tested, or two levels
/// above it for the packages under `crates/`.
pub fn repo_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.parent().and_then(Path::file_name) == Some("crates".as_ref()) {
        here.join("../..")
    } else {
        here.to_path_buf()
    }
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
            // The committed files may be read-only; copies are for writing.
            let mut perm = std::fs::metadata(&dest).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dest, perm).unwrap();
        }
    }
}
