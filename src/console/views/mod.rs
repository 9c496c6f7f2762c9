//! Drawing: the chrome every pane shares (header, tabs, status line, footer, dialogs, the one
//! table), and [`draw`], which asks the current pane to draw itself (see `console::panes`).
//!
//! Drawing reads the [`App`] state and its snapshot and changes neither what is shown next nor
//! what an action acts on. It does write one thing back: where things landed on screen, into
//! `Cell`/`RefCell` fields of `App` (`table_at`, `tabs_drawn`, `detail_max`, `help_max`), as
//! ratatui's `TableState` offset is written by rendering; mouse clicks, marks and paging read them.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Wrap};

use super::app::{App, FlashKind, Mode};
use super::keymap::{Dialog, Keymap, Pane, Scope};
use super::theme::Theme;

mod dialogs;
mod issues;
mod replay;
pub(crate) mod table;
mod wrap;
pub(crate) use wrap::wrap_lines;

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
    let rows_for = |chars: usize| (chars.div_ceil(area.width.max(1) as usize)).clamp(1, 3) as u16;
    let status_rows = match (&app.mode(), &app.shown_flash()) {
        (Mode::Command(cl), _) => cl.candidates.as_ref().map_or(1, |c| {
            rows_for(cl.edit.text().chars().count() + 5 + c.chars().count())
        }),
        (m, Some(f)) if !matches!(m, Mode::Filter(_)) => rows_for(f.text.chars().count() + 2),
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
    match &app.replay() {
        Some(v) => replay::header(frame, header, app, v, theme),
        None => draw_header(frame, header, app, theme),
    }
    draw_tabs(frame, tabs, app, theme);
    app.drawn().table_at.set(None);
    app.pane().view().draw(frame, body, app, theme);
    draw_marks(frame, app, theme);
    issues::last_good_marker(frame, body, app, theme);
    draw_status(frame, status, app, theme);
    match (&app.replay(), &app.mode()) {
        (Some(v), Mode::Normal) => replay::scrub_line(frame, footer, app, v, theme),
        _ => draw_footer(frame, footer, app, theme),
    }
    match &app.mode() {
        Mode::Help(h) => dialogs::help(frame, area, app, h, theme),
        Mode::Issues => issues::overlay(frame, area, app, theme),
        Mode::Messages => messages(frame, area, app, theme),
        Mode::Confirm(c) => dialogs::confirm(frame, area, c, theme),
        Mode::AckMenu { target, choice } => dialogs::ack_menu(
            frame,
            area,
            target,
            *choice,
            app.pane_state().picked.len(),
            theme,
        ),
        Mode::Prompt(p) => dialogs::prompt(frame, area, p, theme),
        _ => {}
    }
}

/// Records where the current pane's table was drawn (for mouse clicks and marks): `first` is the
/// index of the record on its first row.
pub(crate) fn record_table(app: &App, area: Rect, first: usize) {
    let height = area.height.saturating_sub(3) as usize;
    let rows = app.row_count().saturating_sub(first).min(height);
    app.drawn()
        .table_at
        .set(Some(crate::console::mouse::TableAt { area, first, rows }));
}

/// The current pane's record list: the one tail every pane's table shares. [`table::list`] draws the
/// window of rows around the selection (the table scrolls), the selection highlighted unless its
/// record went away, the filter's words marked, cells cut with `…` and `+N more` in the bottom
/// border; then where it lies is recorded for mouse clicks and marks ([`record_table`]).
pub(crate) fn pane_table<'a, T>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    listing: table::Listing<'_, T>,
    row: impl Fn(&T) -> Vec<Line<'a>>,
) {
    pane_table_refit(frame, area, app, theme, listing, row, |_, _, _| None);
}

