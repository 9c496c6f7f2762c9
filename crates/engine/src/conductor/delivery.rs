//! Ack deadlines, redelivery and dead letters (docs/PROTOCOL.md §2.10): JetStream's delivery model
//! (AckWait, MaxDeliver, BackOff, progress acks, dead letters) on the Conductor's files.
//!
//! A dispatch whose step (or rule) has an `ack_wait` carries its policy and a `deliveries` list. The
//! supervisor ([`Conductor::tick`]) finds dispatches whose `ack_deadline` has passed and, under the
//! workflow's lock, either moves the one dispatch to its next target (the same god, then the step's
//! `fallback_gods` in order) or, after `max_deliveries`, moves it to `conductor/dead/{god}/`. Every
//! decision is a pure function of the dispatch and the time ([`decide`]); the file effects are
//! idempotent on the delivery number, so two supervisors, or one restarted after a crash, redeliver each
//! dispatch exactly once.

use crate::error::Refusal;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use super::Conductor;
use super::deadlines::{DeadlineIndex, Kind};
use super::files::{self, Found, Place};
use super::model::{AckStatus, Dispatch, WorkflowStatus, lenient};
use crate::error::{Error, Result};
use crate::store::atomic::{rename_durable, write_json};
use crate::store::lock::FileLock;
use crate::store::read::kind;
use crate::store::time::{add, format_ts, parse_duration, parse_ts};
use crate::store::{GodName, HandoffId, Root, Settings, TrackName, WorkflowId};

/// One delivery of a dispatch: when, and to whom.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// When the dispatch was (re)delivered.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub at: String,
    /// The god it was delivered to.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub to: String,
}

/// `deliveries` read leniently: a non-list is empty, unreadable items are skipped.
pub(crate) fn deliveries_de<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Delivery>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|i| serde_json::from_value(i).ok())
            .collect(),
        _ => Vec::new(),
    })
}

/// A count read leniently (a non-count is absent).
pub(crate) fn opt_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// The delivery settings a step or rule declares (each may be absent: the root's settings fill in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclaredPolicy {
    /// `ack_wait`: time to the first ack.
    pub ack_wait: Option<Duration>,
    /// `max_deliveries`: deliveries, the first included, before the dispatch is dead-lettered.
    pub max_deliveries: Option<u32>,
    /// `backoff`: the waits after the second, third, … delivery (the last one repeats).
    pub backoff: Vec<Duration>,
}

fn duration_value(what: &str, v: &Value) -> Result<Duration, Refusal> {
    let d = match v {
        Value::String(s) => parse_duration(s),
        Value::Number(n) => n.as_u64().map(Duration::from_secs),
        _ => None,
    };
    d.filter(|d| !d.is_zero()).ok_or_else(|| {
        Refusal::from(format!(
            "{what} {} is not a positive duration (e.g. 30s, 5m; at most 365d)",
            match v {
                Value::String(s) => format!("{s:?}"),
                other => kind(other).to_owned(),
            }
        ))
    })
}

impl DeclaredPolicy {
    /// Reads `ack_wait`, `max_deliveries` and `backoff` from a step (or a rule's `then`).
    pub(crate) fn from_map(m: &Map<String, Value>) -> Result<Self, Refusal> {
        let ack_wait = match m.get("ack_wait") {
            None | Some(Value::Null) => None,
            Some(v) => Some(duration_value("ack_wait", v)?),
        };
        let max_deliveries = match m.get("max_deliveries") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| (1..=crate::store::settings::MAX_MAX_DELIVERIES).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "max_deliveries must be a count from 1 to {}",
                            crate::store::settings::MAX_MAX_DELIVERIES
                        )
                    })?,
            ),
        };
        let backoff = match m.get("backoff") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= 100 => items
                .iter()
                .map(|i| duration_value("backoff entry", i))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("backoff must be a list of at most 100 durations".into()),
        };
        Ok(Self {
            ack_wait,
            max_deliveries,
            backoff,
        })
    }

    /// True when nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.ack_wait.is_none() && self.max_deliveries.is_none() && self.backoff.is_empty()
    }

    /// The policy in force with the root's `settings` filling in; `None` when no `ack_wait` applies
    /// (the dispatch has no deadline).
    pub fn resolve(&self, settings: &Settings) -> Option<Policy> {
        Some(Policy {
            ack_wait: self.ack_wait.or(settings.ack_wait)?,
            max_deliveries: self.max_deliveries.unwrap_or(settings.max_deliveries),
            backoff: self.backoff.clone(),
        })
    }
}

/// The delivery policy of one dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Time to the first ack.
    pub ack_wait: Duration,
    /// Deliveries, the first included, before the dispatch is dead-lettered.
    pub max_deliveries: u32,
    /// Waits after the second, third, … delivery; empty: `ack_wait` each time.
    pub backoff: Vec<Duration>,
}

fn duration_text(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}", d.as_secs_f64())
    }
}

fn parse_duration_text(s: &str) -> Option<Duration> {
    parse_duration(s).or_else(|| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0)
            .and_then(|f| Duration::try_from_secs_f64(f).ok())
            .filter(|d| *d <= crate::store::time::MAX_DURATION)
    })
}

