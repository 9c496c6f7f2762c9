//! A hold is the operator's alone (docs/PROTOCOL.md §2.5, docs/THREAT-MODEL.md).
//!
//! A workflow `awaiting_approval` waits for an operator's decision on the dispatch of its current
//! step. The state says so, not the dispatch file: a god can move its held dispatch out of
//! `_quarantine` into an inbox (and edit it), so every act that would move the workflow asks the
//! state through [`undecided`]. An approval or a rejection changes the state's status in the same
//! write that records the decision, so a state still `awaiting_approval` has no decision recorded for
//! the dispatch it holds. While it is so, no ack of a dispatch of that step is taken (wherever the file
//! lies), no new handoff is recorded, and the supervisor neither redelivers nor dead-letters such a
//! dispatch; `validate`, `check` and the console name a dispatch of a held step found in an inbox
//! ([`held_dispatches_moved`]).

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use super::files::{self, god_dirs, read_dispatch_dir};
use super::model::{RouteStatus, WorkflowState, WorkflowStatus};
use crate::error::Error;
use crate::store::{Root, WorkflowId};

/// The hold a state keeps on its workflow, read from the state alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undecided<'a> {
    /// The held step.
    pub step: &'a str,
    /// The god the held dispatch is addressed to.
    pub god: Option<&'a str>,
    /// The handoff whose dispatch is held (the one that routed to the step), when the state names it.
    pub handoff_id: Option<&'a str>,
    /// Why it is held, as the routing recorded it (a budget held on a reroute records none).
    pub because: Option<&'a str>,
}

/// The hold `st` keeps: some when the workflow awaits an operator's decision at its current step.
pub(crate) fn undecided(st: &WorkflowState) -> Option<Undecided<'_>> {
    if st.status != WorkflowStatus::AwaitingApproval {
        return None;
    }
    let step = st.current_step.as_deref()?;
    // The handoff that dispatched the current step: the newest step record routed to it.
    let routed_here = st.step_history.iter().rev().find(|r| {
        r.routed
            .as_ref()
            .is_some_and(|x| x.target_step.as_deref() == Some(step))
    });
    let because = routed_here
        .and_then(|r| r.routed.as_ref())
        .filter(|x| x.status == RouteStatus::AwaitingApproval)
        .and_then(|x| x.held_because.as_deref());
    Some(Undecided {
        step,
        god: st.dispatched_to.as_deref(),
        handoff_id: routed_here.and_then(|r| r.handoff_id.as_deref()),
        because,
    })
}

/// True when an act on a dispatch of `step` would release the hold `st` keeps.
pub(crate) fn holds_step(st: &WorkflowState, step: &str) -> bool {
    undecided(st).is_some_and(|h| h.step == step)
}

/// The refusal of `act` (`an ack of handoff X`, `a new handoff`) while `st` holds workflow `wf`;
/// `acted_on`: the handoff of the dispatch acted on (named when the state does not name the held
/// one); `found`: where that dispatch lies, when that is not `_quarantine`.
pub(crate) fn refusal(
    wf: &WorkflowId,
    st: &WorkflowState,
    act: &str,
    acted_on: Option<&str>,
    found: Option<&std::path::Path>,
) -> Error {
    let Some(h) = undecided(st) else {
        return Error::refused(format!("{act} is refused: workflow {wf} is held"));
    };
    let hid = h.handoff_id.or(acted_on).unwrap_or("HANDOFF_ID");
    let because = h
        .because
        .map(|b| format!(" Held because: {}.", clean(b)))
        .unwrap_or_default();
    let whose = h.god.map(|g| format!(" to {g}")).unwrap_or_default();
    let place = found
        .map(|p| {
            format!(
                " Its file lies in {}, moved out of conductor/pending/_quarantine/ by hand: moving it does not release it.",
                p.display()
            )
        })
        .unwrap_or_default();
    Error::refused(format!(
        "{act} is refused: workflow {wf} is held for an operator's decision at step {:?} \
         (handoff {hid}{whose}); only an operator releases a hold: `pantheon approve {hid}` \
         (or `pantheon approve {hid} --reject --reason TEXT`).{because}{place}",
        h.step
    ))
}

/// A reason written into the state shown in one line: control characters dropped, cut to 300
/// characters.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(300).collect()
}

/// A dispatch of a held step found in a god's inbox: moved out of `_quarantine` by hand (or written
/// there by something other than the engine). Nothing acts on it until an operator decides the hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MovedHold {
    /// The held workflow.
    pub workflow_id: String,
    /// The held step.
    pub step: String,
    /// The god whose inbox the file lies in.
    pub god: String,
    /// The handoff id the file names.
    pub handoff_id: String,
    /// The file.
    pub path: PathBuf,
}

impl MovedHold {
    /// `held dispatch moved by hand: …`, for `validate`, `check` and the console.
    pub fn text(&self) -> String {
        format!(
            "held dispatch moved by hand: {} of workflow {} (step {:?}) lies in {}'s inbox while the \
             workflow awaits an operator's decision; acks of it are refused until `pantheon approve {}`",
            self.handoff_id, self.workflow_id, self.step, self.god, self.handoff_id
        )
    }
}

