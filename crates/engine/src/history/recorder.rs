//! The recorder: watches a root's `conductor/` and `shared/handoffs/` trees (file notifications, no
//! polling), turns every change into a [`Pending`] change and commits it through the [`Writer`]. One
//! recorder per root writes; the others stand by, blocked on the writer lease (an exclusive `flock`
//! the kernel releases when the writer dies, however it dies).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::OFlags;

use super::store::{
    HistoryDir, Kind, Pending, Retention, WRITER_FILE, WRITER_LOCK, Writer, micros,
};
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::layout;
use crate::store::safe::SafeDir;

/// How long the recorder gathers further notifications after the first one before it reads the
/// files (so one atomic write, seen as create + rename, is one change).
pub const GATHER: Duration = Duration::from_millis(20);
/// Deepest directory walked.
const MAX_DEPTH: usize = 24;
/// Longest tail of an append-only file remembered to tell an append from a rewrite.
const TAIL: u64 = 64;
/// Changes a scan commits at a time.
const SCAN_PART: usize = 2048;
/// How often the age bound is applied on an otherwise idle root.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);
/// A recorder that could not (re)start tries again after this long, holding the lease meanwhile.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Failures in a row (a batch that could not be recorded) after which the recorder starts again
/// from the files on disk and a fresh scan.
const RESTART_AFTER: u32 = 3;

/// What the recorder loop is told.
#[derive(Debug)]
pub enum Msg {
    /// Paths the watcher saw change; with `rescan`, events were lost and only a walk of both
    /// trees can tell what changed.
    Changed {
        /// The files and directories named by the events, in their order.
        paths: Vec<PathBuf>,
        /// Events were lost (the kernel's queue overflowed).
        rescan: bool,
    },
    /// A watcher problem that does not stop recording (reported as a warning).
    Warning(String),
    /// Stop recording (finish the batch in hand first).
    Stop,
    /// The lease was taken (sent by the stand-by thread).
    Leased(File),
}

/// What the recorder reports as it goes (the shell logs it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Another recorder writes; this one stands by.
    StandingBy(String),
    /// This recorder writes now; how many changes its first scan found, and records repaired.
    Writing {
        /// Changes found by the first scan (what happened while nobody recorded).
        scanned: usize,
        /// Records cut from a killed writer's damaged tail.
        repaired: usize,
    },
    /// A batch of changes was committed.
    Committed(usize),
    /// A problem that did not stop recording.
    Warning(String),
    /// Recording stopped.
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    len: u64,
    mtime_ns: i128,
    ino: u64,
}

/// The history's own settings (`history:` in `conductor/config.yaml`).
pub(crate) fn retention_of(root: &Root) -> Retention {
    Retention {
        max_bytes: root.settings.history.max_bytes,
        max_age: root.settings.history.max_age,
    }
}

/// The recording side of one root: the writer, the bases watched and what each file looked like.
#[derive(Debug)]
pub struct Recorder {
    root: Root,
    /// The writer (holds the history's tree).
    pub writer: Writer,
    bases: Vec<(String, PathBuf)>,
    skip: PathBuf,
    stats: HashMap<String, Stat>,
    tails: HashMap<String, Vec<u8>>,
    _lease: File,
}

