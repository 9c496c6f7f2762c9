//! A usage report (`{input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
//! model}`, every field optional) and the totals reports add up to. Money is kept as whole micro-dollars
//! (`u64`), so sums never drift; it is shown as US dollars rounded to 6 decimals.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::Violation;

/// Most tokens one report may carry in one field (a trillion: no step spends that).
pub(crate) const MAX_TOKENS: u64 = 1_000_000_000_000;
/// Most dollars one report may carry.
pub(crate) const MAX_COST_USD: f64 = 1_000_000.0;
/// Longest model name, in bytes.
pub(crate) const MAX_MODEL_BYTES: usize = 128;
/// The fields of a report, in protocol order.
pub(crate) const FIELDS: [&str; 6] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "model",
];

/// One usage report, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Tokens read from a prompt cache.
    pub cache_read_tokens: u64,
    /// Tokens written to a prompt cache.
    pub cache_write_tokens: u64,
    /// The cost the god reported, in micro-dollars; `None`: priced from the table by `model`.
    pub cost_micros: Option<u64>,
    /// The model that did the work, as the god names it.
    pub model: Option<String>,
}

/// Dollars to whole micro-dollars (the caller checked the value is finite, non-negative, bounded).
pub fn micros_of(usd: f64) -> u64 {
    let m = (usd * 1_000_000.0).round();
    if m.is_finite() && m > 0.0 {
        m as u64
    } else {
        0
    }
}

/// Micro-dollars as a JSON number of dollars, rounded to 6 decimals. Whole dollars are written as
/// integers (`2`, not `2.0`), as JavaScript writes them, so a value read back by a JavaScript
/// client compares equal.
pub(crate) fn usd(micros: u64) -> Value {
    if micros.is_multiple_of(1_000_000) {
        json!(micros / 1_000_000)
    } else {
        json!(micros as f64 / 1_000_000.0)
    }
}

/// Parses a `usage` object found at `pointer`; every problem is a violation naming its field.
pub(crate) fn parse(v: &Value, pointer: &str) -> Result<Usage, Vec<Violation>> {
    let mut bad = Vec::new();
    let mut u = Usage::default();
    let Value::Object(m) = v else {
        return Err(vec![Violation {
            pointer: pointer.to_owned(),
            message: format!(
                "must be an object with any of {} (found {})",
                FIELDS.join(", "),
                crate::store::read::kind(v)
            ),
        }]);
    };
    for (k, x) in m {
        let at = format!("{pointer}/{k}");
        let mut say = |message: String| {
            bad.push(Violation {
                pointer: at.clone(),
                message,
            })
        };
        match k.as_str() {
            "input_tokens" | "output_tokens" | "cache_read_tokens" | "cache_write_tokens" => {
                if x.is_null() {
                    continue;
                }
                match x.as_u64().filter(|n| *n <= MAX_TOKENS) {
                    Some(n) => match k.as_str() {
                        "input_tokens" => u.input_tokens = n,
                        "output_tokens" => u.output_tokens = n,
                        "cache_read_tokens" => u.cache_read_tokens = n,
                        _ => u.cache_write_tokens = n,
                    },
                    None => say(format!(
                        "{x} is not a whole number of tokens from 0 to {MAX_TOKENS}"
                    )),
                }
            }
            "cost_usd" => {
                if x.is_null() {
                    continue;
                }
                match x
                    .as_f64()
                    .filter(|d| d.is_finite() && (0.0..=MAX_COST_USD).contains(d))
                {
                    Some(d) => u.cost_micros = Some(micros_of(d)),
                    None => say(format!(
                        "{x} is not a number of dollars from 0 to {MAX_COST_USD}"
                    )),
                }
            }
            "model" => {
                if x.is_null() {
                    continue;
                }
                match x.as_str() {
                    Some(s)
                        if !s.is_empty()
                            && s.len() <= MAX_MODEL_BYTES
                            && !s.chars().any(char::is_control) =>
                    {
                        u.model = Some(s.to_owned())
                    }
                    _ => say(format!(
                        "must be a model name of 1 to {MAX_MODEL_BYTES} bytes without control characters"
                    )),
                }
            }
            other => say(format!(
                "unknown usage field {other:?} (known: {})",
                FIELDS.join(", ")
            )),
        }
    }
    if bad.is_empty() { Ok(u) } else { Err(bad) }
}

