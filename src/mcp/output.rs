//! The `outputSchema` of every tool: the JSON Schema its structured content fits.
//!
//! Hosts (and the official clients, which check results against it) learn the shape of each
//! result before calling. Each schema names the fields every result has, with their types;
//! objects stay open (`additionalProperties` is not restricted) because readers of protocol
//! results must tolerate new fields (docs/PROTOCOL.md §5), and the parts that come from files
//! other programs write (a dispatch's context, a message's payload, a rule's `when`) are only
//! typed as objects.
//!
//! Each answer has one shape, so a client's validator checks every value once: a field that can be
//! absent-or-null is typed `[T, "null"]`, never an `anyOf` of shapes. The one tool with two answer
//! shapes, `check_inbox` (whole dispatches, or `compact` ones), tags its answer with `compact` and
//! picks the shape with `if`/`then`/`else` on that tag: validators decide on the one `const` and
//! check the entries against one shape, where an `anyOf` made every compact entry first fail the
//! whole-dispatch shape. No `discriminator` or other vendor keyword: the official clients'
//! validators (Python `jsonschema`, TypeScript Ajv) compile every schema here.
//!
//! A refusal (`isError: true`) carries no structured content (see [`super::reply`]), so no client
//! checks it against these schemas.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

fn string() -> Value {
    json!({"type": "string"})
}

fn string_or_null() -> Value {
    json!({"type": ["string", "null"]})
}

fn integer() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn any_object() -> Value {
    json!({"type": "object"})
}

/// `schema` (an object schema) or `null`: the same checks when the value is an object.
fn or_null(mut schema: Value) -> Value {
    schema["type"] = json!(["object", "null"]);
    schema
}

fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

fn strings() -> Value {
    array(string())
}

/// An object with `required` fields (all present in every result) and `optional` ones.
fn object(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut properties = serde_json::Map::new();
    for (name, schema) in required.iter().chain(optional) {
        properties.insert((*name).to_string(), schema.clone());
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
    })
}

fn tool_schema(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("every output schema is built by `object`"),
    }
}

/// A file that could not be read, as listed in `errors`.
fn file_errors() -> Value {
    array(any_object())
}

/// A dispatch as stored in an inbox (the seed's fields; `context` is the workflow so far). The one
/// place its fields are declared: `check_inbox`, `get_dispatch` and any later answer that carries a
/// whole dispatch use this shape (a new optional field is one more line in the second list).
fn dispatch() -> Value {
    object(
        &[
            ("handoff_id", string()),
            ("workflow_id", string()),
            ("from_god", string()),
            ("to_god", string()),
            ("step", string()),
            ("context", any_object()),
            ("dispatch_id", string_or_null()),
            ("dispatched_at", string_or_null()),
            ("ack_status", string()),
        ],
        &[
            ("routing", any_object()),
            // The step's descriptive keys (`action`, `skill`, `output`, …) and carried keys left
            // out for size; the context's keys beyond the standard ones ride in `context`.
            ("step_def", any_object()),
            ("omitted", strings()),
            // The W3C trace context of the dispatch's span (docs/PROTOCOL.md §2.13).
            ("traceparent", string()),
        ],
    )
}

fn pending_entry() -> Value {
    object(
        &[
            ("dispatch_id", string_or_null()),
            ("handoff_id", string()),
            ("workflow_id", string()),
            ("from_god", string()),
            ("to_god", string()),
            ("step", string()),
            ("dispatched_at", string_or_null()),
            ("ack_status", string()),
        ],
        &[("held_because", string())],
    )
}

fn submit_result() -> Value {
    object(
        &[
            ("status", string()),
            ("workflow_id", string()),
            ("handoff_id", string()),
            ("target_god", string_or_null()),
            ("target_step", string_or_null()),
            ("state_status", string()),
            ("handoff_path", string()),
            ("dispatch_path", string_or_null()),
            ("warnings", strings()),
        ],
        &[("matched_rule", string())],
    )
}

pub(crate) fn submit_handoff() -> Arc<JsonObject> {
    tool_schema(submit_result())
}

