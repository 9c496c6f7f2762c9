//! The operator journal (docs/CONDUCTOR.md "Operator journal"): every state-changing act, one JSON line
//! each in `conductor/journal.jsonl`, appended under `conductor/.journal.lock`, each entry carrying the
//! SHA-256 of the previous one so an edited, removed or reordered entry is found by [`verify`].
//!
//! The journal rotates into `conductor/journal/{first_seq}.jsonl` segments before it reaches
//! [`DEFAULT_SEGMENT_BYTES`]; the chain runs on across segments. Journaling never blocks the act it
//! records: an entry that cannot be written is reported by the caller as a warning.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::lock::FileLock;
use crate::store::time::{now_ts, parse_ts};

pub(crate) mod anchor;
pub(crate) mod verb;

pub use verb::{Outcome, Target, Verb};

/// The `prev` of the first entry.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A segment is rotated out once it reaches this size, well below the engine's read limits.
pub(crate) const DEFAULT_SEGMENT_BYTES: u64 = 8 * 1024 * 1024;

/// Longest journal line a reader accepts (an entry is a few hundred bytes).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Longest actor name (`--actor`, an MCP client's name).
pub(crate) const MAX_ACTOR_CHARS: usize = 128;

/// Longest reason kept in an entry; longer ones are cut with `…`.
const MAX_REASON_CHARS: usize = 2000;

/// Who acts and through which surface: recorded in every journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// `--actor`, else the user name; the client's name for MCP calls.
    pub actor: String,
    /// `cli`, `console`, `mcp`, `supervisor`, `demo`, or `engine` (a library caller that said nothing).
    pub source: String,
}

impl Default for Origin {
    fn default() -> Self {
        Self::new(None, "engine")
    }
}

impl Origin {
    /// `actor` (cleaned), else the user name, acting through `source`.
    pub fn new(actor: Option<&str>, source: &str) -> Self {
        let actor = actor
            .map(clean_actor)
            .filter(|a| !a.is_empty())
            .unwrap_or_else(user_name);
        Self {
            actor,
            source: source.to_owned(),
        }
    }
}

/// The user running this process (`$USER`, else `$LOGNAME`, else `unknown`).
pub(crate) fn user_name() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|v| clean_actor(&v))
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// An actor name without control characters, at most `MAX_ACTOR_CHARS` long.
pub fn clean_actor(a: &str) -> String {
    a.trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_ACTOR_CHARS)
        .collect()
}

/// Refuses an actor name that is empty, too long or holds control characters (for `--actor`).
pub fn check_actor(a: &str) -> Result<()> {
    if a.trim().is_empty() || a.chars().count() > MAX_ACTOR_CHARS || a.chars().any(char::is_control)
    {
        return Err(Error::refused(format!(
            "--actor {a:?} is not a usable name: give 1 to {MAX_ACTOR_CHARS} printable characters"
        )));
    }
    Ok(())
}

/// One act to record.
#[derive(Debug, Clone)]
pub struct Act {
    /// What was done: one word of the journal's vocabulary ([`Verb`]).
    pub action: Verb,
    /// The ids it concerns, keyed by [`Target`] words (`workflow_id`, `handoff_id`, `track`, …).
    pub targets: Map<String, Value>,
    /// Why, when the actor gave a reason (an operator's reject or abort).
    pub reason: Option<String>,
    /// What came of it, in the result's own words (`dispatched`, `completed`, `aborted`, …).
    pub outcome: String,
}

impl Act {
    /// An act with no targets yet.
    pub fn new(action: Verb, outcome: impl Into<String>) -> Self {
        Self {
            action,
            targets: Map::new(),
            reason: None,
            outcome: outcome.into(),
        }
    }

    /// Adds a target id (skipped when `None` or empty).
    pub fn target<S: AsRef<str>>(mut self, key: Target, value: Option<S>) -> Self {
        if let Some(v) = value
            && !v.as_ref().is_empty()
        {
            self.targets
                .insert(key.as_str().to_owned(), json!(v.as_ref()));
        }
        self
    }

    /// Adds the workflow the act concerns (skipped when empty).
    pub fn workflow(self, id: impl AsRef<str>) -> Self {
        self.target(Target::WorkflowId, Some(id))
    }

    /// Adds the handoff (the dispatch) the act concerns (skipped when empty).
    pub fn handoff(self, id: impl AsRef<str>) -> Self {
        self.target(Target::HandoffId, Some(id))
    }

    /// Sets a target to any JSON value (a list: the dispatches an abort withdrew).
    pub(crate) fn set_target(&mut self, key: Target, value: Value) {
        self.targets.insert(key.as_str().to_owned(), value);
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: Option<&str>) -> Self {
        self.reason = reason.filter(|r| !r.trim().is_empty()).map(|r| {
            let mut s: String = r.chars().take(MAX_REASON_CHARS).collect();
            if r.chars().count() > MAX_REASON_CHARS {
                s.push('…');
            }
            s
        });
        self
    }
}

