//! Observability for Prometheus (docs/OBSERVABILITY.md): `pantheon serve --metrics ADDR` serves
//! `/metrics` from the live model and the journal.
//!
//! - [`exposition`]: the text and OpenMetrics formats, with a per-family series cap.
//! - [`journal`]: counters and latency histograms folded incrementally from the journal.
//! - [`metrics`]: the series, from a snapshot and the fold.
//! - [`http`]: the endpoint.
//! - [`record`]: where a running `serve --metrics` listens, for `status`.
//! - [`status_cache`]: `pantheon status`'s figures kept between runs.
//! - [`spans`], [`inbox_spans`], [`span_watch`], `dir_watch`, [`otlp`], [`export`], [`trace_watch`]:
//!   `serve --otlp URL`, one trace per workflow from the state files and inboxes that changed
//!   (read as events name them, no live model), encoded as OTLP protobuf and sent through a
//!   bounded queue.

#[cfg(target_os = "linux")]
pub(crate) mod dir_watch;
pub(crate) mod export;
pub(crate) mod exposition;
pub(crate) mod http;
pub(crate) mod inbox_spans;
pub(crate) mod journal;
pub(crate) mod metrics;
pub(crate) mod otlp;
pub(crate) mod record;
pub(crate) mod span_watch;
pub(crate) mod spans;
pub(crate) mod status_cache;
pub(crate) mod trace_watch;
