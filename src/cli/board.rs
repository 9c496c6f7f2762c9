//! `pantheon board --track T …`: the board deliberation of one track (docs/PROTOCOL.md §4 and §5).

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::Outcome;
use crate::engine::{
    Bus, Director, OPERATOR, Origin, Root, TrackName,
    board::{AssessInput, DiscussInput, OpenInput, VoteInput},
};

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
    /// Open a session (earlier session files move to board/archive/{session_id}/).
    Open {
        /// EVALUATE_PLAN, EVALUATE_EXECUTION, PRE_LAUNCH or QUICK_REVIEW.
        #[arg(long)]
        checkpoint: String,
        /// What the board decides on: text, or a JSON object.
        #[arg(long)]
        proposal: String,
        /// The directors (repeat; default CA CPO CSO COO CXO).
        #[arg(long = "director", value_name = "D")]
        directors: Vec<String>,
        /// Discussion rounds allowed (default 3).
        #[arg(long)]
        max_rounds: Option<u32>,
        /// Who opens it.
        #[arg(long, default_value = OPERATOR)]
        source: String,
    },
    /// Record a director's assessment (ASSESSING phase).
    Assess {
        /// The director assessing (CA, CPO, CSO, COO, CXO or one the session was opened with).
        #[arg(long)]
        director: String,
        /// APPROVE, CONCERNS or REJECT.
        #[arg(long)]
        verdict: String,
        /// 1–10.
        #[arg(long)]
        score: f64,
        /// A concern (repeat).
        #[arg(long = "concern", value_name = "C")]
        concerns: Vec<String>,
        /// A recommendation (repeat).
        #[arg(long = "recommendation", value_name = "R")]
        recommendations: Vec<String>,
        /// A key point (repeat).
        #[arg(long = "key-point", value_name = "K")]
        key_points: Vec<String>,
        /// The concerns block approval.
        #[arg(long)]
        blocking: bool,
        /// Director-specific fields, a JSON object merged into the assessment.
        #[arg(long, value_name = "JSON")]
        extra: Option<String>,
    },
    /// Add a line to the current discussion round (DISCUSSING phase).
    Discuss {
        /// The director speaking.
        #[arg(long)]
        from: String,
        /// A director, or ALL.
        #[arg(long)]
        to: String,
        /// CHALLENGE, AGREE, QUESTION or CLARIFY.
        #[arg(long = "type", value_name = "TYPE")]
        kind: String,
        /// What the director says.
        #[arg(long)]
        message: String,
        /// This exchange changes the sender's verdict.
        #[arg(long)]
        changes_verdict: bool,
    },
    /// Close the current discussion round.
    NextRound {
        /// Who closes the round (recorded in the BOARD_* message).
        #[arg(long, default_value = OPERATOR)]
        source: String,
    },
    /// Record a director's final vote (VOTING phase).
    Vote {
        /// The director voting.
        #[arg(long)]
        director: String,
        /// APPROVE or REJECT.
        #[arg(long)]
        verdict: String,
        /// 0–1.
        #[arg(long)]
        confidence: f64,
        /// A condition attached to the vote (repeat).
        #[arg(long = "condition", value_name = "C")]
        conditions: Vec<String>,
    },
    /// Move to the next phase (when complete, or with --force).
    Advance {
        /// Advance even though the phase is not complete (missing assessments or votes).
        #[arg(long)]
        force: bool,
        /// Who advances (recorded in the BOARD_* message).
        #[arg(long, default_value = OPERATOR)]
        source: String,
    },
    /// Apply the resolve rule, write resolution.md and complete the session.
    Resolve {
        /// Resolve with missing votes (they count as abstained) or before the resolve phase.
        #[arg(long)]
        force: bool,
        /// Who resolves (recorded in the BOARD_RESOLVE message).
        #[arg(long, default_value = OPERATOR)]
        source: String,
    },
    /// Show the current session, its records and the predicted verdict.
    Status,
}

fn json_of<T: serde::Serialize>(v: T) -> anyhow::Result<Outcome> {
    Ok(Outcome::Json(serde_json::to_value(v)?))
}

/// Runs `pantheon board …`.
pub(crate) fn run(args: BoardArgs, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    let bus = Bus::open(root, &TrackName::parse(&args.track)?).with_origin(origin);
    match args.command {
        BoardCommand::Open {
            checkpoint,
            proposal,
            directors,
            max_rounds,
            source,
        } => json_of(
            bus.board_open(&OpenInput {
                checkpoint,
                proposal,
                directors: (!directors.is_empty())
                    .then(|| directors.iter().map(|d| Director::parse(d)).collect())
                    .transpose()?,
                max_rounds,
                source,
            })?,
        ),
        BoardCommand::Assess {
            director,
            verdict,
            score,
            concerns,
            recommendations,
            key_points,
            blocking,
            extra,
        } => {
            let extra = match extra {
                None => Default::default(),
                Some(text) => match serde_json::from_str::<Value>(&text)
                    .with_context(|| format!("--extra is not JSON: {text}"))?
                {
                    Value::Object(m) => m,
                    _ => anyhow::bail!("--extra must be a JSON object"),
                },
            };
            json_of(bus.board_assess(&AssessInput {
                director: Director::parse(&director)?,
                verdict,
                score,
                concerns,
                recommendations,
                key_points,
                blocking: blocking.then_some(true),
                extra,
            })?)
        }
        BoardCommand::Discuss {
            from,
            to,
            kind,
            message,
            changes_verdict,
        } => json_of(bus.board_discuss(&DiscussInput {
            from: Director::parse_as("from", &from)?,
            to: Director::parse_as("to", &to)?,
            kind,
            message,
            changes_my_verdict: changes_verdict,
        })?),
        BoardCommand::NextRound { source } => json_of(bus.board_next_round(&source)?),
        BoardCommand::Vote {
            director,
            verdict,
            confidence,
            conditions,
        } => json_of(bus.board_vote(&VoteInput {
            director: Director::parse(&director)?,
            final_verdict: verdict,
            confidence,
            conditions,
        })?),
        BoardCommand::Advance { force, source } => json_of(bus.board_advance(force, &source)?),
        BoardCommand::Resolve { force, source } => json_of(bus.board_resolve(force, &source)?),
        BoardCommand::Status => json_of(bus.board_status()?),
    }
}
