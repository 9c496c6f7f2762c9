//! JSON Schema validation of handoffs and acks (the `handoff` gate). The root's
//! `shared/handoffs/schema.json` is used when present (a user may tighten it); otherwise the built-in
//! schema, with a warning. Every violation is reported with its JSON pointer.

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::error::{Error, Result, Violation};
use crate::store::Root;
use crate::store::read::read_json;

/// The schema `init` installs and the engine falls back to.
pub(crate) const BUILTIN_SCHEMA: &str = include_str!("schema.json");

/// [`BUILTIN_SCHEMA`] parsed (a tested constant; a parse failure would be a build defect, reported as corrupt).
fn builtin_schema() -> Result<Value> {
    serde_json::from_str(BUILTIN_SCHEMA).map_err(|e| Error::Corrupt {
        path: std::path::PathBuf::from("schema.json (built in)"),
        message: e.to_string(),
    })
}

/// The `version` [`BUILTIN_SCHEMA`] declares.
pub(crate) const SCHEMA_VERSION: u64 = 6;

/// Every earlier schema text pantheon shipped, byte for byte, with its version (v1 had no `version`
/// field). `init` replaces a root's schema file only when it is exactly one of these.
pub(crate) const SHIPPED_SCHEMAS: [(u64, &str); 5] = [
    (1, include_str!("schema-v1.json")),
    (2, include_str!("schema-v2.json")),
    (3, include_str!("schema-v3.json")),
    (4, include_str!("schema-v4.json")),
    (5, include_str!("schema-v5.json")),
];

/// What a root's schema file is, compared with the schemas pantheon shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaFile {
    /// The schema this version ships.
    Current,
    /// An older schema we shipped, unedited: safe to upgrade.
    Shipped(u64),
    /// Anything else: a user's edit (or another tool's file); never touched.
    Edited,
}

/// Classifies the bytes of a root's schema file.
pub(crate) fn classify_schema(bytes: &[u8]) -> SchemaFile {
    if bytes == BUILTIN_SCHEMA.as_bytes() {
        return SchemaFile::Current;
    }
    SHIPPED_SCHEMAS
        .iter()
        .find(|(_, text)| text.as_bytes() == bytes)
        .map_or(SchemaFile::Edited, |(v, _)| SchemaFile::Shipped(*v))
}

/// Compiled validators for the contracts the engine receives.
pub(crate) struct Schemas {
    handoff: jsonschema::Validator,
    ack: jsonschema::Validator,
    /// Said on every result when the root has no schema file.
    pub warning: Option<String>,
    /// True when the schema declares `usage` on a handoff (version 5 on). An older schema refuses
    /// unknown top-level keys, so a handoff's `usage` is then checked by the engine's own rules
    /// ([`crate::cost::usage::parse`]) and the rest of the handoff by the root's schema.
    pub handoff_has_usage: bool,
    /// True when the schema declares `traceparent` on a handoff (version 6 on); an older schema's
    /// handoff is checked without it and the engine checks it ([`crate::trace::violation`]).
    pub handoff_has_traceparent: bool,
}

/// What identifies a schema file's version on disk (to reuse compiled validators): its device,
/// inode, size, mtime and ctime, from one `statx` (a file replaced by rename, or rewritten with the
/// same size and its mtime set back, is another version).
pub(crate) type SchemaKey = Option<crate::store::yaml::FileIdentity>;

