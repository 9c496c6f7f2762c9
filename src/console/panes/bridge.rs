//! `:pane bridge`: the NATS bridge of this root (docs/NATS.md). On top, its status as the running
//! bridge last wrote it (connected, server, counts, lag, last error); below, one row per shared
//! track (its cursor and counts), then the outbox records waiting, the dead letters and the sent
//! records. Enter shows a row's whole record.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::console::app::App;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::when;
use crate::live::snapshot::BridgeKind;

use crate::console::items::Filter;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{block, empty, json_lines, trunc};
use crate::engine::nats::Status;

/// The peers' pauses the running bridge heard (its status file's `peer_pauses`, docs/NATS.md),
/// those not expired at the console's `now`; none without a status file or in another shape.
pub(crate) fn peer_pauses(app: &App) -> Vec<crate::engine::nats::PeerPauses> {
    app.snapshot()
        .bridge
        .as_deref()
        .and_then(|b| b.extra.get("peer_pauses"))
        .and_then(serde_json::Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|x| {
                    serde_json::from_value::<crate::engine::nats::PeerPauses>(x.clone()).ok()
                })
                .filter(|p| crate::engine::nats::peer_pauses_live(p, app.now()))
                .collect()
        })
        .unwrap_or_default()
}

/// `tallon: god hermes since 10:01 (+1)`: a peer and its first pause, with how many more.
pub(crate) fn peer_pause_text(p: &crate::engine::nats::PeerPauses, app: &App) -> String {
    let Some(first) = p.pauses.first() else {
        return p.peer.clone();
    };
    let what = match &first.name {
        Some(n) => format!("{} {n}", first.kind),
        None => first.kind.to_string(),
    };
    let since = when(Some(&first.since), app.now(), app.absolute_times());
    let more = (p.pauses.len() - 1).saturating_add(p.more);
    let more = if more > 0 {
        format!(" (+{more})")
    } else {
        String::new()
    };
    format!("{}: {what} since {since}{more}", p.peer)
}

/// The status box's line of the peers' pauses: `⏸ peers paused: tallon: god hermes since 10:01
/// (incident) · konan: all since 09:58`.
fn peer_pause_line<'a>(peers: &[crate::engine::nats::PeerPauses], app: &App, theme: &Theme) -> Line<'a> {
    let list: Vec<String> = peers
        .iter()
        .map(|p| {
            let why = p
                .pauses
                .first()
                .map(|x| format!(" ({})", trunc(&x.reason, 40)))
                .unwrap_or_default();
            format!("{}{why}", peer_pause_text(p, app))
        })
        .collect();
    Line::styled(format!("⏸ peers paused: {}", list.join(" · ")), theme.warn())
}

