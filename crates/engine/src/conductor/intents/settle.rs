//! The supervisor's pass over leftover intents (docs/PROTOCOL.md §2.8): each is settled exactly once,
//! and one that a crashed writer cannot have left (planted, or for an act already journaled) is
//! dropped with a warning, never journaled.
//!
//! Exactly once: the intents whose writer is gone are settled under the journal's lock, so the check
//! "does the journal already record this act?" and the append that follows are one step. Two
//! supervisors, or a supervisor restarted while another runs, once both journaled the same intent (a
//! redelivery journaled twice with the same key).

use crate::error::Refusal;
use crate::journal::{Target, Verb};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::{Check, IntentFile, action_word, intents_dir, remove_intent, writer_running};
use crate::conductor::model::Dispatch;
use crate::conductor::{Conductor, files};
use crate::journal::{Act, Origin};
use crate::store::lock::FileLock;
use crate::store::{HandoffId, Root};

/// Intents looked at in one pass; the rest wait for the next one.
const MAX_PER_PASS: usize = 1000;

/// What one pass did with the intents crashed processes left.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntentRepair {
    /// Acts done but not journaled, journaled now.
    pub journaled: usize,
    /// Intents dropped without an entry, and why (planted, or their act is already journaled).
    pub dropped: Vec<String>,
}

/// The ids whose acts a journal scan keeps facts of (memory is bounded by the intents, not the
/// journal).
#[derive(Debug, Default)]
pub(crate) struct Wanted {
    keys: HashSet<String>,
    handoffs: HashSet<String>,
    acks: HashSet<String>,
    workflows: HashSet<String>,
}

impl Wanted {
    pub(crate) fn add(&mut self, key: &str, check: &Check) {
        self.keys.insert(key.to_owned());
        match check {
            Check::Ack { ack_id, handoff_id } => {
                self.acks.insert(ack_id.clone());
                self.handoffs.insert(handoff_id.clone());
            }
            Check::Submit {
                workflow_id,
                handoff_id,
            }
            | Check::Rerun {
                workflow_id,
                handoff_id,
            } => {
                self.workflows.insert(workflow_id.clone());
                self.handoffs.insert(handoff_id.clone());
            }
            Check::Delivery { handoff_id, .. }
            | Check::Dead { handoff_id }
            | Check::Requeue { handoff_id }
            | Check::Held { handoff_id }
            | Check::Retire { handoff_id, .. } => {
                self.handoffs.insert(handoff_id.clone());
            }
            Check::Pause { .. } | Check::Resume { .. } => {}
        }
    }
}

/// The delivery acts of one dispatch since its last requeue (a requeue starts the count again).
#[derive(Debug, Default, Clone)]
struct Cycle {
    redelivered: HashSet<String>,
    dead: HashSet<String>,
    /// The last dead letter or requeue entry was a dead letter.
    dead_last: bool,
}

/// What the journal records of the wanted acts.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    keys: HashSet<String>,
    submits: HashSet<String>,
    acks: HashSet<String>,
    held: HashSet<String>,
    cycles: HashMap<String, Cycle>,
    reruns: HashSet<(String, String)>,
    /// `(action, pause_id)` of the pause and resume entries.
    pauses: HashSet<(String, String)>,
}

impl Facts {
    /// One streaming pass over every journal file (lines that are no entry are skipped).
    pub(crate) fn scan(root: &Root, wanted: &Wanted) -> Self {
        let mut facts = Self::default();
        let _ = crate::journal::for_each_line(root, |_, _, line| {
            if let Ok(e) = serde_json::from_slice::<Map<String, Value>>(line) {
                facts.note(wanted, &e);
            }
            Ok(true)
        });
        facts
    }

