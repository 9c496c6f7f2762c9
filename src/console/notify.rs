//! Notifications that reach an operator looking at another window: a terminal bell, a desktop
//! notification (OSC 9 or OSC 777, shown by iTerm2, kitty, WezTerm, foot…) and a hook command that
//! receives each new attention item as one compact JSON object per line on its stdin.
//!
//! All of it is opt-in and comes from the operator's flags (or, later, the operator's own config
//! file: [`NotifySettings`] is what it fills), never from a file in the root, which agents write.
//! A cause that comes and goes (flaps) notifies once; hook runs are rate-limited, the items that
//! arrive in between going to the next run together.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::attention::{Item, Kind};

/// A file the engine cannot read is announced once it stayed so this long: a file caught mid-write
/// by a writer that does not rename into place reads as broken for a moment.
pub(crate) const UNREADABLE_SETTLE: chrono::Duration = chrono::Duration::seconds(3);

/// Which escape sequence carries a desktop notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desktop {
    /// `ESC ] 9 ; text BEL` (iTerm2, WezTerm, kitty, Windows Terminal…).
    Osc9,
    /// `ESC ] 777 ; notify ; title ; text BEL` (foot, urxvt, VTE terminals).
    Osc777,
}

impl Desktop {
    pub fn parse(s: &str) -> Option<Desktop> {
        match s.trim().to_ascii_lowercase().as_str() {
            "osc9" | "9" => Some(Desktop::Osc9),
            "osc777" | "777" => Some(Desktop::Osc777),
            _ => None,
        }
    }
}

/// What to do when a new attention item appears (everything off by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// Ring the terminal bell.
    pub bell: bool,
    /// Send a desktop notification through the terminal.
    pub desktop: Option<Desktop>,
    /// Run this through `sh -c` with the new items on stdin, one JSON object per line.
    pub on_attention: Option<String>,
    /// At most one notification (bell, desktop, hook run) per this interval.
    pub min_interval: Duration,
    /// A cause gone for less than this and back again is the same cause (not notified again).
    pub flap_window: Duration,
}

impl Default for NotifySettings {
    fn default() -> Self {
        Self {
            bell: false,
            desktop: None,
            on_attention: None,
            min_interval: Duration::from_secs(5),
            flap_window: Duration::from_secs(600),
        }
    }
}

impl NotifySettings {
    /// True when any notification is asked for.
    pub fn any(&self) -> bool {
        self.bell || self.desktop.is_some() || self.on_attention.is_some()
    }
}

/// Decides which attention items are new, and when they may be announced.
#[derive(Debug)]
pub(crate) struct Notifier {
    pub settings: NotifySettings,
    /// Every cause seen, with when it was last present.
    known: HashMap<super::attention::Key, Instant>,
    /// The first observation is the baseline: what is there when the console opens is on screen.
    primed: bool,
    /// New items not announced yet (waiting for the rate limit).
    pending: Vec<Item>,
    last_sent: Option<Instant>,
}

impl Notifier {
    pub(crate) fn new(settings: NotifySettings) -> Self {
        Self {
            settings,
            known: HashMap::new(),
            primed: false,
            pending: Vec::new(),
            last_sent: None,
        }
    }

    /// Looks at the current items: the ones never seen (or gone for longer than the flap window)
    /// are queued for announcing. Returns how many were new. `wall` is the clock the items' `since`
    /// is read against.
    pub(crate) fn observe(&mut self, items: &[Item], now: Instant, wall: DateTime<Utc>) -> usize {
        let window = self.settings.flap_window;
        let mut new = 0;
        for item in items {
            if self.primed
                && item.kind == Kind::Unreadable
                && item.since.is_some_and(|t| wall - t < UNREADABLE_SETTLE)
            {
                // Not settled yet: looked at again on a later pass.
                continue;
            }
            if self.known.insert(item.key.clone(), now).is_none() && self.primed {
                self.pending.push(item.clone());
                new += 1;
            }
        }
        self.known
            .retain(|_, seen| now.saturating_duration_since(*seen) < window);
        self.primed = true;
        new
    }

