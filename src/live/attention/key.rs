//! An attention item's own identity: its kind and the typed ids of its cause. Acknowledging,
//! snoozing, the `--on-attention` hook's "once per crossing", the replay's "a new item" and the
//! Attention pane's selection compare it field by field; its [`Display`](fmt::Display) is the text
//! it reads as wherever it leaves the process (`kind/id/id…`, the ids in the item's order).

use std::cmp::Ordering;
use std::fmt;

use crate::live::snapshot::Sym;

use super::{Ids, Kind};

/// The identity of an attention item: one variant per [`Kind`], with the ids that make its cause.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// A held dispatch: its handoff and its workflow.
    Held { handoff_id: Sym, workflow_id: Sym },
    /// An overdue workflow.
    Overdue(Sym),
    /// An orphaned workflow.
    Orphaned(Sym),
    /// A worker gone silent on a track.
    StaleWorker { track: Sym, worker_id: Sym },
    /// A lock past its expiry on a track.
    ExpiredLock { track: Sym, path: Sym },
    /// A wait cycle on a track, by its text.
    Deadlock { track: Sym, cycle: Sym },
    /// A board vote past its deadline.
    VoteOverdue { track: Sym, session_id: Sym },
    /// A dead letter of a running workflow: its handoff, the god whose dead letters hold it, the
    /// workflow.
    DeadLetter {
        handoff_id: Sym,
        god: Sym,
        workflow_id: Sym,
    },
    /// A dispatch in a god's inbox whose workflow awaits approval at its step (moved out of
    /// `_quarantine` by hand): its handoff, the inbox's god, the workflow.
    HeldMoved {
        handoff_id: Sym,
        god: Sym,
        workflow_id: Sym,
    },
    /// A file the live model cannot read, by its path from the root.
    Unreadable(Sym),
    /// Ack deadlines with no supervisor alive (one such item at most).
    NoSupervisor,
    /// An outbox record the bridge cannot publish.
    StuckOutbox(Sym),
    /// A budget warning: the budget's name, scope and metric, and the limit it fired for (a raised
    /// budget warns again, as a new item).
    BudgetWarning {
        budget: Sym,
        scope: Sym,
        metric: Sym,
        limit: u64,
    },
    /// A foreign source's item waiting for a human: the source (`KIND:LOCATION`) and the item's
    /// own key, stable across the source's reads.
    Foreign { source: Sym, key: Sym },
    /// A foreign source that cannot be read, by its `KIND:LOCATION`.
    SourceDown(Sym),
}

/// One id of a key, as it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Field<'a> {
    Text(&'a Sym),
    Word(&'static str),
    Number(u64),
}

/// An id with its name.
type Named<'a> = (&'static str, Field<'a>);

/// A field's text without allocating: a number's digits are laid out on the stack.
struct Piece<'a> {
    text: &'a [u8],
    digits: [u8; 20],
    number: bool,
    len: usize,
}

impl<'a> Piece<'a> {
    fn of(f: Field<'a>) -> Self {
        let mut p = Piece {
            text: &[],
            digits: [0; 20],
            number: false,
            len: 0,
        };
        match f {
            Field::Text(s) => p.text = s.as_bytes(),
            Field::Word(w) => p.text = w.as_bytes(),
            Field::Number(mut n) => {
                p.number = true;
                loop {
                    p.len += 1;
                    p.digits[20 - p.len] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
            }
        }
        p
    }

    fn bytes(&self) -> &[u8] {
        if self.number {
            &self.digits[20 - self.len..]
        } else {
            self.text
        }
    }
}

impl Key {
    /// The kind of item this key identifies.
    pub fn kind(&self) -> Kind {
        match self {
            Key::Held { .. } => Kind::Held,
            Key::Overdue(_) => Kind::Overdue,
            Key::Orphaned(_) => Kind::Orphaned,
            Key::StaleWorker { .. } => Kind::StaleWorker,
            Key::ExpiredLock { .. } => Kind::ExpiredLock,
            Key::Deadlock { .. } => Kind::Deadlock,
            Key::VoteOverdue { .. } => Kind::VoteOverdue,
            Key::DeadLetter { .. } => Kind::DeadLetter,
            Key::HeldMoved { .. } => Kind::HeldMoved,
            Key::Unreadable(_) => Kind::Unreadable,
            Key::NoSupervisor => Kind::NoSupervisor,
            Key::StuckOutbox(_) => Kind::StuckOutbox,
            Key::BudgetWarning { .. } => Kind::BudgetWarning,
            Key::Foreign { .. } => Kind::Foreign,
            Key::SourceDown(_) => Kind::SourceDown,
        }
    }

