//! `pantheon init | handoff submit | inbox | dispatch | ack | state | pending | rules | workflows | abort | cleanup
//! | approve`: parse, call the [`Conductor`], print its result as JSON.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde::Serialize;

use super::Outcome;
use crate::engine::{
    Actor, Conductor, GodName, HandoffId, Origin, PageRequest, PauseTarget, Root, StepId,
    TrackName, WorkflowId,
};

#[derive(Debug, Subcommand)]
pub enum ConductorCommand {
    /// Create the root's layout, default inboxes, schema and samples (idempotent; never overwrites).
    Init,
    /// Handoffs: submit one.
    Handoff {
        #[command(subcommand)]
        command: HandoffCommand,
    },
    /// Show a god's inbox (dispatches not yet taken, oldest first), a page at a time.
    Inbox {
        /// The god whose inbox to read.
        god: String,
        #[command(flatten)]
        page: PageArgs,
        /// Each dispatch cut to its ids, sender, step, age and the summary's first line.
        #[arg(long)]
        compact: bool,
    },
    /// Show one dispatch of a god's inbox whole, by its handoff id.
    Dispatch {
        /// The god whose inbox holds it.
        god: String,
        /// The dispatch's handoff id (`hof_…`).
        handoff_id: String,
    },
    /// Acknowledge a dispatch with an ack JSON (accepted, pending, rejected, completed).
    Ack {
        /// The ack JSON file, or `-` (the default) for standard input.
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
        /// Record the ack as the operator's rather than the addressed god's.
        #[arg(long)]
        operator: bool,
    },
    /// Show one workflow's state.
    State {
        /// The workflow id (`wf_…`).
        workflow_id: String,
    },
    /// List the dispatches not yet taken (a page at a time), and every one held for approval.
    Pending {
        #[command(flatten)]
        page: PageArgs,
    },
    /// List the reaction rules (and rule files that do not load).
    Rules,
    /// List the workflow definitions (and files that do not load).
    Workflows,
    /// Abort a workflow: mark its artifacts, write the manifest, withdraw its dispatches.
    Abort {
        /// The workflow id (`wf_…`).
        workflow_id: String,
        /// Why (recorded in the state and the manifest).
        #[arg(long)]
        reason: String,
    },
    /// Write again the dispatch a workflow waiting for an ack lost (deleted from its inbox), from its state.
    Redispatch {
        /// The workflow id (`wf_…`); `pantheon validate` names workflows whose dispatch is gone.
        workflow_id: String,
    },
    /// Delete an aborted or completed workflow's temp_artifacts.
    Cleanup {
        /// The workflow id (`wf_…`).
        workflow_id: String,
        /// Show what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Release a dispatch held for approval into its god's inbox (or refuse it with --reject).
    Approve {
        /// The held dispatch's handoff id (`pantheon pending` lists them under awaiting_approval).
        handoff_id: String,
        /// Mint a one-time approval link pair instead of deciding: prints {approve_url, reject_url,
        /// expires_at}, bound to the held file's exact bytes (docs/PROTOCOL.md §2.15).
        #[arg(long, conflicts_with_all = ["reject", "revoke", "budget_usd", "budget_tokens"])]
        link: bool,
        /// How long the link lives (with --link): 30s, 15m, 2h, at most 7d.
        #[arg(long, value_name = "DURATION", requires = "link")]
        ttl: Option<String>,
        /// The listener's base URL for the links (with --link), e.g. https://host:8443; default:
        /// the address `serve --approvals` recorded in the root.
        #[arg(long, value_name = "URL", requires = "link")]
        base_url: Option<String>,
        /// Revoke every outstanding approval link of this held dispatch instead of deciding.
        #[arg(long, conflicts_with_all = ["reject", "budget_usd", "budget_tokens"])]
        revoke: bool,
        /// Refuse instead: the dispatch is archived and the workflow fails.
        #[arg(long, requires = "reason")]
        reject: bool,
        /// Why it is refused (required with --reject).
        #[arg(long)]
        reason: Option<String>,
        /// For a dispatch held for a budget: first set each budget it would go past (computed now,
        /// from the ledger) to this many dollars (journaled as `budget_raise`). Refused, changing
        /// nothing, when a budget would stay reached (a limit not above what is used, or a reached
        /// token budget without --budget-tokens).
        #[arg(long, value_name = "USD", conflicts_with = "reject")]
        budget_usd: Option<f64>,
        /// For a dispatch held for a budget: first set each budget it would go past to this many
        /// tokens (refused likewise when a budget would stay reached).
        #[arg(long, value_name = "N", conflicts_with = "reject")]
        budget_tokens: Option<u64>,
    },
    /// List the approval links kept in the root (outstanding, expired, or ended within a day):
    /// item, decision, minted, expires, channel and state; never the tokens.
    Approvals,
    /// Put a dead letter (a dispatch out of deliveries) back into an inbox, deliveries reset.
    Requeue {
        /// The dead letter's handoff id (`pantheon dead` lists them).
        handoff_id: String,
        /// Deliver it to this god instead of the one it died with.
        #[arg(long, value_name = "GOD")]
        to: Option<String>,
    },
    /// List the live dead letters (`conductor/dead/{god}/`), oldest first; `discard` retires one.
    Dead {
        #[command(subcommand)]
        command: Option<DeadCommand>,
        /// List the retired dead letters instead (`conductor/retired/{god}/`), each marked
        /// `"status": "retired"`, oldest retirement first.
        #[arg(long)]
        retired: bool,
    },
    /// Pause a god, a workflow, a track, a peer or everything: nothing is lost, deadlines freeze
    /// (docs/CONDUCTOR.md, "Pause and resume").
    Pause {
        #[command(flatten)]
        what: PauseSelector,
        /// End the pause by itself (the supervisor does it): a duration ahead (30m), an RFC 3339
        /// moment, or a local HH:MM.
        #[arg(long, value_name = "30m|TS|HH:MM")]
        until: Option<String>,
        /// Why (recorded in conductor/paused.json and the journal).
        #[arg(long)]
        reason: String,
    },
    /// End a pause: frozen deadlines shifted by the paused time, held dispatches released in order.
    Resume {
        #[command(flatten)]
        what: PauseSelector,
        /// Release at most this many a second, steadily (100/s, 6000/m); default: at once.
        #[arg(long, value_name = "N/s")]
        rate: Option<String>,
    },
    /// What is paused, by whom, why, since, until, and what each pause holds (JSON).
    Paused,
    /// Start a failed, stalled or completed workflow again from a step (history keeps every attempt).
    Rerun {
        /// The workflow id (`wf_…`).
        workflow_id: String,
        /// The step to dispatch again.
        #[arg(long, value_name = "STEP")]
        from: String,
        /// A JSON object (summary, decisions, artifacts, open_questions) replacing the context; `-`: stdin.
        #[arg(long, value_name = "FILE")]
        context: Option<PathBuf>,
        /// Fork: start from the context bag the workflow had at this moment (RFC 3339, now, back
        /// from now: -15m, or a local time today: 10:30), read from the root's history (`pantheon
        /// replay`); --context edits it.
        #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment)]
        as_of: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// What a `pause` or `resume` names: exactly one of these.
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub struct PauseSelector {
    /// One god: nothing new reaches its inbox; what it has keeps its ack deadline frozen.
    #[arg(long, value_name = "GOD")]
    pub god: Option<String>,
    /// One workflow: nothing new is dispatched for it; its open dispatches are frozen.
    #[arg(long, value_name = "WF")]
    pub workflow: Option<String>,
    /// One track: new posts are refused (reads, lock releases and heartbeats go on).
    #[arg(long, value_name = "TRACK")]
    pub track: Option<String>,
    /// One peer pantheon: its outbound records wait in the outbox.
    #[arg(long, value_name = "PEER")]
    pub peer: Option<String>,
    /// The whole root: every god, workflow, track and peer.
    #[arg(long)]
    pub all: bool,
}

impl PauseSelector {
    fn target(&self) -> anyhow::Result<PauseTarget> {
        Ok(if let Some(g) = &self.god {
            PauseTarget::god(&GodName::parse_as("--god", g)?)
        } else if let Some(w) = &self.workflow {
            PauseTarget::workflow(&WorkflowId::parse(w)?)
        } else if let Some(t) = &self.track {
            PauseTarget::track(&TrackName::parse(t)?)
        } else if let Some(p) = &self.peer {
            PauseTarget::peer(p)?
        } else {
            PauseTarget::all()
        })
    }
}

/// Paging of `inbox` and `pending` (the same as MCP `check_inbox` and `list_pending`).
#[derive(Debug, Clone, clap::Args)]
pub struct PageArgs {
    /// Entries per page, 1 to 1000.
    #[arg(long, value_name = "N", default_value_t = crate::engine::DEFAULT_PAGE_LIMIT,
          value_parser = page_limit)]
    pub limit: usize,
    /// The `next_cursor` of the previous page, for the page after it.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
}

/// `--limit N`: a page size the engine takes (1 to 1000); any other is bad usage (exit 2).
fn page_limit(s: &str) -> Result<usize, crate::engine::Refusal> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| "not a number of entries (1 to 1000)")?;
    PageRequest::new(Some(n), None)
        .map(|_| n)
        .map_err(|e| e.to_string().into())
}

