//! The identity of a pane's row: what the selection, the marks, the jumps and a gone record
//! follow. One variant per kind of record, so a pane compares its rows' fields with a key's
//! without parsing text back; [`Display`](std::fmt::Display) gives the text operators read (and
//! that a gone record or a skipped mark is named by). Each kind of record is listed by one pane
//! ([`RowKey::pane`]), so a key alone says where its row is.

use std::fmt;

use crate::live::snapshot::{BridgeKind, Sym};

use super::attention;
use super::keymap::Pane;

/// One row's identity, in whichever pane lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKey {
    /// A workflow (pane 1), by its id.
    Workflow(Sym),
    /// A dispatch in a god's inbox or the quarantine (pane 2), by its file name there.
    Dispatch { god: Sym, name: Sym },
    /// A bus message (pane 3), by its id.
    Message(Sym),
    /// A lock (pane 4): the track and the locked path.
    Lock { track: Sym, path: Sym },
    /// A worker's heartbeat (pane 5): the track and the worker id.
    Worker { track: Sym, worker: Sym },
    /// A director on the board (pane 6).
    Director(Sym),
    /// An attention item (pane 7), by its cause's key.
    Attention(attention::Key),
    /// A journal entry (pane 8), by its `seq` (the entry's text when it has none).
    Journal(Sym),
    /// A dead letter (pane 9): the god whose dead letters hold it, and its file name there.
    DeadLetter { god: Sym, name: Sym },
    /// A row of the bridge view (pane 10): its kind and the record's id.
    Bridge { kind: BridgeKind, id: Sym },
    /// A god's costs in the ledger (pane 11).
    God(Sym),
    /// A budget in the ledger (pane 11): its scope, the name in that scope and the metric.
    Budget { scope: Sym, name: Sym, metric: Sym },
    /// A foreign agent's cost in the ledger (pane 11): its source's `KIND:LOCATION`, its team and
    /// its name.
    ForeignCost { source: Sym, team: Sym, agent: Sym },
    /// A foreign source or one of its records (pane 12): the source's `KIND:LOCATION`, what the
    /// record is and its id in the source (empty for the source itself).
    Source {
        source: Sym,
        record: SourceRecord,
        id: Sym,
    },
}

/// What a row of the Sources pane is: a source, or a kind of its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceRecord {
    Source,
    /// A waiting item (what the source's attention items are).
    Item,
    Agent,
    Task,
    Message,
    Lock,
}

impl SourceRecord {
    /// The word a key's text names it by.
    pub fn word(self) -> &'static str {
        match self {
            SourceRecord::Source => "source",
            SourceRecord::Item => "item",
            SourceRecord::Agent => "agent",
            SourceRecord::Task => "task",
            SourceRecord::Message => "message",
            SourceRecord::Lock => "lock",
        }
    }
}

impl RowKey {
    /// The pane that lists rows of this kind (each kind is listed by exactly one).
    pub fn pane(&self) -> Pane {
        match self {
            RowKey::Workflow(_) => Pane::Workflows,
            RowKey::Dispatch { .. } => Pane::Inboxes,
            RowKey::Message(_) => Pane::Bus,
            RowKey::Lock { .. } => Pane::Locks,
            RowKey::Worker { .. } => Pane::Workers,
            RowKey::Director(_) => Pane::Board,
            RowKey::Attention(_) => Pane::Attention,
            RowKey::Journal(_) => Pane::Journal,
            RowKey::DeadLetter { .. } => Pane::DeadLetters,
            RowKey::Bridge { .. } => Pane::Bridge,
            RowKey::God(_) | RowKey::Budget { .. } | RowKey::ForeignCost { .. } => Pane::Ledger,
            RowKey::Source { .. } => Pane::Sources,
        }
    }

    /// A dispatch of `god`'s inbox.
    pub fn dispatch(god: &str, name: &str) -> Self {
        RowKey::Dispatch {
            god: god.into(),
            name: name.into(),
        }
    }

