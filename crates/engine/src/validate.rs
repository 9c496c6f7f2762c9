//! A validator over a whole root: every file of the protocol layout is read and checked against the
//! contract's shapes, and every file that breaks it is reported with where and why.
//!
//! Readers elsewhere in the engine are tolerant (they skip a torn line and read on); this module is the
//! strict counterpart that says what a tolerant reader had to forgive. Two severities: an `error` is a
//! file (or line) a reader must skip or cannot use; a `warning` is a quirk the protocol tolerates
//! (another engine's file naming, a bare-string lock, `COMPLETED` for `COMPLETE`, a blank queue line).
//! Files outside the protocol's directories (artifacts, notes) are not judged.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::bus::queue::is_valid_type;
use crate::bus::vocab::{
    AssessVerdict, Checkpoint, DiscussKind, SessionStatus, VoteVerdict, WORKER_COMPLETED_ALIAS,
    WorkerWord,
};
use crate::conductor::{AckStatus, WorkflowStatus};
use crate::conductor::{load_definitions, load_rules};
use crate::error::{Error, Result};
use crate::store::layout::{self, BoardEntry, BusEntry};
use crate::store::read::{kind, read_json};
use crate::store::time::parse_ts;
use crate::store::{
    Root, is_valid_ack_id, is_valid_handoff_id, is_valid_name, is_valid_workflow_id,
};

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Tolerated by readers, but not what the protocol writes.
    Warning,
    /// A file or line readers must skip, or a value that breaks the contract.
    Error,
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file, relative to the root.
    pub path: String,
    /// 1-based line of a JSONL file, when the problem is one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Whether the problem makes the root invalid.
    pub severity: Severity,
    /// What is wrong, in words.
    pub message: String,
}

/// The result of [`validate_root`] (what `pantheon validate` prints).
#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    /// The root checked.
    pub root: String,
    /// True when no problem is an error.
    pub valid: bool,
    /// How many files were read.
    pub files_checked: usize,
    /// How many problems are errors.
    pub errors: usize,
    /// How many problems are warnings.
    pub warnings: usize,
    /// Sorted by path, then line.
    pub problems: Vec<Problem>,
}

/// Checks every protocol file under `root`.
pub fn validate_root(root: &Root) -> Result<ValidationReport> {
    if !root.dir.is_dir() {
        return Err(Error::not_found(format!(
            "{} is not a directory; pass --root DIR or set PANTHEON_ROOT",
            root.dir.display()
        )));
    }
    let mut c = Checker {
        base: root.dir.clone(),
        problems: Vec::new(),
        files: 0,
        waiting: Vec::new(),
        dispatched: Default::default(),
        open_steps: Default::default(),
    };
    c.handoffs(root);
    c.definitions(root);
    c.states(root);
    c.dispatch_tree(&root.pending_root(), true);
    // A hold is the operator's alone: a dispatch of a held step in an inbox was moved there by hand.
    for m in crate::conductor::hold::held_dispatches_moved(root) {
        c.error(&m.path, m.text());
    }
    c.dispatch_tree(&root.archive_root(), false);
    c.dispatch_tree(&root.dead_root(), false);
    c.dispatch_tree(&root.retired_root(), false);
    c.doubled_steps();
    for w in &root.settings.warnings {
        let p = root.config_path();
        c.warn(&p, w.clone());
    }
    // The `cost:` mapping is checked by the cost module, above the store that reads the file.
    for w in crate::cost::CostConfig::parse(root.settings.cost.as_ref()).warnings {
        let p = root.config_path();
        c.warn(&p, format!("conductor/config.yaml: {w}"));
    }
    if let Some(n) = crate::conductor::delivery::unsupervised_deadlines(root, chrono::Utc::now()) {
        let p = root.supervisor_dir();
        c.warn(
            &p,
            format!(
                "{n} dispatch(es) have an ack deadline but no supervisor is alive to enforce it; \
                 run `pantheon serve` (or `pantheon tick` from cron)"
            ),
        );
    }
    c.orphaned_waits();
    // The pauses (docs/PROTOCOL.md §2.14): a file no reader can trust freezes the supervisor.
    if let Err(e) = crate::conductor::pause::read_file(root) {
        c.error(
            &root.paused_path(),
            format!("{e} (while it is unreadable the supervisor redelivers nothing)"),
        );
    }
    if let Some((_, stale)) = crate::store::safe::stale_temps(root, std::time::SystemTime::now())
        && !stale.is_empty()
    {
        c.warn(
            &root.dir.join(crate::store::layout::TEMP_DIR),
            format!(
                "{} temporary file(s) an hour or more old, left by writers killed in the middle of \
                 a write; `pantheon serve` or `pantheon tick` removes them",
                stale.len()
            ),
        );
    }
    c.tracks(root);
    c.bridge(root);
    c.problems.extend(journal_problems(root));
    // The history (docs/HISTORY.md): segments, checkpoints, sequence, blobs.
    let (herr, hwarn) = crate::history::check(root);
    let hdir = crate::history::HistoryDir::of(root).dir;
    for e in herr {
        c.error(&hdir, e);
    }
    for w in hwarn {
        c.warn(&hdir, w);
    }
    c.problems
        .sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let errors = c
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    Ok(ValidationReport {
        root: root.dir.display().to_string(),
        valid: errors == 0,
        files_checked: c.files,
        errors,
        warnings: c.problems.len() - errors,
        problems: c.problems,
    })
}

