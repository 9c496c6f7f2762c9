//! Shared tracks (docs/NATS.md): a bus track mirrored across machines through one JetStream stream
//! per track, its locks in a KV bucket (compare-and-set on the revision, which is the fencing token;
//! expiry kept in the value, so nats-server 2.9 works) and its heartbeats in another. This module is
//! the engine side: names, the raw queue lines a bridge publishes, exactly-once appends of remote lines,
//! the stream cursor kept in the root, and the lock and heartbeat decisions. No network here.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::bus::model::Envelope;
use crate::bus::queue::{self, Line, MAX_LINE_BYTES, QueueWriter, is_valid_type};
use crate::bus::{Bus, events, fencing};
use crate::error::{Error, Result};
use crate::store::atomic::write_json;
use crate::store::ids::TrackName;
use crate::store::read::read_json;
use crate::store::time::{format_ts, now_ts, parse_ts};
use crate::store::{Root, is_valid_name};

macro_rules! mirror_field {
    () => {
        "from_pantheon"
    };
}
/// The field a mirrored queue line gains: the pantheon (machine) it was written on.
pub(crate) const MIRROR_FIELD: &str = mirror_field!();
/// What a mirrored line holds just before the pantheon's name.
const MIRRORED_TAIL: &[u8] = concat!(",\"", mirror_field!(), "\":\"").as_bytes();
/// The field marking a `locks.json` entry as a mirror of the shared lock bucket.
pub(crate) const SHARED_FIELD: &str = "shared";

/// The stream holding every pantheon's messages of `track`.
pub fn stream_name(track: &TrackName) -> String {
    format!("PANTHEON_TRACK_{track}")
}

/// The subject pantheon `from` publishes its own lines of `track` on.
pub fn subject(track: &TrackName, from: &str) -> String {
    format!("pantheon.track.{track}.{from}")
}

/// The subjects of the track's stream.
pub fn filter(track: &TrackName) -> String {
    format!("pantheon.track.{track}.*")
}

/// The pantheon a track subject names (its last token), when it is a valid name.
pub fn sender_of(subject: &str) -> Option<&str> {
    subject.rsplit('.').next().filter(|s| is_valid_name(s))
}

/// The KV bucket of the track's locks.
pub fn locks_bucket(track: &TrackName) -> String {
    format!("pantheon_locks_{track}")
}

/// The KV bucket of the track's heartbeats.
pub fn workers_bucket(track: &TrackName) -> String {
    format!("pantheon_workers_{track}")
}

