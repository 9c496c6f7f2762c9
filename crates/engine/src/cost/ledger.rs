//! The ledger (docs/BUDGETS.md): `conductor/cost/ledger.jsonl`, one compact line per usage report,
//! appended under `conductor/cost/.lock`, and `summary.json`, the totals by god, model, day, step,
//! definition, track and board session up to a byte offset of the ledger. A reader takes the summary
//! and folds in the lines past its offset, so the summary may lag (a crash between the append and its
//! rewrite) but is never wrong; a ledger shorter than the offset (replaced by hand) is folded again
//! from its start.
//!
//! An act that carries usage writes a marker `conductor/cost/pending/{key}.json` before it commits
//! the workflow state, appends the ledger line after, then removes the marker. A repeat of the act,
//! or the supervisor's next pass, settles a marker left by a killed process: the line is appended when
//! the state records the report and the line is not already in the ledger; otherwise the marker is
//! dropped (nothing was recorded; a repeat records it).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::usage::Totals;
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::atomic::{open_append, remove_file, write_json};
use crate::store::lock::FileLock;
use crate::store::read::{open_regular, read_json};

/// Longest ledger line read; a longer one is skipped.
pub(crate) const MAX_LINE_BYTES: usize = 64 * 1024;
/// How far back from the end an append looks for its own key (a repeated report is found there).
pub(crate) const DEDUPE_WINDOW: u64 = 1024 * 1024;
/// The dimensions the summary keeps.
pub(crate) const DIMENSIONS: [&str; 8] = [
    "god",
    "model",
    "day",
    "step",
    "definition",
    "track",
    "session",
    "god_definition",
];

/// `conductor/cost/`.
pub fn cost_dir(root: &Root) -> PathBuf {
    root.conductor.join("cost")
}
/// `conductor/cost/ledger.jsonl`.
pub fn ledger_path(root: &Root) -> PathBuf {
    cost_dir(root).join("ledger.jsonl")
}
/// `conductor/cost/summary.json`.
pub fn summary_path(root: &Root) -> PathBuf {
    cost_dir(root).join("summary.json")
}
fn lock_path(root: &Root) -> PathBuf {
    cost_dir(root).join(".lock")
}
/// `conductor/cost/pending/`: reports recorded in a state whose line may not be in the ledger yet.
pub(crate) fn pending_dir(root: &Root) -> PathBuf {
    cost_dir(root).join("pending")
}
/// `conductor/cost/budgets.json`: god and day budgets raised by operators.
pub fn raised_path(root: &Root) -> PathBuf {
    cost_dir(root).join("budgets.json")
}
/// `conductor/cost/attention.jsonl`: budget warnings, each fired once.
pub fn attention_path(root: &Root) -> PathBuf {
    cost_dir(root).join("attention.jsonl")
}

/// Takes the ledger's lock (bounded wait).
pub(crate) fn lock(root: &Root) -> Result<FileLock> {
    FileLock::exclusive(root, &lock_path(root))
}

/// One ledger line: a report, where it came from, what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Line {
    /// Unique per report: `handoff-{id}`, `ack-{id}`, `bus-{track}-{message id}`.
    pub key: String,
    /// When it was recorded (RFC 3339).
    pub at: String,
    /// `handoff`, `ack` or `bus`.
    pub source: String,
    /// The workflow.
    pub workflow_id: String,
    /// Its definition, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// The step the work was for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The god that reported it.
    pub god: String,
    /// The bus track of a bus report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
    /// The board session a bus report names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache-read tokens.
    pub cache_read_tokens: u64,
    /// Cache-write tokens.
    pub cache_write_tokens: u64,
    /// Cost in micro-dollars (reported, else priced).
    pub cost_micros: u64,
    /// False when it had tokens, no cost, and a model the price table does not know.
    pub priced: bool,
}

impl Line {
    /// The line's totals (one report).
    pub fn totals(&self) -> Totals {
        Totals {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            cost_micros: self.cost_micros,
            reports: 1,
            unpriced: u64::from(!self.priced),
        }
    }