    /// Takes in one entry.
    fn note(&mut self, wanted: &Wanted, e: &Map<String, Value>) {
        let Some(t) = e.get("targets").and_then(Value::as_object) else {
            return;
        };
        let text = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
        if wanted.keys.contains(text("intent")) {
            self.keys.insert(text("intent").to_owned());
        }
        let outcome = e.get("outcome").and_then(Value::as_str).unwrap_or_default();
        let duplicate = outcome == "duplicate" || outcome.ends_with("(duplicate)");
        let hid = text("handoff_id");
        let wanted_hid = wanted.handoffs.contains(hid);
        match Verb::parse(e.get("action").and_then(Value::as_str).unwrap_or_default()) {
            Verb::Submit if !duplicate && wanted_hid => {
                self.submits.insert(hid.to_owned());
            }
            Verb::Ack if !duplicate && wanted.acks.contains(text("ack_id")) => {
                self.acks.insert(text("ack_id").to_owned());
            }
            Verb::Approve | Verb::Reject if !duplicate && wanted_hid => {
                self.held.insert(hid.to_owned());
            }
            Verb::Redeliver if wanted_hid => {
                let c = self.cycles.entry(hid.to_owned()).or_default();
                c.redelivered.insert(text("delivery").to_owned());
            }
            Verb::DeadLetter if wanted_hid => {
                let c = self.cycles.entry(hid.to_owned()).or_default();
                c.dead.insert(text("delivery").to_owned());
                c.dead_last = true;
            }
            Verb::Requeue if wanted_hid => {
                let c = self.cycles.entry(hid.to_owned()).or_default();
                *c = Cycle::default();
            }
            a @ (Verb::Pause | Verb::Resume) if !duplicate && !text("pause_id").is_empty() => {
                self.pauses
                    .insert((a.as_str().to_owned(), text("pause_id").to_owned()));
            }
            Verb::Rerun if wanted.workflows.contains(text("workflow_id")) => {
                self.reruns
                    .insert((text("workflow_id").to_owned(), text("attempt").to_owned()));
            }
            _ => {}
        }
    }

    /// Whether the journal already records the act of the intent `key` (`check`): an entry names the
    /// key, or records the same act (a submit of the handoff, an ack of the ack id, a decision on the
    /// held dispatch, the delivery number since the dispatch's last requeue, a requeue since its last
    /// dead letter, the rerun's attempt). Delivery keys repeat after a requeue, so for them only the
    /// act counts.
    pub(crate) fn records(&self, key: &str, check: &Check) -> bool {
        let named = self.keys.contains(key);
        match check {
            Check::Submit { handoff_id, .. } => named || self.submits.contains(handoff_id),
            Check::Ack { ack_id, .. } => named || self.acks.contains(ack_id),
            Check::Held { handoff_id } => named || self.held.contains(handoff_id),
            // The key holds the stamp: only the entry naming it records this retirement.
            Check::Retire { .. } => named,
            Check::Pause { pause_id } => {
                named
                    || self
                        .pauses
                        .contains(&("pause".to_owned(), pause_id.clone()))
            }
            Check::Resume { pause_id } => {
                named
                    || self
                        .pauses
                        .contains(&("resume".to_owned(), pause_id.clone()))
            }
            Check::Delivery {
                handoff_id,
                delivery,
            } => self
                .cycles
                .get(handoff_id)
                .is_some_and(|c| c.redelivered.contains(&delivery.to_string())),
            Check::Dead { handoff_id } => {
                let n = key_number(key, &format!("dead-{handoff_id}-")).unwrap_or_default();
                self.cycles
                    .get(handoff_id)
                    .is_some_and(|c| c.dead.contains(n))
            }
            // A requeue takes a dead letter out: one is journaled per dead letter.
            Check::Requeue { handoff_id } => {
                named || !self.cycles.get(handoff_id).is_some_and(|c| c.dead_last)
            }
            Check::Rerun { workflow_id, .. } => {
                let attempt = key_number(key, &format!("rerun-{workflow_id}-")).unwrap_or_default();
                named
                    || self
                        .reruns
                        .contains(&(workflow_id.clone(), attempt.to_owned()))
            }
        }
    }
}

/// The digits after `prefix` in `key`, if that is all there is (a delivery count, an attempt, a
/// requeue's 20-digit stamp).
fn key_number<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = key.strip_prefix(prefix)?;
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())).then_some(rest)
}

/// The intent's target `k`, when it has one.
fn target<'a>(f: &'a IntentFile, k: &str) -> Option<&'a str> {
    f.targets.get(k).and_then(Value::as_str)
}

