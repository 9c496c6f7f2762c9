//! Workflows: a state file each, its abort manifest, and the dispatches still waiting.
//!
//! A state file is kept as a compact row ([`WorkflowRow`]: status, definition, step, god, times,
//! the latest ack) with its names interned, and no path: the file is `state/{id}.json`. The whole
//! file is read only when a detail, a preview or a confirmation asks for it.

use std::path::Path;
use std::sync::Arc;

use crate::engine::{AbortManifest, WorkflowState, model_from_value};

use super::super::files::{JsonFile, RecordFile, Refresh};
use super::super::snapshot::{
    DispatchRecord, Record, Snapshot, Sym, Waiting, WaitingDispatch, WorkflowRow, WorkflowView,
};
use super::{LiveModel, Unread, list_files_sorted, parse_as};

/// The cached state file of one workflow.
pub(super) type StateFile = RecordFile<Record<WorkflowRow, WorkflowState>>;

/// Shares one copy of each god, step and definition name among the rows that hold it.
#[derive(Debug, Default)]
pub(super) struct Interner {
    names: std::collections::HashSet<Sym>,
    /// The size after the last prune: the set is pruned again when it doubles.
    kept: usize,
}

impl Interner {
    /// The shared copy of `s`.
    pub(super) fn get(&mut self, s: &str) -> Sym {
        if let Some(x) = self.names.get(s) {
            return x.clone();
        }
        let x: Sym = Arc::from(s);
        self.names.insert(x.clone());
        x
    }

    /// Forgets names no row holds any more, when the set has doubled since the last prune (a root
    /// whose names are all different must not grow the set without bound).
    pub(super) fn prune(&mut self) {
        if self.names.len() > self.kept.saturating_mul(2).max(1024) {
            self.names.retain(|s| Arc::strong_count(s) > 1);
            self.kept = self.names.len();
        }
    }

    /// How many names are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }
}

/// Parses a state file into its compact row, interning its names.
fn parse_row(
    v: serde_json::Value,
    intern: &mut Interner,
) -> Result<Record<WorkflowRow, WorkflowState>, crate::engine::Refusal> {
    if !v.is_object() {
        return Err(format!(
            "expected a JSON object, found {}",
            crate::engine::json_kind(&v)
        )
        .into());
    }
    let state = model_from_value::<WorkflowState>(v)?;
    Ok(Record::new(WorkflowRow::with(&state, &mut |s| {
        intern.get(s)
    })))
}

impl LiveModel {
    pub(super) fn refresh_state_file(&mut self, name: &str) -> bool {
        let dir = self.root.state_dir();
        if let Some(id) = name.strip_suffix(".aborted.json") {
            let f = self
                .manifests
                .entry(id.to_owned())
                .or_insert_with(|| JsonFile::new(dir.join(name)));
            let r = f.refresh(parse_as::<AbortManifest>);
            if r == Refresh::Removed {
                self.manifests.remove(id);
            }
            return r != Refresh::Unchanged;
        }
        let Some(id) = name.strip_suffix(".json") else {
            return false;
        };
        let path = dir.join(name);
        let intern = &mut self.names;
        let r = match self.states.get_mut(id) {
            Some(f) => f.refresh(&path, |v| parse_row(v, intern)),
            None => {
                let mut f = StateFile::default();
                let r = f.refresh(&path, |v| parse_row(v, intern));
                if r != Refresh::Unchanged {
                    self.states.insert(Sym::from(id), f);
                }
                r
            }
        };
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
        let names = list_files_sorted(&self.root.state_dir());
        let has = |n: String| names.binary_search(&n).is_ok();
        let before = (self.states.len(), self.manifests.len());
        self.states.retain(|id, _| has(format!("{id}.json")));
        self.manifests
            .retain(|id, _| has(format!("{id}.aborted.json")));
        let mut changed = before != (self.states.len(), self.manifests.len());
        let mut deferred = Vec::new();
        for n in names.into_iter().filter(|n| n.ends_with(".json")) {
            if self.progressive && !self.is_known_state_file(&n) {
                deferred.push(Unread::State(n));
                continue;
            }
            changed |= self.refresh_state_file(&n);
        }
        self.defer(deferred);
        if changed {
            self.dirty_workflows = true;
        }
    }

