//! Presence files in `events/` (docs/PROTOCOL.md §3.3): `{TYPE}_{key}.event`, key percent-encoded, content the id
//! of the message that caused it; and a wait for one woken by file-system notification.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use globset::{GlobBuilder, GlobMatcher};
use notify::{RecursiveMode, Watcher};
use serde::Serialize;

use super::model::Envelope;
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::atomic::write_atomic;
use crate::store::ids::{decode_key, encode_key};

/// The file name of an event: `{TYPE}_{encoded key}.event`, or `{TYPE}.event` without a key.
pub fn event_file_name(kind: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("{kind}_{}.event", encode_key(k)),
        None => format!("{kind}.event"),
    }
}

/// The events a message touches: `TASK_COMPLETE_{task_id}`, `TASK_FAILED_{task_id}`,
/// `FILE_UNLOCK_all` + `FILE_UNLOCK_{filepath}`, `BOARD_RESOLVE_all` + `BOARD_RESOLVE`.
/// A task event without a `task_id` falls back to `_all`, as the seed's writer does.
pub(crate) fn events_for(env: &Envelope) -> Vec<String> {
    use super::vocab::MessageType as M;
    let Some(kind) = M::parse(&env.kind) else {
        return Vec::new();
    };
    match kind {
        M::TaskComplete | M::TaskFailed => {
            let key = env.payload_str("task_id").unwrap_or("all");
            vec![event_file_name(&env.kind, Some(key))]
        }
        M::FileUnlock => {
            let mut v = vec![event_file_name(kind.as_str(), Some("all"))];
            if let Some(p) = env.payload_str("filepath") {
                v.push(event_file_name(kind.as_str(), Some(p)));
            }
            v
        }
        M::LockLost => match env.payload_str("holder") {
            Some(h) => vec![event_file_name(kind.as_str(), Some(h))],
            None => Vec::new(),
        },
        M::BoardResolve => vec![
            event_file_name(kind.as_str(), Some("all")),
            event_file_name(kind.as_str(), None),
        ],
        _ => Vec::new(),
    }
}

/// Writes (atomically, replacing) each event file of `env` with the message id as content.
pub(crate) fn touch_for(root: &Root, events_dir: &Path, env: &Envelope) -> Result<Vec<String>> {
    let names = events_for(env);
    for name in &names {
        write_atomic(root, &events_dir.join(name), env.id.as_bytes())?;
    }
    Ok(names)
}

/// One event file as found on disk.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventFile {
    /// The file name (`TASK_COMPLETE_1.2.event`).
    pub name: String,
    /// The name without `.event`, keys decoded (`FILE_UNLOCK_src/a.ts`).
    pub decoded: String,
    /// The content: a message id (foreign writers leave other text, or nothing).
    pub content: String,
    /// Last modification, RFC 3339.
    pub modified: Option<String>,
}

/// Lists `events/` (sorted by name); a missing directory is empty.
pub(crate) fn list(events_dir: &Path) -> Result<Vec<EventFile>> {
    let rd = match std::fs::read_dir(events_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(events_dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".event") {
            continue;
        }
        out.push(read_event(events_dir, &name));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn read_event(events_dir: &Path, name: &str) -> EventFile {
    let path = events_dir.join(name);
    // Bounded, and never blocking on a FIFO named like an event.
    let content = crate::store::read::read_bytes(&path)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let modified = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .ok()
        .map(|t| crate::store::time::format_ts(t.into()));
    EventFile {
        name: name.to_owned(),
        decoded: decode_key(name.trim_end_matches(".event")),
        content,
        modified,
    }
}

/// A compiled event pattern: a glob matched against the file name, the name without `.event`, and
/// the decoded name, so `TASK_COMPLETE_1.*`, `FILE_UNLOCK_src/a.ts` and `BOARD_RESOLVE.event` all work.
#[derive(Debug, Clone)]
pub struct EventPattern {
    raw: String,
    glob: GlobMatcher,
}

impl EventPattern {
    /// The field name used in error messages.
    pub const FIELD: &'static str = "event_pattern";
    /// The rule a pattern must follow, as shown in error messages.
    pub const PATTERN: &'static str =
        "a glob over event names (`*`, `?`, `[..]` closed), 1 to 1024 bytes without NUL";
    /// The longest pattern accepted, in bytes.
    pub const MAX_BYTES: usize = 1024;

    /// Compiles `pattern` (glob syntax: `*`, `?`, `[..]`), naming the field `field` in the error
    /// (`invalid {field} {value:?}: must match {rule}`, as every other id).
    pub fn parse_as(field: &'static str, pattern: &str) -> Result<Self> {
        let invalid = || Error::InvalidName {
            field,
            value: pattern.chars().take(80).collect(),
            pattern: Self::PATTERN,
        };
        if pattern.is_empty() || pattern.len() > Self::MAX_BYTES || pattern.contains('\0') {
            return Err(invalid());
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(false)
            .build()
            .map_err(|_| invalid())?
            .compile_matcher();
        Ok(Self {
            raw: pattern.to_owned(),
            glob,
        })
    }

    /// Compiles `pattern` (see [`Self::parse_as`]; the field is named `event_pattern`).
    pub fn new(pattern: &str) -> Result<Self> {
        Self::parse_as(Self::FIELD, pattern)
    }

    /// True when the event file `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let stem = name.strip_suffix(".event").unwrap_or(name);
        self.glob.is_match(name) || self.glob.is_match(stem) || self.glob.is_match(decode_key(stem))
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl std::fmt::Display for EventPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.raw)
    }
}

impl std::str::FromStr for EventPattern {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

/// What a wait found.
#[derive(Debug, Clone, Serialize)]
pub struct WaitResult {
    /// The pattern waited for.
    pub pattern: String,
    /// True when an event matched before the timeout.
    pub matched: bool,
    /// The event that matched.
    pub event: Option<EventFile>,
    /// How long the wait took, in milliseconds.
    pub waited_ms: u64,
}

type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.ino()))
}

