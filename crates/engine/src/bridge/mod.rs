//! The bridge's engine side (docs/NATS.md): the wire format of messages between pantheons, inbound
//! requests turned into handoffs, replies collected from acks, dead letters and the status file.
//! No network and no async here; `pantheon bridge` (src/bridge/) moves the bytes.

pub(crate) mod pauses;
pub(crate) mod peer;
pub(crate) mod refusal;
pub(crate) mod status;
pub(crate) mod track;

pub(crate) use peer::{EnvelopeKind, Peer, PeerError, Peers};
pub(crate) use refusal::WireError;
pub use status::{
    Status, StuckRecord, TrackCounts, load_status, read_status, status_path, write_status,
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::conductor::outbox::{self, OutboxRecord, Reply, derive_handoff_id, derive_hex};
use crate::conductor::route::{INBOUND_MARK, inbound_peer};
use crate::conductor::{AckStatus, Conductor, SubmitResult, files, subject};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{Root, WorkflowId, encode_key, is_valid_name};

/// Largest message accepted from the wire, in bytes.
pub(crate) const MAX_MESSAGE: usize = 1024 * 1024;
/// Version of the wire format.
pub(crate) const WIRE_VERSION: u64 = 1;

/// `conductor/bridge/`: the bridge's own files (inbound ledger, dead letters, status).
pub fn bridge_dir(root: &Root) -> std::path::PathBuf {
    root.bridge_dir()
}

/// `conductor/bridge/dead/`: messages the bridge refused (inbound and shared-track lines), with why.
pub fn dead_dir(root: &Root) -> std::path::PathBuf {
    root.bridge_dead_dir()
}

/// The directories whose files make up the bridge's picture in the console (status, cursors, dead
/// letters, the outbox and its sent records), for a watcher.
pub fn watched_dirs(root: &Root) -> Vec<std::path::PathBuf> {
    vec![
        bridge_dir(root),
        dead_dir(root),
        track::cursors_dir(root),
        outbox::outbox_dir(root),
        outbox::sent_dir(root),
    ]
}

/// The subject a pantheon's replies come back on.
pub fn reply_subject(pantheon: &str) -> String {
    format!("pantheon.{pantheon}.in.reply")
}

/// The subject a pantheon's bridge takes approval-link decisions on (`bridge --approvals`): a
/// peer or a phone relay publishes a token there and gets the receipt as the reply.
pub fn approve_subject(pantheon: &str) -> String {
    format!("pantheon.{pantheon}.approve")
}

/// A message between pantheons (the JSON body on the wire).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Wire {
    /// The wire format's version; a receiver refuses a version it does not know.
    pub pantheon_bridge: u64,
    /// `request` or `reply`.
    pub kind: String,
    /// The message id (the sender's outbox id; also `Nats-Msg-Id`).
    pub id: String,
    /// The sending pantheon's name.
    pub from_pantheon: String,
    /// The sender's workflow id.
    pub workflow_id: String,
    /// The sender's step that published it.
    pub step: String,
    /// The message text.
    pub message: String,
    /// The JSON payload.
    pub payload: Value,
    /// When the sender created it (RFC 3339).
    pub created: String,
    /// For a request: the subject to send the reply to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// For a reply: the id of the request it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// For a reply: the ack status (`accepted`, `completed`, `rejected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The `traceparent` of the sender's publish span (also sent as a NATS header): the receiving
    /// workflow joins the sender's trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The envelope it came in (never on the wire: a received message's origin).
    #[serde(skip)]
    pub envelope: EnvelopeKind,
    /// The god of this root the origin's envelope addressed (`"target": "hephaestus"`), when its
    /// `target` is not this pantheon (never on the wire; checked against the root's gods when taken).
    #[serde(skip)]
    pub to_god: Option<String>,
}

/// The wire form of an outbox record sent by pantheon `from`.
pub(crate) fn to_wire(rec: &OutboxRecord, from: &str) -> Wire {
    Wire {
        pantheon_bridge: WIRE_VERSION,
        kind: rec.kind.clone(),
        id: rec.outbox_id.clone(),
        from_pantheon: from.to_owned(),
        workflow_id: rec.workflow_id.clone(),
        step: rec.step.clone(),
        message: rec.message.clone(),
        payload: rec.payload.clone(),
        created: rec.created.clone(),
        reply_to: (rec.kind == "request").then(|| reply_subject(from)),
        in_reply_to: rec.in_reply_to.clone(),
        status: rec.status.clone(),
        traceparent: rec.traceparent.clone(),
        envelope: EnvelopeKind::Pantheon,
        to_god: None,
    }
}

