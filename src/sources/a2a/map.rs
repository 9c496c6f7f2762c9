//! From A2A's JSON (an agent card, tasks, stream events; 1.0's protobuf JSON and 0.3's) to the
//! sources' snapshot. Pure: no I/O, tolerant of every shape, bounded in what it keeps for display.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::wire::Dialect;
use crate::sources::{Agent, Attention, Message, Snapshot, Task};

/// The longest title, agent name or attention line kept (characters).
const SHORT: usize = 160;
/// The longest message body kept (characters).
const BODY: usize = 8 * 1024;
/// The most history messages mapped per task (the newest).
const HISTORY: usize = 50;

/// What the source needs from an agent card.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Card {
    pub name: String,
    pub rpc_url: String,
    pub dialect: Dialect,
    pub streaming: bool,
    pub raw: Value,
}

/// Reads a card: its name, the JSON-RPC endpoint and the protocol to speak there. A 1.0 card lists
/// `supportedInterfaces` (a JSON-RPC one of version 1.x is preferred, then one of 0.3); a 0.3 card
/// has `url` with `preferredTransport` (JSON-RPC when absent) or `additionalInterfaces`.
pub(crate) fn read_card(raw: Value, card_url: &str) -> Result<Card, String> {
    if !raw.is_object() {
        return Err(format!("the agent card at {card_url} is not a JSON object"));
    }
    let name = raw
        .get("name")
        .and_then(Value::as_str)
        .map(|s| clean_line(s, SHORT))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "a2a agent".to_owned());
    let streaming = raw
        .pointer("/capabilities/streaming")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (url, dialect) = endpoint(&raw).ok_or_else(|| {
        format!(
            "the agent card at {card_url} offers no JSON-RPC interface (only JSON-RPC is read): {}",
            offered(&raw)
        )
    })?;
    let rpc_url = absolute(&url, card_url)?;
    Ok(Card {
        name,
        rpc_url,
        dialect,
        streaming,
        raw,
    })
}

fn endpoint(card: &Value) -> Option<(String, Dialect)> {
    let interfaces = card.get("supportedInterfaces").and_then(Value::as_array);
    let jsonrpc = |i: &&Value| {
        i.get("protocolBinding")
            .and_then(Value::as_str)
            .is_some_and(|b| b.eq_ignore_ascii_case("JSONRPC"))
    };
    let with_version = |prefix: &str| {
        interfaces?.iter().filter(jsonrpc).find_map(|i| {
            let v = i
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("1.0");
            let url = i.get("url").and_then(Value::as_str)?;
            v.starts_with(prefix).then(|| url.to_owned())
        })
    };
    if let Some(url) = with_version("1") {
        return Some((url, Dialect::V1));
    }
    if let Some(url) = with_version("0.3") {
        return Some((url, Dialect::V03));
    }
    let preferred = card
        .get("preferredTransport")
        .and_then(Value::as_str)
        .unwrap_or("JSONRPC");
    if let Some(url) = card.get("url").and_then(Value::as_str)
        && preferred.eq_ignore_ascii_case("JSONRPC")
    {
        return Some((url.to_owned(), Dialect::V03));
    }
    card.get("additionalInterfaces")
        .and_then(Value::as_array)?
        .iter()
        .find(|i| {
            i.get("transport")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("JSONRPC"))
        })
        .and_then(|i| i.get("url").and_then(Value::as_str))
        .map(|u| (u.to_owned(), Dialect::V03))
}

fn offered(card: &Value) -> String {
    let mut names: Vec<String> = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("protocolBinding").and_then(Value::as_str))
        .map(|s| clean_line(s, 40))
        .collect();
    if let Some(t) = card.get("preferredTransport").and_then(Value::as_str) {
        names.push(clean_line(t, 40));
    }
    if names.is_empty() {
        "it names no interface".to_owned()
    } else {
        format!("it offers {}", names.join(", "))
    }
}

/// `url` made absolute against the card's URL; only http and https.
fn absolute(url: &str, card_url: &str) -> Result<String, String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(url.to_owned());
    }
    if url.starts_with('/') {
        return Ok(format!("{}{url}", origin(card_url)));
    }
    Err(format!(
        "the agent card at {card_url} names the endpoint {:?}: only http:// and https:// are spoken",
        clean_line(url, 80)
    ))
}

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// A task state as the operator reads it: `TASK_STATE_INPUT_REQUIRED` and `input-required` both
/// give `input-required`.
pub(crate) fn state_word(raw: &str) -> String {
    let lower = raw.to_ascii_lowercase();
    let word = lower.strip_prefix("task_state_").unwrap_or(&lower);
    clean_line(&word.replace('_', "-"), 40)
}

