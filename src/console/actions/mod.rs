//! The operator actions. An action is one module: its flow from the selection to a prompt, a menu
//! or a confirmation (`start`, and the answers of its prompts), what the confirmation says
//! ([`Act::describe`]) and is bound to ([`Act::version`]), its one engine call ([`Act::execute`],
//! through the `Operator`), the flash made of the engine's typed answer (its `summary`, in [`Done`]) and, when it
//! applies to marks, what it is for each marked record ([`Act::mark`]). It is registered by ONE
//! entry of the [`actions!`] table below: the [`Op`] variant with its request data, and its module.
//! The rest of the console asks an [`Op`] through the methods the table generates; it never matches
//! over every action. (The key that starts it is a line of `Keymap::default` in `console/keymap.rs`.)

use chrono::{DateTime, Utc};

use crate::engine::{
    AckRequest, Budget, Error, GodName, HandoffId, LockKey, StepId, TrackName, WorkflowId,
    board::BoardSeen,
};
use crate::live::snapshot::Snapshot;

use super::app::{App, Effect, Tone};
use super::engine_ops::EngineOperator;
use super::keymap::OperatorAction;
use super::marks::{BulkItem, FanOut, SkipWhy, Skipped};
use super::ops::{Done, Outcome};
use super::rowkey::RowKey;
use super::shown::Version;

/// What every operator action is, implemented by its module for its fields (borrowed from the
/// [`Op`]: the struct of the same name the [`actions!`] table makes).
pub(crate) trait Act {
    /// A short title for dialogs and flash messages.
    fn title(&self) -> String;

    /// The button that confirms it.
    fn verb(&self) -> &'static str;

    /// Destructive operations are drawn in red.
    fn is_destructive(&self) -> bool {
        false
    }

    /// The lines of its confirmation dialog, from the snapshot.
    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>);

    /// Its confirmation is described again from each new snapshot while what was shown holds
    /// (false: its lines come from elsewhere, the engine's dry run).
    fn described_from_snapshot(&self) -> bool {
        true
    }

    /// The version of the records it acts on, as `snap` has them (see `shown`).
    fn version(&self, v: &mut Version, snap: &Snapshot);

    /// Its one engine call, and the flash made of the engine's typed answer (the module's
    /// `summary` of its result type, through [`Done::new`]).
    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error>;

    /// The short name of the record it is for (the handoff, workflow or lock path).
    fn subject(&self) -> String;

    /// Its past tense, for a bulk report ("approved 4, refused 1").
    fn done_word(&self) -> &'static str {
        "done"
    }

    /// The words it says the same for every marked record (a reason, a message).
    fn words(&self) -> Option<String> {
        None
    }

    /// It made for `mark`, or why the mark is skipped; `None` for an action that does not apply
    /// to marks.
    fn mark(&self, _fan: &mut FanOut<'_>, _mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        None
    }

    /// It is the same action on several marked records.
    fn is_bulk(&self) -> bool {
        false
    }

    /// After the engine answered (and the flash said so): what else changes in the console.
    fn finished(&self, _app: &mut App, _outcome: &Outcome) -> Vec<Effect> {
        Vec::new()
    }
}

pub(crate) use rerun::step_question as rerun_step_question;

