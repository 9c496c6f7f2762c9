//! Pauses (docs/PROTOCOL.md §2.14): what an operator froze, in `conductor/paused.json`, and what a
//! pause means for routing, the supervisor and the bus.
//!
//! The file is written whole by rename under `conductor/.paused.lock`; every reader takes it as
//! hostile input (opened without following a link, at most [`MAX_PAUSED_BYTES`], every entry checked).
//! A pause of a god or a workflow holds the dispatches routed to it in `_quarantine`
//! (`held_because: "paused: god G"`, the workflow `awaiting_approval`, as any hold) and freezes the ack
//! deadlines of the dispatches already in its inboxes: the supervisor neither redelivers nor
//! dead-letters them, and the resume shifts each deadline by the time it was frozen (recorded in the
//! dispatch's `frozen`, so a repeated resume never shifts twice), then releases the held dispatches
//! in the order they were held. The resume marks the entry `resuming_at` first and removes it last:
//! repeated after a kill, it finishes with the same instant.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Conductor;
use super::files;
use super::model::Dispatch;
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::time::{format_ts, parse_ts};
use crate::store::{GodName, HandoffId, Root, TrackName, WorkflowId};

pub use crate::store::paused::*;
pub(crate) use crate::store::paused::{
    BARE_HOLD, HOLD_PREFIX, MAX_ENDED, MAX_FROZEN, MAX_PAUSES, MAX_RATE, MAX_UNTIL, read_file,
    write_file,
};

/// What the conductor asks of the pauses in force: which freezes a dispatch, which holds an
/// outbox record.
impl Pauses {
    /// The pause that freezes dispatch `d` (to its god, of its workflow) and whose resume has not
    /// reached it yet (its id is not in the dispatch's `frozen`).
    pub(crate) fn freezing(&self, d: &Dispatch) -> Option<&Pause> {
        self.list
            .iter()
            .find(|p| p.covers(&d.to_god, &d.workflow_id) && !applied(d, &p.id))
    }

    /// The pause that keeps outbox record `rec` in the outbox (docs/NATS.md): its peer's (the
    /// record's `peer`, else its subject's last token, as the bridge names it), or the whole root's.
    pub fn outbound(&self, rec: &super::outbox::OutboxRecord) -> Option<&Pause> {
        let peer = rec
            .extra
            .get("peer")
            .and_then(Value::as_str)
            .or_else(|| rec.subject.rsplit('.').next());
        self.list.iter().find(|p| match p.kind {
            PauseKind::All => true,
            PauseKind::Peer => p.name.is_some() && p.name.as_deref() == peer,
            _ => false,
        })
    }
}

/// Whether the resume of pause `id` already shifted `d`'s deadline.
fn applied(d: &Dispatch, id: &str) -> bool {
    d.frozen.iter().any(|f| f.pause == id)
}

/// One frozen interval of a dispatch's ack deadline, written by the resume that ended it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Frozen {
    /// The pause whose resume wrote it.
    #[serde(default)]
    pub pause: String,
    /// When the deadline stopped running (the pause's start, or the delivery if later).
    #[serde(default)]
    pub from: String,
    /// When it ran again.
    #[serde(default)]
    pub to: String,
    /// How far the deadline moved, in milliseconds (0 while another pause still froze it).
    #[serde(default)]
    pub shifted_ms: i64,
}

/// A dispatch's `frozen` as written: a list of entries; anything else (another writer's) reads as none.
pub(crate) fn frozen_de<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<Frozen>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// `--until`: a duration ahead (`30m`, `2h`), an RFC 3339 moment, or a local `HH:MM` (today, or
/// tomorrow once it has passed). Refuses anything else, a moment not in the future and one more than
/// 365 days ahead.
pub fn parse_until(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let t = text.trim();
    let at = if let Some(d) = crate::store::time::parse_duration(t) {
        chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
    } else if let Some(ts) = parse_ts(t) {
        Some(ts)
    } else if let Ok(hm) = chrono::NaiveTime::parse_from_str(t, "%H:%M") {
        use chrono::TimeZone;
        let local_now = now.with_timezone(&chrono::Local);
        let today = local_now.date_naive().and_time(hm);
        let pick = |d: chrono::NaiveDateTime| {
            chrono::Local
                .from_local_datetime(&d)
                .earliest()
                .map(|l| l.with_timezone(&Utc))
        };
        match pick(today) {
            Some(x) if x > now => Some(x),
            _ => today
                .checked_add_signed(chrono::Duration::days(1))
                .and_then(pick),
        }
    } else {
        return Err(Error::refused(format!(
            "--until {text:?}: not a duration (30m, 2h), an RFC 3339 time or a local HH:MM"
        )));
    };
    let Some(at) = at else {
        return Err(Error::refused(format!("--until {text:?} is out of range")));
    };
    if at <= now {
        return Err(Error::refused(format!(
            "--until {text:?} ({}) is not in the future",
            format_ts(at)
        )));
    }
    if at - now > MAX_UNTIL {
        return Err(Error::refused(format!(
            "--until {text:?} is more than 365 days ahead"
        )));
    }
    Ok(at)
}

