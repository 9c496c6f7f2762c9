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

pub(crate) mod attention;
pub(crate) mod compact;
pub(crate) mod engine_glue;
pub(crate) mod files;
pub(crate) mod ledger;
pub(crate) mod model;
pub(crate) mod runner;
pub(crate) mod snapshot;
pub(crate) mod watch;
pub(crate) mod watch_set;

pub(crate) use model::{LiveModel, ModelOptions};
pub(crate) use snapshot::Snapshot;
pub(crate) use watch::WatchMode;
