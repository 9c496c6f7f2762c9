//! The history of a root (docs/HISTORY.md): a recorder that sees every change to the files of a root,
//! the engine's and foreign writers' alike, and keeps them in `conductor/history/` (segments of
//! change records, content-addressed blobs, one checkpoint per segment), so the root can be seen as it
//! was at any moment kept ([`replay_at`]), the changes between two moments listed ([`changes`]), and a
//! workflow's context bag taken from the past for a fork (`rerun --as-of`).
//!
//! One recorder per root writes: the writer lease is an exclusive `flock` on
//! `conductor/history/.writer.lock`; a second recorder blocks on it (stands by) and takes over when
//! the writer ends, killed or not.

pub(crate) mod dirs;
pub(crate) mod pack;
pub(crate) mod picture;
pub(crate) mod recorder;
pub(crate) mod store;
pub(crate) mod timeline;
#[cfg(target_os = "linux")]
pub(crate) mod tree_watch;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::store::time::format_ts;
use crate::store::{Root, WorkflowId, layout};
pub(crate) use store::{HistoryDir, Kind, Seek};

/// A moment (see `time::parse_moment`: RFC 3339, `now`, back from now `-15m`, a local `HH:MM[:SS]`
/// of today) as microseconds since the epoch, the history's unit.
pub fn parse_moment(s: &str, now: chrono::DateTime<chrono::Utc>) -> Result<i64> {
    crate::store::time::parse_moment(s, now).map(|t| t.timestamp_micros())
}

fn never(root: &Root) -> Error {
    Error::not_found(format!(
        "{} was never recorded: no history in {} (run `pantheon serve`, which records by default, or \
         `pantheon record`)",
        root.dir.display(),
        HistoryDir::of(root).dir.display()
    ))
}

fn before(first: i64) -> Error {
    Error::refused(format!(
        "that moment is before the history starts; the first moment kept is {}",
        format_ts(store::instant(first))
    ))
}

/// The tree of files at `at_us`, refused before the history starts or on a root never recorded.
pub(crate) fn tree_at(root: &Root, at_us: i64) -> Result<(store::Tree, i64, i64)> {
    let hist = HistoryDir::of(root);
    match hist.seek(at_us)? {
        Seek::Never => Err(never(root)),
        Seek::Before(first) => Err(before(first)),
        Seek::Found {
            tree, first, last, ..
        } => Ok((tree, first, last)),
    }
}

/// The root as it was at `at_us` (see `picture::picture`), with the history's bounds. A moment
/// before the history starts shows its first moment, and the result's `note` says so; refused on a
/// root never recorded, or when the history's files for the moment are over their bounds (naming
/// the file).
pub fn replay_at(root: &Root, at_us: i64) -> Result<Value> {
    let hist = HistoryDir::of(root);
    // One seek for a moment the history holds; a second only for one before it.
    let (at_us, note, found) = match hist.seek(at_us)? {
        Seek::Before(first) if first != i64::MAX => (
            first,
            Some(format!(
                "{} is before the history starts: showing its first moment, {}",
                format_ts(store::instant(at_us)),
                format_ts(store::instant(first))
            )),
            tree_at(root, first)?,
        ),
        Seek::Found {
            tree, first, last, ..
        } => (at_us, None, (tree, first, last)),
        _ => (at_us, None, tree_at(root, at_us)?),
    };
    let (tree, first, last) = found;
    let mut v = picture::of_history(&hist, &tree, at_us);
    if let Some(n) = note {
        v["note"] = n.into();
    }
    v["history"] = json!({
        "first": format_ts(store::instant(first)),
        "last": format_ts(store::instant(last)),
    });
    Ok(v)
}