/// Encodes free text (a lock path, a worker id) as a KV key: `[A-Za-z0-9_/-]` is kept, every other
/// byte is `=XX`, so no `.`, wildcard or space reaches the subject.
pub fn encode_kv_key(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'/' {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

/// The inverse of [`encode_kv_key`]; `None` for a key this encoding never makes.
pub fn decode_kv_key(k: &str) -> Option<String> {
    let b = k.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'=' {
            let hex = k.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Calls `each` with every complete envelope line at or after `offset` (the envelope, the line's bytes
/// without its newline, the offset just after it); returns the offset after the last complete line.
/// Lines that are not envelopes and lines over [`MAX_LINE_BYTES`] are passed over.
fn scan_from(path: &Path, offset: u64, mut each: impl FnMut(Envelope, &[u8], u64)) -> Result<u64> {
    let Some(mut file) = queue::open_queue(path)? else {
        return Ok(0);
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(512);
    let mut next = offset;
    loop {
        match queue::next_line(&mut reader, &mut line, MAX_LINE_BYTES)
            .map_err(|e| Error::io(path, e))?
        {
            Line::Eof | Line::Unterminated => break,
            Line::Oversized { len } => next = next.saturating_add(len),
            Line::Complete { len } => {
                next = next.saturating_add(len);
                if let Some(env) = Envelope::parse_line(&line)
                    && !env.id.is_empty()
                {
                    each(env, &line, next);
                }
            }
        }
    }
    Ok(next)
}

/// One line written on this machine, as the publisher needs it: its bytes, id and end offset.
#[derive(Debug, Clone)]
pub struct OwnLine {
    /// The line's bytes without its newline.
    pub bytes: Vec<u8>,
    /// The line's `id` (its `Nats-Msg-Id`).
    pub id: String,
    /// The queue offset just after this line.
    pub end: u64,
}

/// The fields of a queue line the publisher reads; everything else is skipped unparsed.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(default, deserialize_with = "crate::bus::model::lenient::string")]
    id: String,
    #[serde(default, rename = "from_pantheon")]
    mirrored: Option<serde::de::IgnoredAny>,
}

/// True when `line` ends the way [`mirror_line`] ends a line: `,"from_pantheon":"NAME"}`.
fn ends_as_mirrored(line: &[u8]) -> bool {
    let line = line.trim_ascii_end();
    let Some(body) = line.strip_suffix(b"\"}") else {
        return false;
    };
    let Some(q) = body.iter().rposition(|b| *b == b'"') else {
        return false;
    };
    let name = &body[q + 1..];
    let head = &body[..q + 1];
    head.ends_with(MIRRORED_TAIL) && std::str::from_utf8(name).is_ok_and(is_valid_name)
}

/// The id of a line written on this machine; `None` for a mirrored line, a line that is not an
/// envelope, or one without an id. Reads only what it needs: a mirrored line is known by its end,
/// and the id is taken without building the payload.
fn own_id(line: &[u8]) -> Option<String> {
    if ends_as_mirrored(line) || line.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let id = match serde_json::from_slice::<IdOnly>(line) {
        Ok(l) if l.mirrored.is_some() => return None,
        Ok(l) => l.id,
        // A shape the quick read refuses (a key written twice): the envelope reader decides.
        Err(_) => {
            let env = Envelope::parse_line(line)?;
            if env.extra.contains_key(MIRROR_FIELD) {
                return None;
            }
            env.id
        }
    };
    (!id.is_empty()).then_some(id)
}

/// Reads the complete lines at or after `offset` that were written on this machine (not mirrored):
/// (lines, offset after the last complete line). Lines that are not envelopes, lines without an id
/// and lines over `MAX_LINE_BYTES` are passed over, as by `read_raw_from`.
pub fn read_own_from(path: &Path, offset: u64) -> Result<(Vec<OwnLine>, u64)> {
    let Some(mut file) = queue::open_queue(path)? else {
        return Ok((Vec::new(), 0));
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::with_capacity(512);
    let (mut out, mut next) = (Vec::new(), offset);
    loop {
        match queue::next_line(&mut reader, &mut line, MAX_LINE_BYTES)
            .map_err(|e| Error::io(path, e))?
        {
            Line::Eof | Line::Unterminated => break,
            Line::Oversized { len } => next = next.saturating_add(len),
            Line::Complete { len } => {
                next = next.saturating_add(len);
                if let Some(id) = own_id(&line) {
                    out.push(OwnLine {
                        id,
                        end: next,
                        bytes: line.clone(),
                    });
                }
            }
        }
    }
    Ok((out, next))
}

/// The (device, inode) of a file, to notice a queue that was archived and replaced.
pub fn identity(path: &Path) -> Option<[u64; 2]> {
    std::fs::metadata(path).ok().map(|m| [m.dev(), m.ino()])
}

/// Turns a line received from pantheon `from` into the line appended locally: the bytes as written,
/// plus `"from_pantheon": from`. Refuses anything that is not one envelope line, a line that already
/// names a pantheon, and a line over [`MAX_LINE_BYTES`].
///
/// The envelope returned holds what the mirror reads of the line (its `id`, `type`, `source`,
/// `timestamp`, the payload's `task_id`, `filepath` and `holder`, which name event files, and
/// `from_pantheon`); the line itself is appended as it came. It is read in one pass that builds
/// nothing else (a line a mirror receives is otherwise parsed, checked and dropped at the rate the
/// stream delivers); a line that pass refuses (a key written twice) is read whole.
pub(crate) fn mirror_line(
    raw: &[u8],
    from: &str,
) -> std::result::Result<(Envelope, Vec<u8>), String> {
    if !is_valid_name(from) {
        return Err(format!("sender {from:?} is not a pantheon name"));
    }
    if raw.len() > MAX_LINE_BYTES.saturating_sub(100) {
        return Err(format!("line of {} bytes is too long", raw.len()));
    }
    if raw.iter().any(|b| *b == b'\n' || *b == b'\r') {
        return Err("a queue line cannot hold a line break".into());
    }
    let probed = (raw.trim_ascii_start().first() == Some(&b'{'))
        .then(|| serde_json::from_slice::<MirrorProbe>(raw).ok())
        .flatten();
    let mut env = match probed {
        Some(p) => p.into_envelope(),
        None => {
            let v: Value = serde_json::from_slice(raw).map_err(|e| format!("not JSON: {e}"))?;
            if !v.is_object() {
                return Err("not a JSON object".into());
            }
            serde_json::from_value(v).map_err(|_| "not an envelope")?
        }
    };
    if env.extra.contains_key(MIRROR_FIELD) {
        return Err(format!("the line already has {MIRROR_FIELD}"));
    }
    if env.id.is_empty() || env.id.len() > 200 {
        return Err("the line has no usable id".into());
    }
    if !is_valid_type(&env.kind) {
        return Err(format!("type {:?} is not a message type", env.kind));
    }
    let trimmed = raw.trim_ascii_end();
    let Some(body) = trimmed.strip_suffix(b"}") else {
        return Err("not a JSON object".into());
    };
    let mut line = Vec::with_capacity(raw.len() + 40);
    line.extend_from_slice(body);
    line.extend_from_slice(MIRRORED_TAIL);
    line.extend_from_slice(from.as_bytes());
    line.extend_from_slice(b"\"}\n");
    env.extra.insert(MIRROR_FIELD.into(), json!(from));
    Ok((env, line))
}

/// The fields of a received line the mirror reads ([`mirror_line`]); the rest is skipped unbuilt.
#[derive(Deserialize)]
struct MirrorProbe {
    #[serde(default, deserialize_with = "crate::bus::model::lenient::string")]
    id: String,
    #[serde(
        default,
        rename = "type",
        deserialize_with = "crate::bus::model::lenient::string"
    )]
    kind: String,
    #[serde(default, deserialize_with = "crate::bus::model::lenient::string")]
    source: String,
    #[serde(default, deserialize_with = "crate::bus::model::lenient::string")]
    timestamp: String,
    #[serde(default)]
    payload: EventKeys,
    /// Present (whatever its value, `null` included) when the line already names a pantheon.
    #[serde(default, rename = "from_pantheon", deserialize_with = "present")]
    mirrored: bool,
}

impl MirrorProbe {
    fn into_envelope(self) -> Envelope {
        let mut extra = Map::new();
        if self.mirrored {
            extra.insert(MIRROR_FIELD.into(), Value::Null);
        }
        Envelope {
            id: self.id,
            kind: self.kind,
            source: self.source,
            timestamp: self.timestamp,
            payload: if self.payload.0.is_empty() {
                Value::Null
            } else {
                Value::Object(self.payload.0)
            },
            extra,
        }
    }
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Ok(true)
}

/// The string values of a payload's keys that name event files (`task_id`, `filepath`, `holder`,
/// see [`events::events_for`]); any other payload, or value, reads as none.
#[derive(Default)]
struct EventKeys(Map<String, Value>);

impl<'de> Deserialize<'de> for EventKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = EventKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a payload")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<EventKeys, A::Error> {
                let mut out = Map::new();
                while let Some(k) = m.next_key::<EventKey>()? {
                    match k.0 {
                        Some(name) => match m.next_value::<Value>()? {
                            Value::String(s) => {
                                out.insert(name.into(), Value::String(s));
                            }
                            // The last value of a key written twice wins, as in a parsed object.
                            _ => {
                                out.remove(name);
                            }
                        },
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(EventKeys(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<EventKeys, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(EventKeys::default())
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
            fn visit_unit<E>(self) -> std::result::Result<EventKeys, E> {
                Ok(EventKeys::default())
            }
        }
        d.deserialize_any(Keys)
    }
}

/// A payload key: one of those [`EventKeys`] keeps, or another (read without being built).
struct EventKey(Option<&'static str>);

impl<'de> Deserialize<'de> for EventKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Key;
        impl serde::de::Visitor<'_> for Key {
            type Value = EventKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, k: &str) -> std::result::Result<EventKey, E> {
                Ok(EventKey(
                    ["task_id", "filepath", "holder"]
                        .into_iter()
                        .find(|w| *w == k),
                ))
            }
        }
        d.deserialize_str(Key)
    }
}

/// The bridge's cursor of one shared track (`conductor/bridge/tracks/{track}.json`), written
/// atomically after each batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrackCursor {
    /// The shared track.
    pub track: String,
    /// The JetStream stream it is mirrored through.
    pub stream: String,
    /// The last stream sequence whose message is applied to the local queue.
    pub stream_seq: u64,
    /// Bytes of the local queue whose lines are published (acknowledged by the server).
    pub published_offset: u64,
    /// (device, inode) of the queue `published_offset` belongs to.
    pub queue_identity: Option<[u64; 2]>,
    /// When the cursor was last written (RFC 3339).
    pub updated: String,
}

/// `conductor/bridge/tracks/`: one cursor file per shared track.
pub fn cursors_dir(root: &Root) -> PathBuf {
    super::bridge_dir(root).join("tracks")
}

/// The cursor file of one shared track.
pub(crate) fn cursor_path(root: &Root, track: &TrackName) -> PathBuf {
    cursors_dir(root).join(format!("{track}.json"))
}

/// Checks a cursor file's shape; the problems found (for `validate`).
pub(crate) fn check_cursor(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(m) = v else {
        return vec!["a track cursor must be a JSON object".into()];
    };
    match m.get("track").and_then(Value::as_str) {
        Some(t) if is_valid_name(t) => {}
        other => out.push(format!("track {other:?} is not a track name")),
    }
    for k in ["stream_seq", "published_offset"] {
        if !m.get(k).is_some_and(Value::is_u64) {
            out.push(format!("{k} must be a whole number"));
        }
    }
    match m.get("queue_identity") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.len() == 2 && a.iter().all(Value::is_u64) => {}
        Some(_) => out.push("queue_identity must be null or two whole numbers".into()),
    }
    out
}

