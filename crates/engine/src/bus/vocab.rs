//! The words of the bus and the board (docs/PROTOCOL.md §3 and §4), each spelled once: message types the
//! engine writes or reacts to, board session statuses, phase statuses, checkpoints, verdicts, discussion
//! kinds and the default board. Every vocabulary is declared with the engine's one vocabulary macro
//! (`crate::words`), like the Conductor's [`crate::conductor::WorkflowStatus`]; the tolerant record
//! types in [`super::model`] keep the words as written (foreign writers use others), and compare
//! against these.

pub(crate) use crate::words::Vocabulary;
use crate::words::words;

words!(
    /// The message types the engine posts or reacts to (docs/PROTOCOL.md §3.2). Other upper-case types are
    /// valid on the bus and kept as written.
    pub MessageType {
        /// Progress of a task.
        Progress = "PROGRESS",
        /// A task is done; writes `TASK_COMPLETE_{task_id}.event`.
        TaskComplete = "TASK_COMPLETE",
        /// A task failed; writes `TASK_FAILED_{task_id}.event`.
        TaskFailed = "TASK_FAILED",
        /// A worker waits for a lock or a task (the deadlock check reads these).
        Blocked = "BLOCKED",
        /// A lock was acquired.
        FileLock = "FILE_LOCK",
        /// A lock was released.
        FileUnlock = "FILE_UNLOCK",
        /// An expired lease was taken over.
        LockLost = "LOCK_LOST",
        /// A board session was opened.
        BoardOpen = "BOARD_OPEN",
        /// A director assessed.
        BoardAssess = "BOARD_ASSESS",
        /// A discussion line was written.
        BoardDiscuss = "BOARD_DISCUSS",
        /// A discussion round was closed.
        BoardRound = "BOARD_ROUND",
        /// A director voted.
        BoardVote = "BOARD_VOTE",
        /// The session moved to its next phase.
        BoardAdvance = "BOARD_ADVANCE",
        /// The session was resolved.
        BoardResolve = "BOARD_RESOLVE",
        /// A held lock's lease ran out (posted once by the supervisor, `pantheon serve`).
        LockExpired = "LOCK_EXPIRED",
        /// A worker's heartbeat went stale (posted once by the supervisor, `pantheon serve`).
        WorkerStale = "WORKER_STALE",
        /// The track (or the whole root) was paused: new posts are refused until it is resumed.
        Paused = "PAUSED",
        /// The track's pause ended.
        Resumed = "RESUMED",
    }
);

words!(
    /// A board session's status, in the order a session moves through them (docs/PROTOCOL.md §4).
    pub(crate) SessionStatus {
        /// Directors assess the proposal.
        Assessing = "ASSESSING",
        /// Directors discuss, in rounds.
        Discussing = "DISCUSSING",
        /// Directors cast their final votes.
        Voting = "VOTING",
        /// Ready to resolve.
        Resolving = "RESOLVING",
        /// Resolved.
        Complete = "COMPLETE",
    }
);

words!(
    /// The status of one phase of a session (`phases.assess.status`, …).
    pub(crate) PhaseStatus {
        /// Not reached yet.
        NotStarted = "NOT_STARTED",
        /// The current phase.
        InProgress = "IN_PROGRESS",
        /// Done.
        Complete = "COMPLETE",
        /// A phase a quick review never runs.
        Skipped = "SKIPPED",
    }
);

words!(
    /// The checkpoints a session may be opened for.
    pub(crate) Checkpoint {
        /// Before work starts.
        EvaluatePlan = "EVALUATE_PLAN",
        /// After the work.
        EvaluateExecution = "EVALUATE_EXECUTION",
        /// Before release.
        PreLaunch = "PRE_LAUNCH",
        /// Resolved from the assessments alone.
        QuickReview = "QUICK_REVIEW",
    }
);

words!(
    /// A director's assessment verdict (`assessments.json[director].verdict`).
    pub(crate) AssessVerdict {
        /// For.
        Approve = "APPROVE",
        /// For, with concerns (counts as for in a quick review).
        Concerns = "CONCERNS",
        /// Against.
        Reject = "REJECT",
    }
);

words!(
    /// A director's final vote (`votes.json[director].final_verdict`).
    pub(crate) VoteVerdict {
        /// For.
        Approve = "APPROVE",
        /// Against.
        Reject = "REJECT",
    }
);

words!(
    /// The kind of a discussion line (`discussion.jsonl` `type`).
    pub(crate) DiscussKind {
        /// Disputes a point.
        Challenge = "CHALLENGE",
        /// Agrees with a point.
        Agree = "AGREE",
        /// Asks.
        Question = "QUESTION",
        /// Answers or explains.
        Clarify = "CLARIFY",
    }
);

words!(
    /// The words a worker's status is written with (`worker-status.json`); readers map these onto
    /// [`super::model::WorkerStatus`], which also keeps unknown words.
    pub(crate) WorkerWord {
        /// Working, must keep beating.
        Running = "RUNNING",
        /// Done.
        Complete = "COMPLETE",
        /// Gave up.
        Failed = "FAILED",
        /// Waiting, must keep beating.
        Blocked = "BLOCKED",
    }
);

/// `COMPLETED`: a foreign spelling of [`WorkerWord::Complete`] that readers accept.
pub(crate) const WORKER_COMPLETED_ALIAS: &str = "COMPLETED";

/// The addressee of a discussion line meant for the whole board.
pub(crate) const TO_ALL: &str = "ALL";

/// The default board, in seating order.
pub(crate) const DEFAULT_DIRECTORS: [&str; 5] = ["CA", "CPO", "CSO", "COO", "CXO"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_lists_in_order() {
        for w in SessionStatus::ALL {
            assert_eq!(SessionStatus::parse(w.as_str()), Some(*w));
            assert_eq!(
                SessionStatus::parse_loose(&w.as_str().to_lowercase()),
                Some(*w)
            );
        }
        assert_eq!(
            SessionStatus::list(),
            "ASSESSING, DISCUSSING, VOTING, RESOLVING, COMPLETE"
        );
        assert_eq!(VoteVerdict::parse("approve"), None);
        assert_eq!(
            VoteVerdict::parse_loose(" approve "),
            Some(VoteVerdict::Approve)
        );
        assert_eq!(MessageType::ALL.len(), 18);
        for m in MessageType::ALL {
            assert!(crate::bus::queue::is_valid_type(m.as_str()), "{m}");
        }
        assert_eq!(
            serde_json::to_value(Checkpoint::QuickReview).unwrap(),
            "QUICK_REVIEW"
        );
    }
}
