//! Checks a call's arguments against the input schema its tool advertises, before the call.
//!
//! A model that sends a wrong type or a misspelt field gets every problem at once, each located by
//! its JSON pointer (`/god_name: 5 is not of type "string"`), as a tool error it can act on,
//! instead of serde's first failure without a field name.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

/// One compiled validator per tool, built once when the server starts.
#[derive(Clone)]
pub(crate) struct ArgumentChecks {
    validators: Arc<HashMap<String, Checked>>,
}

/// A tool's validator and the argument names it declares (every tool refuses any other).
struct Checked {
    validator: jsonschema::Validator,
    declared: Vec<String>,
}

impl std::fmt::Debug for ArgumentChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentChecks")
            .field("tools", &self.validators.len())
            .finish()
    }
}

impl ArgumentChecks {
    /// Compiles the input schema of each tool. A schema that does not compile is a programming
    /// error in this crate (the schemas are generated); that tool is then checked by serde alone.
    pub(crate) fn new(tools: &[Tool]) -> Self {
        let validators = tools
            .iter()
            .filter_map(|t| {
                let schema = Value::Object((*t.input_schema).clone());
                let mut declared: Vec<String> = t
                    .input_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                declared.sort();
                match jsonschema::validator_for(&schema) {
                    Ok(validator) => Some((
                        t.name.to_string(),
                        Checked {
                            validator,
                            declared,
                        },
                    )),
                    Err(e) => {
                        tracing::error!(tool = %t.name, error = %e, "input schema does not compile");
                        None
                    }
                }
            })
            .collect();
        Self {
            validators: Arc::new(validators),
        }
    }

    /// `None` when the arguments fit the tool's schema, else one line per violation. An argument
    /// the tool does not declare is named, with the arguments it does take.
    pub(crate) fn violations(
        &self,
        tool: &str,
        arguments: Option<&JsonObject>,
    ) -> Option<Vec<String>> {
        let checked = self.validators.get(tool)?;
        let instance = Value::Object(arguments.cloned().unwrap_or_default());
        let mut found: Vec<String> = instance
            .as_object()
            .into_iter()
            .flat_map(|args| args.keys())
            .filter(|k| !checked.declared.contains(k))
            .map(|k| {
                let takes = if checked.declared.is_empty() {
                    "no arguments".to_string()
                } else {
                    checked.declared.join(", ")
                };
                format!("arguments: unknown argument {k:?}; {tool} takes {takes}")
            })
            .collect();
        let unknown_reported = !found.is_empty();
        found.extend(
            checked
                .validator
                .iter_errors(&instance)
                .filter(|e| {
                    !(unknown_reported
                        && matches!(
                            e.kind(),
                            ValidationErrorKind::AdditionalProperties { .. }
                                | ValidationErrorKind::FalseSchema
                        ))
                })
                .map(|e| {
                    let at = e.instance_path().to_string();
                    let at = if at.is_empty() {
                        "arguments".to_string()
                    } else {
                        at
                    };
                    format!("{at}: {e}")
                }),
        );
        (!found.is_empty()).then_some(found)
    }
}
