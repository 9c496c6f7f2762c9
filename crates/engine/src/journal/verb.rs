//! The journal's vocabulary: what an entry records as done ([`Verb`], its `action`) and the names
//! of the ids it concerns ([`Target`], the keys of its `targets`). Each word is spelled once, here;
//! docs/PROTOCOL.md §2.8 lists them. A new journaled act adds its verb (and any new target) here
//! and nowhere else.

use crate::words::words;

words!(
    open
    /// What a journal entry records as done (its `action`). A word another writer put into the
    /// journal, or an intent file names, is kept as `Verb::Other`, never refused: the journal is
    /// read as hostile, foreign input.
    pub Verb {
        /// A handoff submitted (`pantheon submit`, a god's handoff, an inbound bridge request).
        Submit = "submit",
        /// An ack recorded.
        Ack = "ack",
        /// A held dispatch approved.
        Approve = "approve",
        /// A held dispatch refused.
        Reject = "reject",
        /// A workflow aborted.
        Abort = "abort",
        /// A workflow's temporary artifacts removed (not a dry run).
        Cleanup = "cleanup",
        /// A lost dispatch written again.
        Redispatch = "redispatch",
        /// A timed-out dispatch delivered again.
        Redeliver = "redeliver",
        /// A dispatch dead-lettered after its last delivery.
        DeadLetter = "dead_letter",
        /// A dead letter dispatched again.
        Requeue = "requeue",
        /// A workflow run again from a step.
        Rerun = "rerun",
        /// A dead letter retired by hand.
        DeadRetire = "dead_retire",
        /// Dispatching paused.
        Pause = "pause",
        /// A pause lifted.
        Resume = "resume",
        /// A waiting outbox record tried again now.
        BridgeRetry = "bridge_retry",
        /// A waiting outbox record given up.
        BridgeDiscard = "bridge_discard",
        /// A bus lock released by force.
        ForceUnlock = "force_unlock",
        /// A board session moved to its next phase.
        BoardAdvance = "board_advance",
        /// A board session resolved.
        BoardResolve = "board_resolve",
        /// A budget raised.
        BudgetRaise = "budget_raise",
        /// A held item's outstanding approval links revoked.
        LinkRevoke = "link_revoke",
        /// An operator's answer sent to a foreign source's waiting item (an A2A task).
        AnswerSource = "answer_source",
    }
);

words!(
    /// The name of an id a journal entry concerns: a key of its `targets`.
    pub Target {
        /// The workflow.
        WorkflowId = "workflow_id",
        /// The handoff (the dispatch).
        HandoffId = "handoff_id",
        /// The handoff an ack's next step became.
        NextHandoffId = "next_handoff_id",
        /// The ack.
        AckId = "ack_id",
        /// The step.
        Step = "step",
        /// The god concerned (who decided, whose dead letter).
        God = "god",
        /// The god the dispatch goes to.
        ToGod = "to_god",
        /// The god it came from.
        FromGod = "from_god",
        /// The god a dispatch was rerouted to.
        ReroutedTo = "rerouted_to",
        /// The delivery's number.
        Delivery = "delivery",
        /// A rerun's attempt number.
        Attempt = "attempt",
        /// Who decided (an approval's actor).
        By = "by",
        /// A bus track.
        Track = "track",
        /// A lock's path.
        Path = "path",
        /// Whom a forced release took a lock from.
        Holder = "holder",
        /// A board session.
        SessionId = "session_id",
        /// The name a pause is scoped to (a god, a workflow).
        Name = "name",
        /// What a pause covers (`all`, `god`, `workflow`).
        Kind = "kind",
        /// A pause.
        PauseId = "pause_id",
        /// Until when.
        Until = "until",
        /// What a pause released.
        Released = "released",
        /// What a pause still holds.
        StillHeld = "still_held",
        /// How far a pause's deadlines shifted.
        Shifted = "shifted",
        /// The act that replaced this one.
        SupersededBy = "superseded_by",
        /// The bus message an act posted.
        MessageId = "message_id",
        /// An outbox record.
        OutboxId = "outbox_id",
        /// A NATS subject.
        Subject = "subject",
        /// The moment a rerun replays from.
        AsOf = "as_of",
        /// The dispatches an abort withdrew (a list).
        DispatchesWithdrawn = "dispatches_withdrawn",
        /// The intent file the entry settles.
        Intent = "intent",
        /// How a decision reached the engine (`http`, `ntfy`, `cli`, …): an approval link's channel.
        Channel = "channel",
        /// Who a decision's channel proved made it (an ssh signature's principal, a credential).
        Approver = "approver",
        /// The foreign source an act concerns (`KIND:LOCATION`).
        Source = "source",
        /// The foreign item an act concerns (its stable key).
        Item = "item",
    }
);

