//! `pantheon sources` (probe each `--source` and list it with its health), `sources read` (one
//! source read once as JSON), `sources answer` (an answer to one of a source's answerable items, an A2A
//! task in input-required, journaled as an operator act; docs/SOURCES.md) and the foreign side of
//! `inbox` (a foreign agent's messages), over `crate::sources`.

use std::io::Read;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::engine::{Act, JournalTarget, JournalVerb, Origin, Root, append_journal};
use crate::outcome::Outcome;
use crate::sources::{self, Health, PROBE_TIMEOUT, Snapshot, SourceState, probe};

/// The longest answer read from standard input (`-`).
const MAX_STDIN_ANSWER: u64 = 64 * 1024;

/// Options of `pantheon sources`.
#[derive(Debug, Clone, clap::Args)]
pub struct SourcesArgs {
    /// Also list each source's agents, tasks, locks and waiting items (not only its counts).
    #[arg(long)]
    pub detail: bool,
    /// Read one source, or answer one of its items (without one: probe every `--source` given
    /// before the command and list them with their health).
    #[command(subcommand)]
    pub command: Option<SourcesCommand>,
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

/// Runs `pantheon sources …`; `root` is needed only by `answer` (it is journaled).
pub(crate) fn run(
    args: SourcesArgs,
    specs: &[String],
    root: Option<&Root>,
    origin: Origin,
) -> anyhow::Result<Outcome> {
    match args.command {
        None => list(args.detail, specs),
        Some(SourcesCommand::Read(a)) => read(&a),
        Some(SourcesCommand::Answer(a)) => match root {
            Some(root) => answer(a, root, &origin),
            None => anyhow::bail!("{}", super::NO_ROOT),
        },
    }
}

/// Whether the command journals (and so needs a root).
pub(crate) fn needs_root(args: &SourcesArgs) -> bool {
    matches!(args.command, Some(SourcesCommand::Answer(_)))
}

/// `pantheon sources`: reads each source once (each bounded by its own timeout) and prints one
/// JSON line per source, `health` `ok` or `error` with the reason; exits 1 when any is broken.
fn list(with_detail: bool, specs: &[String]) -> anyhow::Result<Outcome> {
    if specs.is_empty() {
        return Err(crate::cli::usage(
            "no source to probe: name one with --source KIND:LOCATION (claude-teams:~/.claude, agent-mail:ARCHIVE[,DB]), \
             e.g. `pantheon --source claude-teams sources`",
        ));
    }
    let states = probe(specs, PROBE_TIMEOUT);
    let broken = states
        .iter()
        .any(|s| matches!(s.health, Health::Error { .. }));
    let list: Vec<Value> = states
        .iter()
        .map(|s| {
            let mut v = s.to_json();
            if with_detail && let Some(m) = v.as_object_mut() {
                m.insert("detail".into(), detail(s));
            }
            v
        })
        .collect();
    crate::cli::print_json(&json!({ "sources": list }));
    Ok(Outcome::Exit(if broken {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }))
}

/// A source's agents, tasks, locks and waiting items as JSON (the raw values kept).
fn detail(s: &SourceState) -> Value {
    let snap = &s.snapshot;
    json!({
        "agents": snap.agents.iter().map(|a| json!({"name": a.name, "group": a.group, "status": a.status, "raw": a.raw})).collect::<Vec<_>>(),
        "tasks": snap.tasks.iter().map(|t| json!({"id": t.id, "group": t.group, "title": t.title, "state": t.state, "owner": t.owner})).collect::<Vec<_>>(),
        "locks": snap.locks.iter().map(|l| json!({"path": l.path, "holder": l.holder, "expires": l.expires})).collect::<Vec<_>>(),
        "attention": snap.attention.iter().map(|a| json!({"key": a.key, "agent": a.agent, "what": a.what, "since": a.since, "answerable": a.answerable})).collect::<Vec<_>>(),
        "costs": snap.costs.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
    })
}

/// `pantheon --source … inbox AGENT`: the messages to AGENT in every source, oldest first, each
/// with its source; plus each source's health, so an empty list is never a silent failure.
pub(crate) fn inbox(agent: &str, specs: &[String]) -> anyhow::Result<Outcome> {
    let states = probe(specs, PROBE_TIMEOUT);
    let mut messages = Vec::new();
    for s in &states {
        for m in &s.snapshot.messages {
            if m.to.iter().any(|t| t == agent) {
                messages.push((
                    m.at,
                    json!({
                        "source": s.spec(),
                        "id": m.id,
                        "group": m.group,
                        "from": m.from,
                        "to": m.to,
                        "at": m.at,
                        "subject": m.subject,
                        "body": m.body,
                        "raw": m.raw,
                    }),
                ));
            }
        }
    }
    messages.sort_by_key(|a| a.0);
    Ok(Outcome::Json(json!({
        "agent": agent,
        "sources": states.iter().map(SourceState::to_json).collect::<Vec<_>>(),
        "messages": messages.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    })))
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
    let act = Act::new(JournalVerb::AnswerSource, &answered.detail)
        .target(JournalTarget::Source, Some(&args.source))
        .target(JournalTarget::Item, Some(&args.key));
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
pub(crate) fn snapshot_json(spec: &str, snap: &Snapshot) -> Value {
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
