//! What the console shows of cost (docs/BUDGETS.md): the ledger's totals, per god with its recent
//! spend in five-minute buckets (burn rate and sparkline), per workflow and god, the budgets the root
//! and the definitions declare with what is used of each, and the budget warnings the engine fired.
//! The live model keeps it up to date from the ledger's new lines; these are pure reads of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::engine::{Budget, Raised, StateUsage, Totals, declared_budgets};

use super::snapshot::{Snapshot, Sym, WorkflowView};

/// The width of one bucket of recent spend, in seconds.
pub(crate) const BUCKET_SECS: i64 = 300;
/// How many buckets a god keeps: one day.
pub(crate) const BUCKETS_KEPT: i64 = 24 * 3600 / BUCKET_SECS;

/// The bucket an instant falls in.
pub(crate) fn bucket_of(t: DateTime<Utc>) -> i64 {
    t.timestamp().div_euclid(BUCKET_SECS)
}

/// One god's cost: its totals and its recent spend.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GodCost {
    /// Every report of the god (the ledger's summary and the lines after it).
    pub total: Totals,
    /// Micro-dollars per five-minute bucket, for the last day of the lines read.
    pub buckets: BTreeMap<i64, u64>,
}

impl GodCost {
    /// Micro-dollars spent in the hour before `now` (the current bucket included): the burn rate
    /// per hour.
    pub fn burn_per_hour(&self, now: DateTime<Utc>) -> u64 {
        let end = bucket_of(now);
        let start = end - 3600 / BUCKET_SECS + 1;
        self.buckets
            .range(start..=end)
            .fold(0u64, |a, (_, v)| a.saturating_add(*v))
    }

    /// The spend of the last `n` buckets up to `now`, oldest first (for a sparkline).
    pub fn recent(&self, now: DateTime<Utc>, n: usize) -> Vec<u64> {
        let end = bucket_of(now);
        let n = i64::try_from(n).unwrap_or(0).clamp(0, BUCKETS_KEPT);
        (end - n + 1..=end)
            .map(|b| self.buckets.get(&b).copied().unwrap_or(0))
            .collect()
    }
}

/// A budget warning the engine fired (`conductor/cost/attention.jsonl`), once per budget and limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// The engine's key: `scope:name:metric:limit`.
    pub key: String,
    /// When it fired.
    pub at: Option<DateTime<Utc>>,
    /// `workflow`, `step`, `god` or `day`.
    pub scope: String,
    /// The workflow id, `{workflow}/{step}`, the god or the UTC day.
    pub name: String,
    /// `cost_usd` or `tokens`.
    pub metric: String,
    /// What was used when it fired, as the file has it (dollars or tokens).
    pub used: f64,
    /// The limit it fired for.
    pub limit: f64,
    /// The share at which it fired.
    pub warn_at: f64,
    /// True when the budget was reached, not only neared.
    pub reached: bool,
}

impl Warning {
    /// `$4.100000 of $5.000000` or `410000 of 500000 tokens`.
    pub fn figures(&self) -> String {
        if self.metric == "cost_usd" {
            format!(
                "{} of {}",
                usd(dollars(self.used)),
                usd(dollars(self.limit))
            )
        } else {
            format!("{} of {} tokens", self.used as u64, self.limit as u64)
        }
    }
}

fn dollars(d: f64) -> u64 {
    crate::engine::micros_of(d.max(0.0))
}

