//! `queue.jsonl`: the append-only log of envelopes (docs/PROTOCOL.md §3).
//!
//! Writers take an exclusive `flock` on `queue.jsonl` itself (the lock a fixed Python `post_message`
//! takes too), fence off a torn line left by a dead writer with a newline (only once it has stayed
//! torn for [`FENCE_AFTER`]: never a line a live writer is still copying, so never a blank line), write
//! each line in one `write`, and cut a failed append back off. Readers never fail on a bad line: blank, unparsable and unterminated lines are skipped and
//! counted. [`tail`] seeks from the end; [`QueueCursor`] reads only what was appended since last time.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::model::Envelope;
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::ids::{check_free_text, generate_message_id};
use crate::store::lock::lock_file;
use crate::store::time::now_ts;

/// Pattern of message types.
pub(crate) const TYPE_PATTERN: &str = "^[A-Z][A-Z0-9_]*$";

/// True when `kind` matches [`TYPE_PATTERN`].
pub(crate) fn is_valid_type(kind: &str) -> bool {
    let b = kind.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// A message `type` (`PROGRESS`, `TASK_COMPLETE`, or any other word a track agrees on): validated
/// against `TYPE_PATTERN` and at most 64 bytes when parsed (docs/PROTOCOL.md 1.3). The engine's own
/// words convert from [`MessageType`](super::vocab::MessageType) without a check or an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageKind(std::borrow::Cow<'static, str>);

impl MessageKind {
    /// The field name used in error messages.
    pub const FIELD: &'static str = "message type";
    /// The pattern a value must match (and at most 64 bytes), as shown in error messages.
    pub const PATTERN: &'static str = TYPE_PATTERN;

    /// Parses `value`; refuses (`Error::InvalidName`) a value that does not match `TYPE_PATTERN`
    /// or is longer than 64 bytes.
    pub fn parse(value: &str) -> Result<Self> {
        if is_valid_type(value) {
            Ok(Self(std::borrow::Cow::Owned(value.to_owned())))
        } else {
            Err(Error::InvalidName {
                field: Self::FIELD,
                value: value.chars().take(80).collect(),
                pattern: TYPE_PATTERN,
            })
        }
    }

    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<super::vocab::MessageType> for MessageKind {
    fn from(t: super::vocab::MessageType) -> Self {
        Self(std::borrow::Cow::Borrowed(t.as_str()))
    }
}

impl From<&MessageKind> for MessageKind {
    fn from(k: &MessageKind) -> Self {
        k.clone()
    }
}

crate::store::ids::str_id_impls!(MessageKind);

/// Builds a fresh envelope (new id, now) after checking the source and the payload (the type was
/// checked when parsed).
pub(crate) fn envelope(kind: &MessageKind, source: &str, payload: Value) -> Result<Envelope> {
    let kind = kind.as_str();
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
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

/// An open `queue.jsonl` for appending (one flock per append, the file opened once).
///
/// A writer may live long (a [`super::Bus`] keeps one), so every append first makes sure the name
/// still leads to the file it holds: the queue may have been archived (renamed), replaced or deleted
/// since. Before locking, `stat(path)` is compared with the held file (the same check a Python writer
/// gets by opening by name); after locking, the held file's own `fstat` catches what happened in
/// between: a deleted file has no links, and `bus archive` marks the file it moves away read-only
/// while it holds the queue's lock. Either hint sends the writer back to the name.
#[derive(Debug)]
pub(crate) struct QueueWriter {
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
    pub(crate) fn open(root: &Root, path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            crate::store::atomic::ensure_dir(root, dir)?;
        }
        Self::open_in_place(root, path)
    }

    /// Opens the queue at `path` in a directory that must exist (the file is created if missing).
    pub(crate) fn open_in_place(root: &Root, path: &Path) -> Result<Self> {
        let (file, identity) = open_append(root, path)?;
        Ok(Self {
            root: root.clone(),
            path: path.to_path_buf(),
            file,
            identity,
            end: None,
            timeout: root.settings.lock_timeout,
        })
    }

    /// Appends `line` (which must end in `\n`; it may hold several whole lines) in one `write` under the
    /// queue's flock, fencing a torn last line.
    pub(crate) fn append_line(&mut self, line: &[u8]) -> Result<()> {
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
    /// newline may be a line another writer is still copying: a seed-style writer appends without the
    /// queue's lock, and a writer preempted mid-copy on a loaded machine leaves half a line that looks
    /// dead while it is off the CPU. Fencing a line that then completes leaves a blank line, which strict
    /// readers (`json.loads` on every line) cannot read, so the tail is fenced only once it has stayed
    /// unterminated, its size unchanged, for [`FENCE_AFTER`] (2 s, hundreds of times what a copy takes):
    /// measured from the file's last modification when that is already long past (a dead writer's old
    /// tail is fenced at once), else watched under the queue's lock. A tail that keeps growing without
    /// its newline for longer than the lock timeout is refused, nothing written.
    fn settled_tail(&self, len: u64) -> Result<(bool, u64)> {
        let started = std::time::Instant::now();
        let mut stable_since = started;
        let mut len = len;
        let mut nap = std::time::Duration::from_micros(200);
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
            let meta = self.file.metadata().map_err(|e| Error::io(&self.path, e))?;
            if meta.len() != len {
                // Still being written: look again shortly.
                len = meta.len();
                stable_since = std::time::Instant::now();
                nap = std::time::Duration::from_micros(200);
            }
            // Unchanged since we looked: how long has it been since anyone wrote? The file's mtime
            // says when the last write began; our own watch covers a clock that jumped.
            let untouched = meta
                .modified()
                .ok()
                .and_then(|m| std::time::SystemTime::now().duration_since(m).ok())
                .unwrap_or_default()
                .max(stable_since.elapsed());
            if untouched >= FENCE_AFTER {
                return Ok((true, len));
            }
            if started.elapsed() >= self.timeout.max(FENCE_AFTER * 2) {
                return Err(Error::refused(format!(
                    "{}: its last line has been growing for {:.1}s without a newline (another writer \
                     is still writing it); nothing was written, try again",
                    self.path.display(),
                    started.elapsed().as_secs_f64()
                )));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(std::time::Duration::from_millis(10));
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

/// How long a torn tail must have stayed unterminated and unchanged before it is taken for a dead
/// writer's and fenced (docs/PROTOCOL.md 3.2). A copy of a line of a few MiB takes milliseconds; a writer
/// preempted on a loaded machine is back within tens of milliseconds; 2 s leaves a wide margin over both.
pub(crate) const FENCE_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

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

/// One envelope as one compact line, newline included.
pub(crate) fn line_of(env: &Envelope) -> Vec<u8> {
    let mut line = crate::store::json_text(env, false);
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
    /// Parses a `since` value into an instant, as every moment is parsed (`time::parse_moment`:
    /// RFC 3339, `now`, `-15m`, a local `HH:MM` of today), with the same error text.
    pub fn parse_since(s: &str) -> Result<DateTime<Utc>> {
        crate::store::time::parse_moment(s, Utc::now())
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

/// Longest queue line a reader takes in (without its newline). A longer line is skipped, counted in
/// `skipped` and listed in [`ReadResult::oversized`]; readers never hold more than this for one line.
pub(crate) const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// A line passed over for being longer than `MAX_LINE_BYTES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OversizedLine {
    /// Byte offset of the line's start.
    pub offset: u64,
    /// Its length in bytes, newline included.
    pub bytes: u64,
}

impl OversizedLine {
    /// A one-line note for people, e.g. on stderr.
    pub fn note(&self, path: &Path) -> String {
        format!(
            "{}: skipped the line at byte {} ({} bytes, over the {} MiB line limit)",
            path.display(),
            self.offset,
            self.bytes,
            MAX_LINE_BYTES >> 20
        )
    }
}

/// Which page of a read to return: at most `limit` messages, starting at `cursor` (a
/// [`ReadResult::next_cursor`] from the previous page).
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Messages per page; `None` returns every message from the cursor on.
    pub limit: Option<usize>,
    /// Where to start: a previous page's `next_cursor`; `None` starts at the first line.
    pub cursor: Option<String>,
}

/// The result of a read: the messages, how many lines were skipped, and where the next read starts.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReadResult {
    /// The messages of this page, oldest first.
    pub messages: Vec<Envelope>,
    /// How many messages passed the filter in the part read (from the cursor, or the start, to the
    /// end; for a tail, the last N); `messages` holds the first `limit` of them.
    pub count: usize,
    /// Blank, unparsable, oversized and unterminated lines passed over.
    pub skipped: usize,
    /// Byte offset just past the last complete line read (for `--follow`).
    pub next_offset: u64,
    /// Pass back as `cursor` for the next page; `null` when this page holds the last message.
    pub next_cursor: Option<String>,
    /// Lines over `MAX_LINE_BYTES` that were skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oversized: Vec<OversizedLine>,
}

/// One line from [`next_line`].
pub(crate) enum Line {
    /// A complete line, its bytes (without the newline) in the buffer; `len` counts the newline.
    Complete {
        len: u64,
    },
    /// A complete line over [`MAX_LINE_BYTES`]; nothing of it was kept.
    Oversized {
        len: u64,
    },
    /// Bytes after the last newline (a writer is mid-line or died there).
    Unterminated,
    Eof,
}

/// Reads the next line into `buf`, keeping at most `max` bytes of it: a longer line is streamed past.
pub(crate) fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut len: u64 = 0;
    let mut over = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if len == 0 {
                Line::Eof
            } else {
                Line::Unterminated
            });
        }
        let (chunk, ends) = match memchr::memchr(b'\n', avail) {
            Some(i) => (&avail[..i], true),
            None => (avail, false),
        };
        if !over && buf.len() + chunk.len() > max {
            over = true;
            buf.clear();
        }
        if !over {
            buf.extend_from_slice(chunk);
        }
        let used = chunk.len() + usize::from(ends);
        len += used as u64;
        r.consume(used);
        if ends {
            return Ok(if over {
                Line::Oversized { len }
            } else {
                Line::Complete { len }
            });
        }
    }
}

fn parse_line(line: &[u8]) -> Option<Envelope> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    Envelope::parse_line(line)
}

