//! The bus's operator acts, each recorded in the operator journal ([`crate::journal`]) as the handle's
//! [`Origin`]: a forced lock release, a board advance, a board resolution. Ordinary posts, locks and
//! heartbeats are the gods' traffic and stay out of the journal.

use super::Bus;
use super::board::{AdvanceResult, ResolveResult};
use super::locks::{LockKey, UnlockResult};
use crate::error::Result;
use crate::journal::{self, Act, Origin};
use crate::journal::{Target, Verb};
use crate::store::WorkerId;

impl Bus {
    /// This handle, journaling its operator acts as `origin`'s.
    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    fn journal(&self, act: Act) {
        // The act is done; a journal that cannot be written does not undo it.
        let _ = journal::append(
            &self.root,
            &self.origin,
            &act.target(Target::Track, Some(self.track.as_str())),
        );
    }

    /// Releases the lock on `path`: by its holder, or by anyone with `force` (an operator act, recorded
    /// as `forced_by: "operator"` and journaled). Posts `FILE_UNLOCK` and touches `FILE_UNLOCK_all` and
    /// `FILE_UNLOCK_{path}`.
    pub fn release_lock(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        force: bool,
    ) -> Result<UnlockResult> {
        self.release_lock_fenced(path, worker, force, None)
    }

    /// [`Bus::release_lock`]; with `token`, refused unless it is the current lease's fencing token.
    pub fn release_lock_fenced(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        force: bool,
        token: Option<u64>,
    ) -> Result<UnlockResult> {
        crate::store::commit::act_unheld(&self.root, || {
            self.release_lock_fenced_act(path, worker, force, token)
        })
    }

    fn release_lock_fenced_act(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        force: bool,
        token: Option<u64>,
    ) -> Result<UnlockResult> {
        let r = self.release_unjournaled(path, worker, force, token)?;
        if r.forced_by.is_some() {
            self.journal(
                Act::new(Verb::ForceUnlock, "released")
                    .target(Target::Path, Some(&r.filepath))
                    .target(Target::Holder, r.released_from.as_ref())
                    .target(Target::MessageId, Some(&r.message_id)),
            );
        }
        Ok(r)
    }

    /// Moves the board session to its next phase (`force`: even with records missing).
    pub fn board_advance(&self, force: bool, source: &str) -> Result<AdvanceResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_advance_act(force, source))
    }

    fn board_advance_act(&self, force: bool, source: &str) -> Result<AdvanceResult> {
        let r = self.advance_unjournaled(force, source)?;
        let outcome = format!(
            "{} -> {}{}",
            r.from,
            r.to,
            if r.forced { " (forced)" } else { "" }
        );
        self.journal(
            Act::new(Verb::BoardAdvance, outcome)
                .target(Target::SessionId, Some(&r.session_id))
                .target(Target::MessageId, Some(&r.message_id)),
        );
        Ok(r)
    }

    /// Resolves the board session: applies the rule to the votes, writes the resolution, posts it.
    pub fn board_resolve(&self, force: bool, source: &str) -> Result<ResolveResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_resolve_act(force, source))
    }

    fn board_resolve_act(&self, force: bool, source: &str) -> Result<ResolveResult> {
        let r = self.resolve_unjournaled(force, source)?;
        let res = &r.resolution;
        let outcome = format!(
            "{}{}",
            res.outcome.verdict.as_str(),
            if res.forced { " (forced)" } else { "" }
        );
        self.journal(
            Act::new(Verb::BoardResolve, outcome)
                .target(Target::SessionId, Some(&res.session_id))
                .target(Target::MessageId, Some(&r.message_id)),
        );
        Ok(r)
    }
}
