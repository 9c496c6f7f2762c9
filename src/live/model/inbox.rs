//! Inboxes and the quarantine: one dispatch file per record.

use crate::engine::store::layout;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::conductor::model::Dispatch;

use super::super::files::{RecordFile, Refresh};
use super::super::snapshot::{DispatchView, FileWarning, InboxView};
use super::{LiveModel, Parsed, Unread, compact_dispatch, list_dir, list_files_sorted, parse_as};

/// A directory of one-JSON-per-file records (an inbox, the quarantine).
#[derive(Debug)]
pub(super) struct InboxTracker {
    god: String,
    dir: PathBuf,
    /// By file name; the path is `dir` and the name (no path kept per file).
    files: BTreeMap<String, RecordFile<Parsed<Dispatch>>>,
    /// Files that are not `*.json` (reported, not read).
    strays: BTreeSet<String>,
    pub(super) view: Arc<InboxView>,
    /// What of a dispatch the rows keep (see [`compact_dispatch`]).
    compact: fn(&mut Dispatch),
}

impl InboxTracker {
    pub(super) fn new(god: &str, dir: PathBuf) -> Self {
        Self {
            god: god.to_owned(),
            dir,
            files: BTreeMap::new(),
            strays: BTreeSet::new(),
            view: Arc::new(InboxView {
                god: god.to_owned(),
                ..InboxView::default()
            }),
            compact: compact_dispatch,
        }
    }

    /// The same tracker keeping what `compact` leaves of each dispatch (dead letters keep their
    /// `dead_at` and `dead_reason`).
    pub(super) fn compacting(mut self, compact: fn(&mut Dispatch)) -> Self {
        self.compact = compact;
        self
    }

    /// Re-lists the directory and refreshes every file; true if anything changed.
    pub(super) fn rescan(&mut self) -> bool {
        self.rescan_deferring(None)
    }

    /// Like [`InboxTracker::rescan`], but a file not seen before is not read: its name goes to
    /// `defer` (the first load reads them a chunk at a time).
    pub(super) fn rescan_deferring(&mut self, mut defer: Option<&mut Vec<String>>) -> bool {
        let mut names = list_files_sorted(&self.dir);
        let mut changed = false;
        // A symbolic link is never followed: it is reported as a file issue (a stray).
        let links: BTreeSet<String> = names
            .iter()
            .filter(|n| is_symlink(&self.dir.join(n)))
            .cloned()
            .collect();
        names.retain(|n| !links.contains(n));
        self.files.retain(|n, _| {
            let keep = names.binary_search(n).is_ok();
            changed |= !keep;
            keep
        });
        let strays: BTreeSet<String> = names
            .iter()
            .filter(|n| !n.ends_with(".json"))
            .chain(links.iter())
            .cloned()
            .collect();
        if strays != self.strays {
            self.strays = strays;
            changed = true;
        }
        for n in names.into_iter().filter(|n| n.ends_with(".json")) {
            if let Some(d) = defer.as_deref_mut()
                && !self.files.contains_key(&n)
            {
                d.push(n);
                continue;
            }
            let path = self.dir.join(&n);
            let compact = self.compact;
            let f = self.files.entry(n).or_default();
            changed |= f.refresh(&path, |v| parse_as::<Dispatch>(v, compact)) != Refresh::Unchanged;
        }
        changed
    }

    /// Refreshes one file named by an event; true if anything changed.
    pub(super) fn touch(&mut self, name: &str) -> bool {
        if name.starts_with('.') {
            return false;
        }
        if !name.ends_with(".json") || is_symlink(&self.dir.join(name)) {
            return self.rescan();
        }
        let path = self.dir.join(name);
        let exists = path.exists();
        let compact = self.compact;
        let f = self.files.entry(name.to_owned()).or_default();
        match f.refresh(&path, |v| parse_as::<Dispatch>(v, compact)) {
            Refresh::Unchanged => {
                if !exists {
                    // An event for a file already gone (a temp name, a quick move): forget it.
                    self.files.remove(name);
                }
                false
            }
            Refresh::Removed => {
                self.files.remove(name);
                true
            }
            _ => true,
        }
    }

