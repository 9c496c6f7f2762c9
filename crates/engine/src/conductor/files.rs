//! Reading and moving the Conductor's files: states, inboxes, the quarantine and the archive.
//! Readers never fail on one bad file: it is reported in an `errors` list.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::{Dispatch, WorkflowState, from_value};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::read::read_json;
use crate::store::time::parse_ts;
use crate::store::{GodName, HandoffId, Root, WorkflowId, is_valid_name};

/// A file that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileError {
    /// The file that could not be read.
    pub path: PathBuf,
    /// Why (too big, not JSON, not the expected shape, a link refused…).
    pub error: String,
}

/// Reads one JSON file into a model type, as a [`FileError`] on failure.
pub(crate) fn read_model<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, FileError> {
    let err = |error: String| FileError {
        path: path.to_path_buf(),
        error,
    };
    match read_json(path) {
        Ok(None) => Ok(None),
        Ok(Some(v)) => from_value(v).map(Some).map_err(|e| err(e.into())),
        Err(e) => Err(err(e.to_string())),
    }
}

/// The state of a workflow, `None` if it has none. A state that does not parse is an error (it is
/// never overwritten).
pub(crate) fn load_state(root: &Root, wf: &WorkflowId) -> Result<Option<WorkflowState>> {
    let path = root.state_path(wf);
    match read_json(&path)? {
        None => Ok(None),
        Some(v) => from_value(v).map(Some).map_err(|message| Error::Corrupt {
            path,
            message: format!("{message}; fix or move the file, it is never overwritten"),
        }),
    }
}

/// Reads the state of a workflow that must exist.
pub(crate) fn require_state(root: &Root, wf: &WorkflowId) -> Result<WorkflowState> {
    load_state(root, wf)?.ok_or_else(|| unknown_workflow(root, wf))
}

/// Takes the lock of a workflow that must exist: refused as [`require_state`] refuses, before the
/// lock file is made, when the workflow has no state (a refusal writes nothing, not even a lock
/// file). The caller still reads the state under the lock (it may have gone meanwhile).
pub(crate) fn lock_existing(root: &Root, wf: &WorkflowId) -> Result<crate::store::lock::FileLock> {
    match std::fs::symlink_metadata(root.state_path(wf)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(unknown_workflow(root, wf)),
        _ => crate::store::lock::FileLock::exclusive(root, &root.workflow_lock_path(wf)),
    }
}

/// The refusal of an unknown workflow, naming the workflows there are.
fn unknown_workflow(root: &Root, wf: &WorkflowId) -> Error {
    let known = crate::store::read::known_names(&root.state_dir(), |n| {
        if n.ends_with(crate::store::layout::ABORTED_SUFFIX) {
            return None;
        }
        let id = n.strip_suffix(".json")?;
        WorkflowId::parse(id).ok().map(|w| w.to_string())
    });
    let known = match known {
        Some(list) => format!("workflows here: {list}"),
        None => {
            "there is no workflow here yet (`pantheon handoff submit FILE` starts one)".to_owned()
        }
    };
    Error::not_found(format!(
        "unknown workflow {wf}: no {}; {known}",
        root.state_path(wf).display()
    ))
}

/// Writes a workflow state atomically.
/// Refused when the state would outgrow [`crate::store::limits::MAX_STATE_BYTES`] (it must always read
/// back, so that ack and abort keep working).
pub(crate) fn write_state(root: &Root, wf: &WorkflowId, state: &WorkflowState) -> Result<()> {
    let bytes = crate::store::atomic::to_pretty_json(state);
    let max = crate::store::limits::MAX_STATE_BYTES;
    if bytes.len() > max {
        return Err(Error::refused(format!(
            "the state of workflow {wf} would grow to {} bytes, over the {max}-byte limit; nothing was \
             recorded (abort the workflow, or start a new workflow_id)",
            bytes.len()
        )));
    }
    crate::store::atomic::write_atomic(root, &root.state_path(wf), &bytes)
}

/// The dispatches of one directory with their paths, and the files that could not be read.
pub(crate) type DirListing = (Vec<(PathBuf, Dispatch)>, Vec<FileError>);

/// The dispatch files of one directory (an inbox, the quarantine or an archive), oldest first.
/// Hidden files (temp files of writes in progress) are skipped; anything else that is not a readable
/// dispatch is reported.
pub(crate) fn read_dispatch_dir(dir: &Path) -> DirListing {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    // A listing cannot see a rename the current act holds in `dir` (module `store::commit`): made
    // first. A failure is the act's (its end reports it).
    let _ = crate::store::commit::settle_in(dir);
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (found, errors);
    };
    for entry in rd.filter_map(|e| e.ok()) {
        let (one, error) = read_dispatch_entry(&entry);
        found.extend(one);
        errors.extend(error);
    }
    found.sort_by_cached_key(|(p, d)| dispatch_order(p, d));
    (found, errors)
}