fn scan(
    dir: &Path,
    pattern: &EventPattern,
    baseline: Option<&HashMap<String, Stamp>>,
) -> Option<String> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".event") && pattern.matches(n))
        .collect();
    names.sort();
    names.into_iter().find(|n| match baseline {
        None => true,
        // Fresh: a file that is new, or was re-created or touched after the wait began. A file that
        // vanished between the listing and its stamp is not an event.
        Some(base) => match stamp(&dir.join(n)) {
            None => false,
            now => base.get(n) != now.as_ref(),
        },
    })
}

/// Waits until an event file matching `pattern` exists in `events_dir` (with `fresh`, one created or
/// touched after the wait began), or `timeout` passes. Woken by inotify (via `notify`), never by polling.
pub(crate) fn wait_for_event(
    events_dir: &Path,
    pattern: &EventPattern,
    timeout: Duration,
    fresh: bool,
) -> Result<WaitResult> {
    let started = Instant::now();
    std::fs::create_dir_all(events_dir).map_err(|e| Error::io(events_dir, e))?;
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if ev.as_ref().is_ok_and(|e| !is_write(e)) {
            return;
        }
        let _ = tx.send(ev);
    })
    .map_err(|e| watch_error(events_dir, e))?;
    watcher
        .watch(events_dir, RecursiveMode::NonRecursive)
        .map_err(|e| watch_error(events_dir, e))?;
    // The watch is in place before the first scan, so nothing created in between is missed.
    let baseline: Option<HashMap<String, Stamp>> = fresh.then(|| {
        std::fs::read_dir(events_dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        stamp(&e.path()).map(|s| (n, s))
                    })
                    .collect()
            })
            .unwrap_or_default()
    });
    let done = |name: String| WaitResult {
        pattern: pattern.as_str().to_owned(),
        matched: true,
        event: Some(read_event(events_dir, &name)),
        waited_ms: started.elapsed().as_millis() as u64,
    };
    if !fresh && let Some(name) = scan(events_dir, pattern, None) {
        return Ok(done(name));
    }
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(_) => {
                // Coalesce a burst of notifications into one scan.
                while rx.try_recv().is_ok() {}
                if let Some(name) = scan(events_dir, pattern, baseline.as_ref()) {
                    return Ok(done(name));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::refused(format!(
                    "the file watcher on {} stopped",
                    events_dir.display()
                )));
            }
        }
    }
    Ok(WaitResult {
        pattern: pattern.as_str().to_owned(),
        matched: false,
        event: None,
        waited_ms: started.elapsed().as_millis() as u64,
    })
}

/// True for notifications that can make an event appear or change: creation, writes, renames,
/// attribute changes (a `touch`) and overflow. Opening, reading and closing a file or listing the
/// directory are not: a waiter that woke on those would wake itself with every scan it makes.
pub fn is_write(ev: &notify::Event) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode};
    match ev.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Remove(_) => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Other => true,
    }
}

