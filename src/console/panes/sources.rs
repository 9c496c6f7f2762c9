//! `:pane sources`: the foreign sources beside the root (`--source`, docs/SOURCES.md), browsed as
//! k9s browses resources. The pane lists the sources, each with its health (`● ok`, `✗ error` and
//! the reason, `… reading`), its counts and when it was last read; `Enter` on a source opens it:
//! its waiting items, its agents (listed as gods, each marked with the source's kind), its tasks,
//! its messages (newest first) and its locks; `Esc` goes back up to the sources, `]` / `[` open the
//! next / previous source, and `Enter` on a record shows it whole: its fields, then its raw value
//! with every field the reader does not know. A broken source keeps its last good records, and the
//! title says why it cannot be read now.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::console::app::App;
use crate::console::items::Filter;
use crate::console::keymap::Pane;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::rowkey::SourceRecord;
use crate::console::theme::Theme;
use crate::console::times::when_at;
use crate::console::views::table::Col;
use crate::console::views::{ListHead, detail, kv, list_head, pane_table, section};
use crate::live::snapshot::{Stamp, Sym};
use crate::live::ledger::{tokens, usd};
use crate::sources::claude_usage::TeammateCost;
use crate::sources::{Agent, Attention, Health, Lock, Message, SourceState, Task, files};

/// What the pane keeps of its own: the source it has open (by its `KIND:LOCATION`), if any.
#[derive(Debug, Clone, Default)]
pub struct SourcesState {
    /// The source whose records are listed; `None`: the list of sources.
    pub open: Option<Sym>,
}

/// One row: a source (the top level), or a record of the open source.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Row<'a> {
    Source(&'a SourceState),
    Item(&'a SourceState, &'a Attention),
    Agent(&'a SourceState, &'a Agent),
    Task(&'a SourceState, &'a Task),
    Message(&'a SourceState, &'a Message),
    Lock(&'a SourceState, &'a Lock),
}

/// `group/name` when the record has a group (a team, a project), else `name`: the same name in
/// two teams is two records.
fn grouped(group: Option<&str>, name: &str) -> String {
    match group {
        Some(g) => format!("{g}/{name}"),
        None => name.to_owned(),
    }
}

impl<'a> Row<'a> {
    fn state(&self) -> &'a SourceState {
        match *self {
            Row::Source(s)
            | Row::Item(s, _)
            | Row::Agent(s, _)
            | Row::Task(s, _)
            | Row::Message(s, _)
            | Row::Lock(s, _) => s,
        }
    }

    fn record(&self) -> SourceRecord {
        match self {
            Row::Source(_) => SourceRecord::Source,
            Row::Item(..) => SourceRecord::Item,
            Row::Agent(..) => SourceRecord::Agent,
            Row::Task(..) => SourceRecord::Task,
            Row::Message(..) => SourceRecord::Message,
            Row::Lock(..) => SourceRecord::Lock,
        }
    }

    /// The record's id within its source.
    fn id(&self) -> String {
        match self {
            Row::Source(_) => String::new(),
            Row::Item(_, a) => a.key.clone(),
            Row::Agent(_, a) => grouped(a.group.as_deref(), &a.name),
            Row::Task(_, t) => grouped(t.group.as_deref(), &t.id),
            Row::Message(_, m) => grouped(m.group.as_deref(), &m.id),
            Row::Lock(_, l) => format!("{}@{}", l.path, l.holder),
        }
    }

    pub(crate) fn key(&self) -> RowKey {
        RowKey::Source {
            source: self.state().spec().into(),
            record: self.record(),
            id: self.id().into(),
        }
    }

    /// The raw value the source read (unknown fields included); a source's own line for a source.
    fn raw(&self) -> serde_json::Value {
        match self {
            Row::Source(s) => s.to_json(),
            Row::Item(_, a) => a.raw.clone(),
            Row::Agent(_, a) => a.raw.clone(),
            Row::Task(_, t) => t.raw.clone(),
            Row::Message(_, m) => m.raw.clone(),
            Row::Lock(_, l) => l.raw.clone(),
        }
    }

    /// What `/` searches: every cell the row shows.
    fn haystack(&self) -> String {
        let cells = self.cells_text();
        format!("{} {}", self.state().spec(), cells.join(" "))
    }

    /// The text of the record's cells: kind, name, group, state, text (the time aside).
    fn cells_text(&self) -> [String; 5] {
        match *self {
            Row::Source(s) => [
                s.spec(),
                health_word(&s.health).into(),
                String::new(),
                String::new(),
                reason(s),
            ],
            Row::Item(_, a) => [
                "wait".into(),
                a.agent.clone(),
                String::new(),
                if a.answerable { "answerable" } else { "waiting" }.into(),
                a.what.clone(),
            ],
            Row::Agent(s, a) => [
                "god".into(),
                format!("{} @{}", a.name, s.kind),
                a.group.clone().unwrap_or_default(),
                a.status.clone().unwrap_or_default(),
                s.snapshot
                    .cost_of(a.group.as_deref(), &a.name)
                    .map(cost_text)
                    .unwrap_or_default(),
            ],
            Row::Task(_, t) => [
                "task".into(),
                format!("#{}", t.id),
                t.group.clone().unwrap_or_default(),
                t.state.clone(),
                match &t.owner {
                    Some(o) => format!("{} ({o})", t.title),
                    None => t.title.clone(),
                },
            ],
            Row::Message(_, m) => [
                "msg".into(),
                format!("{} → {}", m.from, m.to.join(", ")),
                m.group.clone().unwrap_or_default(),
                m.subject.clone().unwrap_or_default(),
                m.body.clone(),
            ],
            Row::Lock(_, l) => [
                "lock".into(),
                l.path.clone(),
                String::new(),
                l.holder.clone(),
                String::new(),
            ],
        }
    }

    fn at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self {
            Row::Source(s) => s.read_at,
            Row::Item(_, a) => a.since,
            Row::Message(_, m) => m.at,
            Row::Lock(_, l) => l.expires,
            Row::Agent(..) | Row::Task(..) => None,
        }
    }
}