/// The key prefix and directory of each tree recorded: `conductor/` and `shared/handoffs/`.
pub(crate) fn bases(root: &Root) -> Vec<(String, PathBuf)> {
    vec![
        (layout::CONDUCTOR_DIR.to_owned(), root.conductor.clone()),
        (
            format!("{}/{}", layout::SHARED_DIR, layout::HANDOFFS_DIR),
            root.handoffs.clone(),
        ),
    ]
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

fn now_us() -> i64 {
    micros(chrono::Utc::now())
}

/// Opens the lease file (`history/.writer.lock`, created if missing, never through a link) for
/// reading only: the lease is an `flock` on it, and nothing is ever written to it (a hard link
/// planted under the name leads nowhere).
pub fn lease_file(root: &Root) -> Result<File> {
    let hist = HistoryDir::of(root);
    crate::store::atomic::open_lock_file(root, &hist.dir.join(WRITER_LOCK), false)
}

/// Says in `writer.json` who writes the history and whether it records (`up`), with the reason
/// when it does not: what `pantheon status`, `check` and the metrics read (best effort: a writer
/// that cannot write this file cannot record either, and its lease says it is there).
fn write_state(root: &Root, since: &str, problem: Option<&str>) {
    let mut me = serde_json::json!({
        "pid": std::process::id(),
        "since": since,
        "up": problem.is_none(),
    });
    if let Some(p) = problem {
        me["problem"] = p.into();
        me["at"] = crate::store::time::now_ts().into();
    }
    let _ = crate::store::atomic::write_atomic(
        root,
        &HistoryDir::of(root).dir.join(WRITER_FILE),
        &crate::store::atomic::to_pretty_json(&me),
    );
}

/// True when a recorder holds the writer lease of `root`'s history (a shared lock is tried and
/// let go at once; nothing is created).
fn leased(root: &Root) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let path = HistoryDir::of(root).dir.join(WRITER_LOCK);
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
    else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    match f.try_lock_shared() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// Whether the root's history is being recorded (docs/HISTORY.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecorderHealth {
    /// True while a recorder holds the history's lease and records.
    pub up: bool,
    /// Why it is down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Whether `root`'s history is being recorded, as far as a recorder says: one holds the lease (up,
/// unless its `writer.json` says it could not start and waits to try again), or none does and the
/// last one's `writer.json` says it stopped on an error while its process still runs (down).
/// `None` when no recorder runs (none expected: `serve` records unless told not to, and its own
/// liveness is the supervisors' figure).
pub(crate) fn health(root: &Root) -> Option<RecorderHealth> {
    let held = leased(root);
    let v = crate::store::read::read_json_once(&HistoryDir::of(root).dir.join(WRITER_FILE))
        .ok()
        .flatten();
    let field = |k: &str| v.as_ref().and_then(|v| v.get(k));
    let down = field("up").and_then(serde_json::Value::as_bool) == Some(false);
    let pid = field("pid")
        .and_then(serde_json::Value::as_u64)
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    let stopped_alive = down && pid.is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
    if !(held || stopped_alive) {
        return None;
    }
    let problem = down.then(|| {
        let why: String = field("problem")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("it could not start")
            .chars()
            .filter(|c| !c.is_control())
            .take(400)
            .collect();
        match pid {
            Some(p) => format!("the recorder (pid {}) is down: {why}", p.as_raw_nonzero()),
            None => format!("the recorder is down: {why}"),
        }
    });
    Some(RecorderHealth { up: !down, problem })
}

/// Who holds the lease, as its `writer.json` says (`pid N since T`).
pub(crate) fn holder(root: &Root) -> String {
    let p = HistoryDir::of(root).dir.join(WRITER_FILE);
    crate::store::read::read_json_once(&p)
        .ok()
        .flatten()
        .map(|v| {
            format!(
                "pid {} since {}",
                v.get("pid").and_then(|p| p.as_u64()).unwrap_or(0),
                v.get("since").and_then(|s| s.as_str()).unwrap_or("?")
            )
        })
        .unwrap_or_else(|| "another recorder".into())
}

impl Recorder {
    /// Becomes the writer of `root`'s history with the `lease` already locked: opens (and repairs)
    /// the history, then scans both trees and records what differs from the history's last moment.
    pub fn start(root: &Root, lease: File) -> Result<(Self, usize)> {
        let t = now_us();
        let writer = Writer::open(root, retention_of(root), t)?;
        let hist = HistoryDir::of(root);
        let me = serde_json::json!({"pid": std::process::id(), "since": crate::store::time::now_ts(), "up": true});
        crate::store::atomic::write_atomic(
            root,
            &hist.dir.join(WRITER_FILE),
            &crate::store::atomic::to_pretty_json(&me),
        )?;
        let mut r = Self {
            root: root.clone(),
            writer,
            bases: bases(root),
            skip: hist.dir.clone(),
            stats: HashMap::new(),
            tails: HashMap::new(),
            _lease: lease,
        };
        let first = r.writer.next_seq == 0;
        let n = r.rescan(first)?;
        Ok((r, n))
    }

    /// The key of `path` (`conductor/…`), `None` outside the trees, in the history itself, or for
    /// scratch files (temporary and lock files).
    pub(crate) fn key_of(&self, path: &Path) -> Option<String> {
        if path.starts_with(&self.skip) {
            return None;
        }
        let name = path.file_name()?.to_str()?;
        if layout::is_scratch(name) {
            return None;
        }
        for (prefix, dir) in &self.bases {
            if let Ok(rel) = path.strip_prefix(dir) {
                let rel = rel.to_str()?;
                if rel.is_empty() {
                    return None;
                }
                let key = format!("{prefix}/{rel}");
                return (!unrecorded(&key)).then_some(key);
            }
        }
        None
    }

    /// Walks both trees and records every difference from the history's tree (files gone included).
    /// With `initial`, every change is stamped now (the first scan only knows the files exist).
    pub fn rescan(&mut self, initial: bool) -> Result<usize> {
        // What a scan finds is mostly the tree the next checkpoint names: blob files, not the pack
        // (which the checkpoint would copy out again).
        let packing = std::mem::replace(&mut self.writer.packing, false);
        let r = self.scan(initial);
        self.writer.packing = packing;
        r
    }

    fn scan(&mut self, initial: bool) -> Result<usize> {
        let mut seen = std::collections::HashSet::new();
        let mut batch = Vec::new();
        let mut n = 0;
        let now = now_us();
        let bases = self.bases.clone();
        for (_, dir) in &bases {
            let mut files = Vec::new();
            walk(dir, &self.skip, 0, &mut files);
            for p in files {
                if let Some(k) = self.key_of(&p) {
                    seen.insert(k.clone());
                    if let Some(mut c) = self.observe(&k, &p, now) {
                        if initial {
                            c.when_us = now;
                        }
                        batch.push(c);
                    }
                    // A large root is committed in parts, so the scan holds a part, not the root.
                    if batch.len() >= SCAN_PART {
                        n += batch.len();
                        self.writer.commit(std::mem::take(&mut batch), now_us())?;
                    }
                }
            }
        }
        for (prefix, dir) in &bases {
            for mut c in super::dirs::appeared_under(&self.writer.tree, dir, prefix, &mut seen, now)
            {
                if initial {
                    c.when_us = now;
                }
                batch.push(c);
            }
        }
        let gone: Vec<String> = self
            .writer
            .tree
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in gone {
            self.stats.remove(&k);
            self.tails.remove(&k);
            batch.push(del(k, now));
        }
        n += batch.len();
        self.writer.commit(stamp_deletes(batch), now_us())?;
        Ok(n)
    }

    /// Looks at the paths notifications named: files read again, directories walked (files made in
    /// a new directory before it was watched), vanished paths and the files below them deleted.
    /// Returns how many changes it committed and the directories it walked.
    pub fn refresh(&mut self, paths: &[PathBuf]) -> Result<(usize, Vec<PathBuf>)> {
        self.look(paths, false)
    }

    /// Walks `dirs` again as a whole: what they hold is read, and what the history has below them
    /// that is no longer there is deleted. A directory made while the recorder looked away (its
    /// watch is added by the watcher's own thread, after the notification that named it) may have
    /// had files made and removed before its watch was in place; this second look settles them.
    pub(crate) fn recheck(&mut self, dirs: &[PathBuf]) -> Result<usize> {
        self.look(dirs, true).map(|(n, _)| n)
    }

    fn look(&mut self, paths: &[PathBuf], whole: bool) -> Result<(usize, Vec<PathBuf>)> {
        let now = now_us();
        let mut committed = 0;
        let mut batch: Vec<Pending> = Vec::new();
        let mut done = std::collections::HashSet::new();
        let mut walked = Vec::new();
        for p in paths {
            if p.starts_with(&self.skip) || !done.insert(p.clone()) {
                continue;
            }
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => {
                    let mut files = Vec::new();
                    walk(p, &self.skip, 0, &mut files);
                    let mut seen = std::collections::HashSet::new();
                    for f in files {
                        if let Some(k) = self.key_of(&f) {
                            seen.insert(k.clone());
                            if done.insert(f.clone()) {
                                batch.extend(self.observe(&k, &f, now));
                            }
                            // A large tree moved in at once is committed in parts, as a scan's:
                            // a segment stays within what a reader accepts.
                            if batch.len() >= SCAN_PART {
                                committed += batch.len();
                                let part = stamp_deletes(std::mem::take(&mut batch));
                                self.writer.commit(part, now_us())?;
                            }
                        }
                    }
                    if let Some(k) = self.walked_key_of(p) {
                        let tree = &self.writer.tree;
                        batch.extend(super::dirs::appeared_under(tree, p, &k, &mut seen, now));
                    }
                    if whole && let Some(k) = self.dir_key_of(p) {
                        for g in self.recorded_below(&k) {
                            if !seen.contains(&g) && !batch.iter().any(|b| b.path == g) {
                                self.stats.remove(&g);
                                self.tails.remove(&g);
                                batch.push(del(g, now));
                            }
                        }
                    }
                    walked.push(p.clone());
                }
                Ok(_) => {
                    if let Some(k) = self.key_of(p) {
                        batch.extend(self.observe(&k, p, now));
                    }
                }
                Err(_) => {
                    // Gone: the file itself, or a directory and everything recorded below it.
                    let Some(k) = self.key_of(p).or_else(|| self.dir_key_of(p)) else {
                        continue;
                    };
                    let mut gone = self.recorded_below(&k);
                    if self.writer.tree.contains_key(&k) {
                        gone.push(k);
                    }
                    for g in gone {
                        self.stats.remove(&g);
                        self.tails.remove(&g);
                        if !batch.iter().any(|b| b.path == g) {
                            batch.push(del(g, now));
                        }
                    }
                }
            }
        }
        let n = committed + batch.len();
        self.writer.commit(stamp_deletes(batch), now_us())?;
        Ok((n, walked))
    }

    /// The recorded files below directory key `k`.
    fn recorded_below(&self, k: &str) -> Vec<String> {
        let below = format!("{k}/");
        self.writer
            .tree
            .range(below.clone()..)
            .take_while(|(key, _)| key.starts_with(&below))
            .map(|(key, _)| key.clone())
            .collect()
    }

    fn dir_key_of(&self, path: &Path) -> Option<String> {
        if path.starts_with(&self.skip) {
            return None;
        }
        for (prefix, dir) in &self.bases {
            if let Ok(rel) = path.strip_prefix(dir) {
                let rel = rel.to_str()?;
                return (!rel.is_empty()).then(|| format!("{prefix}/{rel}"));
            }
        }
        None
    }

    /// The key of a directory walked: a base's own prefix (`conductor`) or `dir_key_of`'s.
    fn walked_key_of(&self, path: &Path) -> Option<String> {
        self.bases
            .iter()
            .find(|(_, dir)| dir == path)
            .map(|(prefix, _)| prefix.clone())
            .or_else(|| self.dir_key_of(path))
    }

    /// The change of one file since the history's tree, if any (`None` also for a file that cannot
    /// be read now: the next notification or scan sees it).
    fn observe(&mut self, key: &str, path: &Path, now: i64) -> Option<Pending> {
        let m = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() => m,
            // A link, a FIFO, a device: not a record (and never followed).
            Ok(_) | Err(_) => {
                return self.writer.tree.contains_key(key).then(|| {
                    self.stats.remove(key);
                    self.tails.remove(key);
                    del(key.to_owned(), now)
                });
            }
        };
        let st = Stat {
            len: m.len(),
            mtime_ns: mtime_ns(&m),
            ino: m.ino(),
        };
        if self.stats.get(key) == Some(&st) {
            return None;
        }
        let mtime_us = i64::try_from(st.mtime_ns / 1000).unwrap_or(i64::MAX);
        let old = self.writer.tree.get(key).cloned();
        if let Some(o) = &old
            && !self.stats.contains_key(key)
            && o.len == st.len
            && o.mtime_us == mtime_us
        {
            // First look after a restart: size and time as recorded, taken as unchanged.
            self.stats.insert(key.to_owned(), st);
            return None;
        }
        let f = open_nofollow(&self.root, path)?;
        // The inode's change time: when it was written or renamed into place (a rename keeps mtime).
        let ctime_us = m.ctime().saturating_mul(1_000_000) + m.ctime_nsec() / 1000;
        let when_us = ctime_us.max(mtime_us).min(now);
        if st.len > super::store::MAX_FILE_BYTES {
            self.stats.insert(key.to_owned(), st);
            self.tails.remove(key);
            return Some(Pending {
                path: key.to_owned(),
                kind: Kind::Put,
                blob: None,
                len: st.len,
                mtime_us,
                when_us,
            });
        }
        // An append-only file that grew with its old tail in place: record the new bytes only.
        if key.ends_with(".jsonl")
            && let Some(o) = &old
            && st.len > o.len
            && !o.blobs.is_empty()
            && let Some(tail) = self.tail_of(key, o)
            && let Some(added) = read_after(&f, o.len, &tail)
        {
            let len = o.len + added.len() as u64;
            let blob = self.writer.put_blob(&added).ok()?;
            self.remember_tail(key, &tail, &added);
            self.stats.insert(key.to_owned(), Stat { len, ..st });
            return Some(Pending {
                path: key.to_owned(),
                kind: Kind::App,
                blob: Some(blob),
                len,
                mtime_us,
                when_us,
            });
        }
        let bytes = read_all(&f, super::store::MAX_FILE_BYTES)?;
        let len = bytes.len() as u64;
        let h = super::store::hash_of(&bytes);
        self.stats.insert(key.to_owned(), Stat { len, ..st });
        if key.ends_with(".jsonl") {
            self.remember_tail(key, &[], &bytes);
        }
        if let Some(o) = &old
            && o.blobs.len() == 1
            && super::pack::hash_part(&o.blobs[0]) == h
            && o.mtime_us == mtime_us
        {
            return None;
        }
        let blob = self.writer.put_blob(&bytes).ok()?;
        Some(Pending {
            path: key.to_owned(),
            kind: Kind::Put,
            blob: Some(blob),
            len,
            mtime_us,
            when_us,
        })
    }

    fn remember_tail(&mut self, key: &str, old_tail: &[u8], added: &[u8]) {
        let mut t = old_tail.to_vec();
        t.extend_from_slice(added);
        let cut = t.len().saturating_sub(TAIL as usize);
        self.tails.insert(key.to_owned(), t.split_off(cut));
    }

    /// The last bytes of a recorded file (remembered, else read from its last blobs).
    fn tail_of(&mut self, key: &str, f: &super::store::FileVer) -> Option<Vec<u8>> {
        if let Some(t) = self.tails.get(key) {
            return Some(t.clone());
        }
        let mut t: Vec<u8> = Vec::new();
        for b in f.blobs.iter().rev() {
            let mut bytes = self.writer.hist.blob(b).ok()??;
            bytes.extend_from_slice(&t);
            t = bytes;
            if t.len() as u64 >= TAIL {
                break;
            }
        }
        let cut = t.len().saturating_sub(TAIL as usize);
        let t = t.split_off(cut);
        self.tails.insert(key.to_owned(), t.clone());
        Some(t)
    }
}

