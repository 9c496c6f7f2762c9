//! The ledger's part of the live model (docs/BUDGETS.md): `conductor/cost/ledger.jsonl` followed
//! from an offset (only new lines are read), `attention.jsonl` (the budget warnings) the same way,
//! and `budgets.json` (raised god and day budgets) re-read when it changes. On first sight of a
//! long ledger only its tail is read line by line; the totals then start from the engine's summary.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::engine::{
    CostConfig, Root,
    ledger::{self, Line},
    time::parse_ts,
};

use super::super::files::{Fingerprint, LogChange, LogCursor};
use super::super::ledger::{BUCKETS_KEPT, LedgerView, Warning, bucket_of};

/// How much of a ledger's end is read line by line on first sight (recent spend, per-workflow
/// figures); the totals of what lies before come from the engine's summary.
pub(super) const LEDGER_TAIL_BYTES: u64 = 16 * 1024 * 1024;
/// How much of the warnings file is read on first sight.
const WARNINGS_TAIL_BYTES: u64 = 4 * 1024 * 1024;
/// Longest warning line read; a longer one is skipped.
const MAX_WARNING_LINE: u64 = 64 * 1024;
/// The most warnings kept (the newest).
const MAX_WARNINGS: usize = 10_000;
/// The most workflows whose per-god figures are kept; past it they start again from the next line
/// (a workflow's detail then says how many of its reports lie before).
const MAX_WORKFLOWS: usize = 100_000;

/// Which cost file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum CostPart {
    Ledger,
    Warnings,
    Raised,
    All,
}

/// Which cost file `path` is, if it is one.
pub(super) fn part_of(root: &Root, path: &Path) -> Option<CostPart> {
    if path == ledger::ledger_path(root) {
        Some(CostPart::Ledger)
    } else if path == ledger::attention_path(root) {
        Some(CostPart::Warnings)
    } else if path == ledger::raised_path(root) {
        Some(CostPart::Raised)
    } else if path == ledger::cost_dir(root) {
        Some(CostPart::All)
    } else {
        // The summary, the markers, the lock, the bus cursors: nothing the console shows.
        None
    }
}

/// The directory to watch.
pub(super) fn watched(root: &Root) -> PathBuf {
    ledger::cost_dir(root)
}

/// The cost files as last read.
#[derive(Debug, Default)]
pub(super) struct CostTracker {
    view: LedgerView,
    ledger: LogCursor,
    warnings: LogCursor,
    warning_keys: HashSet<String>,
    raised: Option<Option<Fingerprint>>,
    published: Option<Arc<LedgerView>>,
    /// The bucket of the newest line read.
    newest: Option<i64>,
}

impl CostTracker {
    /// Reads what changed of `part`; true when the view changed.
    pub(super) fn refresh(&mut self, root: &Root, part: CostPart) -> bool {
        let mut changed = false;
        if matches!(part, CostPart::Ledger | CostPart::All) {
            changed |= self.read_ledger(root);
        }
        if matches!(part, CostPart::Warnings | CostPart::All) {
            changed |= self.read_warnings(root);
        }
        if matches!(part, CostPart::Raised | CostPart::All) {
            changed |= self.read_budgets(root);
        }
        if changed {
            self.published = None;
        }
        changed
    }

    /// The view to publish (shared until it changes).
    pub(super) fn view(&mut self) -> Arc<LedgerView> {
        self.published
            .get_or_insert_with(|| Arc::new(self.view.clone()))
            .clone()
    }

    fn read_budgets(&mut self, root: &Root) -> bool {
        let fp = Fingerprint::of(&ledger::raised_path(root));
        if self.raised.as_ref() == Some(&fp) {
            return false;
        }
        self.raised = Some(fp);
        let cfg = CostConfig::of_root(root);
        self.view.god_budgets = cfg.gods;
        self.view.day_budget = cfg.day;
        self.view.day_budgets = cfg.days;
        self.view.warn_at = cfg.warn_at;
        true
    }

