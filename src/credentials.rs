//! Who may act over the network: the credentials file of `pantheon mcp --http --credentials FILE`
//! and `pantheon serve --mcp ADDR --credentials FILE` (docs/THREAT-MODEL.md, "Credentials").
//!
//! One JSON object a line, one line per principal: a god or an operator, its rights named by their
//! verb, the other gods' inboxes it may read, and the SHA-256 of its secret (never the secret):
//!
//! ```text
//! {"name":"hermes","kind":"god","rights":["submit","ack","post","lock","read_inbox"],"inboxes":[],"sha256":"…"}
//! ```
//!
//! A secret is 256 random bits (`pan_` and 64 hex digits), made by [`add`] and shown once. Its
//! SHA-256 is enough to store: a slow password hash defends guessable secrets, and a 256-bit random
//! one cannot be guessed, from the digest or otherwise. [`Credentials::authenticate`] hashes the
//! bearer token and compares it with every line's digest in constant time, so neither the answer's
//! timing nor an early exit says how much of a digest matched.
//!
//! The file lies outside the root (a root's writers, the agents, must not be able to mint
//! themselves a credential) and is readable by its owner only; [`Credentials::load`] refuses it
//! otherwise, and a link in its place.

use std::collections::BTreeSet;
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::engine::GodName;

/// The largest credentials file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What a secret starts with, so a leaked one is recognisable in a log or a paste.
const SECRET_PREFIX: &str = "pan_";

/// Whether a principal is a god (an agent acting as itself) or an operator (a person).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An agent: it acts only as the god it is named after.
    God,
    /// A person: approves, requeues and aborts; acts as nobody's god.
    Operator,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::God => "god",
            Kind::Operator => "operator",
        })
    }
}

/// A right, named by its verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Right {
    /// Submit handoffs (a god: `from_god` itself).
    Submit,
    /// Acknowledge dispatches (a god: its own).
    Ack,
    /// Post bus messages and write the board (a god: as `source` itself).
    Post,
    /// Take, release and heartbeat locks and worker entries (a god: as its own worker).
    Lock,
    /// Read an inbox (a god: its own, and those its line's `inboxes` name).
    ReadInbox,
    /// Approve or deny a dispatch held for approval.
    Approve,
    /// Requeue a dead letter.
    Requeue,
    /// Abort a workflow, clean up its temporary artifacts.
    Abort,
}

impl Right {
    /// Every right, in the order the docs list them.
    pub const ALL: [Right; 8] = [
        Right::Submit,
        Right::Ack,
        Right::Post,
        Right::Lock,
        Right::ReadInbox,
        Right::Approve,
        Right::Requeue,
        Right::Abort,
    ];

    /// The verb, as a credentials line and a refusal spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Submit => "submit",
            Right::Ack => "ack",
            Right::Post => "post",
            Right::Lock => "lock",
            Right::ReadInbox => "read_inbox",
            Right::Approve => "approve",
            Right::Requeue => "requeue",
            Right::Abort => "abort",
        }
    }

    /// The right named `verb`, if there is one.
    pub fn parse(verb: &str) -> Option<Right> {
        Right::ALL.into_iter().find(|r| r.as_str() == verb)
    }

    /// What a principal of `kind` may do unless its line says otherwise.
    pub fn defaults(kind: Kind) -> BTreeSet<Right> {
        match kind {
            Kind::God => [
                Right::Submit,
                Right::Ack,
                Right::Post,
                Right::Lock,
                Right::ReadInbox,
            ]
            .into(),
            Kind::Operator => [
                Right::ReadInbox,
                Right::Approve,
                Right::Requeue,
                Right::Abort,
            ]
            .into(),
        }
    }
}

