//! The console's state and its transitions. Keys become [`Action`]s, actions change the state and
//! return [`Effect`]s as data (run an engine call, quit…); drawing only reads this state. The whole
//! operator flow (selection -> confirm -> engine call -> flash) runs here without a terminal.

use crate::engine::{GodName, HandoffId, WorkflowId};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::live::snapshot::Snapshot;

use super::attention::{self, Jump};
use super::commands::{self, Arg};
use super::items::{self, Filter};
use super::keymap::{AckChoice, Action, Dialog, Key, Keymap, OperatorAction, Pane};
use super::line::{self, Edit, History, LineEditor};
use super::ops::Op;
use super::rowkey::RowKey;

mod dispatch;
mod flows;
mod input;
mod replay;
mod state;

/// What the event loop must do after an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Quit,
    /// Re-check every file now.
    Rescan,
    /// Run this engine call (in the background) and report back with [`App::op_finished`].
    Execute(Box<Op>),
    /// Ask the engine for a cleanup dry run and report back with [`App::cleanup_previewed`].
    PreviewCleanup(WorkflowId),
    /// Put this text on the system clipboard (OSC 52, see `clipboard`).
    Clipboard(String),
    /// Turn mouse capture on (true) or off.
    Mouse(bool),
    /// Show the root as it was at this moment (microseconds): open the replay, or move it there.
    ReplayAt(i64),
    /// Move the replay (step, jump, play).
    Replay(super::replay::Cmd),
    /// Leave the replay: back to the live root.
    Live,
}

/// How a flash message reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashKind {
    Info,
    Success,
    Error,
}

/// A message at the bottom of the screen that fades after a while.
#[derive(Debug, Clone)]
pub struct Flash {
    pub kind: FlashKind,
    pub text: String,
    pub until: Instant,
}

/// A line of a confirmation dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Normal,
    Warn,
    Danger,
    Dim,
}

/// A confirmation: what will happen, and the two buttons (Cancel is focused first).
#[derive(Debug, Clone)]
pub struct Confirm {
    pub op: Op,
    pub lines: Vec<(Tone, String)>,
    /// False: Cancel is focused (the default).
    pub confirm_focused: bool,
    /// The version of the records shown (see `shown`): `Enter` refuses once they changed.
    pub shown: super::shown::Version,
    /// What changed since the dialog was shown (then `Enter` refuses, and the lines stay the
    /// ones the operator read).
    pub changed: Option<String>,
}

impl Confirm {
    /// A confirmation of `op` with these lines, bound to the records as `snap` has them.
    pub fn new(op: Op, lines: Vec<(Tone, String)>, snap: &Snapshot) -> Self {
        Self {
            shown: super::shown::version(&op, snap),
            op,
            lines,
            confirm_focused: false,
            changed: None,
        }
    }
}

/// What a text prompt's answer is for.
#[derive(Debug, Clone)]
pub enum PromptFor {
    /// A question of an operator action: asked and answered by the action's module
    /// (`console/actions/<action>.rs`), which implements [`Question`] for what the answer completes.
    Action(Box<dyn Question>),
    /// How long to snooze the attention item with this key.
    Snooze(attention::Key),
}

/// A question an operator action asks in a text prompt, implemented in the action's module for
/// the data the answer completes (the record, earlier answers).
pub trait Question: std::fmt::Debug + QuestionClone {
    /// The dialog's title, naming the record the answer is for; with `marked` records marked in
    /// `pane` (0: none), the title says it is asked once for all of them.
    fn title(&self, marked: usize, pane: Pane) -> String;

    /// The answer was typed (`None`: left empty): the next question, the confirmation, or an
    /// error that keeps the prompt open.
    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError>;
}