    pub(super) fn build_workflows(&self, s: &Snapshot) -> Vec<WorkflowView> {
        // Every dispatch with its workflow id, sorted by it; the sort is stable, so each workflow
        // keeps its inboxes in god order, then the quarantine, each oldest first.
        let count = s.inboxes.iter().map(|i| i.dispatches.len()).sum::<usize>()
            + s.quarantine.dispatches.len();
        let mut flat: Vec<(&str, Sym, &Arc<DispatchRecord>)> = Vec::with_capacity(count);
        for inbox in s.inboxes.iter().chain(std::iter::once(&*s.quarantine)) {
            // One shared name per inbox, not one per dispatch.
            let god: Sym = Sym::from(inbox.god.as_str());
            for d in inbox.dispatches.iter() {
                flat.push((&*d.dispatch.workflow_id, god.clone(), &d.dispatch));
            }
        }
        flat.sort_by(|a, b| a.0.cmp(b.0));
        // Joined with the states (in id order too): one shared list, a range of it per workflow.
        // A publish of 100,000 rows then makes a few large allocations, not one per row (the
        // small ones, freed at the next publish, left the heap full of holes).
        let mut all = Vec::with_capacity(flat.len());
        // Each workflow's range as two `u32` (a `Waiting` keeps no more), not two `usize`.
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(self.states.len());
        let mut i = 0;
        for id in self.states.keys() {
            while flat.get(i).is_some_and(|f| f.0 < &**id) {
                i += 1;
            }
            let start = all.len();
            while let Some(f) = flat.get(i).filter(|f| f.0 == &**id) {
                all.push((f.1.clone(), f.2.clone()));
                i += 1;
            }
            let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            ranges.push((at(start), at(all.len())));
        }
        drop(flat);
        let all: Arc<[WaitingDispatch]> = all.into();
        let mut list = Vec::with_capacity(self.states.len());
        for ((id, f), (start, end)) in self.states.iter().zip(ranges) {
            let Some(p) = f.value() else {
                continue;
            };
            list.push(WorkflowView {
                id: id.clone(),
                state: p.clone(),
                manifest: self.manifests.get(&**id).and_then(|m| m.value()).cloned(),
                warning: f.warning().map(Box::from),
                waiting: Waiting::new(&all, start as usize, end as usize),
                dir: self.state_dir.clone(),
            });
        }
        list
    }