impl Policy {
    /// How long delivery number `n` (1 = the first) waits for an ack.
    pub fn wait_for(&self, n: usize) -> Duration {
        if n <= 1 || self.backoff.is_empty() {
            return self.ack_wait;
        }
        let i = (n - 2).min(self.backoff.len() - 1);
        self.backoff.get(i).copied().unwrap_or(self.ack_wait)
    }

    /// The policy a dispatch carries, if it has one (`ack_wait` present and readable).
    pub(crate) fn of_dispatch(d: &Dispatch) -> Option<Self> {
        let ack_wait = parse_duration_text(d.ack_wait.as_deref()?)?;
        Some(Self {
            ack_wait,
            max_deliveries: d
                .max_deliveries
                .filter(|n| *n >= 1)
                .unwrap_or(crate::store::settings::DEFAULT_MAX_DELIVERIES),
            backoff: d
                .backoff
                .iter()
                .filter_map(|b| parse_duration_text(b))
                .collect(),
        })
    }

    /// Writes the policy (not the deliveries) into a dispatch.
    pub(crate) fn stamp_policy(&self, d: &mut Dispatch) {
        d.ack_wait = Some(duration_text(self.ack_wait));
        d.max_deliveries = Some(self.max_deliveries);
        d.backoff = self.backoff.iter().map(|b| duration_text(*b)).collect();
    }

    /// Writes the policy and the first delivery into a new dispatch.
    pub(crate) fn stamp(&self, d: &mut Dispatch, now: DateTime<Utc>) {
        d.ack_wait = Some(duration_text(self.ack_wait));
        d.max_deliveries = Some(self.max_deliveries);
        d.backoff = self.backoff.iter().map(|b| duration_text(*b)).collect();
        d.deliveries = vec![Delivery {
            at: format_ts(now),
            to: d.to_god.clone(),
        }];
        d.ack_deadline = add(now, self.ack_wait).map(format_ts);
    }
}

/// What is due for one open dispatch at a given time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Due {
    /// Nothing yet; the deadline, if it has one.
    NotYet(Option<DateTime<Utc>>),
    /// Deliver it again, as delivery number `n`, to `to`, with the next deadline.
    Redeliver {
        /// The delivery number this redelivery makes.
        n: usize,
        /// The god it goes to.
        to: String,
        /// When this delivery's ack is due.
        deadline: Option<DateTime<Utc>>,
    },
    /// Its `max_deliveries` are used up: move it to the dead letters.
    DeadLetter {
        /// Why, for the workflow's `failure_reason`.
        reason: String,
    },
}

/// The god delivery number `n` goes to: the first target for deliveries 1 and 2, then the step's
/// `fallback_gods` in order (the last one keeps it once they are used up).
pub(crate) fn target_of(first: &str, fallbacks: &[String], n: usize) -> String {
    let mut targets: Vec<&str> = vec![first];
    targets.extend(fallbacks.iter().map(String::as_str).filter(|g| *g != first));
    let i = n.saturating_sub(2).min(targets.len() - 1);
    targets.get(i).copied().unwrap_or(first).to_owned()
}

/// Decides what is due for dispatch `d` at `now` (pure; the step's `fallback_gods` given).
pub(crate) fn decide(d: &Dispatch, fallbacks: &[String], now: DateTime<Utc>) -> Due {
    let Some(policy) = Policy::of_dispatch(d) else {
        return Due::NotYet(None);
    };
    if !matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending) {
        return Due::NotYet(None);
    }
    let Some(deadline) = d.ack_deadline.as_deref().and_then(parse_ts) else {
        return Due::NotYet(None);
    };
    if deadline > now {
        return Due::NotYet(Some(deadline));
    }
    let n = d.deliveries.len().max(1);
    if n >= policy.max_deliveries as usize {
        return Due::DeadLetter {
            reason: format!(
                "handoff {} to {} was not acknowledged after {n} deliver{} (max_deliveries {})",
                d.handoff_id,
                d.to_god,
                if n == 1 { "y" } else { "ies" },
                policy.max_deliveries
            ),
        };
    }
    let first = d
        .deliveries
        .first()
        .map(|x| x.to.as_str())
        .unwrap_or(d.to_god.as_str());
    let next = n + 1;
    Due::Redeliver {
        n: next,
        to: target_of(first, fallbacks, next),
        deadline: add(now, policy.wait_for(next)),
    }
}

