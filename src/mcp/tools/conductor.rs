//! The Conductor tools (docs/PROTOCOL.md §2): handoffs, inboxes, acks, state, abort and cleanup,
//! and the operator's approval and requeue.

use crate::engine::{Actor, Error, GodName, HandoffId, PageRequest, WorkflowId};
use crate::mcp::args::*;
use crate::mcp::reply::blocking;
use crate::mcp::server::ConductorServer;
use crate::mcp::{lean, output};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

/// Recorded as `aborted_by` when the caller does not name itself.
const DEFAULT_ABORTED_BY: &str = "mcp";

#[tool_router(router = conductor_tools, vis = "pub(crate)")]
impl ConductorServer {
    /// Submit the handoff for the workflow step you just completed. The Conductor validates it
    /// (schema, names, the step's gates), records it in the workflow state, routes it (workflow
    /// definition, reaction rules, or `to_god`) and dispatches the next step to that god's inbox.
    /// Returns `{status, workflow_id, target_god, target_step, state_status, handoff_path,
    /// dispatch_path, warnings[]}`; `status` is `dispatched`, `awaiting_approval`, `completed`,
    /// `recorded`, `publishing` (a nats_publish step was reached: no dispatch, `dispatch_path` null),
    /// `awaiting_reply` or `duplicate`. A refusal lists every violation with its JSON pointer.
    #[tool(
        output_schema = output::submit_handoff(),
        annotations(
        title = "Submit a handoff",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn submit_handoff(&self, Parameters(a): Parameters<SubmitHandoff>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("submit_handoff", move || {
            conductor.submit_handoff(&a.handoff)
        })
        .await
    }

    /// List the dispatches waiting in your inbox, oldest first, a page at a time: `{god,
    /// known_god, compact, dispatches[], count, limit, next_cursor, errors[]}`. `count` is the whole inbox;
    /// call again with `cursor: next_cursor` while it is not null. Each dispatch carries the full
    /// context of the workflow so far (all decisions, artifacts and step summaries, plus every other
    /// context key such as an inbound request's `payload`) and `step_def` (what the step asks:
    /// `action`, `skill`, `output`, …); with
    /// `compact: true` only ids, sender, step, age and the summary's first line (then
    /// `get_dispatch` for one whole). Call this at the start of every session, then ack each
    /// dispatch. `known_god: false` means you have no inbox: check your god name. `paused`, when
    /// present, says an operator paused you (why, since, until): ack what you have; nothing new
    /// arrives until the pause ends.
    #[tool(
        output_schema = output::check_inbox(),
        annotations(title = "Check your inbox", read_only_hint = true, open_world_hint = false)
    )]
    async fn check_inbox(&self, Parameters(a): Parameters<CheckInbox>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("check_inbox", move || {
            let page = PageRequest::new(a.limit, a.cursor)?;
            let god = GodName::parse(&a.god_name)?;
            let mut answer = if a.compact {
                serde_json::to_value(conductor.check_inbox_compact(&god, &page)?)
                    .map_err(|e| Error::refused(e.to_string()))?
            } else {
                let mut answer = serde_json::to_value(conductor.check_inbox_page(&god, &page)?)
                    .map_err(|e| Error::refused(e.to_string()))?;
                lean::lean_dispatches(&mut answer);
                answer
            };
            // A paused god is told so, and until when (docs/PROTOCOL.md §2.14).
            let pauses = crate::engine::Pauses::load(conductor.root())?;
            if let Some(p) = pauses.god_paused(god.as_str()) {
                answer["paused"] = serde_json::json!({
                    "what": p.target().label(), "since": p.since, "until": p.until,
                    "reason": p.reason, "by": p.by,
                    "note": format!(
                        "{} is paused{}: ack what you have; nothing new arrives until the pause ends",
                        god,
                        p.until.as_deref().map(|u| format!(" until {u}")).unwrap_or_default()
                    ),
                });
            }
            Ok(answer)
        })
        .await
    }

    /// One dispatch of your inbox, whole (its full context), by `handoff_id`: `{god, dispatch,
    /// path}`. Use it after a `compact` `check_inbox`.
    #[tool(
        output_schema = output::get_dispatch(),
        annotations(title = "Get one dispatch", read_only_hint = true, open_world_hint = false)
    )]
    async fn get_dispatch(&self, Parameters(a): Parameters<GetDispatch>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("get_dispatch", move || {
            let found = conductor.get_dispatch(
                &GodName::parse(&a.god_name)?,
                &HandoffId::parse(&a.handoff_id)?,
            )?;
            let mut answer =
                serde_json::to_value(found).map_err(|e| Error::refused(e.to_string()))?;
            if let Some(dispatch) = answer.get_mut("dispatch") {
                lean::lean_dispatch(dispatch);
            }
            Ok(answer)
        })
        .await
    }

    /// Acknowledge a dispatch from your inbox with `accepted`, `pending`, `rejected` or
    /// `completed` (see the `ack` argument). The ack is recorded in the workflow state with the
    /// god the dispatch was for as `by`. Returns `{acknowledged, handoff_id, status,
    /// state_status, …}`; a rejected dispatch goes to the step's next fallback god
    /// (`rerouted_to`), a completed one dispatches the next step. Repeating the same ack is
    /// harmless (`duplicate`). `deadline` says when the next deadline now falls: after `pending`,
    /// the ack deadline (your `eta`, or the wait restarted), after `accepted`, the end of the step's
    /// `timeout` (`deadline_kind`: `ack` or `step_timeout`); past an ack deadline the dispatch is
    /// redelivered.
    #[tool(
        output_schema = output::ack_handoff(),
        annotations(
        title = "Acknowledge a dispatch",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn ack_handoff(&self, Parameters(a): Parameters<AckHandoff>) -> CallToolResult {
        let conductor = self.conductor.clone();
        let by = self.acker();
        blocking("ack_handoff", move || conductor.ack_handoff(&a.ack, by)).await
    }

    /// The full state of a workflow instance: status, current step, who it is dispatched to, the
    /// context bag (decisions, artifacts, open questions), the step history and every ack.
    #[tool(
        output_schema = output::get_workflow_state(),
        annotations(
        title = "Get a workflow's state",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn get_workflow_state(&self, Parameters(a): Parameters<WorkflowRef>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("get_workflow_state", move || {
            conductor.get_workflow_state(&WorkflowId::parse(&a.workflow_id)?)
        })
        .await
    }

    /// Every dispatch not yet taken, by god, a page at a time: `{pending: {god: [{dispatch_id,
    /// handoff_id, workflow_id, from_god, step, dispatched_at, ack_status}]}, count, limit,
    /// next_cursor, awaiting_approval[]}`. `count` is the total; pass `cursor: next_cursor` for the
    /// next page. Dispatches held for approval are all listed on every page.
    #[tool(
        output_schema = output::list_pending(),
        annotations(
        title = "List pending dispatches",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn list_pending(&self, Parameters(a): Parameters<ListPending>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("list_pending", move || {
            conductor.list_pending_page(&PageRequest::new(a.limit, a.cursor)?)
        })
        .await
    }

    /// The reaction rules that route handoffs when no workflow definition applies: `{rules:
    /// [paths], count, details: [{id, file, when, then}], errors[]}` (files that do not parse are
    /// listed in `errors`).
    #[tool(
        output_schema = output::list_rules(),
        annotations(
        title = "List reaction rules",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn list_rules(&self, Parameters(_): Parameters<NoArguments>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("list_rules", move || conductor.list_rules()).await
    }

    /// The workflow definitions you can name in `routing.workflow_definition`: `{workflows: [{id,
    /// name, version, description, steps: [{id, god}], path}], count, errors[]}`.
    #[tool(
        output_schema = output::list_workflows(),
        annotations(
        title = "List workflow definitions",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn list_workflows(&self, Parameters(_): Parameters<NoArguments>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("list_workflows", move || conductor.list_workflows()).await
    }

    /// Abort a workflow that cannot go on: marks it `aborted` with your reason, puts a
    /// `.aborted` marker beside every artifact of its completed steps, withdraws its pending
    /// dispatches and writes an abort manifest. Returns `{status: "aborted", workflow_id,
    /// artifacts_marked, manifest_path, dispatches_withdrawn}`. Aborting again returns the same
    /// manifest; a completed workflow cannot be aborted.
    #[tool(
        output_schema = output::abort_workflow(),
        annotations(
        title = "Abort a workflow",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn abort_workflow(&self, Parameters(a): Parameters<AbortWorkflow>) -> CallToolResult {
        let conductor = self.conductor.clone();
        let bound = self.principal.as_ref().map(|p| p.name.clone());
        blocking("abort_workflow", move || {
            let by = Actor::God(a.by.or(bound).unwrap_or_else(|| DEFAULT_ABORTED_BY.into()));
            conductor.abort_workflow(&WorkflowId::parse(&a.workflow_id)?, &a.reason, by)
        })
        .await
    }

    /// Delete the `temp_artifacts` declared by an aborted or completed workflow's definition
    /// (only paths inside the pantheon root or the cleanup roots; symlinks are removed, never
    /// followed). Returns `{status: "cleaned", workflow_id, deleted[], missing[], refused[],
    /// dry_run}`; with `dry_run: true` (try it first) nothing is deleted and the answer is
    /// `{status: "dry_run", would_delete[], …}` instead.
    #[tool(
        output_schema = output::cleanup(),
        annotations(
        title = "Clean up temp artifacts",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn cleanup(&self, Parameters(a): Parameters<Cleanup>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("cleanup", move || {
            conductor.cleanup(&WorkflowId::parse(&a.workflow_id)?, a.dry_run)
        })
        .await
    }

    /// An operator act: release a dispatch held for approval into its god's inbox, or with
    /// `reject: true` (and a `reason`) refuse it (archived, the workflow `failed`). Returns
    /// `{status: "approved"|"rejected", handoff_id, workflow_id, target_god, target_step,
    /// state_status, dispatch_path, by, duplicate}`; deciding again is a harmless `duplicate`. An
    /// approval that leaves a budget reached names it (`budgets_reached`, `note`): the workflow's
    /// next dispatch will be held again. Needs the right `approve`, which only an operator's
    /// credential holds.
    #[tool(
        output_schema = output::approve_dispatch(),
        annotations(
        title = "Approve or reject a held dispatch",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn approve_dispatch(&self, Parameters(a): Parameters<ApproveDispatch>) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("approve_dispatch", move || {
            let hid = HandoffId::parse(&a.handoff_id)?;
            if a.reject {
                let reason = match a.reason.as_deref().map(str::trim) {
                    Some(r) if !r.is_empty() => r.to_owned(),
                    _ => {
                        return Err(Error::refused(
                            "reject: true needs a reason (why the dispatch is refused)",
                        ));
                    }
                };
                return serde_json::to_value(conductor.reject_held(
                    &hid,
                    &reason,
                    Actor::Operator,
                )?)
                .map_err(|e| Error::refused(e.to_string()));
            }
            let reached = conductor.budgets_reached(&hid).unwrap_or_default();
            let mut v = serde_json::to_value(conductor.approve(&hid, Actor::Operator)?)
                .map_err(|e| Error::refused(e.to_string()))?;
            if !reached.is_empty() {
                v["budgets_reached"] =
                    serde_json::to_value(&reached).map_err(|e| Error::refused(e.to_string()))?;
                v["note"] = serde_json::json!(
                    "approved without a raise: these budgets stay reached, so the workflow's next \
                     dispatch will be held again (`pantheon approve --budget-usd` raises them)"
                );
            }
            Ok(v)
        })
        .await
    }

    /// An operator act: put a dead letter (a dispatch out of deliveries) back into an inbox, its
    /// deliveries reset, optionally to another god (`to`). Returns `{status: "requeued",
    /// handoff_id, workflow_id, to_god, dispatch_path, ack_deadline}`. Needs the right `requeue`,
    /// which only an operator's credential holds.
    #[tool(
        output_schema = output::requeue_dead_letter(),
        annotations(
        title = "Requeue a dead letter",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn requeue_dead_letter(
        &self,
        Parameters(a): Parameters<RequeueDeadLetter>,
    ) -> CallToolResult {
        let conductor = self.conductor.clone();
        blocking("requeue_dead_letter", move || {
            let to =
                a.to.as_deref()
                    .map(|g| GodName::parse_as("to", g))
                    .transpose()?;
            if let Some(g) = &to
                && !conductor.root().inbox_dir(g).is_dir()
            {
                // A typo would deliver into an inbox nobody reads: refused, with the gods there are.
                let gods = crate::engine::known_gods(conductor.root())
                    .unwrap_or_else(|| "none yet".to_owned());
                return Err(Error::refused(format!(
                    "to: {g} has no inbox in this root; gods here: {gods}"
                )));
            }
            conductor.requeue(&HandoffId::parse(&a.handoff_id)?, to.as_ref())
        })
        .await
    }
}
