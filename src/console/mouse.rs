//! The mouse: a click on a tab opens its pane, a click on a row selects it, a second click on the
//! same row (within [`DOUBLE_CLICK`]) opens its detail, the wheel scrolls (the list, the detail, the
//! help). Mouse capture takes the terminal's own text selection: hold Shift while dragging to
//! select text (most terminals, and tmux), or turn capture off with `:mouse`.
//!
//! Where rows are on screen is written by drawing into [`App::table_at`], as the detail's scroll
//! limit is, so a click means the row that was drawn there.

use std::time::{Duration, Instant};

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::app::{App, Effect, Mode};
use super::keymap::{Action, Pane};

/// Two clicks on the same row within this time open it.
pub(crate) const DOUBLE_CLICK: Duration = Duration::from_millis(400);

/// Rows the wheel moves per notch.
pub(crate) const WHEEL_ROWS: usize = 3;

/// Where the current pane's main table was drawn: its area (with the border) and the index of the
/// record on its first row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableAt {
    pub area: Rect,
    pub first: usize,
    /// Rows drawn.
    pub rows: usize,
}

impl TableAt {
    /// The record index drawn at screen row `y`, column `x` (None: not a data row).
    pub fn row_at(&self, x: u16, y: u16) -> Option<usize> {
        let a = self.area;
        // Top border, then the header row, then the data rows.
        let top = a.y.checked_add(2)?;
        if x <= a.x || x >= a.x.saturating_add(a.width).saturating_sub(1) || y < top {
            return None;
        }
        let rel = usize::from(y - top);
        (rel < self.rows).then(|| self.first + rel)
    }
}

/// The pane whose tab is at column `x` of the tab bar (drawn as ` N Title ` and a space each).
pub(crate) fn tab_at(x: u16) -> Option<Pane> {
    let mut from = 0usize;
    for p in Pane::ALL {
        let w = format!(" {} {} ", p.number(), p.title()).chars().count();
        if (from..from + w).contains(&usize::from(x)) {
            return Some(p);
        }
        from += w + 1;
    }
    None
}

/// The screen row of the tab bar (under the header).
pub(crate) const TAB_ROW: u16 = 1;

/// Handles a mouse event at time `at`.
pub(crate) fn on_mouse(app: &mut App, ev: MouseEvent, at: Instant) -> Vec<Effect> {
    match (&app.mode(), ev.kind) {
        (Mode::Help(_), MouseEventKind::ScrollDown | MouseEventKind::ScrollUp) => {
            let down = ev.kind == MouseEventKind::ScrollDown;
            let key = if down { 'j' } else { 'k' };
            let mut out = Vec::new();
            for _ in 0..WHEEL_ROWS {
                out.extend(app.on_key(crossterm::event::KeyEvent::new(
                    crossterm::event::KeyCode::Char(key),
                    crossterm::event::KeyModifiers::NONE,
                )));
            }
            return out;
        }
        (Mode::Normal, _) => {}
        _ => return Vec::new(),
    }
    match ev.kind {
        MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
            let a = if ev.kind == MouseEventKind::ScrollDown {
                Action::Down
            } else {
                Action::Up
            };
            for _ in 0..WHEEL_ROWS {
                app.dispatch(a.clone());
            }
            Vec::new()
        }
        MouseEventKind::Down(MouseButton::Left) => click(app, ev.column, ev.row, at),
        _ => Vec::new(),
    }
}

fn click(app: &mut App, x: u16, y: u16, at: Instant) -> Vec<Effect> {
    if y == TAB_ROW {
        app.click_at(None, at, DOUBLE_CLICK);
        let drawn = app
            .drawn()
            .tabs
            .borrow()
            .iter()
            .find(|(from, w, _)| (*from..from + w).contains(&usize::from(x)))
            .map(|(_, _, p)| *p);
        let hit = if app.drawn().tabs.borrow().is_empty() {
            tab_at(x)
        } else {
            drawn
        };
        return match hit {
            Some(p) => app.dispatch(Action::GoPane(p)),
            None => Vec::new(),
        };
    }
    if app.pane_state().detail {
        return Vec::new();
    }
    let Some(row) = app.drawn().table_at.get().and_then(|t| t.row_at(x, y)) else {
        return Vec::new();
    };
    if row >= app.row_count() {
        return Vec::new();
    }
    let double = app.click_at(Some(row), at, DOUBLE_CLICK);
    let n = app.row_count();
    if app.pane() == Pane::Bus {
        app.panes_mut().bus.follow = row + 1 == n;
    }
    let st = app.pane_state_mut();
    st.selected = row;
    st.gone = None;
    st.scroll = 0;
    if double {
        return app.dispatch(Action::Open);
    }
    Vec::new()
}
