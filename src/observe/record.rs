//! `conductor/observe/metrics-{supervisor}.json`: where a running `serve --metrics` listens, so
//! `pantheon status` can warn when a root's figures are served beyond loopback. Written atomically
//! at start, removed at a clean exit; a record whose supervisor's heartbeat is not alive is stale
//! and ignored.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::engine::{Root, SafeDir};

/// The directory of the records.
pub(crate) fn dir(root: &Root) -> PathBuf {
    root.conductor.join("observe")
}

/// A record written for this process; removed when dropped.
pub(crate) struct MetricsRecord {
    root: Root,
    path: PathBuf,
}

impl MetricsRecord {
    /// Writes the record of supervisor `id` listening on `addr` (a failure is only logged: the
    /// metrics are served all the same).
    pub(crate) fn write(root: &Root, id: &str, addr: SocketAddr) -> Self {
        let body = json!({
            "supervisor": id,
            "pid": std::process::id(),
            "addr": addr.to_string(),
            "loopback": addr.ip().is_loopback(),
        });
        Self::write_as(root, format!("metrics-{id}.json"), body)
    }

    /// [`Self::write`] for a listener of `kind` (`metrics`, `approvals`).
    pub(crate) fn write_kind(root: &Root, kind: &str, id: &str, addr: SocketAddr) -> Self {
        let body = json!({
            "supervisor": id,
            "pid": std::process::id(),
            "addr": addr.to_string(),
            "loopback": addr.ip().is_loopback(),
        });
        Self::write_as(root, format!("{kind}-{id}.json"), body)
    }

    /// The record of an MCP endpoint (`serve --mcp`, whose `id` is its supervisor's, or `mcp --http`),
    /// `mcp-{id}.json`: where it listens and whether it takes credentials.
    pub(crate) fn write_mcp(root: &Root, id: &str, addr: SocketAddr, authenticated: bool) -> Self {
        let body = json!({
            "supervisor": id,
            "pid": std::process::id(),
            "addr": addr.to_string(),
            "loopback": addr.ip().is_loopback(),
            "authenticated": authenticated,
        });
        Self::write_as(root, format!("mcp-{id}.json"), body)
    }

    fn write_as(root: &Root, name: String, body: Value) -> Self {
        let path = dir(root).join(name);
        let written = SafeDir::parent_of(root, &path, true).and_then(|p| match p {
            Some((d, name)) => d.replace(&name, &crate::engine::to_pretty_json(&body)),
            None => Ok(()),
        });
        if let Err(e) = written {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
        Self {
            root: root.clone(),
            path,
        }
    }
}

impl Drop for MetricsRecord {
    fn drop(&mut self) {
        if let Ok(Some((d, name))) = SafeDir::parent_of(&self.root, &self.path, false) {
            let _ = d.remove_file(&name);
        }
    }
}

/// The addresses not on loopback that live supervisors serve metrics on.
pub(crate) fn exposed(root: &Root, live_supervisors: &[Value]) -> Vec<String> {
    exposed_as(root, live_supervisors, "metrics-")
}

/// The addresses not on loopback that live supervisors serve a listener of `kind` on.
pub(crate) fn exposed_kind(root: &Root, kind: &str, live_supervisors: &[Value]) -> Vec<String> {
    exposed_as(root, live_supervisors, &format!("{kind}-"))
}

/// The addresses not on loopback that live MCP endpoints listen on: a `serve --mcp` whose supervisor
/// is alive, or a `pantheon mcp --http` whose process is.
pub(crate) fn mcp_exposed(root: &Root, live_supervisors: &[Value]) -> Vec<String> {
    exposed_as(root, live_supervisors, "mcp-")
}

/// Whether process `pid` runs (on this machine: the records are written by local processes).
fn process_alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only asks whether the process exists.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

fn exposed_as(root: &Root, live_supervisors: &[Value], prefix: &str) -> Vec<String> {
    let alive: Vec<&str> = live_supervisors
        .iter()
        .filter_map(|v| v.get("supervisor").and_then(Value::as_str))
        .collect();
    let Ok(rd) = std::fs::read_dir(dir(root)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".json")
        })
        .filter_map(|e| crate::engine::read_json(&e.path()).ok().flatten())
        .filter(|v| {
            let supervised = v
                .get("supervisor")
                .and_then(Value::as_str)
                .is_some_and(|s| alive.contains(&s));
            let standalone = prefix == "mcp-"
                && v.get("supervisor")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with("mcp-pid-"))
                && v.get("pid")
                    .and_then(Value::as_i64)
                    .is_some_and(process_alive);
            (supervised || standalone) && v.get("loopback").and_then(Value::as_bool) == Some(false)
        })
        .filter_map(|v| {
            v.get("addr")
                .and_then(Value::as_str)
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .map(|a| a.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
