//! `pantheon tick` (one pass of the delivery supervisor, then exit) and `pantheon serve` (the supervisor
//! in the foreground): thin shells around [`Conductor::tick`] (docs/PROTOCOL.md §2.10).
//!
//! `serve` also runs the history recorder on a thread (docs/HISTORY.md) unless the root's config says
//! `history: {record: false}`; a second `serve` on the same root stands its recorder by.
//!
//! `serve` keeps a deadline index (a min-heap by due time) updated from the paths file events name, and
//! sleeps until the earliest due time or a file event under `conductor/pending/` or `conductor/timers/`,
//! never polls; it writes a heartbeat every [`SUPERVISOR_BEAT`]; SIGTERM or SIGINT finish the current pass and
//! exit 0.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use notify::Watcher;

use super::Outcome;
use crate::engine::{
    AnchorWriter, Conductor, DeadlineIndex, Origin, Root, SUPERVISOR_BEAT, TickReport, TrackName,
    anchor_every, layout, post_notices, remove_supervisor_heartbeat, time::format_ts,
    write_supervisor_heartbeat,
};

/// Options of `pantheon serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Append the log here instead of standard error.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Append the journal's head `{seq, hash, at}` to this file as it moves (at most every 2 s, and at
    /// exit), for `pantheon journal --verify --anchor PATH`. It must lie outside the root, where the
    /// root's writers cannot write (docs/THREAT-MODEL.md).
    #[arg(long, value_name = "PATH")]
    pub journal_anchor: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (PORT alone: 127.0.0.1:PORT). An address
    /// that is not loopback is warned about (docs/OBSERVABILITY.md).
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve approval links at http://ADDR/a/TOKEN (PORT alone: 127.0.0.1:PORT) and record the
    /// address in the root for `approve --link`. An address that is not loopback is warned about
    /// (docs/THREAT-MODEL.md, "Approval links").
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub approvals: Option<std::net::SocketAddr>,
    /// Require an `ssh-keygen -Y sign` signature over each link's token and digest, verified
    /// against this allowed-signers file (the signer's principal is the approver).
    #[arg(long, value_name = "FILE", requires = "approvals")]
    pub approvals_signers: Option<PathBuf>,
    /// `operator`: the links' page and decision need an operator's secret from --credentials FILE,
    /// as HTTP Basic (any user name, the secret as the password; a phone's browser asks for it) or
    /// `Authorization: Bearer SECRET`; the operator is recorded as the approver.
    #[arg(long, value_name = "WHO", value_parser = ["operator"], requires_all = ["approvals", "credentials"])]
    pub approvals_require: Option<String>,
    /// Take approval-link decisions dropped as files into DIR (a directory outside the root): each
    /// file is read and redeemed, its receipt written beside it as NAME.receipt.json, then it is
    /// removed (docs/PROTOCOL.md §2.15, "File drop").
    #[arg(long, value_name = "DIR")]
    pub approvals_drop: Option<PathBuf>,
    /// Export spans (one trace per workflow) to an OpenTelemetry collector over OTLP/HTTP
    /// protobuf, e.g. http://127.0.0.1:4318 (docs/OBSERVABILITY.md, "Traces").
    #[arg(long, value_name = "URL", value_parser = otlp_endpoint)]
    pub otlp: Option<crate::observe::export::Endpoint>,
    /// Serve the MCP tools over Streamable HTTP at http://ADDR/mcp (PORT alone: 127.0.0.1:PORT), for
    /// agents on other machines. An address that is not loopback is warned about and shown by
    /// `pantheon status` (docs/MCP.md, "Streamable HTTP").
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub mcp: Option<std::net::SocketAddr>,
    /// With --mcp: every request must carry `Authorization: Bearer SECRET` of a principal of FILE
    /// (`pantheon credentials add`) and acts only within its rights; with --approvals-require
    /// operator, the operators of FILE decide approval links. FILE must lie outside the root,
    /// readable by its owner only.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// With --mcp: serve HTTPS with this PEM certificate chain (and --tls-key).
    #[arg(long, value_name = "FILE", requires_all = ["mcp", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// With --mcp: the PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires_all = ["mcp", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
    /// With --mcp: the most MCP sessions (clients of the `initialize` handshake) alive at once;
    /// past it a new session is answered 503 (docs/MCP.md, "Sessions").
    #[arg(long, value_name = "N", requires = "mcp", value_parser = crate::mcp::http::parse_max_sessions,
          default_value_t = crate::mcp::http::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// With --mcp: close an MCP session idle this long (no request, no answer): 30s, 15m, 2h.
    /// Default 15m, longer than the longest call.
    #[arg(long, value_name = "DURATION", requires = "mcp", value_parser = crate::mcp::http::parse_session_idle)]
    pub session_idle: Option<std::time::Duration>,
}

