//! Abort, cleanup, init and the read-only queries (docs/PROTOCOL.md §1, 2.6, 2.7).

use super::results::{AbortStatus, CleanupStatus, InitStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::definition::{find_definition, load_definitions};
use super::files;
use super::model::{
    AbortManifest, AckStatus, CompletedStep, SkippedArtifact, StepStatus, WorkflowState,
    WorkflowStatus,
};
use super::paging::{self, CompactDispatch, PageRequest, SortKey};
use super::rules::load_rules;
use super::samples::{SAMPLE_RULES, SAMPLE_WORKFLOWS};
use super::schema::BUILTIN_SCHEMA;
use super::{
    AbortResult, Actor, CleanupResult, Conductor, DispatchResult, InboxResult, InitResult,
    PendingEntry, PendingResult, RefusedPath, RuleDetail, RulesResult, StepSummary,
    WorkflowSummary, WorkflowsResult,
};
use crate::error::{Error, Result};
use crate::store::atomic::{ensure_dir, write_atomic, write_json};
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{GodName, HandoffId, WorkflowId};

/// The gods whose inboxes `init` creates.
pub const DEFAULT_GODS: [&str; 8] = [
    "thoth",
    "hephaestus",
    "marvin",
    "hermes",
    "iris",
    "caduceus",
    "mercer",
    "rheta",
];

fn text(p: &Path) -> String {
    p.display().to_string()
}

impl Conductor {
    /// Creates the layout idempotently: directories, default inboxes, the schema and the samples
    /// (each only if no file of that name exists). Never overwrites or deletes anything.
    pub fn init(&self) -> Result<InitResult> {
        let r = &self.root;
        let mut created = Vec::new();
        let mut kept = Vec::new();
        let mut dirs = vec![
            r.dir.clone(),
            r.handoffs.clone(),
            r.workflows_dir(),
            r.rules_dir(),
            r.state_dir(),
            r.pending_root(),
            r.quarantine_dir(),
            r.archive_root(),
            r.tracks_dir(),
        ];
        for g in DEFAULT_GODS {
            dirs.push(r.inbox_dir(&GodName::parse(g)?));
        }
        // Every directory (and the parents it needs) is checked before the first is made, so a file in
        // the way refuses the whole init with nothing created.
        for d in &dirs {
            if let Some(blocked) = d
                .ancestors()
                .take_while(|a| a.starts_with(&r.dir) || *a == d.as_path())
                .find(|a| a.symlink_metadata().is_ok() && !a.is_dir())
            {
                let what = if blocked.is_symlink() {
                    "is a symbolic link to nothing"
                } else {
                    "is not a directory"
                };
                return Err(Error::refused(format!(
                    "{} {what}; remove or rename it (nothing was created)",
                    blocked.display()
                )));
            }
        }
        for d in dirs {
            if !d.is_dir() {
                ensure_dir(&self.root, &d)?;
                created.push(text(&d));
            }
        }
        let mut files: Vec<(PathBuf, &str)> = vec![(r.schema_path(), BUILTIN_SCHEMA)];
        for (name, body) in SAMPLE_WORKFLOWS {
            files.push((r.workflows_dir().join(name), body));
        }
        for (name, body) in SAMPLE_RULES {
            files.push((r.rules_dir().join(name), body));
        }
        let mut upgraded = Vec::new();
        let mut notes = Vec::new();
        let schema = r.schema_path();
        if schema.symlink_metadata().is_ok_and(|m| m.is_file()) {
            let bytes = crate::store::read::read_bytes(&schema)?.unwrap_or_default();
            match super::schema::classify_schema(&bytes) {
                super::schema::SchemaFile::Current => {}
                super::schema::SchemaFile::Shipped(v) => {
                    write_atomic(&self.root, &schema, BUILTIN_SCHEMA.as_bytes())?;
                    upgraded.push(text(&schema));
                    notes.push(format!(
                        "{} was the schema version {v} shipped; upgraded to version {} (adds `traceparent`)",
                        text(&schema),
                        super::schema::SCHEMA_VERSION
                    ));
                }
                super::schema::SchemaFile::Edited => notes.push(format!(
                    "{} differs from every schema pantheon shipped (edited?), so it was left as it is; \
                     the built-in one is version {}: compare with `pantheon init` in an empty directory \
                     and merge by hand, or delete the file and run init again",
                    text(&schema),
                    super::schema::SCHEMA_VERSION
                )),
            }
        }
        for (path, body) in files {
            if upgraded.contains(&text(&path)) {
                continue;
            }
            if path.exists() || path.symlink_metadata().is_ok() {
                kept.push(text(&path));
            } else {
                write_atomic(&self.root, &path, body.as_bytes())?;
                created.push(text(&path));
            }
        }
        Ok(InitResult {
            status: InitStatus::Initialized,
            root: text(&r.dir),
            created,
            kept,
            upgraded,
            notes,
        })
    }

    /// A god's whole inbox, oldest first; unreadable files are listed in `errors`.
    pub fn check_inbox(&self, god: &GodName) -> Result<InboxResult> {
        self.check_inbox_page(god, &PageRequest::default())
    }

    /// One page of a god's inbox (docs/PROTOCOL.md §5: `limit`, `cursor`, `next_cursor`).
    pub fn check_inbox_page(&self, god: &GodName, request: &PageRequest) -> Result<InboxResult> {
        files::inbox_page(&self.root, god, request, |dir| self.inboxes.read_dir(dir))
    }

    /// One page of a god's inbox with each dispatch cut to its ids, sender, step, age and the
    /// first line of its summary.
    pub fn check_inbox_compact(
        &self,
        god: &GodName,
        request: &PageRequest,
    ) -> Result<InboxResult<CompactDispatch>> {
        let full = self.check_inbox_page(god, request)?;
        let now = chrono::Utc::now();
        Ok(InboxResult {
            dispatches: full
                .dispatches
                .iter()
                .map(|d| CompactDispatch::of(d, now))
                .collect(),
            god: full.god,
            known_god: full.known_god,
            compact: true,
            count: full.count,
            limit: full.limit,
            next_cursor: full.next_cursor,
            errors: full.errors,
        })
    }

    /// One dispatch of a god's inbox, whole, by its handoff id.
    pub fn get_dispatch(&self, god: &GodName, id: &HandoffId) -> Result<DispatchResult> {
        let dir = self.root.inbox_dir(god);
        let (found, _) = self.inboxes.read_dir(&dir);
        found
            .into_iter()
            .find(|(_, d)| d.handoff_id == id.as_str())
            .map(|(path, dispatch)| DispatchResult {
                god: god.to_string(),
                dispatch: std::sync::Arc::unwrap_or_clone(dispatch),
                path: text(&path),
            })
            .ok_or_else(|| {
                if !dir.is_dir() {
                    let gods = files::known_gods(&self.root).unwrap_or_else(|| "none yet".to_owned());
                    return Error::not_found(format!(
                        "{god} has no inbox ({}); gods here: {gods}",
                        dir.display()
                    ));
                }
                Error::not_found(format!(
                    "no dispatch {id} in {god}'s inbox ({}); `pantheon inbox {god}` (MCP check_inbox) lists what is there",
                    dir.display()
                ))
            })
    }

    /// The state of one workflow.
    pub fn get_workflow_state(&self, wf: &WorkflowId) -> Result<WorkflowState> {
        files::require_state(&self.root, wf)
    }

    /// Every dispatch not yet taken, by god, and those held for approval.
    pub fn list_pending(&self) -> Result<PendingResult> {
        self.list_pending_page(&PageRequest::default())
    }

    /// One page of the dispatches not yet taken (ordered by god, then oldest first), and every
    /// dispatch held for approval.
    pub fn list_pending_page(&self, request: &PageRequest) -> Result<PendingResult> {
        let entry = |d: super::model::Dispatch| PendingEntry {
            dispatch_id: d.dispatch_id,
            handoff_id: d.handoff_id,
            workflow_id: d.workflow_id,
            from_god: d.from_god,
            to_god: d.to_god,
            step: d.step,
            dispatched_at: d.dispatched_at,
            ack_status: d.ack_status.clone(),
            held_because: d.held_because,
        };
        let mut pending: BTreeMap<String, Vec<PendingEntry>> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut keyed = Vec::new();
        for god in files::god_dirs(&self.root.pending_root()) {
            let (found, errs) = files::read_dispatch_dir(&self.root.inbox_dir(&god));
            errors.extend(errs);
            pending.insert(god.to_string(), Vec::new());
            for (path, d) in found {
                let (at, file) = files::dispatch_order(&path, &d);
                let key = SortKey {
                    god: god.to_string(),
                    at,
                    file,
                };
                keyed.push((key, (god.to_string(), d)));
            }
        }
        let page = paging::page(keyed, request, paging::Listing::Pending)?;
        for (god, d) in page.items {
            pending.entry(god).or_default().push(entry(d));
        }
        let (held, errs) = files::read_dispatch_dir(&self.root.quarantine_dir());
        errors.extend(errs);
        Ok(PendingResult {
            pending,
            count: page.count,
            limit: request.limit,
            next_cursor: page.next_cursor,
            awaiting_approval: held.into_iter().map(|(_, d)| entry(d)).collect(),
            errors,
        })
    }

    /// The rule files in matching order, every rule, and the files or rules that do not load.
    pub fn list_rules(&self) -> Result<RulesResult> {
        let (rules, errors) = load_rules(&self.root);
        let files: Vec<String> = super::definition::config_files(&self.root.rules_dir())
            .iter()
            .map(|p| text(p))
            .collect();
        Ok(RulesResult {
            count: files.len(),
            rules: files,
            details: rules
                .into_iter()
                .map(|r| RuleDetail {
                    id: r.id,
                    file: text(&r.file),
                    when: r.when,
                    then: r.then,
                })
                .collect(),
            errors,
        })
    }

    /// The workflow definitions, and the files that do not load.
    pub fn list_workflows(&self) -> Result<WorkflowsResult> {
        let (defs, errors) = load_definitions(&self.root);
        let workflows: Vec<WorkflowSummary> = defs
            .into_iter()
            .map(|d| WorkflowSummary {
                steps: d
                    .steps
                    .iter()
                    .map(|s| StepSummary {
                        id: s.id.clone(),
                        god: s.god.clone(),
                        gates: s.gates.clone(),
                        timeout: s.timeout_text.clone(),
                        fallback_gods: s.fallback_gods.clone(),
                        approval_required: s.approval_required,
                    })
                    .collect(),
                id: d.id,
                name: d.name,
                version: d.version,
                description: d.description,
                path: text(&d.path),
                warnings: d.warnings,
            })
            .collect();
        Ok(WorkflowsResult {
            count: workflows.len(),
            workflows,
            errors,
        })
    }

    /// Aborts a workflow (docs/PROTOCOL.md §2.7): `.aborted` markers beside its artifacts, the manifest, the
    /// state `aborted`, and every open dispatch withdrawn. Aborting again returns the same manifest
    /// (finishing anything a crash left undone); a completed workflow cannot be aborted.
    pub(crate) fn abort_unjournaled(
        &self,
        wf: &WorkflowId,
        reason: &str,
        by: Actor,
    ) -> Result<AbortResult> {
        let wf = wf.clone();
        if reason.trim().is_empty() {
            return Err(Error::refused("an abort needs a reason (--reason TEXT)"));
        }
        let _lock = files::lock_existing(&self.root, &wf)?;
        let st = match files::require_state(&self.root, &wf) {
            Err(Error::Corrupt { path, .. })
                if std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.len() > crate::store::limits::MAX_FILE_BYTES) =>
            {
                // Too big to read (written by another engine or before the limits): kept aside
                // whole, and the workflow is aborted from a fresh state.
                let aside = self.root.state_dir().join(format!(".{wf}.json.oversize"));
                crate::store::atomic::rename_durable(&self.root, &path, &aside)?;
                WorkflowState {
                    workflow_id: wf.to_string(),
                    status: WorkflowStatus::InProgress,
                    failure_reason: Some(format!(
                        "its state was over the read limit and is kept as {}",
                        aside.display()
                    )),
                    ..Default::default()
                }
            }
            r => r?,
        };
        let manifest_path = self.root.abort_manifest_path(&wf);
        let by_label = by.label("operator");
        let (artifacts, completed) = match abort_step(&wf, &st)? {
            AbortStep::Repeat => {
                let m: AbortManifest = match read_json(&manifest_path)? {
                    Some(v) => super::model::from_value(v).map_err(|message| Error::Corrupt {
                        path: manifest_path.clone(),
                        message: message.into(),
                    })?,
                    None => AbortManifest {
                        workflow_id: wf.to_string(),
                        status: WorkflowStatus::Aborted,
                        failure_reason: st.failure_reason.clone(),
                        aborted_at: st.aborted_at.clone(),
                        aborted_by: st.aborted_by.clone(),
                        ..Default::default()
                    },
                };
                for a in &m.artifacts_marked {
                    let marker = PathBuf::from(format!("{a}.aborted"));
                    if Path::new(a).exists()
                        && !marker.exists()
                        && self.root.confine(&marker).is_ok()
                    {
                        write_atomic(&self.root, &marker, b"")?;
                    }
                }
                let reason = m.failure_reason.clone().unwrap_or_default();
                self.withdraw_all(&wf, &st, &reason, &by_label)?;
                return Ok(AbortResult {
                    status: AbortStatus::Aborted,
                    workflow_id: wf.clone(),
                    artifacts_marked: m.artifacts_marked,
                    artifacts_skipped: m.artifacts_skipped,
                    manifest_path: text(&manifest_path),
                    dispatches_withdrawn: m.dispatches_withdrawn,
                    duplicate: true,
                });
            }
            AbortStep::Fresh {
                artifacts,
                completed,
            } => (artifacts, completed),
        };
        // A dispatch its act recorded but a killed process never wrote (a `completed` ack killed
        // before the next step's dispatch) is written first, as the repeat of that act would, so the
        // abort withdraws it and the manifest lists it. Best effort: nothing may stop an abort.
        if let Some(last) = st.step_history.last().and_then(|r| r.handoff_id.as_deref())
            && let Ok(last) = HandoffId::parse(last)
        {
            let _ = self.repair_dispatch(&wf, &st, &last);
        }
        let mut will_write = vec![manifest_path.clone(), self.root.state_path(&wf)];
        for f in self.open_dispatches(&wf) {
            if let (Ok(god), Some(name)) = (GodName::parse(&f.dispatch.to_god), f.path.file_name())
            {
                will_write.push(self.root.archive_dir(&god).join(name));
                will_write.push(f.path);
            }
        }
        files::refuse_unconfined(&self.root, &will_write)?;
        let mut marked = Vec::new();
        let mut skipped = Vec::new();
        for raw in &artifacts {
            let path = self.root.expand(raw, &wf);
            match self.root.confine(&path) {
                Err(why) => skipped.push(SkippedArtifact {
                    path: raw.clone(),
                    reason: why.into(),
                    extra: Default::default(),
                }),
                Ok(real) if real.symlink_metadata().is_err() => skipped.push(SkippedArtifact {
                    path: raw.clone(),
                    reason: format!("does not exist ({})", real.display()),
                    extra: Default::default(),
                }),
                Ok(real) => {
                    let marker = PathBuf::from(format!("{}.aborted", real.display()));
                    if !marker.exists() {
                        write_atomic(&self.root, &marker, b"")?;
                    }
                    marked.push(text(&real));
                }
            }
        }
        let withdrawn_plan: Vec<String> = self
            .open_dispatches(&wf)
            .iter()
            .map(|f| text(&f.path))
            .chain(self.oversize_dispatches(&st).iter().map(|o| text(&o.path)))
            .collect();
        let (manifest, st) = aborted(AbortInput {
            wf: &wf,
            st,
            completed,
            reason,
            by: &by_label,
            marked: marked.clone(),
            skipped: skipped.clone(),
            withdrawn: withdrawn_plan.clone(),
            now: &now_ts(),
        });
        write_json(&self.root, &manifest_path, &manifest)?;
        files::write_state(&self.root, &wf, &st)?;
        self.withdraw_all(&wf, &st, reason, &by_label)?;
        Ok(AbortResult {
            status: AbortStatus::Aborted,
            workflow_id: wf.clone(),
            artifacts_marked: marked,
            artifacts_skipped: skipped,
            manifest_path: text(&manifest_path),
            dispatches_withdrawn: withdrawn_plan,
            duplicate: false,
        })
    }

    /// Every dispatch of `wf` still in an inbox or in `_quarantine` that can be read.
    pub(crate) fn open_dispatches(&self, wf: &WorkflowId) -> Vec<files::Found> {
        let mut out = Vec::new();
        let mut dirs: Vec<(files::Place, PathBuf)> = files::god_dirs(&self.root.pending_root())
            .into_iter()
            .map(|g| (files::Place::Inbox(g.clone()), self.root.inbox_dir(&g)))
            .collect();
        dirs.push((files::Place::Quarantine, self.root.quarantine_dir()));
        for (place, dir) in dirs {
            let (found, _) = files::read_dispatch_dir(&dir);
            for (path, dispatch) in found {
                if dispatch.workflow_id == wf.as_str() {
                    out.push(files::Found {
                        place: place.clone(),
                        path,
                        dispatch,
                    });
                }
            }
        }
        out
    }

    /// The dispatches of a workflow (by the handoff ids its state records) whose files in a god's inbox
    /// are over the read limit: no reader can open them, so `open_dispatches` cannot see them.
    fn oversize_dispatches(&self, st: &WorkflowState) -> Vec<Oversize> {
        let limit = crate::store::limits::MAX_FILE_BYTES;
        let ids: Vec<(HandoffId, String)> = st
            .step_history
            .iter()
            .filter_map(|r| {
                let hid = HandoffId::parse(r.handoff_id.as_deref()?).ok()?;
                Some((hid, r.step_id.clone()))
            })
            .collect();
        let mut out = Vec::new();
        for god in files::god_dirs(&self.root.pending_root()) {
            for (hid, step) in &ids {
                let path = self.root.inbox_dir(&god).join(format!("{hid}.json"));
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() > limit) {
                    out.push(Oversize {
                        god: god.clone(),
                        hid: hid.clone(),
                        step: step.clone(),
                        path,
                    });
                }
            }
        }
        out
    }

    /// Withdraws a dispatch too big to read: its archive record is rebuilt from the state and the
    /// file itself is kept aside whole as `archive/{god}/.{handoff_id}.json.oversize` (a dot name, so
    /// readers skip it). The record is written first, so repeating the abort finishes an interrupted one.
    fn withdraw_oversize(
        &self,
        wf: &WorkflowId,
        o: &Oversize,
        reason: &str,
        by: &str,
    ) -> Result<()> {
        let aside = self
            .root
            .archive_dir(&o.god)
            .join(format!(".{}.json.oversize", o.hid));
        let record = super::model::Dispatch {
            handoff_id: o.hid.to_string(),
            workflow_id: wf.to_string(),
            to_god: o.god.to_string(),
            step: o.step.clone(),
            ack_status: AckStatus::Withdrawn,
            archive_reason: Some(format!(
                "withdrawn: workflow aborted by {by}: {reason}; the dispatch was over the read limit and is kept as {}",
                aside.display()
            )),
            archived_at: Some(now_ts()),
            by: Some(by.to_owned()),
            ..Default::default()
        };
        write_json(
            &self.root,
            &self
                .root
                .archive_dir(&o.god)
                .join(format!("{}.json", o.hid)),
            &record,
        )?;
        crate::store::atomic::rename_durable(&self.root, &o.path, &aside)
    }

    fn withdraw_all(
        &self,
        wf: &WorkflowId,
        st: &WorkflowState,
        reason: &str,
        by: &str,
    ) -> Result<()> {
        for o in self.oversize_dispatches(st) {
            self.withdraw_oversize(wf, &o, reason, by)?;
        }
        for f in self.open_dispatches(wf) {
            let Ok(god) = GodName::parse(&f.dispatch.to_god) else {
                continue;
            };
            let mut d = f.dispatch.clone();
            d.ack_status = AckStatus::Withdrawn;
            d.archive_reason = Some(format!("withdrawn: workflow aborted by {by}: {reason}"));
            d.archived_at = Some(now_ts());
            d.by = Some(by.to_owned());
            let name = match HandoffId::parse(&d.handoff_id) {
                Ok(h) => h,
                Err(_) => {
                    // A foreign file name: archive it under its own (already safe) file name.
                    let to = self
                        .root
                        .archive_dir(&god)
                        .join(f.path.file_name().unwrap_or_default());
                    write_json(&self.root, &to, &d)?;
                    files::remove_file(&self.root, &f.path)?;
                    continue;
                }
            };
            if f.path.file_name() != Some(std::ffi::OsStr::new(&format!("{name}.json"))) {
                let to = self
                    .root
                    .archive_dir(&god)
                    .join(f.path.file_name().unwrap_or_default());
                write_json(&self.root, &to, &d)?;
                files::remove_file(&self.root, &f.path)?;
            } else {
                files::archive(&self.root, &f.path, &god, &name, &d)?;
            }
        }
        Ok(())
    }

    /// Deletes the definition's `temp_artifacts` of an aborted or completed workflow, only inside the
    /// root or `PANTHEON_CLEANUP_ROOTS`, never the roots themselves, never following a symbolic link.
    pub(crate) fn cleanup_unjournaled(
        &self,
        wf: &WorkflowId,
        dry_run: bool,
    ) -> Result<CleanupResult> {
        let wf = wf.clone();
        let _lock = files::lock_existing(&self.root, &wf)?;
        let st = files::require_state(&self.root, &wf)?;
        if !matches!(
            st.status,
            WorkflowStatus::Aborted | WorkflowStatus::Completed
        ) {
            return Err(Error::refused(format!(
                "workflow {wf} is {}; cleanup is only for an aborted or completed workflow (abort it first)",
                st.status
            )));
        }
        let mut warnings = Vec::new();
        let temp = match st.definition_id.as_deref() {
            None => {
                warnings.push(format!(
                    "workflow {wf} has no definition, so no temp_artifacts"
                ));
                Vec::new()
            }
            Some(id) => match find_definition(&self.root, id) {
                Ok(Some(d)) => d.temp_artifacts(),
                Ok(None) => {
                    warnings.push(format!("definition {id:?} not found; nothing to clean"));
                    Vec::new()
                }
                Err(e) => {
                    return Err(Error::Corrupt {
                        path: e.path,
                        message: e.message,
                    });
                }
            },
        };
        let mut paths = Vec::new();
        let mut result = CleanupResult {
            status: if dry_run {
                CleanupStatus::DryRun
            } else {
                CleanupStatus::Cleaned
            },
            workflow_id: wf.clone(),
            deleted: None,
            would_delete: None,
            missing: Vec::new(),
            refused: Vec::new(),
            dry_run,
            warnings,
        };
        for raw in temp {
            let path = self.root.expand(&raw, &wf);
            let real = match self.root.confine(&path) {
                Ok(r) => r,
                Err(reason) => {
                    result.refused.push(RefusedPath {
                        path: text(&path),
                        reason: reason.into(),
                    });
                    continue;
                }
            };
            if real.symlink_metadata().is_err() {
                result.missing.push(text(&real));
                continue;
            }
            if !dry_run {
                // Deleted from the opened parent directory, walking the tree by handles: a link
                // swapped in after the check above is removed itself, never followed.
                let r = crate::store::safe::SafeDir::parent_of(&self.root, &real, false).and_then(
                    |d| match d {
                        Some((dir, name)) => dir.remove_tree(&name).map(|_| ()),
                        None => Ok(()),
                    },
                );
                if let Err(e) = r {
                    result.refused.push(RefusedPath {
                        path: text(&real),
                        reason: format!("could not delete: {e}"),
                    });
                    continue;
                }
            }
            paths.push(text(&real));
        }
        if dry_run {
            result.would_delete = Some(paths);
        } else {
            result.deleted = Some(paths);
        }
        Ok(result)
    }
}

