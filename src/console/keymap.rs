//! The spine of the console: every key, `:` command and internal event becomes an [`Action`].
//! The keymap binds keys to actions; the footer hints and the `?` help are generated from it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::{Deserialize, Serialize};

pub(crate) use super::panes::Pane;

/// An acknowledgement status an operator can give a dispatch (docs/PROTOCOL.md §2.5): the engine's
/// closed [`AckDecision`](crate::engine::AckDecision), so the console builds typed acks.
pub(crate) use crate::engine::AckDecision as AckChoice;

/// What the operator is asked to type for an ack, and whether it is required.
pub(crate) fn ack_message_prompt(choice: AckChoice) -> Option<(&'static str, bool)> {
    match choice {
        AckChoice::Accepted => None,
        AckChoice::Pending => Some(("Message (optional, e.g. why it waits)", false)),
        AckChoice::Rejected => Some(("Reason for rejecting (required)", true)),
        AckChoice::Completed => Some(("Summary of the finished step (required)", true)),
    }
}

/// Everything the console can do. Keys, `:` commands and internal events all map onto this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "arg")]
pub enum Action {
    Quit,
    Help,
    /// Show every file issue (path, problem, since when).
    Issues,
    NextPane,
    PrevPane,
    GoPane(Pane),
    Up,
    Down,
    PageUp,
    PageDown,
    /// Half a page down / up (`C-d` / `C-u`, as in less, vim, k9s and lazygit).
    HalfPageDown,
    HalfPageUp,
    Top,
    Bottom,
    Open,
    Back,
    /// The next record (in a detail: its detail, scrolled to the top).
    NextRecord,
    /// The previous record.
    PrevRecord,
    Filter,
    /// The next row matching the filter (wrapping around).
    NextMatch,
    /// The previous row matching the filter.
    PrevMatch,
    Command,
    Refresh,
    ToggleTimes,
    ToggleRaw,
    ToggleFollow,
    NextTrack,
    PrevTrack,
    /// Jump to the next attention item's record, from anywhere.
    NextAttention,
    /// Snooze the selected attention item (asks for how long).
    Snooze,
    /// The notification history (`:messages`).
    Messages,
    /// From a worker: the locks it holds (pane 4).
    WorkerLocks,
    /// From a worker: its track's bus messages from it (pane 3).
    WorkerMessages,
    /// From pane 5 during a deadlock: select a lock of the cycle in pane 4, to release it.
    CycleLock,
    /// From a dispatch: its workflow (pane 1).
    GoWorkflow,
    /// From a workflow: its waiting dispatch (pane 2).
    GoDispatch,
    /// Focus the other button of a dialog.
    ToggleFocus,
    /// Press the focused button, take the chosen item, or send the typed answer.
    Submit,
    /// Leave a dialog without acting.
    Cancel,
    /// Order the pane's rows by a column (again: the other way round); `None`: the pane's own order
    /// again (`:sort` with no column).
    Sort(Option<super::items::Column>),
    /// Hide / show finished workflows.
    ToggleFinished,
    /// Narrow the dispatch list to the next god's inbox (after the last: every inbox again).
    NextGod,
    /// The same, backwards.
    PrevGod,
    /// `:pane sources`: open the next source's records (after the last: the list of sources).
    NextSource,
    /// The same, backwards.
    PrevSource,
    /// Copy the selected record's id or path (every marked one's, if any) to the clipboard (OSC 52).
    Yank,
    /// Mark or unmark the selected row (bulk actions apply to every mark).
    ToggleMark,
    /// Mark every row from the last mark to the selected one.
    MarkRange,
    /// Mark every row the filter lists (again: unmark them).
    MarkAll,
    /// Turn mouse capture off (the terminal selects text) or on.
    ToggleMouse,
    /// Replay: one act back (the supervisors' heartbeats skipped, unless `ReplayHeartbeats`).
    ReplayBack,
    /// Replay: one act forward (likewise).
    ReplayForward,
    /// Replay: the previous journal entry.
    ReplayPrevJournal,
    /// Replay: the next journal entry.
    ReplayNextJournal,
    /// Replay: the previous moment an attention item appeared.
    ReplayPrevAttention,
    /// Replay: the next moment an attention item appears.
    ReplayNextAttention,
    /// Replay: play or pause.
    ReplayPlay,
    /// Replay: play faster (up to 50x).
    ReplayFaster,
    /// Replay: play slower (down to 1x).
    ReplaySlower,
    /// Replay: step through the supervisors' heartbeats too, or skip them (the default).
    ReplayHeartbeats,
    /// Leave the replay: back to the live root.
    ReplayLive,
    /// An operator action: it changes files (refused by `--read-only`), started by its module
    /// (`console/actions/`).
    Operator(OperatorAction),
}

