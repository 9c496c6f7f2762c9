//! What a command produced, shared by the shells a command dispatches to (`cli` runs `demo` and `bridge`,
//! which must not import `cli` back).

use std::process::ExitCode;

/// What a command produced: a JSON result to print, or a process exit code of its own.
pub(crate) enum Outcome {
    /// Print this as pretty JSON and exit 0.
    Json(serde_json::Value),
    /// Exit with this code (the command printed what it had to).
    Exit(ExitCode),
}
