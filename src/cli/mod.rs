//! The command line: parse, call the engine, print the result as JSON.
//!
//! Success prints the result JSON on stdout and exits 0; a refusal prints `error: …` on stderr and
//! exits 1; bad usage exits 2 (clap).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::engine::journal::Origin;
use crate::engine::store::Root;

pub mod board;
pub mod bus;
pub mod conductor;
pub mod journal;

/// Pantheon Console: watch and operate a pantheon of AI agents coordinating through files.
#[derive(Debug, Parser)]
#[command(
    name = "pantheon",
    version,
    about,
    long_about = None
)]
pub struct Cli {
    /// The pantheon root (default: $PANTHEON_ROOT, else ~/pantheon; `demo` without --root makes a
    /// fresh temporary root).
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Without a command, `pantheon` opens the console: `pantheon --read-only` is
    /// `pantheon console --read-only`.
    #[command(flatten)]
    pub console: ConsoleArgs,
    /// Who is acting, as recorded in the operator journal (default: your user name). With
    /// `pantheon journal`: show only this actor's entries.
    #[arg(long, global = true, value_name = "NAME")]
    pub actor: Option<String>,

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
    /// Serve the Conductor and bus tools over MCP on stdio (the root must exist: `init` first).
    Mcp,
    #[command(flatten)]
    Conductor(conductor::ConductorCommand),
    /// The per-track message bus.
    Bus(bus::BusArgs),
    /// The board deliberation of a track.
    Board(board::BoardArgs),
    /// The operator journal: every state-changing act, hash-chained (--verify checks the chain).
    Journal(journal::JournalArgs),
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

pub use crate::outcome::Outcome;

/// Prints `value` as pretty JSON on stdout. A reader that went away (`pantheon … | head`) is not an
/// error worth a panic: the output is simply dropped, as other Unix tools do.
pub fn print_json(value: &serde_json::Value) {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value).expect("JSON values always serialise");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

impl Command {
    /// True for the commands that create a root (`init`, `demo`, `bus --track T init`); every
    /// other command refuses a root directory that does not exist.
    fn creates_root(&self) -> bool {
        matches!(
            self,
            Command::Demo(_)
                | Command::Conductor(conductor::ConductorCommand::Init)
                | Command::Bus(bus::BusArgs {
                    command: bus::BusCommand::Init,
                    ..
                })
        )
    }
}

/// Refuses a root that is not an existing directory, with the command that creates one. An
/// existing empty directory is a root with nothing in it yet, not a missing one.
pub fn require_root(root: &Root) -> anyhow::Result<()> {
    if root.root.is_dir() {
        return Ok(());
    }
    let what = if root.root.symlink_metadata().is_ok() {
        "is not a directory"
    } else {
        "does not exist"
    };
    anyhow::bail!(
        "the pantheon root {} {what}; create it with `pantheon --root {} init`, or pass --root DIR / set PANTHEON_ROOT",
        root.root.display(),
        root.root.display()
    )
}

impl Cli {
    /// Console options given beside another command are a usage error (they would be ignored).
    pub fn usage_error(&self) -> Option<clap::Error> {
        let console_flags = self.console.read_only || self.console.poll.is_some();
        (console_flags && self.command.is_some()).then(|| {
            use clap::CommandFactory;
            Self::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "--read-only and --poll before a command belong to the console: \
                 use `pantheon --read-only` or `pantheon console --read-only`",
            )
        })
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    if let Some(e) = cli.usage_error() {
        e.exit();
    }
    let root = Root::from_env(cli.root.as_deref());
    let checked = match &cli.command {
        Some(c) if c.creates_root() => Ok(()),
        _ => require_root(&root),
    };
    if let Err(e) = checked {
        eprintln!("error: {e:#}");
        return ExitCode::from(1);
    }
    if let Some(a) = &cli.actor
        && let Err(e) = crate::engine::journal::check_actor(a)
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let origin = Origin::new(cli.actor.as_deref(), "cli");
    let result: anyhow::Result<Outcome> = match cli.command {
        None => run_console(cli.console, &root),
        Some(Command::Console(args)) => run_console(args, &root),
        Some(Command::Demo(args)) => crate::demo::run(args, cli.root.as_deref()),
        Some(Command::Validate) => run_validate(&root),
        Some(Command::Mcp) => crate::mcp::serve(root).map(|()| Outcome::Exit(ExitCode::SUCCESS)),
        Some(Command::Conductor(cmd)) => conductor::run(cmd, &root, origin),
        Some(Command::Bus(args)) => bus::run(args, &root, origin),
        Some(Command::Board(args)) => board::run(args, &root, origin),
        Some(Command::Journal(args)) => journal::run(args, &root, cli.actor),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_options_work_without_the_console_command_but_not_beside_another() {
        let cli = Cli::try_parse_from(["pantheon", "--read-only", "--poll", "200"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.console.read_only);
        assert_eq!(cli.console.poll, Some(200));
        let cli = Cli::try_parse_from(["pantheon", "console", "--read-only"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Console(ConsoleArgs {
                read_only: true,
                ..
            }))
        ));
        let beside = Cli::try_parse_from(["pantheon", "--read-only", "pending"]).unwrap();
        assert!(beside.usage_error().is_some());
        let global_root = Cli::try_parse_from(["pantheon", "--root", "/r", "pending"]).unwrap();
        assert!(global_root.usage_error().is_none());
    }
}