/// [`pane_table`] with `refit(item, column, width)`: a shorter form of a cell that does not fit
/// its column's width, before it is cut (see [`table::list_refit`]).
pub(crate) fn pane_table_refit<'a, T>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    listing: table::Listing<'_, T>,
    row: impl Fn(&T) -> Vec<Line<'a>>,
    refit: impl Fn(&T, usize, u16) -> Option<Line<'a>>,
) {
    let marks = app.marks();
    let table::Listing { title, cols, items } = listing;
    let first = table::list_refit(
        frame,
        area,
        table::Head {
            title,
            cols,
            marks: &marks,
            theme,
        },
        items,
        rows_of(app, items.len()),
        row,
        refit,
    );
    record_table(app, area, first);
}

/// The title's note of a newest-first list: `▼ following ` while its selection follows the newest
/// entry, `‖ paused (g follows) ` once the operator moved off it (the bus tail's words).
pub(crate) fn follow_note(app: &App, pane: Pane) -> String {
    let filter = filter_note(app);
    filter
        + &if app.following(pane) {
            "▼ following ".to_owned()
        } else {
            format!(
                "‖ paused ({} follows) ",
                app.keymap().key_for(&super::keymap::Action::Top)
            )
        }
}

/// A `●` on the left border of every marked row on screen.
fn draw_marks(frame: &mut Frame, app: &App, theme: &Theme) {
    let st = app.pane_state();
    if st.picked.is_empty() || st.detail {
        return;
    }
    let Some(t) = app.drawn().table_at.get() else {
        return;
    };
    let keys = app.keys(app.pane());
    for i in 0..t.rows {
        if crate::console::marks::is_picked(app, &keys, t.first + i) {
            let y = t.area.y + 2 + i as u16;
            frame
                .buffer_mut()
                .set_string(t.area.x, y, "●", theme.accent());
        }
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
    let s = &app.snapshot();
    let c = s.counts(app.now());
    let mut items: Vec<HeaderItem> = vec![HeaderItem::new(
        Part::Title,
        [" ◈ pantheon ", " ◈ pantheon ", " ◈ "],
        theme.title(),
    )];
    if app.read_only() {
        items.push(HeaderItem::new(
            Part::Count,
            ["READ-ONLY ", "READ-ONLY ", "RO "],
            theme.warn(),
        ));
    }
    if let Some([full, short, tight]) = paused_badge(&s.paused, app) {
        items.push(HeaderItem::new(
            Part::Alert,
            [full, short, tight],
            theme.warn(),
        ));
    }
    if let Some([full, short, tight]) = peer_paused_badge(app) {
        items.push(HeaderItem::new(
            Part::Alert,
            [full, short, tight],
            theme.warn(),
        ));
    }
    if let Some(l) = s.loading {
        // The first screen of a large root comes before the whole root is read.
        let full = format!(
            "⟳ loading {} of {} files, {} finished so far · ",
            l.read, l.total, l.finished
        );
        let short = format!("⟳ {}/{} ", l.read, l.total);
        items.push(HeaderItem::new(
            Part::Count,
            [full, short.clone(), short],
            theme.info(),
        ));
    }
    let waiting = app.attention_count();
    if waiting > 0 {
        let short = format!("@{waiting} ");
        items.push(HeaderItem::new(
            Part::Count,
            [format!("@ {waiting} need you · "), short.clone(), short],
            theme.alert(),
        ));
    }
    items.extend(alert_items(app, &c, theme));
    let wf = super::items::plural(c.workflows, "workflow", &format!("({} active)", c.active));
    items.push(HeaderItem::new(
        Part::Total(1),
        [
            format!("{wf} · "),
            format!("{} wf ", c.workflows),
            String::new(),
        ],
        theme.base(),
    ));
    items.push(HeaderItem::new(
        Part::Total(2),
        [
            format!("{} waiting ", c.waiting),
            format!("{} waiting ", c.waiting),
            String::new(),
        ],
        theme.base(),
    ));
    if let Some(t) = super::items::track(s, app.panes().bus.track.as_deref()) {
        let rate = t.per_second(app.now(), HEADER_SPARK);
        let now_rate = rate.last().copied().unwrap_or(0);
        items.push(HeaderItem::extra(
            7,
            format!("· bus {} {now_rate}/s ", sparkline(&rate)),
            theme.info(),
        ));
    }
    if let Some(b) = &s.bridge {
        bridge_items(&mut items, b, theme);
    }
    items.push(HeaderItem::extra(
        9,
        format!(
            "  {} [{}]",
            app.shown_path(&s.root),
            if s.watch.is_empty() { "-" } else { &s.watch }
        ),
        theme.dim(),
    ));
    let items = fit_header(items, area.width as usize);
    let line = table::fit(
        Line::from(
            items
                .into_iter()
                .map(|(t, st)| Span::styled(t, st))
                .collect::<Vec<_>>(),
        ),
        area.width,
    );
    frame.render_widget(Paragraph::new(line), area);
}

/// The header's alerts, each in its three forms: no supervisor, the alert counts, file issues,
/// held dispatches.
fn alert_items(app: &App, c: &crate::live::snapshot::Counts, theme: &Theme) -> Vec<HeaderItem> {
    let s = &app.snapshot();
    let mut items = Vec::new();
    if s.unsupervised_deadlines(app.now()).is_some() {
        // Deadlines nobody enforces: `pantheon serve` is not running (or died).
        items.push(HeaderItem::new(
            Part::Alert,
            ["▲ no supervisor · ", "▲ no supervisor ", "▲ no serve "],
            theme.alert(),
        ));
    }
    for [full, short, tight] in alert_forms(c) {
        items.push(HeaderItem::new(
            Part::Alert,
            [full, short, tight],
            theme.alert(),
        ));
    }
    // A count and its three forms: whole, short, tight.
    let counted = [
        (c.warnings, "⚠", "file issues", "issues", theme.warn()),
        (c.held, "‖", "held", "held", theme.accent()),
        (c.paused_held, "⏸", "held by pauses", "held", theme.accent()),
    ];
    for (n, glyph, words, short, style) in counted.into_iter().filter(|(n, ..)| *n > 0) {
        items.push(HeaderItem::new(
            Part::Alert,
            [
                format!("{glyph} {n} {words} · "),
                format!("{glyph}{n} {short} "),
                format!("{glyph}{n} "),
            ],
            style,
        ));
    }
    items
}

/// `⏸ PAUSED god hephaestus since 12:01 (+2 more) · `: what is paused and since when (the first
/// pause; how many others), in its three forms; a `paused.json` that cannot be read says so instead.
fn paused_badge(v: &crate::live::snapshot::PausedView, app: &App) -> Option<[String; 3]> {
    if let Some(e) = &v.error {
        let short: String = e.chars().take(60).collect();
        return Some([
            format!("⏸ paused.json unreadable: {short} · "),
            "⏸ paused.json unreadable ".into(),
            "⏸? ".into(),
        ]);
    }
    let first = v.pauses.first()?;
    let since = crate::console::times::when(Some(&first.since), app.now(), app.absolute_times());
    let more = match v.pauses.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    let label = first.target().label();
    Some([
        format!("⏸ PAUSED {label} since {since}{more} · "),
        format!("⏸ PAUSED {label} "),
        format!(
            "⏸ PAUSED{} ",
            if more.is_empty() {
                String::new()
            } else {
                format!(" {}", v.pauses.len())
            }
        ),
    ])
}

/// `⏸ PEER tallon: god hermes since 10:01 (+1 more peer) · `: a peer pantheon's pause heard by
/// the bridge (docs/NATS.md), the first peer's first pause, in its three forms.
fn peer_paused_badge(app: &App) -> Option<[String; 3]> {
    let peers = crate::console::panes::bridge::peer_pauses(app);
    let first = peers.first()?;
    let more = match peers.len() {
        1 => String::new(),
        n => format!(" (+{} more peer{})", n - 1, if n == 2 { "" } else { "s" }),
    };
    let text = crate::console::panes::bridge::peer_pause_text(first, app);
    Some([
        format!("⏸ PEER {text}{more} · "),
        format!("⏸ PEER {} ", first.peer),
        format!("⏸P{} ", peers.len()),
    ])
}

/// What a piece of the header is, which decides how it gives way on a narrow terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// ` ◈ pantheon `: shortened to its glyph last of all.
    Title,
    /// What waits on the operator (`@ 7 need you`), loading, read-only: shortened, never dropped.
    Count,
    /// An alert (`▲ 2 overdue`, `‖ 1 held`, `⚠ 3 file issues`): shortened, never dropped.
    Alert,
    /// A plain total (`4 workflows (3 active)`, `3 waiting`): shortened, then dropped (the
    /// higher number first).
    Total(u8),
    /// The bus rate, the bridge, the root path: dropped whole first (the higher rank first).
    Extra(u8),
}