/// The body of an outbox record for `peer` (none: our envelope): our wire format, or the origin's
/// envelope `{id, type, source, target, timestamp, workflow_id, step_id, context}` with the text
/// under `context.summary`, the payload under `context.payload`, and for a reply
/// `context.in_reply_to` and `context.status`.
pub fn encode(rec: &OutboxRecord, from: &str, peer: Option<&Peer>) -> Vec<u8> {
    let value = match peer {
        Some(p) if p.envelope == EnvelopeKind::Origin => {
            let mut context = Map::new();
            context.insert("summary".into(), json!(rec.message));
            if !rec.payload.is_null() {
                context.insert("payload".into(), rec.payload.clone());
            }
            if rec.kind == "reply" {
                context.insert("in_reply_to".into(), json!(rec.in_reply_to));
                context.insert("status".into(), json!(rec.status));
            } else {
                // Where the peer's reply is expected: its own `subspace.{peer}.outgoing.{us}`.
                context.insert(
                    "reply_to".into(),
                    json!(format!("subspace.{}.outgoing.{from}", p.name)),
                );
            }
            json!({
                "id": rec.outbox_id, "type": rec.kind, "source": from, "target": p.name,
                "timestamp": rec.created, "workflow_id": rec.workflow_id, "step_id": rec.step,
                "context": context,
            })
        }
        _ => serde_json::to_value(to_wire(rec, from)).unwrap_or(Value::Null),
    };
    crate::store::json_text(&value, false)
}

/// Whether an outbox record may go on the wire, checked again when it is sent (a record is a file in
/// the root, which anyone may have edited since it was written): its subject is literal and never
/// under `$` (a `$JS.API.STREAM.PURGE.X` "message" would purge stream X with this bridge's
/// credentials), and a reply goes only to a reply subject of its peer. The error is the reason the
/// record is dead-lettered instead.
pub fn check_sendable(rec: &OutboxRecord, cfg: &Inbound) -> std::result::Result<(), WireError> {
    let refused = |why: WireError| WireError::NotPublished(Box::new(why));
    subject::check_publish_subject(&rec.subject).map_err(|e| refused(e.into()))?;
    if rec.kind == "reply" {
        let peer = rec
            .extra
            .get("peer")
            .and_then(Value::as_str)
            .unwrap_or_default();
        cfg.peers
            .reply_target(&cfg.name, peer, Some(&rec.subject))
            .map_err(|e| refused(e.into()))?;
    }
    Ok(())
}

/// Parses and checks a message from the wire; the error is the reason it is dead-lettered.
pub(crate) fn parse_wire(data: &[u8]) -> std::result::Result<Wire, WireError> {
    if data.len() > MAX_MESSAGE {
        return Err(WireError::TooLarge(data.len()));
    }
    let w: Wire = serde_json::from_slice(data).map_err(|e| WireError::NotBridge(e.to_string()))?;
    if w.pantheon_bridge != WIRE_VERSION {
        return Err(WireError::Version(w.pantheon_bridge));
    }
    let id_ok = |s: &str| {
        (1..=80).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !id_ok(&w.id) {
        return Err(WireError::Id(w.id));
    }
    if !is_valid_name(&w.from_pantheon) {
        return Err(WireError::From(w.from_pantheon));
    }
    WorkflowId::parse(&w.workflow_id).map_err(|e| WireError::WorkflowId(e.to_string()))?;
    if w.message.len() > 64 * 1024 {
        return Err(WireError::TextTooLong);
    }
    match w.kind.as_str() {
        "request" => {
            if !is_valid_name(&w.step) {
                return Err(WireError::Step(w.step));
            }
            if let Some(r) = &w.reply_to {
                subject::check_subject(r)?;
            }
        }
        "reply" => {
            if !w.in_reply_to.as_deref().is_some_and(id_ok) {
                return Err(WireError::NoInReplyTo);
            }
            match w.status.as_deref() {
                Some("accepted" | "completed" | "rejected") => {}
                other => {
                    return Err(WireError::ReplyStatus(other.map(str::to_owned)));
                }
            }
        }
        other => return Err(WireError::Kind(other.to_owned())),
    }
    Ok(w)
}

/// What the operator lets in.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    /// This pantheon's name.
    pub name: String,
    /// Peer pantheons whose messages are taken (empty: none), with their transport and envelope.
    pub peers: Peers,
    /// Subject filters a message must match to be taken.
    pub subjects: Vec<String>,
    /// The god inbound requests are dispatched to.
    pub god: String,
    /// Hold inbound requests for approval.
    pub hold: bool,
}

