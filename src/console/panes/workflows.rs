//! Pane 1: workflows, with step history, context bag, acks and gates on Enter, raw state on `v`.

use crate::console::app::FlashKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::{when, when_at};
use crate::live::ledger::{tokens, usd};
use crate::live::snapshot::WorkflowView;

use crate::console::items::{Column, Filter};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{detail, empty, kv, raw_key, raw_lines, section, trunc};
use crate::engine::WorkflowState;

/// The Workflows pane's own state.
#[derive(Debug, Clone, Default)]
pub struct WorkflowsState {
    /// Finished workflows are left out of the list (`h`, `:finished`).
    pub hide_finished: bool,
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let filter = app.filter(Pane::Workflows);
    let rows = items::workflows(app.snapshot(), &filter);
    let st = app.pane_state();
    let mut title = format!(" {} ({}) ", Pane::Workflows.heading(), rows.len());
    if app.panes().workflows.hide_finished {
        let finished = app
            .snapshot()
            .workflows
            .iter()
            .filter(|w| w.state.status.is_finished())
            .count();
        title.push_str(&format!("· {finished} finished hidden (h) "));
    }
    title.push_str(&crate::console::views::order_note(app));
    if rows.is_empty() {
        let s = &app.snapshot();
        let text = if s.workflows.is_empty() && s.inboxes.is_empty() && s.tracks.is_empty() {
            "This root has no pantheon in it yet. To watch one at work run `pantheon demo`; \
             to start one here run `pantheon init`, then `pantheon handoff submit FILE`. \
             See README.md, \"Quick start\"."
        } else if s.workflows.is_empty() {
            "No workflow state under conductor/state yet: `pantheon handoff submit FILE` starts one."
        } else if app.panes().workflows.hide_finished && app.pane_state().filter.is_empty() {
            "Every workflow is finished and finished ones are hidden: h shows them."
        } else {
            "No workflow matches the filter."
        };
        return empty(frame, area, title, text, theme);
    }
    let sel = app.selected(Pane::Workflows);
    if crate::console::views::gone_detail(frame, area, app, theme) {
        return;
    }
    if st.detail {
        return draw_detail(frame, area, app, rows[sel], theme);
    }
    let now = app.now();
    // The cost column shows once the root records usage or declares a budget.
    let costed = app.snapshot().has_cost();
    let row = |w: &&WorkflowView| {
        let s = &w.state;
        let (sstyle, glyph) = theme.workflow_status(&s.status);
        let ack = items::ack_state(w);
        let (astyle, aglyph) = theme.ack_status(&ack);
        let overdue = app.snapshot().overdue(w, now);
        let age = when_at(
            s.created.as_ref().or(s.updated.as_ref()),
            now,
            app.absolute_times(),
        );
        let mut flag = Span::raw("");
        let paused = app
            .snapshot()
            .paused
            .covering(s.dispatched_to.as_deref().unwrap_or_default(), &w.id);
        if let Some(why) = &overdue {
            flag = Span::styled(format!("▲ OVERDUE {why}"), theme.alert());
        } else if let Some(p) = paused {
            flag = Span::styled(format!("⏸ paused ({})", p.target().label()), theme.warn());
        } else if w.warning.is_some() {
            flag = Span::styled("⚠ file changed, showing last good", theme.warn());
        }
        let mut cells = vec![
            Line::from(Span::styled(
                w.id.to_string(),
                if overdue.is_some() {
                    theme.alert()
                } else {
                    theme.base()
                },
            )),
            Line::from(s.definition_id.as_deref().unwrap_or("-").to_owned()),
            Line::from(Span::styled(format!("{glyph} {}", s.status), sstyle)),
            Line::from(s.current_step.as_deref().unwrap_or("-").to_owned()),
            Line::from(s.dispatched_to.as_deref().unwrap_or("-").to_owned()),
            Line::from(age),
            Line::from(Span::styled(format!("{aglyph} {ack}"), astyle)),
        ];
        if costed {
            cells.push(cost_cell(app, w, theme));
        }
        cells.push(Line::from(flag));
        cells
    };
    let cols: &[Col] = if costed { &COLUMNS_COST } else { &COLUMNS };
    crate::console::views::pane_table(
        frame,
        area,
        app,
        theme,
        crate::console::views::table::Listing {
            title,
            cols,
            items: &rows,
        },
        row,
    );
}

