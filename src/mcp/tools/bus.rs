//! The message-bus tools (docs/PROTOCOL.md §3): messages, locks, heartbeats, events and deadlocks.
//! Force-releasing another worker's lock is an operator act and is not offered here.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use serde_json::Value;
use std::time::Duration;

use crate::engine::{
    Bus, DEFAULT_LOCK_TTL, Error, EventPattern, Heartbeat, LockKey, MessageKind, TrackName,
    WorkerId,
    queue::{Filter, Page},
    time::parse_duration_checked,
};
use crate::mcp::args::*;
use crate::mcp::output;
use crate::mcp::reply::blocking;
use crate::mcp::server::ConductorServer;

/// `wait_for_event`'s timeout when none is given, as in the seed.
const DEFAULT_WAIT_SECS: f64 = 300.0;

/// `read_messages`' page size when none is given: enough for a track's recent history, small enough
/// for an agent's context window.
const READ_MESSAGES_LIMIT: usize = 100;

#[tool_router(router = bus_tools, vis = "pub(crate)")]
impl ConductorServer {
    /// Post a message to a track's bus (`{id, type, source, timestamp, payload}` appended to
    /// `queue.jsonl`; completion, failure and unlock messages also touch their event files).
    /// Returns the message as written.
    #[tool(
        output_schema = output::post_message(),
        annotations(
        title = "Post a bus message",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn post_message(&self, Parameters(a): Parameters<PostMessage>) -> CallToolResult {
        let root = self.root.clone();
        blocking("post_message", move || {
            let bus = Bus::open(&root, &TrackName::parse(&a.track)?);
            bus.post(
                MessageKind::parse(&a.msg_type)?,
                &a.source,
                Value::Object(a.payload.unwrap_or_default()),
            )
        })
        .await
    }

    /// Read a track's messages, oldest first, optionally only those `since` an instant, of one
    /// `msg_type`, or the last `tail`. Paged: at most `limit` (default 100) messages, `count` of all
    /// that matched, and `next_cursor` to pass as `cursor` for the next page (null on the last).
    /// Lines that cannot be read (or are over 4 MiB) are skipped and counted.
    #[tool(
        output_schema = output::read_messages(),
        annotations(
        title = "Read bus messages",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn read_messages(&self, Parameters(a): Parameters<ReadMessages>) -> CallToolResult {
        let root = self.root.clone();
        blocking("read_messages", move || {
            let bus = Bus::open_existing(&root, &TrackName::parse(&a.track)?)?;
            let filter = Filter {
                since: a.since.as_deref().map(Filter::parse_since).transpose()?,
                kind: a.msg_type,
                source: a.source,
            };
            let page = Page {
                limit: Some(a.limit.unwrap_or(READ_MESSAGES_LIMIT)),
                cursor: a.cursor,
            };
            bus.read_page(&filter, a.tail, &page)
        })
        .await
    }

    /// Lock a file for your worker before changing it. Free, expired, or already yours (the
    /// lease is renewed): granted, and a `FILE_LOCK` message is posted. Held by another live
    /// worker: refused with the holder and its expiry; wait for `FILE_UNLOCK_{filepath}` with
    /// `wait_for_event`, or work on something else. The answer's `fencing_token` is higher than any
    /// earlier lease of the path: pass it to `release_lock`; if your lease was taken over, you get
    /// `LOCK_LOST` and the `LOCK_LOST_{worker_id}` event, and the old token is refused.
    #[tool(
        output_schema = output::acquire_lock(),
        annotations(
        title = "Acquire a file lock",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn acquire_lock(&self, Parameters(a): Parameters<AcquireLock>) -> CallToolResult {
        let root = self.root.clone();
        blocking("acquire_lock", move || {
            let bus = Bus::open(&root, &TrackName::parse(&a.track)?);
            let ttl = match a.ttl.as_deref() {
                None => DEFAULT_LOCK_TTL,
                Some(t) => parse_duration_checked("ttl", t)?,
            };
            bus.acquire_lock(
                &LockKey::parse(&a.filepath)?,
                &WorkerId::parse(&a.worker_id)?,
                ttl,
                a.lock_type.as_deref(),
            )
        })
        .await
    }

    /// Release a lock you hold: removes it, posts `FILE_UNLOCK` and wakes the workers waiting for
    /// it. A lock held by someone else is refused.
    #[tool(
        output_schema = output::release_lock(),
        annotations(
        title = "Release a file lock",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    )
    )]
    async fn release_lock(&self, Parameters(a): Parameters<ReleaseLock>) -> CallToolResult {
        let root = self.root.clone();
        blocking("release_lock", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).release_lock_fenced(
                &LockKey::parse(&a.filepath)?,
                &WorkerId::parse(&a.worker_id)?,
                false,
                a.fencing_token,
            )
        })
        .await
    }

    /// Heartbeat: merge your task, status, progress and current subtask into your entry in the
    /// track's `worker-status.json` and stamp `last_heartbeat`. Fields you leave out are kept.
    #[tool(
        output_schema = output::update_worker_status(),
        annotations(
        title = "Update worker status",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    )
    )]
    async fn update_worker_status(
        &self,
        Parameters(a): Parameters<UpdateWorkerStatus>,
    ) -> CallToolResult {
        let root = self.root.clone();
        blocking("update_worker_status", move || {
            Bus::open(&root, &TrackName::parse(&a.track)?).heartbeat(&Heartbeat {
                worker_id: &WorkerId::parse(&a.worker_id)?,
                task_id: Some(&a.task_id),
                status: Some(&a.status),
                progress_pct: a.progress_pct,
                current_subtask: a.current_subtask.as_deref(),
            })
        })
        .await
    }

    /// Wait until an event file matching `event_pattern` exists in the track's `events/`
    /// (e.g. `TASK_COMPLETE_1.1`, `FILE_UNLOCK_*`, `BOARD_RESOLVE*`), or until `timeout` seconds
    /// pass. Woken by file-system notification. Returns whether it matched and which events.
    #[tool(
        output_schema = output::wait_for_event(),
        annotations(
        title = "Wait for a bus event",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn wait_for_event(&self, Parameters(a): Parameters<WaitForEvent>) -> CallToolResult {
        let root = self.root.clone();
        blocking("wait_for_event", move || {
            let pattern = EventPattern::parse_as("event_pattern", &a.event_pattern)?;
            let secs = a.timeout.unwrap_or(DEFAULT_WAIT_SECS);
            let timeout = Duration::try_from_secs_f64(secs).map_err(|_| {
                Error::refused(format!("timeout {secs} is not a number of seconds"))
            })?;
            Bus::open(&root, &TrackName::parse(&a.track)?)
                .wait_for_event(&pattern, timeout, a.fresh)
        })
        .await
    }

    /// Find workers blocked on each other in a cycle (from their latest `BLOCKED` messages and the
    /// lock table). Every cycle is reported with the workers and resources in it.
    #[tool(
        output_schema = output::detect_deadlocks(),
        annotations(
        title = "Detect deadlocks",
        read_only_hint = true,
        open_world_hint = false
    )
    )]
    async fn detect_deadlocks(&self, Parameters(a): Parameters<TrackRef>) -> CallToolResult {
        let root = self.root.clone();
        blocking("detect_deadlocks", move || {
            Bus::open_existing(&root, &TrackName::parse(&a.track)?)?.detect_deadlocks()
        })
        .await
    }
}