fn cursor_of(offset: u64) -> String {
    offset.to_string()
}

/// The byte offset a cursor names, checked to be the start of a line of this queue.
fn parse_cursor(file: &File, path: &Path, cursor: &str, len: u64) -> Result<u64> {
    let bad = |why: &str| {
        Error::refused(format!(
            "cursor {cursor:?} {why}; pass `next_cursor` from the previous page as it is, or read from the start without a cursor"
        ))
    };
    let offset: u64 = cursor
        .parse()
        .map_err(|_| bad("is not a cursor this reader gave"))?;
    if offset > len {
        return Err(bad("is past the end of the queue (was it archived?)"));
    }
    if offset > 0 {
        let mut b = [0u8];
        file.read_exact_at(&mut b, offset - 1)
            .map_err(|e| Error::io(path, e))?;
        if b[0] != b'\n' {
            return Err(bad("does not point at the start of a line"));
        }
    }
    Ok(offset)
}

/// Opens a queue for reading, `None` if missing; anything but a regular file (a FIFO would block every
/// reader, a device never ends) is refused.
pub(crate) fn open_queue(path: &Path) -> Result<Option<File>> {
    crate::store::read::open_regular(path)
}

/// Reads every message of the queue at `path` that passes `filter`. A missing queue is empty.
pub fn read(path: &Path, filter: &Filter) -> Result<ReadResult> {
    read_page(path, filter, &Page::default())
}

