//! Where usage meets the Conductor: the report an act carries, the budget hold decided before it
//! routes, the report recorded in the state it commits, and the ledger line and warnings after.
//! With no usage and no budget declared, none of this reads a file.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::budget::{
    Budget, CostConfig, Crossing, MAX_STATE_KEYS, Raised, STATE_USAGE, StateUsage, Subject,
    crossed, declared, neared,
};
use super::ledger::{self, Line};
use super::usage::{self, Totals, Usage};
use crate::conductor::model::WorkflowState;
use crate::conductor::{Conductor, WorkflowDef};
use crate::error::Result;
use crate::store::Root;
use crate::store::time::now_ts;

/// A usage report carried by an act, priced, as its ledger line.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The line the ledger gets.
    pub line: Line,
}

/// Where a report comes from and what it is for.
#[derive(Debug, Clone, Default)]
pub struct Origin<'a> {
    /// The report's unique key.
    pub key: String,
    /// `handoff`, `ack` or `bus`.
    pub source: &'a str,
    /// The workflow.
    pub workflow_id: &'a str,
    /// Its definition.
    pub definition: Option<&'a str>,
    /// The step.
    pub step: Option<&'a str>,
    /// The reporting god.
    pub god: &'a str,
    /// The bus track.
    pub track: Option<&'a str>,
    /// The board session.
    pub session: Option<&'a str>,
}

impl Report {
    /// Prices `u` with the root's table and makes its line.
    pub fn new(root: &Root, u: &Usage, o: Origin<'_>) -> Self {
        Self::priced(&CostConfig::parse(root.settings.cost.as_ref()), u, o)
    }

    /// Prices `u` with `cfg`'s table (parsed once for many reports) and makes its line.
    pub(crate) fn priced(cfg: &CostConfig, u: &Usage, o: Origin<'_>) -> Self {
        let (cost_micros, priced) = cfg.prices.cost(u);
        let s = |v: Option<&str>| v.map(str::to_owned);
        Report {
            line: Line {
                key: o.key,
                at: now_ts(),
                source: o.source.to_owned(),
                workflow_id: o.workflow_id.to_owned(),
                definition: s(o.definition),
                step: s(o.step),
                god: o.god.to_owned(),
                track: s(o.track),
                session: s(o.session),
                model: u.model.clone(),
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cache_read_tokens: u.cache_read_tokens,
                cache_write_tokens: u.cache_write_tokens,
                cost_micros,
                priced,
            },
        }
    }

    /// The report of a document's `usage` (already validated; an invalid one is none).
    pub(crate) fn of_document(root: &Root, doc: &Value, o: Origin<'_>) -> Option<Self> {
        let u = usage::of_document(doc, "/usage").ok()??;
        Some(Self::new(root, &u, o))
    }
}

/// A budget hold: why (for `held_because`) and the figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// `budget: workflow wf_x: $1.200000 of its $1.000000 budget; …`.
    pub because: String,
    /// `{crossed: [{scope, name, metric, used, limit}]}`.
    pub figures: Value,
}