/// `--otlp URL`, parsed by clap: a URL it cannot take is bad usage (exit 2).
fn otlp_endpoint(url: &str) -> Result<crate::observe::export::Endpoint, crate::engine::Refusal> {
    crate::observe::export::Endpoint::parse(url).map_err(|e| format!("{e:#}").into())
}

/// What wakes the loop.
enum Wake {
    /// A track's `locks.json` or `worker-status.json` changed, or a track appeared (its name).
    Track(String),
    /// Files changed (the paths notify reported).
    Paths(Vec<PathBuf>),
    /// The watcher lost events (overflow) or asked for a rescan: rebuild the index.
    Rescan,
    /// The journal moved (only watched with `--journal-anchor`).
    Journal,
    /// `conductor/paused.json` changed: the index is rebuilt and a pass made (frozen entries are
    /// looked at again, a new `until` is known).
    Paused,
    /// SIGTERM or SIGINT.
    Stop,
}

/// `pantheon tick`: one pass (deadlines, then lease and staleness notices), its report as JSON.
pub(crate) fn tick(root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    let c = Conductor::new(root.clone()).with_origin(origin);
    let now = chrono::Utc::now();
    let r = c.tick(now);
    let mut v = serde_json::to_value(r)?;
    let mut notices = Vec::new();
    for track in tracks(root) {
        if let Ok(n) = post_notices(root, &track, now) {
            notices.extend(n.posted.into_iter().map(|(kind, payload)| {
                serde_json::json!({"track": track, "type": kind.as_str(), "payload": payload})
            }));
        }
    }
    v["notices"] = serde_json::Value::Array(notices);
    v["cost"] = serde_json::to_value(c.cost_pass())?;
    Ok(Outcome::Json(v))
}

/// The tracks of the root (directories under `conductor/tracks/`).
fn tracks(root: &Root) -> Vec<TrackName> {
    let mut v: Vec<TrackName> = std::fs::read_dir(root.tracks_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| TrackName::parse(&e.file_name().to_string_lossy()).ok())
        .collect();
    v.sort();
    v
}

/// The track a bus file event concerns: `conductor/tracks/{track}/.message-bus/{locks,worker-status}.json`,
/// or a track directory itself.
fn track_of_event(tracks_dir: &std::path::Path, path: &std::path::Path) -> Option<String> {
    let rel = path.strip_prefix(tracks_dir).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [track] => Some(track.clone()),
        [track, bus, file]
            if bus == layout::BUS_DIR
                && (file == layout::LOCKS_FILE || file == layout::WORKERS_FILE) =>
        {
            Some(track.clone())
        }
        _ => None,
    }
}

/// Posts the notices due on `track` and returns when its next cause falls due.
fn notices_for(
    root: &Root,
    track: &TrackName,
    out: &mut dyn Write,
) -> Option<chrono::DateTime<chrono::Utc>> {
    match post_notices(root, track, chrono::Utc::now()) {
        Ok(r) => {
            for (kind, payload) in &r.posted {
                let _ = writeln!(
                    out,
                    "{} posted {kind} on track {track}: {payload}",
                    format_ts(chrono::Utc::now())
                );
            }
            r.next_due
        }
        Err(_) => None,
    }
}

