//! Pane 8: the operator journal, newest first: who did what, through which surface, with what
//! outcome. Enter jumps to the record an entry is about.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use serde_json::Value;

use crate::console::action::Pane;
use crate::console::app::App;
use crate::console::preview::when;
use crate::console::theme::Theme;

use super::table::Col;
use super::{empty, json_lines};

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

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let j = &app.snapshot.journal;
    let rows = app.journal();
    let mut title = format!(" 8 Journal ({}", rows.len());
    if j.bad_lines > 0 {
        title.push_str(&format!(", {} unreadable lines", j.bad_lines));
    }
    title.push_str(") ");
    title.push_str(&super::follow_note(app, Pane::Journal));
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
    if super::list_head(
        frame,
        area,
        app,
        Pane::Journal,
        &title,
        rows.len(),
        texts,
        theme,
    ) {
        return;
    }
    let sel = app.selected(Pane::Journal);
    if app.pane_state().detail {
        let e = rows[sel];
        return super::detail(
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
        let style = if outcome.contains("refused") || outcome.contains("fail") {
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
                app.now,
                app.absolute_times,
            )),
            Line::raw(format!("{} ({})", s(e, "actor"), s(e, "source"))),
            Line::styled(s(e, "action").to_owned(), theme.key()),
            Line::styled(outcome.to_owned(), style),
            Line::raw(what),
        ]
    };
    super::pane_table(frame, area, app, title, &COLUMNS, &rows, theme, row);
}

const COLUMNS: [Col; 6] = [
    Col::new("SEQ", 3, 8).keep(),
    Col::new("AT", 6, 19),
    Col::new("ACTOR", 8, 28).hide(2),
    Col::new("ACTION", 6, 16),
    Col::new("OUTCOME", 6, 16).hide(1),
    Col::new("TARGETS · REASON", 12, 200).flex(),
];