/// Why a prompt's answer is not taken: the prompt stays open and the flash says why.
#[derive(Debug)]
pub enum AnswerError {
    /// The text is not what the prompt asks for (an ETA, a budget, gates, a step, a god): what
    /// was wrong and what it takes.
    Unreadable(String),
    /// The engine refused the value (an id that is no id, free text past its limits), in its
    /// words.
    Engine(crate::engine::Error),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::Unreadable(why) => f.write_str(why),
            AnswerError::Engine(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AnswerError {}

impl From<String> for AnswerError {
    fn from(why: String) -> Self {
        AnswerError::Unreadable(why)
    }
}

impl From<crate::engine::Error> for AnswerError {
    fn from(e: crate::engine::Error) -> Self {
        AnswerError::Engine(e)
    }
}

/// Cloning a boxed [`Question`] (the input mode is cloned); implemented for every `Clone` question.
pub trait QuestionClone {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn Question>;
}

impl<T: Question + Clone + 'static> QuestionClone for T {
    fn clone_box(&self) -> Box<dyn Question> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Question> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// Which question of an ack the prompt asks; earlier answers ride along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AckStage {
    /// The message (reason, summary).
    Message,
    /// The ETA of a `pending` ack.
    Eta { message: Option<String> },
    /// The gates a `completed` ack asserts, when the step declares some.
    Gates {
        message: Option<String>,
        declared: Vec<String>,
    },
}

/// A one-line text prompt.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The dialog's title: names the record the answer is for.
    pub title: String,
    pub label: String,
    pub required: bool,
    pub input: LineEditor,
    pub purpose: PromptFor,
    /// What Tab completes the answer to (gods, step ids); empty: Tab does nothing.
    pub completions: Vec<String>,
    /// Lines shown above the label: what the answer is about (each budget a raise is for, with
    /// what is used of it and its limit); empty for most prompts.
    pub context: Vec<String>,
}

/// The dispatch an ack menu is for.
#[derive(Debug, Clone)]
pub struct AckTarget {
    pub god: GodName,
    pub handoff_id: HandoffId,
    pub workflow_id: Option<WorkflowId>,
    pub step: String,
}

/// The input mode.
#[derive(Debug, Clone)]
pub enum Mode {
    Normal,
    Help(HelpView),
    /// The file issues overlay (closed by any key).
    Issues,
    /// The flash and notification history (`:messages`), closed by any key.
    Messages,
    /// Editing the current pane's filter (applied as typed).
    Filter(LineEditor),
    /// Typing a `:` command.
    Command(CommandLine),
    AckMenu {
        target: AckTarget,
        choice: usize,
    },
    Prompt(Prompt),
    Confirm(Confirm),
}

/// The help overlay: how far it is scrolled, and the words it is narrowed to (`/` in it).
#[derive(Debug, Clone, Default)]
pub struct HelpView {
    pub scroll: usize,
    pub search: LineEditor,
    /// The search is being typed.
    pub searching: bool,
}

/// The `:` line being typed: the editor, and where Up/Down stand in the history.
#[derive(Debug, Clone, Default)]
pub struct CommandLine {
    pub edit: LineEditor,
    /// The history entry shown (None: the line being typed, kept in `draft`).
    pub recalled: Option<usize>,
    pub draft: String,
    /// What `Tab` found when several commands or arguments fit, shown beside the line while it is
    /// open (cleared by the next edit).
    pub candidates: Option<String>,
}

/// Per-pane view state.
#[derive(Debug, Clone, Default)]
pub struct PaneState {
    pub selected: usize,
    pub filter: String,
    pub detail: bool,
    pub raw: bool,
    pub scroll: u16,
    /// The identity of the selected record after it went away (acked, approved, removed on disk):
    /// nothing is highlighted, the detail says so, and actions refuse instead of landing on the
    /// row that slid into its place. Cleared when the operator moves.
    pub gone: Option<RowKey>,
    /// The column the rows are ordered by (`:sort`, Shift + its letter).
    pub sort: Option<items::Sort>,
    /// The marked records (identities, in marking order): bulk actions apply to them (see `marks`).
    pub picked: Vec<RowKey>,
    /// In a newest-first list (journal, attention): the operator moved off the newest row, so the
    /// selection stays on its record instead of following new entries (see [`App::following`]).
    pub moved: bool,
}

/// A flash or notification kept for `:messages`.
#[derive(Debug, Clone)]
pub struct Message {
    pub at: DateTime<Utc>,
    pub kind: FlashKind,
    pub text: String,
}

/// The most messages `:messages` keeps.
pub(crate) const MESSAGES_KEPT: usize = 500;

