//! The Conductor's state-changing acts, each recorded in the operator journal ([`crate::journal`]) as the
//! handle's [`Origin`](crate::journal::Origin) once it succeeded. A refusal changes nothing and is not
//! journaled; a journal that cannot be written never undoes the act (it is reported in `warnings`
//! where the result has them).

use super::results::SubmitStatus;
use super::submit::SubmitFrom;
use crate::journal::{Target, Verb};
use serde_json::Value;

use super::intents::Check;
use super::{
    AbortResult, AckResult, Actor, ApprovalResult, CleanupResult, Conductor, RedispatchResult,
    SubmitResult,
};
use crate::error::Result;
use crate::journal::{self, Act};
use crate::store::safe::reusing_walks;
use crate::store::{HandoffId, WorkflowId};

/// An ack's ids and status as it gave them, for its intent.
struct AckWords<'a> {
    ack_id: &'a str,
    handoff_id: &'a str,
    workflow_id: &'a str,
    status: &'a str,
}

impl Conductor {
    /// Appends `act` to the journal; the error, if any, as a warning line.
    pub(crate) fn journal(&self, act: &Act) -> Option<String> {
        journal::append(self.root(), &self.origin(), act)
            .err()
            .map(|e| format!("the act was done but could not be journaled: {e}"))
    }

    /// Submits a handoff (docs/PROTOCOL.md §2.1): validates it, records it, routes it and dispatches it.
    pub fn submit_handoff(&self, handoff: &Value) -> Result<SubmitResult> {
        self.submit_handoff_held(handoff, SubmitFrom::default())
    }

    /// [`Self::submit_handoff`], holding the dispatch for approval when `from.hold` gives a reason
    /// (the bridge holds inbound work when its operator asks) and marking a peer's inbound request in
    /// the state it commits (`from.inbound_peer`).
    ///
    /// One act ([`crate::store::commit::act`]): what it writes is made durable by one shared sync
    /// before it returns, and each directory it writes in is walked to once ([`reusing_walks`]; so
    /// are the ack's, the decision's and the abort's).
    pub(crate) fn submit_handoff_held(
        &self,
        handoff: &Value,
        from: SubmitFrom,
    ) -> Result<SubmitResult> {
        crate::store::commit::act(self.root(), || {
            reusing_walks(|| self.submit_held_act(handoff, from))
        })
    }