/// A delete has no time of its own: in a batch with writes (a rename is a delete and a write) it
/// takes the latest of their times, else the moment it was seen.
fn stamp_deletes(mut batch: Vec<Pending>) -> Vec<Pending> {
    if let Some(t) = batch
        .iter()
        .filter(|p| p.kind != Kind::Del)
        .map(|p| p.when_us)
        .max()
    {
        for p in batch.iter_mut().filter(|p| p.kind == Kind::Del) {
            p.when_us = p.when_us.min(t);
        }
    }
    batch
}

fn del(path: String, now: i64) -> Pending {
    Pending {
        path,
        kind: Kind::Del,
        blob: None,
        len: 0,
        mtime_us: 0,
        when_us: now,
    }
}

/// Opens a root file for reading without following a link or blocking on a FIFO.
fn open_nofollow(root: &Root, path: &Path) -> Option<File> {
    let (dir, name) = SafeDir::parent_of(root, path, false).ok()??;
    let f = dir
        .open_file(&name, OFlags::RDONLY | OFlags::NONBLOCK)
        .ok()??;
    f.metadata().ok()?.is_file().then_some(f)
}

fn read_all(f: &File, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut r = f;
    r.seek(SeekFrom::Start(0)).ok()?;
    r.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The bytes after `old_len` when the `tail.len()` bytes before it are still `tail`.
fn read_after(f: &File, old_len: u64, tail: &[u8]) -> Option<Vec<u8>> {
    let start = old_len.checked_sub(tail.len() as u64)?;
    let mut r = f;
    r.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    r.take(super::store::MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() <= tail.len() || bytes[..tail.len()] != *tail {
        return None;
    }
    Some(bytes.split_off(tail.len()))
}

/// The regular files under `dir` (not following links), skipping `skip`.
fn walk(dir: &Path, skip: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || dir.starts_with(skip) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, skip, depth + 1, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// Files of the trees that are not history: the journal's intents (`conductor/journal-intents/`), the
/// engine's write-ahead notes of an act in progress, each made and removed within the act (the act
/// itself is recorded by the files it writes and its journal entry).
pub(crate) fn unrecorded(key: &str) -> bool {
    key.starts_with("conductor/journal-intents/")
}

/// Takes the writer lease, standing by (blocked on it on a thread of its own) while another
/// recorder holds it; `None` when told to stop meanwhile.
fn take_lease(
    root: &Root,
    tx: &mpsc::Sender<Msg>,
    rx: &mpsc::Receiver<Msg>,
    report: &mut dyn FnMut(Report),
) -> Result<Option<File>> {
    let lease = lease_file(root)?;
    let lease = match lease.try_lock() {
        Ok(()) => lease,
        Err(std::fs::TryLockError::WouldBlock) => {
            report(Report::StandingBy(holder(root)));
            // A blocking flock on its own thread: no polling; the kernel wakes it when the writer
            // ends, killed or not.
            let stx = tx.clone();
            std::thread::Builder::new()
                .name("history-standby".into())
                .spawn(move || {
                    if lease.lock().is_ok() {
                        let _ = stx.send(Msg::Leased(lease));
                    }
                })
                .map_err(|e| Error::io(root.conductor.clone(), e))?;
            loop {
                match rx.recv() {
                    Ok(Msg::Leased(f)) => break f,
                    Ok(Msg::Stop) | Err(_) => {
                        report(Report::Stopped);
                        return Ok(None);
                    }
                    Ok(Msg::Changed { .. } | Msg::Warning(_)) => {}
                }
            }
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(Error::io(HistoryDir::of(root).dir.join(WRITER_LOCK), e));
        }
    };
    Ok(Some(lease))
}

/// Watches both trees for changes, new directories as they come; the history's own directory is
/// never watched (its writes would wake the recorder for nothing), nor the journal's intents.
#[cfg(target_os = "linux")]
fn watch(root: &Root, tx: &mpsc::Sender<Msg>) -> Result<super::tree_watch::TreeWatch> {
    let mut tops = vec![root.conductor.clone()];
    if !root.handoffs.starts_with(&root.conductor) {
        tops.push(root.handoffs.clone());
    }
    let skip = vec![
        HistoryDir::of(root).dir,
        crate::conductor::intents::intents_dir(root),
    ];
    super::tree_watch::TreeWatch::start(&tops, skip, tx.clone())
}

/// Elsewhere, a general watcher on both trees (its open and read events dropped here).
#[cfg(not(target_os = "linux"))]
fn watch(root: &Root, tx: &mpsc::Sender<Msg>) -> Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let wtx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let msg = match ev {
            Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => return,
            Ok(e) => Msg::Changed {
                rescan: e.need_rescan(),
                paths: e.paths,
            },
            Err(_) => Msg::Changed {
                paths: Vec::new(),
                rescan: true,
            },
        };
        let _ = wtx.send(msg);
    })
    .map_err(|e| Error::refused(format!("cannot watch the root: {e}")))?;
    for top in [&root.conductor, &root.handoffs] {
        watcher
            .watch(top, notify::RecursiveMode::Recursive)
            .map_err(|e| Error::refused(format!("cannot watch {}: {e}", top.display())))?;
    }
    Ok(watcher)
}

