//! Step timeouts after `accepted` (docs/PROTOCOL.md §2.10): JetStream's AckWait after a `+WPI`.
//!
//! An `accepted` ack archives the dispatch; when its step declares a `timeout`, the archived dispatch
//! carries `step_deadline` (and `step_timeout`, as written) and a timer file
//! `conductor/timers/{handoff_id}.json` names it so the supervisor need not read the archive. The
//! timer is only a hint: when it falls due the supervisor re-reads the archived dispatch and the state
//! under the workflow's lock, and acts only when the dispatch is still `accepted`, still the
//! workflow's current step, and its `step_deadline` has passed. It then redelivers it exactly as for a
//! missed `ack_wait` (counting toward `max_deliveries`, the same god then `fallback_gods`) or, out of
//! deliveries, dead-letters it. A `pending` ack after `accepted` is a progress ack: it moves the step
//! deadline to its ETA, or restarts the timeout.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Conductor;
use super::delivery::{DeadLetterInput, Delivery, DeliveryAct, Policy, StallWhen, target_of};
use super::files;
use super::model::{AckStatus, Dispatch, WorkflowStatus, lenient};
use crate::error::{Error, Result};
use crate::store::atomic::{rename_durable, write_json};
use crate::store::lock::FileLock;
use crate::store::time::{add, format_ts, parse_duration, parse_ts};
use crate::store::{GodName, HandoffId, Root, WorkflowId};

/// What [`Conductor::redeliver_timed_out`] needs: the accepted dispatch whose step timed out, where
/// it lies, and the workflow's state it moves on.
struct TimedOut<'a> {
    path: &'a Path,
    dispatch: Dispatch,
    wf: &'a WorkflowId,
    hid: &'a HandoffId,
    god: &'a GodName,
    state: crate::conductor::WorkflowState,
    policy: &'a Policy,
    now: DateTime<Utc>,
}

/// A timer file: which accepted dispatch to look at, and when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct StepTimer {
    /// The handoff of the accepted dispatch.
    #[serde(deserialize_with = "lenient::or_default")]
    pub handoff_id: String,
    /// Its workflow.
    #[serde(deserialize_with = "lenient::or_default")]
    pub workflow_id: String,
    /// The god whose archive holds it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub god: String,
    /// Its step.
    #[serde(deserialize_with = "lenient::or_default")]
    pub step: String,
    /// When the step's timeout runs out.
    #[serde(deserialize_with = "lenient::or_default")]
    pub deadline: String,
    /// The deliveries the dispatch had when it was accepted (the act is idempotent on it).
    pub delivery: usize,
}

/// `conductor/timers/{handoff_id}.json`.
pub(crate) fn timer_path(root: &Root, hid: &HandoffId) -> PathBuf {
    root.timers_dir().join(format!("{hid}.json"))
}

/// Reads a timer file leniently (`None`: missing or unreadable).
pub(crate) fn read_timer(path: &Path) -> Option<StepTimer> {
    files::read_model::<StepTimer>(path).ok().flatten()
}

/// The step's `timeout` of a dispatch, from its workflow definition (`None`: no definition or none).
pub(crate) fn step_timeout(root: &Root, d: &Dispatch) -> Option<(std::time::Duration, String)> {
    let def_id = d.routing.as_ref()?.workflow_definition.clone()?;
    let def = super::definition::find_definition(root, &def_id).ok()??;
    let s = def.step(&d.step)?;
    Some((s.timeout?, s.timeout_text.clone().unwrap_or_default()))
}

/// What a timer falls due to.
enum Fire {
    NotYet(DateTime<Utc>),
    Drop,
    Act(DeliveryAct, bool),
    Repaired,
}

impl Conductor {
    /// For an `accepted` ack of `d` (about to be archived for `god`): when its step has a `timeout`,
    /// stamps `step_deadline` into `d` and writes the timer (before the ack commits, so a crash leaves
    /// at most a timer that finds nothing to do). Returns the deadline.
    pub(crate) fn arm_step_timer(
        &self,
        d: &mut Dispatch,
        god: &GodName,
        now: DateTime<Utc>,
    ) -> Result<Option<String>> {
        let timeout = step_timeout(&self.root, d);
        let Some((deadline, timer)) = super::ack_step::step_timer(d, god, timeout.as_ref(), now)
        else {
            return Ok(None);
        };
        self.write_timer(&HandoffId::parse(&d.handoff_id)?, &timer)?;
        Ok(Some(deadline))
    }

