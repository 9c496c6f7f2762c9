//! The price table that turns a tokens-only report into dollars. No network: a table shipped with
//! pantheon (it says its date; prices change, so check it), extended or overridden by the root's
//! `conductor/config.yaml` (`cost.prices`).

use serde_json::{Value, json};

use super::usage::Usage;

/// The date the shipped table was read from the vendors' public price lists.
pub(crate) const DEFAULT_PRICES_DATE: &str = "2025-11-01";

/// Dollars per million tokens of each kind (equal to micro-dollars per token).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
}

/// The shipped table: model name prefixes and their prices (USD per million tokens).
const DEFAULT_PRICES: [(&str, Price); 12] = [
    ("claude-opus-4-5", p(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4", p(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4", p(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", p(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", p(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", p(0.8, 4.0, 0.08, 1.0)),
    ("gpt-4.1-mini", p(0.4, 1.6, 0.1, 0.0)),
    ("gpt-4.1", p(2.0, 8.0, 0.5, 0.0)),
    ("gpt-4o-mini", p(0.15, 0.6, 0.075, 0.0)),
    ("gpt-4o", p(2.5, 10.0, 1.25, 0.0)),
    ("gpt-5-mini", p(0.25, 2.0, 0.025, 0.0)),
    ("gpt-5", p(1.25, 10.0, 0.125, 0.0)),
];

const fn p(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// A price table: model name (or prefix) to price.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    /// The date the prices were read (the shipped table's, or the config's `date`).
    pub date: String,
    /// Where the table comes from: `default`, or `config` when the root's config changed it.
    pub source: &'static str,
    models: Vec<(String, Price)>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self {
            date: DEFAULT_PRICES_DATE.to_owned(),
            source: "default",
            models: DEFAULT_PRICES
                .iter()
                .map(|(m, p)| ((*m).to_owned(), *p))
                .collect(),
        }
    }
}

fn price_of(v: &Value) -> Option<Price> {
    let Value::Object(m) = v else { return None };
    if m.keys()
        .any(|k| !["input", "output", "cache_read", "cache_write"].contains(&k.as_str()))
    {
        return None;
    }
    let f = |k: &str| match m.get(k) {
        None | Some(Value::Null) => Some(0.0),
        Some(x) => x
            .as_f64()
            .filter(|d| d.is_finite() && (0.0..=1e6).contains(d)),
    };
    Some(Price {
        input: f("input")?,
        output: f("output")?,
        cache_read: f("cache_read")?,
        cache_write: f("cache_write")?,
    })
}

impl PriceTable {
    /// The shipped table with the config's `prices` mapping applied: `{date, models: {NAME: {input,
    /// output, cache_read, cache_write}}}` (USD per million tokens); a config model replaces a shipped
    /// one of the same name and is tried first. A bad entry is a warning and is skipped.
    pub(crate) fn with_config(v: Option<&Value>, warnings: &mut Vec<String>) -> Self {
        let mut t = Self::default();
        let Some(v) = v else { return t };
        let Value::Object(m) = v else {
            warnings.push("cost.prices is not a mapping; the shipped table is used".into());
            return t;
        };
        if let Some(d) = m.get("date") {
            t.date = crate::conductor::lenient::text(d.clone());
        }
        if let Some(models) = m.get("models") {
            let Value::Object(models) = models else {
                warnings.push("cost.prices.models is not a mapping; ignored".into());
                return t;
            };
            let mut own = Vec::new();
            for (name, pv) in models.iter().take(1000) {
                match price_of(pv) {
                    Some(price) if !name.is_empty() && name.len() <= 128 => {
                        own.push((name.clone(), price))
                    }
                    _ => warnings.push(format!(
                        "cost.prices.models.{name}: not {{input, output, cache_read, cache_write}} in dollars per million tokens; skipped"
                    )),
                }
            }
            t.models.retain(|(n, _)| !own.iter().any(|(o, _)| o == n));
            own.extend(std::mem::take(&mut t.models));
            t.models = own;
            t.source = "config";
        }
        t
    }

    /// The price of `model`: the entry named exactly, else the longest entry the name starts with
    /// (`claude-sonnet-4` prices `claude-sonnet-4-5-20250929`).
    pub fn lookup(&self, model: &str) -> Option<&Price> {
        if let Some((_, p)) = self.models.iter().find(|(n, _)| n == model) {
            return Some(p);
        }
        self.models
            .iter()
            .filter(|(n, _)| model.starts_with(n.as_str()))
            .max_by_key(|(n, _)| n.len())
            .map(|(_, p)| p)
    }

    /// The cost of a report in micro-dollars and whether it was priced: its own `cost_usd` when it
    /// has one, else its tokens at its model's price; a report with tokens and no known model is
    /// counted at $0 and `false` (reported by `pantheon cost` as unpriced).
    pub fn cost(&self, u: &Usage) -> (u64, bool) {
        if let Some(c) = u.cost_micros {
            return (c, true);
        }
        if u.tokens() == 0 {
            return (0, true);
        }
        let Some(p) = u.model.as_deref().and_then(|m| self.lookup(m)) else {
            return (0, false);
        };
        let micros = u.input_tokens as f64 * p.input
            + u.output_tokens as f64 * p.output
            + u.cache_read_tokens as f64 * p.cache_read
            + u.cache_write_tokens as f64 * p.cache_write;
        (super::usage::micros_of(micros / 1_000_000.0), true)
    }

    /// The table as JSON (for `pantheon cost --prices`).
    pub fn to_json(&self) -> Value {
        json!({
            "date": self.date,
            "source": self.source,
            "unit": "USD per million tokens",
            "models": self.models.iter().map(|(n, p)| json!({
                "model": n, "input": p.input, "output": p.output,
                "cache_read": p.cache_read, "cache_write": p.cache_write,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_only_reports_are_priced_by_the_longest_matching_model_and_config_wins() {
        let t = PriceTable::default();
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            model: Some("claude-sonnet-4-5-20250929".into()),
            ..Default::default()
        };
        assert_eq!(t.cost(&u), (4_500_000, true));
        let opus45 = Usage {
            model: Some("claude-opus-4-5".into()),
            ..u.clone()
        };
        assert_eq!(t.cost(&opus45), (7_500_000, true));
        let unknown = Usage {
            model: Some("mystery".into()),
            ..u.clone()
        };
        assert_eq!(t.cost(&unknown), (0, false));
        let reported = Usage {
            cost_micros: Some(42),
            ..unknown
        };
        assert_eq!(t.cost(&reported), (42, true));
        let mut w = Vec::new();
        let c = PriceTable::with_config(
            Some(
                &json!({"date": "2026-01-01", "models": {"claude-sonnet-4": {"input": 1, "output": 1},
                "bad": {"input": -1}}}),
            ),
            &mut w,
        );
        assert_eq!(c.date, "2026-01-01");
        assert_eq!(c.cost(&u), (1_100_000, true));
        assert_eq!(w.len(), 1, "{w:?}");
    }
}
