//! Approval links (docs/PROTOCOL.md §2.15): a one-time capability to approve or reject one held
//! dispatch from anywhere, bound to the exact bytes the approver saw.
//!
//! [`Conductor::mint_link`] draws two tokens (256 random bits each, base64url), one that approves
//! and one that rejects, and keeps in `conductor/approvals/{sha256(token)}.json` only the token's
//! SHA-256 with its binding: the held file's path and the SHA-256 of its bytes, the SHA-256 of the
//! workflow's state file (its version: anything that moves the workflow rewrites it), the SHA-256
//! of the budgets the dispatch would go past, the decision, the expiry and the channel it went out
//! by. [`Conductor::redeem_link`] checks all of it under the workflow's lock and applies the
//! decision through the same code the CLI's `approve` / `reject` runs, or refuses with a
//! [`Receipt`] that says what changed. A token is single use: its record is stamped `ended` in the
//! same hold of the lock, with its pair. The operator's usual paths (approve, reject, abort) end the
//! item's open records too. An ended or expired record is removed a day after it ended
//! ([`KEEP_ENDED`]), so a second tap within that day still reads who decided.

use chrono::{DateTime, Duration, Utc};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::files;
use super::model::{Dispatch, WorkflowState};
use super::{Actor, ApprovalResult, Conductor};
use crate::error::{Error, Result};
use crate::journal::{Act, Target, Verb};
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::read::read_bytes;
use crate::store::time::{format_ts, parse_ts};
use crate::store::{HandoffId, Root, WorkflowId};

/// How long a link lives unless told otherwise.
pub const DEFAULT_LINK_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// The longest a link may live.
pub const MAX_LINK_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// How long an ended or expired record stays, so a second tap reads who decided.
pub const KEEP_ENDED: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The most link records a root keeps; minting past it is refused until old ones are cleaned.
pub const MAX_LINKS: usize = 10_000;
/// Minting cleans the records once more than this many are kept (listing always does).
const SWEEP_PAST: usize = 64;
/// Random bytes in a token (256 bits).
const TOKEN_BYTES: usize = 32;

crate::words::words! {
    /// Where a decision came from: recorded in the link record and the journal's `channel`.
    pub Channel {
        /// The HTTP listener (`serve --approvals`).
        Http = "http",
        /// An ntfy action button calling the listener.
        Ntfy = "ntfy",
        /// The NATS subject of the bridge.
        Nats = "nats",
        /// A file drop directory.
        File = "file",
        /// The command line.
        Cli = "cli",
        /// The console.
        Console = "console",
        /// An MCP tool.
        Mcp = "mcp",
        /// The console's `--on-attention` hook (where a link went out).
        Hook = "hook",
    }
}

crate::words::words! {
    /// What a link asks for.
    pub LinkDecision {
        /// Release the held dispatch into its god's inbox.
        Approve = "approve",
        /// Refuse it: archived as rejected, the workflow failed.
        Reject = "reject",
    }
}

crate::words::words! {
    /// Why a link was refused (a receipt's `refused`).
    pub Refusal {
        /// No record of this token (never minted, or cleaned a day after it ended).
        Unknown = "unknown",
        /// A record the operator's key did not sign (planted in the root by someone else).
        Forged = "forged",
        /// Past its expiry.
        Expired = "expired",
        /// The token names another held item than the one the request names.
        WrongItem = "wrong_item",
        /// The item was decided already (by this link, its pair, or a usual path).
        AlreadyDecided = "already_decided",
        /// The operator revoked the link.
        Revoked = "revoked",
        /// The held file's bytes changed.
        Edited = "edited",
        /// The held dispatch was dispatched again (a new dispatch id) or moved out of the quarantine.
        Requeued = "requeued",
        /// The held dispatch now goes to another god.
        Rerouted = "rerouted",
        /// A budget was raised (or its usage moved) since the link was minted.
        Raised = "raised",
        /// The workflow moved otherwise (aborted, failed, another step).
        Moved = "moved",
        /// An approval of a budget hold that gives no raise.
        NeedsRaise = "needs_raise",
    }
}

/// A request for a pair of links to one held dispatch.
#[derive(Debug, Clone)]
pub struct LinkRequest {
    /// The held dispatch.
    pub handoff_id: HandoffId,
    /// How long the links live (at most [`MAX_LINK_TTL`]).
    pub ttl: std::time::Duration,
    /// Where the links go out (`cli` for `approve --link`, `hook` for a notification).
    pub channel: Channel,
}

/// A minted pair: the tokens themselves appear here and nowhere else.
#[derive(Debug, Clone, Serialize)]
pub struct MintedLink {
    /// The held dispatch.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The token that approves.
    pub approve_token: String,
    /// The token that rejects.
    pub reject_token: String,
    /// When both expire.
    pub expires_at: String,
    /// When they were minted.
    pub minted_at: String,
    /// The SHA-256 of the held file's bytes they are bound to.
    pub content_sha256: String,
}

