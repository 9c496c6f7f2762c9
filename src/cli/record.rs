//! `pantheon record` (the history recorder in the foreground, until SIGTERM or SIGINT) and
//! `pantheon record --forget WF` (drop a workflow's recorded context): thin shells around
//! [`crate::engine::recorder`] and [`crate::engine::forget_history`] (docs/HISTORY.md). `pantheon
//! serve` runs the same recorder on a thread unless the root's config says `history: {record: false}`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::Outcome;
use crate::engine::{
    Root, WorkflowId,
    recorder::{Background, Msg, Report},
    time::format_ts,
};

/// Options of `pantheon record`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RecordArgs {
    /// Drop the recorded context of this workflow (every version of its state, handoffs and
    /// dispatches) from the history, then exit; refused while the workflow runs.
    #[arg(long, value_name = "WF")]
    pub forget: Option<String>,
    /// Append the log here instead of standard error.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

/// One log line for a recorder report (`None`: nothing worth a line).
pub(crate) fn report_line(r: &Report) -> Option<String> {
    let now = format_ts(chrono::Utc::now());
    Some(match r {
        Report::StandingBy(who) => {
            format!("{now} history: {who} records this root; standing by to take over")
        }
        Report::Writing { scanned, repaired } => format!(
            "{now} history: recording ({scanned} change(s) found at start{})",
            if *repaired > 0 {
                format!(", {repaired} damaged record(s) of a killed recorder cut")
            } else {
                String::new()
            }
        ),
        Report::Committed(_) => return None,
        Report::Warning(w) => format!("{now} history: {w}"),
        Report::Stopped => format!("{now} history: stopped"),
    })
}

/// A log sink: the file `log` (appended) or standard error.
pub(crate) fn log_sink(log: Option<&PathBuf>) -> anyhow::Result<Box<dyn Write + Send>> {
    Ok(match log {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open the log {}", p.display()))?,
        ),
        None => Box::new(std::io::stderr()),
    })
}

/// Starts the recorder on a thread, its reports logged to `out`.
pub(crate) fn background(
    root: &Root,
    mut out: Box<dyn Write + Send>,
) -> anyhow::Result<Background> {
    Ok(Background::start(
        root,
        Box::new(move |r: Report| {
            if let Some(l) = report_line(&r) {
                let _ = writeln!(out, "{l}");
            }
        }),
    )?)
}

/// `pantheon record`; with `--source`s, their states are recorded too (`conductor/sources/`).
pub(crate) fn run(args: RecordArgs, root: &Root, sources: &[String]) -> anyhow::Result<Outcome> {
    if let Some(wf) = &args.forget {
        let wf = WorkflowId::parse(wf)?;
        let r = crate::engine::forget_history(root, &wf)?;
        return Ok(Outcome::Json(serde_json::to_value(r)?));
    }
    let out = log_sink(args.log.as_ref())?;
    // The sources' states go into the root first: the recorder below records them as any file.
    let recording = (!sources.is_empty()).then(|| {
        let warn = log_sink(args.log.as_ref()).ok().map(std::sync::Mutex::new);
        crate::sources::record::Recording::start(
            root,
            sources,
            Box::new(move |w| {
                if let Some(out) = &warn {
                    let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = writeln!(out, "{} history: {w}", format_ts(chrono::Utc::now()));
                }
            }),
        )
    });
    let bg = background(root, out)?;
    let stop = bg.sender();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal handler")?;
    rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        anyhow::Ok(())
    })?;
    // The sources' states end first (their files removed: nobody reads the sources any more), so
    // the recorder can still see them go.
    drop(recording);
    let _ = stop.send(Msg::Stop);
    bg.stop();
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}