    pub(super) fn rebuild(&mut self) {
        let mut dispatches = Vec::new();
        let mut errors = Vec::new();
        for (name, f) in &self.files {
            let path = || self.dir.join(name);
            match f.value() {
                Some(p) => dispatches.push(DispatchView {
                    path: path(),
                    name: name.trim_end_matches(".json").to_owned(),
                    dispatch: p.typed.clone(),
                    whole: p.whole.clone(),
                    warning: f.warning().map(str::to_owned),
                }),
                None => {
                    if let Some(w) = f.warning() {
                        errors.push(FileWarning {
                            path: path(),
                            message: w.to_owned(),
                            since: None,
                        });
                    }
                }
            }
            if let (Some(_), Some(w)) = (f.value(), f.warning()) {
                errors.push(FileWarning {
                    path: path(),
                    message: w.to_owned(),
                    since: None,
                });
            }
        }
        for s in &self.strays {
            let path = self.dir.join(s);
            let message = if is_symlink(&path) {
                "a symbolic link; not followed"
            } else {
                "not a .json dispatch file; ignored"
            };
            errors.push(FileWarning {
                path,
                message: message.into(),
                since: None,
            });
        }
        // Oldest first: by dispatch time (parsed), then file name.
        dispatches.sort_by(|a, b| {
            let ta = a
                .dispatch
                .dispatched_at
                .as_deref()
                .and_then(crate::engine::store::time::parse_ts);
            let tb = b
                .dispatch
                .dispatched_at
                .as_deref()
                .and_then(crate::engine::store::time::parse_ts);
            ta.cmp(&tb).then_with(|| a.name.cmp(&b.name))
        });
        // Once per change of the inbox, not on every frame that shows its summary row.
        let oldest_at = dispatches
            .iter()
            .filter_map(|d| d.dispatch.dispatched_at.as_deref())
            .min_by_key(|t| crate::engine::store::time::parse_ts(t))
            .map(str::to_owned);
        let unacked = dispatches
            .iter()
            .filter(|d| {
                d.dispatch.ack_status == crate::engine::conductor::model::AckStatus::Unacked
            })
            .count();
        self.view = Arc::new(InboxView {
            god: self.god.clone(),
            dispatches: Arc::new(dispatches),
            oldest_at,
            unacked,
            errors,
        });
    }
}

fn is_symlink(p: &std::path::Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

impl LiveModel {
    pub(super) fn rescan_inboxes(&mut self) {
        let pending = self.root.pending_root();
        let mut gods = list_dir(&pending, true);
        gods.retain(|g| !crate::engine::conductor::files::is_foreign_pending_dir(g));
        let before = self.inboxes.len();
        self.inboxes.retain(|g, _| gods.contains(g));
        let mut changed = before != self.inboxes.len();
        let progressive = self.progressive;
        let mut deferred = Vec::new();
        for g in gods.iter().filter(|g| *g != layout::QUARANTINE_DIR) {
            let is_new = !self.inboxes.contains_key(g);
            let inbox = self
                .inboxes
                .entry(g.clone())
                .or_insert_with(|| InboxTracker::new(g, pending.join(g)));
            let mut later = Vec::new();
            if inbox.rescan_deferring(progressive.then_some(&mut later)) || is_new {
                inbox.rebuild();
                changed = true;
            }
            deferred.extend(later.into_iter().map(|f| Unread::Dispatch(g.clone(), f)));
        }
        let mut later = Vec::new();
        if self
            .quarantine
            .rescan_deferring(progressive.then_some(&mut later))
        {
            self.quarantine.rebuild();
            changed = true;
        }
        deferred.extend(
            later
                .into_iter()
                .map(|f| Unread::Dispatch(layout::QUARANTINE_DIR.into(), f)),
        );
        self.defer(deferred);
        if changed {
            self.dirty_inboxes = true;
        }
    }

    /// Reads one dispatch file left for later by the first load; the inbox is rebuilt by the caller.
    pub(super) fn read_deferred_dispatch(&mut self, god: &str, file: &str) -> bool {
        if god == layout::QUARANTINE_DIR {
            return self.quarantine.touch(file);
        }
        match self.inboxes.get_mut(god) {
            Some(inbox) => inbox.touch(file),
            None => false,
        }
    }

    /// Rebuilds the views of the inboxes named (after deferred reads).
    pub(super) fn rebuild_inboxes(&mut self, gods: &std::collections::BTreeSet<String>) {
        for g in gods {
            if g == layout::QUARANTINE_DIR {
                self.quarantine.rebuild();
            } else if let Some(i) = self.inboxes.get_mut(g) {
                i.rebuild();
            }
        }
        if !gods.is_empty() {
            self.dirty_inboxes = true;
        }
    }
}