fn log_line(out: &mut dyn Write, report: &TickReport) {
    for a in &report.redelivered {
        let _ = writeln!(
            out,
            "{} redelivered {} ({}) {} -> {} as delivery {}, deadline {}",
            report.now,
            a.handoff_id,
            a.workflow_id,
            a.from_god,
            a.to_god,
            a.delivery,
            a.deadline.as_deref().unwrap_or("none")
        );
    }
    for a in &report.dead_lettered {
        let _ = writeln!(
            out,
            "{} dead-lettered {} ({}) of {} after {} deliveries: {}",
            report.now, a.handoff_id, a.workflow_id, a.from_god, a.delivery, a.path
        );
    }
    for id in &report.resumed {
        let _ = writeln!(out, "{} resumed pause {id}: its until passed", report.now);
    }
    for e in &report.errors {
        let _ = writeln!(out, "{} error: {e}", report.now);
    }
    for w in &report.warnings {
        let _ = writeln!(out, "{} warning: {w}", report.now);
    }
    if report.journaled_late > 0 {
        let _ = writeln!(
            out,
            "{} journaled {} act(s) a killed process did not journal",
            report.now, report.journaled_late
        );
    }
    if report.repaired > 0 {
        let _ = writeln!(
            out,
            "{} finished {} half-done move(s)",
            report.now, report.repaired
        );
    }
}

/// How long `serve`'s live model gathers a burst of file events into one snapshot, and its span
/// watcher a burst into one read of each file named.
const SETTLE: Duration = Duration::from_millis(250);

/// What `serve` started beside the supervisor for `--metrics`: the HTTP server (stopped gracefully
/// at exit) and the record of where it listens (removed when dropped).
struct Observers {
    http: Option<crate::http::Server>,
    _record: Option<crate::observe::record::MetricsRecord>,
}

/// Starts what was asked for: the span exporter (with its own watcher of the files spans come
/// from) and the `/metrics` endpoint (with the live model it reads).
fn start_observers(
    args: &ServeArgs,
    root: &Root,
    id: &str,
    metrics: Option<(std::net::SocketAddr, std::net::TcpListener)>,
    otlp: Option<crate::observe::export::Endpoint>,
    out: &mut dyn Write,
) -> anyhow::Result<Observers> {
    let traces = match otlp {
        Some(endpoint) => {
            let log_path = args.log.clone();
            let log = Box::new(move |line: String| {
                let line = format!("{} {line}", format_ts(chrono::Utc::now()));
                match &log_path {
                    Some(p) => {
                        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(p) {
                            let _ = writeln!(f, "{line}");
                        }
                    }
                    None => eprintln!("{line}"),
                }
            });
            let _ = writeln!(
                out,
                "{} pantheon serve: exporting spans to http://{}:{}{}",
                format_ts(chrono::Utc::now()),
                endpoint.host,
                endpoint.port,
                endpoint.path
            );
            Some(crate::observe::trace_watch::spawn(
                root, id, endpoint, SETTLE, log,
            )?)
        }
        None => None,
    };
    let Some((addr, listener)) = metrics else {
        return Ok(Observers {
            http: None,
            _record: None,
        });
    };
    let exposed = !addr.ip().is_loopback();
    if exposed {
        let w = format!(
            "warning: --metrics {addr} is not a loopback address: anyone who can reach it reads this root's figures"
        );
        eprintln!("{w}");
        if args.log.is_some() {
            let _ = writeln!(out, "{} {w}", format_ts(chrono::Utc::now()));
        }
    }
    // A snapshot at most every SETTLE of a busy root: scrapes need no frame rate.
    let live = Arc::new(crate::live::runner::LiveHandle::start(
        root.clone(),
        crate::live::WatchMode::Notify,
        crate::live::ModelOptions {
            settle: Some(SETTLE),
            ..Default::default()
        },
    ));
    let mut m = crate::observe::metrics::Metrics::new(root.clone(), exposed);
    m.traces = traces;
    let routes = crate::observe::http::routes(Arc::new(m), live)?;
    let server = crate::http::Server::start(
        "metrics-http",
        listener,
        routes,
        crate::http::Limits::default(),
    )?;
    let _ = writeln!(
        out,
        "{} pantheon serve: metrics at http://{addr}/metrics",
        format_ts(chrono::Utc::now())
    );
    Ok(Observers {
        http: Some(server),
        _record: Some(crate::observe::record::MetricsRecord::write(root, id, addr)),
    })
}

