//! The one line editor every text input of the console uses (prompts, the filter, the `:` line):
//! readline keys (`C-a` `C-e` `C-u` `C-w` `C-k`, `M-b` `M-f`, Home/End, arrows, Delete) and pasted
//! text arriving whole.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A single line of text with a cursor (a byte offset on a character boundary).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineEditor {
    text: String,
    cursor: usize,
    /// True while the text is a suggested answer nobody typed: the first key that types or
    /// deletes replaces it whole, a key that moves the cursor makes it ordinary text to edit, and
    /// Enter takes it as it is.
    suggested: bool,
}

/// What a key did to the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// The text changed.
    Changed,
    /// Only the cursor moved.
    Moved,
    /// The key is not an editing key (the caller decides: Enter, Esc, Tab, Up, Down…).
    Ignored,
}

/// The editor's keys, for the help overlay.
pub(crate) const KEYS: &[(&str, &str)] = &[
    ("C-a Home", "start of the line"),
    ("C-e End", "end of the line"),
    ("← → C-b C-f", "one character"),
    ("M-b M-f", "one word back / forward"),
    ("C-u", "delete to the start"),
    ("C-k", "delete to the end"),
    ("C-w M-Backspace", "delete the word before"),
    ("M-d", "delete the word after"),
    (
        "paste",
        "pasted text is inserted whole (line breaks become spaces)",
    ),
    (
        "Tab",
        "complete a command, pane, track, god or workflow id (: line)",
    ),
    ("↑ ↓", "earlier / later command lines (: line)"),
];

/// Longest line the editor keeps: a reason or a filter, never a document.
pub(crate) const MAX_LEN: usize = 4096;

impl LineEditor {
    /// A line holding `text`, the cursor at its end.
    pub fn new(text: impl Into<String>) -> Self {
        let mut e = Self::default();
        e.set(text);
        e
    }

    /// A line holding the suggested answer `text` (see [`Self::is_suggested`]).
    pub fn suggested(text: impl Into<String>) -> Self {
        let mut e = Self::new(text);
        e.suggested = !e.text.is_empty();
        e
    }