struct Checker {
    base: PathBuf,
    problems: Vec<Problem>,
    files: usize,
    /// Workflows `waiting_for_ack`: (state file, workflow id, the god it waits for).
    waiting: Vec<(PathBuf, String, String)>,
    /// Workflow ids of the dispatches found in the inboxes and `_quarantine`.
    dispatched: std::collections::HashSet<String>,
    /// The open dispatches (unacked or pending, in an inbox or `_quarantine`) by workflow and step:
    /// their files and handoff ids.
    open_steps: std::collections::BTreeMap<(String, String), Vec<(PathBuf, String)>>,
}

/// Entries of a directory, sorted, without our own temp files and lock files (dotfiles).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

impl Checker {
    /// The bridge's files (docs/NATS.md): outbox records (pending and sent) and shared-track cursors.
    fn bridge(&mut self, root: &Root) {
        use crate::bridge::track;
        use crate::conductor::outbox;
        use crate::conductor::subject;
        for (dir, sent) in [
            (outbox::outbox_dir(root), false),
            (outbox::sent_dir(root), true),
        ] {
            for f in entries(&dir) {
                if !f.is_file() || f.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let Some(m) = self.object(&f) else { continue };
                let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned());
                match str_field(&m, "outbox_id") {
                    Some(id) if Some(id) == stem.as_deref() => {}
                    Some(id) => self.error(
                        &f,
                        format!("outbox_id {id:?} is not the file's name; the bridge skips it"),
                    ),
                    None => self.error(&f, "outbox_id is missing; the bridge skips it"),
                }
                match str_field(&m, "kind") {
                    Some("request" | "reply") => {}
                    other => self.error(&f, format!("kind {other:?} is not request or reply")),
                }
                match str_field(&m, "subject") {
                    Some(s) => {
                        if let Err(e) = subject::check_subject(s) {
                            self.error(&f, e.to_string());
                        }
                    }
                    None => self.error(&f, "subject is missing"),
                }
                if !str_field(&m, "workflow_id").is_some_and(is_valid_workflow_id) {
                    self.error(&f, "workflow_id is missing or not a workflow id");
                }
                if sent && !m.get("stream_seq").is_some_and(Value::is_u64) {
                    self.warn(&f, "a sent record without its stream_seq");
                }
            }
        }
        for f in entries(&crate::bridge::bridge_dir(root).join("tracks")) {
            if !f.is_file() || f.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(m) = self.object(&f) else { continue };
            for problem in track::check_cursor(&Value::Object(m.clone())) {
                self.error(&f, problem);
            }
            if str_field(&m, "track").map(|t| format!("{t}.json")) != Some(name_of(&f)) {
                self.error(&f, "the cursor's track is not the file's name");
            }
        }
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.base)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    fn report(
        &mut self,
        p: &Path,
        line: Option<usize>,
        severity: Severity,
        msg: impl Into<String>,
    ) {
        self.problems.push(Problem {
            path: self.rel(p),
            line,
            severity,
            message: msg.into(),
        });
    }
    fn error(&mut self, p: &Path, msg: impl Into<String>) {
        self.report(p, None, Severity::Error, msg);
    }
    fn warn(&mut self, p: &Path, msg: impl Into<String>) {
        self.report(p, None, Severity::Warning, msg);
    }

    /// Reads a JSON file that must hold an object; reports and returns `None` otherwise.
    fn object(&mut self, p: &Path) -> Option<Map<String, Value>> {
        self.files += 1;
        match read_json(p) {
            Ok(Some(Value::Object(m))) => Some(m),
            Ok(Some(other)) => {
                self.error(p, format!("expected a JSON object, found {}", kind(&other)));
                None
            }
            Ok(None) => None,
            Err(Error::Corrupt { message, .. }) => {
                self.error(p, format!("not valid JSON: {message}"));
                None
            }
            Err(e) => {
                self.error(p, format!("unreadable: {e}"));
                None
            }
        }
    }

    /// Checks that `k` is a string matching `ok`; `what` names the pattern in the message.
    fn id_field(
        &mut self,
        p: &Path,
        m: &Map<String, Value>,
        k: &str,
        ok: fn(&str) -> bool,
        what: &str,
    ) -> Option<String> {
        match m.get(k) {
            Some(Value::String(s)) if ok(s) => Some(s.clone()),
            Some(Value::String(s)) => {
                self.error(p, format!("`{k}` {s:?} does not match {what}"));
                None
            }
            Some(other) => {
                self.error(p, format!("`{k}` must be a string, found {}", kind(other)));
                None
            }
            None => {
                self.error(p, format!("missing `{k}`"));
                None
            }
        }
    }

    fn timestamp(&mut self, p: &Path, m: &Map<String, Value>, k: &str, line: Option<usize>) {
        match m.get(k) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if parse_ts(s).is_some() => {}
            Some(v) => self.report(
                p,
                line,
                Severity::Error,
                format!("`{k}` {v} is not an RFC 3339 timestamp"),
            ),
        }
    }

    fn string_list(&mut self, p: &Path, m: &Map<String, Value>, k: &str, required: bool) {
        match m.get(k) {
            Some(Value::Array(items)) => {
                if items.iter().any(|i| !i.is_string()) {
                    self.warn(p, format!("`{k}` holds items that are not strings"));
                }
            }
            None if !required => {}
            None => self.error(p, format!("missing `{k}` (a list)")),
            Some(other) => self.error(p, format!("`{k}` must be a list, found {}", kind(other))),
        }
    }

    // ---- Conductor --------------------------------------------------------------------------

    fn handoffs(&mut self, root: &Root) {
        let dir = root.schema_path().parent().map(Path::to_path_buf);
        let Some(dir) = dir else { return };
        let schema = root.schema_path();
        if schema.exists() {
            self.object(&schema);
        } else if dir.is_dir() {
            self.warn(
                &schema,
                "no schema file; the engine's built-in schema is used (`pantheon init` installs it)",
            );
        }
        for wf_dir in entries(&dir) {
            if wf_dir == schema {
                continue;
            }
            let wf = name_of(&wf_dir);
            if !wf_dir.is_dir() {
                self.files += 1;
                self.warn(&wf_dir, "unexpected file in shared/handoffs/");
                continue;
            }
            if !is_valid_workflow_id(&wf) {
                self.error(
                    &wf_dir,
                    format!("directory name {wf:?} is not a workflow id (^wf_[a-z0-9_]{{1,120}}$)"),
                );
            }
            for f in entries(&wf_dir) {
                self.handoff_file(&f, &wf);
            }
        }
    }

    fn handoff_file(&mut self, f: &Path, wf: &str) {
        let name = name_of(f);
        let Some(stem) = name.strip_suffix(".json") else {
            self.files += 1;
            self.error(
                f,
                "not a handoff file (expected {step}.json or {step}.{handoff_id}.json)",
            );
            return;
        };
        let (step, hid) = match stem.split_once('.') {
            Some((s, h)) => (s, Some(h)),
            None => (stem, None),
        };
        let Some(m) = self.object(f) else { return };
        let id = self.id_field(
            f,
            &m,
            "handoff_id",
            is_valid_handoff_id,
            "^hof_\\d{8}_[a-z0-9]{6,8}$",
        );
        if let (Some(id), Some(h)) = (&id, hid)
            && id != h
        {
            self.error(
                f,
                format!("file name says handoff {h} but `handoff_id` is {id}"),
            );
        }
        if let Some(w) = self.id_field(
            f,
            &m,
            "workflow_id",
            is_valid_workflow_id,
            "^wf_[a-z0-9_]{1,120}$",
        ) && w != wf
        {
            self.error(
                f,
                format!("`workflow_id` {w} differs from its directory {wf}"),
            );
        }
        for k in ["from_god", "to_god"] {
            self.id_field(f, &m, k, is_valid_name, "the name pattern");
        }
        if let Some(s) = self.id_field(f, &m, "step", is_valid_name, "the name pattern")
            && s != step
        {
            self.error(
                f,
                format!("`step` {s} differs from the file name's step {step}"),
            );
        }
        match m.get("context") {
            Some(Value::Object(ctx)) => {
                if !ctx.get("summary").is_some_and(Value::is_string) {
                    self.error(f, "`context.summary` must be a string");
                }
                self.string_list(f, ctx, "decisions", true);
                self.string_list(f, ctx, "artifacts", true);
            }
            _ => self.error(f, "missing `context` (an object)"),
        }
    }

    fn definitions(&mut self, root: &Root) {
        let (defs, errors) = load_definitions(root);
        let (rules, rule_errors) = load_rules(root);
        self.files += defs.len() + rule_errors.len() + errors.len();
        let mut rule_files: Vec<&PathBuf> = rules.iter().map(|r| &r.file).collect();
        rule_files.dedup();
        self.files += rule_files.len();
        for e in errors.iter().chain(rule_errors.iter()) {
            let prefix = format!("{}: ", e.path.display());
            let msg = e
                .message
                .strip_prefix(&prefix)
                .unwrap_or(&e.message)
                .to_owned();
            self.error(&e.path, msg);
        }
        // What `pantheon workflows` warns of (a dangling `input_from`), validate warns of too.
        for d in &defs {
            for w in &d.warnings {
                self.warn(&d.path, w.clone());
            }
        }
    }

    fn states(&mut self, root: &Root) {
        for f in entries(&root.state_dir()) {
            let name = name_of(&f);
            if let Some(wf) = name.strip_suffix(layout::ABORTED_SUFFIX) {
                if let Some(m) = self.object(&f) {
                    self.state_identity(&f, &m, wf);
                }
            } else if let Some(wf) = name.strip_suffix(".json") {
                if let Some(m) = self.object(&f) {
                    self.state(&f, &m, wf);
                }
            } else {
                self.files += 1;
                self.warn(&f, "unexpected file in conductor/state/");
            }
        }
    }

    fn state_identity(&mut self, f: &Path, m: &Map<String, Value>, wf: &str) {
        if !is_valid_workflow_id(wf) {
            self.error(f, format!("file name {wf:?} is not a workflow id"));
        }
        if let Some(w) = self.id_field(
            f,
            m,
            "workflow_id",
            is_valid_workflow_id,
            "^wf_[a-z0-9_]{1,120}$",
        ) && w != wf
        {
            self.error(
                f,
                format!("`workflow_id` {w} differs from the file name {wf}"),
            );
        }
        match m.get("status") {
            Some(Value::String(s)) if WorkflowStatus::is_known(s) => {}
            Some(v) => self.error(
                f,
                format!("`status` {v} is not one of {}", WorkflowStatus::list()),
            ),
            None => self.error(f, "missing `status`"),
        }
    }

    fn state(&mut self, f: &Path, m: &Map<String, Value>, wf: &str) {
        self.state_identity(f, m, wf);
        use crate::conductor::model::{AWAITING_REPLY, awaiting_reply, waits_on_a_god};
        let status = WorkflowStatus::parse(str_field(m, "status").unwrap_or_default());
        if waits_on_a_god(&status, awaiting_reply(m.get(AWAITING_REPLY)).is_some()) {
            let god = str_field(m, "dispatched_to").unwrap_or("?").to_owned();
            self.waiting.push((f.to_path_buf(), wf.to_owned(), god));
        }
        for k in ["created", "updated", "aborted_at"] {
            self.timestamp(f, m, k, None);
        }
        match m.get("step_history") {
            None => self.warn(f, "no `step_history`"),
            Some(Value::Array(items)) => {
                for (i, it) in items.iter().enumerate() {
                    let ok = it.as_object().is_some_and(|o| {
                        str_field(o, "step_id").is_some() && str_field(o, "god").is_some()
                    });
                    if !ok {
                        self.error(
                            f,
                            format!("`step_history[{i}]` needs `step_id` and `god` strings"),
                        );
                    }
                }
            }
            Some(v) => self.error(
                f,
                format!("`step_history` must be a list, found {}", kind(v)),
            ),
        }
        match m.get("acks") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, it) in items.iter().enumerate() {
                    let Some(o) = it.as_object() else {
                        self.error(f, format!("`acks[{i}]` must be an object"));
                        continue;
                    };
                    if !str_field(o, "ack_id").is_some_and(is_valid_ack_id) {
                        self.error(f, format!("`acks[{i}].ack_id` is missing or not an ack id"));
                    }
                    if !str_field(o, "status").is_some_and(AckStatus::is_known) {
                        self.error(f, format!("`acks[{i}].status` is missing or unknown"));
                    }
                }
            }
            Some(v) => self.error(f, format!("`acks` must be a list, found {}", kind(v))),
        }
    }

    /// `conductor/pending/` (`inbox`: true) or `conductor/archive/`: one directory per god.
    fn dispatch_tree(&mut self, dir: &Path, inbox: bool) {
        for god_dir in entries(dir) {
            let god = name_of(&god_dir);
            if !god_dir.is_dir() {
                self.files += 1;
                self.warn(
                    &god_dir,
                    "unexpected file (only god directories belong here)",
                );
                continue;
            }
            let quarantine = inbox && god == layout::QUARANTINE_DIR;
            if inbox && crate::conductor::files::is_foreign_pending_dir(&god) {
                self.warn(
                    &god_dir,
                    "a directory another engine keeps here (not a god's inbox); ignored",
                );
                continue;
            }
            if !quarantine && !is_valid_name(&god) {
                self.error(
                    &god_dir,
                    format!("directory name {god:?} is not a god name"),
                );
            }
            for f in entries(&god_dir) {
                let waiting = inbox.then_some(quarantine);
                if let Some(wf) = self.dispatch(&f, (!quarantine).then_some(god.as_str()), waiting)
                    && inbox
                {
                    self.dispatched.insert(wf);
                    if !quarantine {
                        self.deadline(&f);
                    }
                }
            }
        }
    }

    /// Checks one dispatch file; returns its workflow id when it has one. `waiting`: it lies in an
    /// inbox (`Some(true)`: held in `_quarantine`), where the overdue rule applies.
    fn dispatch(&mut self, f: &Path, god: Option<&str>, waiting: Option<bool>) -> Option<String> {
        let name = name_of(f);
        let Some(stem) = name.strip_suffix(".json") else {
            self.files += 1;
            self.error(f, "not a dispatch (expected {handoff_id}.json)");
            return None;
        };
        let m = self.object(f)?;
        let hid = self.id_field(
            f,
            &m,
            "handoff_id",
            is_valid_handoff_id,
            "^hof_\\d{8}_[a-z0-9]{6,8}$",
        );
        if let Some(h) = &hid
            && h != stem
        {
            self.warn(f, format!("named {name}, the protocol names it {h}.json"));
        }
        self.id_field(
            f,
            &m,
            "workflow_id",
            is_valid_workflow_id,
            "^wf_[a-z0-9_]{1,120}$",
        );
        self.id_field(f, &m, "step", is_valid_name, "the name pattern");
        if let Some(to) = self.id_field(f, &m, "to_god", is_valid_name, "the name pattern")
            && let Some(g) = god
            && to != g
        {
            self.warn(f, format!("addressed to {to} but filed under {g}"));
        }
        if !m.get("context").is_some_and(Value::is_object) {
            self.error(f, "missing `context` (an object)");
        }
        if !m.contains_key("dispatch_id") {
            self.warn(f, "no `dispatch_id`");
        }
        match m.get("ack_status") {
            None => self.warn(f, "no `ack_status` (read as unacked)"),
            Some(Value::String(s)) if AckStatus::is_known(s) => {}
            Some(v) => self.error(
                f,
                format!("`ack_status` {v} is not one of {}", AckStatus::list()),
            ),
        }
        self.timestamp(f, &m, "dispatched_at", None);
        if let Some(held) = waiting {
            self.overdue(f, &m, held);
            let open = str_field(&m, "ack_status")
                .map(AckStatus::parse)
                .unwrap_or_default();
            if let (Some(wf), Some(step), Some(h), AckStatus::Unacked | AckStatus::Pending) = (
                str_field(&m, "workflow_id"),
                str_field(&m, "step"),
                hid.as_deref(),
                open,
            ) {
                self.open_steps
                    .entry((wf.to_owned(), step.to_owned()))
                    .or_default()
                    .push((f.to_path_buf(), h.to_owned()));
            }
        }
        str_field(&m, "workflow_id").map(str::to_owned)
    }

    /// An open dispatch whose deadline can never fire is never redelivered (docs/PROTOCOL.md 2.10).
    fn deadline(&mut self, f: &Path) {
        if let Ok(Some(d)) = crate::conductor::files::read_model::<crate::conductor::Dispatch>(f)
            && let Some(why) = crate::conductor::delivery::never_due(&d, chrono::Utc::now())
        {
            self.error(f, why);
        }
    }

    /// The console's overdue rule, with its default limits (`conductor::overdue`).
    fn overdue(&mut self, f: &Path, m: &Map<String, Value>, held: bool) {
        let ack = str_field(m, "ack_status")
            .map(AckStatus::parse)
            .unwrap_or_default();
        let at = str_field(m, "dispatched_at").and_then(parse_ts);
        let rule = crate::conductor::overdue::OverdueRule::default();
        if let Some(o) = rule.check(held, &ack, at, chrono::Utc::now()) {
            let what = if held {
                "approve or reject it"
            } else {
                "its god has not acked it"
            };
            self.warn(f, format!("overdue: {o}; {what}"));
        }
    }

    /// Two open dispatches of one step of one workflow (a dead letter requeued after a rerun
    /// dispatched the step again): only one can ever be acked, the other is redelivered and
    /// dead-lettered again. Each beyond the first is an error naming the others.
    fn doubled_steps(&mut self) {
        for ((wf, step), files) in std::mem::take(&mut self.open_steps) {
            if files.len() < 2 {
                continue;
            }
            for (f, hid) in &files {
                let others: Vec<&str> = files
                    .iter()
                    .filter(|(_, h)| h != hid)
                    .map(|(_, h)| h.as_str())
                    .collect();
                self.error(
                    f,
                    format!(
                        "a second open dispatch of step {step} of {wf} (also open: {}): only one can ever be acked, the other is redelivered and dead-lettered again",
                        others.join(", ")
                    ),
                );
            }
        }
    }

    /// A workflow `waiting_for_ack` with no dispatch in any inbox or `_quarantine` waits for an ack
    /// nobody can send (a foreign cleanup deleted the dispatch outright). One waiting at an
    /// `await_ack` step for a peer's reply has no dispatch and is not listed (`waits_on_a_god`).
    fn orphaned_waits(&mut self) {
        for (f, wf, god) in std::mem::take(&mut self.waiting) {
            if !self.dispatched.contains(&wf) {
                self.warn(
                    &f,
                    format!(
                        "waiting_for_ack from {god}, but no dispatch of {wf} is in any inbox \
                         (deleted?); `pantheon redispatch {wf}` writes it again from the state"
                    ),
                );
            }
        }
    }

    // ---- Bus --------------------------------------------------------------------------------

    fn tracks(&mut self, root: &Root) {
        for t in entries(&root.tracks_dir()) {
            let track = name_of(&t);
            if !t.is_dir() {
                self.files += 1;
                self.warn(&t, "unexpected file in conductor/tracks/");
                continue;
            }
            if !is_valid_name(&track) {
                self.error(&t, format!("directory name {track:?} is not a track name"));
            }
            let bus = t.join(layout::BUS_DIR);
            if bus.is_dir() {
                self.bus(&bus);
            }
        }
    }

    fn bus(&mut self, dir: &Path) {
        for f in entries(dir) {
            let name = name_of(&f);
            match BusEntry::of(&name) {
                Some(BusEntry::Locks) => self.locks(&f),
                Some(BusEntry::Workers) => self.workers(&f),
                Some(BusEntry::Events) => self.events(&f),
                Some(BusEntry::Board) => self.board(&f),
                Some(BusEntry::Queue | BusEntry::QueueArchive) => self.jsonl(&f, Self::envelope),
                Some(BusEntry::Fencing) => self.fencing(&f),
                _ => {
                    self.files += 1;
                    self.warn(&f, "unexpected file in the message bus");
                }
            }
        }
    }

    /// Checks each line of a JSONL file: blank lines are warnings; lines that are not JSON objects,
    /// an unterminated last line (a writer died mid-line) and a line over the readers' 4 MiB limit are
    /// errors. The file is streamed (memory holds one line), so a queue of any size is checked.
    fn jsonl(&mut self, f: &Path, check: fn(&mut Self, &Path, usize, &Map<String, Value>)) {
        use crate::bus::queue::{Line, MAX_LINE_BYTES, next_line};
        self.files += 1;
        let file = match crate::store::read::open_regular(f) {
            Ok(Some(file)) => file,
            Ok(None) => return,
            Err(e) => {
                self.error(f, format!("unreadable: {e}"));
                return;
            }
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::with_capacity(512);
        let mut no = 0;
        loop {
            no += 1;
            match next_line(&mut reader, &mut line, MAX_LINE_BYTES) {
                Err(e) => {
                    self.error(f, format!("unreadable: {e}"));
                    return;
                }
                Ok(Line::Eof) => return,
                Ok(Line::Unterminated) => {
                    self.report(
                        f,
                        Some(no),
                        Severity::Error,
                        "torn last line: no newline at the end (a writer died mid-line); readers skip it",
                    );
                    return;
                }
                Ok(Line::Oversized { len }) => self.report(
                    f,
                    Some(no),
                    Severity::Error,
                    format!(
                        "line of {len} bytes, over the {} MiB line limit; readers skip it",
                        MAX_LINE_BYTES >> 20
                    ),
                ),
                Ok(Line::Complete { .. }) if line.iter().all(u8::is_ascii_whitespace) => {
                    self.report(f, Some(no), Severity::Warning, "blank line");
                }
                Ok(Line::Complete { .. }) => match serde_json::from_slice::<Value>(&line) {
                    Ok(Value::Object(m)) => check(self, f, no, &m),
                    Ok(other) => self.report(
                        f,
                        Some(no),
                        Severity::Error,
                        format!("expected a JSON object, found {}", kind(&other)),
                    ),
                    Err(e) => self.report(
                        f,
                        Some(no),
                        Severity::Error,
                        format!("not JSON ({e}); readers skip it"),
                    ),
                },
            }
        }
    }

    fn envelope(&mut self, f: &Path, no: usize, m: &Map<String, Value>) {
        let mut bad = Vec::new();
        if str_field(m, "id").is_none_or(str::is_empty) {
            bad.push("`id` must be a non-empty string".to_owned());
        }
        match str_field(m, "type") {
            Some(t) if is_valid_type(t) => {}
            _ => bad.push("`type` must match ^[A-Z][A-Z0-9_]*$".to_owned()),
        }
        if str_field(m, "source").is_none_or(str::is_empty) {
            bad.push("`source` must be a non-empty string".to_owned());
        }
        if str_field(m, "timestamp").is_none_or(|s| parse_ts(s).is_none()) {
            bad.push("`timestamp` must be an RFC 3339 timestamp".to_owned());
        }
        if !m.get("payload").is_some_and(Value::is_object) {
            bad.push("`payload` must be an object".to_owned());
        }
        for b in bad {
            self.report(f, Some(no), Severity::Error, b);
        }
    }

    fn locks(&mut self, f: &Path) {
        let Some(m) = self.object(f) else { return };
        for (path, v) in &m {
            match v {
                Value::String(_) => self.warn(
                    f,
                    format!("lock {path:?} is a bare holder string (no expiry); the protocol writes an object"),
                ),
                Value::Object(o) => {
                    if str_field(o, "worker_id").is_none_or(str::is_empty) {
                        self.error(f, format!("lock {path:?} has no `worker_id`"));
                    }
                    if !o.contains_key("expires_at") {
                        self.warn(f, format!("lock {path:?} has no `expires_at` (no expiry)"));
                    }
                    self.timestamp(f, o, "expires_at", None);
                    self.timestamp(f, o, "acquired_at", None);
                }
                other => self.error(
                    f,
                    format!("lock {path:?} must be an object, found {}", kind(other)),
                ),
            }
        }
    }

    /// `fencing.json`: `{key: highest token given out}` (docs/PROTOCOL.md 3.4).
    fn fencing(&mut self, f: &Path) {
        use crate::bus::fencing::MAX_TOKEN;
        let Some(m) = self.object(f) else { return };
        for (key, v) in &m {
            match v.as_u64() {
                Some(t) if t >= MAX_TOKEN => self.warn(
                    f,
                    format!(
                        "token {t} of {key:?} is at or above the limit {MAX_TOKEN} (never given out \
                         by an engine); the next acquire ignores it"
                    ),
                ),
                Some(_) => {}
                None => self.error(
                    f,
                    format!(
                        "the mark of {key:?} is {}, not a token; the next acquire rebuilds the marks \
                         from locks.json and the queue",
                        kind(v)
                    ),
                ),
            }
        }
    }

    fn workers(&mut self, f: &Path) {
        let Some(m) = self.object(f) else { return };
        for (w, v) in &m {
            let Some(o) = v.as_object() else {
                self.error(
                    f,
                    format!("worker {w:?} must be an object, found {}", kind(v)),
                );
                continue;
            };
            match str_field(o, "status") {
                Some(s) if WorkerWord::parse(s).is_some() => {}
                Some(WORKER_COMPLETED_ALIAS) => self.warn(
                    f,
                    format!(
                        "worker {w:?} status {WORKER_COMPLETED_ALIAS} (read as {})",
                        WorkerWord::Complete
                    ),
                ),
                other => self.error(
                    f,
                    format!(
                        "worker {w:?} status {other:?} is not one of {}",
                        WorkerWord::list()
                    ),
                ),
            }
            if !o.contains_key("last_heartbeat") {
                self.warn(f, format!("worker {w:?} has no `last_heartbeat`"));
            }
            self.timestamp(f, o, "last_heartbeat", None);
            match o.get("progress_pct") {
                None | Some(Value::Null) => {}
                Some(Value::Number(n))
                    if n.as_f64().is_some_and(|p| (0.0..=100.0).contains(&p)) => {}
                Some(v) => self.error(
                    f,
                    format!("worker {w:?} progress_pct {v} is not a number 0–100"),
                ),
            }
        }
    }

    fn events(&mut self, dir: &Path) {
        for f in entries(dir) {
            self.files += 1;
            let name = name_of(&f);
            let ok = name.strip_suffix(".event").is_some_and(|stem| {
                let kind: String = stem
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                !kind.is_empty() && is_valid_type(kind.trim_end_matches('_'))
            });
            if !ok || !f.is_file() {
                self.error(&f, "not an event file (expected {TYPE}_{key}.event)");
            }
        }
    }

    fn board(&mut self, dir: &Path) {
        for f in entries(dir) {
            let name = name_of(&f);
            match BoardEntry::of(&name) {
                Some(BoardEntry::Assessments) => self.assessments(&f),
                Some(BoardEntry::Votes) => self.votes(&f),
                Some(BoardEntry::Discussion) => self.jsonl(&f, Self::discussion),
                Some(BoardEntry::Resolution) => self.files += 1,
                Some(BoardEntry::Archive) if f.is_dir() => {
                    for d in entries(&f) {
                        if d.is_dir() {
                            self.board(&d);
                        } else {
                            self.files += 1;
                            self.warn(&d, "unexpected file in board/archive/");
                        }
                    }
                }
                Some(BoardEntry::Session(id)) => self.session(&f, &id),
                _ => {
                    self.files += 1;
                    self.warn(&f, "unexpected file in board/");
                }
            }
        }
    }

    fn session(&mut self, f: &Path, id: &str) {
        let Some(m) = self.object(f) else { return };
        match str_field(&m, "session_id") {
            Some(s) if s == id => {}
            Some(s) => self.error(
                f,
                format!("`session_id` {s} differs from the file name's {id}"),
            ),
            None => self.error(f, "missing `session_id`"),
        }
        match str_field(&m, "status") {
            Some(s) if SessionStatus::parse(s).is_some() => {}
            other => self.error(
                f,
                format!("`status` {other:?} is not one of {}", SessionStatus::list()),
            ),
        }
        match str_field(&m, "checkpoint") {
            Some(s) if Checkpoint::parse(s).is_some() => {}
            Some(s) => self.warn(
                f,
                format!("checkpoint {s:?} is not one of {}", Checkpoint::list()),
            ),
            None => self.error(f, "missing `checkpoint`"),
        }
        self.string_list(f, &m, "directors", true);
        if !m.get("phases").is_some_and(Value::is_object) {
            self.error(f, "missing `phases` (an object)");
        }
        self.timestamp(f, &m, "started_at", None);
    }

    fn assessments(&mut self, f: &Path) {
        let Some(m) = self.object(f) else { return };
        for (d, v) in &m {
            let Some(o) = v.as_object() else {
                self.error(f, format!("assessment of {d} must be an object"));
                continue;
            };
            if str_field(o, "verdict").is_none_or(|s| AssessVerdict::parse(s).is_none()) {
                self.error(
                    f,
                    format!(
                        "assessment of {d}: `verdict` must be one of {}",
                        AssessVerdict::list()
                    ),
                );
            }
            if !o
                .get("score")
                .and_then(Value::as_f64)
                .is_some_and(|s| (1.0..=10.0).contains(&s))
            {
                self.error(
                    f,
                    format!("assessment of {d}: `score` must be a number 1–10"),
                );
            }
        }
    }

    fn votes(&mut self, f: &Path) {
        let Some(m) = self.object(f) else { return };
        for (d, v) in &m {
            let Some(o) = v.as_object() else {
                self.error(f, format!("vote of {d} must be an object"));
                continue;
            };
            if str_field(o, "final_verdict").is_none_or(|s| VoteVerdict::parse(s).is_none()) {
                self.error(
                    f,
                    format!(
                        "vote of {d}: `final_verdict` must be one of {}",
                        VoteVerdict::list()
                    ),
                );
            }
            if !o
                .get("confidence")
                .and_then(Value::as_f64)
                .is_some_and(|c| (0.0..=1.0).contains(&c))
            {
                self.error(f, format!("vote of {d}: `confidence` must be a number 0–1"));
            }
        }
    }

    fn discussion(&mut self, f: &Path, no: usize, m: &Map<String, Value>) {
        for k in ["from", "to", "type", "message"] {
            if !m.get(k).is_some_and(Value::is_string) {
                self.report(f, Some(no), Severity::Warning, format!("no `{k}`"));
            }
        }
        if let Some(t) = str_field(m, "type")
            && DiscussKind::parse(t).is_none()
        {
            self.report(
                f,
                Some(no),
                Severity::Error,
                format!("`type` {t:?} is not one of {}", DiscussKind::list()),
            );
        }
    }
}

