//! `pantheon init | handoff | inbox | ack | state | pending | rules | workflows | abort | cleanup | approve`.

use clap::Subcommand;

use super::Outcome;
use crate::engine::store::Root;

#[derive(Debug, Subcommand)]
pub enum ConductorCommand {
    /// Create the root's layout (idempotent; never overwrites).
    Init,
}

pub fn run(cmd: ConductorCommand, _root: &Root) -> anyhow::Result<Outcome> {
    match cmd {
        ConductorCommand::Init => anyhow::bail!("init is not built yet"),
    }
}
