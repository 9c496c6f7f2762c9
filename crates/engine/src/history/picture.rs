//! What a root showed at one moment, as `pantheon replay --at` prints it: workflows, inboxes (what
//! `pantheon inbox GOD` listed), held and dead dispatches, archives, locks, workers, boards, bus and
//! journal counts. Worked out from a set of files and a way to read them, so the same function
//! describes the history at a moment ([`of_history`]) and the root as it is now ([`of_root`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::store::{HistoryDir, Tree, instant};
use crate::bus::model::{BoardSession, parse_locks, parse_workers};
use crate::conductor::model::{Dispatch, WorkflowState};
use crate::store::layout;
use crate::store::time::{format_ts, parse_ts};

/// The dispatches of one directory: (time, file name, handoff id) each.
type Dispatches = Vec<(Option<i64>, String, String)>;

/// One file: its key (`conductor/…`) and mtime (microseconds).
pub(crate) type Listed<'a> = (&'a str, i64);

fn parts(key: &str) -> Vec<&str> {
    key.split('/').collect()
}

fn json_of(bytes: Option<Vec<u8>>) -> Option<Value> {
    serde_json::from_slice(&bytes?).ok()
}

fn lines(bytes: &[u8]) -> usize {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| l.iter().any(|b| !b.is_ascii_whitespace()))
        .count()
}

/// The journal's entries counted, and its decisions by approval link.
fn journal_of(bytes: &[u8]) -> (usize, Vec<Value>) {
    (lines(bytes), decided_by_link(bytes))
}

/// The most decisions by approval link a picture lists (the newest).
const BY_LINK_KEPT: usize = 100;

/// The journal's decisions that came through an approval link (an entry whose targets name a
/// `channel` other than the operator's usual paths), newest last, at most [`BY_LINK_KEPT`]:
/// `{seq, at, action, outcome, workflow_id, handoff_id, channel, approver}`. A line that is not an
/// entry is passed over.
fn decided_by_link(bytes: &[u8]) -> Vec<Value> {
    let usual = ["cli", "console", "mcp"];
    let mut out: std::collections::VecDeque<Value> = std::collections::VecDeque::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(e) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let t = &e["targets"];
        let Some(channel) = t["channel"].as_str().filter(|c| !usual.contains(c)) else {
            continue;
        };
        if out.len() == BY_LINK_KEPT {
            out.pop_front();
        }
        out.push_back(json!({
            "seq": e["seq"], "at": e["at"], "action": e["action"], "outcome": e["outcome"],
            "workflow_id": t["workflow_id"], "handoff_id": t["handoff_id"],
            "channel": channel, "approver": t["approver"],
        }));
    }
    out.into()
}

