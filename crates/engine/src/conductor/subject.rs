//! NATS subject checks (docs/NATS.md): a subject the bridge publishes on is literal (no `*` or `>`),
//! a value put into a subject from an id or a template is exactly one token (no `.`), and a filter
//! the operator configures may use `*` tokens and a final `>`. The conductor checks and renders the
//! subject templates of `nats_publish` steps with them; the bridge checks its peers' subjects.

use super::template::{Part, Template, Vars};

/// Longest subject accepted, in bytes.
pub(crate) const MAX_SUBJECT: usize = 256;

fn token_ok(t: &str) -> bool {
    !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'.' && b != b'*' && b != b'>')
}

/// Why a subject, a subject filter or a value put into a subject is refused; each says what and
/// where, in the words docs/NATS.md uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// A subject is empty or longer than [`MAX_SUBJECT`] bytes.
    #[error("subject {0:?} must be 1 to {MAX_SUBJECT} bytes")]
    Length(String),
    /// A subject's token is empty or holds a wildcard, space or control character.
    #[error(
        "subject {subject:?}: token {token:?} is empty or holds a wildcard, space or control character"
    )]
    Token {
        /// The subject.
        subject: String,
        /// Its first bad token.
        token: String,
    },
    /// A subject under `$`, the server's own API.
    #[error("subject {0:?} is under `$` (the server's own API); the bridge never publishes there")]
    ServerApi(String),
    /// A subject filter is empty or longer than [`MAX_SUBJECT`] bytes.
    #[error("subject filter {0:?} must be 1 to {MAX_SUBJECT} bytes")]
    FilterLength(String),
    /// A filter's token is neither a name, `*`, nor a final `>`.
    #[error("subject filter {filter:?}: token {token:?} is not a name, `*`, or a final `>`")]
    FilterToken {
        /// The filter.
        filter: String,
        /// Its first bad token.
        token: String,
    },
    /// A value put into a subject is not exactly one token.
    #[error(
        "{what} {value:?} cannot be part of a subject: it must be one token (no `.`, `*`, `>`, spaces)"
    )]
    NotOneToken {
        /// What the value is (`value of ${workflow_id}`, …).
        what: String,
        /// The value.
        value: String,
    },
    /// A template's literal text makes a bad subject.
    #[error("{cause} (in {template:?})")]
    InTemplate {
        /// Why its text is refused.
        cause: Box<SubjectError>,
        /// The template as written.
        template: String,
    },
}

/// A literal subject: dot-separated non-empty tokens of printable ASCII, no wildcards.
pub(crate) fn check_subject(s: &str) -> Result<(), SubjectError> {
    if s.is_empty() || s.len() > MAX_SUBJECT {
        return Err(SubjectError::Length(s.to_owned()));
    }
    if let Some(bad) = s.split('.').find(|t| !token_ok(t)) {
        return Err(SubjectError::Token {
            subject: s.to_owned(),
            token: bad.to_owned(),
        });
    }
    Ok(())
}

/// A subject the bridge may publish on: literal, and never under `$` (the server's own APIs:
/// `$JS.API…`, `$KV…`, `$SYS…`), which a publish would call with this bridge's credentials (a
/// `$JS.API.STREAM.PURGE.X` "message" purges stream X).
pub(crate) fn check_publish_subject(s: &str) -> Result<(), SubjectError> {
    check_subject(s)?;
    if s.starts_with('$') {
        return Err(SubjectError::ServerApi(s.to_owned()));
    }
    Ok(())
}

/// A subject filter: like `check_subject`, but a token may be `*` and the last may be `>`.
pub fn check_filter(s: &str) -> Result<(), SubjectError> {
    if s.is_empty() || s.len() > MAX_SUBJECT {
        return Err(SubjectError::FilterLength(s.to_owned()));
    }
    let tokens: Vec<&str> = s.split('.').collect();
    for (i, t) in tokens.iter().enumerate() {
        let ok = token_ok(t) || *t == "*" || (*t == ">" && i + 1 == tokens.len());
        if !ok {
            return Err(SubjectError::FilterToken {
                filter: s.to_owned(),
                token: (*t).to_owned(),
            });
        }
    }
    Ok(())
}

