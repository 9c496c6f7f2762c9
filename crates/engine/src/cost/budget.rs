//! Budgets (docs/BUDGETS.md): what a definition declares for the workflow and each step, what the
//! root's config declares per god and per day, the raises operators approved, and the pure decision
//! that holds a dispatch once recorded usage has reached a budget.

use crate::error::Refusal;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::prices::PriceTable;
use super::usage::{Totals, micros_of, usd};
use crate::store::Root;

/// The share of a budget at which a warning fires once, by default.
pub const DEFAULT_WARN_AT: f64 = 0.8;

/// A budget: a cost, a number of tokens, or both (whichever is reached first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Budget {
    /// The cost limit in micro-dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
    /// The token limit (input, output, cache reads and writes together).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Budget {
    /// Parses `{cost_usd, tokens}` (either may be left out, not both).
    pub fn parse(v: &Value) -> Result<Self, Refusal> {
        let Value::Object(m) = v else {
            return Err("a budget is a mapping {cost_usd, tokens}".into());
        };
        let mut b = Budget::default();
        for (k, x) in m {
            match k.as_str() {
                "cost_usd" => match x
                    .as_f64()
                    .filter(|d| d.is_finite() && (0.0..=1e9).contains(d))
                {
                    Some(d) => b.cost_micros = Some(micros_of(d)),
                    None => {
                        return Err(format!(
                            "budget cost_usd {x} is not a number of dollars from 0 to 1e9"
                        )
                        .into());
                    }
                },
                "tokens" => match x.as_u64() {
                    Some(n) => b.tokens = Some(n),
                    None => {
                        return Err(
                            format!("budget tokens {x} is not a whole number of tokens").into()
                        );
                    }
                },
                other => {
                    return Err(
                        format!("unknown budget key {other:?} (known: cost_usd, tokens)").into(),
                    );
                }
            }
        }
        if b.is_empty() {
            return Err("a budget needs cost_usd, tokens or both".into());
        }
        Ok(b)
    }

    /// True when it limits nothing.
    pub fn is_empty(&self) -> bool {
        self.cost_micros.is_none() && self.tokens.is_none()
    }

    /// `{cost_usd, tokens}` as declared.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(c) = self.cost_micros {
            m.insert("cost_usd".into(), usd(c));
        }
        if let Some(t) = self.tokens {
            m.insert("tokens".into(), json!(t));
        }
        Value::Object(m)
    }
}

/// One budget reached (or, for a warning, neared): what, by how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Crossing {
    /// `workflow`, `step`, `god` or `day`.
    pub scope: &'static str,
    /// The workflow id, `{workflow}/{step}`, the god, or the UTC day.
    pub name: String,
    /// `cost_usd` or `tokens`.
    pub metric: &'static str,
    /// What was recorded (micro-dollars or tokens).
    pub used: u64,
    /// The budget (micro-dollars or tokens).
    pub limit: u64,
}

fn amount(metric: &str, n: u64) -> Value {
    if metric == "cost_usd" {
        usd(n)
    } else {
        json!(n)
    }
}

fn shown(metric: &str, n: u64) -> String {
    if metric == "cost_usd" {
        format!("${:.6}", n as f64 / 1_000_000.0)
    } else {
        format!("{n} tokens")
    }
}

impl Crossing {
    /// `workflow wf_x: $1.200000 of its $1.000000 budget`.
    pub(crate) fn text(&self) -> String {
        format!(
            "{} {}: {} of its {} budget",
            self.scope,
            self.name,
            shown(self.metric, self.used),
            shown(self.metric, self.limit)
        )
    }

    /// The figures as JSON (`used`, `limit` in dollars for `cost_usd`).
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "scope": self.scope, "name": self.name, "metric": self.metric,
            "used": amount(self.metric, self.used), "limit": amount(self.metric, self.limit),
        })
    }

    /// The key a warning fires once under: the budget and its limit (a raised budget warns again).
    pub(crate) fn key(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.scope, self.name, self.metric, self.limit
        )
    }
}

/// One budget and the usage recorded against it (including the act being routed).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Subject {
    /// `workflow`, `step`, `god` or `day`.
    pub scope: &'static str,
    /// What it is the budget of.
    pub name: String,
    /// The budget.
    pub budget: Budget,
    /// The usage so far.
    pub used: Totals,
}