/// Starts `--approvals`: the links' listener, its address recorded in the root.
fn start_approvals(
    args: &ServeArgs,
    root: &Root,
    id: &str,
    bound: Option<(std::net::SocketAddr, std::net::TcpListener)>,
    out: &mut dyn Write,
) -> anyhow::Result<Option<(crate::http::Server, crate::observe::record::MetricsRecord)>> {
    let Some((addr, listener)) = bound else {
        return Ok(None);
    };
    if !addr.ip().is_loopback() {
        let w = format!(
            "warning: --approvals {addr} is not a loopback address: anyone who can reach it and holds a link decides that held item (docs/THREAT-MODEL.md)"
        );
        eprintln!("{w}");
        if args.log.is_some() {
            let _ = writeln!(out, "{} {w}", format_ts(chrono::Utc::now()));
        }
    }
    let approver = match &args.approvals_signers {
        Some(f) => {
            if !f.is_file() {
                anyhow::bail!(
                    "--approvals-signers {}: no such file (give an ssh allowed_signers file)",
                    f.display()
                );
            }
            crate::approvals::Approver::SshSigners(f.clone())
        }
        None => crate::approvals::Approver::Link,
    };
    let operators = match (&args.approvals_require, &args.credentials) {
        (Some(_), Some(file)) => Some(Arc::new(crate::credentials::Credentials::load(
            file, &root.dir,
        )?)),
        _ => None,
    };
    let server = crate::http::Server::start(
        "approvals-http",
        listener,
        crate::approvals::routes_with(
            root.clone(),
            approver,
            crate::approvals::link_key(root)?,
            operators,
        ),
        crate::http::Limits {
            max_body_bytes: 64 * 1024,
            ..crate::http::Limits::default()
        },
    )?;
    let base = format!("http://{}", server.local_addr());
    crate::engine::write_approvals_listener(root, &base)?;
    let _ = writeln!(
        out,
        "{} pantheon serve: approval links at {base}/a/TOKEN",
        format_ts(chrono::Utc::now())
    );
    let record = crate::observe::record::MetricsRecord::write_kind(root, "approvals", id, addr);
    Ok(Some((server, record)))
}

/// The MCP endpoint of `serve --mcp` (credentials and TLS loaded first), its warning beyond
/// loopback, and the record `pantheon status` reads.
fn start_mcp(
    args: &ServeArgs,
    root: &Root,
    id: &str,
    listener: std::net::TcpListener,
    out: &mut dyn Write,
) -> anyhow::Result<(
    crate::mcp::http::Endpoint,
    crate::observe::record::MetricsRecord,
)> {
    let options = crate::mcp::http::HttpOptions {
        credentials: args.credentials.clone(),
        tls: crate::http::TlsFiles::from_flags(args.tls_cert.as_deref(), args.tls_key.as_deref()),
        sessions: crate::mcp::http::SessionLimits {
            max: args.max_sessions,
            idle: args
                .session_idle
                .unwrap_or(crate::mcp::http::DEFAULT_SESSION_IDLE),
        },
    };
    let endpoint = crate::mcp::http::start(root, listener, &options)?;
    let addr = endpoint.server.local_addr();
    if let Some(w) = crate::mcp::http::exposure_warning("--mcp", addr, endpoint.authenticated) {
        eprintln!("{w}");
        if args.log.is_some() {
            let _ = writeln!(out, "{} {w}", format_ts(chrono::Utc::now()));
        }
    }
    let _ = writeln!(
        out,
        "{} pantheon serve: MCP at {}{}",
        format_ts(chrono::Utc::now()),
        endpoint.url,
        if endpoint.authenticated {
            " (credentials required)"
        } else {
            ""
        }
    );
    let record =
        crate::observe::record::MetricsRecord::write_mcp(root, id, addr, endpoint.authenticated);
    Ok((endpoint, record))
}

