//! Validated names and ids. Every value that becomes part of a path is parsed into one of these
//! newtypes first, so an unchecked string can never reach the file system.

use rand::Rng;

use crate::error::{Error, Result};

fn all(s: &str, ok: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(ok)
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `^prefix\d{8}_[a-z0-9]{min,max}$`
fn dated_id(s: &str, prefix: &str, min: usize, max: usize) -> bool {
    let Some(rest) = s.strip_prefix(prefix) else {
        return false;
    };
    let Some((date, tail)) = rest.split_once('_') else {
        return false;
    };
    date.len() == 8
        && all(date, |b| b.is_ascii_digit())
        && (min..=max).contains(&tail.len())
        && all(tail, is_lower_alnum)
}

/// Pattern of god, step, track, workflow-definition, rule and director names.
pub(crate) const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";
/// Pattern of handoff ids: `hof_`, a date, then 6–8 lowercase letters or digits.
pub(crate) const HANDOFF_ID_PATTERN: &str = "^hof_\\d{8}_[a-z0-9]{6,8}$";
/// Pattern of workflow ids: `wf_` then 1–120 lowercase letters, digits or `_`.
pub(crate) const WORKFLOW_ID_PATTERN: &str = "^wf_[a-z0-9_]{1,120}$";
/// Pattern of ack ids: `ack_`, a date, then 3–8 lowercase letters or digits.
pub(crate) const ACK_ID_PATTERN: &str = "^ack_\\d{8}_[a-z0-9]{3,8}$";

/// True when `s` matches `NAME_PATTERN`.
pub fn is_valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && all(s, |c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// True when `s` matches [`HANDOFF_ID_PATTERN`].
pub(crate) fn is_valid_handoff_id(s: &str) -> bool {
    dated_id(s, "hof_", 6, 8)
}

/// True when `s` matches [`ACK_ID_PATTERN`].
pub(crate) fn is_valid_ack_id(s: &str) -> bool {
    dated_id(s, "ack_", 3, 8)
}

/// True when `s` matches [`WORKFLOW_ID_PATTERN`].
pub(crate) fn is_valid_workflow_id(s: &str) -> bool {
    s.strip_prefix("wf_").is_some_and(|rest| {
        (1..=120).contains(&rest.len()) && all(rest, |b| is_lower_alnum(b) || b == b'_')
    })
}

pub(crate) fn random_hex(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect()
}

/// `Display`, `AsRef<str>`, `FromStr` and a serde pair that validates on the way in, for a newtype
/// over text (`self.0` derefs to `str`) with a `parse(&str) -> Result<Self>`.
macro_rules! str_id_impls {
    ($name:ident) => {
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                Self::parse(s)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(
                d: D,
            ) -> std::result::Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use str_id_impls;

macro_rules! validated {
    ($(#[$doc:meta])* $vis:vis $name:ident, $field:literal, $pattern:expr, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis struct $name(String);

        impl $name {
            /// The field name used in error messages.
            $vis const FIELD: &'static str = $field;
            /// The pattern a value must match, as shown in error messages.
            $vis const PATTERN: &'static str = $pattern;

            /// Parses `value`, naming the field `field` in the error.
            $vis fn parse_as(field: &'static str, value: &str) -> Result<Self> {
                if ($check)(value) {
                    Ok(Self(value.to_owned()))
                } else {
                    // An over-long value is shown cut to its first 80 characters.
                    Err(Error::InvalidName { field, value: value.chars().take(80).collect(), pattern: $pattern })
                }
            }

            /// Parses `value`; refuses (`Error::InvalidName`) a value that does not match [`Self::PATTERN`].
            $vis fn parse(value: &str) -> Result<Self> {
                Self::parse_as($field, value)
            }

            /// The validated text.
            $vis fn as_str(&self) -> &str {
                &self.0
            }
        }

        str_id_impls!($name);
    };
}

validated!(
    /// `hof_YYYYMMDD_xxxxxx`: one handoff.
    pub HandoffId, "handoff_id", HANDOFF_ID_PATTERN, is_valid_handoff_id
);
validated!(
    /// `wf_…`: one workflow instance.
    pub WorkflowId, "workflow_id", WORKFLOW_ID_PATTERN, is_valid_workflow_id
);
validated!(
    /// `ack_YYYYMMDD_xxx`: one acknowledgement.
    pub AckId, "ack_id", ACK_ID_PATTERN, is_valid_ack_id
);
validated!(
    /// A god's name (`thoth`, `hephaestus`, …); names an inbox directory.
    pub GodName, "god", NAME_PATTERN, is_valid_name
);
validated!(
    /// A workflow step id.
    pub StepId, "step", NAME_PATTERN, is_valid_name
);
validated!(
    /// A message-bus track name; names `conductor/tracks/{track}`.
    pub TrackName, "track", NAME_PATTERN, is_valid_name
);
validated!(
    /// A board director (`CA`, `CPO`, …).
    pub Director, "director", NAME_PATTERN, is_valid_name
);

/// Refuses `value` as the `field` unless it is a name ([`NAME_PATTERN`]), with the id types' error (a
/// workflow definition's id, which no type carries).
pub(crate) fn check_name(field: &'static str, value: &str) -> Result<()> {
    if is_valid_name(value) {
        Ok(())
    } else {
        Err(Error::InvalidName {
            field,
            value: value.chars().take(80).collect(),
            pattern: NAME_PATTERN,
        })
    }
}

fn today() -> String {
    chrono::Utc::now().format("%Y%m%d").to_string()
}

impl HandoffId {
    /// A fresh id: today's date and 6 random hex chars.
    pub fn generate() -> Self {
        Self(format!("hof_{}_{}", today(), random_hex(6)))
    }
}

impl AckId {
    /// A new ack id, dated today, with 6 random hex digits.
    pub fn generate() -> Self {
        Self(format!("ack_{}_{}", today(), random_hex(6)))
    }
}

/// A fresh `disp_YYYYMMDD_HHMMSS_{6 hex}`.
pub(crate) fn generate_dispatch_id() -> String {
    format!(
        "disp_{}_{}",
        chrono::Utc::now().format("%Y%m%d_%H%M%S"),
        random_hex(6)
    )
}

/// A fresh bus message id, `msg-{uuid4}`.
///
/// The 122 random bits come from `rand`'s thread-local generator (a CSPRNG seeded from the OS), not a
/// `getrandom` call per id: ids are minted on every post, the bus's hottest path.
pub(crate) fn generate_message_id() -> String {
    let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    let mut out = String::with_capacity(40);
    out.push_str("msg-");
    out.push_str(
        id.hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
    out
}

/// Maximum length of free-text values that live only inside JSON (worker ids, task ids, lock paths).
pub(crate) const FREE_TEXT_MAX: usize = 512;

/// The rule free text follows, as shown in error messages (docs/PROTOCOL.md 1.3).
pub(crate) const FREE_TEXT_RULE: &str = "1 to 512 bytes of text without NUL";

/// True when `value` is valid free text: non-empty, at most [`FREE_TEXT_MAX`] bytes, no NUL.
pub(crate) fn is_free_text(value: &str) -> bool {
    !value.is_empty() && value.len() <= FREE_TEXT_MAX && !value.contains('\0')
}

/// Checks a free-text value (worker id, task id, source, lock path): non-empty, at most 512 bytes, no NUL.
pub fn check_free_text(field: &'static str, value: &str) -> Result<()> {
    if !is_free_text(value) {
        return Err(Error::InvalidName {
            field,
            value: value.chars().take(80).collect(),
            pattern: FREE_TEXT_RULE,
        });
    }
    Ok(())
}

validated!(
    /// A bus worker's id (`worker-1.1`): the holder of a lock, the key of a heartbeat. The protocol
    /// keeps it as free text inside JSON (1 to 512 bytes, no NUL; docs/PROTOCOL.md 1.3), and it is
    /// percent-encoded wherever it becomes part of a file name (`LOCK_LOST_{holder}.event`).
    pub WorkerId, "worker", FREE_TEXT_RULE, is_free_text
);

impl WorkerId {
    /// The id operator acts hold and release locks as: `operator` (the bus's `OPERATOR`).
    pub fn operator() -> Self {
        Self(String::from("operator"))
    }
}

const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'-');

/// Percent-encodes a free-text key for use in a file name: every byte outside `[A-Za-z0-9._-]`
/// becomes `%XX`. A key made only of dots is encoded whole so it never names `.` or `..`.
pub fn encode_key(key: &str) -> String {
    if !key.is_empty() && key.bytes().all(|b| b == b'.') {
        return key.bytes().map(|b| format!("%{b:02X}")).collect();
    }
    percent_encoding::utf8_percent_encode(key, KEEP).to_string()
}

/// Inverse of [`encode_key`] (lossy for invalid UTF-8).
pub fn decode_key(encoded: &str) -> String {
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn handoff_ids() {
        assert!(is_valid_handoff_id("hof_20260614_abc123"));
        assert!(is_valid_handoff_id("hof_20260614_abc12345"));
        assert!(!is_valid_handoff_id("hof_20260614_abc12"));
        assert!(!is_valid_handoff_id("hof_2026061_abc123"));
        assert!(!is_valid_handoff_id("hof_20260614_ABC123"));
        assert!(!is_valid_handoff_id("hof_20260614_../../x"));
        assert!(is_valid_handoff_id(HandoffId::generate().as_str()));
    }

    #[test]
    fn ack_and_workflow_ids() {
        assert!(is_valid_ack_id("ack_20260614_456"));
        assert!(!is_valid_ack_id("ack_20260614_45"));
        assert!(is_valid_ack_id(AckId::generate().as_str()));
        assert!(is_valid_workflow_id("wf_deploy_42"));
        assert!(!is_valid_workflow_id("wf_"));
        assert!(!is_valid_workflow_id("wf_Deploy"));
        assert!(!is_valid_workflow_id("wf_a/b"));
        assert!(!is_valid_workflow_id(&format!("wf_{}", "a".repeat(121))));
    }

    #[test]
    fn names() {
        assert!(is_valid_name("thoth"));
        assert!(is_valid_name("stripe-checkout_20260201"));
        assert!(!is_valid_name("-x"));
        assert!(!is_valid_name(".."));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name(&"a".repeat(65)));
        let err = GodName::parse("../etc").unwrap_err().to_string();
        assert!(
            err.contains("god") && err.contains("../etc") && err.contains(NAME_PATTERN),
            "{err}"
        );
    }

    #[test]
    fn track_names_accept_the_protocol_form_and_refuse_paths() {
        for ok in [
            "t",
            "checkout",
            "stripe-checkout_20260201",
            "A1",
            &"a".repeat(64),
        ] {
            assert_eq!(TrackName::parse(ok).unwrap().as_str(), ok);
            assert_eq!(ok.parse::<TrackName>().unwrap().to_string(), ok);
        }
        let long = "a".repeat(65);
        for bad in [
            "",
            "..",
            ".",
            "a/b",
            "a\\b",
            "/t",
            "-t",
            "_t",
            "t t",
            "t\n",
            "t\0",
            "t\u{1b}[2J",
            "tröt",
            &long,
        ] {
            let err = TrackName::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid track ") && err.contains(NAME_PATTERN),
                "{bad:?}: {err}"
            );
        }
        // Serde goes through the same check.
        assert!(serde_json::from_str::<TrackName>("\"../x\"").is_err());
        assert_eq!(
            serde_json::from_str::<TrackName>("\"checkout\"")
                .unwrap()
                .as_str(),
            "checkout"
        );
    }

    #[test]
    fn directors_are_names_not_a_closed_set() {
        // The default board and any other name matching the pattern (`board open --director D`),
        // and `ALL`, the discussion's addressee of everyone.
        for ok in ["CA", "CPO", "CSO", "COO", "CXO", "CFO", "legal-1", "ALL"] {
            assert_eq!(Director::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "..",
            "C/A",
            "C A",
            "-CA",
            "CA\n",
            "CA\0",
            &"C".repeat(65),
        ] {
            let err = Director::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid director ") && err.contains(NAME_PATTERN),
                "{bad:?}: {err}"
            );
        }
        let err = Director::parse_as("to", "a b").unwrap_err().to_string();
        assert!(err.starts_with("invalid to \"a b\""), "{err}");
    }

    #[test]
    fn worker_ids_are_the_protocols_free_text() {
        // The protocol keeps worker ids as free text inside JSON (PROTOCOL.md 1.3): separators and
        // dots are allowed; they are percent-encoded where an id becomes part of a file name.
        for ok in [
            "worker-1.1",
            "worker-1.5-1706789012345",
            "team/a",
            "..",
            "operator",
            &"w".repeat(FREE_TEXT_MAX),
        ] {
            let id = WorkerId::parse(ok).unwrap();
            assert_eq!(id.as_str(), ok);
            assert!(!encode_key(id.as_str()).contains('/') && encode_key(id.as_str()) != "..");
        }
        let long = "w".repeat(FREE_TEXT_MAX + 1);
        for bad in ["", "w\0", &long] {
            let err = WorkerId::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid worker ") && err.contains(FREE_TEXT_RULE),
                "{err}"
            );
            // The refusal quotes at most the first 80 characters of the value.
            assert!(err.len() < 200, "{err}");
        }
        assert_eq!(WorkerId::operator().as_str(), "operator");
        assert!(serde_json::from_str::<WorkerId>("\"\"").is_err());
    }

    #[test]
    fn key_encoding() {
        assert_eq!(encode_key("1.2"), "1.2");
        assert_eq!(encode_key("src/app/x.ts"), "src%2Fapp%2Fx.ts");
        assert_eq!(encode_key(".."), "%2E%2E");
        assert_eq!(decode_key("src%2Fapp%2Fx.ts"), "src/app/x.ts");
    }

    proptest! {
        #[test]
        fn valid_names_never_escape(s in "\\PC{0,80}") {
            if is_valid_name(&s) {
                prop_assert!(!s.contains('/') && !s.contains('\\') && s != "." && s != "..");
            }
        }

        #[test]
        fn encoded_keys_are_safe_file_names(s in "\\PC{1,100}") {
            let e = encode_key(&s);
            prop_assert!(e.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b)));
            prop_assert!(e != "." && e != "..");
            prop_assert_eq!(decode_key(&e), s);
        }
    }
}
