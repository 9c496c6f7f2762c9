//! The Pantheon protocol engine: a library with no terminal code, no printing and no async runtime.
//!
//! Its modules are private; what the crate offers is the list below, by area: the root and its files,
//! the Conductor (docs/PROTOCOL.md §2), the message bus and the board (§3, §4), cost (docs/BUDGETS.md),
//! the operator journal, history (docs/HISTORY.md), traces and the strict check. Most items are at the
//! crate's root; a group of functions and constants a caller reads under its area's name (file names,
//! timestamps, the board, a track's queue, the ledger, the outbox, the recorder, the NATS bridge, the
//! status figures) is a small module here that only re-exports. docs/CODE.md says how to add one.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(unnameable_types)]
#![warn(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod bridge;
mod bus;
mod conductor;
mod cost;
mod error;
mod health;
mod history;
mod journal;
mod store;
mod trace;
mod validate;
mod words;

// Errors: everything the engine can refuse or fail with, and one schema or rule violation.
pub use crate::error::{Error, Refusal, Result, Violation};

// The root and its files: the `Root`, validated ids, settings, safe reads and atomic writes.
pub use crate::{
    store::atomic::{to_pretty_json, write_atomic},
    store::crash::crash_point,
    store::ids::{
        AckId, Director, GodName, HandoffId, StepId, TrackName, WorkerId, WorkflowId,
        check_free_text, decode_key, encode_key, is_valid_name,
    },
    store::limits::MAX_HANDOFF_BYTES,
    store::lock::FileLock,
    store::paths::{Root, absolute as absolute_path, home_dir},
    store::read::{
        JsonRead, kind as json_kind, open_regular, read_json, read_json_nofollow, read_json_once,
    },
    store::safe::SafeDir,
    store::settings::{DEFAULT_STALE_AFTER, HistorySettings, STALE_AFTER_ENV, Settings},
    store::yaml::{
        MAX_YAML_NODES, enable_cache as enable_yaml_cache, parse_bounded as parse_yaml_bounded,
    },
};

// The Conductor: handoffs, acks, approvals, routing, deadlines, state (docs/PROTOCOL.md §2).
pub use crate::{
    conductor::admin::DEFAULT_GODS,
    conductor::approvals::{
        Channel as ApprovalChannel, DEFAULT_LINK_TTL, Ended as LinkEnded,
        KEEP_ENDED as LINK_KEEP_ENDED, LinkDecision, LinkEntry, LinkKey, LinkRecord, LinkRequest,
        LinkView, ListenerRecord as ApprovalsListener, MAX_LINK_TTL, MAX_LINKS, MintedLink,
        Receipt as LinkReceipt, RedeemRequest, Refusal as LinkRefusal, is_token_shaped,
        read_listener as read_approvals_listener, remove_listener as remove_approvals_listener,
        token_sha256, write_listener as write_approvals_listener,
    },
    conductor::deadlines::{DeadlineIndex, Kind as DeadlineEntryKind},
    conductor::definition::{
        LoadError, PublishDef, StepDef, WorkflowDef, load_definition_file, load_definitions,
    },
    conductor::delivery::{
        DeadLetter, DeadLetters, DeclaredPolicy, Delivery, DeliveryAct, Policy, RequeueResult,
        SUPERVISOR_BEAT, SUPERVISOR_DEAD_AFTER, TickReport, list_dead, live_supervisors,
        remove_supervisor_heartbeat, supervisor_alive, write_supervisor_heartbeat,
    },
    conductor::files::{FileError, is_foreign_pending_dir, known_gods},
    conductor::hold::{MovedHold, held_dispatches_moved},
    conductor::intents::settle::IntentRepair,
    conductor::model::{
        AbortManifest, AckRecord, AckStatus, CompletedStep, ContextBag, Dispatch, DispatchContext,
        HistoryEntry, RouteStatus, Routed, Routing, SkippedArtifact, StepRecord, StepStatus,
        WorkflowState, WorkflowStatus, from_value as model_from_value, waits_on_a_god,
    },
    conductor::overdue::{HELD_AFTER, Overdue, OverdueRule, UNACKED_AFTER, Waits},
    conductor::paging::{CompactDispatch, DEFAULT_LIMIT as DEFAULT_PAGE_LIMIT, PageRequest},
    conductor::pause::{
        Frozen, MAX_PAUSED_BYTES, Pause, PauseKind, PauseResult, PauseTarget, PausedEntry,
        PausedFile, PausedReport, Pauses, ResumeResult, held_by_pause,
        parse_rate as parse_pause_rate, parse_until,
    },
    conductor::request::{AckDecision, AckRequest},
    conductor::rerun::{AsOf, RerunResult},
    conductor::results::{
        AbortResult, AbortStatus, AckResult, ApprovalResult, ApprovalStatus, CleanupResult,
        CleanupStatus, DeadlineKind, DispatchResult, InboxResult, InitResult, InitStatus,
        OutboxActResult, OutboxActStatus, PendingEntry, PendingResult, RedispatchResult,
        RedispatchStatus, RefusedPath, ReplyStatus, RuleDetail, RulesResult, StepSummary,
        SubmitResult, SubmitStatus, WorkflowSummary, WorkflowsResult,
    },
    conductor::retire::{MAX_RETIRE_REASON, RetiredDead, list_retired},
    conductor::rules::{Rule, RuleAction, load_rule_file},
    conductor::template::{Part, PayloadTemplate, Template, TemplateError, Vars as TemplateVars},
    conductor::{Actor, Conductor},
};