impl fmt::Display for Right {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a request comes from, once its credential is checked (or as `mcp --as GOD` names it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Principal {
    /// The god's name, or the operator's.
    pub name: String,
    /// God or operator.
    pub kind: Kind,
    /// What it may do.
    pub rights: BTreeSet<Right>,
    /// The other gods whose inboxes it may read (`*`: every god's). An operator reads every inbox.
    #[serde(default)]
    pub inboxes: Vec<String>,
}

impl Principal {
    /// A god with the default rights of a god, reading only its own inbox.
    pub(crate) fn god(name: &str) -> anyhow::Result<Self> {
        let name = GodName::parse(name)?.to_string();
        Ok(Self {
            name,
            kind: Kind::God,
            rights: Right::defaults(Kind::God),
            inboxes: Vec::new(),
        })
    }

    /// Whether it holds `right`.
    pub(crate) fn may(&self, right: Right) -> bool {
        self.rights.contains(&right)
    }

    /// Whether it may read `god`'s inbox (given it holds `read_inbox`).
    pub(crate) fn may_read_inbox_of(&self, god: &str) -> bool {
        self.kind == Kind::Operator
            || self.name == god
            || self.inboxes.iter().any(|i| i == "*" || i == god)
    }
}

/// One line of the file: the principal and its secret's digest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    name: String,
    kind: Kind,
    rights: BTreeSet<Right>,
    #[serde(default)]
    inboxes: Vec<String>,
    sha256: String,
}

/// The principals of a credentials file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    entries: Vec<(Principal, [u8; 32])>,
}

impl Credentials {
    /// Reads `path`: refused when it is a link, not a regular file, readable or writable by
    /// anyone but its owner, inside `root_dir`, over 1 MiB, or holds a line that does not parse
    /// (named by its number) or a name twice.
    pub(crate) fn load(path: &Path, root_dir: &Path) -> anyhow::Result<Self> {
        refuse_inside_root(path, root_dir)?;
        Self::parse(&read_checked(path)?).with_context(|| format!("{}", path.display()))
    }

    /// The principals of a file's text (its check of names and digests, without the file).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let mut entries: Vec<(Principal, [u8; 32])> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i.saturating_add(1);
            let raw = raw.trim();
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let line: Line = serde_json::from_str(raw).with_context(|| {
                format!("line {n} is not a credential ({{name, kind, rights, inboxes, sha256}})")
            })?;
            check_name(&line.name, line.kind).with_context(|| format!("line {n}"))?;
            let digest = parse_digest(&line.sha256)
                .with_context(|| format!("line {n}: sha256 must be 64 hex digits"))?;
            if entries.iter().any(|(p, _)| p.name == line.name) {
                bail!(
                    "line {n}: {:?} has a credential already; one line per principal",
                    line.name
                );
            }
            entries.push((
                Principal {
                    name: line.name,
                    kind: line.kind,
                    rights: line.rights,
                    inboxes: line.inboxes,
                },
                digest,
            ));
        }
        Ok(Self { entries })
    }

    /// The principal whose secret `bearer` is, if any. Every digest is compared, in constant time.
    pub(crate) fn authenticate(&self, bearer: &str) -> Option<Principal> {
        let presented: [u8; 32] = Sha256::digest(bearer.as_bytes()).into();
        let mut found = None;
        for (p, digest) in &self.entries {
            if bool::from(presented.ct_eq(digest)) {
                found = Some(p);
            }
        }
        found.cloned()
    }

    /// How many principals the file names.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The token of an `Authorization: Bearer TOKEN` header value.
pub(crate) fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What `credentials add` makes.
#[derive(Debug, Clone)]
pub(crate) struct NewCredential {
    /// Who it is for.
    pub principal: Principal,
    /// The secret, to hand to the principal (it is stored hashed only).
    pub secret: String,
}