/// One piece of the header in its three forms: whole, short (`▲2 overdue`), tight (`▲2`).
struct HeaderItem {
    part: Part,
    forms: [String; 3],
    style: Style,
}

impl HeaderItem {
    fn new(part: Part, forms: [impl Into<String>; 3], style: Style) -> Self {
        Self {
            part,
            forms: forms.map(Into::into),
            style,
        }
    }

    /// A piece with one form only, dropped whole when there is no room (rank: the higher first).
    fn extra(rank: u8, text: String, style: Style) -> Self {
        Self::new(Part::Extra(rank), [text.clone(), text.clone(), text], style)
    }
}

/// The header's pieces as they fit `room` cells: first the extras go (the root path, the bridge,
/// the bus rate), then the plain totals shorten and go, then the alerts shorten (`▲ 2 overdue · `
/// to `▲2 overdue `) and the counts (`@7`), then the alerts shorten to their glyph and number
/// (`▲2`, `⊘1`, `⟲1`; the last first, so the first keep their words longest) and the title to its
/// glyph. An alert is never dropped: what is still too wide is cut with `…`.
fn fit_header(mut items: Vec<HeaderItem>, room: usize) -> Vec<(String, Style)> {
    let mut level = vec![0usize; items.len()];
    let width = |items: &[HeaderItem], level: &[usize]| -> usize {
        items
            .iter()
            .zip(level)
            .map(|(i, l)| Line::raw(i.forms[*l].as_str()).width())
            .sum()
    };
    // Each step, in order, while the header is too wide.
    loop {
        if width(&items, &level) <= room {
            break;
        }
        // 1. The extras, the highest rank first.
        if let Some(i) = items
            .iter()
            .enumerate()
            .filter_map(|(i, x)| match x.part {
                Part::Extra(r) => Some((r, i)),
                _ => None,
            })
            .max()
            .map(|(_, i)| i)
        {
            items.remove(i);
            level.remove(i);
            continue;
        }
        // 2. The plain totals shorten (`6 wf`), then go, the higher number first.
        if let Some(i) =
            (0..items.len()).find(|i| matches!(items[*i].part, Part::Total(_)) && level[*i] == 0)
        {
            level[i] = 1;
            continue;
        }
        if let Some(i) = items
            .iter()
            .enumerate()
            .filter_map(|(i, x)| match x.part {
                Part::Total(r) => Some((r, i)),
                _ => None,
            })
            .max()
            .map(|(_, i)| i)
        {
            items.remove(i);
            level.remove(i);
            continue;
        }
        // 3. The alerts take their short forms together (`▲2 overdue ◔1 stale`), then the counts
        // (`@7`).
        let alerts: Vec<usize> = (0..items.len())
            .filter(|i| items[*i].part == Part::Alert && level[*i] == 0)
            .collect();
        if !alerts.is_empty() {
            alerts.into_iter().for_each(|i| level[i] = 1);
            continue;
        }
        if let Some(i) = (0..items.len()).find(|i| items[*i].part == Part::Count && level[*i] == 0)
        {
            level[i] = 1;
            continue;
        }
        // 4. The alerts, the counts and the title take their tight forms.
        // From the last: the first alerts (no supervisor, overdue, stalled) keep their words longest.
        let tight = (0..items.len())
            .rev()
            .find(|i| level[*i] < 2 && items[*i].part != Part::Title)
            .or_else(|| (0..items.len()).find(|i| level[*i] < 2));
        if let Some(i) = tight {
            level[i] = 2;
            continue;
        }
        break;
    }
    let mut out: Vec<(String, Style)> = items
        .into_iter()
        .zip(level)
        .map(|(mut i, l)| (std::mem::take(&mut i.forms[l]), i.style))
        .filter(|(t, _)| !t.is_empty())
        .collect();
    // A separator left dangling at the end is dropped.
    if let Some((t, _)) = out.last_mut()
        && let Some(stripped) = t.strip_suffix(" · ")
    {
        *t = format!("{stripped} ");
    }
    out
}