/// `conductor/journal.jsonl`: the segment being appended to.
pub fn journal_path(root: &Root) -> PathBuf {
    root.conductor.join(crate::store::layout::JOURNAL_FILE)
}

/// `conductor/journal/`: the rotated segments, named by their first sequence number.
pub fn segments_dir(root: &Root) -> PathBuf {
    root.conductor.join("journal")
}

/// `conductor/.journal.lock`: the journal's `flock` (a file of its own, so rotation never moves it).
pub(crate) fn lock_path(root: &Root) -> PathBuf {
    root.conductor.join(".journal.lock")
}

/// The rotation size in force: `PANTHEON_JOURNAL_SEGMENT_BYTES` (at least 1 KiB), else the default.
pub(crate) fn segment_bytes() -> u64 {
    std::env::var("PANTHEON_JOURNAL_SEGMENT_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|n| n.clamp(1024, DEFAULT_SEGMENT_BYTES * 8))
        .unwrap_or(DEFAULT_SEGMENT_BYTES)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Opens the journal for reading and appending the way every engine write opens a file
/// (`crate::store::safe`): by `openat` from the root down, never through a symbolic link in any
/// component, created with the mode `open(…, "w")` gives, and refused when it has more than one hard
/// link (an append through a hard link would land outside the root).
/// Opens a journal file for reading, never through a symbolic link (readers are tolerant: a file they
/// cannot open is reported by `verify`, never followed).
/// `O_NONBLOCK` so a FIFO planted in its place cannot block the open; anything but a regular file is
/// refused (a FIFO or a device would block or never end every journaled act and every reader).
pub fn open_read(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file; move it away (the journal is plain JSON lines)",
        ));
    }
    Ok(f)
}

/// Skips the rest of the current line of `r` (through its newline) without holding it in memory.
fn skip_line(r: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Opens the journal for appending, with its length (from the one `statx` its check made).
fn open_for_append(root: &Root, path: &Path) -> Result<(File, u64)> {
    use rustix::fs::OFlags;
    let file =
        crate::store::safe::open_file(root, path, OFlags::RDWR | OFlags::APPEND | OFlags::CREATE)?
            .ok_or_else(|| Error::refused(format!("{} could not be created", path.display())))?;
    let len = crate::store::safe::require_single_link(&file, path)?.len();
    Ok((file, len))
}

/// What the last entry of the journal was: its sequence number and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    seq: u64,
    hash: String,
}

impl Head {
    fn genesis() -> Self {
        Self {
            seq: 0,
            hash: GENESIS.to_owned(),
        }
    }
}

/// The head from the last complete line of `bytes` (the tail of a file). A line that is not an entry
/// still chains: the next entry's `prev` is the hash of its raw bytes, so `verify` reports it.
fn head_of_tail(bytes: &[u8]) -> Option<Head> {
    let mut lines = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).rev();
    let last = lines.next()?;
    if let Some(h) = parse_head(last) {
        return Some(h);
    }
    let seq = lines.find_map(parse_head).map_or(0, |h| h.seq);
    Some(Head {
        seq: seq.saturating_add(1),
        hash: sha256_hex(last),
    })
}

fn parse_head(line: &[u8]) -> Option<Head> {
    let v: Map<String, Value> = serde_json::from_slice(line).ok()?;
    Some(Head {
        seq: v.get("seq")?.as_u64()?,
        hash: v.get("hash")?.as_str()?.to_owned(),
    })
}

