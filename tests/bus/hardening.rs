//! Issue 12 regressions on the bus side: planted links and hard links at the bus's lock files and
//! queue never lead a write outside the root (a decoy tree outside is compared whole).

use std::os::unix::fs::symlink;

use crate::common::Env;
use crate::decoy::Decoy;

#[test]
fn a_planted_lock_mutex_link_creates_nothing_outside() {
    for target in ["planted.lock", "victim.txt"] {
        let env = Env::new();
        let decoy = Decoy::new();
        let before = decoy.tree();
        let mutex = env.bus_dir().join(".lock_mutex");
        std::fs::remove_file(&mutex).unwrap();
        symlink(decoy.path(target), &mutex).unwrap();
        let err = env.refused(&["lock", "src/a.ts", "--worker", "w1"]);
        assert!(err.contains("symbolic link"), "{err}");
        env.refused(&[
            "heartbeat",
            "--worker",
            "w1",
            "--task",
            "t",
            "--status",
            "RUNNING",
        ]);
        decoy.assert_unchanged(&before, target);
    }
}

#[test]
fn a_planted_queue_link_or_hard_link_appends_nothing_outside() {
    let env = Env::new();
    let decoy = Decoy::new();
    let queue = env.bus_dir().join("queue.jsonl");
    std::fs::remove_file(&queue).unwrap();
    symlink(decoy.path("victim.txt"), &queue).unwrap();
    let before = decoy.tree();
    let err = env.refused(&["post", "PROGRESS", "--source", "w1"]);
    assert!(err.contains("symbolic link"), "{err}");
    env.refused(&["archive", "--track-id", "t1-done"]);
    decoy.assert_unchanged(&before, "symlinked queue");

    std::fs::remove_file(&queue).unwrap();
    std::fs::hard_link(decoy.path("victim.txt"), &queue).unwrap();
    let before = decoy.tree();
    let err = env.refused(&["post", "PROGRESS", "--source", "w1"]);
    assert!(err.contains("hard links"), "{err}");
    let err = env.refused(&["archive", "--track-id", "t1-done"]);
    assert!(err.contains("hard links"), "{err}");
    // Compare the decoy whole (the victim's link count is 2 while the queue names it; that is ours).
    decoy.assert_unchanged(&before, "hard-linked queue");
}

#[test]
fn an_overlong_ttl_is_refused_clearly_and_never_panics() {
    let env = Env::new();
    let locks = env.bus_dir().join("locks.json");
    let before = std::fs::read(&locks).unwrap();
    for ttl in [
        "99999999999d",
        "3000000d",
        "366d",
        "99999999999999999999999d",
    ] {
        let err = env.refused(&["lock", "src/a.ts", "--worker", "w1", "--ttl", ttl]);
        assert!(err.contains("365d"), "{ttl}: {err}");
        assert!(!err.contains("panicked"), "{ttl}: {err}");
    }
    assert_eq!(std::fs::read(&locks).unwrap(), before);
    let ok = env.ok(&["lock", "src/a.ts", "--worker", "w1", "--ttl", "365d"]);
    let expires = ok.to_string();
    assert!(!expires.contains("+10240"), "{expires}");
}
