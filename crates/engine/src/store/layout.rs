//! The layout of a root (docs/PROTOCOL.md §1): every protocol file and directory name, spelled once here.
//! The builders ([`super::Root`]'s path methods, [`crate::bus::Bus`]'s, the journal's, the outbox's) join
//! these names, and [`BusEntry::of`] / [`BoardEntry::of`] map a name back to what it is, for the
//! validator. A test in the `pantheon` package fails when one of these names is spelled as a string in a
//! second non-test module.

/// `{root}/conductor`: the Conductor's directory.
pub const CONDUCTOR_DIR: &str = "conductor";
/// `{root}/shared`.
pub const SHARED_DIR: &str = "shared";
/// `{root}/shared/handoffs`.
pub const HANDOFFS_DIR: &str = "handoffs";
/// `shared/handoffs/schema.json`: the handoff schema `init` installs.
pub(crate) const SCHEMA_FILE: &str = "schema.json";
/// `conductor/workflows`: workflow definitions.
pub(crate) const WORKFLOWS_DIR: &str = "workflows";
/// `conductor/rules`: routing rules.
pub(crate) const RULES_DIR: &str = "rules";
/// `conductor/state`: one state file per workflow.
pub const STATE_DIR: &str = "state";
/// `state/{wf}.aborted.json`: the abort manifest's suffix.
pub(crate) const ABORTED_SUFFIX: &str = ".aborted.json";
/// `conductor/pending`: the inboxes.
pub const PENDING_DIR: &str = "pending";
/// `pending/_quarantine`: dispatches that could not be delivered.
pub const QUARANTINE_DIR: &str = "_quarantine";
/// `conductor/archive`: closed dispatches, per god.
pub const ARCHIVE_DIR: &str = "archive";
/// `conductor/retired`: dead letters that ended (superseded by a rerun, their workflow finished or
/// aborted, or discarded by the operator), per god (docs/PROTOCOL.md §2.10).
pub(crate) const RETIRED_DIR: &str = "retired";
/// `conductor/tracks`: one directory per track.
pub(crate) const TRACKS_DIR: &str = "tracks";
/// `tracks/{track}/.message-bus`: a track's bus.
pub const BUS_DIR: &str = ".message-bus";
/// `conductor/journal.jsonl`: the operator journal.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// `conductor/history`: the recorded history of the root (docs/HISTORY.md).
pub const HISTORY_DIR: &str = "history";
/// `conductor/sources`: the last state of each foreign source a recorder reads (`pantheon --source
/// … record`), `{n}.json` for its `n`-th source, kept in the history so the time machine shows it.
pub const SOURCES_DIR: &str = "sources";
/// `conductor/outbox`: messages waiting for the bridge.
pub(crate) const OUTBOX_DIR: &str = "outbox";
/// `conductor/approvals`: the records of approval links, one per token, named by the token's
/// SHA-256 (docs/PROTOCOL.md §2.15).
pub(crate) const APPROVALS_DIR: &str = "approvals";
/// `conductor/approvals/listener.json`: where `serve --approvals` listens, for `approve --link`.
pub(crate) const APPROVALS_LISTENER_FILE: &str = "listener.json";
/// `conductor/bridge/retry`: operators' requests that the bridge try a waiting outbox record now.
pub(crate) const BRIDGE_RETRY_DIR: &str = "retry";

/// `.message-bus/queue.jsonl`: the message queue.
pub const QUEUE_FILE: &str = "queue.jsonl";
/// `.message-bus/.lock_mutex`: the lock of every read-modify-write on a bus.
pub const BUS_MUTEX_FILE: &str = ".lock_mutex";
/// `.message-bus/locks.json`: file locks.
pub const LOCKS_FILE: &str = "locks.json";
/// `.message-bus/worker-status.json`: workers and their heartbeats.
pub const WORKERS_FILE: &str = "worker-status.json";
/// `.message-bus/fencing.json`: the fencing tokens of the locks.
pub(crate) const FENCING_FILE: &str = "fencing.json";
/// `.message-bus/events`: event files.
pub(crate) const EVENTS_DIR: &str = "events";
/// `.message-bus/board`: the board deliberation.
pub const BOARD_DIR: &str = "board";
/// `board/assessments.json`.
pub const ASSESSMENTS_FILE: &str = "assessments.json";
/// `board/votes.json`.
pub const VOTES_FILE: &str = "votes.json";
/// `board/discussion.jsonl`.
pub const DISCUSSION_FILE: &str = "discussion.jsonl";
/// `board/resolution.md`.
pub(crate) const RESOLUTION_FILE: &str = "resolution.md";
/// `board/archive`: earlier sessions, one directory each.
pub(crate) const BOARD_ARCHIVE_DIR: &str = "archive";

const SESSION_PREFIX: &str = "session-";
pub(crate) const JSON_SUFFIX: &str = ".json";
const QUEUE_ARCHIVE_PREFIX: &str = "queue.";
const QUEUE_ARCHIVE_SUFFIX: &str = ".archive.jsonl";

/// `conductor/paused.json`: the pauses in force (docs/PROTOCOL.md §2.14).
pub const PAUSED_FILE: &str = "paused.json";
/// `conductor/.paused.lock`: serialises every rewrite of `paused.json`.
pub(crate) const PAUSED_LOCK: &str = ".paused";

/// Prefix of the engine's own temporary files (never protocol files).
pub const TEMP_PREFIX: &str = ".tmp-";
/// The directory in the root where the engine writes the temporary files of its replaces.
pub const TEMP_DIR: &str = ".tmp";
/// `.tmp/commit.lock`: the group commit's lock, whose first eight bytes count the completed rounds
/// (`store::commit`).
pub(crate) const COMMIT_LOCK: &str = "commit.lock";
/// Suffix of the per-workflow lock files in `state/`.
pub const LOCK_SUFFIX: &str = ".lock";

/// Every protocol file name with an extension (what the duplicate-spelling check looks for).
pub const FILE_NAMES: [&str; 14] = [
    SCHEMA_FILE,
    PAUSED_FILE,
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
pub(crate) enum BusEntry {
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
    pub(crate) fn of(name: &str) -> Option<Self> {
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
pub(crate) enum BoardEntry {
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
    pub(crate) fn of(name: &str) -> Option<Self> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_and_board_entries_read_back_from_their_names() {
        for (name, entry) in [
            (QUEUE_FILE, BusEntry::Queue),
            (LOCKS_FILE, BusEntry::Locks),
            (WORKERS_FILE, BusEntry::Workers),
            (FENCING_FILE, BusEntry::Fencing),
            (EVENTS_DIR, BusEntry::Events),
        ] {
            assert_eq!(BusEntry::of(name), Some(entry), "{name}");
        }
        assert_eq!(
            BusEntry::of(&queue_archive_name("x")),
            Some(BusEntry::QueueArchive)
        );
        assert_eq!(
            BoardEntry::of(&session_file_name("board-1")),
            Some(BoardEntry::Session("board-1".into()))
        );
    }
}