/// Reads enough of the end of `file` (length `len`) to hold its last whole line: 4 KiB, else up to
/// [`MAX_LINE_BYTES`]. Each window is one positioned read (not a read per doubling of a buffer);
/// a file shorter than `len` gives what it holds.
fn read_tail(file: &File, len: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = Vec::new();
    for window in [4096u64, MAX_LINE_BYTES as u64 * 2] {
        let start = len.saturating_sub(window);
        buf.clear();
        buf.resize(usize::try_from(len - start).unwrap_or(0), 0);
        let mut filled = 0;
        while filled < buf.len() {
            let at = start.saturating_add(filled as u64);
            match file.read_at(&mut buf[filled..], at) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if start == 0 || body.contains(&b'\n') {
            break;
        }
    }
    Ok(buf)
}

/// The rotated segments, oldest first.
pub fn segments(root: &Root) -> Vec<PathBuf> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(segments_dir(root))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_suffix(".jsonl")?.parse::<u64>().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Every journal file in order: the segments, then `journal.jsonl`.
pub fn files(root: &Root) -> Vec<PathBuf> {
    let mut all = segments(root);
    all.push(journal_path(root));
    all
}

fn head_of_file(path: &Path) -> Result<Option<Head>> {
    let f = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let tail = read_tail(&f, len).map_err(|e| Error::io(path, e))?;
    Ok(head_of_tail(&tail))
}

fn first_seq(path: &Path) -> Option<u64> {
    let f = open_read(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(f)
        .take(MAX_LINE_BYTES as u64)
        .read_until(b'\n', &mut line)
        .ok()?;
    parse_head(line.trim_ascii_end()).map(|h| h.seq)
}

/// Appends one entry for `act` by `origin`; returns the entry as written.
pub fn append(root: &Root, origin: &Origin, act: &Act) -> Result<Value> {
    let lock = FileLock::exclusive(root, &lock_path(root))?;
    append_held(root, &lock, origin, act)
}

/// [`append`] for a caller that already holds the journal's lock (`_held`, taken on
/// [`lock_path`]): a check of the journal and the append that depends on it are then one step.
pub(crate) fn append_held(
    root: &Root,
    _held: &FileLock,
    origin: &Origin,
    act: &Act,
) -> Result<Value> {
    let path = journal_path(root);
    let (mut file, len) = open_for_append(root, &path)?;
    let tail = read_tail(&file, len).map_err(|e| Error::io(&path, e))?;
    // Writers end every entry with a newline; anything after the last one is a torn line left by a
    // writer killed mid-write, which never became an entry.
    let keep = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let start = len - tail.len() as u64;
    let len = start + keep as u64;
    if keep < tail.len() {
        file.set_len(len).map_err(|e| Error::io(&path, e))?;
    }
    let head = match head_of_tail(&tail[..keep]) {
        Some(h) => h,
        None => match segments(root).last() {
            Some(seg) => head_of_file(seg)?.unwrap_or_else(Head::genesis),
            None => Head::genesis(),
        },
    };

    if len >= segment_bytes() {
        drop(file);
        let first = first_seq(&path).unwrap_or(head.seq);
        let dir = segments_dir(root);
        crate::store::atomic::ensure_dir(root, &dir)?;
        let seg = dir.join(format!("{first:020}.jsonl"));
        crate::store::atomic::rename_durable(root, &path, &seg)?;
        file = open_for_append(root, &path)?.0;
    }

    let mut body = Map::new();
    body.insert("seq".into(), json!(head.seq.saturating_add(1)));
    body.insert("at".into(), json!(now_ts()));
    body.insert("actor".into(), json!(origin.actor));
    body.insert("source".into(), json!(origin.source));
    body.insert("action".into(), json!(act.action.as_str()));
    body.insert("targets".into(), Value::Object(act.targets.clone()));
    body.insert("reason".into(), json!(act.reason));
    body.insert("outcome".into(), json!(act.outcome));
    body.insert("prev".into(), json!(head.hash));
    let text = serde_json::to_string(&body).map_err(|e| Error::refused(e.to_string()))?;
    body.insert("hash".into(), json!(sha256_hex(text.as_bytes())));
    let mut line = serde_json::to_vec(&body).map_err(|e| Error::refused(e.to_string()))?;
    line.push(b'\n');
    file.write_all(&line).map_err(|e| Error::io(&path, e))?;
    Ok(Value::Object(body))
}

/// Filters for [`read`].
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only entries at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only entries by this actor.
    pub actor: Option<String>,
}

/// What `pantheon journal` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ReadResult {
    /// The entries that passed the filter, oldest first.
    pub entries: Vec<Value>,
    /// How many entries passed.
    pub count: usize,
    /// Lines that are not entries (see `pantheon journal --verify`).
    pub bad_lines: usize,
}

/// Calls `f(file, line_number, line)` for every line of every journal file in order, streaming.
pub(crate) fn for_each_line(
    root: &Root,
    f: impl FnMut(&Path, usize, &[u8]) -> Result<bool>,
) -> Result<()> {
    for_each_line_of(files(root), f)
}