/// One entry of a dispatch directory: its dispatch, or why it is not one (hidden names and what is
/// not a file are passed over in silence).
pub(crate) fn read_dispatch_entry(
    entry: &std::fs::DirEntry,
) -> (Option<(PathBuf, Dispatch)>, Option<FileError>) {
    let path = entry.path();
    let name = entry.file_name().to_string_lossy().into_owned();
    if name.starts_with('.') || !path.is_file() {
        return (None, None);
    }
    if !name.ends_with(".json") {
        let error = FileError {
            path,
            error: "not a dispatch (.json) file; ignored".into(),
        };
        return (None, Some(error));
    }
    match read_model::<Dispatch>(&path) {
        Ok(Some(d)) => (Some((path, d)), None),
        Ok(None) => (None, None),
        Err(e) => (None, Some(e)),
    }
}

/// Where a dispatch stands in its directory's order, oldest first: `dispatched_at` (the file's
/// modification time when that is unreadable), then the file name.
pub(crate) fn dispatch_order(
    path: &Path,
    d: &Dispatch,
) -> (Option<chrono::DateTime<chrono::Utc>>, String) {
    let t = d.dispatched_at.as_deref().and_then(parse_ts).or_else(|| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .map(chrono::DateTime::<chrono::Utc>::from)
    });
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (t, name)
}

/// A god's inbox (`check_inbox`): the page `request` asks for, oldest first, over the listing `read`
/// gives of the inbox directory.
pub(crate) fn inbox_page(
    root: &Root,
    god: &GodName,
    request: &super::paging::PageRequest,
    read: impl FnOnce(&Path) -> super::inbox_cache::SharedListing,
) -> Result<super::InboxResult> {
    let dir = root.inbox_dir(god);
    let (found, errors) = read(&dir);
    let keyed = found
        .into_iter()
        .map(|(p, d)| {
            let (at, file) = dispatch_order(&p, &d);
            let key = super::paging::SortKey {
                god: god.to_string(),
                at,
                file,
            };
            (key, d)
        })
        .collect();
    let page = super::paging::page(keyed, request, super::paging::Listing::Inbox(god.as_str()))?;
    Ok(super::InboxResult {
        god: god.to_string(),
        known_god: dir.is_dir(),
        compact: false,
        dispatches: page
            .items
            .into_iter()
            .map(std::sync::Arc::unwrap_or_clone)
            .collect(),
        count: page.count,
        limit: request.limit,
        next_cursor: page.next_cursor,
        errors,
    })
}

/// The god directories under `dir` (inboxes or archives), by valid name, sorted.
/// Directories other engines keep in `conductor/pending/` that are no god's inbox: the public origin's
/// engine makes `_webhooks/` and `inbox/` there.
pub(crate) const FOREIGN_PENDING_DIRS: [&str; 2] = ["_webhooks", "inbox"];

/// True for a directory of `conductor/pending/` that is not an inbox and not our `_quarantine`: a known
/// foreign name, or any other underscore-prefixed one. Such directories are reported, never read as gods.
pub fn is_foreign_pending_dir(name: &str) -> bool {
    name != crate::store::layout::QUARANTINE_DIR
        && (name.starts_with('_') || FOREIGN_PENDING_DIRS.contains(&name))
}

/// The gods with an inbox in `root`, as `crate::store::read::name_list` shows them (`None`: no inbox
/// at all). For messages that say which gods exist.
pub fn known_gods(root: &Root) -> Option<String> {
    crate::store::read::name_list(
        god_dirs(&root.pending_root())
            .iter()
            .map(|g| g.to_string())
            .collect(),
    )
}

/// The god inboxes under `dir`, sorted: directories with a valid god name; foreign and underscore names are left out, unreadable directories give an empty list.
pub(crate) fn god_dirs(dir: &Path) -> Vec<GodName> {
    let mut out: Vec<GodName> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| crate::store::read::entry_is(e, std::fs::FileType::is_dir))
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                if is_valid_name(&n) && !is_foreign_pending_dir(&n) {
                    GodName::parse(&n).ok()
                } else {
                    None
                }
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

/// Where a dispatch file lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// `pending/{god}/`.
    Inbox(GodName),
    /// `pending/_quarantine/`.
    Quarantine,
    /// `archive/{god}/`.
    Archive(GodName),
}

/// A dispatch file found on disk.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// Which directory it lies in.
    pub place: Place,
    /// Its full path.
    pub path: PathBuf,
    /// The dispatch as read (tolerantly).
    pub dispatch: Dispatch,
}

