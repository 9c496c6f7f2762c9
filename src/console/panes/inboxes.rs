//! Pane 2: per-god inboxes (count, oldest, unacked), every dispatch with its context, the quarantine.

use crate::console::app::FlashKind;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::{when, when_at};
use crate::live::snapshot::InboxView;

use crate::console::items::{Column, Filter};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::{self, Col};
use crate::console::views::{detail, empty, kv, raw_key, raw_lines, section};
use crate::engine::Dispatch;

/// The Inboxes pane's own state.
#[derive(Debug, Clone, Default)]
pub struct InboxesState {
    /// The inbox the dispatch list is narrowed to (`]`/`[`): a god or `_quarantine`.
    pub god: Option<String>,
}

/// The god cell of a dispatch row: `⏸` for a dispatch a pause holds or one in a paused inbox, `‖`
/// for one held for approval (each names the god it is meant for).
fn god_cell<'a>(r: &items::DispatchRow, app: &App, theme: &Theme) -> Line<'a> {
    let d = &r.view.dispatch;
    if r.held && crate::engine::held_by_pause(d.held_because.as_deref()) {
        Line::styled(format!("⏸ {}", d.to_god), theme.warn())
    } else if r.held {
        Line::styled(format!("‖ {}", d.to_god), theme.accent())
    } else if app
        .snapshot()
        .paused
        .covering(r.god, &d.workflow_id)
        .is_some()
    {
        Line::styled(format!("⏸ {}", r.god), theme.warn())
    } else {
        Line::styled(r.god.to_owned(), theme.base())
    }
}

