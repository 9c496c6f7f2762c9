//! The one HTTP stack of `pantheon` (docs/DECISIONS.md, "HTTP server"): axum routes served by
//! hyper's HTTP/1.1 server on a tokio runtime of the server's own, with a limit on everything a
//! client controls (docs/OBSERVABILITY.md, "Limits of the HTTP server"). `serve --metrics` mounts
//! `/metrics` on it (`observe::http`); other endpoints mount their own routes the same way.
//!
//! Each connection is a task of its own, so a slow client holds its own connection and nothing
//! else: the time to send a request's headers is bounded ([`Limits::header_read`], idle keep-alive
//! connections included), a request's handling (its body read) too ([`Limits::request`]), and a
//! connection's whole life ([`Limits::connection`]: then it finishes the request under way and
//! closes). Header and body sizes and the number of open connections are bounded; past the
//! connection limit the listener waits (the kernel's backlog holds new clients) until one closes.
//! [`Server::shutdown`] stops accepting, lets each connection finish the request under way (within
//! [`Limits::shutdown_grace`]) and closes the rest.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// What the server bounds for every client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest a client may take to send a request's line and headers, from the connection's
    /// start or from the end of its previous answer (an idle keep-alive connection is closed then).
    pub header_read: Duration,
    /// The longest a request's handling may take once its headers are in (its body read included):
    /// past it the answer is `408 Request Timeout`.
    pub request: Duration,
    /// The longest a connection lives: then it finishes the request under way (within
    /// [`Limits::request`]) and closes; a client connects again.
    pub connection: Duration,
    /// The most bytes of a request's line and headers (at least 8 KiB): past it, `431`.
    pub max_header_bytes: usize,
    /// The most header fields in a request: past it, `431`.
    pub max_headers: usize,
    /// The most bytes of a request's body: past it, `413`.
    pub max_body_bytes: usize,
    /// The most connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// How long [`Server::shutdown`] lets requests under way finish.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(5),
            request: Duration::from_secs(10),
            connection: Duration::from_secs(300),
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            max_body_bytes: 1024 * 1024,
            max_connections: 256,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// An address flag's value (`--metrics ADDR`): `PORT` alone is loopback (`127.0.0.1:PORT`),
/// `HOST:PORT` as given (a host name is resolved once, here). A clap value parser.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, crate::engine::Refusal> {
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.to_socket_addrs()
        .map_err(|_| "expected PORT or HOST:PORT (e.g. 9464 or 127.0.0.1:9464)")?
        .next()
        .ok_or_else(|| "the host names no address".into())
}

/// Binds a listener for `flag` (named in the error): an address in use is said so, before anything
/// else starts.
pub(crate) fn bind(flag: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "{flag} {addr}: the address is already in use (another serve or exporter listens there)"
            )
        } else {
            anyhow::anyhow!("{flag} {addr}: cannot listen: {e}")
        }
    })
}

/// A certificate chain and its private key, PEM files named on the command line (`--tls-cert`,
/// `--tls-key`).
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: std::path::PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
}

impl TlsFiles {
    /// The files named, both or neither (clap makes each flag require the other).
    pub(crate) fn from_flags(
        cert: Option<&std::path::Path>,
        key: Option<&std::path::Path>,
    ) -> Option<Self> {
        Some(Self {
            cert: cert?.to_path_buf(),
            key: key?.to_path_buf(),
        })
    }

