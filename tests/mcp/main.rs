//! Integration tests of `pantheon mcp`: the real binary, driven over stdio by the official Python
//! MCP client SDK (run `scripts/test-setup.sh` once to create `.venv/`), each test on a fresh
//! temp root.

mod harness;

mod bus;
mod concurrency;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod foreign;
mod listing;
mod schemas;
mod stdio;
mod workflow;
