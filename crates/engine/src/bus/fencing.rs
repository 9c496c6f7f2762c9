//! Fencing tokens for bus locks (issue 16 item 3): every acquire gets a number that increases per lock key,
//! across holders, releases and entries Python gods wrote without one, so a holder whose lease was taken
//! over can be told apart from the new one (`--token N` on renew and unlock).
//!
//! The high-water mark per key lives in `.message-bus/fencing.json` (`{key: last token}`), written under
//! `.lock_mutex` like `locks.json`; a release removes the lock entry but never the mark.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::Bus;
use super::model::LockEntry;
use crate::error::{Error, Result};
use crate::store::atomic::write_json;

/// The field of a `locks.json` entry holding its token (Python readers ignore it).
pub const TOKEN_FIELD: &str = "fencing_token";

/// The token recorded in a lock entry, if any.
pub(crate) fn token_of(e: &LockEntry) -> Option<u64> {
    e.extra.get(TOKEN_FIELD).and_then(Value::as_u64)
}

impl Bus {
    /// `.message-bus/fencing.json`.
    pub fn fencing_path(&self) -> PathBuf {
        self.dir.join(crate::store::layout::FENCING_FILE)
    }

    /// The next token for `key` (above the stored mark and the current entry's token), recorded as the
    /// new mark. The caller holds `.lock_mutex`.
    pub(crate) fn next_fencing_token(&self, key: &str, current: Option<&LockEntry>) -> Result<u64> {
        let path = self.fencing_path();
        // A damaged mark file is replaced: the current entry's token still keeps the order.
        let mut marks: Map<String, Value> = self.read_object(&path).unwrap_or_default();
        let mark = marks.get(key).and_then(Value::as_u64).unwrap_or(0);
        let high = mark.max(current.and_then(token_of).unwrap_or(0));
        let token = high.checked_add(1).ok_or_else(|| {
            Error::refused(format!(
                "the fencing token of {key} is exhausted; remove its entry from {}",
                path.display()
            ))
        })?;
        marks.insert(key.to_owned(), json!(token));
        write_json(&self.root, &path, &marks)?;
        Ok(token)
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
