//! What `serve --otlp` reads to make spans (docs/OBSERVABILITY.md, "Traces"): the state files and
//! the dispatch files that file-system events name, and nothing else. No model of the root is kept:
//! per workflow, how far its records were turned into spans ([`Cursor`]); per open dispatch, what it
//! showed last ([`InboxWatch`]). Both are kept only for files that changed since the exporter
//! started, and forgotten when the file goes.
//!
//! Every file is hostile input: opened without following a link and without blocking, refused when
//! it is not a regular file or is larger than the engine's limit, and passed over (its cursor kept)
//! when it does not parse, so a torn or planted file costs one read and no span.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::engine::{Dispatch, Root, WorkflowId, is_foreign_pending_dir, layout};
use crate::live::files::Fingerprint;

use super::inbox_spans::{InboxWatch, Read};
use super::otlp::SpanData;
use super::spans::{Cursor, parse_object, parse_state, spans_since};

/// The name every state and dispatch file ends with.
const JSON: &str = ".json";

/// The largest record file read: the engine's own limit for a JSON file (64 MiB).
pub(super) const MAX_JSON_BYTES: u64 = 64 * 1024 * 1024;

/// One file of the root as read.
pub(super) enum Record {
    /// No such file.
    Missing,
    /// A link, not a regular file, over the size limit, or unreadable: nothing is made of it.
    Unusable,
    /// Its bytes and its metadata (taken from the open handle).
    Read(Vec<u8>, std::fs::Metadata),
}

/// Reads a record file: no link followed, no blocking open (a FIFO cannot hang the watcher), at
/// most [`MAX_JSON_BYTES`], even of a file that grows while it is read.
pub(super) fn read_at(path: &Path) -> Record {
    use std::os::unix::fs::OpenOptionsExt;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Record::Missing,
        Err(_) => return Record::Unusable,
    };
    let Ok(meta) = f.metadata() else {
        return Record::Unusable;
    };
    if !meta.is_file() || meta.len() > MAX_JSON_BYTES {
        return Record::Unusable;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    match f.take(MAX_JSON_BYTES + 1).read_to_end(&mut bytes) {
        Ok(n) if n as u64 <= MAX_JSON_BYTES => Record::Read(bytes, meta),
        _ => Record::Unusable,
    }
}

/// A record file's bytes and metadata; `None` when it is missing or unusable ([`read_at`]).
pub(super) fn read_record(path: &Path) -> Option<(Vec<u8>, std::fs::Metadata)> {
    match read_at(path) {
        Record::Read(b, m) => Some((b, m)),
        Record::Missing | Record::Unusable => None,
    }
}

/// What a changed path is to the span watcher.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Changed {
    /// A directory it watches or would watch (appeared, vanished, replaced).
    Dir,
    /// A workflow's state file (its name).
    State(String),
    /// A dispatch file in an inbox: (god, file name).
    Dispatch(String, String),
    /// A dead letter: (god, file name).
    Dead(String, String),
    Ignore,
}

/// The headless span watcher: turns the files events name into spans.
pub(crate) struct SpanWatch {
    root: Root,
    started: DateTime<Utc>,
    /// By state file name (without `.json`): how far its records were turned into spans.
    cursors: HashMap<String, Cursor>,
    inboxes: InboxWatch,
    /// The fingerprint of every file the last rescan listed (only a rescan fills it: the poll
    /// fallback, or an event queue that overflowed), so the next one reads only what changed.
    listed: HashMap<PathBuf, Fingerprint>,
}

impl SpanWatch {
    /// A watcher of `root` that exports what happens from `started` on: a record older than that
    /// (in a file not seen since) happened before the exporter and is passed over.
    pub(crate) fn new(root: Root, started: DateTime<Utc>) -> Self {
        Self {
            root,
            started,
            cursors: HashMap::new(),
            inboxes: InboxWatch::default(),
            listed: HashMap::new(),
        }
    }