/// A teammate's cost as a row says it: `$1.23 · 45.6k tokens · 12 replies`.
fn cost_text(c: &TeammateCost) -> String {
    let t = &c.totals;
    let mut out = format!(
        "{} · {} tokens · {} replies",
        usd(t.cost_micros),
        tokens(t.tokens()),
        t.reports
    );
    if t.unpriced > 0 {
        out.push_str(&format!(" · {} unpriced", t.unpriced));
    }
    out
}

fn health_word(h: &Health) -> &'static str {
    match h {
        Health::Ok => "● ok",
        Health::Error { .. } => "✗ error",
        Health::Pending => "… reading",
    }
}

fn health_style(h: &Health, theme: &Theme) -> Style {
    match h {
        Health::Ok => theme.ok(),
        Health::Error { .. } => theme.alert(),
        Health::Pending => theme.dim(),
    }
}

/// Why a source cannot be read, or how long its last read took.
fn reason(s: &SourceState) -> String {
    match (&s.health, s.took) {
        (Health::Error { reason, .. }, _) => reason.clone(),
        (_, Some(t)) => format!("read in {:.1} ms", t.as_secs_f64() * 1000.0),
        _ => String::new(),
    }
}

/// The source the pane has open, when it is still given.
fn open_source(app: &App) -> Option<&SourceState> {
    let open = app.panes().sources.open.as_deref()?;
    app.snapshot().sources.iter().find(|s| s.spec() == open)
}

/// The rows through `filter`: the sources, or the open source's records (waiting items, agents,
/// tasks, messages newest first, locks).
pub(crate) fn rows<'a>(app: &'a App, filter: &Filter) -> Vec<Row<'a>> {
    let mut out: Vec<Row<'a>> = match open_source(app) {
        None => app.snapshot().sources.iter().map(Row::Source).collect(),
        Some(s) => {
            let snap = &*s.snapshot;
            let mut v = Vec::with_capacity(
                snap.attention.len()
                    + snap.agents.len()
                    + snap.tasks.len()
                    + snap.messages.len()
                    + snap.locks.len(),
            );
            v.extend(snap.attention.iter().map(|a| Row::Item(s, a)));
            v.extend(snap.agents.iter().map(|a| Row::Agent(s, a)));
            v.extend(snap.tasks.iter().map(|t| Row::Task(s, t)));
            let mut messages: Vec<&Message> = snap.messages.iter().collect();
            messages.sort_by_key(|m| std::cmp::Reverse(m.at));
            v.extend(messages.into_iter().map(|m| Row::Message(s, m)));
            v.extend(snap.locks.iter().map(|l| Row::Lock(s, l)));
            v
        }
    };
    if !filter.is_empty() {
        out.retain(|r| filter.matches_text(&r.haystack()));
    }
    out
}

const SOURCE_COLUMNS: [Col; 8] = [
    Col::new("SOURCE", 12, 60).keep(),
    Col::new("HEALTH", 9, 9),
    Col::new("GODS", 4, 6),
    Col::new("TASKS", 5, 6).hide(2),
    Col::new("MSGS", 4, 7).hide(3),
    Col::new("WAIT", 4, 6),
    Col::new("READ", 4, 10).hide(1),
    Col::new("WHY / TOOK", 10, 200).flex(),
];

const RECORD_COLUMNS: [Col; 6] = [
    Col::new("KIND", 4, 4),
    Col::new("NAME", 10, 40).keep(),
    Col::new("GROUP", 5, 24).hide(2),
    Col::new("STATE", 5, 20),
    Col::new("AT", 4, 10).hide(1),
    Col::new("TEXT", 10, 300).flex(),
];

