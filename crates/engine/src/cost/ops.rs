//! The cost operations shells call: reading `USAGE` bus lines into the ledger, the supervisor's pass
//! that settles reports a killed act left, raising a budget when approving a held dispatch, and the
//! `pantheon cost` query.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::budget::{Budget, CostConfig, Raised, STATE_BUDGET, STATE_RAISES};
use super::hook::{self, Origin, Report};
use super::ledger::{self, Line};
use super::usage::{self, Totals, Usage};
use crate::conductor::Conductor;
use crate::conductor::files;
use crate::error::{Error, Result};
use crate::journal::Act;
use crate::store::atomic::write_json;
use crate::store::lock::FileLock;
use crate::store::read::read_json;
use crate::store::time::{now_ts, parse_ts};
use crate::store::{GodName, HandoffId, Root, TrackName, WorkflowId};

/// The bus message type a god reports usage with between handoffs.
pub(crate) const USAGE_TYPE: &str = "USAGE";

/// What one cost pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostPass {
    /// `USAGE` bus lines read.
    pub bus_reports: usize,
    /// Of those, recorded now (the rest were already recorded).
    pub bus_recorded: usize,
    /// Reports a killed act left, added to the ledger now.
    pub settled: usize,
    /// Markers of acts that never committed, dropped.
    pub dropped: usize,
    /// Lines or markers that could not be used, and why.
    pub errors: Vec<String>,
}

fn cursors_path(root: &Root) -> std::path::PathBuf {
    ledger::cost_dir(root).join("bus-cursors.json")
}

fn tracks(root: &Root) -> Vec<TrackName> {
    let mut v: Vec<TrackName> = std::fs::read_dir(root.tracks_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| TrackName::parse(&e.file_name().to_string_lossy()).ok())
        .collect();
    v.sort();
    v
}

/// The most of a track's queue one step of the cost pass reads (and holds) at once.
const BUS_CHUNK_BYTES: u64 = 8 * 1024 * 1024;

/// One `USAGE` line's workflow, god (its `source`) and usage: `payload {workflow_id, step?,
/// session_id?, usage: {…}}`.
fn bus_line(m: &crate::bus::model::Envelope) -> Result<(WorkflowId, GodName, Usage)> {
    let pl = &m.payload;
    let wf = WorkflowId::parse(pl.get("workflow_id").and_then(Value::as_str).unwrap_or(""))?;
    let god = GodName::parse_as("source", &m.source)?;
    match usage::of_document(pl, "/payload/usage") {
        Ok(Some(u)) => Ok((wf, god, u)),
        Ok(None) => Err(Error::invalid(
            "USAGE line",
            vec![crate::error::Violation {
                pointer: "/payload/usage".into(),
                message: "required: the usage object".into(),
            }],
        )),
        Err(v) => Err(Error::invalid("USAGE line", v)),
    }
}

impl Conductor {
    /// One cost pass: settles the reports killed acts left, then reads the `USAGE` lines posted on
    /// every track since the last pass into the workflows' states and the ledger.
    pub fn cost_pass(&self) -> CostPass {
        let mut p = CostPass::default();
        self.settle_markers(&mut p);
        self.read_bus_usage(&mut p);
        // Keep the summary close to the ledger's end, so readers fold few lines.
        if ledger::ledger_path(self.root()).exists()
            && let Err(e) = ledger::refresh_summary(self.root())
        {
            p.errors.push(format!("ledger summary not refreshed: {e}"));
        }
        p
    }

    fn settle_markers(&self, p: &mut CostPass) {
        let root = self.root();
        for (m, age) in ledger::markers(root) {
            let running = crate::conductor::intents::pid_alive(m.pid)
                && age < std::time::Duration::from_secs(600);
            if running {
                continue;
            }
            let key = m.line.key.clone();
            let Ok(wf) = WorkflowId::parse(&m.line.workflow_id) else {
                let _ = ledger::drop_marker(root, &key);
                p.dropped += 1;
                continue;
            };
            let lock = match FileLock::exclusive(root, &root.workflow_lock_path(&wf)) {
                Ok(l) => l,
                Err(e) => {
                    p.errors.push(format!("{key}: {e}"));
                    continue;
                }
            };
            match files::load_state(root, &wf) {
                Ok(Some(st)) if hook::recorded(&st, &key) => {
                    p.errors.extend(self.settle_report(&st, &key));
                    p.settled += 1;
                }
                Ok(_) => {
                    let _ = ledger::drop_marker(root, &key);
                    p.dropped += 1;
                }
                Err(e) => p.errors.push(format!("{key}: {e}")),
            }
            drop(lock);
        }
    }

