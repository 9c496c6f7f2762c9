//! Pantheon Console: the protocol engine for a pantheon of file-coordinated AI agents ("gods"), and
//! the shells around it.
//!
//! Dependencies point one way: shells (`cli`, `mcp`, `console`, `demo`) -> `live` -> `engine`.
//! The engine holds every protocol rule; nothing else writes a protocol file.

pub mod actor;
pub mod approvals;
pub mod bridge;
pub mod cli;
pub mod console;
pub mod credentials;
pub mod demo;
pub mod http;
pub mod live;
pub mod mcp;
pub mod observe;
pub mod outcome;
pub mod sources;
pub mod text;

/// The protocol engine, its own crate ([`pantheon_engine`]); re-exported so shells name it `engine`.
pub use pantheon_engine as engine;

pub use engine::Root;
pub use engine::{Error, Result};

/// The shared fixture finder, the same file the integration tests include.
#[cfg(test)]
#[path = "../tests/common/fixture.rs"]
pub(crate) mod test_fixture;

/// Checks on the source tree itself (layering and spelling rules a compiler cannot see).
#[cfg(test)]
mod source_checks;
