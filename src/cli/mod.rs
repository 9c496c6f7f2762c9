//! The command line: parse, call the engine, print the result as JSON.
//!
//! Success prints the result JSON on stdout and exits 0; a refusal prints `error: …` on stderr and
//! exits 1; bad usage exits 2 (clap).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::engine::Root;

pub(crate) mod board;
pub(crate) mod bus;
pub(crate) mod conductor;
pub(crate) mod cost;
pub(crate) mod credentials;
pub(crate) mod journal;
pub(crate) mod observe;
pub(crate) mod record;
pub(crate) mod replay;
pub(crate) mod serve;
pub(crate) mod sources;

/// Pantheon Console: watch and operate a pantheon of AI agents coordinating through files.
#[derive(Debug, Parser)]
#[command(
    name = "pantheon",
    version,
    about,
    long_about = None,
    after_help = "Start with `pantheon demo` (a simulated pantheon, live) or `pantheon init` (a real root; README.md, \
                  \"Quick start\"). `pantheon COMMAND --help` describes each command.\n\
                  Results are JSON on stdout; diagnostics go to stderr. Exit status: 0 done, 1 refused or failed \
                  (`error: …`, nothing written), 2 bad usage (a mistyped command or flag names the near one)."
)]
pub struct Cli {
    /// The pantheon root (default: $PANTHEON_ROOT, else ~/pantheon; `demo` without --root makes a
    /// fresh temporary root).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help_heading = "Global options"
    )]
    pub root: Option<PathBuf>,

    /// Without a command, `pantheon` opens the console: `pantheon --read-only` is
    /// `pantheon console --read-only`.
    #[command(flatten, next_help_heading = "Console options (with no command)")]
    pub console: ConsoleArgs,
    /// Who is acting, as recorded in the operator journal (default: your user name). With
    /// `pantheon journal`: show only this actor's entries.
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        help_heading = "Global options"
    )]
    pub actor: Option<String>,
    /// A foreign substrate beside the root, KIND:LOCATION (repeatable): claude-teams[:DIR]
    /// (default ~/.claude), agent-mail:ARCHIVE[,DB]. Its agents, messages, tasks, locks and waiting
    /// items join the console, `status`, `check` and `inbox` (docs/SOURCES.md); `pantheon sources`
    /// probes each.
    // Given before the command (`pantheon --source S status`): not global, since `bus post` has a
    // `--source` of its own (the message's sender).
    #[arg(
        long = "source",
        value_name = "KIND:LOCATION",
        help_heading = "Global options",
        value_parser = parse_source
    )]
    pub sources: Vec<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the live operations console (the default; needs a terminal and an existing root).
    Console(ConsoleArgs),
    /// Run a simulated pantheon and watch it in the console (--headless: simulate and summarise).
    Demo(crate::demo::DemoArgs),
    /// Check every protocol file under the root; prints a JSON report, exits 1 on any error.
    Validate,
    /// Serve the Conductor and bus tools over MCP on stdio, or over Streamable HTTP with --http
    /// (the root must exist: `init` first).
    Mcp(crate::mcp::McpArgs),
    /// Credentials for `mcp --http` and `serve --mcp`: `credentials add NAME --god --file FILE`.
    Credentials(credentials::CredentialsArgs),
    #[command(flatten)]
    Conductor(conductor::ConductorCommand),
    /// The per-track message bus.
    Bus(bus::BusArgs),
    /// The board deliberation of a track.
    Board(board::BoardArgs),
    /// The operator journal: every state-changing act, hash-chained (--verify checks the chain).
    Journal(journal::JournalArgs),
    /// Connect this root to other pantheons over NATS, JetStream or core (long-running; `bridge status`: JSON).
    Bridge(Box<crate::bridge::BridgeArgs>),
    /// The console's own configuration (keys, theme, times, thresholds, notifications).
    Config(ConfigArgs),
    /// One pass of the delivery supervisor: redeliver and dead-letter what is due, then exit (cron, tests).
    Tick,
    /// The delivery supervisor in the foreground: enforces ack deadlines as they fall due (SIGTERM: exit 0).
    Serve(serve::ServeArgs),
    /// Record every change to the root into its history (long-running; `serve` records too, by
    /// default); `--forget WF` drops a workflow's recorded context.
    Record(record::RecordArgs),
    /// The root as it was at a moment (`--at -15m`), or the changes between two (`--from --to`),
    /// from its history.
    Replay(replay::ReplayArgs),
    /// One line for a tmux status bar or a shell prompt: `@3 ‖1 ▲1 ☠2` (attention, held, alerts,
    /// dead letters; docs/OBSERVABILITY.md).
    Status(observe::StatusArgs),
    /// A monitoring-plugin health check: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    Check(observe::CheckArgs),
    /// What the pantheon costs: usage totals from the ledger by god, workflow, step, model or day.
    Cost(cost::CostArgs),
    /// Probe each --source once and list it as JSON with its health (ok, or error and the reason;
    /// exit 1 when one is broken); `read` one source, or `answer` a task waiting for input.
    Sources(sources::SourcesArgs),
}

