//! Screenshots from the real render path: a drawn `Buffer` becomes an SVG (one text run per style
//! run, cell-exact positions) that `rsvg-convert` turns into a PNG. Used by `examples/screenshots.rs`.

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

/// Pixel size of one terminal cell at the SVG's font size.
pub(crate) const CELL_W: f64 = 8.4;
pub(crate) const CELL_H: f64 = 18.0;
const FONT_SIZE: f64 = 14.0;
const BG: &str = "#1a1b26";
const FG: &str = "#c0caf5";

/// The hex colour of a terminal colour (a Tokyo Night-like palette).
pub(crate) fn hex(c: Color, fg: bool) -> String {
    let s = match c {
        Color::Reset => return if fg { FG.into() } else { BG.into() },
        Color::Black => "#15161e",
        Color::Red => "#f7768e",
        Color::Green => "#9ece6a",
        Color::Yellow => "#e0af68",
        Color::Blue => "#7aa2f7",
        Color::Magenta => "#bb9af7",
        Color::Cyan => "#7dcfff",
        Color::Gray => "#a9b1d6",
        Color::DarkGray => "#565f89",
        Color::LightRed => "#ff899d",
        Color::LightGreen => "#9fe044",
        Color::LightYellow => "#faba4a",
        Color::LightBlue => "#8db0ff",
        Color::LightMagenta => "#c7a9ff",
        Color::LightCyan => "#a4daff",
        Color::White => "#c0caf5",
        Color::Rgb(r, g, b) => return format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) => return format!("#{0:02x}{0:02x}{0:02x}", i),
    };
    s.into()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The strokes of a box-drawing glyph in the cell at (`x`, `y`), reaching the cell's edges so the
/// lines of neighbouring cells join (None: not a box-drawing glyph).
fn box_path(sym: &str, x: f64, y: f64) -> Option<String> {
    let (w, h) = (CELL_W, CELL_H);
    let (cx, cy, r, b) = (x + w / 2.0, y + h / 2.0, x + w, y + h);
    let up = format!("M{cx:.1} {y:.1}V{cy:.1}");
    let down = format!("M{cx:.1} {cy:.1}V{b:.1}");
    let left = format!("M{x:.1} {cy:.1}H{cx:.1}");
    let right = format!("M{cx:.1} {cy:.1}H{r:.1}");
    Some(match sym {
        "│" | "┃" => format!("M{cx:.1} {y:.1}V{b:.1}"),
        "─" | "━" => format!("M{x:.1} {cy:.1}H{r:.1}"),
        "╭" => format!("M{cx:.1} {b:.1}Q{cx:.1} {cy:.1} {r:.1} {cy:.1}"),
        "╮" => format!("M{x:.1} {cy:.1}Q{cx:.1} {cy:.1} {cx:.1} {b:.1}"),
        "╰" => format!("M{cx:.1} {y:.1}Q{cx:.1} {cy:.1} {r:.1} {cy:.1}"),
        "╯" => format!("M{x:.1} {cy:.1}Q{cx:.1} {cy:.1} {cx:.1} {y:.1}"),
        "┌" => format!("{down}{right}"),
        "┐" => format!("{down}{left}"),
        "└" => format!("{up}{right}"),
        "┘" => format!("{up}{left}"),
        "├" => format!("{up}{down}{right}"),
        "┤" => format!("{up}{down}{left}"),
        "┬" => format!("{left}{right}{down}"),
        "┴" => format!("{left}{right}{up}"),
        "┼" => format!("{left}{right}{up}{down}"),
        _ => return None,
    })
}

