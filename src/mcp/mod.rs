//! The MCP server (`pantheon mcp`): the Conductor and bus tools of docs/PROTOCOL.md §5 over stdio.
//!
//! Every agent session starts its own server process, so many servers share one root at once;
//! all correctness comes from the engine's file locks, none from this process. Stdout carries
//! only the protocol; logs go to stderr (`PANTHEON_LOG`, an `EnvFilter` directive, default `pantheon=info,rmcp=warn`).

use anyhow::Context;
use rmcp::ServiceExt;

use crate::engine::Root;

pub mod args;
pub mod check;
pub mod lean;
pub mod output;
pub mod reply;
pub mod server;
mod tools;
pub mod transport;

pub use server::{ConductorServer, SERVER_NAME};

/// Serves the tools for `root` on stdin/stdout until the host closes the connection.
pub fn serve(root: Root) -> anyhow::Result<()> {
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
        let service = ConductorServer::new(root)
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
