//! Pane 5: worker heartbeats: status, progress, task, last beat, STALE; deadlock cycles as an alert.

use crate::console::app::{FlashKind, PaneState};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::when;
use crate::live::snapshot::short_duration;

use crate::console::items::{Column, Filter};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{block, kv};

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

/// A staleness threshold as the operator reads it: `6s`, `2m`, `500ms`.
fn threshold(t: chrono::Duration) -> String {
    if t < chrono::Duration::seconds(1) {
        format!("{}ms", t.num_milliseconds())
    } else {
        short_duration(t)
    }
}

/// The deadlock banner above the table when a track has a cycle (chains wrap, or a line each cut
/// with `…` and the rest counted); returns the area left for the table.
fn deadlock_banner(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) -> Rect {
    let snap = &app.snapshot();
    let cycles: Vec<(String, String)> = snap
        .tracks
        .iter()
        .flat_map(|t| t.deadlocks.iter().map(move |c| (t.name.clone(), c.clone())))
        .collect();
    if cycles.is_empty() {
        area
    } else {
        // Chains wrap: count the rows they take.
        let inner = area.width.saturating_sub(2).max(1) as usize;
        let rows: usize = cycles
            .iter()
            .map(|(t, c)| {
                (format!("▲ DEADLOCK {t}: ").chars().count() + c.chars().count()).div_ceil(inner)
            })
            .sum();
        let h = (rows as u16 + 2).min(area.height / 3).max(3);
        let [top, rest] = Layout::vertical([Constraint::Length(h), Constraint::Min(3)]).areas(area);
        let line = |(t, c): &(String, String)| {
            Line::from(vec![
                Span::styled(format!("▲ DEADLOCK {t}: "), theme.alert()),
                Span::raw(c.clone()),
            ])
        };
        let room = h.saturating_sub(2) as usize;
        let para = if rows <= room {
            Paragraph::new(cycles.iter().map(line).collect::<Vec<_>>()).wrap(Wrap { trim: true })
        } else {
            // Too many to wrap whole: a line each, cut with `…`, and what does not fit is counted.
            let shown = if cycles.len() > room {
                room.saturating_sub(1)
            } else {
                room
            };
            let mut lines: Vec<Line> = cycles
                .iter()
                .take(shown)
                .map(|c| crate::console::views::table::fit(line(c), inner as u16))
                .collect();
            if shown == 0 {
                // One row only: the first cycle, cut, and how many more there are.
                let more = format!(" (+{} more)", cycles.len() - 1);
                let width = inner.saturating_sub(more.chars().count()) as u16;
                let mut first = crate::console::views::table::fit(line(&cycles[0]), width);
                first.push_span(Span::styled(more, theme.alert()));
                lines.push(first);
            } else if cycles.len() > shown {
                lines.push(crate::console::views::table::fit(
                    Line::styled(
                        format!(
                            "… {} more cycle(s): L steps through their locks",
                            cycles.len() - shown
                        ),
                        theme.alert(),
                    ),
                    inner as u16,
                ));
            }
            Paragraph::new(lines)
        };
        frame.render_widget(
            para.block(block(" ▲ Deadlocks ", theme).border_style(theme.alert())),
            top,
        );
        rest
    }
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot();
    let area = deadlock_banner(frame, area, app, theme);
    let filter = app.filter(Pane::Workers);
    let rows = items::workers(snap, &filter);
    let now = app.now();
    let stale = rows
        .iter()
        .filter(|(_, w)| w.is_stale(now, snap.stale_threshold()))
        .count();
    let title = match snap.stale_after {
        Some(t) => format!(
            " {} ({}, {stale} stale · stale after {}) ",
            Pane::Workers.heading(),
            rows.len(),
            threshold(t)
        ),
        None => format!(
            " {} ({}, {stale} stale) ",
            Pane::Workers.heading(),
            rows.len()
        ),
    } + &crate::console::views::order_note(app);
    let texts = (
        "No worker has reported a heartbeat.",
        "No worker matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Workers,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let sel = app.selected(Pane::Workers);
    if app.pane_state().detail {
        return draw_detail(frame, area, app, theme, rows[sel]);
    }
    let row = |(track, w): &(&str, &crate::engine::WorkerEntry)| {
        let status = w.status.to_string();
        let (style, g) = theme.worker_status(&status);
        let is_stale = w.is_stale(now, snap.stale_threshold());
        vec![
            Line::styled(track.to_string(), theme.dim()),
            Line::raw(w.worker_id.clone()),
            Line::styled(format!("{g} {status}"), style),
            Line::styled(gauge(w.progress(), 10), theme.info()),
            Line::raw(w.task_id.clone().unwrap_or_else(|| "-".into())),
            Line::raw(w.current_subtask.clone().unwrap_or_default()),
            Line::styled(
                when(w.last_heartbeat.as_deref(), now, app.absolute_times()),
                if is_stale {
                    theme.alert()
                } else {
                    theme.base()
                },
            ),
            Line::styled(if is_stale { "▲ STALE" } else { "" }, theme.alert()),
        ]
    };
    crate::console::views::pane_table(
        frame,
        area,
        app,
        theme,
        crate::console::views::table::Listing {
            title,
            cols: &COLUMNS,
            items: &rows,
        },
        row,
    );
}

/// The table's columns: the subtask takes the room left over; TRACK goes first when it is narrow.
const COLUMNS: [Col; 8] = [
    Col::new("TRACK", 8, 32).hide(1),
    Col::new("WORKER", 10, 36).keep(),
    Col::new("STATUS", 10, 12),
    Col::new("PROGRESS", 15, 15).hide(2),
    Col::new("TASK", 6, 20),
    Col::new("SUBTASK", 10, 80).flex(),
    Col::new("BEAT", 6, 19),
    Col::new("", 7, 7),
];

/// Pane 5: every worker of every track.
pub(crate) struct Workers;

/// The selected worker: (track, worker id).
pub(crate) fn selected_worker(app: &mut App) -> Option<(String, String)> {
    if app.pane() != Pane::Workers || app.refuse_if_gone(Pane::Workers) {
        return None;
    }
    let rows = items::workers(app.snapshot(), &app.filter(Pane::Workers));
    rows.get(app.selected(Pane::Workers))
        .map(|(t, w)| ((*t).to_owned(), w.worker_id.clone()))
}

pub(crate) fn worker_locks(app: &mut App) {
    let Some((_, worker)) = crate::console::panes::workers::selected_worker(app) else {
        return app.need("a worker");
    };
    let held = items::locks(app.snapshot(), &Filter::default())
        .iter()
        .filter(|(_, l)| l.worker_id.as_deref() == Some(worker.as_str()))
        .count();
    if held == 0 {
        return app.flash(FlashKind::Info, format!("{worker} holds no lock"));
    }
    app.panes_mut()[Pane::Locks] = PaneState {
        filter: worker.clone(),
        ..PaneState::default()
    };
    app.set_pane(Pane::Locks);
    app.flash(
        FlashKind::Info,
        format!("{held} lock(s) held by {worker} · Esc clears the filter"),
    );
}

pub(crate) fn worker_messages(app: &mut App) {
    let Some((track, worker)) = crate::console::panes::workers::selected_worker(app) else {
        return app.need("a worker");
    };
    app.panes_mut().bus.track = Some(track.clone());
    app.panes_mut()[Pane::Bus] = PaneState {
        filter: format!("source:{worker}"),
        ..PaneState::default()
    };
    app.panes_mut().bus.follow = true;
    app.set_pane(Pane::Bus);
    app.flash(
        FlashKind::Info,
        format!("{track}: messages from {worker} · Esc shows the whole track"),
    );
}

impl ListPane for Workers {
    type Row<'a> = (&'a str, &'a crate::engine::WorkerEntry);

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::workers(app.snapshot(), filter)
    }

    fn key(&self, (t, w): &Self::Row<'_>) -> RowKey {
        RowKey::worker(t, &w.worker_id)
    }
}

impl PaneView for Workers {
    fn title(&self) -> &'static str {
        "Workers"
    }

    fn short_title(&self) -> &'static str {
        "Work"
    }

    fn sort_columns(&self) -> &'static [Column] {
        &[
            Column::Track,
            Column::Worker,
            Column::Status,
            Column::Progress,
            Column::Task,
            Column::Subtask,
            Column::Beat,
        ]
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }
}

/// The selected worker's detail: its status, task, progress and heartbeat.
fn draw_detail(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    (track, w): (&str, &crate::engine::WorkerEntry),
) {
    let (snap, now) = (&app.snapshot(), app.now());
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
    if w.is_stale(now, snap.stale_threshold()) {
        lines.push(kv(
            "STALE",
            format!(
                "silent for more than {}",
                snap.stale_after
                    .map(threshold)
                    .unwrap_or_else(|| "10 minutes".into())
            ),
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
    crate::console::views::detail(
        frame,
        area,
        format!(" worker · {} ", w.worker_id),
        lines,
        app,
        theme,
    )
}
