//! What the pantheon costs (docs/BUDGETS.md): usage reports carried by handoffs, acks and `USAGE` bus
//! lines; the ledger of every report with its totals by god, step, model, day, definition, track and
//! board session; prices for tokens-only reports; and budgets that hold the next dispatch for an
//! operator's approval instead of killing work.
//!
//! - [`usage`]: the report and its totals (money in whole micro-dollars).
//! - [`prices`]: the shipped price table and the root's overrides.
//! - [`budget`]: budgets declared and raised, and the pure decision.
//! - [`ledger`]: the append-only ledger, its summary, markers, raised budgets, warnings.
//! - [`hook`]: what submit and ack call.
//! - [`ops`]: the bus reader, the supervisor's settling pass, raises, and the `cost` query.

pub(crate) mod budget;
pub(crate) mod hook;
pub(crate) mod ledger;
pub(crate) mod ops;
pub(crate) mod prices;
pub(crate) mod usage;

pub(crate) use budget::CostConfig;

#[cfg(test)]
mod tests;
