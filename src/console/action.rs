//! The spine of the console: every key, `:` command and internal event becomes an [`Action`].
//! The keymap binds keys to actions; the footer hints and the `?` help are generated from it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::{Deserialize, Serialize};

/// The six panes, numbered as operators see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pane {
    Workflows,
    Inboxes,
    Bus,
    Locks,
    Workers,
    Board,
}

impl Pane {
    /// All panes in number order.
    pub const ALL: [Pane; 6] = [
        Pane::Workflows,
        Pane::Inboxes,
        Pane::Bus,
        Pane::Locks,
        Pane::Workers,
        Pane::Board,
    ];

    /// 1-based number shown in the tab bar.
    pub fn number(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0) + 1
    }

    pub fn title(self) -> &'static str {
        match self {
            Pane::Workflows => "Workflows",
            Pane::Inboxes => "Inboxes",
            Pane::Bus => "Bus",
            Pane::Locks => "Locks",
            Pane::Workers => "Workers",
            Pane::Board => "Board",
        }
    }

    /// Parses a pane by number or (prefix of) name, for `:pane`.
    pub fn parse(s: &str) -> Option<Pane> {
        let s = s.trim().to_ascii_lowercase();
        if let Ok(n) = s.parse::<usize>() {
            return Pane::ALL.get(n.checked_sub(1)?).copied();
        }
        if s.is_empty() {
            return None;
        }
        Pane::ALL
            .into_iter()
            .find(|p| p.title().to_ascii_lowercase().starts_with(&s))
    }

    pub fn next(self) -> Pane {
        Pane::ALL[self.number() % Pane::ALL.len()]
    }

    pub fn prev(self) -> Pane {
        Pane::ALL[(self.number() + Pane::ALL.len() - 2) % Pane::ALL.len()]
    }
}

/// An acknowledgement status an operator can give a dispatch (docs/PROTOCOL.md §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckChoice {
    Accepted,
    Pending,
    Rejected,
    Completed,
}

impl AckChoice {
    pub const ALL: [AckChoice; 4] = [
        AckChoice::Accepted,
        AckChoice::Pending,
        AckChoice::Rejected,
        AckChoice::Completed,
    ];

    /// The protocol word.
    pub fn as_str(self) -> &'static str {
        match self {
            AckChoice::Accepted => "accepted",
            AckChoice::Pending => "pending",
            AckChoice::Rejected => "rejected",
            AckChoice::Completed => "completed",
        }
    }

    pub fn parse(s: &str) -> Option<AckChoice> {
        AckChoice::ALL.into_iter().find(|c| c.as_str() == s.trim())
    }

    /// What the operator is asked to type, and whether it is required.
    pub fn message_prompt(self) -> Option<(&'static str, bool)> {
        match self {
            AckChoice::Accepted => None,
            AckChoice::Pending => Some(("Message (optional, e.g. why it waits)", false)),
            AckChoice::Rejected => Some(("Reason for rejecting (required)", true)),
            AckChoice::Completed => Some(("Summary of the finished step (required)", true)),
        }
    }
}

/// Everything the console can do. Keys, `:` commands and internal events all map onto this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "arg")]
pub enum Action {
    Quit,
    Help,
    NextPane,
    PrevPane,
    GoPane(Pane),
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    Back,
    /// The next record (in a detail: its detail, scrolled to the top).
    NextRecord,
    /// The previous record.
    PrevRecord,
    Filter,
    Command,
    Refresh,
    ToggleTimes,
    ToggleRaw,
    ToggleFollow,
    NextTrack,
    PrevTrack,
    /// Open the ack chooser for the selected dispatch (or ack it directly with a status).
    Ack(Option<AckChoice>),
    Approve,
    RejectHeld,
    Abort,
    Cleanup,
    ForceUnlock,
    BoardAdvance,
    BoardNextRound,
    BoardResolve,
    /// Focus the other button of a dialog.
    ToggleFocus,
}

impl Action {
    /// A short description used by the footer and the help overlay.
    pub fn describe(&self) -> &'static str {
        match self {
            Action::Quit => "quit",
            Action::Help => "help",
            Action::NextPane => "next pane",
            Action::PrevPane => "previous pane",
            Action::GoPane(_) => "go to pane",
            Action::Up => "up",
            Action::Down => "down",
            Action::PageUp => "page up",
            Action::PageDown => "page down",
            Action::Top => "top",
            Action::Bottom => "bottom / follow",
            Action::Open => "details",
            Action::Back => "back",
            Action::NextRecord => "next record",
            Action::PrevRecord => "previous record",
            Action::Filter => "filter",
            Action::Command => "command",
            Action::Refresh => "rescan",
            Action::ToggleTimes => "absolute times",
            Action::ToggleRaw => "raw JSON",
            Action::ToggleFollow => "follow/pause",
            Action::NextTrack => "next track",
            Action::PrevTrack => "previous track",
            Action::Ack(_) => "ack",
            Action::Approve => "approve held",
            Action::RejectHeld => "reject held",
            Action::Abort => "abort",
            Action::Cleanup => "cleanup",
            Action::ForceUnlock => "force-unlock",
            Action::BoardAdvance => "advance phase",
            Action::BoardNextRound => "next round",
            Action::BoardResolve => "resolve",
            Action::ToggleFocus => "switch button",
        }
    }

    /// True for actions that change files (disabled by `--read-only`).
    pub fn is_mutation(&self) -> bool {
        matches!(
            self,
            Action::Ack(_)
                | Action::Approve
                | Action::RejectHeld
                | Action::Abort
                | Action::Cleanup
                | Action::ForceUnlock
                | Action::BoardAdvance
                | Action::BoardNextRound
                | Action::BoardResolve
        )
    }
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Pane(Pane),
}