/// `--rate`: `100/s`, `6000/m`, `2/h`, or a bare number per second. Refuses 0, a negative or
/// non-finite rate, and one over a million per second.
pub fn parse_rate(text: &str) -> Result<f64> {
    let t = text.trim();
    let (n, per) = match t.split_once('/') {
        Some((n, u)) => (
            n,
            match u.trim() {
                "s" | "sec" | "second" => 1.0,
                "m" | "min" | "minute" => 60.0,
                "h" | "hour" => 3600.0,
                other => {
                    return Err(Error::refused(format!(
                        "--rate {text:?}: unknown unit {other:?} (s, m or h)"
                    )));
                }
            },
        ),
        None => (t, 1.0),
    };
    let n: f64 = n
        .trim()
        .parse()
        .map_err(|_| Error::refused(format!("--rate {text:?}: not N/s, N/m or N/h")))?;
    let rate = n / per;
    if !rate.is_finite() || rate <= 0.0 || rate > MAX_RATE {
        return Err(Error::refused(format!(
            "--rate {text:?}: must be above 0 and at most {MAX_RATE}/s"
        )));
    }
    Ok(rate)
}

/// The most steps of a resume run as one act (one shared sync, `store/commit.rs`).
const MAX_BATCH: u64 = 64;

/// Spaces the steps of a resume (each shift and each release): the n-th is due at
/// `start + n / rate`, by schedule, whatever the steps before it took. The steps due by the time
/// the previous ones were made durable run together as one act (`store/commit.rs`): each step's
/// writes reach readers one by one, when it is due, and one sync makes the batch durable before the
/// next batch starts. A step then costs its writes, not a sync of its own, so the rate holds where
/// one sync takes longer than a step's share of a second.
struct Pacer {
    rate: Option<f64>,
    start: Instant,
    n: u64,
}

impl Pacer {
    fn new(rate: Option<f64>) -> Self {
        Self {
            rate,
            start: Instant::now(),
            n: 0,
        }
    }

    /// When the next step is due (`None`: at once).
    fn due(&self) -> Option<Instant> {
        self.rate
            .map(|r| self.start + Duration::from_secs_f64(self.n as f64 / r))
    }

    /// Runs `step` over `items` in order, each not before it is due, in batches of the steps due
    /// together, each batch one act of `root`. Returns the batches' failed syncs (their steps'
    /// writes may not survive a crash of the machine: a repeated resume writes them again).
    fn run<T>(
        &mut self,
        root: &Root,
        items: impl IntoIterator<Item = T>,
        mut step: impl FnMut(T),
    ) -> Vec<String> {
        let mut failed = Vec::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            if let Some(due) = self.due() {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            let synced = crate::store::commit::act_unheld(root, || {
                let mut k = 0u64;
                while let Some(item) = items.next_if(|_| {
                    k == 0 || k < MAX_BATCH && self.due().is_none_or(|d| d <= Instant::now())
                }) {
                    step(item);
                    self.n += 1;
                    k += 1;
                }
                Ok(())
            });
            if let Err(e) = synced {
                failed.push(e.to_string());
            }
        }
        failed
    }
}

/// What `pause` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PauseResult {
    /// `paused`, or `duplicate` when it was paused already (the pause in force is returned).
    pub status: String,
    /// The pause.
    pub pause: Pause,
    /// Dispatches already waiting in the paused inboxes (their deadlines now frozen).
    pub frozen: usize,
    /// The tracks told with a `PAUSED` line.
    pub announced: Vec<String>,
}

/// What `resume` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeResult {
    /// `resumed`, or `duplicate` when the pause had already ended (its record is returned).
    pub status: String,
    /// The pause ended.
    pub pause: Pause,
    /// How long it lasted, in seconds.
    pub paused_secs: f64,
    /// Dispatches whose ack deadline, or step deadline after `accepted`, was shifted.
    pub shifted: usize,
    /// Held dispatches released into their inboxes, in the order they were held.
    pub released: Vec<String>,
    /// Held dispatches that stay held: for another pause, or for an operator's approval too.
    pub still_held: Vec<String>,
    /// The tracks told with a `RESUMED` line.
    pub announced: Vec<String>,
    /// What could not be done (the resume is repeated to finish it; the pause stays until then).
    pub errors: Vec<String>,
}

/// What `paused` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedReport {
    /// The pauses in force, each with what it holds.
    pub paused: Vec<PausedEntry>,
    /// How many.
    pub count: usize,
    /// The newest ended pauses.
    pub ended: Vec<Pause>,
    /// The file read.
    pub path: String,
}

/// One pause in force and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedEntry {
    /// The pause.
    #[serde(flatten)]
    pub pause: Pause,
    /// The handoff ids held in `_quarantine` by it, oldest first.
    pub held: Vec<String>,
    /// Dispatches in its inboxes whose deadlines it freezes.
    pub frozen: usize,
}

