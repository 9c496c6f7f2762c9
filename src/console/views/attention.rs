//! Pane 7: everything that waits on a human, newest first: reason, age, what resolves it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;

use crate::console::action::Pane;
use crate::console::app::App;
use crate::console::theme::Theme;
use crate::engine::store::time::relative;

use super::table::{self, Col};
use super::{empty, window};

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let rows = app.attention();
    let snoozed = app.snoozed_count();
    let mut title = format!(" 7 Attention ({}", rows.len());
    if snoozed > 0 {
        title.push_str(&format!(", {snoozed} snoozed"));
    }
    title.push_str(") ");
    if rows.is_empty() {
        let text = if app.filter(Pane::Attention).is_empty() {
            "Nothing waits on you."
        } else {
            "No attention item matches the filter."
        };
        return empty(frame, area, title, text, theme);
    }
    let sel = app.selected(Pane::Attention);
    let height = area.height.saturating_sub(3) as usize;
    let (first, rel) = window(sel, rows.len(), height);
    let now = app.now;
    let body = rows
        .iter()
        .skip(first)
        .take(height)
        .map(|i| {
            let age = match i.since {
                Some(t) if app.absolute_times => t.format("%Y-%m-%d %H:%M:%S").to_string(),
                Some(t) => relative(t, now),
                None => "-".into(),
            };
            vec![
                Line::styled(i.kind.as_str().to_owned(), theme.alert()),
                Line::raw(i.record.clone()),
                Line::raw(age),
                Line::raw(i.reason.clone()),
                Line::styled(i.action.to_owned(), theme.key()),
            ]
        })
        .collect();
    table::draw(
        frame,
        area,
        title,
        &COLUMNS,
        body,
        table::Marked {
            row: super::highlight(app, rel),
            marks: &app.marks(),
        },
        theme,
    );
}

const COLUMNS: [Col; 5] = [
    Col::new("KIND", 15, 15),
    Col::new("RECORD", 10, 30).keep(),
    Col::new("AGE", 7, 20),
    Col::new("REASON", 20, 200).flex(),
    Col::new("ACTION (Enter goes there)", 10, 48).hide(1),
];
