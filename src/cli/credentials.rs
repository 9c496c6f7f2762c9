//! `pantheon credentials add NAME --god|--operator --file FILE`: a new principal for `mcp --http`
//! and `serve --mcp --credentials FILE` ([`crate::credentials`]). Prints the secret once, as JSON.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::Outcome;
use crate::credentials::{Kind, Principal, Right};
use crate::engine::Root;

/// Options of `pantheon credentials`.
#[derive(Debug, Args)]
pub struct CredentialsArgs {
    #[command(subcommand)]
    pub command: CredentialsCommand,
}

/// What `pantheon credentials` does.
#[derive(Debug, Subcommand)]
pub enum CredentialsCommand {
    /// Add a principal to FILE (made, mode 600, when missing) and print its secret once:
    /// `{"name", "kind", "rights", "inboxes", "file", "secret"}`. Only the secret's SHA-256 is stored.
    Add(AddArgs),
}

/// Options of `pantheon credentials add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The god's name (with --god) or the operator's (with --operator).
    pub name: String,
    /// A god: acts only as NAME (submit, ack, post, lock, read_inbox).
    #[arg(
        long,
        conflicts_with = "operator",
        required_unless_present = "operator"
    )]
    pub god: bool,
    /// An operator: approve, requeue, abort, and read every inbox.
    #[arg(long)]
    pub operator: bool,
    /// The credentials file: outside the root, readable by its owner only.
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// The rights instead of the kind's defaults, comma-separated: submit, ack, post, lock,
    /// read_inbox, approve, requeue, abort.
    #[arg(long, value_name = "VERBS", value_delimiter = ',', value_parser = right)]
    pub rights: Option<Vec<Right>>,
    /// Other gods whose inboxes a god may read, comma-separated (`*`: all).
    #[arg(long, value_name = "GODS", value_delimiter = ',')]
    pub inboxes: Vec<String>,
}

/// A right named by its verb; another word is bad usage (exit 2).
fn right(verb: &str) -> Result<Right, String> {
    Right::parse(verb).ok_or_else(|| {
        let all: Vec<&str> = Right::ALL.iter().map(|r| r.as_str()).collect();
        format!("not a right; the rights are {}", all.join(", "))
    })
}

/// Runs `pantheon credentials`.
pub(crate) fn run(args: CredentialsArgs, root: &Root) -> anyhow::Result<Outcome> {
    let CredentialsCommand::Add(a) = args.command;
    let kind = if a.operator {
        Kind::Operator
    } else {
        Kind::God
    };
    let principal = Principal {
        name: a.name,
        kind,
        rights: match a.rights {
            Some(r) => r.into_iter().collect(),
            None => Right::defaults(kind),
        },
        inboxes: a.inboxes,
    };
    let made = crate::credentials::add(&a.file, &root.dir, principal)?;
    let p = made.principal;
    Ok(Outcome::Json(serde_json::json!({
        "name": p.name,
        "kind": p.kind,
        "rights": p.rights,
        "inboxes": p.inboxes,
        "file": a.file.display().to_string(),
        "secret": made.secret,
    })))
}
