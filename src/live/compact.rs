//! Compact rows: what the tables, filters, sorts, counts and overdue checks read of a record, in a
//! couple of hundred bytes (times parsed once into numbers, god and step names shared); the whole
//! record is read from its file only when a detail or a confirmation asks for it.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

use crate::engine::{AckStatus, Dispatch, DispatchContext, time::parse_ts};

use super::snapshot::Sym;

/// A time as a record wrote it: parsed once (12 bytes, no string kept), or the text as written when
/// it does not parse (shown with a `?`, as the views always did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// A time that parsed (any offset, kept in UTC).
    At(DateTime<Utc>),
    /// Text that is not a time, kept as written.
    Unparsed(Box<str>),
}

impl Stamp {
    /// The stamp of a time written as `s`.
    pub fn of(s: &str) -> Self {
        match parse_ts(s) {
            Some(t) => Self::At(t),
            None => Self::Unparsed(s.into()),
        }
    }

    /// The stamp of an optional time.
    pub fn of_opt(s: Option<&str>) -> Option<Self> {
        s.map(Self::of)
    }

    /// The time, when it parsed.
    pub fn at(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::At(t) => Some(*t),
            Self::Unparsed(_) => None,
        }
    }

    /// RFC 3339 in UTC for a parsed time (`2026-06-14T10:30:00Z`, fractions kept), else the text as
    /// written: what a sort by this column compares and what a state rebuilt from a row holds.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::At(t) => Cow::Owned(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            Self::Unparsed(s) => Cow::Borrowed(&**s),
        }
    }
}

impl PendingNote {
    /// The note of a dispatch acked `pending` with an ETA or a message (`None` otherwise).
    fn of(d: &Dispatch) -> Option<Self> {
        if d.ack_status != AckStatus::Pending {
            return None;
        }
        let message = d
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| {
                m.chars()
                    .take(PENDING_MESSAGE_MAX)
                    .collect::<String>()
                    .into()
            });
        let eta = Stamp::of_opt(d.eta.as_deref());
        (eta.is_some() || message.is_some()).then_some(Self { eta, message })
    }
}

/// What a dead letter's row keeps besides the dispatch's (docs/PROTOCOL.md §2.10), boxed: only dead
/// letters have it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadNote {
    /// `dead_at`, as written.
    pub at: Option<Box<str>>,
    /// `dead_reason`.
    pub reason: Option<Box<str>>,
}

/// What a `pending` ack left on its dispatch (its `eta` and `message`), boxed: only dispatches
/// acked `pending` with one of them have it. The message is kept up to [`PENDING_MESSAGE_MAX`]
/// characters (the detail reads the file whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingNote {
    pub eta: Option<Stamp>,
    pub message: Option<Box<str>>,
}

/// How much of a pending ack's message a dispatch's row keeps.
pub(crate) const PENDING_MESSAGE_MAX: usize = 200;

/// What the Inboxes and Dead letters tables, the filter, the sorts, the attention queue, the overdue
/// and held checks and the deadline count read of a dispatch file. Everything else (the context but
/// its summary, routing, the delivery history, eta, message, unknown fields) is read from the file
/// when a detail asks for it ([`super::snapshot::DispatchView::whole`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchRow {
    /// The handoff id (the same allocation as the file's name when they agree, as they should).
    pub handoff_id: Sym,
    pub workflow_id: Box<str>,
    pub from_god: Sym,
    pub to_god: Sym,
    pub step: Sym,
    /// The context's summary (the table's last column).
    pub summary: Box<str>,
    pub dispatched_at: Option<Stamp>,
    pub ack_status: AckStatus,
    /// When the current delivery's ack is due (docs/PROTOCOL.md §2.10).
    pub ack_deadline: Option<Stamp>,
    /// Why it is held in `_quarantine`.
    pub held_because: Option<Sym>,
    /// Deliveries made so far.
    pub deliveries: u32,
    pub max_deliveries: Option<u32>,
    /// The god of the last delivery, when the history names one.
    pub last_target: Option<Sym>,
    /// Set for a dead letter that says when or why it died.
    pub dead: Option<Box<DeadNote>>,
    /// Set for a dispatch acked `pending` with an ETA or a message (pane 2 shows them).
    pub pending: Option<Box<PendingNote>>,
}

