//! The board tools (PROTOCOL 4): a five-director deliberation, assess → discuss → vote → resolve.
//! The orchestrator of a board is an agent too, so opening, advancing and resolving are offered.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use serde_json::Value;

use crate::engine::error::Error;
use crate::mcp::args::*;
use crate::mcp::reply::blocking;
use crate::mcp::server::ConductorServer;

#[tool_router(router = board_tools, vis = "pub(crate)")]
impl ConductorServer {
    /// The track's current board session: checkpoint, status (`ASSESSING`, `DISCUSSING`,
    /// `VOTING`, `RESOLVING`, `COMPLETE`), each phase's progress, and the resolution once resolved.
    #[tool(annotations(title = "Board status", read_only_hint = true, open_world_hint = false))]
    async fn board_status(&self, Parameters(a): Parameters<TrackRef>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_status", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Open a board session on a proposal at a checkpoint; the previous session's files are
    /// archived. The session starts in `ASSESSING`.
    #[tool(annotations(
        title = "Open a board session",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn board_open(&self, Parameters(a): Parameters<BoardOpen>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_open", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Record your director's assessment (phase 1, `ASSESSING` only) and post `BOARD_ASSESS`.
    #[tool(annotations(
        title = "Assess a proposal",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn board_assess(&self, Parameters(a): Parameters<BoardAssess>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_assess", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Say something in the discussion (phase 2, `DISCUSSING` only) and post `BOARD_DISCUSS`.
    #[tool(annotations(
        title = "Discuss",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn board_discuss(&self, Parameters(a): Parameters<BoardDiscuss>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_discuss", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Close the current discussion round and start the next (up to the session's `max_rounds`).
    #[tool(annotations(
        title = "Next discussion round",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn board_next_round(&self, Parameters(a): Parameters<TrackRef>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_next_round", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Cast your director's final vote (phase 3, `VOTING` only) and post `BOARD_VOTE`.
    #[tool(annotations(
        title = "Vote",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn board_vote(&self, Parameters(a): Parameters<BoardVote>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_vote", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Move the session to its next phase once the current one is complete (all assessments,
    /// the discussion rounds, all votes), or now with `force`.
    #[tool(annotations(
        title = "Advance the board",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn board_advance(&self, Parameters(a): Parameters<BoardForce>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_advance", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }

    /// Resolve the vote: 4+ approvals `APPROVED`, 3 `APPROVED_WITH_REVIEW`, 3+ rejections
    /// `REJECTED`, else `ESCALATE` (a quick review resolves from assessments). Writes
    /// `resolution.md`, posts `BOARD_RESOLVE` and completes the session. Missing votes need `force`
    /// (they count as abstained).
    #[tool(annotations(
        title = "Resolve the board",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn board_resolve(&self, Parameters(a): Parameters<BoardForce>) -> CallToolResult {
        let root = self.root.clone();
        blocking("board_resolve", move || {
            let _ = (root, a);
            Err::<Value, _>(Error::refused("engine not merged yet"))
        })
        .await
    }
}
