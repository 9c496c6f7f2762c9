use super::*;
use crate::store::atomic::write_atomic;
use std::fs;
use std::os::unix::fs::PermissionsExt;

fn count(root: &Root) -> Option<u64> {
    let bytes = fs::read(root.dir.join(".tmp").join(COMMIT_LOCK)).ok()?;
    Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
}

fn root() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::at(dir.path());
    (dir, root)
}

#[test]
fn outside_an_act_every_write_syncs_itself() {
    let (dir, root) = root();
    let f = File::open(dir.path()).unwrap();
    assert!(!defer(f.as_fd()));
    write_atomic(&root, &dir.path().join("a.json"), b"{}\n").unwrap();
    assert_eq!(count(&root), None, "no round without an act");
}

#[test]
fn an_unheld_act_syncs_once_for_all_its_writes_and_nested_acts_share_it() {
    let (dir, root) = root();
    act_unheld(&root, || {
        for k in 0..5 {
            write_atomic(&root, &dir.path().join(format!("s/{k}.json")), b"{}\n")?;
        }
        act_unheld(&root, || {
            write_atomic(&root, &dir.path().join("t.json"), b"1\n")
        })?;
        // Written and visible before the commit, by rename, whole.
        assert_eq!(fs::read(dir.path().join("t.json")).unwrap(), b"1\n");
        assert_eq!(count(&root), None, "the inner act did not commit");
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&root), Some(1));
    act_unheld(&root, || {
        write_atomic(&root, &dir.path().join("u.json"), b"2\n")
    })
    .unwrap();
    assert_eq!(count(&root), Some(2));
    // An act that wrote nothing syncs nothing.
    act_unheld(&root, || Ok(())).unwrap();
    assert_eq!(count(&root), Some(2));
    let f = File::open(dir.path()).unwrap();
    assert!(!defer(f.as_fd()), "the act is closed");
}

#[test]
fn a_failed_act_still_syncs_what_it_wrote_and_returns_its_own_error() {
    let (dir, root) = root();
    let err = act_unheld(&root, || -> Result<()> {
        write_atomic(&root, &dir.path().join("a.json"), b"{}\n")?;
        Err(Error::refused("no"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("no"), "{err}");
    assert_eq!(count(&root), Some(1));
}

#[test]
fn a_panicking_act_leaves_the_thread_outside_any_act() {
    let (dir, root) = root();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = act_unheld(&root, || -> Result<()> {
            write_atomic(&root, &dir.path().join("a.json"), b"{}\n")?;
            panic!("boom")
        });
    }));
    assert!(caught.is_err());
    let f = File::open(dir.path()).unwrap();
    assert!(!defer(f.as_fd()));
    assert_eq!(count(&root), Some(1), "what it wrote was still synced");
}

#[test]
fn an_act_whose_writes_a_later_round_covered_does_not_sync_again() {
    let (dir, root) = root();
    act_unheld(&root, || {
        write_atomic(&root, &dir.path().join("a.json"), b"{}\n")
    })
    .unwrap();
    assert_eq!(count(&root), Some(1));
    let lock_path = dir.path().join(".tmp").join(COMMIT_LOCK);
    // Another process's waiter holds the lock shared: the act reads the count, then waits for
    // the lock exclusively.
    let other = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .unwrap();
    other.lock_shared().unwrap();
    let acting = {
        let root = root.clone();
        let path = dir.path().join("b.json");
        std::thread::spawn(move || act_unheld(&root, || write_atomic(&root, &path, b"{}\n")))
    };
    std::thread::sleep(Duration::from_millis(300));
    // A round that started after the act's writes completes (as its leader would record it).
    other.write_all_at(&2u64.to_le_bytes(), 0).unwrap();
    other.unlock().unwrap();
    acting.join().unwrap().unwrap();
    assert_eq!(
        count(&root),
        Some(2),
        "the act followed the round instead of leading one"
    );
    // With nobody else, the next act leads its own round.
    act_unheld(&root, || {
        write_atomic(&root, &dir.path().join("c.json"), b"{}\n")
    })
    .unwrap();
    assert_eq!(count(&root), Some(3));
}