// The message bus of a track: queue, locks, workers, events, notices (docs/PROTOCOL.md §3).
pub use crate::{
    bus::archive::ArchiveResult,
    bus::deadlock::{Cycle as DeadlockCycle, DeadlockReport, WaitEdge, detect_deadlocks},
    bus::events::{
        EventFile, EventPattern, WaitResult, event_file_name, is_write as is_write_event,
    },
    bus::locks::{
        DEFAULT_LOCK_TYPE, DEFAULT_TTL as DEFAULT_LOCK_TTL, LockKey, LockResult, LockView,
        UnlockResult, normalize_key as normalize_lock_key,
    },
    bus::model::{
        Assessment, BoardSession, CountPhase, DiscussPhase, DiscussionLine, Envelope, LockEntry,
        PHASE_COMPLETE, PHASE_IN_PROGRESS, Phases, ResolvePhase, STALE_AFTER, Vote, WorkerEntry,
        WorkerStatus, parse_assessments, parse_locks, parse_votes, parse_workers,
    },
    bus::notices::{NoticeReport, post_notices},
    bus::queue::MessageKind,
    bus::vocab::MessageType,
    bus::workers::{Heartbeat, WorkerView},
    bus::{BoardSummary, Bus, BusStatus, InitResult as BusInitResult, OPERATOR},
};

// Cost: usage, budgets and their holds, the `cost` query (docs/BUDGETS.md).
pub use crate::{
    cost::budget::{
        Budget, CostConfig, DEFAULT_WARN_AT, Raised, STATE_BUDGET, STATE_USAGE, StateUsage,
        declared as declared_budgets,
    },
    cost::hook::{Hold, Origin as UsageOrigin, Report as UsageReport, hold as budget_hold},
    cost::ops::{
        BY as COST_DIMENSIONS, BudgetReached, CostPass, CostQuery,
        metric_totals as cost_metric_totals, query as cost_query,
    },
    cost::prices::{Price, PriceTable},
    cost::usage::{Totals, Usage, micros_of},
};

// The operator journal: every act the shells make, hash-chained (conductor/journal.jsonl).
pub use crate::{
    journal::anchor::{AnchorWriter, anchor_every},
    journal::{
        Act, AnchorReport, Filter as JournalFilter, HeadRef,
        MAX_LINE_BYTES as MAX_JOURNAL_LINE_BYTES, Origin, Outcome as JournalOutcome,
        ReadResult as JournalPage, Target as JournalTarget, Verb as JournalVerb, VerifyOptions,
        VerifyProblem, VerifyResult, append as append_journal, check_actor, clean_actor,
        files as journal_files, journal_path, open_read as open_journal, read as read_journal,
        read_recent as read_recent_journal, segments as journal_segments,
        segments_dir as journal_segments_dir, verify_with as verify_journal_with,
    },
};

// History: the recorded changes of a root, replay at a moment (docs/HISTORY.md).
pub use crate::{
    history::picture::{of_root as picture_at, root_dirs, root_files},
    history::store::{
        Change, Checkpoint as HistoryCheckpoint, Damage, FileVer, HistoryDir, Kind as ChangeKind,
        Pending as PendingChange, Retention, Seek, SegmentHeader, SegmentRead, Tree as HistoryTree,
        Writer as HistoryWriter, apply as apply_change,
    },
    history::timeline::Timeline,
    history::{
        ChangeFilter, ForgetResult, changes as history_changes, check as check_history,
        context_as_of, forget as forget_history, parse_moment, replay_at,
    },
};

// Traces (W3C trace context, docs/PROTOCOL.md §2.13) and the strict whole-root check.
pub use crate::{
    trace::{TraceContext, span_id, trace_of},
    validate::{Problem, Severity, ValidationReport, validate_root},
};

/// Every file and directory name of a root, spelled once (store/layout.rs).
pub mod layout {
    pub use crate::store::layout::{
        ARCHIVE_DIR, ASSESSMENTS_FILE, BOARD_DIR, BUS_DIR, BUS_MUTEX_FILE, CONDUCTOR_DIR,
        DISCUSSION_FILE, FILE_NAMES, HANDOFFS_DIR, HISTORY_DIR, JOURNAL_FILE, LOCK_SUFFIX,
        LOCKS_FILE, PAUSED_FILE, PENDING_DIR, QUARANTINE_DIR, QUEUE_FILE, SHARED_DIR, SOURCES_DIR,
        STATE_DIR, TEMP_DIR, TEMP_PREFIX, VOTES_FILE, WORKERS_FILE, session_file_name,
        session_id_of,
    };
}

