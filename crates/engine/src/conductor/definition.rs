//! Workflow definitions (`conductor/workflows/*.yaml`, docs/PROTOCOL.md §2.4): loading, checking and lookup.
//! A file that does not load is reported as a [`LoadError`], never silently dropped; keys this engine
//! does not use (such as `loop:`) are kept in `extra`.

use crate::error::Refusal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use super::template::{PayloadTemplate, Template, TemplateError, line_of};
use crate::store::read::{kind, read_bytes, read_yaml};
use crate::store::time::parse_duration_checked;
use crate::store::{Root, is_valid_name};

/// A workflow definition.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDef {
    /// The definition's id (protocol name rules); handoffs and states name it in `definition_id`.
    pub id: String,
    /// A human title, shown in listings.
    pub name: String,
    /// The definition's version; a state pins the version it started with.
    pub version: Option<String>,
    /// A free-text description, shown in listings.
    pub description: Option<String>,
    /// The steps in order; the first one starts the workflow.
    pub steps: Vec<StepDef>,
    /// `context.required`: keys the starting handoff's `context` must carry (kept in the state).
    pub context_required: Vec<String>,
    /// `context.optional`: keys kept in the state when the starting handoff carries them.
    pub context_optional: Vec<String>,
    /// Problems that do not stop the definition from loading (a dangling `input_from`).
    pub warnings: Vec<String>,
    /// The file it was loaded from.
    pub path: PathBuf,
    /// Keys this engine does not use, kept for display.
    pub extra: Map<String, Value>,
}

/// One step of a workflow definition.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDef {
    /// The step's id, unique within the definition.
    pub id: String,
    /// The god that does the step (a validated god name).
    pub god: String,
    /// The skill the god is asked to use, passed through in the dispatch.
    pub skill: Option<String>,
    /// Gates that must appear in `context.gates_passed` of this step's handoff.
    pub gates: Vec<String>,
    /// How long the step may take once accepted; past it the console flags it overdue.
    pub timeout: Option<Duration>,
    /// `timeout` as written (`2h`).
    pub timeout_text: Option<String>,
    /// The step whose output this one reads; a dangling reference is a warning, not an error.
    pub input_from: Option<String>,
    /// Gods tried in order when a dispatch to this step is rejected.
    pub fallback_gods: Vec<String>,
    /// Dispatches to this step wait in `_quarantine` for an operator.
    pub approval_required: bool,
    /// Paths `cleanup` deletes (`{root}`, `{workflow_id}`, `~` expanded).
    pub temp_artifacts: Vec<String>,
    /// `type: nats_publish`: reaching the step writes an outbox record the bridge publishes.
    pub publish: Option<PublishDef>,
    /// `action: await_ack`: the step waits for the reply to the workflow's last publish.
    pub await_ack: bool,
    /// `action` as written: free text for the god (`triage`, `research`, …), carried into the
    /// dispatch; only `await_ack` means something to the engine.
    pub action: Option<String>,
    /// `ack_wait`, `max_deliveries` and `backoff` as declared (docs/PROTOCOL.md §2.10).
    pub delivery: super::delivery::DeclaredPolicy,
    /// Keys this engine does not use, kept for display.
    pub extra: Map<String, Value>,
}

/// The templates of a `nats_publish` step.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishDef {
    /// The NATS subject, checked at load (known placeholders only).
    pub subject: Template,
    /// The message text; absent: the workflow's last summary.
    pub message: Option<Template>,
    /// The JSON payload whose strings are templates; absent: an empty payload.
    pub payload: Option<PayloadTemplate>,
    /// The peer the record goes to (its transport and envelope are the bridge's `--peer`); absent:
    /// the subject's last token when it names a peer.
    pub peer: Option<String>,
}

/// The god a `nats_publish` step without one is recorded under: the bridge performs it.
pub(crate) const PUBLISH_GOD: &str = "bridge";

/// A definition or rule file that could not be loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadError {
    /// The file that failed.
    pub path: PathBuf,
    /// Why it failed, with the line when the parser gave one.
    pub message: String,
}

impl WorkflowDef {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepDef> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The index of the step with this id.
    pub(crate) fn step_index(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }

