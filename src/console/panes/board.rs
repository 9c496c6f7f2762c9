//! Pane 6: the board of a track: phases, a card per director, the discussion, the predicted verdict.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use crate::console::app::App;
use crate::console::items::{self, DirectorCard};
use crate::console::keymap::Pane;
use crate::console::theme::Theme;
use crate::engine::{PHASE_COMPLETE, PHASE_IN_PROGRESS};
use crate::live::snapshot::BoardView;

use crate::console::items::Filter;
use crate::console::keymap::{Action, OperatorAction};
use crate::console::panes::{ListPane, PaneView, RowKey};
use crate::console::views::table::fit;
use crate::console::views::{block, empty, kv, section, trunc};

fn num(n: Option<&serde_json::Number>) -> String {
    n.and_then(|n| n.as_f64())
        .map(|f| {
            if f.fract() == 0.0 {
                format!("{f:.0}")
            } else {
                format!("{f}")
            }
        })
        .unwrap_or_else(|| "-".into())
}

fn phase<'a>(name: &str, status: &str, progress: String, theme: &Theme) -> Vec<Span<'a>> {
    let (style, g) = match status {
        PHASE_COMPLETE => (theme.ok(), "✓"),
        PHASE_IN_PROGRESS => (theme.info(), "●"),
        _ => (theme.dim(), "○"),
    };
    vec![
        Span::styled(format!("{g} {name} {progress}"), style),
        Span::raw("   "),
    ]
}

fn card<'a>(
    c: &DirectorCard,
    selected: bool,
    width: u16,
    height: u16,
    theme: &Theme,
) -> Paragraph<'a> {
    let mut l = Vec::new();
    match c.assessment {
        Some(a) => {
            l.push(Line::styled(a.verdict.clone(), theme.verdict(&a.verdict)));
            l.push(Line::raw(format!("score {}", num(a.score.as_ref()))));
            if a.blocking == Some(true) {
                l.push(Line::styled("▲ blocking", theme.alert()));
            }
            if !a.concerns.is_empty() {
                l.push(Line::styled(
                    format!("{} concern(s)", a.concerns.len()),
                    theme.warn(),
                ));
            }
        }
        None => l.push(Line::styled("not assessed", theme.dim())),
    }
    match c.vote {
        Some(v) => l.push(Line::from(vec![
            Span::raw("vote "),
            Span::styled(v.final_verdict.clone(), theme.verdict(&v.final_verdict)),
            Span::raw(format!(" {}", num(v.confidence.as_ref()))),
        ])),
        None => l.push(Line::styled("no vote", theme.dim())),
    }
    let b = block(format!(" {} ", c.director), theme);
    let b = if selected {
        b.border_style(theme.key())
    } else {
        b
    };
    // A value that does not fit ends in `…`, never cut bare (`vote REJECT 0.`); lines below the
    // card's height are counted in its bottom border.
    let inner = width.saturating_sub(2);
    let l: Vec<Line> = l.into_iter().map(|x| fit(x, inner)).collect();
    let b = with_more(b, l.len(), Rect::new(0, 0, width, height), theme);
    Paragraph::new(l).block(b)
}

/// `b` with `+N more` in its bottom border when `lines` do not all fit inside `area`.
fn with_more<'a>(b: Block<'a>, lines: usize, area: Rect, theme: &Theme) -> Block<'a> {
    let hidden = lines.saturating_sub(area.height.saturating_sub(2) as usize);
    if hidden == 0 {
        return b;
    }
    b.title_bottom(Line::styled(format!("+{hidden} more"), theme.dim()).right_aligned())
}

pub(crate) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let snap = &app.snapshot();
    let Some(track) = items::track(snap, app.panes().bus.track.as_deref()) else {
        return empty(
            frame,
            area,
            format!(" {} ", Pane::Board.heading()),
            "No track under conductor/tracks.",
            theme,
        );
    };
    let Some(b) = &track.board else {
        return empty(
            frame,
            area,
            format!(" {} · {} ", Pane::Board.heading(), track.name),
            "No board session on this track (] for the next track).",
            theme,
        );
    };
    let s = &b.session;
    let cards = items::directors(b);
    let sel = app.selected(Pane::Board);
    if app.pane_state().detail
        && let Some(c) = cards.get(sel)
    {
        return crate::console::views::detail(
            frame,
            area,
            format!(" {} on {} ", c.director, s.session_id),
            director_lines(c, theme),
            app,
            theme,
        );
    }
    let [info, cards_area, thread] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Min(3),
    ])
    .areas(area);
    // What does not fit the box ends in `…`, never cut bare (the title, the phases line).
    let inner = info.width.saturating_sub(2);
    let lines: Vec<Line> = session_lines(b, cards.len(), inner, theme)
        .into_iter()
        .map(|l| fit(l, inner))
        .collect();
    let title = fit(
        Line::raw(format!(
            " {} · {} · {} ",
            Pane::Board.heading(),
            track.name,
            s.session_id
        )),
        inner,
    );
    let boxed = with_more(block(title, theme), lines.len(), info, theme);
    frame.render_widget(Paragraph::new(lines).block(boxed), info);
    if !cards.is_empty() {
        let cols = Layout::horizontal(vec![Constraint::Ratio(1, cards.len() as u32); cards.len()])
            .split(cards_area);
        for (i, (c, r)) in cards.iter().zip(cols.iter()).enumerate() {
            frame.render_widget(card(c, i == sel, r.width, r.height, theme), *r);
        }
    }
    draw_discussion(frame, thread, b, theme);
}