    /// A TLS 1.3 acceptor from the files (rustls, the ring provider), refused with the file and
    /// what is wrong with it.
    pub(crate) fn acceptor(&self) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                anyhow::anyhow!(
                    "--tls-cert {}: not a PEM certificate chain: {e}",
                    self.cert.display()
                )
            })?;
        if certs.is_empty() {
            anyhow::bail!(
                "--tls-cert {}: holds no CERTIFICATE block",
                self.cert.display()
            );
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| {
            anyhow::anyhow!(
                "--tls-key {}: not a PEM private key: {e}",
                self.key.display()
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 is not available")?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                anyhow::anyhow!(
                    "--tls-cert {} and --tls-key {}: {e}",
                    self.cert.display(),
                    self.key.display()
                )
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// What [`Server::start_with`] serves.
pub(crate) struct Start<'a> {
    /// The runtime's thread name.
    pub name: &'a str,
    /// The listener, already bound.
    pub listener: TcpListener,
    /// The routes.
    pub app: Router,
    /// The limits of every connection.
    pub limits: Limits,
    /// TLS, when given: each connection's handshake comes first (within [`Limits::header_read`]).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// A running server: its runtime, and the switch that stops it.
pub struct Server {
    addr: SocketAddr,
    limits: Limits,
    stop: watch::Sender<bool>,
    connections: Arc<Semaphore>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Serves `app` on `listener` (already bound) under `limits`, on a runtime of two threads named
    /// `name`, until [`Server::shutdown`] (or drop).
    pub fn start(
        name: &str,
        listener: TcpListener,
        app: Router,
        limits: Limits,
    ) -> anyhow::Result<Self> {
        Self::start_with(Start {
            name,
            listener,
            app,
            limits,
            tls: None,
        })
    }

    /// [`Server::start`], with TLS when [`Start::tls`] is given.
    pub(crate) fn start_with(start: Start<'_>) -> anyhow::Result<Self> {
        let Start {
            name,
            listener,
            app,
            limits,
            tls,
        } = start;
        let addr = listener
            .local_addr()
            .context("the listener has no address")?;
        listener
            .set_nonblocking(true)
            .context("cannot make the listener non-blocking")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .with_context(|| format!("cannot start the {name} server"))?;
        let listener = {
            let _in_rt = rt.enter();
            tokio::net::TcpListener::from_std(listener)
                .with_context(|| format!("cannot serve on {addr}"))?
        };
        let (stop, stopped) = watch::channel(false);
        let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        let app = app.layer(axum::middleware::from_fn_with_state(limits, bounded));
        rt.spawn(accept(Accept {
            listener,
            app,
            limits,
            stopped,
            connections: connections.clone(),
            tls,
        }));
        Ok(Self {
            addr,
            limits,
            stop,
            connections,
            rt: Some(rt),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets each open connection finish the request under way (an idle one closes
    /// at once) for at most [`Limits::shutdown_grace`], then ends the runtime with what is left.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(rt) = self.rt.take() else {
            return;
        };
        let _ = self.stop.send(true);
        let all = u32::try_from(self.limits.max_connections.max(1)).unwrap_or(u32::MAX);
        let connections = self.connections.clone();
        rt.block_on(async move {
            // Every permit back: the accept loop and every connection have ended.
            let _ = tokio::time::timeout(
                self.limits.shutdown_grace,
                connections.acquire_many_owned(all),
            )
            .await;
        });
        rt.shutdown_timeout(Duration::from_millis(100));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// What the accept loop serves.
struct Accept {
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    stopped: watch::Receiver<bool>,
    connections: Arc<Semaphore>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// The accept loop: one task per connection, at most `max_connections` at once.
async fn accept(a: Accept) {
    let Accept {
        listener,
        app,
        limits,
        mut stopped,
        connections,
        tls,
    } = a;
    loop {
        let permit = tokio::select! {
            p = connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            _ = stopping(&mut stopped) => return,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                // Out of file descriptors, a connection reset before it was taken: the listener
                // stays; wait a moment rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping(&mut stopped) => return,
        };
        let _ = stream.set_nodelay(true);
        let (app, stopped) = (app.clone(), stopped.clone());
        match tls.clone() {
            None => {
                tokio::spawn(connection(stream, app, limits, stopped, permit));
            }
            Some(tls) => {
                tokio::spawn(async move {
                    // A client that never finishes its handshake holds its connection no longer
                    // than one that never sends its headers.
                    match tokio::time::timeout(limits.header_read, tls.accept(stream)).await {
                        Ok(Ok(stream)) => connection(stream, app, limits, stopped, permit).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                });
            }
        }
    }
}

/// Resolves once the server is stopping (or its switch is gone).
async fn stopping(stopped: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, never held across an await.
    let _ = stopped.wait_for(|s| *s).await.map(|_| ());
}

/// One connection, served until the client closes it, a limit ends it, or the server stops.
async fn connection<S>(
    stream: S,
    app: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_headers(limits.max_headers);
    let conn = b.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = tokio::time::sleep(limits.connection) => {}
        _ = stopping(&mut stopped) => {}
    }
    // Finish the request under way (an idle connection closes at once), then close for good.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(limits.request, conn).await;
}

/// Every request: a body over the limit is refused (`413`, at once when its length says so), and
/// its handling is bounded in time (`408`).
async fn bounded(State(limits): State<Limits>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let max = limits.max_body_bytes;
    if declared.is_some_and(|n| n > max as u64) {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over the {max}-byte limit\n"),
        )
            .into_response();
    }
    let (parts, body) = req.into_parts();
    let req = Request::from_parts(parts, Body::new(http_body_util::Limited::new(body, max)));
    match tokio::time::timeout(limits.request, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request took longer than {}s\n",
                limits.request.as_secs()
            ),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_loopback() {
        assert_eq!(parse_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_addr("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert!(
            parse_addr("nonsense")
                .unwrap_err()
                .as_str()
                .contains("PORT or HOST:PORT")
        );
    }
}
