//! The `:` commands: one table that the command line, its Tab completion and the help overlay read.

use super::keymap::{Action, OperatorAction};

/// What a command's argument is, for completion and for the help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    None,
    /// A pane number or name.
    Pane,
    /// A track name.
    Track,
    /// An ack status word.
    AckStatus,
    /// Free text matched against what the rows show (completes gods, workflow ids, tracks).
    Filter,
    /// A column of the current pane's table.
    Column,
    /// A moment: RFC 3339, or back from now (`-15m`).
    Moment,
}

/// One `:` command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// How the argument is written in the help (`N|name`), empty when there is none.
    pub usage: &'static str,
    pub arg: Arg,
    pub help: &'static str,
}

const fn cmd(
    name: &'static str,
    aliases: &'static [&'static str],
    usage: &'static str,
    arg: Arg,
    help: &'static str,
) -> Command {
    Command {
        name,
        aliases,
        usage,
        arg,
        help,
    }
}

/// Every `:` command, in the order the help lists them.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "pane",
        &["p"],
        "N|name",
        Arg::Pane,
        "go to a pane (`:3`, `:locks` work too; `:pane bridge` for the NATS bridge)",
    ),
    cmd(
        "track",
        &["t"],
        "NAME",
        Arg::Track,
        "show a track on the Bus and Board panes",
    ),
    cmd(
        "filter",
        &["f"],
        "TEXT",
        Arg::Filter,
        "filter the pane (empty clears)",
    ),
    cmd(
        "ack",
        &[],
        "[STATUS]",
        Arg::AckStatus,
        "ack the selected dispatch (accepted, pending, rejected, completed)",
    ),
    cmd(
        "approve",
        &[],
        "",
        Arg::None,
        "approve the selected held dispatch",
    ),
    cmd(
        "reject",
        &[],
        "",
        Arg::None,
        "reject the selected held dispatch",
    ),
    cmd("abort", &[], "", Arg::None, "abort the selected workflow"),
    cmd(
        "pause",
        &[],
        "",
        Arg::None,
        "pause the selected workflow, god or track (with a reason)",
    ),
    cmd(
        "resume",
        &[],
        "",
        Arg::None,
        "resume the selected workflow, god or track",
    ),
    cmd(
        "cleanup",
        &[],
        "",
        Arg::None,
        "clean up the selected finished workflow",
    ),
    cmd(
        "unlock",
        &[],
        "",
        Arg::None,
        "force-unlock the selected lock",
    ),
    cmd(
        "advance",
        &[],
        "",
        Arg::None,
        "advance the board to its next phase",
    ),
    cmd(
        "force-advance",
        &[],
        "",
        Arg::None,
        "advance the board although its phase is not complete",
    ),
    cmd(
        "next-round",
        &["round"],
        "",
        Arg::None,
        "start the next discussion round",
    ),
    cmd("resolve", &[], "", Arg::None, "resolve the board session"),
    cmd("follow", &[], "", Arg::None, "follow / pause the bus tail"),
    cmd(
        "time",
        &["times"],
        "",
        Arg::None,
        "relative ages / local HH:MM:SS times",
    ),
    cmd("raw", &[], "", Arg::None, "raw JSON of the selected record"),
    cmd(
        "rescan",
        &["refresh"],
        "",
        Arg::None,
        "re-read every file now",
    ),
    cmd("help", &["h"], "", Arg::None, "this help"),
    cmd(
        "issues",
        &[],
        "",
        Arg::None,
        "the files the engine cannot read: path, since when, problem",
    ),
    cmd("quit", &["q"], "", Arg::None, "quit"),
    cmd(
        "sort",
        &[],
        "COLUMN",
        Arg::Column,
        "order the rows by a column (again: reversed; empty: the pane's own order)",
    ),
    cmd(
        "finished",
        &[],
        "",
        Arg::None,
        "hide / show finished workflows",
    ),
    cmd(
        "yank",
        &["copy"],
        "",
        Arg::None,
        "copy the selected id or path (every marked one's) to the clipboard (OSC 52)",
    ),
    cmd(
        "mark-all",
        &["marks"],
        "",
        Arg::None,
        "mark every listed row (again: unmark them); Esc clears the marks",
    ),
    cmd(
        "mouse",
        &[],
        "",
        Arg::None,
        "mouse capture on / off (off: the terminal selects text; on: Shift-drag selects)",
    ),
    cmd(
        "messages",
        &["msgs"],
        "",
        Arg::None,
        "the flash and notification history, newest first",
    ),
    cmd(
        "snooze",
        &[],
        "",
        Arg::None,
        "snooze the selected attention item (asks for how long)",
    ),
    cmd(
        "next-attention",
        &["attention"],
        "",
        Arg::None,
        "jump to the record of the next attention item",
    ),
    cmd(
        "requeue",
        &[],
        "",
        Arg::None,
        "put the selected dead letter (9) back into an inbox: its last god's, or one typed (Tab completes)",
    ),
    cmd(
        "discard",
        &[],
        "",
        Arg::None,
        "retire the selected dead letter (9) by hand: asks the reason, confirms (journaled)",
    ),
    cmd(
        "rerun",
        &[],
        "",
        Arg::None,
        "dispatch the selected failed, stalled or completed workflow (1) again from a step; \
         an edited context is the CLI's (`pantheon rerun WF --from STEP --context FILE`)",
    ),
    cmd(
        "bridge",
        &[],
        "",
        Arg::None,
        "the NATS bridge: status, track cursors, outbox, dead letters (as :pane bridge)",
    ),
    cmd(
        "replay",
        &[],
        "[TS]",
        Arg::Moment,
        "show every pane as it was at TS (RFC 3339, -15m; none: the last recorded moment), \
         read-only, from the root's history; in replay, go to TS",
    ),
    cmd(
        "live",
        &[],
        "",
        Arg::None,
        "leave the replay: back to the live root",
    ),
];

