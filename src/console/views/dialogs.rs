//! Overlays: the confirmation dialog (Cancel focused), the ack chooser, the text prompt, the help.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Row, Table, Wrap};

use crate::console::action::AckChoice;
use crate::console::app::{AckTarget, App, Confirm, Prompt, Tone};
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

pub fn confirm(frame: &mut Frame, area: Rect, c: &Confirm, theme: &Theme) {
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

pub fn ack_menu(frame: &mut Frame, area: Rect, t: &AckTarget, choice: usize, theme: &Theme) {
    let mut lines = vec![
        Line::styled(
            format!("{} · step {} · {}'s inbox", t.handoff_id, t.step, t.god),
            theme.dim(),
        ),
        Line::default(),
    ];
    for (i, c) in AckChoice::ALL.iter().enumerate() {
        let (style, g) = theme.ack_status(c.as_str());
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

pub fn prompt(frame: &mut Frame, area: Rect, p: &Prompt, theme: &Theme) {
    let lines = vec![
        Line::styled(p.label.as_str(), theme.dim()),
        super::editor_line("> ", &p.input, theme),
    ];
    // The label wraps (a gates prompt names the step's gates); the box grows to fit it.
    let inner = 72u16
        .min(area.width.saturating_sub(2))
        .saturating_sub(2)
        .max(1) as usize;
    let label_rows = p.label.chars().count().div_ceil(inner).max(1) as u16;
    let r = centered(area, 72, label_rows + 3);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(format!(" {} ", p.title), theme)),
        r,
    );
}

pub fn help(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let rows = app.keymap.help_rows();
    let r = centered(area, 76, area.height.saturating_sub(2));
    frame.render_widget(Clear, r);
    let [keys, cmds] = Layout::vertical([Constraint::Min(5), Constraint::Length(5)]).areas(r);
    let mut last = String::new();
    let body: Vec<Row> = rows
        .into_iter()
        .map(|(scope, k, d)| {
            let s = if scope == last {
                String::new()
            } else {
                scope.clone()
            };
            last = scope;
            Row::new(vec![
                Line::styled(s, theme.header()),
                Line::styled(k, theme.key()),
                Line::raw(d),
            ])
        })
        .collect();
    let mut title = " Keys (from the keymap) ".to_owned();
    if app.read_only {
        title = " Keys · read-only: actions are disabled ".into();
    }
    frame.render_widget(
        Table::new(
            body,
            [
                Constraint::Length(14),
                Constraint::Length(12),
                Constraint::Min(10),
            ],
        )
        .block(block(title, theme)),
        keys,
    );
    let cmd_lines = vec![
        Line::raw(
            ":pane N|name  :track NAME  :filter TEXT  :ack accepted|pending|rejected|completed",
        ),
        Line::raw(":abort  :cleanup  :unlock  :approve  :reject  :advance  :next-round  :resolve"),
        Line::raw(
            ":follow  :time  :raw  :rescan  :q     filter: words, type:PROGRESS, source:worker",
        ),
    ];
    frame.render_widget(
        Paragraph::new(cmd_lines)
            .wrap(Wrap { trim: true })
            .block(block(" Commands ", theme)),
        cmds,
    );
}
