//! Peers of the bridge (docs/NATS.md "Peers"): which pantheons it takes messages from, how it
//! publishes to each (JetStream or core NATS) and in which envelope (ours or the origin's), and the
//! only subjects a reply to each may go to.
//!
//! The allowlist itself comes only from the bridge's flags. `bridge.peers` in `conductor/config.yaml`
//! (a file agents can write) may describe the transport, envelope and reply subject of a peer the
//! flags allow, never add one; a flag's explicit value wins over the file.

use serde_json::{Map, Value, json};

use crate::conductor::outbox::OutboxRecord;
use crate::conductor::subject::{self, SubjectError};
use crate::store::is_valid_name;

/// Why a `--peer` or `--peer-reply` flag, a value of `bridge.peers`, or a reply's subject is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// A transport word that is not `jetstream` (`js`) or `core`.
    #[error("transport {0:?} is not jetstream or core")]
    Transport(String),
    /// An envelope word that is not `pantheon` or `origin`.
    #[error("envelope {0:?} is not pantheon or origin")]
    Envelope(String),
    /// A `--peer` name that is not a name.
    #[error("--peer {flag:?}: {name:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$")]
    Name {
        /// The flag's value.
        flag: String,
        /// Its name part.
        name: String,
    },
    /// A part of a `--peer` flag is refused.
    #[error("--peer {flag:?}: {cause}")]
    InFlag {
        /// The flag's value.
        flag: String,
        /// Why its part is refused.
        cause: Box<PeerError>,
    },
    /// A `--peer` flag of more than three parts.
    #[error("--peer {0:?} has too many parts (NAME[:TRANSPORT[:ENVELOPE]])")]
    TooManyParts(String),
    /// The same peer named by two `--peer` flags.
    #[error("--peer {0:?} is given twice")]
    Twice(String),
    /// A `--peer-reply` flag with no `=`.
    #[error("--peer-reply {0:?} is not NAME=SUBJECT")]
    ReplyShape(String),
    /// A `--peer-reply` subject that is refused.
    #[error("--peer-reply {flag:?}: {cause}")]
    ReplySubject {
        /// The flag's value.
        flag: String,
        /// Why its subject is refused.
        cause: SubjectError,
    },
    /// A `--peer-reply` for a name no `--peer` declares.
    #[error("--peer-reply {flag:?}: {name:?} is not a --peer (declare the peer first)")]
    ReplyUnknown {
        /// The flag's value.
        flag: String,
        /// The name it gives.
        name: String,
    },
    /// A pantheon that is not an allowed peer.
    #[error("pantheon {0:?} is not an allowed peer (--peer)")]
    NotAllowed(String),
    /// A reply subject a request asked for that is not one of its peer's.
    #[error(
        "reply_to {asked:?} is not a reply subject of peer {peer} (allowed: {}; declare another with --peer-reply {peer}=SUBJECT); a reply there would publish with this bridge's credentials{}",
        .allowed.join(", "),
        if .asked.starts_with('$') { " into the server's own API" } else { "" }
    )]
    ReplyTo {
        /// The subject asked for.
        asked: String,
        /// The peer.
        peer: String,
        /// Its reply subjects.
        allowed: Vec<String>,
    },
}

/// How records for a peer go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// JetStream publish with `Nats-Msg-Id`, marked sent after the server's acknowledgement;
    /// retried until stored (the default).
    #[default]
    JetStream,
    /// Core NATS publish, flushed, then marked sent: on the wire once, never retried (the origin's
    /// listener subscribes with core NATS and would act on every copy).
    Core,
}

impl Transport {
    fn parse(s: &str) -> Result<Self, PeerError> {
        match s {
            "jetstream" | "js" => Ok(Self::JetStream),
            "core" => Ok(Self::Core),
            other => Err(PeerError::Transport(other.to_owned())),
        }
    }

    /// The word used in flags, config and status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JetStream => "jetstream",
            Self::Core => "core",
        }
    }
}

/// The JSON shape of messages exchanged with a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvelopeKind {
    /// This bridge's wire format (`pantheon_bridge: 1`, docs/NATS.md).
    #[default]
    Pantheon,
    /// The origin's envelope `{id, type, source, target, timestamp, workflow_id, step_id, context}`.
    Origin,
}

