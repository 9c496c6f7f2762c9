//! Routing of one handoff (docs/PROTOCOL.md §2.3, 2.4): its definition's next step (gates checked,
//! a loop back, the completion target) or the first matching rule, else the god it proposes; the pure
//! decision a submit records.

use super::definition::{LoadError, WorkflowDef, find_definition};
use super::model::{Handoff, WorkflowState};
use super::rules::{first_match, handoff_event, load_rules};
use crate::error::{Error, Result, Violation};
use crate::store::Root;
use serde_json::Value;

/// Where a handoff goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// Dispatch `step` to `god`; `hold` names why it waits in `_quarantine`.
    Dispatch {
        god: String,
        step: String,
        hold: Option<String>,
    },
    /// The definition's last step is done.
    Complete,
    /// Nothing to route to (`log_only`).
    Record,
}

/// The routing decision for one handoff.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub target: Target,
    /// The definition the workflow is (now) an instance of.
    pub definition: Option<(String, Option<String>)>,
    pub rule: Option<String>,
    pub warnings: Vec<String>,
}

pub(super) fn definition(root: &Root, id: &str) -> Result<Option<WorkflowDef>> {
    find_definition(root, id).map_err(|LoadError { path, message }| Error::Corrupt {
        path,
        message: format!("workflow definition does not load: {message}"),
    })
}

fn check_gates(def: &WorkflowDef, h: &Handoff) -> Result<()> {
    let Some(step) = def.step(&h.step) else {
        return Ok(());
    };
    let missing: Vec<&String> = step
        .gates
        .iter()
        .filter(|g| !h.context.gates_passed.contains(g))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        format!("handoff for step {:?} of {:?} (gates)", h.step, def.id),
        missing
            .iter()
            .map(|g| Violation {
                pointer: "/context/gates_passed".into(),
                message: format!(
                    "gate {g:?} declared by step {:?} is not in context.gates_passed; pass it and list it",
                    h.step
                ),
            })
            .collect(),
    ))
}

fn dispatch_to_step(def: &WorkflowDef, step_id: &str, hold_rule: Option<String>) -> Result<Target> {
    let step = def
        .step(step_id)
        .ok_or_else(|| unknown_step(def, step_id, "step"))?;
    let hold = hold_rule.or_else(|| {
        step.approval_required
            .then(|| format!("step {:?} of {:?} requires approval", step.id, def.id))
    });
    Ok(Target::Dispatch {
        god: step.god.clone(),
        step: step.id.clone(),
        hold,
    })
}

/// Refuses a handoff that names a `nats_publish` step as the step it completed: only the engine
/// completes such a step, by writing its outbox record for the bridge. Accepting the handoff would
/// mark the message sent while nothing was published (and would step past an approval hold).
fn refuse_publish_step(def: &WorkflowDef, step: &str) -> Result<()> {
    if def.step(step).is_none_or(|s| s.publish.is_none()) {
        return Ok(());
    }
    Err(Error::refused(format!(
        "step {step:?} of {:?} is a nats_publish step: the engine completes it by publishing (an \
         outbox record the bridge sends), so a handoff cannot mark it done. To start {:?} at its \
         publish step, route a handoff of another step there with a rule: `then: {{dispatch_workflow: \
         {}, start_at_step: {step}}}` (docs/PROTOCOL.md 2.3); inside a running workflow, submit the \
         handoff of the step before it and the engine publishes [gate phase_detect]",
        def.id, def.id, def.id
    )))
}