/// [`for_each_line`] over the given files.
fn for_each_line_of(
    paths: Vec<PathBuf>,
    mut f: impl FnMut(&Path, usize, &[u8]) -> Result<bool>,
) -> Result<()> {
    for path in paths {
        let file = match open_read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let mut r = BufReader::new(file);
        let mut buf = Vec::new();
        let mut n = 0usize;
        loop {
            buf.clear();
            let got = (&mut r)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(|e| Error::io(&path, e))?;
            if got == 0 {
                break;
            }
            n += 1;
            if buf.len() > MAX_LINE_BYTES && !buf.ends_with(b"\n") {
                // Skip the rest of an overlong line; it is reported as not an entry.
                skip_line(&mut r).map_err(|e| Error::io(&path, e))?;
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            if !f(&path, n, line)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The entries matching `filter`, oldest first.
pub fn read(root: &Root, filter: &Filter) -> Result<ReadResult> {
    let mut entries = Vec::new();
    let mut bad_lines = 0;
    for_each_line(root, |_, _, line| {
        match serde_json::from_slice::<Map<String, Value>>(line) {
            Ok(e) => {
                let at = e.get("at").and_then(Value::as_str).and_then(parse_ts);
                let actor = e.get("actor").and_then(Value::as_str);
                let keep = filter.since.is_none_or(|s| at.is_some_and(|t| t >= s))
                    && filter.actor.as_deref().is_none_or(|a| actor == Some(a));
                if keep {
                    entries.push(Value::Object(e));
                }
            }
            Err(_) => bad_lines += 1,
        }
        Ok(true)
    })?;
    Ok(ReadResult {
        count: entries.len(),
        entries,
        bad_lines,
    })
}

/// The newest entries, at least `limit` of them when there are (whole files are read, newest
/// first, until enough are found), oldest first; the console's Journal pane reads this. Lines that
/// are not entries are counted in `bad_lines` (of the files read).
pub fn read_recent(root: &Root, limit: usize) -> Result<ReadResult> {
    let all = files(root);
    let mut entries: Vec<Value> = Vec::new();
    let mut bad_lines = 0;
    for path in all.into_iter().rev() {
        let mut these = Vec::new();
        for_each_line_of(vec![path], |_, _, line| {
            match serde_json::from_slice::<Map<String, Value>>(line) {
                Ok(e) => these.push(Value::Object(e)),
                Err(_) => bad_lines += 1,
            }
            Ok(true)
        })?;
        these.append(&mut entries);
        entries = these;
        if entries.len() >= limit {
            break;
        }
    }
    let cut = entries.len().saturating_sub(limit);
    entries.drain(..cut);
    Ok(ReadResult {
        count: entries.len(),
        entries,
        bad_lines,
    })
}

/// How many problems `verify` lists (the rest are counted in `problems_total`).
const MAX_PROBLEMS: usize = 1000;

/// A head to check the journal against: `SEQ:HASH` as `pantheon journal --verify` printed it
/// (`head_ref`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadRef {
    /// The entry's sequence number.
    pub seq: u64,
    /// Its hash (64 hex digits).
    pub hash: String,
}

impl HeadRef {
    /// Parses `SEQ:HASH`; refuses anything else, saying what is expected.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::refused(format!(
                "--head {s:?} is not SEQ:HASH (the `head_ref` `pantheon journal --verify` prints, e.g. 42:9a0b…, 64 hex digits)"
            ))
        };
        let (seq, hash) = s.trim().split_once(':').ok_or_else(bad)?;
        let seq = seq.trim().parse::<u64>().map_err(|_| bad())?;
        let hash = hash.trim().to_ascii_lowercase();
        if seq == 0 || hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(Self { seq, hash })
    }
}

/// What to check the journal against besides its own chain.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// An anchor file written by `pantheon serve --journal-anchor` (`anchor`).
    pub anchor: Option<PathBuf>,
    /// A head the operator kept (`--head SEQ:HASH`).
    pub head: Option<HeadRef>,
}

/// One problem `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyProblem {
    /// What is wrong, naming the entry.
    pub message: String,
    /// The journal file, relative to the root (absent for a problem of the anchor as a whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its 1-based line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// What the anchor check found.
#[derive(Debug, Clone, Serialize)]
pub struct AnchorReport {
    /// The anchor file.
    pub path: String,
    /// Anchors read from it.
    pub anchors: usize,
    /// Anchored entries found in the journal with the anchored hash.
    pub matched: usize,
    /// The newest anchored entry, and when it was anchored.
    pub last_anchored_seq: Option<u64>,
    /// When the newest anchor was written.
    pub last_anchored_at: Option<String>,
    /// Entries after the newest anchor: the anchor says nothing about them.
    pub unanchored: u64,
}

/// What `pantheon journal --verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyResult {
    /// True when no problem was found.
    pub valid: bool,
    /// Journal entries read (lines that are entries, intact or not).
    pub entries: u64,
    /// How many journal files (segments included) were checked.
    pub files: usize,
    /// The hash of the last entry: keep it (with `head_seq`, as `head_ref`) to detect a later
    /// rewrite or truncation with `--head`.
    pub head: String,
    /// The last entry's sequence number (0: no entry).
    pub head_seq: u64,
    /// `SEQ:HASH` of the last entry, for `pantheon journal --verify --head`.
    pub head_ref: String,
    /// The first problem (see `problems` for all of them).
    pub problem: Option<String>,
    /// The file of the first problem, relative to the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem_file: Option<String>,
    /// Its 1-based line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem_line: Option<usize>,
    /// Every problem, in journal order (at most 1000 listed).
    pub problems: Vec<VerifyProblem>,
    /// How many problems there are in all.
    pub problems_total: usize,
    /// The anchor check, when an anchor file was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<AnchorReport>,
}