fn summary_row<'a>(i: &InboxView, app: &App, theme: &Theme, held: bool) -> Vec<Line<'a>> {
    // Worked out by the model once per change of the inbox.
    let oldest = i
        .oldest_at
        .as_deref()
        .map(|t| when(Some(t), app.now(), app.absolute_times()))
        .unwrap_or_else(|| "-".into());
    let unacked = i.unacked;
    let name = if held {
        "‖ _quarantine".to_owned()
    } else if app.snapshot().paused.covering(&i.god, "").is_some_and(|p| {
        matches!(
            p.kind,
            crate::engine::PauseKind::God | crate::engine::PauseKind::All
        )
    }) {
        format!("⏸ {}", i.god)
    } else {
        i.god.clone()
    };
    vec![
        Line::styled(name, if held { theme.accent() } else { theme.base() }),
        Line::raw(i.dispatches.len().to_string()),
        Line::raw(oldest),
        Line::styled(
            unacked.to_string(),
            if unacked > 0 {
                theme.warn()
            } else {
                theme.dim()
            },
        ),
        Line::styled(
            app.depth(&i.god)
                .filter(|_| !held)
                .map(|v| crate::console::views::sparkline(&v.iter().copied().collect::<Vec<_>>()))
                .unwrap_or_default(),
            theme.info(),
        ),
        Line::styled(
            if i.errors.is_empty() {
                String::new()
            } else {
                format!("⚠ {} unreadable", i.errors.len())
            },
            theme.warn(),
        ),
    ]
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot();
    let filter = app.filter(Pane::Inboxes);
    let rows = items::dispatches(snap, &filter);
    let st = app.pane_state();
    let sel = app.selected(Pane::Inboxes);
    if crate::console::views::gone_detail(frame, area, app, theme) {
        return;
    }
    if st.detail && !rows.is_empty() {
        return draw_detail(frame, area, app, rows[sel], theme);
    }
    let n_sum = snap.inboxes.len() + 1;
    let sum_h = (n_sum as u16 + 3).min(area.height / 2).max(4);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(sum_h), Constraint::Min(3)]).areas(area);
    // The quarantine first: it holds what waits for the operator, so it is never scrolled away.
    let inboxes: Vec<(&InboxView, bool)> = std::iter::once((&*snap.quarantine, true))
        .chain(snap.inboxes.iter().map(|i| (i, false)))
        .collect();
    let chosen = app
        .panes()
        .inboxes
        .god
        .as_ref()
        .and_then(|g| inboxes.iter().position(|(i, _)| i.god == *g));
    let mut sum_title = format!(
        " {} ({} gods) ",
        Pane::Inboxes.heading(),
        snap.inboxes.len()
    );
    if let Some(g) = &app.panes().inboxes.god {
        sum_title.push_str(&format!("· showing {g} ([ ] other gods) "));
    }
    let marks = app.marks();
    table::list(
        frame,
        top,
        table::Head {
            title: sum_title,
            cols: &SUMMARY,
            marks: &marks,
            theme,
        },
        &inboxes,
        table::Rows {
            len: inboxes.len(),
            selected: chosen.unwrap_or(0),
            no_highlight: chosen.is_none(),
        },
        |(i, held)| summary_row(i, app, theme, *held),
    );
    let title = format!(
        " Dispatches ({}) {}",
        rows.len(),
        crate::console::views::order_note(app)
    );
    if rows.is_empty() {
        let text = match &app.panes().inboxes.god {
            Some(g) => format!("No dispatch is waiting in {g}'s inbox ([ ] other gods)."),
            None => "No dispatch is waiting.".to_owned(),
        };
        return empty(frame, bottom, title, &text, theme);
    }
    let row = |r: &items::DispatchRow| {
        let d = &r.view.dispatch;
        let overdue = items::dispatch_overdue(snap, r.view, r.held, app.now()).is_some();
        vec![
            // A held dispatch names the god it is meant for.
            god_cell(r, app, theme),
            Line::raw(if d.handoff_id.is_empty() {
                r.view.name.to_string()
            } else {
                d.handoff_id.to_string()
            }),
            Line::raw(d.workflow_id.to_string()),
            Line::raw(d.step.to_string()),
            Line::raw(d.from_god.to_string()),
            Line::styled(
                when_at(d.dispatched_at.as_ref(), app.now(), app.absolute_times()),
                if overdue { theme.alert() } else { theme.base() },
            ),
            ack_cell(r, overdue, app, theme, None),
            summary_cell(d, app, theme),
        ]
    };
    // A dispatch with an ack deadline on screen: the ACK column keeps room for the deadline's
    // shortest form, so it is never cut mid-word.
    let height = bottom.height.saturating_sub(3) as usize;
    let (first, _) = crate::console::views::window(app.selected(Pane::Inboxes), rows.len(), height);
    let due_shown = rows
        .iter()
        .skip(first)
        .take(height)
        .any(|r| r.view.dispatch.ack_deadline.is_some() && r.view.dispatch.deliveries > 0);
    let cols = if due_shown {
        &DISPATCHES_DUE
    } else {
        &DISPATCHES
    };
    crate::console::views::pane_table_refit(
        frame,
        bottom,
        app,
        theme,
        table::Listing {
            title,
            cols,
            items: &rows,
        },
        row,
        |r, col, width| {
            (col == ACK_COL).then(|| {
                let overdue = items::dispatch_overdue(snap, r.view, r.held, app.now()).is_some();
                ack_cell(r, overdue, app, theme, Some(width))
            })
        },
    );
}

/// The SUMMARY cell of a dispatch: a `pending` ack's ETA and message first (`eta in 2h · waiting for
/// the API keys · `), then the context's summary.
fn summary_cell<'a>(d: &crate::live::snapshot::DispatchRow, app: &App, theme: &Theme) -> Line<'a> {
    let mut spans = Vec::new();
    if let Some(p) = &d.pending {
        if let Some(eta) = &p.eta {
            spans.push(Span::styled(
                format!("eta {} · ", when_at(Some(eta), app.now(), app.absolute_times())),
                theme.info(),
            ));
        }
        if let Some(m) = &p.message {
            spans.push(Span::styled(
                format!("{} · ", crate::console::clipboard::printable(m)),
                theme.info(),
            ));
        }
    }
    spans.push(Span::styled(d.summary.to_string(), theme.dim()));
    Line::from(spans)
}