impl Action {
    /// A short description used by the footer and the help overlay.
    pub fn describe(&self) -> &'static str {
        match self {
            Action::Quit => "quit",
            Action::Operator(o) => o.describe(),
            Action::Help => "help",
            Action::Issues => "file issues",
            Action::NextPane => "next pane",
            Action::PrevPane => "previous pane",
            Action::GoPane(_) => "go to pane",
            Action::Up => "up",
            Action::Down => "down",
            Action::PageUp => "page up",
            Action::PageDown => "page down",
            Action::HalfPageDown => "half page down",
            Action::HalfPageUp => "half page up",
            Action::Top => "top",
            Action::Bottom => "bottom / follow",
            Action::Open => "details",
            Action::Back => "back",
            Action::NextRecord => "next record",
            Action::PrevRecord => "previous record",
            Action::Filter => "filter",
            Action::NextMatch => "next match",
            Action::PrevMatch => "previous match",
            Action::Command => "command",
            Action::Refresh => "rescan",
            Action::ToggleTimes => "ages / local HH:MM:SS",
            Action::ToggleRaw => "raw JSON",
            Action::ToggleFollow => "follow/pause",
            Action::NextTrack => "next track",
            Action::PrevTrack => "previous track",
            Action::NextAttention => "next attention",
            Action::Snooze => "snooze",
            Action::Messages => "messages",
            Action::WorkerLocks => "its locks",
            Action::WorkerMessages => "its messages",
            Action::CycleLock => "deadlock lock",
            Action::GoWorkflow => "its workflow",
            Action::GoDispatch => "its dispatch",
            Action::ToggleFocus => "switch button",
            Action::Submit => "press focused / select",
            Action::Cancel => "cancel",
            Action::Sort(_) => "sort by column",
            Action::ToggleFinished => "hide/show finished",
            Action::NextGod => "next god",
            Action::PrevGod => "previous god",
            Action::NextSource => "next source",
            Action::PrevSource => "previous source",
            Action::Yank => "yank id/path",
            Action::ToggleMark => "mark",
            Action::MarkRange => "mark range",
            Action::MarkAll => "mark all listed",
            Action::ToggleMouse => "mouse on/off",
            Action::ReplayBack => "one act back",
            Action::ReplayForward => "one act forward",
            Action::ReplayPrevJournal => "previous journal entry",
            Action::ReplayNextJournal => "next journal entry",
            Action::ReplayPrevAttention => "previous attention item",
            Action::ReplayNextAttention => "next attention item",
            Action::ReplayPlay => "play / pause",
            Action::ReplayFaster => "faster",
            Action::ReplaySlower => "slower",
            Action::ReplayHeartbeats => "step through heartbeats too / skip them",
            Action::ReplayLive => "back to live",
        }
    }

    /// True for the scrub line's actions (they apply only while the console replays the past).
    pub fn is_replay(&self) -> bool {
        matches!(
            self,
            Action::ReplayBack
                | Action::ReplayForward
                | Action::ReplayPrevJournal
                | Action::ReplayNextJournal
                | Action::ReplayPrevAttention
                | Action::ReplayNextAttention
                | Action::ReplayPlay
                | Action::ReplayFaster
                | Action::ReplaySlower
                | Action::ReplayHeartbeats
                | Action::ReplayLive
        )
    }

    /// True for actions that change files (disabled by `--read-only`): the operator actions.
    pub fn is_mutation(&self) -> bool {
        matches!(self, Action::Operator(_))
    }
}

/// The operator actions: every action that changes files, each started by its module
/// (`console/actions/<action>.rs`, through `actions::start`), all refused by `--read-only` and,
/// but the fork, in the replay. A new one is a variant here, its arm in `actions::start` and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "arg")]
pub enum OperatorAction {
    /// Open the ack chooser for the selected dispatch (or ack it directly with a status).
    Ack(Option<AckChoice>),
    Approve,
    RejectHeld,
    Abort,
    Cleanup,
    ForceUnlock,
    /// Try the selected waiting outbox record again now (the Bridge pane).
    OutboxRetry,
    /// Give the selected waiting outbox record up: dead-lettered with a reason, never published.
    OutboxDiscard,
    BoardAdvance,
    /// Advance although the phase is not complete (its own confirmation, as the CLI's `--force`).
    BoardForceAdvance,
    BoardNextRound,
    BoardResolve,
    /// Put the selected dead letter back into an inbox (its god's, or one typed with Tab completion).
    Requeue,
    /// Retire the selected dead letter by hand (asks the reason, confirms).
    DiscardDead,
    /// Dispatch a failed, stalled or completed workflow again from a step (asked, Tab completes);
    /// in replay, fork it from the moment shown (`rerun --from STEP --as-of TS`).
    Rerun,
    /// Pause the selection's workflow (1), god (2) or track (3, 5) with a reason; on what is
    /// paused, resume it (docs/PROTOCOL.md §2.14).
    Pause,
    /// Resume the selection's pause (`:resume`).
    Resume,
    /// Answer the selected foreign attention item whose source takes answers (an A2A task waiting
    /// for input): the text is asked, confirmed, sent and journaled (docs/SOURCES.md).
    Answer,
    /// Mint a pair of approval links to the selected held dispatch and copy the approve URL
    /// (docs/PROTOCOL.md §2.15): the confirmation shows the item's links (open, used, expired).
    Link,
}