/// The cost column: the usage the workflow's state records, red once a budget of it is reached.
fn cost_cell(app: &App, w: &WorkflowView, theme: &Theme) -> Line<'static> {
    let over = app.snapshot().over_budget(w);
    match &w.state.cost {
        Some(c) if c.usage.total.reports > 0 || over => Line::styled(
            format!(
                "{}{}",
                if over { "▲ " } else { "" },
                usd(c.usage.total.cost_micros)
            ),
            if over { theme.alert() } else { theme.base() },
        ),
        _ if over => Line::styled("▲ $0.00", theme.alert()),
        _ => Line::styled("-", theme.dim()),
    }
}

/// The table's columns; narrow terminals hide AGE, then DEFINITION, GOD, COST and STEP (all in the
/// detail view) before they cut a workflow id: at 60 columns the ids stay whole and tell the rows
/// apart.
const COLUMNS: [Col; 8] = [
    Col::new("WORKFLOW", 12, 48).keep(),
    Col::new("DEFINITION", 10, 32).hide(2),
    Col::new("STATUS", 12, 22),
    Col::new("STEP", 6, 24).hide(5),
    Col::new("GOD", 6, 16).hide(3),
    Col::new("AGE", 6, 19).hide(1),
    Col::new("ACK", 8, 14),
    Col::new("", 12, 80).flex(),
];

/// [`COLUMNS`] with the cost column, for a root that records usage or declares a budget.
const COLUMNS_COST: [Col; 9] = [
    Col::new("WORKFLOW", 12, 48).keep(),
    Col::new("DEFINITION", 10, 32).hide(2),
    Col::new("STATUS", 12, 22),
    Col::new("STEP", 6, 24).hide(5),
    Col::new("GOD", 6, 16).hide(3),
    Col::new("AGE", 6, 19).hide(1),
    Col::new("ACK", 8, 14),
    Col::new("COST", 5, 12).hide(4),
    Col::new("", 12, 80).flex(),
];

fn draw_detail(frame: &mut Frame, area: Rect, app: &App, w: &WorkflowView, theme: &Theme) {
    // The table keeps a compact state; the detail reads the file whole (once per version).
    let whole = w.whole();
    if app.pane_state().raw {
        let title = format!(" {} · raw state ({}) ", w.id, raw_key(app));
        return detail(
            frame,
            area,
            title,
            raw_lines(&whole, &w.path(), theme),
            app,
            theme,
        );
    }
    let known;
    let s = match &whole {
        Ok(x) => &x.typed,
        Err(_) => {
            known = w.state.to_state(&w.id);
            &known
        }
    };
    let mut l = state_fields(w, s, whole.as_ref().err(), app, theme);
    cost_section(&mut l, app, w, theme);
    history_section(&mut l, app, s, theme);
    bag_section(&mut l, s, theme);
    acks_section(&mut l, app, s, theme);
    waiting_section(&mut l, app, w, theme);
    manifest_section(&mut l, w, theme);
    let title = format!(" {} · {} ", w.id, trunc(&app.shown_path(&w.path()), 80));
    detail(frame, area, title, l, app, theme);
}

