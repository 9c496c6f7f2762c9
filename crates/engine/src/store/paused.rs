//! `conductor/paused.json` as read and written: what is paused (docs/PROTOCOL.md §2.14). The file's
//! model sits on the store's floor so the bus (a paused track refuses posts) reads it without the
//! conductor; the acts that pause and resume, and what they do to dispatches, are the conductor's
//! (`conductor/pause.rs`).

use crate::error::Refusal;
use std::io::Read;

use chrono::{DateTime, Utc};
use rustix::fs::OFlags;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::time::parse_ts;
use crate::store::{GodName, Root, TrackName, WorkflowId, is_valid_name};
use crate::words::words;

words!(
    /// What a pause stops (docs/PROTOCOL.md §2.14).
    pub PauseKind {
        /// One god: nothing new reaches its inbox; what it has keeps its deadline frozen.
        God = "god",
        /// One workflow: nothing new is dispatched for it; its open dispatches are frozen.
        Workflow = "workflow",
        /// One track: new posts are refused.
        Track = "track",
        /// One peer pantheon: the outbound records to it wait in the outbox.
        Peer = "peer",
        /// The whole root: every god, workflow, track and peer.
        All = "all",
    }
);

/// The largest `conductor/paused.json` read (a larger one is refused, naming the file).
pub const MAX_PAUSED_BYTES: u64 = 1024 * 1024;
/// The most pauses in force at once (a new one past it is refused).
pub(crate) const MAX_PAUSES: usize = 1000;
/// Ended pauses kept in the file (the newest), for `paused` and for the record.
pub(crate) const MAX_ENDED: usize = 100;
/// The longest pause `--until` may name.
pub(crate) const MAX_UNTIL: chrono::Duration = chrono::Duration::days(365);
/// The `held_because` part a pause writes: `paused: god hephaestus`.
pub(crate) const HOLD_PREFIX: &str = "paused: ";
/// A `held_because` part that says only `paused` (another writer's, or the short form): read
/// as a hold of whichever pause in force covers the dispatch.
pub(crate) const BARE_HOLD: &str = "paused";
/// The entries of a dispatch's `frozen` kept (the newest).
pub(crate) const MAX_FROZEN: usize = 20;
/// The fastest resume rate accepted, per second.
pub(crate) const MAX_RATE: f64 = 1_000_000.0;

/// What one pause names: a kind, and the god, workflow, track or peer (none for `all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseTarget {
    /// What is paused.
    pub kind: PauseKind,
    /// Its name (`None` for [`PauseKind::All`]).
    pub name: Option<String>,
}

impl PauseTarget {
    /// One god.
    pub fn god(g: &GodName) -> Self {
        Self::named(PauseKind::God, g.as_str())
    }
    /// One workflow.
    pub fn workflow(w: &WorkflowId) -> Self {
        Self::named(PauseKind::Workflow, w.as_str())
    }
    /// One track.
    pub fn track(t: &TrackName) -> Self {
        Self::named(PauseKind::Track, t.as_str())
    }
    /// One peer pantheon; refuses a name that is no valid name (docs/PROTOCOL.md §1.3).
    pub fn peer(p: &str) -> Result<Self> {
        if !is_valid_name(p) {
            return Err(Error::refused(format!(
                "peer {p:?} is not a valid name (letters, digits, '_' and '-', at most 64)"
            )));
        }
        Ok(Self::named(PauseKind::Peer, p))
    }
    /// The whole root.
    pub fn all() -> Self {
        Self {
            kind: PauseKind::All,
            name: None,
        }
    }
    pub(crate) fn named(kind: PauseKind, name: &str) -> Self {
        Self {
            kind,
            name: Some(name.to_owned()),
        }
    }
    /// `god hephaestus`, `all`: how the pause is named in messages and in `held_because`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{} {n}", self.kind),
            None => self.kind.as_str().to_owned(),
        }
    }
    /// The `held_because` part of a dispatch held by this pause.
    pub(crate) fn hold_text(&self) -> String {
        format!("{HOLD_PREFIX}{}", self.label())
    }
}

