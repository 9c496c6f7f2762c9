//! `pantheon sources` (probe each `--source` and list it with its health) and the foreign side of
//! `inbox` (a foreign agent's messages), over `crate::sources`.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::outcome::Outcome;
use crate::sources::{Health, PROBE_TIMEOUT, SourceState, probe};

/// Options of `pantheon sources`.
#[derive(Debug, Clone, clap::Args)]
pub struct SourcesArgs {
    /// Also list each source's agents, tasks, locks and waiting items (not only its counts).
    #[arg(long)]
    pub detail: bool,
}

/// `pantheon sources`: reads each source once (each bounded by its own timeout) and prints one
/// JSON line per source, `health` `ok` or `error` with the reason; exits 1 when any is broken.
pub fn run(args: SourcesArgs, specs: &[String]) -> anyhow::Result<Outcome> {
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
            if args.detail
                && let Some(m) = v.as_object_mut()
            {
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
    })
}

/// `pantheon --source … inbox AGENT`: the messages to AGENT in every source, oldest first, each
/// with its source; plus each source's health, so an empty list is never a silent failure.
pub fn inbox(agent: &str, specs: &[String]) -> anyhow::Result<Outcome> {
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