/// A key as the keymap spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl Key {
    pub const fn plain(code: KeyCode) -> Self {
        Self { code, ctrl: false }
    }

    pub const fn ch(c: char) -> Self {
        Self::plain(KeyCode::Char(c))
    }

    /// The key of a terminal event (Shift is folded into the character; BackTab stays BackTab).
    pub fn from_event(ev: &KeyEvent) -> Self {
        Self {
            code: ev.code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
        }
    }

    /// How the key is written in hints and help (`j`, `Enter`, `C-c`, `S-Tab`).
    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "Space".to_owned(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            other => format!("{other:?}"),
        };
        if self.ctrl { format!("C-{base}") } else { base }
    }
}

/// One binding: a key, where it applies, what it does, and whether the footer shows it.
#[derive(Debug, Clone)]
pub struct Binding {
    pub keys: Vec<Key>,
    pub scope: Scope,
    pub action: Action,
    pub hint: bool,
}

/// The console's keys. The footer and the help overlay are generated from this table only.
#[derive(Debug, Clone)]
pub struct Keymap {
    pub bindings: Vec<Binding>,
}

impl Default for Keymap {
    fn default() -> Self {
        use KeyCode::*;
        let g = Scope::Global;
        let mut b = Vec::new();
        let mut bind = |keys: Vec<Key>, scope: Scope, action: Action, hint: bool| {
            b.push(Binding {
                keys,
                scope,
                action,
                hint,
            })
        };
        bind(vec![Key::ch('q')], g, Action::Quit, true);
        bind(vec![Key::ch('?')], g, Action::Help, true);
        bind(vec![Key::plain(Tab)], g, Action::NextPane, true);
        bind(vec![Key::plain(BackTab)], g, Action::PrevPane, false);
        for p in Pane::ALL {
            let c = char::from_digit(p.number() as u32, 10).expect("six panes");
            bind(vec![Key::ch(c)], g, Action::GoPane(p), false);
        }
        bind(vec![Key::ch('j'), Key::plain(Down)], g, Action::Down, false);
        bind(vec![Key::ch('k'), Key::plain(Up)], g, Action::Up, false);
        bind(vec![Key::plain(PageDown)], g, Action::PageDown, false);
        bind(vec![Key::plain(PageUp)], g, Action::PageUp, false);
        bind(vec![Key::ch('g'), Key::plain(Home)], g, Action::Top, false);
        bind(
            vec![Key::ch('G'), Key::plain(End)],
            g,
            Action::Bottom,
            false,
        );
        bind(vec![Key::plain(Enter)], g, Action::Open, true);
        bind(vec![Key::plain(Esc)], g, Action::Back, false);
        bind(vec![Key::ch('J')], g, Action::NextRecord, false);
        bind(vec![Key::ch('K')], g, Action::PrevRecord, false);
        bind(vec![Key::ch('/')], g, Action::Filter, true);
        bind(vec![Key::ch(':')], g, Action::Command, true);
        bind(vec![Key::ch('r')], g, Action::Refresh, false);
        bind(vec![Key::ch('t')], g, Action::ToggleTimes, false);
        let wf = Scope::Pane(Pane::Workflows);
        bind(vec![Key::ch('y')], wf, Action::ToggleRaw, false);
        bind(vec![Key::ch('x')], wf, Action::Abort, true);
        bind(vec![Key::ch('c')], wf, Action::Cleanup, true);
        let inbox = Scope::Pane(Pane::Inboxes);
        bind(vec![Key::ch('a')], inbox, Action::Ack(None), true);
        bind(vec![Key::ch('p')], inbox, Action::Approve, true);
        bind(vec![Key::ch('R')], inbox, Action::RejectHeld, true);
        bind(vec![Key::ch('y')], inbox, Action::ToggleRaw, false);
        let bus = Scope::Pane(Pane::Bus);
        bind(vec![Key::ch('f')], bus, Action::ToggleFollow, true);
        bind(vec![Key::ch(']')], bus, Action::NextTrack, true);
        bind(vec![Key::ch('[')], bus, Action::PrevTrack, false);
        let locks = Scope::Pane(Pane::Locks);
        bind(vec![Key::ch('u')], locks, Action::ForceUnlock, true);
        let board = Scope::Pane(Pane::Board);
        bind(vec![Key::ch(']')], board, Action::NextTrack, true);
        bind(vec![Key::ch('[')], board, Action::PrevTrack, false);
        bind(vec![Key::ch('>')], board, Action::BoardAdvance, true);
        bind(vec![Key::ch('n')], board, Action::BoardNextRound, true);
        bind(vec![Key::ch('s')], board, Action::BoardResolve, true);
        Keymap { bindings: b }
    }
}

