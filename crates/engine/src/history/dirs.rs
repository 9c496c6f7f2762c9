//! The directories the history records as such (format 3, [`Kind::Dir`]): those whose mere
//! existence a reader of the root shows, empty or not. An inbox (`conductor/pending/{god}/`, listed
//! by `pantheon inbox`, the console's Inboxes pane, even empty) and the approval hold
//! (`pending/_quarantine/`), a god's archive and dead letters (`conductor/archive/{god}/`,
//! `conductor/dead/{god}/`), and a track with its bus and board (`conductor/tracks/{t}/`,
//! `…/.message-bus/`, `…/.message-bus/board/`: the console lists a track whose bus directory
//! exists). Every other directory is implied by the files below it.
//!
//! A directory is recorded when it appears (`dir`) and when it goes (`del`); what it holds is
//! recorded file by file as before. Its time stamp is its birth time where the file system keeps
//! one, else the moment it was seen.

use std::path::{Path, PathBuf};

use std::collections::HashSet;

use super::store::{Change, FORMAT_DIRS, FileVer, Kind, Pending, Tree};
use crate::store::layout;

/// The directory of dead letters under `conductor/` (as `Root::dead_root` names it).
const DEAD_DIR: &str = "dead";
/// The directories of `conductor/` whose children are recorded directories: inboxes, archives,
/// dead letters, tracks.
const KINDS: [&str; 4] = [
    layout::PENDING_DIR,
    layout::ARCHIVE_DIR,
    DEAD_DIR,
    layout::TRACKS_DIR,
];

/// A name a recorded directory may have: not empty, not hidden, not a temporary or lock name.
fn plain(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !layout::is_scratch(name)
}

/// True when the key (`conductor/pending/thoth`) names a directory the history records.
pub(crate) fn is_recorded_dir(key: &str) -> bool {
    let p: Vec<&str> = key.split('/').collect();
    match p.as_slice() {
        [c, kind, name] if *c == layout::CONDUCTOR_DIR => plain(name) && KINDS.contains(kind),
        [c, t, track, b] if *c == layout::CONDUCTOR_DIR && *t == layout::TRACKS_DIR => {
            plain(track) && *b == layout::BUS_DIR
        }
        [c, t, track, b, bd] if *c == layout::CONDUCTOR_DIR && *t == layout::TRACKS_DIR => {
            plain(track) && *b == layout::BUS_DIR && *bd == layout::BOARD_DIR
        }
        _ => false,
    }
}

/// True when a recorded directory may lie below the directory of this key.
fn leads_to_recorded(key: &str) -> bool {
    let p: Vec<&str> = key.split('/').collect();
    match p.as_slice() {
        [c] => *c == layout::CONDUCTOR_DIR,
        [c, kind] => *c == layout::CONDUCTOR_DIR && KINDS.contains(kind),
        [c, t, track] => *c == layout::CONDUCTOR_DIR && *t == layout::TRACKS_DIR && plain(track),
        [c, t, track, b] => {
            *c == layout::CONDUCTOR_DIR
                && *t == layout::TRACKS_DIR
                && plain(track)
                && *b == layout::BUS_DIR
        }
        _ => false,
    }
}

/// The recorded directories at or below `dir` (whose key is `key`), with their paths: a walk that
/// only goes where one may lie (at most four levels below `conductor/`), never through a link.
pub(crate) fn recorded_dirs_under(dir: &Path, key: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), key.to_owned())];
    while let Some((d, k)) = todo.pop() {
        if is_recorded_dir(&k) {
            out.push((k.clone(), d.clone()));
        }
        if !leads_to_recorded(&k) && !is_recorded_dir(&k) {
            continue;
        }
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let sub = format!("{k}/{name}");
            if e.file_type().is_ok_and(|t| t.is_dir())
                && (is_recorded_dir(&sub) || leads_to_recorded(&sub))
            {
                todo.push((e.path(), sub));
            }
        }
    }
    out.sort();
    out
}

/// The change that records directory `key` at `path` as present (its birth time, else `now`; never
/// later than `now`), or `None` when it is not a directory (gone, a link, a file).
pub(crate) fn dir_appeared(key: &str, path: &Path, now: i64) -> Option<Pending> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_dir() {
        return None;
    }
    let born = m
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_micros()).ok())
        .unwrap_or(now);
    Some(Pending {
        path: key.to_owned(),
        kind: Kind::Dir,
        blob: None,
        len: 0,
        mtime_us: 0,
        when_us: born.min(now),
    })
}