/// `pantheon serve`: the supervisor, until SIGTERM or SIGINT.
pub(crate) fn serve(args: ServeArgs, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    let mut out = super::record::log_sink(args.log.as_ref())?;
    let c = Conductor::new(root.clone()).with_origin(origin);
    if args.credentials.is_some() && args.mcp.is_none() && args.approvals_require.is_none() {
        anyhow::bail!(
            "--credentials is for --mcp or --approvals-require operator: give one of them, or drop it"
        );
    }
    // Bound before anything else starts, so a port in use is the first and only thing said.
    let metrics = match args.metrics {
        Some(addr) => Some((addr, crate::http::bind("--metrics", addr)?)),
        None => None,
    };
    let approvals = match args.approvals {
        Some(addr) => Some((addr, crate::http::bind("--approvals", addr)?)),
        None => None,
    };
    let mcp = match args.mcp {
        Some(addr) => Some(crate::http::bind("--mcp", addr)?),
        None => None,
    };
    let otlp = args.otlp.clone();
    let anchor = open_anchor(&args, root, &mut *out)?;
    let id = format!("pid-{}", std::process::id());
    let started = format_ts(chrono::Utc::now());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Wake>();
    on_signals(stop.clone(), tx.clone())?;
    let watcher = watch_root(root, tx.clone(), anchor.is_some())?;
    // The live model (the console's) behind `/metrics` and `--otlp`, kept current by its own watches.
    let observers = start_observers(&args, root, &id, metrics, otlp, &mut *out)?;
    let approvals = start_approvals(&args, root, &id, approvals, &mut *out)?;
    let drop_dir = match &args.approvals_drop {
        Some(d) => {
            let dd = crate::approvals::drop_dir::DropDir::start(
                root,
                d,
                crate::approvals::link_key(root)?,
            )?;
            let _ = writeln!(
                out,
                "{} pantheon serve: approval decisions taken from files in {}",
                format_ts(chrono::Utc::now()),
                dd.dir.display()
            );
            Some(dd)
        }
        None => None,
    };
    let mcp = match mcp {
        Some(listener) => Some(start_mcp(&args, root, &id, listener, &mut *out)?),
        None => None,
    };
    // The recorder last: what can be refused (credentials, TLS, the drop directory) is refused
    // before its thread says anything, so a mistake is the first and only thing on standard error.
    let recorder = if root.settings.history.record {
        Some(super::record::background(
            root,
            super::record::log_sink(args.log.as_ref())?,
        )?)
    } else {
        None
    };
    let _ = writeln!(
        out,
        "{started} pantheon serve: supervising {} (heartbeat {})",
        root.dir.display(),
        root.supervisor_dir().join(format!("{id}.json")).display()
    );
    let mut sup = Supervisor::new(&c, root, &id, &started, anchor);
    while !stop.load(Ordering::SeqCst) {
        sup.turn(&mut *out);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let first = match rx.recv_timeout(sup.wait()) {
            Ok(w) => w,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Take every event already queued, then update the index from them.
        sup.absorb(std::iter::once(first).chain(rx.try_iter()));
    }
    drop(watcher);
    // Requests under way are answered; then nothing listens.
    if let Some(server) = observers.http {
        server.shutdown();
    }
    if let Some((server, _record)) = approvals {
        server.shutdown();
        crate::engine::remove_approvals_listener(root);
    }
    if let Some(d) = drop_dir {
        d.stop();
    }
    if let Some((endpoint, record)) = mcp {
        endpoint.server.shutdown();
        drop(record);
    }
    if let Some(r) = recorder {
        r.stop();
    }
    if let Some(a) = sup.anchor.as_mut()
        && let Err(e) = a.anchor(root)
    {
        let _ = writeln!(out, "{} journal anchor: {e}", format_ts(chrono::Utc::now()));
    }
    let _ = remove_supervisor_heartbeat(root, &id);
    let _ = writeln!(
        out,
        "{} pantheon serve: stopped",
        format_ts(chrono::Utc::now())
    );
    // Held to here, so the loop's channel never disconnects while it runs.
    drop(tx);
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

/// The `--journal-anchor` writer, when asked for; what it warns about (a head that moved past the
/// last anchor, …) is logged, and said on standard error too when the log is a file.
fn open_anchor(
    args: &ServeArgs,
    root: &Root,
    out: &mut dyn Write,
) -> anyhow::Result<Option<AnchorWriter>> {
    let Some(p) = &args.journal_anchor else {
        return Ok(None);
    };
    let (w, mut warnings) = AnchorWriter::open(root, p)?;
    warnings.extend(w.check_head(root));
    for w in warnings {
        if args.log.is_some() {
            eprintln!("{w}");
        }
        let _ = writeln!(out, "{w}");
    }
    Ok(Some(w))
}

/// Signals: a small runtime on its own thread sets `stop` and wakes the loop on SIGTERM or
/// SIGINT. Returns once both handlers are installed (or says why they are not).
fn on_signals(stop: Arc<AtomicBool>, tx: mpsc::Sender<Wake>) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal handler")?;
    let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<()>>();
    std::thread::Builder::new()
        .name("serve-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let term = signal(SignalKind::terminate());
                let int = signal(SignalKind::interrupt());
                let (mut term, mut int) = match (term, int) {
                    (Ok(t), Ok(i)) => {
                        let _ = ready_tx.send(Ok(()));
                        (t, i)
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        let _ = ready_tx.send(Err(e.into()));
                        return;
                    }
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                stop.store(true, Ordering::SeqCst);
                let _ = tx.send(Wake::Stop);
            });
        })
        .context("cannot start the signal thread")?;
    ready_rx
        .recv()
        .context("the signal thread ended")?
        .context("cannot install the SIGTERM handler")
}

