//! `pantheon journal [--since T] [--actor A] [--verify [--anchor PATH] [--head SEQ:HASH]]`: read or check
//! the operator journal (the global `--actor` filters here, since reading acts on nothing).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{Outcome, print_json};
use crate::engine::{
    HeadRef, JournalFilter, Root, VerifyOptions, journal_path, read_journal, verify_journal_with,
};

/// Options of `pantheon journal`.
#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Only entries at or after this moment (RFC 3339, now, back from now: -5m, or a local time
    /// today: 10:30).
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Check the hash chain across every segment instead; exits 1 listing every entry that was
    /// edited, removed or reordered (and every line that is no entry).
    #[arg(long, conflicts_with = "since")]
    pub verify: bool,
    /// With --verify: also check against this anchor file (written by `pantheon serve
    /// --journal-anchor`): every anchored entry must still be there with its anchored hash.
    #[arg(long, value_name = "PATH", requires = "verify")]
    pub anchor: Option<PathBuf>,
    /// With --verify: also check against a head you kept (`head_ref` of an earlier --verify).
    #[arg(long, value_name = "SEQ:HASH", requires = "verify", value_parser = head_ref)]
    pub head: Option<HeadRef>,
}

/// `--head SEQ:HASH`, parsed by clap: a value that is none is bad usage (exit 2).
fn head_ref(s: &str) -> Result<HeadRef, crate::engine::Refusal> {
    HeadRef::parse(s).map_err(|e| e.to_string().into())
}

/// Runs `pantheon journal`.
pub(crate) fn run(
    args: JournalArgs,
    root: &Root,
    actor_filter: Option<String>,
) -> anyhow::Result<Outcome> {
    if args.verify {
        let opts = VerifyOptions {
            anchor: args.anchor,
            head: args.head,
        };
        let v = verify_journal_with(root, &opts)?;
        print_json(&serde_json::to_value(&v)?);
        if let Some(a) = &v.anchor
            && a.unanchored > 0
        {
            eprintln!(
                "note: the last {} entr{} (after entry {}) come after the newest anchor ({}): the anchor says nothing about them",
                a.unanchored,
                if a.unanchored == 1 { "y" } else { "ies" },
                a.last_anchored_seq.unwrap_or(0),
                a.last_anchored_at.as_deref().unwrap_or("never")
            );
        }
        if !v.valid {
            eprintln!(
                "error: the journal ({}) failed verification: {} problem{}",
                journal_path(root).display(),
                v.problems_total,
                if v.problems_total == 1 { "" } else { "s" }
            );
            for p in &v.problems {
                eprintln!("  - {}", p.message);
            }
            if v.problems_total > v.problems.len() {
                eprintln!("  … and {} more", v.problems_total - v.problems.len());
            }
            return Ok(Outcome::Exit(ExitCode::from(1)));
        }
        return Ok(Outcome::Exit(ExitCode::SUCCESS));
    }
    let filter = JournalFilter {
        since: args.since,
        actor: actor_filter,
    };
    Ok(Outcome::Json(serde_json::to_value(read_journal(
        root, &filter,
    )?)?))
}