/// What an abort decides from the state alone (see [`Conductor::abort_workflow`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AbortStep {
    /// Already aborted: finish what a crash left undone (markers, withdrawals) and return the manifest.
    Repeat,
    /// Abort now: mark these artifacts (every completed step's, then the context bag's, each once),
    /// then write the manifest, the state and the withdrawals.
    Fresh {
        /// The artifacts to mark, as the handoffs named them.
        artifacts: Vec<String>,
        /// The steps completed before the abort, for the manifest.
        completed: Vec<CompletedStep>,
    },
}

/// The pure first step of an abort: refuses a completed workflow, repeats an aborted one, and otherwise
/// lists what to mark.
pub(crate) fn abort_step(wf: &WorkflowId, st: &WorkflowState) -> Result<AbortStep> {
    match st.status {
        WorkflowStatus::Completed => Err(Error::refused(format!(
            "workflow {wf} is completed; there is nothing to abort (cleanup removes its temp artifacts)"
        ))),
        WorkflowStatus::Aborted => Ok(AbortStep::Repeat),
        _ => {
            let done: Vec<&super::model::StepRecord> = st
                .step_history
                .iter()
                .filter(|r| r.status == StepStatus::Completed)
                .collect();
            let mut artifacts: Vec<String> = Vec::new();
            for a in done
                .iter()
                .flat_map(|r| r.artifacts.iter())
                .chain(st.context_bag.artifacts.iter())
            {
                if !artifacts.contains(a) {
                    artifacts.push(a.clone());
                }
            }
            let completed = done
                .iter()
                .map(|r| CompletedStep {
                    step_id: r.step_id.clone(),
                    god: r.god.clone(),
                    extra: Default::default(),
                })
                .collect();
            Ok(AbortStep::Fresh {
                artifacts,
                completed,
            })
        }
    }
}

