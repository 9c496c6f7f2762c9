//! The Ledger pane (`:pane ledger`): what the gods cost (docs/BUDGETS.md). One row per god (its
//! cost, tokens, burn rate over the last hour, a sparkline of its spend per five minutes, its
//! budget), then one row per budget of the day and of each unfinished workflow and step, each with
//! a bar coloured at the warning share and at the limit. `/over-budget` keeps the reached ones.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items::Filter;
use crate::console::keymap::Pane;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::theme::Theme;
use crate::console::views::table::Col;
use crate::console::views::{detail, kv, sparkline};
use crate::live::ledger::{Bar, GodCost, tokens, usd};
use crate::live::snapshot::Snapshot;
use crate::sources::SourceState;
use crate::sources::claude_usage::TeammateCost;
use crate::text::escape_bidi;

/// One row of the pane.
#[derive(Debug, Clone)]
pub(crate) enum Row<'a> {
    /// A god's spend, and its budget's bars when it has one.
    God(&'a str, &'a GodCost, Vec<Bar>),
    /// A budget of the day, a workflow or a step.
    Budget(Bar),
    /// A foreign agent's cost, as its source logged it (a Claude Code teammate's session logs).
    Foreign(&'a SourceState, &'a TeammateCost),
}

impl Row<'_> {
    /// The row's identity: `god/NAME` or `budget/SCOPE/NAME/METRIC`.
    pub(crate) fn key(&self) -> RowKey {
        match self {
            Row::God(g, ..) => RowKey::God((*g).into()),
            Row::Budget(b) => RowKey::Budget {
                scope: b.scope.into(),
                name: b.name.as_str().into(),
                metric: b.metric.into(),
            },
            Row::Foreign(s, c) => RowKey::ForeignCost {
                source: s.spec().into(),
                team: c.team.as_str().into(),
                agent: c.agent.as_str().into(),
            },
        }
    }

    fn bars(&self) -> &[Bar] {
        match self {
            Row::God(_, _, bars) => bars,
            Row::Budget(b) => std::slice::from_ref(b),
            Row::Foreign(..) => &[],
        }
    }

    /// True when a budget of the row is reached.
    pub(crate) fn over_budget(&self) -> bool {
        self.bars().iter().any(Bar::reached)
    }

    fn haystack(&self) -> String {
        let over = if self.over_budget() {
            crate::console::items::OVER_BUDGET
        } else {
            ""
        };
        match self {
            Row::God(g, ..) => format!("god {g} {over}"),
            Row::Budget(b) => format!("budget {} {} {} {over}", b.scope, b.name, b.metric),
            Row::Foreign(s, c) => format!("god {} @{} {} {}", c.agent, s.kind, c.team, s.spec()),
        }
    }
}

/// The rows through `filter`: gods by cost (highest first), then the day's budget, then each
/// unfinished workflow's and step's.
pub(crate) fn rows<'a>(
    snap: &'a Snapshot,
    filter: &Filter,
    app_now: chrono::DateTime<chrono::Utc>,
) -> Vec<Row<'a>> {
    let l = &snap.ledger;
    let root_bars = snap.root_bars(app_now);
    let mut gods: Vec<Row> = l
        .gods
        .iter()
        .map(|(g, c)| {
            let bars = root_bars
                .iter()
                .filter(|b| b.scope == "god" && b.name == *g)
                .cloned()
                .collect();
            Row::God(g, c, bars)
        })
        .collect();
    gods.sort_by(|a, b| match (a, b) {
        (Row::God(x, cx, _), Row::God(y, cy, _)) => cy
            .total
            .cost_micros
            .cmp(&cx.total.cost_micros)
            .then_with(|| x.cmp(y)),
        _ => std::cmp::Ordering::Equal,
    });
    let mut out = gods;
    // The foreign agents whose source logs usage, by cost (highest first), after the root's gods.
    let mut foreign: Vec<Row> = snap
        .sources
        .iter()
        .flat_map(|s| s.snapshot.costs.iter().map(move |c| Row::Foreign(s, c)))
        .collect();
    foreign.sort_by_key(|r| match r {
        Row::Foreign(_, c) => std::cmp::Reverse(c.totals.cost_micros),
        _ => std::cmp::Reverse(0),
    });
    out.extend(foreign);
    for b in root_bars {
        match b.scope {
            // A god with a budget and no spend yet still gets its row.
            "god" if !l.gods.contains_key(&b.name) => out.push(Row::Budget(b)),
            "god" => {}
            _ => out.push(Row::Budget(b)),
        }
    }
    // The definitions that declare a budget, once: a frame passes over every workflow.
    let budgeted: Vec<&str> = snap
        .definitions
        .iter()
        .filter(|d| crate::live::ledger::declares_budget(d))
        .map(|d| d.id.as_str())
        .collect();
    for w in snap.workflows.iter() {
        if w.state.status.is_finished() {
            continue;
        }
        let declares = w
            .state
            .definition_id
            .as_deref()
            .is_some_and(|id| budgeted.contains(&id));
        if declares
            || w.state
                .cost
                .as_ref()
                .is_some_and(|c| c.raised != Default::default())
        {
            out.extend(snap.workflow_bars(w).into_iter().map(Row::Budget));
        }
    }
    if !filter.is_empty() {
        out.retain(|r| filter.matches_text(&r.haystack()));
    }
    out
}