fn watch_error(dir: &Path, e: notify::Error) -> Error {
    Error::io(
        PathBuf::from(dir),
        std::io::Error::other(format!("cannot watch for events: {e}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(kind: &str, payload: serde_json::Value) -> Envelope {
        Envelope {
            id: "msg-1".into(),
            kind: kind.into(),
            payload,
            ..Default::default()
        }
    }

    #[test]
    fn event_names_percent_encode_keys() {
        assert_eq!(
            event_file_name("TASK_COMPLETE", Some("1.2")),
            "TASK_COMPLETE_1.2.event"
        );
        assert_eq!(
            events_for(&msg("FILE_UNLOCK", json!({"filepath": "src/app/x y.ts"}))),
            vec![
                "FILE_UNLOCK_all.event",
                "FILE_UNLOCK_src%2Fapp%2Fx%20y.ts.event"
            ]
        );
        assert_eq!(
            events_for(&msg("BOARD_RESOLVE", json!({}))),
            vec!["BOARD_RESOLVE_all.event", "BOARD_RESOLVE.event"]
        );
        assert_eq!(
            events_for(&msg("TASK_FAILED", json!({}))),
            vec!["TASK_FAILED_all.event"]
        );
        assert_eq!(
            events_for(&msg("TASK_COMPLETE", json!({"task_id": "../x"}))),
            vec!["TASK_COMPLETE_..%2Fx.event"]
        );
        assert!(events_for(&msg("PROGRESS", json!({}))).is_empty());
    }

    #[test]
    fn patterns_match_raw_stem_and_decoded_names() {
        let p = EventPattern::new("FILE_UNLOCK_src/app/*").unwrap();
        assert!(p.matches("FILE_UNLOCK_src%2Fapp%2Fx.ts.event"));
        assert!(!p.matches("FILE_UNLOCK_all.event"));
        assert!(
            EventPattern::new("TASK_COMPLETE_1.2.event")
                .unwrap()
                .matches("TASK_COMPLETE_1.2.event")
        );
        assert!(
            EventPattern::new("BOARD_RESOLVE")
                .unwrap()
                .matches("BOARD_RESOLVE.event")
        );
        assert!(
            !EventPattern::new("BOARD_RESOLVE")
                .unwrap()
                .matches("BOARD_RESOLVE_all.event")
        );
        assert_eq!(
            EventPattern::new("[").unwrap_err().to_string(),
            format!(
                "invalid event_pattern \"[\": must match {}",
                EventPattern::PATTERN
            )
        );
        assert!(EventPattern::parse_as("PATTERN", "").is_err());
        assert!(EventPattern::new("a\0b").is_err());
        assert!(EventPattern::new(&"*".repeat(EventPattern::MAX_BYTES + 1)).is_err());
        let e = EventPattern::parse_as("PATTERN", &"[".repeat(200)).unwrap_err();
        assert_eq!(e.to_string().matches('[').count(), 80 + 1, "{e}");
    }

    #[test]
    fn wait_is_woken_by_a_new_file_and_fresh_ignores_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("events");
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("TASK_COMPLETE_1.event"), "old").unwrap();
        let r = wait_for_event(
            &ev,
            &"TASK_COMPLETE_*".parse().unwrap(),
            Duration::from_secs(5),
            false,
        )
        .unwrap();
        assert!(r.matched && r.event.unwrap().content == "old");
        let r = wait_for_event(
            &ev,
            &"TASK_COMPLETE_*".parse().unwrap(),
            Duration::from_millis(150),
            true,
        )
        .unwrap();
        assert!(!r.matched);
        let ev2 = ev.clone();
        let t = std::thread::spawn(move || {
            wait_for_event(
                &ev2,
                &"TASK_COMPLETE_*".parse().unwrap(),
                Duration::from_secs(20),
                true,
            )
            .unwrap()
        });
        // The waiter's baseline must be taken before we write; a written file racing it would be
        // counted as old, so keep writing new names until the waiter returns.
        let mut i = 2;
        while !t.is_finished() {
            // Written as our writers do (atomic rename), so the file never appears empty.
            write_atomic(
                &Root::at(dir.path()),
                &ev.join(format!("TASK_COMPLETE_{i}.event")),
                b"new",
            )
            .unwrap();
            i += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = t.join().unwrap();
        assert!(r.matched && r.event.unwrap().content == "new");
    }
}