/// Reads one page of the messages passing `filter`, oldest first, streaming: memory holds one line
/// (at most [`MAX_LINE_BYTES`]) and the page, never the file.
pub(crate) fn read_page(path: &Path, filter: &Filter, page: &Page) -> Result<ReadResult> {
    let Some(mut file) = open_queue(path)? else {
        if let Some(c) = &page.cursor
            && c != "0"
        {
            return Err(Error::refused(format!(
                "cursor {c:?} is past the end of the queue (was it archived?); read from the start without a cursor"
            )));
        }
        return Ok(ReadResult::default());
    };
    let start = match &page.cursor {
        Some(c) => {
            let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
            parse_cursor(&file, path, c, len)?
        }
        None => 0,
    };
    file.seek(SeekFrom::Start(start))
        .map_err(|e| Error::io(path, e))?;
    let limit = page.limit.unwrap_or(usize::MAX);
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut res = ReadResult {
        next_offset: start,
        ..Default::default()
    };
    let mut line = Vec::with_capacity(512);
    loop {
        match next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(|e| Error::io(path, e))? {
            Line::Eof => break,
            Line::Unterminated => {
                res.skipped += 1;
                break;
            }
            Line::Oversized { len } => {
                res.skipped += 1;
                res.oversized.push(OversizedLine {
                    offset: res.next_offset,
                    bytes: len,
                });
                res.next_offset += len;
            }
            Line::Complete { len } => {
                res.next_offset += len;
                match parse_line(&line) {
                    Some(env) if filter.matches(&env) => {
                        res.count += 1;
                        if res.messages.len() < limit {
                            res.messages.push(env);
                            if res.messages.len() == limit {
                                res.next_cursor = Some(cursor_of(res.next_offset));
                            }
                        }
                    }
                    Some(_) => {}
                    None => res.skipped += 1,
                }
            }
        }
    }
    if res.count <= res.messages.len() {
        res.next_cursor = None;
    }
    Ok(res)
}

