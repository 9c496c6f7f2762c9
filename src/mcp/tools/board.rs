//! The board tools (docs/PROTOCOL.md §4): a five-director deliberation, assess → discuss → vote → resolve.
//! The orchestrator of a board is an agent too, so opening, advancing and resolving are offered.

use crate::engine::{
    Bus, Director, TrackName,
    board::{AssessInput, DiscussInput, OpenInput, VoteInput},
};
use crate::mcp::args::*;
use crate::mcp::output;
use crate::mcp::reply::blocking;
use crate::mcp::server::ConductorServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

#[tool_router(router = board_tools, vis = "pub(crate)")]
impl ConductorServer {
    /// The track's current board session: checkpoint, status (`ASSESSING`, `DISCUSSING`,
    /// `VOTING`, `RESOLVING`, `COMPLETE`), each phase's progress, and the resolution once resolved.
    #[tool(
        output_schema = output::board_status(),
        annotations(title = "Board status", read_only_hint = true, open_world_hint = false)
    )]
    async fn board_status(&self, Parameters(a): Parameters<TrackRef>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_status", move || {
            Bus::open_existing(&root, &TrackName::parse(&a.track)?)?.board_status()
        })
        .await
    }

    /// Open a board session on a proposal at a checkpoint; the previous session's files are
    /// archived. The session starts in `ASSESSING`.
    #[tool(
        output_schema = output::board_open(),
        annotations(
        title = "Open a board session",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn board_open(&self, Parameters(a): Parameters<BoardOpen>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_open", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).board_open(&OpenInput {
                checkpoint: a.checkpoint,
                proposal: a.proposal,
                directors: a
                    .directors
                    .map(|ds| ds.iter().map(|d| Director::parse(d)).collect())
                    .transpose()?,
                max_rounds: a.max_rounds,
                source: a.source.unwrap_or_else(|| DEFAULT_BOARD_SOURCE.into()),
            })
        })
        .await
    }

    /// Record your director's assessment (phase 1, `ASSESSING` only) and post `BOARD_ASSESS`.
    #[tool(
        output_schema = output::board_write(),
        annotations(
        title = "Assess a proposal",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn board_assess(&self, Parameters(a): Parameters<BoardAssess>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_assess", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).board_assess(&AssessInput {
                director: Director::parse(&a.director)?,
                verdict: a.verdict,
                score: a.score,
                concerns: a.concerns,
                recommendations: a.recommendations,
                key_points: a.key_points,
                blocking: a.blocking,
                extra: a.extra.unwrap_or_default(),
            })
        })
        .await
    }

    /// Say something in the discussion (phase 2, `DISCUSSING` only) and post `BOARD_DISCUSS`.
    #[tool(
        output_schema = output::board_write(),
        annotations(
        title = "Discuss",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn board_discuss(&self, Parameters(a): Parameters<BoardDiscuss>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_discuss", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).board_discuss(&DiscussInput {
                from: Director::parse_as("from", &a.from)?,
                to: Director::parse_as("to", &a.to)?,
                kind: a.msg_type,
                message: a.message,
                changes_my_verdict: a.changes_my_verdict,
            })
        })
        .await
    }

    /// Close the current discussion round and start the next (up to the session's `max_rounds`).
    #[tool(
        output_schema = output::board_write(),
        annotations(
        title = "Next discussion round",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn board_next_round(&self, Parameters(a): Parameters<BoardRound>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_next_round", move || {
            let source = a.source.unwrap_or_else(|| DEFAULT_BOARD_SOURCE.into());
            Bus::open(&root, &TrackName::parse(&a.track)?).board_next_round(&source)
        })
        .await
    }

    /// Cast your director's final vote (phase 3, `VOTING` only) and post `BOARD_VOTE`.
    #[tool(
        output_schema = output::board_write(),
        annotations(
        title = "Vote",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn board_vote(&self, Parameters(a): Parameters<BoardVote>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_vote", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).board_vote(&VoteInput {
                director: Director::parse(&a.director)?,
                final_verdict: a.final_verdict,
                confidence: a.confidence,
                conditions: a.conditions,
            })
        })
        .await
    }

    /// Move the session to its next phase once the current one is complete (all assessments,
    /// the discussion rounds, all votes), or now with `force`.
    #[tool(
        output_schema = output::board_advance(),
        annotations(
        title = "Advance the board",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn board_advance(&self, Parameters(a): Parameters<BoardForce>) -> CallToolResult {
        let root = self.root.clone();
        let origin = self.conductor.origin();
        blocking("board_advance", move || {
            let source = a.source.unwrap_or_else(|| DEFAULT_BOARD_SOURCE.into());
            Bus::open(&root, &TrackName::parse(&a.track)?)
                .with_origin(origin)
                .board_advance(a.force, &source)
        })
        .await
    }

    /// Resolve the vote: 4+ approvals `APPROVED`, 3 `APPROVED_WITH_REVIEW`, 3+ rejections
    /// `REJECTED`, else `ESCALATE` (a quick review resolves from assessments). Writes
    /// `resolution.md`, posts `BOARD_RESOLVE` and completes the session. Missing votes need `force`
    /// (they count as abstained).
    #[tool(
        output_schema = output::board_resolve(),
        annotations(
        title = "Resolve the board",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn board_resolve(&self, Parameters(a): Parameters<BoardForce>) -> CallToolResult {
        let root = self.root.clone();
        let origin = self.conductor.origin();
        blocking("board_resolve", move || {
            let source = a.source.unwrap_or_else(|| DEFAULT_BOARD_SOURCE.into());
            Bus::open(&root, &TrackName::parse(&a.track)?)
                .with_origin(origin)
                .board_resolve(a.force, &source)
        })
        .await
    }
}
