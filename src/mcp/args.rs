//! The argument of every tool, with the descriptions a model reads in `tools/list`.
//!
//! Names follow docs/PROTOCOL.md §5.2 (`handoff`, `ack`, `god_name`, `workflow_id`, …); the bus
//! and board tools take `track` plus the fields of the matching CLI command, named as the seed
//! documents' functions name them (tests/bus/python/seed_bus.py: `filepath`, `worker_id`,
//! `msg_type`, …). The server checks arguments against these schemas before the call (unknown
//! fields are refused, so a misspelt argument is reported, never ignored); the values then go to
//! the engine unchanged, which makes every protocol check.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// `submit_handoff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubmitHandoff {
    /// The handoff for the step you just finished: `{handoff_id, workflow_id, from_god, to_god,
    /// step, context: {summary, decisions[], artifacts[], open_questions[]?, gates_passed[]?},
    /// routing?: {workflow_definition, workflow_version, workflow_step, priority}}`.
    /// `handoff_id` is `hof_YYYYMMDD_` + 6 lowercase hex chars (choose a fresh one per handoff;
    /// resubmitting the same id and content is a harmless duplicate). `workflow_id` matches
    /// `^wf_[a-z0-9_]{1,120}$`. List in `context.gates_passed` every gate the step declares.
    /// Optional `usage: {input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    /// cost_usd, model}` says what the step cost (docs/BUDGETS.md).
    #[schemars(with = "Map<String, Value>")]
    pub handoff: Value,
}

/// `ack_handoff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AckHandoff {
    /// The acknowledgement of a dispatch from your inbox: `{ack_id, handoff_id, workflow_id?,
    /// status, eta?, message?, context?}`. `ack_id` is `ack_YYYYMMDD_` + 3-8 lowercase hex
    /// chars; `handoff_id` is the dispatch's. `status`: `accepted` (you take the work), `pending`
    /// (queued, keep it in the inbox), `rejected` (not yours: it goes to a fallback god),
    /// `completed` (done: `message` becomes the step summary, optional `context.decisions` and
    /// `context.artifacts` are recorded, and the next step is dispatched). Optional `usage` as on
    /// a handoff.
    #[schemars(with = "Map<String, Value>")]
    pub ack: Value,
}

/// `check_inbox`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckInbox {
    /// Your god name (e.g. `thoth`, `hephaestus`, `marvin`): whose pending dispatches to list.
    pub god_name: String,
    /// Dispatches per page, oldest first. Default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page, for the page after it.
    #[serde(default)]
    pub cursor: Option<String>,
    /// `true`: each dispatch is only its ids, `from_god`, `step`, `age_secs` and the first line
    /// of its summary; fetch one whole with `get_dispatch`. Default `false` (the full context).
    #[serde(default)]
    pub compact: bool,
}

/// `get_dispatch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetDispatch {
    /// Your god name: whose inbox holds the dispatch.
    pub god_name: String,
    /// The dispatch's `handoff_id` (as `check_inbox` lists it).
    pub handoff_id: String,
}

/// `list_pending`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPending {
    /// Dispatches per page (ordered by god, then oldest first). Default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page, for the page after it.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Tools that take no arguments (`list_rules`, `list_workflows`): anything given is refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArguments {}

/// `get_workflow_state`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkflowRef {
    /// The workflow instance id, e.g. `wf_deploy_42`.
    pub workflow_id: String,
}

/// `abort_workflow`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AbortWorkflow {
    /// The workflow instance to abort, e.g. `wf_deploy_42`.
    pub workflow_id: String,
    /// Why it cannot go on; stored as the workflow's `failure_reason` and shown to operators.
    pub reason: String,
    /// Who aborts (your god name); recorded as `aborted_by`. Default `mcp`.
    #[serde(default)]
    pub by: Option<String>,
}

