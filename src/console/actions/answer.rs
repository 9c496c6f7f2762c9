//! Answer a foreign item (`a` on pane 7): an attention item of a source that takes answers (an A2A
//! task in input-required) gets the operator's text as the task's next message, asked, confirmed,
//! sent through the source and journaled as `answer_source` (the source, the item and the answer's
//! length, never its text), as `pantheon sources answer` does (docs/SOURCES.md).

use chrono::{DateTime, Utc};

use crate::engine::{Act as JournalAct, Error, JournalTarget, JournalVerb, append_journal};
use crate::live::attention::Kind;
use crate::live::snapshot::Snapshot;

use super::super::app::{AnswerError, App, Effect, PromptFor, Question, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::ops::{Done, Outcome};
use super::super::shown::Version;
use super::{Act, Op, line};

/// The longest answer sent (the CLI's bound for one read from standard input).
const MAX_ANSWER_CHARS: usize = 64 * 1024;

/// The selected item's source, key and question, when its source says it takes an answer.
fn answerable(snap: &Snapshot, source: &str, key: &str) -> Option<(String, String)> {
    let state = snap.sources.iter().find(|s| s.spec() == source)?;
    let item = state
        .snapshot
        .attention
        .iter()
        .find(|a| a.key == key && a.answerable)?;
    Some((item.agent.clone(), item.what.clone()))
}

/// `a` on pane 7.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if app.pane() != Pane::Attention || app.refuse_if_gone(Pane::Attention) {
        app.need("a foreign item waiting for an answer (7 Attention)");
        return Vec::new();
    }
    let items = app.attention();
    let Some(item) = items.get(app.selected(Pane::Attention)) else {
        app.need("an attention item");
        return Vec::new();
    };
    let (Some(source), Some(key)) = (item.source(), item.ids.get("key")) else {
        app.need("a foreign item (its source takes the answer)");
        return Vec::new();
    };
    if item.kind != Kind::Foreign {
        app.need("a foreign item waiting for an answer");
        return Vec::new();
    }
    let Some((agent, what)) = answerable(app.snapshot(), source, key) else {
        app.need("an item whose source takes answers (this one is answered where its agents run)");
        return Vec::new();
    };
    app.ask(
        format!("Answer {agent}: {what}"),
        true,
        String::new(),
        PromptFor::Action(Box::new(Text {
            source: source.to_owned(),
            key: key.to_owned(),
        })),
    );
    Vec::new()
}

/// The answer's text is asked.
#[derive(Debug, Clone)]
struct Text {
    source: String,
    key: String,
}

impl Question for Text {
    fn title(&self, _marked: usize, _pane: Pane) -> String {
        format!("Answer {}", self.key)
    }

    fn answered(self: Box<Self>, app: &mut App, answer: Option<String>) -> Result<(), AnswerError> {
        let text = answer.unwrap_or_default();
        if text.trim().is_empty() {
            return Err(AnswerError::Unreadable("an empty answer is not sent".into()));
        }
        if text.chars().count() > MAX_ANSWER_CHARS {
            return Err(AnswerError::Unreadable(format!(
                "an answer is at most {MAX_ANSWER_CHARS} characters"
            )));
        }
        app.confirm(Op::AnswerSource {
            source: self.source,
            key: self.key,
            text,
        });
        Ok(())
    }
}

impl Act for super::AnswerSource<'_> {
    fn title(&self) -> String {
        format!("Answer {}", self.key)
    }

    fn verb(&self) -> &'static str {
        "Send"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        match answerable(snap, self.source, self.key) {
            Some((agent, what)) => out.push(line(Normal, format!("{agent} asks: {what}"))),
            None => out.push(line(
                Warn,
                "The item no longer waits as it was shown: the source will say what changed.",
            )),
        }
        out.push(line(
            Normal,
            format!(
                "Your answer ({} characters) goes to {} as the task's next message.",
                self.text.chars().count(),
                self.source
            ),
        ));
        out.push(line(
            Dim,
            "Journaled as answer_source: the source, the item and the answer's length, never its text.",
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        v.push((
            format!("item {}", self.key),
            answerable(snap, self.source, self.key).is_some().to_string(),
        ));
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        let mut source = crate::sources::open(self.source).map_err(|e| Error::refused(e.reason))?;
        let answered = source
            .answer(self.key, self.text)
            .map_err(|e| Error::refused(e.reason))?;
        // As every act (docs/PROTOCOL.md 2.8): the answer stands when its entry cannot be written.
        let act = JournalAct::new(JournalVerb::AnswerSource, &answered.detail)
            .target(JournalTarget::Source, Some(self.source))
            .target(JournalTarget::Item, Some(self.key));
        if let Err(e) = append_journal(engine.root(), &engine.conductor().origin(), &act) {
            tracing::warn!("the answer was sent but the journal could not record it: {e}");
        }
        Ok(Done::new(answered, summary, Outcome::Answer))
    }

    fn subject(&self) -> String {
        self.key.clone()
    }

    fn done_word(&self) -> &'static str {
        "answered"
    }
}

/// The flash made of the source's answer.
fn summary(r: &crate::sources::Answered) -> String {
    format!("answered {}: {}", r.key, r.detail)
}