/// The ACK cell of a dispatch: its status, `▲ OVERDUE`, and the delivery count and ack deadline
/// (`1/3 due 12s`). Given a `width`, the longest of its forms that fits: `OVERDUE` becomes its
/// `▲`, the status word its glyph, then the count goes; the deadline is kept whole.
fn ack_cell<'a>(
    r: &items::DispatchRow,
    overdue: bool,
    app: &App,
    theme: &Theme,
    width: Option<u16>,
) -> Line<'a> {
    let d = &r.view.dispatch;
    let ack = items::AckShown::of_dispatch(&d.ack_status, r.held);
    let (astyle, g) = theme.ack_status(&ack);
    let parts = items::delivery_parts(d, app.now());
    let form = |word: bool, flag: &str, count: bool| {
        let note = match &parts {
            Some((c, Some(due))) if count => format!(" {c} {due}"),
            Some((_, Some(due))) => format!(" {due}"),
            Some((c, None)) if count => format!(" {c}"),
            _ => String::new(),
        };
        Line::from(vec![
            Span::styled(
                if word {
                    format!("{g} {ack}")
                } else {
                    g.to_string()
                },
                astyle,
            ),
            Span::styled(
                if overdue {
                    flag.to_owned()
                } else {
                    String::new()
                },
                theme.alert(),
            ),
            Span::styled(note, theme.dim()),
        ])
    };
    let full = form(true, " ▲ OVERDUE", true);
    // Only a cell with a deadline has shorter forms: the deadline is what they keep.
    let Some(width) = width.filter(|_| matches!(parts, Some((_, Some(_))))) else {
        return full;
    };
    [
        form(true, " ▲", true),
        form(false, " ▲", true),
        form(false, " ▲", false),
    ]
    .into_iter()
    .find(|l| l.width() <= width as usize)
    .unwrap_or_else(|| form(false, " ▲", false))
}

/// The per-god summary's columns.
const SUMMARY: [Col; 6] = [
    Col::new("GOD", 8, 24).keep(),
    Col::new("COUNT", 5, 7),
    Col::new("OLDEST", 6, 19),
    Col::new("UNACKED", 7, 9),
    Col::new("DEPTH 5m", 8, 30).hide(1),
    Col::new("", 10, 40).flex(),
];

/// The dispatch table's columns: the summary takes the room left over; FROM and AGE go first when
/// it is narrow, before a handoff id is cut.
const DISPATCHES: [Col; 8] = [
    Col::new("GOD", 6, 16),
    Col::new("HANDOFF", 10, 32).keep(),
    Col::new("WORKFLOW", 10, 40),
    Col::new("STEP", 6, 24),
    Col::new("FROM", 6, 16).hide(2),
    Col::new("AGE", 6, 19).hide(1),
    Col::new("ACK", 6, 32),
    Col::new("SUMMARY", 10, 200).flex(),
];

/// Where ACK is among [`DISPATCHES`].
const ACK_COL: usize = 6;

/// [`DISPATCHES`] while a dispatch with an ack deadline is on screen: ACK is at least as wide as
/// its shortest form with a deadline (`○ ▲ due 119s`).
const DISPATCHES_DUE: [Col; 8] = {
    let mut cols = DISPATCHES;
    cols[ACK_COL] = Col::new("ACK", 12, 32);
    cols
};

fn draw_detail(frame: &mut Frame, area: Rect, app: &App, r: items::DispatchRow, theme: &Theme) {
    let v = r.view;
    // The table keeps a compact dispatch; the detail reads the file whole (once per version).
    let whole = v.whole();
    if app.pane_state().raw {
        let title = format!(" {} · raw ({}) ", v.name, raw_key(app));
        return detail(
            frame,
            area,
            title,
            raw_lines(&whole, &v.path(), theme),
            app,
            theme,
        );
    }
    let known;
    let d = match &whole {
        Ok(x) => &x.typed,
        Err(_) => {
            known = v.dispatch.to_dispatch();
            &known
        }
    };
    let mut l = dispatch_fields(&r, d, whole.as_ref().err(), app, theme);
    context_sections(&mut l, d, theme);
    detail(
        frame,
        area,
        format!(" {} · {} ", r.god, v.name),
        l,
        app,
        theme,
    );
}

