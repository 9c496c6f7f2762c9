//! Pane 4: file locks of every track: holder, acquired, time left or expired.

use crate::console::app::FlashKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::when;
use crate::engine::time::relative;
use crate::live::snapshot::short_duration;

use crate::console::items::{Column, Filter};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::kv;
use crate::console::views::table::Col;

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let filter = app.filter(Pane::Locks);
    let rows = items::locks(app.snapshot(), &filter);
    let title = format!(
        " {} ({}) {}",
        Pane::Locks.heading(),
        rows.len(),
        crate::console::views::order_note(app)
    );
    let texts = ("No file is locked.", "No lock matches the filter.");
    let head = crate::console::views::ListHead {
        pane: Pane::Locks,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let sel = app.selected(Pane::Locks);
    let now = app.now();
    if app.pane_state().detail {
        return draw_detail(frame, area, app, theme, rows[sel]);
    }
    let cycles = cycle_locks(app);
    let row = |(track, l): &(&str, &crate::engine::LockEntry)| {
        let left = match l.expires() {
            Some(t) if t <= now => {
                Span::styled(format!("✗ EXPIRED {}", relative(t, now)), theme.alert())
            }
            Some(t) => Span::styled(format!("◷ {} left", short_duration(t - now)), theme.ok()),
            None => Span::styled("∞ no expiry", theme.dim()),
        };
        vec![
            Line::styled(track.to_string(), theme.dim()),
            if cycles
                .iter()
                .any(|(t, p)| t.as_str() == *track && *p == l.path)
            {
                Line::styled(format!("⟲ CYCLE {}", l.path), theme.alert())
            } else {
                Line::raw(l.path.clone())
            },
            Line::raw(l.worker_id.clone().unwrap_or_else(|| "-".into())),
            Line::raw(l.lock_type.clone().unwrap_or_else(|| "exclusive".into())),
            Line::raw(when(l.acquired_at.as_deref(), now, app.absolute_times())),
            Line::from(left),
        ]
    };
    // With locks of two or more tracks the track says which file is meant: it is never hidden.
    let mut cols = COLUMNS;
    if rows.iter().any(|(t, _)| *t != rows[0].0) {
        cols[0] = Col::new("TRACK", 8, 32);
    }
    crate::console::views::pane_table(
        frame,
        area,
        app,
        theme,
        crate::console::views::table::Listing {
            title,
            cols: &cols,
            items: &rows,
        },
        row,
    );
}

/// The selected lock's detail: its holder and times, the holder's heartbeat, and who waits for it.
fn draw_detail(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    (track, l): (&str, &crate::engine::LockEntry),
) {
    let now = app.now();
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
            match (l.acquired_at.as_deref(), l.acquired()) {
                (Some(text), Some(t)) => format!("{text} ({})", relative(t, now)),
                (Some(text), None) => text.to_owned(),
                (None, _) => "-".into(),
            },
            theme.base(),
            theme,
        ),
        match (l.expires_at.as_deref(), l.expires()) {
            (Some(text), Some(t)) if t <= now => kv(
                "expires",
                format!("{text} (✗ expired {})", relative(t, now)),
                theme.alert(),
                theme,
            ),
            (Some(text), Some(t)) => kv(
                "expires",
                format!("{text} (in {})", short_duration(t - now)),
                theme.base(),
                theme,
            ),
            (Some(text), None) => kv("expires", text.to_owned(), theme.warn(), theme),
            (None, _) => kv("expires", "no expiry", theme.dim(), theme),
        },
    ];
    // The holder's heartbeat, and who waits for this file (BLOCKED on it), from the track.
    let t = items::track(app.snapshot(), Some(track));
    let holder = l
        .worker_id
        .as_deref()
        .and_then(|h| t.and_then(|t| t.workers.iter().find(|w| w.worker_id == h)));
    lines.push(match holder {
        Some(w) => {
            let stale = w.is_stale(now, app.snapshot().stale_threshold());
            kv(
                "holder beat",
                format!(
                    "{} · {}{}",
                    w.heartbeat().map_or("never".into(), |b| relative(b, now)),
                    w.status,
                    if stale { " · ▲ STALE" } else { "" }
                ),
                if stale { theme.alert() } else { theme.base() },
                theme,
            )
        }
        None => kv(
            "holder beat",
            "no heartbeat from the holder",
            theme.dim(),
            theme,
        ),
    });
    let waiters = t.map(|t| waiters(t, &l.path)).unwrap_or_default();
    lines.push(kv(
        "waiters",
        if waiters.is_empty() {
            "nobody is BLOCKED on it".to_owned()
        } else {
            waiters.join(", ")
        },
        if waiters.is_empty() {
            theme.dim()
        } else {
            theme.warn()
        },
        theme,
    ));
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
    crate::console::views::detail(
        frame,
        area,
        format!(" lock · {} ", l.path),
        lines,
        app,
        theme,
    )
}