fn unknown_step(def: &WorkflowDef, step: &str, what: &str) -> Error {
    Error::refused(format!(
        "{what} {step:?} is not a step of workflow definition {:?} (steps: {}) [gate phase_detect]",
        def.id,
        def.steps
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Decides where a handoff goes (docs/PROTOCOL.md §2.3). Reads definitions and rules; writes nothing.
pub(crate) fn route(root: &Root, h: &Handoff, state: Option<&WorkflowState>) -> Result<Route> {
    let routing = h.routing.clone().unwrap_or_default();
    let mut warnings = Vec::new();
    let named = routing.workflow_definition.clone();
    let inherited = state.and_then(|s| s.definition_id.clone());
    let def = match (&named, &inherited) {
        (Some(id), _) => {
            crate::store::ids::check_name("workflow_definition", id)?;
            Some(definition(root, id)?.ok_or_else(|| {
                Error::not_found(format!(
                    "routing.workflow_definition {id:?} is not in {} (pantheon workflows lists them)",
                    root.workflows_dir().display()
                ))
            })?)
        }
        (None, Some(id)) => match definition(root, id) {
            Ok(Some(d)) => Some(d),
            Ok(None) => {
                warnings.push(format!(
                    "the workflow's definition {id:?} is not in {}; routed by rules instead",
                    root.workflows_dir().display()
                ));
                None
            }
            Err(e) => return Err(e),
        },
        (None, None) => None,
    };
    if let Some(def) = def {
        if def.step(&h.step).is_none() {
            return Err(unknown_step(&def, &h.step, "step"));
        }
        refuse_publish_step(&def, &h.step)?;
        check_gates(&def, h)?;
        if let (Some(want), Some(have)) = (&routing.workflow_version, &def.version)
            && want != have
        {
            warnings.push(format!(
                "routing.workflow_version {want:?} differs from definition {:?} version {have:?}; the definition on disk is used",
                def.id
            ));
        }
        let target = match &routing.workflow_step {
            Some(s) => {
                if def.step(s).is_none() {
                    return Err(unknown_step(&def, s, "routing.workflow_step"));
                }
                dispatch_to_step(&def, s, None)?
            }
            None => match def.next_step(&h.step) {
                Some(next) => dispatch_to_step(&def, &next.id, None)?,
                None => Target::Complete,
            },
        };
        if let Target::Dispatch { god, step, .. } = &target
            && *god != h.to_god
        {
            warnings.push(format!(
                "to_god {:?} ignored: definition {:?} assigns step {step:?} to {god:?}",
                h.to_god, def.id
            ));
        }
        return Ok(Route {
            target,
            definition: Some((def.id.clone(), def.version.clone())),
            rule: None,
            warnings,
        });
    }
    // An inbound request of the bridge ends at its reply: the handoff back to the peer that sent it
    // (what a `completed` ack records) finishes the workflow; the bridge sends the reply. It is
    // never dispatched to a god named after the peer.
    if let Some(st) = state
        && inbound_peer(st) == Some(h.to_god.as_str())
    {
        return Ok(Route {
            target: Target::Complete,
            definition: None,
            rule: None,
            warnings,
        });
    }
    let (rules, errors) = load_rules(root);
    for e in &errors {
        warnings.push(format!(
            "rule file {} skipped: {}",
            e.path.display(),
            e.message
        ));
    }
    let context = serde_json::to_value(&h.context).unwrap_or(Value::Null);
    let event = handoff_event(&h.from_god, &h.to_god, &h.workflow_id, &h.step, &context);
    let direct_step = routing
        .workflow_step
        .clone()
        .unwrap_or_else(|| h.step.clone());
    if let Some(rule) = first_match(&rules, &event) {
        let a = &rule.action;
        let hold = a
            .approval_required
            .then(|| format!("rule {:?} requires approval", rule.id));
        let (target, definition) = if let Some(def_id) = &a.dispatch_workflow {
            let def = definition(root, def_id)?.ok_or_else(|| {
                Error::refused(format!(
                    "rule {:?} ({}) dispatches workflow {def_id:?}, which is not in {}; fix the rule or add the definition",
                    rule.id,
                    rule.file.display(),
                    root.workflows_dir().display()
                ))
            })?;
            if def.step(&h.step).is_some() {
                refuse_publish_step(&def, &h.step)?;
                check_gates(&def, h)?;
            }
            let start = match &a.start_at_step {
                Some(s) => {
                    if def.step(s).is_none() {
                        return Err(unknown_step(
                            &def,
                            s,
                            &format!("rule {:?} start_at_step", rule.id),
                        ));
                    }
                    s.clone()
                }
                None => def.steps[0].id.clone(),
            };
            let t = dispatch_to_step(&def, &start, hold)?;
            if let Target::Dispatch { god, step, .. } = &t
                && *god != h.to_god
            {
                warnings.push(format!(
                    "to_god {:?} ignored: rule {:?} starts {:?} at {step:?}, assigned to {god:?}",
                    h.to_god, rule.id, def.id
                ));
            }
            (t, Some((def.id.clone(), def.version.clone())))
        } else if let Some(god) = &a.dispatch_god {
            let step = a.step.clone().unwrap_or(direct_step);
            (
                Target::Dispatch {
                    god: god.clone(),
                    step,
                    hold,
                },
                None,
            )
        } else if a.log_only {
            (Target::Record, None)
        } else {
            (
                Target::Dispatch {
                    god: h.to_god.clone(),
                    step: direct_step,
                    hold,
                },
                None,
            )
        };
        return Ok(Route {
            target,
            definition,
            rule: Some(rule.id.clone()),
            warnings,
        });
    }
    Ok(Route {
        target: Target::Dispatch {
            god: h.to_god.clone(),
            step: direct_step,
            hold: None,
        },
        definition: None,
        rule: None,
        warnings,
    })
}

/// The key of a workflow's state that marks it as an inbound request of the bridge, from the peer
/// it names (`{"peer": "konan"}`).
pub(crate) const INBOUND_MARK: &str = "bridge_inbound";

/// The peer whose inbound request started this workflow, if the bridge marked it so: the handoff
/// back to that peer finishes the workflow ([`route`]).
pub(crate) fn inbound_peer(st: &WorkflowState) -> Option<&str> {
    st.extra
        .get(INBOUND_MARK)
        .and_then(|m| m.get("peer"))
        .and_then(Value::as_str)
}