/// The head of a dispatch's detail: where it is, what it carries on from, its delivery and ack,
/// and what is wrong with its file (`unread`: why it could not be read whole).
fn dispatch_fields<'a>(
    r: &items::DispatchRow,
    d: &Dispatch,
    unread: Option<&String>,
    app: &App,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let now = app.now();
    let abs = app.absolute_times();
    let ack = items::AckShown::of_dispatch(&d.ack_status, r.held);
    let (astyle, g) = theme.ack_status(&ack);
    let mut l = vec![
        kv("inbox", r.god.to_owned(), theme.base(), theme),
        kv(
            "dispatch",
            d.dispatch_id.clone().unwrap_or_else(|| "-".into()),
            theme.base(),
            theme,
        ),
        kv("handoff", d.handoff_id.clone(), theme.base(), theme),
        kv("workflow", d.workflow_id.clone(), theme.base(), theme),
        kv("step", d.step.clone(), theme.base(), theme),
        kv(
            "from → to",
            format!("{} → {}", d.from_god, d.to_god),
            theme.base(),
            theme,
        ),
        kv(
            "dispatched",
            when(d.dispatched_at.as_deref(), now, abs),
            theme.base(),
            theme,
        ),
        kv("ack", format!("{g} {ack}"), astyle, theme),
    ];
    // The delivery count and when the current delivery's ack is due (docs/PROTOCOL.md §2.10).
    let row = &r.view.dispatch;
    if row.deliveries > 0 {
        let max = row.max_deliveries.map_or("?".into(), |m| m.to_string());
        l.push(kv(
            "deliveries",
            format!("{} of {max}", row.deliveries),
            theme.base(),
            theme,
        ));
    }
    if let Some(due) = &row.ack_deadline {
        let late = due.at().is_some_and(|t| t <= now);
        l.push(kv(
            "ack deadline",
            when(Some(due.text().as_ref()), now, abs),
            if late { theme.alert() } else { theme.base() },
            theme,
        ));
    }
    if let Some(e) = &d.eta {
        l.push(kv("eta", when(Some(e), now, abs), theme.base(), theme));
    }
    if let Some(m) = &d.message {
        l.push(kv("message", m.clone(), theme.base(), theme));
    }
    if let Some(h) = &d.held_because {
        l.push(kv("held because", h.clone(), theme.accent(), theme));
    }
    // A held item's links (none yet: the key that mints them), and those of one a link released.
    let linked = app.snapshot().links.by_handoff.contains_key(&d.handoff_id);
    if linked || (r.held && !crate::engine::held_by_pause(d.held_because.as_deref())) {
        link_lines(&mut l, &d.handoff_id, app, theme);
    }
    if let Some(w) = &r.view.warning {
        l.push(kv("⚠ file", w.clone(), theme.warn(), theme));
    }
    if let Some(e) = unread {
        l.push(kv(
            "⚠ file",
            format!("{e}; showing the summary only"),
            theme.warn(),
            theme,
        ));
    }
    l
}

/// The most link pairs a held item's detail lists (the newest; older ones are counted).
const LINK_PAIRS_SHOWN: usize = 3;

/// A held item's approval links (docs/PROTOCOL.md §2.15), newest pair first: open (minted when,
/// by which channel, expires when), used (the decision, by whom, through which channel), revoked,
/// superseded (decided another way) or expired; `none` with the key that mints one.
fn link_lines(l: &mut Vec<Line>, handoff_id: &str, app: &App, theme: &Theme) {
    let snap = app.snapshot();
    let Some(records) = snap.links.by_handoff.get(handoff_id) else {
        use crate::console::keymap::{Action, OperatorAction};
        let key = app
            .keymap()
            .key_for(&Action::Operator(OperatorAction::Link));
        l.push(kv(
            "links",
            format!("none · {key} mints a one-time pair"),
            theme.dim(),
            theme,
        ));
        return;
    };
    // The pair of one mint: the approve and reject records name each other.
    let mut pairs: Vec<Vec<&crate::engine::LinkRecord>> = Vec::new();
    for r in records.iter().rev() {
        match pairs
            .iter_mut()
            .find(|p| p.iter().any(|x| x.pair_sha256 == r.token_sha256))
        {
            Some(p) => p.push(r),
            None => pairs.push(vec![r]),
        }
    }
    let (now, abs) = (app.now(), app.absolute_times());
    for (i, pair) in pairs.iter().take(LINK_PAIRS_SHOWN).enumerate() {
        let (text, style) = link_state(pair, now, abs, theme);
        l.push(kv(
            if i == 0 { "links" } else { "" },
            text,
            style,
            theme,
        ));
    }
    if pairs.len() > LINK_PAIRS_SHOWN {
        l.push(kv(
            "",
            format!("+{} older", pairs.len() - LINK_PAIRS_SHOWN),
            theme.dim(),
            theme,
        ));
    }
}

