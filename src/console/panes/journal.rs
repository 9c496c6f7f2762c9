//! Pane 8: the operator journal, newest first: who did what, through which surface, with what
//! outcome. Enter jumps to the record an entry is about.

use crate::console::items;
use crate::engine::HandoffId;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use serde_json::Value;

use crate::console::app::App;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::when;

use crate::console::app::Effect;
use crate::console::app::FlashKind;
use crate::console::items::Filter;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{empty, json_lines};

fn s<'a>(e: &'a Value, k: &str) -> &'a str {
    e.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The targets of an entry as `key=value` words.
pub(crate) fn targets(e: &Value) -> String {
    e.get("targets")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_owned)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let j = &app.snapshot().journal;
    let rows = app.journal();
    let mut title = format!(" {} ({}", Pane::Journal.heading(), rows.len());
    if j.bad_lines > 0 {
        title.push_str(&format!(", {} unreadable lines", j.bad_lines));
    }
    title.push_str(") ");
    title.push_str(&crate::console::views::follow_note(app, Pane::Journal));
    if let Some(e) = &j.error {
        return empty(
            frame,
            area,
            title,
            &format!("The journal cannot be read: {e}"),
            theme,
        );
    }
    let texts = (
        "No operator act recorded yet (conductor/journal.jsonl).",
        "No journal entry matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Journal,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let sel = app.selected(Pane::Journal);
    if app.pane_state().detail {
        let e = rows[sel];
        return crate::console::views::detail(
            frame,
            area,
            format!(
                " journal entry {} ",
                e.get("seq").map(|v| v.to_string()).unwrap_or_default()
            ),
            json_lines(e, theme),
            app,
            theme,
        );
    }
    let row = |e: &&std::sync::Arc<Value>| {
        let outcome = s(e, "outcome");
        let style = if crate::engine::JournalOutcome::read(outcome).went_wrong() {
            theme.alert()
        } else {
            theme.base()
        };
        let mut what = targets(e);
        if let Some(r) = e.get("reason").and_then(Value::as_str) {
            what.push_str(&format!(" · {r}"));
        }
        vec![
            Line::styled(
                e.get("seq").map(|v| v.to_string()).unwrap_or_default(),
                theme.dim(),
            ),
            Line::raw(when(
                e.get("at").and_then(Value::as_str),
                app.now(),
                app.absolute_times(),
            )),
            Line::raw(format!("{} ({})", s(e, "actor"), s(e, "source"))),
            Line::styled(s(e, "action").to_owned(), theme.key()),
            Line::styled(outcome.to_owned(), style),
            Line::raw(what),
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

const COLUMNS: [Col; 6] = [
    Col::new("SEQ", 3, 8).keep(),
    Col::new("AT", 6, 19),
    Col::new("ACTOR", 8, 28).hide(2),
    Col::new("ACTION", 6, 16),
    Col::new("OUTCOME", 6, 16).hide(1),
    Col::new("TARGETS · REASON", 12, 200).flex(),
];

/// Pane 8: the operator journal, newest first.
pub(crate) struct Journal;

/// Takes the operator from a journal entry to the record it is about; false if none is listed.
pub(crate) fn open_journal_entry(app: &mut App, e: &Value) -> bool {
    let t = |k: &str| e.pointer(&format!("/targets/{k}")).and_then(Value::as_str);
    if let Some(h) = t("handoff_id") {
        let key = items::dispatches(app.snapshot(), &Filter::default())
            .iter()
            .find(|r| *r.view.dispatch.handoff_id == *h || *r.view.name == *h)
            .map(items::DispatchRow::key);
        if let Some(k) = key
            && app.jump_to(Pane::Inboxes, &k)
        {
            return true;
        }
    }
    if let Some(h) = t("handoff_id")
        && let Ok(h) = HandoffId::parse(h)
        && let Some((k, _)) = crate::console::panes::deadletters::dead_row_of(app, &h)
        && app.jump_to(Pane::DeadLetters, &k)
    {
        return true;
    }
    if let Some(w) = t("workflow_id")
        && app.jump_to(Pane::Workflows, &RowKey::workflow(w))
    {
        return true;
    }
    if let (Some(track), Some(path)) = (t("track"), t("path"))
        && app.jump_to(Pane::Locks, &RowKey::lock(track, path))
    {
        return true;
    }
    if let Some(track) = t("track")
        && app.snapshot().track(track).is_some()
        && e.get("action")
            .and_then(Value::as_str)
            .is_some_and(|a| a.starts_with("board"))
    {
        app.panes_mut().bus.track = Some(track.to_owned());
        app.set_pane(Pane::Board);
        return true;
    }
    false
}

/// The journal's entries, newest first, through `f`.
pub(crate) fn journal_through<'a>(
    app: &'a App,
    f: &Filter,
) -> Vec<&'a std::sync::Arc<serde_json::Value>> {
    app.snapshot()
        .journal
        .entries
        .iter()
        .rev()
        .filter(|e| f.is_empty() || f.matches_text(&e.to_string()))
        .collect()
}

impl ListPane for Journal {
    type Row<'a> = &'a std::sync::Arc<serde_json::Value>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        journal_through(app, filter)
    }

    fn key(&self, e: &Self::Row<'_>) -> RowKey {
        RowKey::Journal(
            e.get("seq")
                .map_or_else(|| e.to_string(), |v| v.to_string())
                .into(),
        )
    }
}

impl PaneView for Journal {
    fn title(&self) -> &'static str {
        "Journal"
    }

    fn short_title(&self) -> &'static str {
        "Jrnl"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn newest_first(&self) -> bool {
        true
    }

    /// `Enter` takes the operator to the record an entry is about; when none is listed, it shows
    /// the entry.
    fn open(&self, app: &mut App) -> Option<Vec<Effect>> {
        if app.refuse_if_gone(Pane::Journal) {
            return Some(Vec::new());
        }
        let entry = app
            .journal()
            .get(app.selected(Pane::Journal))
            .map(|e| (**e).clone());
        if let Some(e) = entry
            && !open_journal_entry(app, &e)
        {
            let st = app.pane_state_mut();
            st.detail = true;
            st.scroll = 0;
            app.flash(
                FlashKind::Info,
                "the record of this entry is not listed now: showing the entry",
            );
        }
        Some(Vec::new())
    }
}