impl DispatchRow {
    /// The row of a dispatch (names not shared; the live model shares them).
    pub fn of(d: &Dispatch) -> Self {
        Self::with(d, None, &mut |x: &str| Sym::from(x))
    }

    /// The row of a dispatch read from the file `name` (without `.json`, when known: the handoff id
    /// then shares its allocation), with `intern` giving the shared copy of a god or step name.
    pub fn with(d: &Dispatch, name: Option<&Sym>, intern: &mut dyn FnMut(&str) -> Sym) -> Self {
        let dead = DeadNote {
            at: d.dead_at.as_deref().map(Box::from),
            reason: d.dead_reason.as_deref().map(Box::from),
        };
        Self {
            handoff_id: match name {
                Some(n) if **n == *d.handoff_id => n.clone(),
                _ => Sym::from(d.handoff_id.as_str()),
            },
            workflow_id: d.workflow_id.as_str().into(),
            from_god: intern(&d.from_god),
            to_god: intern(&d.to_god),
            step: intern(&d.step),
            summary: d.context.summary.as_str().into(),
            dispatched_at: Stamp::of_opt(d.dispatched_at.as_deref()),
            ack_status: d.ack_status.clone(),
            ack_deadline: Stamp::of_opt(d.ack_deadline.as_deref()),
            held_because: d.held_because.as_deref().map(&mut *intern),
            deliveries: u32::try_from(d.deliveries.len()).unwrap_or(u32::MAX),
            max_deliveries: d.max_deliveries,
            last_target: d.deliveries.last().map(|x| intern(&x.to)),
            dead: (dead != DeadNote::default()).then(|| Box::new(dead)),
            pending: PendingNote::of(d).map(Box::new),
        }
    }

    /// The god of its last delivery, else the one it was sent to.
    pub fn last_target(&self) -> &str {
        self.last_target.as_deref().unwrap_or(&self.to_god)
    }

