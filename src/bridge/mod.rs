//! `pantheon bridge` (docs/NATS.md): a thin async shell that moves the engine's outbox records to
//! NATS JetStream and turns messages from a durable consumer into local handoffs and replies. Every
//! protocol decision is the engine's (`pantheon_engine::nats`, `pantheon_engine::outbox`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use async_nats::jetstream::{self, AckKind, consumer::pull, stream};
use futures_util::StreamExt;
use tokio::sync::Mutex;

use crate::engine::{
    Conductor, Error as EngineError, Root, is_valid_name,
    nats::{self as eb, Inbound, Status},
    outbox,
};

mod approvals;
mod pauses;
mod publisher;
mod strangers;
mod trace;
mod track;

/// Options of `pantheon bridge`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BridgeArgs {
    #[command(subcommand)]
    pub command: Option<BridgeCommand>,
    /// This pantheon's name (its replies come back on `pantheon.NAME.in.reply`).
    #[arg(long)]
    pub name: Option<String>,
    /// A peer pantheon whose messages are taken (repeat; messages from others are dead-lettered),
    /// with how to publish to it (`jetstream`, the default, or `core` for a listener on core NATS)
    /// and its envelope (`pantheon`, the default, or `origin`): e.g. `--peer tallon:core:origin`.
    #[arg(long = "peer", value_name = "NAME[:TRANSPORT[:ENVELOPE]]")]
    pub peers: Vec<String>,
    /// A reply subject declared for a peer (repeat): replies to it may go there besides its default
    /// (`pantheon.NAME.in.reply`; for the origin's envelope `subspace.ME.outgoing.NAME`).
    #[arg(long = "peer-reply", value_name = "NAME=SUBJECT")]
    pub peer_replies: Vec<String>,
    /// How long a record that cannot be published is retried (with backoff, on its own: the other
    /// records go out meanwhile) before it is dead-lettered.
    #[arg(long, default_value = "1h", value_parser = parse_ttl_secs)]
    pub give_up_after: u64,
    /// A subject filter this pantheon receives on, besides its reply subject (repeat;
    /// e.g. `subspace.*.outgoing.tallon`).
    #[arg(long = "subject", value_name = "FILTER")]
    pub subjects: Vec<String>,
    /// The god inbound requests are dispatched to.
    #[arg(long, default_value = "hermes")]
    pub god: String,
    /// Hold inbound requests in the approval hold until an operator approves them.
    #[arg(long)]
    pub hold_inbound: bool,
    /// Replicas of the stream the bridge creates (3 on a three-node cluster).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    #[command(flatten)]
    pub conn: Conn,
    /// A bus track shared with the other pantheons on the server (repeat): its lines, locks and
    /// heartbeats are mirrored across machines.
    #[arg(long = "track", value_name = "TRACK")]
    pub tracks: Vec<String>,
    /// How often the outbox is scanned, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub poll_ms: u64,
    /// Take approval-link decisions on `pantheon.NAME.approve` (docs/NATS.md "Approval links"):
    /// a token published there is redeemed as the listener's page redeems it, the receipt the reply.
    #[arg(long)]
    pub approvals: bool,
    /// How often this root's pauses are announced to the peers when nothing changed (they also go
    /// out at once on a pause, a resume and a reconnect), e.g. `10s`; a peer forgets them after three
    /// periods of silence.
    #[arg(long, default_value = "10s", value_parser = parse_every_secs)]
    pub announce_every: u64,
}

