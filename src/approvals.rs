//! `serve --approvals ADDR`: the approval links' listener on the one HTTP stack (`crate::http`).
//!
//! `GET /a/TOKEN` is a small page a phone can open (no JavaScript, no asset from anywhere, under
//! 20 KB): what is held (workflow, step, god, summary, decisions, the budgets and their usage for a
//! budget hold, the content digest) with an Approve or Reject form; `POST /a/TOKEN` redeems the
//! token through [`Conductor::redeem_link`] and shows the receipt. Nothing here logs a request,
//! so no token reaches a log. With `--approvals-signers FILE` a decision needs an `ssh-keygen -Y
//! sign` signature over the token and the digest, verified by the operator's own `ssh-keygen -Y
//! verify` against that allowed-signers file; the signer's principal is the approver.
//!
//! The seam for other proofs of the approver ([`Approver`]): a check that takes the request's
//! form and answers the approver's name or a refusal. An operator credential (a bearer token
//! from the credentials file of remote gods) would be one more variant checked the same way.

pub(crate) mod drop_dir;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::engine::{
    ApprovalChannel, Budget, Conductor, LinkDecision, LinkKey, LinkReceipt, LinkView, Origin,
    RedeemRequest, Root,
};

/// How long a link lives unless told otherwise: `approvals: {ttl: …}` of `conductor/config.yaml`,
/// else 15 minutes.
pub(crate) fn default_ttl(root: &Root) -> std::time::Duration {
    root.settings
        .link_ttl
        .unwrap_or(crate::engine::DEFAULT_LINK_TTL)
        .min(crate::engine::MAX_LINK_TTL)
}

/// A minted pair as a shell hands it out: the URLs carry the tokens.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkUrls {
    /// `{base}/a/{approve token}`.
    pub approve_url: String,
    /// `{base}/a/{reject token}`.
    pub reject_url: String,
    /// When both expire.
    pub expires_at: String,
    /// The held dispatch.
    pub handoff_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// The SHA-256 of the held file's bytes they are bound to.
    pub content_sha256: String,
}

/// Mints a pair of links to held dispatch `hid` through `c` (which holds the operator's link
/// key), their URLs from `base` or the listener `serve --approvals` recorded in the root.
pub(crate) fn mint_urls(
    c: &Conductor,
    hid: &crate::engine::HandoffId,
    ttl: std::time::Duration,
    base: Option<&str>,
    channel: ApprovalChannel,
) -> anyhow::Result<LinkUrls> {
    let base = match base {
        Some(b) => b.trim_end_matches('/').to_owned(),
        None => crate::engine::read_approvals_listener(c.root())
            .map(|l| l.base_url)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no approvals listener is recorded in {}: start `pantheon serve --approvals ADDR` \
                     or give --base-url URL",
                    c.root().approvals_listener_path().display()
                )
            })?,
    };
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        anyhow::bail!("--base-url {base:?}: give an http:// or https:// URL");
    }
    let m = c.mint_link(&crate::engine::LinkRequest {
        handoff_id: hid.clone(),
        ttl,
        channel,
    })?;
    Ok(LinkUrls {
        approve_url: format!("{base}/a/{}", m.approve_token),
        reject_url: format!("{base}/a/{}", m.reject_token),
        expires_at: m.expires_at,
        handoff_id: m.handoff_id,
        workflow_id: m.workflow_id,
        content_sha256: m.content_sha256,
    })
}

/// The SSH signature namespace a signature over a link must be made in.
pub(crate) const SIGNATURE_NAMESPACE: &str = "pantheon-approve";

/// How a decision's approver is proven.
#[derive(Debug, Clone)]
pub enum Approver {
    /// Nobody in particular: whoever holds the link (the link is the capability).
    Link,
    /// An `ssh-keygen -Y sign -n pantheon-approve` signature over `{token}\n{digest}\n`, checked
    /// against this allowed-signers file; the principal (the form's `principal`) is the approver.
    SshSigners(PathBuf),
}

