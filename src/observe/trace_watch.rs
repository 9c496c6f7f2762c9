//! The thread behind `serve --otlp`: follows the live model's snapshots, turns what changed into
//! spans ([`super::spans::Observer`]) and offers them to the bounded export queue
//! ([`super::export`]).

use std::sync::Arc;

use anyhow::Context;

use crate::engine::Root;
use crate::live::runner::LiveHandle;

use super::export::{Endpoint, TraceStats};
use super::otlp::AttrValue;
use super::spans::Observer;

/// Starts the exporter and the observer; returns the exporter's figures (for `/metrics`).
pub fn spawn(
    root: &Root,
    supervisor: &str,
    endpoint: Endpoint,
    live: &Arc<LiveHandle>,
    log: Box<dyn FnMut(String) + Send>,
) -> anyhow::Result<Arc<TraceStats>> {
    let resource = vec![
        ("service.name", AttrValue::Str("pantheon".into())),
        (
            "service.version",
            AttrValue::Str(env!("CARGO_PKG_VERSION").into()),
        ),
        ("service.instance.id", AttrValue::Str(supervisor.to_owned())),
        (
            "pantheon.root",
            AttrValue::Str(
                root.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
        ),
    ];
    let queue = super::export::start(endpoint, resource, log)?;
    let stats = queue.stats.clone();
    let live = live.clone();
    let mut rx = live.snapshots.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("cannot start the span observer")?;
    let mut observer = Observer::new(chrono::Utc::now());
    std::thread::Builder::new()
        .name("otlp-observe".into())
        .spawn(move || {
            let _live = live;
            rt.block_on(async move {
                loop {
                    let snap = rx.borrow_and_update().clone();
                    observer.observe(&snap, &mut |s| queue.offer(s));
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            });
        })
        .context("cannot start the span observer")?;
    Ok(stats)
}
