//! The one table every pane draws with: columns sized from the rows on screen (each between a
//! minimum and its widest cell, capped), the width left over handed to the flexible text column, and
//! cells cut with `…` only when the terminal really is too narrow (optional columns go first).

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Row, Table, TableState};

use crate::console::theme::Theme;

use super::block;

/// Space between two columns: two when every column fits whole with it, else one.
const SPACING: [u16; 2] = [2, 1];

/// How one column is sized.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col {
    pub header: &'static str,
    /// Narrower than this the column is not worth showing (it is cut to it, or hidden if optional).
    pub min: u16,
    /// The widest it gets from its content (the flexible column also takes what is left over).
    pub max: u16,
    /// Takes the width left over once every column has its content's width.
    pub flex: bool,
    /// Optional columns are shown whole or not at all: hidden, lowest rank first, when the other
    /// columns would have to be cut (0: never hidden).
    pub hide: u8,
    /// The record's identity: cut only once every other column is at its minimum.
    pub keep: bool,
}

impl Col {
    pub(crate) const fn new(header: &'static str, min: u16, max: u16) -> Self {
        Self {
            header,
            min,
            max,
            flex: false,
            hide: 0,
            keep: false,
        }
    }

    /// The free-text column that takes the leftover width.
    pub(crate) const fn flex(mut self) -> Self {
        self.flex = true;
        self
    }

    /// Hidden (rank 1 first) rather than cut when the terminal is too narrow.
    pub(crate) const fn hide(mut self, rank: u8) -> Self {
        self.hide = rank;
        self
    }

    /// The identity column: cut last.
    pub(crate) const fn keep(mut self) -> Self {
        self.keep = true;
        self
    }
}

/// The width of each column in `avail` cells (0: hidden), from the content of `rows`, and the
/// space between columns.
pub(crate) fn layout(cols: &[Col], rows: &[Vec<Line>], avail: u16) -> (Vec<u16>, u16) {
    let natural = natural_widths(cols, rows);
    let n = natural.iter().filter(|w| **w > 0).count() as u16;
    // The free-text column is cut anyway: it does not decide the spacing.
    let whole: u16 = cols
        .iter()
        .zip(&natural)
        .map(|(c, n)| if c.flex { (*n).min(c.min) } else { *n })
        .sum();
    let spacing = if whole + SPACING[0] * n.saturating_sub(1) <= avail {
        SPACING[0]
    } else {
        SPACING[1]
    };
    (fit_widths(cols, &natural, avail, spacing), spacing)
}

/// The width of each column at one space apart (0: hidden).
#[cfg(test)]
fn widths(cols: &[Col], rows: &[Vec<Line>], avail: u16) -> Vec<u16> {
    fit_widths(cols, &natural_widths(cols, rows), avail, SPACING[1])
}

/// Each column's widest cell (or header), between its minimum and its cap; 0 when empty.
fn natural_widths(cols: &[Col], rows: &[Vec<Line>]) -> Vec<u16> {
    cols.iter()
        .enumerate()
        .map(|(i, c)| {
            let widest = rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|l| l.width())
                .chain(std::iter::once(c.header.chars().count()))
                .max()
                .unwrap_or(0)
                .min(u16::MAX as usize) as u16;
            // A column with nothing in it (not even a header) takes no room.
            if widest == 0 {
                0
            } else {
                widest.clamp(c.min.min(c.max), c.max)
            }
        })
        .collect()
}

/// Fits columns of `natural` widths into `avail`: hides optional ones while the minimums do not
/// fit, then [`shrink`]s.
fn fit_widths(cols: &[Col], natural: &[u16], avail: u16, spacing: u16) -> Vec<u16> {
    let mut hidden = vec![false; cols.len()];
    let mut ranks: Vec<(u8, usize)> = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.hide > 0)
        .map(|(i, c)| (c.hide, i))
        .collect();
    ranks.sort();
    let mut ranks = ranks.into_iter();
    loop {
        let visible = hidden.iter().filter(|h| !**h).count() as u16;
        let room = avail.saturating_sub(spacing * visible.saturating_sub(1));
        // The free-text column may shrink to its minimum; every other column should keep its
        // content's width: while that does not fit, optional columns go (whole, never cut).
        let need: u16 = cols
            .iter()
            .zip(natural)
            .zip(&hidden)
            .filter(|(_, h)| !**h)
            .map(|((c, n), _)| if c.flex { c.min.min(*n) } else { *n })
            .sum();
        if need > room
            && let Some((_, i)) = ranks.next()
        {
            hidden[i] = true;
            continue;
        }
        return shrink(cols, natural, &hidden, room);
    }
}