impl OperatorAction {
    /// A short description used by the footer and the help overlay.
    pub fn describe(&self) -> &'static str {
        match self {
            OperatorAction::Ack(_) => "ack",
            OperatorAction::Approve => "approve held",
            OperatorAction::RejectHeld => "reject held",
            OperatorAction::Abort => "abort",
            OperatorAction::Cleanup => "cleanup",
            OperatorAction::ForceUnlock => "force-unlock",
            OperatorAction::OutboxRetry => "retry outbox record now",
            OperatorAction::OutboxDiscard => "discard outbox record",
            OperatorAction::BoardAdvance => "advance phase",
            OperatorAction::BoardForceAdvance => "force advance",
            OperatorAction::BoardNextRound => "next round",
            OperatorAction::BoardResolve => "resolve",
            OperatorAction::Requeue => "requeue",
            OperatorAction::DiscardDead => "discard",
            OperatorAction::Rerun => "rerun from a step",
            OperatorAction::Pause => "pause / resume",
            OperatorAction::Resume => "resume",
            OperatorAction::Answer => "answer a foreign item",
            OperatorAction::Link => "copy an approval link",
        }
    }
}

impl From<OperatorAction> for Action {
    fn from(o: OperatorAction) -> Self {
        Action::Operator(o)
    }
}

/// A dialog or overlay with keys of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialog {
    /// A confirmation (Cancel focused first).
    Confirm,
    /// The ack status chooser.
    AckMenu,
    /// A text prompt (the line editor's keys apply too).
    Prompt,
    /// The help overlay.
    Help,
}

impl Dialog {
    pub fn title(self) -> &'static str {
        match self {
            Dialog::Confirm => "Confirmation",
            Dialog::AckMenu => "Ack chooser",
            Dialog::Prompt => "Prompt",
            Dialog::Help => "Help",
        }
    }
}

/// Where a binding applies: its condition. A pane binding wins over a global one; a detail binding
/// wins over both while a detail is open; a dialog's bindings are the only ones while it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Pane(Pane),
    /// In any pane's detail view.
    Detail,
    /// While the console replays the past (the scrub line's keys win over every other).
    Replay,
    Dialog(Dialog),
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
            KeyCode::F(n) => format!("F{n}"),
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
    /// What the help and footer say, when the action's own description does not fit the place.
    pub label: Option<&'static str>,
}

