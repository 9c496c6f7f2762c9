//! Integration tests of `pantheon mcp`: the real binary, driven over stdio by the official Python
//! and TypeScript MCP client SDKs (installed by `scripts/test-setup.sh`, which the tests run
//! themselves), each test on a fresh temp root.

mod harness;

mod budgets;
mod bus;
mod clients;
mod concurrency;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod foreign;
mod http;
mod listing;
mod schemas;
#[path = "../common/setup.rs"]
mod setup;
mod stdio;
mod workflow;
