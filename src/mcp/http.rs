//! The MCP server over Streamable HTTP (`pantheon mcp --http ADDR`, `pantheon serve --mcp ADDR`):
//! the same tools at `/mcp`, mounted on the one HTTP stack (`crate::http`) as rmcp's tower service.
//!
//! rmcp serves the transport as the specification describes it: a client of the handshake era
//! (`initialize`, protocol versions before 2026-07-28) gets a session (`Mcp-Session-Id`), its answers
//! as server-sent events with event ids it can resume from (`Last-Event-ID`), and a `GET` stream;
//! a client of the per-request era (`server/discover`, 2026-07-28) is served statelessly, each
//! answer as one JSON body (`json_response`), which the official Python client reads faster than an
//! event stream (docs/MCP.md, "Figures"). The `MCP-Protocol-Version`
//! header is checked on every request.
//!
//! With `--credentials FILE` every request must carry `Authorization: Bearer SECRET` of a line of
//! the file (else `401`), and the tool calls act as its principal ([`crate::credentials`],
//! [`super::rights`]); without it the endpoint is unbound, like stdio.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::ConductorServer;
use crate::credentials::{Credentials, bearer};
use crate::engine::Root;

/// The path of the endpoint.
pub const PATH: &str = "/mcp";

/// How long a server-sent event stream may stay silent before a keep-alive comment.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The HTTP server's limits for the MCP endpoint: the stack's defaults, except that a request may
/// run as long as the longest `wait_for_event` a client would sensibly ask for over a plain JSON
/// answer (ten minutes; a longer wait is answered `408`), and a connection lives an hour.
pub fn limits() -> crate::http::Limits {
    crate::http::Limits {
        request: Duration::from_secs(600),
        connection: Duration::from_secs(3600),
        ..crate::http::Limits::default()
    }
}

/// The routes of the MCP endpoint for `root`: `/mcp` (POST, GET, DELETE as the transport says),
/// behind the credential check when `credentials` is given. `public`: the listener is not on
/// loopback, so the `Host` header is not limited to loopback names (a credential, not the host
/// name, is then what keeps others out).
pub fn routes(root: Root, credentials: Option<Arc<Credentials>>, public: bool) -> Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE));
    if public {
        config = config.disable_allowed_hosts();
    }
    let server = ConductorServer::new(root);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = Router::new().nest_service(PATH, service);
    match credentials {
        Some(c) => router.layer(axum::middleware::from_fn_with_state(c, authenticate)),
        None => router,
    }
}

/// Every request: its bearer token must be a credential of the file; its principal rides in the
/// request's extensions to the tools. Otherwise `401` with `WWW-Authenticate: Bearer`.
async fn authenticate(
    State(credentials): State<Arc<Credentials>>,
    mut req: Request,
    next: Next,
) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    let Some(token) = token else {
        return unauthorized(
            "error: this endpoint needs `Authorization: Bearer SECRET` (a secret from `pantheon credentials add`)\n",
        );
    };
    match credentials.authenticate(token) {
        Some(principal) => {
            tracing::debug!(principal = %principal.name, "authenticated");
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        None => {
            tracing::info!("a request with an unknown bearer token refused");
            unauthorized(
                "error: the bearer token is not a credential of this server's credentials file\n",
            )
        }
    }
}

/// `401`, with `WWW-Authenticate: Bearer` and the reason as a JSON-RPC error (`id: null`), which the
/// official clients show their caller instead of a bare status.
fn unauthorized(message: &'static str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": UNAUTHORIZED_CODE, "message": message.trim_end()},
    });
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer realm=\"pantheon\""),
            (header::CONTENT_TYPE, "application/json"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// The JSON-RPC error code of a request without a valid credential (the implementation-defined
/// server error range).
pub const UNAUTHORIZED_CODE: i64 = -32001;

/// What `pantheon mcp --http` and `serve --mcp` were asked for.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// `--credentials FILE`.
    pub credentials: Option<std::path::PathBuf>,
    /// `--tls-cert FILE` and `--tls-key FILE`.
    pub tls: Option<crate::http::TlsFiles>,
}

/// A running MCP endpoint and where it listens.
pub struct Endpoint {
    /// The HTTP server (stop it with [`crate::http::Server::shutdown`]).
    pub server: crate::http::Server,
    /// The URL clients connect to.
    pub url: String,
    /// Whether requests must carry a credential.
    pub authenticated: bool,
}

/// Starts the endpoint for `root` on `listener` (already bound): loads the credentials (refusing
/// a file inside the root or readable by others) and the TLS certificate first, so a mistake is
/// said before anything listens.
pub fn start(
    root: &Root,
    listener: std::net::TcpListener,
    options: &HttpOptions,
) -> anyhow::Result<Endpoint> {
    let credentials = match &options.credentials {
        Some(path) => Some(Arc::new(Credentials::load(path, &root.dir)?)),
        None => None,
    };
    let tls = match &options.tls {
        Some(files) => Some(files.acceptor()?),
        None => None,
    };
    let addr: SocketAddr = listener.local_addr()?;
    let public = !addr.ip().is_loopback();
    let authenticated = credentials.is_some();
    let app = routes(root.clone(), credentials, public);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let server = crate::http::Server::start_with(crate::http::Start {
        name: "mcp-http",
        listener,
        app,
        limits: limits(),
        tls,
    })?;
    Ok(Endpoint {
        url: format!("{scheme}://{}{PATH}", server.local_addr()),
        server,
        authenticated,
    })
}

/// The warning for an endpoint beyond loopback, if it is one.
pub fn exposure_warning(flag: &str, addr: SocketAddr, authenticated: bool) -> Option<String> {
    if addr.ip().is_loopback() {
        return None;
    }
    Some(if authenticated {
        format!(
            "warning: {flag} {addr} is not a loopback address: anyone who can reach it may try credentials; \
             serve it over TLS (--tls-cert, --tls-key) or behind a reverse proxy that does"
        )
    } else {
        format!(
            "warning: {flag} {addr} is not a loopback address and takes no credentials: anyone who can reach it \
             acts as any god; give --credentials FILE (docs/THREAT-MODEL.md)"
        )
    })
}