impl Binding {
    pub fn describe(&self) -> &'static str {
        self.label.unwrap_or_else(|| self.action.describe())
    }

    /// The keys as the help writes them (`j ↓`).
    pub fn keys_label(&self) -> String {
        self.keys
            .iter()
            .map(Key::label)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A row of the help overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelpRow {
    /// The section it belongs to (`2 Inboxes (this pane)`, `Everywhere`, `Commands (:)`).
    pub section: String,
    pub keys: String,
    pub text: String,
    /// It changes files: disabled in a read-only console.
    pub mutation: bool,
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
        // An operator action is bound as `Do::Abort.into()` (`Action::Operator(Do::Abort)`).
        use OperatorAction as Do;
        let mut bind = |keys: Vec<Key>, scope: Scope, action: Action, hint: bool| {
            b.push(Binding {
                keys,
                scope,
                action,
                hint,
                label: None,
            })
        };
        let ctrl_c = Key {
            code: Char('c'),
            ctrl: true,
        };
        bind(vec![Key::ch('q'), ctrl_c], g, Action::Quit, true);
        bind(vec![Key::ch('?')], g, Action::Help, true);
        bind(vec![Key::ch('!')], g, Action::Issues, false);
        bind(vec![Key::plain(Tab)], g, Action::NextPane, true);
        bind(vec![Key::plain(BackTab)], g, Action::PrevPane, false);
        for p in Pane::ALL {
            // Panes past 9 are reached by `:pane NAME` only.
            if let Some(c) = char::from_digit(p.number() as u32, 10).filter(|_| p.number() <= 9) {
                bind(vec![Key::ch(c)], g, Action::GoPane(p), false);
            }
        }
        bind(vec![Key::ch('j'), Key::plain(Down)], g, Action::Down, false);
        bind(vec![Key::ch('k'), Key::plain(Up)], g, Action::Up, false);
        bind(vec![Key::plain(PageDown)], g, Action::PageDown, false);
        bind(vec![Key::plain(PageUp)], g, Action::PageUp, false);
        let ctrl = |c: char| Key {
            code: Char(c),
            ctrl: true,
        };
        bind(vec![ctrl('d')], g, Action::HalfPageDown, false);
        bind(vec![ctrl('u')], g, Action::HalfPageUp, false);
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
        bind(vec![Key::ch('n')], g, Action::NextMatch, true);
        bind(vec![Key::ch('N')], g, Action::PrevMatch, false);
        bind(vec![Key::ch(':')], g, Action::Command, true);
        bind(vec![Key::ch('r')], g, Action::Refresh, false);
        bind(vec![Key::ch('t')], g, Action::ToggleTimes, false);
        bind(vec![Key::ch('@')], g, Action::NextAttention, true);
        let wf = Scope::Pane(Pane::Workflows);
        bind(vec![Key::ch('x')], wf, Do::Abort.into(), true);
        bind(vec![Key::ch('c')], wf, Do::Cleanup.into(), true);
        bind(vec![Key::ch('v')], wf, Action::ToggleRaw, true);
        for p in [Pane::Workflows, Pane::Inboxes, Pane::Bus, Pane::Workers] {
            bind(vec![Key::ch('Z')], Scope::Pane(p), Do::Pause.into(), false);
        }
        let inbox = Scope::Pane(Pane::Inboxes);
        bind(vec![Key::ch('a')], inbox, Do::Ack(None).into(), true);
        bind(vec![Key::ch('p')], inbox, Do::Approve.into(), true);
        bind(vec![Key::ch('R')], inbox, Do::RejectHeld.into(), true);
        bind(vec![Key::ch('L')], inbox, Do::Link.into(), false);
        bind(vec![Key::ch('v')], inbox, Action::ToggleRaw, true);
        let bus = Scope::Pane(Pane::Bus);
        bind(vec![Key::ch('f')], bus, Action::ToggleFollow, true);
        bind(vec![Key::ch(']')], bus, Action::NextTrack, true);
        bind(vec![Key::ch('[')], bus, Action::PrevTrack, false);
        let locks = Scope::Pane(Pane::Locks);
        bind(vec![Key::ch('u')], locks, Do::ForceUnlock.into(), true);
        let bridge = Scope::Pane(Pane::Bridge);
        bind(vec![Key::ch('R')], bridge, Do::OutboxRetry.into(), true);
        bind(vec![Key::ch('D')], bridge, Do::OutboxDiscard.into(), true);
        let board = Scope::Pane(Pane::Board);
        bind(vec![Key::ch(']')], board, Action::NextTrack, true);
        bind(vec![Key::ch('[')], board, Action::PrevTrack, false);
        bind(vec![Key::ch('>')], board, Do::BoardAdvance.into(), true);
        let force = Do::BoardForceAdvance.into();
        bind(vec![Key::ch('F')], board, force, true);
        bind(vec![Key::ch('n')], board, Do::BoardNextRound.into(), true);
        bind(vec![Key::ch('s')], board, Do::BoardResolve.into(), true);
        let attention = Scope::Pane(Pane::Attention);
        bind(vec![Key::plain(Enter)], attention, Action::Open, true);
        bind(vec![Key::ch('z')], attention, Action::Snooze, true);
        bind(vec![Key::ch('a')], attention, Do::Answer.into(), false);
        let journal = Scope::Pane(Pane::Journal);
        bind(vec![Key::plain(Enter)], journal, Action::Open, true);
        let workers = Scope::Pane(Pane::Workers);
        bind(vec![Key::ch('l')], workers, Action::WorkerLocks, true);
        bind(vec![Key::ch('m')], workers, Action::WorkerMessages, true);
        bind(vec![Key::ch('L')], workers, Action::CycleLock, true);
        bind(vec![Key::ch('w')], inbox, Action::GoWorkflow, true);
        bind(vec![Key::ch('d')], wf, Action::GoDispatch, true);
        bind(vec![Key::ch('R')], wf, Do::Rerun.into(), false);
        let dead = Scope::Pane(Pane::DeadLetters);
        bind(vec![Key::ch('R')], dead, Do::Requeue.into(), true);
        bind(vec![Key::ch('x')], dead, Do::Abort.into(), true);
        bind(vec![Key::ch('w')], dead, Action::GoWorkflow, true);
        bind(vec![Key::ch('v')], dead, Action::ToggleRaw, true);
        bind(vec![Key::ch('D')], dead, Do::DiscardDead.into(), true);
        let d = Scope::Detail;
        bind(vec![Key::plain(Esc)], d, Action::Back, true);
        bind(vec![Key::ch('j'), Key::plain(Down)], d, Action::Down, true);
        bind(vec![Key::ch('k'), Key::plain(Up)], d, Action::Up, false);
        bind(vec![Key::plain(PageDown)], d, Action::PageDown, false);
        bind(vec![Key::plain(PageUp)], d, Action::PageUp, false);
        bind(vec![Key::ch('g'), Key::plain(Home)], d, Action::Top, false);
        bind(
            vec![Key::ch('G'), Key::plain(End)],
            d,
            Action::Bottom,
            false,
        );
        bind(vec![Key::ch('J')], d, Action::NextRecord, true);
        bind(vec![Key::ch('K')], d, Action::PrevRecord, true);
        let c = Scope::Dialog(Dialog::Confirm);
        let focus = vec![
            Key::plain(Tab),
            Key::plain(BackTab),
            Key::plain(Left),
            Key::plain(Right),
            Key::ch('h'),
            Key::ch('l'),
        ];
        bind(focus, c, Action::ToggleFocus, true);
        bind(vec![Key::plain(Enter)], c, Action::Submit, true);
        bind(
            vec![Key::plain(Esc), Key::ch('q'), Key::ch('n')],
            c,
            Action::Cancel,
            true,
        );
        let m = Scope::Dialog(Dialog::AckMenu);
        bind(vec![Key::ch('j'), Key::plain(Down)], m, Action::Down, true);
        bind(vec![Key::ch('k'), Key::plain(Up)], m, Action::Up, false);
        bind(vec![Key::plain(Enter)], m, Action::Submit, true);
        bind(vec![Key::plain(Esc), Key::ch('q')], m, Action::Cancel, true);
        let p = Scope::Dialog(Dialog::Prompt);
        bind(vec![Key::plain(Enter)], p, Action::Submit, true);
        bind(vec![Key::plain(Esc)], p, Action::Cancel, true);
        let h = Scope::Dialog(Dialog::Help);
        bind(vec![Key::ch('j'), Key::plain(Down)], h, Action::Down, true);
        bind(vec![Key::ch('k'), Key::plain(Up)], h, Action::Up, false);
        bind(
            vec![Key::plain(PageDown), Key::ch(' ')],
            h,
            Action::PageDown,
            true,
        );
        bind(vec![Key::plain(PageUp)], h, Action::PageUp, false);
        bind(vec![Key::ch('g'), Key::plain(Home)], h, Action::Top, false);
        bind(
            vec![Key::ch('G'), Key::plain(End)],
            h,
            Action::Bottom,
            false,
        );
        bind(vec![Key::ch('/')], h, Action::Filter, true);
        bind(
            vec![Key::plain(Esc), Key::ch('q'), Key::ch('?')],
            h,
            Action::Cancel,
            true,
        );
        // The scrub line: `,` `.` step as a video player's frame step; `{` `}` and `(` `)` jump as
        // vim's paragraph and sentence motions; `p` plays; `-` `+` change the speed; `L` is live.
        let r = Scope::Replay;
        bind(vec![Key::ch(',')], r, Action::ReplayBack, true);
        bind(vec![Key::ch('.')], r, Action::ReplayForward, true);
        bind(vec![Key::ch('{')], r, Action::ReplayPrevJournal, true);
        bind(vec![Key::ch('}')], r, Action::ReplayNextJournal, true);
        bind(vec![Key::ch('(')], r, Action::ReplayPrevAttention, true);
        bind(vec![Key::ch(')')], r, Action::ReplayNextAttention, true);
        bind(vec![Key::ch('p')], r, Action::ReplayPlay, true);
        bind(vec![Key::ch('-')], r, Action::ReplaySlower, true);
        bind(
            vec![Key::ch('+'), Key::ch('=')],
            r,
            Action::ReplayFaster,
            true,
        );
        bind(vec![Key::ch('H')], r, Action::ReplayHeartbeats, true);
        bind(vec![Key::ch('L')], r, Action::ReplayLive, true);
        bind(vec![Key::ch('y')], g, Action::Yank, true);
        bind(vec![Key::ch(' ')], g, Action::ToggleMark, true);
        bind(vec![Key::ch('V')], g, Action::MarkRange, false);
        bind(vec![Key::ch('*')], g, Action::MarkAll, false);
        bind(vec![Key::ch('h')], wf, Action::ToggleFinished, false);
        bind(vec![Key::ch(']')], inbox, Action::NextGod, true);
        bind(vec![Key::ch('[')], inbox, Action::PrevGod, false);
        let src = Scope::Pane(Pane::Sources);
        bind(vec![Key::ch(']')], src, Action::NextSource, true);
        bind(vec![Key::ch('[')], src, Action::PrevSource, false);
        sort_keys(&mut b);
        let mut km = Keymap { bindings: b };
        // Words that read better in their place than the action's own.
        for bd in &mut km.bindings {
            bd.label = match (bd.scope, &bd.action) {
                (Scope::Dialog(Dialog::Confirm), Action::Submit) => Some("press focused"),
                (Scope::Dialog(Dialog::AckMenu), Action::Submit) => Some("select"),
                (Scope::Dialog(Dialog::AckMenu), Action::Down) => Some("choose"),
                (Scope::Dialog(Dialog::Prompt), Action::Submit) => Some("continue"),
                (Scope::Dialog(Dialog::Help), Action::Down) => Some("scroll"),
                (Scope::Dialog(Dialog::Help), Action::Filter) => Some("search"),
                (Scope::Dialog(Dialog::Help), Action::Cancel) => Some("close"),
                (Scope::Pane(Pane::Attention), Action::Open) => Some("go to record"),
                (Scope::Pane(Pane::Journal), Action::Open) => Some("go to record"),
                (Scope::Pane(Pane::DeadLetters), Action::Operator(Do::Abort)) => {
                    Some("abort its workflow")
                }
                (Scope::Detail, Action::Down) => Some("scroll down"),
                (Scope::Detail, Action::Up) => Some("scroll up"),
                (Scope::Detail, Action::Top) => Some("first line"),
                (Scope::Detail, Action::Bottom) => Some("last line"),
                _ => None,
            };
        }
        km
    }
}