/// Entries missing from the sequence, as found: `start..=end` were expected before entry `found`.
#[derive(Debug, Clone)]
struct Gap {
    start: u64,
    end: u64,
    found: u64,
    found_at: String,
    loc: (String, usize),
}

/// An anchored hash: what it says and where it came from.
#[derive(Debug, Clone)]
struct Anchored {
    hash: String,
    at: String,
    from: String,
    seen: bool,
}

struct Verifier {
    problems: Vec<VerifyProblem>,
    total: usize,
}

impl Verifier {
    fn push(&mut self, message: String, loc: Option<&(String, usize)>) {
        self.total += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(VerifyProblem {
                message,
                file: loc.map(|l| l.0.clone()),
                line: loc.map(|l| l.1),
            });
        }
    }
}

/// Checks the whole chain ([`verify_with`] with nothing else to check against).
pub(crate) fn verify(root: &Root) -> Result<VerifyResult> {
    verify_with(root, &VerifyOptions::default())
}

/// Checks the whole journal, streaming, and goes on past every problem: each entry's hash matches its
/// content, sequence numbers run on by one (a gap is a removal, unless the missing entry turns up
/// later: a reordering), and each `prev` is the hash of the entry before (or of the line that is no
/// entry just before it). With an anchor file or a kept head, every anchored entry must be there with
/// the anchored hash: a chain recomputed after an edit, a removal or an insertion changes the hash of
/// every later entry, so the first anchored entry at or after the change no longer matches, and an
/// anchored entry that is gone was removed or truncated away. Entries after the last anchor are
/// counted as unanchored. A missing or empty anchor file is a problem.
pub fn verify_with(root: &Root, opts: &VerifyOptions) -> Result<VerifyResult> {
    let all = files(root);
    let mut v = Verifier {
        problems: Vec::new(),
        total: 0,
    };
    let (mut anchors, mut anchor_report) = anchors_of(opts, &mut v)?;
    let mut chain = Chain::new();
    for_each_line(root, |path, n, line| {
        let loc = (
            path.strip_prefix(&root.dir)
                .unwrap_or(path)
                .display()
                .to_string(),
            n,
        );
        let name = path
            .strip_prefix(&root.conductor)
            .unwrap_or(path)
            .display()
            .to_string();
        let at = format!("{name} line {n}");
        chain.line(&mut v, &mut anchors, (at, loc), line)?;
        Ok(true)
    })?;
    let Chain {
        prev,
        entries,
        last_seq,
        gaps,
        matched,
        ..
    } = chain;
    report_missing(&mut v, &anchors, gaps, last_seq);
    if let Some(r) = &mut anchor_report {
        r.matched = matched;
        r.unanchored = last_seq.saturating_sub(r.last_anchored_seq.unwrap_or(0));
    }
    let first = v.problems.first().cloned();
    Ok(VerifyResult {
        valid: v.total == 0,
        entries,
        files: all.iter().filter(|p| p.exists()).count(),
        head_ref: format!("{last_seq}:{prev}"),
        head: prev,
        head_seq: last_seq,
        problem: first.as_ref().map(|p| p.message.clone()),
        problem_file: first.as_ref().and_then(|p| p.file.clone()),
        problem_line: first.as_ref().and_then(|p| p.line),
        problems: v.problems,
        problems_total: v.total,
        anchor: anchor_report,
    })
}

/// What the journal is checked against besides its own chain: the anchors of `opts.anchor` and the
/// head `opts.head` kept, by sequence number, and the anchor report to fill in. What is wrong with
/// them (an unreadable anchor file, a head that disagrees with it) goes to `v`.
fn anchors_of(
    opts: &VerifyOptions,
    v: &mut Verifier,
) -> Result<(BTreeMap<u64, Anchored>, Option<AnchorReport>)> {
    let mut anchors: BTreeMap<u64, Anchored> = Default::default();
    let mut anchor_report = None;
    if let Some(path) = &opts.anchor {
        let read = anchor::read(path)?;
        for p in read.problems {
            v.push(p, None);
        }
        for a in read.anchors {
            anchors.insert(
                a.seq,
                Anchored {
                    hash: a.hash,
                    at: a.at,
                    from: format!("{} line {}", path.display(), a.line),
                    seen: false,
                },
            );
        }
        anchor_report = Some(AnchorReport {
            path: path.display().to_string(),
            anchors: anchors.len(),
            matched: 0,
            last_anchored_seq: anchors.keys().next_back().copied(),
            last_anchored_at: anchors.values().next_back().map(|a| a.at.clone()),
            unanchored: 0,
        });
    }
    if let Some(h) = &opts.head {
        match anchors.get(&h.seq) {
            Some(a) if a.hash != h.hash => v.push(
                format!(
                    "--head {}:{} disagrees with the anchor of entry {} ({}): one of them is not this journal's",
                    h.seq, h.hash, h.seq, a.from
                ),
                None,
            ),
            Some(_) => {}
            None => {
                anchors.insert(
                    h.seq,
                    Anchored {
                        hash: h.hash.clone(),
                        at: String::new(),
                        from: "--head".into(),
                        seen: false,
                    },
                );
            }
        }
    }
    Ok((anchors, anchor_report))
}