/// Options of `pantheon config`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Print the full default configuration, commented (save it as the config file to edit it).
    #[arg(long, conflicts_with = "check", required_unless_present = "check")]
    pub default: bool,
    /// Check the configuration the console would read (--config PATH, else the XDG config file)
    /// and print where it is; a problem is reported with its line and exits 1.
    #[arg(long)]
    pub check: bool,
    /// The file to check (default: $XDG_CONFIG_HOME/pantheon/config.toml, else ~/.config/…).
    #[arg(long, value_name = "PATH", requires = "check")]
    pub config: Option<PathBuf>,
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
    /// Read the console's configuration from PATH instead of
    /// $XDG_CONFIG_HOME/pantheon/config.toml (`pantheon config --default` prints one).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Run CMD (through `sh -c`) when a new attention item appears: each item as one compact JSON
    /// object per line on its stdin ({kind, ids, reason, since}). Rate-limited. Default: the
    /// config's `[notify] on_attention`.
    #[arg(long, value_name = "CMD")]
    pub on_attention: Option<String>,
    /// Ring the terminal bell when a new attention item appears (or `[notify] bell = true`).
    #[arg(long)]
    pub bell: bool,
    /// Send a desktop notification through the terminal when a new attention item appears: OSC 9
    /// (iTerm2, kitty, WezTerm; the default) or OSC 777 (foot, urxvt, VTE); or `[notify] desktop`.
    #[arg(long, value_name = "osc9|osc777", num_args = 0..=1, default_missing_value = "osc9",
          value_parser = parse_desktop)]
    pub notify_desktop: Option<crate::console::notify::Desktop>,
    /// At most one notification per this many seconds (new items in between go together).
    /// Default: the config's `[notify] rate_limit_secs`, else 5.
    #[arg(long, value_name = "SECS")]
    pub notify_every: Option<u64>,
    /// Open in the past: every pane as it was at TS (RFC 3339, now, back from now: -15m, -1h30m, or
    /// a local time today: 10:30), read-only, from the root's history (docs/HISTORY.md), with a
    /// scrub line to step, jump and play; `L` goes back to live.
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = moment)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The value parser of every flag that takes a moment (`--since`, `--at`, `--from`, `--to`,
/// `--as-of`): RFC 3339, `now`, back from now (`-15m`), or a local `HH:MM[:SS]` of today, read by the
/// engine's one parser; anything else is a usage error (exit 2) with its one error text.
pub(crate) fn moment(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    crate::engine::time::parse_moment(s, chrono::Utc::now()).map_err(|e| e.to_string())
}

/// The value parser of `--source`: a known kind and a location (the source itself is opened, and
/// may be broken, later: a broken source is shown, never a refusal).
fn parse_source(s: &str) -> Result<String, crate::engine::Refusal> {
    crate::sources::split_spec(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.reason.into())
}

fn parse_desktop(s: &str) -> Result<crate::console::notify::Desktop, crate::engine::Refusal> {
    crate::console::notify::Desktop::parse(s)
        .ok_or_else(|| format!("{s:?}: use osc9 or osc777").into())
}

fn run_console(
    args: ConsoleArgs,
    root: &Root,
    actor: Option<String>,
    sources: Vec<String>,
) -> anyhow::Result<Outcome> {
    // A config that cannot be used stops here, before the terminal is taken, with its line.
    let mut config = crate::console::config::load(args.config.as_deref())?;
    // The flags' sources first, then the config's (each once).
    let mut all = sources;
    for s in std::mem::take(&mut config.sources) {
        if !all.contains(&s) {
            all.push(s);
        }
    }
    config.sources = all;
    let at = args.at.map(|t| t.timestamp_micros());
    // A moment the history cannot show is refused before anything else is asked of the terminal.
    if let Some(at) = at {
        crate::console::replay::check_moment(root, at).map_err(|e| anyhow::anyhow!(e))?;
    }
    crate::console::terminal::require_terminal(
        "the console",
        "run it in a terminal, or use the JSON commands for scripts (`pantheon pending`, `pantheon validate`, `pantheon --help`)",
    )?;
    // The operator's flags win over the operator's config; neither ever comes from the root.
    let mut opts = crate::console::run::ConsoleOptions::for_operator(
        config,
        crate::console::run::OperatorFlags {
            read_only: args.read_only,
            poll_ms: args.poll,
            hints: false,
            bell: args.bell,
            notify_desktop: args.notify_desktop,
            on_attention: args.on_attention,
            notify_every: args.notify_every,
            actor,
        },
    );
    opts.at = at;
    crate::console::run::run(root.clone(), opts)?;
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

fn run_config(args: ConfigArgs) -> anyhow::Result<Outcome> {
    use crate::console::config;
    if args.default {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out
            .write_all(config::default_toml().as_bytes())
            .and_then(|()| out.flush());
        return Ok(Outcome::Exit(ExitCode::SUCCESS));
    }
    let cfg = config::load(args.config.as_deref())?;
    Ok(Outcome::Json(serde_json::json!({
        "ok": true,
        "path": cfg.source.as_ref().map(|p| p.display().to_string()),
        "defaults": cfg.source.is_none(),
        "theme": cfg.theme_name,
    })))
}

fn run_validate(root: &Root) -> anyhow::Result<Outcome> {
    let report = crate::engine::validate_root(root)?;
    print_json(&serde_json::to_value(&report)?);
    Ok(Outcome::Exit(if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }))
}

pub(crate) use crate::outcome::Outcome;

/// Prints `value` as pretty JSON on stdout. A reader that went away (`pantheon … | head`) is not an
/// error worth a panic: the output is simply dropped, as other Unix tools do.
pub(crate) fn print_json(value: &serde_json::Value) {
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

/// Where the root of this run was taken from, named in every error about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RootSource {
    /// `--root DIR`.
    Flag,
    /// `$PANTHEON_ROOT`.
    Env,
    /// `$HOME/pantheon`, the default.
    Home,
}

impl RootSource {
    fn describe(self) -> &'static str {
        match self {
            RootSource::Flag => "given by --root",
            RootSource::Env => "from $PANTHEON_ROOT",
            RootSource::Home => "the default, ~/pantheon",
        }
    }
}

