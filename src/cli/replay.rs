//! `pantheon replay --at TS` (the root as it was at a moment) and `pantheon replay --from TS --to TS`
//! (the changes between two moments), read from the root's history (docs/HISTORY.md).

use std::process::ExitCode;

use super::{Outcome, print_json};
use crate::engine::{ChangeFilter, Root, history_changes, replay_at};

/// Options of `pantheon replay`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReplayArgs {
    /// The moment: RFC 3339 (2026-06-14T10:30:00Z), `now`, back from now (-15m, -1h30m), or a
    /// local time today (10:30, 10:30:15).
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment, conflicts_with_all = ["from", "to"], required_unless_present = "from")]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// List the changes after this moment (with --to).
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment, requires = "to")]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// …up to and including this moment.
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment, requires = "from")]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// With --from/--to: only the files of this track's bus and board (a board session step by step).
    #[arg(long, value_name = "TRACK")]
    pub track: Option<String>,
    /// With --from/--to: only the files of this workflow.
    #[arg(long, value_name = "WF")]
    pub workflow: Option<String>,
    /// With --from/--to: at most this many changes (default 10000).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub limit: usize,
    /// Print JSON (the default for --from/--to); without it, --at prints a short summary.
    #[arg(long)]
    pub json: bool,
}

/// Runs `pantheon replay`.
pub(crate) fn run(args: ReplayArgs, root: &Root) -> anyhow::Result<Outcome> {
    if let (Some(from), Some(to)) = (args.from, args.to) {
        if to < from {
            return Err(super::usage(format!(
                "--to {} is before --from {}",
                crate::engine::time::format_ts(to),
                crate::engine::time::format_ts(from)
            )));
        }
        let (from, to) = (from.timestamp_micros(), to.timestamp_micros());
        if let Some(t) = &args.track {
            crate::engine::TrackName::parse(t)?;
        }
        let filter = ChangeFilter {
            track: args.track.clone(),
            workflow: args.workflow.clone(),
            limit: args.limit.max(1),
        };
        return Ok(Outcome::Json(history_changes(root, from, to, &filter)?));
    }
    let at = args.at.unwrap_or_else(chrono::Utc::now).timestamp_micros();
    let mut v = replay_at(root, at)?;
    // A moment before the history: its first moment is shown, and said so on standard error.
    if let Some(note) = v.as_object_mut().and_then(|m| m.remove("note")) {
        eprintln!("note: {}", note.as_str().unwrap_or_default());
    }
    if args.json {
        print_json(&v);
        return Ok(Outcome::Exit(ExitCode::SUCCESS));
    }
    println!("{}", summary(&v));
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

/// A few lines for a person: the moment, then what was open.
fn summary(v: &serde_json::Value) -> String {
    use serde_json::Value;
    let mut out = vec![format!(
        "AS OF {} (history {} .. {}); --json for everything",
        v["at"].as_str().unwrap_or("?"),
        v["history"]["first"].as_str().unwrap_or("?"),
        v["history"]["last"].as_str().unwrap_or("?")
    )];
    let empty = serde_json::Map::new();
    let wfs = v["workflows"].as_object().unwrap_or(&empty);
    out.push(format!("workflows: {}", wfs.len()));
    for (id, w) in wfs {
        out.push(format!(
            "  {id}  {}  {}",
            w["status"].as_str().unwrap_or("?"),
            w["current_step"].as_str().unwrap_or("-")
        ));
    }
    for (name, key) in [("inbox", "inboxes"), ("dead", "dead")] {
        for (god, ids) in v[key].as_object().unwrap_or(&empty) {
            let ids: Vec<&str> = ids
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            // An empty inbox is listed by --json; the summary shows what was open.
            if !ids.is_empty() {
                out.push(format!("{name} {god}: {}", ids.join(" ")));
            }
        }
    }
    let held: Vec<&str> = v["held"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !held.is_empty() {
        out.push(format!("held: {}", held.join(" ")));
    }
    // The decisions that came through an approval link: which channel, and who it proved.
    for d in v["journal"]["decided_by_link"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let s = |k: &str| d[k].as_str().unwrap_or("-");
        let mut line = format!(
            "by link: {} {} {} ({}) via {}",
            s("action"),
            s("outcome"),
            s("handoff_id"),
            s("workflow_id"),
            s("channel")
        );
        if let Some(a) = d["approver"].as_str() {
            line.push_str(&format!(", approver {a}"));
        }
        line.push_str(&format!(" at {}", s("at")));
        out.push(line);
    }
    for (track, b) in v["boards"].as_object().unwrap_or(&empty) {
        out.push(format!(
            "board {track}: {} round {} ({} assessments, {} votes)",
            b["phase"].as_str().unwrap_or("?"),
            b["round"],
            b["assessments"],
            b["votes"]
        ));
    }
    for (track, l) in v["locks"].as_object().unwrap_or(&empty) {
        for (path, w) in l.as_object().unwrap_or(&empty) {
            out.push(format!(
                "lock {track}: {path} held by {}",
                w.as_str().unwrap_or("?")
            ));
        }
    }
    out.join("\n")
}