/// Where the operator's link key is kept: `$PANTHEON_LINK_KEY_FILE`, else
/// `$XDG_CONFIG_HOME/pantheon/link-key`, else `~/.config/pantheon/link-key`.
pub(crate) fn link_key_path() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("PANTHEON_LINK_KEY_FILE")
        .or_else(|| env("XDG_CONFIG_HOME").map(|d| d.join("pantheon").join("link-key")))
        .or_else(|| env("HOME").map(|h| h.join(".config").join("pantheon").join("link-key")))
}

/// The operator's link key (docs/PROTOCOL.md §2.15), made on first use (256 random bits, 64 hex
/// digits, mode 0600 in a directory made 0700). Refused when the file lies inside the root (a
/// writer of the root could read it), is a link, or others may read it.
pub(crate) fn link_key(root: &Root) -> anyhow::Result<LinkKey> {
    let path = link_key_path().ok_or_else(|| {
        anyhow::anyhow!("no place for the approval links' key: set PANTHEON_LINK_KEY_FILE or HOME")
    })?;
    link_key_at(&path, root)
}

/// [`link_key`] kept at `path`.
pub fn link_key_at(path: &std::path::Path, root: &Root) -> anyhow::Result<LinkKey> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let shown = path.display().to_string();
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| anyhow::anyhow!("cannot make {}: {e}", parent.display()))?;
        let (dir, root_dir) = (parent.canonicalize()?, root.dir.canonicalize()?);
        if dir.starts_with(&root_dir) {
            anyhow::bail!(
                "the approval links' key {shown} lies inside the root {}: a writer of the root could \
                 read it; keep it in the operator's own directory (PANTHEON_LINK_KEY_FILE)",
                root.dir.display()
            );
        }
    }
    for _ in 0..2 {
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(mut f) => {
                let meta = f.metadata()?;
                if !meta.is_file() || meta.mode() & 0o077 != 0 {
                    anyhow::bail!(
                        "the approval links' key {shown} is not a private file (it must be a regular \
                         file only its owner can read: chmod 600 {shown})"
                    );
                }
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::Read::take(&mut f, 256), &mut text)?;
                return LinkKey::from_hex(&text).ok_or_else(|| {
                    anyhow::anyhow!("the approval links' key {shown} is not 64 hex digits: remove it to make a new one (outstanding links end)")
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = LinkKey::generate();
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                {
                    Ok(mut f) => {
                        f.write_all(format!("{}\n", key.to_hex()).as_bytes())?;
                        f.sync_all()?;
                        return Ok(key);
                    }
                    // Another process made it first: read theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => anyhow::bail!("cannot make the approval links' key {shown}: {e}"),
                }
            }
            Err(e) => anyhow::bail!("cannot read the approval links' key {shown}: {e}"),
        }
    }
    anyhow::bail!("cannot read the approval links' key {shown}")
}

/// What the handlers share.
#[derive(Clone)]
struct Ctx {
    root: Root,
    approver: Approver,
    key: LinkKey,
    operators: Option<Arc<crate::credentials::Credentials>>,
}

/// The routes of `serve --approvals`.
/// `key`: the operator's link key ([`link_key`]); only the links it signed are honoured.
pub fn routes(root: Root, approver: Approver, key: LinkKey) -> Router {
    routes_with(root, approver, key, None)
}