impl PageArgs {
    fn request(self) -> anyhow::Result<PageRequest> {
        Ok(PageRequest::new(Some(self.limit), self.cursor)?)
    }
}

#[derive(Debug, Subcommand)]
pub enum DeadCommand {
    /// Retire a dead letter by hand: it leaves the dead letters for `conductor/retired/` and counts
    /// as one nowhere (journaled with the reason).
    Discard {
        /// The dead letter's handoff id (`pantheon dead` lists them).
        handoff_id: String,
        /// Why it is discarded (kept with it and in the journal).
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HandoffCommand {
    /// Submit a handoff JSON: validate, record, route, dispatch.
    Submit {
        /// The handoff JSON file, or `-` (the default) for standard input.
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
    },
}

/// `pantheon dead`: the live dead letters, the retired ones (`--retired`, each marked `"status":
/// "retired"`), or `discard` retiring one.
fn dead(
    c: &Conductor,
    root: &Root,
    command: Option<DeadCommand>,
    retired: bool,
) -> anyhow::Result<Outcome> {
    match command {
        Some(DeadCommand::Discard { handoff_id, reason }) => {
            json(c.discard_dead(&HandoffId::parse(&handoff_id)?, &reason)?)
        }
        None if retired => {
            let mut v = serde_json::to_value(crate::engine::list_retired(root))?;
            for d in v["dead"].as_array_mut().into_iter().flatten() {
                d["status"] = "retired".into();
            }
            Ok(Outcome::Json(v))
        }
        None => json(crate::engine::list_dead(root)),
    }
}

/// Reads a JSON document from a file or standard input (`-` or nothing).
/// Reads a JSON document from a file or standard input, refusing more than the engine would accept
/// (a handoff, an ack or a context is at most 1 MiB: docs/PROTOCOL.md, limits) before holding it all.
fn read_input(file: Option<PathBuf>, what: &str) -> anyhow::Result<serde_json::Value> {
    let limit = crate::engine::MAX_HANDOFF_BYTES;
    let mut bytes = Vec::new();
    let origin = match file {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::File::open(&p)
                .and_then(|f| f.take(limit as u64 + 1).read_to_end(&mut bytes))
                .with_context(|| format!("cannot read {}", p.display()))?;
            p.display().to_string()
        }
        _ => {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                // Typed `pantheon ack` with nothing piped in: say why it waits instead of hanging silently.
                eprintln!(
                    "note: reading the {what} JSON from standard input; end it with Ctrl-D (or pass a FILE)"
                );
            }
            std::io::stdin()
                .lock()
                .take(limit as u64 + 1)
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
            "standard input".to_owned()
        }
    };
    if bytes.len() > limit {
        anyhow::bail!("the {what} in {origin} is over the {limit}-byte limit");
    }
    serde_json::from_slice(&bytes)
        .with_context(|| format!("the {what} in {origin} is not valid JSON"))
}