/// How a record ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ended {
    /// `used`, `revoked`, `superseded` (its pair was used, or a usual path decided).
    pub how: String,
    /// When.
    pub at: String,
    /// Who (the approver's label, or the usual path's actor).
    pub by: String,
    /// Through which channel.
    pub channel: String,
    /// What the decision was (`approved`, `rejected`), when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// `conductor/approvals/{token_sha256}.json`: one token's binding.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LinkRecord {
    /// The SHA-256 of the token (hex); also the file's name.
    pub token_sha256: String,
    /// The SHA-256 of the other token of the pair.
    pub pair_sha256: String,
    /// The held dispatch.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The held step.
    pub step: String,
    /// The god it is addressed to.
    pub god: String,
    /// The held file, relative to the root.
    pub held_path: String,
    /// The SHA-256 of the held file's bytes.
    pub content_sha256: String,
    /// The SHA-256 of the workflow's state file's bytes (its version).
    pub state_sha256: String,
    /// The dispatch id of the held dispatch, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_id: Option<String>,
    /// The SHA-256 of the budgets it would go past (`null`: none, not a budget hold).
    #[serde(default)]
    pub budgets_sha256: Option<String>,
    /// How many budget raises the state recorded.
    #[serde(default)]
    pub raises: usize,
    /// What the token asks for.
    pub decision: LinkDecision,
    /// When it was minted.
    pub minted_at: String,
    /// When it expires.
    pub expires_at: String,
    /// Where it went out.
    pub channel: String,
    /// How it ended (absent while open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
    /// HMAC-SHA256 (hex) of the binding under the operator's key ([`LinkKey`]): what makes a record
    /// the operator's, not one planted by a writer of the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The operator's secret for approval links (256 bits), kept outside the root (the shell keeps it in
/// the operator's own config directory): the records it signs are the only ones a keyed handle
/// honours, so a writer of the root who cannot read it cannot plant a link of its own.
#[derive(Clone)]
pub struct LinkKey([u8; 32]);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(…)")
    }
}

impl LinkKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        let mut b = [0u8; 32];
        rand::rng().fill_bytes(&mut b);
        Self(b)
    }

    /// The key as 64 hex digits (how the shell stores it).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A key from its 64 hex digits (surrounding white space ignored).
    pub fn from_hex(s: &str) -> Option<Self> {
        let s = s.trim();
        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut b = [0u8; 32];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(b))
    }

    /// The HMAC over the record's binding: every field, one a line (`ended` and `mac` are not).
    fn hmac_of(&self, r: &LinkRecord) -> hmac::Hmac<Sha256> {
        use hmac::Mac;
        // HMAC pads a key shorter than the hash's block with zeros (RFC 2104): the same MAC as the
        // 32-byte key given as it is, with no fallible length check.
        let mut block = [0u8; 64];
        block[..32].copy_from_slice(&self.0);
        let mut m = <hmac::Hmac<Sha256> as hmac::digest::KeyInit>::new(&block.into());
        let raises = r.raises.to_string();
        let fields = [
            r.token_sha256.as_str(),
            r.pair_sha256.as_str(),
            r.handoff_id.as_str(),
            r.workflow_id.as_str(),
            r.step.as_str(),
            r.god.as_str(),
            r.held_path.as_str(),
            r.content_sha256.as_str(),
            r.state_sha256.as_str(),
            r.dispatch_id.as_deref().unwrap_or(""),
            r.budgets_sha256.as_deref().unwrap_or(""),
            raises.as_str(),
            r.decision.as_str(),
            r.minted_at.as_str(),
            r.expires_at.as_str(),
            r.channel.as_str(),
        ];
        for f in fields {
            m.update(f.as_bytes());
            m.update(b"\n");
        }
        m
    }

    /// The record's MAC, hex.
    fn mac(&self, r: &LinkRecord) -> String {
        use hmac::Mac;
        self.hmac_of(r)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `r` carries this key's MAC (verified in constant time).
    fn signed(&self, r: &LinkRecord) -> bool {
        use hmac::Mac;
        match r.mac.as_deref().and_then(LinkKey::from_hex) {
            Some(given) => self.hmac_of(r).verify_slice(&given.0).is_ok(),
            None => false,
        }
    }
}

/// What a redeem brings.
#[derive(Debug, Clone, Default)]
pub struct RedeemRequest {
    /// The token as received.
    pub token: String,
    /// The handoff the request names (a form's hidden field, a NATS message): refused as
    /// `wrong_item` when it is not the token's.
    pub expect_handoff: Option<String>,
    /// The content digest the approver saw: refused as `edited` when it is not the token's.
    pub expect_digest: Option<String>,
    /// Where it came from.
    pub channel: Option<Channel>,
    /// Who, when the channel proves it (a verified signature, a NATS peer).
    pub approver: Option<String>,
    /// A rejection's reason (defaults to `rejected through a {channel} link`).
    pub reason: Option<String>,
    /// The raise an approval of a budget hold gives.
    pub raise: Option<crate::cost::budget::Budget>,
}

