//! Retiring dead letters (docs/PROTOCOL.md §2.10): a dead letter ends without a requeue when a
//! rerun supersedes it, when its workflow finishes or is aborted, or when the operator discards it.
//! It is moved, stamped with when and why, from `conductor/dead/{god}/` to
//! `conductor/retired/{god}/`, where `pantheon dead --retired` lists it; it no longer counts as a
//! dead letter anywhere. Each retirement is journaled (`dead_retire`), naming the dead letter's
//! handoff id and the reason.

use crate::journal::{Target, Verb};
use chrono::Utc;
use serde::Serialize;

use super::Conductor;
use super::delivery::{DeadLetter, list_dead};
use super::files;
use super::model::{AckStatus, WorkflowStatus};
use crate::error::{Error, Result};
use crate::store::atomic::{ensure_dir, rename_durable, write_json};
use crate::store::lock::FileLock;
use crate::store::time::format_ts;
use crate::store::{GodName, HandoffId, Root, WorkflowId};

/// Longest reason kept with a retired dead letter (a reason is a sentence, not a document).
pub const MAX_RETIRE_REASON: usize = 1000;

/// One retired dead letter: what `pantheon dead discard` answers, and what a rerun, an abort or
/// the ack that finishes a workflow report for each dead letter of it they retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetiredDead {
    /// `retired`.
    pub status: String,
    /// The dead letter's handoff.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The god whose dead letters held it.
    pub god: String,
    /// Why it was retired.
    pub reason: String,
    /// The newer dispatch of its step that superseded it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// Where it lies now (`conductor/retired/{god}/{handoff_id}.json`).
    pub path: String,
}

/// Every retired dead letter of the root, oldest retirement first, and the files that could not be
/// read (`pantheon dead --retired`).
pub fn list_retired(root: &Root) -> super::delivery::DeadLetters {
    let mut out = super::delivery::read_letters(&root.retired_root(), |g| root.retired_dir(g));
    out.dead.sort_by(|a, b| {
        (a.dispatch.retired_at.as_deref(), &a.path)
            .cmp(&(b.dispatch.retired_at.as_deref(), &b.path))
    });
    out
}

/// A reason as it may be kept: trimmed, not empty, at most [`MAX_RETIRE_REASON`] bytes.
fn checked_reason(reason: &str) -> Result<String> {
    let r = reason.trim();
    if r.is_empty() {
        return Err(Error::refused(
            "a retirement needs a reason (--reason TEXT)".to_owned(),
        ));
    }
    if r.len() > MAX_RETIRE_REASON {
        return Err(Error::refused(format!(
            "the reason is {} bytes, over the limit of {MAX_RETIRE_REASON}",
            r.len()
        )));
    }
    Ok(r.to_owned())
}

/// What a retirement stamps on its dead letter: when, why, and the dispatch that superseded it.
/// A dead letter already stamped in `conductor/dead/` is a retirement a crash cut short: it is
/// finished with its own stamp, so its intent's key and its journal entry are the first attempt's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RetireStamp {
    /// `retired_at`.
    pub(crate) at: String,
    /// `retired_reason`.
    pub(crate) reason: String,
    /// `superseded_by`.
    pub(crate) superseded_by: Option<String>,
}

impl RetireStamp {
    /// The stamp for retiring `found` now with `reason`, or the one a cut-short retirement left.
    pub(crate) fn of(found: &DeadLetter, reason: &str, superseded_by: Option<&str>) -> Self {
        let d = &found.dispatch;
        match (&d.retired_at, &d.retired_reason) {
            (Some(at), Some(why)) if crate::store::time::parse_ts(at).is_some() => Self {
                at: at.clone(),
                reason: why.clone(),
                superseded_by: d.superseded_by.clone(),
            },
            _ => Self {
                at: format_ts(Utc::now()),
                reason: reason.to_owned(),
                superseded_by: superseded_by.map(str::to_owned),
            },
        }
    }

