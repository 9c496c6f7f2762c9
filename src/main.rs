use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    pantheon::cli::run(pantheon::cli::Cli::parse())
}