/// The cursor of `track` (a fresh one when missing); a damaged file is an error, never a silent restart.
pub fn read_cursor(root: &Root, track: &TrackName) -> Result<TrackCursor> {
    let path = cursor_path(root, track);
    match read_json(&path)? {
        None => Ok(TrackCursor {
            track: track.to_string(),
            stream: stream_name(track),
            ..Default::default()
        }),
        Some(v) => {
            let problems = check_cursor(&v);
            if !problems.is_empty() {
                return Err(Error::refused(format!(
                    "{}: {}; repair or remove it (removing re-reads the stream, duplicates are skipped by id)",
                    path.display(),
                    problems.join("; ")
                )));
            }
            serde_json::from_value(v)
                .map_err(|e| Error::refused(format!("{}: {e}", path.display())))
        }
    }
}

/// Writes a track's cursor atomically (stamping `updated`).
pub fn write_cursor(root: &Root, track: &TrackName, c: &TrackCursor) -> Result<()> {
    let mut c = c.clone();
    c.updated = now_ts();
    write_json(root, &cursor_path(root, track), &c)
}

/// Syncs the data of the track's local queue to disk, so a cursor written next never counts a
/// mirrored line a power loss could take back (it would never be read from the stream again). A
/// missing queue has nothing to sync.
pub fn sync_queue(bus: &Bus) -> Result<()> {
    let path = bus.queue_path();
    match queue::open_queue(&path)? {
        Some(f) => f.sync_data().map_err(|e| Error::io(&path, e)),
        None => Ok(()),
    }
}

