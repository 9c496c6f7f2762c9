//! `queue.jsonl`: the append-only log of envelopes (docs/PROTOCOL.md §3).
//!
//! Writers take an exclusive `flock` on `queue.jsonl` itself (the lock a fixed Python `post_message`
//! takes too), fence off a torn line left by a dead writer with a newline (only once it stays torn:
//! never a blank line), write each line in one `write`, and cut a failed append back off. Readers never fail on a bad line: blank, unparsable and unterminated lines are skipped and
//! counted. [`tail`] seeks from the end; [`QueueCursor`] reads only what was appended since last time.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::model::Envelope;
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::ids::{check_free_text, generate_message_id};
use crate::store::lock::{lock_file, lock_timeout};
use crate::store::time::{now_ts, parse_ts};

/// Pattern of message types.
pub const TYPE_PATTERN: &str = "^[A-Z][A-Z0-9_]*$";

/// True when `kind` matches [`TYPE_PATTERN`].
pub fn is_valid_type(kind: &str) -> bool {
    let b = kind.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// Builds a fresh envelope (new id, now) after checking the type, the source and the payload.
pub fn envelope(kind: &str, source: &str, payload: Value) -> Result<Envelope> {
    if !is_valid_type(kind) {
        return Err(Error::InvalidName {
            field: "message type",
            value: kind.chars().take(80).collect(),
            pattern: TYPE_PATTERN,
        });
    }
    check_free_text("source", source)?;
    let payload = match payload {
        Value::Null => Value::Object(Default::default()),
        p @ Value::Object(_) => p,
        other => {
            return Err(Error::refused(format!(
                "the payload must be a JSON object, not {}; wrap it, e.g. {{\"value\": {other}}}",
                crate::store::read::kind(&other)
            )));
        }
    };
    crate::store::limits::check_document(
        "message payload",
        &payload,
        crate::store::limits::MAX_MESSAGE_BYTES - 1024,
    )?;
    Ok(Envelope {
        id: generate_message_id(),
        kind: kind.to_owned(),
        source: source.to_owned(),
        timestamp: now_ts(),
        payload,
        extra: Default::default(),
    })
}

/// Largest chunk of whole lines a batch writes under one hold of the queue's flock.
pub const BATCH_BYTES: usize = 64 * 1024;

/// An open `queue.jsonl` for appending (one flock per append, the file opened once).
///
/// A writer may live long (a [`super::Bus`] keeps one), so every append first makes sure the name
/// still leads to the file it holds: the queue may have been archived (renamed), replaced or deleted
/// since. Before locking, `stat(path)` is compared with the held file (the same check a Python writer
/// gets by opening by name); after locking, the held file's own `fstat` catches what happened in
/// between: a deleted file has no links, and `bus archive` marks the file it moves away read-only
/// while it holds the queue's lock. Either hint sends the writer back to the name.
#[derive(Debug)]
pub struct QueueWriter {
    root: Root,
    path: PathBuf,
    file: File,
    /// (device, inode) of `file`, fixed at open.
    identity: (u64, u64),
    /// The file's length right after our last write (to skip the torn-line check when unchanged).
    end: Option<u64>,
    /// Bound on waiting for the queue's flock (read from the environment once, at open).
    timeout: std::time::Duration,
}

/// Opens `path` for appending (creating it when missing) without following a link, and refuses a
/// queue with more than one hard link (an append would land in the linked file, wherever it is).
fn open_append(root: &Root, path: &Path) -> Result<(File, (u64, u64))> {
    let file = crate::store::atomic::open_append_in_place(root, path)?;
    crate::store::safe::require_single_link(&file, path)?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    Ok((file, (meta.dev(), meta.ino())))
}

impl QueueWriter {
    /// Opens (creating if missing, with its directory) the queue at `path` under `root`.
    pub fn open(root: &Root, path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            crate::store::atomic::ensure_dir(root, dir)?;
        }
        Self::open_in_place(root, path)
    }

    /// Opens the queue at `path` in a directory that must exist (the file is created if missing).
    pub fn open_in_place(root: &Root, path: &Path) -> Result<Self> {
        let (file, identity) = open_append(root, path)?;
        Ok(Self {
            root: root.clone(),
            path: path.to_path_buf(),
            file,
            identity,
            end: None,
            timeout: lock_timeout(),
        })
    }

    /// Appends one envelope as one compact line.
    pub fn append(&mut self, env: &Envelope) -> Result<()> {
        self.append_line(&line_of(env))
    }

    /// Appends `line` (which must end in `\n`; it may hold several whole lines) in one `write` under the
    /// queue's flock, fencing a torn last line.
    pub fn append_line(&mut self, line: &[u8]) -> Result<()> {
        debug_assert!(line.ends_with(b"\n"));
        if !self.name_leads_here() {
            self.reopen()?;
        }
        let len = loop {
            lock_file(&self.file, &self.path, self.timeout)?;
            let meta = match self.file.metadata() {
                Ok(m) => m,
                Err(e) => {
                    let _ = self.file.unlock();
                    return Err(Error::io(&self.path, e));
                }
            };
            let moved_hint = meta.nlink() == 0 || meta.mode() & 0o222 == 0;
            if !moved_hint || self.name_leads_here() {
                break meta.len();
            }
            let _ = self.file.unlock();
            self.reopen()?;
        };
        let result = self.write_locked(line, len);
        let _ = self.file.unlock();
        result
    }

    /// True when `path` names the file this writer holds.
    fn name_leads_here(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity)
    }

    fn reopen(&mut self) -> Result<()> {
        let (file, identity) = open_append(&self.root, &self.path)?;
        self.file = file;
        self.identity = identity;
        self.end = None;
        Ok(())
    }

    fn write_locked(&mut self, line: &[u8], len: u64) -> Result<()> {
        // When nobody wrote since our last line, the file ends with our newline: no need to look.
        let (torn, start) = if len == 0 || self.end == Some(len) {
            (false, len)
        } else {
            self.settled_tail(len)?
        };
        let fenced;
        let bytes = if torn {
            fenced = [b"\n".as_slice(), line].concat();
            fenced.as_slice()
        } else {
            line
        };
        match write_counted(&self.file, bytes) {
            Ok(()) => {
                self.end = Some(start + bytes.len() as u64);
                Ok(())
            }
            Err((written, e)) => {
                self.end = None;
                self.roll_back(start, &bytes[..written]);
                Err(Error::io(&self.path, e))
            }
        }
    }

    /// Whether the tail must be fenced, and the file's length then. A tail that does not end in a
    /// newline may be a line another writer is still copying (a seed-style writer appends without the
    /// queue's lock, and a long line arrives in pieces): it is fenced only once it stays torn, its size
    /// unchanged for [`SETTLE`], or after [`SETTLE_BOUND`] in all. Fencing a line that then completes
    /// would leave a blank line, which strict readers (`json.loads` on every line) cannot read.
    fn settled_tail(&self, len: u64) -> Result<(bool, u64)> {
        let started = std::time::Instant::now();
        let mut stable_since = started;
        let mut len = len;
        loop {
            if len == 0 {
                return Ok((false, 0));
            }
            let mut last = [0u8; 1];
            self.file
                .read_exact_at(&mut last, len - 1)
                .map_err(|e| Error::io(&self.path, e))?;
            if last[0] == b'\n' {
                return Ok((false, len));
            }
            if stable_since.elapsed() >= SETTLE || started.elapsed() >= SETTLE_BOUND {
                return Ok((true, len));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            let now = self
                .file
                .metadata()
                .map_err(|e| Error::io(&self.path, e))?
                .len();
            if now != len {
                len = now;
                stable_since = std::time::Instant::now();
            }
        }
    }

    /// Undoes a failed append (a full disk, a file-size limit): the file is cut back to `start` only
    /// when it still ends with exactly the bytes we wrote, so nothing another writer appended is lost.
    fn roll_back(&self, start: u64, ours: &[u8]) {
        if ours.is_empty() {
            return;
        }
        let Some(end) = start.checked_add(ours.len() as u64) else {
            return;
        };
        if self.file.metadata().map(|m| m.len()).ok() != Some(end) {
            return;
        }
        let mut tail = vec![0u8; ours.len()];
        if self.file.read_exact_at(&mut tail, start).is_ok() && tail == ours {
            let _ = self.file.set_len(start);
        }
    }
}

