//! The `/metrics` endpoint: its routes on the one HTTP stack (`crate::http`), served from the live
//! model's newest snapshot, and the thread that prepares each new snapshot's exposition ahead of the
//! scrapes.

use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::exposition::{OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
use super::metrics::Metrics;
use crate::live::runner::LiveHandle;

/// What the handlers read: the figures and the live model they come from.
#[derive(Clone)]
struct Scrape {
    metrics: Arc<Metrics>,
    live: Arc<LiveHandle>,
}

/// The routes of `serve --metrics`: `GET /metrics` (and `HEAD`), `GET /` saying where the metrics
/// are, 404 elsewhere. Starts a thread that notes each new snapshot's dispatches (so a step's end
/// can be labelled) and, while scrapes come, computes the exposition ahead for each new snapshot
/// and as it ages, so a scrape serves text already made ([`Metrics::scrape`]).
pub(crate) fn routes(metrics: Arc<Metrics>, live: Arc<LiveHandle>) -> anyhow::Result<Router> {
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
                        // A new snapshot, or the clock moving the time-bound figures: woken
                        // four times per `CACHE_FOR`, so a text is renewed before it ages out
                        // (see `Metrics::prepare`) even when making it takes a while.
                        let wait = super::metrics::CACHE_FOR / 4;
                        if let Ok(Err(_)) = tokio::time::timeout(wait, rx.changed()).await {
                            break;
                        }
                    }
                });
            })
            .context("cannot start the metrics notes")?;
    }
    const WHERE: &str = "pantheon serve: metrics at /metrics\n";
    Ok(Router::new()
        .route("/metrics", get(scrape))
        .route("/", get(|| async { WHERE }))
        .fallback(|| async { (StatusCode::NOT_FOUND, WHERE) })
        .with_state(Scrape { metrics, live }))
}

/// `GET /metrics`: the exposition of the newest snapshot, in the format the `Accept` header prefers.
async fn scrape(State(s): State<Scrape>, headers: HeaderMap) -> Response {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let open_metrics = wants_openmetrics(&accept);
    // The text is usually made already; when it is not, making it is work for a blocking thread,
    // not for the ones that serve the other connections.
    let made = tokio::task::spawn_blocking(move || {
        let snap = s.live.latest();
        let body = s.metrics.scrape(&snap, open_metrics);
        s.metrics
            .scrapes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        body
    })
    .await;
    let Ok(body) = made else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the scrape failed\n").into_response();
    };
    let ct = if open_metrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    };
    ([(header::CONTENT_TYPE, ct)], body.to_string()).into_response()
}

/// True when the `Accept` header prefers OpenMetrics (as Prometheus sends it) over the text format:
/// `application/openmetrics-text` is named with a quality above the text format's.
pub(crate) fn wants_openmetrics(accept: &str) -> bool {
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
}
