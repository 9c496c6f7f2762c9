//! `pantheon status` (one line for a tmux status bar or a shell prompt) and `pantheon check` (a
//! monitoring plugin): thin shells over `engine::health` (docs/OBSERVABILITY.md).

use std::process::ExitCode;

use crate::engine::{
    OverdueRule, Root, live_supervisors,
    status::{self, Health, Level, State, SupervisorRule, Thresholds},
};
use crate::outcome::Outcome;

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
    /// bridge_lag, paused); repeatable; overrides the root config's `check:`.
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
pub fn status(args: StatusArgs, root: &Root) -> anyhow::Result<Outcome> {
    let now = chrono::Utc::now();
    let rule = OverdueRule::default();
    let h = if args.no_cache {
        status::read(root, &rule, now)
    } else {
        crate::observe::status_cache::read(root, &rule, now)
    };
    let exposed = if h.supervisors > 0 {
        crate::observe::record::exposed(root, &live_supervisors(root, now))
    } else {
        Vec::new()
    };
    let with_exposed = |l: String, tmux: bool| match (exposed.is_empty(), tmux) {
        (true, _) => l,
        (false, false) => format!("{l} ⚠metrics"),
        (false, true) => format!("{l} #[fg=red]⚠metrics#[default]"),
    };
    match args.format {
        StatusFormat::Json => Ok(Outcome::Json(status_json(&h, &exposed))),
        StatusFormat::Line => {
            println!("{}", with_exposed(line(&h, false), false));
            Ok(Outcome::Exit(ExitCode::SUCCESS))
        }
        StatusFormat::Tmux => {
            println!("{}", with_exposed(line(&h, true), true));
            Ok(Outcome::Exit(ExitCode::SUCCESS))
        }
    }
}

fn status_json(h: &Health, exposed: &[String]) -> serde_json::Value {
    let mut v = serde_json::to_value(h).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("attention".into(), h.attention().into());
        m.insert("alerts".into(), h.alerts().into());
        m.insert("no_supervisor".into(), h.unsupervised().into());
        // `serve --metrics` addresses that are not loopback (the line shows `⚠metrics`).
        m.insert("metrics_exposed".into(), exposed.into());
    }
    v
}

/// `@3 ‖1 ▲1 ☠2 ⏸1`: attention, held, alerts, dead letters, pauses in force; a figure at 0 is
/// left out.
fn line(h: &Health, tmux: bool) -> String {
    let parts: Vec<String> = [
        ('@', h.attention(), "colour214"),
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
pub fn check(args: CheckArgs, root: &Root) -> anyhow::Result<Outcome> {
    let state = match judge(&args, root) {
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

fn judge(args: &CheckArgs, root: &Root) -> Result<status::Verdict, String> {
    if !root.conductor.is_dir() {
        return Err(format!(
            "{} is not a pantheon root (no conductor/)",
            root.dir.display()
        ));
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
                return Err(format!(
                    "--supervisor {other:?}: use deadlines, always or never"
                ));
            }
        };
    }
    if args.no_journal {
        t.journal = false;
    }
    let h = status::read(root, &OverdueRule::default(), chrono::Utc::now());
    let journal = t.journal.then(|| status::journal_chain(root));
    Ok(status::evaluate(&h, journal.as_ref(), &t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_leaves_out_zeros_and_says_all_clear() {
        let mut h = Health::default();
        assert_eq!(line(&h, false), "✓");
        assert_eq!(line(&h, true), "#[fg=green]✓#[default]");
        h.held = 1;
        h.dead_letters = 2;
        h.overdue = 1;
        h.overdue_held = 1;
        // attention: 1 held + 0 overdue not held + 2 dead letters; alerts: 1 overdue.
        assert_eq!(line(&h, false), "@3 ‖1 ▲1 ☠2");
        assert!(line(&h, true).starts_with("#[fg=colour214]@3#[default] "));
    }
}
