//! The history as a line of positions, for stepping through it change by change (the console's
//! replay): position `p` is the tree with every change numbered below `p` applied, from the first
//! segment's checkpoint ([`Timeline::first`]) to the tree with every recorded change
//! ([`Timeline::end`]). A position is reached from the newest checkpoint at or before it and at most
//! one segment's records, so a seek costs the same at the start and at the end of a long history.

use super::store::{self, Change, HistoryDir, SegmentHeader, Tree};
use crate::error::{Error, Result};
use crate::store::Root;

/// The positions of a root's history and a cache of the segment read last.
#[derive(Debug)]
pub struct Timeline {
    hist: HistoryDir,
    /// The segments' headers, oldest first.
    heads: Vec<SegmentHeader>,
    end: u64,
    last_us: i64,
    /// The segment read last: its first sequence number and its records, in order.
    cached: Option<(u64, Vec<Change>)>,
}

impl Timeline {
    /// The timeline of `root`'s history; refused on a root never recorded.
    pub fn open(root: &Root) -> Result<Self> {
        let mut t = Self {
            hist: HistoryDir::of(root),
            heads: Vec::new(),
            end: 0,
            last_us: 0,
            cached: None,
        };
        t.refresh()?;
        Ok(t)
    }

    /// Reads the segment headers and the last segment's end again (the history grows while a
    /// recorder runs; retention drops old segments).
    pub fn refresh(&mut self) -> Result<()> {
        let heads: Vec<SegmentHeader> = self
            .hist
            .segments()
            .into_iter()
            .filter_map(|s| self.hist.header(s).filter(|h| h.seq == s))
            .collect();
        let Some(last) = heads.last().cloned() else {
            return Err(Error::not_found(format!(
                "{} was never recorded: no history in {} (run `pantheon serve`, which records by \
                 default, or `pantheon record`)",
                self.hist.root.dir.display(),
                self.hist.dir.display()
            )));
        };
        self.heads = heads;
        // The last segment grows: read it again.
        self.cached = None;
        let tail = self.records(last.seq)?.last().map(|c| (c.seq, c.at_us));
        match tail {
            Some((seq, at_us)) => {
                self.end = seq.saturating_add(1);
                self.last_us = at_us.max(last.t);
            }
            None => {
                self.end = last.seq;
                self.last_us = last.t;
            }
        }
        Ok(())
    }

    /// The first position: the oldest checkpoint kept.
    pub fn first(&self) -> u64 {
        self.heads.first().map_or(0, |h| h.seq)
    }

    /// The last position: every recorded change applied.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The moment of the first position (microseconds).
    pub fn first_us(&self) -> i64 {
        self.heads.first().map_or(0, |h| h.t)
    }

    /// The moment of the last recorded change (microseconds).
    pub fn last_us(&self) -> i64 {
        self.last_us
    }

    /// The history directory.
    pub fn dir(&self) -> &HistoryDir {
        &self.hist
    }

    /// The key prefix of the supervisors' heartbeats (`conductor/supervisor/`).
    fn heartbeat_prefix(&self) -> String {
        let dir = self.hist.root.supervisor_dir();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        format!("{}/{name}/", crate::store::layout::CONDUCTOR_DIR)
    }

    /// True when change `c` is a supervisor's heartbeat (`conductor/supervisor/pid-….json`: a
    /// fifth of a busy root's changes, and no act of anyone's), which stepping skips by default.
    pub fn is_heartbeat(&self, c: &Change) -> bool {
        c.path.starts_with(&self.heartbeat_prefix())
    }

    /// The last change numbered below `pos` that is not a heartbeat (the act the tree at `pos`
    /// shows), looking back at most 10,000 changes.
    pub fn last_act(&mut self, pos: u64) -> Result<Option<Change>> {
        let prefix = self.heartbeat_prefix();
        let act = move |c: &Change| !c.path.starts_with(&prefix);
        Ok(self
            .find(pos.saturating_add(1), false, 10_000, &act)?
            .map(|(_, c)| c))
    }

    /// The position one act away from `pos`, skipping heartbeats: forward, right after the next
    /// change that is not a heartbeat; backward, right after the act before the one `pos` shows
    /// (the last act numbered below `pos`). The end, or the first position, when no act is left
    /// that way.
    pub fn step_act(&mut self, pos: u64, forward: bool) -> Result<u64> {
        let prefix = self.heartbeat_prefix();
        let act = move |c: &Change| !c.path.starts_with(&prefix);
        if forward {
            return Ok(self
                .find(pos, true, u64::MAX, &act)?
                .map_or(self.end, |(p, _)| p));
        }
        let Some((shown, _)) = self.find(pos.saturating_add(1), false, u64::MAX, &act)? else {
            return Ok(self.first());
        };
        Ok(self
            .find(shown, false, u64::MAX, &act)?
            .map_or(self.first(), |(p, _)| p))
    }

