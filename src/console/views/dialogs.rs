//! Overlays: the confirmation dialog (Cancel focused), the ack chooser, the text prompt, the help.

use crate::console::items::AckShown;
use crate::engine::AckStatus;
use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use crate::console::app::{AckTarget, App, Confirm, HelpView, Prompt, Tone};
use crate::console::keymap::AckChoice;
use crate::console::theme::Theme;

use super::block;

/// The confirmation dialog's width (narrower terminals get all but a margin).
const CONFIRM_WIDTH: u16 = 96;

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width.saturating_sub(2));
    let h = h.min(area.height.saturating_sub(2));
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

pub(super) fn confirm(frame: &mut Frame, area: Rect, c: &Confirm, theme: &Theme) {
    let danger = c.op.is_destructive();
    let mut lines: Vec<Line> = c
        .lines
        .iter()
        .map(|(t, s)| {
            let style = match t {
                Tone::Normal => theme.base(),
                Tone::Warn => theme.warn(),
                Tone::Danger => theme.alert(),
                Tone::Dim => theme.dim(),
            };
            Line::styled(s.clone(), style)
        })
        .collect();
    if let Some(what) = &c.changed {
        lines.insert(
            0,
            Line::styled(
                format!("⚠ changed since shown: {what}. Enter refuses; Esc, then act again."),
                theme.alert(),
            ),
        );
    }
    lines.push(Line::default());
    let cancel_style = if c.confirm_focused {
        theme.dim()
    } else {
        theme.button_focused(false)
    };
    let ok_style = if c.confirm_focused {
        theme.button_focused(danger)
    } else {
        theme.dim()
    };
    lines.push(
        Line::from(vec![
            Span::styled("[ Cancel ]", cancel_style),
            Span::raw("    "),
            Span::styled(format!("[ {} ]", c.op.verb()), ok_style),
        ])
        .alignment(Alignment::Center),
    );
    // Long lines wrap: count the rows they take so the buttons are never cut off.
    let inner = CONFIRM_WIDTH
        .min(area.width.saturating_sub(2))
        .saturating_sub(2)
        .max(1) as usize;
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let r = centered(area, CONFIRM_WIDTH, rows as u16 + 3);
    frame.render_widget(Clear, r);
    let title = format!(" {} ", c.op.title());
    let b = block(title, theme);
    let b = if danger {
        b.border_style(theme.alert())
    } else {
        b
    };
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).block(b), r);
}

pub(super) fn ack_menu(
    frame: &mut Frame,
    area: Rect,
    t: &AckTarget,
    choice: usize,
    marked: usize,
    theme: &Theme,
) {
    // With marks, the status chosen applies to every marked dispatch: the menu says so.
    let what = if marked > 0 {
        format!("{marked} marked dispatch(es): one status for all")
    } else {
        format!("{} · step {} · {}'s inbox", t.handoff_id, t.step, t.god)
    };
    let mut lines = vec![Line::styled(what, theme.dim()), Line::default()];
    for (i, c) in AckChoice::ALL.iter().enumerate() {
        let (style, g) = theme.ack_status(&AckShown::Status(AckStatus::parse(c.as_str())));
        let text = format!(" {g} {:<10} ", c.as_str());
        lines.push(if i == choice {
            Line::styled(format!("▶{text}"), theme.selected())
        } else {
            Line::styled(format!(" {text}"), style)
        });
    }
    // Wide enough for the dispatch it acknowledges (its identity line), at least 56.
    let w = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 2;
    let r = centered(area, w.max(56), lines.len() as u16 + 2);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(block(" Acknowledge as… ", theme)),
        r,
    );
}

pub(super) fn prompt(frame: &mut Frame, area: Rect, p: &Prompt, theme: &Theme) {
    let mut lines: Vec<Line> = p
        .context
        .iter()
        .map(|c| Line::styled(c.as_str(), theme.warn()))
        .collect();
    lines.push(Line::styled(p.label.as_str(), theme.dim()));
    lines.push(super::editor_line("> ", &p.input, theme));
    // The label and the context lines wrap (a gates prompt names the step's gates, a raise each
    // budget reached); the box grows to fit them.
    let inner = 72u16
        .min(area.width.saturating_sub(2))
        .saturating_sub(2)
        .max(1) as usize;
    let rows = |s: &str| s.chars().count().div_ceil(inner).max(1) as u16;
    let label_rows = p
        .context
        .iter()
        .fold(rows(&p.label), |n, c| n.saturating_add(rows(c)));
    let r = centered(area, 72, label_rows + 3);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(format!(" {} ", p.title), theme)),
        r,
    );
}

/// The help overlay: the keymap's reference (this pane first, then everywhere, the other panes,
/// the dialogs, the line editor and every `:` command), scrollable and searchable.
pub(super) fn help(frame: &mut Frame, area: Rect, app: &App, h: &HelpView, theme: &Theme) {
    let all = app.keymap().help_rows(app.pane());
    let q = h.search.text().to_lowercase();
    let rows: Vec<_> = all
        .iter()
        .filter(|r| {
            q.is_empty()
                || format!("{} {} {}", r.section, r.keys, r.text)
                    .to_lowercase()
                    .contains(&q)
        })
        .collect();
    let r = centered(area, 92, area.height.saturating_sub(2));
    let inner_w = r.width.saturating_sub(2) as usize;
    let key_w = 18.min(inner_w / 3);
    let mut lines: Vec<Line> = Vec::new();
    let mut last = "";
    for row in &rows {
        if row.section != last {
            if !lines.is_empty() {
                lines.push(Line::default());
            }
            lines.push(Line::styled(row.section.clone(), theme.header()));
            last = &row.section;
        }
        let disabled = app.read_only() && row.mutation;
        let mut text = row.text.clone();
        if disabled {
            text.push_str(" (disabled: read-only)");
        }
        lines.push(Line::from(vec![
            Span::styled(
                format!("  {:<w$}  ", row.keys, w = key_w.saturating_sub(4)),
                if disabled { theme.dim() } else { theme.key() },
            ),
            Span::styled(text, if disabled { theme.dim() } else { theme.base() }),
        ]));
    }
    if rows.is_empty() {
        lines.push(Line::styled(
            format!("Nothing in the help matches {:?}.", h.search.text()),
            theme.dim(),
        ));
    }
    let lines = super::wrap::wrap_lines(lines, inner_w.max(1));
    let height = r.height.saturating_sub(2) as usize;
    let max = lines.len().saturating_sub(height);
    app.drawn().help_max.set(max);
    let scroll = h.scroll.min(max);
    let mut title = String::from(" Help ");
    if app.read_only() {
        title.push_str("· read-only: actions are disabled ");
    }
    let pos = if lines.len() > height {
        format!(
            " lines {}-{}/{} ",
            scroll + 1,
            (scroll + height).min(lines.len()),
            lines.len()
        )
    } else {
        format!(" {} lines ", lines.len())
    };
    let search = if h.searching || !h.search.is_empty() {
        let mut l = super::editor_line(" /", &h.search, theme);
        if !h.searching {
            l = Line::from(vec![
                Span::styled(" /", theme.key()),
                Span::raw(h.search.text().to_owned()),
                Span::raw(" "),
            ]);
        }
        l
    } else {
        Line::styled(" / search ", theme.dim())
    };
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((scroll.min(u16::MAX as usize) as u16, 0))
            .block(
                block(title, theme)
                    .title_bottom(search)
                    .title_bottom(Line::styled(pos, theme.dim()).right_aligned()),
            ),
        r,
    );
}
