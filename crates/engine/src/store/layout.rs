//! The layout of a root (docs/PROTOCOL.md §1): every protocol file and directory name, spelled once here.
//! The builders ([`super::Root`]'s path methods, [`crate::bus::Bus`]'s, the journal's, the outbox's) join
//! these names, and [`classify`] maps a path back to what it is, for the live model's watcher and for the
//! validator. A test in the `pantheon` package fails when one of these names is spelled as a string in a
//! second non-test module.

use std::path::{Component, Path};

use super::paths::Root;

/// `{root}/conductor`: the Conductor's directory.
pub const CONDUCTOR_DIR: &str = "conductor";
/// `{root}/shared`.
pub const SHARED_DIR: &str = "shared";
/// `{root}/shared/handoffs`.
pub const HANDOFFS_DIR: &str = "handoffs";
/// `shared/handoffs/schema.json`: the handoff schema `init` installs.
pub const SCHEMA_FILE: &str = "schema.json";
/// `conductor/workflows`: workflow definitions.
pub const WORKFLOWS_DIR: &str = "workflows";
/// `conductor/rules`: routing rules.
pub const RULES_DIR: &str = "rules";
/// `conductor/state`: one state file per workflow.
pub const STATE_DIR: &str = "state";
/// `state/{wf}.aborted.json`: the abort manifest's suffix.
pub const ABORTED_SUFFIX: &str = ".aborted.json";
/// `conductor/pending`: the inboxes.
pub const PENDING_DIR: &str = "pending";
/// `pending/_quarantine`: dispatches that could not be delivered.
pub const QUARANTINE_DIR: &str = "_quarantine";
/// `conductor/archive`: closed dispatches, per god.
pub const ARCHIVE_DIR: &str = "archive";
/// `conductor/tracks`: one directory per track.
pub const TRACKS_DIR: &str = "tracks";
/// `tracks/{track}/.message-bus`: a track's bus.
pub const BUS_DIR: &str = ".message-bus";
/// `conductor/journal.jsonl`: the operator journal.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// `conductor/history`: the recorded history of the root (docs/HISTORY.md).
pub const HISTORY_DIR: &str = "history";
/// `conductor/outbox`: messages waiting for the bridge.
pub const OUTBOX_DIR: &str = "outbox";

/// `.message-bus/queue.jsonl`: the message queue.
pub const QUEUE_FILE: &str = "queue.jsonl";
/// `.message-bus/.lock_mutex`: the lock of every read-modify-write on a bus.
pub const BUS_MUTEX_FILE: &str = ".lock_mutex";
/// `.message-bus/locks.json`: file locks.
pub const LOCKS_FILE: &str = "locks.json";
/// `.message-bus/worker-status.json`: workers and their heartbeats.
pub const WORKERS_FILE: &str = "worker-status.json";
/// `.message-bus/fencing.json`: the fencing tokens of the locks.
pub const FENCING_FILE: &str = "fencing.json";
/// `.message-bus/events`: event files.
pub const EVENTS_DIR: &str = "events";
/// `.message-bus/board`: the board deliberation.
pub const BOARD_DIR: &str = "board";
/// `board/assessments.json`.
pub const ASSESSMENTS_FILE: &str = "assessments.json";
/// `board/votes.json`.
pub const VOTES_FILE: &str = "votes.json";
/// `board/discussion.jsonl`.
pub const DISCUSSION_FILE: &str = "discussion.jsonl";
/// `board/resolution.md`.
pub const RESOLUTION_FILE: &str = "resolution.md";
/// `board/archive`: earlier sessions, one directory each.
pub const BOARD_ARCHIVE_DIR: &str = "archive";

const SESSION_PREFIX: &str = "session-";
const JSON_SUFFIX: &str = ".json";
const QUEUE_ARCHIVE_PREFIX: &str = "queue.";
const QUEUE_ARCHIVE_SUFFIX: &str = ".archive.jsonl";

/// Prefix of the engine's own temporary files (never protocol files).
pub const TEMP_PREFIX: &str = ".tmp-";
/// Suffix of the per-workflow lock files in `state/`.
pub const LOCK_SUFFIX: &str = ".lock";