/// The one registration of every operator action: `Variant { its request data } => module`.
/// Makes the [`Op`] enum, a struct per variant borrowing its fields (what the module implements
/// [`Act`] for) and [`Op::act`] (the one match over every action); and declares each module.
macro_rules! actions {
    ($(
        $(#[$doc:meta])*
        $variant:ident { $( $(#[$fdoc:meta])* $field:ident : $ty:ty ),* $(,)? } => $module:ident,
    )*) => {
        $( pub(crate) mod $module; )*

        /// One engine call the operator asked for.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Op {
            $( $(#[$doc])* $variant { $( $(#[$fdoc])* $field: $ty, )* }, )*
        }

        $(
            #[doc = concat!("The fields of [`Op::", stringify!($variant), "`], borrowed (see `",
                stringify!($module), "`).")]
            pub(crate) struct $variant<'a> {
                $( pub(crate) $field: &'a $ty, )*
            }
        )*

        impl Op {
            /// Asks the action's module (see [`Act`]).
            pub(crate) fn act<R>(&self, f: impl FnOnce(&dyn Act) -> R) -> R {
                match self {
                    $( Op::$variant { $($field),* } => f(&$variant { $($field),* }), )*
                }
            }
        }
    };
}

actions! {
    /// An ack, as the engine takes it (its `ack_id` made once, when the op is built): the god
    /// whose inbox holds the dispatch rides along for the confirmation and the flash.
    Ack { god: GodName, request: AckRequest } => ack,
    Approve {
        handoff_id: HandoffId,
        /// For a dispatch held for a budget: first set each budget it reached to these limits
        /// (`approve --budget-usd/--budget-tokens`; journaled as `budget_raise`).
        raise: Option<Budget>,
    } => approve,
    RejectHeld { handoff_id: HandoffId, reason: String } => reject_held,
    Abort { workflow_id: WorkflowId, reason: String } => abort,
    Cleanup { workflow_id: WorkflowId } => cleanup,
    ForceUnlock {
        track: TrackName,
        /// The lock, parsed where the op is built (a lock listed with a path that is no lock key
        /// never becomes an op).
        path: LockKey,
    } => force_unlock,
    BoardAdvance {
        track: TrackName,
        /// Move on although the current phase is not complete (the CLI's `--force`).
        force: bool,
        /// The session as the confirmation showed it: the engine refuses, under the board's
        /// lock, when it moved on since (`None`: whatever it is then).
        seen: Option<BoardSeen>,
    } => board_advance,
    BoardNextRound { track: TrackName, seen: Option<BoardSeen> } => board_round,
    BoardResolve {
        track: TrackName,
        /// Needed when some directors have not voted (they are recorded as abstained).
        force: bool,
        seen: Option<BoardSeen>,
    } => board_resolve,
    /// Puts a dead letter back into an inbox (`pantheon requeue HANDOFF_ID [--to GOD]`).
    Requeue {
        handoff_id: HandoffId,
        /// The god whose dead letters hold it (for the confirmation and the flash).
        from_god: GodName,
        /// Another god's inbox; `None`: the god it was last delivered to.
        to: Option<GodName>,
    } => requeue,
    /// Retires a dead letter by hand (`pantheon dead discard HANDOFF_ID --reason TEXT`).
    DiscardDead { handoff_id: HandoffId, reason: String } => discard_dead,
    /// Dispatches a failed, stalled or completed workflow again from a step (`pantheon rerun WF
    /// --from STEP`; an edited context is the CLI's `--context FILE` only).
    Rerun {
        workflow_id: WorkflowId,
        step: StepId,
        /// A fork from the replay: the moment (RFC 3339) whose context bag the rerun starts from
        /// (`pantheon rerun WF --from STEP --as-of TS`).
        as_of: Option<String>,
    } => rerun,
    /// Asks the bridge to try a waiting outbox record again now (`pantheon bridge retry ID`).
    OutboxRetry { outbox_id: String } => outbox_retry,
    /// Dead-letters a waiting outbox record with a reason (`pantheon bridge discard ID --reason`).
    OutboxDiscard { outbox_id: String, reason: String } => outbox_discard,
    /// Pauses a god, a workflow or a track (`pantheon pause`), with a reason.
    Pause { target: crate::engine::PauseTarget, reason: String } => pause,
    /// Ends a pause (`pantheon resume`).
    Resume { target: crate::engine::PauseTarget } => resume,
    /// Sends an answer to a foreign source's waiting item (`pantheon sources answer`).
    AnswerSource {
        /// The source, `KIND:LOCATION`.
        source: String,
        /// The item's stable key.
        key: String,
        /// The answer.
        text: String,
    } => answer,
    /// Mints a pair of approval links to a held dispatch (`pantheon approve HOF --link`); the
    /// approve URL goes to the clipboard.
    Link { handoff_id: HandoffId } => link,
    /// The same action on every marked record (see `marks`): one engine call each, in order.
    Bulk {
        items: Vec<BulkItem>,
        /// Marked records the action does not apply to, with why (reported, never called).
        skipped: Vec<Skipped>,
    } => bulk,
}

/// Starts the operator action the operator asked for from the selection: its module's `start`
/// (its menu, prompt or confirmation; a cleanup asks the engine's dry run first).
pub(crate) fn start(app: &mut App, action: OperatorAction) -> Vec<Effect> {
    match action {
        OperatorAction::Ack(choice) => ack::start(app, choice),
        OperatorAction::Approve => approve::start(app),
        OperatorAction::RejectHeld => reject_held::start(app),
        OperatorAction::Abort => abort::start(app),
        OperatorAction::Cleanup => cleanup::start(app),
        OperatorAction::ForceUnlock => force_unlock::start(app),
        OperatorAction::OutboxRetry => outbox_retry::start(app),
        OperatorAction::OutboxDiscard => outbox_discard::start(app),
        OperatorAction::BoardAdvance => board_advance::start(app, false),
        OperatorAction::BoardForceAdvance => board_advance::start(app, true),
        OperatorAction::BoardNextRound => board_round::start(app),
        OperatorAction::BoardResolve => board_resolve::start(app),
        OperatorAction::Requeue => requeue::start(app),
        OperatorAction::DiscardDead => discard_dead::start(app),
        OperatorAction::Rerun => rerun::start(app),
        OperatorAction::Pause => pause::start(app, false),
        OperatorAction::Resume => pause::start(app, true),
        OperatorAction::Answer => answer::start(app),
        OperatorAction::Link => link::start(app),
    }
}

impl Op {
    /// A short title for dialogs and flash messages.
    pub fn title(&self) -> String {
        self.act(|a| a.title())
    }

    /// The button that confirms it.
    pub fn verb(&self) -> &'static str {
        self.act(|a| a.verb())
    }

    /// Destructive operations are drawn in red.
    pub fn is_destructive(&self) -> bool {
        self.act(|a| a.is_destructive())
    }

    /// The lines of its confirmation dialog.
    pub fn describe(&self, snap: &Snapshot, now: DateTime<Utc>) -> Vec<(Tone, String)> {
        let mut out = Vec::new();
        self.act(|a| a.describe(&mut out, snap, now));
        out
    }

    /// See [`Act::described_from_snapshot`].
    pub fn described_from_snapshot(&self) -> bool {
        self.act(|a| a.described_from_snapshot())
    }

    /// Adds the version of the records it acts on to `v`.
    pub fn version(&self, v: &mut Version, snap: &Snapshot) {
        self.act(|a| a.version(v, snap))
    }

    /// The short name of the record it is for.
    pub fn subject(&self) -> String {
        self.act(|a| a.subject())
    }

    /// Its past tense, for a bulk report.
    pub fn done_word(&self) -> &'static str {
        self.act(|a| a.done_word())
    }

    /// The words it says the same for every marked record.
    pub fn words(&self) -> Option<String> {
        self.act(|a| a.words())
    }

    /// It is the same action on several marked records.
    pub fn is_bulk(&self) -> bool {
        self.act(|a| a.is_bulk())
    }

    /// After the engine answered (see [`Act::finished`]).
    pub(crate) fn finished(&self, app: &mut App, outcome: &Outcome) -> Vec<Effect> {
        self.act(|a| a.finished(app, outcome))
    }

    /// It made for `mark` (see [`Act::mark`]).
    pub(crate) fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        self.act(|a| a.mark(fan, mark))
    }

    /// Its one engine call.
    pub(crate) fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        self.act(|a| a.execute(engine))
    }
}

/// With marks (and no detail open), selects the first marked row `fits` accepts, so the action's
/// prompts are asked about a record it applies to; false (with a flash) when none does.
pub(crate) fn marks_fit(app: &mut App, fits: &dyn Fn(&App, &RowKey) -> bool, what: &str) -> bool {
    let st = app.pane_state();
    st.picked.is_empty() || st.detail || crate::console::marks::select_first_mark(app, fits, what)
}

/// A confirmation line.
pub(crate) fn line(t: Tone, s: impl Into<String>) -> (Tone, String) {
    (t, s.into())
}

/// Where `Enter` on a budget warning lands (the attention list asks).
pub(crate) use approve::budget_hold_row;