#[derive(Debug, Default)]
struct Rechecks(Vec<(std::time::Instant, PathBuf, bool)>);

/// When a walked directory is looked at again.
const RECHECK_AFTER: [Duration; 2] = [Duration::from_millis(150), Duration::from_secs(1)];
/// Most directories waiting for a second look (beyond it, the oldest are looked at first).
const MAX_RECHECKS: usize = 4096;

impl Rechecks {
    fn add(&mut self, dirs: Vec<PathBuf>) {
        let now = std::time::Instant::now();
        for d in dirs {
            if self.0.len() >= MAX_RECHECKS {
                break;
            }
            self.0.retain(|(_, p, first)| !(p == &d && *first));
            self.0.push((now + RECHECK_AFTER[0], d, true));
        }
    }

    /// How long until the next one is due.
    fn wait(&self) -> Option<Duration> {
        let now = std::time::Instant::now();
        self.0
            .iter()
            .map(|(at, _, _)| at.saturating_duration_since(now))
            .min()
    }

    /// Walks again the directories due now.
    fn run(&mut self, rec: &mut Recorder, report: &mut dyn FnMut(Report)) {
        let due = self.due();
        if due.is_empty() {
            return;
        }
        match rec.recheck(&due) {
            Ok(0) => {}
            Ok(n) => report(Report::Committed(n)),
            Err(e) => report(Report::Warning(e.to_string())),
        }
    }