#[test]
fn a_root_without_a_private_temporary_directory_syncs_each_act_alone() {
    let (dir, root) = root();
    fs::create_dir(dir.path().join(".tmp")).unwrap();
    fs::set_permissions(dir.path().join(".tmp"), fs::Permissions::from_mode(0o755)).unwrap();
    act_unheld(&root, || {
        write_atomic(&root, &dir.path().join("a.json"), b"{}\n")
    })
    .unwrap();
    assert_eq!(fs::read(dir.path().join("a.json")).unwrap(), b"{}\n");
    assert_eq!(
        count(&root),
        None,
        "no shared round in a directory others may enter"
    );
}

#[test]
fn a_holding_act_renames_after_its_data_round_and_reads_its_own_writes() {
    let (dir, root) = root();
    let a = dir.path().join("s/a.json");
    write_atomic(&root, &a, b"0\n").unwrap();
    act(&root, || {
        write_atomic(&root, &a, b"1\n")?;
        write_atomic(&root, &dir.path().join("s/b.json"), b"2\n")?;
        // Not in place yet (its data round has not run), but the act reads what it wrote.
        assert_eq!(fs::read(&a).unwrap(), b"0\n");
        assert!(!dir.path().join("s/b.json").exists());
        assert_eq!(crate::store::read::read_bytes(&a)?.unwrap(), b"1\n");
        assert!(crate::store::read::exists(&dir.path().join("s/b.json")));
        assert_eq!(count(&root), None, "no round before a barrier");
        Ok(())
    })
    .unwrap();
    // The data round, the renames, then the names round.
    assert_eq!(fs::read(&a).unwrap(), b"1\n");
    assert_eq!(fs::read(dir.path().join("s/b.json")).unwrap(), b"2\n");
    assert_eq!(count(&root), Some(2));
    let temps: Vec<_> = fs::read_dir(dir.path().join(".tmp"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert!(temps.is_empty(), "no temporary file left: {temps:?}");
}

#[test]
fn a_lock_released_in_a_holding_act_makes_its_renames_first() {
    let (dir, root) = root();
    let a = dir.path().join("a.json");
    act(&root, || {
        let lock = crate::store::lock::FileLock::exclusive(&root, &dir.path().join(".a.lock"))?;
        write_atomic(&root, &a, b"1\n")?;
        assert!(!a.exists());
        drop(lock);
        // The next holder of the lock reads it in place, its data covered by a round.
        assert_eq!(fs::read(&a).unwrap(), b"1\n");
        assert_eq!(count(&root), Some(1));
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&root), Some(2), "and the names round at the end");
}

#[test]
fn a_move_of_a_held_file_waits_with_it_and_the_act_reads_it_moved() {
    let (dir, root) = root();
    let from = dir.path().join("p/x.json");
    let to = dir.path().join("q/x.json");
    write_atomic(&root, &from, b"1\n").unwrap();
    act(&root, || {
        write_atomic(&root, &from, b"2\n")?;
        crate::store::atomic::rename_durable(&root, &from, &to)?;
        assert!(from.exists() && !to.exists(), "nothing renamed yet");
        assert_eq!(crate::store::read::read_bytes(&from)?, None);
        assert_eq!(crate::store::read::read_bytes(&to)?.unwrap(), b"2\n");
        assert!(!crate::store::read::exists(&from));
        Ok(())
    })
    .unwrap();
    assert!(!from.exists());
    assert_eq!(fs::read(&to).unwrap(), b"2\n");
    assert_eq!(count(&root), Some(2));
}

#[test]
fn a_failed_holding_act_still_makes_and_syncs_what_it_wrote() {
    let (dir, root) = root();
    let err = act(&root, || -> Result<()> {
        write_atomic(&root, &dir.path().join("a.json"), b"{}\n")?;
        Err(Error::refused("no"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("no"), "{err}");
    assert_eq!(fs::read(dir.path().join("a.json")).unwrap(), b"{}\n");
    assert_eq!(count(&root), Some(2));
}

#[test]
fn an_unheld_act_inside_a_holding_one_finds_its_renames_made() {
    let (dir, root) = root();
    let a = dir.path().join("a.json");
    act(&root, || {
        write_atomic(&root, &a, b"1\n")?;
        act_unheld(&root, || {
            // Made on entry, in order, after their data round.
            assert_eq!(fs::read(&a).unwrap(), b"1\n");
            write_atomic(&root, &dir.path().join("b.json"), b"2\n")?;
            assert!(dir.path().join("b.json").exists(), "renamed at once");
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(count(&root), Some(2));
}