/// How long a torn tail must keep its size before it is taken for a dead writer's and fenced.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(25);
/// The longest an append waits for a torn tail to settle.
const SETTLE_BOUND: std::time::Duration = std::time::Duration::from_millis(250);

/// Writes all of `bytes` (appending); on failure, how many bytes went out before it.
fn write_counted(
    mut file: &File,
    bytes: &[u8],
) -> std::result::Result<(), (usize, std::io::Error)> {
    let mut written = 0;
    while written < bytes.len() {
        match file.write(&bytes[written..]) {
            Ok(0) => return Err((written, std::io::ErrorKind::WriteZero.into())),
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((written, e)),
        }
    }
    Ok(())
}

/// Appends one envelope to the queue at `path`.
pub fn append(root: &Root, path: &Path, env: &Envelope) -> Result<()> {
    QueueWriter::open(root, path)?.append(env)
}

/// One envelope as one compact line, newline included.
pub fn line_of(env: &Envelope) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    serde_json::to_writer(&mut line, env).expect("envelopes always serialise");
    line.push(b'\n');
    line
}

/// Which messages a read returns.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only messages at or after this instant (messages without a readable time are left out).
    pub since: Option<DateTime<Utc>>,
    /// Only this type.
    pub kind: Option<String>,
    /// Only this source.
    pub source: Option<String>,
}