/// Every budget that applies to a workflow and its next dispatch, with the usage recorded against
/// each (the act's own report included). `god`: the god whose budget counts (the dispatch's target,
/// or the reporter for warnings). Empty when nothing is declared: then no file is read.
pub(crate) fn subjects(
    root: &Root,
    workflow_id: &str,
    state: Option<&WorkflowState>,
    def: Option<&WorkflowDef>,
    god: Option<&str>,
    report: Option<&Report>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Subject>> {
    let (wf_budget, step_budgets) = match def {
        Some(d)
            if d.extra.contains_key("budget")
                || d.steps.iter().any(|s| s.extra.contains_key("budget")) =>
        {
            declared(d, warnings)
        }
        _ => (None, BTreeMap::new()),
    };
    let raised = state
        .filter(|s| s.extra.contains_key(super::budget::STATE_BUDGET))
        .map(|s| Raised::of(&s.extra))
        .unwrap_or_default();
    let mut out = Vec::new();
    let wf_b = raised.workflow.or(wf_budget);
    let mut steps: BTreeMap<String, Budget> = step_budgets;
    for (s, b) in &raised.steps {
        steps.insert(s.clone(), *b);
    }
    // The common case, no budget anywhere: nothing built, nothing read.
    if wf_b.is_none() && steps.is_empty() && root.settings.cost.is_none() {
        return Ok(out);
    }
    let cfg = match root.settings.cost {
        Some(_) => CostConfig::of_root(root),
        None => CostConfig::default(),
    };
    if wf_b.is_none() && steps.is_empty() && !cfg.has_root_budgets() {
        return Ok(out);
    }
    let mine = report.map(|r| r.line.totals()).unwrap_or_default();
    let recorded = state.map(|s| StateUsage::of(&s.extra)).unwrap_or_default();
    if let Some(b) = wf_b {
        let mut used = recorded.total;
        used.merge(&mine);
        out.push(Subject {
            scope: "workflow",
            name: workflow_id.to_owned(),
            budget: b,
            used,
        });
    }
    for (s, b) in steps {
        let mut used = recorded.steps.get(&s).copied().unwrap_or_default();
        if report.is_some_and(|r| r.line.step.as_deref() == Some(s.as_str())) {
            used.merge(&mine);
        }
        out.push(Subject {
            scope: "step",
            name: format!("{workflow_id}/{s}"),
            budget: b,
            used,
        });
    }
    if cfg.has_root_budgets() {
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let god_budget = god.and_then(|g| cfg.gods.get(g).map(|b| (g, *b)));
        let day_budget = cfg.day_budget(&today);
        if god_budget.is_some() || day_budget.is_some() {
            let summary = ledger::summary(root)?;
            if let Some((g, b)) = god_budget {
                let mut used = summary.of("god", g);
                if report.is_some_and(|r| r.line.god == g) {
                    used.merge(&mine);
                }
                out.push(Subject {
                    scope: "god",
                    name: g.to_owned(),
                    budget: b,
                    used,
                });
            }
            if let Some(b) = day_budget {
                let mut used = summary.of("day", &today);
                used.merge(&mine);
                out.push(Subject {
                    scope: "day",
                    name: today,
                    budget: b,
                    used,
                });
            }
        }
    }
    Ok(out)
}

/// The hold of a dispatch to `target_god`, when a budget of the workflow, its steps, that god or the
/// day has been reached (the act's own report counted first).
pub fn hold(
    root: &Root,
    workflow_id: &str,
    state: Option<&WorkflowState>,
    def: Option<&WorkflowDef>,
    target_god: &str,
    report: Option<&Report>,
    warnings: &mut Vec<String>,
) -> Result<Option<Hold>> {
    let subjects = subjects(
        root,
        workflow_id,
        state,
        def,
        Some(target_god),
        report,
        warnings,
    )?;
    if subjects.is_empty() {
        return Ok(None);
    }
    Ok(hold_of(&crossed(&subjects)))
}

/// The hold that `crossings` make (none when empty).
pub(crate) fn hold_of(crossings: &[Crossing]) -> Option<Hold> {
    if crossings.is_empty() {
        return None;
    }
    Some(Hold {
        because: format!(
            "budget: {}",
            crossings
                .iter()
                .map(Crossing::text)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        figures: json!({ "crossed": crossings.iter().map(Crossing::to_json).collect::<Vec<_>>() }),
    })
}

/// True when the state already records the report `key`.
pub(crate) fn recorded(st: &WorkflowState, key: &str) -> bool {
    st.extra
        .get(STATE_USAGE)
        .and_then(|u| u.get("keys"))
        .and_then(Value::as_array)
        .is_some_and(|keys| keys.iter().any(|k| k.as_str() == Some(key)))
}

/// Records a report in the state (once per key): the workflow's and its step's totals.
pub(crate) fn record(st: &mut WorkflowState, r: &Report) {
    record_many(st, std::slice::from_ref(r), |_| false);
}

/// Records many reports in the state at once (the state's usage read and written once): each report
/// whose key the state does not list and `known` does not say was recorded already. Returns how
/// many were recorded.
pub(crate) fn record_many(
    st: &mut WorkflowState,
    reports: &[Report],
    known: impl Fn(&str) -> bool,
) -> usize {
    let mut u = StateUsage::of(&st.extra);
    let mut seen: std::collections::HashSet<String> = u.keys.iter().cloned().collect();
    let mut n = 0;
    for r in reports {
        if known(&r.line.key) || !seen.insert(r.line.key.clone()) {
            continue;
        }
        let t: Totals = r.line.totals();
        u.total.merge(&t);
        if let Some(s) = &r.line.step {
            u.steps.entry(s.clone()).or_default().merge(&t);
        }
        u.keys.push(r.line.key.clone());
        n += 1;
    }
    if n == 0 {
        return 0;
    }
    if u.keys.len() > MAX_STATE_KEYS {
        let cut = u.keys.len() - MAX_STATE_KEYS;
        u.keys.drain(..cut);
    }
    st.extra.insert(
        STATE_USAGE.into(),
        serde_json::to_value(&u).unwrap_or(Value::Null),
    );
    n
}

impl Conductor {
    /// After an act committed a report: its ledger line, its marker removed, the budget warnings it
    /// brought past their share fired once. Never fails the act: problems come back as warnings.
    pub(crate) fn after_report(
        &self,
        st: &WorkflowState,
        def: Option<&WorkflowDef>,
        r: &Report,
    ) -> Vec<String> {
        let root = self.root();
        let mut warnings = Vec::new();
        if let Err(e) = ledger::finish_marker(root, &r.line) {
            warnings.push(format!(
                "usage recorded in the workflow but not yet in the ledger ({e}); the next supervisor pass adds it"
            ));
            return warnings;
        }
        self.budget_warnings(&r.line.workflow_id, st, def, &r.line.god, &mut warnings);
        warnings
    }

    /// Fires once each budget warning that reports of `god` in `workflow_id` (its state `st`, the
    /// reports recorded) brought past its share.
    pub(crate) fn budget_warnings(
        &self,
        workflow_id: &str,
        st: &WorkflowState,
        def: Option<&WorkflowDef>,
        god: &str,
        warnings: &mut Vec<String>,
    ) {
        let root = self.root();
        match subjects(root, workflow_id, Some(st), def, Some(god), None, warnings) {
            Ok(subjects) if !subjects.is_empty() => {
                let warn_at = CostConfig::parse(root.settings.cost.as_ref()).warn_at;
                for c in neared(&subjects, warn_at) {
                    if let Err(e) = ledger::fire_once(root, &c, warn_at) {
                        warnings.push(format!("budget warning not recorded: {e}"));
                    }
                }
            }
            Ok(_) => {}
            Err(e) => warnings.push(format!("budgets not checked after the report: {e}")),
        }
    }

    /// Finishes the report `key` a killed act left as a marker, when the state records it.
    pub(crate) fn settle_report(&self, st: &WorkflowState, key: &str) -> Vec<String> {
        let root = self.root();
        let Some(m) = ledger::read_marker(root, key) else {
            return Vec::new();
        };
        if recorded(st, key) {
            let def = st.definition_id.as_deref().and_then(|d| {
                crate::conductor::definition::find_definition(root, d)
                    .ok()
                    .flatten()
            });
            self.after_report(st, def.as_ref(), &Report { line: m.line })
        } else {
            Vec::new()
        }
    }
}