    /// The step after `id` (`None` after the last, or if `id` is unknown).
    pub fn next_step(&self, id: &str) -> Option<&StepDef> {
        self.step_index(id).and_then(|i| self.steps.get(i + 1))
    }

    /// Every `temp_artifacts` entry of every step, in order, without repeats.
    pub(crate) fn temp_artifacts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.steps {
            for t in &s.temp_artifacts {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
        }
        out
    }

    /// Parses a definition from its YAML/JSON value. `stem` (the file name without extension) is the id
    /// when the file does not give one. Returns every problem found.
    pub fn from_value(value: &Value, path: &Path) -> Result<Self, Refusal> {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let body = match value {
            Value::Object(m) => match m.get("workflow") {
                Some(Value::Object(inner)) => inner,
                Some(other) => {
                    return Err(
                        format!("`workflow:` must be a mapping, found {}", kind(other)).into(),
                    );
                }
                None => m,
            },
            other => return Err(format!("expected a mapping, found {}", kind(other)).into()),
        };
        let mut problems = Vec::new();
        let text = |k: &str| body.get(k).and_then(scalar_text);
        let id = text("id").unwrap_or(stem);
        if !is_valid_name(&id) {
            problems.push(format!(
                "id {id:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$"
            ));
        }
        let steps_value = body.get("steps");
        let mut steps = Vec::new();
        match steps_value {
            Some(Value::Array(items)) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    match StepDef::from_value(item) {
                        Ok(step) => {
                            if steps.iter().any(|s: &StepDef| s.id == step.id) {
                                problems.push(format!("steps[{i}]: step id {:?} repeats", step.id));
                            }
                            steps.push(step);
                        }
                        Err(e) => problems.push(format!("steps[{i}]: {e}")),
                    }
                }
            }
            Some(Value::Array(_)) => problems.push("`steps` is empty".into()),
            Some(other) => problems.push(format!("`steps` must be a list, found {}", kind(other))),
            None => problems.push("`steps` is missing".into()),
        }
        let mut warnings = Vec::new();
        for s in &steps {
            if let Some(from) = &s.input_from
                && !steps.iter().any(|o| &o.id == from)
            {
                warnings.push(format!(
                    "step {:?}: input_from {from:?} is not a step of this workflow (ignored)",
                    s.id
                ));
            }
        }
        let step_ids: Vec<String> = steps.iter().map(|s| s.id.clone()).collect();
        let ids: Vec<&str> = step_ids.iter().map(String::as_str).collect();
        let mut source: Option<String> = None;
        let mut at_line = |e: TemplateError| -> String {
            let text = source.get_or_insert_with(|| {
                read_bytes(path)
                    .ok()
                    .flatten()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            });
            match line_of(text, &e.placeholder) {
                Some(n) => format!("{}:{n}: {}", path.display(), e.message),
                None => e.message,
            }
        };
        for (i, item) in steps_value
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(step) = steps.get_mut(i) else { break };
            if step.id != item.get("id").and_then(scalar_text).unwrap_or_default() {
                continue;
            }
            if item.get("type").and_then(Value::as_str) == Some("nats_publish") {
                let field = |k: &str| item.get(k).filter(|v| !v.is_null());
                let subject = match field("subject").and_then(scalar_text) {
                    None => {
                        problems.push(format!(
                            "step {:?}: a nats_publish step needs a `subject`",
                            step.id
                        ));
                        continue;
                    }
                    Some(s) => match Template::parse(&s, &ids) {
                        Ok(t) => t,
                        Err(e) => {
                            problems.push(format!("step {:?}: subject: {}", step.id, at_line(e)));
                            continue;
                        }
                    },
                };
                if let Err(e) = super::subject::check_template_subject(&subject) {
                    problems.push(format!("step {:?}: subject: {e}", step.id));
                }
                let message = match field("message").and_then(scalar_text) {
                    None => None,
                    Some(m) => match Template::parse(&m, &ids) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            problems.push(format!("step {:?}: message: {}", step.id, at_line(e)));
                            None
                        }
                    },
                };
                let payload = match field("payload") {
                    None => None,
                    Some(p) => match PayloadTemplate::parse(p, &ids) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            problems.push(format!("step {:?}: payload: {}", step.id, at_line(e)));
                            None
                        }
                    },
                };
                let peer = match field("peer").and_then(scalar_text) {
                    None => None,
                    Some(p) if crate::store::is_valid_name(&p) => Some(p),
                    Some(p) => {
                        problems.push(format!(
                            "step {:?}: peer {p:?} is not a pantheon name",
                            step.id
                        ));
                        None
                    }
                };
                step.publish = Some(PublishDef {
                    subject,
                    message,
                    payload,
                    peer,
                });
            }
        }
        let (context_required, context_optional) = match body.get("context") {
            None | Some(Value::Null) => (Vec::new(), Vec::new()),
            Some(Value::Object(c)) => {
                let mut lists = (Vec::new(), Vec::new());
                for (key, into) in [("required", &mut lists.0), ("optional", &mut lists.1)] {
                    match string_list(c.get(key), &format!("context.{key}")) {
                        Ok(l) => {
                            for k in &l {
                                if !is_valid_name(k) {
                                    problems.push(format!(
                                        "context.{key}: {k:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$"
                                    ));
                                }
                            }
                            *into = l;
                        }
                        Err(e) => problems.push(e),
                    }
                }
                lists
            }
            Some(other) => {
                problems.push(format!(
                    "`context` must be a mapping, found {}",
                    kind(other)
                ));
                (Vec::new(), Vec::new())
            }
        };
        if !problems.is_empty() {
            return Err(problems.join("; ").into());
        }
        let known = ["id", "name", "version", "description", "steps", "context"];
        let extra = body
            .iter()
            .filter(|(k, _)| !known.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            name: text("name").unwrap_or_else(|| id.clone()),
            id,
            version: text("version"),
            description: text("description"),
            steps,
            context_required,
            context_optional,
            warnings,
            path: path.to_path_buf(),
            extra,
        })
    }
}