/// A dispatch file's place in its directory's order (`dispatched_at`, else its mtime; then its name)
/// and its handoff id (its name when it cannot be read).
fn dispatch_of(
    key: &str,
    mtime: i64,
    file: &str,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Option<(Option<i64>, String, String)> {
    if file.starts_with('.') || !file.ends_with(".json") {
        return None;
    }
    let stem = file.trim_end_matches(".json").to_owned();
    let d = json_of(read(key)).and_then(|v| serde_json::from_value::<Dispatch>(v).ok());
    match d {
        Some(d) => {
            let t = d
                .dispatched_at
                .as_deref()
                .and_then(parse_ts)
                .map(|t| t.timestamp_micros())
                .or(Some(mtime));
            let id = if d.handoff_id.is_empty() {
                stem
            } else {
                d.handoff_id
            };
            Some((t, file.to_owned(), id))
        }
        // Unreadable (being written, or forgotten): listed by its name, at its mtime.
        None => Some((Some(mtime), file.to_owned(), stem)),
    }
}

/// What a workflow's state file shows.
fn workflow_of(
    wf: &str,
    key: &str,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
    forgotten: &std::collections::BTreeSet<String>,
) -> Value {
    if forgotten.contains(wf) {
        return json!({"status": "forgotten"});
    }
    match json_of(read(key)).map(serde_json::from_value::<WorkflowState>) {
        Some(Ok(st)) => json!({
            "status": st.status.as_str(),
            "current_step": st.current_step,
            "dispatched_to": st.dispatched_to,
            "definition_id": st.definition_id,
            "updated": st.updated,
            "steps": st.step_history.len(),
            "acks": st.acks.len(),
        }),
        _ => json!({"status": "unreadable"}),
    }
}

/// Each track's newest board session with the counts of its board files.
fn boards_of(
    sessions: BTreeMap<String, (Option<i64>, String, BoardSession)>,
    board_files: &BTreeMap<String, Vec<(&str, String)>>,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> BTreeMap<String, Value> {
    let mut boards = BTreeMap::new();
    for (track, (_, id, s)) in sessions {
        let mut b = json!({
            "session": id,
            "checkpoint": s.checkpoint,
            "phase": s.status,
            "round": s.phases.discuss.rounds,
            "directors": s.directors,
            "assessments": 0, "votes": 0, "discussion": 0, "resolution": false,
        });
        if let Some(r) = &s.resolution {
            b["outcome"] = r.get("outcome").cloned().unwrap_or(Value::Null);
        }
        for (f, key) in board_files.get(&track).into_iter().flatten() {
            match *f {
                layout::ASSESSMENTS_FILE => {
                    b["assessments"] = json!(
                        json_of(read(key))
                            .and_then(|v| v.as_object().map(|m| m.len()))
                            .unwrap_or(0)
                    )
                }
                layout::VOTES_FILE => {
                    b["votes"] = json!(
                        json_of(read(key))
                            .and_then(|v| v.as_object().map(|m| m.len()))
                            .unwrap_or(0)
                    )
                }
                layout::DISCUSSION_FILE => {
                    b["discussion"] = json!(read(key).map(|b| lines(&b)).unwrap_or(0))
                }
                layout::RESOLUTION_FILE => b["resolution"] = json!(true),
                _ => {}
            }
        }
        boards.insert(track, b);
    }
    boards
}

/// `{path: worker}` of a `locks.json`.
fn locks_of(bytes: Option<Vec<u8>>) -> Value {
    let m: Map<String, Value> = json_of(bytes)
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    Value::Object(
        parse_locks(&m)
            .into_iter()
            .map(|l| (l.path, json!(l.worker_id)))
            .collect(),
    )
}

/// `{worker: {status, task_id, last_heartbeat}}` of a `worker-status.json`.
fn workers_of(bytes: Option<Vec<u8>>) -> Value {
    let m: Map<String, Value> = json_of(bytes)
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    Value::Object(
        parse_workers(&m)
            .into_iter()
            .map(|w| {
                (
                    w.worker_id.clone(),
                    json!({"status": w.status.as_str(), "task_id": w.task_id,
                           "last_heartbeat": w.last_heartbeat}),
                )
            })
            .collect(),
    )
}

/// The handoff ids of dispatches in their directory's order.
fn ordered(mut v: Vec<(Option<i64>, String, String)>) -> Vec<String> {
    v.sort();
    v.into_iter().map(|(_, _, id)| id).collect()
}

/// Keeps the newer of the session in `bytes` and the one `sessions` holds for `track` (by start,
/// then id, as the engine picks the current session).
fn newest_session(
    sessions: &mut BTreeMap<String, (Option<i64>, String, BoardSession)>,
    track: String,
    id: &str,
    bytes: Option<Vec<u8>>,
) {
    let Some(s) = json_of(bytes).and_then(|v| serde_json::from_value::<BoardSession>(v).ok())
    else {
        return;
    };
    let started = s.started().map(|t| t.timestamp_micros());
    let id = if s.session_id.is_empty() {
        id.to_owned()
    } else {
        s.session_id.clone()
    };
    let newer = sessions
        .get(&track)
        .is_none_or(|(t, i, _)| (started, id.len(), &id) >= (*t, i.len(), i));
    if newer {
        sessions.insert(track, (started, id, s));
    }
}

/// The inboxes, dead-letter and archive directories of `dirs`, listed empty when no file of theirs
/// was (as `pantheon inbox GOD` lists a god whose inbox directory exists).
fn shown_dirs(
    dirs: &[&str],
    inboxes: &mut BTreeMap<String, Dispatches>,
    dead: &mut BTreeMap<String, Dispatches>,
    archived: &mut BTreeMap<String, usize>,
) {
    for d in dirs {
        match parts(d).as_slice() {
            [c, pd, god]
                if *c == layout::CONDUCTOR_DIR
                    && *pd == layout::PENDING_DIR
                    && crate::store::ids::is_valid_name(god)
                    && !crate::conductor::files::is_foreign_pending_dir(god) =>
            {
                inboxes.entry((*god).to_owned()).or_default();
            }
            [c, dd, god] if *c == layout::CONDUCTOR_DIR && *dd == "dead" => {
                dead.entry((*god).to_owned()).or_default();
            }
            [c, a, god] if *c == layout::CONDUCTOR_DIR && *a == layout::ARCHIVE_DIR => {
                archived.entry((*god).to_owned()).or_default();
            }
            _ => {}
        }
    }
}

/// The picture of the files `files` (sorted by key) and the recorded directories `dirs` (an inbox,
/// dead-letter or archive directory shows, empty or not), reading a file's bytes through `read`;
/// the workflows in `forgotten` show as such.
pub(crate) fn picture(
    at: &str,
    files: &[Listed<'_>],
    dirs: &[&str],
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
    forgotten: &std::collections::BTreeSet<String>,
) -> Value {
    let mut workflows: BTreeMap<String, Value> = BTreeMap::new();
    let mut inboxes: BTreeMap<String, Vec<(Option<i64>, String, String)>> = BTreeMap::new();
    let mut held: Vec<(Option<i64>, String, String)> = Vec::new();
    let mut dead: BTreeMap<String, Vec<(Option<i64>, String, String)>> = BTreeMap::new();
    let mut archived: BTreeMap<String, usize> = BTreeMap::new();
    let (mut locks, mut workers, mut bus) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut supervisors: Vec<String> = Vec::new();
    let mut journal = (0usize, Vec::new());
    // Per track: the newest session (started, id) and the board files' keys.
    let mut sessions: BTreeMap<String, (Option<i64>, String, BoardSession)> = BTreeMap::new();
    let mut board_files: BTreeMap<String, Vec<(&str, String)>> = BTreeMap::new();
    let dispatch = |key: &str, mtime: i64, file: &str| dispatch_of(key, mtime, file, read);

    for &(key, mtime) in files {
        let p = parts(key);
        match p.as_slice() {
            [c, s, f] if *c == layout::CONDUCTOR_DIR && *s == layout::STATE_DIR => {
                if f.starts_with('.') {
                    continue;
                }
                if let Some(wf) = f.strip_suffix(layout::ABORTED_SUFFIX) {
                    let e = workflows.entry(wf.to_owned()).or_insert_with(|| json!({}));
                    e["aborted"] = json!(true);
                } else if let Some(wf) = f.strip_suffix(".json") {
                    let mut v = workflow_of(wf, key, read, forgotten);
                    if let Some(old) = workflows.remove(wf)
                        && old.get("aborted").is_some()
                    {
                        v["aborted"] = json!(true);
                    }
                    workflows.insert(wf.to_owned(), v);
                }
            }
            [c, pd, god, f] if *c == layout::CONDUCTOR_DIR && *pd == layout::PENDING_DIR => {
                if *god == layout::QUARANTINE_DIR {
                    held.extend(dispatch(key, mtime, f));
                } else if crate::store::ids::is_valid_name(god)
                    && !crate::conductor::files::is_foreign_pending_dir(god)
                    && let Some(d) = dispatch(key, mtime, f)
                {
                    inboxes.entry((*god).to_owned()).or_default().push(d);
                }
            }
            [c, dd, god, f] if *c == layout::CONDUCTOR_DIR && *dd == "dead" => {
                if let Some(d) = dispatch(key, mtime, f) {
                    dead.entry((*god).to_owned()).or_default().push(d);
                }
            }
            [c, a, god, f]
                if *c == layout::CONDUCTOR_DIR
                    && *a == layout::ARCHIVE_DIR
                    && f.ends_with(".json")
                    && !f.starts_with('.') =>
            {
                *archived.entry((*god).to_owned()).or_default() += 1;
            }
            [c, s, f] if *c == layout::CONDUCTOR_DIR && *s == "supervisor" => {
                supervisors.extend(f.strip_suffix(".json").map(str::to_owned));
            }
            [c, f] if *c == layout::CONDUCTOR_DIR && *f == layout::JOURNAL_FILE => {
                journal = read(key).map_or_else(Default::default, |b| journal_of(&b));
            }
            [c, t, track, b, rest @ ..]
                if *c == layout::CONDUCTOR_DIR
                    && *t == layout::TRACKS_DIR
                    && *b == layout::BUS_DIR =>
            {
                let track = (*track).to_owned();
                match rest {
                    [f] if *f == layout::LOCKS_FILE => {
                        locks.insert(track, locks_of(read(key)));
                    }
                    [f] if *f == layout::WORKERS_FILE => {
                        workers.insert(track, workers_of(read(key)));
                    }
                    [f] if *f == layout::QUEUE_FILE => {
                        let n = read(key).map(|b| lines(&b)).unwrap_or(0);
                        bus.insert(track, json!({"messages": n}));
                    }
                    [bd, f] if *bd == layout::BOARD_DIR => {
                        if let Some(id) = layout::session_id_of(f) {
                            newest_session(&mut sessions, track, id, read(key));
                        } else {
                            board_files
                                .entry(track)
                                .or_default()
                                .push((f, key.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    shown_dirs(dirs, &mut inboxes, &mut dead, &mut archived);
    let boards = boards_of(sessions, &board_files, read);
    let order = ordered;
    json!({
        "at": at,
        "workflows": workflows,
        "inboxes": inboxes.into_iter().map(|(g, v)| (g, order(v))).collect::<BTreeMap<_, _>>(),
        "held": order(held),
        "dead": dead.into_iter().map(|(g, v)| (g, order(v))).collect::<BTreeMap<_, _>>(),
        "archived": archived,
        "locks": locks,
        "workers": workers,
        "boards": boards,
        "bus": bus,
        "journal": {"entries": journal.0, "decided_by_link": journal.1},
        "supervisors": supervisors,
    })
}

/// The picture of a tree from the history (blobs read as needed; a forgotten or missing blob reads
/// as nothing).
pub(crate) fn of_history(hist: &HistoryDir, tree: &Tree, at_us: i64) -> Value {
    let files: Vec<Listed<'_>> = tree
        .iter()
        .filter(|(_, f)| !f.dir)
        .map(|(k, f)| (k.as_str(), f.mtime_us))
        .collect();
    let dirs: Vec<&str> = tree
        .iter()
        .filter(|(_, f)| f.dir)
        .map(|(k, _)| k.as_str())
        .collect();
    let read = |k: &str| -> Option<Vec<u8>> { hist.content(tree.get(k)?).ok().flatten() };
    picture(
        &format_ts(instant(at_us)),
        &files,
        &dirs,
        &read,
        &hist.forgotten(),
    )
}

/// The picture of the root as it is now, read from its files (what the history should show for
/// this moment).
pub fn of_root(root: &crate::store::Root, at_us: i64) -> Value {
    let files = root_files(root);
    let listed: Vec<Listed<'_>> = files.iter().map(|(k, (_, m))| (k.as_str(), *m)).collect();
    let read = |k: &str| -> Option<Vec<u8>> {
        let (p, _) = files.get(k)?;
        crate::store::read::read_bytes(p).ok().flatten()
    };
    let dirs = root_dirs(root);
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    picture(
        &format_ts(instant(at_us)),
        &listed,
        &dirs,
        &read,
        &super::store::HistoryDir::of(root).forgotten(),
    )
}

/// The directories of the root the recorder records as such (`history::dirs`), by key.
pub fn root_dirs(root: &crate::store::Root) -> std::collections::BTreeSet<String> {
    super::dirs::recorded_dirs_under(&root.conductor, layout::CONDUCTOR_DIR)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// The files of the root the recorder records, by key, with their path and mtime (microseconds).
pub fn root_files(root: &crate::store::Root) -> BTreeMap<String, (PathBuf, i64)> {
    use std::os::unix::fs::MetadataExt;
    let skip = HistoryDir::of(root).dir;
    let mut out = BTreeMap::new();
    fn walk(dir: &std::path::Path, skip: &std::path::Path, out: &mut Vec<PathBuf>, depth: usize) {
        if depth > 24 || dir.starts_with(skip) {
            return;
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path(), skip, out, depth + 1),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    for (prefix, dir) in super::recorder::bases(root) {
        let mut files = Vec::new();
        walk(&dir, &skip, &mut files, 0);
        for p in files {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if layout::is_scratch(name) {
                continue;
            }
            let Some(rel) = p.strip_prefix(&dir).ok().and_then(|r| r.to_str()) else {
                continue;
            };
            let key = format!("{prefix}/{rel}");
            if super::recorder::unrecorded(&key) {
                continue;
            }
            let m = std::fs::symlink_metadata(&p)
                .map(|m| m.mtime() * 1_000_000 + m.mtime_nsec() / 1000)
                .unwrap_or(0);
            out.insert(key, (p, m));
        }
    }
    out
}

/// The workflow state at a moment, from the history (for a fork: `rerun --as-of`).
pub(crate) fn state_of(hist: &HistoryDir, tree: &Tree, wf: &str) -> Option<WorkflowState> {
    let key = format!("{}/{}/{wf}.json", layout::CONDUCTOR_DIR, layout::STATE_DIR);
    let bytes = hist.content(tree.get(&key)?).ok()??;
    serde_json::from_slice(&bytes).ok()
}