/// The ledger as the console shows it.
#[derive(Debug, Clone, Default)]
pub struct LedgerView {
    /// Every report folded in.
    pub total: Totals,
    /// Per god, by name.
    pub gods: BTreeMap<String, GodCost>,
    /// Per UTC day (`YYYY-MM-DD`).
    pub days: BTreeMap<String, Totals>,
    /// Per workflow, per god: from the lines read (the tail of a long ledger, see `from`).
    pub workflows: HashMap<Sym, Arc<BTreeMap<String, Totals>>>,
    /// The byte offset the lines were read from: 0 when the whole ledger was read, else per-workflow
    /// figures and recent spend cover only the lines after it (totals come from the summary).
    pub from: u64,
    /// The god budgets (the config's, with the operators' raises).
    pub god_budgets: BTreeMap<String, Budget>,
    /// The daily budget.
    pub day_budget: Option<Budget>,
    /// The raised budget of each day an operator raised it for.
    pub day_budgets: BTreeMap<String, Budget>,
    /// The share at which a budget warns (0.8 unless the config says).
    pub warn_at: f64,
    /// The warnings fired, oldest first, one per key.
    pub warnings: Vec<Warning>,
    /// Why the ledger could not be read.
    pub error: Option<String>,
}

impl LedgerView {
    /// True when the root records usage or declares a root budget: the cost column and the
    /// Ledger tab show then.
    pub fn is_active(&self) -> bool {
        self.total.reports > 0
            || !self.god_budgets.is_empty()
            || self.day_budget.is_some()
            || !self.warnings.is_empty()
    }

    /// The share at which a budget warns (the default in a view built by hand).
    pub fn warn_share(&self) -> f64 {
        if self.warn_at > 0.0 {
            self.warn_at
        } else {
            crate::engine::DEFAULT_WARN_AT
        }
    }

    /// The budget of `day` (its raise, else the daily budget).
    pub fn day_budget_of(&self, day: &str) -> Option<Budget> {
        self.day_budgets.get(day).copied().or(self.day_budget)
    }
}

/// `$0.23`, `$12.40`, `$1,234` (cents below $1,000; whole dollars above).
pub(crate) fn usd(micros: u64) -> String {
    let cents = micros.saturating_add(5_000) / 10_000;
    if cents >= 100_000 {
        let d = cents / 100;
        let s = d.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        format!("${out}")
    } else {
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}

/// `950`, `48.2k`, `3.1M`, `2.0G` tokens.
pub(crate) fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// One budget and what is used of it, for one metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    /// `workflow`, `step`, `god` or `day`.
    pub scope: &'static str,
    /// The workflow id, `{workflow}/{step}`, the god or the UTC day.
    pub name: String,
    /// `cost_usd` or `tokens`.
    pub metric: &'static str,
    /// Micro-dollars or tokens used.
    pub used: u64,
    /// The limit.
    pub limit: u64,
}

impl Bar {
    /// The share used (1.0 is the limit; a zero limit is reached at once).
    pub fn share(&self) -> f64 {
        if self.limit == 0 {
            1.0
        } else {
            self.used as f64 / self.limit as f64
        }
    }

    /// True at or over the limit (what holds the next dispatch).
    pub fn reached(&self) -> bool {
        self.used >= self.limit
    }

    /// `$4.10 of $5.00`, `410.0k of 500.0k tokens`.
    pub fn figures(&self) -> String {
        if self.metric == "cost_usd" {
            format!("{} of {}", usd(self.used), usd(self.limit))
        } else {
            format!("{} of {} tokens", tokens(self.used), tokens(self.limit))
        }
    }

    /// The bars of `budget` for `used`: one per metric it limits.
    pub fn of(scope: &'static str, name: &str, budget: &Budget, used: &Totals) -> Vec<Bar> {
        let mut out = Vec::new();
        if let Some(limit) = budget.cost_micros {
            out.push(Bar {
                scope,
                name: name.to_owned(),
                metric: "cost_usd",
                used: used.cost_micros,
                limit,
            });
        }
        if let Some(limit) = budget.tokens {
            out.push(Bar {
                scope,
                name: name.to_owned(),
                metric: "tokens",
                used: used.tokens(),
                limit,
            });
        }
        out
    }
}

/// What a workflow's row keeps of its cost: the usage its state records and the budgets raised for
/// it (boxed: only workflows with usage or a raise have it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowCost {
    /// The workflow's totals and each step's (the report keys left out).
    pub usage: StateUsage,
    /// Budgets operators raised for it.
    pub raised: Raised,
}

