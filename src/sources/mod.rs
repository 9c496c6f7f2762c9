//! Foreign substrates read into the live model beside the root: Claude Code agent teams, MCP Agent
//! Mail, A2A agents (docs/SOURCES.md).
//!
//! - [`a2a`]: agents speaking A2A (JSON-RPC over HTTP): their tasks, history and artifacts, the
//!   tasks waiting for a human as answerable attention items

// src/sources/mod.rs
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub mod a2a;

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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub agents: Vec<Agent>,
    pub messages: Vec<Message>,
    pub tasks: Vec<Task>,
    pub locks: Vec<Lock>,
    pub attention: Vec<Attention>,
}
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub name: String,
    pub group: Option<String>,
    pub status: Option<String>,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub group: Option<String>,
    pub title: String,
    pub state: String,
    pub owner: Option<String>,
    pub raw: Value,
}
#[derive(Debug, Clone, PartialEq)]
pub struct Lock {
    pub path: String,
    pub holder: String,
    pub expires: Option<DateTime<Utc>>,
    pub raw: Value,
}
/// A foreign item waiting for a human. `key` is stable across reads (the same waiting state gives the same key).
#[derive(Debug, Clone, PartialEq)]
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
/// Parses `KIND:LOCATION` (the `--source` option) into a source. The sources session writes this; it dispatches on kind and the a2a session's `a2a::A2aSource::new(location)` is called for `a2a:`.
pub fn open(spec: &str) -> Result<Box<dyn Source>, SourceError> {
    // Only `a2a:` on this branch; the sources framework's `open` dispatches every kind.
    let Some((kind, location)) = spec.split_once(':') else {
        return Err(SourceError::new(format!(
            "source {spec:?} has no kind: write KIND:LOCATION, e.g. a2a:http://127.0.0.1:9999/"
        )));
    };
    match kind {
        "a2a" => Ok(Box::new(a2a::A2aSource::new(location)?)),
        other => Err(SourceError::new(format!(
            "unknown source kind {other:?} in {spec:?}: this build reads a2a:AGENT_CARD_URL"
        ))),
    }
}
