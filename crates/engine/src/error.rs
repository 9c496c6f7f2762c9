//! The engine's error type: every refusal says what was wrong, where, and what to do.

use std::path::PathBuf;
use std::time::Duration;

/// One schema or rule violation, located by a JSON pointer into the offending document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON pointer (RFC 6901) to the offending value; empty for the document itself.
    pub pointer: String,
    /// What is wrong, in words.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)
    }
}

/// Everything the engine can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value that becomes part of a path does not match its pattern.
    #[error("invalid {field} {value:?}: must match {pattern}")]
    InvalidName {
        /// The field the value was given for (`workflow_id`, `god`, …).
        field: &'static str,
        /// The value as given.
        value: String,
        /// The pattern it must match.
        pattern: &'static str,
    },

    /// A document failed validation; every violation is listed.
    #[error("{what} is invalid:\n{}", .violations.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The document checked.
        what: String,
        /// Every violation found.
        violations: Vec<Violation>,
    },

    /// Something the request names does not exist.
    #[error("{0}")]
    NotFound(String),

    /// The request is well-formed but the protocol refuses it in the current state.
    #[error("{0}")]
    Refused(String),

    /// A protocol lock could not be taken in time.
    #[error(
        "timed out after {waited:?} waiting for lock {path}; another process holds it (retry, or check for a stuck process)"
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long the caller waited.
        waited: Duration,
    },

    /// A file could not be parsed.
    #[error("{path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },

    /// An I/O failure on a named path. The cause is part of the message, said once (it is not also
    /// a `source`, which `{:#}` would print a second time).
    #[error("{}", io_message(path, cause))]
    Io {
        /// The path the operation was on.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
}

impl Error {
    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause: source,
        }
    }

    /// A request the protocol refuses in the current state.
    pub fn refused(msg: impl Into<String>) -> Self {
        Error::Refused(msg.into())
    }

    /// Something the request names does not exist.
    pub(crate) fn not_found(msg: impl Into<String>) -> Self {
        Error::NotFound(msg.into())
    }

    /// A document `what` that failed validation, with every violation.
    pub(crate) fn invalid(what: impl Into<String>, violations: Vec<Violation>) -> Self {
        Error::Invalid {
            what: what.into(),
            violations,
        }
    }
}

/// Why a value of a document, a flag or a path is refused: a workflow definition's or rule's
/// field, a budget, the check thresholds, a pause entry, an intent that disagrees with the state,
/// YAML past its bounds, a path outside the root, a record the live model cannot show, a shell's
/// flag value (clap shows it as the usage error). Its words are the whole of it (what, where, what to do);
/// the caller places it in its file (`{path}: {refusal}`) or collects it with others, and it
/// converts into [`Error::Refused`] where an operation fails on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(String);

impl Refusal {
    /// The words, for a list of problems.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for Refusal {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for Refusal {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<Refusal> for String {
    fn from(r: Refusal) -> Self {
        r.0
    }
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::Refused(r.0)
    }
}

/// `{path}: {cause}`, with what to do when the disk or a size limit is full.
fn io_message(path: &std::path::Path, cause: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let path = path.display();
    match cause.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
            format!("{path}: the disk is full ({cause}); free some space, then retry")
        }
        ErrorKind::FileTooLarge => format!(
            "{path}: the file reached the size limit in force ({cause}); \
             raise the limit (ulimit -f) or archive the file, then retry"
        ),
        _ => format!("{path}: {cause}"),
    }
}

/// The engine's result type: its error is [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;