/// One pause, as `conductor/paused.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    /// `pause_{YYYYMMDD}_{HHMMSS}_{6 hex}`.
    pub id: String,
    /// What is paused.
    pub kind: PauseKind,
    /// The god, workflow, track or peer (absent for `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who paused (the journal's actor).
    pub by: String,
    /// Through what (`cli`, `console`, …).
    #[serde(default)]
    pub source: String,
    /// Why.
    pub reason: String,
    /// When it began (RFC 3339).
    pub since: String,
    /// When the supervisor ends it by itself (RFC 3339), if ever.
    #[serde(default)]
    pub until: Option<String>,
    /// Set when its resume began: the instant every frozen deadline is shifted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resuming_at: Option<String>,
    /// When it ended (in `ended` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<String>,
    /// Who ended it (`serve` when its `until` passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
    /// Fields another writer added, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Pause {
    /// What it names.
    pub fn target(&self) -> PauseTarget {
        PauseTarget {
            kind: self.kind,
            name: self.name.clone(),
        }
    }
    /// Whether it stops dispatches to `god` or of workflow `wf`.
    pub(crate) fn covers(&self, god: &str, wf: &str) -> bool {
        match self.kind {
            PauseKind::All => true,
            PauseKind::God => self.name.as_deref() == Some(god),
            PauseKind::Workflow => self.name.as_deref() == Some(wf),
            PauseKind::Track | PauseKind::Peer => false,
        }
    }
    /// Whether it stops (and freezes) dispatches to `god` of workflow `wf`.
    pub fn covers_dispatch(&self, god: &str, wf: &str) -> bool {
        self.covers(god, wf)
    }
    /// Whether it stops dispatches to `god` whatever their workflow.
    pub(crate) fn covers_god(&self, god: &str) -> bool {
        match self.kind {
            PauseKind::All => true,
            PauseKind::God => self.name.as_deref() == Some(god),
            _ => false,
        }
    }
    pub(crate) fn since_ts(&self) -> Option<DateTime<Utc>> {
        parse_ts(&self.since)
    }
    /// When its `until` falls.
    pub fn until_ts(&self) -> Option<DateTime<Utc>> {
        self.until.as_deref().and_then(parse_ts)
    }
}

/// `conductor/paused.json`: the pauses in force and the last ended ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PausedFile {
    /// The format's version (1).
    #[serde(default = "one")]
    pub version: u32,
    /// The pauses in force (a resume under way included: it has `resuming_at`).
    #[serde(default)]
    pub pauses: Vec<Pause>,
    /// The newest ended pauses, oldest first.
    #[serde(default)]
    pub ended: Vec<Pause>,
    /// Fields another writer added, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn one() -> u32 {
    1
}