/// The alert counts of a header, `▲ 2 overdue`, in the order they are dropped last to first (the
/// live header and the replay's bar show the same).
pub(super) fn alerts(c: &crate::live::snapshot::Counts) -> Vec<String> {
    alert_kinds(c)
        .map(|(n, what, _)| format!("▲ {n} {what}"))
        .collect()
}

/// The alert counts present: (count, word, the glyph the tight header shows).
fn alert_kinds(
    c: &crate::live::snapshot::Counts,
) -> impl Iterator<Item = (usize, &'static str, &'static str)> {
    [
        (c.overdue, "overdue", "▲"),
        (c.stalled, "stalled", "⊘"),
        (c.stale, "stale", "◔"),
        (c.expired, "expired", "✗"),
        (c.deadlocks, "deadlock", "⟲"),
        (c.orphaned, "orphaned (redispatch)", "∅"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
}

/// Each alert count's three header forms: `▲ 2 overdue · `, `▲2 overdue `, and its own glyph with
/// the number (`▲2 `, `⊘1 `, `◔1 `, `✗1 `, `⟲1 `, `∅1 `), so a tight header still tells them apart.
fn alert_forms(c: &crate::live::snapshot::Counts) -> Vec<[String; 3]> {
    alert_kinds(c)
        .map(|(n, what, glyph)| {
            let word = what.split(' ').next().unwrap_or(what);
            [
                format!("▲ {n} {what} · "),
                format!("{glyph}{n} {word} "),
                format!("{glyph}{n} "),
            ]
        })
        .collect()
}

/// Seconds of message rate the header shows.
const HEADER_SPARK: usize = 8;

/// A sparkline: one block per value, its height relative to the largest (`▁` is zero).
pub(crate) fn sparkline(values: &[u32]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().copied().max().unwrap_or(0).max(1) as u64;
    values
        .iter()
        .map(|v| {
            let v = *v as u64;
            let i = if v == 0 {
                0
            } else {
                (v * 7).div_ceil(max).clamp(1, 7)
            };
            BARS[i as usize]
        })
        .collect()
}

/// The tab bar's labels: whole titles when they fit, else (first dropping the keyless panes past 9
/// that are not on screen) short ones (the current pane's whole), else numbers only for the others.
/// The Attention tab counts its items.
fn tab_labels(app: &App, width: usize) -> Vec<(Pane, String)> {
    let waiting = app.attention_count();
    let label = |p: Pane, how: u8| {
        // The key that goes there, as the operator bound it (none past 9: `:pane NAME`).
        let key = app
            .keymap()
            .pane_key(p)
            .map(|k| format!("{k} "))
            .unwrap_or_default();
        let mut l = match how {
            0 => format!(" {key}{} ", p.title()),
            1 => format!(" {key}{} ", p.short_title()),
            _ if key.is_empty() => format!(" {} ", p.short_title()),
            _ => format!(" {key}"),
        };
        if p == Pane::Attention && waiting > 0 {
            // Beside a bare number the count says what it is (`7 @9`, not `7 9`, which reads as
            // two tabs).
            let count = if how >= 2 && !key.is_empty() {
                format!("@{waiting}")
            } else {
                waiting.to_string()
            };
            l.insert_str(l.len() - 1, &format!(" {count}"));
        }
        l
    };
    // Panes with no key (past 9) go first when space is short, unless they are on screen.
    let tries = [(0u8, true), (0, false), (1, false), (2, false)];
    for (how, keyless) in tries {
        let labels: Vec<(Pane, String)> = Pane::ALL
            .into_iter()
            .filter(|p| keyless || *p == app.pane() || app.keymap().pane_key(*p).is_some())
            .filter(|p| *p == app.pane() || p.view().in_tabs(app))
            .map(|p| (p, label(p, if p == app.pane() { how.min(1) } else { how })))
            .collect();
        let w: usize = labels.iter().map(|(_, l)| l.chars().count() + 1).sum();
        if w <= width || how == 2 {
            return labels;
        }
    }
    Vec::new()
}

/// The flash and notification history (`:messages`), newest first.
fn messages(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let r = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    frame.render_widget(ratatui::widgets::Clear, r);
    let title = format!(" Messages: {} · any key closes ", app.messages().len());
    if app.messages().is_empty() {
        return empty(frame, r, title, "No message yet.", theme);
    }
    let lines: Vec<Line> = app
        .messages()
        .iter()
        .rev()
        .take(r.height.saturating_sub(2) as usize)
        .map(|m| {
            let (style, glyph) = match m.kind {
                FlashKind::Info => (theme.info(), "ℹ"),
                FlashKind::Success => (theme.ok(), "✔"),
                FlashKind::Error => (theme.alert(), "✗"),
            };
            let at = if app.absolute_times() {
                m.at.format("%Y-%m-%d %H:%M:%S").to_string()
            } else {
                crate::engine::time::relative(m.at, app.now())
            };
            Line::from(vec![
                Span::styled(format!("{at:>10} "), theme.dim()),
                Span::styled(format!("{glyph} {}", m.text), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block(title, theme)), r);
}

/// The bridge's status in the header (docs/NATS.md): connected or not, server, lag, last error.
fn bridge_items(items: &mut Vec<HeaderItem>, b: &crate::engine::nats::Status, theme: &Theme) {
    let connected = b.connected;
    let lag = b.total_lag();
    let (mark, style) = if connected {
        ("●", theme.accent())
    } else {
        ("○", theme.warn())
    };
    items.push(HeaderItem::extra(
        8,
        format!(
            "· ⇄ {} {mark} {} {} lag {lag} ",
            b.name,
            if connected {
                "connected"
            } else {
                "disconnected"
            },
            b.server,
        ),
        style,
    ));
    if let Some(e) = &b.last_error {
        items.push(HeaderItem::extra(
            8,
            format!("({}) ", trunc(e, 60)),
            theme.dim(),
        ));
    }
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = Vec::new();
    let mut drawn = Vec::new();
    let mut x = 0usize;
    for (p, label) in tab_labels(app, area.width as usize) {
        let w = label.chars().count();
        drawn.push((x, w, p));
        x += w + 1;
        let style = if p == app.pane() {
            theme.tab_active()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    *app.drawn().tabs.borrow_mut() = drawn;
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let line = match &app.mode() {
        Mode::Filter(edit) => {
            let mut l = editor_line("/", edit, theme);
            l.push_span(Span::styled("  Enter keep · Esc clear", theme.dim()));
            l
        }
        Mode::Command(cl) => {
            let mut l = editor_line(":", &cl.edit, theme);
            match &cl.candidates {
                // What Tab found stays beside the open line until the next edit.
                Some(c) => l.push_span(Span::styled(format!("   {c}"), theme.info())),
                None => l.push_span(Span::styled("  Tab complete · ↑↓ history", theme.dim())),
            }
            l
        }
        _ => match &app.shown_flash() {
            Some(f) => {
                let (style, glyph) = match f.kind {
                    FlashKind::Info => (theme.info(), "ℹ"),
                    FlashKind::Success => (theme.ok(), "✔"),
                    FlashKind::Error => (theme.alert(), "✗"),
                };
                Line::from(Span::styled(format!("{glyph} {}", f.text), style))
            }
            None if !app.pane_state().picked.is_empty() => Line::from(vec![
                Span::styled(
                    format!("● {} marked", app.pane_state().picked.len()),
                    theme.accent(),
                ),
                Span::styled(
                    format!(
                        "  an action applies to every mark · {} unmark · {} clears",
                        app.keymap().key_for(&super::keymap::Action::ToggleMark),
                        app.keymap().key_for(&super::keymap::Action::Back)
                    ),
                    theme.dim(),
                ),
            ]),
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
    let km = &app.keymap();
    let ro = app.read_only();
    let hints: Vec<(String, &str)> = match &app.mode() {
        Mode::Confirm(_) => km.hints_in(&[Scope::Dialog(Dialog::Confirm)], ro),
        Mode::AckMenu { .. } => km.hints_in(&[Scope::Dialog(Dialog::AckMenu)], ro),
        Mode::Prompt(_) => km.hints_in(&[Scope::Dialog(Dialog::Prompt)], ro),
        Mode::Help(_) => km.hints_in(&[Scope::Dialog(Dialog::Help)], ro),
        Mode::Issues => vec![("any key".into(), "close file issues")],
        _ if app.pane_state().detail => km
            .detail_hints(app.pane(), ro, &|a| app.offers(a))
            .into_iter()
            .filter(|(k, _)| !matches!(k.as_str(), "Enter" | "/" | ":" | "Tab"))
            .collect(),
        _ => km.hints_offered(&Keymap::scopes(app.pane(), false), ro, &|a| app.offers(a)),
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
    if edit.is_suggested() {
        // A suggestion reads as one: dim, the cursor before it (typing replaces it).
        return Line::from(vec![
            Span::styled(prompt, theme.key()),
            Span::styled("▏", theme.key()),
            Span::styled(edit.text().to_owned(), theme.dim()),
            Span::styled(
                "  (suggested: Enter takes it, typing replaces it)",
                theme.dim(),
            ),
        ]);
    }
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

/// The current pane's rows for [`table::list`]: `len` of them, the selected one highlighted unless
/// it went away.
fn rows_of(app: &App, len: usize) -> table::Rows {
    table::Rows {
        len,
        selected: app.selected(app.pane()),
        no_highlight: app.pane_state().gone.is_some(),
    }
}

/// What a list title adds when the rows are sorted: `· by AGE ↑ `.
pub(crate) fn order_note(app: &App) -> String {
    let mut out = filter_note(app);
    if let Some(s) = &app.pane_state().sort {
        out.push_str(&format!(
            "· by {} {} ",
            s.column,
            if s.descending { "↓" } else { "↑" }
        ));
    }
    out
}

/// The title's note of an active `/` filter, as k9s shows it: `· 3 of 14 · /fail ` (empty without
/// a filter), so a narrowed list never passes for the whole one.
pub(crate) fn filter_note(app: &App) -> String {
    let text = &app.pane_state().filter;
    if text.is_empty() {
        return String::new();
    }
    format!(
        "· {} of {} · /{} ",
        app.row_count(),
        unfiltered_count(app),
        super::clipboard::printable(text)
    )
}

/// How many rows the current pane lists without its `/` filter (its other narrowing kept: the
/// hidden finished workflows, the inbox `]` chose).
fn unfiltered_count(app: &App) -> usize {
    use super::items;
    let f = items::Filter::parse("")
        .at(app.now())
        .hiding_finished(app.panes().workflows.hide_finished && app.pane() == Pane::Workflows)
        .in_inbox(
            app.panes()
                .inboxes
                .god
                .clone()
                .filter(|_| app.pane() == Pane::Inboxes),
        );
    app.pane().view().count(app, &f)
}

/// The head every list pane shares: with no row to show it says why (`none`, or `unmatched` when the
/// pane's filter hides them all), and a detail whose record went away says so. True: the pane is drawn.
pub(crate) fn list_head(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    head: ListHead<'_>,
) -> bool {
    if head.len == 0 {
        let text = if app.filter(head.pane).is_empty() {
            head.none
        } else {
            head.unmatched
        };
        empty(frame, area, head.title.to_owned(), text, theme);
        return true;
    }
    gone_detail(frame, area, app, theme)
}

/// What [`list_head`] needs of a list: its pane, title and length, and what it says with no row.
pub(crate) struct ListHead<'s> {
    pub pane: Pane,
    pub title: &'s str,
    pub len: usize,
    /// Said when the pane has no record at all.
    pub none: &'s str,
    /// Said when the pane's filter hides every record.
    pub unmatched: &'s str,
}

/// In a detail view whose record went away, says so instead of showing a neighbour (true: drawn).
pub(crate) fn gone_detail(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) -> bool {
    let st = app.pane_state();
    let Some(k) = st.gone.as_ref().filter(|_| st.detail) else {
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

/// What the raw detail of a file-backed record (`v` in its detail) shows: the file's path, then
/// its JSON as read, or why it cannot be read. The title names the key that toggles it back,
/// [`raw_key`].
pub(crate) fn raw_lines<'a, T>(
    whole: &Result<std::sync::Arc<crate::live::snapshot::Whole<T>>, String>,
    path: &std::path::Path,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let mut lines = match whole {
        Ok(x) => json_lines(&x.raw, theme),
        Err(e) => vec![Line::styled(format!("⚠ {e}"), theme.warn())],
    };
    lines.insert(0, Line::styled(path.display().to_string(), theme.dim()));
    lines
}

/// The key that toggles a detail between its typed and its raw view.
pub(crate) fn raw_key(app: &App) -> String {
    app.keymap()
        .key_for(&crate::console::keymap::Action::ToggleRaw)
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
    // In replay, the paths a detail shows name the recorded root's files, not the scratch root's.
    let (title, lines) = if app.replay().is_some() {
        (app.shown_text(&title).into_owned(), shown_lines(app, lines))
    } else {
        (title, lines)
    };
    let wrapped = wrap::wrap_lines(lines, inner_w);
    let total = wrapped.len();
    let max = total.saturating_sub(inner_h).min(u16::MAX as usize) as u16;
    app.drawn().detail_max.set(max);
    let scroll = app.pane_state().scroll.min(max);
    let first = scroll as usize + 1;
    let last = (scroll as usize + inner_h).min(total);
    let mut pos = String::from(" ");
    let rows = app.row_count();
    if app.pane_state().gone.is_none() && rows > 0 {
        pos.push_str(&format!(
            "record {}/{rows} · ",
            app.selected(app.pane()) + 1
        ));
    }
    if total > inner_h {
        pos.push_str(&format!("lines {first}-{last}/{total} "));
    } else {
        pos.push_str(&format!("{total} lines "));
    }
    // A title wider than the box ends in `…`, never cut bare.
    let title = table::fit(Line::raw(title), area.width.saturating_sub(2));
    let block = block(title, theme).title_bottom(Line::styled(pos, theme.dim()).right_aligned());
    frame.render_widget(
        Paragraph::new(wrapped).block(block).scroll((scroll, 0)),
        area,
    );
}

/// `lines` with every span's text as [`App::shown_text`] writes it.
fn shown_lines<'a>(app: &App, lines: Vec<Line<'a>>) -> Vec<Line<'a>> {
    lines
        .into_iter()
        .map(|mut l| {
            for s in &mut l.spans {
                if let std::borrow::Cow::Owned(t) = app.shown_text(&s.content) {
                    s.content = t.into();
                }
            }
            l
        })
        .collect()
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
    let title = table::fit(Line::raw(title), area.width.saturating_sub(2));
    frame.render_widget(
        Paragraph::new(Line::styled(text.to_owned(), theme.dim()))
            .block(block(title, theme))
            .wrap(Wrap { trim: true }),
        area,
    );
}
