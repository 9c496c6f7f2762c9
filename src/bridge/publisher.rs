//! The bridge's publisher (docs/NATS.md "The outbox"): live outbox records go out oldest first per
//! subject, each subject's head record in a task of its own, so a record that waits on the server
//! (a JetStream publish nobody acknowledges takes seconds to fail) never delays another subject.
//! A record that fails is retried on its own schedule and listed under `stuck` in the status from
//! its first failure; an operator retries it now (`pantheon bridge retry ID`, a request file the
//! publisher takes within a round) or gives it up (`pantheon bridge discard ID`, which removes it
//! from the outbox). Every decision about a record is the engine's (`outbox`, `nats::check_sendable`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::jetstream;

use super::{Shared, trace};
use crate::engine::{
    nats::{self as eb},
    outbox,
};

/// Longest pause between two tries of one record.
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How often every ledger entry is read again (a missed state change is picked up then).
const REPLY_RESCAN: Duration = Duration::from_secs(300);
/// How long one publish may take before it counts as failed.
const SEND_LIMIT: Duration = Duration::from_secs(10);
/// Most subjects being published at once (each has at most one record in flight).
const MAX_IN_FLIGHT: usize = 64;

/// A record that could not be published: retried on its own schedule (doubling from 1 s to 60 s)
/// until `--give-up-after`, then dead-lettered. Only its own subject waits for it.
struct Retry {
    attempts: u64,
    /// Failures since the first one or the operator's last retry (the backoff's exponent).
    streak: u64,
    since: Instant,
    since_ts: String,
    next: Instant,
    subject: String,
    error: String,
    hint: Option<String>,
}

/// Why a publish failed, and what an operator can do about it.
struct Failed {
    error: String,
    hint: Option<String>,
}

/// What became of one try.
enum Sent {
    /// Stored (JetStream: the stream sequence and whether it was a duplicate) or flushed (core: 0).
    Done(u64, bool),
    /// It failed; tried again later.
    Failed(Failed),
    /// It may never go on the wire (the engine's reason): dead-lettered at once.
    Refused(String),
}

/// The publisher's memory between rounds, shared with the tasks publishing.
#[derive(Default)]
struct Outgoing {
    retry: HashMap<String, Retry>,
    /// Core records handed to the client whose flush has not been confirmed yet: they are flushed
    /// again, never published again (the client sends what it holds once, across a reconnect).
    handed: HashSet<String>,
    /// Subjects whose head record is being published now: one record per subject at a time keeps
    /// each subject's order.
    busy: HashSet<String>,
    /// Records sent or dead-lettered by this bridge and when, kept until a scan begun after that
    /// no longer lists them (a scan begun before may still list one: it is not sent again).
    done: HashMap<String, Instant>,
}

type Out = Arc<std::sync::Mutex<Outgoing>>;

fn lock(out: &Out) -> std::sync::MutexGuard<'_, Outgoing> {
    out.lock().unwrap_or_else(|e| e.into_inner())
}

