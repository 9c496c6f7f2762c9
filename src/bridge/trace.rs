//! A debug aid for the latency of shared tracks (docs/NATS.md, "Performance"): with
//! `PANTHEON_BRIDGE_TRACE=FILE` set, the bridge appends one line `STAGE KEY UNIX_NANOS` per step of a
//! line's way through it (woken, read, sent, acknowledged, received, appended, cursor written), so
//! `benches/nats.rs` (`NATS_BENCH_TRACE=1`) can tell where the time of the slowest lines goes. Off (and
//! free: one check of a set-once value) when the variable is not set; nothing is printed either way.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static TRACE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();

fn sink() -> Option<&'static Mutex<std::fs::File>> {
    TRACE
        .get_or_init(|| {
            let path = std::env::var_os("PANTHEON_BRIDGE_TRACE")?;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
                .map(Mutex::new)
        })
        .as_ref()
}

/// True when tracing is on.
pub(super) fn on() -> bool {
    sink().is_some()
}

/// Records `stage` of `key` (a line id, or empty) now, when tracing is on.
pub(super) fn mark(stage: &str, key: &str) {
    let Some(f) = sink() else { return };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let line = format!("{stage} {key} {now}\n");
    let _ = f
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .write_all(line.as_bytes());
}