impl Keymap {
    /// The action for `key` in `pane`: a pane binding wins over a global one.
    pub fn lookup(&self, pane: Pane, key: Key) -> Option<&Action> {
        let find = |scope: Scope| {
            self.bindings
                .iter()
                .find(|b| b.scope == scope && b.keys.contains(&key))
                .map(|b| &b.action)
        };
        find(Scope::Pane(pane)).or_else(|| find(Scope::Global))
    }

    /// The footer hints for `pane`: pane actions first, then the global ones. Mutations are left out
    /// when `read_only`.
    pub fn hints(&self, pane: Pane, read_only: bool) -> Vec<(String, &'static str)> {
        let mut out: Vec<(String, &'static str)> = Vec::new();
        for scope in [Scope::Pane(pane), Scope::Global] {
            for b in self.bindings.iter().filter(|b| b.scope == scope && b.hint) {
                if read_only && b.action.is_mutation() {
                    continue;
                }
                out.push((b.keys[0].label(), b.action.describe()));
            }
        }
        out
    }

    /// Every binding as (scope title, keys, description), for the help overlay.
    pub fn help_rows(&self) -> Vec<(String, String, &'static str)> {
        let mut rows = Vec::new();
        let mut scopes = vec![Scope::Global];
        scopes.extend(Pane::ALL.iter().map(|p| Scope::Pane(*p)));
        for scope in scopes {
            let title = match scope {
                Scope::Global => "Everywhere".to_owned(),
                Scope::Pane(p) => format!("{} {}", p.number(), p.title()),
            };
            let mut seen_go = false;
            for b in self.bindings.iter().filter(|b| b.scope == scope) {
                if let Action::GoPane(_) = b.action {
                    if !seen_go {
                        seen_go = true;
                        rows.push((title.clone(), "1-6".to_owned(), "go to pane"));
                    }
                    continue;
                }
                let keys = b.keys.iter().map(Key::label).collect::<Vec<_>>().join(" ");
                rows.push((title.clone(), keys, b.action.describe()));
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_bindings_win_over_global_ones() {
        let km = Keymap::default();
        assert_eq!(
            km.lookup(Pane::Workflows, Key::ch('y')),
            Some(&Action::ToggleRaw)
        );
        assert_eq!(km.lookup(Pane::Bus, Key::ch('q')), Some(&Action::Quit));
        assert_eq!(km.lookup(Pane::Bus, Key::ch('x')), None);
        assert_eq!(
            km.lookup(Pane::Locks, Key::ch('3')),
            Some(&Action::GoPane(Pane::Bus))
        );
    }

    #[test]
    fn read_only_hints_leave_out_every_mutation() {
        let km = Keymap::default();
        for pane in Pane::ALL {
            let hints = km.hints(pane, true);
            assert!(hints.iter().any(|(_, d)| *d == "quit"));
            for (_, d) in hints {
                assert!(
                    !["ack", "abort", "cleanup", "force-unlock", "resolve"].contains(&d),
                    "{pane:?}: {d}"
                );
            }
        }
        assert!(
            km.hints(Pane::Inboxes, false)
                .iter()
                .any(|(k, d)| k == "a" && *d == "ack")
        );
    }

    #[test]
    fn help_lists_every_binding_once_per_scope() {
        let km = Keymap::default();
        let rows = km.help_rows();
        assert!(
            rows.iter()
                .any(|(s, k, d)| s == "3 Bus" && k == "f" && *d == "follow/pause")
        );
        assert!(rows.iter().any(|(s, k, _)| s == "Everywhere" && k == "1-6"));
        assert_eq!(rows.iter().filter(|(_, k, _)| k == "1-6").count(), 1);
    }

    #[test]
    fn panes_parse_by_number_and_name() {
        assert_eq!(Pane::parse("3"), Some(Pane::Bus));
        assert_eq!(Pane::parse("worke"), Some(Pane::Workers));
        assert_eq!(Pane::parse("7"), None);
        assert_eq!(Pane::Board.next(), Pane::Workflows);
        assert_eq!(Pane::Workflows.prev(), Pane::Board);
    }
}
