//! The attention items as the console shows them: the items are computed once for every surface
//! (`crate::live::attention`); here, where `Enter` takes the operator (a pane and a row) and the
//! resolving action in the keys bound now.

pub(crate) use crate::live::attention::{Item, Key, Kind, Target, items};

use crate::live::snapshot::BridgeKind;

use super::keymap::{Keymap, Pane};
use super::rowkey::RowKey;

/// Where Enter takes the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Jump {
    /// The row with this identity, in the pane that lists its kind ([`RowKey::pane`]).
    Row(RowKey),
    /// The pane itself, no row in particular.
    Pane(Pane),
    /// The Board pane on this track.
    Board(String),
    /// The file issues overlay.
    Issues,
}

/// Where Enter takes the operator for `item`: the row of its record in the pane that lists it.
pub(crate) fn jump(item: &Item) -> Jump {
    match &item.target {
        Target::Dispatch { god, name } => Jump::Row(RowKey::Dispatch {
            god: god.clone(),
            name: name.clone(),
        }),
        Target::Workflow(id) => Jump::Row(RowKey::Workflow(id.clone())),
        Target::Worker { track, worker } => Jump::Row(RowKey::Worker {
            track: track.clone(),
            worker: worker.clone(),
        }),
        Target::Lock { track, path } => Jump::Row(RowKey::Lock {
            track: track.clone(),
            path: path.clone(),
        }),
        Target::Workers => Jump::Pane(Pane::Workers),
        Target::Inboxes => Jump::Pane(Pane::Inboxes),
        Target::Board(track) => Jump::Board(track.clone()),
        Target::DeadLetter { god, name } => Jump::Row(RowKey::DeadLetter {
            god: god.clone(),
            name: name.clone(),
        }),
        Target::Outbox(id) => Jump::Row(RowKey::Bridge {
            kind: BridgeKind::Pending,
            id: id.clone(),
        }),
        Target::God(name) => Jump::Row(RowKey::God(name.clone())),
        Target::Budget {
            scope,
            name,
            metric,
        } => Jump::Row(RowKey::Budget {
            scope: scope.clone(),
            name: name.clone(),
            metric: metric.clone(),
        }),
        Target::Issues => Jump::Issues,
        // A foreign item: its row among its source's records (`:pane sources`); a source that
        // cannot be read: its row on the list of sources, with the reason.
        Target::Source { source, key } => Jump::Row(RowKey::Source {
            source: source.clone(),
            record: if key.is_some() {
                crate::console::rowkey::SourceRecord::Item
            } else {
                crate::console::rowkey::SourceRecord::Source
            },
            id: key.clone().unwrap_or_else(|| "".into()),
        }),
    }
}

/// The resolving action of `item` as the operator reads it: each `{name}` replaced by the key bound
/// to that action (following remaps; `:name` when no key is bound).
pub fn action_text(item: &Item, keymap: &Keymap) -> String {
    let mut out = String::with_capacity(item.action.len());
    let mut rest = item.action;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        out.push_str(&keymap.key_named(name).unwrap_or_else(|| format!(":{name}")));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(action: &'static str) -> Item {
        let mut i = Item::new(
            Key::Unreadable("a.json".into()),
            String::new(),
            Target::Issues,
        );
        i.action = action;
        i
    }

    #[test]
    fn action_texts_name_the_keys_bound_now() {
        let km = Keymap::default();
        let cases = [
            (
                "{approve} approve · {reject_held} reject",
                "p approve · R reject",
            ),
            (
                "{abort} abort · ack it in {pane_2} Inboxes",
                "x abort · ack it in 2 Inboxes",
            ),
            (
                "{worker_locks} its locks · check the worker",
                "l its locks · check the worker",
            ),
            ("{force_unlock} force-unlock", "u force-unlock"),
            (
                "{board_resolve} resolve · {board_force_advance} force advance",
                "s resolve · F force advance",
            ),
            (
                "{requeue} requeue · {abort} abort its workflow",
                "R requeue · x abort its workflow",
            ),
            (
                "run `pantheon serve` for this root",
                "run `pantheon serve` for this root",
            ),
        ];
        for (template, text) in cases {
            assert_eq!(action_text(&item(template), &km), text);
        }
        // An unknown name is said as a command rather than dropped; a lone brace stays text.
        assert_eq!(action_text(&item("{no_such} x"), &km), ":no_such x");
        assert_eq!(action_text(&item("a { b"), &km), "a { b");
    }

    #[test]
    fn action_texts_follow_the_operators_remaps() {
        let cfg = crate::console::config::parse(
            "[keys]\napprove = \"Y\"\npane_2 = \"F2\"\n",
            "test.toml",
        )
        .unwrap();
        assert_eq!(
            action_text(
                &item("{approve} approve · {reject_held} reject"),
                &cfg.keymap
            ),
            "Y approve · R reject"
        );
        assert_eq!(
            action_text(&item("ack it in {pane_2} Inboxes"), &cfg.keymap),
            "ack it in F2 Inboxes"
        );
    }
}
