//! Foreign substrates read into the live model beside the root: Claude Code agent teams, MCP Agent
//! Mail, A2A agents (docs/SOURCES.md). A shell module beside `live`: it imports only the engine's
//! safe reads and the terminal text rules, never the live model, so `live` can carry its states.
//!
//! - [`a2a`]: `a2a:AGENT_CARD_URL`, agents speaking A2A (JSON-RPC over HTTP): their tasks, history
//!   and artifacts, the tasks waiting for a human as answerable attention items.
//! - [`claude_teams`]: `claude-teams:DIR`, the teams, inboxes and tasks of Claude Code agent teams.
//! - [`claude_usage`]: what each teammate cost, from Claude Code's session logs (`projects/`).
//! - [`agent_mail`]: `agent-mail:ARCHIVE[,DB]`, MCP Agent Mail's archive and its SQLite, read-only.
//! - [`hub`]: one thread per source: reads it when its files change (or on its poll), keeps the
//!   newest state, answers an item; the console's and `serve`'s live model read the states.
//! - [`files`]: the bounded, no-follow reads and the text cleaning every source uses.
//! - [`record`]: the sources' states written into the root (`conductor/sources/`) by a recorder
//!   that reads them, so the history keeps them and the time machine shows them.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) mod a2a;
pub(crate) mod agent_mail;
pub(crate) mod claude_teams;
pub(crate) mod claude_usage;
pub(crate) mod files;
pub(crate) mod hub;
pub(crate) mod record;

/// A foreign substrate read into the live model: Claude Code agent teams, MCP Agent Mail, A2A agents.
pub trait Source: Send {
    /// `claude-teams`, `agent-mail`, `a2a`.
    fn kind(&self) -> &'static str;
    /// The location as the operator gave it (after `KIND:`).
    fn location(&self) -> &str;
    /// Reads the substrate now. Never panics on hostile input; a broken substrate is an `Err` with the reason.
    fn read(&mut self) -> Result<Snapshot, SourceError>;
    /// Files or directories to watch with notify; empty means poll every `poll_every()`.
    fn watch_paths(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    fn poll_every(&self) -> Duration {
        Duration::from_secs(2)
    }
    /// Answers an attention item marked `answerable` (an A2A task in input-required): sends `text` as the task's next message.
    fn answer(&mut self, _key: &str, _text: &str) -> Result<Answered, SourceError> {
        Err(SourceError::new(format!(
            "{} is read-only: its items cannot be answered from here",
            self.kind()
        )))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub agents: Vec<Agent>,
    pub messages: Vec<Message>,
    pub tasks: Vec<Task>,
    pub locks: Vec<Lock>,
    pub attention: Vec<Attention>,
    /// What each agent cost, where the substrate logs usage (Claude Code's session logs).
    pub costs: Vec<claude_usage::TeammateCost>,
}

impl Snapshot {
    /// What agent `name` of `group` cost, when the substrate logged it.
    pub fn cost_of(&self, group: Option<&str>, name: &str) -> Option<&claude_usage::TeammateCost> {
        self.costs
            .iter()
            .find(|c| c.agent == name && group.is_none_or(|g| g == c.team))
    }
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub name: String,
    pub group: Option<String>,
    pub status: Option<String>,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub group: Option<String>,
    pub from: String,
    pub to: Vec<String>,
    pub at: Option<DateTime<Utc>>,
    pub subject: Option<String>,
    pub body: String,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub group: Option<String>,
    pub title: String,
    pub state: String,
    pub owner: Option<String>,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    pub path: String,
    pub holder: String,
    pub expires: Option<DateTime<Utc>>,
    pub raw: Value,
}
/// A foreign item waiting for a human. `key` is stable across reads (the same waiting state gives the same key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attention {
    pub key: String,
    pub agent: String,
    pub what: String,
    pub since: Option<DateTime<Utc>>,
    pub answerable: bool,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub key: String,
    pub detail: String,
}
#[derive(Debug, Clone, PartialEq)]
pub struct SourceError {
    pub reason: String,
}
impl SourceError {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}
impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}
impl std::error::Error for SourceError {}

/// The kinds `--source` takes, in the order `--help` lists them.
pub(crate) const KINDS: [&str; 3] = ["claude-teams", "agent-mail", "a2a"];