/// Reads `conductor/paused.json` (a missing file is no pause): opened without following a link, at
/// most [`MAX_PAUSED_BYTES`], every entry checked (kind, name, times). Anything else is refused as
/// [`Error::Corrupt`] naming the file and what is wrong.
pub(crate) fn read_file(root: &Root) -> Result<PausedFile> {
    let path = root.paused_path();
    let corrupt = |message: String| Error::Corrupt {
        path: path.clone(),
        message,
    };
    let Some(f) = crate::store::safe::open_file(root, &path, OFlags::RDONLY)? else {
        return Ok(PausedFile {
            version: 1,
            ..Default::default()
        });
    };
    let meta = f.metadata().map_err(|e| Error::io(&path, e))?;
    if !meta.is_file() {
        return Err(corrupt("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    f.take(MAX_PAUSED_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    if bytes.len() as u64 > MAX_PAUSED_BYTES {
        return Err(corrupt(format!(
            "larger than {MAX_PAUSED_BYTES} bytes; fix or move the file"
        )));
    }
    let file: PausedFile = serde_json::from_slice(&bytes).map_err(|e| {
        corrupt(format!(
            "not a paused.json (docs/PROTOCOL.md §2.14): {e}; fix or move the file"
        ))
    })?;
    for p in file.pauses.iter().chain(&file.ended) {
        check_entry(p).map_err(|why| corrupt(format!("pause {:?}: {why}", p.id)))?;
    }
    if file.pauses.len() > MAX_PAUSES {
        return Err(corrupt(format!(
            "{} pauses in force, more than {MAX_PAUSES}",
            file.pauses.len()
        )));
    }
    Ok(file)
}

/// The checks every entry passes before anything acts on it.
pub(crate) fn check_entry(p: &Pause) -> std::result::Result<(), Refusal> {
    if !p.id.starts_with("pause_") || !is_valid_name(&p.id) {
        return Err("its id is not pause_… (letters, digits, '_', at most 64)".into());
    }
    match (p.kind, p.name.as_deref()) {
        (PauseKind::All, None) => {}
        (PauseKind::All, Some(_)) => return Err("an `all` pause names nothing".into()),
        (_, None) => return Err(format!("a {} pause needs a name", p.kind).into()),
        (PauseKind::Workflow, Some(n)) if !crate::store::is_valid_workflow_id(n) => {
            return Err(format!("{n:?} is no workflow id").into());
        }
        (_, Some(n)) if !is_valid_name(n) => return Err(format!("{n:?} is no valid name").into()),
        _ => {}
    }
    for (what, t) in [
        ("since", Some(&p.since)),
        ("until", p.until.as_ref()),
        ("resuming_at", p.resuming_at.as_ref()),
        ("resumed_at", p.resumed_at.as_ref()),
    ] {
        if let Some(t) = t
            && parse_ts(t).is_none()
        {
            return Err(format!("{what} {t:?} is not an RFC 3339 time").into());
        }
    }
    for (what, t) in [("by", &p.by), ("reason", &p.reason)] {
        if t.len() > 4096 {
            return Err(format!("{what} is longer than 4096 bytes").into());
        }
    }
    Ok(())
}

pub(crate) fn write_file(root: &Root, file: &PausedFile) -> Result<()> {
    write_json(root, &root.paused_path(), file)
}

/// The pauses in force, as the engine's checks read them (a resume under way included).
#[derive(Debug, Clone, Default)]
pub struct Pauses {
    pub(crate) list: Vec<Pause>,
}

impl Pauses {
    /// Reads the pauses in force (none when the file is missing); refuses a file [`read_file`]
    /// refuses.
    pub fn load(root: &Root) -> Result<Self> {
        Ok(Self {
            list: read_file(root)?.pauses,
        })
    }

    /// [`Self::load`] for an act that goes on whatever the file holds: an unreadable file is no pause
    /// and a warning naming it.
    pub(crate) fn load_or_warn(root: &Root, warnings: &mut Vec<String>) -> Self {
        match Self::load(root) {
            Ok(p) => p,
            Err(e) => {
                warnings.push(format!("pauses not applied: {e}"));
                Self::default()
            }
        }
    }

    /// The pauses in force.
    pub fn list(&self) -> &[Pause] {
        &self.list
    }

    /// The pause that holds a new dispatch to `god` for workflow `wf`, if any (the first in force).
    pub(crate) fn holding(&self, god: &str, wf: &str) -> Option<&Pause> {
        self.list.iter().find(|p| p.covers(god, wf))
    }

    /// The pause that stops new dispatches to `god` whatever their workflow (its own or the whole
    /// root's), if any.
    pub fn god_paused(&self, god: &str) -> Option<&Pause> {
        self.list.iter().find(|p| p.covers_god(god))
    }

    /// The pause that stops posts on `track`, if any.
    pub(crate) fn track(&self, track: &str) -> Option<&Pause> {
        self.list.iter().find(|p| match p.kind {
            PauseKind::All => true,
            PauseKind::Track => p.name.as_deref() == Some(track),
            _ => false,
        })
    }

    /// True when nothing is paused.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The earliest `until` of a pause in force.
    pub(crate) fn next_until(&self) -> Option<DateTime<Utc>> {
        self.list.iter().filter_map(Pause::until_ts).min()
    }
}
