//! Pauses across pantheons (docs/NATS.md "Pauses"): what this root has paused, announced to its peers
//! on `pantheon.{name}.paused`, and a peer's announcement read as hostile input. No network here;
//! `pantheon bridge` (src/bridge/pauses.rs) publishes and subscribes.
//!
//! An announcement carries the whole list of pauses in force, not a change: the latest one a peer
//! received is what is paused there, and an empty list means nothing is. It is sent when the list
//! changes (a pause, a resume, a resume by `--until`), when the bridge starts or reconnects, and
//! every `every_s` seconds, so a late peer learns it and a silent peer's pauses expire
//! ([`SILENT_AFTER_ANNOUNCEMENTS`] announcements missed).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::peer::Peers;
use crate::store::Root;
use crate::store::paused::{Pause, PauseKind, check_entry, read_file};
use crate::store::time::{format_ts, parse_ts};

/// The subject a pantheon announces its pauses on: `pantheon.{name}.paused`.
pub fn pause_subject(pantheon: &str) -> String {
    format!("pantheon.{pantheon}.paused")
}

/// The subscription that hears every pantheon's announcements.
pub const PAUSE_SUBJECTS: &str = "pantheon.*.paused";
/// The largest announcement read (a larger one is refused).
pub const MAX_ANNOUNCEMENT_BYTES: usize = 256 * 1024;
/// The most pauses one announcement carries (the rest are counted in `more`).
pub const MAX_ANNOUNCED: usize = 200;
/// The longest reason announced, in bytes (cut at a character boundary, `…` added).
const MAX_REASON: usize = 500;
/// A peer's pauses expire when this many of its announcements are missed.
pub const SILENT_AFTER_ANNOUNCEMENTS: u32 = 3;
/// The slowest announcement period a peer may claim, in seconds.
const MAX_EVERY_S: u64 = 3600;

/// One pause as announced: the fields of `conductor/paused.json` a peer needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnouncedPause {
    /// The pause's id in its root.
    pub id: String,
    /// What is paused there (`god`, `workflow`, `track`, `peer`, `all`).
    pub kind: PauseKind,
    /// The god, workflow, track or peer (absent for `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who paused.
    pub by: String,
    /// Why (at most 500 bytes).
    pub reason: String,
    /// When it began (RFC 3339).
    pub since: String,
    /// When it ends by itself, if ever.
    #[serde(default)]
    pub until: Option<String>,
    /// Set while its resume runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resuming_at: Option<String>,
}

/// The message on `pantheon.{name}.paused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseAnnouncement {
    /// The format's version (1).
    pub pantheon_pauses: u32,
    /// The announcing pantheon (the subject's second token).
    pub from_pantheon: String,
    /// When it was sent (RFC 3339).
    pub at: String,
    /// Seconds until the next announcement at the latest.
    pub every_s: u64,
    /// The pauses in force there, oldest first.
    pub pauses: Vec<AnnouncedPause>,
    /// Pauses in force left out past [`MAX_ANNOUNCED`].
    #[serde(default)]
    pub more: usize,
}

/// What this root has paused, as an announcement: `Err` names `conductor/paused.json` when it cannot
/// be read (nothing is announced then: a peer keeps the last list until it expires).
pub fn pause_announcement(
    root: &Root,
    from: &str,
    every_s: u64,
    now: DateTime<Utc>,
) -> crate::error::Result<PauseAnnouncement> {
    let file = read_file(root)?;
    let more = file.pauses.len().saturating_sub(MAX_ANNOUNCED);
    Ok(PauseAnnouncement {
        pantheon_pauses: 1,
        from_pantheon: from.to_owned(),
        at: format_ts(now),
        every_s,
        pauses: file
            .pauses
            .iter()
            .take(MAX_ANNOUNCED)
            .map(announced)
            .collect(),
        more,
    })
}

fn announced(p: &Pause) -> AnnouncedPause {
    let mut reason = p.reason.clone();
    if reason.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        reason.push('…');
    }
    AnnouncedPause {
        id: p.id.clone(),
        kind: p.kind,
        name: p.name.clone(),
        by: p.by.clone(),
        reason,
        since: p.since.clone(),
        until: p.until.clone(),
        resuming_at: p.resuming_at.clone(),
    }
}

/// The JSON bytes of an announcement.
pub fn encode_pause_announcement(a: &PauseAnnouncement) -> Vec<u8> {
    crate::store::json_text(a, false)
}