/// The head of a workflow's detail: its status, definition, step and god, its times, and what is
/// wrong with it or its file (`unread`: why it could not be read whole).
fn state_fields<'a>(
    w: &WorkflowView,
    s: &WorkflowState,
    unread: Option<&String>,
    app: &App,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let now = app.now();
    let abs = app.absolute_times();
    let (sstyle, glyph) = theme.workflow_status(&s.status);
    let mut l: Vec<Line> = vec![
        kv("status", format!("{glyph} {}", s.status), sstyle, theme),
        kv(
            "definition",
            format!(
                "{} {}",
                s.definition_id.as_deref().unwrap_or("-"),
                s.definition_version.as_deref().unwrap_or("")
            ),
            theme.base(),
            theme,
        ),
        kv(
            "current step",
            s.current_step.clone().unwrap_or_else(|| "-".into()),
            theme.base(),
            theme,
        ),
        kv(
            "dispatched to",
            s.dispatched_to.clone().unwrap_or_else(|| "-".into()),
            theme.base(),
            theme,
        ),
        kv(
            "created",
            when(s.created.as_deref(), now, abs),
            theme.base(),
            theme,
        ),
        kv(
            "updated",
            when(s.updated.as_deref(), now, abs),
            theme.base(),
            theme,
        ),
    ];
    if let Some(t) = &s.completion_target {
        l.push(kv("target", when(Some(t), now, abs), theme.base(), theme));
    }
    if let Some(why) = app.snapshot().overdue(w, now) {
        l.push(kv("OVERDUE", why, theme.alert(), theme));
    }
    if let Some(e) = unread {
        l.push(kv(
            "⚠ file",
            format!("{e}; showing the summary only"),
            theme.warn(),
            theme,
        ));
    }
    if let Some(r) = &s.failure_reason {
        l.push(kv("failure", r.clone(), theme.alert(), theme));
    }
    if let Some(warn) = &w.warning {
        l.push(kv("⚠ file", warn.clone(), theme.warn(), theme));
    }
    l
}

/// Every step record: its god, status and time, its summary, and its gates (the ones the
/// definition declares, passed or not, then any other passed).
fn history_section(l: &mut Vec<Line>, app: &App, s: &WorkflowState, theme: &Theme) {
    let (now, abs) = (app.now(), app.absolute_times());
    section(l, "Step history", theme);
    if s.step_history.is_empty() {
        l.push(Line::styled("  (none)", theme.dim()));
    }
    let def = app.snapshot().definition(s.definition_id.as_deref());
    for r in &s.step_history {
        let (style, g) = match r.status.as_str() {
            "completed" => (theme.ok(), "✓"),
            "in_progress" => (theme.info(), "●"),
            _ => (theme.base(), "·"),
        };
        l.push(Line::from(vec![
            Span::styled(format!("  {g} {:<14}", r.step_id), style),
            Span::raw(format!("{:<12}", r.god)),
            Span::styled(format!("{:<10}", r.status), style),
            Span::styled(when(r.completed_at.as_deref(), now, abs), theme.dim()),
        ]));
        if let Some(sum) = &r.summary {
            l.push(Line::styled(format!("      {sum}"), theme.dim()));
        }
        let declared = def
            .and_then(|d| d.step(&r.step_id))
            .map(|s| s.gates.clone())
            .unwrap_or_default();
        if !r.gates_passed.is_empty() || !declared.is_empty() {
            let mut spans = vec![Span::styled("      gates: ", theme.dim())];
            for g in &declared {
                let ok = r.gates_passed.contains(g);
                spans.push(Span::styled(
                    format!("{}{g} ", if ok { "✓" } else { "✗" }),
                    if ok { theme.ok() } else { theme.alert() },
                ));
            }
            for g in r.gates_passed.iter().filter(|g| !declared.contains(g)) {
                spans.push(Span::styled(format!("✓{g} "), theme.ok()));
            }
            l.push(Line::from(spans));
        }
    }
}

/// The context bag: decisions, artifacts and open questions.
fn bag_section(l: &mut Vec<Line>, s: &WorkflowState, theme: &Theme) {
    section(l, "Context bag", theme);
    let bag = &s.context_bag;
    for (name, list) in [
        ("decisions", &bag.decisions),
        ("artifacts", &bag.artifacts),
        ("open questions", &bag.open_questions),
    ] {
        l.push(Line::styled(
            format!("  {name} ({})", list.len()),
            theme.dim(),
        ));
        for item in list {
            l.push(Line::raw(format!("    • {item}")));
        }
    }
}