/// `approve_dispatch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveDispatch {
    /// The held dispatch's `handoff_id` (`list_pending` lists them under `awaiting_approval`).
    pub handoff_id: String,
    /// `true`: refuse it instead (archived as rejected, the workflow `failed`); needs `reason`.
    /// Default `false` (release it into its god's inbox).
    #[serde(default)]
    pub reject: bool,
    /// Why it is refused (required with `reject: true`; recorded in the state and the journal).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `requeue_dead_letter`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequeueDeadLetter {
    /// The dead letter's `handoff_id` (`pantheon dead` lists them).
    pub handoff_id: String,
    /// Deliver it to this god instead of the one it died with (a god with an inbox).
    #[serde(default)]
    pub to: Option<String>,
}

/// `cleanup`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cleanup {
    /// An aborted or completed workflow whose declared `temp_artifacts` to delete.
    pub workflow_id: String,
    /// `true`: only report what would be deleted. Default `false` (delete).
    #[serde(default)]
    pub dry_run: bool,
}

/// `post_message`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PostMessage {
    /// The track whose message bus to use (`conductor/tracks/{track}/.message-bus/`).
    pub track: String,
    /// Message type, `^[A-Z][A-Z0-9_]*$`: `PROGRESS`, `TASK_COMPLETE`, `TASK_FAILED`, `BLOCKED`, …
    pub msg_type: String,
    /// Who posts (your worker id, director or god name).
    pub source: String,
    /// The message payload, e.g. `{task_id, progress_pct, current_subtask}` for `PROGRESS` or
    /// `{task_id, commit_sha, files_modified[], unblocks[]}` for `TASK_COMPLETE`. Default `{}`.
    #[serde(default)]
    pub payload: Option<Map<String, Value>>,
}

/// `read_messages`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadMessages {
    /// The track whose message bus to read.
    pub track: String,
    /// Only messages at or after this instant (RFC 3339, e.g. `2026-06-14T10:30:00Z`).
    #[serde(default)]
    pub since: Option<String>,
    /// Only messages of this type (e.g. `TASK_COMPLETE`).
    #[serde(default)]
    pub msg_type: Option<String>,
    /// Only messages from this source.
    #[serde(default)]
    pub source: Option<String>,
    /// Only the last N matching messages.
    #[serde(default)]
    pub tail: Option<usize>,
    /// At most this many messages per page, oldest first (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page, to read the next one.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `acquire_lock`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcquireLock {
    /// The track whose lock table to use.
    pub track: String,
    /// The file to lock (a path as the workers name it; `./a//b` and `a/b` are the same lock).
    pub filepath: String,
    /// Your worker id; a lock you already hold is renewed.
    pub worker_id: String,
    /// Lease length: `30s`, `5m`, `2h`, `1d`. Default `30m`. Renew before it runs out.
    #[serde(default)]
    pub ttl: Option<String>,
    /// The kind of lock recorded with it. Default `exclusive`.
    #[serde(default)]
    pub lock_type: Option<String>,
}

/// `release_lock`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseLock {
    /// The track whose lock table to use.
    pub track: String,
    /// The locked file, as given to `acquire_lock`.
    pub filepath: String,
    /// Your worker id: only the holder may release (operators force-release at the console).
    pub worker_id: String,
    /// The `fencing_token` `acquire_lock` returned: the release is refused if your lease was lost.
    #[serde(default)]
    pub fencing_token: Option<u64>,
}

/// `update_worker_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateWorkerStatus {
    /// The track whose worker table to update.
    pub track: String,
    /// Your worker id.
    pub worker_id: String,
    /// The task you are on.
    pub task_id: String,
    /// `RUNNING`, `COMPLETE`, `FAILED` or `BLOCKED`. Beat at least every 5 minutes while
    /// `RUNNING` or `BLOCKED`: after 10 silent minutes you are shown as stale.
    pub status: String,
    /// Progress 0-100.
    #[serde(default)]
    pub progress_pct: Option<f64>,
    /// What you are doing right now, in a few words.
    #[serde(default)]
    pub current_subtask: Option<String>,
}

