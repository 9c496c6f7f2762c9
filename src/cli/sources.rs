//! `pantheon sources read|answer --source KIND:LOCATION`: a foreign source read once as JSON, and an
//! answer to one of its answerable items (an A2A task in input-required), journaled as an operator
//! act (docs/SOURCES.md).

use std::io::Read;

use serde_json::{Value, json};

use super::Outcome;
use crate::engine::{Act, Origin, Root, append_journal};
use crate::sources::{self, Snapshot};

/// The longest answer read from standard input (`-`).
const MAX_STDIN_ANSWER: u64 = 64 * 1024;

/// Options of `pantheon sources`.
#[derive(Debug, Clone, clap::Args)]
pub struct SourcesArgs {
    #[command(subcommand)]
    pub command: SourcesCommand,
}

/// What `pantheon sources` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SourcesCommand {
    /// Read a source once and print what it holds as JSON: agents, tasks, messages, locks and the
    /// attention items (each with its key, and whether it can be answered).
    Read(ReadArgs),
    /// Answer an answerable attention item of a source (an A2A task in input-required or
    /// auth-required): the text goes to the agent as the task's next message. Journaled as an
    /// operator act naming the source, the task and the answer's length (not its text).
    Answer(AnswerArgs),
}

/// Options of `pantheon sources read`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadArgs {
    /// The source, KIND:LOCATION (a2a:AGENT_CARD_URL, e.g. a2a:http://127.0.0.1:9999/).
    #[arg(long = "source", value_name = "KIND:LOCATION")]
    pub source: String,
}

/// Options of `pantheon sources answer`.
#[derive(Debug, Clone, clap::Args)]
pub struct AnswerArgs {
    /// The source, KIND:LOCATION (a2a:AGENT_CARD_URL, e.g. a2a:http://127.0.0.1:9999/).
    #[arg(long = "source", value_name = "KIND:LOCATION")]
    pub source: String,
    /// The item to answer: the task id, or the attention item's key from `sources read` (which
    /// also refuses the answer when the task has asked again since).
    #[arg(value_name = "TASK_ID|KEY")]
    pub key: String,
    /// The answer, or `-` to read it from standard input (at most 64 KiB; keeps a secret out of
    /// the shell's history).
    #[arg(value_name = "TEXT", allow_hyphen_values = true)]
    pub text: String,
}

/// Runs `pantheon sources …`.
pub fn run(args: SourcesArgs, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    match args.command {
        SourcesCommand::Read(a) => read(&a),
        SourcesCommand::Answer(a) => answer(a, root, &origin),
    }
}

/// Runs `pantheon sources read` with no root set (an answer needs one: it is journaled).
pub fn run_rootless(args: SourcesArgs) -> anyhow::Result<Outcome> {
    match args.command {
        SourcesCommand::Read(a) => read(&a),
        SourcesCommand::Answer(_) => anyhow::bail!("{}", super::NO_ROOT),
    }
}

fn read(args: &ReadArgs) -> anyhow::Result<Outcome> {
    let mut source = sources::open(&args.source).map_err(|e| anyhow::anyhow!(e))?;
    let snap = source.read().map_err(|e| anyhow::anyhow!(e))?;
    Ok(Outcome::Json(snapshot_json(&args.source, &snap)))
}

fn answer(args: AnswerArgs, root: &Root, origin: &Origin) -> anyhow::Result<Outcome> {
    let text = if args.text == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(MAX_STDIN_ANSWER + 1)
            .read_to_string(&mut buf)
            .map_err(|e| anyhow::anyhow!("reading the answer from standard input: {e}"))?;
        anyhow::ensure!(
            buf.len() as u64 <= MAX_STDIN_ANSWER,
            "the answer on standard input is over {} KiB: nothing sent",
            MAX_STDIN_ANSWER / 1024
        );
        buf.trim_end_matches(['\n', '\r']).to_owned()
    } else {
        args.text
    };
    let mut source = sources::open(&args.source).map_err(|e| anyhow::anyhow!(e))?;
    let answered = source
        .answer(&args.key, &text)
        .map_err(|e| anyhow::anyhow!(e))?;
    let chars = text.chars().count();
    // The text is not journaled: an answer to auth-required may be a credential, and the journal is
    // hash-chained, so nothing written into it can be taken back. The agent's task history has it.
    let act = Act::new("answer_source", &answered.detail)
        .target("source", Some(&args.source))
        .target("item", Some(&args.key));
    // As every act (docs/PROTOCOL.md 2.8): the journal is written after the act, which stands with
    // a warning when it cannot be.
    let seq = match append_journal(root, origin, &act) {
        Ok(entry) => entry.get("seq").cloned().unwrap_or(Value::Null),
        Err(e) => {
            eprintln!(
                "warning: the answer was sent ({}) but the journal could not record it: {e}",
                answered.detail
            );
            Value::Null
        }
    };
    Ok(Outcome::Json(json!({
        "source": args.source,
        "key": answered.key,
        "sent_chars": chars,
        "detail": answered.detail,
        "journal_seq": seq,
    })))
}

/// A snapshot as JSON (the shapes of `sources read`).
pub fn snapshot_json(spec: &str, snap: &Snapshot) -> Value {
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.to_rfc3339());
    json!({
        "source": spec,
        "agents": snap.agents.iter().map(|a| json!({
            "name": a.name, "group": a.group, "status": a.status, "raw": a.raw,
        })).collect::<Vec<_>>(),
        "tasks": snap.tasks.iter().map(|t| json!({
            "id": t.id, "group": t.group, "title": t.title, "state": t.state, "owner": t.owner,
            "raw": t.raw,
        })).collect::<Vec<_>>(),
        "messages": snap.messages.iter().map(|m| json!({
            "id": m.id, "group": m.group, "from": m.from, "to": m.to, "at": time(m.at),
            "subject": m.subject, "body": m.body, "raw": m.raw,
        })).collect::<Vec<_>>(),
        "locks": snap.locks.iter().map(|l| json!({
            "path": l.path, "holder": l.holder, "expires": time(l.expires), "raw": l.raw,
        })).collect::<Vec<_>>(),
        "attention": snap.attention.iter().map(|a| json!({
            "key": a.key, "agent": a.agent, "what": a.what, "since": time(a.since),
            "answerable": a.answerable, "raw": a.raw,
        })).collect::<Vec<_>>(),
    })
}