impl EnvelopeKind {
    fn parse(s: &str) -> Result<Self, PeerError> {
        match s {
            "pantheon" => Ok(Self::Pantheon),
            "origin" => Ok(Self::Origin),
            other => Err(PeerError::Envelope(other.to_owned())),
        }
    }

    /// The word used in flags, config and status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pantheon => "pantheon",
            Self::Origin => "origin",
        }
    }
}

/// One allowed peer, as the flags (and then the config file) describe it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Peer {
    /// The peer pantheon's name.
    pub name: String,
    /// How records for it are published.
    pub transport: Transport,
    /// The envelope of messages to and from it.
    pub envelope: EnvelopeKind,
    /// A reply subject the operator declared for it (besides its default one).
    pub reply_subject: Option<String>,
    /// Parts the flag set explicitly (the config file may fill only the others).
    explicit_transport: bool,
    explicit_envelope: bool,
}

impl Peer {
    /// Parses `--peer NAME[:TRANSPORT[:ENVELOPE]]`.
    pub(crate) fn parse_flag(s: &str) -> Result<Self, PeerError> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default();
        if !is_valid_name(name) {
            return Err(PeerError::Name {
                flag: s.to_owned(),
                name: name.to_owned(),
            });
        }
        let in_flag = |e: PeerError| PeerError::InFlag {
            flag: s.to_owned(),
            cause: Box::new(e),
        };
        let mut p = Self {
            name: name.to_owned(),
            ..Default::default()
        };
        if let Some(t) = parts.next().filter(|t| !t.is_empty()) {
            p.transport = Transport::parse(t).map_err(in_flag)?;
            p.explicit_transport = true;
        }
        if let Some(e) = parts.next().filter(|e| !e.is_empty()) {
            p.envelope = EnvelopeKind::parse(e).map_err(in_flag)?;
            p.explicit_envelope = true;
        }
        if parts.next().is_some() {
            return Err(PeerError::TooManyParts(s.to_owned()));
        }
        Ok(p)
    }

    /// The reply subject replies to this peer go to by default: `pantheon.{peer}.in.reply` for our
    /// envelope; for the origin's, the declared one, else the origin's convention
    /// `subspace.{me}.outgoing.{peer}`.
    pub(crate) fn default_reply_subject(&self, me: &str) -> String {
        match (self.envelope, &self.reply_subject) {
            (EnvelopeKind::Origin, Some(s)) => s.clone(),
            (EnvelopeKind::Origin, None) => format!("subspace.{me}.outgoing.{}", self.name),
            (EnvelopeKind::Pantheon, _) => super::reply_subject(&self.name),
        }
    }

    /// Every subject a reply to this peer may be published on.
    pub(crate) fn reply_subjects(&self, me: &str) -> Vec<String> {
        let mut v = vec![self.default_reply_subject(me)];
        if let Some(s) = &self.reply_subject
            && !v.contains(s)
        {
            v.push(s.clone());
        }
        v
    }

    /// The peer as shown in `bridge status`.
    pub fn to_json(&self, me: &str) -> Value {
        json!({
            "name": self.name, "transport": self.transport.as_str(),
            "envelope": self.envelope.as_str(), "reply_subjects": self.reply_subjects(me),
        })
    }
}

/// A subject the bridge may publish a reply on: literal, and never under `$` (the server's own APIs:
/// `$JS.API…`, `$KV…`, `$SYS…`), which a reply would call with this bridge's credentials.
pub(crate) fn check_reply_subject(s: &str) -> Result<(), SubjectError> {
    subject::check_publish_subject(s)
}

/// The allowed peers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peers(pub Vec<Peer>);