/// Why an open dispatch's deadline can never fire, if it cannot: an `ack_wait` that is not a duration of
/// at most 365 days (`"-1s"`), an `ack_deadline` that is not a time (`"not a time"`,
/// `"+10000-01-01T00:00:00Z"`, `9999`), or one more than 365 days after `now` (the engine never sets one
/// that far: an ack's wait and a `pending` ETA are both at most 365 days). Such a dispatch is never
/// redelivered; `tick` and `validate` name it. Dispatches without a delivery policy, and acked ones, have
/// no deadline to fire and are never named.
pub(crate) fn never_due(d: &Dispatch, now: DateTime<Utc>) -> Option<String> {
    if (d.deliveries.is_empty() && d.ack_wait.is_none())
        || d.dead_at.is_some()
        || !matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending)
    {
        return None;
    }
    let shown = |s: &str| s.chars().take(60).collect::<String>();
    match d.ack_wait.as_deref() {
        Some(w) if parse_duration_text(w).is_none() => {
            return Some(format!(
                "`ack_wait` {:?} is not a duration of at most 365d, so it is never redelivered",
                shown(w)
            ));
        }
        _ => {}
    }
    let limit = add(now, crate::store::time::MAX_DURATION);
    // No deadline at all is a dispatch held for approval (its wait starts when it is approved).
    match d.ack_deadline.as_deref() {
        None => None,
        Some(t) => match parse_ts(t) {
            None => Some(format!(
                "`ack_deadline` {:?} is not a time, so it never fires",
                shown(t)
            )),
            Some(at) if limit.is_some_and(|l| at > l) => Some(format!(
                "`ack_deadline` {t} is more than 365d ahead (the engine never sets one that far), so it \
                 cannot fire in time"
            )),
            Some(_) => None,
        },
    }
}

/// The deadline after an ack: `pending` with a readable future ETA moves it to the ETA, `pending`
/// without one restarts the current wait (a progress ack); other statuses end it.
pub(crate) fn deadline_after_ack(
    d: &Dispatch,
    status: &AckStatus,
    eta: Option<&str>,
    now: DateTime<Utc>,
) -> Option<String> {
    let policy = Policy::of_dispatch(d)?;
    if *status != AckStatus::Pending {
        return None;
    }
    let eta = eta.and_then(parse_ts).filter(|t| *t > now);
    let at = match eta {
        Some(t) => Some(t),
        None => add(now, policy.wait_for(d.deliveries.len().max(1))),
    };
    at.map(format_ts)
}

/// How long a dispatch that could not be handled waits before the supervisor tries it again.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What one pass of the supervisor did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TickReport {
    /// When the pass ran.
    pub now: String,
    /// Open dispatches with a deadline and step timers the supervisor watches.
    pub watched: usize,
    /// Dispatches moved to their next delivery.
    pub redelivered: Vec<DeliveryAct>,
    /// Dispatches moved to the dead letters.
    pub dead_lettered: Vec<DeliveryAct>,
    /// Half-done moves a crash left behind, finished.
    pub repaired: usize,
    /// Acts a crashed process did without journaling them, journaled now (docs/PROTOCOL.md §2.8).
    pub journaled_late: usize,
    /// The earliest deadline still ahead, if any.
    pub next_deadline: Option<String>,
    /// Dispatches or workflows that could not be handled this pass (the next pass retries).
    pub errors: Vec<String>,
    /// Open dispatches whose deadline can never fire (a file written by others), as `path: why`; they are
    /// left as they are, for an operator to look at.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub never_due: Vec<String>,
    /// Intents dropped without a journal entry, and why (planted, or their act already journaled).
    pub warnings: Vec<String>,
    /// Temporary files that writers killed in the middle of a write left in the root's `.tmp/`,
    /// removed (an hour or more old; `pantheon tick` only: `serve` sweeps on its own clock).
    #[serde(skip_serializing_if = "is_zero")]
    pub temps_removed: usize,
    /// Due dispatches and step timers left as they are because a pause freezes them
    /// (docs/PROTOCOL.md §2.14).
    #[serde(skip_serializing_if = "is_zero")]
    pub paused: usize,
    /// Pauses whose `--until` passed, ended by this pass (their ids).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One redelivery or dead letter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveryAct {
    /// The dispatch's handoff.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The god it left.
    pub from_god: String,
    /// The god it went to (redelivery) or whose dead letters hold it.
    pub to_god: String,
    /// The delivery number (redelivery) or the deliveries used (dead letter).
    pub delivery: usize,
    /// The new deadline (redelivery).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Where the dispatch is now.
    pub path: String,
}

/// `requeue`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequeueResult {
    /// `requeued`.
    pub status: String,
    /// The handoff.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The god it was delivered to.
    pub to_god: String,
    /// Where the dispatch is now.
    pub dispatch_path: String,
    /// Its new deadline, if it has an `ack_wait`.
    pub ack_deadline: Option<String>,
}

/// One dead letter, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The god whose dead letters hold it.
    pub god: String,
    /// Its file.
    pub path: PathBuf,
    /// The dispatch, with `deliveries`, `dead_at` and `dead_reason`.
    pub dispatch: Dispatch,
}

/// `dead`'s result: every dead letter, oldest first, and the files that could not be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetters {
    /// The dead letters.
    pub dead: Vec<DeadLetter>,
    /// Unreadable files.
    pub errors: Vec<files::FileError>,
}

/// Every dead letter of the root.
pub fn list_dead(root: &Root) -> DeadLetters {
    let mut out = read_letters(&root.dead_root(), |g| root.dead_dir(g));
    out.dead.sort_by(|a, b| {
        dead_at(&a.dispatch)
            .cmp(&dead_at(&b.dispatch))
            .then(a.path.cmp(&b.path))
    });
    out
}

