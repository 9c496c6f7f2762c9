//! The replay's chrome: a header bar in a colour of its own that says the console shows the past
//! (the moment, how long ago, which change of how many, the key back to live), and the scrub line
//! in place of the footer (play state, speed, where in the history, the keys that move).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::App;
use crate::console::keymap::Action;
use crate::console::replay::scrub::{ReplayView, ago, bar};
use crate::console::theme::Theme;
use crate::engine::time::instant;

/// The moment as the header writes it (UTC, to the second).
fn moment(us: i64) -> String {
    instant(us).format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// Whole pieces while they fit `room` columns, in order (the first is always kept).
fn fit(pieces: Vec<String>, room: usize) -> String {
    let mut out = String::new();
    for (i, p) in pieces.into_iter().enumerate() {
        let w = Line::raw(p.as_str()).width();
        if i > 0 && Line::raw(out.as_str()).width() + w > room {
            break;
        }
        out.push_str(&p);
    }
    out
}

/// `REPLAY 2026-12-02 03:12:04 UTC (-1h12m) — change 418/2210 — L live — read-only — ▲ 1 overdue`.
pub(super) fn header(frame: &mut Frame, area: Rect, app: &App, v: &ReplayView, theme: &Theme) {
    let (n, total) = v.counter();
    let live = app.keymap().key_for(&Action::ReplayLive);
    let waiting = app.attention_count();
    let mut pieces = vec![
        format!(" ↺ REPLAY {}", moment(v.moment_us)),
        format!(" ({})", ago(app.wall().timestamp_micros(), v.moment_us)),
        match v.loading {
            Some((done, total)) => format!(" — laying out {done} of {total} files"),
            None => String::new(),
        },
        format!(" — change {n}/{total}"),
        format!(" — {live} live"),
        " — read-only".to_owned(),
        if waiting > 0 {
            format!(" — @ {waiting} needed you then")
        } else {
            String::new()
        },
    ];
    // The alerts the live header would have shown at that moment ("now" is the moment).
    let counts = app.snapshot().counts(app.now());
    pieces.extend(
        super::alerts(&counts)
            .into_iter()
            .map(|a| format!(" — {a}")),
    );
    let text = fit(pieces, area.width as usize);
    let pad = (area.width as usize).saturating_sub(Line::raw(text.as_str()).width());
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(
            format!("{text}{}", " ".repeat(pad)),
            theme.past(),
        ))),
        area,
    );
}

/// `▶ 10x ━━━●──── 03:12:04 put conductor/state/wf_x.json · , . step · { } journal · …`.
pub(super) fn scrub_line(frame: &mut Frame, area: Rect, app: &App, v: &ReplayView, theme: &Theme) {
    let km = &app.keymap();
    let k = |a: Action| km.key_for(&a);
    let state = if v.playing {
        format!(" ▶ {}x ", v.speed())
    } else {
        format!(" ‖ {}x ", v.speed())
    };
    let (n, total) = v.counter();
    // A narrow terminal keeps the keys; the header has the moment already.
    let wide = area.width >= 100;
    let mut spans = vec![
        Span::styled(state, theme.past()),
        Span::styled(
            format!(" {} ", bar(n, total, if wide { 12 } else { 6 })),
            theme.accent(),
        ),
    ];
    if wide {
        spans.push(Span::styled(
            instant(v.moment_us).format("%H:%M:%S ").to_string(),
            theme.base(),
        ));
    }
    let hints = [
        (
            format!("{} {}", k(Action::ReplayBack), k(Action::ReplayForward)),
            "step",
        ),
        (
            format!(
                "{} {}",
                k(Action::ReplayPrevJournal),
                k(Action::ReplayNextJournal)
            ),
            "journal",
        ),
        (
            format!(
                "{} {}",
                k(Action::ReplayPrevAttention),
                k(Action::ReplayNextAttention)
            ),
            if wide { "attention" } else { "attn" },
        ),
        (
            k(Action::ReplayPlay),
            if v.playing { "pause" } else { "play" },
        ),
        (
            format!("{} {}", k(Action::ReplaySlower), k(Action::ReplayFaster)),
            "speed",
        ),
        (
            k(Action::ReplayHeartbeats),
            if v.heartbeats { "skip beats" } else { "beats" },
        ),
        (k(Action::ReplayLive), "live"),
    ];
    let help = (k(Action::Help), "help");
    let width = |key: &str, what: &str| key.chars().count() + what.chars().count() + 3;
    let used: usize = spans.iter().map(Span::width).sum();
    let mut room = (area.width as usize).saturating_sub(used + width(&help.0, help.1));
    let mut keys = Vec::new();
    for (key, what) in hints.into_iter().chain(std::iter::once(help.clone())) {
        let w = width(&key, what);
        // `? help` is always shown, last (its room was kept).
        if what != "help" {
            if w > room {
                continue;
            }
            room -= w;
        }
        keys.push(Span::styled(format!(" {key}"), theme.key()));
        keys.push(Span::styled(format!(" {what} "), theme.dim()));
    }
    // What the last change did, where the keys leave room for it.
    if let Some(c) = &v.change
        && room > 12
    {
        // Too long: the kind and the file's name (`app journal.jsonl`), then cut.
        let short = match c.split_once(' ') {
            Some((kind, path)) if path.contains('/') && c.chars().count() > room - 3 => {
                format!("{kind} {}", path.rsplit('/').next().unwrap_or(path))
            }
            _ => c.clone(),
        };
        let cut: String = short.chars().take(room - 3).collect();
        spans.push(Span::styled(format!("{cut} ·"), theme.dim()));
    }
    spans.extend(keys);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