/// Whether the intent's key, action and targets are those its own writer gives the act its `check`
/// names; the reason when not. (Every engine writer derives the key from the act.)
fn claims_agree(f: &IntentFile) -> std::result::Result<(), Refusal> {
    let same = |k: &str, want: &str| target(f, k).is_none_or(|v| v == want);
    let supervisor = f.source == "supervisor";
    let (expected, ok) = match &f.check {
        Check::Submit {
            workflow_id,
            handoff_id,
        } => (
            format!("submit-{handoff_id}"),
            f.action == Verb::Submit
                && same("workflow_id", workflow_id)
                && same("handoff_id", handoff_id),
        ),
        Check::Ack { ack_id, handoff_id } => (
            format!("ack-{ack_id}"),
            f.action == Verb::Ack && same("ack_id", ack_id) && same("handoff_id", handoff_id),
        ),
        Check::Held { handoff_id } => (
            format!("held-{handoff_id}"),
            matches!(f.action, Verb::Approve | Verb::Reject) && same("handoff_id", handoff_id),
        ),
        Check::Pause { pause_id } => (
            format!("pause-{pause_id}"),
            f.action == Verb::Pause && same("pause_id", pause_id),
        ),
        Check::Resume { pause_id } => (
            format!("resume-{pause_id}"),
            f.action == Verb::Resume && same("pause_id", pause_id),
        ),
        Check::Retire {
            handoff_id,
            retired_at,
        } => (
            crate::conductor::retire::retire_key(handoff_id, retired_at),
            f.action == Verb::DeadRetire && target(f, "handoff_id") == Some(handoff_id),
        ),
        Check::Delivery {
            handoff_id,
            delivery,
        } => (
            format!("redeliver-{handoff_id}-{delivery}"),
            f.action == Verb::Redeliver
                && supervisor
                && target(f, "handoff_id") == Some(handoff_id)
                && target(f, "delivery") == Some(delivery.to_string().as_str()),
        ),
        Check::Dead { handoff_id } => {
            let n = key_number(&f.key, &format!("dead-{handoff_id}-"));
            (
                format!("dead-{handoff_id}-{{deliveries}}"),
                n.is_some()
                    && f.action == Verb::DeadLetter
                    && supervisor
                    && target(f, "handoff_id") == Some(handoff_id)
                    && target(f, "delivery") == n,
            )
        }
        Check::Requeue { handoff_id } => (
            format!("requeue-{handoff_id}-{{stamp}}"),
            key_number(&f.key, &format!("requeue-{handoff_id}-")).is_some()
                && f.action == Verb::Requeue
                && target(f, "handoff_id") == Some(handoff_id),
        ),
        Check::Rerun {
            workflow_id,
            handoff_id,
        } => {
            let n = key_number(&f.key, &format!("rerun-{workflow_id}-"));
            (
                format!("rerun-{workflow_id}-{{attempt}}"),
                n.is_some()
                    && f.action == Verb::Rerun
                    && target(f, "workflow_id") == Some(workflow_id)
                    && target(f, "handoff_id") == Some(handoff_id)
                    && target(f, "attempt") == n,
            )
        }
    };
    let key_ok = match &f.check {
        Check::Dead { .. } | Check::Requeue { .. } | Check::Rerun { .. } => ok,
        _ => f.key == expected,
    };
    if key_ok && ok {
        Ok(())
    } else {
        Err(format!(
            "its key, action ({}), source ({}) or targets are not those the engine writes for the act it claims (key {expected})",
            f.action, f.source
        ).into())
    }
}

impl Conductor {
    /// The dispatch of `hid` wherever it lies: an inbox or `_quarantine`, the archive, the dead letters.
    fn dispatch_anywhere(&self, hid: &HandoffId) -> Option<Dispatch> {
        files::find_anywhere(&self.root, hid)
            .ok()
            .flatten()
            .map(|f| f.dispatch)
            .or_else(|| self.find_dead(hid).map(|d| d.dispatch))
    }