/// The workers BLOCKED on `path` (their newest message says so) and still blocked, newest first.
fn waiters(t: &crate::live::snapshot::TrackView, path: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in t.messages.iter().rev() {
        let waits_here =
            m.kind == "BLOCKED" && m.payload.get("resource").and_then(|v| v.as_str()) == Some(path);
        let still = t
            .workers
            .iter()
            .find(|w| w.worker_id == m.source)
            .is_none_or(|w| w.status.to_string() == "BLOCKED");
        if waits_here && still && !out.contains(&m.source) {
            out.push(m.source.clone());
        }
    }
    out
}

/// The table's columns: the path is the lock's identity, cut last.
const COLUMNS: [Col; 6] = [
    Col::new("TRACK", 8, 32).hide(1),
    Col::new("PATH", 12, 90).keep(),
    Col::new("HOLDER", 8, 36),
    Col::new("TYPE", 6, 10).hide(2),
    Col::new("ACQUIRED", 6, 19).hide(3),
    Col::new("TIME LEFT", 10, 24),
];

/// Pane 4: every lock of every track.
pub(crate) struct Locks;

pub(crate) fn cycle_lock(app: &mut App) {
    let locks = cycle_locks(app);
    if locks.is_empty() {
        return app.flash(FlashKind::Info, "no deadlock cycle holds a lock");
    }
    // The selected worker's track first; pressed again, the next lock of the cycles.
    let track = crate::console::panes::workers::selected_worker(app).map(|(t, _)| t);
    let current = app.selected_key(Pane::Locks);
    let mut order: Vec<&(String, String)> = locks
        .iter()
        .filter(|(t, _)| Some(t) == track.as_ref())
        .collect();
    order.extend(locks.iter().filter(|(t, _)| Some(t) != track.as_ref()));
    let at = order
        .iter()
        .position(|(t, p)| current.as_ref().is_some_and(|k| k.is_lock(t, p)))
        .map_or(0, |i| (i + 1) % order.len());
    let (t, p) = order[at].clone();
    if app.jump_to(Pane::Locks, &RowKey::lock(&t, &p)) {
        app.flash(
            FlashKind::Info,
            format!("{p} is in a deadlock cycle ({t}) · u force-unlocks it"),
        );
    }
}

/// Every lock in a deadlock cycle: (track, path).
pub(crate) fn cycle_locks(app: &App) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in app.snapshot().tracks.iter() {
        for cycle in t.deadlock_locks.iter() {
            for p in cycle {
                let k = (t.name.clone(), p.clone());
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
    }
    out
}

impl ListPane for Locks {
    type Row<'a> = (&'a str, &'a crate::engine::LockEntry);

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::locks(app.snapshot(), filter)
    }

    fn key(&self, (t, l): &Self::Row<'_>) -> RowKey {
        RowKey::lock(t, &l.path)
    }
}

impl PaneView for Locks {
    fn title(&self) -> &'static str {
        "Locks"
    }

    fn short_title(&self) -> &'static str {
        "Lock"
    }

    fn sort_columns(&self) -> &'static [Column] {
        &[
            Column::Track,
            Column::Path,
            Column::Holder,
            Column::Type,
            Column::Acquired,
            Column::TimeLeft,
        ]
    }

    fn yank(&self, app: &App, filter: &Filter, i: usize) -> Option<String> {
        items::locks(app.snapshot(), filter)
            .get(i)
            .map(|(_, l)| l.path.clone())
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }
}