/// The parts of a `held_because` (joined by `; `) that name a pause: `paused: {kind} {name}` as the
/// engine writes it, or a bare `paused`.
pub(crate) fn pause_parts(held_because: Option<&str>) -> Vec<&str> {
    held_because
        .map(|h| {
            h.split("; ")
                .filter(|p| *p == BARE_HOLD || p.starts_with(HOLD_PREFIX))
                .collect()
        })
        .unwrap_or_default()
}

/// True when a dispatch's `held_because` names a pause (`paused: …`, alone or joined to another
/// hold): the dispatch waits for a resume, not for an approval.
pub fn held_by_pause(held_because: Option<&str>) -> bool {
    !pause_parts(held_because).is_empty()
}

/// `held_because` without the part `part` (`None` when nothing else is left).
fn without_part(held_because: &str, part: &str) -> Option<String> {
    let rest: Vec<&str> = held_because.split("; ").filter(|p| *p != part).collect();
    (!rest.is_empty()).then(|| rest.join("; "))
}

/// Joins a pause's hold to the hold a dispatch already had.
pub(crate) fn join_hold(hold: Option<String>, pause: &Pause) -> String {
    let text = pause.target().hold_text();
    match hold {
        Some(h) if pause_parts(Some(&h)).contains(&text.as_str()) => h,
        Some(h) => format!("{h}; {text}"),
        None => text,
    }
}

/// A fresh pause id.
fn new_pause_id(now: DateTime<Utc>) -> String {
    format!(
        "pause_{}_{}",
        now.format("%Y%m%d_%H%M%S"),
        crate::store::ids::random_hex(6)
    )
}

/// When the delivery a dispatch waits on began (its last delivery, else when it was dispatched).
fn delivered_at(d: &Dispatch) -> Option<DateTime<Utc>> {
    d.deliveries
        .last()
        .map(|x| x.at.as_str())
        .or(d.dispatched_at.as_deref())
        .and_then(parse_ts)
}

/// What happens to one held dispatch on a resume.
enum HeldFate {
    /// Released into its inbox.
    Released,
    /// Still held (another pause, or another hold).
    Kept,
    /// No longer held by this pause (moved on meanwhile).
    Gone,
}

