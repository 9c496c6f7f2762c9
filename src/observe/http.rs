//! The `/metrics` endpoint: a small HTTP/1.1 server on its own thread (one request per connection,
//! answered and closed), over the standard library only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::exposition::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
use super::metrics::Metrics;
use crate::live::runner::LiveHandle;

/// The most bytes of a request read (its line and headers).
const MAX_REQUEST: usize = 16 * 1024;
/// How long a client may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// `--metrics ADDR`: `PORT` alone is loopback (`127.0.0.1:PORT`); `HOST:PORT` as given.
pub fn parse_addr(s: &str) -> anyhow::Result<SocketAddr> {
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.to_socket_addrs()
        .with_context(|| format!("--metrics {s:?}: expected PORT or HOST:PORT"))?
        .next()
        .with_context(|| format!("--metrics {s:?}: names no address"))
}

/// Binds the listener (the caller reports a port in use as a clear error).
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!("--metrics {addr}: the address is already in use (another serve or exporter listens there)")
        } else {
            anyhow::anyhow!("--metrics {addr}: cannot listen: {e}")
        }
    })
}

/// Serves `/metrics` from `live`'s newest snapshot on a thread of its own until the process ends;
/// a second thread notes each new snapshot's dispatches (so a step's end can be labelled) and,
/// while scrapes come, computes the exposition ahead for each new snapshot and as it ages, so a
/// scrape serves text already made ([`Metrics::scrape`]).
pub fn spawn(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    live: Arc<LiveHandle>,
) -> anyhow::Result<()> {
    {
        let metrics = metrics.clone();
        let mut rx = live.snapshots.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .context("cannot start the metrics notes")?;
        std::thread::Builder::new()
            .name("metrics-notes".into())
            .spawn(move || {
                rt.block_on(async move {
                    loop {
                        let snap = rx.borrow_and_update().clone();
                        metrics.prepare(&snap);
                        // A new snapshot, or the clock moving the time-bound figures.
                        let wait = super::metrics::CACHE_FOR / 2;
                        if let Ok(Err(_)) = tokio::time::timeout(wait, rx.changed()).await {
                            break;
                        }
                    }
                });
            })
            .context("cannot start the metrics notes")?;
    }
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let _ = answer(stream, &metrics, &live);
            }
        })
        .context("cannot start the metrics server")?;
    Ok(())
}

fn answer(mut stream: TcpStream, metrics: &Metrics, live: &LiveHandle) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk)?;
        if n == 0 || buf.len() + n > MAX_REQUEST {
            return respond(
                &mut stream,
                "400 Bad Request",
                "text/plain",
                b"bad request\n",
                false,
            );
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let (method, target) = (
        first.next().unwrap_or_default(),
        first.next().unwrap_or_default(),
    );
    let head = method == "HEAD";
    if method != "GET" && !head {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"GET /metrics\n",
            false,
        );
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != "/metrics" {
        let body: &[u8] = b"pantheon serve: metrics at /metrics\n";
        let status = if path == "/" {
            "200 OK"
        } else {
            "404 Not Found"
        };
        return respond(&mut stream, status, "text/plain; charset=utf-8", body, head);
    }
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default();
    let open_metrics = wants_openmetrics(&accept);
    let snap = live.latest();
    let body = metrics.scrape(&snap, open_metrics);
    metrics
        .scrapes
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ct = if open_metrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    };
    respond(&mut stream, "200 OK", ct, body.as_bytes(), head)
}

/// True when the `Accept` header prefers OpenMetrics (as Prometheus sends it) over the text format:
/// `application/openmetrics-text` is named with a quality above the text format's.
pub fn wants_openmetrics(accept: &str) -> bool {
    let q = |kind: &str| -> Option<f32> {
        accept.split(',').find_map(|part| {
            let mut it = part.split(';');
            let t = it.next()?.trim();
            if !t.eq_ignore_ascii_case(kind) {
                return None;
            }
            let q = it
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|v| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            Some(q)
        })
    };
    match q("application/openmetrics-text") {
        Some(om) if om > 0.0 => om >= q("text/plain").unwrap_or(0.0),
        _ => false,
    }
}

fn respond(
    s: &mut TcpStream,
    status: &str,
    ct: &str,
    body: &[u8],
    head: bool,
) -> std::io::Result<()> {
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(header.as_bytes())?;
    if !head {
        s.write_all(body)?;
    }
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_header_chooses_the_format() {
        // What Prometheus 2.x sends by default.
        assert!(wants_openmetrics(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics(""));
        assert!(!wants_openmetrics(
            "application/openmetrics-text;q=0.2,text/plain;q=0.9"
        ));
    }

    #[test]
    fn a_port_alone_is_loopback() {
        assert_eq!(parse_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_addr("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert!(parse_addr("nonsense").is_err());
    }
}