/// Sorting, k9s style: Shift + the column's first letter, where that key is still free in the pane
/// (its detail included); `:sort COLUMN` works for every column.
fn sort_keys(b: &mut Vec<Binding>) {
    for p in Pane::ALL {
        let scopes = [Scope::Detail, Scope::Pane(p), Scope::Global];
        for col in super::items::sort_columns(p) {
            let Some(c) = col.header().chars().next().filter(char::is_ascii_uppercase) else {
                continue;
            };
            let key = Key::ch(c);
            let taken = b
                .iter()
                .any(|x| scopes.contains(&x.scope) && x.keys.contains(&key));
            if !taken {
                b.push(Binding {
                    keys: vec![key],
                    scope: Scope::Pane(p),
                    action: Action::Sort(Some(*col)),
                    hint: false,
                    label: None,
                });
            }
        }
    }
}

impl Keymap {
    /// The first key bound to `action` outside the dialogs, as the help writes it (for messages
    /// that name a key: they follow the operator's remaps).
    pub fn key_for(&self, action: &Action) -> String {
        self.bindings
            .iter()
            .find(|b| !matches!(b.scope, Scope::Dialog(_)) && b.action == *action)
            .and_then(|b| b.keys.first())
            .map(Key::label)
            .unwrap_or_else(|| format!(":{}", action.describe()))
    }