/// The dispatches in the inboxes a pause covers: `(path, dispatch)`.
fn covered_inbox(root: &Root, p: &Pause) -> Vec<(std::path::PathBuf, Dispatch)> {
    let gods: Vec<GodName> = match (p.kind, p.name.as_deref()) {
        (PauseKind::God, Some(g)) => GodName::parse(g).into_iter().collect(),
        (PauseKind::Workflow | PauseKind::All, _) => files::god_dirs(&root.pending_root()),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for g in gods {
        for (path, d) in files::read_dispatch_dir(&root.inbox_dir(&g)).0 {
            if p.covers(&d.to_god, &d.workflow_id) {
                out.push((path, d));
            }
        }
    }
    out
}

/// Whether `p` (whose hold text is `text`) holds dispatch `d`: its part names `p`, or a bare `paused`
/// part is there and `p` covers the dispatch.
fn holds(p: &Pause, text: &str, d: &Dispatch) -> bool {
    let parts = pause_parts(d.held_because.as_deref());
    parts.contains(&text) || parts.contains(&BARE_HOLD) && p.covers(&d.to_god, &d.workflow_id)
}

/// The dispatches held in `_quarantine` by `p`, in the order they were held.
fn held_by(root: &Root, p: &Pause) -> Vec<(HandoffId, WorkflowId)> {
    let text = p.target().hold_text();
    let mut v: Vec<(String, String, HandoffId, WorkflowId)> =
        files::read_dispatch_dir(&root.quarantine_dir())
            .0
            .into_iter()
            .filter(|(_, d)| holds(p, &text, d))
            .filter_map(|(_, d)| {
                let hid = HandoffId::parse(&d.handoff_id).ok()?;
                let wf = WorkflowId::parse(&d.workflow_id).ok()?;
                Some((
                    d.dispatched_at.clone().unwrap_or_default(),
                    hid.to_string(),
                    hid,
                    wf,
                ))
            })
            .collect();
    v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    v.into_iter().map(|(_, _, h, w)| (h, w)).collect()
}

impl Conductor {
    /// Pauses `target` (docs/PROTOCOL.md §2.14), under `conductor/.paused.lock`: the entry written
    /// whole by rename, then, for a track or the whole root, a `PAUSED` line on each track. A
    /// target paused already answers `duplicate` (its pause in force) and finishes what a killed
    /// pause left. Refuses an empty reason, and a file it cannot read (never overwritten).
    pub(crate) fn pause_unjournaled(
        &self,
        target: &PauseTarget,
        id: &str,
        until: Option<DateTime<Utc>>,
        reason: &str,
    ) -> Result<PauseResult> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(Error::refused("a pause needs a reason (--reason TEXT)"));
        }
        crate::store::ids::check_free_text("reason", reason)?;
        let origin = self.origin();
        let now = chrono::Utc::now();
        let (status, pause) = {
            let _lock = FileLock::exclusive(&self.root, &self.root.paused_lock_path())?;
            let mut file = read_file(&self.root)?;
            match file.pauses.iter().find(|p| p.target() == *target) {
                Some(p) if p.resuming_at.is_some() => {
                    return Err(Error::refused(format!(
                        "{} is being resumed (since {}); repeat `pantheon resume` to finish it, then pause again",
                        target.label(),
                        p.resuming_at.as_deref().unwrap_or_default()
                    )));
                }
                Some(p) => ("duplicate", p.clone()),
                None => {
                    if file.pauses.len() >= MAX_PAUSES {
                        return Err(Error::refused(format!(
                            "{MAX_PAUSES} pauses are in force already; resume some first"
                        )));
                    }
                    let p = Pause {
                        id: id.to_owned(),
                        kind: target.kind,
                        name: target.name.clone(),
                        by: origin.actor.clone(),
                        source: origin.source.clone(),
                        reason: reason.to_owned(),
                        since: format_ts(now),
                        until: until.map(format_ts),
                        resuming_at: None,
                        resumed_at: None,
                        resumed_by: None,
                        extra: Map::new(),
                    };
                    file.version = 1;
                    file.pauses.push(p.clone());
                    write_file(&self.root, &file)?;
                    super::crash_point("pause:after-file");
                    ("paused", p)
                }
            }
        };
        let announced = self.announce(&pause, crate::bus::vocab::MessageType::Paused)?;
        let frozen = covered_inbox(&self.root, &pause).len();
        Ok(PauseResult {
            status: status.into(),
            pause,
            frozen,
            announced,
        })
    }

    /// The pause in force for `target`, if any (read without the lock).
    pub(crate) fn pause_of(&self, target: &PauseTarget) -> Result<Option<Pause>> {
        Ok(read_file(&self.root)?
            .pauses
            .into_iter()
            .find(|p| p.target() == *target))
    }

    /// Ends the pause of `target` (docs/PROTOCOL.md §2.14): marks it `resuming_at` (the instant every
    /// deadline is shifted to), shifts the frozen deadlines of the dispatches in its inboxes, releases
    /// the dispatches it held in the order they were held (at most `rate` a second), tells its tracks
    /// with a `RESUMED` line, and removes it last. Repeated after a kill, it finishes with the same
    /// instant and shifts nothing twice. A target that is not paused is refused; one whose pause has
    /// just ended answers `duplicate`.
    pub(crate) fn resume_unjournaled(
        &self,
        target: &PauseTarget,
        rate: Option<f64>,
        by: &str,
    ) -> Result<ResumeResult> {
        let pause = {
            let _lock = FileLock::exclusive(&self.root, &self.root.paused_lock_path())?;
            let mut file = read_file(&self.root)?;
            let Some(i) = file.pauses.iter().position(|p| p.target() == *target) else {
                if let Some(p) = file.ended.iter().rev().find(|p| p.target() == *target) {
                    return Ok(ResumeResult {
                        status: "duplicate".into(),
                        paused_secs: paused_secs(p),
                        pause: p.clone(),
                        shifted: 0,
                        released: Vec::new(),
                        still_held: Vec::new(),
                        announced: Vec::new(),
                        errors: Vec::new(),
                    });
                }
                let now_paused = file
                    .pauses
                    .iter()
                    .map(|p| p.target().label())
                    .collect::<Vec<_>>();
                return Err(Error::not_found(format!(
                    "{} is not paused (paused: {})",
                    target.label(),
                    if now_paused.is_empty() {
                        "nothing".to_owned()
                    } else {
                        now_paused.join(", ")
                    }
                )));
            };
            if file.pauses[i].resuming_at.is_none() {
                file.pauses[i].resuming_at = Some(format_ts(chrono::Utc::now()));
                write_file(&self.root, &file)?;
                super::crash_point("resume:after-mark");
            }
            file.pauses[i].clone()
        };
        let at = pause
            .resuming_at
            .as_deref()
            .and_then(parse_ts)
            .unwrap_or_else(chrono::Utc::now);
        let mut pacer = Pacer::new(rate);
        let mut errors = Vec::new();
        let mut shifted = 0;
        let frozen = covered_inbox(&self.root, &pause)
            .into_iter()
            .filter(|(_, d)| {
                !applied(d, &pause.id) && (d.ack_deadline.is_some() || !d.deliveries.is_empty())
            });
        let failed = pacer.run(&self.root, frozen, |(path, d)| {
            match self.unfreeze(&path, &d, &pause, at) {
                Ok(true) => shifted += 1,
                Ok(false) => {}
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        });
        errors.extend(failed);
        let failed = pacer.run(
            &self.root,
            self.covered_timers(&pause),
            |(path, t)| match self.unfreeze_step(&path, &t, &pause, at) {
                Ok(true) => shifted += 1,
                Ok(false) => {}
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            },
        );
        errors.extend(failed);
        let (released, still_held) = self.release_held(&pause, by, &mut pacer, &mut errors);
        let announced = self.announce(&pause, crate::bus::vocab::MessageType::Resumed)?;
        if !errors.is_empty() {
            // The pause stays (marked resuming): a repeat finishes what failed.
            return Ok(ResumeResult {
                status: "resuming".into(),
                paused_secs: paused_secs(&pause),
                pause,
                shifted,
                released,
                still_held,
                announced,
                errors,
            });
        }
        let ended = {
            let _lock = FileLock::exclusive(&self.root, &self.root.paused_lock_path())?;
            let mut file = read_file(&self.root)?;
            let mut ended = pause.clone();
            ended.resumed_at = Some(format_ts(at));
            ended.resumed_by = Some(by.to_owned());
            if let Some(i) = file.pauses.iter().position(|p| p.id == pause.id) {
                file.pauses.remove(i);
                file.ended.push(ended.clone());
                let cut = file.ended.len().saturating_sub(MAX_ENDED);
                file.ended.drain(..cut);
                write_file(&self.root, &file)?;
            }
            ended
        };
        Ok(ResumeResult {
            status: "resumed".into(),
            paused_secs: paused_secs(&ended),
            pause: ended,
            shifted,
            released,
            still_held,
            announced,
            errors,
        })
    }

    /// Shifts one frozen dispatch's ack deadline by the time it was frozen (under its workflow's lock,
    /// the dispatch read again); while another pause still freezes it, only notes when it began.
    /// Whether it was rewritten.
    fn unfreeze(&self, path: &Path, seen: &Dispatch, p: &Pause, at: DateTime<Utc>) -> Result<bool> {
        let wf = WorkflowId::parse(&seen.workflow_id)?;
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let Some(mut d) = files::read_model::<Dispatch>(path).map_err(|e| Error::Corrupt {
            path: e.path,
            message: e.error,
        })?
        else {
            return Ok(false);
        };
        if applied(&d, &p.id) || d.workflow_id != seen.workflow_id {
            return Ok(false);
        }
        let began = delivered_at(&d);
        let moved = self.frozen_stretch(&mut d, p, at, began);
        if let Some(deadline) = d.ack_deadline.as_deref().and_then(parse_ts)
            && let Some(by) = moved
            && let Some(moved) = deadline.checked_add_signed(by)
        {
            d.ack_deadline = Some(format_ts(moved));
            if let Some(last) = d.frozen.last_mut() {
                last.shifted_ms = by.num_milliseconds();
            }
        }
        write_json(&self.root, path, &d)?;
        super::crash_point("resume:after-shift");
        Ok(true)
    }

    /// Records on `d` the frozen stretch the resume of `p` at `at` ends (a [`Frozen`] entry, its
    /// `shifted_ms` 0 until the caller moves a deadline), and returns how far its deadline moves:
    /// `None` while another pause in force still freezes it (then only `frozen_since` notes when the
    /// stretch began). `began`: when the deadline started running (the delivery it waits on, or the
    /// acceptance for a step's timeout); the stretch never starts before it.
    fn frozen_stretch(
        &self,
        d: &mut Dispatch,
        p: &Pause,
        at: DateTime<Utc>,
        began: Option<DateTime<Utc>>,
    ) -> Option<chrono::Duration> {
        let others = Pauses::load(&self.root).unwrap_or_default();
        let still = others
            .list()
            .iter()
            .filter(|q| q.id != p.id && q.covers(&d.to_god, &d.workflow_id) && !applied(d, &q.id))
            .collect::<Vec<_>>();
        // The frozen stretch began at the earliest start of the pauses that froze it without a
        // break (this one, the ones still in force, one that ended while another held on), and
        // never before the deadline began running.
        let mut start = p.since_ts().unwrap_or(at);
        for q in &still {
            if let Some(s) = q.since_ts() {
                start = start.min(s);
            }
        }
        if let Some(s) = d.frozen_since.as_deref().and_then(parse_ts) {
            start = start.min(s);
        }
        if let Some(t) = began {
            start = start.max(t);
        }
        let start = start.min(at);
        d.frozen.push(Frozen {
            pause: p.id.clone(),
            from: format_ts(start),
            to: format_ts(at),
            shifted_ms: 0,
        });
        let cut = d.frozen.len().saturating_sub(MAX_FROZEN);
        d.frozen.drain(..cut);
        if still.is_empty() {
            d.frozen_since = None;
            Some(at - start)
        } else {
            d.frozen_since = Some(format_ts(start));
            None
        }
    }

    /// The step timers (`conductor/timers/`) of the accepted dispatches a pause covers, by their
    /// god and workflow: `(timer path, timer)`.
    fn covered_timers(&self, p: &Pause) -> Vec<(std::path::PathBuf, super::timers::StepTimer)> {
        let Ok(rd) = std::fs::read_dir(self.root.timers_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<_> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|path| path.extension().is_some_and(|x| x == "json"))
            .filter_map(|path| super::timers::read_timer(&path).map(|t| (path, t)))
            .filter(|(_, t)| p.covers(&t.god, &t.workflow_id))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Shifts the step deadline of one accepted dispatch a pause froze by the time it was frozen
    /// (docs/PROTOCOL.md §2.14): the archived dispatch's `step_deadline` (with a [`Frozen`] entry,
    /// so a repeated resume never shifts twice) under its workflow's lock, then its timer's
    /// `deadline`. A repeat after a kill between the two writes writes the timer again from the
    /// dispatch. Whether the step deadline moved.
    fn unfreeze_step(
        &self,
        timer: &Path,
        t: &super::timers::StepTimer,
        p: &Pause,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let (Ok(wf), Ok(hid), Ok(god)) = (
            WorkflowId::parse(&t.workflow_id),
            HandoffId::parse(&t.handoff_id),
            GodName::parse(&t.god),
        ) else {
            // Names nothing the engine wrote: the supervisor removes it, nothing to shift.
            return Ok(false);
        };
        if timer != super::timers::timer_path(&self.root, &hid) {
            // Not a file this engine wrote under that name: never acted on.
            return Ok(false);
        }
        let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
        let Some(f) = files::in_archive(&self.root, &god, &hid)? else {
            return Ok(false);
        };
        let mut d = f.dispatch;
        if d.workflow_id != wf.as_str() || d.step_deadline.is_none() {
            return Ok(false);
        }
        let mut moved = false;
        if !applied(&d, &p.id) {
            let began = d
                .acked_at
                .as_deref()
                .and_then(parse_ts)
                .or_else(|| delivered_at(&d));
            let by = self.frozen_stretch(&mut d, p, at, began);
            if let Some(deadline) = d.step_deadline.as_deref().and_then(parse_ts)
                && let Some(by) = by
                && let Some(later) = deadline.checked_add_signed(by)
            {
                d.step_deadline = Some(format_ts(later));
                if let Some(last) = d.frozen.last_mut() {
                    last.shifted_ms = by.num_milliseconds();
                }
                moved = true;
            }
            write_json(&self.root, &f.path, &d)?;
            super::crash_point("resume:after-step-shift");
        }
        let deadline = d.step_deadline.clone().unwrap_or_default();
        if let Some(now) = super::timers::read_timer(timer)
            && now.deadline != deadline
            && now.handoff_id == t.handoff_id
        {
            let mut now = now;
            now.deadline = deadline;
            self.write_timer(&hid, &now)?;
        }
        Ok(moved)
    }

    /// Releases the dispatches `p` held, in the order they were held, until none is left (new ones
    /// held while it runs included). Returns the handoff ids released and those kept held.
    fn release_held(
        &self,
        p: &Pause,
        by: &str,
        pacer: &mut Pacer,
        errors: &mut Vec<String>,
    ) -> (Vec<String>, Vec<String>) {
        let mut released = Vec::new();
        let mut kept = Vec::new();
        let mut tried = std::collections::HashSet::new();
        loop {
            let todo: Vec<_> = held_by(&self.root, p)
                .into_iter()
                .filter(|(h, _)| !tried.contains(h.as_str()))
                .collect();
            if todo.is_empty() {
                break;
            }
            for (hid, _) in &todo {
                tried.insert(hid.to_string());
            }
            let failed = pacer.run(&self.root, todo, |(hid, _)| {
                match self.release_one(&hid, p, by) {
                    Ok(HeldFate::Released) => released.push(hid.to_string()),
                    Ok(HeldFate::Kept) => kept.push(hid.to_string()),
                    Ok(HeldFate::Gone) => {}
                    Err(e) => errors.push(format!("{hid}: {e}")),
                }
            });
            errors.extend(failed);
        }
        (released, kept)
    }

    /// One dispatch held by `p`: released (recorded as an approval by the resume), or, when another
    /// pause or hold still applies, left held with `p`'s part taken out of `held_because`.
    fn release_one(&self, hid: &HandoffId, p: &Pause, by: &str) -> Result<HeldFate> {
        let text = p.target().hold_text();
        let Some(f) = files::in_quarantine(&self.root, hid)? else {
            return Ok(HeldFate::Gone);
        };
        let wf = WorkflowId::parse(&f.dispatch.workflow_id)?;
        {
            let _lock = FileLock::exclusive(&self.root, &self.root.workflow_lock_path(&wf))?;
            let Some(mut f) = files::in_quarantine(&self.root, hid)? else {
                return Ok(HeldFate::Gone);
            };
            let held = f.dispatch.held_because.clone().unwrap_or_default();
            if !holds(p, &text, &f.dispatch) {
                return Ok(HeldFate::Gone);
            }
            let base = without_part(&held, BARE_HOLD).and_then(|h| without_part(&h, &text));
            let others = Pauses::load(&self.root).unwrap_or_default();
            let other = others
                .list()
                .iter()
                .find(|q| q.id != p.id && q.covers(&f.dispatch.to_god, &f.dispatch.workflow_id));
            let rest = match other {
                Some(q) => Some(join_hold(base, q)),
                None => base,
            };
            if let Some(rest) = rest {
                f.dispatch.held_because = Some(rest);
                write_json(&self.root, &f.path, &f.dispatch)?;
                return Ok(HeldFate::Kept);
            }
        }
        self.decide_held_as(hid, None, super::Actor::God(by.to_owned()), Some(&text))?;
        Ok(HeldFate::Released)
    }

    /// Writes a `PAUSED` or `RESUMED` line on each track a pause of a track or of the whole root
    /// concerns, once: a line of this pause already near the queue's end is not written again.
    fn announce(&self, p: &Pause, word: crate::bus::vocab::MessageType) -> Result<Vec<String>> {
        let tracks: Vec<TrackName> = match (p.kind, p.name.as_deref()) {
            (PauseKind::Track, Some(t)) => TrackName::parse(t).into_iter().collect(),
            (PauseKind::All, _) => crate::bus::list_tracks(&self.root),
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        for t in tracks {
            let bus = crate::bus::Bus::open(&self.root, &t);
            if !bus.is_initialised() {
                continue;
            }
            bus.announce_pause(p, word)?;
            out.push(t.to_string());
        }
        Ok(out)
    }

    /// What is paused, each pause with what it holds and freezes.
    pub fn paused(&self) -> Result<PausedReport> {
        let file = read_file(&self.root)?;
        let paused: Vec<PausedEntry> = file
            .pauses
            .iter()
            .map(|p| PausedEntry {
                held: held_by(&self.root, p)
                    .into_iter()
                    .map(|(h, _)| h.to_string())
                    .collect(),
                frozen: covered_inbox(&self.root, p)
                    .iter()
                    .filter(|(_, d)| !applied(d, &p.id))
                    .count(),
                pause: p.clone(),
            })
            .collect();
        Ok(PausedReport {
            count: paused.len(),
            paused,
            ended: file.ended,
            path: self.root.paused_path().display().to_string(),
        })
    }
}

/// The supervisor's side of pauses (docs/PROTOCOL.md §2.14), called by each pass of
/// [`Conductor::tick_index`].
impl Conductor {
    /// The pauses this pass applies, after ending those whose `until` has passed (each resume
    /// journaled as `serve`'s). `None` when `paused.json` cannot be read: then every due dispatch is
    /// left frozen (losing nothing) and the error says why.
    pub(crate) fn pauses_for_pass(
        &self,
        now: DateTime<Utc>,
        report: &mut super::delivery::TickReport,
    ) -> Option<Pauses> {
        let pauses = match Pauses::load(&self.root) {
            Ok(p) => p,
            Err(e) => {
                report.errors.push(format!(
                    "{e} (every deadline stays frozen until it is fixed)"
                ));
                return None;
            }
        };
        let due: Vec<_> = pauses
            .list()
            .iter()
            .filter(|p| p.until_ts().is_some_and(|t| t <= now))
            .map(Pause::target)
            .collect();
        if due.is_empty() {
            return Some(pauses);
        }
        let serve = Conductor::new(self.root.clone()).with_origin(crate::journal::Origin {
            actor: "serve".into(),
            source: "supervisor".into(),
        });
        for t in due {
            match serve.resume(&t, None) {
                Ok(r) => {
                    report.errors.extend(r.errors.iter().cloned());
                    report.resumed.push(r.pause.id);
                }
                Err(e) => report.errors.push(format!("resume of {}: {e}", t.label())),
            }
        }
        match Pauses::load(&self.root) {
            Ok(p) => Some(p),
            Err(e) => {
                report.errors.push(e.to_string());
                None
            }
        }
    }

    /// When a due entry is frozen by a pause: until when it is parked (the pause's `until`, else an
    /// hour; a change of the pauses looks again sooner). `None`: act on it.
    pub(crate) fn frozen_until(
        &self,
        path: &std::path::Path,
        kind: super::deadlines::Kind,
        pauses: Option<&Pauses>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let park = |until: Option<DateTime<Utc>>| {
            Some(
                until
                    .unwrap_or_else(|| now + chrono::Duration::hours(1))
                    .max(now),
            )
        };
        let Some(pauses) = pauses else {
            return park(None);
        };
        if pauses.list().is_empty() {
            return None;
        }
        let (god, wf, d) = match kind {
            super::deadlines::Kind::Dispatch => {
                let d = files::read_model::<Dispatch>(path).ok().flatten()?;
                let inbox = path.parent().and_then(|p| p.file_name());
                if d.dead_at.is_some() || inbox.is_none_or(|g| g != d.to_god.as_str()) {
                    // A move a crash cut short is finished whatever is paused.
                    return None;
                }
                (d.to_god.clone(), d.workflow_id.clone(), Some(d))
            }
            super::deadlines::Kind::Timer => {
                let v = files::read_model::<Value>(path).ok().flatten()?;
                let text = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (text("god"), text("workflow_id"), None)
            }
        };
        let frozen = match &d {
            Some(d) => pauses.freezing(d),
            None => pauses.holding(&god, &wf),
        };
        if let Some(p) = frozen {
            return park(p.until_ts());
        }
        // A redelivery to a paused god waits for its resume too.
        let d = d?;
        match super::delivery::decide(&d, &self.step_fallbacks(&d), now) {
            super::delivery::Due::Redeliver { to, .. } => {
                pauses.god_paused(&to).and_then(|p| park(p.until_ts()))
            }
            _ => None,
        }
    }
}

/// How long a pause lasted (to its end, its resume's instant, or now), in seconds.
fn paused_secs(p: &Pause) -> f64 {
    let end = p
        .resumed_at
        .as_deref()
        .or(p.resuming_at.as_deref())
        .and_then(parse_ts)
        .unwrap_or_else(chrono::Utc::now);
    p.since_ts()
        .map(|s| (end - s).num_milliseconds().max(0) as f64 / 1000.0)
        .unwrap_or_default()
}

/// A fresh id for a pause about to be made (the journal's intent is keyed by it).
pub(crate) fn fresh_id() -> String {
    new_pause_id(chrono::Utc::now())
}

#[cfg(test)]
#[path = "pause_tests.rs"]
mod pause_props;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        parse_ts(s).unwrap()
    }

    #[test]
    fn until_takes_a_duration_a_moment_or_a_local_time() {
        let now = at("2026-12-01T10:00:00Z");
        assert_eq!(parse_until("30m", now).unwrap(), at("2026-12-01T10:30:00Z"));
        assert_eq!(
            parse_until("2026-12-01T12:00:00Z", now).unwrap(),
            at("2026-12-01T12:00:00Z")
        );
        let local = parse_until("09:00", now).unwrap();
        assert!(local > now && local - now <= chrono::Duration::days(1));
        assert!(parse_until("2026-12-01T09:00:00Z", now).is_err());
        assert!(parse_until("400d", now).is_err());
        assert!(parse_until("soon", now).is_err());
    }

    #[test]
    fn a_bare_paused_part_is_read_as_a_pause_hold() {
        assert!(held_by_pause(Some("paused")));
        assert!(held_by_pause(Some("step \"x\" requires approval; paused")));
        assert!(!held_by_pause(Some("pausedness")));
        assert!(!held_by_pause(Some("budget: paused spending")));
        assert_eq!(without_part("paused", BARE_HOLD), None);
    }

    #[test]
    fn rates_are_per_second() {
        assert_eq!(parse_rate("100/s").unwrap(), 100.0);
        assert_eq!(parse_rate("60/m").unwrap(), 1.0);
        assert_eq!(parse_rate("5").unwrap(), 5.0);
        for bad in ["0/s", "-1/s", "x/s", "1/d", "NaN", "inf"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hold_parts_join_and_come_apart() {
        let p = Pause {
            id: "pause_x".into(),
            kind: PauseKind::God,
            name: Some("hermes".into()),
            by: "a".into(),
            source: "cli".into(),
            reason: "r".into(),
            since: "2026-12-01T10:00:00Z".into(),
            until: None,
            resuming_at: None,
            resumed_at: None,
            resumed_by: None,
            extra: Map::new(),
        };
        let h = join_hold(Some("budget: workflow wf: $1; $2".into()), &p);
        assert_eq!(h, "budget: workflow wf: $1; $2; paused: god hermes");
        assert_eq!(pause_parts(Some(&h)), vec!["paused: god hermes"]);
        assert_eq!(join_hold(Some(h.clone()), &p), h);
        assert_eq!(
            without_part(&h, "paused: god hermes").as_deref(),
            Some("budget: workflow wf: $1; $2")
        );
        assert_eq!(
            without_part("paused: god hermes", "paused: god hermes"),
            None
        );
    }

    #[test]
    fn hostile_files_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        std::fs::create_dir_all(&root.conductor).unwrap();
        assert!(read_file(&root).unwrap().pauses.is_empty());
        for bad in [
            "not json",
            r#"{"pauses":[{"id":"pause_a","kind":"god","by":"x","reason":"r","since":"2026-12-01T10:00:00Z"}]}"#,
            r#"{"pauses":[{"id":"pause_a","kind":"god","name":"../x","by":"x","reason":"r","since":"2026-12-01T10:00:00Z"}]}"#,
            r#"{"pauses":[{"id":"pause_a","kind":"planet","name":"x","by":"x","reason":"r","since":"2026-12-01T10:00:00Z"}]}"#,
            r#"{"pauses":[{"id":"pause_a","kind":"all","by":"x","reason":"r","since":"yesterday"}]}"#,
            r#"{"pauses":[{"id":"../a","kind":"all","by":"x","reason":"r","since":"2026-12-01T10:00:00Z"}]}"#,
        ] {
            std::fs::write(root.paused_path(), bad).unwrap();
            let e = read_file(&root).unwrap_err().to_string();
            assert!(e.contains("paused.json"), "{bad}: {e}");
        }
        std::fs::write(
            root.paused_path(),
            vec![b' '; MAX_PAUSED_BYTES as usize + 1],
        )
        .unwrap();
        assert!(read_file(&root).unwrap_err().to_string().contains("larger"));
        std::fs::remove_file(root.paused_path()).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.paused_path()).unwrap();
        assert!(read_file(&root).is_err());
    }
}