fn json<T: Serialize>(v: T) -> anyhow::Result<Outcome> {
    Ok(Outcome::Json(serde_json::to_value(v)?))
}

/// `approve --budget-usd/--budget-tokens`: the raise (journaled; refused when a budget would stay
/// reached), then the approval.
fn raise_and_approve(
    c: &Conductor,
    hid: &HandoffId,
    usd: Option<f64>,
    tokens: Option<u64>,
) -> anyhow::Result<Outcome> {
    let mut m = serde_json::Map::new();
    if let Some(usd) = usd {
        m.insert("cost_usd".into(), serde_json::json!(usd));
    }
    if let Some(n) = tokens {
        m.insert("tokens".into(), serde_json::json!(n));
    }
    let to = crate::engine::Budget::parse(&serde_json::Value::Object(m))
        .map_err(|e| anyhow::anyhow!("--budget-usd/--budget-tokens: {e}"))?;
    let raised = c.raise_budget(hid, to, &c.origin().actor)?;
    let mut v = serde_json::to_value(c.approve(hid, Actor::Operator)?)?;
    v["budget_raised"] = raised;
    Ok(Outcome::Json(v))
}

/// `approve` without a raise; the answer names the budgets that stay reached (computed before the
/// approval ends the hold): the workflow's next dispatch will be held again.
fn approve(c: &Conductor, hid: &HandoffId) -> anyhow::Result<Outcome> {
    let reached = c.budgets_reached(hid).unwrap_or_default();
    let mut v = serde_json::to_value(c.approve(hid, Actor::Operator)?)?;
    if !reached.is_empty() {
        v["budgets_reached"] = serde_json::to_value(&reached)?;
        v["note"] = serde_json::json!(
            "approved without a raise: these budgets stay reached, so the workflow's next \
             dispatch will be held again (approve --budget-usd/--budget-tokens raises them)"
        );
    }
    Ok(Outcome::Json(v))
}