/// A YAML scalar as text (`version: 1.0` is a number to YAML, a string to us).
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn string_list(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| scalar_text(i).ok_or_else(|| format!("`{what}` items must be strings")))
            .collect(),
        Some(other) => scalar_text(other)
            .map(|s| vec![s])
            .ok_or_else(|| format!("`{what}` must be a list")),
    }
}

impl StepDef {
    /// The step's descriptive keys, carried into each dispatch to it so the god sees what the
    /// definition asks (docs/PROTOCOL.md §2.1 `step_def`): `action`, `skill`, `input_from` and every key
    /// this engine does not use (`output`, `description`, `prompt`, …), in that order. Keys the engine
    /// acts on (god, gates, timeouts, delivery, approval, publish templates) are not repeated.
    pub(crate) fn descriptive_keys(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in [
            ("action", &self.action),
            ("skill", &self.skill),
            ("input_from", &self.input_from),
        ] {
            if let Some(v) = v {
                out.insert(k.to_owned(), Value::String(v.clone()));
            }
        }
        for (k, v) in &self.extra {
            // A step's budget is the engine's (docs/BUDGETS.md), not the god's.
            if k == "budget" {
                continue;
            }
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
        out
    }

    fn from_value(v: &Value) -> Result<Self, Refusal> {
        let Value::Object(m) = v else {
            return Err(format!("a step must be a mapping, found {}", kind(v)).into());
        };
        let text = |k: &str| m.get(k).and_then(scalar_text);
        let id = text("id").ok_or("step has no `id`")?;
        let name_ok = |field: &str, value: &str| {
            if is_valid_name(value) {
                Ok::<(), Refusal>(())
            } else {
                Err(
                    format!("{field} {value:?} must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}$")
                        .into(),
                )
            }
        };
        name_ok("step id", &id)?;
        let publishes = m.get("type").and_then(Value::as_str) == Some("nats_publish");
        let god = match text("god") {
            Some(g) => g,
            None if publishes => PUBLISH_GOD.to_owned(),
            None => return Err(format!("step {id:?} has no `god`").into()),
        };
        name_ok("god", &god)?;
        // `action` is free text for the god (the origin's files say `triage`, `inject`,
        // `summarize`, …); `await_ack` is the one action the engine performs itself.
        let action = match m.get("action") {
            None | Some(Value::Null) => None,
            Some(v) => Some(scalar_text(v).ok_or_else(|| {
                format!(
                    "step {id:?}: action must be text (free text for the god, or await_ack), found {}",
                    kind(v)
                )
            })?),
        };
        let await_ack = action.as_deref() == Some("await_ack");
        if publishes && await_ack {
            return Err(format!(
                "step {id:?}: a nats_publish step cannot also be action: await_ack"
            )
            .into());
        }
        let fallback_gods = string_list(m.get("fallback_gods"), "fallback_gods")?;
        for g in &fallback_gods {
            name_ok("fallback god", g)?;
        }
        let timeout_text = text("timeout");
        let timeout = match &timeout_text {
            None => None,
            Some(t) => Some(
                parse_duration_checked("timeout", t).map_err(|e| format!("step {id:?}: {e}"))?,
            ),
        };
        // The origin's files spell it `operator_approval_required`; either one holds the step.
        let mut approval_required = false;
        for key in ["approval_required", "operator_approval_required"] {
            match m.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Bool(b)) => approval_required |= *b,
                Some(other) => {
                    return Err(format!(
                        "step {id:?}: {key} must be true or false, found {}",
                        kind(other)
                    )
                    .into());
                }
            }
        }
        let known = [
            "id",
            "god",
            "skill",
            "gates",
            "timeout",
            "input_from",
            "fallback_gods",
            "approval_required",
            "operator_approval_required",
            "temp_artifacts",
            "type",
            "action",
            "subject",
            "message",
            "payload",
            "ack_wait",
            "max_deliveries",
            "backoff",
        ];
        let temp_artifacts = string_list(m.get("temp_artifacts"), "temp_artifacts")?;
        for t in &temp_artifacts {
            if let Some(why) = crate::store::paths::protocol_temp_artifact(t) {
                return Err(format!(
                    "step {id:?}: temp_artifacts entry {t:?} is refused: {why}; list only scratch \
                     paths of the workflow (e.g. \"{{root}}/tmp/{{workflow_id}}/\")"
                )
                .into());
            }
        }
        Ok(Self {
            skill: text("skill"),
            gates: string_list(m.get("gates"), "gates")?,
            timeout,
            timeout_text,
            input_from: text("input_from"),
            fallback_gods,
            approval_required,
            temp_artifacts,
            publish: None,
            await_ack,
            action,
            delivery: super::delivery::DeclaredPolicy::from_map(m)
                .map_err(|e| format!("step {id:?}: {e}"))?,
            extra: m
                .iter()
                .filter(|(k, _)| !known.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            id,
            god,
        })
    }
}

