//! Inboxes and the quarantine: one dispatch file per record.

use crate::engine::{layout, model_from_value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::files::{RecordFile, Refresh};
use super::super::snapshot::{
    DispatchRecord, DispatchRow, DispatchView, FileWarning, InboxView, Record, Sym,
};
use super::workflow::Interner;
use super::{LiveModel, Unread, list_dir, list_files_and_links};

/// A directory of one-JSON-per-file records (an inbox, the quarantine, a god's dead letters).
#[derive(Debug)]
pub(super) struct InboxTracker {
    god: String,
    /// The directory, shared by every row's view (no path kept per file).
    dir: Arc<Path>,
    /// By file name without `.json` (the key is the view's name and, normally, the handoff id: one
    /// allocation for the three).
    files: BTreeMap<Sym, RecordFile<DispatchRecord>>,
    /// Files that are not `*.json` (reported, not read).
    strays: BTreeSet<String>,
    pub(super) view: Arc<InboxView>,
}

/// Parses a dispatch file into its compact row (names shared through `names`); the whole file is
/// read again, through the same bounded read, when a detail asks ([`DispatchView::whole`]).
fn parse_row(
    v: serde_json::Value,
    name: &Sym,
    names: &mut Interner,
) -> Result<DispatchRecord, crate::engine::Refusal> {
    if !v.is_object() {
        return Err(format!(
            "expected a JSON object, found {}",
            crate::engine::json_kind(&v)
        )
        .into());
    }
    let d = model_from_value::<crate::engine::Dispatch>(v)?;
    Ok(Record::new(DispatchRow::with(&d, Some(name), &mut |s| {
        names.get(s)
    })))
}

impl InboxTracker {
    pub(super) fn new(god: &str, dir: PathBuf) -> Self {
        Self {
            god: god.to_owned(),
            dir: Arc::from(dir),
            files: BTreeMap::new(),
            strays: BTreeSet::new(),
            view: Arc::new(InboxView {
                god: god.to_owned(),
                ..InboxView::default()
            }),
        }
    }

    /// Re-lists the directory and refreshes every file; true if anything changed.
    pub(super) fn rescan(&mut self, names: &mut Interner) -> bool {
        self.rescan_deferring(None, names)
    }

    /// Refreshes the file `{stem}.json`, creating its entry when new; what the refresh found.
    fn refresh_file(&mut self, stem: &str, names: &mut Interner) -> Refresh {
        let path = self.dir.join(format!("{stem}.json"));
        let known = self.files.get_key_value(stem).map(|(k, _)| k.clone());
        match known.and_then(|k| Some((self.files.get_mut(stem)?, k))) {
            Some((f, key)) => f.refresh(&path, |v| parse_row(v, &key, names)),
            None => {
                let key = Sym::from(stem);
                let mut f = RecordFile::default();
                let r = f.refresh(&path, |v| parse_row(v, &key, names));
                if r != Refresh::Unchanged {
                    self.files.insert(key, f);
                }
                r
            }
        }
    }

    /// Like [`InboxTracker::rescan`], but a file not seen before is not read: its name goes to
    /// `defer` (the first load reads them a chunk at a time).
    pub(super) fn rescan_deferring(
        &mut self,
        mut defer: Option<&mut Vec<String>>,
        intern: &mut Interner,
    ) -> bool {
        // A symbolic link is never followed: it is reported as a file issue (a stray).
        let (names, links) = list_files_and_links(&self.dir);
        let mut changed = false;
        self.files.retain(|stem, _| {
            let keep = names.binary_search(&format!("{stem}.json")).is_ok();
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
        for n in names.into_iter() {
            let Some(stem) = n.strip_suffix(".json") else {
                continue;
            };
            if let Some(d) = defer.as_deref_mut()
                && !self.files.contains_key(stem)
            {
                d.push(n);
                continue;
            }
            changed |= self.refresh_file(stem, intern) != Refresh::Unchanged;
        }
        changed
    }

    /// Reads a file the first load listed and deferred, with no `stat` before the open (the
    /// listing said it is a file, not a link); one that cannot be opened without following a link,
    /// or at all, goes the way of an event ([`InboxTracker::touch`]). True if anything changed.
    pub(super) fn read_listed(&mut self, name: &str, names: &mut Interner) -> bool {
        if let Some(stem) = name.strip_suffix(".json")
            && !name.starts_with('.')
            && !self.files.contains_key(stem)
        {
            let key = Sym::from(stem);
            let mut f = RecordFile::default();
            if let Ok(r) = f.read_first(&self.dir.join(name), |v| parse_row(v, &key, names)) {
                let changed = r != Refresh::Unchanged;
                if changed {
                    self.files.insert(key, f);
                }
                return changed;
            }
        }
        self.touch(name, names)
    }

    /// Refreshes one file named by an event; true if anything changed.
    pub(super) fn touch(&mut self, name: &str, names: &mut Interner) -> bool {
        if name.starts_with('.') {
            return false;
        }
        let Some(stem) = name.strip_suffix(".json") else {
            return self.rescan(names);
        };
        if is_symlink(&self.dir.join(name)) {
            return self.rescan(names);
        }
        let exists = self.dir.join(name).exists();
        match self.refresh_file(stem, names) {
            Refresh::Unchanged => {
                if !exists {
                    // An event for a file already gone (a temp name, a quick move): forget it.
                    self.files.remove(stem);
                }
                false
            }
            Refresh::Removed => {
                self.files.remove(stem);
                true
            }
            _ => true,
        }
    }

    pub(super) fn rebuild(&mut self) {
        let mut dispatches = Vec::with_capacity(self.files.len());
        let mut errors = Vec::new();
        for (name, f) in &self.files {
            let path = || self.dir.join(format!("{name}.json"));
            match f.value() {
                Some(p) => dispatches.push(DispatchView {
                    dir: self.dir.clone(),
                    name: name.clone(),
                    dispatch: p.clone(),
                    warning: f.warning().map(Box::from),
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
        // Oldest first: by dispatch time (parsed once, when the file was read), then file name.
        let at = |d: &DispatchView| d.dispatch.dispatched_at.as_ref().and_then(|t| t.at());
        dispatches.sort_by(|a, b| at(a).cmp(&at(b)).then_with(|| a.name.cmp(&b.name)));
        // Once per change of the inbox, not on every frame that shows its summary row.
        let oldest_at = dispatches
            .iter()
            .filter_map(|d| d.dispatch.dispatched_at.as_ref())
            .min_by_key(|t| t.at())
            .map(|t| t.text().into_owned());
        let unacked = dispatches
            .iter()
            .filter(|d| d.dispatch.ack_status == crate::engine::AckStatus::Unacked)
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
        gods.retain(|g| !crate::engine::is_foreign_pending_dir(g));
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
            if inbox.rescan_deferring(progressive.then_some(&mut later), &mut self.names) || is_new
            {
                inbox.rebuild();
                changed = true;
            }
            deferred.extend(later.into_iter().map(|f| Unread::Dispatch(g.clone(), f)));
        }
        let mut later = Vec::new();
        if self
            .quarantine
            .rescan_deferring(progressive.then_some(&mut later), &mut self.names)
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
            return self.quarantine.read_listed(file, &mut self.names);
        }
        match self.inboxes.get_mut(god) {
            Some(inbox) => inbox.read_listed(file, &mut self.names),
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