    /// Reads each track's `USAGE` lines past its cursor, a bounded chunk at a time, and records them
    /// in batches: one state write per workflow, one ledger append and one summary write per chunk.
    /// The cursor moves past a chunk only once all of it is recorded (a busy lock or a full disk
    /// leaves it where it was; the next pass reads the chunk again and the keys make the repeat a
    /// no-op).
    fn read_bus_usage(&self, p: &mut CostPass) {
        let root = self.root();
        let mut cursors: BTreeMap<String, u64> = read_json(&cursors_path(root))
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let cfg = CostConfig::parse(root.settings.cost.as_ref());
        let mut moved = false;
        for track in tracks(root) {
            let queue = root.bus_dir(&track).join(crate::store::layout::QUEUE_FILE);
            let len = std::fs::symlink_metadata(&queue)
                .map(|m| m.len())
                .unwrap_or(0);
            let mut from = cursors.get(track.as_str()).copied().unwrap_or(0);
            if from > len {
                // The queue was archived and started again.
                from = 0;
            }
            while from < len {
                let (messages, next, _) =
                    match crate::bus::queue::read_from_upto(&queue, from, BUS_CHUNK_BYTES) {
                        Ok(r) => r,
                        Err(e) => {
                            p.errors.push(format!("track {track}: {e}"));
                            break;
                        }
                    };
                if next <= from {
                    break;
                }
                let usage: Vec<&crate::bus::model::Envelope> =
                    messages.iter().filter(|m| m.kind == USAGE_TYPE).collect();
                p.bus_reports += usage.len();
                if !self.record_bus_chunk(&cfg, &track, &usage, next - from, p) {
                    break;
                }
                from = next;
                cursors.insert(track.to_string(), next);
                moved = true;
            }
        }
        if moved && let Err(e) = write_json(root, &cursors_path(root), &cursors) {
            p.errors.push(format!("bus cursors not saved: {e}"));
        }
    }

    /// Records one chunk of a track's `USAGE` lines (`bytes` of the queue): each line checked, the
    /// lines grouped by workflow and recorded in its state (under its lock, the state read and
    /// written once), then every line the states record appended to the ledger at once. False when
    /// the chunk is to be read again (a lock busy, a write failed).
    fn record_bus_chunk(
        &self,
        cfg: &CostConfig,
        track: &TrackName,
        usage: &[&crate::bus::model::Envelope],
        bytes: u64,
        p: &mut CostPass,
    ) -> bool {
        let root = self.root();
        let mut by_wf: BTreeMap<WorkflowId, Vec<(&crate::bus::model::Envelope, GodName, Usage)>> =
            BTreeMap::new();
        for m in usage {
            match bus_line(m) {
                Ok((wf, god, u)) => by_wf.entry(wf).or_default().push((m, god, u)),
                Err(e) => p.errors.push(format!("track {track} USAGE {}: {e}", m.id)),
            }
        }
        if by_wf.is_empty() {
            return true;
        }
        // The ledger's keys once for the chunk: a line recorded by a pass killed after its ledger
        // append counts as recorded even when its state has since forgotten the key (a state keeps
        // only the latest keys). Each line's ledger text is at most the queue line plus its key,
        // definition and step: the chunk's size plus 1 KiB a line bounds them.
        let window = ledger::DEDUPE_WINDOW
            .saturating_add(bytes)
            .saturating_add(1024 * usage.len() as u64);
        let in_ledger = match ledger::recent_keys(root, window) {
            Ok(k) => k,
            Err(e) => {
                p.errors.push(format!(
                    "track {track}: the ledger cannot be read: {e}; retried next pass"
                ));
                return false;
            }
        };
        let mut ok = true;
        let mut lines = Vec::new();
        for (wf, group) in &by_wf {
            match self.record_bus_workflow(cfg, track, wf, group, &in_ledger) {
                Ok((recorded, reports)) => {
                    p.bus_recorded += recorded;
                    lines.extend(reports.into_iter().map(|r| r.line));
                }
                Err(e)
                    if matches!(
                        e,
                        Error::Invalid { .. } | Error::NotFound(_) | Error::InvalidName { .. }
                    ) =>
                {
                    for (m, ..) in group {
                        p.errors.push(format!("track {track} USAGE {}: {e}", m.id));
                    }
                }
                Err(e) => {
                    // A busy lock or a full disk: read this chunk again next pass.
                    p.errors.push(format!(
                        "track {track} USAGE of workflow {wf}: {e}; retried next pass"
                    ));
                    ok = false;
                }
            }
        }
        // The states record these lines: the ledger gets them now (a repeat finds them by key).
        if let Err(e) = ledger::append_new(root, &lines) {
            p.errors.push(format!(
                "track {track}: {} usage line(s) recorded in their workflows but not yet in the ledger ({e}); retried next pass",
                lines.len()
            ));
            return false;
        }
        ok
    }