impl RowCost {
    /// The row cost of a state's extra fields (`None` when it records neither usage nor a raise).
    pub fn of(extra: &serde_json::Map<String, serde_json::Value>) -> Option<Box<Self>> {
        use crate::engine::{STATE_BUDGET, STATE_USAGE};
        if !extra.contains_key(STATE_USAGE) && !extra.contains_key(STATE_BUDGET) {
            return None;
        }
        let mut usage = StateUsage::of(extra);
        usage.keys = Vec::new();
        Some(Box::new(Self {
            usage,
            raised: Raised::of(extra),
        }))
    }
}

// No floating point inside (totals and budgets are whole numbers): equality is total.
impl Eq for RowCost {}

impl Snapshot {
    /// True when the root records usage, declares a god or day budget or has a budget warning (the
    /// cost column and the Ledger tab); a definition's budget alone, with nothing spent, shows none.
    pub fn has_cost(&self) -> bool {
        self.ledger.is_active()
            || self.tallies.as_ref().map_or_else(
                || self.workflows.iter().any(|w| w.state.cost.is_some()),
                |t| t.costed > 0,
            )
    }

    /// The budgets of a workflow and its steps (declared by its definition, raised by operators),
    /// with what its state records against each.
    pub fn workflow_bars(&self, w: &WorkflowView) -> Vec<Bar> {
        let def = self.definition(w.state.definition_id.as_deref());
        let (mut wf, mut steps) = match def {
            Some(d) if declares_budget(d) => declared_budgets(d, &mut Vec::new()),
            _ => (None, BTreeMap::new()),
        };
        let empty = RowCost::default();
        let cost = w.state.cost.as_deref().unwrap_or(&empty);
        if cost.raised.workflow.is_some() {
            wf = cost.raised.workflow;
        }
        for (s, b) in &cost.raised.steps {
            steps.insert(s.clone(), *b);
        }
        let mut out = Vec::new();
        if let Some(b) = wf {
            out.extend(Bar::of("workflow", &w.id, &b, &cost.usage.total));
        }
        for (s, b) in &steps {
            let used = cost.usage.steps.get(s).copied().unwrap_or_default();
            out.extend(Bar::of("step", &format!("{}/{s}", w.id), b, &used));
        }
        out
    }

    /// The god and day budgets, with what the ledger records against each (today's day budget
    /// only, the UTC day of `now`).
    pub fn root_bars(&self, now: DateTime<Utc>) -> Vec<Bar> {
        let l = &self.ledger;
        let mut out = Vec::new();
        let today = now.format("%Y-%m-%d").to_string();
        if let Some(b) = l.day_budget_of(&today) {
            let used = l.days.get(&today).copied().unwrap_or_default();
            out.extend(Bar::of("day", &today, &b, &used));
        }
        for (g, b) in &l.god_budgets {
            let used = l.gods.get(g).map(|c| c.total).unwrap_or_default();
            out.extend(Bar::of("god", g, b, &used));
        }
        out
    }