/// The root directory this run uses (`--root`, else `$PANTHEON_ROOT`, else `$HOME/pantheon`) and where
/// it came from; `None` when none of the three is set (never a `pantheon` directory in whatever the
/// current directory happens to be).
pub(crate) fn choose_root(flag: Option<&Path>) -> Option<(PathBuf, RootSource)> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(p) = flag {
        Some((p.to_path_buf(), RootSource::Flag))
    } else if let Some(p) = set("PANTHEON_ROOT") {
        Some((PathBuf::from(p), RootSource::Env))
    } else {
        set("HOME").map(|h| (PathBuf::from(h).join("pantheon"), RootSource::Home))
    }
}

/// The error when no root is set at all (a usage error: exit 2).
pub(crate) const NO_ROOT: &str = "no pantheon root: HOME is not set, so there is no default ~/pantheon; \
                           pass --root DIR or set PANTHEON_ROOT";

/// Refuses a root that is not an existing pantheon root: missing, a file, a link to nothing, a
/// directory that cannot be read, or a directory of another program (no `conductor/` and no
/// `shared/handoffs/`: an empty directory, a git checkout). Each refusal names the path, where it
/// came from and what to run. `init` refuses only a root that cannot become a directory.
/// A bus or board command also names the bus-only `init` of its track (`bus_track`).
pub(crate) fn require_root(
    root: &Root,
    source: RootSource,
    creating: bool,
    bus_track: Option<&str>,
) -> anyhow::Result<()> {
    let dir = root.dir.display();
    let from = source.describe();
    let mut init = format!("`pantheon --root {dir} init`");
    if let Some(t) = bus_track {
        init.push_str(&format!(
            " (or `pantheon --root {dir} bus --track {t} init` for a bus alone)"
        ));
    }
    if !root.dir.is_dir() {
        let meta = match root.dir.symlink_metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => anyhow::bail!(
                "the pantheon root {dir} ({from}) cannot be reached: {e}; check the permissions of the directories above it, or pass --root DIR"
            ),
            Err(_) if creating => return Ok(()),
            Err(_) => anyhow::bail!(
                "the pantheon root {dir} ({from}) does not exist; create it with {init}, or pass --root DIR / set PANTHEON_ROOT"
            ),
        };
        let what = if meta.file_type().is_symlink() {
            "is a symbolic link to nothing"
        } else {
            "is not a directory"
        };
        anyhow::bail!(
            "the pantheon root {dir} ({from}) {what}; pass --root DIR naming a directory, or move it away and run {init}"
        );
    }
    if let Err(e) = std::fs::read_dir(&root.dir) {
        anyhow::bail!(
            "the pantheon root {dir} ({from}) cannot be read: {e}; check its permissions, or pass --root DIR"
        );
    }
    if !creating && !root.conductor.is_dir() && !root.handoffs.is_dir() {
        anyhow::bail!(
            "{dir} ({from}) is not a pantheon root: it has no conductor/ or shared/handoffs/; make it one with {init}, or pass --root DIR / set PANTHEON_ROOT"
        );
    }
    Ok(())
}

