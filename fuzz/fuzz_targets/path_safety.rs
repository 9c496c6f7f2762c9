//! Path safety: any expanded artifact path is either refused by `Root::confine` or lies strictly
//! inside the root; any lock key normalises or is refused.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pantheon::Root;
use pantheon::engine::bus::locks::normalize_key;
use pantheon::engine::store::ids::{GodName, WorkflowId};

fn root() -> &'static (tempfile::TempDir, Root, std::path::PathBuf) {
    static R: OnceLock<(tempfile::TempDir, Root, std::path::PathBuf)> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/tmp")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), dir.path().join("root/link"))
            .unwrap();
        let canon = std::fs::canonicalize(dir.path().join("root")).unwrap();
        let root = Root::at(dir.path().join("root"));
        (dir, root, canon)
    })
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let (_d, root, canon) = root();
    let wf = WorkflowId::parse("wf_fuzz").unwrap();
    let p = root.expand(&s, &wf);
    if let Ok(real) = root.confine(&p) {
        assert!(
            real.starts_with(canon) && real != *canon,
            "{s:?} -> {}",
            real.display()
        );
        let rel = real.strip_prefix(canon).unwrap();
        assert!(
            !(rel.starts_with("link") && rel.components().count() > 1),
            "{s:?} reached through a symlink"
        );
    }
    if let Ok(k) = normalize_key(&s) {
        assert!(!k.contains("//") && !k.starts_with("./") && !k.is_empty());
    }
    if GodName::parse(&s).is_ok() {
        assert!(!s.contains('/') && s != "." && s != "..");
    }
});