impl Peers {
    /// The peers given by `--peer` flags and `--peer-reply NAME=SUBJECT` flags.
    pub fn from_flags(peers: &[String], replies: &[String]) -> Result<Self, PeerError> {
        let mut out: Vec<Peer> = Vec::new();
        for s in peers {
            let p = Peer::parse_flag(s)?;
            if out.iter().any(|q| q.name == p.name) {
                return Err(PeerError::Twice(p.name));
            }
            out.push(p);
        }
        for r in replies {
            let Some((name, subj)) = r.split_once('=') else {
                return Err(PeerError::ReplyShape(r.clone()));
            };
            check_reply_subject(subj).map_err(|cause| PeerError::ReplySubject {
                flag: r.clone(),
                cause,
            })?;
            let Some(p) = out.iter_mut().find(|p| p.name == name) else {
                return Err(PeerError::ReplyUnknown {
                    flag: r.clone(),
                    name: name.to_owned(),
                });
            };
            p.reply_subject = Some(subj.to_owned());
        }
        Ok(Self(out))
    }

    /// Fills what the flags left open from `bridge.peers` of `conductor/config.yaml` (a mapping of
    /// peer name to `{transport, envelope, reply_subject}`). Returns a warning for every entry or
    /// value it ignores: a peer the flags do not allow (the file can never add one), a bad value, a
    /// part a flag set.
    pub(crate) fn apply_config(&mut self, doc: Option<&Value>) -> Vec<String> {
        let mut warnings = Vec::new();
        let Some(peers) = doc
            .and_then(|d| d.get("bridge"))
            .and_then(|b| b.get("peers"))
        else {
            return warnings;
        };
        let Some(map) = peers.as_object() else {
            warnings.push(
                "conductor/config.yaml: bridge.peers is not a mapping of peer names; ignored"
                    .into(),
            );
            return warnings;
        };
        for (name, v) in map {
            let at = format!("conductor/config.yaml: bridge.peers.{name}");
            let Some(p) = self.0.iter_mut().find(|p| &p.name == name) else {
                warnings.push(format!(
                    "{at} ignored: {name:?} is not allowed by --peer (the allowlist comes only from the bridge's flags)"
                ));
                continue;
            };
            let Some(m) = v.as_object() else {
                warnings.push(format!("{at} is not a mapping; ignored"));
                continue;
            };
            for (k, val) in m {
                let text = val.as_str().unwrap_or_default();
                match k.as_str() {
                    "transport" if p.explicit_transport => warnings.push(format!(
                        "{at}.transport ignored: --peer sets it ({})",
                        p.transport.as_str()
                    )),
                    "transport" => match Transport::parse(text) {
                        Ok(t) => p.transport = t,
                        Err(e) => warnings.push(format!("{at}.transport: {e}; ignored")),
                    },
                    "envelope" if p.explicit_envelope => warnings.push(format!(
                        "{at}.envelope ignored: --peer sets it ({})",
                        p.envelope.as_str()
                    )),
                    "envelope" => match EnvelopeKind::parse(text) {
                        Ok(e) => p.envelope = e,
                        Err(e) => warnings.push(format!("{at}.envelope: {e}; ignored")),
                    },
                    "reply_subject" if p.reply_subject.is_some() => warnings.push(format!(
                        "{at}.reply_subject ignored: --peer-reply sets it"
                    )),
                    "reply_subject" => match check_reply_subject(text) {
                        Ok(()) => p.reply_subject = Some(text.to_owned()),
                        Err(e) => warnings.push(format!("{at}.reply_subject: {e}; ignored")),
                    },
                    other => warnings.push(format!(
                        "{at}: unknown key {other:?} ignored (known: transport, envelope, reply_subject)"
                    )),
                }
            }
        }
        warnings
    }

    /// The peer named `name`, if allowed.
    pub fn get(&self, name: &str) -> Option<&Peer> {
        self.0.iter().find(|p| p.name == name)
    }