/// A budget bar: ten cells, the share and the figures; coloured at the warning share and the limit.
fn bar_cell(b: &Bar, warn_at: f64, theme: &Theme) -> Line<'static> {
    let share = b.share();
    let filled = ((share.min(1.0) * 10.0).round() as usize).min(10);
    let style = bar_style(share, warn_at, theme);
    Line::from(vec![
        Span::styled("█".repeat(filled), style),
        Span::styled("░".repeat(10 - filled), theme.dim()),
        Span::styled(
            format!(" {:>3.0}% {}", (share * 100.0).min(999.0), b.figures()),
            style,
        ),
    ])
}

fn bar_style(share: f64, warn_at: f64, theme: &Theme) -> Style {
    if share >= 1.0 {
        theme.alert()
    } else if share >= warn_at {
        theme.warn()
    } else {
        theme.ok()
    }
}

/// The sparkline of a god's spend: one block per five minutes, as many as `n`.
fn spark(c: &GodCost, now: chrono::DateTime<chrono::Utc>, n: usize) -> String {
    let v: Vec<u32> = c
        .recent(now, n)
        .into_iter()
        .map(|m| u32::try_from(m).unwrap_or(u32::MAX))
        .collect();
    sparkline(&v)
}

const COLUMNS: [Col; 6] = [
    Col::new("GOD / BUDGET", 8, 40).keep(),
    Col::new("COST", 5, 12),
    Col::new("TOKENS", 6, 8).hide(2),
    Col::new("$/H", 5, 9).hide(1),
    Col::new("SPEND PER 5 MIN", 8, 48).hide(3),
    Col::new("BUDGET", 30, 60).flex(),
];