fn read_found(place: Place, path: PathBuf) -> Result<Option<Found>> {
    match read_model::<Dispatch>(&path) {
        Ok(Some(dispatch)) => Ok(Some(Found {
            place,
            path,
            dispatch,
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::Corrupt {
            path: e.path,
            message: e.error,
        }),
    }
}

/// The dispatch of `hid` in a god's inbox.
pub(crate) fn in_inbox(root: &Root, god: &GodName, hid: &HandoffId) -> Result<Option<Found>> {
    read_found(
        Place::Inbox(god.clone()),
        root.inbox_dir(god).join(format!("{hid}.json")),
    )
}

/// The held dispatch of `hid`.
pub(crate) fn in_quarantine(root: &Root, hid: &HandoffId) -> Result<Option<Found>> {
    read_found(
        Place::Quarantine,
        root.quarantine_dir().join(format!("{hid}.json")),
    )
}

/// The archived dispatch of `hid` for a god.
pub(crate) fn in_archive(root: &Root, god: &GodName, hid: &HandoffId) -> Result<Option<Found>> {
    read_found(
        Place::Archive(god.clone()),
        root.archive_dir(god).join(format!("{hid}.json")),
    )
}

/// Every live (inbox or quarantine) dispatch of `hid`, preferring `first_god`'s inbox.
pub(crate) fn find_live(
    root: &Root,
    hid: &HandoffId,
    first_god: Option<&GodName>,
) -> Result<Option<Found>> {
    if let Some(g) = first_god
        && let Some(f) = in_inbox(root, g, hid)?
    {
        return Ok(Some(f));
    }
    for g in god_dirs(&root.pending_root()) {
        if let Some(f) = in_inbox(root, &g, hid)? {
            return Ok(Some(f));
        }
    }
    if let Some(f) = in_quarantine(root, hid)? {
        return Ok(Some(f));
    }
    // Slow path: a foreign writer may name the file otherwise (`{workflow}_{step}.json`).
    for g in god_dirs(&root.pending_root()) {
        let (found, _) = read_dispatch_dir(&root.inbox_dir(&g));
        if let Some((path, dispatch)) = found
            .into_iter()
            .find(|(_, d)| d.handoff_id == hid.as_str())
        {
            return Ok(Some(Found {
                place: Place::Inbox(g),
                path,
                dispatch,
            }));
        }
    }
    Ok(None)
}

/// Every archived dispatch of `hid`, preferring `first_god`'s archive.
pub(crate) fn find_archived(
    root: &Root,
    hid: &HandoffId,
    first_god: Option<&GodName>,
) -> Result<Vec<Found>> {
    let mut out = Vec::new();
    if let Some(g) = first_god
        && let Some(f) = in_archive(root, g, hid)?
    {
        out.push(f);
    }
    for g in god_dirs(&root.archive_root()) {
        if Some(&g) == first_god {
            continue;
        }
        if let Some(f) = in_archive(root, &g, hid)? {
            out.push(f);
        }
    }
    // A retired dead letter is an ended record too: a late or replayed ack of it finds its workflow
    // (and is answered from the state: a duplicate, or refused as the workflow's end says).
    if out.is_empty() {
        for g in god_dirs(&root.retired_root()) {
            let f = read_found(
                Place::Archive(g.clone()),
                root.retired_dir(&g).join(format!("{hid}.json")),
            )?;
            out.extend(f);
        }
    }
    Ok(out)
}

/// How many times [`find_anywhere`] looks in the inboxes and the archive before it says nowhere.
const LOOKS: usize = 3;

/// A dispatch of `hid` wherever it lies (the inboxes and the quarantine first, then the archives),
/// for a caller that does not hold the workflow's lock (it is looking for the workflow). The dispatch
/// may move between the looks: an accepted ack archives it, a step timeout moves it back into an
/// inbox. Each move is one rename, so it is never in neither place, but a look at the inboxes, a move
/// back from the archive, then a look at the archive finds it nowhere; the looks are repeated up to
/// [`LOOKS`] times, so a dispatch that moved in between is found the next time round.
pub(crate) fn find_anywhere(root: &Root, hid: &HandoffId) -> Result<Option<Found>> {
    find_in_turn(
        || find_live(root, hid, None),
        || Ok(find_archived(root, hid, None)?.into_iter().next()),
    )
}

fn find_in_turn<T>(
    mut live: impl FnMut() -> Result<Option<T>>,
    mut archived: impl FnMut() -> Result<Option<T>>,
) -> Result<Option<T>> {
    for _ in 0..LOOKS {
        if let Some(f) = live()? {
            return Ok(Some(f));
        }
        if let Some(f) = archived()? {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// Whether a dispatch of `hid` to `god` exists anywhere (inbox, quarantine or archive).
pub(crate) fn dispatch_exists(root: &Root, god: &GodName, hid: &HandoffId) -> bool {
    use crate::store::read::exists;
    exists(&root.inbox_dir(god).join(format!("{hid}.json")))
        || exists(&root.quarantine_dir().join(format!("{hid}.json")))
        || exists(&root.archive_dir(god).join(format!("{hid}.json")))
}

/// Moves a dispatch to `archive/{to_god}/` with its new content: rewrites it in place (atomically),
/// then renames it into the archive, so the dispatch exists in exactly one place at every instant (a
/// crash leaves it in the inbox with its new status, and repeating finishes the move).
pub(crate) fn archive(
    root: &Root,
    from: &Path,
    god: &GodName,
    hid: &HandoffId,
    d: &Dispatch,
) -> Result<PathBuf> {
    let to = root.archive_dir(god).join(format!("{hid}.json"));
    write_json(root, from, d)?;
    if from != to {
        crate::store::atomic::rename_durable(root, from, &to)?;
    }
    Ok(to)
}

/// Refuses, before anything is written, when a symbolic link planted on the way to any of `paths`
/// leads outside the root (every write checks again; this makes a multi-file operation refuse whole
/// instead of stopping half way).
pub(crate) fn refuse_unconfined<'a>(
    root: &Root,
    paths: impl IntoIterator<Item = &'a PathBuf>,
) -> Result<()> {
    for p in paths {
        crate::store::atomic::confined(root, p)?;
    }
    Ok(())
}

/// Removes a file if it exists, durably (never through a link, see [`crate::store::safe`]).
pub(crate) fn remove_file(root: &Root, path: &Path) -> Result<()> {
    crate::store::atomic::remove_file(root, path).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workflow state in `conductor/state/` (abort manifests, lock files and temp files skipped),
    /// each parsed or with the reason it could not be.
    fn list_states(root: &Root) -> Vec<(PathBuf, Result<WorkflowState, String>)> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(root.state_dir()) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.')
                || !name.ends_with(".json")
                || name.ends_with(crate::store::layout::ABORTED_SUFFIX)
            {
                continue;
            }
            match read_model::<WorkflowState>(&p) {
                Ok(Some(s)) => out.push((p, Ok(s))),
                Ok(None) => {}
                Err(e) => out.push((p, Err(e.error))),
            }
        }
        out
    }

    #[test]
    fn foreign_inboxes_and_states_read_without_failing() {
        let root = Root::at(super::super::model::tests::fixture());
        let conductor = super::super::Conductor::new(root.clone());
        let iris = conductor
            .check_inbox(&GodName::parse("iris").unwrap())
            .unwrap();
        assert_eq!(iris.count, 0);
        assert_eq!(iris.errors.len(), 2, "{:?}", iris.errors);
        let thoth = conductor
            .check_inbox(&GodName::parse("thoth").unwrap())
            .unwrap();
        assert_eq!(thoth.count, 1);
        assert_eq!(thoth.dispatches[0].workflow_id, "wf_1a2b3c4d");
        let states = list_states(&root);
        assert_eq!(states.len(), 4);
        assert!(states.iter().all(|(_, s)| s.is_ok()));
    }

    /// The race CI met: an ack without its workflow id looks in the inboxes (the dispatch is in the
    /// archive, accepted), a step timeout moves it back into the inbox, the ack looks in the archive.
    /// Made here by moving the file between the two looks, as the supervisor did.
    #[test]
    fn a_dispatch_moved_back_from_the_archive_between_the_looks_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let hid = HandoffId::parse("hof_20260614_st0005").unwrap();
        let god = GodName::parse("hephaestus").unwrap();
        let (inbox, archive) = (root.inbox_dir(&god), root.archive_dir(&god));
        std::fs::create_dir_all(&inbox).unwrap();
        std::fs::create_dir_all(&archive).unwrap();
        let d = serde_json::json!({"handoff_id": hid.as_str(), "workflow_id": "wf_race_st_5",
            "from_god": "thoth", "to_god": "hephaestus", "step": "build", "ack_status": "accepted"});
        let (archived, live) = (
            archive.join("hof_20260614_st0005.json"),
            inbox.join("hof_20260614_st0005.json"),
        );
        std::fs::write(&archived, serde_json::to_vec(&d).unwrap()).unwrap();
        let mut moved = false;
        let mut looks = 0;
        let found = find_in_turn(
            || {
                looks += 1;
                let f = find_live(&root, &hid, None);
                if !moved {
                    std::fs::rename(&archived, &live).unwrap();
                    moved = true;
                }
                f
            },
            || Ok(find_archived(&root, &hid, None)?.into_iter().next()),
        )
        .unwrap()
        .expect("found on the second look at the inboxes");
        assert_eq!(found.dispatch.workflow_id, "wf_race_st_5");
        assert_eq!(found.path, live);
        assert_eq!(looks, 2);
        // A handoff with no dispatch anywhere is nowhere, after every look.
        let none = HandoffId::parse("hof_20260614_nowhere").unwrap();
        assert!(find_anywhere(&root, &none).unwrap().is_none());
    }
}
