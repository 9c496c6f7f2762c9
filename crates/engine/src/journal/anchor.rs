//! The journal's anchor outside the root (docs/PROTOCOL.md §2.8, docs/THREAT-MODEL.md "The journal").
//!
//! The hash chain alone proves nothing against someone who can write the root: they can edit, remove
//! or insert entries and recompute every later hash. An anchor is a file the root's writers cannot
//! write; `pantheon serve --journal-anchor PATH` appends the journal's head to it as the head moves,
//! one JSON line `{"seq":N,"hash":"…","at":"…"}` each, and `pantheon journal --verify --anchor PATH`
//! checks that every anchored entry is still in the journal with the anchored hash
//! ([`super::verify_with`]).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{Head, MAX_LINE_BYTES, journal_path, lock_path, read_tail, segments};
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::lock::FileLock;
use crate::store::time::now_ts;

/// The least time between two anchors `serve` writes (it always writes one at exit).
pub(crate) const ANCHOR_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The interval in force: `PANTHEON_JOURNAL_ANCHOR_EVERY_MS` (100 ms to 60 s), else `ANCHOR_EVERY`.
/// A shorter one anchors more entries (a rewrite is then located to fewer of them) at the cost of a
/// flushed write per interval while the journal moves.
pub fn anchor_every() -> std::time::Duration {
    std::env::var("PANTHEON_JOURNAL_ANCHOR_EVERY_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|ms| std::time::Duration::from_millis(ms.clamp(100, 60_000)))
        .unwrap_or(ANCHOR_EVERY)
}

/// One anchored head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Anchor {
    /// The entry's sequence number.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
    /// When it was anchored.
    pub at: String,
    /// Its 1-based line in the anchor file.
    pub line: usize,
}

/// What [`read`] found: the anchors, and what is wrong with the file.
#[derive(Debug, Clone, Default)]
pub(crate) struct AnchorFile {
    /// The anchors, in file order.
    pub anchors: Vec<Anchor>,
    /// Problems: a missing or empty file, lines that are no anchor, two hashes for one entry.
    pub problems: Vec<String>,
}

/// Opens `path` for reading, following links (the operator names it), refusing anything but a regular
/// file (a FIFO would block).
fn open_regular(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Reads an anchor file. A missing or empty file is a problem, not an error: the verification says
/// so and fails.
pub(crate) fn read(path: &Path) -> Result<AnchorFile> {
    let mut out = AnchorFile::default();
    let f = match open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.problems.push(format!(
                "the anchor file {} does not exist: no head was ever anchored there (start `pantheon serve --journal-anchor {}`)",
                path.display(),
                path.display()
            ));
            return Ok(out);
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut r = BufReader::new(f);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut by_seq: std::collections::HashMap<u64, (String, usize)> = Default::default();
    loop {
        buf.clear();
        let got = (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?;
        if got == 0 {
            break;
        }
        n += 1;
        if buf.len() > MAX_LINE_BYTES && !buf.ends_with(b"\n") {
            super::skip_line(&mut r).map_err(|e| Error::io(path, e))?;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let parsed = serde_json::from_slice::<Map<String, Value>>(line)
            .ok()
            .and_then(|m| {
                let seq = m.get("seq")?.as_u64()?;
                let hash = m.get("hash")?.as_str()?.to_owned();
                let at = m
                    .get("at")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                Some((seq, hash, at))
            });
        let Some((seq, hash, at)) = parsed else {
            out.problems.push(format!(
                "{} line {n} is not an anchor ({{seq, hash, at}}): the anchor file was edited or corrupted",
                path.display()
            ));
            continue;
        };
        if let Some((h, first)) = by_seq.get(&seq) {
            if *h != hash {
                out.problems.push(format!(
                    "{} anchors two different hashes for journal entry {seq} (lines {first} and {n}): two journals share it, or one was rewritten and anchored again",
                    path.display()
                ));
            }
            continue;
        }
        by_seq.insert(seq, (hash.clone(), n));
        out.anchors.push(Anchor {
            seq,
            hash,
            at,
            line: n,
        });
    }
    if out.anchors.is_empty() && out.problems.is_empty() {
        out.problems.push(format!(
            "the anchor file {} is empty: no head was anchored yet (the journal had no entry while `serve` ran)",
            path.display()
        ));
    }
    Ok(out)
}

/// The last line of `bytes` that is a journal entry.
fn last_entry(bytes: &[u8]) -> Option<Head> {
    bytes
        .split(|b| *b == b'\n')
        .rev()
        .find_map(|l| super::parse_head(l.trim_ascii()))
}

/// The journal's head: its last entry's sequence number and hash (`None`: no entry yet), read under
/// the journal's lock so no append is half-written.
pub(crate) fn current_head(root: &Root) -> Result<Option<(u64, String)>> {
    let _lock = FileLock::exclusive(root, &lock_path(root))?;
    let mut paths = segments(root);
    paths.push(journal_path(root));
    for path in paths.iter().rev() {
        let f = match super::open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(path, e)),
        };
        let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        let tail = read_tail(&f, len).map_err(|e| Error::io(path, e))?;
        if let Some(h) = last_entry(&tail) {
            return Ok(Some((h.seq, h.hash)));
        }
    }
    Ok(None)
}

/// `path` with every link resolved: the file's own (even one that leads nowhere yet), then its
/// directory's.
fn resolved(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(|e| Error::io(&p, e))?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return std::fs::canonicalize(&p).map_err(|e| Error::io(&p, e)),
            Err(_) => break,
        }
    }
    let name = p.file_name().ok_or_else(|| {
        Error::refused(format!("--journal-anchor {} names no file", path.display()))
    })?;
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(parent).map_err(|e| {
        Error::refused(format!(
            "--journal-anchor {}: its directory {} cannot be reached ({e})",
            path.display(),
            parent.display()
        ))
    })?;
    Ok(dir.join(name))
}