    /// The first key bound, outside the dialogs, to the action with this `[keys]` name
    /// (`approve`, `pane_2`, …), as the help writes it; `None` when none is.
    pub fn key_named(&self, name: &str) -> Option<String> {
        self.bindings
            .iter()
            .find(|b| {
                !matches!(b.scope, Scope::Dialog(_))
                    && super::config::action_name(&b.action) == name
            })
            .and_then(|b| b.keys.first())
            .map(Key::label)
    }

    /// The first key that goes to `pane` (as the help writes it), following the operator's remaps;
    /// `None` when no key does (panes past 9 are reached by `:pane NAME`).
    pub fn pane_key(&self, pane: Pane) -> Option<String> {
        self.bindings
            .iter()
            .find(|b| b.scope == Scope::Global && b.action == Action::GoPane(pane))
            .and_then(|b| b.keys.first())
            .map(Key::label)
    }

    /// True while every pane key is its number (`1`-`9`), as the default keymap binds them.
    pub fn pane_keys_are_digits(&self) -> bool {
        Pane::ALL.iter().all(|p| {
            let digit = (p.number() <= 9).then(|| p.number().to_string());
            self.pane_key(*p) == digit
        }) && self
            .bindings
            .iter()
            .filter(|b| matches!(b.action, Action::GoPane(_)))
            .all(|b| b.keys.len() == 1)
    }

    /// The binding for `key` among `scopes`, the first scope winning.
    pub fn binding(&self, scopes: &[Scope], key: Key) -> Option<&Binding> {
        scopes.iter().find_map(|scope| {
            self.bindings
                .iter()
                .find(|b| b.scope == *scope && b.keys.contains(&key))
        })
    }

    /// What an unbound `key` would need, when it does something elsewhere: `u is force-unlock in
    /// pane 4 Locks (press 4 first)`, `J is next record in a detail view (Enter first)`, `. is one
    /// change forward in replay (pantheon --at TS, :replay TS)`. `None`: the key does nothing
    /// anywhere but a dialog.
    pub fn elsewhere(&self, key: Key) -> Option<String> {
        let label = key.label();
        let mut places: Vec<String> = Vec::new();
        for b in self.bindings.iter().filter(|b| b.keys.contains(&key)) {
            let place = match b.scope {
                Scope::Pane(p) => {
                    let go = self
                        .pane_key(p)
                        .map(|k| format!("press {k} first"))
                        .unwrap_or_else(|| format!(":pane {}", p.title().to_ascii_lowercase()));
                    format!(
                        "{} in pane {} {} ({go})",
                        b.describe(),
                        p.number(),
                        p.title()
                    )
                }
                Scope::Detail => format!("{} in a detail view (Enter first)", b.describe()),
                Scope::Replay => {
                    format!("{} in replay (pantheon --at TS, :replay TS)", b.describe())
                }
                Scope::Global | Scope::Dialog(_) => continue,
            };
            if !places.contains(&place) {
                places.push(place);
            }
        }
        if places.is_empty() {
            return None;
        }
        Some(format!(
            "{label} does nothing here: it is {}",
            places.join(", ")
        ))
    }

    /// The scopes in force in `pane`, most specific first.
    pub fn scopes(pane: Pane, detail: bool) -> Vec<Scope> {
        Self::scopes_in(pane, detail, false)
    }

    /// [`Self::scopes`], with the scrub line's keys first while the console replays the past.
    pub fn scopes_in(pane: Pane, detail: bool, replay: bool) -> Vec<Scope> {
        let mut v = Vec::with_capacity(4);
        if replay {
            v.push(Scope::Replay);
        }
        if detail {
            v.push(Scope::Detail);
        }
        v.extend([Scope::Pane(pane), Scope::Global]);
        v
    }

    /// The action for `key` in `pane` (list view): a pane binding wins over a global one.
    pub fn lookup(&self, pane: Pane, key: Key) -> Option<&Action> {
        self.binding(&Self::scopes(pane, false), key)
            .map(|b| &b.action)
    }

    /// The action for `key` in a dialog.
    pub fn lookup_dialog(&self, dialog: Dialog, key: Key) -> Option<&Action> {
        self.binding(&[Scope::Dialog(dialog)], key)
            .map(|b| &b.action)
    }

    /// The footer hints for `scopes`, in order. Mutations are left out when `read_only`; a key
    /// already hinted by a more specific scope is not hinted again.
    pub fn hints_in(&self, scopes: &[Scope], read_only: bool) -> Vec<(String, &'static str)> {
        self.hints_offered(scopes, read_only, &|_| true)
    }