    /// True when `name` is an allowed peer.
    pub fn allows(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The names, for messages.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|p| p.name.clone()).collect()
    }

    /// The peer an outbox record goes to: the `peer` its publish step named, else the subject's last
    /// token when it names a peer (the origin's `subspace.{from}.outgoing.{to}`), else none (then
    /// the record keeps the default: JetStream, our envelope).
    pub fn for_record(&self, rec: &OutboxRecord) -> Option<&Peer> {
        if let Some(name) = rec.extra.get("peer").and_then(Value::as_str) {
            return self.get(name);
        }
        rec.subject.rsplit('.').next().and_then(|t| self.get(t))
    }

    /// The subject a reply to `peer` goes on, given what the request asked for (`reply_to`): the
    /// request's own choice only when it is one of the peer's reply subjects; else the peer's default.
    /// `Err` (the reason) when the request asked for another subject.
    pub(crate) fn reply_target(
        &self,
        me: &str,
        peer: &str,
        asked: Option<&str>,
    ) -> Result<String, PeerError> {
        let Some(p) = self.get(peer) else {
            return Err(PeerError::NotAllowed(peer.to_owned()));
        };
        let allowed = p.reply_subjects(me);
        match asked {
            None => Ok(p.default_reply_subject(me)),
            Some(a) if allowed.iter().any(|s| s == a) => Ok(a.to_owned()),
            Some(a) => Err(PeerError::ReplyTo {
                asked: a.to_owned(),
                peer: peer.to_owned(),
                allowed,
            }),
        }
    }
}

/// True when a JSON object looks like the origin's envelope (it has `source` and `type`, and no
/// `pantheon_bridge`).
pub(crate) fn looks_like_origin(v: &Map<String, Value>) -> bool {
    !v.contains_key("pantheon_bridge") && v.contains_key("source") && v.contains_key("type")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_then_config_and_the_config_never_adds_a_peer() {
        let mut p = Peers::from_flags(
            &["tallon:core:origin".into(), "konan".into()],
            &["konan=subspace.konan.inbox".into()],
        )
        .unwrap();
        assert_eq!(p.get("tallon").unwrap().transport, Transport::Core);
        assert_eq!(p.get("tallon").unwrap().envelope, EnvelopeKind::Origin);
        let doc = json!({"bridge": {"peers": {
            "konan": {"transport": "core", "envelope": "origin"},
            "tallon": {"transport": "jetstream"},
            "rogue": {"transport": "core"},
        }}});
        let w = p.apply_config(Some(&doc));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w.iter()
                .any(|w| w.contains("rogue") && w.contains("not allowed"))
        );
        assert!(w.iter().any(|w| w.contains("tallon.transport ignored")));
        assert!(!p.allows("rogue"));
        assert_eq!(p.get("tallon").unwrap().transport, Transport::Core);
        assert_eq!(p.get("konan").unwrap().transport, Transport::Core);
        assert_eq!(
            p.get("konan").unwrap().reply_subjects("me"),
            vec!["subspace.konan.inbox".to_owned()]
        );
        assert!(Peers::from_flags(&["a:udp".into()], &[]).is_err());
        assert!(Peers::from_flags(&["a:core:x".into()], &[]).is_err());
        assert!(Peers::from_flags(&["a".into()], &["a=$JS.API.STREAM.PURGE.X".into()]).is_err());
        assert!(Peers::from_flags(&["a".into()], &["b=x.y".into()]).is_err());
    }

    #[test]
    fn replies_go_only_to_a_peers_reply_subject() {
        let p = Peers::from_flags(&["konan".into()], &[]).unwrap();
        assert_eq!(
            p.reply_target("tallon", "konan", Some("pantheon.konan.in.reply")),
            Ok("pantheon.konan.in.reply".into())
        );
        for bad in [
            "$JS.API.STREAM.PURGE.PANTHEON_TRACK_x",
            "$KV.pantheon_locks_x.a",
            "pantheon.tallon.in.reply",
        ] {
            let e = p.reply_target("tallon", "konan", Some(bad)).unwrap_err();
            assert!(
                e.to_string().contains("not a reply subject of peer konan"),
                "{e}"
            );
        }
        assert!(p.reply_target("tallon", "rogue", None).is_err());
        let rec = OutboxRecord {
            subject: "subspace.tallon.outgoing.konan".into(),
            ..Default::default()
        };
        assert_eq!(p.for_record(&rec).unwrap().name, "konan");
        let rec = OutboxRecord {
            subject: "subspace.konan.inbox".into(),
            ..Default::default()
        };
        assert!(p.for_record(&rec).is_none());
    }
}
