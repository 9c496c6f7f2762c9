use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    pantheon::run(pantheon::Cli::parse())
}