/// How to reach and authenticate to NATS (credentials are read from files, never printed).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Conn {
    /// The NATS server URL(s), comma-separated (nats://host:4222).
    #[arg(long, env = "PANTHEON_NATS_URL")]
    pub nats: Option<String>,
    /// A NATS credentials file (JWT + nkey seed).
    #[arg(long, value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed.
    #[arg(long, value_name = "FILE")]
    pub nkey: Option<PathBuf>,
    /// A file holding an auth token (or set PANTHEON_NATS_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Refuse to run against a server that asks for no authentication (credentials given to such a
    /// server are never checked by it; without this flag the bridge warns).
    #[arg(long)]
    pub require_auth: bool,
    /// Require TLS; with --tls-ca to trust a private CA, and --tls-cert/--tls-key for a client certificate.
    #[arg(long)]
    pub tls: bool,
    /// A PEM file of the CA that signed the server's certificate.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A PEM client certificate (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum BridgeCommand {
    /// The bridge's status as JSON (from the root: works whether or not the bridge runs).
    Status,
    /// Take, renew (--token) or release (--release) a lock of a shared track through the track's
    /// KV bucket (compare-and-set; the returned fencing token is the KV revision). JSON out.
    Lock(Box<LockArgs>),
    /// Try a waiting outbox record again now (a running bridge takes the request within a second;
    /// its backoff and `--give-up-after` clock start over). Journaled. JSON out.
    Retry {
        /// The record's outbox id (`bridge status` lists the stuck ones).
        outbox_id: String,
    },
    /// Give a waiting outbox record up: it is dead-lettered with the reason and never published
    /// (a running bridge stops trying it within a second). Journaled. JSON out.
    Discard {
        /// The record's outbox id (`bridge status` lists the stuck ones).
        outbox_id: String,
        /// Why, kept in the dead letter and the journal.
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct LockArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// This pantheon's name.
    #[arg(long)]
    pub name: String,
    /// The shared track whose KV lock bucket holds the lock.
    #[arg(long)]
    pub track: String,
    /// The file to lock.
    #[arg(long)]
    pub path: String,
    /// The worker taking (or releasing) the lock.
    #[arg(long)]
    pub worker: String,
    /// Lease length, as `bus lock --ttl` takes it (30m, 2h, 90s; a bare number is seconds).
    #[arg(long, default_value = "30m", value_parser = parse_ttl_secs)]
    pub ttl: u64,
    /// The kind of lock, recorded with it.
    #[arg(long, default_value = "exclusive")]
    pub lock_type: String,
    /// Renew (or release) only the lease this token belongs to.
    #[arg(long)]
    pub token: Option<u64>,
    /// Release the lock instead of taking it.
    #[arg(long)]
    pub release: bool,
    /// Release another holder's lock (an operator act).
    #[arg(long, requires = "release")]
    pub force: bool,
    /// Replicas of the KV bucket if the bridge creates it (3 on a three-node cluster).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
}

/// How often the status file is written when nothing in it changed.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// Deliveries of one message before it is dead-lettered.
const MAX_DELIVER: i64 = 20;

/// Runs `pantheon bridge …`; `origin` is who an operator act (retry, discard) is journaled as.
pub(crate) fn run(
    args: BridgeArgs,
    root: &Root,
    origin: crate::engine::Origin,
) -> anyhow::Result<crate::outcome::Outcome> {
    match &args.command {
        Some(BridgeCommand::Status) => {
            return Ok(crate::outcome::Outcome::Json(eb::read_status(root)?));
        }
        Some(BridgeCommand::Retry { outbox_id }) => {
            let r = Conductor::new(root.clone())
                .with_origin(origin)
                .retry_outbox(outbox_id)?;
            return Ok(crate::outcome::Outcome::Json(serde_json::to_value(r)?));
        }
        Some(BridgeCommand::Discard { outbox_id, reason }) => {
            let r = Conductor::new(root.clone())
                .with_origin(origin)
                .discard_outbox(outbox_id, reason)?;
            return Ok(crate::outcome::Outcome::Json(serde_json::to_value(r)?));
        }
        _ => {}
    }
    if let Some(BridgeCommand::Lock(l)) = &args.command {
        return run_lock(l, root);
    }
    let url = args
        .conn
        .nats
        .clone()
        .context("--nats URL is required (or PANTHEON_NATS_URL)")?;
    let name = args.name.clone().context("--name PANTHEON is required")?;
    if !is_valid_name(&name) {
        bail!("--name {name:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$");
    }
    let mut peers =
        eb::Peers::from_flags(&args.peers, &args.peer_replies).map_err(anyhow::Error::msg)?;
    for w in eb::configure_peers(root, &mut peers) {
        eprintln!("warning: {w}");
    }
    for s in &args.subjects {
        eb::check_filter(s).map_err(anyhow::Error::msg)?;
    }
    for t in &args.tracks {
        crate::engine::TrackName::parse(t)?;
    }
    if !is_valid_name(&args.god) {
        bail!("--god {:?} is not a god name", args.god);
    }
    // The bridge logs its warnings (errors, dead letters) to stderr; RUST_LOG raises or lowers that.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
                // The client's debug and trace output can show credentials: never below info.
                .add_directive("async_nats=info".parse().expect("a valid directive")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(args, url, name, peers, root.clone()))?;
    Ok(crate::outcome::Outcome::Exit(
        std::process::ExitCode::SUCCESS,
    ))
}