/// What [`aborted`] commits.
pub(crate) struct AbortInput<'a> {
    /// The workflow.
    pub wf: &'a WorkflowId,
    /// Its state.
    pub st: WorkflowState,
    /// The steps completed before the abort.
    pub completed: Vec<CompletedStep>,
    /// Why it is aborted.
    pub reason: &'a str,
    /// Who aborts.
    pub by: &'a str,
    /// The artifacts marked as belonging to an aborted workflow.
    pub marked: Vec<String>,
    /// The artifacts that could not be marked, and why.
    pub skipped: Vec<SkippedArtifact>,
    /// The dispatches to withdraw.
    pub withdrawn: Vec<String>,
    /// When (RFC 3339).
    pub now: &'a str,
}

/// The pure commit of an abort: the manifest and the aborted state, from the workflow id, the state, the steps
/// completed, the reason, who aborted, what was marked and skipped, the dispatches to withdraw and
/// `now`. A skipped artifact asks for a manual review.
pub(crate) fn aborted(input: AbortInput<'_>) -> (AbortManifest, WorkflowState) {
    let AbortInput {
        wf,
        mut st,
        completed,
        reason,
        by,
        marked,
        skipped,
        withdrawn,
        now,
    } = input;
    let manifest = AbortManifest {
        workflow_id: wf.to_string(),
        definition_id: st.definition_id.clone(),
        status: WorkflowStatus::Aborted,
        failed_step: st.current_step.clone(),
        failure_reason: Some(reason.to_owned()),
        completed_steps: completed,
        requires_manual_review: !skipped.is_empty(),
        artifacts_marked: marked,
        artifacts_skipped: skipped,
        dispatches_withdrawn: withdrawn,
        aborted_at: Some(now.to_owned()),
        aborted_by: Some(by.to_owned()),
        extra: Default::default(),
    };
    st.status = WorkflowStatus::Aborted;
    st.failure_reason = Some(reason.to_owned());
    st.aborted_at = Some(now.to_owned());
    st.aborted_by = Some(by.to_owned());
    st.updated = Some(now.to_owned());
    (manifest, st)
}