impl Filter {
    /// Parses a `--since` value into an instant, with a clear error.
    pub fn parse_since(s: &str) -> Result<DateTime<Utc>> {
        parse_ts(s).ok_or_else(|| {
            Error::refused(format!(
                "--since {s:?} is not a timestamp; use RFC 3339, e.g. 2026-02-01T12:00:00Z"
            ))
        })
    }

    /// True when `env` passes every filter.
    pub fn matches(&self, env: &Envelope) -> bool {
        if let Some(k) = &self.kind
            && env.kind != *k
        {
            return false;
        }
        if let Some(s) = &self.source
            && env.source != *s
        {
            return false;
        }
        if let Some(since) = self.since {
            return env.instant().is_some_and(|t| t >= since);
        }
        true
    }
}

/// The result of a read: the messages, how many lines were skipped, and where the next read starts.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReadResult {
    pub messages: Vec<Envelope>,
    pub count: usize,
    /// Blank, unparsable and unterminated lines passed over.
    pub skipped: usize,
    /// Byte offset just past the last complete line read (for `--follow`).
    pub next_offset: u64,
}

/// Splits `buf` into complete lines; returns (parsed envelopes, consumed bytes, bad lines).
fn parse_complete(buf: &[u8], filter: &Filter, out: &mut Vec<Envelope>) -> (usize, usize) {
    let mut consumed = 0;
    let mut skipped = 0;
    while let Some(nl) = buf[consumed..].iter().position(|b| *b == b'\n') {
        let line = &buf[consumed..consumed + nl];
        consumed += nl + 1;
        match parse_line(line) {
            Some(env) => {
                if filter.matches(&env) {
                    out.push(env)
                }
            }
            None => skipped += 1,
        }
    }
    (consumed, skipped)
}

fn parse_line(line: &[u8]) -> Option<Envelope> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    Envelope::parse_line(line)
}

/// Reads every message of the queue at `path` that passes `filter`. A missing queue is empty.
pub fn read(path: &Path, filter: &Filter) -> Result<ReadResult> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadResult::default()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut res = ReadResult::default();
    let mut line = Vec::with_capacity(512);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            res.skipped += 1; // unterminated trailing line: a writer is mid-line or died there
            break;
        }
        res.next_offset += n as u64;
        match parse_line(&line[..n - 1]) {
            Some(env) if filter.matches(&env) => res.messages.push(env),
            Some(_) => {}
            None => res.skipped += 1,
        }
    }
    res.count = res.messages.len();
    Ok(res)
}

