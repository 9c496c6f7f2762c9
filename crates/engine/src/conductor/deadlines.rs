//! The supervisor's deadline index (docs/PROTOCOL.md §2.10): every open dispatch with an ack deadline
//! and every step timer, keyed by due time in a min-heap, so a pass touches only what is due.
//!
//! The index is built by one full scan (at start, and when the file watcher reports an overflow or a
//! rescan), then kept current from the paths the watcher reports: only the changed dispatch or timer
//! file is read again. Entries whose file changed are superseded lazily (the heap holds a generation
//! number per entry). Nothing here acts: [`Conductor::tick_index`] does, under the workflow's lock and
//! after reading the file again, so an index that is behind never causes a wrong act, only a late one
//! (and the next event or the next full scan corrects it).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::files;
use super::model::{AckStatus, Dispatch};
use crate::store::time::parse_ts;
use crate::store::{GodName, Root};

/// What an indexed file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A dispatch in an inbox (`conductor/pending/{god}/…`).
    Dispatch,
    /// A step timer (`conductor/timers/…`).
    Timer,
}

#[derive(Debug, Clone)]
struct Entry {
    due: DateTime<Utc>,
    generation: u64,
    kind: Kind,
}

/// Open dispatches and step timers by due time.
#[derive(Debug, Default)]
pub struct DeadlineIndex {
    entries: HashMap<PathBuf, Entry>,
    heap: BinaryHeap<Reverse<(DateTime<Utc>, u64, PathBuf)>>,
    generation: u64,
    /// Files read since the index was created (a measure of the work done).
    pub reads: u64,
    /// Open dispatches whose deadline can never fire, and why (`super::delivery::never_due`).
    pub never_due: std::collections::BTreeMap<PathBuf, String>,
    /// The earliest `until` of a pause in force, as the last pass read it (docs/PROTOCOL.md §2.14).
    pub(crate) pause_due: Option<DateTime<Utc>>,
}

/// When an inbox dispatch needs the supervisor: its ack deadline; at once when a crash left a move
/// half done (its `to_god` differs from its inbox, or it carries `dead_at`); `None` otherwise.
pub(crate) fn dispatch_due(d: &Dispatch, inbox_god: &str) -> Option<DateTime<Utc>> {
    if d.deliveries.is_empty() && d.ack_wait.is_none() {
        return None;
    }
    if d.dead_at.is_some() || d.to_god != inbox_god {
        return Some(DateTime::<Utc>::MIN_UTC);
    }
    if !matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending) {
        return None;
    }
    d.ack_deadline.as_deref().and_then(parse_ts)
}

impl DeadlineIndex {
    /// A full index of `root`.
    pub fn build(root: &Root) -> Self {
        let mut ix = Self::default();
        ix.rebuild(root);
        ix
    }

    /// Forgets everything and scans every inbox and the timers again.
    pub fn rebuild(&mut self, root: &Root) {
        self.entries.clear();
        self.heap.clear();
        self.never_due.clear();
        for god in files::god_dirs(&root.pending_root()) {
            self.scan_dir(root, &root.inbox_dir(&god));
        }
        self.scan_dir(root, &root.timers_dir());
    }

