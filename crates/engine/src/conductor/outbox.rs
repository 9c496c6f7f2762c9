//! `nats_publish` and `await_ack` steps (docs/NATS.md): what happens when a workflow reaches them.
//!
//! Reaching a publish step renders its templates into an outbox record `conductor/outbox/{outbox_id}.json`
//! and moves the workflow on, in the same commit as the state change. The record is written first,
//! under an id derived from the workflow, the step and the handoff that reached it, and is *live*
//! only once the state lists it (`step_history[].outbox_id`): a crash before the commit leaves an
//! inert file that the repeated request overwrites with the same id; a crash after it leaves a live
//! record the bridge publishes. Replies are kept in `conductor/replies/{outbox_id}.json` until the
//! workflow reaches the `await_ack` step that takes them.

use super::model::RouteStatus;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::definition::WorkflowDef;
use super::model::{Routed, StepRecord, StepStatus, WorkflowState, WorkflowStatus};
use super::results::ReplyStatus;
use super::subject::render_subject;
use super::template::Vars;
use super::{Conductor, files};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{Root, WorkflowId};

/// An outbox record: one message the bridge publishes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutboxRecord {
    /// Also the `Nats-Msg-Id` (JetStream deduplicates by it).
    pub outbox_id: String,
    /// `request` (a publish step) or `reply` (the answer to an inbound request).
    pub kind: String,
    /// The workflow whose step wrote this record.
    pub workflow_id: String,
    /// The step that wrote it (for a reply: the step the request answered).
    pub step: String,
    /// The NATS subject, rendered from the step's template.
    pub subject: String,
    /// The rendered message text.
    pub message: String,
    /// The rendered JSON payload.
    pub payload: Value,
    /// When the record was written (RFC 3339).
    pub created: String,
    /// For a reply: the `outbox_id` of the request it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// For a reply: the ack status (`accepted`, `completed`, `rejected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// For a request: the `traceparent` of the publish span, carried to the peer so its workflow
    /// joins this one's trace (docs/PROTOCOL.md §2.13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A reply to one of our requests, as the bridge received it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reply {
    /// The reply's message id.
    pub reply_id: String,
    /// The `outbox_id` of our request this answers.
    pub in_reply_to: String,
    /// The workflow that sent the request.
    pub workflow_id: String,
    /// The pantheon that answered (its bridge name).
    pub from_pantheon: String,
    /// The remote ack status: `accepted`, `completed` or `rejected`.
    pub status: String,
    /// The remote's message text.
    pub message: String,
    /// The remote's JSON payload.
    pub payload: Value,
    /// When the bridge received it (RFC 3339).
    pub received_at: String,
}

