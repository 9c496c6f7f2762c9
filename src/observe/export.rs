//! `pantheon serve --otlp URL`: spans to an OpenTelemetry collector over OTLP/HTTP (protobuf),
//! through a bounded queue. The observer (on the live model's thread) hands each span to the
//! queue without waiting: when the queue is full the span is dropped and counted. A sender thread
//! takes batches off the queue and POSTs them; a batch the collector did not take (down, slow,
//! refusing) is dropped and counted too, never retried, so a collector that is down costs nothing
//! but the count. Nothing here runs on an engine act's path.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::otlp::{AttrValue, SpanData, export_request};

/// Spans the queue holds; past it new spans are dropped.
pub(crate) const QUEUE_SPANS: usize = 4096;
/// Spans per request at most.
pub(crate) const BATCH_SPANS: usize = 512;
/// How long a batch waits for more spans before it is sent.
const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Connect, write and read limits of one request.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The exporter's figures, for `/metrics` and the log.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans the collector took (a 2xx answer).
    pub exported: AtomicU64,
    /// Spans dropped: the queue was full, or their request failed.
    pub dropped: AtomicU64,
    /// Spans in the queue now.
    pub queued: AtomicU64,
    /// Requests that failed.
    pub failed_requests: AtomicU64,
}

/// Where spans go: `http://HOST:PORT/PATH` (no path: `/v1/traces`, the OTLP default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Endpoint {
    /// Parses the `--otlp` URL. Only `http://` is taken: a collector on this machine or a sidecar
    /// (TLS is the collector's business).
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let Some(rest) = url.strip_prefix("http://") else {
            bail!(
                "--otlp {url}: only http:// URLs are supported (an OTLP/HTTP collector such as http://127.0.0.1:4318)"
            );
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let path = if path.is_empty() || path == "/" {
            "/v1/traces".to_owned()
        } else {
            path.to_owned()
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                h.trim_start_matches('[').trim_end_matches(']'),
                p.parse::<u16>()
                    .with_context(|| format!("--otlp {url}: bad port {p:?}"))?,
            ),
            _ => (
                authority.trim_start_matches('[').trim_end_matches(']'),
                4318,
            ),
        };
        if host.is_empty() || authority.contains('@') {
            bail!("--otlp {url}: expected http://HOST:PORT[/PATH]");
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            path,
        })
    }
}

/// The sending side of the queue: never blocks.
#[derive(Clone)]
pub(crate) struct SpanQueue {
    tx: SyncSender<SpanData>,
    pub stats: Arc<TraceStats>,
}

impl SpanQueue {
    /// Queues one span, or drops and counts it when the queue is full.
    pub(crate) fn offer(&self, span: SpanData) {
        match self.tx.try_send(span) {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Starts the sender thread for `endpoint`; `log` receives one line when the collector stops
/// taking spans and one when it takes them again.
pub(crate) fn start(
    endpoint: Endpoint,
    resource: Vec<(&'static str, AttrValue)>,
    log: Box<dyn FnMut(String) + Send>,
) -> anyhow::Result<SpanQueue> {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE_SPANS);
    let stats = Arc::new(TraceStats::default());
    let s = stats.clone();
    std::thread::Builder::new()
        .name("otlp-export".into())
        .spawn(move || send_loop(&rx, &endpoint, &resource, &s, log))
        .context("cannot start the span exporter")?;
    Ok(SpanQueue { tx, stats })
}

fn send_loop(
    rx: &Receiver<SpanData>,
    endpoint: &Endpoint,
    resource: &[(&'static str, AttrValue)],
    stats: &TraceStats,
    mut log: Box<dyn FnMut(String) + Send>,
) {
    let mut failing = false;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let until = Instant::now() + BATCH_WAIT;
        while batch.len() < BATCH_SPANS {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(s) => batch.push(s),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        let n = batch.len() as u64;
        stats.queued.fetch_sub(n, Ordering::Relaxed);
        let body = export_request(resource, &batch);
        match post(endpoint, &body) {
            Ok(()) => {
                stats.exported.fetch_add(n, Ordering::Relaxed);
                if failing {
                    failing = false;
                    log(format!(
                        "otlp: the collector at {}:{} takes spans again",
                        endpoint.host, endpoint.port
                    ));
                }
            }
            Err(e) => {
                stats.dropped.fetch_add(n, Ordering::Relaxed);
                stats.failed_requests.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    failing = true;
                    log(format!(
                        "otlp: cannot export to {}:{}{}: {e:#} (spans are dropped and counted until it answers)",
                        endpoint.host, endpoint.port, endpoint.path
                    ));
                }
            }
        }
    }
}

fn connect(endpoint: &Endpoint) -> anyhow::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", endpoint.host))?
        .collect();
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, IO_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => anyhow::Error::new(e).context("cannot connect"),
        None => anyhow::anyhow!("{} has no address", endpoint.host),
    })
}

/// One `POST` of a protobuf body; Ok on a 2xx answer.
fn post(endpoint: &Endpoint, body: &[u8]) -> anyhow::Result<()> {
    let mut stream = connect(endpoint)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let host = if endpoint.host.contains(':') {
        format!("[{}]:{}", endpoint.host, endpoint.port)
    } else {
        format!("{}:{}", endpoint.host, endpoint.port)
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: pantheon/{}\r\n\r\n",
        endpoint.path,
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    // The status line is all we need; read at most a little of the answer.
    let mut buf = [0u8; 512];
    let mut got = 0;
    while got < 16 {
        let n = stream.read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let text = String::from_utf8_lossy(&buf[..got]);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok());
    match code {
        Some(c) if (200..300).contains(&c) => Ok(()),
        Some(c) => bail!("the collector answered {c}"),
        None => bail!("the collector gave no HTTP answer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_urls_parse_with_the_default_path_and_port() {
        let e = Endpoint::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 4318, "/v1/traces")
        );
        let e = Endpoint::parse("http://collector/otlp/v1/traces").unwrap();
        assert_eq!((e.port, e.path.as_str()), (4318, "/otlp/v1/traces"));
        let e = Endpoint::parse("http://[::1]:9999/").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 9999));
        for bad in [
            "https://x:4318",
            "x:4318",
            "http://:4318",
            "http://h:99999",
            "http://u@h:1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let (tx, _rx) = std::sync::mpsc::sync_channel(2);
        let q = SpanQueue {
            tx,
            stats: Arc::default(),
        };
        let span = SpanData {
            trace_id: [1; 16],
            span_id: [1; 8],
            parent: None,
            name: "x".into(),
            kind: super::super::otlp::SpanKind::Internal,
            start_nanos: 0,
            end_nanos: 0,
            attributes: vec![],
            links: vec![],
        };
        for _ in 0..5 {
            q.offer(span.clone());
        }
        assert_eq!(q.stats.queued.load(Ordering::Relaxed), 2);
        assert_eq!(q.stats.dropped.load(Ordering::Relaxed), 3);
    }
}