    fn scan_dir(&mut self, root: &Root, dir: &Path) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            self.refresh(root, &e.path());
        }
    }

    /// How many files are indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What `path` would be in the index, by its place alone.
    fn kind_of(root: &Root, path: &Path) -> Option<(Kind, Option<String>)> {
        let name = path.file_name()?.to_str()?;
        let parent = path.parent()?;
        if parent == root.timers_dir() {
            return (!name.starts_with('.') && name.ends_with(".json"))
                .then_some((Kind::Timer, None));
        }
        if parent.parent()? != root.pending_root() {
            return None;
        }
        let god = parent.file_name()?.to_str()?;
        if god.starts_with('_')
            || files::is_foreign_pending_dir(god)
            || GodName::parse(god).is_err()
        {
            return None;
        }
        (!name.starts_with('.') && name.ends_with(".json"))
            .then(|| (Kind::Dispatch, Some(god.to_owned())))
    }

    /// Reads `path` again (a file the watcher reported, or one an act wrote) and updates its entry; a
    /// directory (a new inbox, or one renamed in) is scanned whole.
    pub fn refresh(&mut self, root: &Root, path: &Path) {
        if path == root.pending_root() || path == root.timers_dir() {
            self.rebuild(root);
            return;
        }
        if path.parent() == Some(root.pending_root().as_path()) {
            // An inbox directory itself: scan what is in it now, forget what left it.
            let gone: Vec<PathBuf> = self
                .entries
                .keys()
                .filter(|p| p.parent() == Some(path) && !p.exists())
                .cloned()
                .collect();
            for p in gone {
                self.entries.remove(&p);
            }
            self.never_due
                .retain(|p, _| p.parent() != Some(path) || p.exists());
            if path.is_dir() {
                self.scan_dir(root, path);
            }
            return;
        }
        let Some((kind, god)) = Self::kind_of(root, path) else {
            return;
        };
        let due = match kind {
            Kind::Timer => {
                self.reads += 1;
                super::timers::read_timer(path).and_then(|t| parse_ts(&t.deadline))
            }
            Kind::Dispatch => {
                self.reads += 1;
                let d = files::read_model::<Dispatch>(path).ok().flatten();
                match d
                    .as_ref()
                    .and_then(|d| super::delivery::never_due(d, chrono::Utc::now()))
                {
                    Some(why) => self.never_due.insert(path.to_path_buf(), why),
                    None => self.never_due.remove(path),
                };
                d.and_then(|d| dispatch_due(&d, god.as_deref().unwrap_or_default()))
            }
        };
        match due {
            Some(due) => self.set(path.to_path_buf(), due, kind),
            None => {
                self.entries.remove(path);
            }
        }
    }

    fn set(&mut self, path: PathBuf, due: DateTime<Utc>, kind: Kind) {
        if let Some(e) = self.entries.get(&path)
            && e.due == due
            && e.kind == kind
        {
            return;
        }
        self.generation += 1;
        self.entries.insert(
            path.clone(),
            Entry {
                due,
                generation: self.generation,
                kind,
            },
        );
        self.heap.push(Reverse((due, self.generation, path)));
        // Keep superseded heap items from piling up between full scans.
        if self.heap.len() > 4 * self.entries.len() + 1024 {
            self.compact();
        }
    }

    fn compact(&mut self) {
        self.heap = self
            .entries
            .iter()
            .map(|(p, e)| Reverse((e.due, e.generation, p.clone())))
            .collect();
    }

    fn live_top(&mut self) -> Option<(DateTime<Utc>, PathBuf, Kind)> {
        while let Some(Reverse((due, generation, path))) = self.heap.peek() {
            match self.entries.get(path) {
                Some(e) if e.generation == *generation => {
                    return Some((*due, path.clone(), e.kind));
                }
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// When `path` is still due at `now` (its act failed or was left for later), moves its entry to
    /// `now + retry` (in the index only).
    pub(crate) fn postpone_if_due(
        &mut self,
        path: &Path,
        now: DateTime<Utc>,
        retry: std::time::Duration,
    ) {
        if let Some(e) = self.entries.get(path)
            && e.due <= now
        {
            let kind = e.kind;
            let later = crate::store::time::add(now, retry).unwrap_or(now);
            self.set(path.to_path_buf(), later, kind);
        }
    }

    /// The earliest due time, if anything is indexed (a pause's `until` included).
    pub fn next_due(&mut self) -> Option<DateTime<Utc>> {
        let top = self.live_top().map(|(due, _, _)| due);
        match (top, self.pause_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Puts `path` back, due at `until` (a frozen entry, parked until its pause may end).
    pub(crate) fn park(&mut self, path: &Path, until: DateTime<Utc>, kind: Kind) {
        self.set(path.to_path_buf(), until, kind);
    }

    /// Takes every entry due at `now` out of the index, earliest first (the caller acts on each and
    /// refreshes the paths it touched, which puts them back with their new due time).
    pub(crate) fn take_due(&mut self, now: DateTime<Utc>) -> Vec<(PathBuf, Kind)> {
        let mut out = Vec::new();
        while let Some((due, path, kind)) = self.live_top() {
            if due > now {
                break;
            }
            self.heap.pop();
            self.entries.remove(&path);
            out.push((path, kind));
        }
        out
    }
}
