//! The command line: parse, call the engine, print the result as JSON.
//!
//! Success prints the result JSON on stdout and exits 0; a refusal prints `error: …` on stderr and
//! exits 1; bad usage exits 2 (clap).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::engine::store::Root;

pub mod board;
pub mod bus;
pub mod conductor;

/// Pantheon Console: watch and operate a pantheon of AI agents coordinating through files.
#[derive(Debug, Parser)]
#[command(name = "pantheon", version, about, long_about = None)]
pub struct Cli {
    /// The pantheon root (default: $PANTHEON_ROOT, else ~/pantheon).
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the live operations console (the default).
    Console(ConsoleArgs),
    /// Run a simulated pantheon and watch it in the console (--headless: simulate and summarise).
    Demo(crate::demo::DemoArgs),
    /// Check every protocol file under the root; prints a JSON report, exits 1 on any error.
    Validate,
    /// Serve the Conductor and bus tools over MCP on stdio.
    Mcp,
    #[command(flatten)]
    Conductor(conductor::ConductorCommand),
    /// The per-track message bus.
    Bus(bus::BusArgs),
    /// The board deliberation of a track.
    Board(board::BoardArgs),
    /// Connect this root to other pantheons over NATS JetStream (long-running; `bridge status`: JSON).
    Bridge(crate::bridge::BridgeArgs),
}

/// Options of `pantheon console`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConsoleArgs {
    /// Watch only: every action that changes files is disabled.
    #[arg(long)]
    pub read_only: bool,
    /// Poll the files every MS milliseconds instead of using file notifications (for file systems
    /// without them, e.g. some network mounts).
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "1000")]
    pub poll: Option<u64>,
}

fn run_console(args: ConsoleArgs, root: &Root) -> anyhow::Result<Outcome> {
    let opts = crate::console::run::ConsoleOptions {
        read_only: args.read_only,
        poll: args
            .poll
            .map(|ms| std::time::Duration::from_millis(ms.max(50))),
    };
    crate::console::run::run(root.clone(), opts)?;
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

fn run_validate(root: &Root) -> anyhow::Result<Outcome> {
    let report = crate::engine::validate::validate_root(root)?;
    print_json(&serde_json::to_value(&report)?);
    Ok(Outcome::Exit(if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }))
}

/// What a command produced: a JSON result to print, or a process exit code of its own.
pub enum Outcome {
    Json(serde_json::Value),
    Exit(ExitCode),
}

/// Prints `value` as pretty JSON on stdout. A reader that went away (`pantheon … | head`) is not an
/// error worth a panic: the output is simply dropped, as other Unix tools do.
pub fn print_json(value: &serde_json::Value) {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value).expect("JSON values always serialise");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let root = Root::from_env(cli.root.as_deref());
    let result: anyhow::Result<Outcome> = match cli.command {
        None => run_console(ConsoleArgs::default(), &root),
        Some(Command::Console(args)) => run_console(args, &root),
        Some(Command::Demo(args)) => crate::demo::run(args, cli.root.as_deref()),
        Some(Command::Validate) => run_validate(&root),
        Some(Command::Mcp) => crate::mcp::serve(root).map(|()| Outcome::Exit(ExitCode::SUCCESS)),
        Some(Command::Conductor(cmd)) => conductor::run(cmd, &root),
        Some(Command::Bus(args)) => bus::run(args, &root),
        Some(Command::Board(args)) => board::run(args, &root),
        Some(Command::Bridge(args)) => crate::bridge::run(args, &root),
    };
    match result {
        Ok(Outcome::Json(v)) => {
            print_json(&v);
            ExitCode::SUCCESS
        }
        Ok(Outcome::Exit(code)) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