/// Every protocol file name with an extension (what the duplicate-spelling check looks for).
pub const FILE_NAMES: [&str; 13] = [
    SCHEMA_FILE,
    JOURNAL_FILE,
    QUEUE_FILE,
    BUS_MUTEX_FILE,
    LOCKS_FILE,
    WORKERS_FILE,
    FENCING_FILE,
    ASSESSMENTS_FILE,
    VOTES_FILE,
    DISCUSSION_FILE,
    RESOLUTION_FILE,
    BUS_DIR,
    QUARANTINE_DIR,
];

/// `session-{id}.json`.
pub fn session_file_name(id: &str) -> String {
    format!("{SESSION_PREFIX}{id}{JSON_SUFFIX}")
}

/// The session id of a `session-{id}.json` name.
pub fn session_id_of(name: &str) -> Option<&str> {
    name.strip_prefix(SESSION_PREFIX)?.strip_suffix(JSON_SUFFIX)
}

/// `queue.{track_id}.archive.jsonl`: a queue moved aside by `bus archive`.
pub(crate) fn queue_archive_name(track_id: &str) -> String {
    format!("{QUEUE_ARCHIVE_PREFIX}{track_id}{QUEUE_ARCHIVE_SUFFIX}")
}

/// True for the engine's temporary files and lock files, which are never protocol records.
pub(crate) fn is_scratch(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX) || name.ends_with(LOCK_SUFFIX) || name == BUS_MUTEX_FILE
}

/// A file or directory directly in a `.message-bus` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusEntry {
    /// `queue.jsonl`.
    Queue,
    /// `queue.{id}.archive.jsonl`.
    QueueArchive,
    /// `.lock_mutex`.
    Mutex,
    /// `locks.json`.
    Locks,
    /// `worker-status.json`.
    Workers,
    /// `fencing.json`.
    Fencing,
    /// `events/`.
    Events,
    /// `board/`.
    Board,
}

impl BusEntry {
    /// What `name` (one path component in a bus directory) is; `None` for anything else.
    pub fn of(name: &str) -> Option<Self> {
        Some(match name {
            QUEUE_FILE => Self::Queue,
            BUS_MUTEX_FILE => Self::Mutex,
            LOCKS_FILE => Self::Locks,
            WORKERS_FILE => Self::Workers,
            FENCING_FILE => Self::Fencing,
            EVENTS_DIR => Self::Events,
            BOARD_DIR => Self::Board,
            n if n.starts_with(QUEUE_ARCHIVE_PREFIX) && n.ends_with(QUEUE_ARCHIVE_SUFFIX) => {
                Self::QueueArchive
            }
            _ => return None,
        })
    }
}

/// A file or directory directly in a `board` directory (or in one archived session's directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoardEntry {
    /// `session-{id}.json`, with the id.
    Session(String),
    /// `assessments.json`.
    Assessments,
    /// `votes.json`.
    Votes,
    /// `discussion.jsonl`.
    Discussion,
    /// `resolution.md`.
    Resolution,
    /// `archive/`.
    Archive,
}

impl BoardEntry {
    /// What `name` is; `None` for anything else.
    pub fn of(name: &str) -> Option<Self> {
        Some(match name {
            ASSESSMENTS_FILE => Self::Assessments,
            VOTES_FILE => Self::Votes,
            DISCUSSION_FILE => Self::Discussion,
            RESOLUTION_FILE => Self::Resolution,
            BOARD_ARCHIVE_DIR => Self::Archive,
            n => Self::Session(session_id_of(n)?.to_owned()),
        })
    }
}

/// Where a path lies in a root, as far as the protocol is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The root itself or the Conductor's directory.
    Top,
    /// A direct child of the Conductor's directory not named below (a directory created or removed).
    ConductorChild,
    /// `conductor/state` itself.
    StateDir,
    /// A file directly in `conductor/state` (its name).
    StateFile(String),
    /// `conductor/pending` itself.
    PendingDir,
    /// A directory a foreign engine keeps in `pending/` (`_webhooks`, `inbox`, …).
    ForeignPending,
    /// An inbox (the god) or a file in it.
    Inbox(String, Option<String>),
    /// `pending/_quarantine` or a file in it.
    Quarantine(Option<String>),
    /// Anything under `conductor/workflows`.
    Definitions,
    /// `conductor/tracks` itself.
    TracksDir,
    /// A track's directory or its `.message-bus` directory.
    Track(String),
    /// An entry of a track's bus (or something below it).
    Bus(String, BusEntry),
    /// Anything else (including the engine's scratch files).
    Other,
}

