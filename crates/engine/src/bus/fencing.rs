//! Fencing tokens for bus locks: every acquire gets a number that increases per lock key,
//! across holders, releases and entries Python gods wrote without one, so a holder whose lease was taken
//! over can be told apart from the new one (`--token N` on renew and unlock).
//!
//! The high-water mark per key lives in `.message-bus/fencing.json` (`{key: last token}`), written under
//! `.lock_mutex` like `locks.json`; a release removes the lock entry but never the mark.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::Bus;
use super::model::LockEntry;
use super::vocab::MessageType;
use crate::error::{Error, Result};
use crate::store::atomic::write_json;

/// The field of a `locks.json` entry holding its token (Python readers ignore it).
pub(crate) const TOKEN_FIELD: &str = "fencing_token";

/// The token recorded in a lock entry, if any.
pub(crate) fn token_of(e: &LockEntry) -> Option<u64> {
    e.extra.get(TOKEN_FIELD).and_then(Value::as_u64)
}

/// The largest token the engine gives out: 2^53 - 1, the largest integer every JSON reader (JavaScript's
/// too) keeps exactly. A recorded value at or above it was never given out by an engine (that takes 2^53
/// leases of one path): it was planted, and is ignored rather than built on, so no path is ever stuck.
pub(crate) const MAX_TOKEN: u64 = (1 << 53) - 1;

/// `t` when an engine may have given it out (1 up to, not including, [`MAX_TOKEN`]).
pub(crate) fn usable(t: u64) -> Option<u64> {
    (1..MAX_TOKEN).contains(&t).then_some(t)
}

/// The message types whose payload carries tokens or marks a lease (what [`Bus::recover_marks`] counts).
const LEASE_TYPES: [&str; 3] = [
    MessageType::FileLock.as_str(),
    MessageType::FileUnlock.as_str(),
    MessageType::LockLost.as_str(),
];

impl Bus {
    /// `.message-bus/fencing.json`.
    pub(crate) fn fencing_path(&self) -> PathBuf {
        self.dir.join(crate::store::layout::FENCING_FILE)
    }

    /// The next token for `key` (above the stored mark and the current entry's token), recorded as the
    /// new mark. The caller holds `.lock_mutex`. When `fencing.json` is missing, unreadable or holds
    /// something other than a usable token for `key` (a planted maximum included), the marks are rebuilt
    /// first from what else the bus holds
    /// ([`Bus::recover_marks`]), so a lost mark file never sends a token backwards.
    pub(crate) fn next_fencing_token(&self, key: &str, current: Option<&LockEntry>) -> Result<u64> {
        let path = self.fencing_path();
        let stored = self
            .read_object(&path)
            .ok()
            .filter(|_| path.symlink_metadata().is_ok())
            .filter(|m| {
                m.get(key)
                    .is_none_or(|v| v.as_u64().and_then(usable).is_some())
            });
        let mut marks = match stored {
            Some(m) => m,
            None => {
                let mut rebuilt = self.recover_marks()?;
                // Keys the damaged file still shows as numbers keep the higher of the two.
                if let Ok(old) = self.read_object(&path) {
                    for (k, v) in old {
                        if let Some(t) = v.as_u64().and_then(usable) {
                            let e = rebuilt.entry(k).or_insert(json!(0));
                            if e.as_u64().is_none_or(|r| r < t) {
                                *e = json!(t);
                            }
                        }
                    }
                }
                rebuilt
            }
        };
        let mark = marks
            .get(key)
            .and_then(Value::as_u64)
            .and_then(usable)
            .unwrap_or(0);
        let high = mark.max(current.and_then(token_of).and_then(usable).unwrap_or(0));
        // `high` is below MAX_TOKEN, so this never overflows and never passes it.
        let token = high + 1;
        marks.insert(key.to_owned(), json!(token));
        write_json(&self.root, &path, &marks)?;
        Ok(token)
    }