/// The answer to a redeem: the decision applied, or why not.
#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    /// `approved`, `rejected` or `refused`.
    pub status: String,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// One line for a person.
    pub message: String,
    /// The held dispatch (absent for an unknown token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_id: Option<String>,
    /// Its workflow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Who decided the item, when it is decided (this decision or an earlier one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The decision's result, when this redeem made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ApprovalResult>,
}

impl Receipt {
    fn refused(why: Refusal, message: impl Into<String>, rec: Option<&LinkRecord>) -> Self {
        Self {
            status: "refused".into(),
            refused: Some(why),
            message: message.into(),
            handoff_id: rec.map(|r| r.handoff_id.clone()),
            workflow_id: rec.map(|r| r.workflow_id.clone()),
            decided_by: None,
            result: None,
        }
    }
    /// True when the decision was applied.
    pub fn applied(&self) -> bool {
        self.result.is_some()
    }
}

/// An open or recently ended link, for `pantheon approvals` (no token: only its hash's head).
#[derive(Debug, Clone, Serialize)]
pub struct LinkEntry {
    /// The held dispatch.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// What the token asks for.
    pub decision: LinkDecision,
    /// When it was minted.
    pub minted_at: String,
    /// When it expires.
    pub expires_at: String,
    /// Where it went out.
    pub channel: String,
    /// `open`, `expired`, or how it ended (`used`, `revoked`, `superseded`).
    pub state: String,
    /// The first 12 hex digits of the token's hash, to tell links apart.
    pub id: String,
}

/// What a link's page shows: the held item as the token binds it, read now.
#[derive(Debug, Clone, Serialize)]
pub struct LinkView {
    /// The token's record.
    pub record: LinkRecord,
    /// The held dispatch as it is now (when its bytes still match the binding).
    pub dispatch: Option<Dispatch>,
    /// The budgets the dispatch would go past, with their usage and limits.
    pub budgets: Vec<crate::cost::ops::BudgetReached>,
    /// Why the link would be refused now (checked again when it is used).
    pub refusal: Option<Receipt>,
}

/// `conductor/approvals/listener.json`: where `serve --approvals` listens (its base URL), so
/// `approve --link` and the hook can build links.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListenerRecord {
    /// `http://HOST:PORT`: the links are `{base_url}/a/{token}`.
    pub base_url: String,
    /// The serving process.
    pub pid: u32,
    /// When it started listening.
    pub started_at: String,
}

/// Records where this process's listener serves (atomic; the last `serve` to start wins).
pub fn write_listener(root: &Root, base_url: &str) -> Result<()> {
    let rec = ListenerRecord {
        base_url: base_url.to_owned(),
        pid: std::process::id(),
        started_at: format_ts(Utc::now()),
    };
    write_json(root, &root.approvals_listener_path(), &rec)
}

/// Removes the listener record when it is this process's.
pub fn remove_listener(root: &Root) {
    if read_listener(root).is_some_and(|r| r.pid == std::process::id()) {
        let _ = crate::store::atomic::remove_file(root, &root.approvals_listener_path());
    }
}

/// The listener record, `None` when there is none or it cannot be read as one. Its `base_url` is
/// only ever used to print links, never fetched.
pub fn read_listener(root: &Root) -> Option<ListenerRecord> {
    let bytes = read_bytes(&root.approvals_listener_path()).ok()??;
    let r: ListenerRecord = serde_json::from_slice(&bytes).ok()?;
    (r.base_url.starts_with("http://") || r.base_url.starts_with("https://"))
        .then_some(r)
        .filter(|r| r.base_url.len() < 300 && !r.base_url.chars().any(char::is_control))
}

/// A fresh token: [`TOKEN_BYTES`] random bytes, base64url without padding.
fn new_token() -> String {
    let mut b = [0u8; TOKEN_BYTES];
    rand::rng().fill_bytes(&mut b);
    base64url(&b)
}