/// The detail of one director: the assessment whole (its lists, and the keys only this director
/// writes), then the vote.
fn director_lines<'a>(c: &DirectorCard, theme: &Theme) -> Vec<Line<'a>> {
    let mut l = Vec::new();
    if let Some(a) = c.assessment {
        l.push(kv(
            "verdict",
            a.verdict.clone(),
            theme.verdict(&a.verdict),
            theme,
        ));
        l.push(kv("score", num(a.score.as_ref()), theme.base(), theme));
        for (name, list) in [
            ("Concerns", &a.concerns),
            ("Recommendations", &a.recommendations),
            ("Key points", &a.key_points),
        ] {
            if !list.is_empty() {
                section(&mut l, name, theme);
                l.extend(list.iter().map(|x| Line::raw(format!("  • {x}"))));
            }
        }
        if !a.extra.is_empty() {
            section(&mut l, "Director-specific", theme);
            l.extend(crate::console::views::json_lines(
                &serde_json::Value::Object(a.extra.clone()),
                theme,
            ));
        }
    } else {
        l.push(Line::styled("No assessment yet.", theme.dim()));
    }
    section(&mut l, "Vote", theme);
    match c.vote {
        Some(v) => {
            l.push(kv(
                "verdict",
                v.final_verdict.clone(),
                theme.verdict(&v.final_verdict),
                theme,
            ));
            l.push(kv(
                "confidence",
                num(v.confidence.as_ref()),
                theme.base(),
                theme,
            ));
            l.extend(v.conditions.iter().map(|x| Line::raw(format!("  • {x}"))));
        }
        None => l.push(Line::styled("  not yet", theme.dim())),
    }
    l
}

/// The session's head: its checkpoint, status and proposal, the four phases with their progress,
/// and the resolution (or what resolving now would give, with `directors` the card count).
fn session_lines<'a>(b: &BoardView, directors: usize, width: u16, theme: &Theme) -> Vec<Line<'a>> {
    let s = &b.session;
    let p = &s.phases;
    let moves = items::board_moves(b);
    let mut ph = Vec::new();
    ph.extend(phase(
        "assess",
        &p.assess.status,
        format!("{}/{}", p.assess.complete, p.assess.of),
        theme,
    ));
    ph.extend(phase(
        "discuss",
        &p.discuss.status,
        match moves.round {
            Some((cur, max)) => format!("round {cur}/{max}"),
            None => format!("rounds {}/{}", p.discuss.rounds, p.discuss.max_rounds),
        },
        theme,
    ));
    ph.extend(phase(
        "vote",
        &p.vote.status,
        format!("{}/{}", p.vote.complete, p.vote.of),
        theme,
    ));
    ph.extend(phase("resolve", &p.resolve.status, String::new(), theme));
    // Narrow: the phases stand one space apart before anything is cut.
    if Line::from(ph.clone()).width() > width as usize {
        for s in ph.iter_mut().filter(|s| s.content == "   ") {
            s.content = " ".into();
        }
    }
    let predicted = b.predicted.clone().unwrap_or_else(|| "-".into());
    vec![
        Line::from(vec![
            Span::styled(format!("{} ", s.checkpoint), theme.accent()),
            Span::styled(format!("{}  ", s.status), theme.header()),
            Span::raw(trunc(&s.proposal_text(), 120)),
        ]),
        Line::from(ph),
        match moves.resolved {
            Some(r) => Line::styled(r, theme.ok()),
            None => Line::from(vec![
                Span::styled("resolve now → ", theme.dim()),
                Span::styled(predicted.clone(), theme.verdict(&predicted)),
                Span::styled(
                    format!("   ({} of {directors} voted)", b.votes.len()),
                    theme.dim(),
                ),
            ]),
        },
    ]
}

