//! The Conductor protocol (docs/PROTOCOL.md §2): handoffs, routing by definition, rules or directly, gates,
//! inboxes, acks, approvals, workflow state, abort and cleanup.
//!
//! [`Conductor`] is the one handle every shell (CLI, MCP, console, demo) calls. Each mutation of a
//! workflow runs under that workflow's `flock` (`conductor/state/.{workflow_id}.lock`) and every file is
//! written atomically. A mutation commits by writing the workflow state; every file effect after that is
//! idempotent and re-run when the same request is repeated, so a crash at any point is repaired by
//! repeating the request.

// `ack` and `submit` keep a few `expect`s on values checked a few lines earlier; they are being split around
// pure steps and lose them there. Until then the crate-wide deny is lifted for these two only.
#[allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]
pub(crate) mod ack;
pub(crate) mod ack_step;
pub(crate) mod admin;
pub(crate) mod approvals;
pub(crate) mod deadlines;
pub(crate) mod definition;
pub(crate) mod delivery;
pub(crate) mod dispatch;
pub(crate) mod files;
pub(crate) mod hold;
pub(crate) mod inbox_cache;
pub(crate) mod intents;
pub(crate) mod journaled;
pub(crate) mod model;
pub(crate) mod outbox;
pub(crate) mod overdue;
pub(crate) mod paging;
pub(crate) mod pause;
pub(crate) mod request;
pub(crate) mod rerun;
pub(crate) mod results;
pub(crate) mod retire;
pub(crate) mod route;
pub(crate) mod rules;
pub(crate) mod samples;
pub(crate) mod schema;
pub(crate) mod subject;
#[allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]
pub(crate) mod submit;
pub(crate) mod template;
pub(crate) mod timers;

use std::sync::{Arc, Mutex, RwLock};

pub(crate) use definition::{WorkflowDef, load_definitions};
pub(crate) use model::{AckStatus, Dispatch, WorkflowState, WorkflowStatus, lenient};
pub(crate) use results::{
    AbortResult, AckResult, ApprovalResult, CleanupResult, DispatchResult, InboxResult, InitResult,
    PendingEntry, PendingResult, RedispatchResult, RefusedPath, RuleDetail, RulesResult,
    StepSummary, SubmitResult, WorkflowSummary, WorkflowsResult,
};
pub(crate) use rules::load_rules;

use crate::error::Result;
use crate::journal::Origin;
use crate::store::Root;
// The crash points of the conductor's writers (`super::crash_point` in its modules).
use crate::store::crash_point;
use schema::{SchemaKey, Schemas, schema_key};

/// Who performs an act: recorded as `by` (acks, approvals) or `aborted_by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A named god.
    God(String),
    /// The god the dispatch is addressed to (what an ack file written by a god means).
    Recipient,
    /// A person at the console or CLI.
    Operator,
}

impl Actor {
    /// The value recorded in `by`, given the god the act concerns.
    pub fn label(&self, recipient: &str) -> String {
        match self {
            Actor::God(g) => g.clone(),
            Actor::Recipient => recipient.to_owned(),
            Actor::Operator => "operator".to_owned(),
        }
    }
}

/// The compiled schemas, their file's key and, while the file is racy, the document compiled.
type CachedSchemas = (SchemaKey, Arc<Schemas>, Option<serde_json::Value>);

/// The Conductor of one root.
pub struct Conductor {
    root: Root,
    /// The compiled schemas, their file's key, and, while that file is racy, the document they were
    /// compiled from (the bytes decide then, not the key).
    schemas: Mutex<Option<CachedSchemas>>,
    /// Who acts through this handle, for the journal.
    origin: RwLock<Origin>,
    /// Inboxes read before, for a handle that reads them again and again (the MCP server).
    inboxes: inbox_cache::InboxCache,
    /// The operator's key for approval links' records (kept outside the root; see
    /// [`approvals::LinkKey`]): set, a record it did not sign grants nothing.
    link_key: Option<approvals::LinkKey>,
}

impl Conductor {
    /// A Conductor working on `root`.
    pub fn new(root: Root) -> Self {
        Self {
            root,
            schemas: Mutex::new(None),
            origin: RwLock::new(Origin::default()),
            inboxes: inbox_cache::InboxCache::default(),
            link_key: None,
        }
    }

    /// This Conductor, signing the approval links it mints with `key` and honouring only links
    /// signed by it (docs/PROTOCOL.md §2.15).
    pub fn with_link_key(mut self, key: approvals::LinkKey) -> Self {
        self.link_key = Some(key);
        self
    }

    /// The approval links' key this handle holds.
    pub(crate) fn link_key(&self) -> Option<&approvals::LinkKey> {
        self.link_key.as_ref()
    }

    /// This Conductor, journaling its acts as `origin`'s.
    pub fn with_origin(self, origin: Origin) -> Self {
        self.set_origin(origin);
        self
    }

    /// Journals later acts as `origin`'s (an MCP server learns its client's name after it starts).
    pub fn set_origin(&self, origin: Origin) {
        *self.origin.write().unwrap_or_else(|p| p.into_inner()) = origin;
    }

    /// Who acts through this handle.
    pub fn origin(&self) -> Origin {
        self.origin
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The root this Conductor works on.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The compiled schemas, reused while the root's schema file is unchanged.
    pub(crate) fn schemas(&self) -> Result<Arc<Schemas>> {
        let key = schema_key(&self.root);
        let mut guard = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        let mut read = None;
        if let Some((k, s, racy)) = guard.as_mut()
            && *k == key
        {
            let Some(doc) = racy else {
                return Ok(s.clone());
            };
            // Changed within its clock's granularity when compiled: a rewrite may hide under the
            // same key, so the document decides (one small read instead of a compile).
            let now = Schemas::read_source(&self.root)?;
            if now.as_ref() == Some(&*doc) {
                let s = s.clone();
                if !key.as_ref().is_some_and(|k| k.racy()) {
                    *racy = None;
                }
                return Ok(s);
            }
            read = Some(now);
        }
        let doc = match read {
            Some(d) => d,
            None => Schemas::read_source(&self.root)?,
        };
        let s = Arc::new(Schemas::compiled(&self.root, doc.clone())?);
        // A file changed within its clock's granularity could change again under the same key: kept
        // with the document it was compiled from, and reused only while the file still reads so.
        let racy = match &key {
            Some(k) if k.racy() => match doc {
                Some(d) => Some(d),
                None => {
                    *guard = None;
                    return Ok(s);
                }
            },
            _ => None,
        };
        *guard = Some((key, s.clone(), racy));
        Ok(s)
    }
}