    /// A dispatch holding what this row knows (for a detail when the file can no longer be read;
    /// the delivery history is the file's alone).
    pub fn to_dispatch(&self) -> Dispatch {
        let t = |o: &Option<Stamp>| o.as_ref().map(|s| s.text().into_owned());
        let mut d = Dispatch {
            handoff_id: self.handoff_id.to_string(),
            workflow_id: self.workflow_id.to_string(),
            from_god: self.from_god.to_string(),
            to_god: self.to_god.to_string(),
            step: self.step.to_string(),
            context: DispatchContext {
                summary: self.summary.to_string(),
                ..Default::default()
            },
            dispatched_at: t(&self.dispatched_at),
            ack_status: self.ack_status.clone(),
            ack_deadline: t(&self.ack_deadline),
            held_because: self.held_because.as_deref().map(str::to_owned),
            max_deliveries: self.max_deliveries,
            ..Default::default()
        };
        if let Some(dead) = &self.dead {
            d.dead_at = dead.at.as_deref().map(str::to_owned);
            d.dead_reason = dead.reason.as_deref().map(str::to_owned);
        }
        if let Some(p) = &self.pending {
            d.eta = p.eta.as_ref().map(|t| t.text().into_owned());
            d.message = p.message.as_deref().map(str::to_owned);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::engine::Root;
    use crate::engine::model_from_value;
    use crate::live::{LiveModel, ModelOptions};

    fn dispatch(v: serde_json::Value) -> Dispatch {
        model_from_value::<Dispatch>(v).unwrap()
    }

    #[test]
    fn stamps_parse_once_and_keep_what_is_not_a_time() {
        let t = Stamp::of("2026-06-14T12:30:00+02:00");
        assert_eq!(t.at(), parse_ts("2026-06-14T10:30:00Z"));
        assert_eq!(t.text(), "2026-06-14T10:30:00Z", "UTC, sortable as text");
        assert_eq!(
            Stamp::of("2026-06-14T10:30:00.000001Z").text(),
            "2026-06-14T10:30:00.000001Z"
        );
        let odd = Stamp::of("yesterday-ish");
        assert_eq!(odd.at(), None);
        assert_eq!(odd.text(), "yesterday-ish");
        assert_eq!(Stamp::of_opt(None), None);
        // A time takes no allocation: the size of the stamp is the whole cost.
        assert!(std::mem::size_of::<Option<Stamp>>() <= 24);
    }

    #[test]
    fn a_row_keeps_what_the_tables_use_and_shares_names() {
        let d = dispatch(json!({
            "dispatch_id": "disp_1", "handoff_id": "hof_1", "workflow_id": "wf_1",
            "from_god": "thoth", "to_god": "hermes", "step": "build",
            "context": {"summary": "build it", "decisions": ["a"], "artifacts": ["x.md"]},
            "dispatched_at": "2026-06-14T10:30:00Z", "ack_status": "unacked",
            "ack_deadline": "2026-06-14T10:31:00Z", "max_deliveries": 3,
            "deliveries": [{"at": "2026-06-14T10:30:00Z", "to": "hermes"},
                           {"at": "2026-06-14T10:30:30Z", "to": "apollo"}],
            "held_because": "step approval_required",
            "dead_at": "2026-06-14T10:40:00Z", "dead_reason": "not acked after 3 deliveries",
            "unknown": {"big": [1, 2, 3]}
        }));
        let name: Sym = Sym::from("hof_1");
        let mut seen = std::collections::HashMap::<String, Sym>::new();
        let mut intern = |s: &str| {
            seen.entry(s.to_owned())
                .or_insert_with(|| Sym::from(s))
                .clone()
        };
        let r = DispatchRow::with(&d, Some(&name), &mut intern);
        let r2 = DispatchRow::with(&d, Some(&name), &mut intern);
        assert!(
            Arc::ptr_eq(&r.handoff_id, &name),
            "one allocation with the file name"
        );
        assert!(Arc::ptr_eq(&r.to_god, &r2.to_god) && Arc::ptr_eq(&r.step, &r2.step));
        assert_eq!(&*r.workflow_id, "wf_1");
        assert_eq!(
            (&*r.from_god, &*r.to_god, &*r.step),
            ("thoth", "hermes", "build")
        );
        assert_eq!(&*r.summary, "build it");
        assert_eq!(
            r.dispatched_at.as_ref().and_then(Stamp::at),
            parse_ts("2026-06-14T10:30:00Z")
        );
        assert_eq!(r.ack_status, AckStatus::Unacked);
        assert!(r.ack_deadline.as_ref().and_then(Stamp::at).is_some());
        assert_eq!((r.deliveries, r.max_deliveries), (2, Some(3)));
        assert_eq!(r.last_target(), "apollo");
        assert_eq!(r.held_because.as_deref(), Some("step approval_required"));
        let dead = r.dead.as_deref().unwrap();
        assert_eq!(dead.at.as_deref(), Some("2026-06-14T10:40:00Z"));
        assert_eq!(dead.reason.as_deref(), Some("not acked after 3 deliveries"));
        // What only a detail shows is not in the row; the known part comes back for a fallback.
        let back = r.to_dispatch();
        assert_eq!(back.handoff_id, "hof_1");
        assert_eq!(back.context.summary, "build it");
        assert!(back.context.decisions.is_empty() && back.deliveries.is_empty());
        assert_eq!(back.dispatched_at.as_deref(), Some("2026-06-14T10:30:00Z"));
        assert_eq!(
            back.dead_reason.as_deref(),
            Some("not acked after 3 deliveries")
        );
        assert!(!back.extra.contains_key("unknown"));
        // Much smaller than the engine's whole dispatch.
        assert!(
            std::mem::size_of::<DispatchRow>() * 3 < std::mem::size_of::<Dispatch>(),
            "{} vs {}",
            std::mem::size_of::<DispatchRow>(),
            std::mem::size_of::<Dispatch>()
        );
    }

    #[test]
    fn odd_and_hostile_dispatches_give_a_row_without_panicking() {
        for v in [
            json!({}),
            json!({"handoff_id": 7, "workflow_id": null, "to_god": ["x"], "step": {"a": 1}}),
            json!({"dispatched_at": "not a time", "ack_deadline": 12, "ack_status": "weird"}),
            json!({"deliveries": "many", "max_deliveries": -5}),
            json!({"deliveries": [1, {"to": 2}, {"at": "x", "to": "zeus"}], "max_deliveries": 1e30}),
            json!({"dispatched_at": "9999-99-99T99:99:99Z", "context": "just text"}),
            json!({"dead_at": 5, "dead_reason": {"no": "text"}, "held_because": ""}),
            json!({"handoff_id": "ü\u{0}\u{202e}", "summary": "x".repeat(10_000)}),
        ] {
            // A type the engine's reader refuses is a file issue (the model lists it), not a row.
            let Ok(d) = model_from_value::<Dispatch>(v.clone()) else {
                continue;
            };
            let r = DispatchRow::of(&d);
            // Every row answers what the tables ask of it.
            let _ = (r.last_target(), r.to_dispatch(), r.ack_status.as_str());
            if let Some(t) = &r.dispatched_at {
                assert!(t.at().is_some() || !t.text().is_empty(), "{v}");
            }
        }
        let r = DispatchRow::of(&dispatch(json!({"dispatched_at": "not a time"})));
        assert_eq!(r.dispatched_at, Some(Stamp::Unparsed("not a time".into())));
        let r = DispatchRow::of(&dispatch(json!({"ack_status": "weird"})));
        assert_eq!(r.ack_status.as_str(), "weird");
        let r = DispatchRow::of(&dispatch(json!({"dead_at": 5})));
        assert!(r.dead.is_none(), "a dead_at that is not text is not kept");
        // No history: the last target is the god it was sent to.
        let r = DispatchRow::of(&dispatch(json!({"to_god": "hermes"})));
        assert_eq!((r.deliveries, r.last_target()), (0, "hermes"));
    }

    /// Through the live model: rows are compact, the whole file is read only when asked (once per
    /// version), and the on-demand read refuses what the listing refuses.
    #[test]
    fn the_whole_dispatch_is_read_on_demand_and_checked_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let inbox = root.pending_root().join("hermes");
        std::fs::create_dir_all(&inbox).unwrap();
        for i in 0..3 {
            let d = json!({
                "handoff_id": format!("hof_{i}"), "workflow_id": format!("wf_{i}"),
                "from_god": "thoth", "to_god": "hermes", "step": "build",
                "context": {"summary": format!("s{i}"), "decisions": [format!("d{i}")]},
                "dispatched_at": format!("2026-06-14T10:3{i}:00Z"), "ack_status": "unacked"
            });
            std::fs::write(inbox.join(format!("hof_{i}.json")), d.to_string()).unwrap();
        }
        let m = LiveModel::open(root.clone(), ModelOptions::default());
        let s = m.snapshot();
        let ds = &s.inboxes[0].dispatches;
        assert_eq!(ds.len(), 3);
        // Oldest first; one copy of the god and step names; handoff id = file name.
        assert_eq!(&*ds[0].name, "hof_0");
        assert!(Arc::ptr_eq(&ds[0].dispatch.handoff_id, &ds[0].name));
        assert!(Arc::ptr_eq(&ds[0].dispatch.to_god, &ds[2].dispatch.to_god));
        assert_eq!(ds[1].path(), inbox.join("hof_1.json"));
        assert!(ds.iter().all(|d| !d.dispatch.whole.is_read()));
        let w = ds[0].whole().unwrap();
        assert_eq!(w.typed.context.decisions, ["d0"]);
        assert_eq!(w.raw["context"]["summary"], "s0");
        assert!(Arc::ptr_eq(&w, &ds[0].whole().unwrap()), "read once");
        assert!(!ds[1].dispatch.whole.is_read());
        // Replaced by a link to a file outside the root: the detail does not follow it.
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.json");
        std::fs::write(&secret, r#"{"handoff_id": "stolen"}"#).unwrap();
        std::fs::remove_file(inbox.join("hof_1.json")).unwrap();
        std::os::unix::fs::symlink(&secret, inbox.join("hof_1.json")).unwrap();
        let e = ds[1].whole().unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!ds[1].dispatch.whole.is_read(), "a refusal is not cached");
        // Replaced by a FIFO: the engine's bounded read refuses it (it would block).
        std::fs::remove_file(inbox.join("hof_2.json")).unwrap();
        let fifo = std::ffi::CString::new(inbox.join("hof_2.json").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = ds[2].whole().unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        // The row still says what it knew.
        assert_eq!(&*ds[2].dispatch.summary, "s2");
    }
}