struct Shared {
    root: Root,
    conductor: Conductor,
    inbound: Inbound,
    status: Mutex<Status>,
    published: AtomicU64,
    received: AtomicU64,
    dead: AtomicU64,
    stop: AtomicBool,
    tracks: std::sync::Mutex<Vec<(String, Arc<track::TrackStats>)>>,
    /// The status last written (without its time) and when.
    status_written: std::sync::Mutex<Option<(Status, std::time::Instant)>>,
    /// Connections made to a server (the first and every reconnect): a shared track's consumer
    /// is made again from its cursor when this changes (see `track::consume_session`).
    connects: AtomicU64,
    /// Ids of inbound requests taken since the publisher last looked (their replies are watched).
    taken: std::sync::Mutex<Vec<String>>,
    /// The peers' pauses heard on `pantheon.*.paused` (docs/NATS.md "Pauses").
    peer_pauses: pauses::Heard,
}

impl Shared {
    async fn note_error(&self, e: impl std::fmt::Display) {
        let text = e.to_string();
        tracing::warn!("bridge: {text}");
        self.status.lock().await.last_error = Some(text);
    }

    /// Writes `status.json` when something in it changed, else every [`STATUS_EVERY`]. The outbox
    /// scan and the write run on a blocking thread, so the loops moving messages never wait on them.
    async fn save_status(&self, connected: Option<bool>, lag: Option<u64>) {
        let mut s = self.status.lock().await;
        if let Some(c) = connected {
            s.connected = c;
        }
        if let Some(l) = lag {
            s.lag = l;
        }
        s.published = self.published.load(Ordering::Relaxed);
        s.received = self.received.load(Ordering::Relaxed);
        s.dead_lettered = self.dead.load(Ordering::Relaxed);
        let root = self.root.clone();
        if let Ok(n) = tokio::task::spawn_blocking(move || outbox::pending(&root).0.len()).await {
            s.outbox_pending = n;
        }
        s.tracks = self
            .tracks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(t, st)| (t.clone(), st.counts()))
            .collect();
        s.extra.insert(
            "peer_pauses".into(),
            eb::peer_pauses_json(&pauses::live(&self.peer_pauses)),
        );
        // Written when something in it changed, else every few seconds (its `updated` says the
        // bridge is alive): a console watching the file is not woken five times a second.
        let mut same = s.clone();
        same.updated.clear();
        if self
            .status_written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|(prev, at)| *prev == same && at.elapsed() < STATUS_EVERY)
        {
            return;
        }
        s.updated = crate::engine::time::now_ts();
        let (root, body) = (self.root.clone(), s.clone());
        // The status lock is held until the file is written: writes never overtake each other.
        let written = tokio::task::spawn_blocking(move || {
            trace::mark("status", "");
            let r = eb::write_status(&root, &body);
            trace::mark("status_done", "");
            r
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("bridge: status not written: {e}"),
            Err(e) => tracing::warn!("bridge: status not written: {e}"),
        }
        *self
            .status_written
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((same, std::time::Instant::now()));
    }
}

/// The stream this pantheon receives on.
fn stream_name(name: &str) -> String {
    format!("PANTHEON_{name}")
}

