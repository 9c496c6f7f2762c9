//! Reaction rules (`conductor/rules/*.yaml`, docs/PROTOCOL.md §2.3): loading and matching a handoff event.
//! Files are read in name order, rules in file order; the first match wins. A file or rule that does
//! not load is reported, never silently dropped.

use crate::error::Refusal;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::definition::{LoadError, config_files};
use crate::store::read::{kind, read_yaml};
use crate::store::{Root, is_valid_name};

/// One rule: when an event matches `when`, do `then`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// The rule's id (from the file, or the file name).
    pub id: String,
    /// The file it came from.
    pub file: PathBuf,
    /// The conditions, as written (shown by `list_rules`).
    pub when: Map<String, Value>,
    /// The action, as written (shown by `list_rules`).
    pub then: Map<String, Value>,
    /// The action parsed from `then`; rules with an action this engine does not know fail to load.
    #[serde(skip)]
    pub action: RuleAction,
}

/// What a matching rule does, parsed from `then`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleAction {
    /// Make the workflow an instance of this definition.
    pub dispatch_workflow: Option<String>,
    /// With `dispatch_workflow`: the step to dispatch (default: the first).
    pub start_at_step: Option<String>,
    /// Dispatch to this god.
    pub dispatch_god: Option<String>,
    /// With `dispatch_god`: the step to dispatch (default: the handoff's routing step, else its step).
    pub step: Option<String>,
    /// Hold the dispatch in `_quarantine` until an operator approves it.
    pub approval_required: bool,
    /// Record only; dispatch nothing.
    pub log_only: bool,
    /// `ack_wait`, `max_deliveries` and `backoff` of the dispatches it makes (docs/PROTOCOL.md §2.10).
    pub delivery: super::delivery::DeclaredPolicy,
}

impl RuleAction {
    fn from_then(then: &Map<String, Value>) -> Result<Self, Refusal> {
        let text = |k: &str| -> Result<Option<String>, Refusal> {
            match then.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if is_valid_name(s) => Ok(Some(s.clone())),
                Some(Value::String(s)) => Err(format!(
                    "then.{k} {s:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$"
                )
                .into()),
                Some(other) => {
                    Err(format!("then.{k} must be a string, found {}", kind(other)).into())
                }
            }
        };
        let flag = |k: &str| matches!(then.get(k), Some(Value::Bool(true)));
        let mode = then.get("handling_mode").and_then(Value::as_str);
        match mode {
            None | Some("approval_required" | "log_only" | "auto" | "normal" | "dispatch") => {}
            Some(other) => {
                return Err(format!(
                    "then.handling_mode {other:?} is not one of approval_required, log_only, auto"
                )
                .into());
            }
        }
        Ok(Self {
            dispatch_workflow: text("dispatch_workflow")?,
            start_at_step: text("start_at_step")?,
            dispatch_god: text("dispatch_god")?,
            step: text("step")?,
            approval_required: mode == Some("approval_required") || flag("approval_required"),
            log_only: mode == Some("log_only") || flag("log_only"),
            delivery: super::delivery::DeclaredPolicy::from_map(then)?,
        })
    }
}

impl Rule {
    /// True when every `when` condition holds for `event`.
    pub fn matches(&self, event: &Value) -> bool {
        self.when.iter().all(|(key, want)| {
            let field = if key == "event_type" {
                "type"
            } else {
                key.as_str()
            };
            let got = lookup(event, field);
            value_matches(want, got)
        })
    }
}

/// The event a handoff raises: `{type: "handoff.completed", source, target, workflow_id, step, context}`.
pub(crate) fn handoff_event(
    source: &str,
    target: &str,
    workflow_id: &str,
    step: &str,
    context: &Value,
) -> Value {
    serde_json::json!({
        "type": "handoff.completed",
        "source": source,
        "target": target,
        "workflow_id": workflow_id,
        "step": step,
        "context": context,
    })
}

/// Looks up `a.b.c` in a JSON value.
fn lookup<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    if let Some(direct) = v.get(dotted) {
        return Some(direct);
    }
    dotted.split('.').try_fold(v, |cur, k| cur.get(k))
}

fn value_matches(want: &Value, got: Option<&Value>) -> bool {
    match want {
        Value::Array(any) => any.iter().any(|w| value_matches(w, got)),
        Value::String(w) if w == "*" => true,
        Value::String(w) => {
            let Some(got) = got else { return false };
            let text = match got {
                Value::String(s) => s.clone(),
                Value::Array(items) => {
                    // A list field matches when any item does.
                    return items.iter().any(|i| value_matches(want, Some(i)));
                }
                other => other.to_string(),
            };
            if let Some(needle) = w.strip_prefix("contains ") {
                text.contains(needle)
            } else if w.contains('*') || w.contains('?') {
                glob_match(w.as_bytes(), text.as_bytes())
            } else {
                text == *w
            }
        }
        Value::Null => got.is_none_or(Value::is_null),
        other => got == Some(other),
    }
}