/// The `usage` of a handoff, an ack or a bus payload, if it has one (`null` is none).
pub(crate) fn of_document(doc: &Value, pointer: &str) -> Result<Option<Usage>, Vec<Violation>> {
    match doc.get("usage") {
        None | Some(Value::Null) => Ok(None),
        Some(u) => parse(u, pointer).map(Some),
    }
}

impl Usage {
    /// Every token of the report: input, output, cache reads and cache writes.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }

    /// The report as JSON, as a god would write it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("input_tokens".into(), json!(self.input_tokens));
        m.insert("output_tokens".into(), json!(self.output_tokens));
        m.insert("cache_read_tokens".into(), json!(self.cache_read_tokens));
        m.insert("cache_write_tokens".into(), json!(self.cache_write_tokens));
        if let Some(c) = self.cost_micros {
            m.insert("cost_usd".into(), usd(c));
        }
        if let Some(model) = &self.model {
            m.insert("model".into(), json!(model));
        }
        Value::Object(m)
    }
}

/// Sums of reports. Stored in the workflow state and the ledger's summary as whole numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache-read tokens.
    pub cache_read_tokens: u64,
    /// Cache-write tokens.
    pub cache_write_tokens: u64,
    /// Cost in micro-dollars (reported, else priced).
    pub cost_micros: u64,
    /// Reports added.
    pub reports: u64,
    /// Reports that had no cost and whose model the price table does not know (counted at $0).
    pub unpriced: u64,
}

impl Totals {
    /// Adds one report whose cost is `cost_micros` (`priced`: false when no price was found).
    pub fn add(&mut self, u: &Usage, cost_micros: u64, priced: bool) {
        self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(u.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(u.cache_write_tokens);
        self.cost_micros = self.cost_micros.saturating_add(cost_micros);
        self.reports = self.reports.saturating_add(1);
        if !priced {
            self.unpriced = self.unpriced.saturating_add(1);
        }
    }

    /// Adds other totals.
    pub fn merge(&mut self, o: &Totals) {
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(o.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(o.cache_write_tokens);
        self.cost_micros = self.cost_micros.saturating_add(o.cost_micros);
        self.reports = self.reports.saturating_add(o.reports);
        self.unpriced = self.unpriced.saturating_add(o.unpriced);
    }

    /// Every token: input, output, cache reads and cache writes.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }

    /// The totals as shown by `pantheon cost`: tokens by kind and in all, `cost_usd` a number.
    pub fn to_json(&self) -> Value {
        json!({
            "cost_usd": usd(self.cost_micros),
            "tokens": self.tokens(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reports": self.reports,
            "unpriced": self.unpriced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_optional_bounded_and_named_when_wrong() {
        assert_eq!(parse(&json!({}), "/usage").unwrap(), Usage::default());
        let u = parse(
            &json!({"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.1234567, "model": "m"}),
            "/usage",
        )
        .unwrap();
        assert_eq!(u.tokens(), 15);
        assert_eq!(u.cost_micros, Some(123_457));
        let bad = parse(
            &json!({"input_tokens": -1, "output_tokens": 1.5, "cost_usd": 2e6, "model": "", "x": 1}),
            "/usage",
        )
        .unwrap_err();
        let pointers: Vec<&str> = bad.iter().map(|v| v.pointer.as_str()).collect();
        for p in [
            "/usage/input_tokens",
            "/usage/output_tokens",
            "/usage/cost_usd",
            "/usage/model",
            "/usage/x",
        ] {
            assert!(pointers.contains(&p), "{p} in {bad:?}");
        }
        assert!(parse(&json!({"input_tokens": MAX_TOKENS + 1}), "/u").is_err());
        assert!(parse(&json!([1]), "/u").is_err());
        assert_eq!(usd(1_500_000), json!(1.5));
        assert_eq!(usd(1), json!(0.000001));
        assert_eq!(usd(2_000_000), json!(2));
    }
}