/// The paging fields of a paged listing (`check_inbox`, `list_pending`).
fn paging() -> [(&'static str, Value); 2] {
    [
        ("limit", json!({"type": ["integer", "null"], "minimum": 1})),
        ("next_cursor", string_or_null()),
    ]
}

/// A dispatch in `check_inbox` with `compact: true`.
fn compact_dispatch() -> Value {
    object(
        &[
            ("dispatch_id", string_or_null()),
            ("handoff_id", string()),
            ("workflow_id", string()),
            ("from_god", string()),
            ("step", string()),
            (
                "age_secs",
                json!({"type": ["integer", "null"], "minimum": 0}),
            ),
            ("summary", string()),
        ],
        &[],
    )
}

/// An entry of a long listing, checked cheaply: every field of `shape` that each entry has is still
/// named (`required`, one keyword for the whole entry), but only the `typed` ones are described.
/// A client's validator (Python `jsonschema`) pays about the same for each described field of each
/// entry, whatever its type: with every field of a whole dispatch described, checking a 100-entry
/// inbox cost a Python host more than parsing it and more than the server took to answer. The
/// fields typed are the ones a god acts on (the id it acks by, the context it works from); the
/// others are the strings the engine itself writes.
fn listed(shape: Value, typed: &[&str]) -> Value {
    let mut entry = shape;
    if let Some(Value::Object(properties)) = entry.get_mut("properties") {
        properties.retain(|name, _| typed.contains(&name.as_str()));
    }
    entry
}

/// `check_inbox`: one shape for whole dispatches, one for `compact` ones, chosen by the answer's
/// `compact` tag. Entries are [`listed`]: every field required, the ones a god acts on typed.
pub(crate) fn check_inbox() -> Arc<JsonObject> {
    let [limit, next_cursor] = paging();
    let mut schema = object(
        &[
            ("god", string()),
            ("known_god", boolean()),
            ("compact", boolean()),
            ("dispatches", json!({"type": "array"})),
            ("count", integer()),
            limit,
            next_cursor,
            ("errors", file_errors()),
        ],
        &[(
            "paused",
            object(
                &[
                    ("what", string()),
                    ("since", string()),
                    ("reason", string()),
                    ("by", string()),
                    ("note", string()),
                ],
                &[("until", json!({"type": ["string", "null"]}))],
            ),
        )],
    );
    let entries = |shape: Value| json!({"properties": {"dispatches": array(shape)}});
    schema["if"] = json!({"properties": {"compact": {"const": true}}});
    schema["then"] = entries(listed(compact_dispatch(), &["handoff_id"]));
    schema["else"] = entries(listed(dispatch(), &["handoff_id", "context"]));
    tool_schema(schema)
}

pub(crate) fn get_dispatch() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("god", string()),
            ("dispatch", dispatch()),
            ("path", string()),
        ],
        &[],
    ))
}

pub(crate) fn ack_handoff() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("acknowledged", boolean()),
            ("handoff_id", string()),
            ("ack_id", string()),
            ("workflow_id", string()),
            ("status", string()),
            ("state_status", string()),
            ("god", string()),
            ("by", string()),
            ("duplicate", boolean()),
            ("deadline", string_or_null()),
            ("deadline_kind", string_or_null()),
            ("warnings", strings()),
        ],
        &[("rerouted_to", string()), ("next", submit_result())],
    ))
}

pub(crate) fn get_workflow_state() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("workflow_id", string()),
            ("status", string()),
            ("context_bag", any_object()),
            ("step_history", array(any_object())),
            ("acks", array(any_object())),
        ],
        &[
            ("definition_id", string_or_null()),
            ("current_step", string_or_null()),
            ("dispatched_to", string_or_null()),
            ("created", string_or_null()),
            ("updated", string_or_null()),
        ],
    ))
}

pub(crate) fn list_pending() -> Arc<JsonObject> {
    let [limit, next_cursor] = paging();
    tool_schema(object(
        &[
            (
                "pending",
                json!({"type": "object", "additionalProperties": array(pending_entry())}),
            ),
            ("count", integer()),
            limit,
            next_cursor,
            ("awaiting_approval", array(pending_entry())),
            ("errors", file_errors()),
        ],
        &[],
    ))
}

pub(crate) fn list_rules() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("rules", strings()),
            ("count", integer()),
            (
                "details",
                array(object(
                    &[
                        ("id", string()),
                        ("file", string()),
                        ("when", any_object()),
                        ("then", any_object()),
                    ],
                    &[],
                )),
            ),
            ("errors", file_errors()),
        ],
        &[],
    ))
}

pub(crate) fn list_workflows() -> Arc<JsonObject> {
    let step = object(
        &[
            ("id", string()),
            ("god", string()),
            ("gates", strings()),
            ("timeout", string_or_null()),
            ("fallback_gods", strings()),
            ("approval_required", boolean()),
        ],
        &[],
    );
    tool_schema(object(
        &[
            (
                "workflows",
                array(object(
                    &[
                        ("id", string()),
                        ("name", string()),
                        ("version", string_or_null()),
                        ("description", string_or_null()),
                        ("steps", array(step)),
                        ("path", string()),
                    ],
                    &[],
                )),
            ),
            ("count", integer()),
            ("errors", file_errors()),
        ],
        &[],
    ))
}