impl Cli {
    /// Console options given beside another command are a usage error (they would be ignored).
    pub fn usage_error(&self) -> Option<clap::Error> {
        let c = &self.console;
        let console_flags = c.read_only
            || c.poll.is_some()
            || c.config.is_some()
            || c.on_attention.is_some()
            || c.bell
            || c.notify_desktop.is_some()
            || c.notify_every.is_some()
            || c.at.is_some();
        (console_flags && self.command.is_some()).then(|| {
            use clap::CommandFactory;
            Self::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "--read-only, --poll, --config, --at and the notification options before a command belong to the console: \
                 use `pantheon --read-only` or `pantheon console --read-only`",
            )
        })
    }
}

/// `demo` without --root makes its own root and `config` reads none: neither looks for one.
fn needs_root(cli: &Cli) -> bool {
    match &cli.command {
        Some(Command::Config(_)) => false,
        Some(Command::Sources(s)) => sources::needs_root(s),
        Some(Command::Demo(_)) => cli.root.is_some(),
        // A check says UNKNOWN (exit 3) itself when the root is missing.
        Some(Command::Check(_)) => false,
        _ => true,
    }
}

/// The commands that run without a root (see [`needs_root`]).
fn run_rootless(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Some(Command::Demo(args)) => crate::demo::run(args, None),
        Some(Command::Config(args)) => run_config(args),
        Some(Command::Sources(args)) => sources::run(
            args,
            &cli.sources,
            None,
            crate::actor::origin(cli.actor.as_deref(), "cli"),
        ),
        Some(Command::Check(_)) => {
            println!("PANTHEON UNKNOWN - {NO_ROOT}");
            Ok(Outcome::Exit(ExitCode::from(3)))
        }
        _ => anyhow::bail!("{NO_ROOT}"),
    }
}