    /// True while the text is a suggestion the first typed key replaces.
    pub fn is_suggested(&self) -> bool {
        self.suggested
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor as a byte offset into [`Self::text`].
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The text before and after the cursor (for drawing it).
    pub fn split(&self) -> (&str, &str) {
        self.text.split_at(self.cursor)
    }

    /// Replaces the text (cleaned as pasted text is) and puts the cursor at the end.
    pub fn set(&mut self, text: impl Into<String>) {
        self.text.clear();
        self.cursor = 0;
        self.suggested = false;
        self.insert_str(&text.into());
    }

    /// Drops a suggestion nobody typed (before a key that types or deletes).
    fn drop_suggestion(&mut self) {
        if self.suggested {
            self.text.clear();
            self.cursor = 0;
            self.suggested = false;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Inserts text at the cursor (a paste): line breaks and tabs become spaces, other control
    /// characters are dropped, and the line stays within [`MAX_LEN`] bytes.
    pub fn insert_str(&mut self, s: &str) {
        self.drop_suggestion();
        let mut clean = String::with_capacity(s.len());
        let mut prev = '\0';
        for raw in s.chars() {
            let c = match raw {
                // A pasted "a\r\nb" gives one space, not two.
                '\n' if prev == '\r' => {
                    prev = raw;
                    continue;
                }
                '\r' | '\n' | '\t' => ' ',
                c if c.is_control() => continue,
                c => c,
            };
            prev = raw;
            if self.text.len() + clean.len() + c.len_utf8() > MAX_LEN {
                break;
            }
            clean.push(c);
        }
        self.text.insert_str(self.cursor, &clean);
        self.cursor += clean.len();
    }

    fn prev_boundary(&self, from: usize) -> usize {
        self.text[..from]
            .char_indices()
            .next_back()
            .map(|(i, _)| i)
            .unwrap_or(0)
    }

    fn next_boundary(&self, from: usize) -> usize {
        self.text[from..]
            .chars()
            .next()
            .map(|c| from + c.len_utf8())
            .unwrap_or(from)
    }

    /// The start of the word before `from` (skipping spaces first), as readline's `M-b`.
    fn word_back(&self, from: usize) -> usize {
        let before = &self.text[..from];
        let trimmed = before.trim_end_matches(|c: char| !c.is_alphanumeric());
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_alphanumeric())
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(0)
    }

    /// The end of the word after `from`, as readline's `M-f`.
    fn word_forward(&self, from: usize) -> usize {
        let after = &self.text[from..];
        let skip = after.len()
            - after
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .len();
        let rest = &after[skip..];
        let word = rest
            .char_indices()
            .find(|(_, c)| !c.is_alphanumeric())
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        from + skip + word
    }

    /// The start of the whitespace-separated word before the cursor, as `C-w` in a shell.
    fn unix_word_back(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(0)
    }

    /// Applies an editing key. On a suggestion, a key that types or deletes replaces it whole
    /// (typing `15m` over a suggested `1h` gives `15m`, a Backspace empties the line), and a key
    /// that moves the cursor keeps it as text to edit.
    pub fn handle(&mut self, ev: &KeyEvent) -> Edit {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        let alt = ev.modifiers.contains(KeyModifiers::ALT);
        if self.suggested {
            match Self::key_effect(ev.code, ctrl, alt) {
                Edit::Changed => {
                    let typed = matches!(ev.code, KeyCode::Char(_)) && !ctrl && !alt;
                    self.drop_suggestion();
                    if !typed {
                        return Edit::Changed;
                    }
                }
                Edit::Moved => self.suggested = false,
                Edit::Ignored => return Edit::Ignored,
            }
        }
        let before = (self.text.len(), self.cursor);
        match ev.code {
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = self.text.len(),
            KeyCode::Char('b') if ctrl => self.cursor = self.prev_boundary(self.cursor),
            KeyCode::Char('f') if ctrl => self.cursor = self.next_boundary(self.cursor),
            KeyCode::Char('u') if ctrl => {
                self.text.replace_range(..self.cursor, "");
                self.cursor = 0;
                return Edit::Changed;
            }
            KeyCode::Char('k') if ctrl => {
                self.text.truncate(self.cursor);
                return Edit::Changed;
            }
            KeyCode::Char('w') if ctrl => {
                let start = self.unix_word_back();
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
                return Edit::Changed;
            }
            KeyCode::Char('h') if ctrl => return self.backspace(),
            KeyCode::Char('d') if ctrl => return self.delete(),
            KeyCode::Char('b') if alt => self.cursor = self.word_back(self.cursor),
            KeyCode::Char('f') if alt => self.cursor = self.word_forward(self.cursor),
            KeyCode::Char('d') if alt => {
                let end = self.word_forward(self.cursor);
                self.text.replace_range(self.cursor..end, "");
                return Edit::Changed;
            }
            KeyCode::Backspace if alt || ctrl => {
                let start = self.word_back(self.cursor);
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
                return Edit::Changed;
            }
            KeyCode::Char(_) if ctrl || alt => return Edit::Ignored,
            KeyCode::Char(c) => {
                self.insert_str(c.encode_utf8(&mut [0; 4]));
                return Edit::Changed;
            }
            KeyCode::Backspace => return self.backspace(),
            KeyCode::Delete => return self.delete(),
            KeyCode::Left => self.cursor = self.prev_boundary(self.cursor),
            KeyCode::Right => self.cursor = self.next_boundary(self.cursor),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = self.text.len(),
            _ => return Edit::Ignored,
        }
        if (self.text.len(), self.cursor) == before {
            Edit::Moved
        } else if self.text.len() != before.0 {
            Edit::Changed
        } else {
            Edit::Moved
        }
    }

    /// What `code` does to a line, without doing it: types or deletes (`Changed`), moves the
    /// cursor (`Moved`), or nothing (`Ignored`).
    fn key_effect(code: KeyCode, ctrl: bool, alt: bool) -> Edit {
        match code {
            KeyCode::Char('a' | 'e' | 'b' | 'f') if ctrl => Edit::Moved,
            KeyCode::Char('b' | 'f') if alt => Edit::Moved,
            KeyCode::Char('u' | 'k' | 'w' | 'h' | 'd') if ctrl => Edit::Changed,
            KeyCode::Char('d') if alt => Edit::Changed,
            KeyCode::Char(_) if ctrl || alt => Edit::Ignored,
            KeyCode::Char(_) | KeyCode::Backspace | KeyCode::Delete => Edit::Changed,
            KeyCode::Left | KeyCode::Right | KeyCode::Home | KeyCode::End => Edit::Moved,
            _ => Edit::Ignored,
        }
    }

    fn backspace(&mut self) -> Edit {
        let start = self.prev_boundary(self.cursor);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
        Edit::Changed
    }

    fn delete(&mut self) -> Edit {
        let end = self.next_boundary(self.cursor);
        self.text.replace_range(self.cursor..end, "");
        Edit::Changed
    }

    /// The word the cursor ends (for completion): its start offset and text.
    pub fn current_word(&self) -> (usize, &str) {
        let before = &self.text[..self.cursor];
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(0);
        (start, &before[start..])
    }

    /// Replaces the word the cursor ends with `with`.
    pub fn replace_current_word(&mut self, with: &str) {
        // Completing a suggestion edits it: what Tab gives is the operator's text.
        self.suggested = false;
        let (start, _) = self.current_word();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
        self.insert_str(with);
    }
}

/// The `:` line's history: oldest first, repeats of the last entry not kept, at most 100 entries.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    entries: Vec<String>,
}

impl History {
    const MAX: usize = 100;