/// Fills the peers' transport, envelope and reply subject from `bridge.peers` of
/// `conductor/config.yaml` where the flags left them open (see `Peers::apply_config`); returns the
/// warnings (an unreadable file is one).
pub fn configure_peers(root: &Root, peers: &mut Peers) -> Vec<String> {
    match crate::store::settings::read_config(root) {
        Ok(doc) => peers.apply_config(doc.as_ref()),
        Err(e) => vec![format!("conductor/config.yaml: {e}; bridge.peers not read")],
    }
}

/// Parses a message from the wire in either envelope: ours (`pantheon_bridge: 1`) or, from a peer
/// declared with it, the origin's. The error is the reason it is dead-lettered, said so a person
/// knows the fix.
pub fn parse_message(data: &[u8], cfg: &Inbound) -> std::result::Result<Wire, WireError> {
    if data.len() > MAX_MESSAGE {
        return Err(WireError::TooLarge(data.len()));
    }
    let v: Value = serde_json::from_slice(data).map_err(|e| WireError::NotJson(e.to_string()))?;
    let Some(obj) = v.as_object() else {
        return Err(WireError::NotObject);
    };
    if obj.contains_key("pantheon_bridge") {
        return parse_wire(data);
    }
    if !peer::looks_like_origin(obj) {
        return Err(WireError::NoEnvelope);
    }
    let source = obj
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(p) = cfg.peers.get(source) else {
        return Err(WireError::UnknownSource(source.to_owned()));
    };
    if p.envelope != EnvelopeKind::Origin {
        return Err(WireError::NotOriginPeer(source.to_owned()));
    }
    from_origin(obj, &cfg.name)
}

/// The origin's envelope as a [`Wire`]: `source` is the sender, `step_id` the step, the whole
/// `context` the payload (its `summary` or `message` the text); `type: reply` with
/// `context.in_reply_to` and `context.status` answers one of our requests.
fn from_origin(obj: &Map<String, Value>, me: &str) -> std::result::Result<Wire, WireError> {
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let id = text("id");
    if !((1..=80).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    {
        return Err(WireError::OriginId(id.to_owned()));
    }
    // The origin addresses this pantheon, or one of its gods (its own handoff doc does).
    let target = text("target");
    let to_god = if target.is_empty() || target == me {
        None
    } else if is_valid_name(target) {
        Some(target.to_owned())
    } else {
        return Err(WireError::Target {
            target: target.to_owned(),
            me: me.to_owned(),
        });
    };
    let kind = text("type");
    if kind.len() > 64 {
        return Err(WireError::TypeTooLong);
    }
    let context = match obj.get("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(WireError::ContextNotObject),
    };
    let ctext = |k: &str| context.get(k).and_then(Value::as_str).unwrap_or_default();
    let message = [ctext("summary"), ctext("message")]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or_default()
        .to_owned();
    if message.len() > 64 * 1024 {
        return Err(WireError::TextTooLong);
    }
    // The sender's workflow id comes back in the reply (and names ours in a reply to us).
    let workflow_id = text("workflow_id");
    WorkflowId::parse(workflow_id).map_err(|e| WireError::OriginWorkflowId {
        id: workflow_id.to_owned(),
        cause: e.to_string(),
    })?;
    let step_id = text("step_id");
    let mut w = Wire {
        pantheon_bridge: WIRE_VERSION,
        id: id.to_owned(),
        from_pantheon: text("source").to_owned(),
        workflow_id: workflow_id.to_owned(),
        message,
        created: text("timestamp").chars().take(64).collect(),
        envelope: EnvelopeKind::Origin,
        to_god,
        ..Default::default()
    };
    if kind == "reply" {
        w.kind = "reply".into();
        w.in_reply_to = Some(ctext("in_reply_to").to_owned());
        w.status = Some(ctext("status").to_owned());
        w.payload = context.get("payload").cloned().unwrap_or(Value::Null);
        if !ctext("in_reply_to")
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            || ctext("in_reply_to").is_empty()
        {
            return Err(WireError::OriginNoInReplyTo);
        }
        if !matches!(ctext("status"), "accepted" | "completed" | "rejected") {
            return Err(WireError::OriginReplyStatus(ctext("status").to_owned()));
        }
    } else {
        w.kind = "request".into();
        w.step = if is_valid_name(step_id) {
            step_id.to_owned()
        } else if is_valid_name(kind) {
            kind.to_owned()
        } else {
            "request".into()
        };
        w.payload = Value::Object(context);
    }
    Ok(w)
}

/// The outcome of one inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// A request became a handoff (status `dispatched`, `awaiting_approval` or `duplicate`).
    Request {
        /// The local workflow the request started (or had started).
        workflow_id: String,
        /// The submit status.
        status: String,
    },
    /// A reply was applied, kept or was a duplicate.
    Reply {
        /// The local workflow the reply belongs to.
        workflow_id: String,
        /// `applied`, `kept` or `duplicate`.
        status: crate::conductor::results::ReplyStatus,
    },
}