/// `wait_for_event`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitForEvent {
    /// The track whose events to watch.
    pub track: String,
    /// Event file glob, e.g. `TASK_COMPLETE_1.1`, `FILE_UNLOCK_*`, `BOARD_RESOLVE*`.
    pub event_pattern: String,
    /// Give up after this many seconds. Default 300.
    #[serde(default)]
    #[schemars(range(min = 0, max = 86400))]
    pub timeout: Option<f64>,
    /// `true`: only count events created after the wait began. Default `false`.
    #[serde(default)]
    pub fresh: bool,
}

/// Tools that take only the track: `detect_deadlocks`, `board_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrackRef {
    /// The track to use.
    pub track: String,
}

/// `board_open`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardOpen {
    /// The track whose board to open (the previous session is archived).
    pub track: String,
    /// `EVALUATE_PLAN`, `EVALUATE_EXECUTION`, `PRE_LAUNCH` or `QUICK_REVIEW` (assessments only).
    pub checkpoint: String,
    /// What the board decides on: plain words, or a JSON object given as text.
    pub proposal: String,
    /// The directors on the board. Default `CA, CPO, CSO, COO, CXO`.
    #[serde(default)]
    pub directors: Option<Vec<String>>,
    /// How many discussion rounds at most. Default 3.
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub max_rounds: Option<u32>,
    /// Who opens it (recorded as the message source). Default `orchestrator`.
    #[serde(default)]
    pub source: Option<String>,
}

/// `board_assess`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardAssess {
    /// The track of the board session.
    pub track: String,
    /// Your director seat: `CA`, `CPO`, `CSO`, `COO` or `CXO` (or as the session lists).
    pub director: String,
    /// `APPROVE`, `CONCERNS` or `REJECT`.
    pub verdict: String,
    /// Score 1-10.
    pub score: f64,
    /// Concerns, one per item.
    #[serde(default)]
    pub concerns: Vec<String>,
    /// Recommendations, one per item.
    #[serde(default)]
    pub recommendations: Vec<String>,
    /// Key points, one per item.
    #[serde(default)]
    pub key_points: Vec<String>,
    /// `true` when a concern blocks approval.
    #[serde(default)]
    pub blocking: Option<bool>,
    /// Director-specific fields to keep with the assessment (e.g. `vulnerabilities`,
    /// `timeline_assessment`).
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

/// `board_discuss`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardDiscuss {
    /// The track of the board session.
    pub track: String,
    /// Your director seat.
    pub from: String,
    /// The director addressed, or `ALL`.
    pub to: String,
    /// `CHALLENGE`, `AGREE`, `QUESTION` or `CLARIFY`.
    pub msg_type: String,
    /// What you say.
    pub message: String,
    /// `true` when this exchange changes your verdict. Default `false`.
    #[serde(default)]
    pub changes_my_verdict: bool,
}

/// `board_vote`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardVote {
    /// The track of the board session.
    pub track: String,
    /// Your director seat.
    pub director: String,
    /// `APPROVE` or `REJECT`.
    pub final_verdict: String,
    /// How sure you are, 0-1.
    pub confidence: f64,
    /// Conditions attached to your vote, one per item.
    #[serde(default)]
    pub conditions: Vec<String>,
}

/// `board_next_round`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardRound {
    /// The track of the board session.
    pub track: String,
    /// Who acts (recorded as the message source). Default `orchestrator`.
    #[serde(default)]
    pub source: Option<String>,
}

/// `board_advance` and `board_resolve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardForce {
    /// The track of the board session.
    pub track: String,
    /// Who acts (recorded as the message source). Default `orchestrator`.
    #[serde(default)]
    pub source: Option<String>,
    /// `true`: move on although the phase is incomplete (missing directors count as abstained).
    /// Default `false`.
    #[serde(default)]
    pub force: bool,
}

/// The source recorded for board acts by an agent that does not name itself.
pub(crate) const DEFAULT_BOARD_SOURCE: &str = "orchestrator";