/// base64url without padding (RFC 4648 §5).
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=c.len() {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// True for a string shaped as a token (43 base64url characters), checked before anything is read.
pub fn is_token_shaped(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The SHA-256 of `bytes`, hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The SHA-256 of a token, hex: the name its record is kept under.
pub fn token_sha256(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

fn record_path(root: &Root, hash: &str) -> std::path::PathBuf {
    root.approvals_dir()
        .join(format!("{hash}{}", crate::store::layout::JSON_SUFFIX))
}

/// The record of `hash`, `None` when there is none or it cannot be read as one (a damaged record
/// approves nothing).
fn read_record(root: &Root, hash: &str) -> Option<LinkRecord> {
    let bytes = read_bytes(&record_path(root, hash)).ok()??;
    let r: LinkRecord = serde_json::from_slice(&bytes).ok()?;
    (r.token_sha256 == hash).then_some(r)
}

/// Every record of the root (bounded by [`MAX_LINKS`] plus a margin; a damaged one is skipped).
fn all_records(root: &Root) -> Vec<LinkRecord> {
    let Ok(dir) = std::fs::read_dir(root.approvals_dir()) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .take(MAX_LINKS + 100)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hash = name.strip_suffix(crate::store::layout::JSON_SUFFIX)?;
            (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| read_record(root, hash))?
        })
        .collect()
}

/// The state file's bytes hashed, `None` when there is no state.
fn state_digest(root: &Root, wf: &WorkflowId) -> Result<Option<String>> {
    Ok(read_bytes(&root.state_path(wf))?.map(|b| sha256_hex(&b)))
}

/// The held file of `hid` in the quarantine: its bytes and the dispatch they hold.
fn held_file(root: &Root, hid: &HandoffId) -> Result<Option<(Vec<u8>, Dispatch)>> {
    let path = root.quarantine_dir().join(format!("{hid}.json"));
    let Some(bytes) = read_bytes(&path)? else {
        return Ok(None);
    };
    let d: Dispatch = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(Some((bytes, d)))
}

/// The budgets `hid` would go past, hashed (`None`: none).
fn budgets_digest(c: &Conductor, hid: &HandoffId) -> Option<String> {
    let reached = c.budgets_reached(hid).ok()?;
    (!reached.is_empty()).then(|| sha256_hex(&crate::store::json_text(&reached, false)))
}

fn later(now: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    now + Duration::from_std(d).unwrap_or(Duration::zero())
}

impl Conductor {
    /// Mints a pair of links (approve, reject) to the held dispatch of `req.handoff_id`. Refused
    /// when the dispatch is not held for an operator's decision in the quarantine, when a pause
    /// holds it (`pantheon resume` releases it; a pause-held item gets no link), for a ttl of zero
    /// or past [`MAX_LINK_TTL`], and when the root keeps [`MAX_LINKS`] records already.
    pub fn mint_link(&self, req: &LinkRequest) -> Result<MintedLink> {
        if req.ttl.is_zero() || req.ttl > MAX_LINK_TTL {
            return Err(Error::refused(format!(
                "a link lives more than 0 seconds and at most {} days: give --ttl within that",
                MAX_LINK_TTL.as_secs() / 86_400
            )));
        }
        let root = self.root();
        let hid = &req.handoff_id;
        let not_held = || {
            Error::not_found(format!(
                "no dispatch {hid} is held for approval in conductor/pending/_quarantine/: only a \
                 held item gets a link (pantheon pending lists awaiting_approval)"
            ))
        };
        let (_, d) = held_file(root, hid)?.ok_or_else(not_held)?;
        let wf = WorkflowId::parse(&d.workflow_id)?;
        let now = Utc::now();
        let kept = || {
            std::fs::read_dir(root.approvals_dir())
                .map(|d| d.take(MAX_LINKS + 100).count())
                .unwrap_or(0)
        };
        if kept() > SWEEP_PAST {
            self.sweep_links(now);
        }
        if kept() + 2 > MAX_LINKS {
            return Err(Error::refused(format!(
                "the root keeps {MAX_LINKS} approval links already: revoke some (pantheon approve \
                 --revoke HOF) or wait for them to expire and be cleaned"
            )));
        }
        let _lock = FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
        let (bytes, d) = held_file(root, hid)?.ok_or_else(not_held)?;
        let st = files::require_state(root, &wf)?;
        if !held_here(&st, hid, &d) {
            return Err(not_held());
        }
        if let Some(part) = super::pause::pause_parts(d.held_because.as_deref()).first() {
            return Err(Error::refused(format!(
                "held dispatch {hid} is held by a pause ({part}), not for approval: a pause-held \
                 item gets no link; `pantheon resume` releases it"
            )));
        }
        let state_sha256 = state_digest(root, &wf)?.ok_or_else(not_held)?;
        let (at, until) = (now, later(now, req.ttl));
        let (approve, reject) = (new_token(), new_token());
        let held_path = format!(
            "{}/{}/{}/{hid}.json",
            crate::store::layout::CONDUCTOR_DIR,
            crate::store::layout::PENDING_DIR,
            crate::store::layout::QUARANTINE_DIR
        );
        let base = LinkRecord {
            token_sha256: String::new(),
            pair_sha256: String::new(),
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            step: d.step.clone(),
            god: d.to_god.clone(),
            held_path,
            content_sha256: sha256_hex(&bytes),
            state_sha256,
            dispatch_id: d.dispatch_id.clone(),
            budgets_sha256: budgets_digest(self, hid),
            raises: raises(&st),
            decision: LinkDecision::Approve,
            minted_at: format_ts(at),
            expires_at: format_ts(until),
            channel: req.channel.as_str().to_owned(),
            ended: None,
            mac: None,
        };
        for (mine, other, decision) in [
            (&approve, &reject, LinkDecision::Approve),
            (&reject, &approve, LinkDecision::Reject),
        ] {
            let rec = LinkRecord {
                token_sha256: token_sha256(mine),
                pair_sha256: token_sha256(other),
                decision,
                ..base.clone()
            };
            let rec = LinkRecord {
                mac: self.link_key().map(|k| k.mac(&rec)),
                ..rec
            };
            write_json(root, &record_path(root, &rec.token_sha256), &rec)?;
        }
        Ok(MintedLink {
            handoff_id: hid.to_string(),
            workflow_id: wf.to_string(),
            approve_token: approve,
            reject_token: reject,
            expires_at: base.expires_at,
            minted_at: base.minted_at,
            content_sha256: base.content_sha256,
        })
    }

    /// Whether this handle honours `r`: any record without a link key, else only one it signed.
    fn honoured(&self, r: &LinkRecord) -> bool {
        self.link_key().is_none_or(|k| k.signed(r))
    }

    /// Every link record kept (open, expired or ended within [`KEEP_ENDED`]), oldest first.
    pub fn links(&self) -> Vec<LinkEntry> {
        self.sweep_links(Utc::now());
        self.link_entries()
    }

    /// [`Self::links`] without cleaning anything (a read-only reader: the console).
    pub fn link_entries(&self) -> Vec<LinkEntry> {
        let now = Utc::now();
        let mut out: Vec<LinkEntry> = all_records(self.root())
            .into_iter()
            .map(|r| LinkEntry {
                state: match &r.ended {
                    Some(e) => e.how.clone(),
                    None if expired(&r, now) => "expired".into(),
                    None => "open".into(),
                },
                id: r.token_sha256.chars().take(12).collect(),
                handoff_id: r.handoff_id,
                workflow_id: r.workflow_id,
                decision: r.decision,
                minted_at: r.minted_at,
                expires_at: r.expires_at,
                channel: r.channel,
            })
            .collect();
        out.sort_by(|a, b| (&a.minted_at, &a.id).cmp(&(&b.minted_at, &b.id)));
        out
    }

    /// Removes the records that ended or expired more than [`KEEP_ENDED`] ago (a damaged record
    /// left a day is removed too). Returns how many.
    pub fn sweep_links(&self, now: DateTime<Utc>) -> usize {
        let root = self.root();
        let Ok(dir) = std::fs::read_dir(root.approvals_dir()) else {
            return 0;
        };
        let keep = Duration::from_std(KEEP_ENDED).unwrap_or(Duration::zero());
        let mut n = 0;
        for e in dir.filter_map(|e| e.ok()).take(MAX_LINKS + 100) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(hash) = name
                .strip_suffix(crate::store::layout::JSON_SUFFIX)
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            else {
                continue;
            };
            let gone_at = match read_record(root, hash) {
                Some(r) => r
                    .ended
                    .as_ref()
                    .and_then(|e| parse_ts(&e.at))
                    .or_else(|| parse_ts(&r.expires_at)),
                None => e
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .map(DateTime::<Utc>::from),
            };
            if gone_at.is_some_and(|t| t + keep < now)
                && crate::store::atomic::remove_file(root, &e.path()).unwrap_or(false)
            {
                n += 1;
            }
        }
        n
    }

    /// Revokes every open link of `hid` (the operator's `approve --revoke`): each is stamped
    /// `revoked` and refused from then on. Returns how many were open.
    pub fn revoke_links(&self, hid: &HandoffId) -> Result<usize> {
        let recs: Vec<LinkRecord> = all_records(self.root())
            .into_iter()
            .filter(|r| r.handoff_id == hid.as_str() && r.ended.is_none())
            .collect();
        let Some(first) = recs.first() else {
            return Ok(0);
        };
        let wf = WorkflowId::parse(&first.workflow_id)?;
        let origin = self.origin();
        let n = self.end_links(
            &wf,
            Some(hid.as_str()),
            &Ended {
                how: "revoked".into(),
                at: format_ts(Utc::now()),
                by: origin.actor.clone(),
                channel: origin.source.clone(),
                outcome: None,
            },
        )?;
        self.journal(
            &Act::new(Verb::LinkRevoke, format!("revoked ({n})"))
                .workflow(wf.as_str())
                .handoff(hid.as_str()),
        );
        Ok(n)
    }

    /// Stamps every open record of workflow `wf` (of `hid` only, when given) `ended` as `how`,
    /// under the workflow's lock. Returns how many.
    pub(crate) fn end_links(
        &self,
        wf: &WorkflowId,
        hid: Option<&str>,
        how: &Ended,
    ) -> Result<usize> {
        let root = self.root();
        if !root.approvals_dir().is_dir() {
            return Ok(0);
        }
        let _lock = FileLock::exclusive(root, &root.workflow_lock_path(wf))?;
        self.end_links_locked(wf, hid, how)
    }

    fn end_links_locked(&self, wf: &WorkflowId, hid: Option<&str>, how: &Ended) -> Result<usize> {
        let root = self.root();
        let mut n = 0;
        for mut r in all_records(root) {
            if r.workflow_id != wf.as_str()
                || hid.is_some_and(|h| h != r.handoff_id)
                || r.ended.is_some()
            {
                continue;
            }
            r.ended = Some(how.clone());
            write_json(root, &record_path(root, &r.token_sha256), &r)?;
            n += 1;
        }
        Ok(n)
    }

    /// Ends the open links of a held item a usual path decided or aborted (best effort: the
    /// binding refuses them anyway, this only names who decided).
    pub(crate) fn supersede_links(&self, wf: &str, hid: Option<&str>, outcome: &str) {
        let Ok(wf) = WorkflowId::parse(wf) else {
            return;
        };
        let origin = self.origin();
        let _ = self.end_links(
            &wf,
            hid,
            &Ended {
                how: "superseded".into(),
                at: format_ts(Utc::now()),
                by: origin.actor,
                channel: origin.source,
                outcome: Some(outcome.to_owned()),
            },
        );
    }

    /// What a link's page shows: the record, the held dispatch (when its bytes still match) and
    /// the budgets reached, and the refusal the link would meet now. `None` for an unknown token.
    pub fn view_link(&self, token: &str) -> Option<LinkView> {
        if !is_token_shaped(token) {
            return None;
        }
        let root = self.root();
        let record = read_record(root, &token_sha256(token)).filter(|r| self.honoured(r))?;
        let hid = HandoffId::parse(&record.handoff_id).ok()?;
        let wf = WorkflowId::parse(&record.workflow_id).ok()?;
        let refusal = self.check_link(&record, &wf, &hid, Utc::now(), None);
        let dispatch = held_file(root, &hid)
            .ok()
            .flatten()
            .filter(|(b, _)| sha256_hex(b) == record.content_sha256)
            .map(|(_, d)| d);
        let budgets = self.budgets_reached(&hid).unwrap_or_default();
        Some(LinkView {
            record,
            dispatch,
            budgets,
            refusal,
        })
    }

    /// Redeems a token: checks its binding under the workflow's lock and applies its decision
    /// through the operator's approve / reject, journaled with `channel` and `approver`; anything
    /// else is refused with a receipt that says what changed. Errors only when a file cannot be
    /// read or written.
    pub fn redeem_link(&self, req: &RedeemRequest) -> Result<Receipt> {
        let root = self.root();
        let unknown = || {
            Receipt::refused(
                Refusal::Unknown,
                "this link is unknown: it was never minted here, or it ended more than a day ago",
                None,
            )
        };
        let forged = || {
            Receipt::refused(
                Refusal::Forged,
                "this link's record was not made by this operator (its signature does not match the \
                 operator's link key): it approves nothing",
                None,
            )
        };
        if !is_token_shaped(req.token.trim()) {
            return Ok(unknown());
        }
        let hash = token_sha256(req.token.trim());
        let Some(first) = read_record(root, &hash) else {
            return Ok(unknown());
        };
        if !self.honoured(&first) {
            return Ok(forged());
        }
        let (Ok(wf), Ok(hid)) = (
            WorkflowId::parse(&first.workflow_id),
            HandoffId::parse(&first.handoff_id),
        ) else {
            return Ok(unknown());
        };
        let lock = FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
        let Some(rec) = read_record(root, &hash).filter(|r| r.handoff_id == first.handoff_id)
        else {
            return Ok(unknown());
        };
        if !self.honoured(&rec) {
            return Ok(forged());
        }
        if let Some(r) = self.check_link(&rec, &wf, &hid, Utc::now(), Some(req)) {
            return Ok(r);
        }
        self.apply_link(&rec, &wf, &hid, req, lock)
    }

    /// Applies a checked link's decision under the workflow's `lock` (taken by the caller, dropped
    /// here before the journal is written): the decision goes through the intent `held-{hid}` the
    /// operator's approve and reject write, with the link's `channel` and `approver`, so a process
    /// killed between the decision and its entry is journaled once, by the next supervisor pass.
    fn apply_link(
        &self,
        rec: &LinkRecord,
        wf: &WorkflowId,
        hid: &HandoffId,
        req: &RedeemRequest,
        lock: FileLock,
    ) -> Result<Receipt> {
        let root = self.root();
        let channel = req.channel.unwrap_or(Channel::Http);
        let approver = req.approver.as_deref().map(crate::journal::clean_actor);
        let by = match &approver {
            Some(a) => format!("{a} via {channel} link"),
            None => format!("operator via {channel} link"),
        };
        let mut raise_act = None;
        if rec.decision == LinkDecision::Approve
            && rec.budgets_sha256.is_some()
            && let Some(to) = req.raise
        {
            let (_, act, _) = self.raise_budget_locked(hid, wf, to, &by)?;
            raise_act = Some(act);
        }
        let reason = req
            .reason
            .clone()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| format!("rejected through a {channel} link"));
        let reject = (rec.decision == LinkDecision::Reject).then_some(reason.as_str());
        let (action, outcome) = match reject {
            None => (Verb::Approve, "approved"),
            Some(_) => (Verb::Reject, "rejected"),
        };
        let intent = self.intend(
            &format!("held-{hid}"),
            &Act::new(action.clone(), outcome)
                .workflow(wf.as_str())
                .handoff(hid.as_str())
                .reason(reject)
                .target(Target::Channel, Some(channel.as_str()))
                .target(Target::Approver, approver.as_ref()),
            super::intents::Check::Held {
                handoff_id: hid.to_string(),
            },
        );
        let result = match self.decide_held_locked(wf, hid, reject, Actor::God(by.clone()), None) {
            Ok(r) => r,
            Err(e) => {
                self.drop_intent(intent);
                return Err(e);
            }
        };
        let ended = Ended {
            how: "used".into(),
            at: format_ts(Utc::now()),
            by: by.clone(),
            channel: channel.as_str().to_owned(),
            outcome: Some(result.status.to_string()),
        };
        let mut r = rec.clone();
        r.ended = Some(ended.clone());
        write_json(root, &record_path(root, &r.token_sha256), &r)?;
        self.end_links_locked(
            wf,
            Some(hid.as_str()),
            &Ended {
                how: "superseded".into(),
                ..ended
            },
        )?;
        drop(lock);
        if let Some(act) = raise_act {
            self.journal(&act);
        }
        let act = super::journaled::approval_act(action, &result, reject, false)
            .target(Target::Channel, Some(channel.as_str()))
            .target(Target::Approver, approver.as_ref());
        self.journal_intent(intent, act);
        if reject.is_some() {
            self.retire_dead_of_finished(result.workflow_id.as_str());
        }
        Ok(Receipt {
            status: result.status.to_string(),
            refused: None,
            message: format!(
                "{} {} of workflow {} (step {:?}, god {}) by {by}",
                result.status, hid, wf, result.target_step, result.target_god
            ),
            handoff_id: Some(hid.to_string()),
            workflow_id: Some(wf.to_string()),
            decided_by: Some(by),
            result: Some(result),
        })
    }

    /// The refusals a request earns from its record alone: ended, wrong item, another digest.
    fn refuse_request(&self, rec: &LinkRecord, req: &RedeemRequest) -> Option<Receipt> {
        if let Some(e) = &rec.ended {
            let (why, what) = match e.how.as_str() {
                "revoked" => (Refusal::Revoked, "revoked".to_owned()),
                _ => (
                    Refusal::AlreadyDecided,
                    format!(
                        "already {}",
                        e.outcome.as_deref().unwrap_or("decided").to_owned()
                    ),
                ),
            };
            let mut r = Receipt::refused(
                why,
                format!("{what} by {} (through {}) at {}", e.by, e.channel, e.at),
                Some(rec),
            );
            r.decided_by = Some(e.by.clone());
            return Some(r);
        }
        if let Some(h) = &req.expect_handoff
            && h.trim() != rec.handoff_id
        {
            return Some(Receipt::refused(
                Refusal::WrongItem,
                format!(
                    "this link is for held dispatch {}, not {}: nothing was decided",
                    rec.handoff_id,
                    h.chars().take(80).collect::<String>()
                ),
                Some(rec),
            ));
        }
        if let Some(dg) = &req.expect_digest
            && dg.trim() != rec.content_sha256
        {
            return Some(Receipt::refused(
                Refusal::Edited,
                "the content you saw is not the content this link is bound to: nothing was decided",
                Some(rec),
            ));
        }
        None
    }

    /// Checks `rec`'s binding against the root now (the caller holds the workflow's lock when it
    /// acts on the answer): the refusal's receipt when anything changed.
    fn check_link(
        &self,
        rec: &LinkRecord,
        wf: &WorkflowId,
        hid: &HandoffId,
        now: DateTime<Utc>,
        req: Option<&RedeemRequest>,
    ) -> Option<Receipt> {
        let root = self.root();
        let none = RedeemRequest::default();
        if let Some(r) = self.refuse_request(rec, req.unwrap_or(&none)) {
            return Some(r);
        }
        if expired(rec, now) {
            return Some(Receipt::refused(
                Refusal::Expired,
                format!("this link expired at {}: ask for a new one", rec.expires_at),
                Some(rec),
            ));
        }
        let read = (|| -> Result<_> {
            Ok((
                files::load_state(root, wf)?,
                state_digest(root, wf)?,
                held_file(root, hid)?,
            ))
        })();
        let (st, state_now, held) = match read {
            Ok(x) => x,
            Err(e) => return Some(Receipt::refused(Refusal::Moved, e.to_string(), Some(rec))),
        };
        let changed = |why: Refusal, what: String| Some(Receipt::refused(why, what, Some(rec)));
        let Some(st) = st else {
            return changed(
                Refusal::Moved,
                format!("workflow {wf} has no state any more"),
            );
        };
        if let Some(d) = decided(&st, hid) {
            let by = d
                .get("by")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned();
            let what = d
                .get("decision")
                .and_then(Value::as_str)
                .unwrap_or("decided");
            let at = d.get("at").and_then(Value::as_str).unwrap_or("?");
            let mut r = Receipt::refused(
                Refusal::AlreadyDecided,
                format!("already {what} by {by} at {at}"),
                Some(rec),
            );
            r.decided_by = Some(by);
            return Some(r);
        }
        let Some((bytes, d)) = held else {
            return changed(
                Refusal::Requeued,
                format!(
                    "held dispatch {hid} is no longer in the quarantine (moved or dispatched again)"
                ),
            );
        };
        if !held_here(&st, hid, &d) {
            return changed(
                Refusal::Moved,
                format!(
                    "workflow {wf} is {} now, no longer held at {hid}",
                    st.status
                ),
            );
        }
        if d.dispatch_id != rec.dispatch_id {
            return changed(
                Refusal::Requeued,
                format!("held dispatch {hid} was dispatched again (a new dispatch id)"),
            );
        }
        if st.dispatched_to.as_deref() != Some(rec.god.as_str()) || d.to_god != rec.god {
            return changed(
                Refusal::Rerouted,
                format!(
                    "held dispatch {hid} now goes to {}, not {}",
                    d.to_god, rec.god
                ),
            );
        }
        if sha256_hex(&bytes) != rec.content_sha256 {
            return changed(
                Refusal::Edited,
                format!("held dispatch {hid} was edited since the link was made: its bytes differ"),
            );
        }
        if budgets_digest(self, hid) != rec.budgets_sha256 || raises(&st) != rec.raises {
            return changed(
                Refusal::Raised,
                format!(
                    "a budget of held dispatch {hid} was raised or its usage moved since the link was made"
                ),
            );
        }
        if state_now.as_deref() != Some(rec.state_sha256.as_str()) {
            return changed(
                Refusal::Moved,
                format!("workflow {wf} changed since the link was made"),
            );
        }
        self.needs_raise(rec, hid, req)
    }

    /// An approval of a budget hold that gives no raise: refused, naming the budgets.
    fn needs_raise(
        &self,
        rec: &LinkRecord,
        hid: &HandoffId,
        req: Option<&RedeemRequest>,
    ) -> Option<Receipt> {
        if let Some(q) = req
            && rec.decision == LinkDecision::Approve
            && rec.budgets_sha256.is_some()
            && q.raise.is_none()
        {
            let reached = self.budgets_reached(hid).unwrap_or_default();
            let names: Vec<String> = reached.iter().map(|b| b.text()).collect();
            return Some(Receipt::refused(
                Refusal::NeedsRaise,
                format!(
                    "held dispatch {hid} is a budget hold: approving it needs a raise ({}); give \
                     the new budget on the page, or approve at the console or with `pantheon \
                     approve {hid} --budget-usd N`",
                    names.join("; ")
                ),
                Some(rec),
            ));
        }
        None
    }
}

/// True when `st` holds the workflow at `d`'s step for `hid`.
fn held_here(st: &WorkflowState, hid: &HandoffId, d: &Dispatch) -> bool {
    super::hold::undecided(st)
        .is_some_and(|h| h.step == d.step && h.handoff_id.is_none_or(|x| x == hid.as_str()))
        && d.handoff_id == hid.as_str()
}

/// The newest decision recorded on `hid` while the state no longer holds it.
fn decided(st: &WorkflowState, hid: &HandoffId) -> Option<serde_json::Map<String, Value>> {
    if super::hold::undecided(st).is_some_and(|h| h.handoff_id.is_none_or(|x| x == hid.as_str())) {
        return None;
    }
    super::ack::approvals(st)
        .into_iter()
        .rev()
        .find(|a| a.get("handoff_id").and_then(Value::as_str) == Some(hid.as_str()))
}

/// How many budget raises the state records.
fn raises(st: &WorkflowState) -> usize {
    st.extra
        .get(crate::cost::budget::STATE_RAISES)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

fn expired(rec: &LinkRecord, now: DateTime<Utc>) -> bool {
    parse_ts(&rec.expires_at).is_none_or(|t| now >= t)
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