/// The chain as read so far, line by line: the entry expected next, the hash an entry must chain
/// to, the gaps in the sequence not filled yet, and the anchored entries met.
struct Chain {
    expected: u64,
    prev: String,
    /// The hash of a line that is no entry, read since the last entry: an entry appended after it
    /// chains to it.
    prev_raw: Option<String>,
    entries: u64,
    last_seq: u64,
    gaps: Vec<Gap>,
    matched: usize,
}

impl Chain {
    fn new() -> Self {
        Chain {
            expected: 1,
            prev: GENESIS.to_owned(),
            prev_raw: None,
            entries: 0,
            last_seq: 0,
            gaps: Vec::new(),
            matched: 0,
        }
    }

    /// Checks one line of the journal (`at` names it, `loc` is its file and line) against the
    /// chain so far and the anchors, then moves the chain on.
    fn line(
        &mut self,
        v: &mut Verifier,
        anchors: &mut BTreeMap<u64, Anchored>,
        (at, loc): (String, (String, usize)),
        line: &[u8],
    ) -> Result<()> {
        let expected = self.expected;
        let Some(mut entry) = serde_json::from_slice::<Map<String, Value>>(line).ok() else {
            v.push(
                format!(
                    "{at} is not a journal entry (edited or corrupted); the entry expected there is {expected}"
                ),
                Some(&loc),
            );
            self.prev_raw = Some(sha256_hex(line));
            return Ok(());
        };
        let (Some(seq), Some(hash), Some(p)) = (
            entry.get("seq").and_then(Value::as_u64),
            entry.get("hash").and_then(Value::as_str).map(str::to_owned),
            entry.get("prev").and_then(Value::as_str).map(str::to_owned),
        ) else {
            v.push(
                format!("{at} lacks its seq, prev or hash: entry {expected} was edited"),
                Some(&loc),
            );
            self.prev_raw = Some(sha256_hex(line));
            return Ok(());
        };
        self.entries += 1;
        entry.shift_remove("hash");
        let body = serde_json::to_string(&entry).map_err(|e| Error::refused(e.to_string()))?;
        if sha256_hex(body.as_bytes()) != hash {
            v.push(
                format!(
                    "journal entry {seq} ({at}) was edited: its hash does not match its content"
                ),
                Some(&loc),
            );
        }
        if let Some(a) = anchors.get_mut(&seq) {
            if a.hash == hash {
                if !a.seen {
                    self.matched += 1;
                }
            } else {
                v.push(
                    format!(
                        "journal entry {seq} ({at}) is not the entry anchored as {seq} ({}{}): the journal was rewritten at or before this entry (edited, removed, inserted or reordered entries, with the chain recomputed)",
                        a.from,
                        if a.at.is_empty() { String::new() } else { format!(", at {}", a.at) }
                    ),
                    Some(&loc),
                );
            }
            a.seen = true;
        }
        if seq < expected {
            self.out_of_order(v, seq, &at, &loc);
            return Ok(());
        }
        if seq > expected {
            if self.gaps.len() < MAX_PROBLEMS {
                self.gaps.push(Gap {
                    start: expected,
                    end: seq - 1,
                    found: seq,
                    found_at: at.clone(),
                    loc: loc.clone(),
                });
            }
        } else if p != self.prev && self.prev_raw.as_deref() != Some(p.as_str()) {
            v.push(
                format!(
                    "journal entry {seq} ({at}) does not chain to the entry before it: that entry was edited or replaced"
                ),
                Some(&loc),
            );
        }
        self.prev = hash;
        self.prev_raw = None;
        self.expected = seq.saturating_add(1);
        self.last_seq = seq;
        Ok(())
    }

    /// An entry numbered below the one expected: it fills a gap (entries were reordered), or it
    /// comes again.
    fn out_of_order(&mut self, v: &mut Verifier, seq: u64, at: &str, loc: &(String, usize)) {
        let gaps = &mut self.gaps;
        if let Some(i) = gaps.iter().position(|g| (g.start..=g.end).contains(&seq)) {
            let g = gaps.remove(i);
            v.push(
                format!(
                    "journal entries were reordered: entry {} ({}) comes before entry {seq} ({at})",
                    g.found, g.found_at
                ),
                Some(loc),
            );
            if g.start < seq {
                gaps.push(Gap {
                    end: seq - 1,
                    ..g.clone()
                });
            }
            if seq < g.end {
                gaps.push(Gap {
                    start: seq + 1,
                    ..g
                });
            }
        } else {
            v.push(
                format!(
                    "journal entry {seq} ({at}) comes again after entry {}: a copy, or entries were reordered",
                    self.expected - 1
                ),
                Some(loc),
            );
        }
    }
}