/// One token taken from an id or a rendered value.
pub(crate) fn check_token(what: &str, s: &str) -> Result<(), SubjectError> {
    if s.len() <= MAX_SUBJECT && token_ok(s) {
        Ok(())
    } else {
        Err(SubjectError::NotOneToken {
            what: what.to_owned(),
            value: s.to_owned(),
        })
    }
}

/// True when `subject` (literal) matches `filter`.
pub(crate) fn matches(filter: &str, subject: &str) -> bool {
    let mut f = filter.split('.');
    let mut s = subject.split('.');
    loop {
        match (f.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Checks the literal text of a subject template (at load): its fixed tokens must be valid.
pub(crate) fn check_template_subject(t: &Template) -> Result<(), SubjectError> {
    let filled: String = t
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(s) => s.as_str(),
            _ => "x",
        })
        .collect();
    check_publish_subject(&filled).map_err(|e| SubjectError::InTemplate {
        cause: Box::new(e),
        template: t.source.clone(),
    })
}

/// Renders a subject template: every substituted value must be one token.
pub(crate) fn render_subject(t: &Template, vars: &Vars<'_>) -> Result<String, SubjectError> {
    let mut out = String::new();
    for p in &t.parts {
        match p {
            Part::Text(s) => out.push_str(s),
            other => {
                let one = Template {
                    source: String::new(),
                    parts: vec![other.clone()],
                }
                .render(vars);
                check_token(&format!("value of {}", describe(other)), &one)?;
                out.push_str(&one);
            }
        }
    }
    check_publish_subject(&out)?;
    Ok(out)
}

fn describe(p: &Part) -> String {
    match p {
        Part::Text(_) => "text".into(),
        Part::WorkflowId => "${workflow_id}".into(),
        Part::Message => "${message}".into(),
        Part::Context(k) => format!("${{context.{k}}}"),
        Part::StepOutput(s) => format!("${{step.{s}.output}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_filters_and_injection() {
        assert!(check_subject("subspace.konan.outgoing.tallon").is_ok());
        for bad in ["", "a..b", "a.*", "a.>", "a b", ".a", "a."] {
            assert!(check_subject(bad).is_err(), "{bad}");
        }
        assert!(check_filter("subspace.*.outgoing.tallon").is_ok());
        assert!(check_filter("pantheon.a.in.>").is_ok());
        assert!(check_filter("a.>.b").is_err());
        assert!(matches(
            "subspace.*.outgoing.tallon",
            "subspace.konan.outgoing.tallon"
        ));
        assert!(matches("p.a.>", "p.a.in.x"));
        assert!(!matches("p.a.>", "p.a"));
        assert!(!matches("p.*", "p.a.b"));
        let t = Template::parse("subspace.${context.from}.outgoing", &[]).unwrap();
        let mut ctx = serde_json::Map::new();
        ctx.insert("from".into(), "konan".into());
        fn v(ctx: &serde_json::Map<String, serde_json::Value>) -> Vars<'_> {
            Vars {
                workflow_id: "w",
                message: "",
                context: Some(ctx),
                outputs: vec![],
            }
        }
        assert_eq!(
            render_subject(&t, &v(&ctx)).unwrap(),
            "subspace.konan.outgoing"
        );
        for inject in ["a.b", "*", ">", "", "a b"] {
            ctx.insert("from".into(), inject.into());
            assert!(render_subject(&t, &v(&ctx)).is_err(), "{inject}");
        }
        // Nothing under `$`: not written, not filled in by a value.
        let purge = Template::parse("$JS.API.STREAM.PURGE.X", &[]).unwrap();
        let e = check_template_subject(&purge).unwrap_err();
        assert!(e.to_string().contains("under `$`"), "{e}");
        let led = Template::parse("${context.from}.API.STREAM.PURGE.X", &[]).unwrap();
        assert!(
            check_template_subject(&led).is_ok(),
            "a placeholder is checked when filled"
        );
        ctx.insert("from".into(), "$JS".into());
        let e = render_subject(&led, &v(&ctx)).unwrap_err();
        assert!(e.to_string().contains("under `$`"), "{e}");
        assert!(check_publish_subject("subspace.a$b.c").is_ok());
    }
}