/// Appends remote lines to a local queue exactly once: every id already in the queue (read once when
/// opened) or appended since is skipped.
#[derive(Debug)]
pub struct Mirror {
    bus: Bus,
    writer: Option<QueueWriter>,
    seen: HashSet<String>,
}

impl Mirror {
    /// Opens the mirror of `bus`, reading the ids already in its queue.
    pub fn open(bus: Bus) -> Result<Self> {
        bus.require()?;
        let mut seen = HashSet::new();
        scan_from(&bus.queue_path(), 0, |env, _, _| {
            seen.insert(env.id);
        })?;
        Ok(Self {
            bus,
            writer: None,
            seen,
        })
    }

    /// Remembers an id written locally.
    pub fn note(&mut self, id: &str) {
        if !self.seen.contains(id) {
            self.seen.insert(id.to_owned());
        }
    }

    /// Appends the lines not yet in the queue, in order, as one write; returns how many. A line that
    /// is not acceptable is returned in the second list with its reason (the caller dead-letters it).
    pub fn apply<S: AsRef<str>, B: AsRef<[u8]>>(
        &mut self,
        batch: &[(S, B)],
    ) -> Result<(usize, Vec<(usize, String)>)> {
        let mut chunk = Vec::new();
        let mut envs = Vec::new();
        let mut refused = Vec::new();
        let mut fresh = HashSet::new();
        for (i, (from, raw)) in batch.iter().enumerate() {
            match mirror_line(raw.as_ref(), from.as_ref()) {
                Ok((env, line)) => {
                    if self.seen.contains(&env.id) || !fresh.insert(env.id.clone()) {
                        continue;
                    }
                    chunk.extend_from_slice(&line);
                    envs.push(env);
                }
                Err(reason) => refused.push((i, reason)),
            }
        }
        if envs.is_empty() {
            return Ok((0, refused));
        }
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(QueueWriter::open_in_place(
                &self.bus.root,
                &self.bus.queue_path(),
            )?),
        };
        if let Err(e) = writer.append_line(&chunk) {
            self.writer = None;
            return Err(e);
        }
        // One touch per event file: the last message naming it wins, as one post at a time would.
        let mut named = HashSet::new();
        let mut touch: Vec<&Envelope> = envs
            .iter()
            .rev()
            .filter(|e| {
                // Every name is recorded (no short circuit): an earlier message naming it is covered.
                let mut fresh = false;
                for n in events::events_for(e) {
                    fresh |= named.insert(n);
                }
                fresh
            })
            .collect();
        touch.reverse();
        for env in touch {
            events::touch_for(&self.bus.root, &self.bus.events_dir(), env)?;
        }
        let n = envs.len();
        self.seen.extend(envs.into_iter().map(|e| e.id));
        Ok((n, refused))
    }
}