    /// The retirement this stamp makes of `found`, as it will be reported and journaled.
    pub(crate) fn planned(&self, found: &DeadLetter, path: String) -> RetiredDead {
        RetiredDead {
            status: "retired".into(),
            handoff_id: found.dispatch.handoff_id.clone(),
            workflow_id: found.dispatch.workflow_id.clone(),
            god: found.god.clone(),
            reason: self.reason.clone(),
            superseded_by: self.superseded_by.clone(),
            path,
        }
    }
}

/// The intent key of a retirement: `retire-{handoff_id}-{the stamp's digits}` (a dead letter put
/// back by hand and retired again is another act, with another key).
pub(crate) fn retire_key(handoff_id: &str, retired_at: &str) -> String {
    let digits: String = retired_at.chars().filter(char::is_ascii_digit).collect();
    format!("retire-{handoff_id}-{digits}")
}

impl Conductor {
    /// Moves the dead letter `found` to the retired archive, stamped with `stamp`. The caller holds
    /// its workflow's lock. Unjournaled: [`Conductor::retire_journaled`] journals it through its
    /// intent.
    pub(crate) fn retire_found_unjournaled(
        &self,
        found: &DeadLetter,
        stamp: &RetireStamp,
    ) -> Result<RetiredDead> {
        let hid = HandoffId::parse(&found.dispatch.handoff_id)?;
        let god = GodName::parse(&found.god)?;
        let dir = self.root.retired_dir(&god);
        let target = dir.join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[found.path.clone(), target.clone()])?;
        ensure_dir(&self.root, &dir)?;
        super::crash_point("retire:before-stamp");
        // Stamped in place first, then moved: a dead letter found stamped in `dead/` is a
        // retirement a crash cut short, which the next one (or the supervisor's pass over its
        // intent) finishes.
        if found.dispatch.retired_at.as_deref() != Some(stamp.at.as_str()) {
            let mut d = found.dispatch.clone();
            d.retired_at = Some(stamp.at.clone());
            d.retired_reason = Some(stamp.reason.clone());
            d.superseded_by = stamp.superseded_by.clone();
            write_json(&self.root, &found.path, &d)?;
        }
        super::crash_point("retire:after-stamp");
        rename_durable(&self.root, &found.path, &target)?;
        Ok(stamp.planned(found, target.display().to_string()))
    }

    /// Finishes the move of a retirement a crash cut short after stamping the dead letter of
    /// `hid` with `retired_at` (the supervisor's pass over the intent the crash left, before it
    /// settles it). True when it moved one.
    pub(crate) fn finish_cut_retirement(&self, hid: &str, retired_at: &str) -> bool {
        let Ok(hid) = HandoffId::parse(hid) else {
            return false;
        };
        let stamped = |f: &DeadLetter| f.dispatch.retired_at.as_deref() == Some(retired_at);
        let Some(found) = self.find_dead(&hid).filter(stamped) else {
            return false;
        };
        let Ok(wf) = WorkflowId::parse(&found.dispatch.workflow_id) else {
            return false;
        };
        let Ok(_lock) = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf)) else {
            return false;
        };
        let Some(found) = self.find_dead(&hid).filter(stamped) else {
            return false;
        };
        let stamp = RetireStamp::of(&found, "", None);
        self.retire_found_unjournaled(&found, &stamp).is_ok()
    }

    /// Retires the dead letter of `hid` by hand, with the operator's `reason`, journaled through
    /// its intent ([`Conductor::retire_journaled`]); see [`Conductor::discard_dead`].
    pub(crate) fn discard_dead_retiring(
        &self,
        hid: &HandoffId,
        reason: &str,
    ) -> Result<RetiredDead> {
        let reason = checked_reason(reason)?;
        let missing = || self.no_dead_letter(hid);
        let found = self.find_dead(hid).ok_or_else(missing)?;
        let wf = WorkflowId::parse(&found.dispatch.workflow_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        // Found again under the lock: a requeue or a retirement at the same time may have taken it.
        let found = self
            .find_dead(hid)
            .filter(|f| f.dispatch.workflow_id == wf.as_str())
            .ok_or_else(missing)?;
        self.retire_journaled(&found, &reason, None)
    }

    /// Retires every dead letter of `wf` (a rerun superseded them, or the workflow finished or was
    /// aborted): `reason` says which, `superseded_by` names the rerun's dispatch. Takes the
    /// workflow's lock; each retirement is journaled through its intent
    /// ([`Conductor::retire_journaled`]).
    pub(crate) fn retire_dead_of(
        &self,
        wf: &WorkflowId,
        reason: &str,
        superseded_by: Option<&str>,
    ) -> Result<Vec<RetiredDead>> {
        let of_wf = |c: &Self| -> Vec<DeadLetter> {
            list_dead(&c.root)
                .dead
                .into_iter()
                .filter(|d| d.dispatch.workflow_id == wf.as_str())
                .collect()
        };
        if of_wf(self).is_empty() {
            return Ok(Vec::new());
        }
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(wf))?;
        of_wf(self)
            .iter()
            .filter(|d| superseded_by != Some(d.dispatch.handoff_id.as_str()))
            .map(|d| self.retire_journaled(d, reason, superseded_by))
            .collect()
    }

    /// The dead letters of `wf` retired because its state says it is over (completed, failed or
    /// aborted), journaled; nothing when it is not over. Errors are left for the next act that
    /// ends the workflow (the dead letters stay listed until then).
    pub(crate) fn retire_dead_of_finished(&self, wf: &str) -> Vec<RetiredDead> {
        let Ok(wf) = WorkflowId::parse(wf) else {
            return Vec::new();
        };
        let Ok(st) = files::require_state(&self.root, &wf) else {
            return Vec::new();
        };
        if !st.status.is_finished() {
            return Vec::new();
        }
        let reason = match st.status {
            WorkflowStatus::Aborted => "its workflow was aborted".to_owned(),
            ref s => format!("its workflow is {s}"),
        };
        self.retire_dead_of(&wf, &reason, None).unwrap_or_default()
    }

    /// The refusal for a handoff with no live dead letter: where it went when it was retired (a
    /// rerun's dispatch superseded it, or why it ended), else that there is none.
    pub(crate) fn no_dead_letter(&self, hid: &HandoffId) -> Error {
        let retired = list_retired(&self.root)
            .dead
            .into_iter()
            .find(|x| x.dispatch.handoff_id == hid.as_str());
        match retired {
            Some(r) => match &r.dispatch.superseded_by {
                Some(newer) => Error::refused(format!(
                    "the dead letter {hid} is retired: it was superseded by {newer}, the rerun's \
                     dispatch of step {} (pantheon dead --retired lists it)",
                    r.dispatch.step
                )),
                None => Error::refused(format!(
                    "the dead letter {hid} is retired: {} (pantheon dead --retired lists it)",
                    r.dispatch
                        .retired_reason
                        .as_deref()
                        .unwrap_or("no reason kept")
                )),
            },
            None => Error::not_found(format!(
                "no dead letter for handoff {hid} (pantheon dead lists them)"
            )),
        }
    }

    /// An open dispatch (in an inbox or `_quarantine`, not acked) of step `step` of `wf` other
    /// than `hid`: the newer dispatch a requeue of `hid` would double.
    pub(crate) fn open_dispatch_of_step(&self, wf: &str, step: &str, hid: &str) -> Option<String> {
        let pending = self.root.pending_root();
        files::god_dirs(&pending)
            .into_iter()
            .map(|g| self.root.inbox_dir(&g))
            .chain([self.root.quarantine_dir()])
            .flat_map(|dir| files::read_dispatch_dir(&dir).0)
            .map(|(_, d)| d)
            .find(|d| {
                d.workflow_id == wf
                    && d.step == step
                    && d.handoff_id != hid
                    && matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending)
            })
            .map(|d| d.handoff_id)
    }
}

/// The journal entry of one retirement: the dead letter's handoff id, its workflow, its god, the
/// reason and the dispatch that superseded it.
pub(crate) fn retire_act(r: &RetiredDead) -> crate::journal::Act {
    crate::journal::Act::new(Verb::DeadRetire, r.status.clone())
        .workflow(&r.workflow_id)
        .handoff(&r.handoff_id)
        .target(Target::God, Some(&r.god))
        .target(Target::SupersededBy, r.superseded_by.as_ref())
        .reason(Some(&r.reason))
}