    /// Whether the intent's delivery claims agree with the dispatch (its act done): the delivery it
    /// names went to the god it names, a dead letter used the deliveries it names, in its workflow.
    fn state_agrees(&self, f: &IntentFile) -> std::result::Result<(), Refusal> {
        let (hid, n) = match &f.check {
            Check::Delivery {
                handoff_id,
                delivery,
            } => (handoff_id, *delivery),
            Check::Dead { handoff_id } => (
                handoff_id,
                key_number(&f.key, &format!("dead-{handoff_id}-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_default(),
            ),
            Check::Ack { ack_id, handoff_id } => {
                let agrees = self
                    .state_of_handoff(handoff_id)
                    .and_then(|st| st.acks.into_iter().find(|a| a.ack_id == *ack_id))
                    .is_some_and(|a| a.handoff_id == *handoff_id);
                return if agrees {
                    Ok(())
                } else {
                    Err(format!(
                        "the state records ack {ack_id} for another handoff than {handoff_id}"
                    )
                    .into())
                };
            }
            _ => return Ok(()),
        };
        let d = HandoffId::parse(hid)
            .ok()
            .and_then(|h| self.dispatch_anywhere(&h))
            .ok_or_else(|| format!("no dispatch of {hid} is left to check it against"))?;
        let wf_ok = target(f, "workflow_id").is_none_or(|w| w == d.workflow_id);
        let ok = match &f.check {
            Check::Delivery { .. } => {
                n >= 2
                    && d.deliveries
                        .get(n - 1)
                        .is_some_and(|x| target(f, "to_god").is_none_or(|g| g == x.to))
            }
            _ => n >= 1 && d.deliveries.len() == n,
        };
        if wf_ok && ok {
            Ok(())
        } else {
            Err(format!(
                "the dispatch of {hid} (workflow {}, {} deliveries) disagrees with it",
                d.workflow_id,
                d.deliveries.len()
            )
            .into())
        }
    }

    /// The intents a pass may need to settle, looked at without the lock: whole ones whose writer
    /// is gone (a live writer's are left); a torn one is removed once it is old.
    fn unsettled(&self, rd: std::fs::ReadDir) -> Vec<PathBuf> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        for e in rd.flatten().take(MAX_PER_PASS) {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let Some(f) = files::read_model::<IntentFile>(&path).ok().flatten() else {
                // A torn intent (its writer killed mid-write) names no act: dropped once it is old.
                let stale = e
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > std::time::Duration::from_secs(600));
                if stale {
                    let _ = remove_intent(&self.root, &path);
                }
                continue;
            };
            if !writer_running(&f) {
                // A retirement killed between its stamp and its move: the move is finished first
                // (under the workflow's lock, never inside the journal's), then it is settled as
                // done.
                if let Check::Retire {
                    handoff_id,
                    retired_at,
                } = &f.check
                {
                    self.finish_cut_retirement(handoff_id, retired_at);
                }
                candidates.push(path);
            }
        }
        candidates
    }