    /// [`Self::hints_in`], leaving out the actions `offered` says the current state does not allow
    /// (a board move its phase does not take).
    pub fn hints_offered(
        &self,
        scopes: &[Scope],
        read_only: bool,
        offered: &dyn Fn(&Action) -> bool,
    ) -> Vec<(String, &'static str)> {
        let mut out: Vec<(String, &'static str)> = Vec::new();
        let mut taken: Vec<Key> = Vec::new();
        for scope in scopes {
            for b in self.bindings.iter().filter(|b| b.scope == *scope) {
                let shadowed = b.keys.iter().all(|k| taken.contains(k));
                taken.extend(b.keys.iter().copied());
                if !b.hint
                    || shadowed
                    || (read_only && b.action.is_mutation())
                    || !offered(&b.action)
                {
                    continue;
                }
                out.push((b.keys[0].label(), b.describe()));
            }
        }
        out
    }

    /// The quit keys that go back in a detail view instead (every one but `C-c`, which always
    /// quits), as the help writes them; `None` when there is none.
    pub fn quit_keys_in_detail(&self) -> Option<String> {
        let ctrl_c = Key {
            code: KeyCode::Char('c'),
            ctrl: true,
        };
        let keys: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| b.scope == Scope::Global && b.action == Action::Quit)
            .flat_map(|b| b.keys.iter())
            .filter(|k| **k != ctrl_c)
            .map(Key::label)
            .collect();
        (!keys.is_empty()).then(|| keys.join(" "))
    }