/// The last `n` messages passing `filter`, found by reading backwards from the end in blocks (the file
/// is never read whole unless the filter keeps looking).
pub fn tail(path: &Path, n: usize, filter: &Filter) -> Result<ReadResult> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadResult::default()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut res = ReadResult::default();
    const BLOCK: usize = 64 * 1024;
    let mut found: Vec<Envelope> = Vec::new();
    // `acc` holds the bytes [pos, end) not yet handled; once `end_known`, it ends with '\n'.
    let mut acc: Vec<u8> = Vec::new();
    let mut pos = len;
    let mut end_known = false;
    let mut block = vec![0u8; BLOCK];
    'outer: loop {
        if end_known && found.len() < n {
            while !acc.is_empty() {
                let body = &acc[..acc.len() - 1];
                let (line_start, line) = match body.iter().rposition(|b| *b == b'\n') {
                    Some(i) => (i + 1, &body[i + 1..]),
                    None if pos == 0 => (0, body),
                    None => break,
                };
                match parse_line(line) {
                    Some(env) if filter.matches(&env) => found.push(env),
                    Some(_) => {}
                    None => res.skipped += 1,
                }
                acc.truncate(line_start);
                if found.len() >= n {
                    break 'outer;
                }
            }
        }
        if pos == 0 || (end_known && found.len() >= n) {
            break;
        }
        let start = pos.saturating_sub(BLOCK as u64);
        let size = (pos - start) as usize;
        file.seek(SeekFrom::Start(start))
            .map_err(|e| Error::io(path, e))?;
        file.read_exact(&mut block[..size])
            .map_err(|e| Error::io(path, e))?;
        let mut joined = Vec::with_capacity(size + acc.len());
        joined.extend_from_slice(&block[..size]);
        joined.extend_from_slice(&acc);
        acc = joined;
        pos = start;
        if !end_known {
            match acc.iter().rposition(|b| *b == b'\n') {
                Some(i) => {
                    if i + 1 < acc.len() {
                        res.skipped += 1; // unterminated trailing line
                    }
                    acc.truncate(i + 1);
                    res.next_offset = pos + i as u64 + 1;
                    end_known = true;
                }
                None if pos == 0 => {
                    if !acc.is_empty() {
                        res.skipped += 1;
                    }
                    acc.clear();
                }
                None => {}
            }
        }
    }
    found.reverse();
    res.count = found.len();
    res.messages = found;
    Ok(res)
}

/// Reads the complete lines appended at or after `offset`: (messages, offset after the last complete
/// line, bad lines skipped). A trailing unterminated line is left for the next call.
pub fn read_from(path: &Path, offset: u64) -> Result<(Vec<Envelope>, u64, usize)> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, 0)),
        Err(e) => return Err(Error::io(path, e)),
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    let (consumed, skipped) = parse_complete(&buf, &Filter::default(), &mut out);
    Ok((out, offset + consumed as u64, skipped))
}

/// An incremental reader for watchers: each [`QueueCursor::poll`] returns only what was appended since
/// the previous one. A queue that was replaced (archived) or truncated is read again from the start.
#[derive(Debug, Clone)]
pub struct QueueCursor {
    path: PathBuf,
    offset: u64,
    identity: Option<(u64, u64)>,
    /// Bad lines skipped so far.
    pub skipped: usize,
}

impl QueueCursor {
    /// A cursor at the start of the queue at `path`.
    pub fn new(path: &Path) -> Self {
        Self::at(path, 0)
    }

    /// A cursor at byte `offset` (e.g. a [`ReadResult::next_offset`]).
    pub fn at(path: &Path, offset: u64) -> Self {
        Self {
            path: path.to_path_buf(),
            offset,
            identity: identity(path),
            skipped: 0,
        }
    }

