//! Pantheon Console: the protocol engine for a pantheon of file-coordinated AI agents ("gods"), and
//! the shells around it.
//!
//! Dependencies point one way: shells (`cli`, `mcp`, `console`, `demo`) -> `live` -> `engine`.
//! The engine holds every protocol rule; nothing else writes a protocol file.
#![deny(unreachable_pub)]

pub(crate) mod actor;
pub(crate) mod approvals;
pub(crate) mod bridge;
pub(crate) mod cli;
pub(crate) mod console;
pub(crate) mod credentials;
pub(crate) mod demo;
pub(crate) mod http;
pub(crate) mod live;
pub(crate) mod mcp;
pub(crate) mod observe;
pub(crate) mod outcome;
pub(crate) mod sources;
pub mod testing;
pub(crate) mod text;

/// The protocol engine, its own crate ([`pantheon_engine`]); re-exported so shells name it `engine`.
pub use pantheon_engine as engine;

/// The binary's entry point: the command line and what runs it (`src/main.rs`).
pub use cli::{Cli, run};

pub use engine::Root;
pub use engine::{Error, Result};

/// The shared fixture finder, the same file the integration tests include (where its items are
/// `pub`, so here they are not reachable).
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "../tests/common/fixture.rs"]
pub(crate) mod test_fixture;

/// Checks on the source tree itself (layering and spelling rules a compiler cannot see).
#[cfg(test)]
mod source_checks;
