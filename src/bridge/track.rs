//! Shared tracks over JetStream (docs/NATS.md): per `--track T`, the bridge publishes the lines
//! written on this machine to the track's stream, appends the other machines' lines to the local
//! queue exactly once, mirrors the track's KV lock bucket into `locks.json` and exchanges heartbeats
//! through the track's KV worker bucket. Every decision is the engine's (`bridge::track`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, kv, stream};
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{Shared, strangers, trace};
use crate::engine::{
    Bus, MessageType, TrackName,
    nats::track::{self as et, KvEntry, LockStep, Mirror, SharedLock, TrackCursor},
};

/// Publishes in flight before the oldest one's acknowledgement is awaited.
const PUBLISH_WINDOW: usize = 2048;
/// Messages appended to the local queue in one write.
const APPLY_BATCH: usize = 1024;

/// Counters of one shared track, for `bridge status`.
#[derive(Debug, Default)]
pub(super) struct TrackStats {
    pub published: AtomicU64,
    pub mirrored: AtomicU64,
    pub stream_seq: AtomicU64,
    pub lag: AtomicU64,
}

impl TrackStats {
    /// The counts the status file shows (`tracks.T`).
    pub(super) fn counts(&self) -> crate::engine::nats::TrackCounts {
        crate::engine::nats::TrackCounts {
            published: self.published.load(Ordering::Relaxed),
            mirrored: self.mirrored.load(Ordering::Relaxed),
            stream_seq: self.stream_seq.load(Ordering::Relaxed),
            lag: self.lag.load(Ordering::Relaxed),
        }
    }
}

pub(super) struct Track {
    pub(super) shared: Arc<Shared>,
    pub(super) track: TrackName,
    bus: Bus,
    cursor: std::sync::Mutex<TrackCursor>,
    /// The cursor changed since it was last written.
    dirty: std::sync::atomic::AtomicBool,
    /// Held while the cursor is written.
    disk: std::sync::Mutex<()>,
    stats: Arc<TrackStats>,
    wake: Arc<Notify>,
    replicas: usize,
    poll: Duration,
}

/// How often the cursor file is written while lines flow (by [`cursor_loop`]). A crash loses at most
/// this much of the cursor: the lines after it are read again and skipped by id (and deduplicated by
/// the server).
const CURSOR_EVERY: Duration = Duration::from_millis(250);

impl Track {
    /// Updates the cursor in memory; [`cursor_loop`] writes it to disk at most every
    /// [`CURSOR_EVERY`], off the path of the lines (see [`Track::flush`]).
    fn save_cursor(&self, f: impl FnOnce(&mut TrackCursor)) -> anyhow::Result<()> {
        let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut c);
        self.dirty.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Writes the cursor if it changed since it was last written: first the local queue is synced
    /// to disk, so a cursor on disk never counts a mirrored line a power loss could take from the
    /// queue (such a line would never be read from the stream again), then the cursor is replaced
    /// atomically. Blocking: called from [`cursor_loop`] on a blocking thread and when a loop ends.
    fn flush(&self) -> anyhow::Result<()> {
        // One writer at a time, so a write never replaces a newer cursor with an older one.
        let _disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let c = self
            .cursor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        trace::mark("cursor", "");
        let done = et::sync_queue(&self.bus)
            .and_then(|()| et::write_cursor(&self.shared.root, &self.track, &c));
        trace::mark("cursor_done", "");
        if done.is_err() {
            self.dirty.store(true, Ordering::SeqCst);
        }
        Ok(done?)
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }
}