/// One minted pair's state as its records say.
fn link_state(
    pair: &[&crate::engine::LinkRecord],
    now: chrono::DateTime<chrono::Utc>,
    abs: bool,
    theme: &Theme,
) -> (String, ratatui::style::Style) {
    let first = pair[0];
    let ended = |how: &str| {
        pair.iter()
            .filter_map(|r| r.ended.as_ref())
            .find(|e| e.how == how)
    };
    // Who, and through which channel (a link's `by` says both already: `alice via http link`).
    let by = |e: &crate::engine::LinkEnded| {
        if e.by.contains(" via ") {
            e.by.clone()
        } else {
            format!("{} via {}", e.by, e.channel)
        }
    };
    if let Some(e) = ended("used") {
        let outcome = e.outcome.as_deref().unwrap_or("decided");
        let text = format!(
            "used · {outcome} by {} {}",
            by(e),
            when(Some(&e.at), now, abs)
        );
        return (text, theme.ok());
    }
    if let Some(e) = ended("revoked") {
        let text = format!("revoked by {} {}", e.by, when(Some(&e.at), now, abs));
        return (text, theme.dim());
    }
    if let Some(e) = ended("superseded") {
        let outcome = e.outcome.as_deref().unwrap_or("decided");
        let text = format!(
            "ended · {outcome} by {} {}",
            by(e),
            when(Some(&e.at), now, abs)
        );
        return (text, theme.dim());
    }
    let expires = crate::engine::time::parse_ts(&first.expires_at);
    if expires.is_none_or(|t| t <= now) {
        let text = format!("expired {}", when(Some(&first.expires_at), now, abs));
        return (text, theme.warn());
    }
    let text = format!(
        "open · minted {} ({}), expires {}",
        when(Some(&first.minted_at), now, abs),
        first.channel,
        when(Some(&first.expires_at), now, abs)
    );
    (text, theme.accent())
}

/// What a dispatch asks and carries: its step's definition, the summary, the context's lists, the
/// context keys beyond the standard ones, what was left out for size, and the history so far.
fn context_sections(l: &mut Vec<Line>, d: &Dispatch, theme: &Theme) {
    // What the definition's step asks (`action`, `skill`, `output`, …).
    if let Some(serde_json::Value::Object(step_def)) = &d.step_def
        && !step_def.is_empty()
    {
        section(l, "Step", theme);
        for (k, val) in step_def {
            l.push(kv(&shown(k), carried_text(val), theme.base(), theme));
        }
    }
    section(l, "Summary", theme);
    l.push(Line::raw(format!("  {}", d.context.summary)));
    let c = &d.context;
    for (name, list) in [
        ("Decisions", &c.decisions),
        ("Artifacts", &c.artifacts),
        ("Open questions", &c.open_questions),
        ("Gates passed", &c.gates_passed),
    ] {
        section(l, &format!("{name} ({})", list.len()), theme);
        for item in list {
            l.push(Line::raw(format!("  • {item}")));
        }
    }
    // Context keys beyond the standard ones (an inbound request's `payload` and `nats`, the
    // workflow's `spec_summary`, …), and what was left out for size.
    if !c.extra.is_empty() {
        section(l, &format!("Context ({})", c.extra.len()), theme);
        for (k, val) in &c.extra {
            l.push(kv(&shown(k), carried_text(val), theme.base(), theme));
        }
    }
    if let Some(serde_json::Value::Array(omitted)) = &d.omitted
        && !omitted.is_empty()
    {
        let names: Vec<String> = omitted.iter().map(carried_text).collect();
        l.push(kv(
            "⚠ omitted",
            format!(
                "{} (over the size limit; read the handoff)",
                names.join(", ")
            ),
            theme.warn(),
            theme,
        ));
    }
    if !c.history.is_empty() {
        section(l, "History", theme);
        for h in &c.history {
            l.push(Line::from(vec![
                Span::styled(format!("  {:<14}{:<12}", h.step, h.god), theme.info()),
                Span::raw(h.summary.clone()),
            ]));
        }
    }
}

