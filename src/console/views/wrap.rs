//! Wrapping of detail lines: at word boundaries, by display width, every continuation row indented
//! like the line's text (its leading spaces, a list bullet, or a `key   value` line's value column).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Where the continuation rows of `cells` start.
fn hanging_indent(cells: &[(char, Style)], spans: &[Span], width: usize) -> usize {
    let lead = cells.iter().take_while(|(c, _)| *c == ' ').count();
    let rest: String = cells[lead..].iter().take(2).map(|(c, _)| *c).collect();
    let mut indent = if matches!(rest.as_str(), "- " | "• " | "* ") {
        lead + 2
    } else {
        lead
    };
    // A `kv` line: a padded key span, then the value.
    if let [key, _, ..] = spans
        && (key.content.ends_with("  ")
            || (key.content.ends_with(' ') && !key.content.trim().contains(' ')))
        && key.width() >= 8
    {
        indent = indent.max(key.width());
    }
    // Never so deep that nothing fits.
    if indent * 2 > width { 0 } else { indent }
}

/// One line cut into rows of at most `width` columns.
fn wrap_line(line: Line<'_>, width: usize) -> Vec<Line<'static>> {
    let base = line.style;
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| {
            let st = base.patch(s.style);
            s.content.chars().map(move |c| (c, st))
        })
        .filter(|(c, _)| !c.is_control())
        .collect();
    let w = |c: char| c.width().unwrap_or(0);
    let total: usize = cells.iter().map(|(c, _)| w(*c)).sum();
    if total <= width {
        return vec![rebuild(&cells, 0, line.alignment)];
    }
    let indent = hanging_indent(&cells, &line.spans, width);
    let mut rows = Vec::new();
    let mut start = 0;
    let mut first = true;
    while start < cells.len() {
        let room = if first { width } else { width - indent };
        let mut used = 0;
        let mut end = start;
        let mut last_space = None;
        while end < cells.len() && used + w(cells[end].0) <= room {
            if cells[end].0 == ' ' && end > start {
                last_space = Some(end);
            }
            used += w(cells[end].0);
            end += 1;
        }
        if end == start {
            // A character wider than the room: take it anyway rather than loop.
            end += 1;
        } else if end < cells.len()
            && cells[end].0 != ' '
            && let Some(sp) = last_space
        {
            end = sp;
        }
        let pad = if first { 0 } else { indent };
        rows.push(rebuild(&cells[start..end], pad, line.alignment));
        start = end;
        while start < cells.len() && cells[start].0 == ' ' {
            start += 1;
        }
        first = false;
    }
    rows
}

fn rebuild(
    cells: &[(char, Style)],
    pad: usize,
    alignment: Option<ratatui::layout::Alignment>,
) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    if pad > 0 {
        spans.push(Span::raw(" ".repeat(pad)));
    }
    let mut cur = String::new();
    let mut style = None;
    for (c, st) in cells {
        if style.is_some_and(|s| s != *st) {
            spans.push(Span::styled(
                std::mem::take(&mut cur),
                style.unwrap_or_default(),
            ));
        }
        style = Some(*st);
        cur.push(*c);
    }
    if !cur.is_empty() {
        spans.push(Span::styled(cur, style.unwrap_or_default()));
    }
    let mut l = Line::from(spans);
    l.alignment = alignment;
    l
}

/// Every line wrapped to `width` columns.
pub(crate) fn wrap_lines(lines: Vec<Line<'_>>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    lines
        .into_iter()
        .flat_map(|l| wrap_line(l, width))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn continuation_rows_keep_the_indent_of_their_line() {
        let kv = Line::from(vec![
            Span::raw(format!("{:<14}", "summary")),
            Span::raw("one two three four five six"),
        ]);
        let rows: Vec<String> = wrap_lines(vec![kv], 30).iter().map(text).collect();
        assert_eq!(
            rows,
            vec!["summary       one two three", "              four five six"]
        );
        let bullet = Line::raw("  - alpha beta gamma delta");
        let rows: Vec<String> = wrap_lines(vec![bullet], 16).iter().map(text).collect();
        assert_eq!(rows, vec!["  - alpha beta", "    gamma delta"]);
        let long = Line::raw("x".repeat(25));
        assert_eq!(
            wrap_lines(vec![long], 10).len(),
            3,
            "a word longer than a row is cut"
        );
    }
}
