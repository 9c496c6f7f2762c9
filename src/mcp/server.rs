//! The `conductor` MCP server: one tool per engine operation of docs/PROTOCOL.md §5, nothing more.
//!
//! Each tool deserialises its arguments (see [`super::args`]), calls the engine on the blocking
//! pool and returns the engine's result unchanged. There is no protocol logic here: validation,
//! locking, routing and every refusal come from the engine, exactly as for the CLI. The operator's
//! acts offered (`approve_dispatch`, `requeue_dead_letter`, `abort_workflow`) need an operator's
//! credential when the server is bound ([`super::rights`]); force-releasing a lock is not offered.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::check::ArgumentChecks;
use super::{reply, rights};
use crate::credentials::{Kind, Principal};
use crate::engine::{Actor, Conductor, Origin, Root};

/// The server's name: hosts show its tools as `conductor.submit_handoff` or
/// `mcp__conductor__submit_handoff`.
pub(crate) const SERVER_NAME: &str = "conductor";

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
pub(crate) struct ConductorServer {
    pub(super) root: Root,
    /// Shared by every call: it caches the compiled handoff schema.
    pub(super) conductor: Arc<Conductor>,
    /// Shared, not copied: the HTTP transport takes a server per request (twice for a call), and a
    /// router is a map of every tool.
    tool_router: Arc<ToolRouter<Self>>,
    checks: ArgumentChecks,
    /// Who this server acts for: `mcp --as GOD`, or the principal of an HTTP request's credential
    /// (a server of its own per principal, [`ConductorServer::for_principal`]). `None`: unbound.
    pub(super) principal: Option<Arc<Principal>>,
    /// The servers of the principals seen so far, each journaling as its principal.
    bound: Arc<Mutex<HashMap<String, ConductorServer>>>,
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
    pub(crate) fn new(root: Root) -> Self {
        let tool_router = Self::router();
        let checks = ArgumentChecks::new(&tool_router.list_all());
        Self {
            conductor: Arc::new(
                Conductor::new(root.clone()).with_origin(crate::actor::origin(None, "mcp")),
            ),
            root,
            tool_router: Arc::new(tool_router),
            checks,
            principal: None,
            bound: Arc::default(),
        }
    }

    /// This server bound to `principal` (`pantheon mcp --as GOD`): every call is checked against
    /// its rights and journaled as its act.
    pub(crate) fn bound_to(mut self, principal: Principal) -> Self {
        self.conductor = Arc::new(
            Conductor::new(self.root.clone())
                .with_origin(Origin::new(Some(&principal.name), "mcp")),
        );
        self.principal = Some(Arc::new(principal));
        self
    }

    /// The server acting for `principal` (made once per principal, then reused: its Conductor keeps
    /// its caches). A credential whose line changed gets a fresh one.
    fn for_principal(&self, principal: &Principal) -> ConductorServer {
        let mut bound = self.bound.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = bound.get(&principal.name)
            && s.principal.as_deref() == Some(principal)
        {
            return s.clone();
        }
        let mut s = self.clone();
        s.bound = Arc::default();
        let s = s.bound_to(principal.clone());
        bound.insert(principal.name.clone(), s.clone());
        s
    }

    /// Who an ack is recorded as being by: the acking god itself when bound to a god (the engine
    /// then refuses another god's dispatch), the operator for an operator, else the addressee.
    pub(super) fn acker(&self) -> Actor {
        match self.principal.as_deref() {
            Some(p) if p.kind == Kind::God => Actor::God(p.name.clone()),
            Some(_) => Actor::Operator,
            None => Actor::Recipient,
        }
    }

    /// Every tool: the Conductor's, the bus's and the board's.
    fn router() -> ToolRouter<Self> {
        Self::conductor_tools() + Self::bus_tools() + Self::board_tools()
    }

    /// The names of every tool this server offers, sorted.
    pub(crate) fn tool_names() -> Vec<String> {
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
        let from_http = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned();
        let server = match from_http {
            Some(p) => self.for_principal(&p),
            None => self.clone(),
        };
        if let Some(p) = server.principal.as_deref() {
            if let Some(why) = rights::refusal(p, &request.name, request.arguments.as_ref()) {
                tracing::info!(tool = %request.name, principal = %p.name, "refused by rights");
                return Ok(reply::forbidden(why).into());
            }
        } else if let Some(info) = context.peer.peer_info() {
            let name = info.client_info.name.as_str();
            if self.conductor.origin().actor != crate::engine::clean_actor(name) {
                self.conductor
                    .set_origin(crate::engine::Origin::new(Some(name), "mcp"));
            }
        }
        let call = ToolCallContext::new(&server, request, context);
        server.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS.to_string())
    }
}