    /// Settles the intents crashed processes left (see the module doc and docs/PROTOCOL.md §2.8).
    pub(crate) fn repair_intents(&self) -> IntentRepair {
        let mut out = IntentRepair::default();
        let dir = intents_dir(&self.root);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return out;
        };
        let candidates = self.unsettled(rd);
        if candidates.is_empty() {
            return out;
        }
        let Ok(lock) = FileLock::exclusive(&self.root, &crate::journal::lock_path(&self.root))
        else {
            return out;
        };
        // Read again under the lock: another pass may have settled an intent since, or a repeat of
        // its act rewritten it.
        let intents: Vec<(PathBuf, IntentFile)> = candidates
            .into_iter()
            .filter_map(|p| {
                let f = files::read_model::<IntentFile>(&p).ok().flatten()?;
                (!writer_running(&f)).then_some((p, f))
            })
            .collect();
        let mut wanted = Wanted::default();
        for (_, f) in &intents {
            wanted.add(&f.key, &f.check);
        }
        let mut facts = Facts::scan(&self.root, &wanted);
        for (path, f) in intents {
            let drop = |why: String, out: &mut IntentRepair| {
                out.dropped.push(format!(
                    "intent {} ({} by {} via {}) dropped, not journaled: {why}",
                    path.display(),
                    f.action,
                    f.actor,
                    f.source
                ));
                let _ = remove_intent(&self.root, &path);
            };
            if path != dir.join(format!("{}.json", f.key)) {
                drop(
                    format!("its file name is not its key {:?}", f.key),
                    &mut out,
                );
                continue;
            }
            let Some(action) = action_word(&f.action) else {
                drop(
                    format!("{:?} is not an act the engine journals", f.action),
                    &mut out,
                );
                continue;
            };
            if let Err(why) = claims_agree(&f) {
                drop(why.into(), &mut out);
                continue;
            }
            if facts.records(&f.key, &f.check) {
                if facts.keys.contains(&f.key) {
                    // Its own entry is there: the writer was killed after the append, before the
                    // removal.
                    let _ = remove_intent(&self.root, &path);
                } else {
                    drop("the journal already records its act".into(), &mut out);
                }
                continue;
            }
            if !self.intent_done(&f.check) {
                // Nothing happened; a repeat of the act journals itself.
                let _ = remove_intent(&self.root, &path);
                continue;
            }
            if let Err(why) = self.state_agrees(&f) {
                drop(why.into(), &mut out);
                continue;
            }
            let act = self.late_act(&f, action);
            let origin = Origin {
                actor: f.actor.clone(),
                source: f.source.clone(),
            };
            match crate::journal::append_held(&self.root, &lock, &origin, &act) {
                Ok(Value::Object(entry)) => {
                    facts.note(&wanted, &entry);
                    out.journaled += 1;
                    let _ = remove_intent(&self.root, &path);
                }
                // Not journaled: the intent stays for the next pass.
                _ => continue,
            }
        }
        out
    }

    /// The entry of an act a killed process did: from the state's record of it where there is one
    /// (the intent may hold the words of a concurrent attempt that was then refused), else the
    /// intent's targets with the act's own outcome word; naming the intent.
    fn late_act(&self, f: &IntentFile, action: Verb) -> Act {
        let mut act = self.recorded_act(&f.check).unwrap_or_else(|| {
            let outcome = match &f.check {
                Check::Submit {
                    workflow_id,
                    handoff_id,
                } => crate::store::WorkflowId::parse(workflow_id)
                    .ok()
                    .and_then(|wf| self.submit_outcome(&wf, handoff_id)),
                Check::Delivery { .. } => Some("redelivered".to_owned()),
                Check::Dead { .. } => Some("dead_lettered".to_owned()),
                Check::Requeue { .. } => Some("requeued".to_owned()),
                Check::Rerun { .. } => Some("rerun".to_owned()),
                Check::Retire { .. } => Some("retired".to_owned()),
                _ => None,
            }
            .unwrap_or_else(|| f.outcome.clone());
            let mut act = Act::new(action, outcome);
            act.targets = f.targets.clone();
            act
        });
        if let Check::Held { handoff_id } = &f.check {
            self.link_targets(f, handoff_id, &mut act);
        }
        act.set_target(Target::Intent, json!(f.key));
        act
    }

    /// The `channel` and `approver` of a decision an approval link made, from its intent, kept only
    /// when the state's record of the decision says the same (`by` is `{approver} via {channel}
    /// link`): an intent is read as hostile input.
    fn link_targets(&self, f: &IntentFile, handoff_id: &str, act: &mut Act) {
        let Some(channel) = target(f, Target::Channel.as_str())
            .and_then(crate::conductor::approvals::Channel::parse)
        else {
            return;
        };
        let by = self.state_of_handoff(handoff_id).and_then(|st| {
            crate::conductor::ack::approvals(&st)
                .into_iter()
                .rev()
                .find(|a| a.get("handoff_id").and_then(Value::as_str) == Some(handoff_id))
                .and_then(|a| a.get("by").and_then(Value::as_str).map(str::to_owned))
        });
        let Some(by) = by else {
            return;
        };
        let Some(who) = by.strip_suffix(&format!(" via {channel} link")) else {
            return;
        };
        act.set_target(Target::Channel, json!(channel.as_str()));
        if let Some(a) = target(f, Target::Approver.as_str()).filter(|a| *a == who) {
            act.set_target(Target::Approver, json!(a));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(key: &str, action: &str, source: &str, targets: Value, check: Check) -> IntentFile {
        IntentFile {
            key: key.into(),
            at: String::new(),
            pid: 1,
            actor: "a".into(),
            source: source.into(),
            action: Verb::parse(action),
            targets: targets.as_object().cloned().unwrap_or_default(),
            outcome: String::new(),
            check,
        }
    }

    #[test]
    fn claims_agree_with_what_the_engine_writes_and_nothing_else() {
        let hid = "hof_20260614_000001";
        let requeue = |key: &str| {
            intent(
                key,
                "requeue",
                "cli",
                json!({"handoff_id": hid}),
                Check::Requeue {
                    handoff_id: hid.into(),
                },
            )
        };
        // A requeue's key ends in a 20-digit stamp (more than a u64 holds).
        assert!(claims_agree(&requeue(&format!("requeue-{hid}-20261202032013488605"))).is_ok());
        assert!(claims_agree(&requeue(&format!("requeue-{hid}-x"))).is_err());
        let dead = |key: &str, source: &str, n: &str| {
            intent(
                key,
                "dead_letter",
                source,
                json!({"handoff_id": hid, "delivery": n}),
                Check::Dead {
                    handoff_id: hid.into(),
                },
            )
        };
        assert!(claims_agree(&dead(&format!("dead-{hid}-3"), "supervisor", "3")).is_ok());
        assert!(claims_agree(&dead(&format!("dead-{hid}-3"), "cli", "3")).is_err());
        assert!(claims_agree(&dead(&format!("dead-{hid}-3"), "supervisor", "2")).is_err());
        let submit = |key: &str, action: &str| {
            intent(
                key,
                action,
                "cli",
                json!({"handoff_id": hid, "workflow_id": "wf_a"}),
                Check::Submit {
                    workflow_id: "wf_a".into(),
                    handoff_id: hid.into(),
                },
            )
        };
        assert!(claims_agree(&submit(&format!("submit-{hid}"), "submit")).is_ok());
        assert!(claims_agree(&submit("forged-1", "submit")).is_err());
        assert!(claims_agree(&submit(&format!("submit-{hid}"), "approve")).is_err());
        // A retirement's key is its handoff and the digits of the stamp it wrote.
        let at = "2026-12-06T12:09:24.509471Z";
        let retire = |key: &str, action: &str, handoff: &str| {
            intent(
                key,
                action,
                "cli",
                json!({"handoff_id": handoff}),
                Check::Retire {
                    handoff_id: hid.into(),
                    retired_at: at.into(),
                },
            )
        };
        let key = format!("retire-{hid}-20261206120924509471");
        assert_eq!(crate::conductor::retire::retire_key(hid, at), key);
        assert!(claims_agree(&retire(&key, "dead_retire", hid)).is_ok());
        assert!(claims_agree(&retire(&format!("retire-{hid}-1"), "dead_retire", hid)).is_err());
        assert!(claims_agree(&retire(&key, "requeue", hid)).is_err());
        assert!(claims_agree(&retire(&key, "dead_retire", "hof_20260614_000002")).is_err());
        assert_eq!(key_number("rerun-wf_a-12", "rerun-wf_a-"), Some("12"));
        assert_eq!(key_number("rerun-wf_a-", "rerun-wf_a-"), None);
    }

    #[test]
    fn a_requeue_starts_the_delivery_count_again() {
        let mut wanted = Wanted::default();
        let hid = "hof_20260614_000001";
        let check = Check::Delivery {
            handoff_id: hid.into(),
            delivery: 2,
        };
        wanted.add("k", &check);
        let entry = |action: &str| {
            json!({"action": action, "outcome": "x", "targets": {"handoff_id": hid, "delivery": "2"}})
                .as_object()
                .cloned()
                .unwrap()
        };
        let mut facts = Facts::default();
        facts.note(&wanted, &entry("redeliver"));
        assert!(facts.records("k", &check));
        facts.note(&wanted, &entry("requeue"));
        assert!(!facts.records("k", &check));
    }
}
