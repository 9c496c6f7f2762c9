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
pub mod dir_watch;
pub mod export;
pub mod exposition;
pub mod http;
pub mod inbox_spans;
pub mod journal;
pub mod metrics;
pub mod otlp;
pub mod record;
pub mod span_watch;
pub mod spans;
pub mod status_cache;
pub mod trace_watch;
