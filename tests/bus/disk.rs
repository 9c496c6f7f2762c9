//! A full disk: a failed append leaves the queue byte for byte as it was, and says why once.

use std::path::Path;
use std::process::Command;

use crate::common::{Env, bin, seed_reads_queue, strict_lines};

/// A valid envelope line padded so that it is exactly `len` bytes, newline included.
fn padded_line(len: usize) -> String {
    let head = r#"{"id":"msg-pad","type":"PAD","source":"t","timestamp":"2026-02-01T12:00:00Z","payload":{"x":""#;
    let tail = "\"}}\n";
    assert!(len > head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
}

/// Pads the queue of `env` with one line so that it is `len` bytes long; returns its bytes.
fn fill_queue_to(env: &Env, len: usize) -> Vec<u8> {
    let q = env.bus_dir().join("queue.jsonl");
    let have = std::fs::metadata(&q).unwrap().len() as usize;
    let mut f = std::fs::OpenOptions::new().append(true).open(&q).unwrap();
    std::io::Write::write_all(&mut f, padded_line(len - have).as_bytes()).unwrap();
    std::fs::read(&q).unwrap()
}

fn assert_said_once(stderr: &str, cause: &str) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
    assert!(stderr.contains("queue.jsonl"), "{stderr}");
}

#[test]
fn a_post_cut_short_by_the_file_size_limit_leaves_the_queue_as_it_was() {
    // `ulimit -f 8` (bash: 1 KiB blocks) lets 8192 bytes be written: the queue stops 40 bytes short,
    // so the post's line goes out partly, then the write fails with EFBIG (SIGXFSZ ignored, as a
    // process that handles it sees it).
    let env = Env::new();
    let before = fill_queue_to(&env, 8192 - 40);
    let out = Command::new("bash")
        .args([
            "-c",
            r#"trap '' XFSZ; ulimit -f 8; exec "$0" --root "$1" bus --track t1 post PROGRESS --source w --payload '{"note":"a line longer than forty bytes"}'"#,
        ])
        .arg(bin())
        .arg(env.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_said_once(&stderr, "File too large");
    assert!(stderr.contains("size limit"), "{stderr}");
    let q = env.bus_dir().join("queue.jsonl");
    assert_eq!(std::fs::read(&q).unwrap(), before, "the queue changed");
    seed_reads_queue(&env.bus_dir());
    env.ok(&["post", "PROGRESS", "--source", "after"]);
    assert_eq!(
        strict_lines(&q).last().unwrap()["source"],
        "after",
        "the next post appends a whole line"
    );
}

/// A tmpfs mounted for one test, unmounted when it ends (also on panic).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    /// Mounts a tmpfs of `kib` KiB; `None` when this process may not mount (not root).
    fn mount(kib: usize) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then_some(Self(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_post_on_a_full_disk_leaves_the_queue_as_it_was_and_says_so_once() {
    let Some(fs) = Tmpfs::mount(256) else {
        eprintln!(
            "skipped: cannot mount a tmpfs here (needs root); the file-size-limit test covers the rollback"
        );
        return;
    };
    let env = Env {
        dir: tempfile::tempdir_in(fs.path()).unwrap(),
        track: "t1".into(),
    };
    env.ok(&["init"]);
    // The queue ends 40 bytes before a page boundary; every other page of the file system is taken,
    // so the post's line fills those 40 bytes and then finds no space.
    let before = fill_queue_to(&env, 8192 - 40);
    let mut filler = std::fs::File::create(fs.path().join("filler")).unwrap();
    let page = vec![b'f'; 4096];
    while std::io::Write::write_all(&mut filler, &page).is_ok() {}
    drop(filler);
    let out = env
        .cmd()
        .args(["bus", "--track", "t1", "post", "PROGRESS", "--source", "w"])
        .args(["--payload", r#"{"note":"a line longer than forty bytes"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_said_once(&stderr, "No space left on device");
    assert!(stderr.contains("the disk is full"), "{stderr}");
    let q = env.bus_dir().join("queue.jsonl");
    assert_eq!(std::fs::read(&q).unwrap(), before, "the queue changed");
    seed_reads_queue(&env.bus_dir());
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    env.ok(&["post", "PROGRESS", "--source", "after"]);
    assert_eq!(strict_lines(&q).last().unwrap()["source"], "after");
    drop(env);
}