/// The changes that record the directories at or below `dir` (key `key`) the tree does not hold
/// as directories yet; every recorded directory found is added to `seen` (a walk's deletes leave
/// it alone).
pub(crate) fn appeared_under(
    tree: &Tree,
    dir: &Path,
    key: &str,
    seen: &mut HashSet<String>,
    now: i64,
) -> Vec<Pending> {
    let mut out = Vec::new();
    for (k, p) in recorded_dirs_under(dir, key) {
        let known = tree.get(&k).is_some_and(|f| f.dir);
        seen.insert(k.clone());
        if !known {
            out.extend(dir_appeared(&k, &p, now));
        }
    }
    out
}

/// What `validate` finds wrong with a record about a directory in a segment of format `format`: a
/// `dir` record in a segment older than format 3, with content, or naming a directory the history
/// does not record.
pub(crate) fn record_problem(format: u32, c: &Change) -> Option<String> {
    if c.kind != Kind::Dir {
        return None;
    }
    if format < FORMAT_DIRS {
        return Some(format!(
            "a directory record ({}) in a segment of format {format}, which has none",
            c.path
        ));
    }
    if c.blob.is_some() || c.len != 0 {
        return Some(format!("the directory record of {} has content", c.path));
    }
    (!is_recorded_dir(&c.path))
        .then(|| format!("{} is not a directory the history records", c.path))
}