    /// The UTC day it was recorded (`YYYY-MM-DD`).
    pub fn day(&self) -> String {
        crate::store::time::parse_ts(&self.at)
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "unknown".into())
    }

    /// The line's key in dimension `dim` (`None`: the line has none there).
    pub(crate) fn key_in(&self, dim: &str) -> Option<String> {
        match dim {
            "god" => Some(self.god.clone()),
            "model" => Some(self.model.clone().unwrap_or_else(|| "unknown".into())),
            "day" => Some(self.day()),
            "step" => self.step.clone(),
            "definition" => self.definition.clone(),
            "track" => self.track.clone(),
            "session" => self.session.clone(),
            "workflow" => Some(self.workflow_id.clone()),
            "god_definition" => Some(format!(
                "{}/{}",
                self.god,
                self.definition.as_deref().unwrap_or("")
            )),
            _ => None,
        }
    }
}

/// The totals of the ledger up to `offset`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// The byte offset of the ledger folded in.
    pub offset: u64,
    /// Every report.
    pub total: Totals,
    /// Totals per dimension and key.
    pub by: BTreeMap<String, BTreeMap<String, Totals>>,
}

impl Summary {
    /// Folds one line in.
    pub fn fold(&mut self, line: &Line) {
        let t = line.totals();
        self.total.merge(&t);
        for dim in DIMENSIONS {
            if let Some(k) = line.key_in(dim) {
                self.by
                    .entry(dim.to_owned())
                    .or_default()
                    .entry(k)
                    .or_default()
                    .merge(&t);
            }
        }
    }

    /// The totals of `key` in `dim` (zero when none).
    pub fn of(&self, dim: &str, key: &str) -> Totals {
        self.by
            .get(dim)
            .and_then(|m| m.get(key))
            .copied()
            .unwrap_or_default()
    }
}

/// Reads the ledger's whole lines from `offset`, calling `f` with each line and the offset after it;
/// returns the offset after the last whole line. Unparsable or oversized lines are skipped.
pub fn read_from(root: &Root, offset: u64, mut f: impl FnMut(Line, u64)) -> Result<u64> {
    let path = ledger_path(root);
    let Some(mut file) = open_regular(&path)? else {
        return Ok(0);
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(&path, e))?;
    let mut r = BufReader::with_capacity(256 * 1024, file);
    let mut pos = offset;
    let mut buf = Vec::with_capacity(512);
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(&path, e))?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            if n > MAX_LINE_BYTES {
                // Skip the rest of an oversized line.
                let mut rest = Vec::new();
                let m = r
                    .read_until(b'\n', &mut rest)
                    .map_err(|e| Error::io(&path, e))?;
                if rest.last() != Some(&b'\n') {
                    break;
                }
                pos += (n + m) as u64;
                continue;
            }
            break; // an unterminated tail: a writer is mid-line
        }
        pos += n as u64;
        if let Ok(line) = serde_json::from_slice::<Line>(&buf) {
            f(line, pos);
        }
    }
    Ok(pos)
}

