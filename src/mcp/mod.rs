//! The MCP server (`pantheon mcp`): the Conductor and bus tools of docs/PROTOCOL.md §5 over stdio,
//! or over Streamable HTTP with `--http ADDR` ([`http`]).
//!
//! Every agent session starts its own server process, so many servers share one root at once;
//! all correctness comes from the engine's file locks, none from this process. Stdout carries
//! only the protocol; logs go to stderr (`PANTHEON_LOG`, an `EnvFilter` directive, default `pantheon=info,rmcp=warn`).
//! `--as GOD` binds a stdio server to one god ([`rights`]), as a credential binds an HTTP request.

use anyhow::Context;
use rmcp::ServiceExt;

use crate::engine::Root;

pub(crate) mod args;
pub(crate) mod check;
pub(crate) mod http;
pub(crate) mod lean;
pub(crate) mod output;
pub(crate) mod reply;
pub(crate) mod rights;
pub(crate) mod server;
mod tools;
pub(crate) mod transport;

pub(crate) use server::ConductorServer;

/// Options of `pantheon mcp`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct McpArgs {
    /// Serve over Streamable HTTP at http://ADDR/mcp instead of stdio (PORT alone: 127.0.0.1:PORT).
    /// An address that is not loopback is warned about (docs/MCP.md, "Streamable HTTP").
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub http: Option<std::net::SocketAddr>,
    /// With --http: every request must carry `Authorization: Bearer SECRET` of a principal of FILE
    /// (`pantheon credentials add`), and acts only within its rights; FILE must lie outside the
    /// root, readable by its owner only.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub credentials: Option<std::path::PathBuf>,
    /// With --http: serve HTTPS with this PEM certificate chain (and --tls-key).
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// With --http: the PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_cert"])]
    pub tls_key: Option<std::path::PathBuf>,
    /// With --http: the most sessions (clients of the `initialize` handshake) alive at once; past
    /// it a new session is answered 503 (docs/MCP.md, "Sessions").
    #[arg(long, value_name = "N", requires = "http", value_parser = http::parse_max_sessions,
          default_value_t = http::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// With --http: close a session idle this long (no request, no answer): 30s, 15m, 2h.
    /// Default 15m, longer than the longest call.
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = http::parse_session_idle)]
    pub session_idle: Option<std::time::Duration>,
    /// On stdio: act as god GOD only, with a god's rights (submit as itself, ack its own
    /// dispatches, post and lock as itself, read its own inbox). Unbound without it.
    #[arg(long = "as", value_name = "GOD", conflicts_with = "http")]
    pub as_god: Option<String>,
}

/// `pantheon mcp`: stdio, or HTTP with `--http`.
pub(crate) fn run(root: Root, args: McpArgs) -> anyhow::Result<()> {
    match args.http {
        Some(addr) => serve_http(root, addr, &args),
        None => {
            let principal = match &args.as_god {
                Some(g) => Some(
                    crate::credentials::Principal::god(g)
                        .map_err(|e| anyhow::anyhow!("--as {g:?}: {e}"))?,
                ),
                None => None,
            };
            serve_bound(root, principal)
        }
    }
}

/// `pantheon mcp --http ADDR`: the endpoint until SIGTERM or SIGINT, then the requests under way
/// are answered and it stops.
fn serve_http(root: Root, addr: std::net::SocketAddr, args: &McpArgs) -> anyhow::Result<()> {
    init_logging();
    crate::engine::enable_yaml_cache();
    let listener = crate::http::bind("--http", addr)?;
    let options = http::HttpOptions {
        credentials: args.credentials.clone(),
        tls: crate::http::TlsFiles::from_flags(args.tls_cert.as_deref(), args.tls_key.as_deref()),
        sessions: http::SessionLimits {
            max: args.max_sessions,
            idle: args.session_idle.unwrap_or(http::DEFAULT_SESSION_IDLE),
        },
    };
    let endpoint = http::start(&root, listener, &options)?;
    let local = endpoint.server.local_addr();
    if let Some(w) = http::exposure_warning("--http", local, endpoint.authenticated) {
        eprintln!("{w}");
    }
    let record = crate::observe::record::MetricsRecord::write_mcp(
        &root,
        &format!("mcp-pid-{}", std::process::id()),
        local,
        endpoint.authenticated,
    );
    eprintln!(
        "pantheon mcp: serving {} at {}{}",
        root.dir.display(),
        endpoint.url,
        if endpoint.authenticated {
            " (credentials required)"
        } else {
            ""
        }
    );
    wait_for_signal()?;
    endpoint.server.shutdown();
    drop(record);
    Ok(())
}

/// Blocks until SIGTERM or SIGINT.
fn wait_for_signal() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal handler")?;
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term =
            signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
        let mut int =
            signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    })
}

/// [`serve`], bound to `principal` when given (`--as GOD`).
fn serve_bound(root: Root, principal: Option<crate::credentials::Principal>) -> anyhow::Result<()> {
    init_logging();
    // A long-lived process: parse each definition and rule file once per version, not per submit.
    crate::engine::enable_yaml_cache();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("pantheon-mcp")
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async move {
        tracing::info!(root = %root.dir.display(), "serving MCP on stdio");
        let server = ConductorServer::new(root);
        let server = match principal {
            Some(p) => server.bound_to(p),
            None => server,
        };
        let service = server
            .serve(transport::stdio())
            .await
            .context("the MCP connection failed before it was established")?;
        let reason = service.waiting().await.context("the MCP service failed")?;
        tracing::info!(?reason, "connection closed");
        Ok(())
    });
    // A call still blocked in the engine (a long `wait_for_event`) must not keep the process
    // alive after the host hung up. Every engine write is atomic, so abandoning a call is safe.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
}

/// How long in-flight calls may finish after the connection closes.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Logs to stderr only: stdout is the protocol. The filter comes from `PANTHEON_LOG`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PANTHEON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("pantheon=info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