/// The gaps left in the sequence (entries removed, and the anchored ones among them) and the
/// anchored entries never met: missing inside the journal, or cut off its end.
fn report_missing(
    v: &mut Verifier,
    anchors: &BTreeMap<u64, Anchored>,
    gaps: Vec<Gap>,
    last_seq: u64,
) {
    // Anchored entries never met: inside a gap (named with it below), else cut off the end.
    let in_gap = |s: u64| gaps.iter().any(|g| (g.start..=g.end).contains(&s));
    let lost: Vec<(u64, Anchored)> = anchors
        .iter()
        .filter(|(s, a)| !a.seen && !in_gap(**s))
        .map(|(s, a)| (*s, a.clone()))
        .collect();
    for g in gaps {
        let before = g.start - 1;
        let anchored = anchors
            .range(g.start..=g.end)
            .map(|(s, a)| format!("{s} ({})", a.from))
            .collect::<Vec<_>>();
        let anchored = if anchored.is_empty() {
            String::new()
        } else {
            format!("; anchored among them: {}", anchored.join(", "))
        };
        let message = if g.start == g.end {
            format!(
                "journal entry {} was removed: entry {} ({}) follows entry {before}{anchored}",
                g.start, g.found, g.found_at
            )
        } else {
            format!(
                "journal entries {} to {} were removed: entry {} ({}) follows entry {before}{anchored}",
                g.start, g.end, g.found, g.found_at
            )
        };
        v.push(message, Some(&g.loc));
    }
    let (cut, inside): (Vec<_>, Vec<_>) = lost.into_iter().partition(|(s, _)| *s > last_seq);
    for (seq, a) in inside {
        v.push(
            format!(
                "journal entry {seq} is missing though it was anchored ({})",
                a.from
            ),
            None,
        );
    }
    if let Some((seq, a)) = cut.last() {
        let what = if last_seq == 0 {
            "the journal holds no entry: it was deleted or emptied".to_owned()
        } else {
            format!("the journal was truncated after entry {last_seq}")
        };
        v.push(
            format!(
                "journal entry {seq} is missing though it was anchored ({}{}){}: {what}",
                a.from,
                if a.at.is_empty() {
                    String::new()
                } else {
                    format!(", at {}", a.at)
                },
                if cut.len() > 1 {
                    format!(" (and {} earlier anchored entries)", cut.len() - 1)
                } else {
                    String::new()
                }
            ),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let r = Root::at(d.path());
        std::fs::create_dir_all(&r.conductor).unwrap();
        (d, r)
    }

    fn write_n(r: &Root, n: usize) {
        let o = Origin::new(Some("alice"), "cli");
        for i in 0..n {
            append(
                r,
                &o,
                &Act::new(Verb::Abort, "aborted").workflow(format!("wf_{i}")),
            )
            .unwrap();
        }
    }

    fn lines(r: &Root) -> Vec<String> {
        std::fs::read_to_string(journal_path(r))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn put(r: &Root, lines: &[String]) {
        std::fs::write(journal_path(r), lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn an_untouched_chain_verifies() {
        let (_d, r) = root();
        write_n(&r, 5);
        let v = verify(&r).unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!(v.entries, 5);
    }

    #[test]
    fn edits_removals_and_swaps_are_named() {
        let (_d, r) = root();
        write_n(&r, 5);
        let orig = lines(&r);

        let mut l = orig.clone();
        l[2] = l[2].replace("wf_2", "wf_9");
        put(&r, &l);
        let p = verify(&r).unwrap().problem.unwrap();
        assert!(p.contains("entry 3") && p.contains("edited"), "{p}");

        let mut l = orig.clone();
        l.remove(1);
        put(&r, &l);
        let p = verify(&r).unwrap().problem.unwrap();
        assert!(p.contains("entry 2 was removed"), "{p}");

        let mut l = orig.clone();
        l.swap(1, 2);
        put(&r, &l);
        let p = verify(&r).unwrap().problem.unwrap();
        assert!(p.contains("reordered") && p.contains("entry 3"), "{p}");
    }

    #[test]
    fn verify_goes_on_past_each_problem_and_checks_a_kept_head() {
        let (_d, r) = root();
        write_n(&r, 6);
        let head = verify(&r).unwrap().head_ref;
        let orig = lines(&r);
        let mut l = orig.clone();
        l.insert(1, "garbage".into());
        l[3] = l[3].replace("wf_2", "wf_9");
        l.remove(5);
        put(&r, &l);
        let v = verify(&r).unwrap();
        let all: Vec<&str> = v.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(v.problems_total, 3, "{all:#?}");
        assert!(all[0].contains("line 2 is not a journal entry"), "{all:#?}");
        assert!(
            all[1].contains("entry 3") && all[1].contains("edited"),
            "{all:#?}"
        );
        assert!(all[2].contains("entry 5 was removed"), "{all:#?}");

        put(&r, &orig[..4]);
        let opts = VerifyOptions {
            anchor: None,
            head: Some(HeadRef::parse(&head).unwrap()),
        };
        let p = verify_with(&r, &opts).unwrap().problem.unwrap();
        assert!(
            p.contains("entry 6 is missing") && p.contains("truncated after entry 4"),
            "{p}"
        );
        put(&r, &orig);
        assert!(verify_with(&r, &opts).unwrap().valid);
        assert!(HeadRef::parse("6").is_err());
        assert!(HeadRef::parse("0:00").is_err());
    }

    #[test]
    fn a_torn_tail_is_cut_and_the_chain_goes_on() {
        let (_d, r) = root();
        write_n(&r, 2);
        let mut f = OpenOptions::new()
            .append(true)
            .open(journal_path(&r))
            .unwrap();
        f.write_all(b"{\"seq\":3,\"at\":").unwrap();
        write_n(&r, 1);
        let v = verify(&r).unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!(v.entries, 3);
    }

    #[test]
    fn recent_entries_come_from_the_newest_files_first() {
        let (_d, r) = root();
        write_n(&r, 3);
        std::fs::create_dir_all(segments_dir(&r)).unwrap();
        std::fs::rename(
            journal_path(&r),
            segments_dir(&r).join(format!("{:020}.jsonl", 1)),
        )
        .unwrap();
        write_n(&r, 2);
        let seqs = |n: usize| -> Vec<u64> {
            read_recent(&r, n)
                .unwrap()
                .entries
                .iter()
                .map(|e| e["seq"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(seqs(2), vec![4, 5]);
        assert_eq!(seqs(4), vec![2, 3, 4, 5]);
        assert_eq!(seqs(100), vec![1, 2, 3, 4, 5]);
    }

    /// Runs `f` on a thread and gives up after 5 s (a reader blocked on a FIFO never returns).
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }

    #[test]
    fn a_fifo_in_place_of_the_journal_or_a_segment_is_refused_not_waited_on() {
        let (d, r) = root();
        write_n(&r, 1);
        std::fs::create_dir_all(segments_dir(&r)).unwrap();
        let seg = segments_dir(&r).join(format!("{:020}.jsonl", 1));
        // The last segment is a FIFO and journal.jsonl is gone (rotated away).
        std::fs::remove_file(journal_path(&r)).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &seg,
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        // An append reads the last segment's head when journal.jsonl is empty.
        let r2 = r.clone();
        let got = within_5s(move || {
            append(
                &r2,
                &Origin::new(Some("a"), "cli"),
                &Act::new(Verb::Abort, "aborted"),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        })
        .expect("the append blocked on a FIFO segment");
        let e = got.unwrap_err();
        assert!(
            e.contains("regular file") && e.contains("00000000000000000001.jsonl"),
            "{e}"
        );

        std::fs::remove_file(&seg).unwrap();
        std::fs::remove_file(journal_path(&r)).ok();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            journal_path(&r),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        let r3 = r.clone();
        let got = within_5s(move || read(&r3, &Filter::default()).map_err(|e| e.to_string()))
            .expect("reading the journal blocked on a FIFO");
        assert!(got.unwrap_err().contains("journal.jsonl"));
        let r4 = r.clone();
        let got = within_5s(move || read_recent(&r4, 10).map_err(|e| e.to_string()))
            .expect("the console's journal read blocked on a FIFO");
        assert!(got.is_err());
        drop(d);
    }

    /// The process's peak resident set (`VmHWM`), in KiB.
    fn max_rss_kib() -> i64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// The peak resident set is the whole process's: with other tests running beside it the
    /// measure is theirs too. So the test runs itself again, alone, in a child process.
    #[test]
    fn an_overlong_line_with_no_newline_is_skipped_without_holding_it() {
        const ALONE: &str = "PANTHEON_TEST_ALONE";
        if std::env::var_os(ALONE).is_none() {
            let name =
                "journal::tests::an_overlong_line_with_no_newline_is_skipped_without_holding_it";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([name, "--exact", "--test-threads", "1", "--nocapture"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("1 passed"),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let (_d, r) = root();
        write_n(&r, 2);
        // 256 MiB of one line with no newline (sparse, so cheap on disk).
        let f = OpenOptions::new()
            .append(true)
            .open(journal_path(&r))
            .unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len + 256 * 1024 * 1024).unwrap();
        drop(f);
        let before = max_rss_kib();
        let got = read(&r, &Filter::default()).unwrap();
        let grew_mib = (max_rss_kib() - before) / 1024;
        assert_eq!(got.count, 2);
        assert_eq!(got.bad_lines, 1);
        assert!(
            grew_mib < 64,
            "reading grew the resident set by {grew_mib} MiB"
        );
    }
}