/// The discussion thread, scrolled to its newest message, in columns as wide as their widest
/// entry so every message starts under the one above.
fn draw_discussion(frame: &mut Frame, area: Rect, b: &BoardView, theme: &Theme) {
    let pair = |d: &crate::engine::DiscussionLine| {
        format!("{}→{}", d.from, if d.to.is_empty() { "?" } else { &d.to })
    };
    let pair_w = b
        .discussion
        .iter()
        .map(|d| pair(d).chars().count())
        .max()
        .unwrap_or(0);
    let kind_w = b
        .discussion
        .iter()
        .map(|d| d.kind.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = b
        .discussion
        .iter()
        .map(|d| {
            Line::from(vec![
                Span::styled(
                    format!(
                        "r{} ",
                        d.round.map(|r| r.to_string()).unwrap_or_else(|| "?".into())
                    ),
                    theme.dim(),
                ),
                Span::styled(format!("{:<pair_w$} ", pair(d)), theme.info()),
                Span::styled(format!("{:<kind_w$} ", d.kind), theme.accent()),
                Span::raw(d.message.clone()),
                Span::styled(
                    if d.changes_my_verdict {
                        "  (changes verdict)"
                    } else {
                        ""
                    },
                    theme.warn(),
                ),
            ])
        })
        .collect();
    let n = lines.len();
    let visible = area.height.saturating_sub(2) as usize;
    let inner = area.width.saturating_sub(2);
    // The newest messages that fit, each on the rows it wraps to (its indent kept); the older ones
    // are counted in the bottom border (`+3 earlier`), never hidden silently.
    let mut rows: Vec<Vec<Line>> = lines
        .into_iter()
        .map(|l| crate::console::views::wrap_lines(vec![l], inner.max(1) as usize))
        .collect();
    let mut used = 0;
    let mut shown = 0;
    for r in rows.iter().rev() {
        if used + r.len() > visible && shown > 0 {
            break;
        }
        used += r.len();
        shown += 1;
    }
    let hidden = n - shown;
    let mut b = block(fit(Line::raw(format!(" Discussion ({n}) ")), inner), theme);
    if hidden > 0 {
        b = b.title_bottom(
            Line::styled(format!(" +{hidden} earlier "), theme.dim()).right_aligned(),
        );
    }
    let body: Vec<Line> = rows.drain(hidden..).flatten().collect();
    // A message longer than the box shows its newest rows.
    let scroll = body.len().saturating_sub(visible) as u16;
    frame.render_widget(Paragraph::new(body).scroll((scroll, 0)).block(b), area);
}

/// Pane 6: the board session of the shown track, whole.
pub(crate) struct Board;

/// The board's moves on the shown track (None: no session).
pub(crate) fn board_moves(app: &App) -> Option<items::BoardMoves> {
    items::track(app.snapshot(), app.panes().bus.track.as_deref())
        .and_then(|t| t.board.as_ref())
        .map(|b| items::board_moves(b))
}

impl ListPane for Board {
    type Row<'a> = items::DirectorCard<'a>;

    /// The session's directors (the board shows one session whole: no filter).
    fn rows<'a>(&self, app: &'a App, _filter: &Filter) -> Vec<Self::Row<'a>> {
        items::track(app.snapshot(), app.panes().bus.track.as_deref())
            .and_then(|t| t.board.as_ref())
            .map(|b| items::directors(b))
            .unwrap_or_default()
    }

    fn key(&self, c: &Self::Row<'_>) -> RowKey {
        RowKey::Director(c.director.into())
    }
}

impl PaneView for Board {
    fn title(&self) -> &'static str {
        "Board"
    }

    fn short_title(&self) -> &'static str {
        "Brd"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
        draw(frame, area, app, theme)
    }

    fn lists_records(&self) -> bool {
        false
    }

    /// The board's moves depend on its phase; the footer leaves out what is not offered, and the
    /// action itself says why. `Enter` opens the session's detail even before any director.
    fn offers(&self, app: &App, action: &Action) -> Option<bool> {
        let board = || board_moves(app);
        Some(match action {
            Action::Operator(OperatorAction::BoardAdvance) => {
                board().is_some_and(|m| m.next.is_some() && m.complete)
            }
            Action::Operator(OperatorAction::BoardForceAdvance) => {
                board().is_some_and(|m| m.next.is_some() && !m.complete)
            }
            Action::Operator(OperatorAction::BoardNextRound) => {
                board().is_some_and(|m| m.round.is_some())
            }
            Action::Operator(OperatorAction::BoardResolve) => {
                board().is_some_and(|m| m.resolved.is_none())
            }
            Action::Open => true,
            _ => return None,
        })
    }
}