/// Refuses an anchor inside the root (or its conductor or handoffs directory, wherever they are),
/// links resolved: whoever can rewrite the journal could rewrite such an anchor with it. Returns the
/// resolved path and the warnings: group or others can write the file or replace it in its
/// directory.
pub(crate) fn check_place(root: &Root, path: &Path) -> Result<(PathBuf, Vec<String>)> {
    let target = resolved(path)?;
    for dir in [&root.dir, &root.conductor, &root.handoffs] {
        let Ok(d) = std::fs::canonicalize(dir) else {
            continue;
        };
        if target.starts_with(&d) {
            return Err(Error::refused(format!(
                "--journal-anchor {} lies inside the root ({}): whoever can rewrite the journal could rewrite the anchor with it; put it where the root's writers cannot write (another user's directory, another machine's mount)",
                path.display(),
                target.display()
            )));
        }
    }
    let mut warnings = Vec::new();
    if let Ok(m) = std::fs::metadata(&target)
        && m.permissions().mode() & 0o022 != 0
    {
        warnings.push(format!(
            "warning: group or others can write the journal anchor {} (mode {:o}): whoever can write it can hide a rewritten journal; chmod go-w it",
            target.display(),
            m.permissions().mode() & 0o777
        ));
    }
    if let Some(dir) = target.parent()
        && let Ok(m) = std::fs::metadata(dir)
    {
        let mode = m.permissions().mode();
        let sticky = mode & 0o1000 != 0;
        // A sticky directory (like /tmp) lets no one else replace a file they do not own.
        if mode & 0o022 != 0 && !sticky {
            warnings.push(format!(
                "warning: group or others can write the directory of the journal anchor, {} (mode {:o}): they can replace the anchor; keep it in a directory only you can write",
                dir.display(),
                mode & 0o7777
            ));
        }
    }
    Ok((target, warnings))
}

/// Appends the journal's head to an anchor file as it moves.
#[derive(Debug)]
pub struct AnchorWriter {
    path: PathBuf,
    file: File,
    last: Option<(u64, String)>,
}

impl AnchorWriter {
    /// Opens (creating) the anchor `path` for appending, after `check_place`; returns it and the
    /// warnings to show. The last anchor already in the file is not written again.
    pub fn open(root: &Root, path: &Path) -> Result<(Self, Vec<String>)> {
        let (target, warnings) = check_place(root, path)?;
        // Read as well as append: a torn last line is found and cut back before the first append.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&target)
            .map_err(|e| Error::io(&target, e))?;
        if !file
            .metadata()
            .map_err(|e| Error::io(&target, e))?
            .is_file()
        {
            return Err(Error::refused(format!(
                "--journal-anchor {} is not a regular file",
                target.display()
            )));
        }
        drop_torn_tail(&file).map_err(|e| Error::io(&target, e))?;
        let last = read(&target)
            .ok()
            .and_then(|a| a.anchors.last().map(|a| (a.seq, a.hash.clone())));
        Ok((
            Self {
                path: target,
                file,
                last,
            },
            warnings,
        ))
    }

