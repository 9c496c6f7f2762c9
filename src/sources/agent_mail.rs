//! `agent-mail:ARCHIVE[,DB]`: MCP Agent Mail's storage, read-only (docs/SOURCES.md).
//!
//! ARCHIVE is its storage root (`STORAGE_ROOT`, by default `~/.mcp_agent_mail_git_mailbox_repo`):
//! `projects/{slug}/agents/{name}/profile.json` (the agents), `projects/{slug}/messages/YYYY/MM/*.md`
//! (each message once, as Markdown after a `---json` front matter: `id`, `from`, `to`, `cc`,
//! `subject`, `importance`, `ack_required`, `created`, `thread_id`, …) and
//! `projects/{slug}/file_reservations/*.json` (the reservations). DB is its SQLite file
//! (`DATABASE_URL`, by default `./storage.sqlite3`): the read and ack state of each recipient
//! (`message_recipients`) and the reservations as they stand (released or not), read through a
//! read-only connection that takes no lock a writer waits for (WAL readers never block writers).
//! Without DB the read state is unknown and reservations come from the archive's records.
//!
//! Attention: a message that requires an ack, unacked by a recipient past [`ACK_AFTER`]
//! (`PANTHEON_AGENT_MAIL_ACK_AFTER_SECS` overrides it); a file that cannot be read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::{Value, json};

use super::files::{MAX_FILE_BYTES, MAX_TEXT, clean, list_dir, read_bounded};
use super::{Agent, Attention, Lock, Message, Snapshot, Source, SourceError};

/// How long a message that requires an ack may stay unacked before it is an attention item.
pub(crate) const ACK_AFTER: Duration = Duration::from_secs(10 * 60);
/// The variable that overrides [`ACK_AFTER`], in seconds (read, never written).
pub(crate) const ACK_AFTER_ENV: &str = "PANTHEON_AGENT_MAIL_ACK_AFTER_SECS";
/// The most recipient rows and reservations read from the database in one read.
const MAX_ROWS: usize = 500_000;

/// Length, modification time and inode of a file.
type Fingerprint = (u64, i64, i64, u64);
/// A message file's front matter and body, or why it cannot be read.
type Parsed = Result<(Value, String), String>;

/// The agent-mail source.
pub(crate) struct AgentMail {
    location: String,
    archive: PathBuf,
    db: Option<PathBuf>,
    ack_after: chrono::Duration,
    /// Each message file's fingerprint and parsed front matter and body.
    cache: HashMap<PathBuf, (Fingerprint, Parsed)>,
}

impl AgentMail {
    /// The source at `ARCHIVE[,DB]`.
    pub(crate) fn new(location: &str) -> Result<Self, SourceError> {
        let (archive, db) = match location.split_once(',') {
            Some((a, d)) => (a, Some(d)),
            None => (location, None),
        };
        let expand = |p: &str| -> PathBuf {
            match (p.strip_prefix("~/"), crate::engine::home_dir()) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => PathBuf::from(p),
            }
        };
        let secs = std::env::var(ACK_AFTER_ENV)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|s| *s >= 0);
        Ok(Self {
            location: location.to_owned(),
            archive: crate::engine::absolute_path(&expand(archive)),
            db: db
                .filter(|d| !d.is_empty())
                .map(|d| crate::engine::absolute_path(&expand(d))),
            ack_after: secs.map_or(
                chrono::Duration::seconds(ACK_AFTER.as_secs() as i64),
                chrono::Duration::seconds,
            ),
            cache: HashMap::new(),
        })
    }
}

impl Source for AgentMail {
    fn kind(&self) -> &'static str {
        "agent-mail"
    }

    fn location(&self) -> &str {
        &self.location
    }

    fn read(&mut self) -> Result<Snapshot, SourceError> {
        let projects = list_dir(&self.archive.join("projects"))?.ok_or_else(|| {
            SourceError::new(format!(
                "{}: no projects/ directory; give MCP Agent Mail's STORAGE_ROOT (agent-mail:ARCHIVE[,DB])",
                self.archive.display()
            ))
        })?;
        let state = match &self.db {
            Some(db) => Some(read_db(db)?),
            None => None,
        };
        let mut snap = Snapshot::default();
        let mut seen = Vec::new();
        for (slug, dir, is_dir) in projects {
            if is_dir {
                self.read_project(&slug, &dir, &mut snap, &mut seen)?;
            }
        }
        let keep: std::collections::HashSet<PathBuf> = seen.into_iter().collect();
        self.cache.retain(|p, _| keep.contains(p));
        if let Some(st) = &state {
            snap.locks = st.locks.clone();
            self.ack_items(&mut snap, st, Utc::now());
        }
        // A key is shown (the item's record): foreign ids in it are cleaned like any text.
        for a in &mut snap.attention {
            a.key = clean(&a.key, MAX_TEXT);
        }
        Ok(snap)
    }

    fn watch_paths(&self) -> Vec<PathBuf> {
        let mut w = vec![self.archive.join("projects")];
        if let Some(dir) = self.db.as_ref().and_then(|d| d.parent()) {
            w.push(dir.to_path_buf());
        }
        w
    }

    fn poll_every(&self) -> Duration {
        // Time alone makes an unacked message overdue: read at least this often.
        Duration::from_secs(2)
    }
}

