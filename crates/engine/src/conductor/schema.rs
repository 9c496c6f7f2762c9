//! JSON Schema validation of handoffs and acks (the `handoff` gate). The root's
//! `shared/handoffs/schema.json` is used when present (a user may tighten it); otherwise the built-in
//! schema, with a warning. Every violation is reported with its JSON pointer.

use std::path::PathBuf;
use std::time::SystemTime;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::error::{Error, Result, Violation};
use crate::store::Root;
use crate::store::read::read_json;

/// The schema `init` installs and the engine falls back to.
pub const BUILTIN_SCHEMA: &str = include_str!("schema.json");

/// Compiled validators for the contracts the engine receives.
pub struct Schemas {
    handoff: jsonschema::Validator,
    ack: jsonschema::Validator,
    /// Said on every result when the root has no schema file.
    pub warning: Option<String>,
}

/// What identifies a schema file's version on disk (to reuse compiled validators).
pub type SchemaKey = Option<(PathBuf, SystemTime, u64)>;

/// The key of the root's schema file now (`None`: no file).
pub fn schema_key(root: &Root) -> SchemaKey {
    let p = root.schema_path();
    let m = std::fs::metadata(&p).ok()?;
    Some((p, m.modified().ok()?, m.len()))
}

fn compile(doc: &Value, def: Option<&str>, origin: &str) -> Result<jsonschema::Validator> {
    let schema = match def {
        None => doc.clone(),
        Some(name) => {
            let mut d = doc.clone();
            if let Value::Object(m) = &mut d {
                m.remove("$ref");
                m.remove("required");
                m.remove("properties");
                m.remove("additionalProperties");
                m.remove("type");
                m.insert(
                    "allOf".into(),
                    serde_json::json!([{ "$ref": format!("#/$defs/{name}") }]),
                );
            }
            d
        }
    };
    jsonschema::validator_for(&schema).map_err(|e| {
        Error::refused(format!(
            "{origin} is not a usable JSON Schema: {e} (fix it, or delete it to use the built-in schema)"
        ))
    })
}

impl Schemas {
    /// Loads the root's schema, or the built-in one (with a warning) when the root has none.
    pub fn load(root: &Root) -> Result<Self> {
        let path = root.schema_path();
        let (doc, origin, warning) = match read_json(&path)? {
            Some(doc) => (doc, path.display().to_string(), None),
            None => (
                serde_json::from_str(BUILTIN_SCHEMA).expect("the built-in schema is valid JSON"),
                "the built-in schema".to_owned(),
                Some(format!(
                    "{} does not exist; validated with the built-in schema (run `pantheon init` to install it)",
                    path.display()
                )),
            ),
        };
        let handoff = compile(&doc, None, &origin)?;
        let has_ack = doc.pointer("/$defs/ack").is_some();
        let ack = if has_ack {
            compile(&doc, Some("ack"), &origin)?
        } else {
            let builtin: Value = serde_json::from_str(BUILTIN_SCHEMA).expect("valid");
            compile(&builtin, Some("ack"), "the built-in schema")?
        };
        Ok(Self {
            handoff,
            ack,
            warning,
        })
    }

    /// Every schema violation of a handoff.
    pub fn check_handoff(&self, v: &Value) -> Vec<Violation> {
        violations(&self.handoff, v)
    }

    /// Every schema violation of an ack.
    pub fn check_ack(&self, v: &Value) -> Vec<Violation> {
        violations(&self.ack, v)
    }
}

fn violations(validator: &jsonschema::Validator, v: &Value) -> Vec<Violation> {
    let mut out: Vec<Violation> = validator
        .iter_errors(v)
        .map(|e| {
            let mut pointer = e.instance_path().as_str().to_owned();
            if let ValidationErrorKind::Required { property } = e.kind()
                && let Some(p) = property.as_str()
            {
                pointer = format!("{pointer}/{p}");
            }
            // jsonschema abbreviates long enums ("or 2 other candidates"); say every allowed value.
            let message = match e.kind() {
                ValidationErrorKind::Enum { options } => match options.as_array() {
                    Some(all) => format!(
                        "{} is not one of {}",
                        e.instance(),
                        all.iter()
                            .map(Value::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None => e.to_string(),
                },
                _ => e.to_string(),
            };
            Violation { pointer, message }
        })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn builtin() -> Schemas {
        let dir = tempfile::tempdir().unwrap();
        Schemas::load(&Root::at(dir.path())).unwrap()
    }

    #[test]
    fn builtin_schema_accepts_the_seed_handoff_and_names_every_violation() {
        let s = builtin();
        assert!(s.warning.is_some());
        let good = json!({"handoff_id": "hof_20260614_abc123", "workflow_id": "wf_deploy_42",
            "from_god": "thoth", "to_god": "hephaestus", "step": "research",
            "context": {"summary": "s", "decisions": [], "artifacts": [], "extra_key": 1},
            "routing": {"workflow_definition": "deploy-feature", "priority": "normal"}});
        assert_eq!(s.check_handoff(&good), vec![]);
        let bad = json!({"handoff_id": "hof_1", "workflow_id": "wf_x", "from_god": "thoth",
            "to_god": "x", "step": "s", "context": {"summary": "s", "artifacts": []}, "surprise": 1});
        let v = s.check_handoff(&bad);
        let pointers: Vec<&str> = v.iter().map(|v| v.pointer.as_str()).collect();
        assert!(pointers.contains(&"/handoff_id"), "{v:?}");
        assert!(pointers.contains(&"/context/decisions"), "{v:?}");
        assert!(pointers.contains(&""), "{v:?}");
    }

    #[test]
    fn ack_schema_checks_status() {
        let s = builtin();
        let ok = json!({"ack_id": "ack_20260614_456", "handoff_id": "hof_20260614_abc123", "status": "accepted"});
        assert!(s.check_ack(&ok).is_empty());
        let bad = json!({"ack_id": "ack_20260614_456", "handoff_id": "hof_20260614_abc123", "status": "maybe"});
        assert_eq!(s.check_ack(&bad)[0].pointer, "/status");
    }
}