/// One entry of the inbound ledger (`conductor/bridge/inbound/{id}.json`): what to reply to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LedgerEntry {
    /// The inbound message's id (deduplicates redeliveries).
    pub message_id: String,
    /// The pantheon that sent it.
    pub from_pantheon: String,
    /// The subject it arrived on.
    pub subject: String,
    /// The sender's workflow id.
    pub remote_workflow_id: String,
    /// The local workflow the request started.
    pub workflow_id: String,
    /// The local handoff the request became.
    pub handoff_id: String,
    /// Where to send the reply, if the sender asked for one.
    pub reply_to: Option<String>,
    /// When it arrived (RFC 3339).
    pub received_at: String,
    /// The last ack status replied, so a repeat is not sent twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replied: Option<String>,
}

fn ledger_path(root: &Root, id: &str) -> std::path::PathBuf {
    bridge_dir(root)
        .join("inbound")
        .join(format!("{}.json", encode_key(id)))
}

/// Checks the allowlist, and that a request's `reply_to` is one of its sender's reply subjects (a
/// reply is published with this bridge's credentials: never into `$JS.API…`, `$KV…` or another
/// pantheon's subjects); the error is the reason.
pub fn admit(cfg: &Inbound, subject: &str, w: &Wire) -> std::result::Result<(), WireError> {
    if !cfg.peers.allows(&w.from_pantheon) {
        return Err(PeerError::NotAllowed(w.from_pantheon.clone()).into());
    }
    if !cfg.subjects.iter().any(|f| subject::matches(f, subject)) {
        return Err(WireError::NotOnAllowlist(subject.to_owned()));
    }
    if w.kind == "request" && w.envelope == EnvelopeKind::Pantheon {
        cfg.peers
            .reply_target(&cfg.name, &w.from_pantheon, w.reply_to.as_deref())?;
    }
    Ok(())
}