/// Inbox depth samples: one every [`DEPTH_EVERY`], [`DEPTH_SAMPLES`] kept (five minutes).
pub(crate) const DEPTH_EVERY: chrono::Duration = chrono::Duration::seconds(10);
pub(crate) const DEPTH_SAMPLES: usize = 30;

/// The whole console state.
pub struct App {
    keymap: Keymap,
    read_only: bool,
    pane: Pane,
    panes: super::panes::PaneStates,
    mode: Mode,
    flash: Option<Flash>,
    snapshot: Arc<Snapshot>,
    /// The time views compare against (set by the loop; fixed in tests). In replay, the moment
    /// shown.
    now: DateTime<Utc>,
    /// The real time, for the replay's header (how long ago the moment shown was).
    wall: DateTime<Utc>,
    /// Where the replay stands while the console shows the past (`pantheon --at`, `:replay`):
    /// every pane shows the recorded moment and every action that changes files is refused, but
    /// the fork.
    replay: Option<super::replay::ReplayView>,
    absolute_times: bool,
    /// Rows visible in the main table (for paging); set from the terminal size.
    page: usize,
    /// Operations sent to the engine and not yet answered.
    in_flight: usize,
    /// The record the operator's last confirmed action was on (pane, identity): when it goes away
    /// because of that action, the selection moves on to its neighbour instead of reporting it gone.
    acted_on: Option<(Pane, RowKey)>,
    /// The `:` lines run so far (Up/Down recall them).
    history: History,
    /// Where drawing put things, for the keys and clicks that follow (see [`Drawn`]).
    drawn: Drawn,
    /// One-line hints the first time something needs the operator (the demo turns them on).
    hints: Option<FirstTimeHints>,
    /// Who the journal records for this console's acts (`--actor`, else the login name).
    actor: String,
    /// The config's thresholds (stale, overdue, held too long).
    thresholds: super::config::Thresholds,
    /// The config's `[notify]` settings, for the attention notifier.
    notify: super::config::NotifySettings,
    /// The last click on a row (when, pane, row), for double-clicks.
    last_click: Option<(Instant, Pane, usize)>,
    /// Mouse capture is on (`:mouse` toggles it).
    mouse: bool,
    /// Every flash and notification, oldest first (`:messages`).
    messages: VecDeque<Message>,
    /// Per god, its inbox depth sampled every [`DEPTH_EVERY`], oldest first.
    depth: BTreeMap<String, VecDeque<u32>>,
    depth_sampled: Option<DateTime<Utc>>,
    /// What a frame asks twice, kept for the snapshot installed (see [`Memo`]).
    memo: Memo,
}

/// Where drawing put things, written by drawing (as ratatui's `TableState` offset is) and read by
/// the keys and clicks that follow.
#[derive(Debug)]
pub struct Drawn {
    /// The largest scroll offset of the detail drawn last (its lines past one screen), so `G`
    /// and paging stop at the last line.
    pub detail_max: Cell<u16>,
    /// The same for the help overlay.
    pub help_max: Cell<usize>,
    /// Where the current pane's table was drawn (read by mouse clicks).
    pub table_at: Cell<Option<super::mouse::TableAt>>,
    /// Where each tab was drawn last (first column, width, pane), read by clicks (labels follow
    /// the width and the operator's pane keys).
    pub tabs: RefCell<Vec<(usize, usize, Pane)>>,
}

impl Default for Drawn {
    fn default() -> Self {
        Self {
            detail_max: Cell::new(u16::MAX),
            help_max: Cell::new(usize::MAX),
            table_at: Cell::new(None),
            tabs: RefCell::new(Vec::new()),
        }
    }
}

/// What a frame asks twice, computed once per snapshot installed.
#[derive(Default)]
struct Memo {
    /// Counts the snapshots installed (the attention items are computed once per snapshot and
    /// time).
    generation: u64,
    /// The attention items of (snapshot generation, now): the header, the tabs and pane 7 share
    /// them.
    attention: RefCell<Option<AttentionMemo>>,
    /// The row count of the Workflows or Inboxes pane for (pane, snapshot, generation, filter):
    /// a frame asks for it twice, and each count is a pass over every workflow or dispatch.
    rows: RefCell<Option<RowsMemo>>,
}