    /// The items to announce now, if the rate limit allows (oldest first).
    pub(crate) fn due(&mut self, now: Instant) -> Option<Vec<Item>> {
        if self.pending.is_empty() {
            return None;
        }
        if self
            .last_sent
            .is_some_and(|t| now.saturating_duration_since(t) < self.settings.min_interval)
        {
            return None;
        }
        self.last_sent = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

/// Text safe to put inside an escape sequence: no control characters (an item's reason comes from
/// files agents write), at most `max` characters.
pub(crate) fn clean(text: &str, max: usize) -> String {
    text.chars()
        .filter(|c| !c.is_control() && *c != '\u{9c}')
        .take(max)
        .collect()
}

/// The one-line summary of a batch.
pub(crate) fn summary(batch: &[Item]) -> String {
    match batch {
        [one] => item_words(one),
        many => format!(
            "{} new items wait on you (first: {})",
            many.len(),
            many.first().map_or("", |i| i.reason.as_str())
        ),
    }
}

/// What a flash or a notification says of an attention item: its kind in words (`stale worker`, not `stale_worker`)
/// and its reason, the kind said once (`overdue: unacked for 6m`, never `overdue: overdue: …`).
pub(crate) fn item_words(item: &Item) -> String {
    let kind = item.kind.as_str().replace('_', " ");
    let reason = item.reason.trim();
    let first = reason
        .split([':', ' ', '(', ','])
        .next()
        .unwrap_or_default()
        .trim_start_matches('▲')
        .to_ascii_lowercase();
    let said = !first.is_empty()
        && (kind.starts_with(&first) || first.starts_with(kind.split(' ').next().unwrap_or("")));
    if said {
        reason.to_owned()
    } else {
        format!("{kind}: {reason}")
    }
}

/// The bytes to write to the terminal for a batch: the bell and/or the desktop notification.
pub(crate) fn terminal_bytes(settings: &NotifySettings, batch: &[Item]) -> Vec<u8> {
    let mut out = Vec::new();
    if batch.is_empty() {
        return out;
    }
    let text = clean(&summary(batch), 200);
    match settings.desktop {
        Some(Desktop::Osc9) => out.extend(format!("\x1b]9;pantheon: {text}\x07").into_bytes()),
        Some(Desktop::Osc777) => {
            out.extend(format!("\x1b]777;notify;pantheon;{text}\x07").into_bytes())
        }
        None => {}
    }
    if settings.bell {
        out.push(0x07);
    }
    out
}

/// The hook's stdin: one compact JSON object per item, one per line.
#[cfg(test)]
pub(crate) fn hook_input(batch: &[Item]) -> String {
    hook_input_with(batch, None)
}

/// [`hook_input`], each line given what `enrich` adds (a held item's `approve_url`, `reject_url`,
/// `expires_at`).
pub fn hook_input_with(batch: &[Item], enrich: Option<&super::hook::Enrich>) -> String {
    let mut s = String::new();
    for i in batch {
        let mut line = i.to_json();
        if let (Some(f), Some(obj)) = (enrich, line.as_object_mut())
            && let Some(extra) = f(i)
        {
            obj.extend(extra);
        }
        s.push_str(&line.to_string());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::attention::{Key, Target};

    fn item(key: &str) -> Item {
        Item::held(key, format!("held \x1b]0;evil\x07 {key}"))
    }

    #[test]
    fn new_items_are_announced_once_and_a_flapping_cause_is_not_announced_again() {
        let mut n = Notifier::new(NotifySettings {
            min_interval: Duration::from_secs(5),
            ..NotifySettings::default()
        });
        let t0 = Instant::now();
        let w0 = Utc::now();
        assert_eq!(
            n.observe(&[item("a")], t0, w0),
            0,
            "the baseline is not announced"
        );
        assert_eq!(n.observe(&[item("a"), item("b")], t0, w0), 1);
        assert_eq!(n.due(t0).map(|b| b.len()), Some(1));
        // b goes and comes back: the same cause.
        n.observe(&[item("a")], t0 + Duration::from_secs(1), w0);
        assert_eq!(
            n.observe(&[item("a"), item("b")], t0 + Duration::from_secs(2), w0),
            0
        );
        // c arrives within the rate limit: held back, then sent.
        n.observe(&[item("c")], t0 + Duration::from_secs(3), w0);
        assert!(n.due(t0 + Duration::from_secs(3)).is_none());
        assert_eq!(
            n.due(t0 + Duration::from_secs(6))
                .map(|b| b[0].key.to_string()),
            Some("held/c/wf_1".into())
        );
    }

    #[test]
    fn a_notification_says_the_kind_once_and_in_words() {
        let overdue = Item::new(
            Key::Overdue("wf_1".into()),
            "overdue: unacked for 6m (limit 5m)".into(),
            Target::Issues,
        );
        assert_eq!(summary(&[overdue]), "overdue: unacked for 6m (limit 5m)");
        let broken = Item::new(
            Key::Unreadable("conductor/pending/x/a.json".into()),
            "cannot read the file".into(),
            Target::Issues,
        );
        assert_eq!(summary(&[broken]), "unreadable file: cannot read the file");
        assert_eq!(summary(&[item("a")]), "held \x1b]0;evil\x07 a");
    }

    #[test]
    fn an_unreadable_file_is_announced_only_once_it_stays_unreadable() {
        let mut n = Notifier::new(NotifySettings::default());
        let (t0, w0) = (Instant::now(), Utc::now());
        n.observe(&[], t0, w0);
        let mut broken = Item::new(
            Key::Unreadable("conductor/pending/x/a.json".into()),
            "cannot read the file".into(),
            crate::console::attention::Target::Issues,
        );
        broken.since = Some(w0);
        assert_eq!(n.observe(std::slice::from_ref(&broken), t0, w0), 0);
        assert_eq!(
            n.observe(
                std::slice::from_ref(&broken),
                t0 + Duration::from_secs(4),
                w0 + chrono::Duration::seconds(4)
            ),
            1
        );
    }

    #[test]
    fn terminal_sequences_carry_no_control_characters_from_the_root() {
        let s = NotifySettings {
            bell: true,
            desktop: Some(Desktop::Osc9),
            ..NotifySettings::default()
        };
        let b = String::from_utf8(terminal_bytes(&s, &[item("x")])).unwrap();
        assert!(
            b.starts_with("\x1b]9;pantheon: held ]0;evil x\x07"),
            "{b:?}"
        );
        assert!(b.ends_with('\x07'));
        assert_eq!(b.matches('\x1b').count(), 1);
        let line = hook_input(&[item("x"), item("y")]);
        assert_eq!(line.lines().count(), 2);
        let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(v["kind"], "held");
        assert_eq!(v["ids"]["handoff_id"], "x");
    }
}