/// What `validate` finds wrong with a checkpoint's entry of a directory.
pub(crate) fn entry_problem(path: &str, f: &FileVer) -> Option<String> {
    if !f.dir {
        return None;
    }
    if !f.blobs.is_empty() || f.len != 0 {
        return Some(format!("the directory {path} has content"));
    }
    (!is_recorded_dir(path)).then(|| format!("{path} is not a directory the history records"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directories_whose_existence_is_shown_are_recorded_and_no_other() {
        for yes in [
            "conductor/pending/thoth",
            "conductor/pending/_quarantine",
            "conductor/archive/thoth",
            "conductor/dead/thoth",
            "conductor/tracks/t1",
            "conductor/tracks/t1/.message-bus",
            "conductor/tracks/t1/.message-bus/board",
        ] {
            assert!(is_recorded_dir(yes), "{yes}");
        }
        for no in [
            "conductor",
            "conductor/pending",
            "conductor/state",
            "conductor/pending/.hidden",
            "conductor/pending/.tmp-x",
            "conductor/pending/thoth/sub",
            "conductor/tracks/t1/other",
            "conductor/tracks/t1/.message-bus/board/archive",
            "conductor/workflows/x",
            "shared/handoffs/wf_x",
            "conductor/pending/",
        ] {
            assert!(!is_recorded_dir(no), "{no}");
        }
    }

    #[test]
    fn the_walk_finds_them_below_any_directory_and_follows_no_link() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("conductor");
        for sub in [
            "pending/thoth",
            "pending/_quarantine",
            "archive/anubis",
            "tracks/t1/.message-bus/board/archive",
            "state",
        ] {
            std::fs::create_dir_all(c.join(sub)).unwrap();
        }
        std::fs::write(c.join("pending/hermes"), b"a file, not an inbox").unwrap();
        std::os::unix::fs::symlink(c.join("pending/thoth"), c.join("pending/linked")).unwrap();
        let keys: Vec<String> = recorded_dirs_under(&c, "conductor")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "conductor/archive/anubis",
                "conductor/pending/_quarantine",
                "conductor/pending/thoth",
                "conductor/tracks/t1",
                "conductor/tracks/t1/.message-bus",
                "conductor/tracks/t1/.message-bus/board",
            ]
        );
        let below: Vec<String> = recorded_dirs_under(&c.join("tracks/t1"), "conductor/tracks/t1")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(below.len(), 3, "{below:?}");
        assert!(dir_appeared("conductor/pending/hermes", &c.join("pending/hermes"), 5).is_none());
        assert!(dir_appeared("conductor/pending/linked", &c.join("pending/linked"), 5).is_none());
        let p = dir_appeared("conductor/pending/thoth", &c.join("pending/thoth"), 5).unwrap();
        assert_eq!((p.kind, p.when_us <= 5), (Kind::Dir, true));
    }

    /// A history of format 2 (no directory records) is read as it is: a recorder of format 3
    /// closes its last segment, records the directories in a new one, and validate accepts both.
    #[test]
    fn an_old_history_gains_the_directories_in_a_segment_of_format_3() {
        use crate::history::store::{FORMAT, HistoryDir, Retention, Seek, Writer};
        let d = tempfile::tempdir().unwrap();
        let root = crate::store::Root::at(d.path());
        let c = d.path().join("conductor");
        std::fs::create_dir_all(c.join("pending/thoth")).unwrap();
        std::fs::create_dir_all(c.join("state")).unwrap();
        std::fs::write(c.join("state/wf_a.json"), b"{}").unwrap();
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        // A format 2 history holding the state file only, a minute old (within retention).
        let t0 = chrono::Utc::now().timestamp_micros() - 60_000_000;
        let mut w = Writer::open(&root, ret, t0).unwrap();
        let b = w.put_blob(b"{}").unwrap();
        let mut p = Pending {
            path: "conductor/state/wf_a.json".into(),
            kind: Kind::Put,
            blob: Some(b),
            len: 2,
            mtime_us: t0 + 500,
            when_us: t0 + 500,
        };
        w.commit(vec![p.clone()], t0 + 1_000).unwrap();
        drop(w);
        let hist = HistoryDir::of(&root);
        let seg = hist.segment_path(0);
        let text = std::fs::read_to_string(&seg).unwrap();
        let now = format!("\"history\":{FORMAT}");
        std::fs::write(&seg, text.replacen(&now, "\"history\":2", 1)).unwrap();
        // A directory record in a format 2 segment is refused by validate.
        p.path = "conductor/pending/thoth".into();
        p.kind = Kind::Dir;
        let (bad, _) = {
            let mut bytes = std::fs::read(&seg).unwrap();
            let c = Change {
                seq: 1,
                at_us: t0 + 600,
                path: p.path.clone(),
                kind: Kind::Dir,
                blob: None,
                len: 0,
                mtime_us: 0,
            };
            let saved = bytes.clone();
            bytes.extend_from_slice(&crate::store::json_text(&c, false));
            bytes.push(b'\n');
            std::fs::write(&seg, &bytes).unwrap();
            let found = crate::history::check(&root);
            std::fs::write(&seg, saved).unwrap();
            found
        };
        assert!(
            bad.iter().any(|e| e.contains("in a segment of format 2")),
            "{bad:?}"
        );
        let lease = crate::history::recorder::lease_file(&root).unwrap();
        lease.try_lock().unwrap();
        let (rec, _) = crate::history::recorder::Recorder::start(&root, lease).unwrap();
        drop(rec);
        let segs = hist.segments();
        assert_eq!(segs, [0, 1], "the old segment was closed");
        assert_eq!(hist.header(0).unwrap().history, 2);
        assert_eq!(hist.header(1).unwrap().history, FORMAT);
        let dirs: Vec<Change> = hist
            .segment(1)
            .unwrap()
            .records
            .into_iter()
            .map(|(_, c)| c)
            .filter(|c| c.kind == Kind::Dir)
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        assert_eq!(dirs[0].path, "conductor/pending/thoth");
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
        // Before the upgrade the empty inbox is unknown; after it, the picture lists it empty.
        let at_old = crate::history::replay_at(&root, t0 + 800).unwrap();
        assert_eq!(at_old["inboxes"], serde_json::json!({}));
        let now = chrono::Utc::now().timestamp_micros();
        let v = crate::history::replay_at(&root, now).unwrap();
        assert_eq!(v["inboxes"], serde_json::json!({"thoth": []}));
        let Seek::Found { tree, .. } = hist.seek(now).unwrap() else {
            panic!("a moment inside the history")
        };
        assert!(tree["conductor/pending/thoth"].dir);
        // Retention drops the segment that recorded the directory: the next checkpoint keeps it.
        let lease = crate::history::recorder::lease_file(&root).unwrap();
        lease.try_lock().unwrap();
        let (mut rec, _) = crate::history::recorder::Recorder::start(&root, lease).unwrap();
        rec.writer.roll(now).unwrap();
        let month = 31 * 24 * 3_600 * 1_000_000_i64;
        assert!(rec.writer.enforce_retention(now + month).unwrap() >= 2);
        drop(rec);
        assert_eq!(hist.segments().len(), 1);
        let v = crate::history::replay_at(&root, chrono::Utc::now().timestamp_micros()).unwrap();
        assert_eq!(v["inboxes"], serde_json::json!({"thoth": []}));
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
        // The directory going is recorded as a delete.
        std::fs::remove_dir(c.join("pending/thoth")).unwrap();
        let lease = crate::history::recorder::lease_file(&root).unwrap();
        lease.try_lock().unwrap();
        let (mut rec, _) = crate::history::recorder::Recorder::start(&root, lease).unwrap();
        rec.rescan(false).unwrap();
        assert!(!rec.writer.tree.contains_key("conductor/pending/thoth"));
    }
}