/// Longest text the detail shows of one carried value (a payload may be a megabyte).
const CARRIED_SHOWN: usize = 400;

/// A carried value as one line: a string as is, anything else as compact JSON, control characters
/// as spaces, cut at [`CARRIED_SHOWN`] characters (`y`/raw view shows the whole file).
fn carried_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => shown(s),
        other => shown(&other.to_string()),
    }
}

/// `text` with control characters as spaces, cut at [`CARRIED_SHOWN`] characters.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(CARRIED_SHOWN)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(CARRIED_SHOWN).is_some() {
        out.push('…');
    }
    out
}

/// Pane 2: the inboxes and every dispatch waiting in them.
pub(crate) struct Inboxes;

pub(crate) fn go_workflow(app: &mut App) {
    let wf = match app.selected_dispatch() {
        Some((_, d, _)) => d.workflow_id.to_string(),
        None => match crate::console::panes::deadletters::selected_dead(app) {
            Some((_, _, wf)) => wf,
            None => return app.need("a dispatch or a dead letter"),
        },
    };
    if !app.jump_to(Pane::Workflows, &RowKey::workflow(&wf)) {
        app.flash(
            FlashKind::Error,
            format!("workflow {wf} has no state file here"),
        );
    }
}

pub(crate) fn cycle_god(app: &mut App, forward: bool) {
    let mut names: Vec<String> = vec![crate::engine::layout::QUARANTINE_DIR.into()];
    names.extend(app.snapshot().inboxes.iter().map(|i| i.god.clone()));
    // None (every inbox) sits before the first and after the last.
    let cur = app
        .panes()
        .inboxes
        .god
        .as_ref()
        .and_then(|g| names.iter().position(|n| n == g));
    let next = match (cur, forward) {
        (None, true) => Some(0),
        (None, false) => names.len().checked_sub(1),
        (Some(i), true) => (i + 1 < names.len()).then_some(i + 1),
        (Some(i), false) => i.checked_sub(1),
    };
    let god = next.map(|i| names[i].clone());
    app.relist(Pane::Inboxes, |a| a.panes_mut().inboxes.god = god.clone());
    app.flash(
        FlashKind::Info,
        match god {
            Some(g) => format!("dispatches in {g}'s inbox (] next, [ previous)"),
            None => "dispatches of every inbox".to_owned(),
        },
    );
}

impl ListPane for Inboxes {
    type Row<'a> = items::DispatchRow<'a>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::dispatches(app.snapshot(), filter)
    }

    fn key(&self, r: &Self::Row<'_>) -> RowKey {
        r.key()
    }

    fn is(&self, r: &Self::Row<'_>, key: &RowKey) -> bool {
        r.is(key)
    }
}

impl PaneView for Inboxes {
    fn title(&self) -> &'static str {
        "Inboxes"
    }

    fn short_title(&self) -> &'static str {
        "Inb"
    }

    fn sort_columns(&self) -> &'static [Column] {
        &[
            Column::God,
            Column::Handoff,
            Column::Workflow,
            Column::Step,
            Column::From,
            Column::Age,
            Column::Ack,
        ]
    }

    fn yank(&self, app: &App, filter: &Filter, i: usize) -> Option<String> {
        items::dispatches(app.snapshot(), filter)
            .get(i)
            .map(|r| r.view.dispatch.handoff_id.to_string())
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn grows_with_root(&self) -> bool {
        true
    }
}
