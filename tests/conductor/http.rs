//! The HTTP server behind `serve --metrics` (docs/OBSERVABILITY.md, "Limits of the HTTP server"),
//! through the real binary: slow clients hold only their own connection, every limit answers as
//! documented, and SIGTERM stops it gracefully.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::observe::{free_port, http_get, serve_metrics};

/// Connections that each send a request a byte at a time, one byte every `every` per connection,
/// from a thread of their own until dropped (the server closes them at its header-read timeout).
struct Trickle {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Trickle {
    fn open(port: u16, n: usize, every: Duration) -> Self {
        let mut conns: Vec<TcpStream> = (0..n)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            let mut at = 0;
            while !flag.load(Ordering::SeqCst) && at < request.len() {
                for c in &mut conns {
                    if c.write_all(&request[at..=at]).is_ok() {
                        sent += 1;
                    }
                }
                at += 1;
                let until = Instant::now() + every;
                while Instant::now() < until && !flag.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            sent
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sending; how many bytes were sent in all.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The whole answer to `raw` sent on a fresh connection (the server closes it: `Connection: close`).
fn exchange(port: u16, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn fifty_slow_clients_do_not_stall_a_scrape() {
    let env = Env::new();
    let port = free_port();
    let _serve = serve_metrics(&env, port);
    // 50 clients each sending a byte every 2 s: the hand-written server answered one connection
    // at a time, so each of them blocked every scrape behind it.
    let slow = Trickle::open(port, 50, Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(300));
    let mut times = Vec::new();
    // Within the 5 s the server gives a client to send its headers: all 50 are open throughout.
    for _ in 0..10 {
        let t = Instant::now();
        let (code, head, body) = http_get(port, "/metrics", None).expect("a scrape answers");
        times.push(t.elapsed());
        assert_eq!(code, 200, "{head}");
        assert!(body.contains("pantheon_workflows"), "{body}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let sent = slow.stop();
    assert!(sent >= 100, "the slow clients sent only {sent} bytes");
    times.sort();
    let worst = *times.last().unwrap();
    eprintln!(
        "scrapes with 50 slow connections open: median {:?}, worst {:?}",
        times[times.len() / 2],
        worst
    );
    assert!(
        worst < Duration::from_secs(1),
        "a scrape took {worst:?} with 50 slow clients open"
    );
}

#[test]
fn a_client_too_slow_to_send_its_headers_is_closed() {
    let env = Env::new();
    let port = free_port();
    let _serve = serve_metrics(&env, port);
    // One byte a second never completes the headers within the 5 s the server gives; a silent
    // connection gets the same 5 s.
    let mut trickle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let start = Instant::now();
    let closed_at = std::thread::spawn(move || {
        trickle
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        for b in request.iter().cycle().take(60) {
            let _ = trickle.write_all(&[*b]);
            let mut buf = [0u8; 256];
            match trickle.read(&mut buf) {
                Ok(0) => return Some(start.elapsed()),
                Ok(_) => return None, // an answer: the headers were taken as complete
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Some(start.elapsed());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(800)),
            }
        }
        None
    });
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    let n = silent.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the silent connection got an answer");
    let silent_closed = start.elapsed();
    let trickle_closed = closed_at
        .join()
        .unwrap()
        .expect("the slow client was never closed");
    for t in [silent_closed, trickle_closed] {
        assert!(t < Duration::from_secs(15), "closed after {t:?}");
    }
    // Meanwhile, and after, scrapes answer.
    assert_eq!(http_get(port, "/metrics", None).unwrap().0, 200);
}

#[test]
fn oversized_requests_get_their_status_and_other_paths_say_where_the_metrics_are() {
    let env = Env::new();
    let port = free_port();
    let _serve = serve_metrics(&env, port);
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    let answer = exchange(port, big.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let many: String = (0..80).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = exchange(
        port,
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{many}Connection: close\r\n\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let answer = exchange(
        port,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let answer = exchange(
        port,
        b"DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    let (code, _, body) = http_get(port, "/nothing", None).unwrap();
    assert_eq!(
        (code, body.as_str()),
        (404, "pantheon serve: metrics at /metrics\n")
    );
    let (code, _, body) = http_get(port, "/", None).unwrap();
    assert_eq!(
        (code, body.as_str()),
        (200, "pantheon serve: metrics at /metrics\n")
    );
    // HEAD: the headers of the scrape, no body.
    let answer = exchange(
        port,
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "{answer}");
    // Keep-alive: two scrapes on one connection.
    let answer = exchange(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
}

#[test]
fn sigterm_stops_serve_metrics_gracefully_with_clients_connected() {
    let env = Env::new();
    let port = free_port();
    let mut serve = serve_metrics(&env, port);
    let slow = Trickle::open(port, 5, Duration::from_secs(1));
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!env.names("conductor/observe").is_empty());
    let start = Instant::now();
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe {
        libc::kill(serve.0.id() as i32, libc::SIGTERM);
    }
    let status = loop {
        if let Some(s) = serve.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "serve did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "serve exits 0 on SIGTERM");
    drop(slow);
    // The answered connection was closed, nothing listens, the record is gone.
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut all = Vec::new();
    let _ = idle.read_to_end(&mut all);
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(env.names("conductor/observe").is_empty());
}
