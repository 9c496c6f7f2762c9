//! The console's real [`Operator`]: every action is one engine call (made by the action's module in
//! `console/actions/`), recorded as the operator.

use crate::engine::{
    Bus, CleanupResult, Conductor, Error, Origin, Root, TrackName, WorkflowId, board::BoardSeen,
};

use super::ops::{Done, Op, Operator};

/// Performs operations with the Conductor and bus engines of one root.
pub struct EngineOperator {
    root: Root,
    conductor: Conductor,
    /// Where the operator's approval-link key is kept (`None`: `approvals::link_key_path`).
    link_key_file: Option<std::path::PathBuf>,
}

impl EngineOperator {
    /// Acts on `root`, journaled as the user running the console (see [`operator_name`]).
    pub fn new(root: Root) -> Self {
        Self::acting_as(root, &operator_name(None))
    }

    /// Acts on `root`, journaled as `actor` (the console's `--actor`).
    pub fn acting_as(root: Root, actor: &str) -> Self {
        Self {
            conductor: Conductor::new(root.clone())
                .with_origin(Origin::new(Some(actor), "console")),
            root,
            link_key_file: None,
        }
    }

    /// Keeps the operator's approval-link key at `path` instead of its usual place.
    pub fn with_link_key_file(mut self, path: std::path::PathBuf) -> Self {
        self.link_key_file = Some(path);
        self
    }

    /// The operator's approval-link key (made on first use).
    pub(crate) fn link_key(&self) -> anyhow::Result<crate::engine::LinkKey> {
        match &self.link_key_file {
            Some(p) => crate::approvals::link_key_at(p, &self.root),
            None => crate::approvals::link_key(&self.root),
        }
    }

    /// The root it acts on.
    pub(crate) fn root(&self) -> &Root {
        &self.root
    }

    /// The conductor engine, journaling as the console's actor.
    pub(crate) fn conductor(&self) -> &Conductor {
        &self.conductor
    }

    /// The bus of `track`, journaling as the console's actor.
    pub(crate) fn bus(&self, track: &TrackName) -> Result<Bus, Error> {
        Bus::open_existing(&self.root, track).map(|b| b.with_origin(self.conductor.origin()))
    }

    /// The bus of `track` for a board act bound to the session as it was shown.
    pub(crate) fn board(&self, track: &TrackName, seen: &Option<BoardSeen>) -> Result<Bus, Error> {
        let bus = self.bus(track)?;
        Ok(match seen {
            Some(s) => bus.expecting_board(s.clone()),
            None => bus,
        })
    }
}

impl Operator for EngineOperator {
    /// The action's one engine call, made by its module (`Act::execute`).
    fn execute(&self, op: &Op) -> Result<Done, Error> {
        op.execute(self)
    }

    fn cleanup_preview(&self, workflow_id: &WorkflowId) -> Result<CleanupResult, Error> {
        self.conductor.cleanup(workflow_id, true)
    }
}

pub(crate) use crate::actor::operator_name;