    /// The directories to watch, each non-recursively: `state/`, `pending/` and each inbox,
    /// `dead/` and each god's dead letters (a dozen or so, none per workflow).
    pub(crate) fn dirs(&self) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        let pending = self.root.pending_root();
        for god in subdirs(&pending) {
            if !is_foreign_pending_dir(&god) && god != layout::QUARANTINE_DIR {
                out.insert(pending.join(god));
            }
        }
        let dead = self.root.dead_root();
        for god in subdirs(&dead) {
            out.insert(dead.join(god));
        }
        out.extend([self.root.state_dir(), pending, dead]);
        out
    }

    /// How many workflows and dispatches the watcher remembers (for its tests and bounds).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.cursors.len() + self.inboxes.remembered()
    }

    fn classify(&self, path: &Path) -> Changed {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let scratch = name.starts_with(layout::TEMP_PREFIX) || !name.ends_with(JSON);
        if let Ok(rel) = path.strip_prefix(self.root.dead_root()) {
            return match names(rel).as_slice() {
                [] | [_] => Changed::Dir,
                [god, file] if !scratch => Changed::Dead(god.clone(), file.clone()),
                _ => Changed::Ignore,
            };
        }
        if let Ok(rel) = path.strip_prefix(self.root.state_dir()) {
            return match names(rel).as_slice() {
                [] => Changed::Dir,
                // An abort manifest (`{wf}.aborted.json`) is no workflow id: it is passed over.
                [f] if !scratch && is_workflow(f) => Changed::State(f.clone()),
                _ => Changed::Ignore,
            };
        }
        if let Ok(rel) = path.strip_prefix(self.root.pending_root()) {
            return match names(rel).as_slice() {
                [] => Changed::Dir,
                [god, ..] if is_foreign_pending_dir(god) || god == layout::QUARANTINE_DIR => {
                    Changed::Ignore
                }
                [_] => Changed::Dir,
                [god, f] if !scratch => Changed::Dispatch(god.clone(), f.clone()),
                _ => Changed::Ignore,
            };
        }
        Changed::Ignore
    }

    /// The spans of the files `paths` name (events: written, renamed, removed), given to `out`.
    /// True when a directory changed: the caller syncs its watches with [`SpanWatch::dirs`].
    pub(crate) fn changed(&mut self, paths: &[PathBuf], out: &mut dyn FnMut(SpanData)) -> bool {
        let mut what: Vec<Changed> = paths.iter().map(|p| self.classify(p)).collect();
        what.sort();
        what.dedup();
        let dirs = what.first() == Some(&Changed::Dir);
        // The inboxes first: a dead letter's span reads the state the same burst may change.
        for c in what.iter().filter(|c| !matches!(c, Changed::State(_))) {
            match c {
                Changed::Dispatch(god, file) => self.dispatch(god, file, false, out),
                Changed::Dead(god, file) => self.dispatch(god, file, true, out),
                _ => {}
            }
        }
        for c in &what {
            if let Changed::State(file) = c {
                self.state(file, out);
            }
        }
        dirs
    }

    fn note(&mut self, path: &Path, meta: &std::fs::Metadata) {
        if let Some(fp) = self.listed.get_mut(path)
            && let Some(now) = Fingerprint::from_metadata(meta)
        {
            *fp = now;
        }
    }

    fn state(&mut self, file: &str, out: &mut dyn FnMut(SpanData)) {
        let Some(key) = file.strip_suffix(JSON) else {
            return;
        };
        let path = self.root.state_dir().join(file);
        let (bytes, meta) = match read_at(&path) {
            Record::Missing => {
                self.cursors.remove(key);
                return;
            }
            Record::Unusable => return,
            Record::Read(b, m) => (b, m),
        };
        self.note(&path, &meta);
        // A torn or foreign file: its cursor stays where it was, the next write is read again.
        let Some(st) = parse_state(&bytes) else {
            return;
        };
        let cursor = self.cursors.get(key).copied();
        let not_before = cursor.is_none().then_some(self.started);
        let (spans, next) = spans_since(&st, cursor.unwrap_or_default(), not_before);
        spans.into_iter().for_each(&mut *out);
        self.cursors.insert(key.to_owned(), next);
    }

    fn dispatch(&mut self, god: &str, file: &str, dead: bool, out: &mut dyn FnMut(SpanData)) {
        let Some(key) = file.strip_suffix(JSON) else {
            return;
        };
        let dir = if dead {
            self.root.dead_root()
        } else {
            self.root.pending_root()
        };
        let path = dir.join(god).join(file);
        let (bytes, meta) = match read_at(&path) {
            Record::Missing if dead => return self.inboxes.dead_gone(key),
            Record::Missing => return self.inboxes.gone(key, god),
            Record::Unusable => return,
            Record::Read(b, m) => (b, m),
        };
        self.note(&path, &meta);
        let Some(d) = parse_object::<Dispatch>(&bytes) else {
            return;
        };
        let read = Read {
            key,
            god,
            dispatch: &d,
            written: meta.modified().ok().map(DateTime::<Utc>::from),
        };
        if dead {
            self.inboxes
                .dead_letter(&self.root, self.started, &read, out);
        } else {
            self.inboxes.dispatch(&self.root, self.started, &read, out);
        }
    }

    /// The files of directories just watched (made, or made again, after the watcher started):
    /// what was written in them before their watch existed.
    pub(crate) fn read_dirs(&mut self, dirs: &[PathBuf], out: &mut dyn FnMut(SpanData)) {
        let paths: Vec<PathBuf> = dirs
            .iter()
            .flat_map(|d| files(d).into_iter().map(move |f| d.join(f)))
            .collect();
        if !paths.is_empty() {
            self.changed(&paths, out);
        }
    }

    /// Checks every file (no event can be trusted: the poll fallback, or events were lost): a stat
    /// each, and a read of those changed since the previous rescan (at the first, of those written
    /// since the watcher started). What is no longer there is forgotten.
    pub(crate) fn rescan(&mut self, out: &mut dyn FnMut(SpanData)) {
        let started_ns = self.started.timestamp_nanos_opt().unwrap_or(i64::MIN);
        let mut now = HashMap::new();
        let mut changed = Vec::new();
        for dir in self.dirs() {
            for f in files(&dir) {
                let path = dir.join(f);
                let Some(fp) = std::fs::symlink_metadata(&path)
                    .ok()
                    .and_then(|m| Fingerprint::from_metadata(&m))
                else {
                    continue;
                };
                let new = match self.listed.get(&path) {
                    Some(before) => *before != fp,
                    None => fp.mtime_ns.max(fp.ctime_ns) >= started_ns,
                };
                if new {
                    changed.push(path.clone());
                }
                now.insert(path, fp);
            }
        }
        self.listed = now;
        let (state, pending, dead) = (
            self.root.state_dir(),
            self.root.pending_root(),
            self.root.dead_root(),
        );
        let listed = &self.listed;
        let there = |dir: &Path, key: &str| listed.contains_key(&dir.join(format!("{key}{JSON}")));
        let dead_letters: HashSet<String> = listed
            .keys()
            .filter(|p| p.starts_with(&dead))
            .filter_map(|p| Some(p.file_name()?.to_str()?.strip_suffix(JSON)?.to_owned()))
            .collect();
        self.cursors.retain(|k, _| there(&state, k));
        self.inboxes.retain(&|k, god| match god {
            Some(g) => there(&pending.join(g), k),
            None => dead_letters.contains(k),
        });
        self.changed(&changed, out);
    }
}

/// The components of a relative path, as text.
fn names(rel: &Path) -> Vec<String> {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// True when `file` is `{workflow id}.json`.
fn is_workflow(file: &str) -> bool {
    file.strip_suffix(JSON)
        .is_some_and(|id| WorkflowId::parse(id).is_ok())
}

/// The names of the directories in `dir` (not links, not hidden).
fn subdirs(dir: &Path) -> Vec<String> {
    entries(dir, true)
}

/// The names of the files in `dir` (not directories, not hidden).
fn files(dir: &Path) -> Vec<String> {
    entries(dir, false)
}

fn entries(dir: &Path, dirs: bool) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() == dirs))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

#[cfg(test)]
#[path = "span_watch_tests.rs"]
mod tests;