/// Fits the visible columns into `room`, one cell at a time from the widest, each down to its
/// minimum: the flexible column first, then the others, then the flexible (free-text) column gives
/// way whole, the identity columns last (an operator acts on the id, not on the summary); what is
/// left over goes to the flexible column.
fn shrink(cols: &[Col], natural: &[u16], hidden: &[bool], room: u16) -> Vec<u16> {
    let mut w: Vec<u16> = natural
        .iter()
        .zip(hidden)
        .map(|(n, h)| if *h { 0 } else { *n })
        .collect();
    let total = |w: &[u16]| w.iter().map(|x| *x as u32).sum::<u32>();
    let room32 = room as u32;
    if total(&w) <= room32 {
        let spare = (room32 - total(&w)) as u16;
        let target = cols
            .iter()
            .zip(hidden)
            .position(|(c, h)| c.flex && !*h)
            .or_else(|| hidden.iter().rposition(|h| !*h));
        if let Some(i) = target {
            w[i] += spare;
        }
        return w;
    }
    for pass in 0..5 {
        // How narrow a column may get in this pass: the free-text column gives way whole in pass
        // 2, every other column goes below its minimum (to a glyph and `…`) in pass 3, before the
        // identity is cut at all.
        let floor = |i: usize| match pass {
            2 if cols[i].flex => 0,
            3 | 4 if cols[i].flex => 0,
            3 if !cols[i].keep => cols[i].min.min(CUT_FLOOR),
            _ => cols[i].min,
        };
        while total(&w) > room32 {
            let pick = (0..cols.len())
                .filter(|i| !hidden[*i] && w[*i] > floor(*i))
                .filter(|i| {
                    let c = &cols[*i];
                    match pass {
                        0 | 2 => c.flex,
                        1 | 3 => !c.flex && !c.keep,
                        _ => c.keep,
                    }
                })
                .max_by_key(|i| (w[*i] - floor(*i), std::cmp::Reverse(*i)));
            match pick {
                Some(i) => w[i] -= 1,
                None => break,
            }
        }
    }
    w
}

/// The narrowest a column other than the identity is cut to before the identity is cut: a glyph,
/// a letter and `…`.
const CUT_FLOOR: u16 = 3;

/// The width of one character on screen.
fn char_width(c: char) -> usize {
    let mut b = [0u8; 4];
    Span::raw(&*c.encode_utf8(&mut b)).width()
}

/// Cuts `line` to `width` cells, ending in `…` when something was cut; styles are kept.
pub(crate) fn fit(line: Line<'_>, width: u16) -> Line<'_> {
    let width = width as usize;
    if line.width() <= width {
        return line;
    }
    if width == 0 {
        return Line::default();
    }
    let mut out = Vec::new();
    let mut used = 0;
    'spans: for span in line.spans {
        let mut s = String::new();
        for c in span.content.chars() {
            let cw = char_width(c);
            if used + cw > width - 1 {
                s.push('…');
                out.push(Span::styled(s, span.style));
                break 'spans;
            }
            used += cw;
            s.push(c);
        }
        out.push(Span::styled(s, span.style));
    }
    Line::from(out).style(line.style)
}

/// `line` with every case-insensitive occurrence of `words` styled as a match (styles kept).
pub(crate) fn mark<'a>(line: Line<'a>, words: &[String], style: ratatui::style::Style) -> Line<'a> {
    if words.is_empty() {
        return line;
    }
    let cells: Vec<(char, ratatui::style::Style)> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let lower: Vec<char> = cells
        .iter()
        .map(|(c, _)| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut hit = vec![false; cells.len()];
    for w in words {
        let w: Vec<char> = w.chars().collect();
        if w.is_empty() || w.len() > lower.len() {
            continue;
        }
        for i in 0..=lower.len() - w.len() {
            if lower[i..i + w.len()] == w[..] {
                hit[i..i + w.len()].iter_mut().for_each(|h| *h = true);
            }
        }
    }
    if !hit.contains(&true) {
        return line;
    }
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut cur = String::new();
    let mut cur_style = None;
    for ((c, st), h) in cells.into_iter().zip(hit) {
        let st = if h { st.patch(style) } else { st };
        if cur_style.is_some_and(|s| s != st) {
            spans.push(Span::styled(
                std::mem::take(&mut cur),
                cur_style.unwrap_or_default(),
            ));
        }
        cur_style = Some(st);
        cur.push(c);
    }
    if !cur.is_empty() {
        spans.push(Span::styled(cur, cur_style.unwrap_or_default()));
    }
    Line::from(spans).style(line.style)
}

