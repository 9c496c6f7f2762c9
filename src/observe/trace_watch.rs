//! The thread behind `serve --otlp`: watches the directories the spans come from, reads only the
//! files the events name ([`super::span_watch::SpanWatch`]) and offers the spans to the bounded
//! export queue ([`super::export`]). It keeps no model of the root: what one act costs it is the
//! files that act wrote, read once per burst of changes. On Linux it takes inotify events
//! (`dir_watch`); where they cannot be had (another system, the user's watch limit reached) it
//! checks every file each second instead.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::engine::Root;

use super::export::{Endpoint, SpanQueue, TraceStats};
use super::otlp::AttrValue;
use super::span_watch::SpanWatch;

/// How often the watched directories are synced with those there are (a new inbox named by no
/// event, `dead/` made at the first dead letter, a root removed and made again), and how often the
/// poll fallback checks every file.
const RESYNC: Duration = Duration::from_secs(1);

/// Starts the exporter and the span watcher; returns the exporter's figures (for `/metrics`).
/// `settle` is how long a burst of file events gathers before the files it named are read.
pub(crate) fn spawn(
    root: &Root,
    supervisor: &str,
    endpoint: Endpoint,
    settle: Duration,
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
    // From now on every record counts; the watches are set after, so nothing written once they
    // exist is missed.
    let mut spans = SpanWatch::new(root.clone(), chrono::Utc::now());
    let source = Source::start(&spans);
    std::thread::Builder::new()
        .name("otlp-observe".into())
        .spawn(move || source.run(&mut spans, &queue, settle))
        .context("cannot start the span observer")?;
    Ok(stats)
}

/// Where the span watcher learns what changed.
enum Source {
    /// inotify events on the watched directories.
    #[cfg(target_os = "linux")]
    Events(super::dir_watch::DirWatch),
    /// A stat of every file each [`RESYNC`].
    Poll,
}

impl Source {
    /// The watches on `spans`' directories, set now.
    #[cfg(target_os = "linux")]
    fn start(spans: &SpanWatch) -> Self {
        let watched = super::dir_watch::DirWatch::new().and_then(|mut w| {
            w.sync(&spans.dirs())?;
            Ok(w)
        });
        match watched {
            Ok(w) => Source::Events(w),
            Err(e) => Self::poll(&e),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn start(_: &SpanWatch) -> Self {
        Source::Poll
    }

    fn poll(why: &dyn std::fmt::Display) -> Self {
        tracing::warn!(
            "otlp: file notifications unavailable, checking every file each second: {why}"
        );
        Source::Poll
    }

    fn run(mut self, spans: &mut SpanWatch, queue: &SpanQueue, settle: Duration) {
        let mut offer = |s| queue.offer(s);
        let mut synced = Instant::now();
        loop {
            match &mut self {
                #[cfg(target_os = "linux")]
                Source::Events(w) => {
                    let burst = match w.next_burst(RESYNC, settle) {
                        Ok(b) => b,
                        Err(e) => {
                            self = Self::poll(&e);
                            continue;
                        }
                    };
                    let mut dirs = burst.overflow;
                    if burst.overflow {
                        spans.rescan(&mut offer);
                    } else if !burst.paths.is_empty() {
                        let paths: Vec<_> = burst.paths.into_iter().collect();
                        dirs = spans.changed(&paths, &mut offer);
                    }
                    // A directory an event named is watched at once, any other within a second.
                    if dirs || synced.elapsed() >= RESYNC {
                        synced = Instant::now();
                        match w.sync(&spans.dirs()) {
                            Ok(fresh) => spans.read_dirs(&fresh, &mut offer),
                            Err(e) => {
                                self = Self::poll(&e);
                                spans.rescan(&mut offer);
                            }
                        }
                    }
                }
                Source::Poll => {
                    std::thread::sleep(RESYNC);
                    spans.rescan(&mut offer);
                }
            }
        }
    }
}
