//! Approval-link decisions over NATS (docs/NATS.md "Approval links"): with `--approvals` the bridge
//! subscribes (core NATS) to `pantheon.{name}.approve`; a peer pantheon or a phone relay publishes
//! a token there (JSON or a form body, the page's form fields) and each message is redeemed exactly
//! as the listener's `POST` is (`crate::approvals::redeem_relayed`, channel `nats`), the receipt
//! sent back as the reply when the message asked for one. A `from` naming a declared `--peer` is
//! recorded as the approver (what the NATS server's publish permissions prove); any other `from` is
//! refused.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

use super::Shared;
use crate::engine::{ApprovalChannel, LinkKey, nats as eb};

/// Starts taking decisions on this pantheon's approve subject.
pub(super) fn spawn(
    client: &async_nats::Client,
    shared: &Arc<Shared>,
    key: LinkKey,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(take_loop(client.clone(), shared.clone(), key))
}

async fn take_loop(client: async_nats::Client, shared: Arc<Shared>, key: LinkKey) {
    let subject = eb::approve_subject(&shared.inbound.name);
    let mut sub = match client.subscribe(subject.clone()).await {
        Ok(s) => s,
        Err(e) => {
            shared
                .note_error(format!("cannot take approval decisions on {subject}: {e}"))
                .await;
            return;
        }
    };
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await
        else {
            continue;
        };
        let (root, key2, peers) = (
            shared.root.clone(),
            key.clone(),
            shared.inbound.peers.clone(),
        );
        let payload = msg.payload.clone();
        let answer = tokio::task::spawn_blocking(move || decide(&root, &key2, &peers, &payload))
            .await
            .unwrap_or_else(|e| json!({"status": "error", "message": format!("error: {e}")}));
        if answer["status"] == "error" {
            shared
                .note_error(format!(
                    "approval decision on {subject} not taken: {}",
                    answer["message"].as_str().unwrap_or_default()
                ))
                .await;
        }
        if let Some(reply) = msg.reply {
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            if let Err(e) = client.publish(reply, body.into()).await {
                shared
                    .note_error(format!("approval receipt not sent: {e}"))
                    .await;
            }
        }
    }
}

/// One message's answer: the receipt, or `{"status": "error", "message"}` when it is no decision.
fn decide(
    root: &crate::engine::Root,
    key: &LinkKey,
    peers: &eb::Peers,
    payload: &[u8],
) -> serde_json::Value {
    let error = |m: String| json!({"status": "error", "message": m});
    let fields = match crate::approvals::relay_fields(payload) {
        Ok(f) => f,
        Err(e) => return error(format!("error: {e}")),
    };
    let approver = match fields.get("from").map(|f| f.trim()) {
        None | Some("") => None,
        Some(f) if peers.0.iter().any(|p| p.name == f) => Some(format!("{f} (nats peer)")),
        Some(f) => {
            return error(format!(
                "error: {:?} is not a declared peer of this bridge (--peer): nothing was decided",
                f.chars().take(64).collect::<String>()
            ));
        }
    };
    match crate::approvals::redeem_relayed(root, key, ApprovalChannel::Nats, &fields, approver) {
        Ok(r) => serde_json::to_value(r).unwrap_or_else(|e| error(format!("error: {e}"))),
        Err(e) => error(e),
    }
}