/// The dispatches of every god's directory under `top` (`dir` names a god's), unsorted, and the
/// files that could not be read: the live dead letters, or the retired ones.
pub(crate) fn read_letters(
    top: &std::path::Path,
    dir: impl Fn(&crate::store::GodName) -> PathBuf,
) -> DeadLetters {
    let mut out = DeadLetters {
        dead: Vec::new(),
        errors: Vec::new(),
    };
    for god in files::god_dirs(top) {
        let (dispatches, errors) = files::read_dispatch_dir(&dir(&god));
        for (path, d) in dispatches {
            out.dead.push(DeadLetter {
                god: god.to_string(),
                path,
                dispatch: d,
            });
        }
        out.errors.extend(errors);
    }
    out
}

fn dead_at(d: &Dispatch) -> String {
    d.dead_at.clone().unwrap_or_default()
}

/// What [`Conductor::dead_letter`] needs: the dispatch and where it lies, whose it is, and why.
pub(crate) struct DeadLetterInput<'a> {
    /// Where the dispatch lies now (an inbox, or the archive for an accepted step).
    pub path: &'a std::path::Path,
    /// The dispatch as it is to be kept in the dead letters (stamped here with `dead_at`).
    pub dispatch: Dispatch,
    /// Its workflow.
    pub wf: &'a WorkflowId,
    /// Its handoff.
    pub hid: &'a HandoffId,
    /// The god whose dead letters receive it.
    pub god: &'a GodName,
    /// Why it is dead-lettered (`dead_reason`, and the workflow's `failure_reason`).
    pub reason: String,
    /// When.
    pub now: DateTime<Utc>,
    /// When the workflow is marked `stalled`.
    pub stall: StallWhen,
    /// The crash points after the state is written and after the dispatch is rewritten (tests kill
    /// the process there).
    pub crash_points: (&'static str, &'static str),
}

/// When a dead letter marks its workflow `stalled`.
pub(crate) enum StallWhen {
    /// Always: the caller checked the workflow waits on this dispatch.
    Always,
    /// When the workflow's current step is this dispatch's, addressed to its god, and the workflow
    /// is not finished.
    CurrentAndOpen,
}