    /// Where `pos` falls: the index of the segment whose checkpoint it starts from.
    fn segment_index(&self, pos: u64) -> usize {
        self.heads
            .partition_point(|h| h.seq <= pos)
            .saturating_sub(1)
    }

    /// The records of segment `seg`, in order (read once, then from the cache).
    fn records(&mut self, seg: u64) -> Result<&[Change]> {
        if self.cached.as_ref().is_none_or(|(s, _)| *s != seg) {
            let read = self.hist.segment(seg)?;
            let records = read.records.into_iter().map(|(_, c)| c).collect();
            self.cached = Some((seg, records));
        }
        Ok(self.cached.as_ref().map_or(&[], |(_, r)| r.as_slice()))
    }

    /// The tree at position `pos` (clamped to the timeline).
    pub fn tree_at(&mut self, pos: u64) -> Result<Tree> {
        let pos = pos.clamp(self.first(), self.end);
        let seg = self.heads[self.segment_index(pos)].seq;
        let mut tree = self.hist.checkpoint(seg)?.files;
        let seg_path = self.hist.segment_path(seg);
        let mut appended = std::collections::BTreeSet::new();
        for c in self.records(seg)?.iter().take_while(|c| c.seq < pos) {
            store::apply(&mut tree, c);
            store::check_tree_len(&seg_path, &tree)?;
            if c.kind == store::Kind::App {
                appended.insert(c.path.clone());
            } else {
                appended.remove(&c.path);
            }
        }
        self.hist.check_appended(seg, &tree, &appended)?;
        Ok(tree)
    }

    /// The change numbered `seq`, if the timeline holds it.
    pub fn change(&mut self, seq: u64) -> Result<Option<Change>> {
        if seq < self.first() || seq >= self.end {
            return Ok(None);
        }
        let seg = self.heads[self.segment_index(seq)].seq;
        let records = self.records(seg)?;
        // Records are consecutive, so the index is the distance from the segment's start; a
        // damaged segment falls back to a search.
        let at = usize::try_from(seq - seg).unwrap_or(usize::MAX);
        Ok(match records.get(at) {
            Some(c) if c.seq == seq => Some(c.clone()),
            _ => records.iter().find(|c| c.seq == seq).cloned(),
        })
    }

    /// The moment position `pos` shows: the time of the last change applied, or of the first
    /// checkpoint.
    pub fn moment_of(&mut self, pos: u64) -> Result<i64> {
        let pos = pos.clamp(self.first(), self.end);
        if pos == self.first() {
            return Ok(self.first_us());
        }
        Ok(self
            .change(pos - 1)?
            .map_or(self.first_us(), |c| c.at_us.max(self.first_us())))
    }

    /// The position at moment `at_us`: every change stamped at or before it applied.
    pub fn position_at(&mut self, at_us: i64) -> Result<u64> {
        if at_us < self.first_us() {
            return Ok(self.first());
        }
        let i = self
            .heads
            .partition_point(|h| h.t <= at_us)
            .saturating_sub(1);
        let seg = self.heads[i].seq;
        let records = self.records(seg)?;
        let n = records.partition_point(|c| c.at_us <= at_us);
        Ok(match records.get(n) {
            Some(c) => c.seq,
            None => records
                .last()
                .map_or(seg, |c| c.seq.saturating_add(1))
                .min(self.end),
        })
    }