    /// The ids, named as the hook's JSON names them, in the item's order.
    fn fields(&self) -> impl Iterator<Item = Named<'_>> {
        use Field::Text as T;
        fn two<'a>(a: Named<'a>, b: Named<'a>) -> [Option<Named<'a>>; 4] {
            [Some(a), Some(b), None, None]
        }
        fn one(a: Named<'_>) -> [Option<Named<'_>>; 4] {
            [Some(a), None, None, None]
        }
        let fields: [Option<Named<'_>>; 4] = match self {
            Key::Held {
                handoff_id,
                workflow_id,
            } => two(
                ("handoff_id", T(handoff_id)),
                ("workflow_id", T(workflow_id)),
            ),
            Key::Overdue(w) | Key::Orphaned(w) => one(("workflow_id", T(w))),
            Key::StaleWorker { track, worker_id } => {
                two(("track", T(track)), ("worker_id", T(worker_id)))
            }
            Key::ExpiredLock { track, path } => two(("track", T(track)), ("path", T(path))),
            Key::Deadlock { track, cycle } => two(("track", T(track)), ("cycle", T(cycle))),
            Key::VoteOverdue { track, session_id } => {
                two(("track", T(track)), ("session_id", T(session_id)))
            }
            Key::DeadLetter {
                handoff_id,
                god,
                workflow_id,
            }
            | Key::HeldMoved {
                handoff_id,
                god,
                workflow_id,
            } => [
                Some(("handoff_id", T(handoff_id))),
                Some(("god", T(god))),
                Some(("workflow_id", T(workflow_id))),
                None,
            ],
            Key::Unreadable(path) => one(("path", T(path))),
            Key::NoSupervisor => one(("supervisor", Field::Word("none"))),
            Key::StuckOutbox(id) => one(("outbox_id", T(id))),
            Key::BudgetWarning {
                budget,
                scope,
                metric,
                limit,
            } => [
                Some(("budget", T(budget))),
                Some(("scope", T(scope))),
                Some(("metric", T(metric))),
                Some(("limit", Field::Number(*limit))),
            ],
            Key::Foreign { source, key } => two(("source", T(source)), ("key", T(key))),
            Key::SourceDown(source) => one(("source", T(source))),
        };
        fields.into_iter().flatten()
    }

    /// The ids of the records the item concerns, in its order; sharing the key's own copies.
    pub(super) fn ids(&self) -> Ids {
        self.fields()
            .map(|(name, f)| {
                let v = match f {
                    Field::Text(s) => s.clone(),
                    Field::Word(w) => Sym::from(w),
                    Field::Number(n) => Sym::from(n.to_string()),
                };
                (name, v)
            })
            .collect()
    }

    /// The pieces of the text, the kind's word first (joined by `/` they are the text).
    fn pieces(&self) -> [Option<Piece<'_>>; 5] {
        let mut out = [None, None, None, None, None];
        out[0] = Some(Piece::of(Field::Word(self.kind().as_str())));
        for (slot, (_, f)) in out[1..].iter_mut().zip(self.fields()) {
            *slot = Some(Piece::of(f));
        }
        out
    }

    /// Compares the texts the keys read as, byte by byte, without writing them out.
    fn cmp_text(&self, other: &Self) -> Ordering {
        let (a, b) = (self.pieces(), other.pieces());
        text_bytes(&a).cmp(text_bytes(&b))
    }
}