fn path_and_reason() -> Value {
    object(&[("path", string()), ("reason", string())], &[])
}

pub(crate) fn abort_workflow() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("status", string()),
            ("workflow_id", string()),
            ("artifacts_marked", strings()),
            ("artifacts_skipped", array(path_and_reason())),
            ("manifest_path", string()),
            ("dispatches_withdrawn", strings()),
            ("duplicate", boolean()),
        ],
        &[],
    ))
}

pub(crate) fn approve_dispatch() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("status", string()),
            ("handoff_id", string()),
            ("workflow_id", string()),
            ("target_god", string()),
            ("target_step", string()),
            ("state_status", string()),
            ("dispatch_path", string()),
            ("by", string()),
            ("duplicate", boolean()),
        ],
        // An approval that leaves a budget reached says which, and that the next dispatch will be
        // held again.
        &[("budgets_reached", array(any_object())), ("note", string())],
    ))
}

pub(crate) fn requeue_dead_letter() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("status", string()),
            ("handoff_id", string()),
            ("workflow_id", string()),
            ("to_god", string()),
            ("dispatch_path", string()),
            ("ack_deadline", string_or_null()),
        ],
        &[],
    ))
}

pub(crate) fn cleanup() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("status", string()),
            ("workflow_id", string()),
            ("missing", strings()),
            ("refused", array(path_and_reason())),
            ("dry_run", boolean()),
            ("warnings", strings()),
        ],
        // `deleted` answers a cleanup, `would_delete` a dry run (`status: "dry_run"`).
        &[("deleted", strings()), ("would_delete", strings())],
    ))
}

/// A bus message as written (`{id, type, source, timestamp, payload}`).
fn message() -> Value {
    object(
        &[
            ("id", string()),
            ("type", string()),
            ("source", string()),
            ("timestamp", string()),
            ("payload", any_object()),
        ],
        &[],
    )
}

pub(crate) fn post_message() -> Arc<JsonObject> {
    tool_schema(message())
}

pub(crate) fn read_messages() -> Arc<JsonObject> {
    // Messages read back come from any writer of the queue: only their envelope is an object.
    tool_schema(object(
        &[
            ("messages", array(any_object())),
            ("count", integer()),
            ("skipped", integer()),
            ("next_offset", integer()),
            ("next_cursor", string_or_null()),
        ],
        &[("oversized", array(any_object()))],
    ))
}

pub(crate) fn acquire_lock() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("filepath", string()),
            ("worker_id", string()),
            ("lock_type", string()),
            ("acquired_at", string()),
            ("expires_at", string()),
            ("renewed", boolean()),
            ("previous_holder", string_or_null()),
            ("message_id", string()),
        ],
        &[],
    ))
}

pub(crate) fn release_lock() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("filepath", string()),
            ("released_from", string_or_null()),
            ("forced_by", string_or_null()),
            ("message_id", string()),
            ("events", strings()),
        ],
        &[],
    ))
}

pub(crate) fn update_worker_status() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("worker_id", string()),
            ("stale", boolean()),
            ("last_seen", string_or_null()),
        ],
        &[
            ("task_id", string_or_null()),
            ("status", string_or_null()),
            ("progress_pct", json!({"type": ["number", "null"]})),
            ("current_subtask", string_or_null()),
            ("last_heartbeat", string_or_null()),
        ],
    ))
}

pub(crate) fn wait_for_event() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("pattern", string()),
            ("matched", boolean()),
            (
                "event",
                json!({"anyOf": [
                    object(&[("name", string())], &[("decoded", string()), ("content", string_or_null()), ("modified", string_or_null())]),
                    {"type": "null"}
                ]}),
            ),
            ("waited_ms", integer()),
        ],
        &[],
    ))
}

pub(crate) fn detect_deadlocks() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("deadlocked", boolean()),
            ("cycles", array(any_object())),
            ("waits", array(any_object())),
        ],
        &[],
    ))
}

/// A board session's header (`session.json`).
fn session() -> Value {
    object(
        &[
            ("session_id", string()),
            ("checkpoint", string()),
            ("status", string()),
            ("directors", strings()),
            ("phases", any_object()),
        ],
        &[
            ("started_at", string_or_null()),
            ("resolution", any_object()),
        ],
    )
}

pub(crate) fn board_status() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            // `null` until a board is opened on the track.
            ("session", or_null(session())),
            ("assessments", any_object()),
            ("discussion", array(any_object())),
            ("votes", any_object()),
            ("missing_assessments", strings()),
            ("missing_votes", strings()),
            ("can_advance", boolean()),
            ("next_status", string_or_null()),
            // The verdict the rule gives for what is on disk; `null` without a session.
            ("predicted", or_null(any_object())),
        ],
        &[],
    ))
}