/// The `*.yaml` / `*.yml` / `*.json` files of a directory, in name order (hidden files skipped).
pub(crate) fn config_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                !name.starts_with('.')
                    && (name.ends_with(".yaml")
                        || name.ends_with(".yml")
                        || name.ends_with(".json"))
            })
            .filter(|e| crate::store::read::entry_is(e, std::fs::FileType::is_file))
            .map(|e| e.path())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Loads one definition file.
pub fn load_definition_file(path: &Path) -> Result<WorkflowDef, LoadError> {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    let value = read_yaml(path).map_err(|e| err(e.to_string()))?;
    WorkflowDef::from_value(&value, path).map_err(|e| err(e.into()))
}

/// Loads every definition in `conductor/workflows/`. Broken files and repeated ids are reported in the
/// second list; the first file (in name order) with an id wins.
pub fn load_definitions(root: &Root) -> (Vec<WorkflowDef>, Vec<LoadError>) {
    let mut defs: Vec<WorkflowDef> = Vec::new();
    let mut errors = Vec::new();
    for path in config_files(&root.workflows_dir()) {
        match load_definition_file(&path) {
            Ok(def) => {
                if let Some(first) = defs.iter().find(|d| d.id == def.id) {
                    errors.push(LoadError {
                        path,
                        message: format!(
                            "workflow id {:?} is already defined by {}; this file is ignored",
                            def.id,
                            first.path.display()
                        ),
                    });
                } else {
                    defs.push(def);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    (defs, errors)
}

/// Finds the definition with this id (loading only what is needed: the file named after it first).
pub(crate) fn find_definition(root: &Root, id: &str) -> Result<Option<WorkflowDef>, LoadError> {
    if !is_valid_name(id) {
        return Ok(None);
    }
    let dir = root.workflows_dir();
    for ext in ["yaml", "yml", "json"] {
        let p = dir.join(format!("{id}.{ext}"));
        if p.is_file() {
            let def = load_definition_file(&p)?;
            if def.id == id {
                return Ok(Some(def));
            }
        }
    }
    let (defs, _) = load_definitions(root);
    Ok(defs.into_iter().find(|d| d.id == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_definitions_load_and_the_broken_one_is_reported() {
        let root = Root::at(crate::conductor::model::tests::fixture());
        let (defs, errors) = load_definitions(&root);
        assert_eq!(defs.len(), 1);
        let d = &defs[0];
        assert_eq!(d.id, "deploy-feature");
        assert_eq!(d.steps.len(), 4);
        assert!(d.step("review").unwrap().extra.contains_key("loop"));
        assert_eq!(
            d.step("architect").unwrap().timeout,
            Some(Duration::from_secs(7200))
        );
        assert_eq!(d.next_step("research").unwrap().id, "architect");
        assert!(d.next_step("review").is_none());
        assert_eq!(errors.len(), 1);
        assert!(errors[0].path.ends_with("broken.yaml"), "{errors:?}");
    }

    #[test]
    fn bare_mapping_is_accepted_and_bad_steps_are_named() {
        let p = Path::new("/x/bare.yaml");
        let v: Value = serde_yaml::from_str(
            "id: bare\nversion: 1.0\nsteps:\n  - {id: a, god: thoth, fallback_gods: [hermes], approval_required: true}\n",
        )
        .unwrap();
        let d = WorkflowDef::from_value(&v, p).unwrap();
        assert_eq!(d.version.as_deref(), Some("1.0"));
        assert!(d.steps[0].approval_required);
        assert_eq!(d.steps[0].fallback_gods, vec!["hermes"]);
        let bad: Value = serde_yaml::from_str(
            "steps:\n  - {id: a, god: ../x}\n  - {id: b, god: z, timeout: soon}\n",
        )
        .unwrap();
        let err = WorkflowDef::from_value(&bad, p).unwrap_err();
        assert!(
            err.to_string().contains("steps[0]") && err.to_string().contains("../x"),
            "{err}"
        );
        assert!(
            err.to_string().contains("steps[1]") && err.to_string().contains("soon"),
            "{err}"
        );
    }

    #[test]
    fn action_is_free_text_for_the_god_and_only_await_ack_means_something() {
        let p = Path::new("/x/origin.yaml");
        let v: Value = serde_yaml::from_str(
            "steps:\n  - {id: a, god: hermes, action: triage, skill: sort, output: items, loop: 2}\n  - {id: b, god: athena, action: update_sprint, input_from: a}\n  - {id: n, type: nats_publish, subject: p.b.in, operator_approval_required: true}\n  - {id: w, god: hermes, action: await_ack}\n",
        )
        .unwrap();
        let d = WorkflowDef::from_value(&v, p).unwrap();
        let a = d.step("a").unwrap();
        assert_eq!(a.action.as_deref(), Some("triage"));
        assert!(!a.await_ack);
        assert_eq!(
            Value::Object(a.descriptive_keys()),
            serde_json::json!({"action": "triage", "skill": "sort", "output": "items", "loop": 2})
        );
        assert_eq!(
            Value::Object(d.step("b").unwrap().descriptive_keys()),
            serde_json::json!({"action": "update_sprint", "input_from": "a"})
        );
        assert!(
            d.step("n").unwrap().approval_required,
            "the origin's spelling holds the publish"
        );
        assert!(d.step("w").unwrap().await_ack);
        let bad: Value =
            serde_yaml::from_str("steps:\n  - {id: a, god: hermes, action: [x]}\n").unwrap();
        let err = WorkflowDef::from_value(&bad, p).unwrap_err();
        assert!(err.to_string().contains("action must be text"), "{err}");
        let bad: Value = serde_yaml::from_str(
            "steps:\n  - {id: a, god: hermes, operator_approval_required: yes-please}\n",
        )
        .unwrap();
        let err = WorkflowDef::from_value(&bad, p).unwrap_err();
        assert!(
            err.to_string()
                .contains("operator_approval_required must be true or false"),
            "{err}"
        );
    }
}