async fn connect(
    args: &BridgeArgs,
    url: &str,
    shared: Arc<Shared>,
) -> anyhow::Result<async_nats::Client> {
    let mut opts = options(&args.conn, &shared.inbound.name).await?;
    let events = shared.clone();
    opts = opts.event_callback(move |ev| {
        let s = events.clone();
        async move {
            match ev {
                async_nats::Event::Connected => {
                    let n = s.connects.fetch_add(1, Ordering::SeqCst) + 1;
                    tracing::info!("bridge: connected (connection {n})");
                    // An error met before this (re)connect is over: the status says so.
                    s.status.lock().await.last_error = None;
                    s.save_status(Some(true), None).await
                }
                async_nats::Event::Disconnected => {
                    tracing::info!("bridge: disconnected");
                    s.save_status(Some(false), None).await
                }
                other => s.note_error(format!("nats: {other}")).await,
            }
        }
    });
    opts = userinfo_options(opts, url);
    Ok(opts.connect(server_list(url)).await?)
}

/// Connection options from `conn`: reconnects forever with a delay growing to 5 s; credentials by
/// creds file, nkey seed, token or TLS client certificate.
async fn options(args: &Conn, name: &str) -> anyhow::Result<async_nats::ConnectOptions> {
    let mut opts = async_nats::ConnectOptions::new()
        .name(format!("pantheon-bridge {name}"))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        .reconnect_delay_callback(|attempts| {
            let ms = 100u64.saturating_mul(1 << attempts.min(6) as u64);
            Duration::from_millis(ms.min(5_000))
        });
    if let Some(c) = &args.creds {
        opts = opts
            .credentials_file(c)
            .await
            .with_context(|| format!("reading the credentials file {}", c.display()))?;
    }
    if let Some(n) = &args.nkey {
        let seed = std::fs::read_to_string(n)
            .with_context(|| format!("reading the nkey seed file {}", n.display()))?;
        opts = opts.nkey(seed.trim().to_owned());
    }
    let token = match &args.token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("reading the token file {}", f.display()))?
                .trim()
                .to_owned(),
        ),
        None => std::env::var("PANTHEON_NATS_TOKEN").ok(),
    };
    if let Some(t) = token {
        opts = opts.token(t);
    }
    if args.tls {
        opts = opts.require_tls(true);
    }
    if let Some(ca) = &args.tls_ca {
        opts = opts.add_root_certificates(ca.clone());
    }
    if let (Some(c), Some(k)) = (&args.tls_cert, &args.tls_key) {
        opts = opts.add_client_certificate(c.clone(), k.clone());
    }
    Ok(opts)
}

