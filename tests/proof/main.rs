//! Proof suites: the project's reliability claims as tests that can fail.
//!
//! - [`crash`]: engine operations in real `pantheon` processes SIGKILLed at random moments; after each
//!   kill every file is consistent and repeating the interrupted operation completes it.
//! - [`corpus`]: the bad-input corpus of `tests/corpus/` (plus hostile arguments and planted symlinks)
//!   through the CLI, the MCP server and the live model: a clear error or a reported item, never a
//!   panic, never a file touched outside the root.
//! - [`props`]: property tests, the CI-sized twins of the `fuzz/` targets.

mod common;
mod corpus;
mod crash;
mod props;