/// The rows of a pane's list: how many there are and which one is selected.
pub(crate) struct Rows {
    pub len: usize,
    pub selected: usize,
    /// Nothing is highlighted (the selected record went away, or the table has no selection).
    pub no_highlight: bool,
}

/// What a list shows past its window: `+N more` below (and the rows above), in the bottom border.
pub(crate) fn more_label(first: usize, shown: usize, len: usize) -> Option<String> {
    let below = len.saturating_sub(first.saturating_add(shown));
    if first == 0 && below == 0 {
        return None;
    }
    let mut s = format!(" rows {}-{}/{len}", first + 1, first + shown);
    if below > 0 {
        s.push_str(&format!(" · +{below} more"));
    }
    s.push(' ');
    Some(s)
}

/// The tail every pane's list shares: the window of rows around the selection (the table scrolls),
/// each built by `row`, drawn by [`draw`] with the selection and the filter's words highlighted and
/// `+N more` in the bottom border when not every row fits. Returns the index of the first row on
/// screen (mouse clicks map screen rows back to records with it).
pub(crate) fn list<'a, T>(
    frame: &mut Frame,
    area: Rect,
    head: Head<'_>,
    items: &[T],
    rows: Rows,
    row: impl Fn(&T) -> Vec<Line<'a>>,
) -> usize {
    list_refit(frame, area, head, items, rows, row, |_, _, _| None)
}

/// A list's title, its columns and its records (what [`super::pane_table`] draws).
pub(crate) struct Listing<'t, T> {
    pub title: String,
    pub cols: &'t [Col],
    pub items: &'t [T],
}

/// A table's title, columns, the filter's words and the theme (what [`list_refit`] draws besides
/// the rows).
pub(crate) struct Head<'t> {
    pub title: String,
    pub cols: &'t [Col],
    pub marks: &'t [String],
    pub theme: &'t Theme,
}

/// [`list`], with `refit(item, column, width)` asked for a shorter form of a cell that does not
/// fit the width its column got (the same words shortened, e.g. a compact deadline), before the
/// cell is cut with `…` (`None`: cut it).
pub(crate) fn list_refit<'a, T>(
    frame: &mut Frame,
    area: Rect,
    table: Head<'_>,
    items: &[T],
    rows: Rows,
    row: impl Fn(&T) -> Vec<Line<'a>>,
    refit: impl Fn(&T, usize, u16) -> Option<Line<'a>>,
) -> usize {
    // Borders (2) and the header row (1).
    let height = area.height.saturating_sub(3) as usize;
    let (first, rel) = super::window(rows.selected, rows.len.min(items.len()), height);
    let shown: Vec<&T> = items.iter().skip(first).take(height).collect();
    let body: Vec<Vec<Line<'a>>> = shown.iter().map(|t| row(t)).collect();
    let more = more_label(first, body.len(), items.len());
    draw(
        frame,
        area,
        table,
        body,
        Some(rel).filter(|_| !rows.no_highlight),
        more,
        &|r, c, w| shown.get(r).and_then(|t| refit(t, c, w)),
    );
    first
}

