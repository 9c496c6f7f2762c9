//! What a bound principal may call (docs/MCP.md, "Identity"): each tool's right, and the identity a
//! god's call must carry. Unbound (stdio without `--as`, HTTP without `--credentials`) nothing is
//! checked here, as before credentials existed.
//!
//! A god acts only as itself: it submits handoffs `from_god` itself, posts as `source` itself,
//! locks and heartbeats as its own worker (`worker_id` its name, or its name and `-…`), reads its
//! own inbox (and those its credential's `inboxes` name), and aborts as itself. Approving a held
//! dispatch and requeueing a dead letter are an operator's alone: a god is refused them even when
//! its line lists the right. Acks are checked by
//! the engine under the workflow's lock: a god's ack goes in as `Actor::God(name)`, which the
//! Conductor refuses for a dispatch addressed to another god.

use serde_json::{Map, Value};

use crate::credentials::{Kind, Principal, Right};

/// The right a tool needs, if any (the read-only tools need none beyond a valid credential).
pub(crate) fn right_of(tool: &str) -> Option<Right> {
    Some(match tool {
        "submit_handoff" => Right::Submit,
        "ack_handoff" => Right::Ack,
        "check_inbox" | "get_dispatch" => Right::ReadInbox,
        "post_message" | "board_open" | "board_assess" | "board_discuss" | "board_next_round"
        | "board_vote" | "board_advance" | "board_resolve" => Right::Post,
        "acquire_lock" | "release_lock" | "update_worker_status" => Right::Lock,
        "abort_workflow" | "cleanup" => Right::Abort,
        "approve_dispatch" => Right::Approve,
        "requeue_dead_letter" => Right::Requeue,
        _ => return None,
    })
}

/// The rights only an operator exercises, whatever a god's line says: deciding a held dispatch and
/// requeueing a dead letter are a person's acts, never an agent's.
const OPERATOR_ONLY: [Right; 2] = [Right::Approve, Right::Requeue];

/// Why `principal` may not call `tool` with `args`, or `None` when it may.
pub(crate) fn refusal(
    principal: &Principal,
    tool: &str,
    args: Option<&Map<String, Value>>,
) -> Option<String> {
    let right = right_of(tool)?;
    let who = format!("{} {}", principal.kind, principal.name);
    if OPERATOR_ONLY.contains(&right) && principal.kind != Kind::Operator {
        return Some(format!(
            "refused: {tool} needs the right `{right}`, which only an operator's credential grants, \
             and {who} is not an operator; ask an operator (`pantheon credentials add NAME --operator`)"
        ));
    }
    if !principal.may(right) {
        return Some(format!(
            "refused: {tool} needs the right `{right}`, which the credential of {who} does not grant \
             (its rights: {}); ask the operator to add it to the credentials file",
            rights_list(principal)
        ));
    }
    let text = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_str);
    match right {
        Right::ReadInbox => {
            let god = text("god_name").unwrap_or_default();
            (!principal.may_read_inbox_of(god)).then(|| {
                format!(
                    "refused: the right `read_inbox` of {who} covers its own inbox, not {god:?}'s; \
                     the credentials file's `inboxes` can name others"
                )
            })
        }
        _ if principal.kind == Kind::Operator => None,
        Right::Submit => {
            let from = args
                .and_then(|a| a.get("handoff"))
                .and_then(|h| h.get("from_god"))
                .and_then(Value::as_str);
            as_itself(principal, right, "handoff.from_god", from)
        }
        Right::Post if tool == "post_message" => {
            as_itself(principal, right, "source", text("source"))
        }
        Right::Lock => {
            let worker = text("worker_id").unwrap_or_default();
            let own = worker == principal.name
                || worker
                    .strip_prefix(principal.name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'));
            (!own).then(|| {
                format!(
                    "refused: the right `lock` of {who} covers its own workers ({0} or {0}-…), not \
                     worker_id {worker:?}",
                    principal.name
                )
            })
        }
        Right::Abort => match text("by") {
            Some(by) if by != principal.name => as_itself(principal, right, "by", Some(by)),
            _ => None,
        },
        _ => None,
    }
}