/// Every ack recorded: its status, handoff, who and when, and its message.
fn acks_section(l: &mut Vec<Line>, app: &App, s: &WorkflowState, theme: &Theme) {
    let (now, abs) = (app.now(), app.absolute_times());
    section(l, "Acks", theme);
    if s.acks.is_empty() {
        l.push(Line::styled("  (none)", theme.dim()));
    }
    for a in &s.acks {
        let st = items::AckShown::Status(a.status.clone());
        let (style, g) = theme.ack_status(&st);
        l.push(Line::from(vec![
            Span::styled(format!("  {g} {st:<10}"), style),
            Span::raw(format!(
                "{} by {} {}",
                a.handoff_id,
                a.by.as_deref().or(a.god.as_deref()).unwrap_or("?"),
                when(a.acked_at.as_deref(), now, abs)
            )),
        ]));
        if let Some(m) = &a.message {
            l.push(Line::styled(format!("      {m}"), theme.dim()));
        }
    }
}

/// The dispatches of the workflow still in an inbox, when there are any.
fn waiting_section(l: &mut Vec<Line>, app: &App, w: &WorkflowView, theme: &Theme) {
    if w.waiting.is_empty() {
        return;
    }
    let (now, abs) = (app.now(), app.absolute_times());
    section(l, "Waiting dispatches", theme);
    for (god, d) in &w.waiting {
        l.push(Line::raw(format!(
            "  {} → {god} (step {}, {}, {}{})",
            d.handoff_id,
            d.step,
            d.ack_status,
            when_at(d.dispatched_at.as_ref(), now, abs),
            crate::console::items::delivery_note(d, now)
                .map(|n| format!(", deliveries {n}"))
                .unwrap_or_default()
        )));
    }
}

/// The abort manifest of an aborted workflow, when it has one.
fn manifest_section(l: &mut Vec<Line>, w: &WorkflowView, theme: &Theme) {
    let Some(m) = &w.manifest else {
        return;
    };
    section(l, "Abort manifest", theme);
    l.push(kv(
        "failed step",
        m.failed_step.clone().unwrap_or_default(),
        theme.base(),
        theme,
    ));
    l.push(kv(
        "reason",
        m.failure_reason.clone().unwrap_or_default(),
        theme.base(),
        theme,
    ));
    l.push(kv(
        "marked",
        m.artifacts_marked.len().to_string(),
        theme.base(),
        theme,
    ));
    l.push(kv(
        "withdrawn",
        m.dispatches_withdrawn.join(", "),
        theme.base(),
        theme,
    ));
    if m.requires_manual_review {
        l.push(kv("review", "requires manual review", theme.alert(), theme));
    }
}