/// A peer's pauses as this bridge last heard them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPauses {
    /// The peer.
    pub peer: String,
    /// Its pauses in force.
    pub pauses: Vec<AnnouncedPause>,
    /// Its pauses left out of the announcement.
    pub more: usize,
    /// When the peer sent it.
    pub announced_at: String,
    /// When it was received here.
    pub received_at: String,
    /// When it is forgotten unless the peer announces again.
    pub expires_at: String,
}

/// Why an announcement heard on `pantheon.*.paused` is not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotBelieved {
    /// A well-formed announcement from a pantheon not on the `--peer` list: on a server shared by
    /// pantheons that are not all peers this is the usual case, not an error of this bridge.
    Stranger(String),
    /// A malformed, forged or out-of-bounds announcement, naming why.
    Refused(String),
}

impl std::fmt::Display for NotBelieved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stranger(name) => write!(
                f,
                "pause announcement from {name} ignored: not a peer (run the bridge with --peer {name})"
            ),
            Self::Refused(why) => f.write_str(why),
        }
    }
}

impl From<String> for NotBelieved {
    fn from(why: String) -> Self {
        Self::Refused(why)
    }
}

/// Reads a peer's announcement received on `subject` at `now`. Refuses (naming why) one that is too
/// large, not JSON of this shape, from this pantheon itself, whose `from_pantheon` is not the
/// subject's pantheon, or whose pauses fail the checks of `conductor/paused.json` (docs/PROTOCOL.md
/// §2.14); one from a pantheon not on the `--peer` list is a [`NotBelieved::Stranger`].
pub fn parse_pause_announcement(
    subject: &str,
    data: &[u8],
    me: &str,
    peers: &Peers,
    now: DateTime<Utc>,
) -> std::result::Result<PeerPauses, NotBelieved> {
    if data.len() > MAX_ANNOUNCEMENT_BYTES {
        return Err(NotBelieved::Refused(format!(
            "pause announcement on {subject} is {} bytes, more than {MAX_ANNOUNCEMENT_BYTES}",
            data.len()
        )));
    }
    let a: PauseAnnouncement = serde_json::from_slice(data).map_err(|e| {
        NotBelieved::Refused(format!(
            "pause announcement on {subject} is not one (docs/NATS.md): {e}"
        ))
    })?;
    if a.pantheon_pauses != 1 {
        return Err(NotBelieved::Refused(format!(
            "pause announcement on {subject}: version {} is not 1",
            a.pantheon_pauses
        )));
    }
    if subject != pause_subject(&a.from_pantheon) {
        return Err(NotBelieved::Refused(format!(
            "pause announcement on {subject} claims to be from {:?}, whose subject is another",
            a.from_pantheon
        )));
    }
    if a.from_pantheon == me {
        return Err(NotBelieved::Refused(format!(
            "pause announcement on {subject} is this pantheon's own"
        )));
    }
    if !peers.allows(&a.from_pantheon) {
        return Err(NotBelieved::Stranger(a.from_pantheon));
    }
    if a.pauses.len() > MAX_ANNOUNCED {
        return Err(NotBelieved::Refused(format!(
            "pause announcement from {}: {} pauses, more than {MAX_ANNOUNCED}",
            a.from_pantheon,
            a.pauses.len()
        )));
    }
    let Some(sent) = parse_ts(&a.at) else {
        return Err(NotBelieved::Refused(format!(
            "pause announcement from {}: at {:?} is not an RFC 3339 time",
            a.from_pantheon, a.at
        )));
    };
    for p in &a.pauses {
        let entry = Pause {
            id: p.id.clone(),
            kind: p.kind,
            name: p.name.clone(),
            by: p.by.clone(),
            source: String::new(),
            reason: p.reason.clone(),
            since: p.since.clone(),
            until: p.until.clone(),
            resuming_at: p.resuming_at.clone(),
            resumed_at: None,
            resumed_by: None,
            extra: Default::default(),
        };
        check_entry(&entry).map_err(|why| {
            NotBelieved::Refused(format!(
                "pause announcement from {}: pause {:?}: {why}",
                a.from_pantheon, p.id
            ))
        })?;
    }
    let every = a.every_s.clamp(1, MAX_EVERY_S);
    let silent = chrono::Duration::seconds((every * u64::from(SILENT_AFTER_ANNOUNCEMENTS)) as i64);
    Ok(PeerPauses {
        peer: a.from_pantheon,
        pauses: a.pauses,
        more: a.more,
        announced_at: format_ts(sent),
        received_at: format_ts(now),
        expires_at: format_ts(now + silent),
    })
}

