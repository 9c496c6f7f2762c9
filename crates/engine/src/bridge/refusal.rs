//! Why the bridge refuses a message from the wire or an outbox record: the reason a dead letter
//! records, said so a person knows the fix.

use super::peer::PeerError;
use super::{MAX_MESSAGE, WIRE_VERSION};
use crate::conductor::subject::SubjectError;

/// Why a message from the wire is not taken, or an outbox record not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Larger than the bridge takes.
    #[error("message is {0} bytes; at most {MAX_MESSAGE}")]
    TooLarge(usize),
    /// Not our wire format (the parser's words).
    #[error("not a bridge message: {0}")]
    NotBridge(String),
    /// A `pantheon_bridge` version this bridge does not speak.
    #[error("pantheon_bridge version {0} is not {WIRE_VERSION}")]
    Version(u64),
    /// A message id that is not ours.
    #[error("id {0:?} is not a bridge message id")]
    Id(String),
    /// A sender that is not a name.
    #[error("from_pantheon {0:?} is not a name")]
    From(String),
    /// A workflow id that is not one (the engine's words).
    #[error("{0}")]
    WorkflowId(String),
    /// A message text past 64 KiB.
    #[error("message text longer than 64 KiB")]
    TextTooLong,
    /// A request's step that is not a name.
    #[error("step {0:?} is not a name")]
    Step(String),
    /// A reply without the id of its request.
    #[error("a reply needs in_reply_to, the id of the request")]
    NoInReplyTo,
    /// A reply status outside the three (as the message gave it, or its absence).
    #[error("reply status {0:?} is not accepted, completed or rejected")]
    ReplyStatus(Option<String>),
    /// A kind that is not `request` or `reply`.
    #[error("kind {0:?} is not request or reply")]
    Kind(String),
    /// Not JSON at all (the parser's words).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// Neither envelope.
    #[error(
        "not a pantheon_bridge message (no `pantheon_bridge` field) and not the origin's envelope (no `source` and `type`)"
    )]
    NoEnvelope,
    /// The origin's envelope from a source that is not a peer.
    #[error(
        "not a pantheon_bridge message, and {0:?} (its source) is not an allowed peer; to take the origin's messages from it run the bridge with --peer {0}:core:origin"
    )]
    UnknownSource(String),
    /// The origin's envelope from a peer declared with ours.
    #[error(
        "not a pantheon_bridge message and peer {0} is not declared with the origin's envelope (run the bridge with --peer {0}:core:origin, or set bridge.peers.{0}.envelope: origin in conductor/config.yaml)"
    )]
    NotOriginPeer(String),
    /// The origin's message id that is not one.
    #[error("id {0:?} is not a message id (1 to 80 letters, digits, `_` or `-`)")]
    OriginId(String),
    /// The origin's target that is neither this pantheon nor a god.
    #[error("target {target:?} is neither this pantheon ({me}) nor a god name")]
    Target {
        /// The target given.
        target: String,
        /// This pantheon's name.
        me: String,
    },
    /// The origin's `type` past 64 bytes.
    #[error("type longer than 64 bytes")]
    TypeTooLong,
    /// The origin's `context` that is not an object.
    #[error("context is not a JSON object")]
    ContextNotObject,
    /// The origin's workflow id that is not one.
    #[error("workflow_id {id:?} is not a workflow id: {cause}")]
    OriginWorkflowId {
        /// The id given.
        id: String,
        /// The engine's words.
        cause: String,
    },
    /// The origin's reply without the id of our request.
    #[error("a reply needs context.in_reply_to, the id of our request")]
    OriginNoInReplyTo,
    /// The origin's reply status outside the three.
    #[error("reply status {0:?} is not accepted, completed or rejected")]
    OriginReplyStatus(String),
    /// A subject the message names, or a record goes to, is refused.
    #[error(transparent)]
    Subject(#[from] SubjectError),
    /// The sender or its reply subject is not allowed.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// A subject off the allowlist.
    #[error("subject {0:?} is not on the allowlist")]
    NotOnAllowlist(String),
    /// An outbox record that is not published.
    #[error("not published: {0}")]
    NotPublished(Box<WireError>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reasons_keep_their_words() {
        assert_eq!(
            WireError::TooLarge(5).to_string(),
            "message is 5 bytes; at most 1048576"
        );
        assert_eq!(
            WireError::Version(2).to_string(),
            "pantheon_bridge version 2 is not 1"
        );
        assert_eq!(
            WireError::ReplyStatus(Some("x".into())).to_string(),
            r#"reply status Some("x") is not accepted, completed or rejected"#
        );
        assert_eq!(
            SubjectError::Length(String::new()).to_string(),
            r#"subject "" must be 1 to 256 bytes"#
        );
        assert_eq!(
            WireError::NotPublished(Box::new(SubjectError::ServerApi("$JS.X".into()).into()))
                .to_string(),
            r#"not published: subject "$JS.X" is under `$` (the server's own API); the bridge never publishes there"#
        );
        assert_eq!(
            PeerError::Name {
                flag: "a b".into(),
                name: "a b".into()
            }
            .to_string(),
            r#"--peer "a b": "a b" must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"#
        );
        let to = PeerError::ReplyTo {
            asked: "$JS.API.X".into(),
            peer: "konan".into(),
            allowed: vec!["a.b".into(), "c.d".into()],
        };
        assert_eq!(
            to.to_string(),
            "reply_to \"$JS.API.X\" is not a reply subject of peer konan (allowed: a.b, c.d; declare another with --peer-reply konan=SUBJECT); a reply there would publish with this bridge's credentials into the server's own API"
        );
    }
}