/// The newline positions of a file, last first, found by reading backwards in blocks (each byte once).
struct RevNewlines<'f> {
    file: &'f File,
    /// The block in memory and the file offset of its first byte.
    block: Vec<u8>,
    block_start: u64,
    /// Newlines before this index of `block` are still to be returned.
    upto: usize,
}

impl<'f> RevNewlines<'f> {
    const BLOCK: usize = 64 * 1024;

    fn new(file: &'f File, len: u64) -> Self {
        Self {
            file,
            block: Vec::new(),
            block_start: len,
            upto: 0,
        }
    }

    /// The offset of the previous newline, or `None` at the start of the file.
    fn prev(&mut self) -> std::io::Result<Option<u64>> {
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.block[..self.upto]) {
                self.upto = i;
                return Ok(Some(self.block_start + i as u64));
            }
            if self.block_start == 0 {
                return Ok(None);
            }
            let start = self.block_start.saturating_sub(Self::BLOCK as u64);
            let size = (self.block_start - start) as usize;
            self.block.resize(size, 0);
            self.file.read_exact_at(&mut self.block, start)?;
            self.block_start = start;
            self.upto = size;
        }
    }

    /// The bytes `[from, to)`: from the block in memory when it holds them, else read from the file.
    fn bytes(&self, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
        let end = self.block_start + self.block.len() as u64;
        if from >= self.block_start && to <= end {
            let a = (from - self.block_start) as usize;
            let b = (to - self.block_start) as usize;
            return Ok(self.block[a..b].to_vec());
        }
        let mut buf = vec![0u8; (to - from) as usize];
        self.file.read_exact_at(&mut buf, from)?;
        Ok(buf)
    }
}

/// The last `n` messages passing `filter`, found by reading backwards from the end in blocks: each
/// byte is read at most twice, and a line over `MAX_LINE_BYTES` is skipped without being read.
pub fn tail(path: &Path, n: usize, filter: &Filter) -> Result<ReadResult> {
    tail_page(path, n, filter, None)
}

/// Like [`tail`], returning at most `limit` of the last `n` (oldest first), with a cursor after them.
pub(crate) fn tail_page(
    path: &Path,
    n: usize,
    filter: &Filter,
    limit: Option<usize>,
) -> Result<ReadResult> {
    let Some(file) = open_queue(path)? else {
        return Ok(ReadResult::default());
    };
    let io = |e| Error::io(path, e);
    let len = file.metadata().map_err(io)?.len();
    let mut res = ReadResult::default();
    let mut lines = RevNewlines::new(&file, len);
    // `end` is the offset of the newline ending the line being looked at.
    let Some(mut end) = lines.prev().map_err(io)? else {
        if len > 0 {
            res.skipped += 1; // one unterminated line
        }
        return Ok(res);
    };
    if end + 1 < len {
        res.skipped += 1; // unterminated trailing line
    }
    res.next_offset = end + 1;
    // (message, offset just past its line), newest first.
    let mut found: Vec<(Envelope, u64)> = Vec::new();
    while found.len() < n {
        let prev = lines.prev().map_err(io)?;
        let start = prev.map_or(0, |p| p + 1);
        let size = end - start;
        if size > MAX_LINE_BYTES as u64 {
            res.skipped += 1;
            res.oversized.push(OversizedLine {
                offset: start,
                bytes: size + 1,
            });
        } else {
            match parse_line(&lines.bytes(start, end).map_err(io)?) {
                Some(env) if filter.matches(&env) => found.push((env, end + 1)),
                Some(_) => {}
                None => res.skipped += 1,
            }
        }
        match prev {
            Some(p) => end = p,
            None => break,
        }
    }
    found.reverse();
    res.oversized.reverse();
    res.count = found.len();
    let limit = limit.unwrap_or(usize::MAX);
    if found.len() > limit {
        found.truncate(limit);
        res.next_cursor = found.last().map(|(_, after)| cursor_of(*after));
    }
    res.messages = found.into_iter().map(|(env, _)| env).collect();
    Ok(res)
}

