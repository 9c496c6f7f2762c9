//! File issues: the overlay (`!` or `:issues`) listing every file the model cannot read as it is now
//! (path, since when, problem), and the marker a pane gets while it shows a file's last good version.

use crate::engine::layout;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::super::app::App;
use super::super::keymap::Pane;
use super::super::theme::Theme;
use super::super::times::when;
use super::block;
use crate::live::snapshot::FileWarning;

/// The path of `w` relative to the root when it is inside it (whole, and in replay inside the
/// recorded root, when not).
fn shown_path(app: &App, w: &FileWarning) -> String {
    match w.path.strip_prefix(&app.snapshot().root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => app.shown_path(&w.path),
    }
}

/// The problem without the path that engine errors start with (the path has its own column); in
/// replay, other paths in it are shown inside the recorded root.
fn problem(app: &App, w: &FileWarning) -> String {
    let prefix = format!("{}: ", w.path.display());
    let text = w.message.strip_prefix(&prefix).unwrap_or(&w.message);
    app.shown_text(text).into_owned()
}

fn since(app: &App, w: &FileWarning) -> String {
    let ts = w.since.map(|t| t.to_rfc3339());
    when(ts.as_deref(), app.now(), app.absolute_times())
}

/// The overlay: one row per file issue.
pub(super) fn overlay(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let r = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    frame.render_widget(Clear, r);
    let warnings = &app.snapshot().warnings;
    let title = format!(" File issues: {} · any key closes ", warnings.len());
    if warnings.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(
                "Every file in the root reads cleanly.",
                theme.dim(),
            ))
            .block(block(title, theme)),
            r,
        );
        return;
    }
    // Two lines per file: where and since when, then the whole problem (wrapped, never cut).
    let mut lines: Vec<Line> = Vec::new();
    for w in warnings.iter() {
        let style = if w.shows_last_good() {
            theme.warn()
        } else {
            theme.base()
        };
        lines.push(Line::from(vec![
            Span::styled(shown_path(app, w), theme.key()),
            Span::styled(format!("  since {}", since(app, w)), theme.dim()),
        ]));
        lines.push(Line::styled(format!("  {}", problem(app, w)), style));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block(title, theme))
            .wrap(Wrap { trim: false }),
        r,
    );
}

/// Whether a file feeds `pane` (by where it lives in the protocol layout).
fn feeds(pane: Pane, w: &FileWarning) -> bool {
    let p = w.path.to_string_lossy();
    let name = w
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match pane {
        Pane::Workflows => p.contains("/state/"),
        Pane::Inboxes => p.contains("/pending/"),
        Pane::Locks => name == layout::LOCKS_FILE,
        Pane::Workers => name == layout::WORKERS_FILE,
        Pane::Board => p.contains("/board/") || p.ends_with("/board"),
        Pane::Bus | Pane::Attention => false,
        Pane::Journal => p.contains("journal"),
        Pane::DeadLetters => p.contains("/conductor/dead/"),
        Pane::Bridge | Pane::Ledger | Pane::Sources => false,
    }
}

/// On the pane's top border: which file it shows a last good version of, and since when.
pub(super) fn last_good_marker(frame: &mut Frame, body: Rect, app: &App, theme: &Theme) {
    let stale: Vec<&FileWarning> = app
        .snapshot()
        .warnings
        .iter()
        .filter(|w| w.shows_last_good() && feeds(app.pane(), w))
        .collect();
    let Some(first) = stale.first() else {
        return;
    };
    let name = first
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let more = if stale.len() > 1 {
        format!(" +{}", stale.len() - 1)
    } else {
        String::new()
    };
    let text = format!(
        " ⚠ last good: {name}{more} unreadable since {} · ! lists ",
        since(app, first)
    );
    let width = (text.chars().count() as u16).min(body.width.saturating_sub(4));
    if width == 0 {
        return;
    }
    let r = Rect::new(body.x + body.width - width - 2, body.y, width, 1);
    frame.render_widget(Paragraph::new(Line::styled(text, theme.warn())), r);
}