impl AgentMail {
    fn read_project(
        &mut self,
        slug: &str,
        dir: &Path,
        snap: &mut Snapshot,
        seen: &mut Vec<PathBuf>,
    ) -> Result<(), SourceError> {
        let group = Some(clean(slug, 200));
        for (name, adir, is_dir) in list_dir(&dir.join("agents"))?.unwrap_or_default() {
            if !is_dir {
                continue;
            }
            let profile = adir.join("profile.json");
            let raw = match read_bounded(&profile, MAX_FILE_BYTES) {
                Ok(Some(b)) => serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null),
                Ok(None) => Value::Null,
                Err(e) => {
                    unreadable(snap, &profile, &e.reason);
                    continue;
                }
            };
            snap.agents.push(Agent {
                name: clean(&name, 200),
                group: group.clone(),
                status: raw
                    .get("program")
                    .and_then(Value::as_str)
                    .map(|p| clean(p, 100)),
                raw,
            });
        }
        for (_, ydir, is_dir) in list_dir(&dir.join("messages"))?.unwrap_or_default() {
            if !is_dir {
                continue;
            }
            for (_, mdir, is_dir) in list_dir(&ydir)?.unwrap_or_default() {
                if !is_dir {
                    continue;
                }
                for (file, path, is_dir) in list_dir(&mdir)?.unwrap_or_default() {
                    if is_dir || !file.ends_with(".md") {
                        continue;
                    }
                    seen.push(path.clone());
                    match self.message(&path) {
                        Ok((front, body)) => snap.messages.push(message(slug, front, &body)),
                        Err(why) => unreadable(snap, &path, &why),
                    }
                }
            }
        }
        if self.db.is_none() {
            for (file, path, is_dir) in
                list_dir(&dir.join("file_reservations"))?.unwrap_or_default()
            {
                if is_dir || !file.ends_with(".json") {
                    continue;
                }
                match read_bounded(&path, MAX_FILE_BYTES)
                    .map_err(|e| e.reason)
                    .and_then(|b| {
                        serde_json::from_slice::<Value>(&b.unwrap_or_default())
                            .map_err(|e| e.to_string())
                    }) {
                    Ok(v) => {
                        if v.get("released_ts").is_none_or(Value::is_null) {
                            snap.locks.push(lock_of(&v));
                        }
                    }
                    Err(why) => unreadable(snap, &path, &why),
                }
            }
        }
        snap.messages
            .sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(())
    }

    /// A message file's front matter and body, through the cache.
    fn message(&mut self, path: &Path) -> Result<(Value, String), String> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
        let fp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
        if let Some((seen, v)) = self.cache.get(path)
            && *seen == fp
        {
            return v.clone();
        }
        let parsed = read_bounded(path, MAX_FILE_BYTES)
            .map_err(|e| e.reason)
            .and_then(|b| parse_markdown(&String::from_utf8_lossy(&b.unwrap_or_default())));
        self.cache.insert(path.to_path_buf(), (fp, parsed.clone()));
        parsed
    }

    /// The recipients who have not acked a message that requires it, past the threshold.
    fn ack_items(&self, snap: &mut Snapshot, st: &DbState, now: DateTime<Utc>) {
        for r in &st.recipients {
            if !r.ack_required || r.ack_ts.is_some() {
                continue;
            }
            let Some(created) = r.created else { continue };
            if now - created < self.ack_after {
                continue;
            }
            snap.attention.push(Attention {
                key: format!("ack/{}/{}/{}", r.project, r.message_id, r.recipient),
                agent: clean(&r.recipient, 200),
                what: format!(
                    "{} has not acknowledged message {} \"{}\" from {} in {} ({}; acks are due within {} min)",
                    clean(&r.recipient, 200),
                    r.message_id,
                    clean(&r.subject, 200),
                    clean(&r.sender, 200),
                    clean(&r.project, 200),
                    if r.read_ts.is_some() { "read" } else { "not even read" },
                    self.ack_after.num_minutes()
                ),
                since: Some(created),
                answerable: false,
                raw: json!({
                    "message_id": r.message_id, "project": r.project, "recipient": r.recipient,
                    "sender": r.sender, "subject": r.subject, "read_ts": r.read_ts, "ack_ts": r.ack_ts,
                }),
            });
        }
        // The read state goes beside each message's raw front matter, as the database has it.
        let mut by_message: BTreeMap<(String, i64), Vec<Value>> = BTreeMap::new();
        for r in &st.recipients {
            by_message
                .entry((r.project.clone(), r.message_id))
                .or_default()
                .push(json!({"name": r.recipient, "kind": r.kind, "read_ts": r.read_ts, "ack_ts": r.ack_ts}));
        }
        for m in &mut snap.messages {
            let id = m.raw.get("id").and_then(Value::as_i64);
            let slug = m.group.clone().unwrap_or_default();
            if let (Some(id), Some(obj)) = (id, m.raw.as_object_mut())
                && let Some(rs) = by_message.remove(&(slug, id))
            {
                obj.insert("recipients_state".into(), Value::Array(rs));
            }
        }
    }
}