/// Adds a line for `principal` to `path` (made, readable by its owner only, when missing) and
/// returns the new secret. Refused when `path` lies inside `root_dir`, is not private, or names
/// the principal already. The file is rewritten whole (temporary file and rename) under a lock
/// beside it, so two `add`s never lose a line and a reader never sees half of one.
pub(crate) fn add(
    path: &Path,
    root_dir: &Path,
    principal: Principal,
) -> anyhow::Result<NewCredential> {
    check_name(&principal.name, principal.kind)?;
    refuse_inside_root(path, root_dir)?;
    let dir = parent_dir(path);
    let file_name = path
        .file_name()
        .with_context(|| format!("{}: name a file, not a directory", path.display()))?;
    let lock_path = dir.join(format!(".{}.lock", file_name.to_string_lossy()));
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(|e| open_error(&lock_path, e))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let mut text = match std::fs::symlink_metadata(path) {
        Ok(_) => read_checked(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(open_error(path, e)),
    };
    let known = Credentials::parse(&text).with_context(|| format!("{}", path.display()))?;
    if known.entries.iter().any(|(p, _)| p.name == principal.name) {
        bail!(
            "{}: {:?} has a credential already; remove its line to replace it",
            path.display(),
            principal.name
        );
    }
    let secret = new_secret();
    let line = Line {
        name: principal.name.clone(),
        kind: principal.kind,
        rights: principal.rights.clone(),
        inboxes: principal.inboxes.clone(),
        sha256: hex(&Sha256::digest(secret.as_bytes())),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&serde_json::to_string(&line)?);
    text.push('\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", file_name.to_string_lossy()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(&dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    drop(lock);
    Ok(NewCredential { principal, secret })
}

/// The text of a credentials file, refused when it is a link, not a regular file, not private, or
/// over the size limit.
fn read_checked(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    check_private(path, &meta)?;
    let mut text = String::new();
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {} (is it UTF-8 text?)", path.display()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "{}: the credentials file is over {MAX_FILE_BYTES} bytes; it holds one short line per principal",
            path.display()
        );
    }
    Ok(text)
}

/// A fresh secret: 256 bits from the thread's CSPRNG (ChaCha, seeded from the operating system).
fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{SECRET_PREFIX}{}", hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_digest(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        let (hi, lo) = (digit(pair[0])?, digit(pair[1])?);
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

fn check_name(name: &str, kind: Kind) -> anyhow::Result<()> {
    let what = match kind {
        Kind::God => "god name",
        Kind::Operator => "operator name",
    };
    GodName::parse_as(what, name)?;
    Ok(())
}

/// The directory a file path lies in (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuses a path whose directory is the root or lies under it (links resolved), where the root's
/// writers could replace the file.
fn refuse_inside_root(path: &Path, root_dir: &Path) -> anyhow::Result<()> {
    let dir = parent_dir(path);
    let dir = dir.canonicalize().with_context(|| {
        format!(
            "{}: its directory {} does not exist",
            path.display(),
            dir.display()
        )
    })?;
    if let Ok(root) = root_dir.canonicalize()
        && dir.starts_with(&root)
    {
        bail!(
            "{}: the credentials file lies inside the root {}, where every agent can write; keep it \
             outside (e.g. ~/.config/pantheon/credentials)",
            path.display(),
            root.display()
        );
    }
    Ok(())
}

fn check_private(path: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{}: others can read or write the credentials file (mode {mode:03o}); run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        bail!(
            "{}: the credentials file belongs to uid {}, not to this user (uid {me})",
            path.display(),
            meta.uid()
        );
    }
    Ok(())
}

fn open_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        anyhow::anyhow!(
            "{}: a symbolic link; name the credentials file itself",
            path.display()
        )
    } else if e.kind() == std::io::ErrorKind::NotFound {
        anyhow::anyhow!(
            "{}: no such file; `pantheon credentials add NAME --god --file {}` makes it",
            path.display(),
            path.display()
        )
    } else {
        anyhow::anyhow!("cannot open {}: {e}", path.display())
    }
}

#[cfg(test)]
#[path = "credentials_tests.rs"]
mod tests;