/// Which first-time hints were shown already.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstTimeHints {
    pub held: bool,
    pub deadlock: bool,
    pub vote: bool,
}

type AttentionMemo = (u64, DateTime<Utc>, Arc<Vec<attention::Item>>);
type RowsMemo = (Pane, usize, u64, Filter, usize);

const FLASH_FOR: Duration = Duration::from_secs(6);

impl App {
    pub fn new(snapshot: Arc<Snapshot>, read_only: bool, now: DateTime<Utc>) -> Self {
        Self {
            keymap: Keymap::default(),
            read_only,
            pane: Pane::Workflows,
            panes: Default::default(),
            mode: Mode::Normal,
            flash: None,
            snapshot,
            now,
            wall: now,
            replay: None,
            absolute_times: false,
            page: 20,
            in_flight: 0,
            acted_on: None,
            history: History::default(),
            drawn: Drawn::default(),
            hints: None,
            // The run loop sets the real one (`--actor`, else the login name).
            actor: super::ops::OPERATOR.to_owned(),
            thresholds: Default::default(),
            notify: Default::default(),
            last_click: None,
            mouse: true,
            messages: VecDeque::new(),
            depth: BTreeMap::new(),
            depth_sampled: None,
            memo: Memo::default(),
        }
    }

    /// Takes the operator's configuration: the remapped keymap, the time format, the thresholds
    /// and the notification settings.
    pub fn configure(&mut self, cfg: &super::config::Config) {
        self.keymap = cfg.keymap.clone();
        let local = cfg.time == super::config::TimeFormat::Local;
        self.absolute_times = local;
        self.thresholds = cfg.thresholds;
        self.notify = cfg.notify.clone();
        let s = self.snapshot.clone();
        self.snapshot = self.with_my_thresholds(&s);
        self.memo.generation += 1;
    }

    /// `s` with this console's overdue and held-too-long thresholds (the snapshot itself when the
    /// live model published it with them already).
    fn with_my_thresholds(&self, s: &Arc<Snapshot>) -> Arc<Snapshot> {
        s.with_thresholds(
            self.thresholds.overdue_after(),
            self.thresholds.held_after(),
        )
    }

    /// The key table the console runs with (defaults and the config's `[keys]`).
    pub fn keymap(&self) -> &Keymap {
        &self.keymap
    }

    /// The pane shown.
    pub fn pane(&self) -> Pane {
        self.pane
    }

    /// Shows `pane` (its selection, filter and detail as it left them).
    pub fn set_pane(&mut self, pane: Pane) {
        self.pane = pane;
    }

    /// Every pane's list state and what a pane keeps of its own (`panes()[pane]`,
    /// `panes().bus.track`, …).
    pub fn panes(&self) -> &super::panes::PaneStates {
        &self.panes
    }

    /// The panes' states, to change (a pane's verbs: `panes_mut().bus.follow = true`).
    pub fn panes_mut(&mut self) -> &mut super::panes::PaneStates {
        &mut self.panes
    }

    /// What the keys act on now: the panes, a dialog, a prompt, the help.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The mode, to change in place (an action's prompt taking its answer).
    pub fn mode_mut(&mut self) -> &mut Mode {
        &mut self.mode
    }

    /// Opens `mode` (a menu, a prompt, a confirmation), closing the one open.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The flash shown under the table, if any (set through [`App::flash`]).
    pub fn shown_flash(&self) -> Option<&Flash> {
        self.flash.as_ref()
    }

    /// Takes the flash away (it stays in `:messages`).
    pub fn clear_flash(&mut self) {
        self.flash = None;
    }

    /// The snapshot the panes show (the live model's, with this console's thresholds; in replay,
    /// the recorded moment's).
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The time views compare against (set by the loop; fixed in tests). In replay, the moment
    /// shown.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Sets the time views compare against, leaving the real time ([`App::set_wall`]) as it is:
    /// a test's fixed clock, a replay's moment.
    pub fn set_now(&mut self, now: DateTime<Utc>) {
        self.now = now;
    }