/// Timestamps and durations as the protocol writes them.
pub mod time {
    pub use crate::history::store::instant;
    pub use crate::store::time::{
        MOMENT_FORMS, format_ts, now_ts, parse_duration, parse_duration_checked, parse_moment,
        parse_moment_in, parse_ts, relative,
    };
}

/// The figures of `pantheon status` and the verdict of `pantheon check`, read cheaply from a root.
pub mod status {
    pub use crate::health::{
        BRIDGE_SILENT_AFTER, BridgeHealth, DirFigures, DirKind, Health, Judged, LEVEL_NAMES, Level,
        RecorderHealth, State, SupervisorRule, Thresholds, Verdict, evaluate, journal_chain, read,
        read_with, recorder_health,
    };
}

/// The board deliberation of a track: its phases, rules and inputs (docs/PROTOCOL.md §4).
pub mod board {
    pub use crate::bus::board::ops::{
        AdvanceResult, ArchivedSession, AssessInput, BoardStatus, DiscussInput, OpenInput,
        OpenResult, ResolveResult, VoteInput, WriteResult,
    };
    pub use crate::bus::board::report::{Resolution, ResolvedVotes};
    pub use crate::bus::board::rules::{
        RuleOutcome, Verdict, VoteCounts, next_phase, phase_complete_with, quick_review_rule,
        resolve_rule,
    };
    pub use crate::bus::board::session::{BoardSeen, current_session, read_discussion};
    pub use crate::bus::board::{ASSESSING, COMPLETE, DISCUSSING, QUICK_REVIEW, VOTING};
}

/// Reading a track's queue: filters, pages, cursors.
pub mod queue {
    pub use crate::bus::queue::{
        Filter, LastRead, OversizedLine, Page, QueueCursor, ReadResult, read, read_from,
        read_from_upto, read_last_upto, tail,
    };
}

/// The cost ledger under conductor/cost/: its files, lines and summary.
pub mod ledger {
    pub use crate::cost::ledger::{
        Line, Summary, append_many, attention_items, attention_path, cost_dir, ledger_path,
        raised_path, read_from, summary, summary_path,
    };
}

/// The Conductor's outbox: the records the bridge sends and their moves.
pub mod outbox {
    pub use crate::conductor::outbox::{
        OutboxRecord, Reply, ReplyOutcome, give_up, mark_sent, outbox_dir, pending, record_path,
        retry_requests, sent_dir, take_retry_request,
    };
}

/// The history recorder: the thread that watches a root and writes its changes.
pub mod recorder {
    pub use crate::history::recorder::{Background, GATHER, Msg, Recorder, Report, lease_file};
}

/// The pure parts of the NATS bridge: subjects, wire format, peers, the bridge's files.
pub mod nats {
    pub use crate::bridge::pauses::{
        AnnouncedPause, MAX_ANNOUNCED, MAX_ANNOUNCEMENT_BYTES, NotBelieved, PAUSE_SUBJECTS,
        PauseAnnouncement, PeerPauses, SILENT_AFTER_ANNOUNCEMENTS, encode_pause_announcement,
        parse_pause_announcement, pause_announcement, pause_subject, peer_pauses_json,
        peer_pauses_live, read_peer_pauses,
    };
    pub use crate::bridge::peer::{EnvelopeKind, Peer, PeerError, Peers, Transport};
    pub use crate::bridge::refusal::WireError;
    pub use crate::bridge::{
        AwaitingReplies, Inbound, Status, StuckRecord, Taken, TrackCounts, Wire, admit,
        approve_subject, bridge_dir, check_sendable, configure_peers, dead_dir, dead_letter,
        encode, load_status, parse_message, read_status, redact_url, reply_subject, status_path,
        take, watched_dirs, write_bridge_record, write_status,
    };
    pub use crate::conductor::subject::{SubjectError, check_filter};
    /// A track mirrored through the bridge: streams, key-value buckets, cursors, lock plans.
    pub mod track {
        pub use crate::bridge::track::{
            KvEntry, LockStep, Mirror, OwnLine, SharedLock, TrackCursor, cursors_dir,
            decode_kv_key, encode_kv_key, filter, identity, local_workers, locks_bucket,
            mirror_locks, mirror_workers, new_lock, plan_acquire, plan_release, read_cursor,
            read_own_from, sender_of, stream_name, subject, sync_queue, worker_key, workers_bucket,
            write_cursor,
        };
    }
}

/// The foreign-root fixture finder, the same file the integration tests include (its items are `pub`
/// for them, so the surface lint does not apply here).
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "../../../tests/common/fixture.rs"]
pub(crate) mod test_fixture;