    /// Records the `USAGE` lines of one workflow in its state (read and written once, under its
    /// lock); returns how many were new, and the reports of every line (the new ones and those the
    /// state already recorded, whose ledger line a killed pass may not have written). The budget
    /// warnings the new reports brought past their share fire once per reporting god.
    fn record_bus_workflow(
        &self,
        cfg: &CostConfig,
        track: &TrackName,
        wf: &WorkflowId,
        group: &[(&crate::bus::model::Envelope, GodName, Usage)],
        in_ledger: &std::collections::HashSet<String>,
    ) -> Result<(usize, Vec<Report>)> {
        let root = self.root();
        let _lock = files::lock_existing(root, wf)?;
        let Some(mut st) = files::load_state(root, wf)? else {
            return Err(Error::not_found(format!("workflow {wf} has no state")));
        };
        let reports: Vec<Report> = group
            .iter()
            .map(|(m, god, u)| {
                let pl = &m.payload;
                let step = pl
                    .get("step")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| st.current_step.clone());
                let session = pl.get("session_id").and_then(Value::as_str);
                Report::priced(
                    cfg,
                    u,
                    Origin {
                        key: format!("bus-{track}-{}", m.id),
                        source: "bus",
                        workflow_id: wf.as_str(),
                        definition: st.definition_id.as_deref(),
                        step: step.as_deref(),
                        god: god.as_str(),
                        track: Some(track.as_str()),
                        session: session.filter(|s| !s.is_empty() && s.len() <= 128),
                    },
                )
            })
            .collect();
        let recorded = hook::record_many(&mut st, &reports, |k| in_ledger.contains(k));
        if recorded == 0 {
            return Ok((0, reports));
        }
        st.updated = Some(now_ts());
        files::write_state(root, wf, &st)?;
        let def = st.definition_id.as_deref().and_then(|d| {
            crate::conductor::definition::find_definition(root, d)
                .ok()
                .flatten()
        });
        let mut gods: Vec<&str> = reports
            .iter()
            .filter(|r| !in_ledger.contains(&r.line.key))
            .map(|r| r.line.god.as_str())
            .collect();
        gods.sort_unstable();
        gods.dedup();
        // Warnings never fail the pass (as after an act); the ledger lines come with the chunk's.
        let mut warnings = Vec::new();
        for g in gods {
            self.budget_warnings(wf.as_str(), &st, def.as_ref(), g, &mut warnings);
        }
        Ok((recorded, reports))
    }

    /// Raises the budget a held dispatch was held for (an operator act, before approving it): each
    /// budget it reached is set to `cost_usd` and/or `tokens` (absolute values), recorded in the
    /// workflow's `budget` and `budget_raises` (god and day budgets in `conductor/cost/budgets.json`)
    /// and journaled as `budget_raise`. Refused for a dispatch not held for a budget.
    pub fn raise_budget(&self, handoff_id: &HandoffId, to: Budget, by: &str) -> Result<Value> {
        let root = self.root();
        if to.is_empty() {
            return Err(Error::refused(
                "give the new budget: --budget-usd, --budget-tokens or both",
            ));
        }
        let (workflow_id, crossed) = held_for_budget(root, handoff_id)?;
        let wf = WorkflowId::parse(&workflow_id)?;
        let _lock = FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
        let mut st = files::require_state(root, &wf)?;
        let mut warnings = Vec::new();
        let at = now_ts();
        let raise = Raise {
            root,
            handoff_id,
            to,
            by,
            at: &at,
        };
        let raises = raise.apply(&crossed, &mut st, &mut warnings)?;
        st.updated = Some(at.clone());
        files::write_state(root, &wf, &st)?;
        drop(_lock);
        let act = Act::new("budget_raise", "raised")
            .target("workflow_id", Some(wf.as_str()))
            .target("handoff_id", Some(handoff_id.as_str()))
            .reason(Some(&raises_text(&raises)));
        warnings.extend(self.journal(&act));
        Ok(
            json!({ "status": "raised", "workflow_id": wf.as_str(), "handoff_id": handoff_id.as_str(),
            "raises": raises, "warnings": warnings }),
        )
    }
}