    /// The directories due now; each first look schedules the last.
    fn due(&mut self) -> Vec<PathBuf> {
        let now = std::time::Instant::now();
        let mut due = Vec::new();
        let mut next = Vec::new();
        self.0.retain(|(at, p, first)| {
            if *at > now {
                return true;
            }
            due.push(p.clone());
            if *first {
                next.push((now + RECHECK_AFTER[1], p.clone(), false));
            }
            false
        });
        self.0.extend(next);
        due.sort();
        due.dedup();
        due
    }
}

/// Takes `first` and what comes within [`GATHER`] after it, then what is queued: the paths named,
/// whether events were lost (a walk of both trees is needed), whether to stop.
fn gather(
    first: Msg,
    rx: &mpsc::Receiver<Msg>,
    report: &mut dyn FnMut(Report),
) -> (Vec<PathBuf>, bool, bool) {
    let mut paths = Vec::new();
    let mut rescan = false;
    let mut stop = false;
    let mut take = |m: Msg, paths: &mut Vec<PathBuf>| match m {
        Msg::Stop => stop = true,
        Msg::Changed {
            paths: p,
            rescan: r,
        } => {
            paths.extend(p);
            rescan |= r;
        }
        Msg::Warning(w) => report(Report::Warning(w)),
        Msg::Leased(_) => {}
    };
    take(first, &mut paths);
    let until = std::time::Instant::now() + GATHER;
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(m) => take(m, &mut paths),
            Err(_) => break,
        }
    }
    while let Ok(m) = rx.try_recv() {
        take(m, &mut paths);
    }
    (paths, rescan, stop)
}

