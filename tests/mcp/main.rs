//! Integration tests of `pantheon mcp`: the real binary, driven over stdio and over Streamable HTTP
//! (`mcp --http`, `serve --mcp`) by the official Python and TypeScript MCP client SDKs (installed by
//! `scripts/test-setup.sh`, which the tests run themselves), each test on a fresh temp root.

mod harness;

mod budgets;
mod bus;
mod clients;
mod concurrency;
mod durable;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod foreign;
mod http;
mod inspector;
mod listing;
mod operator;
mod remote;
mod schemas;
mod sessions;
#[path = "../common/setup.rs"]
mod setup;
mod stdio;
#[path = "../common/tmux.rs"]
mod tmux;
mod workflow;
