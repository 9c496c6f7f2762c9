//! `pantheon status` (one line for a tmux status bar or a shell prompt) and `pantheon check` (a
//! monitoring plugin): thin shells over `engine::health` (docs/OBSERVABILITY.md). Their attention
//! figure (`@`) is the console's: the items `live::attention::items` gives on a snapshot of the
//! root, the one computation the console's header, pane 7, its hook and `/metrics` count.

use std::process::ExitCode;

use crate::engine::{
    OverdueRule, Root, live_supervisors,
    status::{self, Health, Level, State, SupervisorRule, Thresholds},
};
use crate::live::attention::Tally;
use crate::outcome::Outcome;

/// The attention items of `root` at `now`, counted by kind: the live model's snapshot of the root,
/// read once (what the console shows on opening it), through the one attention function; with
/// `cached`, the counts of the last run while nothing they depend on changed.
pub(crate) fn attention(
    root: &Root,
    now: chrono::DateTime<chrono::Utc>,
    cached: bool,
    sources: &[String],
) -> Tally {
    let count = || {
        let model =
            crate::live::LiveModel::open(root.clone(), crate::live::ModelOptions::default());
        let mut snap = model.snapshot();
        if !sources.is_empty() {
            // Each source read once, beside the root, through the same attention function.
            let mut s = (*snap).clone();
            s.sources = std::sync::Arc::new(crate::sources::probe(
                sources,
                crate::sources::PROBE_TIMEOUT,
            ));
            snap = std::sync::Arc::new(s);
        }
        (
            crate::live::attention::tally(&snap, now),
            crate::live::attention::next_change(&snap, now),
        )
    };
    // The cache keeps the root's counts only: a foreign source is read afresh every time.
    if cached && sources.is_empty() {
        crate::observe::status_cache::attention(root, now, count)
    } else {
        count().0
    }
}

/// How `status` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    // `@3 ‖1 ▲1 ☠2` (figures that are 0 left out; `✓` when all are). The variants carry no doc
    // comments: clap would list them in `--help` only, and `-h` and `--help` must say the same.
    #[default]
    Line,
    // The line with tmux colour codes (`#[fg=…]`), for `status-right`.
    Tmux,
    // Every figure as JSON.
    Json,
}

/// Options of `pantheon status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// line: `@3 ‖1 ▲1 ☠2`; tmux: the same with colours; json: every figure.
    #[arg(long, value_enum, default_value_t)]
    pub format: StatusFormat,
    /// Read every dispatch file instead of reusing the figures of inboxes unchanged since the last
    /// run (kept in the user's cache directory).
    #[arg(long)]
    pub no_cache: bool,
}

/// Options of `pantheon check`. Each level is "at or above": `--warn overdue=1 --crit overdue=10`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// WARNING when FIGURE is at or above N (overdue, dead_letters, stale_workers, expired_locks,
    /// bridge_lag, attention, paused); repeatable; overrides the root config's `check:`.
    #[arg(long, value_name = "FIGURE=N")]
    pub warn: Vec<String>,
    /// CRITICAL when FIGURE is at or above N; repeatable.
    #[arg(long, value_name = "FIGURE=N")]
    pub crit: Vec<String>,
    /// When a missing supervisor is CRITICAL: deadlines (open ack deadlines nobody enforces; the
    /// default), always, never.
    #[arg(long, value_name = "WHEN")]
    pub supervisor: Option<String>,
    /// Skip verifying the journal's hash chain (it reads the whole journal).
    #[arg(long)]
    pub no_journal: bool,
}

/// `pantheon status`.
pub(crate) fn status(args: StatusArgs, root: &Root, sources: &[String]) -> anyhow::Result<Outcome> {
    let now = chrono::Utc::now();
    let rule = OverdueRule::default();
    let h = if args.no_cache {
        status::read(root, &rule, now)
    } else {
        crate::observe::status_cache::read(root, &rule, now)
    };
    let att = attention(root, now, !args.no_cache, sources);
    let supervisors = live_supervisors(root, now);
    let exposed = if h.supervisors > 0 {
        crate::observe::record::exposed(root, &supervisors)
    } else {
        Vec::new()
    };
    let approvals_exposed = if h.supervisors > 0 {
        crate::observe::record::exposed_kind(root, "approvals", &supervisors)
    } else {
        Vec::new()
    };
    // An MCP endpoint beyond loopback: `serve --mcp` (a supervisor) or `mcp --http` (a process).
    let mcp_exposed = crate::observe::record::mcp_exposed(root, &supervisors);
    let with_exposed = |l: String, tmux: bool| {
        let mut l = match (exposed.is_empty(), tmux) {
            (true, _) => l,
            (false, false) => format!("{l} ⚠metrics"),
            (false, true) => format!("{l} #[fg=red]⚠metrics#[default]"),
        };
        // Approval links served beyond loopback: whoever reaches it with a link decides.
        l = match (approvals_exposed.is_empty(), tmux) {
            (true, _) => l,
            (false, false) => format!("{l} ⚠approvals"),
            (false, true) => format!("{l} #[fg=red]⚠approvals#[default]"),
        };
        if !mcp_exposed.is_empty() {
            l = if tmux {
                format!("{l} #[fg=red]⚠mcp#[default]")
            } else {
                format!("{l} ⚠mcp")
            };
        }
        // The history is not being recorded though something should record it.
        if h.recorder_down() {
            l = if tmux {
                format!("{l} #[fg=red]⚠recorder#[default]")
            } else {
                format!("{l} ⚠recorder")
            };
        }
        l
    };
    match args.format {
        StatusFormat::Json => {
            let mut v = status_json(&h, &att, &exposed);
            if !approvals_exposed.is_empty() {
                v["approvals_exposed"] = approvals_exposed.clone().into();
            }
            // `serve --mcp` / `mcp --http` addresses that are not loopback (the line shows `⚠mcp`).
            v["mcp_exposed"] = mcp_exposed.clone().into();
            Ok(Outcome::Json(v))
        }
        StatusFormat::Line => {
            println!("{}", with_exposed(line(&h, att.total(), false), false));
            Ok(Outcome::Exit(ExitCode::SUCCESS))
        }
        StatusFormat::Tmux => {
            println!("{}", with_exposed(line(&h, att.total(), true), true));
            Ok(Outcome::Exit(ExitCode::SUCCESS))
        }
    }
}