    /// A dead letter of `god`.
    pub fn dead_letter(god: &str, name: &str) -> Self {
        RowKey::DeadLetter {
            god: god.into(),
            name: name.into(),
        }
    }

    /// A lock of `track`.
    pub fn lock(track: &str, path: &str) -> Self {
        RowKey::Lock {
            track: track.into(),
            path: path.into(),
        }
    }

    /// A worker of `track`.
    pub fn worker(track: &str, worker: &str) -> Self {
        RowKey::Worker {
            track: track.into(),
            worker: worker.into(),
        }
    }

    /// A workflow, by id.
    pub fn workflow(id: &str) -> Self {
        RowKey::Workflow(id.into())
    }

    /// True when this is the lock of `path` on `track` (compared without building a key).
    pub fn is_lock(&self, track: &str, path: &str) -> bool {
        matches!(self, RowKey::Lock { track: t, path: p } if **t == *track && **p == *path)
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowKey::Workflow(s) | RowKey::Message(s) | RowKey::Director(s) | RowKey::Journal(s) => {
                f.write_str(s)
            }
            RowKey::Attention(k) => write!(f, "{k}"),
            RowKey::Dispatch { god, name } | RowKey::DeadLetter { god, name } => {
                write!(f, "{god}/{name}")
            }
            RowKey::Lock { track, path } => write!(f, "{track}/{path}"),
            RowKey::Worker { track, worker } => write!(f, "{track}/{worker}"),
            RowKey::Bridge { kind, id } => write!(f, "{}/{id}", kind.word()),
            RowKey::God(g) => write!(f, "god/{g}"),
            RowKey::Budget {
                scope,
                name,
                metric,
            } => write!(f, "budget/{scope}/{name}/{metric}"),
            RowKey::ForeignCost {
                source,
                team,
                agent,
            } => write!(f, "{source}/cost/{team}/{agent}"),
            RowKey::Source {
                source,
                record: SourceRecord::Source,
                ..
            } => f.write_str(source),
            RowKey::Source { source, record, id } => {
                write!(f, "{source}/{}/{id}", record.word())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_as_the_text_operators_know() {
        let cases = [
            (RowKey::workflow("wf_1"), "wf_1"),
            (
                RowKey::dispatch("hermes", "hof_1.json"),
                "hermes/hof_1.json",
            ),
            (RowKey::dead_letter("ra", "hof_2.json"), "ra/hof_2.json"),
            (RowKey::lock("main", "src/a b.rs"), "main/src/a b.rs"),
            (RowKey::worker("main", "w-1"), "main/w-1"),
            (
                RowKey::Bridge {
                    kind: BridgeKind::Pending,
                    id: "ob_1".into(),
                },
                "pending/ob_1",
            ),
            (RowKey::God("ra".into()), "god/ra"),
            (
                RowKey::Budget {
                    scope: "workflow".into(),
                    name: "wf_1".into(),
                    metric: "usd".into(),
                },
                "budget/workflow/wf_1/usd",
            ),
            (
                RowKey::Source {
                    source: "claude-teams:/h/.claude".into(),
                    record: SourceRecord::Source,
                    id: "".into(),
                },
                "claude-teams:/h/.claude",
            ),
            (
                RowKey::Source {
                    source: "claude-teams:/h/.claude".into(),
                    record: SourceRecord::Agent,
                    id: "t/researcher".into(),
                },
                "claude-teams:/h/.claude/agent/t/researcher",
            ),
        ];
        for (key, text) in cases {
            assert_eq!(key.to_string(), text);
        }
    }

    #[test]
    fn a_slash_in_a_field_stays_in_that_field() {
        // The text of these two is the same; their identities are not.
        let a = RowKey::lock("a", "b/c");
        let b = RowKey::lock("a/b", "c");
        assert_eq!(a.to_string(), b.to_string());
        assert_ne!(a, b);
        assert!(a.is_lock("a", "b/c") && !a.is_lock("a/b", "c"));
        assert_ne!(
            RowKey::dispatch("ra", "x.json"),
            RowKey::dead_letter("ra", "x.json")
        );
    }
}