    /// Where the replay stands, while the console shows the past.
    pub fn replay(&self) -> Option<&super::replay::ReplayView> {
        self.replay.as_ref()
    }

    /// The replay's position, to move it.
    pub fn replay_mut(&mut self) -> Option<&mut super::replay::ReplayView> {
        self.replay.as_mut()
    }

    /// Puts the console into the replay at `view` (`None`: back to the present). The replay's
    /// thread and snapshots are the caller's: this sets where the scrub line stands.
    pub fn set_replay(&mut self, view: Option<super::replay::ReplayView>) {
        self.replay = view;
    }

    /// Times are shown as clock times (`T` toggles), not as ages.
    pub fn absolute_times(&self) -> bool {
        self.absolute_times
    }

    /// Where drawing put things (see [`Drawn`]).
    pub fn drawn(&self) -> &Drawn {
        &self.drawn
    }

    /// Whether the console refuses every act (`--read-only`).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The real time is `wall`: the views compare against it too, unless the replay shows the
    /// past.
    pub fn set_wall(&mut self, wall: DateTime<Utc>) {
        self.wall = wall;
        if self.replay.is_none() {
            self.now = wall;
        }
    }

    /// The real time (the replay's header says how long ago the moment shown was).
    pub fn wall(&self) -> DateTime<Utc> {
        self.wall
    }

    /// Turns the first-time hints on (the demo's).
    pub fn show_first_time_hints(&mut self) {
        self.hints = Some(FirstTimeHints::default());
    }

    /// `god`'s inbox depth sampled every [`DEPTH_EVERY`], oldest first.
    pub fn depth(&self, god: &str) -> Option<&VecDeque<u32>> {
        self.depth.get(god)
    }

    /// Turns `--read-only` on or off: every act refused.
    pub fn set_read_only(&mut self, on: bool) {
        self.read_only = on;
    }

    /// Every flash and notification kept for `:messages`, oldest first.
    pub fn messages(&self) -> &VecDeque<Message> {
        &self.messages
    }

    /// The terminal's size: how many rows the main table shows (paging moves by it).
    pub fn set_page(&mut self, rows: usize) {
        self.page = rows;
    }

    /// Who the journal records for this console's acts (`--actor`, else the login name).
    pub fn set_actor(&mut self, actor: String) {
        self.actor = actor;
    }

    pub fn pane_state(&self) -> &PaneState {
        &self.panes[self.pane]
    }

    pub(crate) fn pane_state_mut(&mut self) -> &mut PaneState {
        &mut self.panes[self.pane]
    }

    /// The filter of a pane.
    pub fn filter(&self, pane: Pane) -> Filter {
        let st = &self.panes[pane];
        Filter::parse(&st.filter)
            .at(self.now)
            .sorted(st.sort.clone())
            .hiding_finished(self.panes.workflows.hide_finished && pane == Pane::Workflows)
            .in_inbox(
                self.panes
                    .inboxes
                    .god
                    .clone()
                    .filter(|_| pane == Pane::Inboxes),
            )
    }

    /// The words to highlight in the current pane (its filter's).
    pub fn marks(&self) -> Vec<String> {
        self.filter(self.pane).words().to_vec()
    }

    /// The name of the track the Bus and Board panes show.
    pub fn track_name(&self) -> Option<String> {
        items::track(&self.snapshot, self.panes.bus.track.as_deref()).map(|t| t.name.clone())
    }

    /// Shows a flash message.
    pub fn flash(&mut self, kind: FlashKind, text: impl Into<String>) {
        let text = text.into();
        // In replay, a path an error names is the recorded root's, not the scratch root's.
        let text = self.shown_text(&text).into_owned();
        self.remember(kind, text.clone());
        self.flash = Some(Flash {
            kind,
            text,
            until: Instant::now() + FLASH_FOR,
        });
    }

    /// Keeps a message for `:messages` (the newest [`MESSAGES_KEPT`]).
    pub fn remember(&mut self, kind: FlashKind, text: String) {
        if self.messages.len() == MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(Message {
            at: self.now,
            kind,
            text,
        });
    }

    /// Drops an expired flash; true if something changed.
    pub fn expire_flash(&mut self, at: Instant) -> bool {
        if self.flash.as_ref().is_some_and(|f| f.until <= at) {
            self.flash = None;
            return true;
        }
        false
    }
}