/// [`routes`]; with `operators` (`--approvals-require operator`) the page and the decision need
/// the secret of an operator principal of that credentials file, as HTTP Basic (any user name,
/// the secret as the password: a phone's browser asks for it and can keep it) or `Authorization:
/// Bearer SECRET`; the principal is the approver.
pub(crate) fn routes_with(
    root: Root,
    approver: Approver,
    key: LinkKey,
    operators: Option<Arc<crate::credentials::Credentials>>,
) -> Router {
    Router::new()
        .route("/a/{token}", get(page).post(decide))
        .route(
            "/",
            get(|| async { "pantheon serve: approval links at /a/TOKEN\n" }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(Arc::new(Ctx {
            root,
            approver,
            key,
            operators,
        }))
}

/// The operator a request's `Authorization` proves, when the listener requires one: `Ok(None)`
/// when it requires none, the `401` to answer when the request proves no operator.
fn operator_of(ctx: &Ctx, headers: &HeaderMap) -> Result<Option<String>, Box<Response>> {
    let Some(creds) = &ctx.operators else {
        return Ok(None);
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(secret_of);
    match given.and_then(|s| creds.authenticate(&s)) {
        Some(p)
            if p.kind == crate::credentials::Kind::Operator
                && p.may(crate::credentials::Right::Approve) =>
        {
            Ok(Some(p.name))
        }
        Some(p) => Err(Box::new(unauthorized(&format!(
            "{} is not an operator with the approve right: only such an operator decides a held item",
            p.name
        )))),
        None => Err(Box::new(unauthorized(
            "this listener requires an operator's credential: sign in with any user name and the \
             operator's secret (from `pantheon credentials add NAME --operator`) as the password",
        ))),
    }
}

/// The secret of an `Authorization` value: `Bearer SECRET`, or `Basic` with the secret as the
/// password.
fn secret_of(authorization: &str) -> Option<String> {
    if let Some(t) = crate::credentials::bearer(authorization) {
        return Some(t.to_owned());
    }
    let (scheme, b64) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let pair = String::from_utf8(base64_decode(b64.trim())?).ok()?;
    let (_, password) = pair.split_once(':')?;
    (!password.is_empty()).then(|| password.to_owned())
}

/// Standard base64 (padding optional); `None` on any other byte.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = s.trim_end_matches('=').as_bytes();
    if bytes.len() > 4096 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c)? << (18 - 6 * i);
        }
        let take = match chunk.len() {
            4 => 3,
            3 => 2,
            2 => 1,
            _ => return None,
        };
        out.extend_from_slice(&n.to_be_bytes()[1..1 + take]);
    }
    Some(out)
}

/// `401` with the challenge that makes a browser ask for the credential.
fn unauthorized(why: &str) -> Response {
    let mut r = html_response(
        StatusCode::UNAUTHORIZED,
        shell(
            "Sign in",
            &format!("<p class=bad>{}</p><p>Nothing was decided.</p>", esc(why)),
        ),
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static(
            "Basic realm=\"pantheon approvals\", charset=\"UTF-8\"",
        ),
    );
    r
}

fn conductor(ctx: &Ctx, channel: ApprovalChannel) -> Conductor {
    Conductor::new(ctx.root.clone())
        .with_origin(Origin::new(None, channel.as_str()))
        .with_link_key(ctx.key.clone())
}

/// `GET /a/TOKEN`: the held item and the form, or why the link would be refused.
async fn page(
    State(ctx): State<Arc<Ctx>>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = operator_of(&ctx, &headers) {
        return *r;
    }
    let view = tokio::task::spawn_blocking(move || {
        conductor(&ctx, ApprovalChannel::Http)
            .view_link(&token)
            .map(|v| render_page(&v, &token, &ctx.approver))
    })
    .await
    .ok()
    .flatten();
    match view {
        Some(html) => html_response(StatusCode::OK, html),
        None => html_response(
            StatusCode::NOT_FOUND,
            shell(
                "Unknown link",
                "<p class=bad>This link is unknown: it was never minted here, or it ended more than a day ago.</p>",
            ),
        ),
    }
}