    /// Writes a step timer `conductor/timers/{hid}.json`.
    pub(crate) fn write_timer(&self, hid: &HandoffId, t: &StepTimer) -> Result<()> {
        crate::store::atomic::ensure_dir(&self.root, &self.root.timers_dir())?;
        write_json(&self.root, &timer_path(&self.root, hid), t)
    }

    /// Handles one step timer at `now` (see the module doc): `Ok(None)` when nothing was done (not
    /// due: the deadline is returned in `next`; stale: the timer is removed).
    pub(crate) fn fire_step_timer(
        &self,
        timer: &Path,
        now: DateTime<Utc>,
        next: &mut Option<DateTime<Utc>>,
        repaired: &mut usize,
    ) -> Result<Option<(DeliveryAct, bool)>> {
        let Some(t) = read_timer(timer) else {
            return Ok(None);
        };
        let (Ok(wf), Ok(hid), Ok(god)) = (
            WorkflowId::parse(&t.workflow_id),
            HandoffId::parse(&t.handoff_id),
            GodName::parse(&t.god),
        ) else {
            files::remove_file(&self.root, timer)?;
            return Ok(None);
        };
        if timer != timer_path(&self.root, &hid) {
            // Not a file this engine wrote under that name: never acted on.
            return Ok(None);
        }
        let fire = {
            let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
            self.fire_locked(&t, &wf, &hid, &god, now)?
        };
        match fire {
            Fire::NotYet(at) => {
                *next = Some(next.map_or(at, |n| n.min(at)));
                Ok(None)
            }
            Fire::Drop => {
                files::remove_file(&self.root, timer)?;
                Ok(None)
            }
            Fire::Repaired => {
                *repaired += 1;
                files::remove_file(&self.root, timer)?;
                Ok(None)
            }
            Fire::Act(act, dead) => {
                if let Some(at) = act.deadline.as_deref().and_then(parse_ts) {
                    *next = Some(next.map_or(at, |n| n.min(at)));
                }
                super::crash_point("timeout:before-timer-removed");
                files::remove_file(&self.root, timer)?;
                Ok(Some((act, dead)))
            }
        }
    }