    /// The nearest change matching `wanted`, at most `budget` changes away: forward, the first one
    /// numbered `pos` or later; backward, the last one numbered below `pos - 1` (the change that led
    /// to `pos` is where the operator stands). The position right after it, with its change.
    pub fn find(
        &mut self,
        pos: u64,
        forward: bool,
        budget: u64,
        wanted: &dyn Fn(&Change) -> bool,
    ) -> Result<Option<(u64, Change)>> {
        let mut looked = 0u64;
        if forward {
            let from_seq = pos.max(self.first());
            for i in self.segment_index(from_seq)..self.heads.len() {
                let records = self.records(self.heads[i].seq)?;
                let from = records.partition_point(|c| c.seq < from_seq);
                for c in &records[from..] {
                    looked += 1;
                    if wanted(c) {
                        return Ok(Some((c.seq + 1, c.clone())));
                    }
                    if looked >= budget {
                        return Ok(None);
                    }
                }
            }
            return Ok(None);
        }
        // Backward: the changes below `pos - 1`, newest first.
        let below = pos.saturating_sub(1).min(self.end);
        if below <= self.first() {
            return Ok(None);
        }
        for i in (0..=self.segment_index(below - 1)).rev() {
            let records = self.records(self.heads[i].seq)?;
            let to = records.partition_point(|c| c.seq < below);
            for c in records[..to].iter().rev() {
                looked += 1;
                if wanted(c) {
                    return Ok(Some((c.seq + 1, c.clone())));
                }
                if looked >= budget {
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::store::{Kind, Pending, Retention, Writer};

    /// A history of three segments: change `i` puts `conductor/f{i % 3}` with `i` as its content at
    /// moment `1_000 + 10 * i`; every fourth change is a journal append.
    fn history(d: &std::path::Path) -> (Root, u64) {
        let root = Root::at(d);
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret, 1_000).unwrap();
        let mut n = 0u64;
        for seg in 0..3 {
            for _ in 0..8 {
                let t = 1_000 + 10 * n as i64;
                let (path, kind) = if n % 4 == 3 {
                    ("conductor/journal.jsonl".to_owned(), Kind::App)
                } else {
                    (format!("conductor/f{}", n % 3), Kind::Put)
                };
                let b = w.put_blob(format!("{n}\n").as_bytes()).unwrap();
                let p = Pending {
                    path,
                    kind,
                    blob: Some(b),
                    len: 2,
                    mtime_us: t,
                    when_us: t,
                };
                w.commit(vec![p], t).unwrap();
                n += 1;
            }
            if seg < 2 {
                w.roll(1_000 + 10 * n as i64).unwrap();
            }
        }
        (root, n)
    }

    fn content(t: &mut Timeline, pos: u64, key: &str) -> Option<String> {
        let tree = t.tree_at(pos).unwrap();
        let f = tree.get(key)?;
        let bytes = t.dir().content(f).unwrap()?;
        Some(String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn every_position_is_the_tree_with_the_changes_below_it() {
        let d = tempfile::tempdir().unwrap();
        let (root, n) = history(d.path());
        let mut t = Timeline::open(&root).unwrap();
        assert_eq!((t.first(), t.end()), (0, n));
        assert_eq!(t.tree_at(0).unwrap().len(), 0);
        // Across the segment boundaries (8 and 16) in both directions, the same trees.
        for pos in (0..=n).chain((0..=n).rev()) {
            let tree = t.tree_at(pos).unwrap();
            let mut want = Tree::new();
            for seq in 0..pos {
                store::apply(&mut want, &t.change(seq).unwrap().unwrap());
            }
            // Blob names change where a closing segment copies them out of its pack: the files'
            // contents, sizes and times are what must match.
            let shown = |tree: &Tree| -> Vec<(String, u64, i64, Option<Vec<u8>>)> {
                tree.iter()
                    .map(|(k, f)| (k.clone(), f.len, f.mtime_us, t.dir().content(f).unwrap()))
                    .collect()
            };
            assert_eq!(shown(&tree), shown(&want), "position {pos}");
        }
        assert_eq!(content(&mut t, 3, "conductor/f2").as_deref(), Some("2\n"));
        assert_eq!(
            content(&mut t, 8, "conductor/journal.jsonl").as_deref(),
            Some("3\n7\n")
        );
        assert_eq!(t.change(n).unwrap(), None);
        assert_eq!(t.moment_of(0).unwrap(), t.first_us());
        assert_eq!(t.moment_of(5).unwrap(), 1_040);
        assert_eq!(t.last_us(), 1_000 + 10 * (n as i64 - 1));
    }

    #[test]
    fn a_moment_is_the_position_after_every_change_stamped_by_then() {
        let d = tempfile::tempdir().unwrap();
        let (root, n) = history(d.path());
        let mut t = Timeline::open(&root).unwrap();
        assert_eq!(t.position_at(0).unwrap(), 0);
        assert_eq!(t.position_at(1_000).unwrap(), 1);
        assert_eq!(t.position_at(1_005).unwrap(), 1);
        assert_eq!(t.position_at(1_080).unwrap(), 9, "the first of segment two");
        assert_eq!(t.position_at(1_079).unwrap(), 8);
        assert_eq!(t.position_at(i64::MAX).unwrap(), n);
    }

    #[test]
    fn find_steps_to_the_next_and_previous_matching_change() {
        let d = tempfile::tempdir().unwrap();
        let (root, n) = history(d.path());
        let mut t = Timeline::open(&root).unwrap();
        let journal = |c: &Change| c.path == "conductor/journal.jsonl";
        // Journal appends are changes 3, 7, 11, …: the position after each is 4, 8, 12, ….
        let next = |t: &mut Timeline, p| t.find(p, true, u64::MAX, &journal).unwrap();
        let prev = |t: &mut Timeline, p| t.find(p, false, u64::MAX, &journal).unwrap();
        assert_eq!(next(&mut t, 0).map(|(p, _)| p), Some(4));
        assert_eq!(next(&mut t, 4).map(|(p, _)| p), Some(8));
        assert_eq!(next(&mut t, 5).map(|(p, _)| p), Some(8));
        assert_eq!(next(&mut t, 20).map(|(p, _)| p), Some(24));
        assert_eq!(next(&mut t, n), None);
        // Standing right after one, the previous is the one before it, across segments.
        assert_eq!(prev(&mut t, 12).map(|(p, _)| p), Some(8));
        assert_eq!(prev(&mut t, 10).map(|(p, _)| p), Some(8));
        assert_eq!(prev(&mut t, 17).map(|(p, _)| p), Some(16));
        assert_eq!(prev(&mut t, 4), None);
        assert_eq!(prev(&mut t, 0), None);
        // The budget bounds the look.
        assert_eq!(t.find(0, true, 3, &journal).unwrap(), None);
        assert_eq!(
            t.find(0, true, 4, &journal).unwrap().map(|(p, _)| p),
            Some(4)
        );
    }

    #[test]
    fn a_root_never_recorded_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = Timeline::open(&Root::at(d.path())).unwrap_err();
        assert!(e.to_string().contains("never recorded"), "{e}");
    }

    #[test]
    fn stepping_by_acts_skips_the_supervisors_heartbeats() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret, 1_000).unwrap();
        // Changes: 0 act, 1 beat, 2 beat, 3 act, 4 beat | (new segment) 5 beat, 6 act, 7 beat.
        let beat = "conductor/supervisor/pid-7.json";
        let plan = [false, true, true, false, true, true, false, true];
        for (n, is_beat) in plan.iter().enumerate() {
            let t = 1_000 + 10 * n as i64;
            let path = if *is_beat {
                beat.to_owned()
            } else {
                format!("conductor/state/wf_{n}.json")
            };
            let b = w.put_blob(format!("{n}").as_bytes()).unwrap();
            let p = Pending {
                path,
                kind: Kind::Put,
                blob: Some(b),
                len: 1,
                mtime_us: t,
                when_us: t,
            };
            w.commit(vec![p], t).unwrap();
            if n == 4 {
                w.roll(t).unwrap();
            }
        }
        let mut t = Timeline::open(&root).unwrap();
        let (c0, c1) = (t.change(0).unwrap().unwrap(), t.change(1).unwrap().unwrap());
        assert!(t.is_heartbeat(&c1) && !t.is_heartbeat(&c0));
        assert_eq!(t.last_act(3).unwrap().map(|c| c.seq), Some(0));
        assert_eq!(t.last_act(4).unwrap().map(|c| c.seq), Some(3));
        assert_eq!(t.last_act(0).unwrap(), None);
        let fwd = |t: &mut Timeline, p| t.step_act(p, true).unwrap();
        let back = |t: &mut Timeline, p| t.step_act(p, false).unwrap();
        // Forward from the start: after act 0, after act 3, after act 6 (across the segments),
        // then the end (only a heartbeat is left).
        assert_eq!(fwd(&mut t, 0), 1);
        assert_eq!(fwd(&mut t, 1), 4);
        assert_eq!(fwd(&mut t, 2), 4, "from among heartbeats, the next act");
        assert_eq!(fwd(&mut t, 4), 7);
        assert_eq!(fwd(&mut t, 7), 8);
        // Back: the act shown at 7 is 6, so the one before it, 3; at 5 (heartbeats after act 3)
        // the act shown is 3, so act 0; before act 0, the first position.
        assert_eq!(back(&mut t, 8), 4, "at the end the act shown is 6");
        assert_eq!(back(&mut t, 7), 4);
        assert_eq!(back(&mut t, 5), 1);
        assert_eq!(back(&mut t, 4), 1);
        assert_eq!(back(&mut t, 1), 0);
        assert_eq!(back(&mut t, 0), 0);
    }
}