/// `POST /a/TOKEN`: redeems the token; the receipt page says what happened.
async fn decide(
    State(ctx): State<Arc<Ctx>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let operator = match operator_of(&ctx, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let form = parse_form(&body);
    let done = tokio::task::spawn_blocking(move || -> Result<LinkReceipt, String> {
        let channel = match form.get("via").map(String::as_str) {
            Some("ntfy") => ApprovalChannel::Ntfy,
            _ => ApprovalChannel::Http,
        };
        let approver = check_approver(&ctx, &token, &form)?
            .or_else(|| operator.map(|o| format!("{o} (operator credential)")));
        let raise = raise_of(&form)?;
        conductor(&ctx, channel)
            .redeem_link(&RedeemRequest {
                token: token.clone(),
                expect_handoff: form.get("handoff").cloned(),
                expect_digest: form.get("digest").cloned(),
                channel: Some(channel),
                approver,
                reason: form.get("reason").cloned(),
                raise,
            })
            .map_err(|e| format!("error: {e}"))
    })
    .await
    .unwrap_or_else(|e| Err(format!("error: {e}")));
    match done {
        Ok(r) => {
            let code = if r.applied() {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            };
            html_response(code, render_receipt(&r))
        }
        Err(e) => html_response(
            StatusCode::FORBIDDEN,
            shell(
                "Refused",
                &format!("<p class=bad>{}</p><p>Nothing was decided.</p>", esc(&e)),
            ),
        ),
    }
}

/// The approver the request proves, or why it proves none.
fn check_approver(
    ctx: &Ctx,
    token: &str,
    form: &HashMap<String, String>,
) -> Result<Option<String>, String> {
    match &ctx.approver {
        Approver::Link => Ok(None),
        Approver::SshSigners(file) => {
            let principal = form
                .get("principal")
                .filter(|p| !p.trim().is_empty())
                .ok_or("this listener requires a signed decision: give principal and signature")?;
            let signature = form
                .get("signature")
                .filter(|s| !s.trim().is_empty())
                .ok_or("this listener requires a signed decision: give principal and signature")?;
            let digest = conductor(ctx, ApprovalChannel::Http)
                .view_link(token)
                .map(|v| v.record.content_sha256)
                .ok_or("this link is unknown")?;
            verify_ssh(file, principal, signature, &signed_text(token, &digest))
                .map_err(|e| e.to_string())?;
            Ok(Some(format!("{principal} (ssh signature)")))
        }
    }
}

/// The `--on-attention` hook's links: for a held item, when a listener is recorded in the root, a
/// fresh pair minted for this notification (channel `hook`, the default lifetime) as
/// `{approve_url, reject_url, expires_at}`; nothing for any other item, or when minting is refused
/// (a pause-held item, no listener). `key`: the operator's ([`link_key`]); without one no link is
/// minted (a listener would refuse it).
pub fn hook_links(root: Root, key: Option<LinkKey>) -> crate::console::hook::Enrich {
    let ttl = default_ttl(&root);
    let c = Conductor::new(root).with_origin(Origin::new(None, "console"));
    let c = key.map(|k| c.with_link_key(k));
    Arc::new(move |item: &crate::live::attention::Item| {
        let c = c.as_ref()?;
        if item.kind != crate::live::attention::Kind::Held {
            return None;
        }
        let hid = crate::engine::HandoffId::parse(item.ids.get("handoff_id")?).ok()?;
        let base = crate::engine::read_approvals_listener(c.root())?.base_url;
        let m = c
            .mint_link(&crate::engine::LinkRequest {
                handoff_id: hid,
                ttl,
                channel: ApprovalChannel::Hook,
            })
            .ok()?;
        let mut out = serde_json::Map::new();
        out.insert(
            "approve_url".into(),
            format!("{base}/a/{}", m.approve_token).into(),
        );
        out.insert(
            "reject_url".into(),
            format!("{base}/a/{}", m.reject_token).into(),
        );
        out.insert("expires_at".into(), m.expires_at.into());
        Some(out)
    })
}

/// What an approver signs: the token and the content digest, one per line.
pub(crate) fn signed_text(token: &str, digest: &str) -> String {
    format!("{token}\n{digest}\n")
}

/// Runs the operator's `ssh-keygen -Y verify` (found on `PATH`, never named by the root) on
/// `signature` over `message` for `principal` against the allowed-signers `file`.
fn verify_ssh(
    file: &std::path::Path,
    principal: &str,
    signature: &str,
    message: &str,
) -> Result<(), SignatureError> {
    use std::io::Write;
    if principal.len() > 200
        || principal
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(SignatureError::Principal);
    }
    let mut sig = tempfile::NamedTempFile::new().map_err(SignatureError::Io)?;
    sig.write_all(signature.replace("\r\n", "\n").as_bytes())
        .map_err(SignatureError::Io)?;
    let mut child = std::process::Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(file)
        .args(["-I", principal, "-n", SIGNATURE_NAMESPACE, "-s"])
        .arg(sig.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(SignatureError::Run)?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(message.as_bytes());
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(SignatureError::Refused(principal.to_owned()))
    }
}