/// Every dispatch in a god's inbox whose workflow is held at that dispatch's step (see the module
/// docs). Reads each inbox and the state of each workflow an inbox dispatch names (bounded by the open
/// work, as `status` is); a state that cannot be read names nothing.
pub fn held_dispatches_moved(root: &Root) -> Vec<MovedHold> {
    let mut states: HashMap<String, Option<WorkflowState>> = HashMap::new();
    let mut out = Vec::new();
    for god in god_dirs(&root.pending_root()) {
        let (found, _) = read_dispatch_dir(&root.inbox_dir(&god));
        for (path, d) in found {
            let st = states.entry(d.workflow_id.clone()).or_insert_with(|| {
                WorkflowId::parse(&d.workflow_id)
                    .ok()
                    .and_then(|wf| files::load_state(root, &wf).ok().flatten())
            });
            if st.as_ref().is_some_and(|st| holds_step(st, &d.step)) {
                out.push(MovedHold {
                    workflow_id: d.workflow_id.clone(),
                    step: d.step.clone(),
                    god: god.to_string(),
                    handoff_id: d.handoff_id.clone(),
                    path,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conductor::model::{Routed, StepRecord};

    fn held() -> WorkflowState {
        WorkflowState {
            workflow_id: "wf_h".into(),
            status: WorkflowStatus::AwaitingApproval,
            current_step: Some("build".into()),
            dispatched_to: Some("hermes".into()),
            step_history: vec![StepRecord {
                step_id: "plan".into(),
                handoff_id: Some("hof_20261201_aaaaaa".into()),
                routed: Some(Routed {
                    status: RouteStatus::AwaitingApproval,
                    target_god: Some("hermes".into()),
                    target_step: Some("build".into()),
                    held_because: Some("step \"build\" requires approval".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn only_a_state_awaiting_approval_holds_and_only_its_current_step() {
        let st = held();
        let h = undecided(&st).unwrap();
        assert_eq!(h.step, "build");
        assert_eq!(h.handoff_id, Some("hof_20261201_aaaaaa"));
        assert_eq!(h.god, Some("hermes"));
        assert!(holds_step(&st, "build"));
        assert!(!holds_step(&st, "plan"));
        for s in [
            WorkflowStatus::WaitingForAck,
            WorkflowStatus::InProgress,
            WorkflowStatus::Failed,
        ] {
            let mut st = held();
            st.status = s.clone();
            assert!(undecided(&st).is_none(), "{s}");
        }
    }

    #[test]
    fn held_dispatches_moved_names_a_dispatch_of_a_held_step_in_an_inbox_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let c = crate::conductor::Conductor::new(Root::at(d.path()));
        c.init().unwrap();
        for e in std::fs::read_dir(c.root().rules_dir()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        std::fs::write(
            c.root().workflows_dir().join("gate.yaml"),
            "workflow:\n  id: gate\n  steps:\n    - id: plan\n      god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n",
        )
        .unwrap();
        let h = |hid: &str, wf: &str| {
            serde_json::json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth",
                "to_god": "hephaestus", "step": "plan", "routing": {"workflow_definition": "gate"},
                "context": {"summary": "s", "decisions": [], "artifacts": []}})
        };
        c.submit_handoff(&h("hof_20261206_ab0001", "wf_m1"))
            .unwrap();
        c.submit_handoff(&h("hof_20261206_ab0002", "wf_m2"))
            .unwrap();
        assert_eq!(
            held_dispatches_moved(c.root()),
            Vec::new(),
            "held in _quarantine"
        );
        let from = c.root().quarantine_dir().join("hof_20261206_ab0001.json");
        let to = c
            .root()
            .pending_root()
            .join("hephaestus/hof_20261206_ab0001.json");
        std::fs::rename(&from, &to).unwrap();
        assert_eq!(
            held_dispatches_moved(c.root()),
            vec![MovedHold {
                workflow_id: "wf_m1".into(),
                step: "build".into(),
                god: "hephaestus".into(),
                handoff_id: "hof_20261206_ab0001".into(),
                path: to,
            }]
        );
        // Approved where it lies: no longer held, no longer named.
        c.approve(
            &crate::store::HandoffId::parse("hof_20261206_ab0001").unwrap(),
            crate::conductor::Actor::Operator,
        )
        .unwrap();
        assert_eq!(held_dispatches_moved(c.root()), Vec::new());
    }

    #[test]
    fn the_refusal_names_the_hold_the_place_and_pantheon_approve() {
        let wf = WorkflowId::parse("wf_h").unwrap();
        let e = refusal(
            &wf,
            &held(),
            "an ack of handoff hof_20261201_aaaaaa",
            None,
            Some(std::path::Path::new("/r/conductor/pending/hermes/x.json")),
        )
        .to_string();
        for want in [
            "held for an operator's decision at step \"build\"",
            "requires approval",
            "moving it does not release it",
            "only an operator releases a hold: `pantheon approve hof_20261201_aaaaaa`",
            "/r/conductor/pending/hermes/x.json",
        ] {
            assert!(e.contains(want), "{want:?} in {e}");
        }
    }
}
