//! The panes. A pane is one module: it implements [`ListPane`] (its rows through a filter and each
//! row's identity, from which [`Rows`] gives `count`, `keys`, `key_at` and `position_of`) and
//! [`PaneView`] (its title, what `y` copies, the columns it sorts by, its list and detail drawn,
//! what `Enter` does on a row, which actions it offers), and is registered by ONE line of the
//! [`panes!`] table below, which makes the [`Pane`] variant, its place in [`Pane::ALL`] (its
//! number, which its frame's title takes through [`Pane::heading`]) and its module. The `App` asks
//! the current pane through [`Pane::view`]; it never matches over every pane. Per-pane state lives
//! in [`PaneStates`]: the list state indexed by [`Pane`], and what a pane keeps of its own (a struct
//! of its module); a pane's verbs are free functions of its module taking the `App`.

use ratatui::Frame;
use ratatui::layout::Rect;
use serde::{Deserialize, Serialize};

use super::app::{App, PaneState};
use super::items::{Column, Filter};
use super::keymap::Action;
pub(crate) use super::rowkey::RowKey;
use super::theme::Theme;

/// A pane's list: its rows through a filter and each row's identity. The row questions the `App`
/// asks every pane ([`Rows`]: `count`, `keys`, `key_at`, `position_of`) come from these two.
pub(crate) trait ListPane: Sync {
    /// One listed row (borrowed from the snapshot, or made for the pane).
    type Row<'a>;

    /// The rows through `filter`, in row order.
    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>>;

    /// The identity of `row` (what selection, marks and jumps follow): a [`RowKey`] of the pane's
    /// kind.
    fn key(&self, row: &Self::Row<'_>) -> RowKey;

    /// Whether `row` is the one with `key` (a pane that grows with the root compares without
    /// building each row's key).
    fn is(&self, row: &Self::Row<'_>, key: &RowKey) -> bool {
        self.key(row) == *key
    }
}

/// The row questions every pane answers, from its [`ListPane`] (implemented once, below, for
/// every list pane).
pub(crate) trait Rows {
    /// How many rows the pane lists through `filter`.
    fn count(&self, app: &App, filter: &Filter) -> usize;

    /// The identity of each row through `filter`, in row order.
    fn keys(&self, app: &App, filter: &Filter) -> Vec<RowKey>;

    /// The key of row `i` (the last row when `i` is past it); only that key is built.
    fn key_at(&self, app: &App, filter: &Filter, i: usize) -> Option<RowKey>;

    /// Where the row with `key` is, and how many rows there are.
    fn position_of(&self, app: &App, filter: &Filter, key: &RowKey) -> (Option<usize>, usize);
}

impl<T: ListPane> Rows for T {
    fn count(&self, app: &App, filter: &Filter) -> usize {
        self.rows(app, filter).len()
    }

    fn keys(&self, app: &App, filter: &Filter) -> Vec<RowKey> {
        self.rows(app, filter).iter().map(|r| self.key(r)).collect()
    }

    fn key_at(&self, app: &App, filter: &Filter, i: usize) -> Option<RowKey> {
        let rows = self.rows(app, filter);
        let last = rows.len().checked_sub(1)?;
        rows.get(i.min(last)).map(|r| self.key(r))
    }

    fn position_of(&self, app: &App, filter: &Filter, key: &RowKey) -> (Option<usize>, usize) {
        let rows = self.rows(app, filter);
        (rows.iter().position(|r| self.is(r, key)), rows.len())
    }
}

/// What every pane is: the `App` asks the current pane through this trait only (its rows through
/// [`Rows`], which its [`ListPane`] gives).
pub(crate) trait PaneView: Rows + Sync {
    /// The title in the tabs, the help and `:pane NAME`.
    fn title(&self) -> &'static str;

    /// The title cut short, for a tab bar that does not fit the whole titles.
    fn short_title(&self) -> &'static str;

    /// The columns `:sort` and Shift + a column's letter order the rows by (none: its own order).
    fn sort_columns(&self) -> &'static [Column] {
        &[]
    }

    /// What `y` copies for row `i`, as the file has it (an id, a path, a director): the key's
    /// text unless the pane says otherwise.
    fn yank(&self, app: &App, filter: &Filter, i: usize) -> Option<String> {
        self.keys(app, filter).get(i).map(RowKey::to_string)
    }

    /// Draws the pane: its list, or the selected record's detail.
    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme);

    /// The row count is worth keeping between two asks of one frame (a pass over every workflow
    /// or dispatch of the root).
    fn grows_with_root(&self) -> bool {
        false
    }

    /// Lists newest first, its selection following the newest entry until the operator moves.
    fn newest_first(&self) -> bool {
        false
    }

    /// Lists records one may filter, mark and act on (the board shows one session whole).
    fn lists_records(&self) -> bool {
        true
    }

    /// `Enter` on a row, when it does something other than opening the row's detail: `None` to
    /// open the detail.
    fn open(&self, _app: &mut App) -> Option<Vec<super::app::Effect>> {
        None
    }

    /// Whether the tab bar shows it now (a pane with nothing to show in this root may stay out of
    /// it; `:pane NAME` still opens it).
    fn in_tabs(&self, _app: &App) -> bool {
        true
    }

    /// `Esc` on the list (no detail, no mark, no filter), when it does something: a pane that
    /// drills into a record's own list goes back up a level. False: nothing to go back from.
    fn back(&self, _app: &mut App) -> bool {
        false
    }

    /// Whether the pane offers `action` now (`None`: the console's common rule decides).
    fn offers(&self, _app: &App, _action: &Action) -> Option<bool> {
        None
    }
}

