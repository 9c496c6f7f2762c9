//! The counters and latency histograms of `/metrics`, folded from the journal: every act any
//! process journals on the root (the CLI, the MCP server, `serve`, a foreign writer through the
//! engine) counts, and a restarted `serve` folds the same journal again, so its counters continue
//! where they were instead of starting from 0.
//!
//! Each fold reads only what was appended since the last one (the active file from the offset
//! reached; after a rotation, the segment the rest went into); entries are taken in sequence-number
//! order and any entry at or below the last sequence number folded is skipped, so a re-read never
//! counts twice. Lines longer than the journal's line limit are skipped unread.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use serde::Deserialize;

use crate::engine::{
    JournalVerb, MAX_JOURNAL_LINE_BYTES, Root, journal_path, journal_segments, open_journal,
    time::parse_ts,
};

use super::exposition::Histogram;

/// Upper bounds (seconds) of the ack latency histogram.
pub(crate) const ACK_LATENCY_BOUNDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
];
/// Upper bounds (seconds) of the step duration histogram.
pub(crate) const STEP_DURATION_BOUNDS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0, 604800.0,
];
/// The most dispatches whose first ack (or end) is awaited at once; past it the oldest half is
/// forgotten (their latency is then not observed), so the fold's memory stays bounded.
pub(crate) const MAX_OPEN: usize = 200_000;
/// The most distinct words a counter's label takes (`submit` outcomes); others count as `other`.
pub(crate) const MAX_WORDS: usize = 16;

/// What a dispatch's end is labelled with: its definition and step, both as the engine loaded them.
pub(crate) type StepKey = (Arc<str>, Arc<str>);

#[derive(Debug, Deserialize, Default)]
struct Entry {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    at: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    targets: Targets,
}

#[derive(Debug, Deserialize, Default)]
struct Targets {
    handoff_id: Option<String>,
    next_handoff_id: Option<String>,
}

/// A dispatch waiting for its first ack or its end.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// When it was written (unix seconds).
    at: f64,
    acked: bool,
}

/// The counters folded so far.
#[derive(Debug)]
pub struct JournalFold {
    last_seq: u64,
    /// The active file read: (device, inode), the offset after its last whole line, and the first
    /// sequence number it held (the name its segment gets when it rotates).
    file: Option<((u64, u64), u64)>,
    file_first_seq: u64,
    /// When the first entry folded was written (unix seconds): the counters' `_created`.
    pub first_at: Option<f64>,
    pub acks: BTreeMap<String, u64>,
    pub submits: BTreeMap<String, u64>,
    pub redeliveries: u64,
    pub dead_lettered: u64,
    pub entries: u64,
    pub ack_latency: Histogram,
    /// Step durations by (definition, step), from when `serve` started (see [`Self::note_step`]).
    pub steps: BTreeMap<StepKey, Histogram>,
    open: HashMap<String, Open>,
    step_of: HashMap<String, StepKey>,
}

impl Default for JournalFold {
    fn default() -> Self {
        Self {
            last_seq: 0,
            file: None,
            file_first_seq: 0,
            first_at: None,
            acks: BTreeMap::new(),
            submits: BTreeMap::new(),
            redeliveries: 0,
            dead_lettered: 0,
            entries: 0,
            ack_latency: Histogram::new(ACK_LATENCY_BOUNDS),
            steps: BTreeMap::new(),
            open: HashMap::new(),
            step_of: HashMap::new(),
        }
    }
}

impl JournalFold {
    /// Notes the definition and step of a dispatch the live model shows waiting (the journal does
    /// not say them for a dispatch an ack created), so its end can be labelled.
    pub fn note_step(&mut self, handoff_id: &str, key: StepKey) {
        if self.step_of.len() >= MAX_OPEN && !self.step_of.contains_key(handoff_id) {
            return;
        }
        self.step_of.entry(handoff_id.to_owned()).or_insert(key);
    }

