//! The storage layer every protocol module stands on: atomic writes, `flock` with a bounded wait,
//! tolerant reading, validated ids, timestamps, safe paths, and the test-only crash points.

pub(crate) mod atomic;
pub(crate) mod commit;
pub(crate) mod crash;
pub(crate) mod ids;
pub(crate) mod layout;
pub(crate) mod limits;
pub(crate) mod lock;
pub(crate) mod paths;
pub(crate) mod paused;
pub(crate) mod read;
pub(crate) mod safe;
pub(crate) mod settings;
pub(crate) mod time;
pub(crate) mod yaml;

pub(crate) use crash::crash_point;
pub(crate) use ids::{
    AckId, GodName, HandoffId, StepId, TrackName, WorkerId, WorkflowId, encode_key,
    generate_dispatch_id, is_valid_ack_id, is_valid_handoff_id, is_valid_name,
    is_valid_workflow_id,
};
pub(crate) use paths::Root;
pub(crate) use settings::Settings;

/// Serialises a value the engine built itself (its own record types, `serde_json::Value`s, strings) to
/// JSON text. Serialising these cannot fail: they hold no map with non-string keys and no type whose
/// `Serialize` refuses. This is the one place the engine accepts a panic for serialisation, so the crate's
/// `expect_used` lint can hold everywhere else.
#[allow(clippy::expect_used)]
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(value: &T, pretty: bool) -> Vec<u8> {
    let out = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    };
    out.expect("the engine's own values always serialise")
}

/// `json_text` as a `serde_json::Value`.
#[allow(clippy::expect_used)]
pub(crate) fn json_value<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("the engine's own values always serialise")
}

/// [`json_text`] as a `String` (compact).
pub(crate) fn json_string<T: serde::Serialize + ?Sized>(value: &T) -> String {
    String::from_utf8_lossy(&json_text(value, false)).into_owned()
}

/// What a watcher of `dir` is told while `act` runs: each event's mask and name, in order.
#[cfg(test)]
pub(crate) fn watched_events(dir: &std::path::Path, act: impl FnOnce()) -> Vec<(String, String)> {
    use inotify::{Inotify, WatchMask};
    let mut inotify = Inotify::init().unwrap();
    inotify.watches().add(dir, WatchMask::ALL_EVENTS).unwrap();
    act();
    let mut buffer = [0u8; 64 * 1024];
    let mut seen = Vec::new();
    loop {
        match inotify.read_events(&mut buffer) {
            Ok(events) => {
                let before = seen.len();
                seen.extend(events.map(|e| {
                    let name = e.name.map(|n| n.to_string_lossy().into_owned());
                    (format!("{:?}", e.mask), name.unwrap_or_default())
                }));
                if seen.len() == before {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("reading inotify events: {e}"),
        }
    }
    seen
}