    pub(crate) fn push(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() || self.entries.last().is_some_and(|l| l == line) {
            return;
        }
        if self.entries.len() == Self::MAX {
            self.entries.remove(0);
        }
        self.entries.push(line.to_owned());
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&str> {
        self.entries.get(i).map(String::as_str)
    }
}

/// The longest prefix every candidate shares.
pub(crate) fn common_prefix<'a>(cands: impl IntoIterator<Item = &'a str>) -> String {
    let mut it = cands.into_iter();
    let Some(first) = it.next() else {
        return String::new();
    };
    let mut len = first.len();
    for c in it {
        len = first
            .char_indices()
            .zip(c.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map(|((i, a), _)| i + a.len_utf8())
            .unwrap_or(0)
            .min(len);
    }
    first[..len].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    fn ctrl(c: char) -> KeyEvent {
        key(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn alt(c: char) -> KeyEvent {
        key(KeyCode::Char(c), KeyModifiers::ALT)
    }

    #[test]
    fn a_suggestion_is_replaced_by_typing_and_kept_by_moving() {
        let typed = |e: &mut LineEditor, s: &str| {
            for c in s.chars() {
                e.handle(&key(KeyCode::Char(c), KeyModifiers::NONE));
            }
        };
        let mut e = LineEditor::suggested("1h");
        assert!(e.is_suggested());
        typed(&mut e, "15m");
        assert_eq!(e.text(), "15m", "the first key replaces the suggestion");
        assert!(!e.is_suggested());
        let mut e = LineEditor::suggested("1h");
        e.handle(&key(KeyCode::Backspace, KeyModifiers::NONE));
        assert!(e.is_empty(), "a deleting key removes it whole");
        let mut e = LineEditor::suggested("research");
        e.handle(&key(KeyCode::End, KeyModifiers::NONE));
        typed(&mut e, "2");
        assert_eq!(e.text(), "research2", "a moving key keeps it to edit");
        let mut e = LineEditor::suggested("1h");
        assert_eq!(e.handle(&ctrl('z')), Edit::Ignored);
        assert!(e.is_suggested(), "a key that does nothing leaves it");
        e.insert_str("30s");
        assert_eq!(e.text(), "30s", "a paste replaces it");
        assert!(!LineEditor::suggested("").is_suggested());
        assert!(!LineEditor::new("1h").is_suggested());
    }

    #[test]
    fn readline_keys_move_and_kill() {
        let mut e = LineEditor::new("deploy the stripe hook");
        assert_eq!(e.handle(&ctrl('w')), Edit::Changed);
        assert_eq!(e.text(), "deploy the stripe ");
        e.handle(&alt('b'));
        assert_eq!(e.split().1, "stripe ");
        e.handle(&ctrl('k'));
        assert_eq!(e.text(), "deploy the ");
        e.handle(&ctrl('a'));
        assert_eq!(e.cursor(), 0);
        e.handle(&alt('f'));
        assert_eq!(e.split().0, "deploy");
        e.handle(&ctrl('u'));
        assert_eq!(e.text(), " the ");
        e.handle(&ctrl('e'));
        assert_eq!(e.cursor(), e.text().len());
        e.handle(&key(KeyCode::Home, KeyModifiers::NONE));
        e.handle(&key(KeyCode::Char('X'), KeyModifiers::SHIFT));
        assert_eq!(e.text(), "X the ");
        e.handle(&key(KeyCode::End, KeyModifiers::NONE));
        e.handle(&ctrl('u'));
        assert!(e.is_empty());
        assert_eq!(e.handle(&ctrl('z')), Edit::Ignored, "C-z never inserts a z");
        assert!(e.is_empty());
    }

    #[test]
    fn multibyte_text_is_edited_by_character() {
        let mut e = LineEditor::new("déjà vu");
        e.handle(&key(KeyCode::Left, KeyModifiers::NONE));
        e.handle(&key(KeyCode::Left, KeyModifiers::NONE));
        e.handle(&key(KeyCode::Left, KeyModifiers::NONE));
        e.handle(&key(KeyCode::Backspace, KeyModifiers::NONE));
        assert_eq!(e.text(), "déj vu");
        e.handle(&key(KeyCode::Delete, KeyModifiers::NONE));
        assert_eq!(e.text(), "déjvu");
    }

    #[test]
    fn pasted_text_arrives_whole_on_one_line() {
        let mut e = LineEditor::new("reason: ");
        e.insert_str("the build\r\nbroke\tagain\u{7}");
        assert_eq!(e.text(), "reason: the build broke again");
        let mut big = LineEditor::default();
        big.insert_str(&"x".repeat(MAX_LEN * 2));
        assert_eq!(big.text().len(), MAX_LEN);
    }

    #[test]
    fn history_skips_repeats_and_blanks() {
        let mut h = History::default();
        h.push("pane 3");
        h.push("pane 3");
        h.push("  ");
        h.push("sort age");
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(1), Some("sort age"));
    }

    #[test]
    fn completion_helpers() {
        assert_eq!(common_prefix(["next-round", "next"]), "next");
        assert_eq!(common_prefix(["wf_a", "wf_b"]), "wf_");
        let mut e = LineEditor::new("pane lo");
        assert_eq!(e.current_word(), (5, "lo"));
        e.replace_current_word("locks ");
        assert_eq!(e.text(), "pane locks ");
    }
}