/// What came of a journaled act, as an operator reads an entry's `outcome`: it took effect, was
/// refused, or failed. The outcome is the result's own words (`dispatched`, `rejected`,
/// `approved (duplicate)`, `revoked (2)`, a foreign source's answer), open text that another writer
/// may have written, so it is read by its words: one that says `refused` makes it
/// [`Outcome::Refused`], one that says `fail…` (`failed`, `failure`) [`Outcome::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The act took effect (or found it done already).
    Took,
    /// The act was refused.
    Refused,
    /// The act, or what it concerns, failed.
    Failed,
}

impl Outcome {
    /// Reads an entry's `outcome` text (see [`Outcome`]); a refusal outranks a failure.
    pub fn read(text: &str) -> Self {
        let words = || text.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        if words().any(|w| w.contains("refused")) {
            Self::Refused
        } else if words().any(|w| w.contains("fail")) {
            Self::Failed
        } else {
            Self::Took
        }
    }

    /// True when the act did not take effect as asked (refused or failed): the journal pane shows it
    /// as an alert.
    pub fn went_wrong(self) -> bool {
        self != Self::Took
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_spelled_as_the_journal_has_always_spelled_them() {
        let words: Vec<&str> = Verb::ALL.iter().map(Verb::as_str).collect();
        assert_eq!(
            words,
            [
                "submit",
                "ack",
                "approve",
                "reject",
                "abort",
                "cleanup",
                "redispatch",
                "redeliver",
                "dead_letter",
                "requeue",
                "rerun",
                "dead_retire",
                "pause",
                "resume",
                "bridge_retry",
                "bridge_discard",
                "force_unlock",
                "board_advance",
                "board_resolve",
                "budget_raise",
                "link_revoke",
                "answer_source",
            ]
        );
        for v in Verb::ALL {
            assert_eq!(&Verb::parse(v.as_str()), v);
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
        assert_eq!(Target::WorkflowId.as_str(), "workflow_id");
        assert_eq!(Target::DispatchesWithdrawn.as_str(), "dispatches_withdrawn");
    }

    #[test]
    fn an_outcome_reads_by_its_words() {
        for (text, reading) in [
            ("dispatched", Outcome::Took),
            ("approved (duplicate)", Outcome::Took),
            ("revoked (2)", Outcome::Took),
            ("", Outcome::Took),
            ("refused", Outcome::Refused),
            ("refused: the link expired", Outcome::Refused),
            ("failed", Outcome::Failed),
            ("send_failure (peer gone)", Outcome::Failed),
            ("failed, then refused", Outcome::Refused),
            ("refusedly", Outcome::Refused),
        ] {
            assert_eq!(Outcome::read(text), reading, "{text:?}");
            assert_eq!(Outcome::read(text).went_wrong(), reading != Outcome::Took);
        }
    }

    #[test]
    fn a_foreign_verb_is_kept_not_refused() {
        let v: Verb = serde_json::from_str("\"launch_rockets\"").unwrap();
        assert_eq!(v, Verb::Other("launch_rockets".into()));
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"launch_rockets\"");
        let odd: Verb = serde_json::from_str("7").unwrap();
        assert_eq!(odd, Verb::Other("7".into()));
        assert!(!Verb::is_known("Submit"));
    }

    #[test]
    fn an_entry_keeps_its_words_on_disk() {
        let d = tempfile::tempdir().unwrap();
        let root = crate::store::Root::at(d.path());
        std::fs::create_dir_all(&root.conductor).unwrap();
        let act = crate::journal::Act::new(Verb::DeadLetter, "dead_lettered")
            .workflow("wf_a")
            .handoff("")
            .target(Target::ToGod, Some("hermes"));
        crate::journal::append(&root, &crate::journal::Origin::default(), &act).unwrap();
        let text = std::fs::read_to_string(crate::journal::journal_path(&root)).unwrap();
        assert!(text.contains(r#""action":"dead_letter""#), "{text}");
        assert!(
            text.contains(r#""targets":{"workflow_id":"wf_a","to_god":"hermes"}"#),
            "{text}"
        );
    }
}