/// `approve --link`: a pair of one-time links to the held dispatch, their URLs from `--base-url` or
/// the listener `serve --approvals` recorded in the root.
fn mint_link(
    c: &Conductor,
    hid: &HandoffId,
    ttl: Option<&str>,
    base_url: Option<&str>,
) -> anyhow::Result<Outcome> {
    let ttl = match ttl {
        Some(t) => crate::engine::time::parse_duration_checked("--ttl", t)?,
        None => crate::approvals::default_ttl(c.root()),
    };
    // Signed with the operator's key, which the listener checks (docs/PROTOCOL.md §2.15).
    let c = Conductor::new(c.root().clone())
        .with_origin(c.origin())
        .with_link_key(crate::approvals::link_key(c.root())?);
    let urls =
        crate::approvals::mint_urls(&c, hid, ttl, base_url, crate::engine::ApprovalChannel::Cli)?;
    Ok(Outcome::Json(serde_json::to_value(urls)?))
}

pub(crate) fn run(cmd: ConductorCommand, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    let c = Conductor::new(root.clone()).with_origin(origin);
    match cmd {
        ConductorCommand::Init => {
            let r = c.init()?;
            for n in &r.notes {
                eprintln!("note: {n}");
            }
            json(r)
        }
        ConductorCommand::Handoff {
            command: HandoffCommand::Submit { file },
        } => json(c.submit_handoff(&read_input(file, "handoff")?)?),
        ConductorCommand::Inbox { god, page, compact } => {
            let page = page.request()?;
            let god = GodName::parse(&god)?;
            if !root.inbox_dir(&god).is_dir() {
                unknown_inbox(root, &god)?;
            }
            if compact {
                json(c.check_inbox_compact(&god, &page)?)
            } else {
                json(c.check_inbox_page(&god, &page)?)
            }
        }
        ConductorCommand::Dispatch { god, handoff_id } => {
            json(c.get_dispatch(&GodName::parse(&god)?, &HandoffId::parse(&handoff_id)?)?)
        }
        ConductorCommand::Ack { file, operator } => {
            let by = if operator {
                Actor::Operator
            } else {
                Actor::Recipient
            };
            json(c.ack_handoff(&read_input(file, "ack")?, by)?)
        }
        ConductorCommand::State { workflow_id } => {
            json(c.get_workflow_state(&WorkflowId::parse(&workflow_id)?)?)
        }
        ConductorCommand::Pending { page } => json(c.list_pending_page(&page.request()?)?),
        ConductorCommand::Rules => json(c.list_rules()?),
        ConductorCommand::Workflows => json(c.list_workflows()?),
        ConductorCommand::Abort {
            workflow_id,
            reason,
        } => json(c.abort_workflow(&WorkflowId::parse(&workflow_id)?, &reason, Actor::Operator)?),
        ConductorCommand::Redispatch { workflow_id } => {
            json(c.redispatch(&WorkflowId::parse(&workflow_id)?)?)
        }
        ConductorCommand::Cleanup {
            workflow_id,
            dry_run,
        } => json(c.cleanup(&WorkflowId::parse(&workflow_id)?, dry_run)?),
        ConductorCommand::Approvals => json(c.links()),
        ConductorCommand::Approve {
            handoff_id,
            link,
            ttl,
            base_url,
            revoke,
            reject,
            reason,
            budget_usd,
            budget_tokens,
        } => {
            let hid = HandoffId::parse(&handoff_id)?;
            if link {
                mint_link(&c, &hid, ttl.as_deref(), base_url.as_deref())
            } else if revoke {
                let n = c.revoke_links(&hid)?;
                Ok(Outcome::Json(
                    serde_json::json!({"status": "revoked", "handoff_id": hid.as_str(), "revoked": n}),
                ))
            } else if reject {
                let reason = reason.unwrap_or_default();
                json(c.reject_held(&hid, &reason, Actor::Operator)?)
            } else if budget_usd.is_some() || budget_tokens.is_some() {
                raise_and_approve(&c, &hid, budget_usd, budget_tokens)
            } else {
                approve(&c, &hid)
            }
        }
        ConductorCommand::Requeue { handoff_id, to } => {
            let to = to.map(|g| GodName::parse_as("--to", &g)).transpose()?;
            if let Some(g) = &to
                && !root.inbox_dir(g).is_dir()
            {
                // A typo would deliver into an inbox nobody reads: refused, with the gods there are.
                let gods = crate::engine::known_gods(root).unwrap_or_else(|| "none yet".to_owned());
                anyhow::bail!(
                    "--to {g}: {g} has no inbox in {}; gods here: {gods}",
                    root.dir.display()
                );
            }
            json(c.requeue(&HandoffId::parse(&handoff_id)?, to.as_ref())?)
        }
        ConductorCommand::Dead { command, retired } => dead(&c, root, command, retired),
        ConductorCommand::Pause {
            what,
            until,
            reason,
        } => pause(&c, &what, until, &reason),
        ConductorCommand::Resume { what, rate } => resume(&c, &what, rate),
        ConductorCommand::Paused => {
            // The peers' pauses the running bridge heard (docs/NATS.md "Pauses"), beside this root's.
            let mut v = serde_json::to_value(c.paused()?)?;
            v["peers"] = serde_json::to_value(crate::engine::nats::read_peer_pauses(
                root,
                chrono::Utc::now(),
            ))?;
            json(v)
        }
        ConductorCommand::Rerun {
            workflow_id,
            from,
            context,
            as_of,
        } => rerun(&c, root, &workflow_id, &from, context, as_of),
    }
}

