//! The watched model of a root: file-system notifications -> incremental reads -> an immutable
//! snapshot.
//!
//! - [`attention`]: the attention items of a snapshot, the one computation every surface counts.
//! - [`compact`]: the compact rows of dispatches and their times.
//! - [`files`]: per-file caches (fingerprints, last good value, log offsets).
//! - [`watch`]: `notify` or poll signals.
//! - [`watch_set`]: which directories are watched: the one "watch exactly these" diff, shared with
//!   the span watcher's inotify watches.
//! - [`model`]: the caches of one root (split by record kind: workflows, inboxes, tracks) and the
//!   snapshot they build.
//! - [`snapshot`]: what the console draws.
//! - [`ledger`]: the cost the console shows (totals, burn rates, budgets, warnings).
//! - [`engine_glue`]: the engine functions the model uses (queue reads, deadlocks, resolve rule).
//! - [`runner`]: the model thread: debounce signals, refresh, publish only the newest snapshot.

pub mod attention;
pub mod compact;
pub mod engine_glue;
pub mod files;
pub mod ledger;
pub mod model;
pub mod runner;
pub mod snapshot;
pub mod watch;
pub mod watch_set;

pub use model::{LiveModel, ModelOptions};
pub use snapshot::Snapshot;
pub use watch::WatchMode;