    /// The engine's budget warnings whose budget still stands as it was when each fired, each with
    /// its workflow (a workflow's or step's warning) and its budget's bar now: a workflow's or step's
    /// while the workflow is unfinished, a god's, and today's day budget. A raised budget's old
    /// warning is gone (the raise warns again at its own share). The console's attention items and
    /// `/metrics` both count these.
    pub fn standing_budget_warnings(
        &self,
        now: DateTime<Utc>,
    ) -> Vec<(&Warning, Option<&WorkflowView>, Bar)> {
        use crate::engine::micros_of;
        let mut out = Vec::new();
        if self.ledger.warnings.is_empty() {
            return out;
        }
        let root_bars = self.root_bars(now);
        for w in &self.ledger.warnings {
            let wf = match w.scope.as_str() {
                "workflow" => Some(w.name.as_str()),
                "step" => w.name.rsplit_once('/').map(|(wf, _)| wf),
                _ => None,
            };
            let view = wf.and_then(|id| self.workflows.iter().find(|v| &*v.id == id));
            let bars = match (wf, view) {
                (Some(_), Some(v)) if !v.state.status.is_finished() => self.workflow_bars(v),
                (Some(_), _) => continue,
                (None, _) => root_bars.clone(),
            };
            let limit = if w.metric == "cost_usd" {
                micros_of(w.limit.max(0.0))
            } else {
                w.limit.max(0.0) as u64
            };
            if let Some(bar) = bars.into_iter().find(|b| {
                b.scope == w.scope && b.name == w.name && b.metric == w.metric && b.limit == limit
            }) {
                out.push((w, view, bar));
            }
        }
        out
    }

    /// True when a budget of the workflow (its own, a step's) is reached, or its next dispatch is
    /// held for a budget: what `/over-budget` finds.
    pub fn over_budget(&self, w: &WorkflowView) -> bool {
        let held = w
            .waiting
            .iter()
            .any(|(_, d)| held_for_budget(d.held_because.as_deref()));
        let budgeted = w.state.cost.is_some()
            || self
                .definition(w.state.definition_id.as_deref())
                .is_some_and(declares_budget);
        held || (budgeted && self.workflow_bars(w).iter().any(Bar::reached))
    }
}

/// True when a definition declares a budget for its workflows or a step.
pub(crate) fn declares_budget(d: &crate::engine::WorkflowDef) -> bool {
    d.extra.contains_key("budget") || d.steps.iter().any(|s| s.extra.contains_key("budget"))
}

/// True when a dispatch's `held_because` names a budget.
pub fn held_for_budget(held_because: Option<&str>) -> bool {
    held_because.is_some_and(|h| h.starts_with("budget:") || h.contains("; budget:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_tokens_read_short_and_round_to_the_cent() {
        assert_eq!(usd(0), "$0.00");
        assert_eq!(usd(231_000), "$0.23");
        assert_eq!(usd(4_995_000), "$5.00");
        assert_eq!(usd(1_234_567_000_000), "$1,234,567");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(48_210), "48.2k");
        assert_eq!(tokens(3_100_000), "3.1M");
    }

    #[test]
    fn the_burn_rate_is_the_last_hour_and_the_sparkline_the_last_buckets() {
        let now: DateTime<Utc> = "2026-06-14T10:36:00Z".parse().unwrap();
        let b = bucket_of(now);
        let mut g = GodCost::default();
        g.buckets.insert(b, 100);
        g.buckets.insert(b - 11, 10);
        g.buckets.insert(b - 12, 1_000);
        assert_eq!(g.burn_per_hour(now), 110, "twelve buckets: the hour");
        assert_eq!(g.recent(now, 3), vec![0, 0, 100]);
        assert_eq!(g.recent(now, 13)[0], 1_000);
    }

    #[test]
    fn a_bar_per_metric_reached_at_its_limit() {
        let b = Budget {
            cost_micros: Some(1_000_000),
            tokens: Some(100),
        };
        let used = Totals {
            input_tokens: 100,
            cost_micros: 800_000,
            ..Default::default()
        };
        let bars = Bar::of("workflow", "wf_a", &b, &used);
        assert_eq!(bars.len(), 2);
        assert!(!bars[0].reached() && (bars[0].share() - 0.8).abs() < 1e-9);
        assert!(bars[1].reached());
        assert_eq!(bars[0].figures(), "$0.80 of $1.00");
        assert!(held_for_budget(Some(
            "budget: workflow wf_a: $1 of its $1 budget"
        )));
        assert!(held_for_budget(Some(
            "step requires approval; budget: god x: …"
        )));
        assert!(!held_for_budget(Some("rule guard")));
    }
}