/// The context bag workflow `wf` had at moment `ts` (RFC 3339 or `-15m`), for a fork
/// ([`crate::conductor::Conductor::rerun_as_of`]); refused when the history does not hold the
/// workflow's state at that moment.
pub fn context_as_of(
    root: &Root,
    wf: &WorkflowId,
    ts: &str,
) -> Result<crate::conductor::rerun::AsOf> {
    let at = parse_moment(ts, chrono::Utc::now())?;
    let (tree, _, _) = tree_at(root, at)?;
    let hist = HistoryDir::of(root);
    if hist.forgotten().contains(wf.as_str()) {
        return Err(Error::refused(format!(
            "the recorded context of workflow {wf} was forgotten (`record --forget`)"
        )));
    }
    let st = picture::state_of(&hist, &tree, wf.as_str()).ok_or_else(|| {
        Error::not_found(format!(
            "the history holds no readable state of workflow {wf} at {}",
            format_ts(store::instant(at))
        ))
    })?;
    Ok(crate::conductor::rerun::AsOf {
        at: format_ts(store::instant(at)),
        context_bag: st.context_bag,
    })
}

/// What to list of the changes between two moments.
#[derive(Debug, Clone, Default)]
pub struct ChangeFilter {
    /// Only files of this track's bus and board.
    pub track: Option<String>,
    /// Only files naming this workflow (its state, handoffs, and dispatches named by its handoffs).
    pub workflow: Option<String>,
    /// Most changes listed.
    pub limit: usize,
}

/// One change as `replay --from --to` lists it: what happened to which file, and what the file then
/// held (a JSON file's value up to 64 KiB, the lines appended to a JSONL file).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChangeView {
    /// Its sequence number.
    pub seq: u64,
    /// When.
    pub at: String,
    /// The file.
    pub path: String,
    /// `put`, `app` or `del`.
    pub kind: &'static str,
    /// The file's size after.
    pub size: u64,
    /// A JSON file's value after a put.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The lines an append added (parsed when JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<Value>>,
}

const SHOWN_VALUE_BYTES: usize = 64 * 1024;

/// The changes with `from_us < t <= to_us`, oldest first, filtered.
pub fn changes(root: &Root, from_us: i64, to_us: i64, filter: &ChangeFilter) -> Result<Value> {
    let hist = HistoryDir::of(root);
    if !hist.exists() {
        return Err(never(root));
    }
    let limit = if filter.limit == 0 {
        10_000
    } else {
        filter.limit
    };
    let (all, _) = hist.changes(from_us, to_us, usize::MAX / 2)?;
    let track_prefix = filter
        .track
        .as_ref()
        .map(|t| format!("{}/{}/{t}/", layout::CONDUCTOR_DIR, layout::TRACKS_DIR));
    let mut out = Vec::new();
    let mut more = false;
    for c in all {
        if let Some(p) = &track_prefix
            && !c.path.starts_with(p)
        {
            continue;
        }
        let blob = c.blob.as_deref().and_then(|h| hist.blob(h).ok().flatten());
        if let Some(wf) = &filter.workflow {
            let named = c.path.contains(&format!("/{wf}.")) || c.path.contains(&format!("/{wf}/"));
            let inside = blob.as_deref().is_some_and(|b| {
                memchr::memmem::find(b, format!("\"workflow_id\": \"{wf}\"").as_bytes()).is_some()
                    || memchr::memmem::find(b, format!("\"workflow_id\":\"{wf}\"").as_bytes())
                        .is_some()
            });
            if !named && !inside {
                continue;
            }
        }
        if out.len() >= limit {
            more = true;
            break;
        }
        let (value, lines) = match (c.kind, blob) {
            (Kind::Put, Some(b)) if c.path.ends_with(".json") && b.len() <= SHOWN_VALUE_BYTES => {
                (serde_json::from_slice(&b).ok(), None)
            }
            (Kind::App, Some(b)) | (Kind::Put, Some(b)) if c.path.ends_with(".jsonl") => (
                None,
                Some(
                    b.split(|x| *x == b'\n')
                        .filter(|l| !l.is_empty())
                        .take(1000)
                        .map(|l| {
                            serde_json::from_slice(l).unwrap_or_else(|_| {
                                Value::String(String::from_utf8_lossy(l).into())
                            })
                        })
                        .collect(),
                ),
            ),
            (Kind::Put, Some(b)) if c.path.ends_with(".md") && b.len() <= SHOWN_VALUE_BYTES => (
                Some(Value::String(String::from_utf8_lossy(&b).into())),
                None,
            ),
            _ => (None, None),
        };
        out.push(ChangeView {
            seq: c.seq,
            at: format_ts(store::instant(c.at_us)),
            path: c.path,
            kind: c.kind.as_str(),
            size: c.len,
            value,
            lines,
        });
    }
    Ok(json!({
        "from": format_ts(store::instant(from_us)),
        "to": format_ts(store::instant(to_us)),
        "count": out.len(),
        "more": more,
        "changes": out,
    }))
}

