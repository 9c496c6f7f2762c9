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
pub(crate) const PATH: &str = "/mcp";

/// How long a server-sent event stream may stay silent before a keep-alive comment.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The HTTP server's limits for the MCP endpoint: the stack's defaults, except that a request may
/// run as long as the longest `wait_for_event` a client would sensibly ask for over a plain JSON
/// answer (ten minutes; a longer wait is answered `408`), and a connection lives an hour.
pub(crate) fn limits() -> crate::http::Limits {
    crate::http::Limits {
        request: Duration::from_secs(600),
        connection: Duration::from_secs(3600),
        ..crate::http::Limits::default()
    }
}

/// How many sessions may live at once unless `--max-sessions` says otherwise.
pub(crate) const DEFAULT_MAX_SESSIONS: usize = 512;

/// How long a session may stay idle (no request, no answer) unless `--session-idle` says
/// otherwise: longer than the longest request ([`limits`]), so a session waiting out a long call is
/// never taken for an idle one.
pub(crate) const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(15 * 60);

/// The bounds on the sessions of the handshake era (`initialize`): how many live at once, and how
/// long one lives without a request or an answer before it is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionLimits {
    /// The most live sessions; past it an `initialize` is answered `503` (other requests go on).
    pub max: usize,
    /// A session idle this long is closed (its id then answers `404`, and a client starts anew).
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_SESSIONS,
            idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// `--session-idle DURATION`, parsed by clap: `30s`, `15m`, `2h`; at least a second.
pub(crate) fn parse_session_idle(s: &str) -> Result<Duration, crate::engine::Refusal> {
    match crate::engine::time::parse_duration(s) {
        Some(d) if d >= Duration::from_secs(1) => Ok(d),
        Some(_) => Err("a session may idle at least 1s".into()),
        None => Err("expected a duration such as 30s, 15m or 2h".into()),
    }
}

/// `--max-sessions N`, parsed by clap: at least 1.
pub(crate) fn parse_max_sessions(s: &str) -> Result<usize, crate::engine::Refusal> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a number of sessions, at least 1".into()),
    }
}

/// The routes of the MCP endpoint for `root`: `/mcp` (POST, GET, DELETE as the transport says),
/// behind the credential check when `credentials` is given. `public`: the listener is not on
/// loopback, so the `Host` header is not limited to loopback names (a credential, not the host
/// name, is then what keeps others out). Sessions are bounded by `sessions`.
pub(crate) fn routes(
    root: Root,
    credentials: Option<Arc<Credentials>>,
    public: bool,
    sessions: SessionLimits,
) -> Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE));
    if public {
        config = config.disable_allowed_hosts();
    }
    let server = ConductorServer::new(root);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(sessions.idle);
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(move || Ok(server.clone()), manager.clone(), config);
    let cap = SessionCap {
        manager,
        limits: sessions,
    };
    // The credential check is the outer layer: a stranger learns nothing, not even that the
    // server is full.
    let router = Router::new()
        .nest_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(cap, cap_sessions));
    match credentials {
        Some(c) => router.layer(axum::middleware::from_fn_with_state(c, authenticate)),
        None => router,
    }
}

/// What [`cap_sessions`] counts and bounds.
#[derive(Clone)]
struct SessionCap {
    manager: Arc<LocalSessionManager>,
    limits: SessionLimits,
}

/// The most bytes of a request body read to tell whether it opens a session (only when the
/// server is full; the stack's body limit bounds it anyway).
const MAX_PEEK_BYTES: usize = 1024 * 1024;

/// Refuses an `initialize` (a `POST` without `Mcp-Session-Id` whose body is that request) while
/// the live sessions are at their limit: `503` with `Retry-After` and the reason as a JSON-RPC
/// error. Everything else passes untouched; the body is only read when the server is full.
async fn cap_sessions(State(cap): State<SessionCap>, req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST || req.headers().contains_key("mcp-session-id") {
        return next.run(req).await;
    }
    let live = cap.manager.sessions.read().await.len();
    if live < cap.limits.max {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_PEEK_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "error: the request body is too large\n",
            )
                .into_response();
        }
    };
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
        id: Option<serde_json::Value>,
    }
    let head: Option<Head> = serde_json::from_slice(&bytes).ok();
    match head {
        Some(Head {
            method: Some(m),
            id,
        }) if m == "initialize" => {
            tracing::warn!(
                live,
                max = cap.limits.max,
                "a new session refused: the server is full"
            );
            full(&cap.limits, id)
        }
        _ => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
    }
}

/// `503` for a session over the limit, saying what the limit is and what frees a place.
fn full(limits: &SessionLimits, id: Option<serde_json::Value>) -> Response {
    let message = format!(
        "error: this server holds {0} sessions, its limit (--max-sessions {0}); a session is freed \
         when its client ends it (DELETE /mcp) or after {1} s idle; try again later",
        limits.max,
        limits.idle.as_secs()
    );
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": SERVER_FULL_CODE, "message": message},
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::RETRY_AFTER, "30"),
            (header::CONTENT_TYPE, "application/json"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// The JSON-RPC error code of an `initialize` refused because the server holds its most sessions.
pub(crate) const SERVER_FULL_CODE: i64 = -32002;

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
pub(crate) const UNAUTHORIZED_CODE: i64 = -32001;

/// What `pantheon mcp --http` and `serve --mcp` were asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpOptions {
    /// `--credentials FILE`.
    pub credentials: Option<std::path::PathBuf>,
    /// `--tls-cert FILE` and `--tls-key FILE`.
    pub tls: Option<crate::http::TlsFiles>,
    /// `--max-sessions N` and `--session-idle DURATION`.
    pub sessions: SessionLimits,
}

/// A running MCP endpoint and where it listens.
pub(crate) struct Endpoint {
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
pub(crate) fn start(
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
    let app = routes(root.clone(), credentials, public, options.sessions);
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
pub(crate) fn exposure_warning(
    flag: &str,
    addr: SocketAddr,
    authenticated: bool,
) -> Option<String> {
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