fn title(app: &App, shown: usize) -> String {
    let heading = Pane::Sources.heading();
    let note = crate::console::views::filter_note(app);
    match open_source(app) {
        None => format!(" {heading} ({shown}) {note}"),
        Some(s) => {
            let snap = &s.snapshot;
            let mut t = format!(
                " {heading} › {} · {} · {} gods · {} tasks · {} msgs · {} waiting ",
                s.spec(),
                health_word(&s.health),
                snap.agents.len(),
                snap.tasks.len(),
                snap.messages.len(),
                snap.attention.len(),
            );
            if let Health::Error { reason, .. } = &s.health {
                t.push_str(&format!("· last good read shown: {reason} "));
            }
            t.push_str(&note);
            t
        }
    }
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let filter = app.filter(Pane::Sources);
    let rows = rows(app, &filter);
    let title = title(app, rows.len());
    let none = if app.panes().sources.open.is_some() && open_source(app).is_some() {
        "This source holds no agent, task, message, lock or waiting item (yet): Esc goes back to the sources."
    } else {
        "No foreign source: start the console with --source KIND:LOCATION (claude-teams, \
         agent-mail:ARCHIVE[,DB], a2a:AGENT_CARD_URL) or list them under [sources] in its \
         configuration (docs/SOURCES.md)."
    };
    let head = ListHead {
        pane: Pane::Sources,
        title: &title,
        len: rows.len(),
        none,
        unmatched: "No row matches the filter.",
    };
    if list_head(frame, area, app, theme, head) {
        return;
    }
    let now = app.now();
    let abs = app.absolute_times();
    if app.pane_state().detail {
        let r = rows[app.selected(Pane::Sources).min(rows.len() - 1)];
        return draw_detail(frame, area, app, r, theme);
    }
    let row = |r: &Row| -> Vec<Line> {
        let at = Line::styled(
            when_at(r.at().map(Stamp::At).as_ref(), now, abs),
            theme.dim(),
        );
        match *r {
            Row::Source(s) => {
                let snap = &s.snapshot;
                vec![
                    Line::styled(s.spec(), theme.key()),
                    Line::styled(health_word(&s.health), health_style(&s.health, theme)),
                    Line::raw(snap.agents.len().to_string()),
                    Line::raw(snap.tasks.len().to_string()),
                    Line::raw(snap.messages.len().to_string()),
                    Line::styled(
                        snap.attention.len().to_string(),
                        if snap.attention.is_empty() {
                            theme.base()
                        } else {
                            theme.warn()
                        },
                    ),
                    at,
                    Line::styled(reason(s), health_style(&s.health, theme)),
                ]
            }
            _ => {
                let [kind, name, group, state, text] = r.cells_text();
                let name = match r {
                    // A foreign agent is a god marked with its source.
                    Row::Agent(s, a) => Line::from(vec![
                        Span::styled(a.name.clone(), theme.base()),
                        Span::styled(format!(" @{}", s.kind), theme.dim()),
                    ]),
                    _ => Line::styled(name, theme.base()),
                };
                let kind_style = match r {
                    Row::Item(..) => theme.warn(),
                    Row::Agent(..) => theme.key(),
                    _ => theme.dim(),
                };
                vec![
                    Line::styled(kind, kind_style),
                    name,
                    Line::styled(group, theme.dim()),
                    Line::raw(state),
                    at,
                    Line::raw(text),
                ]
            }
        }
    };
    let cols: &[Col] = if open_source(app).is_some() {
        &RECORD_COLUMNS
    } else {
        &SOURCE_COLUMNS
    };
    pane_table(
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

/// A record whole: the source, its fields, then its raw value (every field the reader does not
/// know included), each line cleaned for the terminal.
fn draw_detail(frame: &mut Frame, area: Rect, app: &App, r: Row, theme: &Theme) {
    let s = r.state();
    let mut l: Vec<Line> = vec![kv("source", s.spec(), theme.key(), theme)];
    let names = ["kind", "name", "group", "state", "text"];
    for (k, v) in names.iter().zip(r.cells_text()) {
        if !v.is_empty() {
            l.push(kv(k, v, theme.base(), theme));
        }
    }
    if let Some(t) = r.at() {
        l.push(kv(
            "at",
            when_at(Some(&Stamp::At(t)), app.now(), app.absolute_times()),
            theme.base(),
            theme,
        ));
    }
    if let Row::Agent(src, a) = r
        && let Some(c) = src.snapshot.cost_of(a.group.as_deref(), &a.name)
    {
        section(&mut l, "cost (from its session logs, priced by the shipped table)", theme);
        let t = &c.totals;
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
    }
    if let Row::Message(_, m) = r {
        section(&mut l, "body", theme);
        for line in m.body.lines() {
            l.push(Line::raw(files::clean(line, files::MAX_TEXT)));
        }
    }
    section(&mut l, "raw (as the source has it, unknown fields kept)", theme);
    let raw = serde_json::to_string_pretty(&r.raw()).unwrap_or_default();
    l.extend(
        raw.lines()
            .map(|line| Line::styled(files::clean(line, files::MAX_TEXT), theme.base())),
    );
    let id = r.id();
    let name = if id.is_empty() { s.spec() } else { id };
    detail(
        frame,
        area,
        format!(" {} · {} ", r.cells_text()[0], files::clean(&name, 120)),
        l,
        app,
        theme,
    );
}

/// `]` / `[`: opens the next / previous source (from the list: the first / last; past the last:
/// the list of sources again).
pub(crate) fn cycle_source(app: &mut App, forward: bool) {
    let specs: Vec<String> = app.snapshot().sources.iter().map(|s| s.spec()).collect();
    if specs.is_empty() {
        return;
    }
    let at = open_source(app).and_then(|s| specs.iter().position(|x| *x == s.spec()));
    let next = match (at, forward) {
        (None, true) => Some(0),
        (None, false) => Some(specs.len() - 1),
        (Some(i), true) => (i + 1 < specs.len()).then_some(i + 1),
        (Some(i), false) => i.checked_sub(1),
    };
    let open: Option<Sym> = next.map(|i| specs[i].as_str().into());
    set_open(app, open);
}

/// Lists the records of `open` (or the sources), the selection at the top (or on the source left).
fn set_open(app: &mut App, open: Option<Sym>) {
    let left = app.panes_mut().sources.open.take();
    app.panes_mut().sources.open = open;
    let st = &mut app.panes_mut()[Pane::Sources];
    st.selected = 0;
    st.gone = None;
    st.detail = false;
    st.scroll = 0;
    st.filter.clear();
    if app.panes().sources.open.is_none()
        && let Some(left) = left
    {
        let key = RowKey::Source {
            source: left,
            record: SourceRecord::Source,
            id: "".into(),
        };
        let (at, _) = crate::console::panes::Rows::position_of(
            &Sources,
            app,
            &app.filter(Pane::Sources),
            &key,
        );
        app.panes_mut()[Pane::Sources].selected = at.unwrap_or(0);
    }
}

/// Before a jump to `key` in this pane: opens the source whose record it is (a source's own row
/// is on the list of sources).
pub(crate) fn prepare_jump(app: &mut App, key: &RowKey) {
    if let RowKey::Source { source, record, .. } = key {
        app.panes_mut().sources.open = (*record != SourceRecord::Source).then(|| source.clone());
    }
}

/// The Sources pane.
pub(crate) struct Sources;

impl ListPane for Sources {
    type Row<'a> = Row<'a>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        rows(app, filter)
    }

    fn key(&self, row: &Self::Row<'_>) -> RowKey {
        row.key()
    }

    fn is(&self, row: &Self::Row<'_>, key: &RowKey) -> bool {
        match key {
            RowKey::Source { source, record, id } => {
                *record == row.record() && **source == *row.state().spec() && **id == *row.id()
            }
            _ => false,
        }
    }
}

impl PaneView for Sources {
    fn title(&self) -> &'static str {
        "Sources"
    }

    fn short_title(&self) -> &'static str {
        "Src"
    }

    /// What `y` copies: a source's `KIND:LOCATION`, a record's id.
    fn yank(&self, app: &App, filter: &Filter, i: usize) -> Option<String> {
        let rows = rows(app, filter);
        let r = rows.get(i)?;
        Some(match r {
            Row::Source(s) => s.spec(),
            _ => r.id(),
        })
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    /// A source's records grow with it (10,000 messages of a team).
    fn grows_with_root(&self) -> bool {
        true
    }

    /// `Enter` on a source opens its records; on a record, its detail.
    fn open(&self, app: &mut App) -> Option<Vec<crate::console::app::Effect>> {
        if open_source(app).is_some() {
            return None;
        }
        let rows = rows(app, &app.filter(Pane::Sources));
        let spec = match rows.get(app.selected(Pane::Sources)) {
            Some(Row::Source(s)) => s.spec(),
            _ => return Some(Vec::new()),
        };
        set_open(app, Some(spec.as_str().into()));
        Some(Vec::new())
    }

    /// `Esc` on a source's records goes back up to the sources.
    fn back(&self, app: &mut App) -> bool {
        if app.panes().sources.open.is_none() {
            return false;
        }
        set_open(app, None);
        true
    }

    fn in_tabs(&self, app: &App) -> bool {
        !app.snapshot().sources.is_empty()
    }
}