pub(crate) fn board_open() -> Arc<JsonObject> {
    tool_schema(object(
        &[("session", session()), ("message_id", string())],
        &[("archived", json!({}))],
    ))
}

/// `board_assess`, `board_discuss`, `board_vote`, `board_next_round`: the act recorded.
pub(crate) fn board_write() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("session_id", string()),
            ("status", string()),
            ("phases", any_object()),
            ("message_id", string()),
            ("record", any_object()),
        ],
        &[],
    ))
}

pub(crate) fn board_advance() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("session_id", string()),
            ("from", string()),
            ("to", string()),
            ("forced", boolean()),
            ("phases", any_object()),
            ("message_id", string()),
        ],
        &[],
    ))
}

pub(crate) fn board_resolve() -> Arc<JsonObject> {
    tool_schema(object(
        &[
            ("session_id", string()),
            ("verdict", string()),
            ("vote_summary", any_object()),
            ("conditions", array(json!({}))),
            ("dissent", strings()),
            ("abstained", strings()),
            ("resolved_at", string()),
            ("message_id", string()),
            ("events", strings()),
        ],
        &[
            ("quick_review", boolean()),
            ("forced", boolean()),
            ("resolved_by", string()),
            ("resolution_md", string()),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles_and_refuses_a_result_missing_a_field() {
        let all = [
            submit_handoff(),
            check_inbox(),
            get_dispatch(),
            ack_handoff(),
            get_workflow_state(),
            list_pending(),
            list_rules(),
            list_workflows(),
            abort_workflow(),
            cleanup(),
            post_message(),
            read_messages(),
            acquire_lock(),
            release_lock(),
            update_worker_status(),
            wait_for_event(),
            detect_deadlocks(),
            board_status(),
            board_open(),
            board_write(),
            board_advance(),
            board_resolve(),
        ];
        for schema in all {
            let schema = Value::Object((*schema).clone());
            let v = jsonschema::validator_for(&schema).expect("compiles");
            assert!(
                !v.is_valid(&json!({})),
                "an empty object is refused: {schema}"
            );
        }
    }

    fn validator(schema: Arc<JsonObject>) -> jsonschema::Validator {
        jsonschema::validator_for(&Value::Object((*schema).clone())).expect("compiles")
    }

    #[test]
    fn check_inbox_entries_are_checked_against_the_shape_its_compact_tag_names() {
        let v = validator(check_inbox());
        let page = |compact: bool, entry: Value| {
            json!({"god": "marvin", "known_god": true, "compact": compact, "dispatches": [entry],
                   "count": 1, "limit": 20, "next_cursor": null, "errors": []})
        };
        let whole = json!({"handoff_id": "hof_20260614_000001", "workflow_id": "wf_a",
                           "from_god": "thoth", "to_god": "marvin", "step": "review",
                           "context": {"summary": "s"}, "dispatch_id": null,
                           "dispatched_at": "2026-06-14T10:00:00Z", "ack_status": "unacked"});
        let compact = json!({"dispatch_id": null, "handoff_id": "hof_20260614_000001",
                             "workflow_id": "wf_a", "from_god": "thoth", "step": "review",
                             "age_secs": 3, "summary": "s"});
        assert!(v.is_valid(&page(false, whole.clone())));
        assert!(v.is_valid(&page(true, compact.clone())));
        assert!(
            !v.is_valid(&page(false, compact)),
            "a compact entry in a whole page"
        );
        assert!(
            !v.is_valid(&page(true, whole.clone())),
            "a whole entry in a compact page"
        );
        // Every field is still required; the ones a god acts on are still typed.
        for (field, bad) in [
            ("step", None),
            ("ack_status", None),
            ("handoff_id", Some(json!(7))),
            ("context", Some(json!("s"))),
        ] {
            let mut entry = whole.clone();
            match bad {
                Some(value) => entry[field] = value,
                None => {
                    entry.as_object_mut().unwrap().remove(field);
                }
            }
            assert!(!v.is_valid(&page(false, entry)), "{field} wrong or missing");
        }
    }

    #[test]
    fn board_status_without_a_session_fits_and_a_wrong_session_does_not() {
        let v = validator(board_status());
        let status = |session: Value, predicted: Value| {
            json!({"session": session, "assessments": {}, "discussion": [], "votes": {},
                   "missing_assessments": [], "missing_votes": [], "can_advance": false,
                   "next_status": null, "predicted": predicted})
        };
        assert!(v.is_valid(&status(Value::Null, Value::Null)));
        assert!(!v.is_valid(&status(json!("none"), Value::Null)));
        assert!(
            !v.is_valid(&status(json!({"session_id": 5}), Value::Null)),
            "a session is still checked field by field"
        );
    }
}