/// `record --forget`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct ForgetResult {
    /// The workflow.
    pub workflow_id: String,
    /// Files of the history that named it.
    pub files: usize,
    /// Blobs removed (their content is gone from the history).
    pub blobs_removed: usize,
}

/// Drops the recorded content of workflow `wf`: every version of its state, abort manifest,
/// handoffs and dispatches (blobs no other file shares are removed), and lists it in
/// `forgotten.json` so replay shows it as forgotten. Refused while the workflow is still running
/// (its next change would be recorded again). Files the root still holds are not touched.
pub fn forget(root: &Root, wf: &WorkflowId) -> Result<ForgetResult> {
    let hist = HistoryDir::of(root);
    if !hist.exists() {
        return Err(never(root));
    }
    if let Ok(Some(st)) = crate::conductor::files::read_model::<
        crate::conductor::model::WorkflowState,
    >(&root.state_path(wf))
        && !st.status.is_finished()
    {
        return Err(Error::refused(format!(
            "workflow {wf} is {}; only a finished workflow's context is forgotten (abort it, then \
             `pantheon cleanup {wf}`, then forget it)",
            st.status
        )));
    }
    let state_prefix = format!("{}/{}/{wf}.", layout::CONDUCTOR_DIR, layout::STATE_DIR);
    let handoffs = format!("{}/{}/{wf}/", layout::SHARED_DIR, layout::HANDOFFS_DIR);
    let names_wf = |path: &str, blob: Option<&str>| -> bool {
        if path.starts_with(&state_prefix) || path.starts_with(&handoffs) {
            return true;
        }
        let dispatch_dir = ["pending", "archive", "dead"]
            .iter()
            .any(|d| path.starts_with(&format!("{}/{d}/", layout::CONDUCTOR_DIR)));
        dispatch_dir
            && path.ends_with(".json")
            && blob
                .and_then(|h| hist.blob(h).ok().flatten())
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .is_some_and(|v| v.get("workflow_id").and_then(Value::as_str) == Some(wf.as_str()))
    };
    let mut drop_blobs = std::collections::BTreeSet::new();
    let mut keep_blobs = std::collections::BTreeSet::new();
    let mut files = std::collections::BTreeSet::new();
    let mut visit = |path: &str, blobs: &[String]| {
        let hit = blobs.iter().any(|b| names_wf(path, Some(b))) || names_wf(path, None);
        if hit {
            files.insert(path.to_owned());
            drop_blobs.extend(blobs.iter().cloned());
        } else {
            keep_blobs.extend(blobs.iter().cloned());
        }
    };
    for seg in hist.segments() {
        if let Ok(cp) = hist.checkpoint(seg) {
            for (p, f) in &cp.files {
                visit(p, &f.blobs);
            }
        }
        for (_, c) in hist.segment(seg)?.records {
            let b: Vec<String> = c.blob.iter().cloned().collect();
            visit(&c.path, &b);
        }
    }
    let mut removed = 0;
    for h in drop_blobs.difference(&keep_blobs) {
        if hist.erase_blob(h)? {
            removed += 1;
        }
    }
    let path = hist.dir.join(store::FORGOTTEN_FILE);
    let _lock = crate::store::lock::FileLock::exclusive(root, &hist.dir.join(".forgotten.lock"))?;
    let mut doc = crate::store::read::read_json_once(&path)
        .ok()
        .flatten()
        .unwrap_or_else(|| json!({"workflows": []}));
    if !doc.get("workflows").is_some_and(Value::is_array) {
        doc = json!({"workflows": []});
    }
    if let Some(list) = doc["workflows"].as_array_mut()
        && !list
            .iter()
            .any(|w| w.get("workflow_id").and_then(Value::as_str) == Some(wf.as_str()))
    {
        list.push(json!({"workflow_id": wf.as_str(), "at": crate::store::time::now_ts()}));
    }
    crate::store::atomic::write_atomic(root, &path, &crate::store::atomic::to_pretty_json(&doc))?;
    Ok(ForgetResult {
        workflow_id: wf.to_string(),
        files: files.len(),
        blobs_removed: removed,
    })
}