/// `pause …` (docs/PROTOCOL.md §2.14).
fn pause(
    c: &Conductor,
    what: &PauseSelector,
    until: Option<String>,
    reason: &str,
) -> anyhow::Result<Outcome> {
    let until = until
        .map(|u| crate::engine::parse_until(&u, chrono::Utc::now()))
        .transpose()?;
    json(c.pause(&what.target()?, until, reason)?)
}

/// `resume …`: an unfinished resume prints its answer and exits 1, saying what failed (the pause
/// stays, marked resuming, for a repeat to finish).
fn resume(c: &Conductor, what: &PauseSelector, rate: Option<String>) -> anyhow::Result<Outcome> {
    let rate = rate
        .map(|r| crate::engine::parse_pause_rate(&r))
        .transpose()?;
    let r = c.resume(&what.target()?, rate)?;
    if r.errors.is_empty() {
        return json(r);
    }
    eprintln!(
        "error: the resume is not finished ({} problem(s)); repeat it to finish:",
        r.errors.len()
    );
    for e in &r.errors {
        eprintln!("  - {e}");
    }
    super::print_json(&serde_json::to_value(&r)?);
    Ok(Outcome::Exit(std::process::ExitCode::from(1)))
}

/// `inbox GOD` of a god with no inbox: refused (naming the god meant, when one is close, and the gods
/// there are) unless a workflow definition names the god, whose inbox appears with its first
/// dispatch: then the empty answer (`known_god: false`) stands, with a warning.
fn unknown_inbox(root: &Root, god: &GodName) -> anyhow::Result<()> {
    let (defs, _) = crate::engine::load_definitions(root);
    let mut named: Vec<String> = defs
        .iter()
        .flat_map(|d| d.steps.iter().map(|s| s.god.clone()))
        .collect();
    named.sort();
    named.dedup();
    let gods = crate::engine::known_gods(root)
        .unwrap_or_else(|| "none yet: `pantheon init` makes the default ones".to_owned());
    let dir = root.dir.display();
    if named.iter().any(|g| g == god.as_str()) {
        eprintln!(
            "warning: {god} has no inbox in {dir} yet (a definition names it; its inbox appears with its first dispatch); gods here: {gods}"
        );
        return Ok(());
    }
    let with_inbox: Vec<String> = std::fs::read_dir(root.pending_root())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| GodName::parse(&e.file_name().to_string_lossy()).ok())
        .map(|g| g.to_string())
        .collect();
    let candidates = with_inbox.iter().chain(&named).map(String::as_str);
    let meant = crate::text::nearest(god.as_str(), candidates)
        .map(|g| format!(" (did you mean {g}?)"))
        .unwrap_or_default();
    anyhow::bail!("{god} has no inbox in {dir}{meant}; gods here: {gods}")
}

/// `rerun WF --from STEP [--context FILE] [--as-of TS]`: a plain rerun, or a fork from the context bag
/// the root's history holds for TS.
fn rerun(
    c: &Conductor,
    root: &Root,
    workflow_id: &str,
    from: &str,
    context: Option<PathBuf>,
    as_of: Option<chrono::DateTime<chrono::Utc>>,
) -> anyhow::Result<Outcome> {
    let ctx = match context {
        Some(f) => Some(read_input(Some(f), "context")?),
        None => None,
    };
    let wf = WorkflowId::parse(workflow_id)?;
    let step = StepId::parse_as("--from", from)?;
    match as_of {
        None => json(c.rerun(&wf, &step, ctx.as_ref())?),
        Some(ts) => {
            let ts = crate::engine::time::format_ts(ts);
            let as_of = crate::engine::context_as_of(root, &wf, &ts)?;
            json(c.rerun_as_of(&wf, &step, ctx.as_ref(), &as_of)?)
        }
    }
}