/// `*` matches any run of characters, `?` exactly one.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Loads the rules of one file.
pub fn load_rule_file(path: &Path) -> (Vec<Rule>, Vec<LoadError>) {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    let value = match read_yaml(path) {
        Ok(v) => v,
        Err(e) => return (Vec::new(), vec![err(e.to_string())]),
    };
    let list = match &value {
        Value::Object(m) => match m.get("rules") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => {
                return (
                    Vec::new(),
                    vec![err(format!(
                        "`rules` must be a list, found {}",
                        kind(other)
                    ))],
                );
            }
        },
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        other => {
            return (
                Vec::new(),
                vec![err(format!(
                    "expected `rules: [...]`, found {}",
                    kind(other)
                ))],
            );
        }
    };
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in list.iter().enumerate() {
        match parse_rule(item, path) {
            Ok(r) => rules.push(r),
            Err(e) => errors.push(err(format!("rules[{i}]: {e}"))),
        }
    }
    (rules, errors)
}

fn parse_rule(v: &Value, path: &Path) -> Result<Rule, Refusal> {
    let Value::Object(m) = v else {
        return Err(format!("a rule must be a mapping, found {}", kind(v)).into());
    };
    let id = match m.get("id") {
        Some(Value::String(s)) if is_valid_name(s) => s.clone(),
        Some(Value::String(s)) => {
            return Err(format!("id {s:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$").into());
        }
        _ => return Err("rule has no `id`".into()),
    };
    let when = match m.get("when") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(w)) => w.clone(),
        Some(other) => {
            return Err(format!(
                "rule {id:?}: `when` must be a mapping, found {}",
                kind(other)
            )
            .into());
        }
    };
    let then = match m.get("then") {
        Some(Value::Object(t)) => t.clone(),
        _ => return Err(format!("rule {id:?}: `then` must be a mapping").into()),
    };
    let action = RuleAction::from_then(&then).map_err(|e| format!("rule {id:?}: {e}"))?;
    if action.dispatch_workflow.is_none()
        && action.dispatch_god.is_none()
        && !action.approval_required
        && !action.log_only
    {
        return Err(format!(
            "rule {id:?}: `then` needs dispatch_workflow, dispatch_god, handling_mode: approval_required or log_only"
        ).into());
    }
    Ok(Rule {
        id,
        file: path.to_path_buf(),
        when,
        then,
        action,
    })
}

/// Loads every rule in `conductor/rules/`, in file-name order then file order.
pub(crate) fn load_rules(root: &Root) -> (Vec<Rule>, Vec<LoadError>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for path in config_files(&root.rules_dir()) {
        let (r, e) = load_rule_file(&path);
        rules.extend(r);
        errors.extend(e);
    }
    (rules, errors)
}

/// The first rule matching `event`.
pub(crate) fn first_match<'a>(rules: &'a [Rule], event: &Value) -> Option<&'a Rule> {
    rules.iter().find(|r| r.matches(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(when: Value) -> Rule {
        Rule {
            id: "r".into(),
            file: PathBuf::from("r.yaml"),
            when: when.as_object().unwrap().clone(),
            then: Map::new(),
            action: RuleAction::default(),
        }
    }

    #[test]
    fn when_values_match_exact_lists_globs_and_contains() {
        let ev = handoff_event(
            "thoth",
            "hephaestus",
            "wf_a",
            "research",
            &json!({"summary": "MCP report"}),
        );
        assert!(rule(json!({})).matches(&ev));
        assert!(rule(json!({"event_type": "handoff.completed", "source": "thoth"})).matches(&ev));
        assert!(!rule(json!({"source": "marvin"})).matches(&ev));
        assert!(rule(json!({"source": ["marvin", "thoth"]})).matches(&ev));
        assert!(rule(json!({"target": "heph*", "step": "res?arch"})).matches(&ev));
        assert!(rule(json!({"workflow_id": "*"})).matches(&ev));
        assert!(rule(json!({"context.summary": "contains MCP"})).matches(&ev));
        assert!(!rule(json!({"context.summary": "contains mcp"})).matches(&ev));
        assert!(!rule(json!({"priority": "high"})).matches(&ev));
    }

    #[test]
    fn glob() {
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*c", b"abbbc"));
        assert!(!glob_match(b"a*c", b"abbb"));
        assert!(glob_match(b"wf_*_1?", b"wf_x_12"));
    }

    #[test]
    fn foreign_rules_load() {
        let root = Root::at(crate::conductor::model::tests::fixture());
        let (rules, errors) = load_rules(&root);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            rules[0].action.dispatch_workflow.as_deref(),
            Some("deploy-feature")
        );
        assert_eq!(rules[0].action.start_at_step.as_deref(), Some("architect"));
    }
}
