//! Pane 7: everything that waits on a human, newest first: reason, age, what resolves it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;

use crate::console::keymap::Pane;
use crate::console::app::App;
use crate::console::theme::Theme;
use crate::engine::time::relative;

use crate::console::views::table::Col;
use crate::console::items::Filter;
use crate::console::panes::{PaneView, RowKey};
use crate::console::app::Effect;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let rows = app.attention();
    let snoozed = app.snoozed_count();
    let mut title = format!(" 7 Attention ({}", rows.len());
    if snoozed > 0 {
        title.push_str(&format!(", {snoozed} snoozed"));
    }
    title.push_str(") ");
    title.push_str(&crate::console::views::follow_note(app, Pane::Attention));
    let texts = (
        "Nothing waits on you.",
        "No attention item matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Attention,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let now = app.now;
    let row = |i: &crate::console::attention::Item| {
        let age = match i.since {
            Some(t) if app.absolute_times => {
                crate::console::times::when(Some(&t.to_rfc3339()), now, true)
            }
            Some(t) => relative(t, now),
            None => "-".into(),
        };
        vec![
            Line::styled(i.kind.as_str().to_owned(), theme.alert()),
            Line::raw(i.record().to_owned()),
            Line::raw(age),
            Line::raw(app.shown_text(&i.reason).into_owned()),
            Line::styled(crate::console::attention::action_text(i, &app.keymap), theme.key()),
        ]
    };
    crate::console::views::pane_table(
        frame,
        area,
        app,
        theme,
        crate::console::views::table::Listing { title, cols: &COLUMNS, items: &rows },
        row,
    );
}

const COLUMNS: [Col; 5] = [
    Col::new("KIND", 15, 15),
    Col::new("RECORD", 10, 30).keep(),
    Col::new("AGE", 7, 20),
    Col::new("REASON", 20, 200).flex(),
    Col::new("ACTION (Enter goes there)", 10, 48).hide(1),
];

/// Pane 7: everything that waits on a human, newest first.
pub(crate) struct Attention;

impl PaneView for Attention {
    fn title(&self) -> &'static str {
        "Attention"
    }

    fn short_title(&self) -> &'static str {
        "Attn"
    }

    fn count(&self, app: &App, filter: &Filter) -> usize {
        app.attention_through(filter).len()
    }

    fn keys(&self, app: &App, filter: &Filter) -> Vec<RowKey> {
        app.attention_through(filter)
            .into_iter()
            .map(|i| RowKey::Attention(i.key))
            .collect()
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn newest_first(&self) -> bool {
        true
    }

    /// `Enter` takes the operator to the item's record and says what resolves it.
    fn open(&self, app: &mut App) -> Option<Vec<Effect>> {
        if app.refuse_if_gone(Pane::Attention) {
            return Some(Vec::new());
        }
        if let Some(item) = app
            .attention()
            .get(app.selected(Pane::Attention))
            .cloned()
        {
            app.open_attention(&item);
        }
        Some(Vec::new())
    }
}