/// The one registration of every pane: `Variant => module::Type`, in the order operators number
/// them. Makes the `Pane` enum, `Pane::ALL` and `Pane::view`, and declares each module.
macro_rules! panes {
    ($( $(#[$doc:meta])* $variant:ident => $module:ident :: $ty:ident, )*) => {
        $( pub(crate) mod $module; )*

        /// The panes, numbered as operators see them: 1-6 as ever, then the newer views (7, 8, …;
        /// past 9 only by `:pane NAME`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Pane {
            $( $(#[$doc])* $variant, )*
        }

        impl Pane {
            /// All panes in number order.
            pub const ALL: [Pane; [$(Pane::$variant),*].len()] = [$(Pane::$variant),*];

            /// The module that implements the pane.
            pub(crate) fn view(self) -> &'static dyn PaneView {
                match self {
                    $( Pane::$variant => &$module::$ty, )*
                }
            }
        }
    };
}

panes! {
    Workflows => workflows::Workflows,
    Inboxes => inboxes::Inboxes,
    Bus => bus::Bus,
    Locks => locks::Locks,
    Workers => workers::Workers,
    Board => board::Board,
    /// Everything that waits on a human.
    Attention => attention::Attention,
    /// The operator journal.
    Journal => journal::Journal,
    /// Dispatches dead-lettered after their last delivery (`conductor/dead/{god}/`).
    DeadLetters => deadletters::DeadLetters,
    /// The NATS bridge: status, shared-track cursors, outbox, sent records, dead letters
    /// (`:pane bridge`).
    Bridge => bridge::Bridge,
    /// What the gods cost: totals, burn rates, budgets (`:pane ledger`).
    Ledger => ledger::Ledger,
    /// The foreign sources beside the root and, opened, their agents, tasks, messages, locks and
    /// waiting items (`:pane sources`).
    Sources => sources::Sources,
}

impl Pane {
    /// Where the pane is in [`Pane::ALL`] (its number less one).
    pub fn index(self) -> usize {
        self as usize
    }

    /// 1-based number shown in the tab bar.
    pub fn number(self) -> usize {
        self.index() + 1
    }

    pub fn title(self) -> &'static str {
        self.view().title()
    }

    /// The pane's number and title as its frame's title begins (`7 Attention`): the numbers
    /// come from the table, so no title spells one.
    pub fn heading(self) -> String {
        format!("{} {}", self.number(), self.title())
    }

    /// The title cut short, for a tab bar that does not fit the whole titles.
    pub fn short_title(self) -> &'static str {
        self.view().short_title()
    }

    /// Parses a pane by number or (prefix of) name, for `:pane`: `None` when no pane or more than
    /// one answers to it ([`Pane::matching`] says which).
    pub fn parse(s: &str) -> Option<Pane> {
        match Pane::matching(s).as_slice() {
            [p] => Some(*p),
            _ => None,
        }
    }

    /// Every pane `s` names: by number, by its whole title, else every title it begins (`work`:
    /// Workflows and Workers).
    pub fn matching(s: &str) -> Vec<Pane> {
        let s = s.trim().to_ascii_lowercase();
        if let Ok(n) = s.parse::<usize>() {
            return n
                .checked_sub(1)
                .and_then(|i| Pane::ALL.get(i))
                .copied()
                .into_iter()
                .collect();
        }
        if s.is_empty() {
            return Vec::new();
        }
        let title = |p: &Pane| p.title().to_ascii_lowercase();
        if let Some(p) = Pane::ALL.into_iter().find(|p| title(p) == s) {
            return vec![p];
        }
        Pane::ALL
            .into_iter()
            .filter(|p| title(p).starts_with(&s))
            .collect()
    }

    /// The error text of a `:pane` argument that names no pane or several.
    pub fn not_one(s: &str) -> String {
        let names = |ps: &[Pane]| {
            ps.iter()
                .map(|p| format!("{} {}", p.number(), p.title()))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        match Pane::matching(s).as_slice() {
            [] => format!("no pane {s:?}: use 1-{} or a name", Pane::ALL.len()),
            many => format!(
                "pane {s:?} is ambiguous: it begins {}; type more of the name",
                names(many)
            ),
        }
    }

    pub fn next(self) -> Pane {
        Pane::ALL[self.number() % Pane::ALL.len()]
    }

    pub fn prev(self) -> Pane {
        Pane::ALL[(self.number() + Pane::ALL.len() - 2) % Pane::ALL.len()]
    }
}

pub(crate) use attention::AttentionState;
pub(crate) use bus::BusState;
pub(crate) use inboxes::InboxesState;
pub(crate) use sources::SourcesState;
pub(crate) use workflows::WorkflowsState;

/// The view state of every pane: the list state every pane has ([`PaneState`], indexed by
/// [`Pane`]), and what a pane keeps of its own (declared in its module).
#[derive(Debug, Clone, Default)]
pub struct PaneStates {
    list: [PaneState; Pane::ALL.len()],
    /// Pane 1's: whether finished workflows are left out.
    pub workflows: WorkflowsState,
    /// Pane 2's: the inbox its dispatch list is narrowed to.
    pub inboxes: InboxesState,
    /// Panes 3 and 6: the track shown, and the bus tail's following.
    pub bus: BusState,
    /// Pane 7's: the snoozed items, and the one the global key jumped to last.
    pub attention: AttentionState,
    /// `:pane sources`': the source it has open.
    pub sources: SourcesState,
}

impl std::ops::Index<Pane> for PaneStates {
    type Output = PaneState;
    fn index(&self, p: Pane) -> &PaneState {
        &self.list[p.index()]
    }
}

impl std::ops::IndexMut<Pane> for PaneStates {
    fn index_mut(&mut self, p: Pane) -> &mut PaneState {
        &mut self.list[p.index()]
    }
}
