//! Journal crash-consistency (docs/PROTOCOL.md §2.8): an intent file before the act, the journal entry
//! after it.
//!
//! The journaled wrappers of the acts a crash can cut off from their entry (submit, ack, redelivery,
//! dead letter) first write `conductor/journal-intents/{key}.json`: the act's action, targets, the
//! origin, the writer's pid, and how to tell whether the act happened (`check`). After the act the
//! entry is appended with `targets.intent = key` and the intent removed. A process killed between the
//! act and the append leaves the intent behind; it is settled exactly once:
//! - by the repeat of the act (same key): when the act turns out already done (a duplicate) and no
//!   entry names the intent, the repeat journals the original act, not a duplicate;
//! - by the supervisor's next pass ([`Conductor::repair_intents`]) for intents whose writer is gone:
//!   when the journal already names the intent it is only removed; when the act is done (its `check`
//!   holds) the original act is journaled; when it is not, the intent is dropped (nothing happened, and
//!   a repeat journals itself).

use super::model::RouteStatus;
use crate::journal::{Target, Verb};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub(crate) mod settle;

use super::Conductor;
use super::files;
use crate::journal::Act;
use crate::store::lock::FileLock;
use crate::store::time::{now_ts, parse_ts};
use crate::store::{HandoffId, Root, WorkflowId};

/// How to tell, after a crash, whether the act of an intent happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Check {
    /// The workflow's state records this ack id.
    Ack {
        /// The ack's id.
        ack_id: String,
        /// The handoff it acknowledges.
        handoff_id: String,
    },
    /// The workflow's state records this handoff.
    Submit {
        /// The workflow.
        workflow_id: String,
        /// The handoff.
        handoff_id: String,
    },
    /// The dispatch has at least this many deliveries, or lies in the dead letters.
    Delivery {
        /// The handoff.
        handoff_id: String,
        /// The delivery number the act made.
        delivery: usize,
    },
    /// The dispatch lies in the dead letters.
    Dead {
        /// The handoff.
        handoff_id: String,
    },
    /// The dispatch left the dead letters for an inbox (or was acked since).
    Requeue {
        /// The handoff.
        handoff_id: String,
    },
    /// The workflow's state records an operator's decision on this held dispatch (`approvals`).
    Held {
        /// The held dispatch's handoff.
        handoff_id: String,
    },
    /// `conductor/paused.json` holds (or ended) this pause.
    Pause {
        /// The pause's id.
        pause_id: String,
    },
    /// `conductor/paused.json` lists this pause as ended.
    Resume {
        /// The pause's id.
        pause_id: String,
    },
    /// The dead letter lies in `conductor/retired/`, stamped `retired_at` (one stamped but still in
    /// `conductor/dead/` is not: its move is finished first, or a repeat finishes and journals it).
    Retire {
        /// The dead letter's handoff.
        handoff_id: String,
        /// The stamp the retirement wrote.
        retired_at: String,
    },
    /// The workflow's state records the rerun's handoff and its dispatch exists.
    Rerun {
        /// The workflow.
        workflow_id: String,
        /// The handoff the rerun dispatched.
        handoff_id: String,
    },
}

/// An intent file as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IntentFile {
    key: String,
    at: String,
    pid: u32,
    actor: String,
    source: String,
    action: Verb,
    targets: Map<String, Value>,
    outcome: String,
    check: Check,
}

/// An intent written before an act.
#[derive(Debug)]
pub(crate) struct Intent {
    key: String,
    path: PathBuf,
    /// An intent of this key was already there (a crashed earlier attempt) and no entry names it.
    pub(crate) unjournaled_before: bool,
    /// An intent of this key was already there, written by an attempt still running (a concurrent
    /// repeat of the same act): that attempt journals the act if it is the one that did it.
    pub(crate) other_running: bool,
    /// This intent created `conductor/journal-intents/` (a refusal removes it again: it writes nothing).
    made_dir: bool,
}

/// `conductor/journal-intents/`.
pub(crate) fn intents_dir(root: &Root) -> PathBuf {
    root.conductor.join("journal-intents")
}

/// The acts an intent may name: an intent file is read as hostile input, and names no other.
fn action_word(a: &Verb) -> Option<Verb> {
    [
        Verb::Submit,
        Verb::Ack,
        Verb::Redeliver,
        Verb::DeadLetter,
        Verb::Requeue,
        Verb::Rerun,
        Verb::Approve,
        Verb::Reject,
        Verb::Pause,
        Verb::Resume,
        Verb::DeadRetire,
    ]
    .into_iter()
    .find(|w| w == a)
}