    /// A warning when the journal's head is behind the newest anchor already in the file, or at the
    /// same entry with another hash: the journal was truncated, deleted or rewritten since (found at
    /// start; `pantheon journal --verify --anchor` names the entries).
    pub fn check_head(&self, root: &Root) -> Option<String> {
        let (seq, hash) = self.last.as_ref()?;
        let (now_seq, now_hash) = current_head(root).ok()?.unwrap_or((0, String::new()));
        let what = if now_seq < *seq {
            format!(
                "its head is entry {now_seq} but entry {seq} was anchored: truncated or deleted"
            )
        } else if now_seq == *seq && now_hash != *hash {
            format!("entry {seq} has another hash than the one anchored: rewritten")
        } else {
            return None;
        };
        Some(format!(
            "warning: the journal does not extend its anchor {}: {what}; run `pantheon journal --verify --anchor {}`",
            self.path.display(),
            self.path.display()
        ))
    }

    /// The anchor file (links resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the journal's current head when it moved since the last anchor (flushed to disk);
    /// returns the head anchored, if one was.
    pub fn anchor(&mut self, root: &Root) -> Result<Option<(u64, String)>> {
        let Some(head) = current_head(root)? else {
            return Ok(None);
        };
        if self.last.as_ref() == Some(&head) {
            return Ok(None);
        }
        let mut line = serde_json::to_vec(&json!({"seq": head.0, "hash": head.1, "at": now_ts()}))
            .map_err(|e| Error::refused(e.to_string()))?;
        line.push(b'\n');
        if let Err(e) = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
        {
            // A write cut short (a full disk) must not leave half a line for the next anchor to be
            // glued onto: the file goes back to its last whole line, and the next move tries again.
            let _ = drop_torn_tail(&self.file);
            return Err(Error::io(&self.path, e));
        }
        self.last = Some(head.clone());
        Ok(Some(head))
    }
}

/// Cuts an anchor file back to the end of its last whole line when a write was cut short (a full disk,
/// a crash of the machine mid-write): what follows the last newline is half an anchor that no reader could
/// parse and that the next append would be glued onto. A file that ends in a newline is left as it is.
fn drop_torn_tail(file: &File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // An anchor line is far shorter than a journal line; look back at most one journal line's length.
    let back = len.min(MAX_LINE_BYTES as u64 + 1);
    let mut tail = vec![0u8; usize::try_from(back).unwrap_or(0)];
    file.read_exact_at(&mut tail, len - back)?;
    if tail.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => len - back + i as u64 + 1,
        None if back == len => 0,
        // No newline in the last line's worth of bytes: not a torn anchor but something else; leave it for
        // `journal --verify --anchor` to report.
        None => return Ok(()),
    };
    file.set_len(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_anchor_is_cut_back_to_the_last_whole_line() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let path = dir.path().join("anchor.jsonl");
        let whole = "{\"seq\":1,\"hash\":\"ab\",\"at\":\"2026-12-02T00:00:00Z\"}\n";
        for (content, kept) in [
            (format!("{whole}{{\"seq\":2,\"ha"), whole.to_owned()),
            (whole.to_owned(), whole.to_owned()),
            ("{\"seq\":1".to_owned(), String::new()),
            (String::new(), String::new()),
        ] {
            std::fs::write(&path, &content).unwrap_or_else(|e| unreachable!("{e}"));
            let f = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| unreachable!("{e}"));
            drop_torn_tail(&f).unwrap_or_else(|e| unreachable!("{e}"));
            let now = std::fs::read_to_string(&path).unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(now, kept, "from {content:?}");
        }
        let a = read(&path).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(
            a.problems
                .iter()
                .any(|p| p.contains("empty") || p.contains("no head")),
            "{:?}",
            a.problems
        );
    }
}