    fn read_ledger(&mut self, root: &Root) -> bool {
        let path = ledger::ledger_path(root);
        let first = match self.ledger.check(&path, LEDGER_TAIL_BYTES) {
            LogChange::Unchanged => return false,
            LogChange::Appended => self.view.total.reports == 0 && self.view.from == 0,
            LogChange::Removed | LogChange::Replaced => {
                self.reset_ledger();
                true
            }
        };
        let start = self.ledger.offset();
        // Lines ending at or before `counted` are in the totals already (the engine's summary).
        let mut counted = 0;
        if first && start > 0 {
            match ledger::summary(root) {
                Ok(s) => {
                    counted = s.offset;
                    self.view.total = s.total;
                    for (g, t) in s.by.get("god").into_iter().flatten() {
                        self.view.gods.entry(g.clone()).or_default().total = *t;
                    }
                    for (d, t) in s.by.get("day").into_iter().flatten() {
                        self.view.days.insert(d.clone(), *t);
                    }
                }
                Err(e) => self.view.error = Some(e.to_string()),
            }
            self.view.from = start;
        }
        // The last day before the newest line read (not before the clock: a root whose gods went
        // quiet still shows its last day's spend).
        let view = &mut self.view;
        let newest = &mut self.newest;
        let read = ledger::read_from(root, start, |line, end| {
            fold(view, newest, &line, end > counted);
        });
        let oldest = self.newest.map_or(0, |b| b - BUCKETS_KEPT);
        match read {
            Ok(end) => {
                self.ledger.advance_to(end);
                self.view.error = None;
                if self.view.workflows.len() > MAX_WORKFLOWS {
                    self.view.workflows.clear();
                    self.view.from = end;
                }
            }
            Err(e) => self.view.error = Some(e.to_string()),
        }
        for g in self.view.gods.values_mut() {
            g.buckets = g.buckets.split_off(&oldest);
        }
        true
    }

    fn reset_ledger(&mut self) {
        let v = &mut self.view;
        v.total = Default::default();
        v.gods.clear();
        v.days.clear();
        v.workflows.clear();
        v.from = 0;
        self.newest = None;
    }

    fn read_warnings(&mut self, root: &Root) -> bool {
        let path = ledger::attention_path(root);
        match self.warnings.check(&path, WARNINGS_TAIL_BYTES) {
            LogChange::Unchanged => return false,
            LogChange::Appended => {}
            LogChange::Removed | LogChange::Replaced => {
                self.view.warnings.clear();
                self.warning_keys.clear();
            }
        }
        let Ok(Some(mut f)) = crate::engine::open_regular(&path) else {
            return true;
        };
        if f.seek(SeekFrom::Start(self.warnings.offset())).is_err() {
            return true;
        }
        let mut r = BufReader::new(f);
        let mut pos = self.warnings.offset();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let Ok(n) = (&mut r).take(MAX_WARNING_LINE).read_until(b'\n', &mut buf) else {
                break;
            };
            if n == 0 || buf.last() != Some(&b'\n') {
                // The end, a line being written, or an oversized one (left unread).
                break;
            }
            pos += n as u64;
            if let Some(w) = serde_json::from_slice::<Value>(&buf)
                .ok()
                .as_ref()
                .and_then(warning_of)
                && self.warning_keys.insert(w.key.clone())
            {
                self.view.warnings.push(w);
            }
        }
        self.warnings.advance_to(pos);
        let over = self.view.warnings.len().saturating_sub(MAX_WARNINGS);
        self.view.warnings.drain(..over);
        true
    }
}

/// Folds one ledger line into the view: the totals when `count` (else the summary has it), recent
/// spend and the workflow's per-god figures always.
fn fold(view: &mut LedgerView, newest: &mut Option<i64>, line: &Line, count: bool) {
    let t = line.totals();
    let god = view.gods.entry(line.god.clone()).or_default();
    if count {
        god.total.merge(&t);
        view.total.merge(&t);
        view.days.entry(line.day()).or_default().merge(&t);
    }
    // A line dated in the future (a writer's clock, or a hostile line) would push every real
    // bucket out of the day kept: its spend counts in the totals, not in the recent spend.
    let future = chrono::Utc::now() + chrono::Duration::hours(1);
    if let Some(at) = parse_ts(&line.at).filter(|t| *t <= future) {
        let b = bucket_of(at);
        let top = newest.map_or(b, |n| n.max(b));
        *newest = Some(top);
        if b > top - BUCKETS_KEPT {
            let v = god.buckets.entry(b).or_default();
            *v = v.saturating_add(line.cost_micros);
        }
    }
    let wf = view
        .workflows
        .entry(Arc::from(line.workflow_id.as_str()))
        .or_default();
    Arc::make_mut(wf)
        .entry(line.god.clone())
        .or_default()
        .merge(&t);
}

/// A warning line as the engine writes it (`kind: budget_warning`); anything else is left out.
fn warning_of(v: &Value) -> Option<Warning> {
    if v.get("kind").and_then(Value::as_str) != Some("budget_warning") {
        return None;
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let n = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
    let w = Warning {
        key: s("key")?,
        at: s("at").as_deref().and_then(parse_ts),
        scope: s("scope")?,
        name: s("name")?,
        metric: s("metric")?,
        used: n("used")?,
        limit: n("limit")?,
        warn_at: n("warn_at").unwrap_or(crate::engine::DEFAULT_WARN_AT),
        reached: v.get("reached").and_then(Value::as_bool).unwrap_or(false),
    };
    (w.key.len() <= 1024 && w.name.len() <= 512).then_some(w)
}