/// Whether any journal entry in the current journal file or the last segment names intent `key`.
fn journal_names(root: &Root, key: &str) -> bool {
    let needle = format!("\"intent\":{}", json!(key));
    let mut files = vec![crate::journal::journal_path(root)];
    files.extend(crate::journal::segments(root).pop());
    files.iter().any(|p| {
        use std::io::{BufRead, Read};
        let Ok(f) = crate::journal::open_read(p) else {
            return false;
        };
        std::io::BufReader::new(f.take(crate::journal::DEFAULT_SEGMENT_BYTES * 9))
            .split(b'\n')
            .map_while(|l| l.ok())
            .any(|l| String::from_utf8_lossy(&l).contains(&needle))
    })
}

/// Writes an intent through [`crate::store::safe`] (no link followed) atomically, without fsync: it
/// guards against a killed process, whose writes the kernel keeps, and a kill mid-write leaves no
/// intent or a whole one, never a torn file; after a power loss the journal's own fsync-free append
/// is no more durable than the intent.
fn write_intent(root: &Root, path: &std::path::Path, f: &IntentFile) -> crate::error::Result<()> {
    let bytes = crate::store::atomic::to_pretty_json(f);
    let (dir, name) =
        crate::store::safe::SafeDir::parent_of(root, path, true)?.ok_or_else(|| {
            crate::error::Error::refused(format!("{} has no parent directory", path.display()))
        })?;
    dir.replace_volatile(&name, &bytes)
}

/// Removes an intent (no fsync, see [`write_intent`]).
fn remove_intent(root: &Root, path: &std::path::Path) -> crate::error::Result<bool> {
    let Some((dir, name)) = crate::store::safe::SafeDir::parent_of(root, path, false)? else {
        return Ok(false);
    };
    dir.remove_file(&name)
}

/// Whether process `pid` is running: it exists and is not a zombie (a killed process its parent has
/// not reaped yet still has its `/proc` entry, and its intent must be settled as a crashed one's).
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let dir = std::path::Path::new("/proc").join(pid.to_string());
    match std::fs::read_to_string(dir.join("stat")) {
        // `pid (comm) S …`: the state follows the last `)` (comm may hold spaces and parentheses).
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|state| state != 'Z' && state != 'X'),
        Err(_) => dir.exists(),
    }
}

/// Whether the process that wrote an intent may still be running it: its pid is alive and the intent
/// is under 10 minutes old.
fn writer_running(f: &IntentFile) -> bool {
    let old =
        parse_ts(&f.at).is_some_and(|t| chrono::Utc::now() - t > chrono::Duration::minutes(10));
    pid_alive(f.pid) && !old
}