/// The title: the totals, the burn rate, today's spend.
fn title(app: &App, shown: usize) -> String {
    let l = &app.snapshot().ledger;
    let now = app.now();
    let burn = l
        .gods
        .values()
        .fold(0u64, |a, g| a.saturating_add(g.burn_per_hour(now)));
    let today = now.format("%Y-%m-%d").to_string();
    let day = l.days.get(&today).map_or(0, |t| t.cost_micros);
    let mut t = format!(
        " {} ({shown}) · {} · {} tokens · {}/h · today {} ",
        crate::console::keymap::Pane::Ledger.title(),
        usd(l.total.cost_micros),
        tokens(l.total.tokens()),
        usd(burn),
        usd(day)
    );
    if l.total.unpriced > 0 {
        t.push_str(&format!("· {} unpriced ", l.total.unpriced));
    }
    t.push_str(&crate::console::views::filter_note(app));
    t
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let filter = app.filter(Pane::Ledger);
    let rows = rows(app.snapshot(), &filter, app.now());
    let title = title(app, rows.len());
    if let Some(e) = &app.snapshot().ledger.error {
        let text = format!("The ledger cannot be read: {e}");
        return crate::console::views::empty(frame, area, title, &text, theme);
    }
    let texts = (
        "No usage recorded and no budget declared: gods report usage on handoffs, acks and USAGE \
         bus lines; budgets go in a definition or in conductor/config.yaml (docs/BUDGETS.md).",
        "No god or budget matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Ledger,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    if app.pane_state().detail {
        let r = &rows[app.selected(Pane::Ledger).min(rows.len() - 1)];
        return draw_detail(frame, area, app, r, theme);
    }
    let now = app.now();
    let warn_at = app.snapshot().ledger.warn_share();
    let n = (area.width as usize).saturating_sub(90).clamp(12, 48);
    let row = |r: &Row| -> Vec<Line> {
        let bar = |bars: &[Bar]| {
            bars.first()
                .map(|b| bar_cell(b, warn_at, theme))
                .unwrap_or_else(|| Line::styled("-", theme.dim()))
        };
        match r {
            Row::God(g, c, bars) => vec![
                Line::styled(escape_bidi(g).into_owned(), theme.base()),
                Line::raw(usd(c.total.cost_micros)),
                Line::raw(tokens(c.total.tokens())),
                Line::raw(usd(c.burn_per_hour(now))),
                Line::styled(spark(c, now, n), theme.info()),
                bar(bars),
            ],
            Row::Budget(b) => vec![
                Line::styled(format!("{} {}", b.scope, escape_bidi(&b.name)), theme.dim()),
                Line::raw(if b.metric == "cost_usd" {
                    usd(b.used)
                } else {
                    "-".into()
                }),
                Line::raw(if b.metric == "tokens" {
                    tokens(b.used)
                } else {
                    "-".into()
                }),
                Line::styled("-", theme.dim()),
                Line::raw(""),
                bar(std::slice::from_ref(b)),
            ],
            Row::Foreign(s, c) => vec![
                Line::from(vec![
                    Span::styled(c.agent.clone(), theme.base()),
                    Span::styled(format!(" @{}", s.kind), theme.dim()),
                ]),
                Line::raw(usd(c.totals.cost_micros)),
                Line::raw(tokens(c.totals.tokens())),
                Line::styled("-", theme.dim()),
                Line::raw(""),
                Line::styled(format!("{} · {} (its logs)", c.team, s.spec()), theme.dim()),
            ],
        }
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

fn draw_detail(frame: &mut Frame, area: Rect, app: &App, r: &Row, theme: &Theme) {
    let warn_at = app.snapshot().ledger.warn_share();
    let mut l: Vec<Line> = Vec::new();
    if let Row::God(g, c, _) = r {
        let t = &c.total;
        l.push(kv("god", escape_bidi(g).into_owned(), theme.base(), theme));
        l.push(kv("cost", usd(t.cost_micros), theme.base(), theme));
        l.push(kv(
            "burn rate",
            format!("{}/h (the last hour)", usd(c.burn_per_hour(app.now()))),
            theme.base(),
            theme,
        ));
        for (k, v) in [
            ("input tokens", t.input_tokens),
            ("output tokens", t.output_tokens),
            ("cache reads", t.cache_read_tokens),
            ("cache writes", t.cache_write_tokens),
            ("reports", t.reports),
            ("unpriced", t.unpriced),
        ] {
            l.push(kv(k, v.to_string(), theme.base(), theme));
        }
        l.push(kv("last 24 h", spark(c, app.now(), 48), theme.info(), theme));
    }
    if let Row::Foreign(s, c) = r {
        let t = &c.totals;
        l.push(kv("agent", format!("{} @{}", c.agent, s.kind), theme.base(), theme));
        l.push(kv("source", s.spec(), theme.base(), theme));
        l.push(kv("team", c.team.clone(), theme.base(), theme));
        l.push(kv("cost", usd(t.cost_micros), theme.base(), theme));
        for (k, v) in [
            ("input tokens", t.input_tokens),
            ("output tokens", t.output_tokens),
            ("cache reads", t.cache_read_tokens),
            ("cache writes", t.cache_write_tokens),
            ("replies", t.reports),
            ("unpriced", t.unpriced),
        ] {
            l.push(kv(k, v.to_string(), theme.base(), theme));
        }
        l.push(kv("models", c.models.join(", "), theme.base(), theme));
        l.push(kv("sessions", c.sessions.to_string(), theme.base(), theme));
        l.push(Line::styled(
            "read from its session logs, priced by the shipped price table (pantheon cost --prices); \
             not in the root's ledger, totals or budgets",
            theme.dim(),
        ));
    }
    for b in r.bars() {
        l.push(Line::default());
        l.push(kv(
            "budget",
            format!("{} {} ({})", b.scope, escape_bidi(&b.name), b.metric),
            theme.base(),
            theme,
        ));
        l.push(bar_cell(b, warn_at, theme));
        if b.reached() {
            l.push(Line::styled(
                "reached: the next dispatch it covers is held for approval (2 Inboxes, _quarantine)",
                theme.alert(),
            ));
        }
    }
    detail(
        frame,
        area,
        format!(" {} ", escape_bidi(&r.key().to_string())),
        l,
        app,
        theme,
    );
}

/// The Ledger pane.
pub(crate) struct Ledger;

impl ListPane for Ledger {
    type Row<'a> = Row<'a>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        rows(app.snapshot(), filter, app.now())
    }

    fn key(&self, row: &Self::Row<'_>) -> RowKey {
        row.key()
    }
}

impl PaneView for Ledger {
    fn title(&self) -> &'static str {
        "Ledger"
    }

    fn short_title(&self) -> &'static str {
        "Cost"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    /// Its budget rows come from a pass over every unfinished workflow.
    fn grows_with_root(&self) -> bool {
        true
    }

    fn in_tabs(&self, app: &App) -> bool {
        app.snapshot().has_cost()
            || app
                .snapshot()
                .sources
                .iter()
                .any(|s| !s.snapshot.costs.is_empty())
    }
}
