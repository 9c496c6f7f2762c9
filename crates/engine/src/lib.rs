//! The Pantheon protocol engine: a library with no terminal code, no printing and no async runtime.
//!
//! - [`store`]: atomic writes, `flock`, tolerant reads, validated ids, timestamps, safe paths.
//! - [`conductor`]: handoffs, routing, gates, inboxes, acks, workflow state, abort, cleanup (docs/PROTOCOL.md §2).
//! - [`bus`]: the per-track message bus and the board deliberation (docs/PROTOCOL.md §3 and §4).
//! - [`cost`]: usage reports, the ledger, prices and budgets that hold dispatches (docs/BUDGETS.md).
//! - [`validate`]: a strict check of every protocol file under a root.
//! - [`history`]: the recorder of every change to a root, replay at a moment, the changes between two.

// Lints (docs in ARCHITECTURE.md): no unsafe code but the one explained crash-point hook; no unwrap, expect
// or panic outside tests (serialisation of the engine's own values goes through `store::json_text`); a doc
// comment on every public item (`missing_docs`, an error under `clippy -D warnings`).
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod bridge;
pub mod bus;
pub mod conductor;
pub mod cost;
pub mod error;
pub mod health;
pub mod history;
pub mod journal;
pub mod store;
pub mod trace;
pub mod validate;
mod words;

/// The foreign-root fixture finder, the same file the integration tests include.
#[cfg(test)]
#[path = "../../../tests/common/fixture.rs"]
pub(crate) mod test_fixture;