/// The servers of a comma-separated URL list, without any `user:password@` (given to the client as
/// options instead, so the client's own debug logs of the server address hold no secret).
fn server_list(url: &str) -> Vec<String> {
    eb::redact_url(url)
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// `user:password@` (or `token@`) of the first URL that has one, as client options.
fn userinfo_options(opts: async_nats::ConnectOptions, url: &str) -> async_nats::ConnectOptions {
    for u in url.split(',') {
        let rest = u.split_once("://").map_or(u, |(_, r)| r);
        if let Some((info, _)) = rest.rsplit_once('@') {
            return match info.split_once(':') {
                Some((user, pass)) => opts.user_and_password(user.to_owned(), pass.to_owned()),
                None => opts.token(info.to_owned()),
            };
        }
    }
    opts
}

/// `bridge lock --ttl`: a duration as `bus lock --ttl` takes it, in whole seconds.
fn parse_ttl_secs(s: &str) -> Result<u64, crate::engine::Refusal> {
    crate::engine::time::parse_duration_checked("--ttl", s)
        .map(|d| d.as_secs())
        .map_err(|e| e.to_string().into())
}

fn parse_every_secs(s: &str) -> Result<u64, String> {
    let secs = crate::engine::time::parse_duration_checked("--announce-every", s)
        .map(|d| d.as_secs())
        .map_err(|e| e.to_string())?;
    if !(1..=3600).contains(&secs) {
        return Err(format!("--announce-every {s}: must be from 1 s to 1 h"));
    }
    Ok(secs)
}

/// `pantheon bridge lock`: one compare-and-set on the track's lock bucket.
fn run_lock(l: &LockArgs, root: &Root) -> anyhow::Result<crate::outcome::Outcome> {
    let url = l
        .conn
        .nats
        .clone()
        .context("--nats URL is required (or PANTHEON_NATS_URL)")?;
    if !is_valid_name(&l.name) {
        bail!(
            "--name {:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$",
            l.name
        );
    }
    crate::engine::check_free_text("worker", &l.worker)?;
    crate::engine::check_free_text("lock type", &l.lock_type)?;
    if l.ttl == 0 {
        bail!("--ttl must be at least 1 second");
    }
    let req = track::LockRequest {
        pantheon: l.name.clone(),
        track: crate::engine::TrackName::parse(&l.track)?,
        path: l.path.clone(),
        worker: l.worker.clone(),
        ttl: Duration::from_secs(l.ttl),
        lock_type: l.lock_type.clone(),
        token: l.token,
        release: l.release,
        force: l.force,
        replicas: l.replicas,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(async {
        let client = userinfo_options(options(&l.conn, &l.name).await?, &url)
            .connect(server_list(&url))
            .await
            .map_err(|e| anyhow::anyhow!("connecting to {}: {e}", eb::redact_url(&url)))?;
        let js = jetstream::new(client.clone());
        let r = tokio::time::timeout(Duration::from_secs(30), track::lock(&js, root, &req))
            .await
            .map_err(|_| anyhow::anyhow!("no answer from NATS in 30s"))?;
        let _ = tokio::time::timeout(Duration::from_secs(2), client.flush()).await;
        r
    })?;
    Ok(crate::outcome::Outcome::Json(out))
}

async fn serve(
    args: BridgeArgs,
    url: String,
    name: String,
    peers: eb::Peers,
    root: Root,
) -> anyhow::Result<()> {
    // The operator's link key: only the links it signed are honoured (made on first use).
    let link_key = if args.approvals {
        Some(crate::approvals::link_key(&root)?)
    } else {
        None
    };
    let mut subjects = vec![eb::reply_subject(&name)];
    subjects.extend(args.subjects.iter().cloned());
    // The peers as the bridge runs with them (flags, then conductor/config.yaml), for `bridge status`.
    let mut extra = serde_json::Map::new();
    extra.insert(
        "peers".into(),
        serde_json::Value::Array(peers.0.iter().map(|p| p.to_json(&name)).collect()),
    );
    let shared = Arc::new(Shared {
        conductor: Conductor::new(root.clone()),
        root: root.clone(),
        inbound: Inbound {
            name: name.clone(),
            peers,
            subjects: subjects.clone(),
            god: args.god.clone(),
            hold: args.hold_inbound,
        },
        status: Mutex::new(Status {
            name: name.clone(),
            server: eb::redact_url(&url),
            pid: std::process::id(),
            extra,
            ..Default::default()
        }),
        published: AtomicU64::new(0),
        received: AtomicU64::new(0),
        dead: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        tracks: Default::default(),
        connects: AtomicU64::new(0),
        status_written: Default::default(),
        taken: Default::default(),
        peer_pauses: Default::default(),
    });
    shared.save_status(Some(false), None).await;
    let client = connect(&args, &url, shared.clone()).await?;
    let js = jetstream::new(client.clone());

    let stopper = shared.clone();
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        stopper.stop.store(true, Ordering::SeqCst);
    });

    let auth = tokio::spawn(check_auth(
        client.clone(),
        shared.clone(),
        credentials_given(&args.conn, &url),
        args.conn.require_auth,
    ));
    let out = tokio::spawn(publisher::publish_loop(
        js.clone(),
        client.clone(),
        shared.clone(),
        Duration::from_millis(args.poll_ms.max(10)),
        Duration::from_secs(args.give_up_after),
    ));
    let pause_tasks = pauses::spawn(
        &client,
        &shared,
        Duration::from_millis(args.poll_ms.max(10)),
        Duration::from_secs(args.announce_every),
    );
    let inn = tokio::spawn(consume_loop(
        js.clone(),
        shared.clone(),
        subjects,
        args.replicas,
    ));
    let mut track_tasks = spawn_tracks(&args, &js, &shared)?;
    if let Some(key) = link_key {
        track_tasks.push(approvals::spawn(&client, &shared, key));
    }
    while !shared.stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if out.is_finished() || inn.is_finished() || auth.is_finished() {
            break;
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    // Every loop sees the stop within a poll; one that waits on the server is cut off after 5 s.
    let mut tasks = vec![out, inn];
    tasks.extend(pause_tasks);
    tasks.extend(track_tasks);
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        futures_util::future::join_all(tasks),
    )
    .await;
    for a in aborts {
        a.abort();
    }
    signals.abort();
    let _ = tokio::time::timeout(Duration::from_secs(2), client.flush()).await;
    shared.save_status(Some(false), None).await;
    if auth.is_finished()
        && let Ok(Err(e)) = auth.await
    {
        return Err(e);
    }
    Ok(())
}