/// Becomes the writer with `lease` (a second handle on the locked lease file): opens the history
/// (a newest segment that fails the writer's checks or cannot be read is set aside there and a new
/// one begun) and scans both trees. Says in `writer.json` whether it records, and reports it.
fn begin(
    root: &Root,
    lease: &File,
    since: &str,
    report: &mut dyn FnMut(Report),
) -> Option<Recorder> {
    let started = lease
        .try_clone()
        .map_err(|e| Error::io(HistoryDir::of(root).dir.join(WRITER_LOCK), e))
        .and_then(|l| Recorder::start(root, l));
    match started {
        Ok((rec, scanned)) => {
            if let Some(why) = &rec.writer.set_aside {
                report(Report::Warning(why.clone()));
            }
            write_state(root, since, None);
            report(Report::Writing {
                scanned,
                repaired: rec.writer.repaired,
            });
            Some(rec)
        }
        Err(e) => {
            let why = e.to_string();
            write_state(root, since, Some(&why));
            report(Report::Warning(format!(
                "the recorder is down: {why}; trying again in {} s",
                RETRY_AFTER.as_secs()
            )));
            None
        }
    }
}

/// Records `root` until `rx` gives [`Msg::Stop`] (or every sender is gone): stands by while another
/// recorder holds the lease, then writes. `tx` must be the sender of `rx` (the file watcher and the
/// stand-by thread send through it). Reports go to `report`.
///
/// A recorder that cannot start (its history unreadable, its directory not writable) keeps the
/// lease, says it is down and tries again every [`RETRY_AFTER`]; one whose batches fail
/// [`RESTART_AFTER`] times in a row starts again from the history on disk and a fresh scan.
pub(crate) fn run(
    root: &Root,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    report: &mut dyn FnMut(Report),
) -> Result<()> {
    let Some(lease) = take_lease(root, &tx, &rx, report)? else {
        return Ok(());
    };
    let since = crate::store::time::now_ts();
    for (_, d) in bases(root) {
        crate::store::atomic::ensure_dir(root, &d)?;
    }
    // Watch first, then scan: a change made between the two is seen by both, never by neither.
    let watcher = watch(root, &tx)?;
    let mut rec = begin(root, &lease, &since, report);
    let mut retry_at = std::time::Instant::now() + RETRY_AFTER;
    let mut failures = 0u32;
    let mut last_retention = std::time::Instant::now();
    let mut rechecks = Rechecks::default();
    // Not history (see [`unrecorded`]): never watched.
    loop {
        let Some(r) = rec.as_mut() else {
            // Down: wait for the next try (a stop ends it); what changes meanwhile the next
            // start's scan records.
            match rx.recv_timeout(retry_at.saturating_duration_since(std::time::Instant::now())) {
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Ok(Msg::Warning(w)) => report(Report::Warning(w)),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    rec = begin(root, &lease, &since, report);
                    retry_at = std::time::Instant::now() + RETRY_AFTER;
                    failures = 0;
                    rechecks = Rechecks::default();
                }
            }
            continue;
        };
        let wait = [rechecks.wait(), r.writer.sync_wait()]
            .into_iter()
            .flatten()
            .fold(RETENTION_EVERY, Duration::min);
        let first = match rx.recv_timeout(wait) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                rechecks.run(r, report);
                if let Err(e) = r.writer.sync_due() {
                    report(Report::Warning(e.to_string()));
                }
                if last_retention.elapsed() >= RETENTION_EVERY {
                    if let Err(e) = r.writer.enforce_retention(now_us()) {
                        report(Report::Warning(format!("retention: {e}")));
                    }
                    last_retention = std::time::Instant::now();
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let (mut paths, rescan, stop) = gather(first, &rx, report);
        paths.retain(|p| !p.starts_with(&r.skip));
        paths.sort();
        paths.dedup();
        // A directory (new, or removed and made again) in `conductor/`: watch it (again: a removed
        // directory's watch went with it, and watching a watched directory changes nothing). What
        // it already holds is read below.
        let done = if rescan {
            r.rescan(false)
        } else if paths.is_empty() {
            Ok(0)
        } else {
            r.refresh(&paths).map(|(n, walked)| {
                rechecks.add(walked);
                n
            })
        };
        match done {
            Ok(n) => {
                failures = 0;
                if n > 0 {
                    report(Report::Committed(n));
                }
            }
            Err(e) => {
                failures += 1;
                report(Report::Warning(e.to_string()));
            }
        }
        // On a busy root notifications never leave the loop idle: look at what is due here too.
        rechecks.run(r, report);
        if let Err(e) = r.writer.sync_due() {
            report(Report::Warning(e.to_string()));
        }
        if last_retention.elapsed() >= RETENTION_EVERY {
            last_retention = std::time::Instant::now();
            if let Err(e) = r.writer.enforce_retention(now_us()) {
                report(Report::Warning(format!("retention: {e}")));
            }
        }
        if stop {
            break;
        }
        if failures >= RESTART_AFTER {
            report(Report::Warning(format!(
                "{failures} batches in a row could not be recorded; starting again from the \
                 history on disk and a fresh scan"
            )));
            // The writer syncs and closes as it goes; the new one repairs what it left.
            drop(rec.take());
            rec = begin(root, &lease, &since, report);
            retry_at = std::time::Instant::now() + RETRY_AFTER;
            failures = 0;
            rechecks = Rechecks::default();
        }
    }
    drop(watcher);
    report(Report::Stopped);
    Ok(())
}

/// A recorder on its own thread (`run`); [`Background::stop`] ends it.
#[derive(Debug)]
pub struct Background {
    tx: mpsc::Sender<Msg>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Starts recording `root` on a thread; its reports go to `report`.
    pub fn start(root: &Root, mut report: Box<dyn FnMut(Report) + Send>) -> Result<Self> {
        let (tx, rx) = mpsc::channel();
        let root = root.clone();
        let ttx = tx.clone();
        let handle = std::thread::Builder::new()
            .name("history-recorder".into())
            .spawn(move || {
                if let Err(e) = run(&root, ttx, rx, &mut *report) {
                    // Said where `status` looks, for as long as this process runs.
                    write_state(&root, &crate::store::time::now_ts(), Some(&e.to_string()));
                    report(Report::Warning(format!("the recorder stopped: {e}")));
                }
            })
            .map_err(|e| Error::io("history-recorder", e))?;
        Ok(Self {
            tx,
            handle: Some(handle),
        })
    }

    /// A sender that stops it (a signal handler holds one).
    pub fn sender(&self) -> mpsc::Sender<Msg> {
        self.tx.clone()
    }

    /// Stops it and waits for its last batch (a stand-by recorder ends at once).
    pub fn stop(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
