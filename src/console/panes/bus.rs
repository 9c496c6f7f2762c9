//! Pane 3: a live tail of one track's `queue.jsonl`: follow or pause, filter by type and source.

use crate::console::app::FlashKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::console::app::App;
use crate::console::items;
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::console::times::when;
use crate::engine::Envelope;

use crate::console::items::Filter;
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::Col;
use crate::console::views::{detail, empty, json_lines, kv};

/// The Bus pane's own state (its track is the Board pane's too).
#[derive(Debug, Clone)]
pub struct BusState {
    /// The track the Bus and Board panes show.
    pub track: Option<String>,
    /// The bus tail follows new messages (stops when scrolling up).
    pub follow: bool,
    /// The newest bus message when the tail was paused: the ones after it are counted as new.
    pub paused_at: Option<String>,
}

impl Default for BusState {
    fn default() -> Self {
        Self {
            track: None,
            follow: true,
            paused_at: None,
        }
    }
}

/// A one-line reading of a message's payload (the raw JSON when it has none of the usual fields).
pub(crate) fn payload_summary(m: &Envelope) -> String {
    let s = known_fields(m);
    if s.is_empty() && !m.payload.is_null() {
        return m.payload.to_string();
    }
    s
}

/// The usual fields of a message of a known type, joined with ` · `.
fn known_fields(m: &Envelope) -> String {
    let p = &m.payload;
    let s = |k: &str| {
        p.get(k).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let join = |parts: Vec<Option<String>>| {
        parts
            .into_iter()
            .flatten()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join(" · ")
    };
    // `task 1.2`, but `task-1.2` as it is (not `task task-1.2`).
    fn task_label(t: String) -> String {
        if t.to_ascii_lowercase().starts_with("task") {
            t
        } else {
            format!("task {t}")
        }
    }
    match m.kind.as_str() {
        "PROGRESS" => join(vec![
            s("task_id").map(task_label),
            s("progress_pct").map(|x| format!("{x}%")),
            s("current_subtask"),
        ]),
        "TASK_COMPLETE" => join(vec![
            s("task_id").map(task_label),
            s("commit_sha"),
            p.get("files_modified")
                .and_then(Value::as_array)
                .map(|a| format!("{} files", a.len())),
        ]),
        "TASK_FAILED" => join(vec![s("task_id").map(task_label), s("error")]),
        "FILE_LOCK" | "FILE_UNLOCK" => join(vec![
            s("filepath"),
            s("forced_by").map(|f| format!("forced by {f}")),
            s("previous_holder").map(|f| format!("took over from {f}")),
        ]),
        "BLOCKED" => join(vec![
            s("task_id").map(task_label),
            s("waiting_for").map(|w| format!("waits for {w}")),
            s("resource"),
        ]),
        "BOARD_ASSESS" => join(vec![
            s("director"),
            s("verdict"),
            s("score").map(|x| format!("score {x}")),
        ]),
        "BOARD_DISCUSS" => join(vec![
            s("from").zip(s("to")).map(|(f, t)| format!("{f}→{t}")),
            s("type"),
            s("message"),
        ]),
        "BOARD_VOTE" => join(vec![s("director"), s("final_verdict"), s("confidence")]),
        "BOARD_RESOLVE" => join(vec![
            s("session_id"),
            s("verdict"),
            crate::engine::board::ResolvedVotes::read(p).map(|r| r.counts_line()),
        ]),
        "BOARD_OPEN" => join(vec![s("checkpoint"), s("proposal")]),
        "BOARD_ADVANCE" => join(vec![
            s("from").zip(s("to")).map(|(f, t)| format!("{f} → {t}")),
            (p.get("forced") == Some(&Value::Bool(true))).then(|| "forced".to_owned()),
        ]),
        "BOARD_ROUND" => join(vec![
            s("round")
                .zip(s("max_rounds"))
                .map(|(r, m)| format!("round {r}/{m}")),
            s("status"),
        ]),
        "WORKER_DISPATCHED" | "WORKER_DISPATCH" => join(vec![
            s("worker_id"),
            s("task_id").map(task_label),
            s("parallel_group").map(|g| format!("group {g}")),
        ]),
        _ => match p {
            Value::Null => String::new(),
            other => other.to_string(),
        },
    }
}

/// The pane's title: the track and its place among the tracks, the rows shown, following or paused
/// (and what arrived since), the filter, the message rate, and what was skipped reading the queue.
fn title_of(app: &App, track: &crate::live::snapshot::TrackView, shown: usize) -> String {
    let snap = &app.snapshot();
    let idx = snap
        .tracks
        .iter()
        .position(|t| t.name == track.name)
        .unwrap_or(0)
        + 1;
    let mut title = format!(
        " {} · {} ({idx}/{}) · {} shown · {} ",
        Pane::Bus.heading(),
        track.name,
        snap.tracks.len(),
        shown,
        if app.panes().bus.follow {
            "▼ following".to_owned()
        } else {
            // Paused: where the operator is, and how much arrived since.
            let new = app
                .panes()
                .bus
                .paused_at
                .as_ref()
                .and_then(|id| track.messages.iter().rposition(|m| m.id == *id))
                .map_or(0, |i| track.messages.len() - 1 - i);
            format!(
                "‖ paused {}/{} · {new} new",
                app.selected(Pane::Bus).saturating_add(1).min(shown),
                shown
            )
        }
    );
    title.push_str(&crate::console::views::filter_note(app));
    {
        // Messages per second over the last half minute.
        let rate = track.per_second(app.now(), 30);
        title.push_str(&format!(
            "· {} {}/s ",
            crate::console::views::sparkline(&rate),
            rate.last().copied().unwrap_or(0)
        ));
    }
    if track.lines_skipped > 0 {
        title.push_str(&format!("· {} bad lines skipped ", track.lines_skipped));
    }
    if track.head_bytes_skipped > 0 {
        title.push_str(&format!(
            "· tail only ({} MiB of history not read) ",
            track.head_bytes_skipped >> 20
        ));
    }
    if let Some(n) = &track.queue_note {
        title.push_str(&format!("· ⚠ {n} "));
    }
    title
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot();
    let Some(track) = items::track(snap, app.panes().bus.track.as_deref()) else {
        return empty(
            frame,
            area,
            format!(" {} ", Pane::Bus.heading()),
            "No track under conductor/tracks has a .message-bus.",
            theme,
        );
    };
    let filter = app.filter(Pane::Bus);
    let msgs = items::messages(track, &filter);
    let title = title_of(app, track, msgs.len());
    if msgs.is_empty() {
        return empty(
            frame,
            area,
            title,
            "No message yet (or none matches the filter: try type:PROGRESS source:worker).",
            theme,
        );
    }
    let sel = app.selected(Pane::Bus);
    let st = app.pane_state();
    if crate::console::views::gone_detail(frame, area, app, theme) {
        return;
    }
    if st.detail {
        let m = msgs[sel];
        let mut l = vec![
            kv("id", m.id.clone(), theme.base(), theme),
            kv("type", m.kind.clone(), theme.message_type(&m.kind).0, theme),
            kv("source", source_of(m), theme.base(), theme),
            kv(
                "time",
                format!(
                    "{}  ({})",
                    m.timestamp,
                    when(Some(&m.timestamp), app.now(), false)
                ),
                theme.base(),
                theme,
            ),
            Line::default(),
        ];
        l.extend(json_lines(&m.payload, theme));
        if !m.extra.is_empty() {
            l.push(Line::default());
            l.push(Line::styled("extra fields", theme.header()));
            l.extend(json_lines(&Value::Object(m.extra.clone()), theme));
        }
        return detail(
            frame,
            area,
            format!(" {} · message ", track.name),
            l,
            app,
            theme,
        );
    }
    let row = |m: &&std::sync::Arc<Envelope>| {
        let (style, g) = theme.message_type(&m.kind);
        vec![
            Line::styled(
                when(Some(&m.timestamp), app.now(), app.absolute_times()),
                theme.dim(),
            ),
            Line::from(Span::styled(format!("{g} {}", m.kind), style)),
            Line::raw(source_of(m)),
            Line::raw(payload_summary(m)),
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
            items: &msgs,
        },
        row,
    );
}

/// The table's columns: the payload takes the room left over.
const COLUMNS: [Col; 4] = [
    Col::new("TIME", 6, 32),
    Col::new("TYPE", 10, 24),
    Col::new("SOURCE", 8, 32),
    Col::new("PAYLOAD", 10, 400).flex(),
];

/// The source of a message; a line mirrored from another machine's shared track (docs/NATS.md)
/// shows where it came from: `worker-1@konan`.
fn source_of(m: &crate::engine::Envelope) -> String {
    match m
        .extra
        .get("from_pantheon")
        .and_then(serde_json::Value::as_str)
    {
        Some(p) => format!("{}@{p}", m.source),
        None => m.source.clone(),
    }
}

/// Pane 3: the bus tail of the shown track.
pub(crate) struct Bus;

pub(crate) fn cycle_track(app: &mut App, forward: bool) {
    let names: Vec<String> = app.snapshot().tracks.iter().map(|t| t.name.clone()).collect();
    if names.is_empty() {
        app.flash(FlashKind::Info, "no tracks under conductor/tracks");
        return;
    }
    let cur = app
        .track_name()
        .and_then(|t| names.iter().position(|n| *n == t))
        .unwrap_or(0);
    let next = if forward {
        (cur + 1) % names.len()
    } else {
        (cur + names.len() - 1) % names.len()
    };
    app.panes_mut().bus.track = Some(names[next].clone());
    for p in [Pane::Bus, Pane::Board] {
        let st = &mut app.panes_mut()[p];
        st.selected = 0;
        st.gone = None;
    }
}

/// Stops the bus tail from following, remembering the newest message so the new ones count.
pub(crate) fn pause_tail(app: &mut App) {
    app.panes_mut().bus.follow = false;
    app.panes_mut().bus.paused_at = items::track(app.snapshot(), app.panes().bus.track.as_deref())
        .and_then(|t| t.messages.last())
        .map(|m| m.id.clone());
}

impl ListPane for Bus {
    type Row<'a> = &'a std::sync::Arc<crate::engine::Envelope>;

    fn rows<'a>(&self, app: &'a App, filter: &Filter) -> Vec<Self::Row<'a>> {
        items::track(app.snapshot(), app.panes().bus.track.as_deref())
            .map(|t| items::messages(t, filter))
            .unwrap_or_default()
    }

    fn key(&self, m: &Self::Row<'_>) -> RowKey {
        RowKey::Message(m.id.as_str().into())
    }
}