/// Who a confirmed act is journaled as (`--actor`, else the login name).
fn recorded_as(actor: &str) -> String {
    format!("Journaled as {actor} (source console); the records say by: operator.")
}

/// An ETA as typed: a duration from now (`30m`, `in 2h`, `+1d`, `1h30m`) or a time in any form the
/// protocol reads (a bare time is UTC). Returned as RFC 3339 UTC.
pub(crate) fn parse_eta(input: &str, now: DateTime<Utc>) -> Result<String, AnswerError> {
    use crate::engine::{time::format_ts, time::parse_duration, time::parse_ts};
    let s = input.trim();
    let rel = s
        .strip_prefix("in ")
        .or_else(|| s.strip_prefix('+'))
        .unwrap_or(s);
    if let Some(d) = parse_duration(rel.trim()) {
        return chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .map(format_ts)
            .ok_or_else(|| AnswerError::Unreadable(format!("ETA {s:?} is too far away")));
    }
    parse_ts(s).map(format_ts).ok_or_else(|| {
        AnswerError::Unreadable(format!(
            "ETA {s:?} is neither a duration (30m, 2h, 1d) nor a time (2026-06-14T12:00:00Z)"
        ))
    })
}

/// Gate names as typed, comma-separated (repeats dropped), each 1 to 512 bytes without NUL.
pub(crate) fn parse_gates(input: &str) -> Result<Vec<String>, AnswerError> {
    let mut out: Vec<String> = Vec::new();
    for g in input.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        crate::engine::check_free_text("gate", g)?;
        if !out.iter().any(|o| o == g) {
            out.push(g.to_owned());
        }
    }
    Ok(out)
}

// The unit tests build the engine's cleanup dry runs the console is answered with.
#[cfg(test)]
use crate::engine::CleanupResult;
#[cfg(test)]
mod tests;

/// A budget as typed in the approval of a dispatch held for a budget: dollars (`$5`, `5usd`),
/// tokens (`3000000 tokens`, `3m tokens`, `500k tok`) or both; absolute limits, checked as the
/// engine checks a declared budget.
pub(crate) fn parse_budget(input: &str) -> Result<crate::engine::Budget, AnswerError> {
    let lower = input.trim().to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let mut m = serde_json::Map::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let dollars = w
            .strip_prefix('$')
            .or_else(|| w.strip_suffix("usd"))
            .or_else(|| w.strip_suffix('$'));
        if let Some(d) = dollars {
            let v: f64 = d.parse().map_err(|_| {
                AnswerError::Unreadable(format!("{w:?} is not a number of dollars"))
            })?;
            m.insert("cost_usd".into(), serde_json::json!(v));
            i += 1;
            continue;
        }
        let (num, unit_here) = match w.find(|c: char| c.is_ascii_alphabetic()) {
            Some(at) => (&w[..at], &w[at..]),
            None => (w, ""),
        };
        let (mult, unit) = match unit_here {
            u if u.starts_with('k') => (1_000u64, &u[1..]),
            u if u.starts_with('m') => (1_000_000, &u[1..]),
            u => (1, u),
        };
        let unit = if unit.is_empty() {
            i += 1;
            words.get(i).copied().unwrap_or("")
        } else {
            unit
        };
        if !matches!(unit, "tokens" | "token" | "tok") {
            return Err(AnswerError::Unreadable(format!(
                "{w:?}: say $ for dollars or tokens for tokens (e.g. $5, 3000000 tokens)"
            )));
        }
        let n: f64 = num
            .parse()
            .map_err(|_| AnswerError::Unreadable(format!("{num:?} is not a number of tokens")))?;
        let n = n * mult as f64;
        if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= 1e15) {
            return Err(AnswerError::Unreadable(format!(
                "{w:?} is not a whole number of tokens"
            )));
        }
        m.insert("tokens".into(), serde_json::json!(n as u64));
        i += 1;
    }
    crate::engine::Budget::parse(&serde_json::Value::Object(m))
        .map_err(|e| AnswerError::Unreadable(String::from(e)))
}