fn names(rel: &Path) -> Vec<String> {
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// What `path` is in `root` (lexically; nothing is read).
pub fn classify(root: &Root, path: &Path) -> Place {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if is_scratch(&name) {
        return Place::Other;
    }
    if path == root.dir || path == root.conductor {
        return Place::Top;
    }
    if let Ok(rel) = path.strip_prefix(root.state_dir()) {
        return match names(rel).as_slice() {
            [] => Place::StateDir,
            [f] => Place::StateFile(f.clone()),
            _ => Place::Other,
        };
    }
    if let Ok(rel) = path.strip_prefix(root.pending_root()) {
        return match names(rel).as_slice() {
            [] => Place::PendingDir,
            [god, ..] if crate::conductor::files::is_foreign_pending_dir(god) => {
                Place::ForeignPending
            }
            [god] if god == QUARANTINE_DIR => Place::Quarantine(None),
            [god] => Place::Inbox(god.clone(), None),
            [god, file] if god == QUARANTINE_DIR => Place::Quarantine(Some(file.clone())),
            [god, file] => Place::Inbox(god.clone(), Some(file.clone())),
            _ => Place::Other,
        };
    }
    if path.starts_with(root.workflows_dir()) {
        return Place::Definitions;
    }
    if let Ok(rel) = path.strip_prefix(root.tracks_dir()) {
        return match names(rel).as_slice() {
            [] => Place::TracksDir,
            [track] => Place::Track(track.clone()),
            [track, bus] if bus == BUS_DIR => Place::Track(track.clone()),
            [track, bus, entry, ..] if bus == BUS_DIR => match BusEntry::of(entry) {
                Some(e) => Place::Bus(track.clone(), e),
                None => Place::Other,
            },
            _ => Place::Other,
        };
    }
    if path.parent() == Some(root.conductor.as_path()) {
        return Place::ConductorChild;
    }
    Place::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{GodName, TrackName};

    #[test]
    fn every_built_path_classifies_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let t = TrackName::parse("t1").unwrap();
        let bus = root.bus_dir(&t);
        assert_eq!(classify(&root, &root.dir), Place::Top);
        assert_eq!(classify(&root, &root.state_dir()), Place::StateDir);
        assert_eq!(
            classify(&root, &root.state_dir().join("wf_a.json")),
            Place::StateFile("wf_a.json".into())
        );
        assert_eq!(
            classify(&root, &root.state_dir().join(".wf_a.lock")),
            Place::Other
        );
        let god = GodName::parse("hermes").unwrap();
        assert_eq!(
            classify(&root, &root.inbox_dir(&god).join("x.json")),
            Place::Inbox("hermes".into(), Some("x.json".into()))
        );
        assert_eq!(
            classify(&root, &root.quarantine_dir()),
            Place::Quarantine(None)
        );
        assert_eq!(
            classify(&root, &root.pending_root().join("_webhooks/a")),
            Place::ForeignPending
        );
        assert_eq!(classify(&root, &bus), Place::Track("t1".into()));
        for (name, entry) in [
            (QUEUE_FILE, BusEntry::Queue),
            (LOCKS_FILE, BusEntry::Locks),
            (WORKERS_FILE, BusEntry::Workers),
            (FENCING_FILE, BusEntry::Fencing),
            (EVENTS_DIR, BusEntry::Events),
        ] {
            assert_eq!(
                classify(&root, &bus.join(name)),
                Place::Bus("t1".into(), entry)
            );
        }
        assert_eq!(
            classify(&root, &bus.join(BOARD_DIR).join(VOTES_FILE)),
            Place::Bus("t1".into(), BusEntry::Board)
        );
        assert_eq!(classify(&root, &bus.join(BUS_MUTEX_FILE)), Place::Other);
        assert_eq!(
            BusEntry::of(&queue_archive_name("x")),
            Some(BusEntry::QueueArchive)
        );
        assert_eq!(
            BoardEntry::of(&session_file_name("board-1")),
            Some(BoardEntry::Session("board-1".into()))
        );
        assert_eq!(
            classify(&root, &root.workflows_dir().join("a.yaml")),
            Place::Definitions
        );
        assert_eq!(
            classify(&root, &root.conductor.join("new")),
            Place::ConductorChild
        );
    }
}