/// A pane's table, sized and cut by [`layout`] and [`fit`]: `rows` are the rows on screen,
/// `selected` the highlighted one among them (none while the selected record has gone away), the
/// head's marks the filter's words, `more` what the bottom border says of the rest.
fn draw<'a>(
    frame: &mut Frame,
    area: Rect,
    head: Head<'_>,
    rows: Vec<Vec<Line<'a>>>,
    selected: Option<usize>,
    more: Option<String>,
    refit: &dyn Fn(usize, usize, u16) -> Option<Line<'a>>,
) {
    let Head {
        title,
        cols,
        marks,
        theme,
    } = head;
    let (w, spacing) = layout(cols, &rows, area.width.saturating_sub(2));
    let shown: Vec<usize> = (0..cols.len()).filter(|i| w[*i] > 0).collect();
    let header = Row::new(
        shown
            .iter()
            .map(|i| fit(Line::raw(cols[*i].header), w[*i]))
            .collect::<Vec<_>>(),
    )
    .style(theme.header());
    let body = rows.into_iter().enumerate().map(|(at, r)| {
        let mut cells: Vec<Option<Line>> = r.into_iter().map(Some).collect();
        Row::new(
            shown
                .iter()
                .map(|i| {
                    let mut cell = cells.get_mut(*i).and_then(Option::take).unwrap_or_default();
                    if cell.width() > w[*i] as usize
                        && let Some(short) = refit(at, *i, w[*i])
                    {
                        cell = short;
                    }
                    let cell = fit(cell, w[*i]);
                    mark(cell, marks, theme.matched())
                })
                .collect::<Vec<_>>(),
        )
    });
    let title = fit(Line::raw(title), area.width.saturating_sub(2));
    let mut block = block(title, theme);
    if let Some(m) = more {
        block = block.title_bottom(Line::styled(m, theme.dim()).right_aligned());
    }
    let table = Table::new(body, shown.iter().map(|i| Constraint::Length(w[*i])))
        .column_spacing(spacing)
        .header(header)
        .row_highlight_style(theme.selected())
        .block(block);
    let mut state = TableState::default().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[&str]]) -> Vec<Vec<Line<'static>>> {
        cells
            .iter()
            .map(|r| r.iter().map(|c| Line::raw(c.to_string())).collect())
            .collect()
    }

    const COLS: [Col; 4] = [
        Col::new("ID", 6, 40).keep(),
        Col::new("DEFINITION", 8, 30).hide(1),
        Col::new("STATUS", 8, 20),
        Col::new("NOTE", 0, 200).flex(),
    ];

    #[test]
    fn wide_terminals_give_each_column_its_widest_cell_and_the_rest_to_the_flex_column() {
        let r = rows(&[&[
            "wf_cross_pantheon_deploy_1",
            "cross-pantheon-deploy",
            "ok",
            "",
        ]]);
        let w = widths(&COLS, &r, 158);
        assert_eq!(&w[..3], &[26, 21, 8]);
        assert_eq!(w.iter().sum::<u16>() + 3, 158, "the whole row is used");
    }

    #[test]
    fn columns_stand_two_apart_when_everything_fits_whole_and_one_apart_when_not() {
        let r = rows(&[&["wf_1", "def", "ok", ""]]);
        assert_eq!(layout(&COLS, &r, 100).1, 2);
        // 6 + 10 + 8 = 24 wide: whole at one apart (26) but not at two (28).
        assert_eq!(layout(&COLS, &r, 27).1, 1);
    }

    #[test]
    fn a_column_never_goes_past_its_cap_or_under_its_header() {
        let long = "x".repeat(90);
        let r = rows(&[&[&long, "d", "s", ""]]);
        let w = widths(&COLS, &r, 200);
        assert_eq!(w[0], 40);
        assert_eq!(w[1], 10, "DEFINITION header");
    }

    #[test]
    fn narrow_terminals_cut_the_flex_column_hide_optional_ones_then_cut_the_rest_and_the_identity_last()
     {
        let r = rows(&[&[
            "wf_cross_pantheon_deploy_1",
            "cross-pantheon-deploy",
            "awaiting_approval",
            "a note",
        ]]);
        // 26 + 21 + 17 + 6 + 3 = 73: at 70 the note gives the room.
        assert_eq!(widths(&COLS, &r, 70), [26, 21, 17, 3]);
        // At 66 the optional DEFINITION would have to be cut: it is hidden instead, whole or not at all.
        assert_eq!(widths(&COLS, &r, 66), [26, 0, 17, 21]);
        // Narrower: STATUS is cut before the identity, which is cut last.
        assert_eq!(widths(&COLS, &r, 36), [26, 0, 8, 0]);
        // Narrower still: STATUS goes below its minimum (a glyph, a letter and `…`) first.
        assert_eq!(widths(&COLS, &r, 31), [26, 0, 3, 0]);
        let w = widths(&COLS, &r, 24);
        assert_eq!(w, [19, 0, 3, 0], "the identity is cut only then");
    }

    #[test]
    fn a_list_that_does_not_fit_says_how_many_rows_are_below() {
        assert_eq!(more_label(0, 10, 10), None);
        assert_eq!(
            more_label(0, 10, 13).as_deref(),
            Some(" rows 1-10/13 · +3 more ")
        );
        assert_eq!(more_label(3, 10, 13).as_deref(), Some(" rows 4-13/13 "));
    }

    #[test]
    fn fit_cuts_with_an_ellipsis_and_keeps_styles() {
        let l = Line::from(vec![
            Span::styled(
                "▲ ",
                ratatui::style::Style::new().fg(ratatui::style::Color::Red),
            ),
            Span::raw("OVERDUE for 6m"),
        ]);
        let cut = fit(l.clone(), 8);
        assert_eq!(cut.to_string(), "▲ OVERD…");
        assert_eq!(cut.width(), 8);
        assert_eq!(
            cut.spans[0].style,
            ratatui::style::Style::new().fg(ratatui::style::Color::Red)
        );
        assert_eq!(fit(l.clone(), 40), l, "what fits is untouched");
        assert_eq!(fit(l, 0).width(), 0);
    }
}
