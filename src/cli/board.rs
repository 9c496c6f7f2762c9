//! `pantheon board --track T …`.

use clap::{Args, Subcommand};

use super::Outcome;
use crate::engine::store::Root;

#[derive(Debug, Args)]
pub struct BoardArgs {
    /// The track whose board to use.
    #[arg(long)]
    pub track: String,
    #[command(subcommand)]
    pub command: BoardCommand,
}

#[derive(Debug, Subcommand)]
pub enum BoardCommand {
    /// Show the current session.
    Status,
}

pub fn run(_args: BoardArgs, _root: &Root) -> anyhow::Result<Outcome> {
    anyhow::bail!("the board is not built yet")
}