/// The key of the root's schema file now (`None`: no file).
pub(crate) fn schema_key(root: &Root) -> SchemaKey {
    crate::store::yaml::FileIdentity::of(&root.schema_path())
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
    #[cfg(test)]
    pub(crate) fn load(root: &Root) -> Result<Self> {
        Self::compiled(root, read_json(&root.schema_path())?)
    }

    /// The root's schema file as it reads now (`None` when there is none): what [`Self::compiled`]
    /// compiles, and what a racy cache entry is compared with.
    pub(crate) fn read_source(root: &Root) -> Result<Option<Value>> {
        read_json(&root.schema_path())
    }

    /// [`Self::load`] of the document `read` (the root's schema file as read, `None`: the built-in).
    pub(crate) fn compiled(root: &Root, read: Option<Value>) -> Result<Self> {
        let path = root.schema_path();
        let (doc, origin, warning) = match read {
            Some(doc) => (doc, path.display().to_string(), None),
            None => (
                builtin_schema()?,
                "the built-in schema".to_owned(),
                Some(format!(
                    "{} does not exist; validated with the built-in schema (run `pantheon init` to install it)",
                    path.display()
                )),
            ),
        };
        let handoff = compile(&doc, None, &origin)?;
        let handoff_has_usage = doc.pointer("/$defs/handoff/properties/usage").is_some()
            || doc.pointer("/properties/usage").is_some();
        let handoff_has_traceparent = doc
            .pointer("/$defs/handoff/properties/traceparent")
            .is_some()
            || doc.pointer("/properties/traceparent").is_some();
        let has_ack = doc.pointer("/$defs/ack").is_some();
        let ack = if has_ack {
            compile(&doc, Some("ack"), &origin)?
        } else {
            let builtin = builtin_schema()?;
            compile(&builtin, Some("ack"), "the built-in schema")?
        };
        Ok(Self {
            handoff,
            ack,
            warning,
            handoff_has_usage,
            handoff_has_traceparent,
        })
    }

    /// Every schema violation of a handoff. A `usage` the schema does not declare (a root still on
    /// an older schema) is left to the engine's own check, so older roots take usage reports too.
    /// The same holds for `traceparent` on a schema older than version 6.
    pub(crate) fn check_handoff(&self, v: &Value) -> Vec<Violation> {
        let strip =
            |k: &str, declared: bool| !declared && v.as_object().is_some_and(|m| m.contains_key(k));
        let (usage, tp) = (
            strip("usage", self.handoff_has_usage),
            strip("traceparent", self.handoff_has_traceparent),
        );
        if (usage || tp)
            && let Some(m) = v.as_object()
        {
            let mut without = m.clone();
            if usage {
                without.remove("usage");
            }
            if tp {
                without.remove("traceparent");
            }
            return violations(&self.handoff, &Value::Object(without));
        }
        violations(&self.handoff, v)
    }

    /// Every schema violation of an ack.
    pub(crate) fn check_ack(&self, v: &Value) -> Vec<Violation> {
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
    use std::sync::Arc;

    fn builtin() -> Schemas {
        let dir = tempfile::tempdir().unwrap();
        Schemas::load(&Root::at(dir.path())).unwrap()
    }

    #[test]
    fn a_schema_rewritten_with_the_same_size_and_mtime_is_compiled_again_at_the_next_act() {
        // One process (a god's `pantheon mcp`) reuses its compiled schema while the file is the
        // same version; an operator's edit that keeps the size and sets the mtime back is another
        // version all the same (its inode and ctime differ), seen at the next submit.
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let c = crate::Conductor::new(root.clone());
        let text = crate::store::atomic::to_pretty_json(&builtin_schema().unwrap());
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let write = |bytes: &[u8]| {
            crate::store::atomic::write_atomic(&root, &root.schema_path(), bytes).unwrap();
            std::fs::File::options()
                .write(true)
                .open(root.schema_path())
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        write(&text);
        // Out of the racy window (a change within the clock's granularity is never cached).
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let first = c.schemas().unwrap();
        assert!(Arc::ptr_eq(&first, &c.schemas().unwrap()), "reused");
        // The same size: a name in it changed to another of its length.
        let tightened =
            String::from_utf8(text.clone())
                .unwrap()
                .replacen("\"summary\"", "\"summarx\"", 1);
        assert_eq!(tightened.len(), text.len());
        assert_ne!(tightened.as_bytes(), &text[..]);
        write(tightened.as_bytes());
        let meta = std::fs::metadata(root.schema_path()).unwrap();
        assert_eq!(meta.modified().unwrap(), old);
        let second = c.schemas().unwrap();
        assert!(!Arc::ptr_eq(&first, &second), "the edit is seen");
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
    fn the_rule_event_definition_accepts_the_event_a_handoff_raises() {
        let doc: Value = serde_json::from_str(BUILTIN_SCHEMA).unwrap();
        assert_eq!(doc["version"], SCHEMA_VERSION);
        let v = compile(&doc, Some("rule_event"), "the built-in schema").unwrap();
        let ev = crate::conductor::rules::handoff_event(
            "thoth",
            "hephaestus",
            "wf_deploy_42",
            "research",
            &json!({"summary": "s"}),
        );
        assert_eq!(violations(&v, &ev), vec![]);
        let mut bad = ev.clone();
        bad.as_object_mut().unwrap().remove("step");
        bad["workflow_id"] = json!("deploy");
        let pointers: Vec<String> = violations(&v, &bad)
            .into_iter()
            .map(|v| v.pointer)
            .collect();
        assert!(pointers.contains(&"/step".to_owned()), "{pointers:?}");
        assert!(
            pointers.contains(&"/workflow_id".to_owned()),
            "{pointers:?}"
        );
    }

    #[test]
    fn shipped_schemas_are_recognised_byte_for_byte() {
        assert_eq!(
            classify_schema(BUILTIN_SCHEMA.as_bytes()),
            SchemaFile::Current
        );
        let v1 = SHIPPED_SCHEMAS[0].1;
        assert_eq!(classify_schema(v1.as_bytes()), SchemaFile::Shipped(1));
        let edited = v1.replacen("{0,63}", "{0,31}", 1);
        assert_eq!(classify_schema(edited.as_bytes()), SchemaFile::Edited);
        assert_eq!(classify_schema(b""), SchemaFile::Edited);
        // Every shipped schema still loads, so a root not yet upgraded keeps working.
        for (_, text) in SHIPPED_SCHEMAS {
            let doc: Value = serde_json::from_str(text).unwrap();
            compile(&doc, None, "a shipped schema").unwrap();
        }
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