/// A task's id, when it has a usable one.
pub(crate) fn task_id(task: &Value) -> Option<&str> {
    task.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// A task's state word (`unknown` when it has none).
pub(crate) fn task_state(task: &Value) -> String {
    task.pointer("/status/state")
        .and_then(Value::as_str)
        .map_or_else(|| "unknown".to_owned(), state_word)
}

/// Whether a state waits for a human.
pub(crate) fn is_waiting(state: &str) -> bool {
    state == "input-required" || state == "auth-required"
}

/// Whether a state is one a task does not leave.
pub(crate) fn is_final(state: &str) -> bool {
    matches!(
        state,
        "completed" | "canceled" | "cancelled" | "failed" | "rejected"
    )
}

fn status_time(task: &Value) -> Option<DateTime<Utc>> {
    let s = task.pointer("/status/timestamp").and_then(Value::as_str)?;
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Whether `incoming` may replace `existing`: not when its status is older.
pub(crate) fn not_older(existing: &Value, incoming: &Value) -> bool {
    match (status_time(existing), status_time(incoming)) {
        (Some(a), Some(b)) => b >= a,
        _ => true,
    }
}

/// Folds one stream event (a 1.0 `StreamResponse` or a 0.3 result) into the known tasks; the id of
/// the task it touched.
pub(crate) fn apply_event(tasks: &mut BTreeMap<String, Value>, event: &Value) -> Option<String> {
    let kind = event.get("kind").and_then(Value::as_str);
    if let Some(task) = event
        .get("task")
        .or((kind == Some("task")).then_some(event))
    {
        let id = task_id(task)?.to_owned();
        let keep = tasks.get(&id).is_none_or(|old| not_older(old, task));
        if keep {
            tasks.insert(id.clone(), task.clone());
        }
        return Some(id);
    }
    if let Some(update) = event
        .get("statusUpdate")
        .or((kind == Some("status-update")).then_some(event))
    {
        let id = update.get("taskId").and_then(Value::as_str)?.to_owned();
        let status = update.get("status")?.clone();
        let task = tasks.entry(id.clone()).or_insert_with(|| {
            serde_json::json!({"id": id, "contextId": update.get("contextId").cloned().unwrap_or(Value::Null)})
        });
        if let Value::Object(map) = task {
            map.insert("status".into(), status);
        }
        return Some(id);
    }
    let update = event
        .get("artifactUpdate")
        .or((kind == Some("artifact-update")).then_some(event))?;
    let id = update.get("taskId").and_then(Value::as_str)?.to_owned();
    let artifact = update.get("artifact")?.clone();
    if let Some(Value::Object(map)) = tasks.get_mut(&id) {
        let list = map
            .entry("artifacts")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            let aid = artifact.get("artifactId").cloned();
            match list
                .iter_mut()
                .find(|a| aid.is_some() && a.get("artifactId") == aid.as_ref())
            {
                Some(old) => *old = artifact,
                None => list.push(artifact),
            }
        }
    }
    Some(id)
}

/// The text of a message's or an artifact's parts: text parts as they are, data parts as compact
/// JSON, files by name.
pub(crate) fn parts_text(parts: Option<&Value>) -> String {
    let mut out = String::new();
    for part in parts.and_then(Value::as_array).into_iter().flatten() {
        let piece = if let Some(t) = part.get("text").and_then(Value::as_str) {
            t.to_owned()
        } else if let Some(d) = part.get("data") {
            d.to_string()
        } else {
            let file = part.get("file").unwrap_or(part);
            let name = ["filename", "name", "url", "uri"]
                .iter()
                .find_map(|k| file.get(*k).and_then(Value::as_str))
                .unwrap_or("");
            format!("[file {name}]")
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&piece);
        if out.len() > BODY * 4 {
            break;
        }
    }
    out
}

/// One line for a terminal: controls become spaces, bidirectional controls are escaped, at most
/// `max` characters (`…` marks a cut).
pub(crate) fn clean_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(crate::text::escape_bidi(flat.trim()).into_owned(), max)
}

/// A body for a terminal: line breaks kept, other controls dropped, bidirectional controls
/// escaped, at most `max` characters.
fn clean_body(s: &str, max: usize) -> String {
    let kept: String = s
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    cut(crate::text::escape_bidi(&kept).into_owned(), max)
}

