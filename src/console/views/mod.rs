//! Drawing: pure functions of the [`App`] state (and its snapshot). Nothing here mutates anything.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Wrap};

use super::action::{Dialog, Keymap, Pane, Scope};
use super::app::{App, FlashKind, Mode};
use super::theme::Theme;

mod board;
mod bus;
mod dialogs;
mod inboxes;
mod issues;
mod locks;
mod table;
mod workers;
mod workflows;
mod wrap;

/// The smallest terminal the console draws in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 14;

/// Rows of chrome around the pane body (header 2, status 1, footer 1).
pub const CHROME_ROWS: u16 = 4;

/// Draws the whole console.
pub fn draw(frame: &mut Frame, app: &App, theme: &Theme) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area, theme);
        return;
    }
    // A long flash (an engine refusal) wraps onto up to three rows instead of being cut.
    let status_rows = match (&app.mode, &app.flash) {
        (m, Some(f)) if !matches!(m, Mode::Filter(_) | Mode::Command(_)) => {
            ((f.text.chars().count() + 2).div_ceil(area.width.max(1) as usize)).clamp(1, 3) as u16
        }
        _ => 1,
    };
    let [header, tabs, body, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(status_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, header, app, theme);
    draw_tabs(frame, tabs, app, theme);
    match app.pane {
        Pane::Workflows => workflows::draw(frame, body, app, theme),
        Pane::Inboxes => inboxes::draw(frame, body, app, theme),
        Pane::Bus => bus::draw(frame, body, app, theme),
        Pane::Locks => locks::draw(frame, body, app, theme),
        Pane::Workers => workers::draw(frame, body, app, theme),
        Pane::Board => board::draw(frame, body, app, theme),
    }
    issues::last_good_marker(frame, body, app, theme);
    draw_status(frame, status, app, theme);
    draw_footer(frame, footer, app, theme);
    match &app.mode {
        Mode::Help(h) => dialogs::help(frame, area, app, h, theme),
        Mode::Issues => issues::overlay(frame, area, app, theme),
        Mode::Confirm(c) => dialogs::confirm(frame, area, c, theme),
        Mode::AckMenu { target, choice } => dialogs::ack_menu(frame, area, target, *choice, theme),
        Mode::Prompt(p) => dialogs::prompt(frame, area, p, theme),
        _ => {}
    }
}

fn too_small(frame: &mut Frame, area: Rect, theme: &Theme) {
    let text = vec![
        Line::styled("Terminal too small", theme.alert()),
        Line::from(format!(
            "{}x{} here, the console needs at least {MIN_WIDTH}x{MIN_HEIGHT}.",
            area.width, area.height
        )),
        Line::styled("Enlarge the window, or press q to quit.", theme.dim()),
    ];
    let y = area.height.saturating_sub(3) / 2;
    let r = Rect::new(area.x, area.y + y, area.width, area.height.min(3));
    frame.render_widget(
        Paragraph::new(text)
            .alignment(Alignment::Center)
            .wrap(Wrap { trim: true }),
        r,
    );
}