/// Publishes live outbox records, oldest first per subject: to a core peer once (publish, flush,
/// then mark sent), else to JetStream with `Nats-Msg-Id` = its id, marked sent only after the
/// server stored it. A record that fails waits on its own schedule; the rest go out meanwhile.
/// Also turns acks of inbound requests into reply records, looking only at the workflows whose
/// state changed (a watch on `conductor/state/`), so idle costs nothing however many wait.
pub(super) async fn publish_loop(
    js: jetstream::Context,
    client: async_nats::Client,
    shared: Arc<Shared>,
    every: Duration,
    give_up_after: Duration,
) {
    let (tx, mut changed) = tokio::sync::mpsc::unbounded_channel::<String>();
    let state_dir = shared.root.state_dir();
    let _watcher = {
        use notify::Watcher;
        let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res
                && !matches!(ev.kind, notify::EventKind::Access(_))
            {
                for p in ev.paths {
                    if let Some(stem) = p.file_name().and_then(|n| n.to_str())
                        && let Some(wf) = stem.strip_suffix(".json")
                    {
                        let _ = tx.send(wf.to_owned());
                    }
                }
            }
        })
        .ok();
        if let Some(w) = w.as_mut() {
            let _ = std::fs::create_dir_all(&state_dir);
            if let Err(e) = w.watch(&state_dir, notify::RecursiveMode::NonRecursive) {
                tracing::warn!("bridge: no watch on {}: {e}", state_dir.display());
            }
        }
        w
    };
    // The first round reads every ledger entry (`full`), later ones only what changed.
    let mut awaiting = eb::AwaitingReplies::default();
    let mut first = true;
    let mut last_full = Instant::now();
    let out: Out = Default::default();
    while !shared.stop.load(Ordering::SeqCst) {
        trace::mark("outbox", "");
        let mut wfs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        while let Ok(wf) = changed.try_recv() {
            wfs.insert(wf);
        }
        let taken: Vec<String> =
            std::mem::take(&mut *shared.taken.lock().unwrap_or_else(|e| e.into_inner()));
        let full = first || last_full.elapsed() >= REPLY_RESCAN;
        // The scans read files: on a blocking thread, so the shared tracks' loops never wait on them.
        let scan = shared.clone();
        let mut held = std::mem::take(&mut awaiting);
        let scan_started = Instant::now();
        let scanned = tokio::task::spawn_blocking(move || {
            if full {
                held = eb::AwaitingReplies::scan(&scan.root);
            }
            for id in &taken {
                if let Some(wf) = held.note(&scan.root, id) {
                    wfs.insert(wf);
                }
            }
            let look: Vec<String> = if full {
                held.workflows()
            } else {
                wfs.into_iter().filter(|w| held.waits(w)).collect()
            };
            let replies = held.collect(&scan.conductor, &scan.inbound, &look);
            let retries = take_retry_requests(&scan);
            (held, replies, retries, outbox::pending(&scan.root).0)
        })
        .await;
        if full {
            first = false;
            last_full = Instant::now();
        }
        let records = match scanned {
            Ok((held, replies, retries, records)) => {
                awaiting = held;
                match replies {
                    Ok((_, refused)) => {
                        for why in refused {
                            shared.dead.fetch_add(1, Ordering::Relaxed);
                            shared.note_error(why).await;
                        }
                    }
                    Err(e) => shared.note_error(format!("collecting replies: {e}")).await,
                }
                retry_now(&out, &retries);
                records
            }
            Err(e) => {
                shared.note_error(format!("scanning the outbox: {e}")).await;
                Vec::new()
            }
        };
        let records = without_paused(&shared, &out, records).await;
        if client.connection_state() == async_nats::connection::State::Connected {
            publish_round(
                &js,
                &client,
                &shared,
                &out,
                records,
                scan_started,
                give_up_after,
            );
        }
        report_stuck(&shared, &out).await;
        shared.save_status(None, None).await;
        trace::mark("outbox_done", "");
        tokio::time::sleep(every).await;
    }
}

/// The records of this round that no pause holds. A paused peer's records (or every record, the
/// whole root paused) wait in the outbox: not published, not retried, not dead-lettered, not stuck
/// (their retry state is dropped). An unreadable `conductor/paused.json` holds them all, and the
/// reason is noted.
async fn without_paused(
    shared: &Arc<Shared>,
    out: &Out,
    records: Vec<outbox::OutboxRecord>,
) -> Vec<outbox::OutboxRecord> {
    let pauses = match crate::engine::Pauses::load(&shared.root) {
        Ok(p) => Some(p),
        Err(e) => {
            shared.note_error(format!("outbox held: {e}")).await;
            None
        }
    };
    let (held, free): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|r| pauses.as_ref().is_none_or(|p| p.outbound(r).is_some()));
    let mut o = lock(out);
    for r in &held {
        o.retry.remove(&r.outbox_id);
    }
    free
}

/// Takes the operators' retry requests (each file removed once read): the outbox ids they name.
fn take_retry_requests(shared: &Shared) -> Vec<String> {
    let mut ids = Vec::new();
    for (id, path) in outbox::retry_requests(&shared.root) {
        match outbox::take_retry_request(&shared.root, &path) {
            Ok(()) => ids.push(id),
            Err(e) => tracing::warn!("bridge: retry request {} not taken: {e}", path.display()),
        }
    }
    ids
}