/// Starts the mirroring of each `--track`.
fn spawn_tracks(
    args: &BridgeArgs,
    js: &jetstream::Context,
    shared: &Arc<Shared>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut track_tasks = Vec::new();
    for t in &args.tracks {
        let name = crate::engine::TrackName::parse(t)?;
        let (tasks, stats) = track::spawn(
            js.clone(),
            shared.clone(),
            name,
            args.replicas,
            Duration::from_millis(args.poll_ms.max(10)),
        )?;
        track_tasks.extend(tasks);
        shared
            .tracks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((t.clone(), stats));
    }
    Ok(track_tasks)
}

/// True when the bridge was given credentials (a token, creds, an nkey, a client certificate, or
/// `user:password@` in the URL).
fn credentials_given(c: &Conn, url: &str) -> bool {
    c.creds.is_some()
        || c.nkey.is_some()
        || c.token_file.is_some()
        || std::env::var_os("PANTHEON_NATS_TOKEN").is_some()
        || c.tls_cert.is_some()
        || url
            .split(',')
            .any(|u| u.split_once("://").map_or(u, |(_, r)| r).contains('@'))
}

/// After every connect: a server that asks for no authentication never checked the credentials the
/// bridge gave it. Warn (status and log); with `--require-auth`, stop the bridge with an error.
async fn check_auth(
    client: async_nats::Client,
    shared: Arc<Shared>,
    credentials: bool,
    require: bool,
) -> anyhow::Result<()> {
    let mut seen = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        let n = shared.connects.load(Ordering::SeqCst);
        if n != seen && client.connection_state() == async_nats::connection::State::Connected {
            seen = n;
            let info = client.server_info();
            if !info.auth_required && (credentials || require) {
                let text = format!(
                    "the server {} asks for no authentication: {}",
                    eb::redact_url(&format!("{}:{}", info.host, info.port)),
                    if require {
                        "refused (--require-auth)"
                    } else {
                        "the credentials given are not checked by it, and anyone who reaches it can publish (run with --require-auth to refuse such a server)"
                    }
                );
                shared.note_error(&text).await;
                if require {
                    shared.save_status(None, None).await;
                    shared.stop.store(true, Ordering::SeqCst);
                    bail!("{text}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates the stream and durable consumer, then takes messages until stopped; a broken session
/// is started again after a pause that grows to 5 s.
async fn consume_loop(
    js: jetstream::Context,
    shared: Arc<Shared>,
    subjects: Vec<String>,
    replicas: usize,
) {
    let mut pause = Duration::from_millis(100);
    while !shared.stop.load(Ordering::SeqCst) {
        match consume_session(&js, &shared, &subjects, replicas).await {
            Ok(()) => pause = Duration::from_millis(100),
            Err(e) => {
                shared.note_error(format!("consumer: {e:#}")).await;
                shared.save_status(None, None).await;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn consume_session(
    js: &jetstream::Context,
    shared: &Arc<Shared>,
    subjects: &[String],
    replicas: usize,
) -> anyhow::Result<()> {
    let name = &shared.inbound.name;
    let stream = js
        .get_or_create_stream(stream::Config {
            name: stream_name(name),
            subjects: subjects.to_vec(),
            storage: stream::StorageType::File,
            num_replicas: replicas,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .context("creating the stream")?;
    let consumer = stream
        .get_or_create_consumer(
            "bridge",
            pull::Config {
                durable_name: Some("bridge".into()),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                max_deliver: MAX_DELIVER,
                num_replicas: replicas,
                ..Default::default()
            },
        )
        .await
        .context("creating the consumer")?;
    let mut messages = consumer
        .stream()
        .heartbeat(Duration::from_secs(2))
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .context("starting the consumer")?;
    shared.save_status(Some(true), None).await;
    while !shared.stop.load(Ordering::SeqCst) {
        let next = tokio::time::timeout(Duration::from_millis(250), messages.next()).await;
        let msg = match next {
            Err(_) => continue,
            Ok(None) => bail!("the consumer's message stream ended"),
            Ok(Some(Err(e))) => bail!("{e}"),
            Ok(Some(Ok(m))) => m,
        };
        let (seq, delivered, pending) = match msg.info() {
            Ok(i) => (i.stream_sequence, i.delivered, i.pending),
            Err(e) => bail!("message without JetStream info: {e}"),
        };
        let subj = msg.subject.to_string();
        let data = msg.payload.to_vec();
        let traceparent = msg
            .headers
            .as_ref()
            .and_then(|h| h.get("traceparent"))
            .map(|v| v.as_str().to_owned());
        let verdict = take_one(shared, &subj, &data, traceparent);
        match verdict {
            Ok(()) => {
                shared.received.fetch_add(1, Ordering::Relaxed);
                msg.double_ack()
                    .await
                    .map_err(|e| anyhow::anyhow!("ack: {e}"))?;
            }
            Err(Verdict::Dead(reason)) => {
                dead(shared, seq, &subj, &reason, &data).await;
                msg.ack_with(AckKind::Term)
                    .await
                    .map_err(|e| anyhow::anyhow!("term: {e}"))?;
            }
            Err(Verdict::Retry(reason)) if delivered >= MAX_DELIVER => {
                dead(
                    shared,
                    seq,
                    &subj,
                    &format!("gave up after {delivered} deliveries: {reason}"),
                    &data,
                )
                .await;
                msg.ack_with(AckKind::Term)
                    .await
                    .map_err(|e| anyhow::anyhow!("term: {e}"))?;
            }
            Err(Verdict::Retry(reason)) => {
                shared
                    .note_error(format!("message {seq} on {subj} will be retried: {reason}"))
                    .await;
                msg.ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await
                    .map_err(|e| anyhow::anyhow!("nak: {e}"))?;
            }
        }
        shared.save_status(Some(true), Some(pending)).await;
    }
    Ok(())
}

enum Verdict {
    /// Never worth retrying: dead-letter it.
    Dead(String),
    /// A local failure (a lock, the disk): the server redelivers it.
    Retry(String),
}

/// Takes one message; `traceparent` is the message's header of that name, used when the body (the
/// origin's envelope) carries none.
fn take_one(
    shared: &Shared,
    subj: &str,
    data: &[u8],
    traceparent: Option<String>,
) -> Result<(), Verdict> {
    let mut w =
        eb::parse_message(data, &shared.inbound).map_err(|e| Verdict::Dead(e.to_string()))?;
    if w.traceparent.is_none() {
        w.traceparent = traceparent;
    }
    eb::admit(&shared.inbound, subj, &w).map_err(|e| Verdict::Dead(e.to_string()))?;
    match eb::take(&shared.conductor, &shared.inbound, subj, &w) {
        Ok(taken) => {
            if matches!(taken, eb::Taken::Request { .. }) {
                shared
                    .taken
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(w.id.clone());
            }
            Ok(())
        }
        Err(
            e @ (EngineError::Refused(_)
            | EngineError::NotFound(_)
            | EngineError::Invalid { .. }
            | EngineError::InvalidName { .. }),
        ) => Err(Verdict::Dead(e.to_string())),
        Err(e) => Err(Verdict::Retry(e.to_string())),
    }
}

async fn dead(shared: &Shared, seq: u64, subj: &str, reason: &str, data: &[u8]) {
    shared.dead.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("bridge: dead-lettered message {seq} on {subj}: {reason}");
    if let Err(e) = eb::dead_letter(&shared.root, seq, subj, reason, data) {
        shared
            .note_error(format!("dead letter {seq} not kept: {e}"))
            .await;
    }
}