/// A lock of a shared track as kept in the KV bucket (key: the encoded lock path). The expiry is in
/// the value; the KV revision of the entry is its fencing token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedLock {
    /// The lock key (a file path relative to the project).
    pub path: String,
    /// The holder.
    pub worker_id: String,
    /// The pantheon the holder runs in.
    pub pantheon: String,
    /// `exclusive` or `shared`.
    pub lock_type: String,
    /// When the lease was taken (RFC 3339).
    pub acquired_at: String,
    /// When it expires unless renewed (RFC 3339).
    pub expires_at: String,
}

impl SharedLock {
    /// The parsed expiry; `None` when unreadable.
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        parse_ts(&self.expires_at)
    }

    /// Live until its expiry; a value without a readable expiry is not live.
    pub(crate) fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.expires().is_some_and(|t| t > now)
    }

    /// Parses a KV value; `None` for a value over 64 KiB or not a lock.
    pub fn parse(data: &[u8]) -> Option<Self> {
        if data.len() > 64 * 1024 {
            return None;
        }
        serde_json::from_slice(data).ok()
    }
}

/// The current KV entry of a lock key: its value (None when deleted or unreadable) and revision.
#[derive(Debug, Clone)]
pub struct KvEntry {
    /// The lock, or `None` when the key is deleted or its value unreadable.
    pub lock: Option<SharedLock>,
    /// The entry's KV revision (the lease's fencing token).
    pub revision: u64,
}

/// What an acquire must do on the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStep {
    /// No live entry: create the key (or replace a deleted one).
    Create,
    /// Replace the entry at exactly this revision (renewal or takeover of an expired lease).
    Replace {
        /// The revision the entry must still have.
        revision: u64,
        /// The holder of the expired lease taken over; `None` for a renewal.
        previous: Option<String>,
    },
}

/// Decides an acquire (or, with `token`, a renewal) of `path` for `worker` on `pantheon`.
pub fn plan_acquire(
    path: &str,
    current: Option<&KvEntry>,
    worker: &str,
    pantheon: &str,
    token: Option<u64>,
    now: DateTime<Utc>,
) -> Result<LockStep> {
    let held = current.and_then(|e| e.lock.as_ref().map(|l| (l, e.revision)));
    if let Some(t) = token {
        return match held {
            Some((l, rev)) if rev == t && l.worker_id == worker && l.pantheon == pantheon => {
                Ok(LockStep::Replace {
                    revision: rev,
                    previous: None,
                })
            }
            Some((l, rev)) => Err(Error::refused(format!(
                "token {t} for {path} is stale: it is now held by {}@{} with token {rev}; your lease \
                 was lost, so acquire the lock again (without --token) before writing",
                l.worker_id, l.pantheon
            ))),
            None => Err(Error::refused(format!(
                "token {t} for {path} is stale: it is no longer locked; acquire it again"
            ))),
        };
    }
    match (current, held) {
        (None, _) => Ok(LockStep::Create),
        (Some(e), None) => Ok(LockStep::Replace {
            revision: e.revision,
            previous: None,
        }),
        (Some(_), Some((l, rev))) => {
            if l.worker_id == worker && l.pantheon == pantheon {
                Ok(LockStep::Replace {
                    revision: rev,
                    previous: None,
                })
            } else if l.is_live(now) {
                Err(Error::refused(format!(
                    "{path} is locked by {}@{} until {} (token {rev})",
                    l.worker_id, l.pantheon, l.expires_at
                )))
            } else {
                Ok(LockStep::Replace {
                    revision: rev,
                    previous: Some(format!("{}@{}", l.worker_id, l.pantheon)),
                })
            }
        }
    }
}

/// Decides a release: the revision to delete at (refused unless `worker` on `pantheon` holds it, or
/// `force`; with `token`, unless it is the current revision).
pub fn plan_release(
    path: &str,
    current: Option<&KvEntry>,
    worker: &str,
    pantheon: &str,
    token: Option<u64>,
    force: bool,
) -> Result<u64> {
    let Some((l, rev)) = current.and_then(|e| e.lock.as_ref().map(|l| (l, e.revision))) else {
        return Err(Error::not_found(format!(
            "there is no shared lock on {path}"
        )));
    };
    if let Some(t) = token
        && t != rev
    {
        return Err(Error::refused(format!(
            "token {t} for {path} is stale: it is now held by {}@{} with token {rev}",
            l.worker_id, l.pantheon
        )));
    }
    if !force && (l.worker_id != worker || l.pantheon != pantheon) {
        return Err(Error::refused(format!(
            "{path} is held by {}@{}, not by {worker}@{pantheon}; only the holder may release it",
            l.worker_id, l.pantheon
        )));
    }
    Ok(rev)
}