fn ledger_len(root: &Root) -> u64 {
    std::fs::symlink_metadata(ledger_path(root))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// The stored summary as it is, or an empty one at offset 0.
fn stored_summary(root: &Root) -> Summary {
    read_json(&summary_path(root))
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// The ledger's totals now: the stored summary with the lines past its offset folded in.
pub fn summary(root: &Root) -> Result<Summary> {
    let mut s = stored_summary(root);
    if s.offset > ledger_len(root) {
        s = Summary::default();
    }
    let start = s.offset;
    s.offset = read_from(root, start, |line, _| s.fold(&line))?;
    Ok(s)
}

/// Folds the ledger's new lines into `summary.json` (under the ledger's lock); returns the summary.
pub(crate) fn refresh_summary(root: &Root) -> Result<Summary> {
    let _lock = lock(root)?;
    let before = stored_summary(root);
    let s = summary(root)?;
    if s.offset != before.offset {
        write_json(root, &summary_path(root), &s)?;
    }
    Ok(s)
}

/// True when a line with `key` is among the ledger's last [`DEDUPE_WINDOW`] bytes.
fn recently_has(root: &Root, key: &str) -> Result<bool> {
    let path = ledger_path(root);
    let Some(mut file) = open_regular(&path)? else {
        return Ok(false);
    };
    let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
    let from = len.saturating_sub(DEDUPE_WINDOW);
    file.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(&path, e))?;
    let mut bytes = Vec::new();
    file.take(DEDUPE_WINDOW)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    let needle = format!("\"key\":{}", serde_json::to_string(key).unwrap_or_default());
    Ok(memchr::memmem::find(&bytes, needle.as_bytes()).is_some())
}

/// Brings `summary.json` up to the ledger's end: folds the lines after its offset (from the start when
/// the offset is past the end, a ledger cut short) and writes it whole. The caller holds the lock.
fn catch_up_summary(root: &Root) -> Result<()> {
    let mut s = stored_summary(root);
    if s.offset > ledger_len(root) {
        s = Summary::default();
    }
    let start = s.offset;
    s.offset = read_from(root, start, |l, _| s.fold(&l))?;
    write_json(root, &summary_path(root), &s)?;
    Ok(())
}

/// Appends `line` unless the ledger already has its key, then brings the summary up to date.
/// Returns false when the line was already there.
pub(crate) fn append(root: &Root, line: &Line) -> Result<bool> {
    let _lock = lock(root)?;
    if recently_has(root, &line.key)? {
        return Ok(false);
    }
    let mut text = serde_json::to_vec(line).map_err(|e| Error::refused(e.to_string()))?;
    text.push(b'\n');
    let path = ledger_path(root);
    let mut f = open_append(root, &path)?;
    f.write_all(&text).map_err(|e| Error::io(&path, e))?;
    crate::store::crash_point("cost:after-ledger");
    catch_up_summary(root)?;
    Ok(true)
}

/// The keys of the lines among the ledger's last `window` bytes (a line cut by the window's start, or
/// one that does not parse, gives none).
pub(crate) fn recent_keys(root: &Root, window: u64) -> Result<std::collections::HashSet<String>> {
    #[derive(Deserialize)]
    struct Key {
        key: String,
    }
    let mut keys = std::collections::HashSet::new();
    let path = ledger_path(root);
    let Some(mut file) = open_regular(&path)? else {
        return Ok(keys);
    };
    let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
    let from = len.saturating_sub(window);
    file.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(&path, e))?;
    let mut r = BufReader::with_capacity(256 * 1024, file.take(window));
    let mut buf = Vec::with_capacity(512);
    let mut first = from > 0;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(&path, e))?;
        if n == 0 {
            break;
        }
        // The first line read is cut by the window's start: it gives no key.
        let cut = std::mem::take(&mut first);
        if buf.last() != Some(&b'\n') {
            if n <= MAX_LINE_BYTES {
                break; // an unterminated tail: a writer is mid-line
            }
            // An oversized line: skip the rest of it.
            let mut rest = Vec::new();
            r.read_until(b'\n', &mut rest)
                .map_err(|e| Error::io(&path, e))?;
            continue;
        }
        if cut {
            continue;
        }
        if let Ok(k) = serde_json::from_slice::<Key>(&buf) {
            keys.insert(k.key);
        }
    }
    Ok(keys)
}