fn draw_header(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let s = &app.snapshot;
    let c = s.counts(app.now);
    // Alerts first, so a narrow terminal cuts the root path, not the news.
    let mut spans = vec![Span::styled(" ◈ pantheon ", theme.title())];
    if app.read_only {
        spans.push(Span::styled("READ-ONLY ", theme.warn()));
    }
    let mut alert = |n: usize, what: &str| {
        if n > 0 {
            spans.push(Span::styled(format!("▲ {n} {what} · "), theme.alert()));
        }
    };
    alert(c.overdue, "overdue");
    alert(c.stale, "stale");
    alert(c.expired, "expired");
    alert(c.deadlocks, "deadlock");
    alert(c.orphaned, "orphaned (redispatch)");
    if c.warnings > 0 {
        spans.push(Span::styled(
            format!("⚠ {} file issues · ", c.warnings),
            theme.warn(),
        ));
    }
    spans.push(Span::raw(format!(
        "{} workflows ({} active) · {} waiting",
        c.workflows, c.active, c.waiting
    )));
    if c.held > 0 {
        spans.push(Span::styled(format!(" · {} held", c.held), theme.accent()));
    }
    if let Some(b) = &s.bridge {
        bridge_spans(&mut spans, b, theme);
    }
    spans.push(Span::styled(
        format!(
            "   {} [{}]",
            s.root.display(),
            if s.watch.is_empty() { "-" } else { &s.watch }
        ),
        theme.dim(),
    ));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The bridge's status in the header (docs/NATS.md): connected or not, server, lag, last error.
fn bridge_spans<'a>(spans: &mut Vec<Span<'a>>, b: &serde_json::Value, theme: &Theme) {
    let text = |k: &str| b.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
    let num = |k: &str| b.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let connected = b.get("connected").and_then(serde_json::Value::as_bool) == Some(true);
    let mut lag = num("lag");
    if let Some(tracks) = b.get("tracks").and_then(serde_json::Value::as_object) {
        lag += tracks
            .values()
            .filter_map(|t| t.get("lag").and_then(serde_json::Value::as_u64))
            .sum::<u64>();
    }
    let (mark, style) = if connected {
        ("●", theme.accent())
    } else {
        ("○", theme.warn())
    };
    spans.push(Span::styled(
        format!(
            " · ⇄ {} {mark} {} {} lag {lag}",
            text("name"),
            if connected {
                "connected"
            } else {
                "disconnected"
            },
            text("server"),
        ),
        style,
    ));
    if let Some(e) = b.get("last_error").and_then(serde_json::Value::as_str) {
        spans.push(Span::styled(format!(" ({})", trunc(e, 60)), theme.dim()));
    }
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = Vec::new();
    for p in Pane::ALL {
        let label = format!(" {} {} ", p.number(), p.title());
        let style = if p == app.pane {
            theme.tab_active()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let line = match &app.mode {
        Mode::Filter(edit) => {
            let mut l = editor_line("/", edit, theme);
            l.push_span(Span::styled("  Enter keep · Esc clear", theme.dim()));
            l
        }
        Mode::Command(cl) => {
            let mut l = editor_line(":", &cl.edit, theme);
            l.push_span(Span::styled("  Tab complete · ↑↓ history", theme.dim()));
            l
        }
        _ => match &app.flash {
            Some(f) => {
                let (style, glyph) = match f.kind {
                    FlashKind::Info => (theme.info(), "ℹ"),
                    FlashKind::Success => (theme.ok(), "✔"),
                    FlashKind::Error => (theme.alert(), "✗"),
                };
                Line::from(Span::styled(format!("{glyph} {}", f.text), style))
            }
            None => {
                let f = &app.pane_state().filter;
                if f.is_empty() {
                    Line::default()
                } else {
                    Line::from(vec![
                        Span::styled("filter: ", theme.dim()),
                        Span::styled(f.clone(), theme.key()),
                        Span::styled("  (Esc clears)", theme.dim()),
                    ])
                }
            }
        },
    };
    frame.render_widget(Paragraph::new(line).wrap(Wrap { trim: false }), area);
}

fn draw_footer(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = Vec::new();
    let km = &app.keymap;
    let ro = app.read_only;
    let hints: Vec<(String, &str)> = match &app.mode {
        Mode::Confirm(_) => km.hints_in(&[Scope::Dialog(Dialog::Confirm)], ro),
        Mode::AckMenu { .. } => km.hints_in(&[Scope::Dialog(Dialog::AckMenu)], ro),
        Mode::Prompt(_) => km.hints_in(&[Scope::Dialog(Dialog::Prompt)], ro),
        Mode::Help(_) => km.hints_in(&[Scope::Dialog(Dialog::Help)], ro),
        Mode::Issues => vec![("any key".into(), "close file issues")],
        _ if app.pane_state().detail => km
            .hints_offered(&Keymap::scopes(app.pane, true), ro, &|a| app.offers(a))
            .into_iter()
            .filter(|(k, _)| !matches!(k.as_str(), "Enter" | "/" | ":" | "Tab"))
            .collect(),
        _ => km.hints_offered(&Keymap::scopes(app.pane, false), ro, &|a| app.offers(a)),
    };
    // Whole hints only, in the keymap's order, while they fit; `? help` is always kept (last).
    let width = |k: &str, d: &str| k.chars().count() + d.chars().count() + 3;
    let help = hints
        .iter()
        .position(|(k, _)| k == "?")
        .map(|i| hints[i].clone());
    let mut room =
        (area.width as usize).saturating_sub(help.as_ref().map_or(0, |(k, d)| width(k, d)));
    let mut shown: Vec<(String, &str)> = Vec::new();
    for (k, d) in hints.into_iter().filter(|(k, _)| k != "?") {
        let w = width(&k, d);
        if w > room {
            break;
        }
        room -= w;
        shown.push((k, d));
    }
    shown.extend(help);
    for (k, d) in shown {
        spans.push(Span::styled(format!(" {k}"), theme.key()));
        spans.push(Span::styled(format!(" {d} "), theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A line editor drawn as `prompt text▏rest`, the bar at the cursor.
pub(crate) fn editor_line<'a>(
    prompt: &'a str,
    edit: &crate::console::line::LineEditor,
    theme: &Theme,
) -> Line<'a> {
    let (before, after) = edit.split();
    Line::from(vec![
        Span::styled(prompt, theme.key()),
        Span::raw(before.to_owned()),
        Span::styled("▏", theme.key()),
        Span::raw(after.to_owned()),
    ])
}

/// A bordered block with a title.
pub(crate) fn block<'a>(title: impl Into<Line<'a>>, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme.dim())
        .title(title)
        .title_style(theme.title())
}

/// The window of rows to build so the selection stays visible: (first row, selected row within it).
pub(crate) fn window(selected: usize, len: usize, height: usize) -> (usize, usize) {
    if height == 0 || len == 0 {
        return (0, 0);
    }
    let first = selected
        .saturating_sub(height - 1)
        .min(len.saturating_sub(height.min(len)));
    (first, selected - first)
}

/// The row to highlight: none while the selected record has gone away (see `PaneState::gone`).
pub(crate) fn highlight(app: &App, rel: usize) -> Option<usize> {
    app.pane_state().gone.is_none().then_some(rel)
}

/// In a detail view whose record went away, says so instead of showing a neighbour (true: drawn).
pub(crate) fn gone_detail(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) -> bool {
    let st = app.pane_state();
    let Some(k) = st.gone.as_deref().filter(|_| st.detail) else {
        return false;
    };
    let lines = vec![
        Line::styled(format!("{k} is no longer here."), theme.warn()),
        Line::styled(
            "It was acted on or removed while you were looking (by a god, another console or the CLI).",
            theme.dim(),
        ),
        Line::styled("Esc goes back to the list.", theme.dim()),
    ];
    detail(frame, area, format!(" {k} · gone "), lines, app, theme);
    true
}

/// Cuts `s` to at most `n` characters, with an ellipsis.
pub(crate) fn trunc(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else if n == 0 {
        String::new()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// A titled list of lines used by detail views.
pub(crate) fn section<'a>(out: &mut Vec<Line<'a>>, title: &str, theme: &Theme) {
    out.push(Line::default());
    out.push(Line::styled(title.to_owned(), theme.header()));
}

/// A detail view: the record's lines wrapped to the width (continuation rows keep the line's
/// indent), scrolled by the pane's offset, with the record's position and the lines shown in the
/// bottom border. The scroll limit is handed back to the app through [`App::detail_max`].
pub(crate) fn detail(
    frame: &mut Frame,
    area: Rect,
    title: String,
    lines: Vec<Line>,
    app: &App,
    theme: &Theme,
) {
    let inner_w = area.width.saturating_sub(2).max(1) as usize;
    let inner_h = area.height.saturating_sub(2) as usize;
    let wrapped = wrap::wrap_lines(lines, inner_w);
    let total = wrapped.len();
    let max = total.saturating_sub(inner_h).min(u16::MAX as usize) as u16;
    app.detail_max.set(max);
    let scroll = app.pane_state().scroll.min(max);
    let first = scroll as usize + 1;
    let last = (scroll as usize + inner_h).min(total);
    let mut pos = String::from(" ");
    let rows = app.row_count();
    if app.pane_state().gone.is_none() && rows > 0 {
        pos.push_str(&format!("record {}/{rows} · ", app.selected(app.pane) + 1));
    }
    if total > inner_h {
        pos.push_str(&format!("lines {first}-{last}/{total} "));
    } else {
        pos.push_str(&format!("{total} lines "));
    }
    let block = block(title, theme).title_bottom(Line::styled(pos, theme.dim()).right_aligned());
    frame.render_widget(
        Paragraph::new(wrapped).block(block).scroll((scroll, 0)),
        area,
    );
}

/// A key: value line.
pub(crate) fn kv<'a>(k: &str, v: impl Into<String>, style: Style, theme: &Theme) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!("{k:<14}"), theme.dim()),
        Span::styled(v.into(), style),
    ])
}

/// Pretty JSON as lines.
pub(crate) fn json_lines<'a>(v: &serde_json::Value, theme: &Theme) -> Vec<Line<'a>> {
    serde_json::to_string_pretty(v)
        .unwrap_or_default()
        .lines()
        .map(|l| Line::styled(l.to_owned(), theme.base()))
        .collect()
}

/// An empty-state message inside a block.
pub(crate) fn empty(frame: &mut Frame, area: Rect, title: String, text: &str, theme: &Theme) {
    frame.render_widget(
        Paragraph::new(Line::styled(text.to_owned(), theme.dim()))
            .block(block(title, theme))
            .wrap(Wrap { trim: true }),
        area,
    );
}