/// An operator asked: the record is tried in this round, its backoff and give-up clock start over.
fn retry_now(out: &Out, ids: &[String]) {
    let mut o = lock(out);
    let now = Instant::now();
    for id in ids {
        if let Some(r) = o.retry.get_mut(id) {
            tracing::info!("bridge: {id} is tried again now (an operator asked)");
            r.next = now;
            r.streak = 0;
            r.since = now;
            r.since_ts = crate::engine::time::now_ts();
        }
    }
}

/// Starts a publish of each subject's oldest record that may go now (none of its subject in flight,
/// no backoff pending); the tasks report into `out`.
fn publish_round(
    js: &jetstream::Context,
    client: &async_nats::Client,
    shared: &Arc<Shared>,
    out: &Out,
    records: Vec<outbox::OutboxRecord>,
    scan_started: Instant,
    give_up_after: Duration,
) {
    let live: HashSet<&str> = records.iter().map(|r| r.outbox_id.as_str()).collect();
    {
        let mut o = lock(out);
        o.retry.retain(|id, _| live.contains(id.as_str()));
        o.handed.retain(|id| live.contains(id.as_str()));
        o.done
            .retain(|id, at| *at >= scan_started || live.contains(id.as_str()));
    }
    let now = Instant::now();
    let mut heads: HashSet<String> = HashSet::new();
    for rec in records {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        // Only the oldest record of a subject may go: the later ones wait behind it.
        if !heads.insert(rec.subject.clone()) {
            continue;
        }
        {
            let mut o = lock(out);
            if o.busy.len() >= MAX_IN_FLIGHT {
                break;
            }
            if o.done.contains_key(&rec.outbox_id)
                || o.busy.contains(&rec.subject)
                || o.retry.get(&rec.outbox_id).is_some_and(|r| r.next > now)
            {
                continue;
            }
            o.busy.insert(rec.subject.clone());
        }
        tokio::spawn(send_one(
            js.clone(),
            client.clone(),
            shared.clone(),
            out.clone(),
            rec,
            give_up_after,
        ));
    }
}

/// One try of one record, and what follows from it; its subject is free again after.
async fn send_one(
    js: jetstream::Context,
    client: async_nats::Client,
    shared: Arc<Shared>,
    out: Out,
    rec: outbox::OutboxRecord,
    give_up_after: Duration,
) {
    let sent = attempt(&js, &client, &shared, &out, &rec).await;
    settle(&shared, &out, &rec, sent, give_up_after).await;
    lock(&out).busy.remove(&rec.subject);
}

async fn attempt(
    js: &jetstream::Context,
    client: &async_nats::Client,
    shared: &Shared,
    out: &Out,
    rec: &outbox::OutboxRecord,
) -> Sent {
    // Checked again now: the record is a file anyone may have edited since it was written.
    if let Err(why) = eb::check_sendable(rec, &shared.inbound) {
        return Sent::Refused(why.to_string());
    }
    let me = &shared.inbound.name;
    let peer = shared.inbound.peers.for_record(rec).cloned();
    let body = eb::encode(rec, me, peer.as_ref());
    let core = peer
        .as_ref()
        .is_some_and(|p| p.transport == eb::Transport::Core);
    if core {
        let handed = lock(out).handed.contains(&rec.outbox_id);
        let mut now_handed = handed;
        let r = publish_core(client, &mut now_handed, rec, body).await;
        if now_handed && !handed {
            lock(out).handed.insert(rec.outbox_id.clone());
        }
        r
    } else {
        publish_js(js, rec, body, peer.as_ref(), me).await
    }
}