/// The bytes of the text `pieces` make, `/` between them.
fn text_bytes<'a>(pieces: &'a [Option<Piece<'_>>]) -> impl Iterator<Item = u8> + 'a {
    pieces.iter().flatten().enumerate().flat_map(|(i, p)| {
        let sep: &[u8] = if i == 0 { b"" } else { b"/" };
        sep.iter().chain(p.bytes()).copied()
    })
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind().as_str())?;
        for (_, field) in self.fields() {
            match field {
                Field::Text(s) => write!(f, "/{s}")?,
                Field::Word(w) => write!(f, "/{w}")?,
                Field::Number(n) => write!(f, "/{n}")?,
            }
        }
        Ok(())
    }
}

/// Keys sort as their texts do (the order the Attention pane lists items of the same age in);
/// two keys of the same text (a `/` inside one of their ids) by their ids.
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_text(other).then_with(|| {
            let theirs = other.fields().map(|(_, f)| f);
            self.fields().map(|(_, f)| f).cmp(theirs)
        })
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A key equals the text it reads as (what a script or a test compares it with).
impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        text_bytes(&self.pieces()).eq(other.bytes())
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Sym {
        Sym::from(t)
    }

    #[test]
    fn a_key_reads_as_its_kind_and_ids_and_equals_that_text() {
        let cases = [
            (
                Key::Held {
                    handoff_id: s("h1"),
                    workflow_id: s("wf_1"),
                },
                "held/h1/wf_1",
            ),
            (Key::Overdue(s("wf_1")), "overdue/wf_1"),
            (
                Key::DeadLetter {
                    handoff_id: s("h1"),
                    god: s("zeus"),
                    workflow_id: s("wf_1"),
                },
                "dead_letter/h1/zeus/wf_1",
            ),
            (Key::NoSupervisor, "no_supervisor/none"),
            (
                Key::Unreadable(s("conductor/state/x.json")),
                "unreadable_file/conductor/state/x.json",
            ),
            (
                Key::BudgetWarning {
                    budget: s("wf_deploy_42"),
                    scope: s("workflow"),
                    metric: s("cost_usd"),
                    limit: 2_500_000,
                },
                "budget_warning/wf_deploy_42/workflow/cost_usd/2500000",
            ),
            (
                Key::BudgetWarning {
                    budget: s("b"),
                    scope: s("day"),
                    metric: s("tokens"),
                    limit: 0,
                },
                "budget_warning/b/day/tokens/0",
            ),
        ];
        for (key, text) in cases {
            assert_eq!(key.to_string(), text);
            assert_eq!(key, text);
            assert_ne!(key, &text[..text.len() - 1]);
            assert_ne!(key, &*format!("{text}x"));
            let ids = key.ids();
            let ids: Vec<&str> = ids.values().collect();
            assert_eq!(ids.join("/"), text.split_once('/').unwrap().1);
        }
    }

    #[test]
    fn keys_sort_as_their_texts_and_a_slash_in_an_id_stays_in_that_id() {
        let lock = |t: &str, p: &str| Key::ExpiredLock {
            track: s(t),
            path: s(p),
        };
        let mut keys = vec![
            lock("a", "b"),
            lock("a-", "b"),
            lock("a", "b/c"),
            lock("a/b", "c"),
            Key::Overdue(s("wf_2")),
            Key::Overdue(s("wf_10")),
            Key::BudgetWarning {
                budget: s("x"),
                scope: s("god"),
                metric: s("cost_usd"),
                limit: 999,
            },
            Key::BudgetWarning {
                budget: s("x"),
                scope: s("god"),
                metric: s("cost_usd"),
                limit: 1_000_000,
            },
            Key::NoSupervisor,
            Key::DeadLetter {
                handoff_id: s("h"),
                god: s("g"),
                workflow_id: s("w"),
            },
            Key::Deadlock {
                track: s("t"),
                cycle: s("c"),
            },
        ];
        let mut texts: Vec<String> = keys.iter().map(Key::to_string).collect();
        keys.sort();
        texts.sort();
        let sorted: Vec<String> = keys.iter().map(Key::to_string).collect();
        assert_eq!(sorted, texts);
        // The same text, two causes: not equal, and ordered (not `Equal`) both ways.
        let (a, b) = (lock("a", "b/c"), lock("a/b", "c"));
        assert_eq!(a.to_string(), b.to_string());
        assert_ne!(a, b);
        assert_ne!(a.cmp(&b), Ordering::Equal);
        assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
    }
}