    fn submit_held_act(&self, handoff: &Value, from: SubmitFrom) -> Result<SubmitResult> {
        let s = |k: &str| handoff.get(k).and_then(Value::as_str).unwrap_or_default();
        let intent = self.intend(
            &format!("submit-{}", s("handoff_id")),
            &Act::new(Verb::Submit, "submitted")
                .workflow(s("workflow_id"))
                .handoff(s("handoff_id")),
            Check::Submit {
                workflow_id: s("workflow_id").to_owned(),
                handoff_id: s("handoff_id").to_owned(),
            },
        );
        let mut r = match self.submit_held_unjournaled(handoff, from) {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        // The repeat of a submit killed before its journal entry: journal the original outcome, once.
        let original = intent.as_ref().is_some_and(|i| i.unjournaled_before);
        let duplicate = r.status == SubmitStatus::Duplicate;
        let outcome = if original && duplicate {
            self.submit_outcome(&r.workflow_id, &r.handoff_id)
                .unwrap_or_else(|| r.status.to_string())
        } else {
            r.status.to_string()
        };
        let act = Act::new(Verb::Submit, outcome)
            .workflow(&r.workflow_id)
            .handoff(&r.handoff_id)
            .target(Target::ToGod, r.target_god.as_ref())
            .target(Target::Step, r.target_step.as_ref());
        let warning = if duplicate && !original {
            self.journal_duplicate(intent, act)
        } else {
            self.journal_intent(intent, act)
        };
        r.warnings.extend(warning);
        // The handoff that finished the workflow ends its dead letters.
        if r.state_status.is_finished() {
            self.retire_dead_of_finished(r.workflow_id.as_str());
        }
        Ok(r)
    }

    /// Acknowledges a dispatch (docs/PROTOCOL.md §2.5). `by` is recorded in the ack (`Actor::Recipient`:
    /// the god the dispatch is addressed to).
    pub fn ack_handoff(&self, ack: &Value, by: Actor) -> Result<AckResult> {
        let s = |k: &str| ack.get(k).and_then(Value::as_str).unwrap_or_default();
        let said = AckWords {
            ack_id: s("ack_id"),
            handoff_id: s("handoff_id"),
            workflow_id: s("workflow_id"),
            status: s("status"),
        };
        self.ack_journaled(said, move || self.ack_unjournaled(ack, by))
    }

    /// Acknowledges a dispatch with a typed request: the same checks and journal entry as
    /// [`Conductor::ack_handoff`], which takes the JSON document.
    pub fn ack(&self, ack: &super::request::AckRequest, by: Actor) -> Result<AckResult> {
        let said = AckWords {
            ack_id: ack.ack_id.as_str(),
            handoff_id: ack.handoff_id.as_str(),
            workflow_id: ack.workflow_id.as_ref().map_or("", |w| w.as_str()),
            status: ack.decision.as_str(),
        };
        self.ack_journaled(said, move || self.ack_request_unjournaled(ack, by))
    }

    /// An ack journaled through the intent `ack-{ack_id}` (`said`: the ids as the ack gave them,
    /// before any check); `take` records it. One act ([`crate::store::commit::act`]): what it
    /// writes is made durable by one shared sync before it returns.
    fn ack_journaled(
        &self,
        said: AckWords<'_>,
        take: impl FnOnce() -> Result<AckResult>,
    ) -> Result<AckResult> {
        crate::store::commit::act(self.root(), || reusing_walks(|| self.ack_act(said, take)))
    }

    fn ack_act(
        &self,
        said: AckWords<'_>,
        take: impl FnOnce() -> Result<AckResult>,
    ) -> Result<AckResult> {
        let intent = self.intend(
            &format!("ack-{}", said.ack_id),
            &Act::new(Verb::Ack, said.status)
                .workflow(said.workflow_id)
                .handoff(said.handoff_id)
                .target(Target::AckId, Some(said.ack_id)),
            Check::Ack {
                ack_id: said.ack_id.to_owned(),
                handoff_id: said.handoff_id.to_owned(),
            },
        );
        let mut r = match take() {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        // The repeat of an ack whose first attempt was killed before its journal entry: the act is
        // done (a duplicate) and unjournaled, so the original is journaled now, once.
        let original = intent.as_ref().is_some_and(|i| i.unjournaled_before);
        let outcome = if r.duplicate && !original {
            format!("{} (duplicate)", r.status)
        } else {
            r.status.to_string()
        };
        // A duplicate's answer has no `next`: the original's entry takes the recorded handoff from
        // the state (else the entry of a `completed` ack killed before it lacked it).
        let next_handoff = match &r.next {
            Some(n) => Some(n.handoff_id.clone()),
            None if original => self.recorded_handoff(&r.workflow_id, &r.ack_id),
            None => None,
        };
        let act = Act::new(Verb::Ack, outcome)
            .workflow(&r.workflow_id)
            .handoff(&r.handoff_id)
            .target(Target::AckId, Some(&r.ack_id))
            .target(Target::God, Some(&r.god))
            .target(Target::By, Some(&r.by))
            .target(Target::ReroutedTo, r.rerouted_to.as_ref())
            .target(Target::NextHandoffId, next_handoff.as_ref());
        let warning = if r.duplicate && !original {
            self.journal_duplicate(intent, act)
        } else {
            self.journal_intent(intent, act)
        };
        r.warnings.extend(warning);
        // The ack that finished the workflow ends its dead letters: nobody can requeue them now.
        if r.state_status.is_finished() {
            self.retire_dead_of_finished(r.workflow_id.as_str());
        }
        Ok(r)
    }

    /// Releases a dispatch held in `_quarantine` into its god's inbox (an operator act).
    pub fn approve(&self, handoff_id: &HandoffId, by: Actor) -> Result<ApprovalResult> {
        self.decide_journaled(handoff_id, None, by)
    }

    /// Refuses a held dispatch: it is archived as rejected and the workflow `failed` (an operator act).
    pub fn reject_held(
        &self,
        handoff_id: &HandoffId,
        reason: &str,
        by: Actor,
    ) -> Result<ApprovalResult> {
        self.decide_journaled(handoff_id, Some(reason), by)
    }

    /// An approval (`reject`: `None`) or rejection of a held dispatch, journaled through the intent
    /// `held-{handoff_id}` (a decision killed before its entry is journaled by its repeat or the next
    /// supervisor pass, as an ack is). One act ([`crate::store::commit::act`]), as the abort is.
    fn decide_journaled(
        &self,
        handoff_id: &HandoffId,
        reject: Option<&str>,
        by: Actor,
    ) -> Result<ApprovalResult> {
        crate::store::commit::act_unheld(self.root(), || {
            reusing_walks(|| self.decide_act(handoff_id, reject, by))
        })
    }

    fn decide_act(
        &self,
        handoff_id: &HandoffId,
        reject: Option<&str>,
        by: Actor,
    ) -> Result<ApprovalResult> {
        let (action, outcome) = match reject {
            None => (Verb::Approve, "approved"),
            Some(_) => (Verb::Reject, "rejected"),
        };
        let intent = self.intend(
            &format!("held-{handoff_id}"),
            &Act::new(action.clone(), outcome)
                .handoff(handoff_id.as_str())
                .reason(reject),
            Check::Held {
                handoff_id: handoff_id.to_string(),
            },
        );
        let decided = match reject {
            None => self.approve_unjournaled(handoff_id, by),
            Some(reason) => self.reject_held_unjournaled(handoff_id, reason, by),
        };
        let r = match decided {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        let original = intent.as_ref().is_some_and(|i| i.unjournaled_before);
        let act = approval_act(action, &r, reject, original);
        if r.duplicate && !original {
            self.journal_duplicate(intent, act);
        } else {
            self.journal_intent(intent, act);
        }
        // Its approval links can decide nothing now: they say who did.
        self.supersede_links(r.workflow_id.as_str(), Some(r.handoff_id.as_str()), outcome);
        // A rejection fails the workflow: its dead letters end with it.
        if reject.is_some() {
            self.retire_dead_of_finished(r.workflow_id.as_str());
        }
        Ok(r)
    }

    /// Aborts a workflow (docs/PROTOCOL.md §2.7): `.aborted` markers beside its artifacts, the manifest,
    /// the state `aborted`, and every open dispatch withdrawn. Aborting again returns the same manifest
    /// (finishing anything a crash left undone); a completed workflow cannot be aborted.
    pub fn abort_workflow(&self, wf: &WorkflowId, reason: &str, by: Actor) -> Result<AbortResult> {
        crate::store::commit::act_unheld(self.root(), || {
            reusing_walks(|| self.abort_workflow_act(wf, reason, by))
        })
    }

    fn abort_workflow_act(&self, wf: &WorkflowId, reason: &str, by: Actor) -> Result<AbortResult> {
        let r = self.abort_unjournaled(wf, reason, by)?;
        let outcome = if r.duplicate {
            format!("{} (duplicate)", r.status)
        } else {
            r.status.to_string()
        };
        let mut act = Act::new(Verb::Abort, outcome)
            .workflow(&r.workflow_id)
            .reason(Some(reason));
        if !r.dispatches_withdrawn.is_empty() {
            act.set_target(
                Target::DispatchesWithdrawn,
                serde_json::json!(r.dispatches_withdrawn),
            );
        }
        self.journal(&act);
        self.supersede_links(wf.as_str(), None, "aborted");
        // An aborted workflow's dead letters end with it (retired, each journaled).
        self.retire_dead_of_finished(wf.as_str());
        Ok(r)
    }

    /// Retires the dead letter of `handoff_id` by hand (docs/PROTOCOL.md §2.10): it leaves
    /// `conductor/dead/` for `conductor/retired/`, stamped with `reason`, and counts as a dead letter
    /// nowhere. An operator act, journaled (`dead_retire`, naming the handoff and the reason).
    /// Refused without a reason, or when there is no live dead letter of that handoff (a retired
    /// one says why it was retired and, when a rerun superseded it, names the newer dispatch).
    pub fn discard_dead(
        &self,
        handoff_id: &HandoffId,
        reason: &str,
    ) -> Result<super::retire::RetiredDead> {
        self.discard_dead_retiring(handoff_id, reason)
    }

    /// Retires one dead letter (`found`, under its workflow's lock, which the caller holds),
    /// journaled as `dead_retire` through the intent `retire-{handoff_id}-{stamp}` (docs/PROTOCOL.md
    /// §2.8, §2.10): the intent before the stamp, the entry after the move, so a process killed
    /// anywhere between neither loses the entry (the repeat or the supervisor's next pass journals
    /// it) nor doubles it. A retirement a crash cut short is finished with its own stamp, under the
    /// same key.
    pub(crate) fn retire_journaled(
        &self,
        found: &super::delivery::DeadLetter,
        reason: &str,
        superseded_by: Option<&str>,
    ) -> Result<super::retire::RetiredDead> {
        let stamp = super::retire::RetireStamp::of(found, reason, superseded_by);
        let hid = found.dispatch.handoff_id.as_str();
        let intent = self.intend(
            &super::retire::retire_key(hid, &stamp.at),
            &super::retire::retire_act(&stamp.planned(found, String::new())),
            Check::Retire {
                handoff_id: hid.to_owned(),
                retired_at: stamp.at.clone(),
            },
        );
        match self.retire_found_unjournaled(found, &stamp) {
            Ok(r) => {
                // A journal that cannot be written never undoes the act (as every journaled act).
                let _ = self.journal_intent(intent, super::retire::retire_act(&r));
                Ok(r)
            }
            Err(e) => {
                self.drop_intent(intent);
                Err(e)
            }
        }
    }

    /// Deletes the definition's `temp_artifacts` of an aborted or completed workflow, only inside the
    /// root or `PANTHEON_CLEANUP_ROOTS`, never the roots themselves, never following a symbolic link.
    /// A dry run changes nothing and is not journaled.
    pub fn cleanup(&self, wf: &WorkflowId, dry_run: bool) -> Result<CleanupResult> {
        let mut r = self.cleanup_unjournaled(wf, dry_run)?;
        if !dry_run {
            let act = Act::new(
                Verb::Cleanup,
                format!("{} ({} deleted)", r.status, r.paths().len()),
            )
            .workflow(&r.workflow_id);
            r.warnings.extend(self.journal(&act));
        }
        Ok(r)
    }

    /// Writes again the dispatch a workflow `waiting_for_ack` lost (deleted outright by a foreign
    /// cleanup), re-derived from its state. An operator act, journaled.
    pub fn redispatch(&self, wf: &WorkflowId) -> Result<RedispatchResult> {
        let r = self.redispatch_unjournaled(wf)?;
        let act = Act::new(Verb::Redispatch, r.status.to_string())
            .workflow(&r.workflow_id)
            .handoff(&r.handoff_id)
            .target(Target::ToGod, Some(&r.to_god))
            .target(Target::Step, Some(&r.step));
        self.journal(&act);
        Ok(r)
    }
}

impl Conductor {
    /// Asks the bridge to try a waiting outbox record again now (see `retry_outbox_unjournaled`).
    /// An operator act, journaled naming the outbox id.
    pub fn retry_outbox(&self, outbox_id: &str) -> Result<super::results::OutboxActResult> {
        let r = self.retry_outbox_unjournaled(outbox_id)?;
        self.journal(&outbox_act(Verb::BridgeRetry, &r, None));
        Ok(r)
    }

    /// Dead-letters a waiting outbox record by hand, so it is never published (see
    /// `discard_outbox_unjournaled`). An operator act, journaled naming the outbox id and the reason.
    pub fn discard_outbox(
        &self,
        outbox_id: &str,
        reason: &str,
    ) -> Result<super::results::OutboxActResult> {
        let r = self.discard_outbox_unjournaled(outbox_id, reason)?;
        self.journal(&outbox_act(Verb::BridgeDiscard, &r, Some(reason)));
        Ok(r)
    }
}

/// The entry of an operator's act on an outbox record.
fn outbox_act(action: Verb, r: &super::results::OutboxActResult, reason: Option<&str>) -> Act {
    Act::new(action, r.status.to_string())
        .target(Target::OutboxId, Some(&r.outbox_id))
        .workflow(&r.workflow_id)
        .target(Target::Subject, Some(&r.subject))
        .reason(reason)
}

/// The entry of a decision; `original`: the repeat of one killed before its entry, journaled as the
/// decision itself.
pub(crate) fn approval_act(
    action: Verb,
    r: &ApprovalResult,
    reason: Option<&str>,
    original: bool,
) -> Act {
    let outcome = if r.duplicate && !original {
        format!("{} (duplicate)", r.status)
    } else {
        r.status.to_string()
    };
    Act::new(action, outcome)
        .workflow(&r.workflow_id)
        .handoff(&r.handoff_id)
        .target(Target::ToGod, Some(&r.target_god))
        .target(Target::Step, Some(&r.target_step))
        .reason(reason)
}

impl Conductor {
    /// Pauses `target` (docs/PROTOCOL.md §2.14) until resumed, or until `until` passes (the
    /// supervisor then resumes it). Journaled as `pause` through the intent `pause-{pause_id}`; a
    /// target paused already answers `duplicate` with its pause in force.
    pub fn pause(
        &self,
        target: &super::pause::PauseTarget,
        until: Option<chrono::DateTime<chrono::Utc>>,
        reason: &str,
    ) -> Result<super::pause::PauseResult> {
        let id = super::pause::fresh_id();
        let act = |status: &str, p: &super::pause::Pause| {
            Act::new(Verb::Pause, status.to_owned())
                .target(Target::PauseId, Some(&p.id))
                .target(Target::Kind, Some(p.kind.as_str()))
                .target(Target::Name, p.name.as_ref())
                .target(Target::Until, p.until.as_ref())
                .reason(Some(&p.reason))
        };
        let intent = self.intend(
            &format!("pause-{id}"),
            &Act::new(Verb::Pause, "paused")
                .target(Target::PauseId, Some(&id))
                .target(Target::Kind, Some(target.kind.as_str()))
                .target(Target::Name, target.name.as_ref())
                .reason(Some(reason)),
            Check::Pause {
                pause_id: id.clone(),
            },
        );
        let r = match self.pause_unjournaled(target, &id, until, reason) {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        if r.status == "duplicate" {
            // Not this intent's act: the pause in force was journaled by its own.
            self.drop_intent(intent);
            self.journal(&act("paused (duplicate)", &r.pause));
        } else {
            self.journal_intent(intent, act("paused", &r.pause));
        }
        Ok(r)
    }

    /// Ends the pause of `target` (docs/PROTOCOL.md §2.14), releasing what it held at most `rate` a
    /// second (`None`: at once). Journaled as `resume` through the intent `resume-{pause_id}`, with
    /// what it shifted and released; repeated after a kill it finishes the resume and journals it
    /// once.
    pub fn resume(
        &self,
        target: &super::pause::PauseTarget,
        rate: Option<f64>,
    ) -> Result<super::pause::ResumeResult> {
        let by = self.origin().actor;
        let Some(p) = self.pause_of(target)? else {
            // Not paused (or just ended): the act answers, and journals nothing new.
            let r = self.resume_unjournaled(target, rate, &by)?;
            return Ok(r);
        };
        let intent = self.intend(
            &format!("resume-{}", p.id),
            &Act::new(Verb::Resume, "resumed")
                .target(Target::PauseId, Some(&p.id))
                .target(Target::Kind, Some(p.kind.as_str()))
                .target(Target::Name, p.name.as_ref()),
            Check::Resume {
                pause_id: p.id.clone(),
            },
        );
        let r = match self.resume_unjournaled(target, rate, &by) {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        if r.status != "resumed" {
            // Unfinished (errors): the intent stays for the repeat that finishes it.
            return Ok(r);
        }
        let act = Act::new(Verb::Resume, r.status.clone())
            .target(Target::PauseId, Some(&r.pause.id))
            .target(Target::Kind, Some(r.pause.kind.as_str()))
            .target(Target::Name, r.pause.name.as_ref())
            .target(Target::Shifted, Some(r.shifted.to_string()))
            .target(Target::Released, Some(r.released.len().to_string()))
            .target(Target::StillHeld, Some(r.still_held.len().to_string()));
        self.journal_intent(intent, act);
        Ok(r)
    }
}