/// Renders `buf` as an SVG document.
pub fn buffer_to_svg(buf: &Buffer) -> String {
    let (w, h) = (buf.area.width as usize, buf.area.height as usize);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" viewBox="0 0 {:.0} {:.0}">"#,
        w as f64 * CELL_W + 16.0,
        h as f64 * CELL_H + 16.0,
        w as f64 * CELL_W + 16.0,
        h as f64 * CELL_H + 16.0
    );
    let _ = write!(
        out,
        r#"<rect width="100%" height="100%" rx="8" fill="{BG}"/><g transform="translate(8 8)" font-family="DejaVu Sans Mono, monospace" font-size="{FONT_SIZE}">"#
    );
    for y in 0..h {
        let row = &buf.content[y * w..(y + 1) * w];
        // Backgrounds.
        let mut x = 0;
        while x < w {
            let bg = row[x].bg;
            let mut end = x + 1;
            while end < w && row[end].bg == bg {
                end += 1;
            }
            if bg != Color::Reset {
                let _ = write!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{CELL_H}" fill="{}"/>"#,
                    x as f64 * CELL_W,
                    y as f64 * CELL_H,
                    (end - x) as f64 * CELL_W,
                    hex(bg, false)
                );
            }
            x = end;
        }
        // Text runs of one style, stretched to exactly their cells (`textLength`), so a glyph from a
        // fallback font cannot shift the columns after it.
        let mut x = 0;
        while x < w {
            let (fg, bold, dim) = (
                row[x].fg,
                row[x].modifier.contains(Modifier::BOLD),
                row[x].modifier.contains(Modifier::DIM),
            );
            let mut text = String::new();
            let mut end = x;
            while end < w && row[end].fg == fg && row[end].modifier.contains(Modifier::BOLD) == bold
            {
                let sym = row[end].symbol();
                // Box-drawing glyphs are drawn as strokes across the whole cell: as text they
                // leave gaps between rows (the font's glyph is shorter than the cell).
                match box_path(sym, end as f64 * CELL_W, y as f64 * CELL_H) {
                    Some(d) => {
                        let _ = write!(
                            out,
                            r#"<path d="{d}" stroke="{}" stroke-width="1.2" fill="none"{}/>"#,
                            hex(row[end].fg, true),
                            if row[end].modifier.contains(Modifier::DIM) {
                                r#" opacity="0.6""#
                            } else {
                                ""
                            }
                        );
                        text.push(' ');
                    }
                    None => text.push_str(sym),
                }
                end += 1;
            }
            if !text.trim().is_empty() {
                let _ = write!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" textLength="{:.1}" lengthAdjust="spacingAndGlyphs" xml:space="preserve" fill="{}"{}{}>{}</text>"#,
                    x as f64 * CELL_W,
                    y as f64 * CELL_H + CELL_H * 0.75,
                    (end - x) as f64 * CELL_W,
                    hex(fg, true),
                    if bold { r#" font-weight="bold""# } else { "" },
                    if dim { r#" opacity="0.6""# } else { "" },
                    escape(&text)
                );
            }
            x = end;
        }
    }
    out.push_str("</g></svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn svg_places_each_glyph_on_its_cell_and_escapes_markup() {
        let mut b = Buffer::empty(Rect::new(0, 0, 6, 1));
        b.set_string(0, 0, "a<&", Style::new().fg(Color::Red));
        b.set_string(4, 0, "z", Style::new().bg(Color::Blue));
        let svg = buffer_to_svg(&b);
        assert!(
            svg.contains(r##"<text x="0.0" y="13.5" textLength="25.2" lengthAdjust="spacingAndGlyphs" xml:space="preserve" fill="#f7768e">a&lt;&amp;</text>"##),
            "{svg}"
        );
        assert!(svg.contains(r##"fill="#7aa2f7""##), "{svg}");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn vertical_borders_are_strokes_through_the_whole_cell() {
        let mut b = Buffer::empty(Rect::new(0, 0, 3, 2));
        b.set_string(0, 0, "╭─╮", Style::new());
        b.set_string(0, 1, "│x│", Style::new());
        let svg = buffer_to_svg(&b);
        // Row 1's bar runs from the top of its cell (y 18) to the bottom (y 36): no gap.
        assert!(svg.contains(r#"d="M4.2 18.0V36.0""#), "{svg}");
        assert!(!svg.contains('│') && !svg.contains('╭'), "{svg}");
        assert!(svg.contains(">x<") || svg.contains(" x "), "{svg}");
    }
}