/// The status box's lines.
fn status_lines<'a>(b: &Status, app: &App, theme: &Theme, width: usize) -> Vec<Line<'a>> {
    let (mark, word, style) = if b.connected {
        ("●", "connected", theme.accent())
    } else {
        ("○", "disconnected", theme.warn())
    };
    let lag = b.total_lag();
    let mut out = vec![Line::from(vec![
        Span::styled(format!("{} ", b.name), theme.key()),
        Span::styled(format!("{mark} {word} "), style),
        Span::raw(trunc(&b.server, width.saturating_sub(40).max(10))),
        Span::styled(
            format!(
                " · pid {} · updated {}",
                b.pid,
                when(b.updated(), app.now(), app.absolute_times())
            ),
            theme.dim(),
        ),
    ])];
    out.push(Line::raw(format!(
        "published {} · received {} · dead-lettered {} · outbox pending {} · lag {lag}",
        b.published, b.received, b.dead_lettered, b.outbox_pending,
    )));
    out.push(match (b.stuck.first(), &b.last_error) {
        // A record that cannot be published outranks the last error: it names what to do.
        (Some(first), _) => Line::styled(
            format!(
                "{} record(s) cannot be published (the rest go out): {} {}",
                b.stuck.len(),
                first.outbox_id,
                first.why()
            ),
            theme.alert(),
        ),
        (None, Some(e)) => Line::styled(format!("last error: {e}"), theme.alert()),
        (None, None) => Line::styled("no error", theme.dim()),
    });
    let peers = peer_pauses(app);
    if !peers.is_empty() {
        out.push(peer_pause_line(&peers, app, theme));
    }
    out
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let v = &app.snapshot().bridge_view;
    let status = app.snapshot().bridge.as_deref();
    if status.is_none() && v.rows.is_empty() {
        return empty(
            frame,
            area,
            " Bridge ".into(),
            "No bridge has run in this root (conductor/bridge/status.json): start one with \
             `pantheon bridge --nats URL --name PANTHEON` (docs/NATS.md).",
            theme,
        );
    }
    // The status box takes five rows (six with a line of the peers' pauses) when the pane has
    // room for a table below it.
    let high = if status.is_some() && !peer_pauses(app).is_empty() {
        6
    } else {
        5
    };
    let (top, rest) = if area.height >= high + 6 {
        let [t, r] =
            Layout::vertical([Constraint::Length(high), Constraint::Min(3)]).areas(area);
        (Some(t), r)
    } else {
        (None, area)
    };
    if let Some(t) = top {
        let lines = match status {
            Some(b) => status_lines(b, app, theme, t.width as usize),
            None => vec![Line::styled(
                "No status file: the bridge is not running (conductor/bridge/status.json).",
                theme.warn(),
            )],
        };
        frame.render_widget(
            Paragraph::new(lines)
                .block(block(" Bridge status ", theme))
                .wrap(Wrap { trim: true }),
            t,
        );
    }
    let rows = bridge_rows(app);
    let tracks = v
        .rows
        .iter()
        .filter(|r| r.kind == BridgeKind::Track)
        .count();
    let mut title = format!(
        " {} ({tracks} tracks · {} pending · {} dead · {} sent",
        Pane::Bridge.heading(),
        v.pending,
        v.dead,
        v.sent
    );
    if !v.unreadable.is_empty() {
        title.push_str(&format!(" · {} unreadable", v.unreadable.len()));
    }
    title.push_str(") ");
    let texts = (
        "No shared track, outbox record or dead letter yet.",
        "No bridge record matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Bridge,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, rest, app, theme, head) {
        return;
    }
    let sel = app.selected(Pane::Bridge);
    if app.pane_state().detail {
        let r = rows[sel];
        return crate::console::views::detail(
            frame,
            area,
            format!(" {} {} ", r.kind.word(), r.id),
            json_lines(&r.raw, theme),
            app,
            theme,
        );
    }
    let row = |r: &&crate::live::snapshot::BridgeRow| {
        let style = match r.kind {
            BridgeKind::Dead => theme.alert(),
            BridgeKind::Pending => theme.warn(),
            BridgeKind::Track => theme.key(),
            BridgeKind::Sent => theme.dim(),
        };
        vec![
            Line::styled(r.kind.word(), style),
            Line::raw(r.id.clone()),
            Line::raw(r.subject.clone()),
            Line::raw(when(
                (!r.at.is_empty()).then_some(r.at.as_str()),
                app.now(),
                app.absolute_times(),
            )),
            Line::raw(r.what.clone()),
        ]
    };
    crate::console::views::pane_table(
        frame,
        rest,
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

const COLUMNS: [Col; 5] = [
    Col::new("KIND", 4, 7).keep(),
    Col::new("ID", 8, 40),
    Col::new("SUBJECT", 8, 40).hide(1),
    Col::new("AT", 6, 19),
    Col::new("WHAT", 12, 200).flex(),
];

/// Pane 10: the NATS bridge.
pub(crate) struct Bridge;

/// The Bridge pane's rows through `f`.
pub(crate) fn bridge_rows_through<'a>(
    app: &'a App,
    f: &Filter,
) -> Vec<&'a crate::live::snapshot::BridgeRow> {
    app.snapshot()
        .bridge_view
        .rows
        .iter()
        .filter(|r| {
            f.is_empty()
                || f.matches_text(&format!(
                    "{} {} {} {} {}",
                    r.kind.word(),
                    r.id,
                    r.subject,
                    r.what,
                    r.at
                ))
        })
        .collect()
}

/// The rows of the Bridge pane: tracks, pending, dead and sent records, through its filter.
pub(crate) fn bridge_rows(app: &App) -> Vec<&crate::live::snapshot::BridgeRow> {
    crate::console::panes::bridge::bridge_rows_through(app, &app.filter(Pane::Bridge))
}

impl ListPane for Bridge {
    type Row<'a> = &'a crate::live::snapshot::BridgeRow;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        bridge_rows_through(app, filter)
    }

    fn key(&self, r: &Self::Row<'_>) -> RowKey {
        RowKey::Bridge {
            kind: r.kind,
            id: r.id.as_str().into(),
        }
    }
}

impl PaneView for Bridge {
    fn title(&self) -> &'static str {
        "Bridge"
    }

    fn short_title(&self) -> &'static str {
        "Brdg"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    /// Retry and discard are offered on a waiting outbox record only.
    fn offers(&self, app: &App, action: &crate::console::keymap::Action) -> Option<bool> {
        use crate::console::keymap::{Action, OperatorAction};
        match action {
            Action::Operator(OperatorAction::OutboxRetry | OperatorAction::OutboxDiscard) => Some(
                bridge_rows(app)
                    .get(app.selected(Pane::Bridge))
                    .is_some_and(|r| r.kind == BridgeKind::Pending),
            ),
            _ => None,
        }
    }
}