    /// Rebuilds every key's mark from what the bus still holds when `fencing.json` is lost: the tokens in
    /// `locks.json`, and in `queue.jsonl` and its archives the tokens of `FILE_LOCK` (`fencing_token`) and
    /// `LOCK_LOST` (`token`, `new_token`) lines, and, for lines written without a token (by an engine
    /// before tokens were posted, or by a seed god), the number of `FILE_LOCK`, `FILE_UNLOCK` and
    /// `LOCK_LOST` lines of the key: every lease an engine gave out posted one of them, so the count is
    /// never below the tokens given. The caller holds `.lock_mutex`.
    pub(crate) fn recover_marks(&self) -> Result<Map<String, Value>> {
        let mut high: std::collections::BTreeMap<String, u64> = Default::default();
        let mut bump = |key: &str, t: u64| {
            if let (Ok(k), Some(t)) = (super::locks::normalize_key(key), usable(t)) {
                let e = high.entry(k).or_insert(0);
                *e = (*e).max(t);
            }
        };
        let locks = self.read_object(&self.locks_path()).unwrap_or_default();
        for (k, v) in &locks {
            if let Some(t) = v.get(TOKEN_FIELD).and_then(Value::as_u64) {
                bump(k, t);
            }
        }
        let mut counts: std::collections::BTreeMap<(String, &'static str), u64> =
            Default::default();
        let mut queues = vec![self.queue_path()];
        for f in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = f.file_name();
            if crate::store::layout::BusEntry::of(&name.to_string_lossy())
                == Some(crate::store::layout::BusEntry::QueueArchive)
            {
                queues.push(f.path());
            }
        }
        for q in &queues {
            scan_leases(q, &mut |kind, payload| {
                let path = payload
                    .get("filepath")
                    .or_else(|| payload.get("path"))
                    .and_then(Value::as_str);
                let Some(path) = path else { return };
                for field in [TOKEN_FIELD, "token", "new_token"] {
                    if let Some(t) = payload.get(field).and_then(Value::as_u64) {
                        bump(path, t);
                    }
                }
                if let Ok(k) = super::locks::normalize_key(path) {
                    *counts.entry((k, kind)).or_insert(0) += 1;
                }
            })?;
        }
        let mut per_key: std::collections::BTreeMap<String, u64> = Default::default();
        for ((k, _), n) in counts {
            let e = per_key.entry(k).or_insert(0);
            *e = e.saturating_add(n);
        }
        for (k, n) in per_key {
            bump(&k, n.min(MAX_TOKEN - 1));
        }
        Ok(high.into_iter().map(|(k, t)| (k, json!(t))).collect())
    }
}

/// Calls `f(type, payload)` for every `FILE_LOCK`, `FILE_UNLOCK` and `LOCK_LOST` line of the queue at
/// `path` (streamed: memory holds one line; lines naming none of those types are not parsed).
fn scan_leases(path: &std::path::Path, f: &mut dyn FnMut(&'static str, &Value)) -> Result<()> {
    use super::queue::{Line, MAX_LINE_BYTES, next_line, open_queue};
    let Some(file) = open_queue(path)? else {
        return Ok(());
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::with_capacity(512);
    let finder = memchr::memmem::Finder::new(b"LOCK");
    loop {
        match next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(|e| Error::io(path, e))? {
            Line::Eof | Line::Unterminated => return Ok(()),
            Line::Oversized { .. } => {}
            Line::Complete { .. } => {
                if finder.find(&line).is_none() {
                    continue;
                }
                let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let kind = m.get("type").and_then(Value::as_str);
                let Some(kind) = LEASE_TYPES.into_iter().find(|t| Some(*t) == kind) else {
                    continue;
                };
                if let Some(p) = m.get("payload") {
                    f(kind, p);
                }
            }
        }
    }
}

/// Refuses `given` unless it is the token of the lock `entry` held for `key`.
pub(crate) fn check_token(key: &str, given: Option<u64>, entry: Option<&LockEntry>) -> Result<()> {
    let Some(given) = given else { return Ok(()) };
    let current = entry.and_then(token_of);
    if current == Some(given) {
        return Ok(());
    }
    let now = match (entry.and_then(|e| e.worker_id.as_deref()), current) {
        (Some(h), Some(t)) => format!("it is now held by {h} with token {t}"),
        (Some(h), None) => format!("it is now held by {h} (an entry without a token)"),
        (None, _) => "it is no longer locked".to_owned(),
    };
    Err(Error::refused(format!(
        "token {given} for {key} is stale: {now}; your lease was lost, so acquire the lock again \
         (without --token) before writing"
    )))
}