/// Reads the complete lines appended at or after `offset`: (messages, offset after the last complete
/// line, bad lines skipped). A trailing unterminated line is left for the next call; a line over
/// `MAX_LINE_BYTES` is passed over without being held.
pub fn read_from(path: &Path, offset: u64) -> Result<(Vec<Envelope>, u64, usize)> {
    read_from_upto(path, offset, u64::MAX)
}

/// [`read_from`], stopping at the first line end past `max_bytes` from `offset`. A reader that must
/// hold what it reads needs this bound: writers that append faster than it parses (a starved reader
/// on a busy machine) would otherwise keep it reading, and holding, until memory runs out; the rest
/// is read by the next call.
pub fn read_from_upto(
    path: &Path,
    offset: u64,
    max_bytes: u64,
) -> Result<(Vec<Envelope>, u64, usize)> {
    let Some(mut file) = open_queue(path)? else {
        return Ok((Vec::new(), 0, 0));
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(512);
    let (mut out, mut next, mut skipped) = (Vec::new(), offset, 0);
    loop {
        match next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(|e| Error::io(path, e))? {
            Line::Eof | Line::Unterminated => break,
            Line::Oversized { len } => {
                next += len;
                skipped += 1;
            }
            Line::Complete { len } => {
                next += len;
                match parse_line(&line) {
                    Some(env) => out.push(env),
                    None => skipped += 1,
                }
            }
        }
        if next.saturating_sub(offset) >= max_bytes {
            break;
        }
    }
    Ok((out, next, skipped))
}

/// What [`read_last_upto`] read: the last messages in full, and only the timestamps of those before.
#[derive(Debug, Default)]
pub struct LastRead {
    /// The timestamps (as written) of the messages read before [`LastRead::messages`], in order.
    pub earlier: Vec<String>,
    /// The last messages read, at most the number asked for, in order.
    pub messages: Vec<Envelope>,
    /// Offset just past the last complete line (an unterminated last line is left for later).
    pub next_offset: u64,
    /// Blank, unparsable or oversized lines passed over.
    pub skipped: usize,
}

/// [`read_from_upto`] for a reader that keeps only the last `keep` messages (a bounded buffer): those
/// are parsed in full, and of the messages before them only the timestamp is read (a message rate
/// counts them). The lines a reader would drop at once cost a scan, not a parse into values; which
/// lines are messages and which are skipped is the same as with [`read_from_upto`].
pub fn read_last_upto(path: &Path, offset: u64, max_bytes: u64, keep: usize) -> Result<LastRead> {
    let Some(mut file) = open_queue(path)? else {
        return Ok(LastRead::default());
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(512);
    // The complete lines, one after another in `bytes`, each its end there (at most `max_bytes` and
    // one line: the bound the caller gave).
    let (mut bytes, mut ends) = (Vec::new(), Vec::new());
    let mut out = LastRead {
        next_offset: offset,
        ..LastRead::default()
    };
    loop {
        match next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(|e| Error::io(path, e))? {
            Line::Eof | Line::Unterminated => break,
            Line::Oversized { len } => {
                out.next_offset += len;
                out.skipped += 1;
            }
            Line::Complete { len } => {
                out.next_offset += len;
                bytes.extend_from_slice(&line);
                ends.push(bytes.len());
            }
        }
        if out.next_offset.saturating_sub(offset) >= max_bytes {
            break;
        }
    }
    let line_at = |i: usize| &bytes[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
    // From the end: the last `keep` messages in full; where they start, the earlier lines begin.
    let mut first_kept = ends.len();
    while first_kept > 0 && out.messages.len() < keep {
        first_kept -= 1;
        match parse_line(line_at(first_kept)) {
            Some(env) => out.messages.push(env),
            None => out.skipped += 1,
        }
    }
    out.messages.reverse();
    for i in 0..first_kept {
        match timestamp_of_line(line_at(i)) {
            Some(ts) => out.earlier.push(ts),
            None => out.skipped += 1,
        }
    }
    Ok(out)
}

/// The `timestamp` of a queue line as [`Envelope`] reads it (`None` exactly when [`parse_line`]
/// gives `None`), without building the line's values.
fn timestamp_of_line(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Stamp {
        #[serde(default, deserialize_with = "crate::bus::model::lenient::string")]
        timestamp: String,
    }
    // Only an object is a message (a derived struct would also take an array).
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<Stamp>(line) {
        Ok(s) => Some(s.timestamp),
        // A key written twice is an error here and the last one wins in a full read.
        Err(_) => parse_line(line).map(|e| e.timestamp),
    }
}

/// The most bytes of the queue one [`QueueCursor::poll`] reads (the rest comes with the next poll).
const POLL_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// An incremental reader for watchers: each [`QueueCursor::poll`] returns only what was appended since
/// the previous one (at most [`POLL_MAX_BYTES`] of it per poll). A queue that was replaced (archived) or truncated is read again from the start.
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
        let (msgs, next, skipped) = read_from_upto(&self.path, self.offset, POLL_MAX_BYTES)?;
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

    /// Appends one envelope to the queue at `path`.
    fn append(root: &Root, path: &Path, env: &Envelope) -> Result<()> {
        QueueWriter::open(root, path)?.append_line(&line_of(env))
    }

    fn env(i: usize) -> Envelope {
        let mut e = envelope(
            &super::super::vocab::MessageType::Progress.into(),
            "w",
            serde_json::json!({"i": i}),
        )
        .unwrap();
        e.timestamp = format!("2026-02-01T12:00:{:02}Z", i % 60);
        e
    }

    /// Makes the file look last written `ago` back (a writer that died that long ago).
    fn age(p: &Path, ago: std::time::Duration) {
        let f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        f.set_modified(std::time::SystemTime::now() - ago).unwrap();
    }

    /// Queue lines as foreign writers leave them: messages with any kind of `timestamp` (missing,
    /// a number, an object, written twice, escaped), arrays, scalars, blank and broken lines.
    fn hostile_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (0u32..100).prop_map(|i| format!(
                r#"{{"id":"m{i}","type":"PROGRESS","source":"w","timestamp":"2026-02-01T12:00:{:02}Z","payload":{{"i":{i}}}}}"#,
                i % 60
            )),
            (0u32..100).prop_map(|i| format!(r#"{{"timestamp":{i},"x":[1,2,{{"timestamp":"no"}}]}}"#)),
            Just(r#"{"timestamp":"a","timestamp":"b","id":"twice"}"#.to_owned()),
            Just(r#"{"timestamp":"escaped"}"#.to_owned()),
            Just(r#"{"timestamp":{"nested":true}}"#.to_owned()),
            Just(r#"  {"id":"no timestamp"}  "#.to_owned()),
            Just(r#"["2026-02-01T12:00:00Z"]"#.to_owned()),
            Just("42".to_owned()),
            Just(String::new()),
            Just("   ".to_owned()),
            Just(r#"{"timestamp":"cut"#.to_owned()),
            Just(r#"{"a":1} trailing"#.to_owned()),
        ]
    }

    proptest::proptest! {
        /// Keeping the last messages reads the same lines as a full read: the same messages kept,
        /// the same timestamps before them, the same lines skipped and the same offset reached.
        #[test]
        fn reading_only_the_last_messages_in_full_agrees_with_a_full_read(
            lines in proptest::collection::vec(hostile_line(), 0..60),
            keep in 0usize..70,
            from in 0usize..4,
            bound in 1u64..8000,
            unterminated in proptest::bool::ANY,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("queue.jsonl");
            let mut text = lines.join("\n");
            if !unterminated && !lines.is_empty() {
                text.push('\n');
            }
            std::fs::write(&p, &text).unwrap();
            let offset = text
                .match_indices('\n')
                .nth(from)
                .map_or(0, |(i, _)| i as u64 + 1);
            let (all, next, skipped) = read_from_upto(&p, offset, bound).unwrap();
            let last = read_last_upto(&p, offset, bound, keep).unwrap();
            let split = all.len().saturating_sub(keep);
            proptest::prop_assert_eq!(&last.messages[..], &all[split..]);
            let stamps: Vec<&str> = all[..split].iter().map(|e| e.timestamp.as_str()).collect();
            proptest::prop_assert_eq!(last.earlier.iter().map(String::as_str).collect::<Vec<_>>(), stamps);
            proptest::prop_assert_eq!((last.next_offset, last.skipped), (next, skipped));
        }
    }

    #[test]
    fn a_bounded_read_stops_at_the_first_line_end_past_its_bound_and_the_next_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        let root = Root::at(dir.path());
        for i in 0..100 {
            append(&root, &p, &env(i)).unwrap();
        }
        let line = line_of(&env(0)).len() as u64 + 1;
        let (first, next, _) = read_from_upto(&p, 0, 10 * line).unwrap();
        assert!((10..=11).contains(&first.len()), "{}", first.len());
        assert!(next >= 10 * line && next < 12 * line + 16, "{next}");
        let (rest, end, _) = read_from_upto(&p, next, u64::MAX).unwrap();
        assert_eq!(first.len() + rest.len(), 100);
        assert_eq!(end, std::fs::metadata(&p).unwrap().len());
        let all: Vec<u64> = first
            .iter()
            .chain(&rest)
            .map(|e| e.payload["i"].as_u64().unwrap())
            .collect();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        // A bound of one byte still reads one whole line.
        assert_eq!(read_from_upto(&p, 0, 1).unwrap().0.len(), 1);
    }

    #[test]
    fn append_fences_a_torn_line_and_readers_count_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        std::fs::write(&p, "{\"id\": \"msg-torn\", \"type\": \"PROG").unwrap();
        age(&p, FENCE_AFTER * 2);
        let started = std::time::Instant::now();
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (0, 1));
        append(&Root::at(dir.path()), &p, &env(1)).unwrap();
        assert!(
            started.elapsed() < FENCE_AFTER,
            "a tail untouched for long is fenced at once"
        );
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (1, 1));
        assert_eq!(r.next_offset, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn a_fresh_torn_tail_is_waited_for_and_fenced_only_after_fence_after() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        let root = Root::at(dir.path());
        // Completed by its writer 400 ms later (far past the old 25 ms settle): never fenced.
        std::fs::write(&p, "{\"id\":\"slow\",\"type\":\"X\",").unwrap();
        let finisher = {
            let p = p.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(400));
                let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                f.write_all(b"\"source\":\"s\",\"timestamp\":\"2026-02-01T12:00:00Z\"}\n")
                    .unwrap();
            })
        };
        append(&root, &p, &env(1)).unwrap();
        finisher.join().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains("\n\n"), "{text}");
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (2, 0), "{text}");
        assert_eq!(r.messages[0].id, "slow");
        // Torn just now and never finished: fenced, but not before FENCE_AFTER has passed.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"id\":\"dead").unwrap();
        let started = std::time::Instant::now();
        append(&root, &p, &env(2)).unwrap();
        assert!(started.elapsed() >= FENCE_AFTER, "{:?}", started.elapsed());
        let r = read(&p, &Filter::default()).unwrap();
        assert_eq!((r.count, r.skipped), (3, 1));
    }

    #[test]
    fn tail_matches_a_full_read_for_every_n_and_block_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.jsonl");
        let mut w = QueueWriter::open(&Root::at(dir.path()), &p).unwrap();
        for i in 0..3000 {
            w.append_line(&line_of(&env(i))).unwrap();
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
        for ok in ["PROGRESS", "X", "BUS_INIT", "A1_B2", &"A".repeat(64)] {
            let k = MessageKind::parse(ok).unwrap();
            assert_eq!((k.as_str(), k.to_string()), (ok, ok.to_owned()));
        }
        let long = "A".repeat(65);
        for bad in [
            "", "bad type", "progress", "1X", "_X", "X-Y", "X/Y", "..", "X\n", "X\0", &long,
        ] {
            let err = MessageKind::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid message type ") && err.contains(TYPE_PATTERN),
                "{bad:?}: {err}"
            );
        }
        assert_eq!(
            MessageKind::from(super::super::vocab::MessageType::FileLock).as_str(),
            "FILE_LOCK"
        );
        assert!(serde_json::from_str::<MessageKind>("\"x\"").is_err());
        let x = MessageKind::parse("X").unwrap();
        assert!(envelope(&x, "w", serde_json::json!([1])).is_err());
        assert!(envelope(&x, "", Value::Null).is_err());
    }
}