/// Bad usage found once the command line is parsed (a flag's value contradicting another's): said
/// as `error: …` like a refusal, but exit 2 like clap's own usage errors.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A [`UsageError`] as the `anyhow::Error` a command returns.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// Prints a result (JSON on stdout, an error on stderr) and turns it into the exit code: 1 for a
/// refusal, 2 for a [`UsageError`].
fn finish(result: anyhow::Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Json(v)) => {
            print_json(&v);
            ExitCode::SUCCESS
        }
        Ok(Outcome::Exit(code)) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    if let Some(e) = cli.usage_error() {
        e.exit();
    }
    if let Some(a) = &cli.actor
        && let Err(e) = crate::engine::check_actor(a)
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let root = match choose_root(cli.root.as_deref()) {
        Some((dir, source)) => {
            let root = Root::from_env(Some(&dir));
            let creating = cli.command.as_ref().is_some_and(Command::creates_root);
            let track = match &cli.command {
                Some(Command::Bus(b)) => Some(b.track.as_str()),
                Some(Command::Board(b)) => Some(b.track.as_str()),
                _ => None,
            };
            if needs_root(&cli)
                && let Err(e) = require_root(&root, source, creating, track)
            {
                eprintln!("error: {e:#}");
                return ExitCode::from(1);
            }
            root
        }
        None if needs_root(&cli) => {
            eprintln!("error: {NO_ROOT}");
            return ExitCode::from(2);
        }
        // `demo` without --root and `config`: they never read the root.
        None => return finish(run_rootless(cli)),
    };
    let origin = crate::actor::origin(cli.actor.as_deref(), "cli");
    let result: anyhow::Result<Outcome> = match cli.command {
        None => run_console(cli.console, &root, cli.actor, cli.sources),
        Some(Command::Console(args)) => run_console(args, &root, cli.actor, cli.sources),
        Some(Command::Sources(args)) => sources::run(args, &cli.sources, Some(&root), origin),
        Some(Command::Conductor(conductor::ConductorCommand::Inbox { god, .. }))
            if !cli.sources.is_empty() =>
        {
            sources::inbox(&god, &cli.sources)
        }
        Some(Command::Demo(args)) => crate::demo::run(args, cli.root.as_deref()),
        Some(Command::Validate) => run_validate(&root),
        Some(Command::Mcp(args)) => {
            crate::mcp::run(root, args).map(|()| Outcome::Exit(ExitCode::SUCCESS))
        }
        Some(Command::Credentials(args)) => credentials::run(args, &root),
        Some(Command::Conductor(cmd)) => conductor::run(cmd, &root, origin),
        Some(Command::Bus(args)) => bus::run(args, &root, origin),
        Some(Command::Board(args)) => board::run(args, &root, origin),
        Some(Command::Journal(args)) => journal::run(args, &root, cli.actor),
        Some(Command::Bridge(args)) => crate::bridge::run(*args, &root, origin),
        Some(Command::Config(args)) => run_config(args),
        Some(Command::Tick) => serve::tick(
            &root,
            crate::actor::origin(cli.actor.as_deref(), "supervisor"),
        ),
        Some(Command::Serve(args)) => serve::serve(
            args,
            &root,
            crate::actor::origin(cli.actor.as_deref(), "supervisor"),
        ),
        Some(Command::Status(args)) => observe::status(args, &root, &cli.sources),
        Some(Command::Check(args)) => observe::check(args, &root, &cli.sources),
        Some(Command::Record(args)) => record::run(args, &root, &cli.sources),
        Some(Command::Replay(args)) => replay::run(args, &root),
        Some(Command::Cost(args)) => cost::run(args, &root, origin),
    };
    finish(result)
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