/// Starts the tasks of one shared track; they end when the bridge stops.
pub(super) fn spawn(
    js: jetstream::Context,
    shared: Arc<Shared>,
    track: TrackName,
    replicas: usize,
    poll: Duration,
) -> anyhow::Result<(Vec<tokio::task::JoinHandle<()>>, Arc<TrackStats>)> {
    let bus = Bus::open(&shared.root, &track);
    bus.init()?;
    let cursor = et::read_cursor(&shared.root, &track)?;
    let stats = Arc::new(TrackStats::default());
    stats.stream_seq.store(cursor.stream_seq, Ordering::Relaxed);
    let wake = Arc::new(Notify::new());
    let t = Arc::new(Track {
        shared,
        bus,
        track,
        cursor: std::sync::Mutex::new(cursor),
        dirty: Default::default(),
        disk: Default::default(),
        stats: stats.clone(),
        wake,
        replicas,
        poll,
    });
    let tasks = vec![
        tokio::spawn(publish_loop(js.clone(), t.clone())),
        tokio::spawn(cursor_loop(t.clone())),
        tokio::spawn(retrying("consumer", t.clone(), js.clone(), consume_session)),
        tokio::spawn(retrying("locks", t.clone(), js.clone(), locks_session)),
        tokio::spawn(retrying(
            "heartbeats",
            t.clone(),
            js.clone(),
            workers_session,
        )),
    ];
    Ok((tasks, stats))
}