/// Parses `KIND:LOCATION` (the `--source` option) into a source, opened by its kind's module.
pub(crate) fn open(spec: &str) -> Result<Box<dyn Source>, SourceError> {
    let (kind, location) = split_spec(spec)?;
    match kind {
        "claude-teams" => Ok(Box::new(claude_teams::ClaudeTeams::new(location)?)),
        "agent-mail" => Ok(Box::new(agent_mail::AgentMail::new(location)?)),
        "a2a" => Ok(Box::new(a2a::A2aSource::new(location)?)),
        _ => unreachable!("split_spec returns only the kinds of KINDS"),
    }
}

/// `KIND:LOCATION` split at its first `:`, the kind checked against [`KINDS`] (a near miss named);
/// `claude-teams` alone (no location) means its default, `~/.claude`.
pub(crate) fn split_spec(spec: &str) -> Result<(&'static str, &str), SourceError> {
    let (kind, location) = spec.split_once(':').unwrap_or((spec, ""));
    let Some(known) = KINDS.iter().find(|k| **k == kind) else {
        let near = crate::text::nearest(kind, KINDS)
            .map(|n| format!(" (did you mean {n}?)"))
            .unwrap_or_default();
        return Err(SourceError::new(format!(
            "--source {spec:?}: unknown kind {kind:?}{near}; use KIND:LOCATION with KIND one of {}",
            KINDS.join(", ")
        )));
    };
    if location.is_empty() && *known != "claude-teams" {
        return Err(SourceError::new(format!(
            "--source {spec:?}: {known} needs a location after the colon ({})",
            match *known {
                "agent-mail" => "agent-mail:ARCHIVE[,DB]",
                _ => "a2a:AGENT_CARD_URL",
            }
        )));
    }
    Ok((known, location))
}

/// The health of a source when it was last read.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    /// Not read yet (its first read is under way).
    Pending,
    /// Read whole.
    Ok,
    /// Not readable now: the reason, and since when.
    Error {
        reason: String,
        since: DateTime<Utc>,
    },
}

/// A source as the live model carries it: what it is, how its last read went and the last good
/// snapshot (kept while the source is broken, so the console still shows what it held).
#[derive(Debug, Clone)]
pub struct SourceState {
    pub kind: &'static str,
    pub location: String,
    pub health: Health,
    /// The last snapshot read whole (empty before the first).
    pub snapshot: std::sync::Arc<Snapshot>,
    /// When it was last read, well or not.
    pub read_at: Option<DateTime<Utc>>,
    /// How long the last read took.
    pub took: Option<Duration>,
    /// Its place in the order the sources were given (what the hub's `answer` names it by).
    pub index: usize,
}

impl SourceState {
    /// A source not read yet.
    pub fn pending(kind: &'static str, location: &str, index: usize) -> Self {
        Self {
            kind,
            location: location.to_owned(),
            health: Health::Pending,
            snapshot: Default::default(),
            read_at: None,
            took: None,
            index,
        }
    }

    /// `KIND:LOCATION`, as the operator gave it.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.kind, self.location)
    }

    /// Takes the result of one read: a good one replaces the snapshot, a bad one keeps the last
    /// good snapshot and dates the error from its first read (a lasting error keeps its `since`).
    pub fn absorb(
        &mut self,
        result: Result<Snapshot, SourceError>,
        at: DateTime<Utc>,
        took: Duration,
    ) {
        self.read_at = Some(at);
        self.took = Some(took);
        match result {
            Ok(s) => {
                self.health = Health::Ok;
                self.snapshot = std::sync::Arc::new(s);
            }
            Err(e) => {
                let since = match &self.health {
                    Health::Error { since, .. } => *since,
                    _ => at,
                };
                self.health = Health::Error {
                    reason: files::clean(&e.reason, files::MAX_REASON),
                    since,
                };
            }
        }
    }

    /// The line `pantheon sources` prints for it.
    pub fn to_json(&self) -> Value {
        let s = &self.snapshot;
        let mut v = serde_json::json!({
            "source": self.spec(),
            "kind": self.kind,
            "location": self.location,
            "health": match self.health { Health::Ok => "ok", Health::Error { .. } => "error", Health::Pending => "pending" },
            "agents": s.agents.len(),
            "messages": s.messages.len(),
            "tasks": s.tasks.len(),
            "locks": s.locks.len(),
            "attention": s.attention.len(),
            "read_at": self.read_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            "took_ms": self.took.map(|d| d.as_secs_f64() * 1000.0),
        });
        if let (Health::Error { reason, since }, Some(m)) = (&self.health, v.as_object_mut()) {
            m.insert("reason".into(), reason.clone().into());
            m.insert(
                "since".into(),
                since
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    .into(),
            );
        }
        v
    }
}