/// Records what came of a try: sent (moved to `sent/`), refused or given up (dead-lettered), or
/// failed (retried later, listed as stuck).
async fn settle(
    shared: &Shared,
    out: &Out,
    rec: &outbox::OutboxRecord,
    sent: Sent,
    give_up_after: Duration,
) {
    let id = rec.outbox_id.clone();
    match sent {
        Sent::Done(seq, duplicate) => {
            {
                let mut o = lock(out);
                o.retry.remove(&id);
                o.handed.remove(&id);
            }
            match outbox::mark_sent(&shared.root, rec, seq) {
                Ok(()) => {
                    lock(out).done.insert(id, Instant::now());
                }
                Err(e) => shared.note_error(format!("marking {id} sent: {e}")).await,
            }
            if !duplicate {
                shared.published.fetch_add(1, Ordering::Relaxed);
            }
        }
        Sent::Refused(why) => {
            let attempts = lock(out).retry.remove(&id).map_or(0, |r| r.attempts);
            let reason = format!("publishing {id} on {:?}: {why}", rec.subject);
            give_up(shared, out, rec, &reason, attempts).await;
        }
        Sent::Failed(f) => {
            let text = format!(
                "publishing {id} on {}: {}{}",
                rec.subject,
                f.error,
                f.hint
                    .as_deref()
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default()
            );
            let expired = {
                let mut o = lock(out);
                let now = Instant::now();
                let r = o.retry.entry(id.clone()).or_insert(Retry {
                    attempts: 0,
                    streak: 0,
                    since: now,
                    since_ts: crate::engine::time::now_ts(),
                    next: now,
                    subject: rec.subject.clone(),
                    error: String::new(),
                    hint: None,
                });
                r.attempts += 1;
                r.streak += 1;
                let pause = Duration::from_secs(1u64 << r.streak.saturating_sub(1).min(6));
                r.next = now + pause.min(RETRY_MAX);
                r.error = f.error;
                r.hint = f.hint;
                (r.since.elapsed() >= give_up_after)
                    .then(|| (r.attempts, r.since.elapsed().as_secs()))
            };
            match expired {
                Some((attempts, secs)) => {
                    lock(out).retry.remove(&id);
                    let reason = format!("gave up after {attempts} attempts over {secs}s: {text}");
                    give_up(shared, out, rec, &reason, attempts).await;
                }
                None => shared.note_error(text).await,
            }
        }
    }
}

/// Dead-letters a record (`conductor/bridge/dead/outbox_{id}.json`) with the reason.
async fn give_up(
    shared: &Shared,
    out: &Out,
    rec: &outbox::OutboxRecord,
    reason: &str,
    attempts: u64,
) {
    shared.dead.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("bridge: dead-lettered outbox record: {reason}");
    match outbox::give_up(&shared.root, rec, reason, attempts) {
        Ok(()) => {
            lock(out).done.insert(rec.outbox_id.clone(), Instant::now());
        }
        Err(e) => {
            shared
                .note_error(format!("dead letter {} not kept: {e}", rec.outbox_id))
                .await
        }
    }
}

/// The records that failed, in the status file's `stuck` (`outbox_id`, `subject`, `attempts`,
/// `since`, `retry_in_s`, `error`, `hint`): stuck from the first failed try.
async fn report_stuck(shared: &Shared, out: &Out) {
    let stuck: Vec<eb::StuckRecord> = {
        let o = lock(out);
        let now = Instant::now();
        let mut v: Vec<(&String, &Retry)> = o.retry.iter().collect();
        v.sort_by(|a, b| a.1.since_ts.cmp(&b.1.since_ts).then(a.0.cmp(b.0)));
        v.into_iter()
            .map(|(id, r)| eb::StuckRecord {
                outbox_id: id.clone(),
                subject: r.subject.clone(),
                attempts: r.attempts,
                since: r.since_ts.clone(),
                retry_in_s: r.next.saturating_duration_since(now).as_secs(),
                error: r.error.clone(),
                hint: r.hint.clone(),
            })
            .collect()
    };
    shared.status.lock().await.stuck = stuck;
}