fn metrics(s: &Subject) -> [(&'static str, Option<u64>, u64); 2] {
    [
        ("cost_usd", s.budget.cost_micros, s.used.cost_micros),
        ("tokens", s.budget.tokens, s.used.tokens()),
    ]
}

/// The budgets reached: usage at or over the limit. Empty: nothing to hold.
pub(crate) fn crossed(subjects: &[Subject]) -> Vec<Crossing> {
    let mut out = Vec::new();
    for s in subjects {
        for (metric, limit, used) in metrics(s) {
            if let Some(limit) = limit
                && used >= limit
            {
                out.push(Crossing {
                    scope: s.scope,
                    name: s.name.clone(),
                    metric,
                    used,
                    limit,
                });
            }
        }
    }
    out
}

/// The budgets at or past `warn_at` of their limit (reached ones included: the warning says so once).
pub(crate) fn neared(subjects: &[Subject], warn_at: f64) -> Vec<Crossing> {
    let mut out = Vec::new();
    for s in subjects {
        for (metric, limit, used) in metrics(s) {
            if let Some(limit) = limit
                && used as f64 >= warn_at * limit as f64
            {
                out.push(Crossing {
                    scope: s.scope,
                    name: s.name.clone(),
                    metric,
                    used,
                    limit,
                });
            }
        }
    }
    out
}

/// The root's cost settings: `cost:` in `conductor/config.yaml`, with the raises operators approved
/// (`conductor/cost/budgets.json`) over its god and day budgets.
#[derive(Debug, Clone, Default)]
pub struct CostConfig {
    /// Prices for tokens-only reports.
    pub prices: PriceTable,
    /// Budgets per god.
    pub gods: BTreeMap<String, Budget>,
    /// The budget of every UTC day.
    pub day: Option<Budget>,
    /// Raised day budgets, per day (`YYYY-MM-DD`).
    pub days: BTreeMap<String, Budget>,
    /// The share of a budget at which its warning fires once (0.8 unless `warn_at` says).
    pub warn_at: f64,
    /// What was wrong with the settings (each bad value ignored).
    pub warnings: Vec<String>,
}

impl CostConfig {
    /// Parses the config's `cost:` mapping (absent: no budgets, the shipped prices).
    pub fn parse(v: Option<&Value>) -> Self {
        let mut c = CostConfig {
            warn_at: DEFAULT_WARN_AT,
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let m = match v {
            None | Some(Value::Null) => {
                c.prices = PriceTable::default();
                return c;
            }
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                c.warnings.push("cost: not a mapping; ignored".into());
                return c;
            }
        };
        c.prices = PriceTable::with_config(m.get("prices"), &mut warnings);
        if let Some(w) = m.get("warn_at") {
            match w.as_f64().filter(|d| *d > 0.0 && *d <= 1.0) {
                Some(d) => c.warn_at = d,
                None => warnings.push(format!(
                    "cost.warn_at {w} is not a share in (0, 1]; 0.8 kept"
                )),
            }
        }
        if let Some(b) = m.get("budgets") {
            let Value::Object(b) = b else {
                warnings.push("cost.budgets is not a mapping; ignored".into());
                c.warnings = warnings;
                return c;
            };
            for (k, v) in b {
                match k.as_str() {
                    "day" => match Budget::parse(v) {
                        Ok(d) => c.day = Some(d),
                        Err(e) => warnings.push(format!("cost.budgets.day: {e}; ignored")),
                    },
                    "gods" => match v {
                        Value::Object(gods) => {
                            for (g, gv) in gods.iter().take(10_000) {
                                match Budget::parse(gv) {
                                    Ok(bg) if crate::store::GodName::parse(g).is_ok() => {
                                        c.gods.insert(g.clone(), bg);
                                    }
                                    Ok(_) => warnings.push(format!(
                                        "cost.budgets.gods: {g:?} is not a god name; ignored"
                                    )),
                                    Err(e) => warnings
                                        .push(format!("cost.budgets.gods.{g}: {e}; ignored")),
                                }
                            }
                        }
                        _ => warnings.push("cost.budgets.gods is not a mapping; ignored".into()),
                    },
                    other => warnings.push(format!(
                        "cost.budgets.{other}: unknown (known: day, gods); ignored"
                    )),
                }
            }
        }
        for k in m.keys() {
            if !["prices", "budgets", "warn_at"].contains(&k.as_str()) {
                warnings.push(format!(
                    "cost.{k}: unknown key (known: prices, budgets, warn_at); ignored"
                ));
            }
        }
        c.warnings = warnings;
        c
    }

    /// The root's settings, with the operators' raises applied.
    pub fn of_root(root: &Root) -> Self {
        let mut c = Self::parse(root.settings.cost.as_ref());
        if c.gods.is_empty() && c.day.is_none() {
            return c;
        }
        let raised = super::ledger::read_raised(root);
        if let Some(Value::Object(g)) = raised.get("gods") {
            for (god, b) in g {
                if let Ok(b) = serde_json::from_value::<Budget>(b.clone()) {
                    c.gods.insert(god.clone(), b);
                }
            }
        }
        if let Some(Value::Object(d)) = raised.get("days") {
            for (day, b) in d {
                if let Ok(b) = serde_json::from_value::<Budget>(b.clone()) {
                    c.days.insert(day.clone(), b);
                }
            }
        }
        c
    }

    /// True when the root declares a god or day budget.
    pub(crate) fn has_root_budgets(&self) -> bool {
        !self.gods.is_empty() || self.day.is_some()
    }

    /// The budget of `day` (a raise for that day, else the daily budget).
    pub fn day_budget(&self, day: &str) -> Option<Budget> {
        self.days.get(day).copied().or(self.day)
    }
}

/// The state field holding a workflow's usage: `{total, steps: {step: totals}, keys: [...]}`.
pub const STATE_USAGE: &str = "usage";
/// The state field holding budgets an operator raised: `{workflow: budget, steps: {step: budget}}`.
pub const STATE_BUDGET: &str = "budget";
/// The state field listing each raise: `{handoff_id, scope, name, from, to, by, at}`.
pub(crate) const STATE_RAISES: &str = "budget_raises";
/// How many report keys a state keeps to tell a repeated report from a new one.
pub(crate) const MAX_STATE_KEYS: usize = 1000;

/// A workflow's recorded usage, read from its state (tolerant: a foreign writer's value reads as none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StateUsage {
    /// Every report of the workflow.
    pub total: Totals,
    /// Per step.
    pub steps: BTreeMap<String, Totals>,
    /// The keys of the latest reports (at most `MAX_STATE_KEYS`).
    pub keys: Vec<String>,
}