/// A dispatch file of a workflow that is over the read limit (see `Conductor::oversize_dispatches`).
struct Oversize {
    god: GodName,
    hid: HandoffId,
    step: String,
    path: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conductor::model::StepRecord;

    fn wf() -> WorkflowId {
        WorkflowId::parse("wf_pure").unwrap()
    }

    fn record(step: &str, status: &str, artifacts: &[&str]) -> StepRecord {
        StepRecord {
            step_id: step.into(),
            god: format!("god_{step}"),
            status: StepStatus::parse(status),
            artifacts: artifacts.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    fn running() -> WorkflowState {
        let mut st = WorkflowState {
            workflow_id: "wf_pure".into(),
            definition_id: Some("flow".into()),
            status: WorkflowStatus::WaitingForAck,
            current_step: Some("build".into()),
            step_history: vec![
                record("plan", "completed", &["plan.md", "shared.txt"]),
                record("build", "dispatched", &["never.txt"]),
                record("review", "completed", &["shared.txt"]),
            ],
            ..Default::default()
        };
        st.context_bag.artifacts = vec!["plan.md".into(), "bag.txt".into()];
        st
    }

    #[test]
    fn a_completed_workflow_cannot_be_aborted_and_an_aborted_one_repeats() {
        let mut st = running();
        st.status = WorkflowStatus::Completed;
        let e = abort_step(&wf(), &st).unwrap_err().to_string();
        assert!(e.contains("is completed; there is nothing to abort"), "{e}");
        st.status = WorkflowStatus::Aborted;
        assert_eq!(abort_step(&wf(), &st).unwrap(), AbortStep::Repeat);
    }

    #[test]
    fn every_open_status_aborts_and_marks_completed_artifacts_once() {
        for status in [
            WorkflowStatus::InProgress,
            WorkflowStatus::WaitingForAck,
            WorkflowStatus::AwaitingApproval,
            WorkflowStatus::Failed,
            WorkflowStatus::Stalled,
            WorkflowStatus::Other("paused".into()),
        ] {
            let mut st = running();
            st.status = status.clone();
            let AbortStep::Fresh {
                artifacts,
                completed,
            } = abort_step(&wf(), &st).unwrap()
            else {
                panic!("{status:?} must abort");
            };
            assert_eq!(artifacts, ["plan.md", "shared.txt", "bag.txt"]);
            let steps: Vec<(&str, &str)> = completed
                .iter()
                .map(|c| (c.step_id.as_str(), c.god.as_str()))
                .collect();
            assert_eq!(steps, [("plan", "god_plan"), ("review", "god_review")]);
        }
    }

    #[test]
    fn the_abort_commit_fills_the_manifest_and_the_state() {
        let completed = vec![CompletedStep {
            step_id: "plan".into(),
            god: "athena".into(),
            extra: Default::default(),
        }];
        let now = "2026-12-01T12:00:00Z";
        let (m, st) = aborted(AbortInput {
            wf: &wf(),
            st: running(),
            completed: completed.clone(),
            reason: "no budget",
            by: "operator",
            marked: vec!["/r/plan.md".into()],
            skipped: Vec::new(),
            withdrawn: vec!["pending/hermes/hof_20261201_aaaaaa.json".into()],
            now,
        });
        assert_eq!(m.workflow_id, "wf_pure");
        assert_eq!(m.definition_id.as_deref(), Some("flow"));
        assert_eq!(m.status, WorkflowStatus::Aborted);
        assert_eq!(m.failed_step.as_deref(), Some("build"));
        assert_eq!(m.failure_reason.as_deref(), Some("no budget"));
        assert_eq!(m.completed_steps, completed);
        assert_eq!(m.artifacts_marked, ["/r/plan.md"]);
        assert_eq!(m.dispatches_withdrawn.len(), 1);
        assert!(!m.requires_manual_review);
        assert_eq!(
            (m.aborted_at.as_deref(), m.aborted_by.as_deref()),
            (Some(now), Some("operator"))
        );
        assert_eq!(st.status, WorkflowStatus::Aborted);
        assert_eq!(st.failure_reason.as_deref(), Some("no budget"));
        assert_eq!(st.aborted_by.as_deref(), Some("operator"));
        assert_eq!(st.updated.as_deref(), Some(now));
        assert_eq!(st.step_history, running().step_history, "history is kept");

        let skipped = SkippedArtifact {
            path: "../outside".into(),
            reason: "outside the workspace".into(),
            extra: Default::default(),
        };
        let (m, _) = aborted(AbortInput {
            wf: &wf(),
            st: running(),
            completed: Vec::new(),
            reason: "r",
            by: "athena",
            marked: Vec::new(),
            skipped: vec![skipped],
            withdrawn: Vec::new(),
            now,
        });
        assert!(m.requires_manual_review, "a skipped artifact needs a human");
    }
}