/// Why a signed decision was not taken ([`verify_ssh`]).
#[derive(Debug)]
enum SignatureError {
    /// The principal has control characters or spaces, or is over 200 bytes.
    Principal,
    /// The signature's temporary file could not be written.
    Io(std::io::Error),
    /// `ssh-keygen` could not be started.
    Run(std::io::Error),
    /// `ssh-keygen` did not accept the signature for this principal.
    Refused(String),
}

impl std::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Principal => f.write_str("the principal is not a usable name"),
            Self::Io(e) => write!(f, "error: {e}"),
            Self::Run(e) => write!(
                f,
                "error: cannot run ssh-keygen to verify the signature: {e}"
            ),
            Self::Refused(p) => write!(
                f,
                "the signature does not verify for principal {p:?} against the allowed signers: nothing was decided"
            ),
        }
    }
}

/// The largest relayed decision read (a NATS message, a dropped file).
pub(crate) const MAX_RELAYED_BYTES: usize = 16 * 1024;

/// Why a relayed decision could not be read.
#[derive(Debug)]
pub(crate) enum RelayError {
    /// Its size, over [`MAX_RELAYED_BYTES`].
    TooLarge(usize),
    /// It starts as JSON but is not one object.
    NotAnObject(serde_json::Error),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(n) => {
                write!(
                    f,
                    "the decision is {n} bytes, more than {MAX_RELAYED_BYTES}"
                )
            }
            Self::NotAnObject(e) => write!(f, "the decision is not a JSON object: {e}"),
        }
    }
}

/// The fields of a relayed decision (a NATS message, a dropped file): a JSON object (string or
/// number values) or a form body, with the same names as the page's form: `token` (or `url`, the
/// link itself), `handoff`, `digest`, `reason`, `raise_usd`, `raise_tokens`, and `from`.
pub(crate) fn relay_fields(body: &[u8]) -> Result<HashMap<String, String>, RelayError> {
    if body.len() > MAX_RELAYED_BYTES {
        return Err(RelayError::TooLarge(body.len()));
    }
    let text = String::from_utf8_lossy(body);
    if !text.trim_start().starts_with('{') {
        return Ok(parse_form(text.trim().as_bytes()));
    }
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(RelayError::NotAnObject)?;
    Ok(v.into_iter()
        .take(64)
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s.chars().take(8192).collect())),
            serde_json::Value::Number(n) => Some((k, n.to_string())),
            _ => None,
        })
        .collect())
}

