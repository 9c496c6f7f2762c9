//! Pauses across pantheons (docs/NATS.md "Pauses"): this root's pauses announced on
//! `pantheon.{name}.paused` (core NATS) when they change, when the bridge starts or reconnects, and
//! every `--announce-every`; the peers' announcements heard on `pantheon.*.paused`, kept in memory
//! and in the status file (`peer_pauses`) until a peer is silent for three of its periods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::Shared;
use crate::engine::nats as eb;

/// The peers' pauses heard, by peer.
pub(super) type Heard = std::sync::Mutex<BTreeMap<String, eb::PeerPauses>>;

/// The live entries of `heard`, for the status file.
pub(super) fn live(heard: &Heard) -> Vec<eb::PeerPauses> {
    let now = chrono::Utc::now();
    heard
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .filter(|p| eb::peer_pauses_live(p, now))
        .cloned()
        .collect()
}

/// Starts the announcing and the hearing of pauses (docs/NATS.md "Pauses announced to peers").
pub(super) fn spawn(
    client: &async_nats::Client,
    shared: &Arc<Shared>,
    poll: Duration,
    every: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(announce_loop(client.clone(), shared.clone(), poll, every)),
        tokio::spawn(listen_loop(client.clone(), shared.clone())),
    ]
}

/// Announces this root's pauses: read every `poll`, published when the list changed, the connection
/// is new, or `every` has passed since the last announcement.
async fn announce_loop(
    client: async_nats::Client,
    shared: Arc<Shared>,
    poll: Duration,
    every: Duration,
) {
    let subject = eb::pause_subject(&shared.inbound.name);
    let every_s = every.as_secs().max(1);
    let mut last: Option<(Vec<eb::AnnouncedPause>, usize)> = None;
    let mut last_conn = 0;
    let mut last_sent: Option<Instant> = None;
    let mut last_error = String::new();
    while !shared.stop.load(Ordering::SeqCst) {
        let (root, name) = (shared.root.clone(), shared.inbound.name.clone());
        let read = tokio::task::spawn_blocking(move || {
            eb::pause_announcement(&root, &name, every_s, chrono::Utc::now())
        })
        .await;
        let conn = shared.connects.load(Ordering::SeqCst);
        match read {
            Ok(Ok(a)) => {
                let key = (a.pauses.clone(), a.more);
                let due = last.as_ref() != Some(&key)
                    || conn != last_conn
                    || last_sent.is_none_or(|t| t.elapsed() >= every);
                if due && conn > 0 {
                    match publish(&client, &subject, eb::encode_pause_announcement(&a)).await {
                        Ok(()) => {
                            tracing::info!(
                                "bridge: announced {} pause(s) on {subject}",
                                a.pauses.len() + a.more
                            );
                            last = Some(key);
                            last_conn = conn;
                            last_sent = Some(Instant::now());
                            last_error.clear();
                        }
                        Err(e) => {
                            let text = format!("pause announcement on {subject} not sent: {e}");
                            if text != last_error {
                                shared.note_error(&text).await;
                                last_error = text;
                            }
                        }
                    }
                }
            }
            Ok(Err(e)) => {
                let text = format!("pauses not announced: {e}");
                if text != last_error {
                    shared.note_error(&text).await;
                    last_error = text;
                }
            }
            Err(e) => {
                shared
                    .note_error(format!("pauses not announced: {e}"))
                    .await
            }
        }
        tokio::time::sleep(poll).await;
    }
}

async fn publish(client: &async_nats::Client, subject: &str, body: Vec<u8>) -> anyhow::Result<()> {
    client.publish(subject.to_owned(), body.into()).await?;
    tokio::time::timeout(Duration::from_secs(5), client.flush())
        .await
        .map_err(|_| anyhow::anyhow!("the server did not confirm within 5 s"))??;
    Ok(())
}

/// Hears the peers' announcements: each one read as hostile input (its sender on the `--peer` list,
/// its subject its own), kept until its peer announces again or falls silent.
async fn listen_loop(client: async_nats::Client, shared: Arc<Shared>) {
    let own = eb::pause_subject(&shared.inbound.name);
    let mut sub = match client.subscribe(eb::PAUSE_SUBJECTS).await {
        Ok(s) => s,
        Err(e) => {
            shared
                .note_error(format!(
                    "cannot hear peers' pauses on {}: {e}",
                    eb::PAUSE_SUBJECTS
                ))
                .await;
            return;
        }
    };
    let mut shown = Vec::new();
    let mut strangers: Vec<String> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        if let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await
            && msg.subject.as_str() != own
        {
            match eb::parse_pause_announcement(
                msg.subject.as_str(),
                &msg.payload,
                &shared.inbound.name,
                &shared.inbound.peers,
                chrono::Utc::now(),
            ) {
                Ok(p) => {
                    let mut heard = shared.peer_pauses.lock().unwrap_or_else(|e| e.into_inner());
                    heard.insert(p.peer.clone(), p);
                }
                // A stranger on a shared server is not this bridge's error: logged, not shown.
                Err(eb::NotBelieved::Stranger(name)) => {
                    if !strangers.contains(&name) && strangers.len() < 64 {
                        tracing::info!(
                            "bridge: pauses announced by {name} ignored: not a peer (run the bridge with --peer {name})"
                        );
                        strangers.push(name);
                    }
                }
                Err(why) => shared.note_error(why).await,
            }
        }
        let now = live(&shared.peer_pauses);
        if now != shown {
            shown = now;
            shared.save_status(None, None).await;
        }
    }
}
