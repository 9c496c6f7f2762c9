//! File locks in `locks.json` (docs/PROTOCOL.md §3.4): leases with a TTL, renewed by the holder, taken over when
//! expired, refused while held by another live worker, released only by the holder or by an operator
//! with force. Every read-modify-write holds `.lock_mutex`, as the Python `acquire_lock` does.

use super::vocab::MessageType;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::model::LockEntry;
use super::{Bus, OPERATOR, fencing};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::ids::{WorkerId, check_free_text};
use crate::store::time::{format_ts, relative};

/// Default lease of a lock.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);
/// Default `lock_type`.
pub const DEFAULT_LOCK_TYPE: &str = "exclusive";

/// Normalises a lock key: `./a//b/` is `a/b`; a leading `/` is kept; `..` is kept as written.
pub fn normalize_key(path: &str) -> Result<String> {
    check_free_text("lock path", path)?;
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() {
        return Err(Error::refused(format!(
            "lock path {path:?} names no file; give a path such as src/app/x.ts"
        )));
    }
    let joined = parts.join("/");
    Ok(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

/// A lock key: a file path as the workers name it, normalised by [`normalize_key`] when parsed
/// (`./src//x.ts` is `src/x.ts`). The protocol keeps it as free text inside JSON (1 to 512 bytes, no
/// NUL) that must name a file; a leading `/` and `..` segments are kept as written (docs/PROTOCOL.md
/// 3.4), since a lock key is a name agreed between workers, never opened by the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey(String);

impl LockKey {
    /// The field name used in error messages.
    pub const FIELD: &'static str = "lock path";

    /// Parses and normalises `path`; refuses empty text, NUL, more than 512 bytes, and a path with
    /// no segment left after normalising (`./`).
    pub fn parse(path: &str) -> Result<Self> {
        normalize_key(path).map(Self)
    }

    /// The normalised key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::store::ids::str_id_impls!(LockKey);

/// A lock as shown to people and tools: the entry plus whether it is live.
#[derive(Debug, Clone, Serialize)]
pub struct LockView {
    /// The entry as read from `locks.json`.
    #[serde(flatten)]
    pub entry: LockEntry,
    /// True when the lock holds now (not expired).
    pub live: bool,
    /// True when its expiry has passed; anyone may take it over.
    pub expired: bool,
    /// No readable expiry (a bare-string entry or a missing `expires_at`): shown as "no expiry".
    pub no_expiry: bool,
    /// "in 12m" / "3m ago" relative to now, when there is an expiry.
    pub expires_in: Option<String>,
}

impl LockView {
    fn of(entry: LockEntry) -> Self {
        let now = Utc::now();
        Self {
            live: entry.is_live(now),
            expired: entry.is_expired(now),
            no_expiry: entry.expires().is_none(),
            expires_in: entry.expires().map(|t| relative(t, now)),
            entry,
        }
    }
}

/// The result of a successful `lock`.
#[derive(Debug, Clone, Serialize)]
pub struct LockResult {
    /// The lock key taken.
    pub filepath: String,
    /// The holder.
    pub worker_id: String,
    /// `exclusive` or `shared` as asked.
    pub lock_type: String,
    /// When the lease was taken (RFC 3339).
    pub acquired_at: String,
    /// When it expires unless renewed (RFC 3339).
    pub expires_at: String,
    /// True when the holder renewed its own lease.
    pub renewed: bool,
    /// The holder of an expired lock this one took over.
    pub previous_holder: Option<String>,
    /// The id of the `FILE_LOCK` message posted.
    pub message_id: String,
    /// This lease's fencing token: higher than any earlier lease of the same path.
    pub fencing_token: u64,
    /// On a takeover, the event file touched for the previous holder (`LOCK_LOST_{holder}.event`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_event: Option<String>,
}

/// The result of a successful `unlock`.
#[derive(Debug, Clone, Serialize)]
pub struct UnlockResult {
    /// The lock key released.
    pub filepath: String,
    /// Who held the lock.
    pub released_from: Option<String>,
    /// `operator` when forced.
    pub forced_by: Option<String>,
    /// The id of the `FILE_UNLOCK` message posted.
    pub message_id: String,
    /// The event files touched (`FILE_UNLOCK_{path}`).
    pub events: Vec<String>,
}

/// Finds the raw key in `locks` that normalises to `key`.
fn find_key(locks: &Map<String, Value>, key: &str) -> Option<String> {
    if locks.contains_key(key) {
        return Some(key.to_owned());
    }
    locks
        .keys()
        .find(|k| normalize_key(k).ok().as_deref() == Some(key))
        .cloned()
}

impl Bus {
    /// Every lock, sorted by path.
    pub fn locks(&self) -> Result<Vec<LockView>> {
        let map = self.read_object(&self.locks_path())?;
        Ok(super::model::parse_locks(&map)
            .into_iter()
            .map(LockView::of)
            .collect())
    }

    /// Acquires (or renews) the lock on `path` for `worker`; refused while another live worker holds it.
    pub fn acquire_lock(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        ttl: Duration,
        lock_type: Option<&str>,
    ) -> Result<LockResult> {
        self.acquire_lock_fenced(path, worker, ttl, lock_type, None)
    }

    /// [`Bus::acquire_lock`]; with `token`, only a renewal of the lease that token belongs to (a stale
    /// token is refused: the lease was lost).
    pub fn acquire_lock_fenced(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        ttl: Duration,
        lock_type: Option<&str>,
        token: Option<u64>,
    ) -> Result<LockResult> {
        crate::store::commit::act_unheld(&self.root, || {
            self.acquire_lock_fenced_act(path, worker, ttl, lock_type, token)
        })
    }

    fn acquire_lock_fenced_act(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        ttl: Duration,
        lock_type: Option<&str>,
        token: Option<u64>,
    ) -> Result<LockResult> {
        self.require()?;
        let key = path.as_str().to_owned();
        let worker = worker.as_str();
        if ttl.is_zero() {
            return Err(Error::refused("--ttl must be longer than zero"));
        }
        crate::store::time::check_duration("the lock's ttl", ttl)?;
        let lock_type = lock_type.unwrap_or(DEFAULT_LOCK_TYPE);
        check_free_text("lock type", lock_type)?;

        let _mutex = self.mutex()?;
        let mut locks = self.read_object(&self.locks_path())?;
        let now = Utc::now();
        let raw_key = find_key(&locks, &key);
        let existing = raw_key
            .as_ref()
            .map(|k| LockEntry::from_value(k, &locks[k.as_str()]));
        if token.is_some() {
            fencing::check_token(&key, token, existing.as_ref())?;
        }
        let mut renewed = false;
        let mut previous_holder = None;
        if let Some(e) = &existing {
            match e.worker_id.as_deref() {
                Some(holder) if holder == worker => renewed = true,
                Some(holder) if e.is_live(now) => {
                    let until = match e.expires() {
                        Some(t) => format!("until {} ({})", format_ts(t), relative(t, now)),
                        None => "with no expiry".to_owned(),
                    };
                    return Err(Error::refused(format!(
                        "{key} is locked by {holder} {until}; wait for the FILE_UNLOCK_{key} event, \
                         or ask an operator to force-release it"
                    )));
                }
                Some(holder) => previous_holder = Some(holder.to_owned()),
                None => {}
            }
        }
        let fencing_token = match existing
            .as_ref()
            .filter(|_| renewed)
            .and_then(fencing::token_of)
        {
            Some(t) => t,
            None => self.next_fencing_token(&key, existing.as_ref())?,
        };
        let mut entry = LockEntry {
            path: key.clone(),
            worker_id: Some(worker.to_owned()),
            acquired_at: Some(format_ts(now)),
            expires_at: Some(format_ts(crate::store::time::add(now, ttl).ok_or_else(
                || Error::refused("the lock's ttl leads past the year 9999; use a shorter one"),
            )?)),
            lock_type: Some(lock_type.to_owned()),
            ..Default::default()
        };
        entry
            .extra
            .insert(fencing::TOKEN_FIELD.into(), json!(fencing_token));
        if let Some(k) = &raw_key {
            locks.shift_remove(k.as_str());
        }
        locks.insert(key.clone(), entry.to_value());
        write_json(&self.root, &self.locks_path(), &locks)?;

        let mut payload = json!({
            "filepath": key,
            "lock_type": lock_type,
            "expires_at": entry.expires_at,
            fencing::TOKEN_FIELD: fencing_token,
        });
        if let Some(p) = &previous_holder {
            payload["previous_holder"] = json!(p);
        }
        let msg = self.post(MessageType::FileLock, worker, payload)?;
        let lost_event = match (&previous_holder, &existing) {
            (Some(p), Some(old)) => {
                let lost = self.post(
                    MessageType::LockLost,
                    worker,
                    json!({"path": key, "holder": p, "token": fencing::token_of(old),
                           "new_holder": worker, "new_token": fencing_token}),
                )?;
                super::events::events_for(&lost).into_iter().next()
            }
            _ => None,
        };
        Ok(LockResult {
            fencing_token,
            lost_event,
            filepath: key,
            worker_id: worker.to_owned(),
            lock_type: lock_type.to_owned(),
            acquired_at: entry.acquired_at.unwrap_or_default(),
            expires_at: entry.expires_at.unwrap_or_default(),
            renewed,
            previous_holder,
            message_id: msg.id,
        })
    }

    /// Releases the lock on `path`: by its holder, or by anyone with `force` (an operator act, recorded
    /// as `forced_by: "operator"`). Posts `FILE_UNLOCK` and touches `FILE_UNLOCK_all` and `FILE_UNLOCK_{path}`.
    pub(crate) fn release_unjournaled(
        &self,
        path: &LockKey,
        worker: &WorkerId,
        force: bool,
        token: Option<u64>,
    ) -> Result<UnlockResult> {
        self.require()?;
        let key = path.as_str().to_owned();
        let worker = worker.as_str();
        let _mutex = self.mutex()?;
        let mut locks = self.read_object(&self.locks_path())?;
        let Some(raw_key) = find_key(&locks, &key) else {
            return Err(Error::not_found(format!(
                "there is no lock on {key} (see `pantheon bus --track {} status`)",
                self.track
            )));
        };
        let entry = LockEntry::from_value(&raw_key, &locks[raw_key.as_str()]);
        let holder = entry.worker_id.clone();
        if token.is_some() {
            fencing::check_token(&key, token, Some(&entry))?;
        }
        if !force && holder.as_deref() != Some(worker) {
            return Err(Error::refused(format!(
                "{key} is held by {}, not by {worker}; only the holder may release it \
                 (an operator can use --force)",
                holder.as_deref().unwrap_or("nobody")
            )));
        }
        let forced = force && holder.as_deref() != Some(worker);
        locks.shift_remove(raw_key.as_str());
        write_json(&self.root, &self.locks_path(), &locks)?;
        let mut payload = json!({ "filepath": key });
        let source = if forced {
            payload["forced_by"] = json!(OPERATOR);
            if let Some(h) = &holder {
                payload["previous_holder"] = json!(h);
            }
            OPERATOR
        } else {
            worker
        };
        let msg = self.post(MessageType::FileUnlock, source, payload)?;
        Ok(UnlockResult {
            filepath: key,
            released_from: holder,
            forced_by: forced.then(|| OPERATOR.to_owned()),
            events: super::events::events_for(&msg),
            message_id: msg.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lock_keys_are_normalised() {
        assert_eq!(normalize_key("./a//b").unwrap(), "a/b");
        assert_eq!(normalize_key("a/b/").unwrap(), "a/b");
        assert_eq!(normalize_key("/srv//x/./y").unwrap(), "/srv/x/y");
        assert_eq!(normalize_key("../x").unwrap(), "../x");
        assert!(normalize_key("./").is_err());
        assert!(normalize_key("").is_err());
    }

    #[test]
    fn lock_keys_parse_normalised_and_refuse_what_names_no_file() {
        let k = LockKey::parse("./src//app/x.ts").unwrap();
        assert_eq!(k.as_str(), "src/app/x.ts");
        assert_eq!(k.to_string(), "src/app/x.ts");
        assert_eq!(
            "src/x.ts".parse::<LockKey>().unwrap(),
            LockKey::parse("src/./x.ts/").unwrap()
        );
        // Kept as written (PROTOCOL.md 3.4): a lock key is a name, never opened by the engine.
        assert_eq!(LockKey::parse("/srv/x").unwrap().as_str(), "/srv/x");
        assert_eq!(LockKey::parse("../x").unwrap().as_str(), "../x");
        let long = "a".repeat(crate::store::ids::FREE_TEXT_MAX + 1);
        for bad in ["", "./", "/", "//", "a\0b", &long] {
            let err = LockKey::parse(bad).unwrap_err().to_string();
            assert!(err.contains("lock path"), "{bad:?}: {err}");
        }
        assert!(
            LockKey::parse("./")
                .unwrap_err()
                .to_string()
                .contains("names no file")
        );
        assert!(serde_json::from_str::<LockKey>("\"./\"").is_err());
        assert_eq!(
            serde_json::from_str::<LockKey>("\"a//b\"")
                .unwrap()
                .as_str(),
            "a/b"
        );
        assert_eq!(WorkerId::operator().as_str(), OPERATOR);
    }

    proptest! {
        #[test]
        fn normalising_is_idempotent_and_leaves_no_empty_or_dot_segments(s in "[a-z./]{1,40}") {
            if let Ok(k) = normalize_key(&s) {
                prop_assert_eq!(normalize_key(&k).unwrap(), k.clone());
                let inner = k.strip_prefix('/').unwrap_or(&k);
                prop_assert!(inner.split('/').all(|p| !p.is_empty() && p != "."));
            }
        }
    }
}
