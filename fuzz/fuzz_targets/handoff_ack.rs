//! Handoff and ack validation: any bytes given to `submit_handoff` / `ack_handoff` are refused with an
//! error or accepted, never a panic; whatever is written stays inside the root.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pantheon::Root;
use pantheon::engine::conductor::{Actor, Conductor};

struct World {
    _dir: tempfile::TempDir,
    conductor: Conductor,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let dir = tempfile::tempdir_in(base).unwrap();
        let conductor = Conductor::new(Root::at(dir.path()));
        conductor.init().unwrap();
        World {
            _dir: dir,
            conductor,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let w = world();
    let _ = w.conductor.submit_handoff(&v);
    let _ = w.conductor.ack_handoff(&v, Actor::Recipient);
    if let Some(h) = v.get("handoff") {
        let _ = w.conductor.submit_handoff(h);
    }
});