/// Appends the lines whose keys the ledger does not have yet (among its last [`DEDUPE_WINDOW`]
/// bytes plus the size of the lines themselves, so a batch a killed pass appended is found whole
/// when the pass is repeated) in one write, then brings the summary up to date once. Returns how
/// many were appended. Linear in the lines and the window, whatever the summary holds.
pub(crate) fn append_new(root: &Root, lines: &[Line]) -> Result<usize> {
    if lines.is_empty() {
        return Ok(0);
    }
    let mut texts = Vec::with_capacity(lines.len());
    let mut bytes: u64 = 0;
    for l in lines {
        let mut t = serde_json::to_vec(l).map_err(|e| Error::refused(e.to_string()))?;
        t.push(b'\n');
        bytes = bytes.saturating_add(t.len() as u64);
        texts.push(t);
    }
    let _lock = lock(root)?;
    let mut have = recent_keys(root, DEDUPE_WINDOW.saturating_add(bytes))?;
    let path = ledger_path(root);
    let mut f = open_append(root, &path)?;
    let mut buf = Vec::with_capacity(256 * 1024);
    let mut n = 0;
    for (l, t) in lines.iter().zip(&texts) {
        if !have.insert(l.key.clone()) {
            continue;
        }
        buf.extend_from_slice(t);
        n += 1;
        if buf.len() >= 256 * 1024 {
            f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
            buf.clear();
        }
    }
    f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
    crate::store::crash_point("cost:after-ledger");
    catch_up_summary(root)?;
    Ok(n)
}

/// Appends many lines at once (one summary rewrite); for imports and benchmarks. Keys are not
/// checked against the ledger.
pub fn append_many(root: &Root, lines: &[Line]) -> Result<()> {
    let _lock = lock(root)?;
    let path = ledger_path(root);
    let mut f = open_append(root, &path)?;
    let mut buf = Vec::with_capacity(256 * 1024);
    for l in lines {
        serde_json::to_writer(&mut buf, l).map_err(|e| Error::refused(e.to_string()))?;
        buf.push(b'\n');
        if buf.len() >= 256 * 1024 {
            f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
            buf.clear();
        }
    }
    f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
    drop(_lock);
    refresh_summary(root).map(|_| ())
}

/// A marker left while an act's report is recorded in its state but not yet in the ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Marker {
    /// The line to append.
    pub line: Line,
    /// The writer's pid.
    pub pid: u32,
}

fn marker_path(root: &Root, key: &str) -> PathBuf {
    pending_dir(root).join(format!("{}.json", crate::store::encode_key(key)))
}

/// Writes the marker of `line` (before the act commits).
pub(crate) fn write_marker(root: &Root, line: &Line) -> Result<()> {
    write_json(
        root,
        &marker_path(root, &line.key),
        &Marker {
            line: line.clone(),
            pid: std::process::id(),
        },
    )
}

/// Appends the marker's line and removes the marker (after the act committed).
pub(crate) fn finish_marker(root: &Root, line: &Line) -> Result<()> {
    append(root, line)?;
    remove_file(root, &marker_path(root, &line.key)).map(|_| ())
}

/// Reads the marker of `key`, if one is left.
pub(crate) fn read_marker(root: &Root, key: &str) -> Option<Marker> {
    read_json(&marker_path(root, key))
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// Removes the marker of `key` (its act was never recorded).
pub(crate) fn drop_marker(root: &Root, key: &str) -> Result<()> {
    remove_file(root, &marker_path(root, key)).map(|_| ())
}

/// Every marker left (key, marker, file age), oldest name first.
pub(crate) fn markers(root: &Root) -> Vec<(Marker, std::time::Duration)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(pending_dir(root)) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    for p in paths.into_iter().take(100_000) {
        let age = std::fs::symlink_metadata(&p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default();
        if let Some(m) = read_json(&p)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value::<Marker>(v).ok())
        {
            out.push((m, age));
        }
    }
    out
}

/// The raised god and day budgets (`{gods: {god: budget}, days: {day: budget}}`; none: empty).
pub(crate) fn read_raised(root: &Root) -> serde_json::Map<String, Value> {
    match read_json(&raised_path(root)) {
        Ok(Some(Value::Object(m))) => m,
        _ => serde_json::Map::new(),
    }
}

