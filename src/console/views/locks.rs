//! Pane 4: file locks of every track: holder, acquired, time left or expired.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Row, Table, TableState};

use crate::console::action::Pane;
use crate::console::app::App;
use crate::console::items;
use crate::console::preview::when;
use crate::console::theme::Theme;
use crate::engine::store::time::relative;
use crate::live::snapshot::short_duration;

use super::{block, empty, kv, window};

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let filter = app.filter(Pane::Locks);
    let rows = items::locks(&app.snapshot, &filter);
    let title = format!(" 4 Locks ({}) ", rows.len());
    if rows.is_empty() {
        return empty(frame, area, title, "No file is locked.", theme);
    }
    let sel = app.selected(Pane::Locks);
    let now = app.now;
    if app.pane_state().detail {
        let (track, l) = rows[sel];
        let mut lines = vec![
            kv("track", track.to_owned(), theme.base(), theme),
            kv("path", l.path.clone(), theme.base(), theme),
            kv(
                "holder",
                l.worker_id.clone().unwrap_or_else(|| "-".into()),
                theme.base(),
                theme,
            ),
            kv(
                "type",
                l.lock_type.clone().unwrap_or_else(|| "exclusive".into()),
                theme.base(),
                theme,
            ),
            kv(
                "acquired",
                l.acquired_at.clone().unwrap_or_else(|| "-".into()),
                theme.base(),
                theme,
            ),
            kv(
                "expires",
                l.expires_at.clone().unwrap_or_else(|| "no expiry".into()),
                theme.base(),
                theme,
            ),
        ];
        if l.bare {
            lines.push(kv(
                "note",
                "written as a bare holder string (no times)",
                theme.warn(),
                theme,
            ));
        }
        if !l.extra.is_empty() {
            lines.push(kv(
                "extra",
                serde_json::Value::Object(l.extra.clone()).to_string(),
                theme.dim(),
                theme,
            ));
        }
        return super::detail(
            frame,
            area,
            format!(" lock · {} ", l.path),
            lines,
            app.pane_state().scroll,
            theme,
        );
    }
    let height = area.height.saturating_sub(3) as usize;
    let (first, rel) = window(sel, rows.len(), height);
    let body = rows.iter().skip(first).take(height).map(|(track, l)| {
        let left = match l.expires() {
            Some(t) if t <= now => {
                Span::styled(format!("✗ EXPIRED {}", relative(t, now)), theme.alert())
            }
            Some(t) => Span::styled(format!("◷ {} left", short_duration(t - now)), theme.ok()),
            None => Span::styled("∞ no expiry", theme.dim()),
        };
        Row::new(vec![
            Line::styled(track.to_string(), theme.dim()),
            Line::raw(l.path.clone()),
            Line::raw(l.worker_id.clone().unwrap_or_else(|| "-".into())),
            Line::raw(l.lock_type.clone().unwrap_or_else(|| "exclusive".into())),
            Line::raw(when(l.acquired_at.as_deref(), now, app.absolute_times)),
            Line::from(left),
        ])
    });
    let table = Table::new(
        body,
        [
            Constraint::Length(26),
            Constraint::Min(24),
            Constraint::Length(28),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(22),
        ],
    )
    .header(
        Row::new(["TRACK", "PATH", "HOLDER", "TYPE", "ACQUIRED", "TIME LEFT"])
            .style(theme.header()),
    )
    .row_highlight_style(theme.selected())
    .block(block(title, theme));
    let mut state = TableState::default().with_selected(Some(rel));
    frame.render_stateful_widget(table, area, &mut state);
}