/// The longest pause between two tries after an error. Short, because the usual error on a
/// cluster is a leader election (no stream answers for a few seconds): a long pause would add up to
/// itself to every failover.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Runs `session` again after an error, with a pause that grows to [`MAX_PAUSE`].
async fn retrying<F, Fut>(what: &'static str, t: Arc<Track>, js: jetstream::Context, session: F)
where
    F: Fn(Arc<Track>, jetstream::Context) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut pause = Duration::from_millis(100);
    while !t.stopped() {
        match session(t.clone(), js.clone()).await {
            Ok(()) => pause = Duration::from_millis(100),
            Err(e) => {
                t.shared
                    .note_error(format!("track {} {what}: {e:#}", t.track))
                    .await;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

async fn ensure_stream(t: &Track, js: &jetstream::Context) -> anyhow::Result<stream::Stream> {
    js.get_or_create_stream(stream::Config {
        name: et::stream_name(&t.track),
        subjects: vec![et::filter(&t.track)],
        storage: stream::StorageType::File,
        num_replicas: t.replicas,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await
    .with_context(|| format!("creating the stream {}", et::stream_name(&t.track)))
}

/// The KV bucket `bucket`, created when missing.
pub(super) async fn ensure_bucket(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    if let Ok(s) = js.get_key_value(bucket).await {
        return Ok(s);
    }
    // The bucket's stream is made here, in the layout KV clients expect, rather than through
    // `create_key_value`, whose reply parsing fails against nats-server 2.9.
    let made = js
        .create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            discard: stream::DiscardPolicy::New,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            storage: stream::StorageType::File,
            num_replicas: replicas,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await;
    match js.get_key_value(bucket).await {
        Ok(s) => Ok(s),
        Err(e) => Err(anyhow::anyhow!(
            "creating the KV bucket {bucket}: {e}{}",
            made.err().map(|m| format!(" ({m})")).unwrap_or_default()
        )),
    }
}

/// Publishes the lines written on this machine, oldest first, each with `Nats-Msg-Id` = its id; the
/// cursor moves past a line only once the server stored it.
async fn publish_loop(js: jetstream::Context, t: Arc<Track>) {
    // Wake on a change of the queue (a write, a new or moved file, or a lost event); poll as a
    // fallback. Other files of the bus directory (locks, heartbeats, their temporary files) and
    // opens (this loop's own reads) wake nothing.
    let wake = t.wake.clone();
    let queue_name = t.bus.queue_path().file_name().map(|n| n.to_owned());
    let watcher = {
        use notify::Watcher;
        use notify::event::{AccessKind, EventKind};
        let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let wanted = match &res {
                Ok(ev) => {
                    ev.need_rescan()
                        || ev.paths.is_empty()
                        || (!matches!(
                            ev.kind,
                            EventKind::Access(AccessKind::Open(_) | AccessKind::Read)
                        ) && ev
                            .paths
                            .iter()
                            .any(|p| p.file_name() == queue_name.as_deref()))
                }
                Err(_) => true,
            };
            if wanted {
                trace::mark("wake", "");
                wake.notify_one();
            }
        })
        .ok();
        if let Some(w) = &mut w {
            let _ = w.watch(&t.bus.dir, notify::RecursiveMode::NonRecursive);
        }
        w
    };
    let mut stream_ready = false;
    let mut pause = t.poll;
    let subject = et::subject(&t.track, &t.shared.inbound.name);
    let mut p = Publisher::from_cursor(&t);
    while !t.stopped() {
        if !stream_ready {
            match ensure_stream(&t, &js).await {
                Ok(_) => stream_ready = true,
                Err(e) => {
                    t.shared
                        .note_error(format!("track {}: {e:#}", t.track))
                        .await;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    continue;
                }
            }
        }
        let mut done = publish_new(&js, &t, &subject, &mut p).await;
        if let Ok(false) = done {
            // Nothing new: wait for a change of the queue, the oldest acknowledgement, or the poll.
            let acked = match p.in_flight.front_mut().and_then(|e| e.ack.as_mut()) {
                Some(ack) => tokio::select! {
                    r = ack => Some(r),
                    _ = t.wake.notified() => None,
                    _ = tokio::time::sleep(pause) => None,
                },
                None => {
                    let _ = tokio::time::timeout(pause, t.wake.notified()).await;
                    None
                }
            };
            if let Some(r) = acked {
                done = settle_front(&t, &mut p, Some(r)).map(|()| false);
            }
        }
        match done {
            Ok(_) => pause = t.poll,
            Err(e) => {
                t.shared
                    .note_error(format!("track {} publish: {e:#}", t.track))
                    .await;
                p.rewind(&t);
                pause = (pause * 2).min(MAX_PAUSE);
                tokio::time::sleep(pause).await;
            }
        }
    }
    drop(watcher);
    // The publishes still in flight get a moment; any not acknowledged are published again by the
    // next run (the server drops the repeats by id).
    let _ = tokio::time::timeout(Duration::from_secs(2), settle_all(&t, &mut p)).await;
    flush_cursor(&t).await;
}

/// A publish acknowledgement awaited: the client's own future, bounded by the JetStream context's
/// timeout (5 s, an error `timed out` past it). Wrapping it in a second timer cost an allocation and
/// a clock read per line and bounded nothing more.
type AckFuture = <jetstream::context::PublishAckFuture as std::future::IntoFuture>::IntoFuture;

/// One step of the publisher's cursor still waiting: a published line's acknowledgement, or (no
/// acknowledgement) lines passed over (mirrored or not envelopes), which wait only for those before.
struct InFlight {
    ack: Option<AckFuture>,
    /// The queue offset the cursor moves to once this and every earlier step is done.
    end: u64,
    id: String,
}

/// The publisher's reading position, which runs ahead of the cursor by the publishes in flight: a
/// line is read and published while earlier ones still wait for their acknowledgement, and the
/// cursor follows the acknowledgements in order, so it never passes a line the server has not stored.
struct Publisher {
    offset: u64,
    identity: Option<[u64; 2]>,
    in_flight: std::collections::VecDeque<InFlight>,
}

impl Publisher {
    fn from_cursor(t: &Track) -> Self {
        let mut p = Self {
            offset: 0,
            identity: None,
            in_flight: Default::default(),
        };
        p.rewind(t);
        p
    }

    /// Back to the cursor (after an error): what was in flight is read and published again.
    fn rewind(&mut self, t: &Track) {
        self.in_flight.clear();
        let c = t.cursor.lock().unwrap_or_else(|e| e.into_inner());
        self.offset = c.published_offset;
        self.identity = c.queue_identity;
    }
}

/// Settles the oldest step in flight with its acknowledgement `r` (awaited when `None`): the cursor
/// moves past it. An error leaves the cursor where it was.
fn settle_front(
    t: &Track,
    p: &mut Publisher,
    r: Option<<AckFuture as std::future::Future>::Output>,
) -> anyhow::Result<()> {
    let Some(step) = p.in_flight.pop_front() else {
        return Ok(());
    };
    if let Some(r) = r {
        let ack = r.with_context(|| format!("publishing {}", step.id))?;
        trace::mark("acked", &step.id);
        t.stats
            .published
            .fetch_add(u64::from(!ack.duplicate), Ordering::Relaxed);
    }
    t.save_cursor(|c| c.published_offset = step.end)
}

/// Settles the steps whose acknowledgement is in, oldest first, without waiting.
fn settle_ready(t: &Track, p: &mut Publisher) -> anyhow::Result<()> {
    while let Some(front) = p.in_flight.front_mut() {
        let r = match &mut front.ack {
            None => None,
            Some(ack) => match ack.now_or_never() {
                Some(r) => Some(r),
                None => return Ok(()),
            },
        };
        settle_front(t, p, r)?;
    }
    Ok(())
}

/// Awaits the oldest step in flight and settles it.
async fn settle_one(t: &Track, p: &mut Publisher) -> anyhow::Result<()> {
    let r = match p.in_flight.front_mut().and_then(|e| e.ack.as_mut()) {
        Some(ack) => Some(ack.await),
        None => None,
    };
    settle_front(t, p, r)
}

/// Awaits every step in flight.
async fn settle_all(t: &Track, p: &mut Publisher) -> anyhow::Result<()> {
    while !p.in_flight.is_empty() {
        settle_one(t, p).await?;
    }
    Ok(())
}

/// Writes the cursor every [`CURSOR_EVERY`] while it changes, on a blocking thread: the loops that
/// move lines never wait for the disk.
async fn cursor_loop(t: Arc<Track>) {
    while !t.stopped() {
        tokio::time::sleep(CURSOR_EVERY).await;
        if t.dirty.load(Ordering::SeqCst) {
            flush_cursor(&t).await;
        }
    }
}

/// Writes the cursor on a blocking thread (every [`CURSOR_EVERY`], and last when a loop ends: the
/// bridge stops or the consumer is made again); an error goes to the bridge status.
async fn flush_cursor(t: &Arc<Track>) {
    let w = t.clone();
    let done = tokio::task::spawn_blocking(move || w.flush())
        .await
        .map_err(anyhow::Error::from)
        .and_then(|r| r);
    if let Err(e) = done {
        t.shared
            .note_error(format!("track {} cursor: {e:#}", t.track))
            .await;
    }
}

/// Publishes what was appended since the publisher's position, leaving the acknowledgements in
/// flight (at most [`PUBLISH_WINDOW`]); true when something was read.
async fn publish_new(
    js: &jetstream::Context,
    t: &Track,
    subject: &str,
    p: &mut Publisher,
) -> anyhow::Result<bool> {
    settle_ready(t, p)?;
    let queue = t.bus.queue_path();
    let now_ident = et::identity(&queue);
    let len = std::fs::metadata(&queue).map(|m| m.len()).unwrap_or(0);
    if now_ident != p.identity || len < p.offset {
        // The queue was archived or replaced: the old file's publishes are settled, then the new
        // file is read from the start.
        settle_all(t, p).await?;
        p.offset = 0;
        p.identity = now_ident;
        t.save_cursor(|c| {
            c.published_offset = 0;
            c.queue_identity = now_ident;
        })?;
    }
    let offset = p.offset;
    if len == offset {
        return Ok(false);
    }
    // A few lines (the usual case: one post) are read in place; a backlog on a blocking thread.
    let (lines, next) = if len - offset <= 64 * 1024 {
        et::read_own_from(&queue, offset)?
    } else {
        tokio::task::spawn_blocking(move || et::read_own_from(&queue, offset))
            .await
            .context("reading the queue")??
    };
    if trace::on() {
        for l in &lines {
            trace::mark("read", &l.id);
        }
    }
    let mut last = offset;
    // One subject for every line (shared, not copied per publish).
    let subject = async_nats::Subject::from(subject);
    for l in lines {
        while p.in_flight.len() >= PUBLISH_WINDOW {
            settle_one(t, p).await?;
        }
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", l.id.as_str());
        let ack = js
            .publish_with_headers(subject.clone(), headers, l.bytes.into())
            .await
            .with_context(|| format!("publishing {}", l.id))?;
        trace::mark("sent", &l.id);
        last = l.end;
        p.in_flight.push_back(InFlight {
            ack: Some(std::future::IntoFuture::into_future(ack)),
            end: l.end,
            id: l.id,
        });
    }
    // Lines after the last own line (mirrored ones, skipped ones) are passed over too, once the
    // publishes before them are acknowledged.
    if next > last {
        p.in_flight.push_back(InFlight {
            ack: None,
            end: next,
            id: String::new(),
        });
    }
    p.offset = next;
    settle_ready(t, p)?;
    Ok(next > offset)
}

/// How long the stream may hold a message past the cursor, with nothing arriving, before the
/// consumer is taken for stalled and made again from the cursor.
const STALL_AFTER: Duration = Duration::from_secs(2);
/// How often an idle consumer compares the stream's last sequence with the cursor.
const STALL_CHECK: Duration = Duration::from_secs(1);

/// Reads the track's stream from the cursor with an ordered consumer and appends the other machines'
/// lines to the local queue, each id once.
///
/// An ordered consumer acknowledges nothing: a message the server pushed while this client was
/// reconnecting to another node is gone, and the client notices the gap only when a later message
/// arrives. When no later message comes (the other side wrote its last lines during the failover),
/// the consumer waits forever while the stream holds lines past the cursor. So the session ends,
/// and the retrying loop makes a new consumer from the cursor, (a) after every reconnect and (b)
/// when the stream's last sequence stays past the cursor for [`STALL_AFTER`] with nothing arriving.
/// Lines delivered twice that way are skipped by stream sequence and by id.
async fn consume_session(t: Arc<Track>, js: jetstream::Context) -> anyhow::Result<()> {
    let connection = t.shared.connects.load(Ordering::SeqCst);
    let stream = ensure_stream(&t, &js).await?;
    let bus = t.bus.clone();
    let mut mirror = tokio::task::spawn_blocking(move || Mirror::open(bus)).await??;
    let mut applied = t
        .cursor
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .stream_seq;
    let reads = strangers::peer_subjects(&t, &js.client().server_info().version);
    let consumer = stream
        .create_consumer(strangers::consumer_config(
            &reads,
            &t,
            applied.saturating_add(1),
        ))
        .await
        .context("creating the ordered consumer")?;
    let mut sweep = strangers::Sweep::default();
    let mut messages = consumer.messages().await.context("starting the consumer")?;
    tracing::debug!("bridge: track {} consumer from {}", t.track, applied + 1);
    let me = t.shared.inbound.name.clone();
    let mut last_check = tokio::time::Instant::now();
    let mut behind_since: Option<tokio::time::Instant> = None;
    let mut batch: Vec<jetstream::Message> = Vec::with_capacity(APPLY_BATCH);
    while !t.stopped() {
        let first = match tokio::time::timeout(Duration::from_millis(250), messages.next()).await {
            Err(_) => {
                if t.shared.connects.load(Ordering::SeqCst) != connection {
                    tracing::info!(
                        "bridge: track {} reconnected: consumer made again from {}",
                        t.track,
                        applied + 1
                    );
                    return Ok(());
                }
                if last_check.elapsed() >= STALL_CHECK {
                    last_check = tokio::time::Instant::now();
                    if let Some(read) = &reads {
                        sweep.run(&t, &stream, read).await;
                    }
                    if stalled(&t, &stream, &reads, applied, &mut behind_since).await {
                        return Ok(());
                    }
                }
                continue;
            }
            Ok(None) => anyhow::bail!("the consumer's message stream ended"),
            Ok(Some(m)) => m.map_err(|e| anyhow::anyhow!("{e}"))?,
        };
        behind_since = None;
        // One vector for every batch (its messages are dropped at the end of the turn).
        batch.clear();
        batch.push(first);
        while batch.len() < APPLY_BATCH {
            match messages.next().now_or_never() {
                Some(Some(Ok(m))) => batch.push(m),
                Some(Some(Err(e))) => anyhow::bail!("{e}"),
                Some(None) => break,
                None => break,
            }
        }
        applied = apply_batch(&t, &mut mirror, &batch, applied, &me).await?;
    }
    flush_cursor(&t).await;
    Ok(())
}

/// Appends a batch of the stream's messages to the local queue (the other machines' lines, each id
/// once; lines of peers not allowed and lines refused are dead-lettered) and moves the cursor past
/// it. Returns the last stream sequence applied.
async fn apply_batch(
    t: &Track,
    mirror: &mut Mirror,
    batch: &[jetstream::Message],
    applied: u64,
    me: &str,
) -> anyhow::Result<u64> {
    let msg_id = |m: &jetstream::Message| {
        m.headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default()
    };
    if trace::on() {
        for m in batch {
            trace::mark("recv", &msg_id(m));
        }
    }
    let mut last_seq = applied;
    let mut lag = 0;
    let mut items = Vec::new();
    let mut seqs = Vec::new();
    for m in batch {
        let info = m.info().map_err(|e| anyhow::anyhow!("{e}"))?;
        lag = info.pending;
        if info.stream_sequence <= applied {
            // Delivered again (a consumer made again from an older sequence): already applied.
            continue;
        }
        last_seq = info.stream_sequence;
        match et::sender_of(&m.subject) {
            Some(from) if from == me => {}
            Some(from) if !t.shared.inbound.peers.allows(from) => {
                let reason = format!(
                    "pantheon {from:?} is not an allowed peer (--peer): its line is not appended"
                );
                dead(t, info.stream_sequence, &m.subject, &reason, &m.payload).await;
            }
            Some(from) => {
                items.push((from, &m.payload[..]));
                seqs.push(info.stream_sequence);
            }
            None => {
                let reason = format!("subject {} names no pantheon", m.subject);
                dead(t, info.stream_sequence, &m.subject, &reason, &m.payload).await;
            }
        }
    }
    let (n, refused) = mirror.apply(&items)?;
    if trace::on() {
        for m in batch {
            trace::mark("applied", &msg_id(m));
        }
    }
    for (i, reason) in refused {
        let subj = et::subject(&t.track, items[i].0);
        dead(t, seqs[i], &subj, &reason, items[i].1).await;
    }
    t.save_cursor(|c| c.stream_seq = last_seq)?;
    t.stats.mirrored.fetch_add(n as u64, Ordering::Relaxed);
    t.stats.stream_seq.store(last_seq, Ordering::Relaxed);
    t.stats.lag.store(lag, Ordering::Relaxed);
    Ok(last_seq)
}

/// Whether the consumer is stalled (asked every [`STALL_CHECK`]): the last line it would be handed
/// has stayed past `applied` for [`STALL_AFTER`] with nothing arriving.
async fn stalled(
    t: &Track,
    stream: &stream::Stream,
    reads: &Option<Vec<String>>,
    applied: u64,
    behind_since: &mut Option<tokio::time::Instant>,
) -> bool {
    let last = tokio::time::timeout(STALL_CHECK, strangers::last_for_consumer(stream, reads))
        .await
        .ok()
        .flatten();
    match last {
        Some(last) if last > applied => {
            let since = *behind_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= STALL_AFTER {
                tracing::warn!(
                    "bridge: track {} consumer stalled at {applied} (its last line at {last}): made again",
                    t.track
                );
                return true;
            }
        }
        Some(_) => *behind_since = None,
        None => {}
    }
    false
}

pub(super) async fn dead(t: &Track, seq: u64, subj: &str, reason: &str, data: &[u8]) {
    t.shared.dead.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("bridge: dead-lettered track message {seq} on {subj}: {reason}");
    let path = crate::engine::nats::dead_dir(&t.shared.root)
        .join(format!("track_{}_{seq:012}.json", t.track));
    let keep = &data[..data.len().min(64 * 1024)];
    let body = json!({
        "stream": et::stream_name(&t.track), "stream_seq": seq, "subject": subj, "reason": reason,
        "dead_at": crate::engine::time::now_ts(), "data": String::from_utf8_lossy(keep),
        "truncated": keep.len() < data.len(),
    });
    if let Err(e) = crate::engine::nats::write_bridge_record(&t.shared.root, &path, &body) {
        t.shared
            .note_error(format!("dead letter {seq} not kept: {e}"))
            .await;
    }
}

/// Mirrors the track's lock bucket into `locks.json`.
async fn locks_session(t: Arc<Track>, js: jetstream::Context) -> anyhow::Result<()> {
    let store = ensure_bucket(&js, &et::locks_bucket(&t.track), t.replicas).await?;
    let mut watch = store
        .watch_all()
        .await
        .context("watching the lock bucket")?;
    let mut locks: BTreeMap<String, (SharedLock, u64)> = BTreeMap::new();
    // The watch starts with every current value; mirror once they are in, then on every change.
    let mut dirty = true;
    while !t.stopped() {
        let next = tokio::time::timeout(Duration::from_millis(250), watch.next()).await;
        match next {
            Err(_) => {}
            Ok(None) => anyhow::bail!("the lock watch ended"),
            Ok(Some(e)) => {
                let e = e.map_err(|e| anyhow::anyhow!("{e}"))?;
                if let Some(path) = et::decode_kv_key(&e.key) {
                    let parsed = SharedLock::parse(&e.value).filter(|l| {
                        let ok = l.pantheon == t.shared.inbound.name
                            || t.shared.inbound.peers.allows(&l.pantheon);
                        if !ok {
                            tracing::warn!(
                                "bridge: track {} lock {path:?} held by pantheon {:?}, not an allowed peer: not mirrored",
                                t.track,
                                l.pantheon
                            );
                        }
                        ok
                    });
                    match (e.operation, parsed) {
                        (kv::Operation::Put, Some(l)) => {
                            locks.insert(path, (l, e.revision));
                        }
                        _ => {
                            locks.remove(&path);
                        }
                    }
                    dirty = true;
                }
                if e.delta > 0 {
                    continue;
                }
            }
        }
        if dirty {
            let bus = t.bus.clone();
            let snapshot = locks.clone();
            tokio::task::spawn_blocking(move || et::mirror_locks(&bus, &snapshot)).await??;
            dirty = false;
        }
    }
    Ok(())
}

/// Publishes this machine's heartbeats to the track's worker bucket and mirrors the other machines'
/// into `worker-status.json` (as `worker@pantheon`).
async fn workers_session(t: Arc<Track>, js: jetstream::Context) -> anyhow::Result<()> {
    let store = ensure_bucket(&js, &et::workers_bucket(&t.track), t.replicas).await?;
    let me = t.shared.inbound.name.clone();
    let mut watch = store
        .watch_all()
        .await
        .context("watching the worker bucket")?;
    let mut remote: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut sent: BTreeMap<String, Value> = BTreeMap::new();
    let mut dirty = true;
    let mut last_scan = tokio::time::Instant::now() - t.poll;
    while !t.stopped() {
        if last_scan.elapsed() >= t.poll {
            last_scan = tokio::time::Instant::now();
            let bus = t.bus.clone();
            let local = tokio::task::spawn_blocking(move || et::local_workers(&bus)).await??;
            for (w, v) in &local {
                if sent.get(w) != Some(v) {
                    let mut body = v.clone();
                    body["pantheon"] = json!(me);
                    store
                        .put(et::worker_key(&me, w), serde_json::to_vec(&body)?.into())
                        .await
                        .context("publishing a heartbeat")?;
                    sent.insert(w.clone(), v.clone());
                }
            }
        }
        match tokio::time::timeout(t.poll, watch.next()).await {
            Err(_) => {}
            Ok(None) => anyhow::bail!("the worker watch ended"),
            Ok(Some(e)) => {
                let e = e.map_err(|e| anyhow::anyhow!("{e}"))?;
                if let Some((p, w)) = e.key.split_once('.')
                    && p != me
                    && crate::engine::is_valid_name(p)
                    && t.shared.inbound.peers.allows(p)
                    && let Some(worker) = et::decode_kv_key(w)
                {
                    let value: Option<Value> = (e.operation == kv::Operation::Put
                        && e.value.len() <= 64 * 1024)
                        .then(|| serde_json::from_slice(&e.value).ok())
                        .flatten()
                        .filter(Value::is_object);
                    match value {
                        Some(mut v) => {
                            if let Some(m) = v.as_object_mut() {
                                m.remove("pantheon");
                            }
                            remote.insert((p.to_owned(), worker), v);
                        }
                        None => {
                            remote.remove(&(p.to_owned(), worker));
                        }
                    }
                    dirty = true;
                }
                if e.delta > 0 {
                    continue;
                }
            }
        }
        if dirty {
            let bus = t.bus.clone();
            let snapshot = remote.clone();
            tokio::task::spawn_blocking(move || et::mirror_workers(&bus, &snapshot)).await??;
            dirty = false;
        }
    }
    Ok(())
}

/// The current entry of a lock key, if any (deleted entries count: their revision is needed to
/// replace them).
async fn lock_entry(store: &kv::Store, key: &str) -> anyhow::Result<Option<KvEntry>> {
    Ok(store.entry(key).await?.map(|e| KvEntry {
        lock: (e.operation == kv::Operation::Put)
            .then(|| SharedLock::parse(&e.value))
            .flatten(),
        revision: e.revision,
    }))
}

/// What `pantheon bridge lock` asks.
pub(super) struct LockRequest {
    pub pantheon: String,
    pub track: TrackName,
    pub path: String,
    pub worker: String,
    pub ttl: Duration,
    pub lock_type: String,
    pub token: Option<u64>,
    pub release: bool,
    pub force: bool,
    pub replicas: usize,
}

/// Takes, renews or releases a lock of a shared track by compare-and-set on the KV revision, then
/// mirrors the bucket into the local `locks.json` and posts FILE_LOCK / FILE_UNLOCK on the track.
pub(super) async fn lock(
    js: &jetstream::Context,
    root: &crate::engine::Root,
    r: &LockRequest,
) -> anyhow::Result<Value> {
    let key_path = crate::engine::normalize_lock_key(&r.path)?;
    let bus = Bus::open_existing(root, &r.track)?;
    let store = ensure_bucket(js, &et::locks_bucket(&r.track), r.replicas).await?;
    let key = et::encode_kv_key(&key_path);
    let current = lock_entry(&store, &key).await?;
    let now = chrono::Utc::now();
    let out = if r.release {
        let rev = et::plan_release(
            &key_path,
            current.as_ref(),
            &r.worker,
            &r.pantheon,
            r.token,
            r.force,
        )?;
        store
            .delete_expect_revision(&key, Some(rev))
            .await
            .map_err(|e| {
                anyhow::anyhow!("{key_path} changed while releasing it (token {rev}): {e}")
            })?;
        bus.post(
            MessageType::FileUnlock,
            &r.worker,
            json!({"filepath": key_path, "pantheon": r.pantheon}),
        )?;
        json!({"filepath": key_path, "released": true, "fencing_token": rev})
    } else {
        let step = et::plan_acquire(
            &key_path,
            current.as_ref(),
            &r.worker,
            &r.pantheon,
            r.token,
            now,
        )?;
        let value = et::new_lock(&key_path, &r.worker, &r.pantheon, &r.lock_type, r.ttl, now)?;
        let body = serde_json::to_vec(&value)?;
        let (rev, previous, renewed) = match &step {
            LockStep::Create => (
                store.create(&key, body.into()).await.map_err(|e| {
                    anyhow::Error::new(crate::engine::Error::refused(format!(
                        "{key_path} was taken by another worker in between: {e}"
                    )))
                })?,
                None,
                false,
            ),
            LockStep::Replace { revision, previous } => (
                store
                    .update(&key, body.into(), *revision)
                    .await
                    .map_err(|e| {
                        anyhow::Error::new(crate::engine::Error::refused(format!(
                            "{key_path} changed in between (expected token {revision}): {e}"
                        )))
                    })?,
                previous.clone(),
                current
                    .as_ref()
                    .and_then(|c| c.lock.as_ref())
                    .is_some_and(|l| l.worker_id == r.worker && l.pantheon == r.pantheon),
            ),
        };
        bus.post(
            MessageType::FileLock,
            &r.worker,
            json!({"filepath": key_path, "lock_type": r.lock_type, "expires_at": value.expires_at,
                   "pantheon": r.pantheon, "fencing_token": rev}),
        )?;
        json!({
            "filepath": key_path, "worker_id": r.worker, "pantheon": r.pantheon,
            "fencing_token": rev, "acquired_at": value.acquired_at, "expires_at": value.expires_at,
            "renewed": renewed, "previous_holder": previous,
        })
    };
    // Local readers see the change at once (the running bridge keeps the mirror current afterwards).
    let mut all = BTreeMap::new();
    let mut keys = store.keys().await?;
    while let Some(k) = keys.next().await {
        let k = k?;
        if let (
            Some(p),
            Some(KvEntry {
                lock: Some(l),
                revision,
            }),
        ) = (et::decode_kv_key(&k), lock_entry(&store, &k).await?)
        {
            all.insert(p, (l, revision));
        }
    }
    et::mirror_locks(&bus, &all)?;
    Ok(out)
}