/// Sets a raised god (`scope` `god`) or day (`day`) budget; returns the budget it replaced.
pub(crate) fn write_raised(
    root: &Root,
    scope: &str,
    name: &str,
    to: &super::budget::Budget,
) -> Result<Option<super::budget::Budget>> {
    let _lock = lock(root)?;
    let mut m = read_raised(root);
    let field = if scope == "god" { "gods" } else { "days" };
    let entry = m
        .entry(field.to_owned())
        .or_insert_with(|| Value::Object(Default::default()));
    if !entry.is_object() {
        *entry = Value::Object(Default::default());
    }
    let before = entry
        .get(name)
        .and_then(|b| serde_json::from_value(b.clone()).ok());
    entry[name] = serde_json::to_value(to).unwrap_or(Value::Null);
    write_json(root, &raised_path(root), &Value::Object(m))?;
    Ok(before)
}

/// Fires a budget warning once: appends it to `attention.jsonl` unless its key is there. Returns
/// true when it was new.
pub(crate) fn fire_once(root: &Root, c: &super::budget::Crossing, warn_at: f64) -> Result<bool> {
    let _lock = lock(root)?;
    let path = attention_path(root);
    let key = c.key();
    let needle = format!(
        "\"key\":{}",
        serde_json::to_string(&key).unwrap_or_default()
    );
    if let Some(mut f) = open_regular(&path)? {
        let mut bytes = Vec::new();
        (&mut f)
            .take(16 * 1024 * 1024)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&path, e))?;
        if memchr::memmem::find(&bytes, needle.as_bytes()).is_some() {
            return Ok(false);
        }
    }
    let mut item = c.to_json();
    item["kind"] = json!("budget_warning");
    item["key"] = json!(key);
    item["at"] = json!(crate::store::time::now_ts());
    item["warn_at"] = json!(warn_at);
    item["reached"] = json!(c.used >= c.limit);
    let mut text = serde_json::to_vec(&item).map_err(|e| Error::refused(e.to_string()))?;
    text.push(b'\n');
    let mut f = open_append(root, &path)?;
    f.write_all(&text).map_err(|e| Error::io(&path, e))?;
    Ok(true)
}

/// The budget warnings fired so far (the engine's attention items for budgets), oldest first.
pub fn attention_items(root: &Root) -> Vec<Value> {
    let Ok(Some(f)) = open_regular(&attention_path(root)) else {
        return Vec::new();
    };
    BufReader::new(f.take(16 * 1024 * 1024))
        .lines()
        .map_while(std::result::Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(Value::is_object)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(key: &str, god: &str, cost: u64) -> Line {
        Line {
            key: key.into(),
            at: "2026-12-01T10:00:00Z".into(),
            source: "handoff".into(),
            workflow_id: "wf_a".into(),
            god: god.into(),
            input_tokens: 10,
            cost_micros: cost,
            priced: true,
            ..Default::default()
        }
    }

    #[test]
    fn appends_fold_into_the_summary_once_per_key_and_a_lagging_summary_catches_up() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        assert!(append(&root, &line("handoff-a", "thoth", 5)).unwrap());
        assert!(!append(&root, &line("handoff-a", "thoth", 5)).unwrap());
        assert!(append(&root, &line("handoff-b", "marvin", 7)).unwrap());
        let s = summary(&root).unwrap();
        assert_eq!(s.total.cost_micros, 12);
        assert_eq!(s.of("god", "thoth").cost_micros, 5);
        assert_eq!(s.of("day", "2026-12-01").reports, 2);
        // A summary left behind (a crash before its rewrite) is caught up by the next reader.
        write_json(&root, &summary_path(&root), &Summary::default()).unwrap();
        assert_eq!(summary(&root).unwrap().total.cost_micros, 12);
        // A torn last line is left for later.
        let mut f = open_append(&root, &ledger_path(&root)).unwrap();
        f.write_all(b"{\"key\":\"x\"").unwrap();
        assert_eq!(summary(&root).unwrap().total.reports, 2);
    }
}