    /// A crash between rewriting the archived dispatch (dead-lettered, or delivered again) and
    /// renaming it: finishes the move. True when it did.
    fn finish_cut_move(&self, t: &StepTimer, d: &Dispatch, path: &Path) -> Result<bool> {
        let hid = &d.handoff_id;
        let decided = if d.dead_at.is_some() {
            Some(self.root.dead_dir(&GodName::parse(&d.to_god)?))
        } else if d.deliveries.len() > t.delivery && d.ack_status == AckStatus::Unacked {
            Some(self.root.inbox_dir(&GodName::parse(&d.to_god)?))
        } else {
            None
        };
        let Some(to) = decided else {
            return Ok(false);
        };
        let target = to.join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[path.to_path_buf(), target.clone()])?;
        rename_durable(&self.root, path, &target)?;
        Ok(true)
    }

    fn fire_locked(
        &self,
        t: &StepTimer,
        wf: &WorkflowId,
        hid: &HandoffId,
        god: &GodName,
        now: DateTime<Utc>,
    ) -> Result<Fire> {
        let path = self.root.archive_dir(god).join(format!("{hid}.json"));
        let Some(d) = files::read_model::<Dispatch>(&path).map_err(|e| Error::Corrupt {
            path: e.path,
            message: e.error,
        })?
        else {
            return Ok(Fire::Drop);
        };
        if d.handoff_id != hid.as_str() || d.workflow_id != wf.as_str() {
            return Ok(Fire::Drop);
        }
        if self.finish_cut_move(t, &d, &path)? {
            return Ok(Fire::Repaired);
        }
        if d.ack_status != AckStatus::Accepted || d.deliveries.len() != t.delivery {
            return Ok(Fire::Drop);
        }
        let Some(deadline) = d.step_deadline.as_deref().and_then(parse_ts) else {
            return Ok(Fire::Drop);
        };
        if deadline > now {
            return Ok(Fire::NotYet(deadline));
        }
        let st = files::require_state(&self.root, wf)?;
        let timeout_text = d.step_timeout.clone().unwrap_or_default();
        let policy = Policy::of_dispatch(&d).unwrap_or_else(|| Policy {
            ack_wait: parse_duration(&timeout_text).unwrap_or(std::time::Duration::from_secs(60)),
            max_deliveries: self.root.settings.max_deliveries,
            backoff: Vec::new(),
        });
        // The act writes the state first: a pass killed right after it left the workflow `stalled`
        // (a dead letter) or `waiting_for_ack` on the next delivery's god, with the dispatch still
        // accepted here; the repeat recognises that state and finishes the act.
        let delivered = d.deliveries.len().max(1);
        let (halfway_status, halfway_god) = if delivered >= policy.max_deliveries as usize {
            (WorkflowStatus::Stalled, god.to_string())
        } else {
            let first = d
                .deliveries
                .first()
                .map(|x| x.to.clone())
                .unwrap_or_else(|| d.to_god.clone());
            let fallbacks = self.step_fallbacks(&d);
            (
                WorkflowStatus::WaitingForAck,
                target_of(&first, &fallbacks, delivered + 1),
            )
        };
        let on_step = st.current_step.as_deref() == Some(d.step.as_str());
        let running = st.status == WorkflowStatus::InProgress
            && st.dispatched_to.as_deref() == Some(god.as_str());
        let halfway = st.status == halfway_status
            && st.dispatched_to.as_deref() == Some(halfway_god.as_str());
        if !on_step || !(running || halfway) {
            return Ok(Fire::Drop);
        }
        let mut nd = d.clone();
        if nd.deliveries.is_empty() {
            nd.deliveries.push(Delivery {
                at: d.dispatched_at.clone().unwrap_or_else(|| format_ts(now)),
                to: d.to_god.clone(),
            });
        }
        let n = nd.deliveries.len();
        nd.step_deadline = None;
        nd.acked_at = None;
        nd.by = None;
        let accepted_for = format!(
            "handoff {hid} was accepted by {god} but its step {:?} timed out ({}) without completion",
            d.step,
            if timeout_text.is_empty() {
                "timeout"
            } else {
                &timeout_text
            }
        );
        if n >= policy.max_deliveries as usize {
            let reason = format!(
                "{accepted_for}; {n} deliver{} used (max_deliveries {})",
                if n == 1 { "y" } else { "ies" },
                policy.max_deliveries
            );
            let act = self.dead_letter(DeadLetterInput {
                path: &path,
                dispatch: nd,
                wf,
                hid,
                god,
                reason,
                now,
                stall: StallWhen::Always,
                crash_points: ("timeout:dead-after-state", "timeout:dead-after-rewrite"),
            })?;
            return Ok(Fire::Act(act, true));
        }
        let act = self.redeliver_timed_out(TimedOut {
            path: &path,
            dispatch: nd,
            wf,
            hid,
            god,
            state: st,
            policy: &policy,
            now,
        })?;
        Ok(Fire::Act(act, false))
    }

    /// Delivers an accepted step that timed out again, to the next god in its delivery order: the
    /// intent, the state (`waiting_for_ack` on that god), the dispatch rewritten with its new delivery
    /// where it lies, then renamed into the god's inbox.
    fn redeliver_timed_out(&self, input: TimedOut<'_>) -> Result<DeliveryAct> {
        let TimedOut {
            path,
            dispatch: mut nd,
            wf,
            hid,
            god,
            state: mut st,
            policy,
            now,
        } = input;
        let n = nd.deliveries.len();
        let first = nd
            .deliveries
            .first()
            .map(|x| x.to.clone())
            .unwrap_or_else(|| nd.to_god.clone());
        let fallbacks = self.step_fallbacks(&nd);
        let next_n = n + 1;
        let to = target_of(&first, &fallbacks, next_n);
        let to_god = GodName::parse(&to)?;
        let target = self.root.inbox_dir(&to_god).join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[path.to_path_buf(), target.clone()])?;
        self.intend_delivery(wf.as_str(), hid.as_str(), god.as_str(), &to, next_n, false);
        st.status = WorkflowStatus::WaitingForAck;
        st.dispatched_to = Some(to.clone());
        st.updated = Some(format_ts(now));
        files::write_state(&self.root, wf, &st)?;
        super::crash_point("timeout:after-state");
        if nd.ack_wait.is_none() {
            policy.stamp_policy(&mut nd);
        }
        nd.to_god = to.clone();
        nd.ack_status = AckStatus::Unacked;
        nd.deliveries.push(Delivery {
            at: format_ts(now),
            to: to.clone(),
        });
        nd.ack_deadline = add(now, policy.wait_for(next_n)).map(format_ts);
        nd.dispatched_at = Some(format_ts(now));
        nd.timed_out_at = Some(format_ts(now));
        write_json(&self.root, path, &nd)?;
        super::crash_point("timeout:after-rewrite");
        rename_durable(&self.root, path, &target)?;
        Ok(DeliveryAct {
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            from_god: god.to_string(),
            to_god: to,
            delivery: next_n,
            deadline: nd.ack_deadline.clone(),
            path: target.display().to_string(),
        })
    }
}