    /// Folds what the journal gained since the last call.
    pub fn fold(&mut self, root: &Root) {
        let path = journal_path(root);
        let Ok(f) = open_journal(&path) else {
            return;
        };
        let Ok(meta) = f.metadata() else { return };
        let id = (meta.dev(), meta.ino());
        let (start, rotated) = match self.file {
            Some((old, off)) if old == id && off <= meta.len() => (off, false),
            Some((old, _)) if old == id => (0, false), // cut back: read again, skip by seq
            Some(_) => (0, true),
            None => (0, self.last_seq == 0),
        };
        if rotated {
            // The rest of the file read before went into a segment named by its first seq (or, at
            // the first fold, every segment is history to count).
            for seg in journal_segments(root) {
                let first = seg
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0);
                if first >= self.file_first_seq
                    && let Ok(sf) = open_journal(&seg)
                {
                    self.read_from(sf, 0);
                }
            }
        }
        let first_before = self.last_seq;
        let off = self.read_from(f, start);
        if start == 0 {
            self.file_first_seq = first_before.saturating_add(1);
        }
        self.file = Some((id, off));
    }

    /// Folds the whole lines of `f` from `start`; returns the offset after the last whole line.
    fn read_from(&mut self, mut f: std::fs::File, start: u64) -> u64 {
        if f.seek(SeekFrom::Start(start)).is_err() {
            return start;
        }
        let mut r = BufReader::with_capacity(256 * 1024, f);
        let mut off = start;
        let mut line = Vec::with_capacity(1024);
        loop {
            line.clear();
            let limit = MAX_JOURNAL_LINE_BYTES as u64 + 1;
            let n = match r.by_ref().take(limit).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if line.last() != Some(&b'\n') {
                if n as u64 >= limit {
                    // Too long: skip the rest of it.
                    let mut rest = 0u64;
                    loop {
                        let Ok(buf) = r.fill_buf() else { return off };
                        if buf.is_empty() {
                            return off;
                        }
                        match buf.iter().position(|b| *b == b'\n') {
                            Some(i) => {
                                r.consume(i + 1);
                                rest = rest.saturating_add(i as u64 + 1);
                                break;
                            }
                            None => {
                                let l = buf.len();
                                r.consume(l);
                                rest = rest.saturating_add(l as u64);
                            }
                        }
                    }
                    off = off.saturating_add(n as u64).saturating_add(rest);
                    continue;
                }
                // A torn last line (a write under way): read it again next time.
                break;
            }
            off = off.saturating_add(n as u64);
            if let Ok(e) = serde_json::from_slice::<Entry>(&line) {
                self.apply(e);
            }
        }
        off
    }

    fn apply(&mut self, e: Entry) {
        if e.seq <= self.last_seq {
            return;
        }
        self.last_seq = e.seq;
        self.entries = self.entries.saturating_add(1);
        let at = parse_ts(&e.at).map(|t| t.timestamp_millis() as f64 / 1000.0);
        if self.first_at.is_none() {
            self.first_at = at;
        }
        let outcome = e.outcome.unwrap_or_default();
        match JournalVerb::parse(&e.action) {
            JournalVerb::Submit => {
                bump(&mut self.submits, &outcome);
                if let (Some(h), Some(at)) = (e.targets.handoff_id, at)
                    && matches!(outcome.as_str(), "dispatched" | "awaiting_approval")
                {
                    self.open_dispatch(h, at);
                }
            }
            JournalVerb::Ack => {
                // A duplicate repeats an ack already counted.
                if outcome.ends_with("(duplicate)") {
                    return;
                }
                let status = match outcome.as_str() {
                    s @ ("accepted" | "pending" | "rejected" | "completed") => s,
                    _ => "other",
                };
                *self.acks.entry(status.to_owned()).or_default() += 1;
                if let (Some(next), Some(at)) = (e.targets.next_handoff_id, at) {
                    self.open_dispatch(next, at);
                }
                let (Some(h), Some(at)) = (e.targets.handoff_id, at) else {
                    return;
                };
                let ends = matches!(status, "rejected" | "completed");
                if let Some(o) = self.open.get_mut(&h) {
                    if !o.acked {
                        o.acked = true;
                        self.ack_latency.observe(at - o.at);
                    }
                    let start = o.at;
                    if ends {
                        self.open.remove(&h);
                        if let Some(key) = self.step_of.remove(&h) {
                            self.steps
                                .entry(key)
                                .or_insert_with(|| Histogram::new(STEP_DURATION_BOUNDS))
                                .observe(at - start);
                        }
                    }
                }
            }
            JournalVerb::Redeliver => self.redeliveries = self.redeliveries.saturating_add(1),
            JournalVerb::DeadLetter => {
                self.dead_lettered = self.dead_lettered.saturating_add(1);
                if let Some(h) = e.targets.handoff_id {
                    self.open.remove(&h);
                    self.step_of.remove(&h);
                }
            }
            _ => {}
        }
    }

    fn open_dispatch(&mut self, handoff: String, at: f64) {
        if self.open.len() >= MAX_OPEN {
            // Forget the older half: their first ack, if it ever comes, is not observed.
            let mut times: Vec<f64> = self.open.values().map(|o| o.at).collect();
            let mid = times.len() / 2;
            times.select_nth_unstable_by(mid, f64::total_cmp);
            let cut = times[mid];
            self.open.retain(|_, o| o.at > cut);
        }
        self.open
            .entry(handoff)
            .or_insert(Open { at, acked: false });
    }

    /// How many dispatches the fold is waiting on (for tests and the docs' bound).
    pub fn open_len(&self) -> usize {
        self.open.len()
    }
}