/// File events under conductor/pending and conductor/timers wake the loop with their paths; only
/// those files are read again (the deadline index), the whole tree only at start and on overflow.
/// A track's lease and heartbeat files wake it with the track's name, and the journal (watched
/// only for an `anchor`) with [`Wake::Journal`].
fn watch_root(
    root: &Root,
    wake: mpsc::Sender<Wake>,
    anchor: bool,
) -> anyhow::Result<notify::RecommendedWatcher> {
    let pending = root.pending_root();
    let timers = root.timers_dir();
    std::fs::create_dir_all(&pending).ok();
    std::fs::create_dir_all(&timers).ok();
    let tracks_dir = root.tracks_dir();
    std::fs::create_dir_all(&tracks_dir).ok();
    let watched_tracks = tracks_dir.clone();
    let journal_file = crate::engine::journal_path(root);
    let paused_file = root.paused_path();
    let conductor_dir = root.conductor.clone();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let _ = match ev {
            // Opening or reading a file (our own reads included) changes nothing.
            Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => Ok(()),
            Ok(ev) if ev.need_rescan() => wake.send(Wake::Rescan),
            Ok(ev) if ev.paths.contains(&paused_file) => wake.send(Wake::Paused),
            Ok(ev) if ev.paths.contains(&journal_file) => {
                if anchor {
                    wake.send(Wake::Journal)
                } else {
                    Ok(())
                }
            }
            // Anything else directly in conductor/ (watched for paused.json and the journal).
            Ok(ev)
                if ev
                    .paths
                    .iter()
                    .all(|p| p.parent() == Some(conductor_dir.as_path())) =>
            {
                Ok(())
            }
            Ok(ev) if ev.paths.iter().any(|p| p.starts_with(&watched_tracks)) => {
                // Only the lease and heartbeat files of a track matter (queue appends do not wake us).
                for t in ev
                    .paths
                    .iter()
                    .filter_map(|p| track_of_event(&watched_tracks, p))
                {
                    let _ = wake.send(Wake::Track(t));
                }
                Ok(())
            }
            Ok(ev) => wake.send(Wake::Paths(ev.paths)),
            Err(_) => wake.send(Wake::Rescan),
        };
    })
    .context("cannot watch the inboxes")?;
    watcher
        .watch(&pending, notify::RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {}", pending.display()))?;
    watcher
        .watch(&timers, notify::RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", timers.display()))?;
    watcher
        .watch(&tracks_dir, notify::RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {}", tracks_dir.display()))?;
    watcher
        .watch(&root.conductor, notify::RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", root.conductor.display()))?;
    Ok(watcher)
}

/// The supervisor loop's state between two wakes: the deadline index, when each track's notices
/// fall due, the last heartbeat and the journal anchor.
struct Supervisor<'a> {
    c: &'a Conductor,
    root: &'a Root,
    /// This process's heartbeat id (`pid-N`) and when it started.
    id: &'a str,
    started: &'a str,
    index: DeadlineIndex,
    /// A full pass is due (at start): the index is ticked whatever its next due time.
    pass: bool,
    last_beat: Instant,
    /// When each track's next lease expiry or staleness falls due.
    notice_due: BTreeMap<TrackName, Option<DateTime<Utc>>>,
    /// Tracks whose notices are to be posted this turn.
    notice_now: Vec<TrackName>,
    anchor: Option<AnchorWriter>,
    /// The head moved since the last anchor (true at start: anchor the head found).
    anchor_dirty: bool,
    /// The least time between two anchors, and the last one.
    every: Duration,
    last_anchor: Instant,
    /// When the root's temporary directory was last swept of killed writers' leftovers.
    last_sweep: Option<Instant>,
}

/// How often `serve` sweeps the root's temporary directory.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

impl<'a> Supervisor<'a> {
    fn new(
        c: &'a Conductor,
        root: &'a Root,
        id: &'a str,
        started: &'a str,
        anchor: Option<AnchorWriter>,
    ) -> Self {
        let every = anchor_every();
        let index = DeadlineIndex::build(root);
        let notice_due: BTreeMap<_, _> = tracks(root).into_iter().map(|t| (t, None)).collect();
        Self {
            c,
            root,
            id,
            started,
            index,
            pass: true,
            last_beat: Instant::now() - SUPERVISOR_BEAT,
            notice_now: notice_due.keys().cloned().collect(),
            notice_due,
            anchor_dirty: anchor.is_some(),
            anchor,
            every,
            last_anchor: Instant::now() - every,
            last_sweep: None,
        }
    }

    /// One turn: the deadlines due, the notices due, the heartbeat and the anchor when theirs is.
    fn turn(&mut self, out: &mut dyn Write) {
        let now = chrono::Utc::now();
        if self.pass || self.index.next_due().is_some_and(|t| t <= now) {
            let report = self.c.tick_index(&mut self.index, now);
            log_line(out, &report);
            self.pass = false;
        }
        self.notice_now.extend(
            self.notice_due
                .iter()
                .filter(|(_, d)| d.is_some_and(|t| t <= now))
                .map(|(t, _)| t.clone()),
        );
        self.notice_now.sort();
        self.notice_now.dedup();
        for t in self.notice_now.drain(..) {
            let due = notices_for(self.root, &t, out);
            self.notice_due.insert(t, due);
        }
        if self.last_beat.elapsed() >= SUPERVISOR_BEAT {
            self.beat(out);
            self.last_beat = Instant::now();
        }
        if self.last_sweep.is_none_or(|t| t.elapsed() >= SWEEP_EVERY) {
            self.last_sweep = Some(Instant::now());
            let n = self.c.sweep_temps();
            if n > 0 {
                let _ = writeln!(
                    out,
                    "{} removed {n} temporary file(s) that killed writers left in .tmp/",
                    format_ts(chrono::Utc::now())
                );
            }
        }
        if let Some(a) = self.anchor.as_mut()
            && self.anchor_dirty
            && self.last_anchor.elapsed() >= self.every
        {
            self.anchor_dirty = false;
            self.last_anchor = Instant::now();
            if let Err(e) = a.anchor(self.root) {
                let _ = writeln!(out, "{} journal anchor: {e}", format_ts(chrono::Utc::now()));
            }
        }
    }

    /// The heartbeat: usage posted on the bus and reports a killed act left reach the ledger, and
    /// the heartbeat file says when the next deadline falls due.
    fn beat(&mut self, out: &mut dyn Write) {
        let cp = self.c.cost_pass();
        if cp.bus_recorded > 0 || cp.settled > 0 || !cp.errors.is_empty() {
            let _ = writeln!(
                out,
                "{} cost: {} bus report(s) recorded, {} settled, {} dropped{}",
                format_ts(chrono::Utc::now()),
                cp.bus_recorded,
                cp.settled,
                cp.dropped,
                cp.errors
                    .iter()
                    .map(|e| format!("; {e}"))
                    .collect::<String>()
            );
        }
        let nd = self.index.next_due().map(format_ts);
        if let Err(e) = write_supervisor_heartbeat(self.root, self.id, self.started, nd.as_deref())
        {
            let _ = writeln!(out, "{} heartbeat: {e}", format_ts(chrono::Utc::now()));
        }
    }

    /// How long to sleep: exactly until the next due time (or the next heartbeat, or the next
    /// anchor when the head moved), unless a file event comes first.
    fn wait(&mut self) -> Duration {
        let mut wait = SUPERVISOR_BEAT.saturating_sub(self.last_beat.elapsed());
        if self.anchor_dirty {
            wait = wait.min(self.every.saturating_sub(self.last_anchor.elapsed()));
        }
        for t in self
            .index
            .next_due()
            .into_iter()
            .chain(self.notice_due.values().flatten().copied())
        {
            let until = (t - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
            wait = wait.min(until);
        }
        wait
    }

    /// What woke the loop: the index is updated from the paths named (rebuilt on a rescan), the
    /// tracks named get their notices next turn, a journal move makes an anchor due.
    fn absorb(&mut self, wakes: impl Iterator<Item = Wake>) {
        let mut rescan = false;
        let mut changed: Vec<PathBuf> = Vec::new();
        for w in wakes {
            match w {
                Wake::Paths(p) => changed.extend(p),
                Wake::Rescan => {
                    rescan = true;
                    self.notice_now.extend(tracks(self.root));
                }
                // A directory whose name is no track name holds no bus (PROTOCOL.md 1.3).
                Wake::Track(t) => self.notice_now.extend(TrackName::parse(&t).ok()),
                Wake::Journal => self.anchor_dirty = true,
                Wake::Paused => {
                    rescan = true;
                    self.pass = true;
                }
                Wake::Stop => {}
            }
        }
        if rescan {
            self.index.rebuild(self.root);
        } else {
            changed.sort();
            changed.dedup();
            for p in &changed {
                self.index.refresh(self.root, p);
            }
        }
    }
}
