//! Whole dispatches as the MCP tools hand them out: the file's fields less what says nothing.
//!
//! A host pays for every JSON array and object in an answer, not only for its bytes: the official
//! Python client builds each one as a Python container, and CPython's collector runs whenever a
//! call leaves about 700 more of them alive than it found, moving everything alive to an older
//! generation and, every few dozen calls, walking the host's whole heap (40 ms in a small client).
//! A 100-dispatch page of a file-faithful answer held 906 containers, two in nine of them empty
//! lists; without them and the routing hint that only repeats `step`, 606 (docs/MCP.md, Figures).
//!
//! What is left out is only ever an empty list the engine writes for every dispatch, and
//! `routing.workflow_step` when it equals the dispatch's `step`; a foreign key is never touched,
//! even when empty, since it may mean something to the god.

use serde_json::Value;

/// The context lists every dispatch carries, written even when empty.
const STANDARD_LISTS: [&str; 5] = [
    "decisions",
    "artifacts",
    "open_questions",
    "gates_passed",
    "history",
];

/// Leaves out of one dispatch (as serialised) what carries nothing: see the module's text.
pub(crate) fn lean_dispatch(dispatch: &mut Value) {
    let Some(d) = dispatch.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(context)) = d.get_mut("context") {
        context.retain(|key, v| {
            !(STANDARD_LISTS.contains(&key.as_str()) && v.as_array().is_some_and(Vec::is_empty))
        });
    }
    let step = d.get("step").cloned();
    if let Some(Value::Object(routing)) = d.get_mut("routing") {
        if step.is_some() && routing.get("workflow_step") == step.as_ref() {
            routing.remove("workflow_step");
        }
        if routing.is_empty() {
            d.remove("routing");
        }
    }
}

/// [`lean_dispatch`] on every entry of an answer's `dispatches` array.
pub(crate) fn lean_dispatches(answer: &mut Value) {
    if let Some(Value::Array(list)) = answer.get_mut("dispatches") {
        list.iter_mut().for_each(lean_dispatch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_standard_lists_and_a_routing_that_repeats_the_step_are_left_out() {
        let mut d = json!({
            "step": "research",
            "context": {"summary": "s", "decisions": ["d"], "artifacts": [], "open_questions": [],
                        "gates_passed": [], "history": [], "payload": [], "extra": {}},
            "routing": {"workflow_step": "research"},
        });
        lean_dispatch(&mut d);
        assert_eq!(
            d,
            json!({"step": "research",
                   "context": {"summary": "s", "decisions": ["d"], "payload": [], "extra": {}}})
        );
    }

    #[test]
    fn routing_that_says_more_than_the_step_is_kept() {
        let mut d = json!({"step": "review", "context": {},
                           "routing": {"workflow_step": "research", "workflow_definition": "x"}});
        let before = d.clone();
        lean_dispatch(&mut d);
        assert_eq!(d, before);
        let mut d = json!({"step": "review", "context": {},
                           "routing": {"workflow_step": "review", "workflow_definition": "x"}});
        lean_dispatch(&mut d);
        assert_eq!(d["routing"], json!({"workflow_definition": "x"}));
    }

    #[test]
    fn what_is_not_a_dispatch_is_left_alone() {
        let mut v = json!(["not", "an", "object"]);
        lean_dispatch(&mut v);
        assert_eq!(v, json!(["not", "an", "object"]));
        let mut a = json!({"dispatches": [{"step": "s", "context": "text"}]});
        lean_dispatches(&mut a);
        assert_eq!(a, json!({"dispatches": [{"step": "s", "context": "text"}]}));
    }
}