/// Counts `word` under itself when it is a plain word and the map has room, else under `other`.
fn bump(map: &mut BTreeMap<String, u64>, word: &str) {
    let plain = !word.is_empty()
        && word.len() <= 32
        && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    let key = if plain && (map.contains_key(word) || map.len() < MAX_WORDS) {
        word
    } else {
        "other"
    };
    *map.entry(key.to_owned()).or_default() += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal_segments_dir;
    use std::path::Path;

    fn line(
        seq: u64,
        secs: u32,
        action: &str,
        outcome: &str,
        targets: serde_json::Value,
    ) -> String {
        format!(
            "{}\n",
            serde_json::json!({
                "seq": seq, "at": format!("2026-06-14T10:00:{secs:02}Z"), "action": action,
                "outcome": outcome, "targets": targets, "actor": "t", "source": "cli",
            })
        )
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn counts(f: &JournalFold) -> (u64, u64, u64, u64, u64) {
        (
            f.acks.values().sum(),
            f.submits.values().sum(),
            f.redeliveries,
            f.dead_lettered,
            f.ack_latency.count(),
        )
    }

    #[test]
    fn the_fold_reads_only_what_was_appended_and_follows_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        std::fs::create_dir_all(&root.conductor).unwrap();
        let j = journal_path(&root);
        let h = |id: &str| serde_json::json!({"handoff_id": id});
        append(&j, &line(1, 0, "submit", "dispatched", h("hof_1")));
        append(&j, &line(2, 2, "ack", "accepted", h("hof_1")));
        append(&j, &line(3, 3, "redeliver", "redelivered", h("hof_2")));
        let mut f = JournalFold::default();
        f.fold(&root);
        assert_eq!(counts(&f), (1, 1, 1, 0, 1));
        assert_eq!(f.ack_latency.count(), 1);
        f.fold(&root);
        assert_eq!(
            counts(&f),
            (1, 1, 1, 0, 1),
            "nothing new, nothing counted twice"
        );

        // A torn last line is left for the next fold; a duplicate ack is not counted.
        let whole = line(4, 4, "dead_letter", "dead_lettered", h("hof_2"));
        append(&j, &whole[..10]);
        f.fold(&root);
        assert_eq!(f.dead_lettered, 0);
        append(&j, &whole[10..]);
        append(&j, &line(5, 5, "ack", "accepted (duplicate)", h("hof_1")));
        f.fold(&root);
        assert_eq!(counts(&f), (1, 1, 1, 1, 1));

        // Entries appended after the last fold, then a rotation, then the new file's entries.
        append(&j, &line(6, 6, "submit", "dispatched", h("hof_3")));
        let seg = journal_segments_dir(&root);
        std::fs::create_dir_all(&seg).unwrap();
        std::fs::rename(&j, seg.join(format!("{:020}.jsonl", 1))).unwrap();
        append(&j, &line(7, 9, "ack", "completed", h("hof_3")));
        f.fold(&root);
        assert_eq!(counts(&f), (2, 2, 1, 1, 2));
        assert_eq!(f.acks.get("completed"), Some(&1));

        // A restarted serve folds the same journal to the same counters.
        let mut again = JournalFold::default();
        again.fold(&root);
        assert_eq!(counts(&again), counts(&f));
        assert_eq!(again.ack_latency, f.ack_latency);
        assert_eq!(again.first_at, f.first_at);
        // hof_1 was accepted, not ended: it still waits for its end.
        assert_eq!(again.open_len(), 1);
    }

    #[test]
    fn odd_outcomes_count_under_a_bounded_set_of_words() {
        let mut m = BTreeMap::new();
        for i in 0..40 {
            bump(&mut m, &format!("word{}", "x".repeat(i % 30)));
        }
        bump(&mut m, "Free Text with spaces");
        assert!(m.len() <= MAX_WORDS + 1, "{m:?}");
        assert!(m.get("other").is_some_and(|n| *n > 0));
    }
}