/// The detail's cost: the workflow's usage, by step (from its state) and by god (from the ledger),
/// and its budgets' bars. Nothing for a workflow with neither usage nor a budget.
fn cost_section(l: &mut Vec<Line>, app: &App, w: &WorkflowView, theme: &Theme) {
    let snap = &app.snapshot();
    let bars = snap.workflow_bars(w);
    let by_god = snap.ledger.workflows.get(&w.id);
    let Some(c) = w
        .state
        .cost
        .as_deref()
        .filter(|c| c.usage.total.reports > 0)
    else {
        if bars.is_empty() {
            return;
        }
        section(l, "Cost", theme);
        l.push(Line::styled("  no usage reported yet", theme.dim()));
        return budget_lines(l, app, &bars, theme);
    };
    let figures = |t: &crate::engine::Totals| {
        format!(
            "{:>10}  {:>8} tokens  {} report(s){}",
            usd(t.cost_micros),
            tokens(t.tokens()),
            t.reports,
            if t.unpriced > 0 {
                format!(", {} unpriced", t.unpriced)
            } else {
                String::new()
            }
        )
    };
    section(l, "Cost", theme);
    l.push(Line::raw(format!(
        "  {:<20}{}",
        "total",
        figures(&c.usage.total)
    )));
    l.push(Line::styled("  by step", theme.dim()));
    // Step and god names here come from reports (a bus line's step is the god's own text).
    for (step, t) in &c.usage.steps {
        let step = crate::text::escape_bidi(step);
        l.push(Line::raw(format!("    {step:<18}{}", figures(t))));
    }
    l.push(Line::styled("  by god", theme.dim()));
    match by_god {
        Some(gods) => {
            for (god, t) in gods.iter() {
                let god = crate::text::escape_bidi(god);
                l.push(Line::raw(format!("    {god:<18}{}", figures(t))));
            }
            let seen: u64 = gods.values().map(|t| t.reports).sum();
            if seen < c.usage.total.reports {
                l.push(Line::styled(
                    format!(
                        "    ({} older report(s) lie before the part of the ledger read)",
                        c.usage.total.reports - seen
                    ),
                    theme.dim(),
                ));
            }
        }
        None if snap.ledger.from > 0 => l.push(Line::styled(
            "    (its reports lie before the part of the ledger read)",
            theme.dim(),
        )),
        None => l.push(Line::styled(
            "    (not in the ledger yet: the supervisor's next pass adds it)",
            theme.dim(),
        )),
    }
    budget_lines(l, app, &bars, theme);
}

fn budget_lines(l: &mut Vec<Line>, app: &App, bars: &[crate::live::ledger::Bar], theme: &Theme) {
    let warn_at = app.snapshot().ledger.warn_share();
    for b in bars {
        let share = b.share();
        let style = if b.reached() {
            theme.alert()
        } else if share >= warn_at {
            theme.warn()
        } else {
            theme.ok()
        };
        l.push(Line::styled(
            format!(
                "  budget {} {}: {:.0}% ({}){}",
                b.scope,
                b.name,
                share * 100.0,
                b.figures(),
                if b.reached() {
                    " · reached: its next dispatch is held"
                } else {
                    ""
                }
            ),
            style,
        ));
    }
}

/// Pane 1: every workflow, unfinished first.
pub(crate) struct Workflows;

pub(crate) fn go_dispatch(app: &mut App) {
    let Some(wf) = app.selected_workflow() else {
        return;
    };
    let key = app
        .snapshot()
        .workflows
        .iter()
        .find(|w| *w.id == *wf.as_str())
        .and_then(|w| w.waiting.first().cloned())
        .and_then(|(god, d)| {
            items::dispatches(app.snapshot(), &Filter::default())
                .iter()
                .find(|r| *r.god == *god && r.view.dispatch.handoff_id == d.handoff_id)
                .map(items::DispatchRow::key)
        });
    match key {
        Some(k) => {
            app.jump_to(Pane::Inboxes, &k);
        }
        None => app.flash(FlashKind::Info, format!("{wf} has no dispatch waiting")),
    }
}

impl ListPane for Workflows {
    type Row<'a> = &'a crate::live::snapshot::WorkflowView;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::workflows(app.snapshot(), filter)
    }

    fn key(&self, w: &Self::Row<'_>) -> RowKey {
        RowKey::Workflow(w.id.clone())
    }

    fn is(&self, w: &Self::Row<'_>, key: &RowKey) -> bool {
        matches!(key, RowKey::Workflow(id) if w.id == *id)
    }
}

impl PaneView for Workflows {
    fn title(&self) -> &'static str {
        "Workflows"
    }

    fn short_title(&self) -> &'static str {
        "Wf"
    }

    fn sort_columns(&self) -> &'static [Column] {
        &[
            Column::Workflow,
            Column::Definition,
            Column::Status,
            Column::Step,
            Column::God,
            Column::Age,
            Column::Ack,
        ]
    }

    fn yank(&self, app: &App, filter: &Filter, i: usize) -> Option<String> {
        items::workflows(app.snapshot(), filter)
            .get(i)
            .map(|w| w.id.to_string())
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn grows_with_root(&self) -> bool {
        true
    }
}