impl PaneView for Bus {
    fn title(&self) -> &'static str {
        "Bus"
    }

    fn short_title(&self) -> &'static str {
        "Bus"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: &str, payload: Value) -> Envelope {
        serde_json::from_value(serde_json::json!({
            "id": "msg-1", "type": kind, "source": "s", "payload": payload
        }))
        .unwrap()
    }

    #[test]
    fn board_and_dispatch_messages_read_as_words_not_json() {
        let adv = msg(
            "BOARD_ADVANCE",
            serde_json::json!({"session_id": "b-1", "from": "VOTING", "to": "RESOLVING", "forced": false}),
        );
        assert_eq!(payload_summary(&adv), "VOTING → RESOLVING");
        let round = msg(
            "BOARD_ROUND",
            serde_json::json!({"round": 2, "max_rounds": 3, "status": "IN_PROGRESS"}),
        );
        assert_eq!(payload_summary(&round), "round 2/3 · IN_PROGRESS");
        let d = msg(
            "WORKER_DISPATCHED",
            serde_json::json!({"worker_id": "worker-1.1", "task_id": "1.1", "parallel_group": "pg-1"}),
        );
        assert_eq!(payload_summary(&d), "worker-1.1 · task 1.1 · group pg-1");
    }

    #[test]
    fn a_known_type_without_its_usual_fields_shows_its_raw_payload() {
        let odd = msg("BOARD_ADVANCE", serde_json::json!({"phase": 3}));
        assert_eq!(payload_summary(&odd), r#"{"phase":3}"#);
    }
}