/// Turns an admitted message into local state: a request becomes a handoff dispatched to the
/// configured god (or held); a reply goes to `Conductor::receive_reply`. Idempotent by message id.
pub fn take(c: &Conductor, cfg: &Inbound, subject: &str, w: &Wire) -> Result<Taken> {
    if w.kind == "reply" {
        let out = c.receive_reply(&Reply {
            reply_id: w.id.clone(),
            in_reply_to: w.in_reply_to.clone().unwrap_or_default(),
            workflow_id: w.workflow_id.clone(),
            from_pantheon: w.from_pantheon.clone(),
            status: w.status.clone().unwrap_or_default(),
            message: w.message.clone(),
            payload: w.payload.clone(),
            received_at: now_ts(),
        })?;
        return Ok(Taken::Reply {
            workflow_id: out.workflow_id,
            status: out.status,
        });
    }
    let root = c.root();
    let key = format!("{}/{}", w.from_pantheon, w.id);
    let wf = format!("wf_nats_{}", &derive_hex(&[&key])[..20]);
    let hid = derive_handoff_id(&[&key]);
    let ledger = ledger_path(root, &w.id);
    let existing: Option<LedgerEntry> =
        read_json(&ledger)?.and_then(|v| serde_json::from_value(v).ok());
    let entry = match existing {
        Some(e) if e.from_pantheon == w.from_pantheon => e,
        Some(e) => {
            return Err(Error::refused(format!(
                "message id {} was already taken from {}; refused from {}",
                w.id, e.from_pantheon, w.from_pantheon
            )));
        }
        None => {
            let e = LedgerEntry {
                message_id: w.id.clone(),
                from_pantheon: w.from_pantheon.clone(),
                subject: subject.to_owned(),
                remote_workflow_id: w.workflow_id.clone(),
                workflow_id: wf.clone(),
                handoff_id: hid.clone(),
                reply_to: match w.envelope {
                    // The origin names no reply subject: its replies go to the peer's.
                    EnvelopeKind::Origin => cfg
                        .peers
                        .get(&w.from_pantheon)
                        .map(|p| p.default_reply_subject(&cfg.name)),
                    EnvelopeKind::Pantheon => w.reply_to.clone(),
                },
                received_at: now_ts(),
                replied: None,
            };
            write_json(root, &ledger, &e)?;
            e
        }
    };
    let mut context = Map::new();
    context.insert(
        "summary".into(),
        json!(if w.message.is_empty() {
            format!("request {} from {}", w.step, w.from_pantheon)
        } else {
            w.message.clone()
        }),
    );
    // The origin's own `context.decisions` and `context.artifacts` are the dispatch's.
    for key in ["decisions", "artifacts"] {
        let own = match w.envelope {
            EnvelopeKind::Origin => origin_list(&w.payload, key),
            EnvelopeKind::Pantheon => Vec::new(),
        };
        context.insert(key.into(), json!(own));
    }
    if !w.payload.is_null() {
        context.insert("payload".into(), w.payload.clone());
    }
    context.insert(
        "nats".into(),
        json!({
            "message_id": w.id, "subject": subject, "from_pantheon": w.from_pantheon,
            "remote_workflow_id": w.workflow_id, "reply_to": w.reply_to,
        }),
    );
    let to_god = dispatch_god(root, cfg, w)?;
    let mut handoff = json!({
        "handoff_id": entry.handoff_id,
        "workflow_id": entry.workflow_id,
        "from_god": w.from_pantheon,
        "to_god": to_god,
        "step": w.step,
        "context": context,
    });
    // The sender's trace goes on here (a malformed one is left out, never refused).
    if let Some(tp) = w
        .traceparent
        .as_deref()
        .filter(|t| crate::trace::TraceContext::parse(t).is_some())
    {
        handoff["traceparent"] = json!(tp);
    }
    let hold = cfg.hold.then(|| {
        format!(
            "inbound from pantheon {} (bridge holds inbound work)",
            w.from_pantheon
        )
    });
    let from = crate::conductor::submit::SubmitFrom {
        hold,
        inbound_peer: Some(w.from_pantheon.clone()),
    };
    let r: SubmitResult = c.submit_handoff_held(&handoff, from)?;
    // A workflow this request started before the mark was part of the submit gets it now.
    mark_inbound(root, &entry.workflow_id, &w.from_pantheon)?;
    Ok(Taken::Request {
        workflow_id: r.workflow_id.to_string(),
        status: r.status.to_string(),
    })
}

/// The god an inbound request is dispatched to: the god of this root the origin's `target` names
/// (one with an inbox), else `--god`; refused when the target names no god of this root.
fn dispatch_god(root: &Root, cfg: &Inbound, w: &Wire) -> Result<String> {
    let Some(g) = &w.to_god else {
        return Ok(cfg.god.clone());
    };
    if files::god_dirs(&root.pending_root())
        .iter()
        .any(|k| k.as_str() == g)
    {
        return Ok(g.clone());
    }
    Err(Error::refused(format!(
        "target {g:?} is neither this pantheon ({}) nor a god of this root (gods: {})",
        cfg.name,
        files::known_gods(root).unwrap_or_else(|| "none".into())
    )))
}

/// Most items taken from the origin's `context.decisions` or `context.artifacts`.
const MAX_ORIGIN_ITEMS: usize = 1000;