/// Whether a peer's pauses are still to be believed at `now` (not expired and not empty).
pub fn peer_pauses_live(p: &PeerPauses, now: DateTime<Utc>) -> bool {
    !p.pauses.is_empty() && parse_ts(&p.expires_at).is_some_and(|t| t > now)
}

/// The peers' pauses the running bridge last wrote into its status file (`peer_pauses`), those not
/// expired at `now`: `[{peer, pauses, more, announced_at, received_at, expires_at}]`. No bridge, an
/// unreadable status or an entry of another shape reads as none.
pub fn read_peer_pauses(root: &Root, now: DateTime<Utc>) -> Vec<PeerPauses> {
    let Ok(Some(status)) = crate::store::read::read_json(&super::status_path(root)) else {
        return Vec::new();
    };
    status
        .get("peer_pauses")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|x| serde_json::from_value::<PeerPauses>(x.clone()).ok())
                .filter(|p| peer_pauses_live(p, now))
                .collect()
        })
        .unwrap_or_default()
}

/// The `peer_pauses` value of the bridge's status file.
pub fn peer_pauses_json(list: &[PeerPauses]) -> Value {
    json!(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers() -> Peers {
        Peers::from_flags(&["tallon".into()], &[]).unwrap()
    }

    fn msg(from: &str, pauses: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"pantheon_pauses": 1, "from_pantheon": from,
            "at": "2026-12-06T10:00:00Z", "every_s": 10, "pauses": pauses}))
        .unwrap()
    }

    #[test]
    fn a_peers_announcement_is_read_and_expires_after_three_silent_periods() {
        let now = parse_ts("2026-12-06T10:00:01Z").unwrap();
        let data = msg(
            "tallon",
            json!([{"id": "pause_1", "kind": "god", "name": "hermes", "by": "ops",
                   "reason": "incident", "since": "2026-12-06T09:00:00Z", "until": null}]),
        );
        let p = parse_pause_announcement("pantheon.tallon.paused", &data, "konan", &peers(), now)
            .unwrap();
        assert_eq!(p.peer, "tallon");
        assert_eq!(p.pauses[0].name.as_deref(), Some("hermes"));
        assert!(peer_pauses_live(&p, now + chrono::Duration::seconds(29)));
        assert!(!peer_pauses_live(&p, now + chrono::Duration::seconds(30)));
    }

    #[test]
    fn hostile_announcements_are_refused_naming_why() {
        let now = Utc::now();
        let good = json!([{"id": "pause_1", "kind": "all", "by": "ops", "reason": "r",
                           "since": "2026-12-06T09:00:00Z"}]);
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("pantheon.tallon.paused", b"not json".to_vec(), "not one"),
            (
                "pantheon.vulcan.paused",
                msg("vulcan", good.clone()),
                "not a peer",
            ),
            (
                "pantheon.tallon.paused",
                msg("konan", good.clone()),
                "another",
            ),
            ("pantheon.konan.paused", msg("konan", good.clone()), "own"),
            (
                "pantheon.tallon.paused",
                msg(
                    "tallon",
                    json!([{"id": "../x", "kind": "all", "by": "o", "reason": "r",
                                      "since": "2026-12-06T09:00:00Z"}]),
                ),
                "pause_",
            ),
            (
                "pantheon.tallon.paused",
                msg(
                    "tallon",
                    json!([{"id": "pause_1", "kind": "god", "name": "a.b", "by": "o",
                                      "reason": "r", "since": "2026-12-06T09:00:00Z"}]),
                ),
                "valid name",
            ),
            (
                "pantheon.tallon.paused",
                vec![b' '; MAX_ANNOUNCEMENT_BYTES + 1],
                "more than",
            ),
        ];
        for (subject, data, why) in cases {
            let e = parse_pause_announcement(subject, &data, "konan", &peers(), now)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{subject}: {e}");
        }
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        let p = Pause {
            id: "pause_1".into(),
            kind: PauseKind::All,
            name: None,
            by: "o".into(),
            source: "cli".into(),
            reason: "é".repeat(400),
            since: "2026-12-06T09:00:00Z".into(),
            until: None,
            resuming_at: None,
            resumed_at: None,
            resumed_by: None,
            extra: Default::default(),
        };
        let a = announced(&p);
        assert!(a.reason.len() <= MAX_REASON + '…'.len_utf8());
        assert!(a.reason.ends_with('…'));
    }
}
