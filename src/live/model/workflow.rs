//! Workflows: a state file each, its abort manifest, and the dispatches still waiting.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::conductor::model::{AbortManifest, Dispatch, WorkflowState};

use super::super::files::{JsonFile, Refresh};
use super::super::snapshot::{Snapshot, WorkflowView};
use super::{LiveModel, Unread, compact_state, keep_all, list_dir, parse_as};

impl LiveModel {
    pub(super) fn refresh_state_file(&mut self, name: &str) -> bool {
        let dir = self.root.state_dir();
        if let Some(id) = name.strip_suffix(".aborted.json") {
            let f = self
                .manifests
                .entry(id.to_owned())
                .or_insert_with(|| JsonFile::new(dir.join(name)));
            let r = f.refresh(|v| parse_as::<AbortManifest>(v, keep_all));
            if r == Refresh::Removed {
                self.manifests.remove(id);
            }
            return r != Refresh::Unchanged;
        }
        let Some(id) = name.strip_suffix(".json") else {
            return false;
        };
        let f = self
            .states
            .entry(id.to_owned())
            .or_insert_with(|| JsonFile::new(dir.join(name)));
        let r = f.refresh(|v| parse_as::<WorkflowState>(v, compact_state));
        if r == Refresh::Removed {
            self.states.remove(id);
        }
        r != Refresh::Unchanged
    }

    fn is_known_state_file(&self, name: &str) -> bool {
        match name.strip_suffix(".aborted.json") {
            Some(id) => self.manifests.contains_key(id),
            None => name
                .strip_suffix(".json")
                .is_some_and(|id| self.states.contains_key(id)),
        }
    }

    pub(super) fn rescan_states(&mut self) {
        let names = list_dir(&self.root.state_dir(), false);
        let before = (self.states.len(), self.manifests.len());
        self.states
            .retain(|id, _| names.contains(&format!("{id}.json")));
        self.manifests
            .retain(|id, _| names.contains(&format!("{id}.aborted.json")));
        let mut changed = before != (self.states.len(), self.manifests.len());
        let mut deferred = Vec::new();
        for n in names.iter().filter(|n| n.ends_with(".json")) {
            if self.progressive && !self.is_known_state_file(n) {
                deferred.push(Unread::State(n.clone()));
                continue;
            }
            changed |= self.refresh_state_file(n);
        }
        self.defer(deferred);
        if changed {
            self.dirty_workflows = true;
        }
    }

    pub(super) fn build_workflows(&self, s: &Snapshot) -> Vec<WorkflowView> {
        let mut waiting: BTreeMap<&str, Vec<(String, Arc<Dispatch>)>> = BTreeMap::new();
        for inbox in s.inboxes.iter().chain(std::iter::once(&*s.quarantine)) {
            for d in inbox.dispatches.iter() {
                waiting
                    .entry(d.dispatch.workflow_id.as_str())
                    .or_default()
                    .push((inbox.god.clone(), d.dispatch.clone()));
            }
        }
        self.states
            .iter()
            .filter_map(|(id, f)| {
                let p = f.value()?;
                Some(WorkflowView {
                    id: id.clone(),
                    path: f.path().to_path_buf(),
                    state: p.typed.clone(),
                    whole: p.whole.clone(),
                    manifest: self
                        .manifests
                        .get(id)
                        .and_then(|m| m.value())
                        .map(|m| m.typed.clone()),
                    warning: f.warning().map(str::to_owned),
                    waiting: waiting.remove(id.as_str()).unwrap_or_default(),
                })
            })
            .collect()
    }
}
