//! A decoy directory outside the root for planted-link tests: its whole tree (paths, contents, modes)
//! is snapshotted before a command and compared after, so any write that escapes the root shows.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A directory outside every root, holding a few files a planted link can point at.
pub struct Decoy {
    pub dir: tempfile::TempDir,
}

/// One entry of a tree: what it is, its bytes (or link target) and its mode.
pub type Tree = BTreeMap<PathBuf, (String, Vec<u8>, u32)>;

impl Decoy {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("victim.txt"), b"do not touch\n").unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/keep.json"), b"{}\n").unwrap();
        Self { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn tree(&self) -> Tree {
        tree(self.dir.path())
    }

    /// Asserts the decoy tree is exactly `before`.
    pub fn assert_unchanged(&self, before: &Tree, what: &str) {
        let after = self.tree();
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{what}: entries appeared or vanished outside the root"
        );
        assert_eq!(before, &after, "{what}: a file outside the root changed");
    }
}

/// Every entry under `dir` (links recorded, never followed).
pub fn tree(dir: &Path) -> Tree {
    let mut out = BTreeMap::new();
    fn go(d: &Path, base: &Path, out: &mut Tree) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            let mode = m.permissions().mode();
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(
                    rel,
                    (
                        "link".into(),
                        t.as_os_str().as_encoded_bytes().to_vec(),
                        mode,
                    ),
                );
            } else if m.is_dir() {
                out.insert(rel, ("dir".into(), Vec::new(), mode));
                go(&p, base, out);
            } else {
                out.insert(rel, ("file".into(), std::fs::read(&p).unwrap(), mode));
            }
        }
    }
    go(dir, dir, &mut out);
    out
}