/// The action a command without an argument stands for (the ones with arguments are parsed by
/// the app: `:pane`, `:track`, `:filter`, `:ack`).
pub(crate) fn action_of(c: &Command) -> Option<Action> {
    Some(match c.name {
        "quit" => Action::Quit,
        "help" => Action::Help,
        "issues" => Action::Issues,
        "rescan" => Action::Refresh,
        "follow" => Action::ToggleFollow,
        "time" => Action::ToggleTimes,
        "raw" => Action::ToggleRaw,
        "abort" => Action::Operator(OperatorAction::Abort),
        "pause" => Action::Operator(OperatorAction::Pause),
        "resume" => Action::Operator(OperatorAction::Resume),
        "cleanup" => Action::Operator(OperatorAction::Cleanup),
        "unlock" => Action::Operator(OperatorAction::ForceUnlock),
        "approve" => Action::Operator(OperatorAction::Approve),
        "reject" => Action::Operator(OperatorAction::RejectHeld),
        "advance" => Action::Operator(OperatorAction::BoardAdvance),
        "force-advance" => Action::Operator(OperatorAction::BoardForceAdvance),
        "next-round" => Action::Operator(OperatorAction::BoardNextRound),
        "resolve" => Action::Operator(OperatorAction::BoardResolve),
        "ack" => Action::Operator(OperatorAction::Ack(None)),
        "finished" => Action::ToggleFinished,
        "yank" => Action::Yank,
        "mark-all" => Action::MarkAll,
        "mouse" => Action::ToggleMouse,
        "messages" => Action::Messages,
        "snooze" => Action::Snooze,
        "next-attention" => Action::NextAttention,
        "requeue" => Action::Operator(OperatorAction::Requeue),
        "discard" => Action::Operator(OperatorAction::DiscardDead),
        "rerun" => Action::Operator(OperatorAction::Rerun),
        "live" => Action::ReplayLive,
        "bridge" => Action::GoPane(crate::console::keymap::Pane::Bridge),
        _ => return None,
    })
}

/// The command named `word` (by name or alias).
pub(crate) fn lookup(word: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.name == word || c.aliases.contains(&word))
}

/// The command (or pane name) nearest to a mistyped `word`, as k9s and git suggest: a name it
/// starts, else the closest by edit distance (at most 2 edits, and fewer than half its letters).
pub(crate) fn suggest(word: &str) -> Option<String> {
    let word = word.to_ascii_lowercase();
    let names: Vec<String> = COMMANDS
        .iter()
        .map(|c| c.name.to_owned())
        .chain(
            super::keymap::Pane::ALL
                .iter()
                .map(|p| p.title().to_ascii_lowercase().replace(' ', "-")),
        )
        .collect();
    if word.len() >= 2
        && let Some(n) = names.iter().find(|n| n.starts_with(&word))
    {
        return Some(n.clone());
    }
    crate::text::nearest(&word, names.iter().map(String::as_str)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_command_gets_the_nearest_one() {
        assert_eq!(suggest("requeu").as_deref(), Some("requeue"));
        assert_eq!(suggest("abrot").as_deref(), Some("abort"));
        assert_eq!(suggest("lcoks").as_deref(), Some("locks"));
        assert_eq!(suggest("zzzzzz"), None);
    }

    #[test]
    fn names_and_aliases_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in COMMANDS {
            for w in std::iter::once(&c.name).chain(c.aliases) {
                assert!(seen.insert(*w), "{w} twice");
            }
        }
        assert_eq!(lookup("q").map(|c| c.name), Some("quit"));
        assert!(lookup("frobnicate").is_none());
    }
}