    /// The byte offset the next poll starts at.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The messages appended since the last poll.
    pub fn poll(&mut self) -> Result<Vec<Envelope>> {
        let id = identity(&self.path);
        let len = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if id != self.identity || len < self.offset {
            self.identity = id;
            self.offset = 0;
        }
        let (msgs, next, skipped) = read_from(&self.path, self.offset)?;
        self.offset = next;
        self.skipped += skipped;
        Ok(msgs)
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(i: usize) -> Envelope {
        let mut e = envelope("PROGRESS", "w", serde_json::json!({"i": i})).unwrap();
        e.timestamp = format!("2026-02-01T12:00:{:02}Z", i % 60);
        e
    }

    #[test]
    fn append_fences_a_torn_line_and_readers_count_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        std::fs::write(&p, "{\"id\": \"msg-torn\", \"type\": \"PROG").unwrap();
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (0, 1));
        append(&Root::at(dir.path()), &p, &env(1)).unwrap();
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (1, 1));
        assert_eq!(r.next_offset, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn tail_matches_a_full_read_for_every_n_and_block_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        let mut w = QueueWriter::open(&Root::at(dir.path()), &p).unwrap();
        for i in 0..3000 {
            w.append(&env(i)).unwrap();
            if i % 700 == 0 {
                let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                f.write_all(b"not json\n\n").unwrap();
            }
        }
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"torn").unwrap();
        let all = read(&p, &Filter::default()).unwrap();
        assert_eq!(all.count, 3000);
        for n in [0, 1, 5, 100, 1000, 2999, 3000, 5000] {
            let t = tail(&p, n, &Filter::default()).unwrap();
            let want: Vec<_> = all.messages[all.count.saturating_sub(n)..].to_vec();
            assert_eq!(t.messages, want, "n={n}");
            assert_eq!(t.next_offset, all.next_offset);
        }
        let whole = tail(&p, 10_000, &Filter::default()).unwrap();
        assert_eq!(whole.skipped, all.skipped);
    }

    #[test]
    fn filters_compare_instants_not_strings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        std::fs::write(
            &p,
            concat!(
                "{\"id\":\"a\",\"type\":\"X\",\"source\":\"s\",\"timestamp\":\"2026-02-01T12:08:20.5Z\"}\n",
                "{\"id\":\"b\",\"type\":\"Y\",\"source\":\"s\",\"timestamp\":\"2026-02-01T12:08:20.123Z\"}\n",
                "{\"id\":\"c\",\"type\":\"X\",\"source\":\"t\",\"timestamp\":\"2026-02-01T12:08:21\"}\n",
            ),
        )
        .unwrap();
        let f = Filter {
            since: Some(Filter::parse_since("2026-02-01T12:08:20.200000+00:00").unwrap()),
            ..Default::default()
        };
        let ids: Vec<_> = read(&p, &f)
            .unwrap()
            .messages
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, vec!["a", "c"]);
        let f = Filter {
            kind: Some("X".into()),
            source: Some("t".into()),
            ..Default::default()
        };
        assert_eq!(read(&p, &f).unwrap().messages[0].id, "c");
        assert!(Filter::parse_since("last tuesday").is_err());
    }

    #[test]
    fn cursor_reads_only_new_complete_lines_and_follows_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        let mut c = QueueCursor::new(&p);
        assert!(c.poll().unwrap().is_empty());
        append(&Root::at(dir.path()), &p, &env(1)).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"id\":\"half").unwrap();
        assert_eq!(c.poll().unwrap().len(), 1);
        let at = c.offset();
        f.write_all(b"\",\"type\":\"X\"}\n").unwrap();
        let got = c.poll().unwrap();
        assert_eq!(got[0].id, "half");
        assert!(c.offset() > at);
        std::fs::rename(&p, dir.path().join("old.jsonl")).unwrap();
        append(&Root::at(dir.path()), &p, &env(2)).unwrap();
        assert_eq!(c.poll().unwrap().len(), 1);
    }

    #[test]
    fn message_types_follow_the_pattern() {
        assert!(is_valid_type("PROGRESS") && is_valid_type("BUS_INIT") && is_valid_type("X2"));
        assert!(!is_valid_type("progress") && !is_valid_type("2X") && !is_valid_type(""));
        assert!(envelope("bad type", "w", Value::Null).is_err());
        assert!(envelope("X", "w", serde_json::json!([1])).is_err());
    }
}
