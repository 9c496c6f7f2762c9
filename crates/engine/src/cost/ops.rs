//! The cost operations shells call: reading `USAGE` bus lines into the ledger, the supervisor's pass
//! that settles reports a killed act left, raising a budget when approving a held dispatch, and the
//! `pantheon cost` query.

use crate::journal::Verb;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::budget::{Budget, CostConfig, Raised, STATE_BUDGET, STATE_RAISES, Subject, crossed};
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

    /// The budgets a held dispatch would go past if it were approved now, with the usage recorded
    /// against each and its limit: computed from the workflow's state, its definition, the root's
    /// config, the raises recorded and the ledger at this moment (never from the dispatch file, which a
    /// god may have edited). What `approve --budget-usd/--budget-tokens` raises and the console's raise
    /// dialog lists. Refused when the dispatch is not held (the workflow is not awaiting an operator's
    /// decision on it).
    pub fn budgets_reached(&self, handoff_id: &HandoffId) -> Result<Vec<BudgetReached>> {
        let root = self.root();
        let (wf, _) = held_workflow(root, handoff_id)?;
        let st = files::require_state(root, &wf)?;
        let mut warnings = Vec::new();
        let subjects = held_subjects(root, &wf, &st, handoff_id, &mut warnings)?;
        Ok(reached(&subjects))
    }

    /// Raises the budgets a held dispatch would go past (an operator act, before approving it): each
    /// budget reached now ([`Conductor::budgets_reached`]) gets `cost_usd` and/or `tokens` as its new
    /// limit for each of those metrics it limits (absolute values; a metric not given keeps its
    /// limit), recorded in the workflow's `budget` and
    /// `budget_raises` (god and day budgets in `conductor/cost/budgets.json`) and journaled as
    /// `budget_raise`. Refused, changing nothing, when no budget is reached, and when a budget would
    /// stay reached after the raise (a limit at or below what is already used, or a reached metric
    /// left as it is): the refusal names each such budget with its usage.
    pub fn raise_budget(&self, handoff_id: &HandoffId, to: Budget, by: &str) -> Result<Value> {
        let root = self.root();
        if to.is_empty() {
            return Err(Error::refused(
                "give the new budget: --budget-usd, --budget-tokens or both",
            ));
        }
        let (wf, _) = held_workflow(root, handoff_id)?;
        let lock = FileLock::exclusive(root, &root.workflow_lock_path(&wf))?;
        let (answer, act, mut warnings) = self.raise_budget_locked(handoff_id, &wf, to, by)?;
        drop(lock);
        warnings.extend(self.journal(&act));
        let mut answer = answer;
        answer["warnings"] = json!(warnings);
        Ok(answer)
    }

    /// [`Conductor::raise_budget`] under the workflow's lock, which the caller holds (an approval
    /// link checks its binding and raises in the same hold of the lock): the answer, the entry to
    /// journal once the lock is released, and the warnings.
    pub(crate) fn raise_budget_locked(
        &self,
        handoff_id: &HandoffId,
        wf: &WorkflowId,
        to: Budget,
        by: &str,
    ) -> Result<(Value, Act, Vec<String>)> {
        let root = self.root();
        let wf = wf.clone();
        if to.is_empty() {
            return Err(Error::refused(
                "give the new budget: --budget-usd, --budget-tokens or both",
            ));
        }
        let mut st = files::require_state(root, &wf)?;
        let mut warnings = Vec::new();
        let subjects = held_subjects(root, &wf, &st, handoff_id, &mut warnings)?;
        let plan = raise_plan(&wf, &subjects, to)?;
        let at = now_ts();
        let mut raised = Raised::of(&st.extra);
        let mut raises = Vec::new();
        for (target, from, new) in plan {
            let (scope, name) = match &target {
                Target::Workflow => {
                    raised.workflow = Some(new);
                    ("workflow", wf.to_string())
                }
                Target::Step(step) => {
                    raised.steps.insert(step.to_string(), new);
                    ("step", format!("{wf}/{step}"))
                }
                Target::God(g) => {
                    ledger::write_raised(root, "god", g.as_str(), &new)?;
                    ("god", g.to_string())
                }
                Target::Day(day) => {
                    ledger::write_raised(root, "day", day, &new)?;
                    ("day", day.clone())
                }
            };
            raises.push(json!({
                "handoff_id": handoff_id.as_str(), "scope": scope, "name": name,
                "from": from.map(|b| b.to_json()), "to": new.to_json(), "by": by, "at": at,
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
        st.updated = Some(at.clone());
        files::write_state(root, &wf, &st)?;
        let act = Act::new(Verb::BudgetRaise, "raised")
            .workflow(wf.as_str())
            .handoff(handoff_id.as_str())
            .reason(Some(&raises_text(&raises)));
        let answer = json!({ "status": "raised", "workflow_id": wf.as_str(),
            "handoff_id": handoff_id.as_str(), "raises": raises, "warnings": [] });
        Ok((answer, act, warnings))
    }
}

/// One budget a held dispatch would go past: which, the metric, what is used and the limit in force
/// (micro-dollars for `cost_usd`, else tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetReached {
    /// `workflow`, `step`, `god` or `day`.
    pub scope: String,
    /// The workflow id, `{workflow}/{step}`, the god, or the UTC day.
    pub name: String,
    /// `cost_usd` or `tokens`.
    pub metric: String,
    /// What is recorded against it.
    pub used: u64,
    /// Its limit.
    pub limit: u64,
}

impl BudgetReached {
    /// `workflow wf_x: $1.20 used of its $1.00 budget`.
    pub fn text(&self) -> String {
        format!(
            "{} {}: {} used of its {} budget",
            self.scope,
            self.name,
            shown(&self.metric, self.used),
            shown(&self.metric, self.limit)
        )
    }

    /// True for a dollar budget.
    pub fn is_cost(&self) -> bool {
        self.metric == "cost_usd"
    }
}

/// An amount as people read it: `$1.20` (cents, or more digits when smaller), `136,000 tokens`.
fn shown(metric: &str, n: u64) -> String {
    if metric == "cost_usd" {
        if n.is_multiple_of(10_000) || n >= 100_000_000 {
            format!("${:.2}", n as f64 / 1e6)
        } else {
            format!("${:.6}", n as f64 / 1e6)
                .trim_end_matches('0')
                .to_owned()
        }
    } else {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        format!("{out} tokens")
    }
}

fn reached(subjects: &[Subject]) -> Vec<BudgetReached> {
    crossed(subjects)
        .into_iter()
        .map(|c| BudgetReached {
            scope: c.scope.to_owned(),
            name: c.name,
            metric: c.metric.to_owned(),
            used: c.used,
            limit: c.limit,
        })
        .collect()
}

/// The workflow of the held dispatch `handoff_id` (its file found in `_quarantine`, or moved by hand
/// into an inbox), checked against that workflow's state: the state must be held, by this handoff.
fn held_workflow(root: &Root, handoff_id: &HandoffId) -> Result<(WorkflowId, files::Found)> {
    let not_held = || {
        Error::not_found(format!(
            "no dispatch {handoff_id} is held for approval (pantheon pending lists awaiting_approval)"
        ))
    };
    let found = files::find_live(root, handoff_id, None)?.ok_or_else(not_held)?;
    let wf = WorkflowId::parse(&found.dispatch.workflow_id)?;
    let st = files::require_state(root, &wf)?;
    match crate::conductor::hold::undecided(&st) {
        Some(h)
            if h.step == found.dispatch.step
                && h.handoff_id.is_none_or(|x| x == handoff_id.as_str()) =>
        {
            Ok((wf, found))
        }
        _ => Err(not_held()),
    }
}

/// Every budget that applies to the held dispatch of `handoff_id` now, with
/// the usage recorded against each: the workflow's and its steps' (definition, then raises in the
/// state), the addressee's (the god the state holds the dispatch for) and today's.
fn held_subjects(
    root: &Root,
    wf: &WorkflowId,
    st: &crate::conductor::model::WorkflowState,
    handoff_id: &HandoffId,
    warnings: &mut Vec<String>,
) -> Result<Vec<Subject>> {
    let Some(h) = crate::conductor::hold::undecided(st) else {
        return Err(Error::not_found(format!(
            "no dispatch {handoff_id} is held for approval: workflow {wf} is {}",
            st.status
        )));
    };
    let god = h.god.map(GodName::parse).transpose()?;
    let def = match st.definition_id.as_deref() {
        Some(d) => {
            crate::conductor::definition::find_definition(root, d).map_err(|e| Error::Corrupt {
                path: e.path,
                message: format!("workflow definition does not load: {}", e.message),
            })?
        }
        None => None,
    };
    hook::subjects(
        root,
        wf.as_str(),
        Some(st),
        def.as_ref(),
        god.as_ref().map(GodName::as_str),
        None,
        warnings,
    )
}

/// What a raise sets: a budget of the workflow, of one of its steps, of a god, of a day.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Workflow,
    Step(crate::store::StepId),
    God(GodName),
    Day(String),
}

/// The raise of `to` over the budgets reached among `subjects`: for each, its target, the budget in
/// force and the new one. Refused when none is reached, and when any would stay reached (each named,
/// with what would free it).
fn raise_plan(
    wf: &WorkflowId,
    subjects: &[Subject],
    to: Budget,
) -> Result<Vec<(Target, Option<Budget>, Budget)>> {
    let reached_now = reached(subjects);
    if reached_now.is_empty() {
        return Err(Error::refused(format!(
            "no budget of workflow {wf}, its steps, its god or today is reached now, so there is \
             nothing to raise; approve it without --budget-usd/--budget-tokens"
        )));
    }
    let mut plan = Vec::new();
    let mut still = Vec::new();
    for s in subjects {
        if !reached_now
            .iter()
            .any(|r| r.scope == s.scope && r.name == s.name)
        {
            continue;
        }
        let target = match s.scope {
            "workflow" => Target::Workflow,
            "step" => {
                let step = s.name.strip_prefix(&format!("{wf}/")).unwrap_or("");
                Target::Step(crate::store::StepId::parse(step)?)
            }
            "god" => Target::God(GodName::parse(&s.name)?),
            "day" => {
                chrono::NaiveDate::parse_from_str(&s.name, "%Y-%m-%d").map_err(|_| {
                    Error::refused(format!("{:?} is not a day (YYYY-MM-DD)", s.name))
                })?;
                Target::Day(s.name.clone())
            }
            other => {
                return Err(Error::refused(format!("unknown budget scope {other:?}")));
            }
        };
        let from = Some(s.budget);
        // A given metric sets the limit of each reached budget that limits it; a budget keeps the
        // limit of a metric not given, and gets none it did not have.
        let new = Budget {
            cost_micros: s.budget.cost_micros.map(|c| to.cost_micros.unwrap_or(c)),
            tokens: s.budget.tokens.map(|t| to.tokens.unwrap_or(t)),
        };
        let after = Subject {
            budget: new,
            ..s.clone()
        };
        for c in crossed(std::slice::from_ref(&after)) {
            let flag = if c.metric == "cost_usd" {
                "--budget-usd"
            } else {
                "--budget-tokens"
            };
            let given = if c.metric == "cost_usd" {
                to.cost_micros.is_some()
            } else {
                to.tokens.is_some()
            };
            let why = if given {
                format!("the new limit {} is not above it", shown(c.metric, c.limit))
            } else {
                format!("its limit {} is left as it is", shown(c.metric, c.limit))
            };
            still.push(format!(
                "{} {}: {} used, {why}; give {flag} above {}",
                c.scope,
                c.name,
                shown(c.metric, c.used),
                shown(c.metric, c.used)
            ));
        }
        plan.push((target, from, new));
    }
    if !still.is_empty() {
        return Err(Error::refused(format!(
            "this raise would leave {} reached, so the workflow's next dispatch would be held \
             again; nothing was changed: {}",
            if still.len() == 1 {
                "a budget"
            } else {
                "budgets"
            },
            still.join("; ")
        )));
    }
    Ok(plan)
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

    fn subject(scope: &'static str, name: &str, budget: Budget, cost: u64, tokens: u64) -> Subject {
        Subject {
            scope,
            name: name.into(),
            budget,
            used: super::super::usage::Totals {
                input_tokens: tokens,
                cost_micros: cost,
                ..Default::default()
            },
        }
    }

    fn usd(c: u64) -> Budget {
        Budget {
            cost_micros: Some(c),
            tokens: None,
        }
    }

    fn tok(t: u64) -> Budget {
        Budget {
            cost_micros: None,
            tokens: Some(t),
        }
    }

    #[test]
    fn a_raise_sets_each_reached_budget_in_the_metrics_it_limits_and_refuses_what_stays_reached() {
        let wf = WorkflowId::parse("wf_x").unwrap();
        let subjects = [
            subject("workflow", "wf_x", usd(1_000_000), 1_200_000, 136_000),
            subject("step", "wf_x/build", tok(100_000), 1_000_000, 136_000),
            // Not reached: never raised.
            subject("step", "wf_x/review", tok(500_000), 0, 0),
        ];
        // Dollars only: the step's tokens stay reached, named with what frees them.
        let e = raise_plan(&wf, &subjects, usd(5_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "step wf_x/build: 136,000 tokens used, its limit 100,000 tokens is left as it is; \
                 give --budget-tokens above 136,000 tokens"
            ),
            "{e}"
        );
        assert!(e.contains("would leave a budget reached"), "{e}");
        // A limit at what is spent is no raise.
        let e = raise_plan(
            &wf,
            &subjects,
            Budget {
                cost_micros: Some(1_200_000),
                tokens: Some(200_000),
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("workflow wf_x: $1.20 used, the new limit $1.20 is not above it; give --budget-usd above $1.20"),
            "{e}"
        );
        // Both above: each budget gets the metric it limits, and nothing else.
        let plan = raise_plan(
            &wf,
            &subjects,
            Budget {
                cost_micros: Some(2_000_000),
                tokens: Some(200_000),
            },
        )
        .unwrap();
        assert_eq!(
            plan,
            vec![
                (Target::Workflow, Some(usd(1_000_000)), usd(2_000_000)),
                (
                    Target::Step(crate::store::StepId::parse("build").unwrap()),
                    Some(tok(100_000)),
                    tok(200_000)
                ),
            ]
        );
        // Nothing reached: nothing to raise.
        let e = raise_plan(&wf, &subjects[2..], usd(5_000_000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nothing to raise"), "{e}");
    }

    #[test]
    fn names_a_raise_would_store_are_checked() {
        let wf = WorkflowId::parse("wf_x").unwrap();
        for (scope, name) in [("day", "../../x"), ("god", "../x"), ("step", "wf_x/../y")] {
            let s = [subject(scope, name, usd(1), 5, 0)];
            assert!(raise_plan(&wf, &s, usd(10)).is_err(), "{scope} {name}");
        }
        let s = [subject("day", "2026-12-06", usd(1), 5, 0)];
        assert_eq!(
            raise_plan(&wf, &s, usd(10)).unwrap()[0].0,
            Target::Day("2026-12-06".into())
        );
    }

    #[test]
    fn budgets_reached_are_computed_from_the_state_and_the_ledger_not_the_dispatch() {
        let d = tempfile::tempdir().unwrap();
        let c = Conductor::new(Root::at(d.path()));
        c.init().unwrap();
        for e in std::fs::read_dir(c.root().rules_dir()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        std::fs::write(
            c.root().workflows_dir().join("paid.yaml"),
            "workflow:\n  id: paid\n  budget: {cost_usd: 1}\n  steps:\n    - id: research\n      god: thoth\n    - id: build\n      god: hephaestus\n      budget: {tokens: 100}\n",
        )
        .unwrap();
        let h = serde_json::json!({"handoff_id": "hof_20261206_aa0001", "workflow_id": "wf_r",
            "from_god": "thoth", "to_god": "hephaestus", "step": "research",
            "routing": {"workflow_definition": "paid"},
            "context": {"summary": "s", "decisions": [], "artifacts": []},
            "usage": {"cost_usd": 1.5}});
        assert_eq!(
            c.submit_handoff(&h).unwrap().status.as_str(),
            "awaiting_approval"
        );
        let hid = HandoffId::parse("hof_20261206_aa0001").unwrap();
        // A forged figure in the dispatch changes nothing.
        let p = c.root().quarantine_dir().join("hof_20261206_aa0001.json");
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["budget"]["crossed"] = json!([{"scope": "god", "name": "marvin", "metric": "tokens",
                                         "used": 9, "limit": 1}]);
        std::fs::write(&p, v.to_string()).unwrap();
        let reached = c.budgets_reached(&hid).unwrap();
        assert_eq!(
            reached,
            vec![BudgetReached {
                scope: "workflow".into(),
                name: "wf_r".into(),
                metric: "cost_usd".into(),
                used: 1_500_000,
                limit: 1_000_000,
            }]
        );
        assert_eq!(
            reached[0].text(),
            "workflow wf_r: $1.50 used of its $1.00 budget"
        );
        // Not held: refused.
        let e = c
            .budgets_reached(&HandoffId::parse("hof_20261206_ffffff").unwrap())
            .unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }

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