/// 128-bit FNV-1a of the parts, as 32 hex digits: ids derived from ids, stable across runs.
pub(crate) fn derive_hex(parts: &[&str]) -> String {
    let mut out = String::new();
    for seed in [0xcbf2_9ce4_8422_2325u64, 0x6c62_272e_07bb_0142] {
        let mut h = seed;
        for p in parts {
            for b in p.bytes().chain([0u8]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// A handoff id derived from `parts` (dated today, so it sorts like the others).
pub(crate) fn derive_handoff_id(parts: &[&str]) -> String {
    let hex = derive_hex(parts);
    let date = chrono::Utc::now().format("%Y%m%d");
    format!("hof_{date}_{}", &hex[..8])
}

/// `conductor/outbox/`: records waiting for the bridge to publish them.
pub fn outbox_dir(root: &Root) -> std::path::PathBuf {
    root.conductor.join(crate::store::layout::OUTBOX_DIR)
}

/// `conductor/outbox/sent/`: records the bridge has published.
pub fn sent_dir(root: &Root) -> std::path::PathBuf {
    outbox_dir(root).join("sent")
}

/// `conductor/replies/`: replies the bridge received to our requests.
pub(crate) fn replies_dir(root: &Root) -> std::path::PathBuf {
    root.conductor.join("replies")
}

fn id_ok(id: &str) -> Result<()> {
    if (1..=80).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        Ok(())
    } else {
        Err(Error::refused(format!(
            "{id:?} is not an outbox or reply id (lowercase letters, digits and _, up to 80)"
        )))
    }
}

/// The path of outbox record `id`; refuses an id that is not 1–80 lowercase letters, digits or `_`.
pub fn record_path(root: &Root, id: &str) -> Result<std::path::PathBuf> {
    id_ok(id)?;
    Ok(outbox_dir(root).join(format!("{id}.json")))
}

/// The path of the reply to `outbox_id`; refuses an id that is not 1–80 lowercase letters, digits or `_`.
pub(crate) fn reply_path(root: &Root, outbox_id: &str) -> Result<std::path::PathBuf> {
    id_ok(outbox_id)?;
    Ok(replies_dir(root).join(format!("{outbox_id}.json")))
}

/// The `outbox_id` a state's step record carries.
pub(crate) fn outbox_id_of(r: &StepRecord) -> Option<&str> {
    r.extra.get("outbox_id").and_then(Value::as_str)
}

/// Moves a workflow past the publish and await_ack steps it now stands on, inside a commit being
/// built: `st` is the state about to be written. Writes the outbox records (inert until `st` is
/// written) and returns the handoff id of the last record added, whose routing the caller dispatches.
pub(crate) fn advance(
    root: &Root,
    def: &WorkflowDef,
    wf: &WorkflowId,
    st: &mut WorkflowState,
) -> Result<Option<String>> {
    let mut last_added = None;
    for _ in 0..=def.steps.len() {
        if st.status != WorkflowStatus::WaitingForAck {
            break;
        }
        let Some(step) = st
            .current_step
            .as_deref()
            .and_then(|s| def.step(s))
            .cloned()
        else {
            break;
        };
        if let Some(last) = st.step_history.last_mut()
            && let Some(routed) = last.routed.as_mut()
            && routed.status == RouteStatus::Dispatched
            && routed.target_step.as_deref() == Some(step.id.as_str())
            && (step.publish.is_some() || step.await_ack)
        {
            routed.status = if step.publish.is_some() {
                RouteStatus::Publishing
            } else {
                RouteStatus::AwaitingReply
            };
        }
        let cause = st.step_history.last().cloned().unwrap_or_default();
        let cause_hid = cause.handoff_id.clone().unwrap_or_default();
        let now = now_ts();
        let (record, reply_used) = if let Some(publish) = &step.publish {
            let outbox_id = format!(
                "ob_{}",
                &derive_hex(&[wf.as_str(), &step.id, &cause_hid])[..24]
            );
            let outputs = st
                .step_history
                .iter()
                .filter(|r| r.status == StepStatus::Completed)
                .map(|r| (r.step_id.clone(), r.summary.clone().unwrap_or_default()))
                .collect();
            let context = st.extra.get("context").and_then(Value::as_object);
            let message_in = cause.summary.clone().unwrap_or_default();
            let vars = Vars {
                workflow_id: wf.as_str(),
                message: &message_in,
                context,
                outputs,
            };
            let subject = render_subject(&publish.subject, &vars).map_err(|e| {
                Error::refused(format!(
                    "step {:?} of {:?}: {e}; the workflow stays where it was",
                    step.id, def.id
                ))
            })?;
            let message = publish
                .message
                .as_ref()
                .map(|t| t.render(&vars))
                .unwrap_or_default();
            let payload = publish
                .payload
                .as_ref()
                .map(|p| p.render(&vars))
                .unwrap_or(Value::Null);
            let mut rec_extra = Map::new();
            if let Some(p) = &publish.peer {
                rec_extra.insert("peer".into(), json!(p));
            }
            let rec = OutboxRecord {
                traceparent: Some(crate::trace::traceparent_of(
                    st.trace_id.as_deref(),
                    &st.workflow_id,
                    "publish",
                    &outbox_id,
                )),
                outbox_id: outbox_id.clone(),
                kind: "request".into(),
                workflow_id: wf.to_string(),
                step: step.id.clone(),
                subject: subject.clone(),
                message: message.clone(),
                payload,
                created: now.clone(),
                extra: rec_extra,
                ..Default::default()
            };
            let path = record_path(root, &outbox_id)?;
            crate::conductor::files::refuse_unconfined(root, std::slice::from_ref(&path))?;
            write_json(root, &path, &rec)?;
            crate::conductor::crash_point("publish:after-outbox");
            let mut extra = Map::new();
            extra.insert("outbox_id".into(), json!(outbox_id));
            extra.insert("subject".into(), json!(subject));
            (
                StepRecord {
                    step_id: step.id.clone(),
                    god: step.god.clone(),
                    status: StepStatus::Completed,
                    completed_at: Some(now.clone()),
                    summary: Some(message),
                    handoff_id: Some(derive_handoff_id(&[wf.as_str(), &outbox_id])),
                    extra,
                    ..Default::default()
                },
                None,
            )
        } else if step.await_ack {
            let Some(waiting_for) = st
                .step_history
                .iter()
                .rev()
                .find_map(|r| outbox_id_of(r).map(str::to_owned))
            else {
                return Err(Error::refused(format!(
                    "step {:?} of {:?} awaits a reply, but no nats_publish step ran before it",
                    step.id, def.id
                )));
            };
            st.extra
                .insert("awaiting_reply".into(), json!(waiting_for.clone()));
            let kept: Option<Reply> = read_json(&reply_path(root, &waiting_for)?)?
                .and_then(|v| serde_json::from_value(v).ok());
            let Some(reply) = kept else { break };
            let mut extra = Map::new();
            extra.insert("reply_id".into(), json!(reply.reply_id));
            extra.insert("in_reply_to".into(), json!(waiting_for));
            extra.insert("reply_from".into(), json!(reply.from_pantheon));
            extra.insert("reply_status".into(), json!(reply.status));
            if !reply.payload.is_null() {
                extra.insert("reply_payload".into(), reply.payload.clone());
            }
            (
                StepRecord {
                    step_id: step.id.clone(),
                    god: step.god.clone(),
                    status: StepStatus::Completed,
                    completed_at: Some(now.clone()),
                    summary: Some(reply.message.clone()),
                    handoff_id: Some(derive_handoff_id(&[wf.as_str(), &reply.reply_id])),
                    extra,
                    ..Default::default()
                },
                Some(reply),
            )
        } else {
            break;
        };
        st.extra.remove("awaiting_reply");
        let mut record = record;
        if let Some(r) = &reply_used
            && r.status == "rejected"
        {
            st.status = WorkflowStatus::Failed;
            st.failure_reason = Some(format!(
                "{} rejected request {}: {}",
                r.from_pantheon, r.in_reply_to, r.message
            ));
            st.current_step = None;
            st.dispatched_to = None;
            record.routed = Some(Routed {
                status: RouteStatus::Failed,
                ..Default::default()
            });
        } else {
            record.routed = Some(route_after(def, &step.id, st));
        }
        last_added = record.handoff_id.clone();
        st.step_history.push(record);
        st.updated = Some(now);
    }
    Ok(last_added)
}

/// Moves `st` to the step after `step_id` and says where it went.
fn route_after(def: &WorkflowDef, step_id: &str, st: &mut WorkflowState) -> Routed {
    match def.next_step(step_id) {
        None => {
            st.status = WorkflowStatus::Completed;
            st.current_step = None;
            st.dispatched_to = None;
            Routed {
                status: RouteStatus::Completed,
                ..Default::default()
            }
        }
        Some(next) => {
            let held = next.approval_required;
            st.status = if held {
                WorkflowStatus::AwaitingApproval
            } else {
                WorkflowStatus::WaitingForAck
            };
            st.current_step = Some(next.id.clone());
            st.dispatched_to = Some(next.god.clone());
            let held_because =
                held.then(|| format!("step {:?} of {:?} requires approval", next.id, def.id));
            let status = if held {
                RouteStatus::AwaitingApproval
            } else if next.publish.is_some() {
                RouteStatus::Publishing
            } else if next.await_ack {
                RouteStatus::AwaitingReply
            } else {
                RouteStatus::Dispatched
            };
            Routed {
                status,
                target_god: Some(next.god.clone()),
                target_step: Some(next.id.clone()),
                warnings: Vec::new(),
                held_because,
                rule: None,
                extra: Default::default(),
            }
        }
    }
}

/// Outbox records waiting to be published, oldest first, with the ones not (yet) live left out:
/// a `request` is live once its workflow's state lists its id; a `reply` is live when written.
pub fn pending(root: &Root) -> (Vec<OutboxRecord>, usize) {
    let mut live = Vec::new();
    let mut inert = 0usize;
    for path in super::definition::config_files(&outbox_dir(root)) {
        let Ok(Some(v)) = read_json(&path) else {
            inert += 1;
            continue;
        };
        let Ok(rec) = serde_json::from_value::<OutboxRecord>(v) else {
            inert += 1;
            continue;
        };
        if path.file_stem().and_then(|s| s.to_str()) != Some(rec.outbox_id.as_str()) {
            inert += 1;
            continue;
        }
        let is_live = match rec.kind.as_str() {
            "reply" => true,
            _ => WorkflowId::parse(&rec.workflow_id)
                .ok()
                .and_then(|wf| super::files::load_state(root, &wf).ok().flatten())
                .is_some_and(|st| {
                    st.step_history
                        .iter()
                        .any(|r| outbox_id_of(r) == Some(rec.outbox_id.as_str()))
                }),
        };
        if is_live {
            live.push(rec);
        } else {
            inert += 1;
        }
    }
    live.sort_by(|a, b| a.created.cmp(&b.created));
    (live, inert)
}

/// Marks a record sent (after the server acknowledged it): a copy under `outbox/sent/`, then the
/// pending file removed. Repeating it is harmless.
pub fn mark_sent(root: &Root, rec: &OutboxRecord, stream_seq: u64) -> Result<()> {
    let from = record_path(root, &rec.outbox_id)?;
    let to = sent_dir(root).join(format!("{}.json", rec.outbox_id));
    let mut v = serde_json::to_value(rec).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("sent_at".into(), json!(now_ts()));
        m.insert("stream_seq".into(), json!(stream_seq));
    }
    write_json(root, &to, &v)?;
    if from.exists() {
        super::files::remove_file(root, &from)?;
    }
    Ok(())
}

/// Gives up on a record the bridge could not publish: it is kept with the reason as a dead letter
/// (`conductor/bridge/dead/outbox_{id}.json`), then the pending file is removed. Repeating it is
/// harmless.
pub fn give_up(root: &Root, rec: &OutboxRecord, reason: &str, attempts: u64) -> Result<()> {
    let from = record_path(root, &rec.outbox_id)?;
    let to = root
        .bridge_dead_dir()
        .join(format!("outbox_{}.json", rec.outbox_id));
    write_json(
        root,
        &to,
        &json!({
            "outbox_id": rec.outbox_id, "subject": rec.subject, "reason": reason,
            "attempts": attempts, "dead_at": now_ts(), "record": rec,
        }),
    )?;
    if from.exists() {
        super::files::remove_file(root, &from)?;
    }
    Ok(())
}

/// `conductor/bridge/retry/`: operators' requests that the bridge try a waiting record now.
pub(crate) fn retry_dir(root: &Root) -> std::path::PathBuf {
    root.bridge_dir()
        .join(crate::store::layout::BRIDGE_RETRY_DIR)
}

/// Most retry requests the bridge takes in one round (the rest wait for the next).
const MAX_RETRY_REQUESTS: usize = 1000;

/// The operators' retry requests waiting for the bridge: the outbox id each names (from the file
/// name, which must be an outbox id) and the file, at most [`MAX_RETRY_REQUESTS`]. A file whose name
/// is no outbox id is left out (and never read).
pub fn retry_requests(root: &Root) -> Vec<(String, std::path::PathBuf)> {
    super::definition::config_files(&retry_dir(root))
        .into_iter()
        .filter_map(|p| {
            let id = p.file_stem()?.to_str()?.to_owned();
            (p.extension().is_some_and(|e| e == "json") && id_ok(&id).is_ok()).then_some((id, p))
        })
        .take(MAX_RETRY_REQUESTS)
        .collect()
}

/// Removes a retry request the bridge has taken (one outside `conductor/bridge/retry/` is refused).
pub fn take_retry_request(root: &Root, path: &std::path::Path) -> Result<()> {
    if path.parent() != Some(retry_dir(root).as_path()) {
        return Err(Error::refused(format!(
            "{} is not a retry request",
            path.display()
        )));
    }
    files::remove_file(root, path)
}

/// The record `id` as it waits in the outbox; refused with where it went when it no longer waits.
fn waiting_record(root: &Root, id: &str) -> Result<OutboxRecord> {
    let path = record_path(root, id)?;
    let found = read_json(&path)?.map(serde_json::from_value::<OutboxRecord>);
    match found {
        Some(Ok(r)) if r.outbox_id == id => Ok(r),
        Some(Ok(r)) => Err(Error::refused(format!(
            "conductor/outbox/{id}.json names another record ({:?}); not acted on",
            r.outbox_id
        ))),
        Some(Err(e)) => Err(Error::refused(format!(
            "conductor/outbox/{id}.json is not an outbox record: {e}"
        ))),
        None => {
            let dead = root.bridge_dead_dir().join(format!("outbox_{id}.json"));
            let gone = if sent_dir(root).join(format!("{id}.json")).is_file() {
                "it was sent (conductor/outbox/sent/)".to_owned()
            } else if dead.is_file() {
                format!("it was dead-lettered (conductor/bridge/dead/outbox_{id}.json)")
            } else {
                "no record has that id (`pantheon bridge status` lists the waiting ones)".to_owned()
            };
            Err(Error::not_found(format!(
                "no outbox record {id} is waiting: {gone}"
            )))
        }
    }
}

/// True when a bridge runs on this root (its status file was written within
/// [`BRIDGE_SILENT_AFTER`]).
fn bridge_running(root: &Root) -> bool {
    let updated = read_json(&root.bridge_dir().join("status.json"))
        .ok()
        .flatten()
        .and_then(|v| v.get("updated").and_then(Value::as_str).map(str::to_owned));
    updated
        .as_deref()
        .and_then(crate::store::time::parse_ts)
        .is_some_and(|t| {
            let age = chrono::Utc::now().signed_duration_since(t);
            age <= BRIDGE_SILENT_AFTER && -age <= BRIDGE_SILENT_AFTER
        })
}

impl Conductor {
    /// Asks the bridge to try waiting record `id` again now (its backoff and give-up clock start
    /// over): a request file under `conductor/bridge/retry/` that a running bridge takes within a
    /// second. Refused when no such record waits.
    pub(crate) fn retry_outbox_unjournaled(
        &self,
        id: &str,
    ) -> Result<super::results::OutboxActResult> {
        let root = self.root();
        let rec = waiting_record(root, id)?;
        let path = retry_dir(root).join(format!("{id}.json"));
        files::refuse_unconfined(root, std::slice::from_ref(&path))?;
        write_json(
            root,
            &path,
            &json!({"outbox_id": id, "requested_at": now_ts(), "by": self.origin().actor}),
        )?;
        Ok(super::results::OutboxActResult {
            status: super::results::OutboxActStatus::RetryRequested,
            outbox_id: rec.outbox_id,
            workflow_id: rec.workflow_id,
            subject: rec.subject,
            dead_letter: None,
            bridge_running: bridge_running(root),
        })
    }

    /// Gives up waiting record `id` by hand: kept as a dead letter
    /// (`conductor/bridge/dead/outbox_{id}.json`) with `reason`, then removed from the outbox, so it
    /// is never published. Refused when no such record waits, or the reason is not free text (1 to
    /// 512 bytes).
    pub(crate) fn discard_outbox_unjournaled(
        &self,
        id: &str,
        reason: &str,
    ) -> Result<super::results::OutboxActResult> {
        crate::store::ids::check_free_text("reason", reason)?;
        let root = self.root();
        let rec = waiting_record(root, id)?;
        let why = format!("discarded by {}: {reason}", self.origin().actor);
        give_up(root, &rec, &why, 0)?;
        Ok(super::results::OutboxActResult {
            status: super::results::OutboxActStatus::Discarded,
            outbox_id: rec.outbox_id,
            workflow_id: rec.workflow_id,
            subject: rec.subject,
            dead_letter: Some(format!("conductor/bridge/dead/outbox_{id}.json")),
            bridge_running: bridge_running(root),
        })
    }
}

/// What became of a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplyOutcome {
    /// `applied` (the await_ack step completed), `kept` (the step is not reached yet) or `duplicate`.
    pub status: ReplyStatus,
    /// The workflow the reply belongs to.
    pub workflow_id: String,
    /// The workflow's status after the reply.
    pub state_status: WorkflowStatus,
}

impl Conductor {
    /// Takes a reply to one of this root's requests: kept until the workflow's await_ack step takes
    /// it, then the step completes and the workflow moves on. Idempotent by `reply_id`.
    pub(crate) fn receive_reply(&self, reply: &Reply) -> Result<ReplyOutcome> {
        let root = self.root();
        let wf = WorkflowId::parse(&reply.workflow_id)?;
        let kept_path = reply_path(root, &reply.in_reply_to)?;
        id_ok(&reply.reply_id)?;
        let _lock = FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
        let Some(mut st) = files::load_state(root, &wf)? else {
            return Err(Error::not_found(format!(
                "reply {} names workflow {wf}, which this root does not have",
                reply.reply_id
            )));
        };
        let outcome = |status: ReplyStatus, st: &WorkflowState| ReplyOutcome {
            status,
            workflow_id: wf.to_string(),
            state_status: st.status.clone(),
        };
        if !st
            .step_history
            .iter()
            .any(|r| outbox_id_of(r) == Some(reply.in_reply_to.as_str()))
        {
            return Err(Error::refused(format!(
                "reply {} answers {}, which workflow {wf} never published",
                reply.reply_id, reply.in_reply_to
            )));
        }
        if st
            .step_history
            .iter()
            .any(|r| r.extra.get("in_reply_to").and_then(Value::as_str) == Some(&reply.in_reply_to))
        {
            self.repair_tail(&wf, &st)?;
            return Ok(outcome(ReplyStatus::Duplicate, &st));
        }
        match read_json(&kept_path)?.and_then(|v| serde_json::from_value::<Reply>(v).ok()) {
            Some(k) if k.reply_id != reply.reply_id => {
                return Err(Error::refused(format!(
                    "request {} was already answered by {}; reply {} is not taken",
                    reply.in_reply_to, k.reply_id, reply.reply_id
                )));
            }
            Some(_) => {}
            None => {
                files::refuse_unconfined(root, std::slice::from_ref(&kept_path))?;
                write_json(root, &kept_path, reply)?;
            }
        }
        let reached = st.status == WorkflowStatus::WaitingForAck
            && st.extra.get("awaiting_reply").and_then(Value::as_str)
                == Some(reply.in_reply_to.as_str());
        if !reached {
            return Ok(outcome(ReplyStatus::Kept, &st));
        }
        let def_id = st.definition_id.clone().unwrap_or_default();
        let def = super::definition::find_definition(root, &def_id)
            .map_err(|e| Error::Corrupt {
                path: e.path,
                message: format!("workflow definition does not load: {}", e.message),
            })?
            .ok_or_else(|| {
                Error::not_found(format!("workflow {wf}'s definition {def_id:?} is gone"))
            })?;
        advance(root, &def, &wf, &mut st)?;
        files::write_state(root, &wf, &st)?;
        self.repair_tail(&wf, &st)?;
        Ok(outcome(ReplyStatus::Applied, &st))
    }
}

/// A bridge whose status file is older than this is counted as gone.
pub const BRIDGE_SILENT_AFTER: chrono::Duration = chrono::Duration::seconds(60);

#[cfg(test)]
mod tests {
    use super::*;

    const FLOW: &str = "workflow:\n  id: early\n  steps:\n    - {id: package, god: hephaestus}\n    - {id: notify, type: nats_publish, subject: \"p.b.in\"}\n    - {id: review, god: thoth}\n    - {id: await, god: hermes, action: await_ack}\n    - {id: announce, god: hermes}\n";

    fn handoff(hid: &str, from: &str, step: &str) -> Value {
        json!({"handoff_id": hid, "workflow_id": "wf_early", "from_god": from, "to_god": "hermes",
               "step": step, "context": {"summary": step, "decisions": [], "artifacts": []},
               "routing": {"workflow_definition": "early"}})
    }

    #[test]
    fn retry_and_discard_act_only_on_a_waiting_record_and_say_where_it_went() {
        let dir = tempfile::tempdir().unwrap();
        let c = Conductor::new(Root::at(dir.path()));
        c.init().unwrap();
        std::fs::write(c.root().workflows_dir().join("early.yaml"), FLOW).unwrap();
        c.submit_handoff(&handoff("hof_20261201_e00001", "hephaestus", "package"))
            .unwrap();
        let id = pending(c.root()).0[0].outbox_id.clone();
        for bad in ["../x", "OB_1", ""] {
            assert!(c.retry_outbox(bad).is_err(), "{bad:?}");
            assert!(c.discard_outbox(bad, "r").is_err(), "{bad:?}");
        }
        assert!(c.discard_outbox(&id, "").is_err(), "a reason is required");
        let r = c.retry_outbox(&id).unwrap();
        assert_eq!(
            r.status,
            super::super::results::OutboxActStatus::RetryRequested
        );
        assert!(!r.bridge_running);
        let asked = retry_requests(c.root());
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].0, id);
        take_retry_request(c.root(), &asked[0].1).unwrap();
        assert!(retry_requests(c.root()).is_empty());
        assert!(
            take_retry_request(c.root(), &c.root().state_dir().join("wf_early.json")).is_err(),
            "only a retry request is removed"
        );
        let r = c.discard_outbox(&id, "resent by hand").unwrap();
        assert_eq!(r.status, super::super::results::OutboxActStatus::Discarded);
        assert!(pending(c.root()).0.is_empty());
        let e = c.retry_outbox(&id).unwrap_err().to_string();
        assert!(e.contains("dead-lettered"), "{e}");
        let e = c.discard_outbox("ob_nothing", "r").unwrap_err().to_string();
        assert!(e.contains("no record has that id"), "{e}");
    }

    #[test]
    fn a_reply_before_its_await_step_is_kept_and_taken_when_the_step_is_reached() {
        let dir = tempfile::tempdir().unwrap();
        let c = Conductor::new(Root::at(dir.path()));
        c.init().unwrap();
        std::fs::write(c.root().workflows_dir().join("early.yaml"), FLOW).unwrap();
        c.submit_handoff(&handoff("hof_20261201_e00001", "hephaestus", "package"))
            .unwrap();
        let wf = WorkflowId::parse("wf_early").unwrap();
        let st = files::load_state(c.root(), &wf).unwrap().unwrap();
        assert_eq!(st.current_step.as_deref(), Some("review"));
        let (live, _) = pending(c.root());
        assert_eq!(live.len(), 1);
        let reply = Reply {
            reply_id: "rp_1".into(),
            in_reply_to: live[0].outbox_id.clone(),
            workflow_id: "wf_early".into(),
            from_pantheon: "b".into(),
            status: "completed".into(),
            message: "done over there".into(),
            ..Default::default()
        };
        assert_eq!(c.receive_reply(&reply).unwrap().status, ReplyStatus::Kept);
        assert_eq!(c.receive_reply(&reply).unwrap().status, ReplyStatus::Kept);
        let other = Reply {
            reply_id: "rp_2".into(),
            ..reply.clone()
        };
        assert!(
            c.receive_reply(&other).is_err(),
            "a second answer is refused"
        );
        c.submit_handoff(&handoff("hof_20261201_e00002", "thoth", "review"))
            .unwrap();
        let st = files::load_state(c.root(), &wf).unwrap().unwrap();
        assert_eq!(st.current_step.as_deref(), Some("announce"), "{st:?}");
        let taken = st
            .step_history
            .iter()
            .filter(|r| r.step_id == "await")
            .count();
        assert_eq!(taken, 1);
        assert_eq!(
            c.receive_reply(&reply).unwrap().status,
            ReplyStatus::Duplicate
        );
        let announce = c
            .root()
            .inbox_dir(&crate::store::GodName::parse("hermes").unwrap());
        assert_eq!(std::fs::read_dir(announce).unwrap().count(), 1);
    }
}
