//! The bridge's engine side (docs/NATS.md): the wire format of messages between pantheons, inbound
//! requests turned into handoffs, replies collected from acks, dead letters and the status file.
//! No network and no async here; `pantheon bridge` (src/bridge/) moves the bytes.

pub mod subject;
pub mod track;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::conductor::outbox::{self, OutboxRecord, Reply, derive_handoff_id, derive_hex};
use crate::conductor::{AckStatus, Conductor, SubmitResult, files};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::read::read_json;
use crate::store::time::now_ts;
use crate::store::{Root, WorkflowId, encode_key, is_valid_name};

/// Largest message accepted from the wire, in bytes.
pub const MAX_MESSAGE: usize = 1024 * 1024;
/// Version of the wire format.
pub const WIRE_VERSION: u64 = 1;

/// `conductor/bridge/`: the bridge's own files (inbound ledger, dead letters, status).
pub fn bridge_dir(root: &Root) -> std::path::PathBuf {
    root.conductor.join("bridge")
}

/// `conductor/bridge/dead/`: messages the bridge refused (inbound and shared-track lines), with why.
pub fn dead_dir(root: &Root) -> std::path::PathBuf {
    bridge_dir(root).join("dead")
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
}

/// The wire form of an outbox record sent by pantheon `from`.
pub fn to_wire(rec: &OutboxRecord, from: &str) -> Wire {
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
    }
}

/// Parses and checks a message from the wire; the error is the reason it is dead-lettered.
pub fn parse_wire(data: &[u8]) -> std::result::Result<Wire, String> {
    if data.len() > MAX_MESSAGE {
        return Err(format!(
            "message is {} bytes; at most {MAX_MESSAGE}",
            data.len()
        ));
    }
    let w: Wire = serde_json::from_slice(data).map_err(|e| format!("not a bridge message: {e}"))?;
    if w.pantheon_bridge != WIRE_VERSION {
        return Err(format!(
            "pantheon_bridge version {} is not {WIRE_VERSION}",
            w.pantheon_bridge
        ));
    }
    let id_ok = |s: &str| {
        (1..=80).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !id_ok(&w.id) {
        return Err(format!("id {:?} is not a bridge message id", w.id));
    }
    if !is_valid_name(&w.from_pantheon) {
        return Err(format!("from_pantheon {:?} is not a name", w.from_pantheon));
    }
    WorkflowId::parse(&w.workflow_id).map_err(|e| e.to_string())?;
    if w.message.len() > 64 * 1024 {
        return Err("message text longer than 64 KiB".into());
    }
    match w.kind.as_str() {
        "request" => {
            if !is_valid_name(&w.step) {
                return Err(format!("step {:?} is not a name", w.step));
            }
            if let Some(r) = &w.reply_to {
                subject::check_subject(r)?;
            }
        }
        "reply" => {
            if !w.in_reply_to.as_deref().is_some_and(id_ok) {
                return Err("a reply needs in_reply_to, the id of the request".into());
            }
            match w.status.as_deref() {
                Some("accepted" | "completed" | "rejected") => {}
                other => {
                    return Err(format!(
                        "reply status {other:?} is not accepted, completed or rejected"
                    ));
                }
            }
        }
        other => return Err(format!("kind {other:?} is not request or reply")),
    }
    Ok(w)
}

/// What the operator lets in.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    /// This pantheon's name.
    pub name: String,
    /// Peer pantheons whose messages are taken (empty: none).
    pub peers: Vec<String>,
    /// Subject filters a message must match to be taken.
    pub subjects: Vec<String>,
    /// The god inbound requests are dispatched to.
    pub god: String,
    /// Hold inbound requests for approval.
    pub hold: bool,
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
        status: String,
    },
}

/// One entry of the inbound ledger (`conductor/bridge/inbound/{id}.json`): what to reply to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LedgerEntry {
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

/// Checks the allowlist; the error is the reason.
pub fn admit(cfg: &Inbound, subject: &str, w: &Wire) -> std::result::Result<(), String> {
    if !cfg.peers.iter().any(|p| p == &w.from_pantheon) {
        return Err(format!(
            "pantheon {:?} is not an allowed peer (--peer)",
            w.from_pantheon
        ));
    }
    if !cfg.subjects.iter().any(|f| subject::matches(f, subject)) {
        return Err(format!("subject {subject:?} is not on the allowlist"));
    }
    Ok(())
}