/// A god's call that names another god where it must name itself.
fn as_itself(p: &Principal, right: Right, field: &str, given: Option<&str>) -> Option<String> {
    match given {
        Some(g) if g == p.name => None,
        _ => Some(format!(
            "refused: the right `{right}` of god {0} lets it act only as {0}, but {field} is {1}",
            p.name,
            given.map_or_else(|| "missing".to_owned(), |g| format!("{g:?}"))
        )),
    }
}

fn rights_list(p: &Principal) -> String {
    if p.rights.is_empty() {
        return "none".to_owned();
    }
    p.rights
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_god_acts_only_as_itself_and_a_refusal_names_the_right() {
        let hermes = Principal::god("hermes").unwrap();
        let ok = |tool: &str, a: Value| refusal(&hermes, tool, Some(&args(a)));
        assert_eq!(
            ok("submit_handoff", json!({"handoff": {"from_god": "hermes"}})),
            None
        );
        let e = ok("submit_handoff", json!({"handoff": {"from_god": "zeus"}})).unwrap();
        assert!(e.contains("`submit`") && e.contains("\"zeus\""), "{e}");
        assert!(
            ok("submit_handoff", json!({"handoff": {}}))
                .unwrap()
                .contains("missing")
        );
        assert_eq!(ok("post_message", json!({"source": "hermes"})), None);
        assert!(
            ok("post_message", json!({"source": "zeus"}))
                .unwrap()
                .contains("`post`")
        );
        assert_eq!(ok("acquire_lock", json!({"worker_id": "hermes-2"})), None);
        assert!(
            ok("acquire_lock", json!({"worker_id": "hermesx"}))
                .unwrap()
                .contains("`lock`")
        );
        assert_eq!(ok("check_inbox", json!({"god_name": "hermes"})), None);
        let e = ok("check_inbox", json!({"god_name": "athena"})).unwrap();
        assert!(e.contains("`read_inbox`"), "{e}");
        let e = ok(
            "abort_workflow",
            json!({"workflow_id": "wf_x", "reason": "r"}),
        )
        .unwrap();
        assert!(e.contains("needs the right `abort`"), "{e}");
        assert_eq!(ok("list_pending", json!({})), None);
        assert_eq!(ok("wait_for_event", json!({})), None);
        let e = ok("approve_dispatch", json!({"handoff_id": "hof_x"})).unwrap();
        assert!(e.contains("needs the right `approve`"), "{e}");
        let e = ok("requeue_dead_letter", json!({"handoff_id": "hof_x"})).unwrap();
        assert!(e.contains("needs the right `requeue`"), "{e}");
    }

    #[test]
    fn a_god_is_refused_the_operator_acts_even_when_its_line_lists_them() {
        let mut hermes = Principal::god("hermes").unwrap();
        hermes.rights.extend([Right::Approve, Right::Requeue]);
        for (tool, right) in [
            ("approve_dispatch", "approve"),
            ("requeue_dead_letter", "requeue"),
        ] {
            let e = refusal(&hermes, tool, Some(&args(json!({"handoff_id": "hof_x"})))).unwrap();
            assert!(
                e.contains(&format!("`{right}`")) && e.contains("only an operator"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_operator_reads_every_inbox_and_needs_its_rights() {
        let mut alice = Principal::god("alice").unwrap();
        alice.kind = Kind::Operator;
        alice.rights = Right::defaults(Kind::Operator);
        let ok = |tool: &str, a: Value| refusal(&alice, tool, Some(&args(a)));
        assert_eq!(ok("check_inbox", json!({"god_name": "athena"})), None);
        assert_eq!(ok("abort_workflow", json!({"by": "someone"})), None);
        assert_eq!(ok("approve_dispatch", json!({"handoff_id": "hof_x"})), None);
        assert_eq!(
            ok("requeue_dead_letter", json!({"handoff_id": "hof_x"})),
            None
        );
        let e = ok("submit_handoff", json!({"handoff": {"from_god": "alice"}})).unwrap();
        assert!(
            e.contains("needs the right `submit`") && e.contains("operator alice"),
            "{e}"
        );
    }
}