/// The held dispatch `handoff_id`'s workflow and the budgets it was held for (its `budget.crossed`);
/// refused for a dispatch not held, or held for another reason.
fn held_for_budget(root: &Root, handoff_id: &HandoffId) -> Result<(String, Vec<Value>)> {
    let found = files::find_live(root, handoff_id, None)?
        .filter(|f| f.path.starts_with(root.quarantine_dir()))
        .ok_or_else(|| {
            Error::not_found(format!("no dispatch {handoff_id} is held for approval"))
        })?;
    let crossed: Vec<Value> = found
        .dispatch
        .extra
        .get("budget")
        .and_then(|b| b.get("crossed"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if crossed.is_empty() {
        return Err(Error::refused(format!(
            "dispatch {handoff_id} is not held for a budget (held because: {}); approve it as it is",
            found.dispatch.held_because.as_deref().unwrap_or("?")
        )));
    }
    Ok((found.dispatch.workflow_id.to_string(), crossed))
}

/// One operator's raise of the budgets a held dispatch was held for.
struct Raise<'a> {
    root: &'a Root,
    handoff_id: &'a HandoffId,
    /// The new limits (absolute); a limit not given keeps the budget's own.
    to: Budget,
    by: &'a str,
    at: &'a str,
}

impl Raise<'_> {
    /// Raises each budget of `crossed` once: a workflow's or step's into the state's `budget` and
    /// `budget_raises`, a god's or day's into `conductor/cost/budgets.json`. Returns the raises.
    fn apply(
        &self,
        crossed: &[Value],
        st: &mut crate::conductor::model::WorkflowState,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Value>> {
        let def = st.definition_id.as_deref().and_then(|d| {
            crate::conductor::definition::find_definition(self.root, d)
                .ok()
                .flatten()
        });
        let (declared_wf, declared_steps) = match &def {
            Some(d) => super::budget::declared(d, warnings),
            None => (None, BTreeMap::new()),
        };
        let cfg = CostConfig::of_root(self.root);
        let mut raised = Raised::of(&st.extra);
        let mut raises = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for c in crossed {
            let scope = c.get("scope").and_then(Value::as_str).unwrap_or("");
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if !seen.insert((scope.to_owned(), name.clone())) {
                continue;
            }
            let (from, new) = match scope {
                "workflow" => {
                    let from = raised.workflow.or(declared_wf);
                    let new = self.merge(from);
                    raised.workflow = Some(new);
                    (from, new)
                }
                "step" => {
                    let step = name.rsplit('/').next().unwrap_or("").to_owned();
                    let from = raised
                        .steps
                        .get(&step)
                        .copied()
                        .or(declared_steps.get(&step).copied());
                    let new = self.merge(from);
                    raised.steps.insert(step, new);
                    (from, new)
                }
                "god" => {
                    GodName::parse(&name)?;
                    let from = cfg.gods.get(&name).copied();
                    let new = self.merge(from);
                    ledger::write_raised(self.root, "god", &name, &new)?;
                    (from, new)
                }
                "day" => {
                    let from = cfg.day_budget(&name);
                    let new = self.merge(from);
                    ledger::write_raised(self.root, "day", &name, &new)?;
                    (from, new)
                }
                _ => continue,
            };
            raises.push(json!({
                "handoff_id": self.handoff_id.as_str(), "scope": scope, "name": name,
                "from": from.map(|b| b.to_json()), "to": new.to_json(), "by": self.by, "at": self.at,
            }));
        }
        st.extra.insert(
            STATE_BUDGET.into(),
            serde_json::to_value(&raised).unwrap_or(Value::Null),
        );
        let list = st
            .extra
            .entry(STATE_RAISES.to_owned())
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(a) = list.as_array_mut() {
            a.extend(raises.iter().cloned());
        }
        Ok(raises)
    }

    /// The raised budget: the new limits, and the old one's where none is given.
    fn merge(&self, from: Option<Budget>) -> Budget {
        Budget {
            cost_micros: self.to.cost_micros.or(from.and_then(|b| b.cost_micros)),
            tokens: self.to.tokens.or(from.and_then(|b| b.tokens)),
        }
    }
}

/// The journal's reason of a raise: `scope name -> limits`, one per budget.
fn raises_text(raises: &[Value]) -> String {
    raises
        .iter()
        .map(|r| {
            format!(
                "{} {} -> {}",
                r["scope"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or(""),
                r["to"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What `pantheon cost` answers.
#[derive(Debug, Clone, Default)]
pub struct CostQuery {
    /// `workflow`, `god`, `step`, `model`, `day`, `definition`, `track` or `session`.
    pub by: String,
    /// Only reports recorded at or after this instant.
    pub since: Option<chrono::DateTime<chrono::Utc>>,
}

/// The dimensions `pantheon cost --by` takes.
pub const BY: [&str; 8] = [
    "workflow",
    "god",
    "step",
    "model",
    "day",
    "definition",
    "track",
    "session",
];

/// Answers a cost query: `{by, since, total, rows: [{key, cost_usd, tokens, …}], prices, budgets,
/// unsettled}`, rows by cost, highest first. Without `since`, the summary answers every dimension but
/// `workflow` (the ledger's lines past its offset folded in); otherwise the ledger is read whole.
pub fn query(root: &Root, q: &CostQuery) -> Result<Value> {
    if !BY.contains(&q.by.as_str()) {
        return Err(Error::refused(format!(
            "--by {:?}: one of {}",
            q.by,
            BY.join(", ")
        )));
    }
    let (total, rows): (Totals, BTreeMap<String, Totals>) =
        if q.since.is_none() && q.by != "workflow" {
            let s = ledger::summary(root)?;
            (s.total, s.by.get(&q.by).cloned().unwrap_or_default())
        } else {
            let mut total = Totals::default();
            let mut rows: BTreeMap<String, Totals> = BTreeMap::new();
            ledger::read_from(root, 0, |l: Line, _| {
                if let Some(since) = q.since
                    && parse_ts(&l.at).is_none_or(|t| t < since)
                {
                    return;
                }
                let t = l.totals();
                total.merge(&t);
                if let Some(k) = l.key_in(&q.by) {
                    rows.entry(k).or_default().merge(&t);
                }
            })?;
            (total, rows)
        };
    let mut rows: Vec<(String, Totals)> = rows.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.cost_micros
            .cmp(&a.1.cost_micros)
            .then(b.1.tokens().cmp(&a.1.tokens()))
            .then(a.0.cmp(&b.0))
    });
    let cfg = CostConfig::of_root(root);
    let budgets = json!({
        "gods": cfg.gods.iter().map(|(g, b)| (g.clone(), b.to_json())).collect::<serde_json::Map<_, _>>(),
        "day": cfg.day.map(|b| b.to_json()),
        "warn_at": cfg.warn_at,
    });
    Ok(json!({
        "by": q.by,
        "since": q.since.map(crate::store::time::format_ts),
        "total": total.to_json(),
        "rows": rows.iter().map(|(k, t)| {
            let mut v = t.to_json();
            v["key"] = json!(k);
            v
        }).collect::<Vec<_>>(),
        "count": rows.len(),
        "prices": { "date": cfg.prices.date, "source": cfg.prices.source },
        "budgets": budgets,
        "unsettled": ledger::markers(root).len(),
        "warnings": cfg.warnings,
    }))
}

/// The ledger's totals by god and definition, and tokens by god, definition and kind (for metrics).
pub fn metric_totals(root: &Root) -> Result<Vec<(String, String, Totals)>> {
    let s = ledger::summary(root)?;
    Ok(s.by
        .get("god_definition")
        .map(|m| {
            m.iter()
                .map(|(k, t)| {
                    let (g, d) = k.split_once('/').unwrap_or((k.as_str(), ""));
                    (g.to_owned(), d.to_owned(), *t)
                })
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metric_totals_sum_by_god_and_definition() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let line = |key: &str, god: &str, def: Option<&str>| Line {
            key: key.into(),
            at: "2026-12-01T00:00:00Z".into(),
            workflow_id: "wf_a".into(),
            god: god.into(),
            definition: def.map(str::to_owned),
            input_tokens: 7,
            cost_micros: 1_500_000,
            priced: true,
            ..Default::default()
        };
        ledger::append(&root, &line("a", "thoth", Some("deploy"))).unwrap();
        ledger::append(&root, &line("b", "thoth", Some("deploy"))).unwrap();
        ledger::append(&root, &line("c", "iris", None)).unwrap();
        let mut rows = metric_totals(&root).unwrap();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!((rows[0].0.as_str(), rows[0].1.as_str()), ("iris", ""));
        assert_eq!(rows[0].2.cost_micros, 1_500_000);
        assert_eq!(
            (rows[1].0.as_str(), rows[1].1.as_str()),
            ("thoth", "deploy")
        );
        assert_eq!(rows[1].2.cost_micros, 3_000_000);
        assert_eq!(rows[1].2.input_tokens, 14);
    }
}