impl Conductor {
    /// Writes the intent `key` before an act (a failure to write it never stops the act: `None`).
    pub(crate) fn intend(&self, key: &str, act: &Act, check: Check) -> Option<Intent> {
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return None;
        }
        let path = intents_dir(&self.root).join(format!("{key}.json"));
        // Looking at the intent and writing ours is one step under the journal's lock: two attempts
        // that both found no intent and wrote in turn each took the act for theirs alone.
        let _guard = FileLock::exclusive(&self.root, &crate::journal::lock_path(&self.root)).ok();
        // An intent already there is a crashed attempt's only when its writer is gone: a concurrent
        // repeat still running journals its own act (two processes acking at once each journaled the
        // ack as the original: one act, two entries).
        let there = path.exists();
        let other_running = there
            && files::read_model::<IntentFile>(&path)
                .ok()
                .flatten()
                .is_some_and(|f| writer_running(&f));
        // A crashed attempt's intent is settled by this repeat only when the journal records neither
        // the intent nor the act (a planted intent for an act journaled long ago would otherwise
        // make the repeat journal it a second time).
        let unjournaled_before = there && !other_running && !journal_names(&self.root, key) && {
            let mut wanted = settle::Wanted::default();
            wanted.add(key, &check);
            !settle::Facts::scan(&self.root, &wanted).records(key, &check)
        };
        let origin = self.origin();
        let f = IntentFile {
            key: key.to_owned(),
            at: now_ts(),
            pid: std::process::id(),
            actor: origin.actor.clone(),
            source: origin.source.clone(),
            action: act.action.clone(),
            targets: act.targets.clone(),
            outcome: act.outcome.clone(),
            check,
        };
        let made_dir = !intents_dir(&self.root).is_dir();
        crate::store::atomic::ensure_dir(&self.root, &intents_dir(&self.root)).ok()?;
        write_intent(&self.root, &path, &f).ok()?;
        Some(Intent {
            key: key.to_owned(),
            path,
            unjournaled_before,
            other_running,
            made_dir,
        })
    }

    /// Removes the intent of an act that was refused (changing nothing), unless it was left by an
    /// earlier attempt that still needs settling, or another attempt of the act may have done it and
    /// not journaled it yet (see [`Self::release`]).
    pub(crate) fn drop_intent(&self, intent: Option<Intent>) {
        if let Some(i) = intent
            && !i.unjournaled_before
            && self.release(&i)
            && i.made_dir
        {
            // Only an empty directory is removed (another writer's intent keeps it).
            crate::store::safe::forget_walks();
            let _ = std::fs::remove_dir(intents_dir(&self.root));
        }
    }

    /// Removes the intent for an attempt that did not do the act (a refusal, a duplicate), when it may:
    /// when an entry names it (the act is journaled), or when no other attempt of the act was running
    /// as this one started nor wrote the intent since (the file still holds this process's pid).
    /// Otherwise the attempt that did the act may have been killed before its entry, and the intent
    /// stays for that act's repeat or the supervisor's next pass. Looked at and removed under the
    /// journal's lock, as [`Self::intend`] writes it. Whether it was removed.
    fn release(&self, i: &Intent) -> bool {
        let _guard = FileLock::exclusive(&self.root, &crate::journal::lock_path(&self.root)).ok();
        // The cheap test first: the journal is scanned only when another attempt was seen.
        let may = (!i.other_running
            && files::read_model::<IntentFile>(&i.path)
                .ok()
                .flatten()
                .is_some_and(|f| f.pid == std::process::id()))
            || journal_names(&self.root, &i.key);
        may && remove_intent(&self.root, &i.path).is_ok()
    }

    /// The intent `key` if its file is there (the supervisor's acts write it under the lock).
    pub(crate) fn intent_of(&self, key: &str) -> Option<Intent> {
        let path = intents_dir(&self.root).join(format!("{key}.json"));
        path.exists().then(|| Intent {
            key: key.to_owned(),
            path,
            unjournaled_before: false,
            other_running: false,
            made_dir: false,
        })
    }

    /// The key of the intent file whose name starts with `prefix`, if there is one (an act whose
    /// key cannot be rebuilt on its repeat finds the intent of its killed first attempt this way).
    pub(crate) fn intent_key_with_prefix(&self, prefix: &str) -> Option<String> {
        std::fs::read_dir(intents_dir(&self.root))
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter_map(|n| n.strip_suffix(".json").map(str::to_owned))
            .find(|k| k.starts_with(prefix))
    }

    /// Journals `act` for `intent` (naming it) and removes the intent; a warning when it cannot.
    pub(crate) fn journal_intent(&self, intent: Option<Intent>, mut act: Act) -> Option<String> {
        super::crash_point(&format!("journal:before-append:{}", act.action));
        let Some(intent) = intent else {
            return self.journal(&act);
        };
        act.set_target(Target::Intent, json!(intent.key));
        let warning = self.journal(&act);
        if warning.is_none() {
            let _ = remove_intent(&self.root, &intent.path);
        }
        warning
    }

    /// Journals `act`, the answer to a repeat that found the act already done (a duplicate), for
    /// `intent`. The entry does not name the intent (it is not the act's entry), and the intent is
    /// removed only when [`Self::release`] may: the attempt that did the act journals it and
    /// removes the intent, or, if it was killed first, its repeat or the supervisor's next pass does.
    /// (Two processes sending one ack at once, the first killed before its entry: the second's
    /// duplicate entry named the intent and removed it, and the ack was never journaled.)
    pub(crate) fn journal_duplicate(&self, intent: Option<Intent>, act: Act) -> Option<String> {
        let warning = self.journal(&act);
        if let Some(i) = intent {
            self.release(&i);
        }
        warning
    }

    /// The outcome a submit had, from the state's record of it (`None`: not recorded).
    pub(crate) fn submit_outcome(&self, wf: &WorkflowId, handoff_id: &str) -> Option<String> {
        let st = files::require_state(&self.root, wf).ok()?;
        let rec = st.record_of(handoff_id)?;
        Some(
            rec.routed
                .as_ref()
                .map(|r| r.status.to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| RouteStatus::Recorded.to_string()),
        )
    }

    /// The handoff a `completed` ack recorded on the god's behalf, from the state's record of the ack.
    pub(crate) fn recorded_handoff(&self, wf: &WorkflowId, ack_id: &str) -> Option<String> {
        let st = files::require_state(&self.root, wf).ok()?;
        st.acks
            .iter()
            .find(|a| a.ack_id == ack_id)?
            .recorded_handoff_id
            .clone()
    }

    /// A step-timeout redelivery or dead letter killed between rewriting the archived dispatch of
    /// `hid` and moving it out (`pred` tells the rewrite): the act is done, the next timer pass
    /// finishes the move (conductor/timers.rs).
    fn archived_halfway(
        &self,
        hid: &HandoffId,
        pred: impl Fn(&super::model::Dispatch) -> bool,
    ) -> bool {
        files::god_dirs(&self.root.archive_root())
            .iter()
            .filter_map(|g| files::in_archive(&self.root, g, hid).ok().flatten())
            .any(|f| pred(&f.dispatch))
    }

    /// Whether a dispatch of `hid` lies in an inbox or in the archive.
    fn dispatched(&self, hid: &HandoffId) -> bool {
        files::find_anywhere(&self.root, hid)
            .ok()
            .flatten()
            .is_some()
    }

    /// The entry of a submit, an ack or a decision on a held dispatch that a killed attempt did, from
    /// the state's record of it (the intent holds only the ids a submit was given): the intent holds the words of whichever attempt wrote it last, perhaps
    /// one that was then refused (a killed `accepted` was journaled as the refused `rejected` of the
    /// same ack id).
    fn recorded_act(&self, check: &Check) -> Option<Act> {
        match check {
            Check::Submit {
                workflow_id,
                handoff_id,
            } => {
                let wf = WorkflowId::parse(workflow_id).ok()?;
                let st = files::require_state(&self.root, &wf).ok()?;
                let routed = st.record_of(handoff_id)?.routed.clone().unwrap_or_default();
                let outcome = self.submit_outcome(&wf, handoff_id)?;
                Some(
                    Act::new(Verb::Submit, outcome)
                        .workflow(workflow_id)
                        .handoff(handoff_id)
                        .target(Target::ToGod, routed.target_god.as_ref())
                        .target(Target::Step, routed.target_step.as_ref()),
                )
            }
            Check::Ack { ack_id, handoff_id } => {
                let st = self.state_of_handoff(handoff_id)?;
                let a = st.acks.iter().find(|a| a.ack_id == *ack_id)?;
                Some(
                    Act::new(Verb::Ack, a.status.to_string())
                        .workflow(&st.workflow_id)
                        .handoff(&a.handoff_id)
                        .target(Target::AckId, Some(&a.ack_id))
                        .target(Target::God, a.god.as_ref())
                        .target(Target::By, a.by.as_ref().or(a.god.as_ref()))
                        .target(Target::ReroutedTo, a.rerouted_to.as_ref())
                        .target(Target::NextHandoffId, a.recorded_handoff_id.as_ref()),
                )
            }
            Check::Held { handoff_id } => {
                let st = self.state_of_handoff(handoff_id)?;
                let p = super::ack::approvals(&st)
                    .into_iter()
                    .find(|a| a.get("handoff_id").and_then(Value::as_str) == Some(handoff_id))?;
                let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
                let decision = text("decision")?;
                let action = if decision == "rejected" {
                    Verb::Reject
                } else {
                    Verb::Approve
                };
                Some(
                    Act::new(action, decision)
                        .workflow(&st.workflow_id)
                        .handoff(handoff_id)
                        .target(Target::ToGod, text("target_god"))
                        .target(Target::Step, text("step"))
                        .reason(text("reason").as_deref()),
                )
            }
            Check::Retire {
                handoff_id,
                retired_at,
            } => {
                let r = super::retire::list_retired(&self.root)
                    .dead
                    .into_iter()
                    .find(|r| {
                        r.dispatch.handoff_id == *handoff_id
                            && r.dispatch.retired_at.as_deref() == Some(retired_at.as_str())
                    })?;
                let stamp = super::retire::RetireStamp::of(&r, "", None);
                Some(super::retire::retire_act(
                    &stamp.planned(&r, r.path.display().to_string()),
                ))
            }
            _ => None,
        }
    }

    /// The state of the workflow a dispatch of `handoff_id` belongs to (found in an inbox,
    /// `_quarantine`, the archive or the dead letters).
    fn state_of_handoff(&self, handoff_id: &str) -> Option<super::model::WorkflowState> {
        let hid = HandoffId::parse(handoff_id).ok()?;
        let found = files::find_anywhere(&self.root, &hid)
            .ok()
            .flatten()
            .map(|f| f.dispatch)
            .or_else(|| self.find_dead(&hid).map(|d| d.dispatch))?;
        let wf = WorkflowId::parse(&found.workflow_id).ok()?;
        files::require_state(&self.root, &wf).ok()
    }

    fn intent_done(&self, check: &Check) -> bool {
        match check {
            Check::Pause { pause_id } => super::pause::read_file(&self.root)
                .is_ok_and(|f| f.pauses.iter().chain(&f.ended).any(|p| p.id == *pause_id)),
            Check::Resume { pause_id } => super::pause::read_file(&self.root)
                .is_ok_and(|f| f.ended.iter().any(|p| p.id == *pause_id)),
            Check::Ack { ack_id, handoff_id } => self
                .state_of_handoff(handoff_id)
                .is_some_and(|st| st.acks.iter().any(|a| a.ack_id == *ack_id)),
            Check::Held { handoff_id } => self.state_of_handoff(handoff_id).is_some_and(|st| {
                super::ack::approvals(&st)
                    .iter()
                    .any(|a| a.get("handoff_id").and_then(Value::as_str) == Some(handoff_id))
            }),
            Check::Submit {
                workflow_id,
                handoff_id,
            } => WorkflowId::parse(workflow_id)
                .ok()
                .and_then(|wf| files::require_state(&self.root, &wf).ok())
                .is_some_and(|st| st.record_of(handoff_id).is_some()),
            Check::Delivery {
                handoff_id,
                delivery,
            } => {
                let Ok(hid) = HandoffId::parse(handoff_id) else {
                    return false;
                };
                let delivered = |d: &super::model::Dispatch| d.deliveries.len() >= *delivery;
                self.find_dead(&hid).is_some()
                    || files::find_live(&self.root, &hid, None)
                        .ok()
                        .flatten()
                        .is_some_and(|f| delivered(&f.dispatch))
                    // Redelivered, then acked and archived (or half-way through a step timeout's
                    // move out of the archive).
                    || self.archived_halfway(&hid, delivered)
            }
            // Marked dead but not moved yet (killed between the two writes) counts as done: the
            // pass that finishes the move does not journal it (a dead letter went unjournaled).
            Check::Dead { handoff_id } => HandoffId::parse(handoff_id).ok().is_some_and(|hid| {
                self.find_dead(&hid).is_some()
                    || files::find_live(&self.root, &hid, None)
                        .ok()
                        .flatten()
                        .is_some_and(|f| f.dispatch.dead_at.is_some())
                    || self.archived_halfway(&hid, |d| d.dead_at.is_some())
            }),
            Check::Retire {
                handoff_id,
                retired_at,
            } => super::retire::list_retired(&self.root)
                .dead
                .iter()
                .any(|r| {
                    r.dispatch.handoff_id == *handoff_id
                        && r.dispatch.retired_at.as_deref() == Some(retired_at.as_str())
                }),
            Check::Requeue { handoff_id } => HandoffId::parse(handoff_id)
                .ok()
                .is_some_and(|hid| self.find_dead(&hid).is_none() && self.dispatched(&hid)),
            Check::Rerun {
                workflow_id,
                handoff_id,
            } => {
                let (Ok(wf), Ok(hid)) =
                    (WorkflowId::parse(workflow_id), HandoffId::parse(handoff_id))
                else {
                    return false;
                };
                files::require_state(&self.root, &wf)
                    .ok()
                    .is_some_and(|st| st.record_of(handoff_id).is_some())
                    && (self.dispatched(&hid) || self.find_dead(&hid).is_some())
            }
        }
    }
}