    /// The footer hints of a detail view: as [`Self::hints_offered`], with the quit key, which goes
    /// back there, beside `Esc` (`Esc/q back`) instead of a `q quit` that does not quit.
    pub fn detail_hints(
        &self,
        pane: Pane,
        read_only: bool,
        offered: &dyn Fn(&Action) -> bool,
    ) -> Vec<(String, &'static str)> {
        let quit = Action::Quit.describe();
        let mut hints: Vec<(String, &'static str)> = self
            .hints_offered(&Self::scopes(pane, true), read_only, offered)
            .into_iter()
            .filter(|(_, d)| *d != quit)
            .collect();
        if let Some(q) = self
            .quit_keys_in_detail()
            .and_then(|k| k.split(' ').next().map(str::to_owned))
            && let Some(back) = hints
                .iter_mut()
                .find(|(_, d)| *d == Action::Back.describe())
        {
            back.0 = format!("{}/{q}", back.0);
        }
        hints
    }

    /// The footer hints for `pane`'s list: pane actions first, then the global ones.
    pub fn hints(&self, pane: Pane, read_only: bool) -> Vec<(String, &'static str)> {
        self.hints_in(&Self::scopes(pane, false), read_only)
    }

    /// The whole reference, for the help overlay: the current pane's keys first, its detail view,
    /// the global keys, the other panes, the dialogs, the line editor, then every `:` command.
    /// In a read-only console the rows that change files are kept and marked.
    pub fn help_rows(&self, current: Pane) -> Vec<HelpRow> {
        let mut rows = Vec::new();
        let mut scopes = vec![
            (
                Scope::Pane(current),
                format!("{} {} (this pane)", current.number(), current.title()),
            ),
            (Scope::Detail, "In a detail view (Enter)".to_owned()),
            (Scope::Global, "Everywhere".to_owned()),
            (
                Scope::Replay,
                "In replay (pantheon --at TS, :replay TS)".to_owned(),
            ),
        ];
        scopes.extend(
            Pane::ALL
                .into_iter()
                .filter(|p| *p != current)
                .map(|p| (Scope::Pane(p), format!("{} {}", p.number(), p.title()))),
        );
        for d in [
            Dialog::Confirm,
            Dialog::AckMenu,
            Dialog::Prompt,
            Dialog::Help,
        ] {
            scopes.push((Scope::Dialog(d), d.title().to_owned()));
        }
        for (scope, section) in scopes {
            let mut seen_go = false;
            let digits = self.pane_keys_are_digits();
            for b in self.bindings.iter().filter(|b| b.scope == scope) {
                if let Action::GoPane(p) = b.action {
                    // Remapped pane keys are listed one by one, as the operator bound them.
                    if !digits {
                        rows.push(HelpRow {
                            section: section.clone(),
                            keys: b.keys_label(),
                            text: format!("go to pane {} {}", p.number(), p.title()),
                            mutation: false,
                        });
                        continue;
                    }
                    if !seen_go {
                        seen_go = true;
                        rows.push(HelpRow {
                            section: section.clone(),
                            keys: format!("1-{}", Pane::ALL.len().min(9)),
                            text: "go to pane".into(),
                            mutation: false,
                        });
                    }
                    continue;
                }
                rows.push(HelpRow {
                    section: section.clone(),
                    keys: b.keys_label(),
                    text: match &b.action {
                        Action::Sort(Some(c)) => format!("sort by {c} (again: reversed)"),
                        Action::Quit => {
                            "quit (in a detail or raw view: back; C-c always quits)".into()
                        }
                        _ => b.describe().to_owned(),
                    },
                    mutation: b.action.is_mutation(),
                });
            }
            // In a detail the quit key goes back (C-c still quits): the detail's section says so.
            if scope == Scope::Detail
                && let Some(keys) = self.quit_keys_in_detail()
            {
                rows.push(HelpRow {
                    section: section.clone(),
                    keys,
                    text: "back to the table (as Esc; C-c quits)".into(),
                    mutation: false,
                });
            }
        }
        for (keys, text) in super::line::KEYS {
            rows.push(HelpRow {
                section: "Typing (prompts, / filter, : line)".into(),
                keys: (*keys).to_owned(),
                text: (*text).to_owned(),
                mutation: false,
            });
        }
        for c in super::commands::COMMANDS {
            let mut keys = format!(":{}", c.name);
            if !c.usage.is_empty() {
                keys.push(' ');
                keys.push_str(c.usage);
            }
            let mut text = c.help.to_owned();
            if !c.aliases.is_empty() {
                text.push_str(&format!(" (also :{})", c.aliases.join(", :")));
            }
            let mutation = super::commands::action_of(c).is_some_and(|a| a.is_mutation());
            rows.push(HelpRow {
                section: "Commands (:)".into(),
                keys,
                text,
                mutation,
            });
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::items::Column;

    #[test]
    fn pane_bindings_win_over_global_ones() {
        let km = Keymap::default();
        assert_eq!(
            km.lookup(Pane::Workflows, Key::ch('v')),
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
    fn help_starts_with_this_pane_and_lists_everything_once() {
        let km = Keymap::default();
        let rows = km.help_rows(Pane::Locks);
        assert_eq!(rows[0].section, "4 Locks (this pane)");
        assert!(rows.iter().any(|r| r.section == "3 Bus" && r.keys == "f"));
        assert!(
            rows.iter()
                .any(|r| r.section == "Everywhere" && r.keys == "q C-c")
        );
        assert_eq!(rows.iter().filter(|r| r.keys == "1-9").count(), 1);
        for c in crate::console::commands::COMMANDS {
            assert!(
                rows.iter()
                    .any(|r| r.keys.starts_with(&format!(":{}", c.name))),
                "{}",
                c.name
            );
        }
        assert!(
            rows.iter()
                .any(|r| r.section == "Confirmation" && r.text == "press focused")
        );
        assert!(rows.iter().any(|r| r.keys == "C-u"));
        assert!(rows.iter().any(|r| r.keys == ":abort" && r.mutation));
    }

    #[test]
    fn sort_keys_take_only_free_capitals() {
        let km = Keymap::default();
        let sort = |p, c| km.lookup(p, Key::ch(c)).cloned();
        assert_eq!(
            sort(Pane::Workflows, 'A'),
            Some(Action::Sort(Some(Column::Age)))
        );
        assert_eq!(
            sort(Pane::Workflows, 'S'),
            Some(Action::Sort(Some(Column::Status)))
        );
        // G stays "bottom", R stays "reject held".
        assert_eq!(sort(Pane::Workflows, 'G'), Some(Action::Bottom));
        assert_eq!(
            sort(Pane::Inboxes, 'R'),
            Some(Action::Operator(OperatorAction::RejectHeld))
        );
        assert_eq!(
            sort(Pane::Inboxes, 'H'),
            Some(Action::Sort(Some(Column::Handoff)))
        );
        assert_eq!(sort(Pane::Bus, 'T'), None);
        let rows = km.help_rows(Pane::Workflows);
        assert!(
            rows.iter()
                .any(|r| r.keys == "A" && r.text.starts_with("sort by AGE"))
        );
    }

    #[test]
    fn a_detail_binding_wins_and_dialogs_see_only_their_own() {
        let km = Keymap::default();
        let b = km.binding(&Keymap::scopes(Pane::Workflows, true), Key::ch('G'));
        assert_eq!(b.map(|b| b.scope), Some(Scope::Detail));
        assert_eq!(
            km.lookup_dialog(Dialog::Confirm, Key::plain(KeyCode::Tab)),
            Some(&Action::ToggleFocus)
        );
        assert_eq!(km.lookup_dialog(Dialog::Confirm, Key::ch('x')), None);
    }

    #[test]
    fn panes_parse_by_number_and_name() {
        assert_eq!(Pane::parse("3"), Some(Pane::Bus));
        assert_eq!(Pane::parse("worke"), Some(Pane::Workers));
        assert_eq!(Pane::parse("7"), Some(Pane::Attention));
        assert_eq!(Pane::parse("journal"), Some(Pane::Journal));
        assert_eq!(Pane::parse("9"), Some(Pane::DeadLetters));
        assert_eq!(Pane::parse("dead"), Some(Pane::DeadLetters));
        assert_eq!(Pane::parse("bridge"), Some(Pane::Bridge));
        assert_eq!(Pane::parse("10"), Some(Pane::Bridge));
        assert_eq!(Pane::parse("ledger"), Some(Pane::Ledger));
        assert_eq!(Pane::parse("11"), Some(Pane::Ledger));
        assert_eq!(Pane::parse("sources"), Some(Pane::Sources));
        assert_eq!(Pane::parse("12"), Some(Pane::Sources));
        assert_eq!(Pane::parse("13"), None);
        assert_eq!(Pane::DeadLetters.next(), Pane::Bridge);
        assert_eq!(Pane::Bridge.next(), Pane::Ledger);
        assert_eq!(Pane::Ledger.next(), Pane::Sources);
        assert_eq!(Pane::Sources.next(), Pane::Workflows);
        assert_eq!(Pane::Workflows.prev(), Pane::Sources);
    }
}