impl StateUsage {
    /// The usage recorded in a state's extra fields.
    pub fn of(extra: &serde_json::Map<String, Value>) -> Self {
        extra
            .get(STATE_USAGE)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

/// The budgets an operator raised for one workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Raised {
    /// The workflow's budget, raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Budget>,
    /// Steps' budgets, raised.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, Budget>,
}

impl Raised {
    /// The raises recorded in a state's extra fields.
    pub fn of(extra: &serde_json::Map<String, Value>) -> Self {
        extra
            .get(STATE_BUDGET)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

/// A definition's declared budgets: the workflow's and each step's (a bad one is a warning).
pub fn declared(
    def: &crate::conductor::WorkflowDef,
    warnings: &mut Vec<String>,
) -> (Option<Budget>, BTreeMap<String, Budget>) {
    let mut wf = None;
    if let Some(b) = def.extra.get("budget") {
        match Budget::parse(b) {
            Ok(b) => wf = Some(b),
            Err(e) => warnings.push(format!("definition {:?} budget: {e}; ignored", def.id)),
        }
    }
    let mut steps = BTreeMap::new();
    for s in &def.steps {
        if let Some(b) = s.extra.get("budget") {
            match Budget::parse(b) {
                Ok(b) => {
                    steps.insert(s.id.clone(), b);
                }
                Err(e) => warnings.push(format!(
                    "definition {:?} step {:?} budget: {e}; ignored",
                    def.id, s.id
                )),
            }
        }
    }
    (wf, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(cost: u64, tokens: u64) -> Totals {
        Totals {
            input_tokens: tokens,
            cost_micros: cost,
            ..Default::default()
        }
    }

    #[test]
    fn a_budget_is_reached_at_its_limit_and_neared_at_the_warning_share() {
        let s = |used| Subject {
            scope: "workflow",
            name: "wf_a".into(),
            budget: Budget {
                cost_micros: Some(1_000_000),
                tokens: Some(100),
            },
            used,
        };
        assert!(crossed(&[s(t(999_999, 99))]).is_empty());
        let c = crossed(&[s(t(1_000_000, 10))]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].metric, "cost_usd");
        assert_eq!(
            c[0].text(),
            "workflow wf_a: $1.000000 of its $1.000000 budget"
        );
        assert_eq!(crossed(&[s(t(0, 100))])[0].metric, "tokens");
        assert!(neared(&[s(t(799_999, 0))], 0.8).is_empty());
        assert_eq!(neared(&[s(t(800_000, 0))], 0.8).len(), 1);
        assert!(Budget::parse(&json!({})).is_err());
        assert!(Budget::parse(&json!({"cost_usd": -1})).is_err());
        assert_eq!(
            Budget::parse(&json!({"cost_usd": 2.5})).unwrap().to_json(),
            json!({"cost_usd": 2.5})
        );
    }

    #[test]
    fn the_config_declares_god_and_day_budgets_and_warns_about_the_rest() {
        let c = CostConfig::parse(Some(&json!({"warn_at": 0.5, "budgets": {
            "day": {"cost_usd": 10}, "gods": {"thoth": {"tokens": 5}, "../x": {"tokens": 1}}},
            "surprise": 1})));
        assert_eq!(c.warn_at, 0.5);
        assert_eq!(
            c.day,
            Some(Budget {
                cost_micros: Some(10_000_000),
                tokens: None
            })
        );
        assert_eq!(c.gods.len(), 1);
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(!CostConfig::parse(None).has_root_budgets());
    }
}
