//! Pane 9: dispatches dead-lettered after their last delivery (`conductor/dead/{god}/`), with their
//! payload and whole delivery history in the detail; `R` requeues, `x` aborts the workflow.

use crate::engine::HandoffId;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::{Action, OperatorAction, Pane};
use crate::console::theme::Theme;
use crate::console::times::when;

use crate::console::items::{Column, Filter};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{detail, json_lines, kv, raw_key, raw_lines, section};

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot();
    let rows = items::dead_letters(snap, &app.filter(Pane::DeadLetters));
    let unreadable: usize = snap.dead_letters.iter().map(|i| i.errors.len()).sum();
    let mut title = format!(" {} ({}", Pane::DeadLetters.heading(), rows.len());
    if unreadable > 0 {
        title.push_str(&format!(", ⚠ {unreadable} unreadable: ! lists them"));
    }
    title.push_str(&format!(") {}", crate::console::views::order_note(app)));
    // Only a running supervisor dead-letters: without one, an empty list says nothing about
    // deadlines met.
    let empty = if snap.supervisors.iter().any(|b| b.alive(app.now())) {
        "No dead letter: conductor/dead/ is empty (a supervisor is running and dead-letters a \
         dispatch that runs out of deliveries)."
    } else {
        "No dead letter: conductor/dead/ is empty. No supervisor is running, so missed ack \
         deadlines are not enforced (run `pantheon serve`)."
    };
    let texts = (empty, "No dead letter matches the filter.");
    let head = crate::console::views::ListHead {
        pane: Pane::DeadLetters,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let sel = app.selected(Pane::DeadLetters);
    if app.pane_state().detail {
        return draw_detail(frame, area, app, rows[sel], theme);
    }
    let row = |r: &items::DeadRow| {
        let d = &r.view.dispatch;
        let status = snap
            .workflows
            .iter()
            .find(|w| *w.id == *d.workflow_id)
            .map(|w| w.state.status.to_string());
        let mut reason = r.reason().unwrap_or("").to_owned();
        if let Some(st) = status.as_deref().filter(|s| *s != "stalled") {
            // Requeue refuses once the workflow is finished: say so on the row.
            reason = format!("[workflow {st}] {reason}");
        }
        vec![
            Line::raw(r.god.to_owned()),
            Line::styled(d.handoff_id.to_string(), theme.alert()),
            Line::raw(d.workflow_id.to_string()),
            Line::raw(d.step.to_string()),
            Line::styled(r.deliveries(), theme.warn()),
            Line::raw(when(r.dead_at(), app.now(), app.absolute_times())),
            Line::raw(r.last_target().to_owned()),
            Line::styled(reason, theme.dim()),
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

/// The columns: the handoff id is kept whole; the reason takes the room left over.
const COLUMNS: [Col; 8] = [
    Col::new("GOD", 6, 16),
    Col::new("HANDOFF", 10, 32).keep(),
    Col::new("WORKFLOW", 10, 40),
    Col::new("STEP", 6, 24).hide(1),
    Col::new("DELIV", 5, 7),
    Col::new("DEAD SINCE", 6, 19),
    Col::new("LAST TARGET", 6, 16).hide(2),
    Col::new("REASON", 10, 200).flex(),
];

fn draw_detail(frame: &mut Frame, area: Rect, app: &App, r: items::DeadRow, theme: &Theme) {
    let v = r.view;
    // The row is compact; the detail reads the file whole (payload, delivery history).
    let whole = v.whole();
    if app.pane_state().raw {
        let title = format!(" dead {} · raw ({}) ", v.name, raw_key(app));
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
    let now = app.now();
    let abs = app.absolute_times();
    let status = app
        .snapshot()
        .workflows
        .iter()
        .find(|w| *w.id == *d.workflow_id)
        .map(|w| w.state.status.to_string())
        .unwrap_or_else(|| "no state file".into());
    let mut l = vec![
        kv("dead letters", r.god.to_owned(), theme.base(), theme),
        kv("handoff", d.handoff_id.clone(), theme.alert(), theme),
        kv(
            "workflow",
            format!("{} ({status})", d.workflow_id),
            theme.base(),
            theme,
        ),
        kv("step", d.step.clone(), theme.base(), theme),
        kv(
            "from → to",
            format!("{} → {}", d.from_god, d.to_god),
            theme.base(),
            theme,
        ),
        kv("deliveries", r.deliveries(), theme.warn(), theme),
        kv(
            "dead since",
            when(r.dead_at(), now, abs),
            theme.base(),
            theme,
        ),
        kv(
            "reason",
            r.reason().unwrap_or("-").to_owned(),
            theme.warn(),
            theme,
        ),
    ];
    if let Some(w) = &d.ack_wait {
        l.push(kv("ack wait", w.clone(), theme.dim(), theme));
    }
    if let Some(w) = &v.warning {
        l.push(kv("⚠ file", w.clone(), theme.warn(), theme));
    }
    if let Err(e) = &whole {
        l.push(kv(
            "⚠ file",
            format!("{e}; showing the row only"),
            theme.warn(),
            theme,
        ));
    }
    let key = |a: Action| app.keymap().key_for(&a);
    l.push(Line::styled(
        format!(
            "  {} requeues it (to its last god, or another: Tab completes) · {} discards it (retired, with a reason) · {} aborts its workflow",
            key(Action::Operator(OperatorAction::Requeue)),
            key(Action::Operator(OperatorAction::DiscardDead)),
            key(Action::Operator(OperatorAction::Abort))
        ),
        theme.dim(),
    ));
    delivery_history(&mut l, d, app, theme);
    section(&mut l, "Payload (context)", theme);
    let context = match &whole {
        Ok(x) => x
            .raw
            .get("context")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
        Err(_) => serde_json::json!({"summary": d.context.summary}),
    };
    l.extend(json_lines(&context, theme));
    detail(
        frame,
        area,
        format!(" dead letter {} · {} ", r.god, v.name),
        l,
        app,
        theme,
    );
}

/// The dead letter's deliveries, one line each: when, and to whom.
fn delivery_history(
    l: &mut Vec<Line<'static>>,
    d: &crate::engine::Dispatch,
    app: &App,
    theme: &Theme,
) {
    section(
        l,
        &format!("Delivery history ({})", d.deliveries.len()),
        theme,
    );
    for (i, x) in d.deliveries.iter().enumerate() {
        l.push(Line::from(vec![
            Span::styled(format!("  #{:<3}", i + 1), theme.dim()),
            Span::raw(format!(
                "{:<22}",
                when(Some(&x.at), app.now(), app.absolute_times())
            )),
            Span::styled(format!("→ {}", x.to), theme.info()),
        ]));
    }
}

/// Pane 9: the dispatches dead-lettered after their last delivery.
pub(crate) struct DeadLetters;

/// The selected dead letter of pane 9: (its god, its handoff id, its workflow id).
pub(crate) fn selected_dead(app: &App) -> Option<(String, String, String)> {
    if app.pane() != Pane::DeadLetters || app.pane_state().gone.is_some() {
        return None;
    }
    let rows = items::dead_letters(app.snapshot(), &app.filter(Pane::DeadLetters));
    let r = rows.get(app.selected(Pane::DeadLetters))?;
    let d = &r.view.dispatch;
    let hid = if d.handoff_id.is_empty() {
        r.view.name.to_string()
    } else {
        d.handoff_id.to_string()
    };
    Some((r.god.to_owned(), hid, d.workflow_id.to_string()))
}

/// The dead letter of `handoff_id`: (its row key, the god it was delivered to last).
pub(crate) fn dead_row_of(app: &App, handoff_id: &HandoffId) -> Option<(RowKey, String)> {
    items::dead_letters(app.snapshot(), &Filter::default())
        .iter()
        .find(|r| {
            *r.view.dispatch.handoff_id == *handoff_id.as_str()
                || *r.view.name == *handoff_id.as_str()
        })
        .map(|r| (r.key(), r.last_target().to_owned()))
}

impl ListPane for DeadLetters {
    type Row<'a> = items::DeadRow<'a>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::dead_letters(app.snapshot(), filter)
    }

    fn key(&self, row: &Self::Row<'_>) -> RowKey {
        row.key()
    }
}

impl PaneView for DeadLetters {
    fn title(&self) -> &'static str {
        "Dead letters"
    }

    fn short_title(&self) -> &'static str {
        "Dead"
    }

    fn sort_columns(&self) -> &'static [Column] {
        &[
            Column::God,
            Column::Handoff,
            Column::Workflow,
            Column::Step,
            Column::Deliveries,
            Column::DeadSince,
            Column::LastTarget,
        ]
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }
}