/// Redeems a relayed decision exactly as the listener's `POST` does (the same checks, receipts and
/// journal entry), through `channel`; `approver`: who the channel proves sent it, if anyone.
pub fn redeem_relayed(
    root: &Root,
    key: &LinkKey,
    channel: ApprovalChannel,
    fields: &HashMap<String, String>,
    approver: Option<String>,
) -> Result<LinkReceipt, String> {
    let token = fields
        .get("token")
        .cloned()
        .or_else(|| {
            let url = fields.get("url")?;
            let tail = url.trim().rsplit_once("/a/")?.1;
            Some(
                tail.split(['?', '#', '/'])
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .filter(|t| !t.trim().is_empty())
        .ok_or("the decision names no token: give `token` (or `url`, the link)")?;
    let raise = raise_of(fields)?;
    Conductor::new(root.clone())
        .with_origin(Origin::new(None, channel.as_str()))
        .with_link_key(key.clone())
        .redeem_link(&RedeemRequest {
            token,
            expect_handoff: fields.get("handoff").cloned(),
            expect_digest: fields.get("digest").cloned(),
            channel: Some(channel),
            approver,
            reason: fields.get("reason").cloned(),
            raise,
        })
        .map_err(|e| format!("error: {e}"))
}

/// The raise an approval of a budget hold gives (`raise_usd`, `raise_tokens`), if any.
fn raise_of(form: &HashMap<String, String>) -> Result<Option<Budget>, String> {
    let mut m = serde_json::Map::new();
    if let Some(v) = form.get("raise_usd").filter(|v| !v.trim().is_empty()) {
        let usd: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("the raise {v:?} is not a number of dollars"))?;
        m.insert("cost_usd".into(), serde_json::json!(usd));
    }
    if let Some(v) = form.get("raise_tokens").filter(|v| !v.trim().is_empty()) {
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("the raise {v:?} is not a number of tokens"))?;
        m.insert("tokens".into(), serde_json::json!(n));
    }
    if m.is_empty() {
        return Ok(None);
    }
    Budget::parse(&serde_json::Value::Object(m))
        .map(Some)
        .map_err(|e| format!("the raise: {e}"))
}

/// An `application/x-www-form-urlencoded` body (at most 64 fields, each value cut to 8 KiB).
pub(crate) fn parse_form(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .take(64)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (unescape(k), unescape(v).chars().take(8192).collect())
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn html_response(code: StatusCode, html: String) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
            ),
        ],
        html,
    )
        .into_response()
}