/// Turns an admitted message into local state: a request becomes a handoff dispatched to the
/// configured god (or held); a reply goes to [`Conductor::receive_reply`]. Idempotent by message id.
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
                reply_to: w.reply_to.clone(),
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
    context.insert("decisions".into(), json!([]));
    context.insert("artifacts".into(), json!([]));
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
    let handoff = json!({
        "handoff_id": entry.handoff_id,
        "workflow_id": entry.workflow_id,
        "from_god": w.from_pantheon,
        "to_god": cfg.god,
        "step": w.step,
        "context": context,
    });
    let hold = cfg.hold.then(|| {
        format!(
            "inbound from pantheon {} (bridge holds inbound work)",
            w.from_pantheon
        )
    });
    let r: SubmitResult = c.submit_handoff_held(&handoff, hold)?;
    Ok(Taken::Request {
        workflow_id: r.workflow_id,
        status: r.status,
    })
}

/// Writes a reply record into the outbox for every inbound request whose dispatch a god has acked
/// (accepted, completed or rejected) and that is not answered yet. Returns how many were written.
pub fn collect_replies(c: &Conductor) -> Result<usize> {
    let root = c.root();
    let dir = bridge_dir(root).join("inbound");
    let mut written = 0;
    for path in crate::conductor::definition::config_files(&dir) {
        let Some(mut e) =
            read_json(&path)?.and_then(|v| serde_json::from_value::<LedgerEntry>(v).ok())
        else {
            continue;
        };
        if e.replied.is_some() || e.reply_to.is_none() {
            continue;
        }
        let Ok(wf) = WorkflowId::parse(&e.workflow_id) else {
            continue;
        };
        let Some(st) = files::load_state(root, &wf)? else {
            continue;
        };
        let Some(ack) = st.acks.iter().find(|a| {
            a.handoff_id == e.handoff_id
                && matches!(
                    a.status,
                    AckStatus::Accepted | AckStatus::Completed | AckStatus::Rejected
                )
        }) else {
            continue;
        };
        let reply_to = e.reply_to.clone().unwrap_or_default();
        if subject::check_subject(&reply_to).is_err() {
            continue;
        }
        let id = format!(
            "rp_{}",
            &derive_hex(&[&e.from_pantheon, &e.message_id])[..24]
        );
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
            extra: Map::new(),
        };
        let sent = outbox::sent_dir(root).join(format!("{id}.json"));
        if !sent.exists() {
            write_json(root, &outbox::record_path(root, &id)?, &rec)?;
        }
        e.replied = Some(id);
        write_json(root, &path, &e)?;
        written += 1;
    }
    Ok(written)
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

/// The bridge's status file (`conductor/bridge/status.json`), written by the running bridge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// This pantheon's bridge name.
    pub name: String,
    /// The server URL with any user or password removed.
    pub server: String,
    /// True while the bridge holds a connection to the server.
    pub connected: bool,
    /// The bridge process's id.
    pub pid: u32,
    /// Messages published since the bridge started.
    pub published: u64,
    /// Messages received since the bridge started.
    pub received: u64,
    /// Messages moved to dead letters since the bridge started.
    pub dead_lettered: u64,
    /// Outbox records waiting to be published.
    pub outbox_pending: usize,
    /// Messages the consumer has not delivered yet (from the server).
    pub lag: u64,
    /// The last error the bridge met, if any.
    pub last_error: Option<String>,
    /// When the file was last written (RFC 3339); an old time means the bridge is gone.
    pub updated: String,
    /// Fields this engine does not know, kept so a rewrite never drops them.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `conductor/bridge/status.json`.
pub fn status_path(root: &Root) -> std::path::PathBuf {
    bridge_dir(root).join("status.json")
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

/// Writes the bridge's status file atomically but without fsync: it is a report the running bridge
/// rewrites every few seconds (a kill leaves the old or the new file, never a torn one; a power
/// loss may leave an older one, which the next write replaces), and an fsync per write cost the
/// bridge's loops milliseconds on a busy disk.
pub fn write_status(root: &Root, s: &Status) -> Result<()> {
    let path = status_path(root);
    let (dir, name) = crate::store::safe::SafeDir::parent_of(root, &path, true)?
        .ok_or_else(|| Error::refused(format!("{} has no parent directory", path.display())))?;
    dir.replace_volatile(&name, &crate::store::atomic::to_pretty_json(s))
}

/// The status file if any, with the outbox and dead-letter counts taken from disk now.
pub fn read_status(root: &Root) -> Result<Value> {
    let status = read_json(&status_path(root))?;
    let (pending, inert) = outbox::pending(root);
    let dead = crate::conductor::definition::config_files(&dead_dir(root)).len();
    Ok(json!({
        "running": status.is_some(),
        "status": status,
        "outbox_pending": pending.len(),
        "outbox_uncommitted": inert,
        "dead_letters": dead,
    }))
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
        assert_eq!(
            redact_url("nats://a:s1@h:1,nats://tok@g:2"),
            "nats://h:1,nats://g:2"
        );
    }
}
