//! `pantheon journal [--since T] [--actor A] [--verify]`: read or check the operator journal (the
//! global `--actor` filters here, since reading acts on nothing).

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::{Outcome, print_json};
use crate::engine::journal::{self, Filter};
use crate::engine::store::Root;
use crate::engine::store::time::parse_ts;

/// Options of `pantheon journal`.
#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Only entries at or after this time (RFC 3339, e.g. 2026-12-01T08:00:00Z).
    #[arg(long, value_name = "TS")]
    pub since: Option<String>,
    /// Check the hash chain across every segment instead; exits 1 naming the first entry that was
    /// edited, removed or reordered.
    #[arg(long, conflicts_with = "since")]
    pub verify: bool,
}

/// Runs `pantheon journal`.
pub fn run(
    args: JournalArgs,
    root: &Root,
    actor_filter: Option<String>,
) -> anyhow::Result<Outcome> {
    if args.verify {
        let v = journal::verify(root)?;
        print_json(&serde_json::to_value(&v)?);
        if let Some(p) = &v.problem {
            eprintln!(
                "error: {p}\n  (the journal is {}; entries before this one are intact)",
                journal::journal_path(root).display()
            );
            return Ok(Outcome::Exit(ExitCode::from(1)));
        }
        return Ok(Outcome::Exit(ExitCode::SUCCESS));
    }
    let since = args
        .since
        .as_deref()
        .map(|s| {
            parse_ts(s).with_context(|| {
                format!("--since {s:?} is not a timestamp; use e.g. 2026-12-01T08:00:00Z")
            })
        })
        .transpose()?;
    let filter = Filter {
        since,
        actor: actor_filter,
    };
    Ok(Outcome::Json(serde_json::to_value(journal::read(
        root, &filter,
    )?)?))
}
