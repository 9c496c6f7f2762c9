//! Text from a root shown on a terminal: what the CLI's tables and the console print of names that
//! files carry (a model, a god, a budget's name in the ledger), which an agent or a foreign script
//! wrote.

use std::borrow::Cow;

/// True for the characters that reorder the text around them when a terminal applies the
/// bidirectional algorithm: the embeddings and overrides U+202A..U+202E and the isolates
/// U+2066..U+2069 ("Trojan Source"). They are invisible, so a name holding one can read as another.
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with each bidirectional control character written out as its escape (`\u{202e}`), so it
/// shows instead of reordering what follows; borrowed when there is none.
pub(crate) fn escape_bidi(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_bidi_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_bidi_control(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The name of `names` a mistyped `word` most likely meant: the closest by edit distance, at most
/// 2 edits and fewer than half its letters (`hephastus` -> `hephaestus`); `None` when none is close.
pub(crate) fn nearest<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .filter(|n| *n != word)
        .map(|n| (edit_distance(word, n), n))
        .filter(|(d, n)| *d <= 2 && *d * 2 < n.chars().count().max(word.chars().count()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance between two short words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_controls_are_written_out_and_other_text_is_kept() {
        assert!(matches!(escape_bidi("claude-opus-4-5"), Cow::Borrowed(_)));
        assert_eq!(escape_bidi("gpt\u{202e}5.4-tpg"), "gpt\\u{202e}5.4-tpg");
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{2066}', '\u{2067}', '\u{2068}',
            '\u{2069}',
        ] {
            let s = format!("a{c}b");
            let e = escape_bidi(&s);
            assert!(
                !e.contains(c) && e.starts_with("a\\u{") && e.ends_with("}b"),
                "{e}"
            );
        }
        // Other text, right-to-left scripts included, is not touched.
        assert_eq!(escape_bidi("שלום ü 名前"), "שלום ü 名前");
    }

    #[test]
    fn a_mistyped_name_gets_the_nearest_one() {
        let gods = ["caduceus", "hephaestus", "hermes", "thoth"];
        assert_eq!(nearest("hephastus", gods), Some("hephaestus"));
        assert_eq!(nearest("hermez", gods), Some("hermes"));
        assert_eq!(nearest("zeus", gods), None);
        assert_eq!(
            nearest("thoth", gods),
            None,
            "the name itself is no suggestion"
        );
    }
}
