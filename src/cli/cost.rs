//! `pantheon cost`: what the pantheon costs, from the ledger (docs/BUDGETS.md). A thin shell around
//! `engine::cost`: it first reads the `USAGE` bus lines posted since the last pass and settles reports
//! a killed act left (both also done by `tick` and `serve`), then answers from the ledger's summary.

use std::process::ExitCode;

use super::Outcome;
use crate::engine::{Conductor, CostQuery, Origin, Root, cost_query};

/// Options of `pantheon cost`.
#[derive(Debug, Clone, clap::Args)]
pub struct CostArgs {
    /// Totals per workflow, god, step, model, day, definition, track or session.
    #[arg(long, value_name = "DIM", default_value = "god",
          value_parser = clap::builder::PossibleValuesParser::new(crate::engine::COST_DIMENSIONS))]
    pub by: String,
    /// Only usage recorded at or after this moment (RFC 3339, now, back from now: -1h, or a local
    /// time today: 10:30; reads the whole ledger).
    #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Print the answer as JSON (`cost_usd` a number, rounded to 6 decimals).
    #[arg(long)]
    pub json: bool,
    /// Print the price table in use instead (shipped, dated; or the root config's).
    #[arg(long, conflicts_with_all = ["by", "since"])]
    pub prices: bool,
    /// Print the budget warnings fired so far instead (each fires once at `warn_at` of a budget).
    #[arg(long, conflicts_with_all = ["by", "since", "prices"])]
    pub attention: bool,
    /// Answer from the ledger as it is: read no bus lines and settle nothing (never writes).
    #[arg(long)]
    pub no_sync: bool,
}

/// Runs `pantheon cost`.
pub(crate) fn run(args: CostArgs, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    if args.prices {
        let cfg = crate::engine::CostConfig::of_root(root);
        return Ok(Outcome::Json(cfg.prices.to_json()));
    }
    if args.attention {
        let items = crate::engine::ledger::attention_items(root);
        return Ok(Outcome::Json(
            serde_json::json!({"items": items, "count": items.len()}),
        ));
    }
    let since = args.since;
    let mut pass = None;
    if !args.no_sync && root.conductor.is_dir() {
        let c = Conductor::new(root.clone()).with_origin(origin);
        let p = c.cost_pass();
        if p.bus_reports > 0 || p.settled > 0 || !p.errors.is_empty() {
            pass = Some(p);
        }
    }
    let mut v = cost_query(root, &CostQuery { by: args.by, since })?;
    if let Some(p) = pass {
        v["pass"] = serde_json::to_value(p)?;
    }
    if args.json {
        return Ok(Outcome::Json(v));
    }
    println!("{}", table(&v));
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}

/// The answer as a table: one row per key, cost first.
fn table(v: &serde_json::Value) -> String {
    let by = v["by"].as_str().unwrap_or("");
    let mut out = format!(
        "{:<40} {:>14} {:>14} {:>8}\n",
        by.to_uppercase(),
        "COST_USD",
        "TOKENS",
        "REPORTS"
    );
    let row = |k: &str, t: &serde_json::Value| {
        format!(
            "{:<40} {:>14.6} {:>14} {:>8}\n",
            k,
            t["cost_usd"].as_f64().unwrap_or(0.0),
            t["tokens"].as_u64().unwrap_or(0),
            t["reports"].as_u64().unwrap_or(0)
        )
    };
    // A key is a name a report carried (a model, a session, …): shown with any bidirectional
    // control escaped, so it cannot reorder the row.
    for r in v["rows"].as_array().into_iter().flatten() {
        out.push_str(&row(
            &crate::text::escape_bidi(r["key"].as_str().unwrap_or("")),
            r,
        ));
    }
    out.push_str(&row("TOTAL", &v["total"]));
    let unpriced = v["total"]["unpriced"].as_u64().unwrap_or(0);
    if unpriced > 0 {
        out.push_str(&format!(
            "{unpriced} report(s) had tokens but no cost and a model the price table (dated {}) does not know: counted at $0\n",
            v["prices"]["date"].as_str().unwrap_or("?")
        ));
    }
    out.trim_end().to_owned()
}