/// Problems of a root's history for `validate`: (errors, warnings).
pub fn check(root: &Root) -> (Vec<String>, Vec<String>) {
    let hist = HistoryDir::of(root);
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let segs = hist.segments();
    if segs.is_empty() {
        return (errors, warnings);
    }
    let mut blobs = std::collections::BTreeSet::new();
    let mut expect: Option<u64> = None;
    let mut last_t = i64::MIN;
    let forgotten = !hist.forgotten().is_empty();
    for seg in &segs {
        let seg_path = hist.segment_path(*seg);
        match hist.checkpoint(*seg) {
            Ok(cp) => {
                if cp.seq != *seg {
                    errors.push(format!(
                        "{}: names sequence {} but belongs to segment {seg}",
                        hist.checkpoint_path(*seg).display(),
                        cp.seq
                    ));
                }
                for (p, f) in &cp.files {
                    blobs.extend(f.blobs.iter().cloned());
                    if let Some(m) = dirs::entry_problem(p, f) {
                        let at = hist.checkpoint_path(*seg);
                        errors.push(format!("{}: {m}", at.display()));
                    }
                }
            }
            Err(e) => errors.push(format!("segment {seg} has no readable checkpoint: {e}")),
        }
        let read = match hist.segment(*seg) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        match &read.header {
            Some(h) if h.history > store::FORMAT => errors.push(format!(
                "{}: written in history format {}, newer than this pantheon reads ({})",
                seg_path.display(),
                h.history,
                store::FORMAT
            )),
            Some(h) if h.seq == *seg => {}
            _ => errors.push(format!(
                "{}: no header naming sequence {seg}",
                seg_path.display()
            )),
        }
        if expect.is_some_and(|e| e != *seg) {
            errors.push(format!(
                "{}: starts at sequence {seg}, but the segment before ends before {}",
                seg_path.display(),
                expect.unwrap_or(0)
            ));
        }
        for d in &read.damage {
            errors.push(format!(
                "{} at byte {}: {}",
                seg_path.display(),
                d.offset,
                d.message
            ));
        }
        let mut next = *seg;
        for (off, c) in &read.records {
            if c.seq != next {
                errors.push(format!(
                    "{} at byte {off}: sequence {} where {next} was due",
                    seg_path.display(),
                    c.seq
                ));
            }
            if c.at_us < last_t {
                errors.push(format!(
                    "{} at byte {off}: time goes back",
                    seg_path.display()
                ));
            }
            let format = read.header.as_ref().map_or(store::FORMAT, |h| h.history);
            if let Some(m) = dirs::record_problem(format, c) {
                errors.push(format!("{} at byte {off}: {m}", seg_path.display()));
            }
            last_t = last_t.max(c.at_us);
            next = c.seq.saturating_add(1);
            blobs.extend(c.blob.iter().cloned());
        }
        expect = Some(next);
    }
    // Packed blobs are read back and hashed, a pack opened once for its run of names.
    let mut missing = 0usize;
    let mut packs = pack::PackReader::new(&hist.dir);
    for h in &blobs {
        if !hist.has_blob(h, &mut packs) {
            missing += 1;
        }
    }
    if missing > 0 {
        let msg = format!(
            "{}: {missing} blob(s) named by the history are missing",
            hist.dir.display()
        );
        if forgotten {
            warnings.push(format!("{msg} (forgotten workflows account for some)"));
        } else {
            errors.push(msg);
        }
    }
    (errors, warnings)
}