/// A core NATS publish: handed to the client once (`handed` says whether it was before and is set
/// when it is now), then flushed; a flush that did not finish is tried again later without
/// publishing again.
async fn publish_core(
    client: &async_nats::Client,
    handed: &mut bool,
    rec: &outbox::OutboxRecord,
    body: Vec<u8>,
) -> Sent {
    if !*handed {
        if let Err(e) = client.publish(rec.subject.clone(), body.into()).await {
            return Sent::Failed(Failed {
                error: e.to_string(),
                hint: matches!(
                    e.kind(),
                    async_nats::client::PublishErrorKind::MaxPayloadExceeded
                )
                .then(|| too_large(rec)),
            });
        }
        *handed = true;
    }
    match tokio::time::timeout(SEND_LIMIT, client.flush()).await {
        Ok(Ok(())) => Sent::Done(0, false),
        Ok(Err(e)) => Sent::Failed(Failed {
            error: format!("flush: {e} (handed to the client once; not published again)"),
            hint: None,
        }),
        Err(_) => Sent::Failed(Failed {
            error: "flush: no answer in 10s (handed to the client once; not published again)"
                .into(),
            hint: None,
        }),
    }
}

/// A JetStream publish with `Nats-Msg-Id`, done when the server acknowledged it.
async fn publish_js(
    js: &jetstream::Context,
    rec: &outbox::OutboxRecord,
    body: Vec<u8>,
    peer: Option<&eb::Peer>,
    me: &str,
) -> Sent {
    use async_nats::jetstream::context::PublishErrorKind as K;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", rec.outbox_id.as_str());
    if let Some(tp) = &rec.traceparent {
        headers.insert("traceparent", tp.as_str());
    }
    let sent = async {
        js.publish_with_headers(rec.subject.clone(), headers, body.into())
            .await?
            .await
    };
    match tokio::time::timeout(SEND_LIMIT, sent).await {
        Ok(Ok(ack)) => Sent::Done(ack.sequence, ack.duplicate),
        Ok(Err(e)) => {
            let hint = match e.kind() {
                K::StreamNotFound => Some(format!(
                    "no stream holds subject {s}: create one that does (e.g. `nats stream add --subjects {s}`), then `pantheon bridge retry {id}`; {fix}",
                    s = rec.subject,
                    id = rec.outbox_id,
                    fix = what_frees(rec, peer, me)
                )),
                K::MaxPayloadExceeded => Some(too_large(rec)),
                K::TimedOut => Some(no_ack_hint(rec, peer, me)),
                _ => None,
            };
            Sent::Failed(Failed {
                error: e.to_string(),
                hint,
            })
        }
        Err(_) => Sent::Failed(Failed {
            error: "no answer in 10s".into(),
            hint: Some(no_ack_hint(rec, peer, me)),
        }),
    }
}

/// What a JetStream publish that is never acknowledged usually means.
fn no_ack_hint(rec: &outbox::OutboxRecord, peer: Option<&eb::Peer>, me: &str) -> String {
    format!(
        "no JetStream acknowledgement for subject {}: if no stream holds it and a core-NATS subscriber listens on it, each try reaches that subscriber again; {}",
        rec.subject,
        what_frees(rec, peer, me)
    )
}

fn too_large(rec: &outbox::OutboxRecord) -> String {
    format!(
        "the record is larger than the server's max_payload: raise it on the server, or give the record up with `pantheon bridge discard {} --reason TEXT`",
        rec.outbox_id
    )
}

/// What really frees a record stuck on a JetStream publish: a `--peer NAME:core` only when the
/// record goes to that peer (its step's `peer:`, else its subject's last token); else nothing but
/// a stream or a discard.
fn what_frees(rec: &outbox::OutboxRecord, peer: Option<&eb::Peer>, me: &str) -> String {
    let discard = format!(
        "`pantheon bridge discard {} --reason TEXT` gives it up",
        rec.outbox_id
    );
    match peer {
        Some(p) => {
            let envelope = if p.envelope == eb::EnvelopeKind::Origin {
                ":origin"
            } else {
                ""
            };
            format!(
                "if {n} listens with core NATS, restart the bridge with `--peer {n}:core{envelope}` (a restarted bridge tries it at once); or {discard}",
                n = p.name
            )
        }
        None => {
            let last = rec.subject.rsplit('.').next().unwrap_or_default();
            format!(
                "the record goes to no declared peer (its step names no `peer:` and {last:?}, the subject's last token, is not a --peer of {me}), so no --peer flag changes how it is sent; {discard}"
            )
        }
    }
}
