//! `pantheon bus --track T …`.

use clap::{Args, Subcommand};

use super::Outcome;
use crate::engine::store::Root;

#[derive(Debug, Args)]
pub struct BusArgs {
    /// The track whose bus to use.
    #[arg(long)]
    pub track: String,
    #[command(subcommand)]
    pub command: BusCommand,
}

#[derive(Debug, Subcommand)]
pub enum BusCommand {
    /// Create the bus files (never wipes existing ones).
    Init,
}

pub fn run(_args: BusArgs, _root: &Root) -> anyhow::Result<Outcome> {
    anyhow::bail!("the bus is not built yet")
}