/// HTML-escapes text.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {}
            c => out.push(c),
        }
    }
    out
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:40em;margin:0 auto;padding:1em;\
line-height:1.4;font-size:17px}h1{font-size:1.3em}dt{font-weight:bold;margin-top:.6em}dd{margin:0;\
overflow-wrap:anywhere}button{font-size:1.1em;padding:.7em 1.4em;margin:.5em .5em .5em 0;width:100%}\
.ok{color:#060}.bad{color:#a00}input,textarea{width:100%;font-size:1em;box-sizing:border-box}\
code{overflow-wrap:anywhere;font-size:.85em}";

fn shell(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width,initial-scale=1\">\
         <meta name=referrer content=no-referrer><title>{t}</title><style>{STYLE}</style></head>\
         <body><h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    )
}

/// The page of a link: what is held, and the form (or why the link would be refused now).
pub(crate) fn render_page(v: &LinkView, token: &str, approver: &Approver) -> String {
    let r = &v.record;
    let mut b = String::new();
    b.push_str("<dl>");
    let mut row = |k: &str, val: &str| {
        b.push_str(&format!("<dt>{}</dt><dd>{}</dd>", esc(k), val));
    };
    row("Workflow", &esc(&r.workflow_id));
    row("Step", &esc(&r.step));
    row("God", &esc(&r.god));
    row("Handoff", &esc(&r.handoff_id));
    if let Some(d) = &v.dispatch {
        row("From", &esc(&d.from_god));
        row("Summary", &esc(&cut(&d.context.summary, 2000)));
        if let Some(h) = &d.held_because {
            row("Held because", &esc(&cut(h, 300)));
        }
        let decisions: String = d
            .context
            .decisions
            .iter()
            .take(30)
            .map(|x| format!("<li>{}</li>", esc(&cut(x, 300))))
            .collect();
        row(
            "Decisions",
            &if decisions.is_empty() {
                "none".into()
            } else {
                format!("<ul>{decisions}</ul>")
            },
        );
    }
    if !v.budgets.is_empty() {
        let list: String = v
            .budgets
            .iter()
            .take(10)
            .map(|x| format!("<li>{}</li>", esc(&x.text())))
            .collect();
        row("Budgets reached", &format!("<ul>{list}</ul>"));
    }
    row(
        "Content SHA-256",
        &format!("<code>{}</code>", esc(&r.content_sha256)),
    );
    row("Expires", &esc(&r.expires_at));
    b.push_str("</dl>");
    if let Some(refusal) = &v.refusal {
        b.push_str(&format!(
            "<p class=bad><b>{}</b>: {}</p>",
            esc(refusal.refused.map(|x| x.as_str()).unwrap_or("refused")),
            esc(&refusal.message)
        ));
        return shell("Held work", &b);
    }
    b.push_str(&format!(
        "<form method=post action=\"/a/{tok}\"><input type=hidden name=handoff value=\"{h}\">\
         <input type=hidden name=digest value=\"{d}\">",
        tok = esc(token),
        h = esc(&r.handoff_id),
        d = esc(&r.content_sha256)
    ));
    if let Approver::SshSigners(_) = approver {
        b.push_str(&format!(
            "<p>This listener needs a signed decision: sign <code>{}</code> then a newline, the \
             digest and a newline, with <code>ssh-keygen -Y sign -n {SIGNATURE_NAMESPACE}</code>.</p>\
             <label>Principal <input name=principal></label>\
             <label>Signature <textarea name=signature rows=6></textarea></label>",
            esc("the token of this link")
        ));
    }
    match r.decision {
        LinkDecision::Approve => {
            if !v.budgets.is_empty() {
                b.push_str(
                    "<p>This is a budget hold: approving it needs a raise. New limit for each \
                     budget reached:</p><label>Dollars <input name=raise_usd inputmode=decimal>\
                     </label><label>Tokens <input name=raise_tokens inputmode=numeric></label>",
                );
            }
            b.push_str("<button type=submit>Approve</button></form>");
        }
        LinkDecision::Reject => b.push_str(
            "<label>Reason <input name=reason></label><button type=submit>Reject</button></form>",
        ),
    }
    shell(
        match r.decision {
            LinkDecision::Approve => "Approve held work",
            LinkDecision::Reject => "Reject held work",
        },
        &b,
    )
}

/// The receipt page of a decision.
pub(crate) fn render_receipt(r: &LinkReceipt) -> String {
    let (title, class) = if r.applied() {
        (
            if r.status == "approved" {
                "Approved"
            } else {
                "Rejected"
            },
            "ok",
        )
    } else {
        ("Not decided", "bad")
    };
    let mut b = format!("<p class={class}>{}</p>", esc(&r.message));
    if let Some(why) = r.refused {
        b.push_str(&format!(
            "<p>Receipt: <b>{}</b>. Nothing was decided by this link.</p>",
            esc(why.as_str())
        ));
    }
    if let Some(res) = &r.result {
        b.push_str(&format!(
            "<dl><dt>Workflow</dt><dd>{}</dd><dt>Now</dt><dd>{}</dd></dl>",
            esc(res.workflow_id.as_str()),
            esc(&res.state_status.to_string())
        ));
    }
    shell(title, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_line_of_a_held_item_carries_a_fresh_pair_of_links() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let c = Conductor::new(root.clone());
        c.init().unwrap();
        for e in std::fs::read_dir(d.path().join("conductor/rules")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        std::fs::write(
            d.path().join("conductor/workflows/gate.yaml"),
            "workflow:\n  id: gate\n  steps:\n    - id: plan\n      god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n",
        )
        .unwrap();
        c.submit_handoff(&serde_json::json!({"handoff_id": "hof_20261206_hk0001",
            "workflow_id": "wf_hk", "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
            "routing": {"workflow_definition": "gate"},
            "context": {"summary": "s", "decisions": [], "artifacts": []}}))
            .unwrap();
        let snap = crate::live::LiveModel::open(root.clone(), crate::live::ModelOptions::default())
            .snapshot();
        let items: Vec<_> = crate::live::attention::items(&snap, chrono::Utc::now())
            .into_iter()
            .filter(|i| i.kind == crate::live::attention::Kind::Held)
            .collect();
        assert_eq!(items.len(), 1, "{items:?}");
        let enrich = hook_links(root.clone(), Some(LinkKey::generate()));
        // No listener recorded: no links.
        let line = crate::console::notify::hook_input_with(&items, Some(&enrich));
        assert!(!line.contains("approve_url"), "{line}");
        crate::engine::write_approvals_listener(&root, "http://127.0.0.1:9").unwrap();
        let first = crate::console::notify::hook_input_with(&items, Some(&enrich));
        let second = crate::console::notify::hook_input_with(&items, Some(&enrich));
        let v: serde_json::Value = serde_json::from_str(first.trim()).unwrap();
        assert!(
            v["approve_url"]
                .as_str()
                .unwrap()
                .starts_with("http://127.0.0.1:9/a/"),
            "{v}"
        );
        assert!(
            v["reject_url"].is_string() && v["expires_at"].is_string(),
            "{v}"
        );
        assert_ne!(first, second, "a fresh pair per notification");
        assert_eq!(c.links().len(), 4);
    }

    #[test]
    fn a_form_body_is_decoded_and_bounded() {
        let f = parse_form(b"handoff=hof_1&reason=too+risky%21&x=%zz&empty");
        assert_eq!(f["handoff"], "hof_1");
        assert_eq!(f["reason"], "too risky!");
        assert_eq!(f["x"], "%zz");
        assert_eq!(f["empty"], "");
        assert_eq!(parse_form(b"a=%4").get("a").map(String::as_str), Some("%4"));
    }

    #[test]
    fn an_authorization_gives_its_secret_as_basic_password_or_bearer() {
        // "alice:pan_x" and "x:" in standard base64 (with and without padding).
        assert_eq!(
            secret_of("Basic YWxpY2U6cGFuX3g=").as_deref(),
            Some("pan_x")
        );
        assert_eq!(secret_of("basic YWxpY2U6cGFuX3g").as_deref(), Some("pan_x"));
        assert_eq!(secret_of("Bearer pan_y").as_deref(), Some("pan_y"));
        assert_eq!(secret_of("Basic eDo="), None, "an empty password");
        assert_eq!(secret_of("Basic !!!!"), None);
        assert_eq!(secret_of("Digest abc"), None);
        assert_eq!(base64_decode("TWFu").as_deref(), Some(&b"Man"[..]));
        assert_eq!(base64_decode("TQ").as_deref(), Some(&b"M"[..]));
        assert_eq!(base64_decode("T"), None);
    }

    #[test]
    fn a_relayed_decision_is_json_or_a_form_and_bounded() {
        let f = relay_fields(br#"{"token": "t", "raise_usd": 5, "x": [1]}"#).unwrap();
        assert_eq!(f["token"], "t");
        assert_eq!(f["raise_usd"], "5");
        assert!(!f.contains_key("x"));
        assert_eq!(relay_fields(b"token=t&handoff=h").unwrap()["handoff"], "h");
        assert!(relay_fields(b"{not json").is_err());
        assert!(relay_fields(&vec![b' '; MAX_RELAYED_BYTES + 1]).is_err());
    }

    #[test]
    fn text_on_the_page_is_escaped() {
        assert_eq!(esc("<b a=\"x\">&'"), "&lt;b a=&quot;x&quot;&gt;&amp;&#39;");
    }
}