fn unreadable(snap: &mut Snapshot, path: &Path, why: &str) {
    snap.attention.push(Attention {
        key: format!("unreadable/{}", path.display()),
        agent: String::new(),
        what: clean(&format!("cannot read {}: {why}", path.display()), MAX_TEXT),
        since: None,
        answerable: false,
        raw: Value::Null,
    });
}

/// `---json\n{…}\n---\n\nbody`: the front matter (a JSON object) and the body.
pub(crate) fn parse_markdown(text: &str) -> Result<(Value, String), String> {
    let rest = text
        .strip_prefix("---json\n")
        .ok_or("no `---json` front matter at the start")?;
    let end = rest
        .find("\n---\n")
        .or_else(|| rest.strip_suffix("\n---").map(str::len))
        .ok_or("the front matter has no closing `---`")?;
    let front: Value =
        serde_json::from_str(&rest[..end]).map_err(|e| format!("front matter: {e}"))?;
    if !front.is_object() {
        return Err("the front matter is not a JSON object".into());
    }
    let body = rest.get(end + 5..).unwrap_or("").trim().to_owned();
    Ok((front, body))
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| clean(s, 200))
                .collect()
        })
        .unwrap_or_default()
}

fn message(slug: &str, front: Value, body: &str) -> Message {
    let id = match front.get("id") {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => clean(s, 100),
        _ => "?".into(),
    };
    let mut to = names(&front, "to");
    to.extend(names(&front, "cc"));
    Message {
        id: format!("{}/{id}", clean(slug, 200)),
        group: Some(clean(slug, 200)),
        from: clean(
            front.get("from").and_then(Value::as_str).unwrap_or("?"),
            200,
        ),
        to,
        at: front
            .get("created")
            .or_else(|| front.get("created_ts"))
            .and_then(Value::as_str)
            .and_then(db_time),
        subject: front
            .get("subject")
            .and_then(Value::as_str)
            .map(|s| clean(s, 500)),
        body: clean(body, MAX_TEXT),
        raw: front,
    }
}

fn lock_of(v: &Value) -> Lock {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    Lock {
        path: clean(s("path_pattern"), 500),
        holder: clean(
            if s("agent").is_empty() {
                "?"
            } else {
                s("agent")
            },
            200,
        ),
        expires: v
            .get("expires_ts")
            .and_then(Value::as_str)
            .and_then(db_time),
        raw: v.clone(),
    }
}

/// A time as Agent Mail stores it: ISO 8601 with or without an offset (the database's naive
/// times are UTC), with a space or a `T`.
pub(crate) fn db_time(s: &str) -> Option<DateTime<Utc>> {
    crate::engine::time::parse_ts(s).or_else(|| {
        ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(s.trim(), f).ok())
            .map(|n| n.and_utc())
    })
}