fn status_json(h: &Health, att: &Tally, exposed: &[String]) -> serde_json::Value {
    let mut v = serde_json::to_value(h).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("attention".into(), att.total().into());
        m.insert("attention_kinds".into(), att.to_json());
        m.insert("alerts".into(), h.alerts().into());
        m.insert("no_supervisor".into(), h.unsupervised().into());
        m.insert("recorder_down".into(), h.recorder_down().into());
        // `serve --metrics` addresses that are not loopback (the line shows `⚠metrics`).
        m.insert("metrics_exposed".into(), exposed.into());
    }
    v
}

/// `@3 ‖1 ▲1 ☠2 ⏸1`: attention (`attention` items), held, alerts, dead letters, pauses in force; a
/// figure at 0 is left out.
fn line(h: &Health, attention: usize, tmux: bool) -> String {
    let parts: Vec<String> = [
        ('@', attention, "colour214"),
        ('‖', h.held, "colour75"),
        ('▲', h.alerts(), "red"),
        ('☠', h.dead_letters, "red"),
        ('⏸', h.paused, "colour75"),
    ]
    .into_iter()
    .filter(|(_, n, _)| *n > 0)
    .map(|(glyph, n, colour)| {
        if tmux {
            format!("#[fg={colour}]{glyph}{n}#[default]")
        } else {
            format!("{glyph}{n}")
        }
    })
    .collect();
    match (parts.is_empty(), tmux) {
        (true, true) => "#[fg=green]✓#[default]".into(),
        (true, false) => "✓".into(),
        (false, _) => parts.join(" "),
    }
}

/// `pantheon check`: prints one line and exits with the plugin's code. Every failure to judge the
/// root (none there, a bad threshold) is UNKNOWN (3), never an error exit that reads as WARNING.
pub(crate) fn check(args: CheckArgs, root: &Root, sources: &[String]) -> anyhow::Result<Outcome> {
    let state = match judge(&args, root, sources) {
        Ok(v) => {
            println!("{}", v.line());
            v.state
        }
        Err(why) => {
            println!("PANTHEON UNKNOWN - {why}");
            State::Unknown
        }
    };
    Ok(Outcome::Exit(ExitCode::from(state.code())))
}

fn judge(
    args: &CheckArgs,
    root: &Root,
    sources: &[String],
) -> Result<status::Verdict, crate::engine::Refusal> {
    if !root.conductor.is_dir() {
        return Err(format!(
            "{} is not a pantheon root (no conductor/)",
            root.dir.display()
        )
        .into());
    }
    let mut t = Thresholds::from_config(root.settings.check.as_ref())
        .map_err(|e| format!("conductor/config.yaml: {e}"))?;
    for (flag, list) in [("--warn", &args.warn), ("--crit", &args.crit)] {
        for item in list {
            let (name, n) = item
                .split_once('=')
                .and_then(|(k, v)| Some((k.trim(), v.trim().parse::<u64>().ok()?)))
                .ok_or_else(|| format!("{flag} {item:?}: expected FIGURE=N"))?;
            let level: &mut Level = t.level_mut(name).ok_or_else(|| {
                format!(
                    "{flag} {name:?}: not one of {}",
                    status::LEVEL_NAMES.join(", ")
                )
            })?;
            if flag == "--warn" {
                level.warn = Some(n);
            } else {
                level.crit = Some(n);
            }
        }
    }
    if let Some(s) = &args.supervisor {
        t.supervisor = match s.as_str() {
            "deadlines" => SupervisorRule::Deadlines,
            "always" => SupervisorRule::Always,
            "never" => SupervisorRule::Never,
            other => {
                return Err(
                    format!("--supervisor {other:?}: use deadlines, always or never").into(),
                );
            }
        };
    }
    if args.no_journal {
        t.journal = false;
    }
    let now = chrono::Utc::now();
    let h = status::read(root, &OverdueRule::default(), now);
    let att = attention(root, now, false, sources);
    let journal = t.journal.then(|| status::journal_chain(root));
    let by_kind: Vec<(&str, usize)> = att.iter().collect();
    Ok(status::evaluate(
        &h,
        &status::Judged {
            journal: journal.as_ref(),
            attention: &by_kind,
        },
        &t,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_leaves_out_zeros_and_says_all_clear() {
        let mut h = Health::default();
        assert_eq!(line(&h, 0, false), "✓");
        assert_eq!(line(&h, 0, true), "#[fg=green]✓#[default]");
        h.held = 1;
        h.dead_letters = 2;
        h.overdue = 1;
        h.overdue_held = 1;
        // attention: 3 items (counted by the attention function); alerts: 1 overdue.
        assert_eq!(line(&h, 3, false), "@3 ‖1 ▲1 ☠2");
        assert!(line(&h, 3, true).starts_with("#[fg=colour214]@3#[default] "));
    }
}