/// How long `probe` waits for one source's read before calling it broken.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens and reads each spec once, each in its own thread, waiting at most `timeout` for all (a
/// source that has not answered by then is an error saying so); in the order given. A spec that
/// cannot be opened is an error state too, never a refusal of the whole command.
pub fn probe(specs: &[String], timeout: Duration) -> Vec<SourceState> {
    let deadline = std::time::Instant::now() + timeout;
    let mut waiting = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (kind, location) = split_spec(spec)
            .map(|(k, l)| (k, l.to_owned()))
            .unwrap_or(("unknown", spec.clone()));
        let mut state = SourceState::pending(kind, &location, i);
        let source = match open(spec) {
            Ok(s) => s,
            Err(e) => {
                state.absorb(Err(e), Utc::now(), Duration::ZERO);
                waiting.push((state, None));
                continue;
            }
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("pantheon-source-probe".into())
            .spawn(move || {
                let mut source = source;
                let started = std::time::Instant::now();
                let r = read_guarded(source.as_mut());
                let _ = tx.send((r, started.elapsed()));
            });
        if let Err(e) = spawned {
            state.absorb(
                Err(SourceError::new(format!("cannot start its reader: {e}"))),
                Utc::now(),
                Duration::ZERO,
            );
            waiting.push((state, None));
            continue;
        }
        waiting.push((state, Some(rx)));
    }
    waiting
        .into_iter()
        .map(|(mut state, rx)| {
            if let Some(rx) = rx {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match rx.recv_timeout(left) {
                    Ok((r, took)) => state.absorb(r, Utc::now(), took),
                    Err(_) => state.absorb(
                        Err(SourceError::new(format!(
                            "did not answer within {} s; check that it is reachable",
                            timeout.as_secs()
                        ))),
                        Utc::now(),
                        timeout,
                    ),
                }
            }
            state
        })
        .collect()
}

/// One read, a panic inside it turned into an error naming it (a source's reader is the code most
/// exposed to hostile input: a bug there must cost the source, not the console).
pub(crate) fn read_guarded(source: &mut dyn Source) -> Result<Snapshot, SourceError> {
    let kind = source.kind();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.read())) {
        Ok(r) => r,
        Err(_) => Err(SourceError::new(format!(
            "the {kind} reader failed on what it read (a bug: please report it with the files)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_a_known_kind_and_a_near_miss_is_suggested() {
        assert_eq!(
            split_spec("agent-mail:/a,/b").unwrap(),
            ("agent-mail", "/a,/b")
        );
        assert_eq!(split_spec("claude-teams").unwrap(), ("claude-teams", ""));
        let e = split_spec("claude-team:/x").unwrap_err();
        assert!(e.reason.contains("did you mean claude-teams?"), "{e}");
        let e = split_spec("agent-mail:").unwrap_err();
        assert!(e.reason.contains("agent-mail:ARCHIVE[,DB]"), "{e}");
    }

    #[test]
    fn a_broken_source_keeps_its_last_good_snapshot_and_its_first_error_time() {
        let mut s = SourceState::pending("claude-teams", "/x", 0);
        let t0 = Utc::now();
        let good = Snapshot {
            agents: vec![Agent {
                name: "a".into(),
                group: None,
                status: None,
                raw: Value::Null,
            }],
            ..Default::default()
        };
        s.absorb(Ok(good.clone()), t0, Duration::ZERO);
        s.absorb(
            Err(SourceError::new("gone")),
            t0 + chrono::Duration::seconds(1),
            Duration::ZERO,
        );
        s.absorb(
            Err(SourceError::new("still gone")),
            t0 + chrono::Duration::seconds(5),
            Duration::ZERO,
        );
        assert_eq!(*s.snapshot, good);
        let Health::Error { reason, since } = &s.health else {
            panic!("{:?}", s.health)
        };
        assert_eq!(reason, "still gone");
        assert_eq!(*since, t0 + chrono::Duration::seconds(1));
        assert_eq!(s.to_json()["health"], "error");
    }
}