/// One recipient of one message, as the database has it.
#[derive(Debug, Clone)]
struct Recipient {
    message_id: i64,
    project: String,
    sender: String,
    subject: String,
    ack_required: bool,
    created: Option<DateTime<Utc>>,
    recipient: String,
    kind: String,
    read_ts: Option<String>,
    ack_ts: Option<String>,
}

/// What the database adds to the archive.
#[derive(Debug, Default)]
struct DbState {
    recipients: Vec<Recipient>,
    locks: Vec<Lock>,
}

/// Reads the read and ack state and the standing reservations from Agent Mail's SQLite file,
/// read-only: no write, no lock a writer waits for, a busy database retried for at most 200 ms.
fn read_db(path: &Path) -> Result<DbState, SourceError> {
    use rusqlite::OpenFlags;
    let err = |e: rusqlite::Error| {
        SourceError::new(format!(
            "{}: {e}; check that it is MCP Agent Mail's database (agent-mail:ARCHIVE,DB)",
            path.display()
        ))
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(SourceError::new(format!(
                "{}: not a regular file (links are not followed)",
                path.display()
            )));
        }
        Err(e) => {
            return Err(SourceError::new(format!(
                "{}: {e}; give MCP Agent Mail's database (DATABASE_URL's file)",
                path.display()
            )));
        }
    }
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(Duration::from_millis(200)).map_err(err)?;
    conn.pragma_update(None, "query_only", true).map_err(err)?;
    let mut st = DbState::default();
    let mut q = conn
        .prepare(
            "SELECT m.id, p.slug, s.name, m.subject, m.ack_required, m.created_ts, a.name, r.kind, \
             r.read_ts, r.ack_ts FROM message_recipients r JOIN messages m ON m.id = r.message_id \
             JOIN projects p ON p.id = m.project_id JOIN agents s ON s.id = m.sender_id \
             JOIN agents a ON a.id = r.agent_id ORDER BY m.id LIMIT ?1",
        )
        .map_err(err)?;
    let rows = q
        .query_map([MAX_ROWS as i64], |r| {
            Ok(Recipient {
                message_id: r.get(0)?,
                project: r.get(1)?,
                sender: r.get(2)?,
                subject: r.get(3)?,
                ack_required: r.get::<_, Option<bool>>(4)?.unwrap_or(false),
                created: r.get::<_, Option<String>>(5)?.as_deref().and_then(db_time),
                recipient: r.get(6)?,
                kind: r.get::<_, Option<String>>(7)?.unwrap_or_default(),
                read_ts: r.get(8)?,
                ack_ts: r.get(9)?,
            })
        })
        .map_err(err)?;
    for r in rows {
        st.recipients.push(r.map_err(err)?);
    }
    let mut q = conn
        .prepare(
            "SELECT f.id, p.slug, a.name, f.path_pattern, f.exclusive, f.reason, f.created_ts, \
             f.expires_ts FROM file_reservations f JOIN projects p ON p.id = f.project_id \
             JOIN agents a ON a.id = f.agent_id WHERE f.released_ts IS NULL ORDER BY f.id LIMIT ?1",
        )
        .map_err(err)?;
    let rows = q
        .query_map([MAX_ROWS as i64], |r| {
            Ok(json!({
                "id": r.get::<_, i64>(0)?, "project": r.get::<_, String>(1)?,
                "agent": r.get::<_, String>(2)?, "path_pattern": r.get::<_, String>(3)?,
                "exclusive": r.get::<_, Option<bool>>(4)?, "reason": r.get::<_, Option<String>>(5)?,
                "created_ts": r.get::<_, Option<String>>(6)?, "expires_ts": r.get::<_, Option<String>>(7)?,
            }))
        })
        .map_err(err)?;
    for r in rows {
        st.locks.push(lock_of(&r.map_err(err)?));
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_matter_and_the_body_are_split_and_a_bad_file_says_why() {
        let (f, b) =
            parse_markdown("---json\n{\"id\": 3, \"to\": [\"B\"]}\n---\n\nhello\n").unwrap();
        assert_eq!(f["id"], 3);
        assert_eq!(b, "hello");
        assert!(
            parse_markdown("# no front")
                .unwrap_err()
                .contains("---json")
        );
        assert!(
            parse_markdown("---json\n[1]\n---\n")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            parse_markdown("---json\n{\"id\": \n")
                .unwrap_err()
                .contains("closing")
        );
        assert_eq!(
            db_time("2026-12-06 15:10:00.123456").unwrap().to_rfc3339(),
            "2026-12-06T15:10:00.123456+00:00"
        );
    }
}
