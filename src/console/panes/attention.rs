//! Pane 7: everything that waits on a human, newest first: reason, age, what resolves it.

use crate::console::app::{AnswerError, FlashKind, PromptFor, parse_eta};
use crate::console::attention;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;

use crate::console::app::App;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::engine::time::relative;

use crate::console::app::Effect;
use crate::console::items::Filter;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;

/// The Attention pane's own state.
#[derive(Debug, Clone, Default)]
pub struct AttentionState {
    /// Attention items snoozed (by key) until a time.
    pub snoozed:
        std::collections::HashMap<crate::console::attention::Key, chrono::DateTime<chrono::Utc>>,
    /// The key of the attention item the global key jumped to last.
    pub last: Option<crate::console::attention::Key>,
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let rows = app.attention();
    let snoozed = app.snoozed_count();
    let mut title = format!(" {} ({}", Pane::Attention.heading(), rows.len());
    if snoozed > 0 {
        title.push_str(&format!(", {snoozed} snoozed"));
    }
    title.push_str(") ");
    title.push_str(&crate::console::views::follow_note(app, Pane::Attention));
    let texts = (
        "Nothing waits on you.",
        "No attention item matches the filter.",
    );
    let head = crate::console::views::ListHead {
        pane: Pane::Attention,
        title: &title,
        len: rows.len(),
        none: texts.0,
        unmatched: texts.1,
    };
    if crate::console::views::list_head(frame, area, app, theme, head) {
        return;
    }
    let now = app.now();
    let row = |i: &crate::console::attention::Item| {
        let age = match i.since {
            Some(t) if app.absolute_times() => {
                crate::console::times::when(Some(&t.to_rfc3339()), now, true)
            }
            Some(t) => relative(t, now),
            None => "-".into(),
        };
        vec![
            Line::styled(i.kind.as_str().to_owned(), theme.alert()),
            Line::raw(i.record().to_owned()),
            Line::raw(age),
            Line::raw(app.shown_text(&i.reason).into_owned()),
            Line::styled(
                crate::console::attention::action_text(i, app.keymap()),
                theme.key(),
            ),
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

const COLUMNS: [Col; 5] = [
    Col::new("KIND", 15, 15),
    Col::new("RECORD", 10, 30).keep(),
    Col::new("AGE", 7, 20),
    Col::new("REASON", 20, 200).flex(),
    Col::new("ACTION (Enter goes there)", 10, 48).hide(1),
];

/// Pane 7: everything that waits on a human, newest first.
pub(crate) struct Attention;

pub(crate) fn start_snooze(app: &mut App) {
    if app.pane() != Pane::Attention || app.refuse_if_gone(Pane::Attention) {
        return app.need("an attention item (7 Attention)");
    }
    let items = app.attention();
    let Some(item) = items.get(app.selected(Pane::Attention)) else {
        return app.need("an attention item");
    };
    app.ask(
        "Snooze for (e.g. 15m, 2h, 1d, or a time)",
        true,
        "1h".into(),
        PromptFor::Snooze(item.key.clone()),
    );
}

/// How long to snooze an attention item was typed.
pub(crate) fn snooze_answered(
    app: &mut App,
    key: attention::Key,
    answer: Option<String>,
) -> Result<(), AnswerError> {
    let until = parse_eta(answer.as_deref().unwrap_or(""), app.now())?;
    let until = crate::engine::time::parse_ts(&until)
        .ok_or_else(|| format!("cannot read {until:?} as a time"))?;
    let now = app.now();
    app.panes_mut().attention.snoozed.retain(|_, t| *t > now);
    // Said in words: the item's kind and record, and for how long (not its internal key).
    let what = app
        .attention_all()
        .into_iter()
        .find(|i| i.key == key)
        .map(|i| format!("{} {}", i.kind.as_str().replace('_', " "), i.record()))
        .unwrap_or_else(|| key.kind().as_str().replace('_', " "));
    app.panes_mut().attention.snoozed.insert(key, until);
    app.flash(
        FlashKind::Info,
        format!(
            "snoozed {} for {} (until {})",
            what.trim(),
            crate::live::snapshot::short_duration(until - app.now()),
            crate::console::times::when_at(
                Some(&crate::live::compact::Stamp::At(until)),
                app.now(),
                true
            )
        ),
    );
    Ok(())
}

/// [`App::attention_all`] through `f`.
pub(crate) fn attention_through(app: &App, f: &Filter) -> Vec<attention::Item> {
    app.attention_all()
        .into_iter()
        .filter(|i| f.is_empty() || f.matches_item(i.source(), &i.haystack()))
        .collect()
}

impl ListPane for Attention {
    type Row<'a> = crate::console::attention::Item;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        attention_through(app, filter)
    }

    fn key(&self, row: &Self::Row<'_>) -> RowKey {
        RowKey::Attention(row.key.clone())
    }
}

impl PaneView for Attention {
    fn title(&self) -> &'static str {
        "Attention"
    }

    fn short_title(&self) -> &'static str {
        "Attn"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn newest_first(&self) -> bool {
        true
    }

    /// `Enter` takes the operator to the item's record and says what resolves it.
    fn open(&self, app: &mut App) -> Option<Vec<Effect>> {
        if app.refuse_if_gone(Pane::Attention) {
            return Some(Vec::new());
        }
        if let Some(item) = app.attention().get(app.selected(Pane::Attention)).cloned() {
            app.open_attention(&item);
        }
        Some(Vec::new())
    }
}