/// `pantheon validate`'s check of the journal: every break of the chain, as errors.
fn journal_problems(root: &Root) -> Vec<Problem> {
    let v = match crate::journal::verify(root) {
        Ok(v) => v,
        Err(e) => {
            return vec![Problem {
                path: "conductor/journal.jsonl".into(),
                line: None,
                severity: Severity::Error,
                message: format!("the journal cannot be read: {e}"),
            }];
        }
    };
    v.problems
        .into_iter()
        .map(|p| Problem {
            path: p.file.unwrap_or_else(|| "conductor/journal.jsonl".into()),
            line: p.line,
            severity: Severity::Error,
            message: format!("{} (see `pantheon journal --verify`)", p.message),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_and_non_json_queue_lines_are_errors_and_blank_lines_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let bus = dir.path().join("conductor/tracks/t/.message-bus");
        std::fs::create_dir_all(&bus).unwrap();
        std::fs::write(
            bus.join("queue.jsonl"),
            "{\"id\":\"m1\",\"type\":\"PROGRESS\",\"source\":\"w\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"payload\":{}}\n\nnope\n{\"id\":\"m2\",\"type\":\"bad type\"",
        )
        .unwrap();
        let r = validate_root(&Root::at(dir.path())).unwrap();
        let lines: Vec<(Option<usize>, Severity)> =
            r.problems.iter().map(|p| (p.line, p.severity)).collect();
        assert_eq!(
            lines,
            vec![
                (Some(2), Severity::Warning),
                (Some(3), Severity::Error),
                (Some(4), Severity::Error)
            ]
        );
        assert!(!r.valid);
    }

    #[test]
    fn an_envelope_with_a_bad_type_and_no_payload_is_reported_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let bus = dir.path().join("conductor/tracks/t/.message-bus");
        std::fs::create_dir_all(&bus).unwrap();
        std::fs::write(
            bus.join("queue.jsonl"),
            "{\"id\":\"m1\",\"type\":\"lower\",\"source\":\"w\",\"timestamp\":\"yesterday\"}\n",
        )
        .unwrap();
        let r = validate_root(&Root::at(dir.path())).unwrap();
        let msgs: Vec<&str> = r.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("`type`")));
        assert!(msgs.iter().any(|m| m.contains("`timestamp`")));
        assert!(msgs.iter().any(|m| m.contains("`payload`")));
    }
}