/// The origin's `context.KEY` list as the dispatch's own: its strings as they are, any other item
/// as its JSON text (at most [`MAX_ORIGIN_ITEMS`]; what is not a list gives none).
fn origin_list(context: &Value, key: &str) -> Vec<String> {
    context
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_ORIGIN_ITEMS)
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// Marks the workflow an inbound request started (under its lock; repeating it is harmless), so
/// that the handoff back to the peer finishes it (see `conductor::route::route`).
fn mark_inbound(root: &Root, wf: &str, peer: &str) -> Result<()> {
    let wf = WorkflowId::parse(wf)?;
    let _lock = crate::store::lock::FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
    let Some(mut st) = files::load_state(root, &wf)? else {
        return Ok(());
    };
    if inbound_peer(&st) == Some(peer) {
        return Ok(());
    }
    st.extra
        .insert(INBOUND_MARK.into(), json!({ "peer": peer }));
    files::write_state(root, &wf, &st)
}

/// Inbound requests still waiting for a god's ack, by local workflow. The bridge reads every ledger
/// entry once ([`AwaitingReplies::scan`]), then looks only at the workflows whose state changed, so
/// its idle cost does not grow with the number of unanswered requests.
#[derive(Debug, Default, Clone)]
pub struct AwaitingReplies {
    by_wf: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl AwaitingReplies {
    /// Every ledger entry not yet answered that has somewhere to answer to.
    pub fn scan(root: &Root) -> Self {
        let mut out = Self::default();
        for path in crate::conductor::definition::config_files(&bridge_dir(root).join("inbound")) {
            let Ok(Some(v)) = read_json(&path) else {
                continue;
            };
            let Ok(e) = serde_json::from_value::<LedgerEntry>(v) else {
                continue;
            };
            if e.replied.is_none() && e.reply_to.is_some() {
                out.by_wf.insert(e.workflow_id, path);
            }
        }
        out
    }

    /// Adds the entry of message `id` (just taken) when it waits for a reply; returns its workflow.
    pub fn note(&mut self, root: &Root, id: &str) -> Option<String> {
        let path = ledger_path(root, id);
        if let Ok(Some(v)) = read_json(&path)
            && let Ok(e) = serde_json::from_value::<LedgerEntry>(v)
            && e.replied.is_none()
            && e.reply_to.is_some()
        {
            self.by_wf.insert(e.workflow_id.clone(), path);
            return Some(e.workflow_id);
        }
        None
    }

    /// How many requests wait.
    pub fn len(&self) -> usize {
        self.by_wf.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.by_wf.is_empty()
    }

    /// True when the workflow is one of the waiting requests'.
    pub fn waits(&self, wf: &str) -> bool {
        self.by_wf.contains_key(wf)
    }

    /// Every waiting workflow.
    pub fn workflows(&self) -> Vec<String> {
        self.by_wf.keys().cloned().collect()
    }

    /// Looks at the given workflows: writes a reply record into the outbox for each whose dispatch a
    /// god has acked (accepted, completed or rejected), on the sender's reply subject (only one of
    /// its peer's, see `Peers::reply_target`; another is dead-lettered with the reason). Returns
    /// how many were written, and what was refused.
    pub fn collect(
        &mut self,
        c: &Conductor,
        cfg: &Inbound,
        wfs: &[String],
    ) -> Result<(usize, Vec<String>)> {
        let mut written = 0;
        let mut refused = Vec::new();
        for wf in wfs {
            let Some(path) = self.by_wf.get(wf).cloned() else {
                continue;
            };
            match reply_one(c, cfg, &path)? {
                ReplyStep::Waiting => {}
                ReplyStep::Done(n) => {
                    written += n;
                    self.by_wf.remove(wf);
                }
                ReplyStep::Refused(why) => {
                    refused.push(why);
                    self.by_wf.remove(wf);
                }
            }
        }
        Ok((written, refused))
    }
}

enum ReplyStep {
    Waiting,
    Done(usize),
    Refused(String),
}

fn reply_one(c: &Conductor, cfg: &Inbound, path: &std::path::Path) -> Result<ReplyStep> {
    let root = c.root();
    let Some(mut e) = read_json(path)?.and_then(|v| serde_json::from_value::<LedgerEntry>(v).ok())
    else {
        return Ok(ReplyStep::Done(0));
    };
    if e.replied.is_some() || e.reply_to.is_none() {
        return Ok(ReplyStep::Done(0));
    }
    let Ok(wf) = WorkflowId::parse(&e.workflow_id) else {
        return Ok(ReplyStep::Done(0));
    };
    let Some(st) = files::load_state(root, &wf)? else {
        return Ok(ReplyStep::Waiting);
    };
    let Some(ack) = st.acks.iter().find(|a| {
        a.handoff_id == e.handoff_id
            && matches!(
                a.status,
                AckStatus::Accepted | AckStatus::Completed | AckStatus::Rejected
            )
    }) else {
        return Ok(ReplyStep::Waiting);
    };
    let reply_to = match cfg
        .peers
        .reply_target(&cfg.name, &e.from_pantheon, e.reply_to.as_deref())
    {
        Ok(s) => s,
        Err(why) => {
            let why = format!(
                "reply to request {} from {} not sent: {why}",
                e.message_id, e.from_pantheon
            );
            let dead = dead_dir(root).join(format!("reply_{}.json", encode_key(&e.message_id)));
            write_json(
                root,
                &dead,
                &json!({"reason": why, "ledger": e, "dead_at": now_ts()}),
            )?;
            e.replied = Some("refused".into());
            write_json(root, path, &e)?;
            return Ok(ReplyStep::Refused(why));
        }
    };
    let id = format!(
        "rp_{}",
        &derive_hex(&[&e.from_pantheon, &e.message_id])[..24]
    );
    let mut extra = Map::new();
    extra.insert("peer".into(), json!(e.from_pantheon));
    let rec = OutboxRecord {
        outbox_id: id.clone(),
        kind: "reply".into(),
        workflow_id: e.remote_workflow_id.clone(),
        step: String::new(),
        subject: reply_to,
        message: ack.message.clone().unwrap_or_else(|| {
            format!("{} by {}", ack.status, ack.god.clone().unwrap_or_default())
        }),
        payload: Value::Null,
        created: now_ts(),
        in_reply_to: Some(e.message_id.clone()),
        status: Some(ack.status.to_string()),
        traceparent: None,
        extra,
    };
    let sent = outbox::sent_dir(root).join(format!("{id}.json"));
    if !sent.exists() {
        write_json(root, &outbox::record_path(root, &id)?, &rec)?;
    }
    e.replied = Some(id);
    write_json(root, path, &e)?;
    Ok(ReplyStep::Done(1))
}

/// Keeps a message that was refused (`conductor/bridge/dead/`), with why; never retried.
pub fn dead_letter(
    root: &Root,
    stream_seq: u64,
    subject: &str,
    reason: &str,
    data: &[u8],
) -> Result<()> {
    let keep = &data[..data.len().min(64 * 1024)];
    let path = dead_dir(root).join(format!("{stream_seq:012}.json"));
    write_json(
        root,
        &path,
        &json!({
            "stream_seq": stream_seq, "subject": subject, "reason": reason,
            "dead_at": now_ts(), "data": String::from_utf8_lossy(keep),
            "truncated": keep.len() < data.len(),
        }),
    )
}

/// Writes one of the bridge's own records (a dead letter of a shared track, a cursor) atomically under
/// `conductor/bridge/`; any other path is refused, so the bridge cannot write protocol files this way.
pub fn write_bridge_record(root: &Root, path: &std::path::Path, value: &Value) -> Result<()> {
    if !path.starts_with(bridge_dir(root)) {
        return Err(crate::error::Error::refused(format!(
            "{} is not under {}",
            path.display(),
            bridge_dir(root).display()
        )));
    }
    write_json(root, path, value)
}

/// Removes `user:password@` from a URL (or each of a comma-separated list) for display.
pub fn redact_url(url: &str) -> String {
    if url.contains(',') {
        return url.split(',').map(redact_url).collect::<Vec<_>>().join(",");
    }
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        (None, Some(at)) => url[at + 1..].to_owned(),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The origin's message shape (its publish code writes these keys).
    const ORIGIN_KEYS: [&str; 8] = [
        "id",
        "type",
        "source",
        "target",
        "timestamp",
        "workflow_id",
        "step_id",
        "context",
    ];

    #[test]
    fn wire_is_checked_and_urls_are_redacted() {
        let good = br#"{"pantheon_bridge":1,"kind":"request","id":"ob_1","from_pantheon":"konan","workflow_id":"wf_a","step":"notify","reply_to":"pantheon.konan.in.reply"}"#;
        assert!(parse_wire(good).is_ok());
        let bad_reply = br#"{"pantheon_bridge":1,"kind":"request","id":"ob_1","from_pantheon":"konan","workflow_id":"wf_a","step":"notify","reply_to":"pantheon.*.in"}"#;
        assert!(parse_wire(bad_reply).is_err());
        assert!(parse_wire(b"not json").is_err());
        assert!(parse_wire(&vec![b' '; MAX_MESSAGE + 1]).is_err());
        assert_eq!(redact_url("nats://u:secret@h:4222"), "nats://h:4222");
        assert_eq!(redact_url("nats://h:4222"), "nats://h:4222");
        // A message without the field is not "version 0": the reason names what it is not.
        let cfg = Inbound {
            name: "tallon".into(),
            peers: Peers::from_flags(&["konan".into()], &[]).unwrap(),
            ..Default::default()
        };
        let origin =
            br#"{"id":"a-1","type":"deploy","source":"konan","target":"tallon","context":{}}"#;
        let e = parse_message(origin, &cfg).unwrap_err();
        assert!(
            e.to_string()
                .contains("peer konan is not declared with the origin's envelope"),
            "{e}"
        );
        assert!(!e.to_string().contains("version 0"));
    }

    #[test]
    fn the_origins_envelope_round_trips_requests_and_replies() {
        let side = |me: &str, peer: &str| Inbound {
            name: me.into(),
            peers: Peers::from_flags(&[format!("{peer}:core:origin")], &[]).unwrap(),
            ..Default::default()
        };
        let (konan, tallon) = (side("konan", "tallon"), side("tallon", "konan"));
        let request = OutboxRecord {
            outbox_id: "ob_1".into(),
            kind: "request".into(),
            workflow_id: "wf_deploy_1".into(),
            step: "notify".into(),
            subject: "subspace.konan.outgoing.tallon".into(),
            message: "deploy please".into(),
            payload: json!({"feature_summary": "f"}),
            ..Default::default()
        };
        let body = encode(&request, "konan", konan.peers.get("tallon"));
        let v: Value = serde_json::from_slice(&body).unwrap();
        for k in ORIGIN_KEYS {
            assert!(v.get(k).is_some(), "{k} missing: {v}");
        }
        assert_eq!(v["context"]["reply_to"], "subspace.tallon.outgoing.konan");
        let w = parse_message(&body, &tallon).unwrap();
        assert_eq!(
            (w.kind.as_str(), w.from_pantheon.as_str()),
            ("request", "konan")
        );
        assert_eq!(w.payload["payload"]["feature_summary"], "f");
        assert_eq!(w.message, "deploy please");
        assert!(
            admit(
                &Inbound {
                    subjects: vec![">".into()],
                    ..tallon.clone()
                },
                "x.y",
                &w
            )
            .is_ok()
        );
        let reply = OutboxRecord {
            outbox_id: "rp_1".into(),
            kind: "reply".into(),
            workflow_id: "wf_deploy_1".into(),
            subject: "subspace.tallon.outgoing.konan".into(),
            message: "done".into(),
            in_reply_to: Some("ob_1".into()),
            status: Some("completed".into()),
            ..Default::default()
        };
        let body = encode(&reply, "tallon", tallon.peers.get("konan"));
        let w = parse_message(&body, &konan).unwrap();
        assert_eq!(w.kind, "reply");
        assert_eq!(w.in_reply_to.as_deref(), Some("ob_1"));
        assert_eq!(w.status.as_deref(), Some("completed"));
        // A target other than this pantheon names a god of it (checked against the root's gods
        // when taken); one that cannot be a name is refused here.
        let to_god = br#"{"id":"a-2","type":"deploy","source":"konan","target":"hephaestus","workflow_id":"wf_a"}"#;
        let w = parse_message(to_god, &tallon).unwrap();
        assert_eq!(w.to_god.as_deref(), Some("hephaestus"));
        let wrong = br#"{"id":"a-3","type":"deploy","source":"konan","target":"not a god","workflow_id":"wf_a"}"#;
        assert!(
            parse_message(wrong, &tallon)
                .unwrap_err()
                .to_string()
                .contains("neither this pantheon")
        );
        assert_eq!(
            redact_url("nats://a:s1@h:1,nats://tok@g:2"),
            "nats://h:1,nats://g:2"
        );
    }
}
