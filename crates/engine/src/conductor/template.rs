//! `${…}` templates of `nats_publish` steps (docs/NATS.md): parsed and checked when a definition loads,
//! rendered when a workflow reaches the step. Placeholders: `${workflow_id}`, `${message}`,
//! `${context.KEY}`, `${step.ID.output}`.

use serde_json::{Map, Value};

use crate::store::is_valid_name;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text, copied as is.
    Text(String),
    /// `${workflow_id}`.
    WorkflowId,
    /// `${message}`: the workflow's last summary.
    Message,
    /// `${context.KEY}`: a key of the starting handoff's context (empty when absent).
    Context(String),
    /// `${step.ID.output}`: the summary of step ID's latest completion (empty when absent).
    StepOutput(String),
}

/// A parsed template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The template as written.
    pub source: String,
    /// Its pieces, in order.
    pub parts: Vec<Part>,
}

/// What a template is rendered with.
#[derive(Debug, Clone, Default)]
pub struct Vars<'a> {
    /// The workflow the step belongs to.
    pub workflow_id: &'a str,
    /// The workflow's last summary.
    pub message: &'a str,
    /// The starting handoff's context, if any.
    pub context: Option<&'a Map<String, Value>>,
    /// `step id -> output` (the summary of the step's latest completion).
    pub outputs: Vec<(String, String)>,
}

/// Longest template accepted, in bytes.
pub(crate) const MAX_TEMPLATE: usize = 16 * 1024;

impl Template {
    /// Parses `source`; `steps` are the step ids `${step.ID.output}` may name. The error names the
    /// offending placeholder as written.
    pub fn parse(source: &str, steps: &[&str]) -> Result<Self, TemplateError> {
        if source.len() > MAX_TEMPLATE {
            return Err(TemplateError {
                placeholder: String::new(),
                message: format!("template is {} bytes; at most {MAX_TEMPLATE}", source.len()),
            });
        }
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(TemplateError {
                    placeholder: rest[start..].chars().take(40).collect(),
                    message: "`${` is not closed by `}`".into(),
                });
            };
            let name = &after[..end];
            let written = format!("${{{name}}}");
            let unknown = |why: &str| TemplateError {
                placeholder: written.clone(),
                message: format!(
                    "unknown placeholder {written}{why} (known: ${{workflow_id}}, ${{message}}, ${{context.KEY}}, ${{step.ID.output}})"
                ),
            };
            let part = match name {
                "workflow_id" => Part::WorkflowId,
                "message" => Part::Message,
                _ => {
                    if let Some(key) = name.strip_prefix("context.") {
                        if !is_valid_name(key) {
                            return Err(unknown(": a context key is a name like feature_summary"));
                        }
                        Part::Context(key.to_owned())
                    } else if let Some(step) = name
                        .strip_prefix("step.")
                        .and_then(|s| s.strip_suffix(".output"))
                    {
                        if !steps.contains(&step) {
                            return Err(unknown(&format!(
                                ": {step:?} is not a step of this workflow"
                            )));
                        }
                        Part::StepOutput(step.to_owned())
                    } else {
                        return Err(unknown(""));
                    }
                }
            };
            parts.push(part);
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Self {
            source: source.to_owned(),
            parts,
        })
    }

    /// The rendered text; a context key or step output that is absent renders empty.
    pub fn render(&self, vars: &Vars<'_>) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::WorkflowId => out.push_str(vars.workflow_id),
                Part::Message => out.push_str(vars.message),
                Part::Context(k) => match vars.context.and_then(|c| c.get(k)) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => out.push_str(s),
                    Some(other) => out.push_str(&other.to_string()),
                },
                Part::StepOutput(s) => {
                    if let Some((_, o)) = vars.outputs.iter().rev().find(|(id, _)| id == s) {
                        out.push_str(o);
                    }
                }
            }
        }
        out
    }
}

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// The placeholder as written (to find its line in the file).
    pub placeholder: String,
    /// What is wrong with it.
    pub message: String,
}

/// A payload template: any JSON/YAML value whose strings are templates.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadTemplate {
    /// A string: rendered as a template.
    Str(Template),
    /// A number, boolean or null: copied as is.
    Other(Value),
    /// An array: each item rendered.
    List(Vec<PayloadTemplate>),
    /// An object: each value rendered, keys kept in order.
    Map(Vec<(String, PayloadTemplate)>),
}

impl PayloadTemplate {
    /// Parses every string in `v` as a template; refuses an unknown placeholder or a step id not in `steps`.
    pub fn parse(v: &Value, steps: &[&str]) -> Result<Self, TemplateError> {
        Ok(match v {
            Value::String(s) => Self::Str(Template::parse(s, steps)?),
            Value::Array(items) => Self::List(
                items
                    .iter()
                    .map(|i| Self::parse(i, steps))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => Self::Map(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), Self::parse(v, steps)?)))
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => Self::Other(other.clone()),
        })
    }

    /// Renders every template in the value with `vars`; never fails (missing values render empty).
    pub fn render(&self, vars: &Vars<'_>) -> Value {
        match self {
            Self::Str(t) => Value::String(t.render(vars)),
            Self::Other(v) => v.clone(),
            Self::List(items) => Value::Array(items.iter().map(|i| i.render(vars)).collect()),
            Self::Map(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.render(vars))).collect())
            }
        }
    }
}

/// The 1-based line of `path` where `needle` first occurs (for load errors that point at the file).
pub(crate) fn line_of(text: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_placeholder_and_refuses_unknown_ones() {
        let t = Template::parse(
            "Deploy ${workflow_id}: ${message} [${context.feature_summary}] ${step.build.output}${context.none}",
            &["build"],
        )
        .unwrap();
        let mut ctx = Map::new();
        ctx.insert("feature_summary".into(), Value::String("fast".into()));
        let vars = Vars {
            workflow_id: "wf_1",
            message: "go",
            context: Some(&ctx),
            outputs: vec![("build".into(), "built".into())],
        };
        assert_eq!(t.render(&vars), "Deploy wf_1: go [fast] built");
        for bad in [
            "${nope}",
            "${step.other.output}",
            "${context.a/b}",
            "x ${open",
        ] {
            let e = Template::parse(bad, &["build"]).unwrap_err();
            assert!(!e.message.is_empty(), "{bad}");
        }
        assert_eq!(
            Template::parse("${nope}", &[]).unwrap_err().placeholder,
            "${nope}"
        );
        assert_eq!(line_of("a\nb ${x}\n", "${x}"), Some(2));
    }
}