fn cut(s: String, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The attention key of a waiting task: its id, state and the moment it entered that state, so the
/// same wait gives the same key and a new wait a new one.
pub(crate) fn attention_key(task: &Value) -> Option<String> {
    let id = task_id(task)?;
    let stamp = task
        .pointer("/status/timestamp")
        .or_else(|| task.pointer("/status/message/messageId"))
        .and_then(Value::as_str)
        .unwrap_or("");
    // Control and bidirectional characters of the id escaped (`\u{1b}`), the rest as it is: a key
    // shows no control character, two ids stay two keys, and an ordinary id is answered as before.
    let id: String = id
        .chars()
        .map(|c| {
            if c.is_control() || crate::text::is_bidi_control(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    Some(format!(
        "{id}#{}@{}",
        task_state(task),
        clean_line(stamp, 64)
    ))
}

/// The snapshot of one agent: the agent, its tasks, their history and artifacts as messages, and
/// each waiting task as an answerable attention item.
pub(crate) fn snapshot<'a>(
    card: &Card,
    status: &str,
    tasks: impl Iterator<Item = &'a Value>,
) -> Snapshot {
    let agent = &card.name;
    let mut snap = Snapshot {
        agents: vec![Agent {
            name: agent.clone(),
            group: Some(agent.clone()),
            status: Some(status.to_owned()),
            raw: card.raw.clone(),
        }],
        ..Snapshot::default()
    };
    for task in tasks {
        let Some(id) = task_id(task) else { continue };
        let id = clean_line(id, SHORT);
        let state = task_state(task);
        snap.tasks.push(Task {
            id: id.clone(),
            group: Some(agent.clone()),
            title: title(task, &id),
            state: state.clone(),
            owner: Some(agent.clone()),
            raw: task.clone(),
        });
        messages(&mut snap.messages, agent, &id, task);
        if is_waiting(&state)
            && let Some(key) = attention_key(task)
        {
            let question = parts_text(task.pointer("/status/message/parts"));
            let what = if state == "auth-required" {
                format!(
                    "auth-required on task {id}: {question} (the answer goes to the agent as a message)"
                )
            } else {
                format!("input-required on task {id}: {question}")
            };
            snap.attention.push(Attention {
                key,
                agent: agent.clone(),
                what: clean_line(&what, SHORT * 2),
                since: status_time(task),
                answerable: true,
                raw: task.clone(),
            });
        }
    }
    snap
}

fn title(task: &Value, id: &str) -> String {
    let first_user = task
        .get("history")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|m| role(m) == "user")
        .map(|m| parts_text(m.get("parts")));
    match first_user {
        Some(t) if !t.trim().is_empty() => clean_line(&t, SHORT),
        _ => format!("task {id}"),
    }
}

fn role(message: &Value) -> String {
    let raw = message.get("role").and_then(Value::as_str).unwrap_or("");
    let lower = raw.to_ascii_lowercase();
    lower.strip_prefix("role_").unwrap_or(&lower).to_owned()
}

fn messages(out: &mut Vec<Message>, agent: &str, task_id: &str, task: &Value) {
    let history = task.get("history").and_then(Value::as_array);
    let history = history.map_or(&[][..], |h| &h[h.len().saturating_sub(HISTORY)..]);
    let status_message = task.pointer("/status/message");
    let status_id = status_message.and_then(|m| m.get("messageId"));
    let in_history = history
        .iter()
        .any(|m| status_id.is_some() && m.get("messageId") == status_id);
    let extra = status_message.filter(|_| !in_history);
    let dated = history
        .iter()
        .map(|m| (m, None))
        .chain(extra.map(|m| (m, status_time(task))));
    for (n, (m, at)) in dated.enumerate() {
        let from_user = role(m) == "user";
        let (from, to) = if from_user {
            ("client", agent)
        } else {
            (agent, "client")
        };
        let id = m
            .get("messageId")
            .and_then(Value::as_str)
            .map_or_else(|| format!("{task_id}/{n}"), |s| clean_line(s, SHORT));
        out.push(Message {
            id,
            group: Some(agent.to_owned()),
            from: from.to_owned(),
            to: vec![to.to_owned()],
            at,
            subject: Some(format!("task {task_id}")),
            body: clean_body(&parts_text(m.get("parts")), BODY),
            raw: m.clone(),
        });
    }
    for (n, a) in task
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = a.get("name").and_then(Value::as_str).unwrap_or("artifact");
        out.push(Message {
            id: a.get("artifactId").and_then(Value::as_str).map_or_else(
                || format!("{task_id}/artifact/{n}"),
                |s| clean_line(s, SHORT),
            ),
            group: Some(agent.to_owned()),
            from: agent.to_owned(),
            to: vec!["client".to_owned()],
            at: None,
            subject: Some(clean_line(&format!("task {task_id}: {name}"), SHORT)),
            body: clean_body(&parts_text(a.get("parts")), BODY),
            raw: a.clone(),
        });
        if n >= HISTORY {
            break;
        }
    }
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