/// A new lock value for `worker` on `pantheon`, leased for `ttl`.
pub fn new_lock(
    path: &str,
    worker: &str,
    pantheon: &str,
    lock_type: &str,
    ttl: std::time::Duration,
    now: DateTime<Utc>,
) -> Result<SharedLock> {
    let until = crate::store::time::add(now, ttl)
        .ok_or_else(|| Error::refused("the lock's ttl leads past the year 9999"))?;
    Ok(SharedLock {
        path: path.to_owned(),
        worker_id: worker.to_owned(),
        pantheon: pantheon.to_owned(),
        lock_type: lock_type.to_owned(),
        acquired_at: format_ts(now),
        expires_at: format_ts(until),
    })
}

/// Rewrites the shared entries of `locks.json` (under `.lock_mutex`) to be exactly `locks` (path ->
/// (lock, revision)); entries without `SHARED_FIELD` are left alone unless a shared lock has
/// their path. Returns true when the file changed.
pub fn mirror_locks(bus: &Bus, locks: &BTreeMap<String, (SharedLock, u64)>) -> Result<bool> {
    bus.require()?;
    let _m = bus.mutex()?;
    let path = bus.locks_path();
    let old = crate::store::read::read_json_object(&path)?;
    let mut map: Map<String, Value> = old
        .iter()
        .filter(|(k, v)| {
            v.get(SHARED_FIELD).and_then(Value::as_bool) != Some(true) && !locks.contains_key(*k)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (p, (l, rev)) in locks {
        map.insert(
            p.clone(),
            json!({
                "worker_id": l.worker_id,
                "acquired_at": l.acquired_at,
                "expires_at": l.expires_at,
                "lock_type": l.lock_type,
                (fencing::TOKEN_FIELD): rev,
                (MIRROR_FIELD): l.pantheon,
                (SHARED_FIELD): true,
            }),
        );
    }
    if map == old {
        return Ok(false);
    }
    write_json(&bus.root, &path, &map)?;
    Ok(true)
}

/// The heartbeat entries written on this machine (no `MIRROR_FIELD`), by worker id.
pub fn local_workers(bus: &Bus) -> Result<BTreeMap<String, Value>> {
    let map = crate::store::read::read_json_object(&bus.workers_path())?;
    Ok(map
        .into_iter()
        .filter(|(_, v)| v.is_object() && v.get(MIRROR_FIELD).is_none())
        .collect())
}

/// The KV key of a worker's heartbeat: `{pantheon}.{encoded worker}`.
pub fn worker_key(pantheon: &str, worker: &str) -> String {
    format!("{pantheon}.{}", encode_kv_key(worker))
}

/// Rewrites the remote entries of `worker-status.json` (under `.lock_mutex`) to be exactly `remote`
/// (`(pantheon, worker)` -> entry), keyed `worker@pantheon` with `MIRROR_FIELD`; local entries are
/// kept. Returns true when the file changed.
pub fn mirror_workers(bus: &Bus, remote: &BTreeMap<(String, String), Value>) -> Result<bool> {
    bus.require()?;
    let _m = bus.mutex()?;
    let path = bus.workers_path();
    let old = crate::store::read::read_json_object(&path)?;
    let mut map: Map<String, Value> = old
        .iter()
        .filter(|(_, v)| v.get(MIRROR_FIELD).is_none())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for ((pantheon, worker), v) in remote {
        let Value::Object(mut e) = v.clone() else {
            continue;
        };
        e.insert(MIRROR_FIELD.into(), json!(pantheon));
        map.insert(format!("{worker}@{pantheon}"), Value::Object(e));
    }
    if map == old {
        return Ok(false);
    }
    write_json(&bus.root, &path, &map)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One complete line of a queue, as written.
    struct RawLine {
        bytes: Vec<u8>,
        env: Envelope,
        mirrored: bool,
        end: u64,
    }

    /// The complete envelope lines at or after `offset`, and the offset after the last.
    fn read_raw_from(path: &Path, offset: u64) -> Result<(Vec<RawLine>, u64)> {
        let mut out = Vec::new();
        let next = scan_from(path, offset, |env, bytes, end| {
            out.push(RawLine {
                mirrored: env.extra.contains_key(MIRROR_FIELD),
                end,
                bytes: bytes.to_vec(),
                env,
            })
        })?;
        Ok((out, next))
    }

    #[test]
    fn kv_keys_round_trip_and_never_hold_separators() {
        for s in ["src/app/x.ts", "a b*c>d", "w=1", "..", "ünï"] {
            let k = encode_kv_key(s);
            assert!(
                k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-/=".contains(&b)),
                "{k}"
            );
            assert_eq!(decode_kv_key(&k).as_deref(), Some(s));
        }
        assert_eq!(decode_kv_key("=G1"), None);
    }

    #[test]
    fn mirrored_lines_keep_their_bytes_and_gain_the_sender() {
        let raw = br#"{"id":"msg-1","type":"PROGRESS","source":"w","timestamp":"2026-01-01T00:00:00.50Z","payload":{"x":1.50}}"#;
        let (env, line) = mirror_line(raw, "konan").unwrap();
        assert_eq!(env.id, "msg-1");
        let text = String::from_utf8(line).unwrap();
        assert!(text.starts_with(&String::from_utf8_lossy(&raw[..raw.len() - 1]).to_string()));
        assert!(text.ends_with(",\"from_pantheon\":\"konan\"}\n"), "{text}");
        assert!(mirror_line(text.trim_end().as_bytes(), "tallon").is_err());
        assert!(mirror_line(b"{\"id\":\"a\",\"type\":\"bad\"}", "k").is_err());
        assert!(mirror_line(b"{\"id\":\"a\",\n\"type\":\"X\"}", "k").is_err());
        assert!(mirror_line(raw, "no.dots").is_err());
    }

    #[test]
    fn the_one_pass_read_of_a_received_line_agrees_with_a_whole_parse() {
        let lines: &[&[u8]] = &[
            br#"{"id":"m1","type":"TASK_COMPLETE","source":"w","timestamp":"t","payload":{"task_id":"1.2","x":[1,{"task_id":"no"}]}}"#,
            br#"{"id":"m2","type":"FILE_UNLOCK","payload":{"filepath":"src/a\"b.ts","filepath":"src/c.ts"}}"#,
            br#"{"id":"m3","type":"FILE_UNLOCK","payload":{"filepath":"src/a.ts","filepath":7}}"#,
            br#"{"id":"m4","type":"LOCK_LOST","payload":{"hol\u0064er":"w2"}}"#,
            br#"{"id":"m5","type":"TASK_FAILED","payload":["task_id","x"]}"#,
            br#"{"id":"m6","type":"BOARD_RESOLVE","payload":null,"extra":{"from_pantheon":"x"}}"#,
            br#"{"id":7,"type":"TASK_COMPLETE","source":true,"payload":"task_id"}"#,
            // A key written twice: the one-pass read refuses it, the whole parse decides.
            br#"{"id":"m8","id":"m9","type":"PROGRESS","payload":{}}"#,
        ];
        for raw in lines {
            // The whole parse: the line as a value, then the envelope (the last of a key wins).
            let whole: Envelope =
                serde_json::from_value(serde_json::from_slice::<Value>(raw).unwrap()).unwrap();
            let (env, line) = mirror_line(raw, "konan").unwrap();
            let text = String::from_utf8_lossy(raw);
            assert_eq!(env.id, whole.id, "{text}");
            assert_eq!(env.kind, whole.kind, "{text}");
            assert_eq!(env.source, whole.source, "{text}");
            assert_eq!(
                events::events_for(&env),
                events::events_for(&whole),
                "{text}"
            );
            assert!(line.ends_with(b",\"from_pantheon\":\"konan\"}\n"));
        }
        // Already mirrored, whatever the value; not an object; not JSON.
        for raw in [
            &br#"{"id":"a","type":"X","from_pantheon":null}"#[..],
            br#"["a","X"]"#,
            br#"{"id":"a","type":"X""#,
        ] {
            assert!(
                mirror_line(raw, "konan").is_err(),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn the_publisher_reads_only_this_machines_lines_and_their_ids() {
        let raw = br#"{"id":"msg-1","type":"PROGRESS","source":"w","timestamp":"t","payload":{"x":[1,{"y":"}"}]}}"#;
        assert_eq!(own_id(raw).as_deref(), Some("msg-1"));
        let (_, mirrored) = mirror_line(raw, "konan").unwrap();
        assert_eq!(own_id(mirrored.trim_ascii_end()), None, "known by its end");
        // from_pantheon anywhere marks a line as mirrored, as the envelope reader says.
        assert_eq!(own_id(br#"{"from_pantheon":"x","id":"m2"}"#), None);
        // No id, not an object, not JSON: passed over. A key written twice: the envelope reader.
        for bad in [
            &br#"{"type":"X"}"#[..],
            br#"["m3"]"#,
            b"not json",
            br#"{"id":""}"#,
        ] {
            assert_eq!(own_id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(own_id(br#"{"id":"a","id":"b"}"#).as_deref(), Some("b"));
        assert_eq!(own_id(br#"{"id":7}"#).as_deref(), Some("7"));
        // The same lines, the same ends, as read_raw_from.
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        let a = bus
            .post(
                crate::bus::vocab::MessageType::Progress,
                "w",
                json!({"n": 0}),
            )
            .unwrap();
        let mut m = Mirror::open(bus.clone()).unwrap();
        let remote = br#"{"id":"r1","type":"PROGRESS","source":"x","timestamp":"2026-01-01T00:00:00Z","payload":{}}"#;
        m.apply(&[("tallon", remote.to_vec())]).unwrap();
        let b = bus
            .post(
                crate::bus::vocab::MessageType::Progress,
                "w",
                json!({"n": 1}),
            )
            .unwrap();
        let (own, next) = read_own_from(&bus.queue_path(), 0).unwrap();
        let (all, next_all) = read_raw_from(&bus.queue_path(), 0).unwrap();
        assert_eq!(next, next_all);
        let ids: Vec<&str> = own.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, [a.id.as_str(), b.id.as_str()]);
        let expect: Vec<(u64, &[u8])> = all
            .iter()
            .filter(|l| !l.mirrored)
            .map(|l| (l.end, l.bytes.as_slice()))
            .collect();
        let got: Vec<(u64, &[u8])> = own.iter().map(|l| (l.end, l.bytes.as_slice())).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn a_mirror_appends_each_id_once() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::open(&Root::at(dir.path()), &"t".parse().unwrap());
        bus.init().unwrap();
        let local = bus
            .post(
                crate::bus::vocab::MessageType::Progress,
                "w",
                json!({"n": 0}),
            )
            .unwrap();
        let mut m = Mirror::open(bus.clone()).unwrap();
        assert!(m.seen.contains(&local.id));
        let line = |id: &str| {
            format!(r#"{{"id":"{id}","type":"PROGRESS","source":"r","timestamp":"2026-01-01T00:00:00Z","payload":{{}}}}"#)
                .into_bytes()
        };
        let batch = vec![
            ("konan".to_owned(), line("r1")),
            ("konan".to_owned(), line("r1")),
            ("konan".to_owned(), line("r2")),
            ("konan".to_owned(), b"junk".to_vec()),
        ];
        let (n, refused) = m.apply(&batch).unwrap();
        assert_eq!((n, refused.len()), (2, 1));
        assert_eq!(m.apply(&batch).unwrap().0, 0);
        // A restart reads the ids back from the queue.
        let mut again = Mirror::open(bus.clone()).unwrap();
        assert_eq!(again.apply(&batch).unwrap().0, 0);
        let (lines, _) = read_raw_from(&bus.queue_path(), 0).unwrap();
        let ids: Vec<_> = lines
            .iter()
            .map(|l| (l.env.id.as_str(), l.mirrored))
            .collect();
        assert_eq!(
            ids,
            [(local.id.as_str(), false), ("r1", true), ("r2", true)]
        );
    }

    #[test]
    fn locks_are_refused_while_live_and_stale_tokens_never_pass() {
        let now = Utc::now();
        let l = new_lock(
            "a",
            "w1",
            "konan",
            "exclusive",
            std::time::Duration::from_secs(60),
            now,
        )
        .unwrap();
        let held = KvEntry {
            lock: Some(l.clone()),
            revision: 7,
        };
        assert_eq!(
            plan_acquire("a", None, "w2", "tallon", None, now).unwrap(),
            LockStep::Create
        );
        assert!(plan_acquire("a", Some(&held), "w2", "tallon", None, now).is_err());
        // Same worker name on another machine is another holder.
        assert!(plan_acquire("a", Some(&held), "w1", "tallon", None, now).is_err());
        assert!(matches!(
            plan_acquire("a", Some(&held), "w1", "konan", Some(7), now).unwrap(),
            LockStep::Replace { revision: 7, .. }
        ));
        assert!(plan_acquire("a", Some(&held), "w1", "konan", Some(6), now).is_err());
        let later = now + chrono::Duration::seconds(120);
        assert_eq!(
            plan_acquire("a", Some(&held), "w2", "tallon", None, later).unwrap(),
            LockStep::Replace {
                revision: 7,
                previous: Some("w1@konan".into())
            }
        );
        assert_eq!(
            plan_release("a", Some(&held), "w1", "konan", Some(7), false).unwrap(),
            7
        );
        assert!(plan_release("a", Some(&held), "w1", "konan", Some(3), false).is_err());
        assert!(plan_release("a", Some(&held), "w2", "tallon", None, false).is_err());
        assert_eq!(
            plan_release("a", Some(&held), "op", "tallon", None, true).unwrap(),
            7
        );
    }

    #[test]
    fn cursors_are_checked() {
        assert!(
            check_cursor(&json!({"track": "t", "stream_seq": 1, "published_offset": 0})).is_empty()
        );
        assert_eq!(
            check_cursor(&json!({"track": "../x", "stream_seq": -1})).len(),
            3
        );
        assert!(!check_cursor(&json!([])).is_empty());
    }
}