    /// The state directory every row names its file in.
    pub(super) fn state_dir_of(root: &crate::engine::Root) -> Arc<Path> {
        Arc::from(root.state_dir().as_path())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::console::items::{self, Column, Filter, Sort};
    use crate::engine::Root;
    use crate::engine::WorkflowStatus;
    use crate::live::ModelOptions;
    use crate::live::snapshot::Stamp;

    fn state(id: &str, status: &str, god: &str, def: &str) -> serde_json::Value {
        serde_json::json!({
            "workflow_id": id, "definition_id": def, "status": status,
            "current_step": "build", "dispatched_to": god,
            "step_history": [{"step_id": "research", "god": "thoth", "status": "completed"}],
            "context_bag": {"decisions": [format!("decided {id}")]},
            "acks": [
                {"handoff_id": "h1", "status": "accepted", "acked_at": "2026-06-14T09:00:00Z"},
                {"handoff_id": "h2", "status": "completed", "acked_at": "2026-06-14T10:00:00Z"}
            ],
            "created": "2026-06-14T08:00:00Z", "updated": "2026-06-14T10:00:00Z"
        })
    }

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("conductor/state")).unwrap();
        let root = Root::at(dir.path());
        (dir, root)
    }

    fn write(root: &Root, id: &str, v: &serde_json::Value) -> std::path::PathBuf {
        let p = root.state_dir().join(format!("{id}.json"));
        std::fs::write(&p, v.to_string()).unwrap();
        p
    }

    fn find<'a>(s: &'a Snapshot, id: &str) -> &'a WorkflowView {
        s.workflows.iter().find(|w| &*w.id == id).unwrap()
    }

    #[test]
    fn rows_are_compact_share_their_names_and_read_the_file_whole_on_demand() {
        let (_d, root) = root();
        write(
            &root,
            "wf_a",
            &state("wf_a", "completed", "hermes", "deploy"),
        );
        write(&root, "wf_b", &state("wf_b", "aborted", "hermes", "deploy"));
        write(
            &root,
            "wf_c",
            &state("wf_c", "in_progress", "athena", "deploy"),
        );
        let mut m = LiveModel::open(root.clone(), ModelOptions::default());
        let s = m.snapshot();
        let (a, b, c) = (find(&s, "wf_a"), find(&s, "wf_b"), find(&s, "wf_c"));
        // One copy of each name, whatever the number of rows holding it.
        let def = |w: &WorkflowView| w.state.definition_id.clone().unwrap();
        assert!(Arc::ptr_eq(&def(a), &def(b)) && Arc::ptr_eq(&def(a), &def(c)));
        let god = |w: &WorkflowView| w.state.dispatched_to.clone().unwrap();
        assert!(Arc::ptr_eq(&god(a), &god(b)));
        assert_eq!(&*god(c), "athena");
        // The row: status, step, times and the latest ack only.
        assert_eq!(a.state.status, WorkflowStatus::Completed);
        assert_eq!(a.state.current_step.as_deref(), Some("build"));
        let ten = Stamp::of("2026-06-14T10:00:00Z");
        assert_eq!(a.state.updated, Some(ten.clone()));
        assert_eq!(ten.text(), "2026-06-14T10:00:00Z");
        let last = a.state.last_ack.as_ref().unwrap();
        assert_eq!(last.status.as_str(), "completed");
        assert_eq!(last.acked_at, Some(ten));
        assert_eq!(a.path(), root.state_dir().join("wf_a.json"));
        // Nothing read whole until a detail asks; then once per version of the file.
        assert!(!a.state.whole.is_read() && !b.state.whole.is_read());
        let whole = a.whole().unwrap();
        assert_eq!(whole.typed.step_history.len(), 1);
        assert_eq!(whole.typed.acks.len(), 2);
        assert_eq!(whole.typed.context_bag.decisions, ["decided wf_a"]);
        assert!(a.state.whole.is_read() && !b.state.whole.is_read());
        assert!(Arc::ptr_eq(&whole, &a.whole().unwrap()));
        // A new version of the file is a new row, not read whole yet.
        let mut v = state("wf_a", "failed", "hermes", "deploy");
        v["context_bag"]["decisions"] = serde_json::json!(["changed"]);
        write(&root, "wf_a", &v);
        let s = m.rescan().expect("the change is seen");
        let a = find(&s, "wf_a");
        assert_eq!(a.state.status, WorkflowStatus::Failed);
        assert!(!a.state.whole.is_read());
        assert_eq!(a.whole().unwrap().typed.context_bag.decisions, ["changed"]);
        // Unchanged rows are the same allocation in the new snapshot.
        assert!(Arc::ptr_eq(&find(&s, "wf_b").state, &b.state));
    }

    #[test]
    fn a_broken_file_keeps_its_last_row_and_names_its_path() {
        let (_d, root) = root();
        let p = write(
            &root,
            "wf_x",
            &state("wf_x", "completed", "hermes", "deploy"),
        );
        let mut m = LiveModel::open(root.clone(), ModelOptions::default());
        std::fs::write(&p, "{\"workflow_id\": ").unwrap();
        let s = m.rescan().expect("the change is seen");
        let x = find(&s, "wf_x");
        assert_eq!(x.state.status, WorkflowStatus::Completed);
        assert!(x.warning.as_deref().unwrap().contains("last good"));
        assert!(s.warnings.iter().any(|w| w.path == p), "{:?}", s.warnings);
        // The detail now cannot read the file; the row still says what it knows.
        assert!(x.whole().is_err());
        let known = x.state.to_state(&x.id);
        assert_eq!(known.workflow_id, "wf_x");
        assert_eq!(known.dispatched_to.as_deref(), Some("hermes"));
        assert_eq!(known.acks.len(), 1);
    }

    #[test]
    fn filter_and_sort_work_on_the_compact_rows() {
        let (_d, root) = root();
        for (id, status, god, def) in [
            ("wf_1", "completed", "zeus", "deploy"),
            ("wf_2", "aborted", "apollo", "review"),
            ("wf_3", "waiting_for_ack", "hermes", "deploy"),
            ("wf_10", "failed", "athena", "review"),
            ("wf_11", "stalled", "ares", "deploy"),
        ] {
            write(&root, id, &state(id, status, god, def));
        }
        let m = LiveModel::open(root.clone(), ModelOptions::default());
        let s = m.snapshot();
        let ids = |f: &Filter| -> Vec<String> {
            items::workflows(&s, f)
                .iter()
                .map(|w| w.id.to_string())
                .collect()
        };
        // Unfinished first (stalled needs attention: it is not finished), then natural order.
        assert_eq!(
            ids(&Filter::default()),
            ["wf_3", "wf_11", "wf_1", "wf_2", "wf_10"]
        );
        assert_eq!(ids(&Filter::parse("review")), ["wf_2", "wf_10"]);
        assert_eq!(ids(&Filter::parse("aborted")), ["wf_2"]);
        assert_eq!(ids(&Filter::parse("athena")), ["wf_10"]);
        // The ack column comes from the latest ack the row keeps, but for a stalled workflow
        // (`dead`: its dispatch was dead-lettered, so an earlier step's ack says nothing of it).
        assert_eq!(ids(&Filter::parse("wf_1 completed")), ["wf_1", "wf_10"]);
        assert_eq!(ids(&Filter::parse("dead")), ["wf_11"]);
        assert_eq!(
            ids(&Filter::default().hiding_finished(true)),
            ["wf_3", "wf_11"]
        );
        let by = |column: Column, descending: bool| {
            Filter::default().sorted(Some(Sort { column, descending }))
        };
        assert_eq!(
            ids(&by(Column::God, false)),
            ["wf_2", "wf_11", "wf_10", "wf_3", "wf_1"]
        );
        assert_eq!(
            ids(&by(Column::Status, true)),
            ["wf_3", "wf_11", "wf_10", "wf_1", "wf_2"]
        );
        // None of it read a file whole.
        assert!(s.workflows.iter().all(|w| !w.state.whole.is_read()));
    }

    #[test]
    fn the_interner_forgets_names_no_row_holds() {
        let mut i = Interner::default();
        let a = i.get("hermes");
        assert!(Arc::ptr_eq(&a, &i.get("hermes")));
        for n in 0..3000 {
            i.get(&format!("god{n}"));
        }
        i.prune();
        assert_eq!(i.len(), 1, "only the name still held is kept");
        assert!(Arc::ptr_eq(&a, &i.get("hermes")));
    }

    /// A root of a few thousand workflows, most finished long ago: the first screen comes before
    /// the load ends, the files still running (written lately) are read next, the finished ones
    /// are counted in the header while they load, and the whole root ends up in the snapshot.
    #[test]
    fn a_few_thousand_workflows_load_unfinished_first_and_finished_ones_in_the_background() {
        let (_d, root) = root();
        let old = SystemTime::now() - Duration::from_secs(86_400);
        // Finished ones sort first by name, so only the newest-first order brings the others early.
        for i in 0..2700 {
            let id = format!("wf_a_done_{i}");
            let status = if i % 3 == 0 { "aborted" } else { "completed" };
            let p = write(
                &root,
                &id,
                &state(&id, status, &format!("god{}", i % 7), "deploy"),
            );
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        for i in 0..300 {
            let id = format!("wf_z_live_{i}");
            write(
                &root,
                &id,
                &state(&id, "in_progress", &format!("god{}", i % 7), "deploy"),
            );
        }
        let mut m =
            LiveModel::open_progressive(root.clone(), ModelOptions::default(), Duration::ZERO);
        let first = m.snapshot();
        let l = first.loading.expect("still loading after the first chunk");
        assert_eq!(l.total, 3000);
        assert!(first.workflows.len() < 3000);
        assert!(first.workflows.iter().all(|w| w.state.is_finished()));
        assert_eq!(l.finished, first.workflows.len());
        // The next page: the unfinished ones, written lately.
        let next = m.load_more(Duration::ZERO).expect("a step publishes");
        let active = next
            .workflows
            .iter()
            .filter(|w| !w.state.is_finished())
            .count();
        assert!(active > 0, "unfinished workflows come in the first pages");
        assert!(next.workflows[0].id.starts_with("wf_z_live_"));
        let mut steps = 0;
        while m.is_loading() {
            let s = m.load_more(Duration::ZERO).expect("each step publishes");
            if let Some(l) = s.loading {
                let finished = s.workflows.iter().filter(|w| w.state.is_finished()).count();
                assert_eq!(l.finished, finished);
            }
            steps += 1;
            assert!(steps < 1000);
        }
        let s = m.snapshot();
        assert!(s.loading.is_none());
        assert_eq!(s.workflows.len(), 3000);
        let c = s.counts(chrono::Utc::now());
        assert_eq!((c.workflows, c.active), (3000, 300));
        // The 7 gods and one definition are one copy each, over 3,000 rows.
        let gods: std::collections::BTreeSet<*const u8> = s
            .workflows
            .iter()
            .map(|w| w.state.dispatched_to.as_ref().unwrap().as_ptr())
            .collect();
        assert_eq!(gods.len(), 7);
        // Any of them reads whole on demand.
        let w = find(&s, "wf_a_done_1234");
        assert_eq!(
            w.whole().unwrap().typed.context_bag.decisions,
            ["decided wf_a_done_1234"]
        );
    }
    /// When the state directory takes the first screen's time, the inboxes are listed by the first
    /// step after it; until their dispatches are read no workflow is called orphaned.
    #[test]
    fn inboxes_listed_after_the_first_screen_and_no_orphans_while_loading() {
        let (_d, root) = root();
        let inbox = root.pending_root().join("hermes");
        std::fs::create_dir_all(&inbox).unwrap();
        for i in 0..200 {
            let id = format!("wf_{i}");
            write(
                &root,
                &id,
                &state(&id, "waiting_for_ack", "hermes", "deploy"),
            );
            let d = serde_json::json!({
                "handoff_id": format!("hof_{i}"), "workflow_id": id, "from_god": "thoth",
                "to_god": "hermes", "step": "build", "ack_status": "unacked",
                "context": {"summary": "s"}
            });
            std::fs::write(inbox.join(format!("hof_{i}.json")), d.to_string()).unwrap();
        }
        let mut m =
            LiveModel::open_progressive(root.clone(), ModelOptions::default(), Duration::ZERO);
        let first = m.snapshot();
        assert!(first.loading.is_some() && first.inboxes.is_empty());
        let now = chrono::Utc::now();
        assert_eq!(first.counts(now).orphaned, 0);
        assert!(first.workflows.iter().any(Snapshot::orphaned));
        let mut steps = 0;
        while m.is_loading() {
            let s = m.load_more(Duration::ZERO).expect("each step publishes");
            assert_eq!(s.counts(now).orphaned, 0, "none while loading");
            steps += 1;
            assert!(steps < 100);
        }
        let s = m.snapshot();
        assert_eq!(s.inboxes.len(), 1);
        assert_eq!(s.inboxes[0].dispatches.len(), 200);
        assert!(s.workflows.iter().all(|w| w.waiting.len() == 1));
        assert_eq!(s.counts(now).orphaned, 0);
        // A workflow whose dispatch is gone is orphaned once the load is over.
        std::fs::remove_file(inbox.join("hof_7.json")).unwrap();
        let s = m.rescan().expect("the change is seen");
        assert_eq!(s.counts(now).orphaned, 1);
    }

    /// A workflow waiting at an `await_ack` step for a peer's reply has no dispatch by design: the
    /// header's orphaned count (the engine's rule, shared with `validate`) leaves it out.
    #[test]
    fn a_workflow_waiting_for_a_peer_reply_is_not_orphaned() {
        let (_d, root) = root();
        let mut waiting = state("wf_await_1", "waiting_for_ack", "hermes", "deploy");
        waiting["awaiting_reply"] = serde_json::json!("ob_0123456789abcdef01234567");
        write(&root, "wf_await_1", &waiting);
        write(
            &root,
            "wf_lost_1",
            &state("wf_lost_1", "waiting_for_ack", "hermes", "deploy"),
        );
        let m = LiveModel::open(root.clone(), ModelOptions::default());
        let s = m.snapshot();
        assert!(!Snapshot::orphaned(find(&s, "wf_await_1")));
        assert!(
            Snapshot::orphaned(find(&s, "wf_lost_1")),
            "no dispatch, no reply awaited"
        );
        assert_eq!(s.counts(chrono::Utc::now()).orphaned, 1);
    }

    #[test]
    fn the_first_screen_of_a_progressive_load_has_the_supervisors_and_the_bridge() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        std::fs::create_dir_all(root.supervisor_dir()).unwrap();
        let now = crate::engine::time::now_ts();
        std::fs::write(
            root.supervisor_dir().join("s1.json"),
            serde_json::json!({"last_beat": now}).to_string(),
        )
        .unwrap();
        let status = crate::engine::nats::status_path(&root);
        std::fs::create_dir_all(status.parent().unwrap()).unwrap();
        std::fs::write(
            &status,
            serde_json::json!({"name": "konan", "connected": true, "updated": now}).to_string(),
        )
        .unwrap();
        let m = LiveModel::open_progressive(root, ModelOptions::default(), Duration::ZERO);
        let s = m.snapshot();
        assert_eq!(s.supervisors.len(), 1, "{:?}", s.supervisors);
        assert!(s.supervisors[0].alive(chrono::Utc::now()));
        assert_eq!(s.bridge.as_ref().map(|b| b.name.as_str()), Some("konan"));
    }
}