impl Conductor {
    /// The `fallback_gods` of the step a dispatch is for (none when its definition is gone).
    pub(crate) fn step_fallbacks(&self, d: &Dispatch) -> Vec<String> {
        let def_id = d
            .routing
            .as_ref()
            .and_then(|r| r.workflow_definition.clone());
        let Some(def_id) = def_id else {
            return Vec::new();
        };
        match super::definition::find_definition(&self.root, &def_id) {
            Ok(Some(def)) => def
                .step(&d.step)
                .map(|s| s.fallback_gods.clone())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// One pass of the supervisor at `now`: finishes half-done moves, redelivers every dispatch whose
    /// ack deadline (or accepted step's timeout) has passed and dead-letters those out of deliveries.
    /// Each act is journaled.
    pub fn tick(&self, now: DateTime<Utc>) -> TickReport {
        let mut report = self.tick_index(&mut DeadlineIndex::build(&self.root), now);
        report.temps_removed = self.sweep_temps();
        report
    }

    /// Removes the temporary files writers killed in the middle of a write left in the root's
    /// `.tmp/` (an hour or more old); returns how many.
    pub fn sweep_temps(&self) -> usize {
        crate::store::safe::sweep_temps(&self.root, std::time::SystemTime::now())
    }

    /// [`Conductor::tick`] for a long-running supervisor: acts on the entries of `index` that are
    /// due at `now` only (reading each file again under its workflow's lock), then puts every file it
    /// touched back into the index with its new due time.
    pub fn tick_index(&self, index: &mut DeadlineIndex, now: DateTime<Utc>) -> TickReport {
        let mut report = TickReport {
            now: format_ts(now),
            ..Default::default()
        };
        let mut next: Option<DateTime<Utc>> = None;
        let repair = self.repair_intents();
        report.journaled_late = repair.journaled;
        report.warnings = repair.dropped;
        let pauses = self.pauses_for_pass(now, &mut report);
        // A pause whose resume failed is tried again a little later, never in a tight loop.
        index.pause_due = pauses
            .as_ref()
            .and_then(super::pause::Pauses::next_until)
            .map(|t| {
                if t > now {
                    t
                } else {
                    add(now, RETRY_AFTER).unwrap_or(t)
                }
            });
        for (path, kind) in index.take_due(now) {
            if let Some(until) = self.frozen_until(&path, kind, pauses.as_ref(), now) {
                // Frozen: looked at again when the pause ends (a change of paused.json makes
                // `serve` rebuild its index; `tick` builds it anew each time).
                report.paused += 1;
                index.park(&path, until, kind);
                continue;
            }
            let touched = match kind {
                Kind::Timer => self.handle_timer(&path, now, &mut report, &mut next),
                Kind::Dispatch => self.handle_dispatch(&path, now, &mut report, &mut next),
            };
            index.refresh(&self.root, &path);
            if let Some(t) = touched {
                index.refresh(&self.root, &t);
            }
            // Still due after the pass (an error, or a half-done move that could not be finished):
            // retried a little later, never in a tight loop.
            index.postpone_if_due(&path, now, RETRY_AFTER);
        }
        report.watched = index.len();
        report.never_due = index
            .never_due
            .iter()
            .map(|(p, why)| format!("{}: {why}", p.display()))
            .collect();
        let ahead = index.next_due();
        next = match (next, ahead) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        report.next_deadline = next.map(format_ts);
        report
    }

    /// Writes the intent of a redelivery or dead letter before its first write (under the workflow's
    /// lock), so a crash before its journal entry is journaled by the next pass.
    pub(crate) fn intend_delivery(
        &self,
        workflow_id: &str,
        handoff_id: &str,
        from: &str,
        to: &str,
        delivery: usize,
        dead: bool,
    ) {
        let act = DeliveryAct {
            handoff_id: handoff_id.to_owned(),
            workflow_id: workflow_id.to_owned(),
            from_god: from.to_owned(),
            to_god: to.to_owned(),
            delivery,
            deadline: None,
            path: String::new(),
        };
        let check = if dead {
            super::intents::Check::Dead {
                handoff_id: handoff_id.to_owned(),
            }
        } else {
            super::intents::Check::Delivery {
                handoff_id: handoff_id.to_owned(),
                delivery,
            }
        };
        self.intend(
            &delivery_intent_key(&act, dead),
            &delivery_act(&act, dead),
            check,
        );
    }

    fn record_act(
        &self,
        act: DeliveryAct,
        dead: bool,
        report: &mut TickReport,
        next: &mut Option<DateTime<Utc>>,
    ) -> PathBuf {
        let journal_act = delivery_act(&act, dead);
        let intent = self.intent_of(&delivery_intent_key(&act, dead));
        self.journal_intent(intent, journal_act);
        let path = PathBuf::from(&act.path);
        if dead {
            self.post_dead_event(&act);
            report.dead_lettered.push(act);
        } else {
            if let Some(t) = act.deadline.as_deref().and_then(parse_ts) {
                *next = Some(next.map_or(t, |n| n.min(t)));
            }
            report.redelivered.push(act);
        }
        path
    }

    /// One due step timer (docs/PROTOCOL.md §2.10); returns the path it moved a dispatch to.
    fn handle_timer(
        &self,
        path: &std::path::Path,
        now: DateTime<Utc>,
        report: &mut TickReport,
        next: &mut Option<DateTime<Utc>>,
    ) -> Option<PathBuf> {
        match self.fire_step_timer(path, now, next, &mut report.repaired) {
            Ok(Some((act, dead))) => Some(self.record_act(act, dead, report, next)),
            Ok(None) => None,
            Err(e) => {
                report.errors.push(format!("{}: {e}", path.display()));
                None
            }
        }
    }

    /// One due inbox dispatch; returns the path it moved to.
    fn handle_dispatch(
        &self,
        path: &std::path::Path,
        now: DateTime<Utc>,
        report: &mut TickReport,
        next: &mut Option<DateTime<Utc>>,
    ) -> Option<PathBuf> {
        let god = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|g| g.to_string_lossy().into_owned())
            .unwrap_or_default();
        let d = files::read_model::<Dispatch>(path).ok().flatten()?;
        if d.deliveries.is_empty() && d.ack_wait.is_none() {
            return None;
        }
        let mut err = |e: Error| report.errors.push(format!("{}: {e}", path.display()));
        if d.dead_at.is_some() {
            match self.finish_dead(&d, path) {
                Ok(true) => report.repaired += 1,
                Ok(false) => {}
                Err(e) => err(e),
            }
            return None;
        }
        if d.to_god != god {
            match self.finish_move(&d, path) {
                Ok(true) => report.repaired += 1,
                Ok(false) => {}
                Err(e) => err(e),
            }
            return GodName::parse(&d.to_god).ok().map(|g| {
                self.root
                    .inbox_dir(&g)
                    .join(path.file_name().unwrap_or_default())
            });
        }
        match decide(&d, &[], now) {
            Due::NotYet(_) => None,
            _ => match self.deliver_due(path, &d, now) {
                Ok(Some((act, dead))) => Some(self.record_act(act, dead, report, next)),
                Ok(None) => None,
                Err(e) => {
                    err(e);
                    None
                }
            },
        }
    }

    /// A dispatch rewritten for another god but not yet renamed into its inbox (a crash between the
    /// two steps of a redelivery): renamed now, under the workflow's lock.
    fn finish_move(&self, d: &Dispatch, path: &std::path::Path) -> Result<bool> {
        let wf = WorkflowId::parse(&d.workflow_id)?;
        let hid = HandoffId::parse(&d.handoff_id)?;
        let to = GodName::parse(&d.to_god)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let Some(again) = files::read_model::<Dispatch>(path).map_err(|e| Error::Corrupt {
            path: e.path,
            message: e.error,
        })?
        else {
            return Ok(false);
        };
        if again.to_god != d.to_god || !again.deliveries.iter().any(|x| x.to == to.as_str()) {
            return Ok(false);
        }
        let target = self.root.inbox_dir(&to).join(format!("{hid}.json"));
        rename_durable(&self.root, path, &target)?;
        Ok(true)
    }

    /// A dispatch marked dead but not yet renamed into the dead letters (a crash between the two
    /// steps): renamed now, under the workflow's lock.
    fn finish_dead(&self, d: &Dispatch, path: &std::path::Path) -> Result<bool> {
        let wf = WorkflowId::parse(&d.workflow_id)?;
        let hid = HandoffId::parse(&d.handoff_id)?;
        let god = GodName::parse(&d.to_god)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let still = files::read_model::<Dispatch>(path)
            .ok()
            .flatten()
            .is_some_and(|x| x.dead_at.is_some());
        if !still {
            return Ok(false);
        }
        let target = self.root.dead_dir(&god).join(format!("{hid}.json"));
        rename_durable(&self.root, path, &target)?;
        Ok(true)
    }

    /// Redelivers or dead-letters one due dispatch under its workflow's lock; `None` when another
    /// supervisor (or an ack) got there first. Idempotent on the delivery number.
    fn deliver_due(
        &self,
        path: &std::path::Path,
        seen: &Dispatch,
        now: DateTime<Utc>,
    ) -> Result<Option<(DeliveryAct, bool)>> {
        let wf = WorkflowId::parse(&seen.workflow_id)?;
        let hid = HandoffId::parse(&seen.handoff_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        // Re-read under the lock: only the delivery this pass saw is acted on.
        let Some(d) = files::read_model::<Dispatch>(path).map_err(|e| Error::Corrupt {
            path: e.path,
            message: e.error,
        })?
        else {
            return Ok(None);
        };
        if d.deliveries.len() != seen.deliveries.len() || d.to_god != seen.to_god {
            return Ok(None);
        }
        // A pause written since the pass looked freezes it now (an unreadable file: frozen too).
        if super::pause::Pauses::load(&self.root).map_or(true, |p| p.freezing(&d).is_some()) {
            return Ok(None);
        }
        let from = GodName::parse(&d.to_god)?;
        let fallbacks = self.step_fallbacks(&d);
        match decide(&d, &fallbacks, now) {
            Due::NotYet(_) => Ok(None),
            Due::Redeliver { n, to, deadline } => {
                let to_god = GodName::parse(&to)?;
                let target = self.root.inbox_dir(&to_god).join(format!("{hid}.json"));
                files::refuse_unconfined(&self.root, &[path.to_path_buf(), target.clone()])?;
                let mut st = files::require_state(&self.root, &wf)?;
                if super::hold::holds_step(&st, &d.step) {
                    // A held dispatch moved into an inbox by hand is never delivered.
                    return Err(super::hold::refusal(
                        &wf,
                        &st,
                        &format!("redelivering handoff {hid}"),
                        Some(hid.as_str()),
                        Some(path),
                    ));
                }
                self.intend_delivery(wf.as_str(), hid.as_str(), from.as_str(), &to, n, false);
                let current = st.dispatched_to.as_deref() == Some(from.as_str())
                    && st.current_step.as_deref() == Some(d.step.as_str());
                if current && to != from.as_str() {
                    st.dispatched_to = Some(to.clone());
                    st.updated = Some(format_ts(now));
                    files::write_state(&self.root, &wf, &st)?;
                    super::crash_point("redeliver:after-state");
                }
                let mut nd = d.clone();
                nd.to_god = to.clone();
                nd.deliveries.push(Delivery {
                    at: format_ts(now),
                    to: to.clone(),
                });
                nd.ack_deadline = deadline.map(format_ts);
                nd.dispatched_at = Some(format_ts(now));
                write_json(&self.root, path, &nd)?;
                super::crash_point("redeliver:after-rewrite");
                if target != path {
                    rename_durable(&self.root, path, &target)?;
                }
                Ok(Some((
                    DeliveryAct {
                        handoff_id: hid.to_string(),
                        workflow_id: wf.to_string(),
                        from_god: from.to_string(),
                        to_god: to,
                        delivery: n,
                        deadline: nd.ack_deadline.clone(),
                        path: target.display().to_string(),
                    },
                    false,
                )))
            }
            Due::DeadLetter { reason } => {
                let act = self.dead_letter(DeadLetterInput {
                    path,
                    dispatch: d,
                    wf: &wf,
                    hid: &hid,
                    god: &from,
                    reason,
                    now,
                    stall: StallWhen::CurrentAndOpen,
                    crash_points: ("dead:after-state", "dead:after-rewrite"),
                })?;
                Ok(Some((act, true)))
            }
        }
    }

    /// Dead-letters a dispatch (docs/PROTOCOL.md §2.10), the one way both an unacked dispatch out of
    /// deliveries and an accepted step out of time go: the intent first, then the workflow marked
    /// `stalled` (per `stall`), then the dispatch stamped `dead_at`/`dead_reason` where it lies, then
    /// renamed into its god's dead letters. Each step is repeatable: a pass killed between two finds
    /// the state or the stamp and finishes the move. The caller holds the workflow's lock.
    pub(crate) fn dead_letter(&self, input: DeadLetterInput<'_>) -> Result<DeliveryAct> {
        let DeadLetterInput {
            path,
            dispatch: mut nd,
            wf,
            hid,
            god,
            reason,
            now,
            stall,
            crash_points: (after_state, after_rewrite),
        } = input;
        let target = self.root.dead_dir(god).join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[path.to_path_buf(), target.clone()])?;
        let mut st = files::require_state(&self.root, wf)?;
        if super::hold::holds_step(&st, &nd.step) {
            // A held dispatch moved into an inbox by hand: a dead letter would stall the workflow
            // past the operator's hold.
            return Err(super::hold::refusal(
                wf,
                &st,
                &format!("dead-lettering handoff {hid}"),
                Some(hid.as_str()),
                Some(path),
            ));
        }
        let used = nd.deliveries.len();
        self.intend_delivery(
            wf.as_str(),
            hid.as_str(),
            god.as_str(),
            god.as_str(),
            used,
            true,
        );
        let stalls = match stall {
            StallWhen::Always => true,
            StallWhen::CurrentAndOpen => {
                st.dispatched_to.as_deref() == Some(god.as_str())
                    && st.current_step.as_deref() == Some(nd.step.as_str())
                    && !st.status.is_finished()
            }
        };
        if stalls {
            st.status = WorkflowStatus::Stalled;
            st.failure_reason = Some(reason.clone());
            st.updated = Some(format_ts(now));
            files::write_state(&self.root, wf, &st)?;
            super::crash_point(after_state);
        }
        nd.dead_at = Some(format_ts(now));
        nd.dead_reason = Some(reason);
        nd.ack_deadline = None;
        write_json(&self.root, path, &nd)?;
        super::crash_point(after_rewrite);
        rename_durable(&self.root, path, &target)?;
        Ok(DeliveryAct {
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            from_god: god.to_string(),
            to_god: god.to_string(),
            delivery: used,
            deadline: None,
            path: target.display().to_string(),
        })
    }

    /// Posts `DISPATCH_DEAD` on the bus of every initialised track (the supervisor's notice; a track
    /// that refuses it is skipped).
    fn post_dead_event(&self, act: &DeliveryAct) {
        let Ok(rd) = std::fs::read_dir(self.root.tracks_dir()) else {
            return;
        };
        for e in rd.flatten() {
            let Ok(name) = TrackName::parse(&e.file_name().to_string_lossy()) else {
                continue;
            };
            let Ok(bus) = crate::bus::Bus::open_existing(&self.root, &name) else {
                continue;
            };
            let Ok(kind) = crate::bus::MessageKind::parse("DISPATCH_DEAD") else {
                return;
            };
            let _ = bus.post(
                kind,
                "supervisor",
                json!({
                    "handoff_id": act.handoff_id,
                    "workflow_id": act.workflow_id,
                    "god": act.from_god,
                    "deliveries": act.delivery,
                    "dead_letter": act.path,
                }),
            );
        }
    }

    /// Finds a dead letter by handoff id (in any god's dead letters).
    pub(crate) fn find_dead(&self, hid: &HandoffId) -> Option<DeadLetter> {
        list_dead(&self.root)
            .dead
            .into_iter()
            .find(|x| x.dispatch.handoff_id == hid.as_str())
    }

    /// Puts a dead letter back into an inbox (its god's, or `to`), deliveries reset, the workflow
    /// `waiting_for_ack` again. Unjournaled; see [`Conductor::requeue`].
    pub(crate) fn requeue_unjournaled(
        &self,
        hid: &HandoffId,
        to: Option<&GodName>,
    ) -> Result<(RequeueResult, String)> {
        let missing = || self.no_dead_letter(hid);
        let found = self.find_dead(hid).ok_or_else(missing)?;
        let wf = WorkflowId::parse(&found.dispatch.workflow_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        // Found again under the lock: a requeue running at the same time may have taken it since
        // (both requeued it, journaling two requeues of one dead letter).
        let found = self
            .find_dead(hid)
            .filter(|f| f.dispatch.workflow_id == wf.as_str())
            .ok_or_else(missing)?;
        let mut st = files::require_state(&self.root, &wf)?;
        if st.status.is_finished() {
            return Err(Error::refused(format!(
                "workflow {wf} is {}; a dead letter of it cannot be requeued (pantheon rerun starts it again)",
                st.status
            )));
        }
        // A newer dispatch of the same step (a rerun's) already waits: a requeue would put a second
        // open dispatch of that step in an inbox, one that could never be acked.
        if let Some(newer) =
            self.open_dispatch_of_step(wf.as_str(), &found.dispatch.step, hid.as_str())
        {
            return Err(Error::refused(format!(
                "dead letter {hid} is superseded by {newer}, an open dispatch of step {} of {wf}; \
                 `pantheon dead discard {hid} --reason TEXT` retires it",
                found.dispatch.step
            )));
        }
        let god = match to {
            Some(g) => g.clone(),
            None => GodName::parse(&found.dispatch.to_god)?,
        };
        let target = self.root.inbox_dir(&god).join(format!("{hid}.json"));
        files::refuse_unconfined(&self.root, &[found.path.clone(), target.clone()])?;
        let now = Utc::now();
        // The intent, before the first write: a kill before the journal entry is journaled by the
        // next pass. A repeat of a requeue killed halfway takes over its first attempt's intent.
        let key = self
            .intent_key_with_prefix(&format!("requeue-{hid}-"))
            .unwrap_or_else(|| {
                let stamp: String = format_ts(now)
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect();
                format!("requeue-{hid}-{stamp}")
            });
        let result = RequeueResult {
            status: "requeued".into(),
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            to_god: god.to_string(),
            dispatch_path: target.display().to_string(),
            ack_deadline: None,
        };
        self.intend(
            &key,
            &requeue_act(&result),
            super::intents::Check::Requeue {
                handoff_id: hid.to_string(),
            },
        );
        let mut d = found.dispatch.clone();
        d.dead_at = None;
        d.dead_reason = None;
        d.to_god = god.to_string();
        d.ack_status = AckStatus::Unacked;
        d.dispatched_at = Some(format_ts(now));
        if let Some(p) = Policy::of_dispatch(&d) {
            p.stamp(&mut d, now);
        } else {
            d.deliveries.clear();
        }
        if st.current_step.as_deref() == Some(d.step.as_str()) {
            st.status = WorkflowStatus::WaitingForAck;
            st.dispatched_to = Some(god.to_string());
            st.failure_reason = None;
            st.updated = Some(format_ts(now));
            files::write_state(&self.root, &wf, &st)?;
            super::crash_point("requeue:after-state");
        }
        write_json(&self.root, &found.path, &d)?;
        super::crash_point("requeue:after-rewrite");
        rename_durable(&self.root, &found.path, &target)?;
        Ok((
            RequeueResult {
                ack_deadline: d.ack_deadline,
                ..result
            },
            key,
        ))
    }

    /// Puts a dead letter back (docs/PROTOCOL.md §2.10): an operator act, journaled.
    pub fn requeue(&self, handoff_id: &HandoffId, to: Option<&GodName>) -> Result<RequeueResult> {
        let (r, key) = self.requeue_unjournaled(handoff_id, to)?;
        let intent = self.intent_of(&key);
        self.journal_intent(intent, requeue_act(&r));
        Ok(r)
    }

    /// Whether `god` may ack the dispatch `found`: its addressee, or an earlier target while it is open.
    pub(crate) fn may_ack(found: &Found, god: &str) -> bool {
        found.dispatch.to_god == god
            || (matches!(found.place, Place::Inbox(_))
                && found.dispatch.deliveries.iter().any(|x| x.to == god))
    }
}

/// How often `pantheon serve` writes its heartbeat.
pub const SUPERVISOR_BEAT: Duration = Duration::from_secs(10);
/// A supervisor whose heartbeat is older than this is not alive.
pub const SUPERVISOR_DEAD_AFTER: Duration = Duration::from_secs(30);

/// The heartbeat file of supervisor `id` (`conductor/supervisor/{id}.json`).
fn heartbeat_path(root: &Root, id: &str) -> Result<PathBuf> {
    let id = GodName::parse_as("supervisor id", id)?;
    Ok(root.supervisor_dir().join(format!("{id}.json")))
}

/// Writes supervisor `id`'s heartbeat (pid, start, last beat, next deadline).
pub fn write_supervisor_heartbeat(
    root: &Root,
    id: &str,
    started: &str,
    next_deadline: Option<&str>,
) -> Result<PathBuf> {
    let path = heartbeat_path(root, id)?;
    write_json(
        root,
        &path,
        &json!({
            "supervisor": id, "pid": std::process::id(), "started": started,
            "last_beat": format_ts(Utc::now()), "next_deadline": next_deadline,
        }),
    )?;
    Ok(path)
}

/// Removes supervisor `id`'s heartbeat (a clean exit).
pub fn remove_supervisor_heartbeat(root: &Root, id: &str) -> Result<()> {
    files::remove_file(root, &heartbeat_path(root, id)?)
}

/// True when a supervisor whose last beat was `last_beat` is alive at `now`: it beat within
/// `SUPERVISOR_DEAD_AFTER`, and not further than that ahead of `now` either (a beat stamped in the
/// future, by a skewed clock or a planted file, would otherwise count as alive for years and hide that
/// no supervisor enforces the deadlines).
pub fn supervisor_alive(last_beat: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let limit = chrono::Duration::from_std(SUPERVISOR_DEAD_AFTER).unwrap_or_default();
    let age = now - last_beat;
    age <= limit && -age <= limit
}

/// The heartbeats of the supervisors alive at `now` (see [`supervisor_alive`]).
pub fn live_supervisors(root: &Root, now: DateTime<Utc>) -> Vec<Value> {
    let Ok(rd) = std::fs::read_dir(root.supervisor_dir()) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| crate::store::read::read_json(&e.path()).ok().flatten())
        .filter(|v| {
            v.get("last_beat")
                .and_then(Value::as_str)
                .and_then(parse_ts)
                .is_some_and(|t| supervisor_alive(t, now))
        })
        .collect()
}

/// How many open dispatches have an ack deadline, when no supervisor is alive to enforce it (`None`
/// when one is alive or nothing has a deadline).
pub(crate) fn unsupervised_deadlines(root: &Root, now: DateTime<Utc>) -> Option<usize> {
    let mut n = 0;
    for god in files::god_dirs(&root.pending_root()) {
        n += files::read_dispatch_dir(&root.inbox_dir(&god))
            .0
            .iter()
            .filter(|(_, d)| {
                d.ack_deadline.is_some()
                    && matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending)
            })
            .count();
    }
    (n > 0 && live_supervisors(root, now).is_empty()).then_some(n)
}

#[path = "delivery_acts.rs"]
mod acts;
use acts::{delivery_act, delivery_intent_key, requeue_act};

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
