//! Pane 5: worker heartbeats: status, progress, task, last beat, STALE; deadlock cycles as an alert.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, TableState, Wrap};

use crate::console::action::Pane;
use crate::console::app::App;
use crate::console::items;
use crate::console::preview::when;
use crate::console::theme::Theme;

use super::{block, empty, kv, trunc, window};

/// A text progress bar: `█████░░░░░  50%`.
pub(crate) fn gauge(pct: Option<f64>, width: usize) -> String {
    match pct {
        None => format!("{:width$}   -", ""),
        Some(p) => {
            let p = p.clamp(0.0, 100.0);
            let filled = ((p / 100.0) * width as f64).round() as usize;
            format!(
                "{}{} {:>3.0}%",
                "█".repeat(filled),
                "░".repeat(width - filled),
                p
            )
        }
    }
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot;
    let cycles: Vec<(String, String)> = snap
        .tracks
        .iter()
        .flat_map(|t| t.deadlocks.iter().map(move |c| (t.name.clone(), c.clone())))
        .collect();
    let area = if cycles.is_empty() {
        area
    } else {
        let h = (cycles.len() as u16 + 2).min(area.height / 3).max(3);
        let [top, rest] = Layout::vertical([Constraint::Length(h), Constraint::Min(3)]).areas(area);
        let lines: Vec<Line> = cycles
            .iter()
            .map(|(t, c)| {
                Line::from(vec![
                    Span::styled(format!("▲ DEADLOCK {t}: "), theme.alert()),
                    Span::raw(c.clone()),
                ])
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: true })
                .block(block(" ▲ Deadlocks ", theme).border_style(theme.alert())),
            top,
        );
        rest
    };
    let filter = app.filter(Pane::Workers);
    let rows = items::workers(snap, &filter);
    let now = app.now;
    let stale = rows.iter().filter(|(_, w)| w.is_stale(now)).count();
    let title = format!(" 5 Workers ({}, {stale} stale) ", rows.len());
    if rows.is_empty() {
        return empty(
            frame,
            area,
            title,
            "No worker has reported a heartbeat.",
            theme,
        );
    }
    let sel = app.selected(Pane::Workers);
    if app.pane_state().detail {
        let (track, w) = rows[sel];
        let mut lines = vec![
            kv("track", track.to_owned(), theme.base(), theme),
            kv("worker", w.worker_id.clone(), theme.base(), theme),
            kv(
                "status",
                w.status.to_string(),
                theme.worker_status(w.status.as_str()).0,
                theme,
            ),
            kv(
                "task",
                w.task_id.clone().unwrap_or_default(),
                theme.base(),
                theme,
            ),
            kv(
                "subtask",
                w.current_subtask.clone().unwrap_or_default(),
                theme.base(),
                theme,
            ),
            kv("progress", gauge(w.progress(), 20), theme.info(), theme),
            kv(
                "heartbeat",
                format!(
                    "{} ({})",
                    w.last_heartbeat.clone().unwrap_or_else(|| "never".into()),
                    when(w.last_heartbeat.as_deref(), now, false)
                ),
                theme.base(),
                theme,
            ),
        ];
        if w.is_stale(now) {
            lines.push(kv(
                "STALE",
                "silent for more than 10 minutes",
                theme.alert(),
                theme,
            ));
        }
        if !w.extra.is_empty() {
            lines.push(kv(
                "extra",
                serde_json::Value::Object(w.extra.clone()).to_string(),
                theme.dim(),
                theme,
            ));
        }
        return super::detail(
            frame,
            area,
            format!(" worker · {} ", w.worker_id),
            lines,
            app.pane_state().scroll,
            theme,
        );
    }
    let height = area.height.saturating_sub(3) as usize;
    let (first, rel) = window(sel, rows.len(), height);
    let body = rows.iter().skip(first).take(height).map(|(track, w)| {
        let status = w.status.to_string();
        let (style, g) = theme.worker_status(&status);
        let is_stale = w.is_stale(now);
        Row::new(vec![
            Line::styled(trunc(track, 24), theme.dim()),
            Line::raw(trunc(&w.worker_id, 28)),
            Line::styled(format!("{g} {status}"), style),
            Line::styled(gauge(w.progress(), 10), theme.info()),
            Line::raw(w.task_id.clone().unwrap_or_else(|| "-".into())),
            Line::raw(trunc(w.current_subtask.as_deref().unwrap_or(""), 30)),
            Line::styled(
                when(w.last_heartbeat.as_deref(), now, app.absolute_times),
                if is_stale {
                    theme.alert()
                } else {
                    theme.base()
                },
            ),
            Line::styled(if is_stale { "▲ STALE" } else { "" }, theme.alert()),
        ])
    });
    let table = Table::new(
        body,
        [
            Constraint::Length(24),
            Constraint::Length(28),
            Constraint::Length(11),
            Constraint::Length(16),
            Constraint::Length(6),
            Constraint::Min(10),
            Constraint::Length(10),
            Constraint::Length(8),
        ],
    )
    .header(
        Row::new([
            "TRACK", "WORKER", "STATUS", "PROGRESS", "TASK", "SUBTASK", "BEAT", "",
        ])
        .style(theme.header()),
    )
    .row_highlight_style(theme.selected())
    .block(block(title, theme));
    let mut state = TableState::default().with_selected(Some(rel));
    frame.render_stateful_widget(table, area, &mut state);
}
