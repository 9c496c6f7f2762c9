//! The `conductor` MCP server: one tool per engine operation of docs/PROTOCOL.md §5, nothing more.
//!
//! Each tool deserialises its arguments (see [`super::args`]), calls the engine on the blocking
//! pool and returns the engine's result unchanged. There is no protocol logic here: validation,
//! locking, routing and every refusal come from the engine, exactly as for the CLI. Operator-only
//! acts (approving a held dispatch, force-releasing a lock) are deliberately not offered.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use std::sync::Arc;

use super::check::ArgumentChecks;
use super::reply;
use crate::engine::{Conductor, Root};

/// The server's name: hosts show its tools as `conductor.submit_handoff` or
/// `mcp__conductor__submit_handoff`.
pub const SERVER_NAME: &str = "conductor";

/// What a host shows the model when it connects.
const INSTRUCTIONS: &str = "Pantheon Conductor and message bus. At the start of a session: \
check_inbox(god_name) for work dispatched to you (20 a page, oldest first: call again with \
cursor = next_cursor while it is not null; compact: true and get_dispatch keep big inboxes small); \
ack_handoff each dispatch (accepted, or pending if \
you cannot start yet); read the dispatch's context (it carries every earlier decision, artifact and \
summary); do the step; then submit_handoff with your summary, decisions, artifacts and gates_passed, \
or ack_handoff with status completed. Coordinate with other workers of a track through the bus \
tools (post_message, acquire_lock, update_worker_status, wait_for_event) and the board tools.";

/// The MCP server for one pantheon root. Cheap to clone; it holds no protocol state of its own.
#[derive(Clone)]
pub struct ConductorServer {
    pub(super) root: Root,
    /// Shared by every call: it caches the compiled handoff schema.
    pub(super) conductor: Arc<Conductor>,
    tool_router: ToolRouter<Self>,
    checks: ArgumentChecks,
}

impl std::fmt::Debug for ConductorServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConductorServer")
            .field("root", &self.root.dir)
            .finish_non_exhaustive()
    }
}

impl ConductorServer {
    /// A server for `root`.
    pub fn new(root: Root) -> Self {
        let tool_router = Self::router();
        let checks = ArgumentChecks::new(&tool_router.list_all());
        Self {
            conductor: Arc::new(
                Conductor::new(root.clone()).with_origin(crate::actor::origin(None, "mcp")),
            ),
            root,
            tool_router,
            checks,
        }
    }

    /// Every tool: the Conductor's, the bus's and the board's.
    fn router() -> ToolRouter<Self> {
        Self::conductor_tools() + Self::bus_tools() + Self::board_tools()
    }

    /// The names of every tool this server offers, sorted.
    pub fn tool_names() -> Vec<String> {
        Self::router()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ConductorServer {
    /// Routes a call: an unknown tool is a protocol error naming the tools there are; arguments
    /// that do not fit the tool's schema are a tool error listing every violation; everything
    /// else goes to the tool.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            tracing::info!(tool = %request.name, "unknown tool");
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; this server offers: {}",
                    request.name,
                    Self::tool_names().join(", ")
                ),
                None,
            ));
        }
        if let Some(violations) = self
            .checks
            .violations(&request.name, request.arguments.as_ref())
        {
            tracing::info!(tool = %request.name, ?violations, "arguments refused");
            return Ok(reply::bad_arguments(&request.name, violations).into());
        }
        if let Some(info) = context.peer.peer_info() {
            let name = info.client_info.name.as_str();
            if self.conductor.origin().actor != crate::engine::clean_actor(name) {
                self.conductor
                    .set_origin(crate::engine::Origin::new(Some(name), "mcp"));
            }
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS.to_string())
    }
}
