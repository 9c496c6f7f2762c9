//! The eight gods: start workflows from the sample definitions, check their inboxes, ack (mostly
//! accept, sometimes pending first, occasionally reject so `fallback_gods` reroutes), work, write real
//! artifacts under `{root}/artifacts/{workflow_id}/`, and submit the next handoff with the step's
//! declared gates passed. Held dispatches wait for the operator (or the stand-in operator).

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use serde_json::json;

use super::sim::{Sim, TICKS_PER_SECOND};
use super::text;
use crate::engine::{
    AckId, AckStatus, Actor, GodName, HandoffId, Result, Root, WorkflowDef, WorkflowId,
    WorkflowStatus, load_definitions, write_atomic,
};

/// The default gods (the inboxes `init` creates), in the order they take their turn.
pub(crate) const GODS: [&str; 8] = crate::engine::DEFAULT_GODS;

/// The definitions the first four workflows use, so every kind of event shows in the first minute:
/// a held handover, a short pipeline that completes, the full feature pipeline, and a probe whose
/// page is never acked (an ack deadline running out, a redelivery, a dead letter).
const OPENING: [(u64, &str); 4] = [
    (3, "cross-pantheon-deploy"),
    (12, "example-research-build"),
    (25, "deploy-feature"),
    (40, PROBE),
];

/// The demo's own definition (written into the demo root, not a shipped sample): Thoth checks a
/// service and pages the on-call through Hermes, who is "offline" for these pages and never acks
/// them. The page carries an ack deadline; the simulation's supervisor pass redelivers it once and
/// then dead-letters it, so pane 2 shows a deadline counting down and pane 9 a dead letter. Once a
/// page has been dead-lettered Hermes is back: an operator's requeue is worked as usual.
pub(crate) const PROBE: &str = "uptime-probe";

/// The step of [`PROBE`] that nobody acks.
const PROBE_PAGE: &str = "page-on-call";

/// [`PROBE`]'s definition file, its page's `ack_wait` 15 demo seconds at `speed` (at least one
/// wall-clock second: deadlines run on the wall clock).
pub(crate) fn probe_yaml(speed: f64) -> String {
    let wait = (15.0 / speed).round().clamp(1.0, 3600.0) as u64;
    format!(
        "\
# Written by `pantheon demo`: a probe whose page is never acked, so the demo shows an ack deadline
# running out, a redelivery and a dead letter.
workflow:
  id: uptime-probe
  name: \"Uptime probe\"
  version: \"1.0.0\"
  description: \"Thoth checks a service; Hermes pages the on-call (and, in the demo, never acks).\"
  steps:
    - id: check
      god: thoth
      timeout: 10m
    - id: page-on-call
      god: hermes
      timeout: 10m
      ack_wait: {wait}s
      max_deliveries: 2
"
    )
}

/// Later workflows: (definition, weight).
const MIX: [(&str, u32); 5] = [
    ("deploy-feature", 3),
    ("bug-fix", 4),
    ("morning-briefing", 2),
    ("example-research-build", 2),
    ("cross-pantheon-deploy", 1),
];

/// The model each god runs on (the demo's gods report usage as real agents would).
fn model_of(god: &str) -> &'static str {
    match god {
        "thoth" => "claude-opus-4-5",
        "hephaestus" | "marvin" => "claude-sonnet-4-5",
        "iris" => "gpt-4.1",
        "hermes" | "caduceus" => "claude-haiku-4-5",
        _ => "gpt-4o-mini",
    }
}

/// What one step plausibly costs: tens of thousands of input tokens (research reads more), as many
/// again from the prompt cache, a few thousand out; priced by the root's table from the model, as a
/// tokens-only report is. Thoth's research on Opus costs over $0.30, past the $0.25 budget of the
/// `example-research-build` sample, so its build dispatch is held for budget every time.
fn step_usage(rng: &mut impl Rng, god: &str, step: &str) -> serde_json::Value {
    let input: u64 = if step == "research" {
        rng.random_range(60_000..=150_000)
    } else {
        rng.random_range(20_000..=90_000)
    };
    json!({
        "input_tokens": input,
        "output_tokens": rng.random_range(1_500u64..=9_000),
        "cache_read_tokens": input * rng.random_range(1u64..=4),
        "cache_write_tokens": rng.random_range(0u64..=8_000),
        "model": model_of(god),
    })
}

/// Workflows in flight above which no new one starts.
const MAX_ACTIVE: usize = 8;

/// How a workflow the simulation started is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WfOutcome {
    Active,
    Completed,
    Failed,
}

/// A workflow the simulation started.
#[derive(Debug, Clone)]
pub(crate) struct SimWorkflow {
    pub definition: String,
    pub topic: String,
    pub outcome: WfOutcome,
}

#[derive(Debug, Clone)]
enum Phase {
    /// Ack at this tick.
    AckAt(u64),
    /// Submit the handoff at this tick.
    WorkUntil(u64),
}

/// A dispatch a god is handling.
#[derive(Debug, Clone)]
struct Job {
    god: String,
    handoff_id: String,
    wf: String,
    step: String,
    pended: bool,
    phase: Phase,
}

/// A first step being done by the god that starts a workflow.
#[derive(Debug, Clone)]
struct Start {
    god: String,
    wf: String,
    step: String,
    due: u64,
}

/// A dispatch held in `_quarantine` for approval.
#[derive(Debug, Clone)]
struct Held {
    handoff_id: String,
    wf: String,
    step: String,
    since: u64,
}

/// The gods' side of the simulation.
pub(crate) struct Gods {
    defs: BTreeMap<String, WorkflowDef>,
    pub(crate) workflows: BTreeMap<String, SimWorkflow>,
    jobs: Vec<Job>,
    starts: Vec<Start>,
    held: Vec<Held>,
    next_start: u64,
    started: u32,
    /// Workflow ids already on disk (from an earlier run on the same root): never reused.
    taken: BTreeSet<String>,
    rejected_once: bool,
    pended_once: bool,
    /// Probe pages the supervisor pass has dead-lettered: Hermes works them if they come back.
    pub(crate) released: BTreeSet<String>,
}

impl Gods {
    /// Loads the definitions of `root` (installed by `init`).
    pub(crate) fn new(root: &Root) -> Result<Self> {
        let (defs, _errors) = load_definitions(root);
        let taken = std::fs::read_dir(root.state_dir())
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.strip_suffix(".json")
                            .map(|s| s.trim_end_matches(".aborted").to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            defs: defs.into_iter().map(|d| (d.id.clone(), d)).collect(),
            workflows: BTreeMap::new(),
            jobs: Vec::new(),
            starts: Vec::new(),
            held: Vec::new(),
            next_start: OPENING[0].0,
            started: 0,
            taken,
            rejected_once: false,
            pended_once: false,
            released: BTreeSet::new(),
        })
    }

    /// True for a probe page not yet dead-lettered: nobody answers it.
    fn ignores(&self, wf: &str, step: &str, handoff_id: &str) -> bool {
        step == PROBE_PAGE
            && self
                .workflows
                .get(wf)
                .is_some_and(|w| w.definition == PROBE)
            && !self.released.contains(handoff_id)
    }

    fn active(&self) -> usize {
        self.workflows
            .values()
            .filter(|w| w.outcome == WfOutcome::Active)
            .count()
    }
}

fn work_ticks(rng: &mut impl Rng) -> u64 {
    rng.random_range(15..=35)
}

impl Sim {
    pub(crate) fn gods_tick(&mut self) {
        self.maybe_start_workflow();
        self.finish_starts();
        for (i, god) in GODS.iter().enumerate() {
            if self.tick % 5 == (i as u64) % 5 {
                self.check_inbox(god);
            }
        }
        self.run_jobs();
        if self.tick % 5 == 2 {
            self.watch_held();
        }
    }

    fn maybe_start_workflow(&mut self) {
        if self.tick < self.gods.next_start {
            return;
        }
        let n = self.gods.started as usize;
        let def_id = if n < OPENING.len() {
            OPENING[n].1.to_owned()
        } else {
            let available: Vec<(&str, u32)> = MIX
                .iter()
                .copied()
                .filter(|(d, _)| self.gods.defs.contains_key(*d))
                .collect();
            let total: u32 = available.iter().map(|(_, w)| w).sum();
            if total == 0 {
                self.gods.next_start = u64::MAX;
                return;
            }
            let mut r = self.rng.random_range(0..total);
            let mut chosen = available[0].0;
            for (d, w) in &available {
                if r < *w {
                    chosen = d;
                    break;
                }
                r -= w;
            }
            chosen.to_owned()
        };
        self.gods.started += 1;
        let n = self.gods.started as usize;
        self.gods.next_start = if n < OPENING.len() {
            OPENING[n].0
        } else {
            self.tick
                + self
                    .rng
                    .random_range(6 * TICKS_PER_SECOND..=14 * TICKS_PER_SECOND)
        };
        if self.gods.active() >= MAX_ACTIVE {
            return;
        }
        let Some(def) = self.gods.defs.get(&def_id).cloned() else {
            return;
        };
        let mut k = self.gods.started;
        let wf = loop {
            let id = format!("wf_{}_{k}", def.id.replace('-', "_").to_lowercase());
            if !self.gods.taken.contains(&id) && WorkflowId::parse(&id).is_ok() {
                break id;
            }
            k += 1000;
        };
        self.gods.taken.insert(wf.clone());
        let topic = text::topic(&mut self.rng, &def.id).to_owned();
        let first = &def.steps[0];
        self.gods.workflows.insert(
            wf.clone(),
            SimWorkflow {
                definition: def.id.clone(),
                topic: topic.clone(),
                outcome: WfOutcome::Active,
            },
        );
        let due = self.tick + work_ticks(&mut self.rng);
        self.log
            .at(self.tick, "workflow_started", &first.god)
            .workflow(&wf)
            .step(&first.id)
            .detail(format!("{}: {topic}", def.id));
        self.gods.starts.push(Start {
            god: first.god.clone(),
            wf,
            step: first.id.clone(),
            due,
        });
    }

    fn finish_starts(&mut self) {
        let due: Vec<Start> = self
            .gods
            .starts
            .iter()
            .filter(|s| s.due <= self.tick)
            .cloned()
            .collect();
        self.gods.starts.retain(|s| s.due > self.tick);
        for s in due {
            self.submit_step(&s.god, &s.wf, &s.step);
        }
    }

    /// A god reads its inbox and takes on each new dispatch of a simulated workflow.
    fn check_inbox(&mut self, god: &str) {
        let inbox = match GodName::parse(god).and_then(|g| self.conductor.check_inbox(&g)) {
            Ok(r) => r,
            Err(e) => return self.engine_error(god, "check_inbox", &e),
        };
        let mut fresh: Vec<(String, String, String)> = inbox
            .dispatches
            .iter()
            .filter(|d| self.gods.workflows.contains_key(&d.workflow_id))
            .filter(|d| !self.gods.ignores(&d.workflow_id, &d.step, &d.handoff_id))
            .filter(|d| matches!(d.ack_status, AckStatus::Unacked | AckStatus::Pending))
            .filter(|d| {
                !self
                    .gods
                    .jobs
                    .iter()
                    .any(|j| j.god == god && j.handoff_id == d.handoff_id)
            })
            .map(|d| (d.workflow_id.clone(), d.step.clone(), d.handoff_id.clone()))
            .collect();
        fresh.sort();
        for (wf, step, hid) in fresh {
            let at = self.tick + self.rng.random_range(3..=8);
            self.log
                .at(self.tick, "dispatch_received", god)
                .workflow(&wf)
                .step(&step);
            self.gods.jobs.push(Job {
                god: god.to_owned(),
                handoff_id: hid,
                wf,
                step,
                pended: false,
                phase: Phase::AckAt(at),
            });
        }
    }

    fn run_jobs(&mut self) {
        let mut i = 0;
        while i < self.gods.jobs.len() {
            let job = self.gods.jobs[i].clone();
            let keep = match job.phase {
                Phase::AckAt(t) if t <= self.tick => {
                    let mut j = job.clone();
                    self.ack(&mut j)
                }
                Phase::WorkUntil(t) if t <= self.tick => {
                    self.submit_step(&job.god, &job.wf, &job.step);
                    None
                }
                _ => Some(job),
            };
            match keep {
                Some(j) => {
                    self.gods.jobs[i] = j;
                    i += 1;
                }
                None => {
                    self.gods.jobs.remove(i);
                }
            }
        }
    }

    /// Acks a dispatch; returns the job if it goes on.
    fn ack(&mut self, job: &mut Job) -> Option<Job> {
        let step_def = self
            .gods
            .workflows
            .get(&job.wf)
            .and_then(|w| self.gods.defs.get(&w.definition))
            .and_then(|d| d.step(&job.step))
            .cloned();
        let can_reject = step_def
            .as_ref()
            .is_some_and(|s| !s.fallback_gods.is_empty() && s.god == job.god);
        let status = if can_reject && (!self.gods.rejected_once || self.rng.random_bool(0.15)) {
            "rejected"
        } else if !job.pended && (!self.gods.pended_once || self.rng.random_bool(0.2)) {
            "pending"
        } else {
            "accepted"
        };
        let message = match status {
            "rejected" => text::reject_message(&mut self.rng).to_owned(),
            "pending" => text::pending_message(&mut self.rng).to_owned(),
            _ => "Heard, pulling context now.".to_owned(),
        };
        let wait = match status {
            "pending" => self.rng.random_range(10..=25),
            _ => work_ticks(&mut self.rng),
        };
        let eta = crate::engine::time::format_ts(
            chrono::Utc::now()
                + chrono::Duration::from_std(self.cfg.real(wait)).unwrap_or_default(),
        );
        let mut ack = json!({
            "ack_id": AckId::generate().as_str(),
            "handoff_id": job.handoff_id,
            "workflow_id": job.wf,
            "status": status,
            "message": message,
        });
        if status != "rejected" {
            ack["eta"] = json!(eta);
        }
        let r = match self
            .conductor
            .ack_handoff(&ack, Actor::God(job.god.clone()))
        {
            Ok(r) => r,
            Err(e) => {
                self.engine_error(&job.god, "ack_handoff", &e);
                return None;
            }
        };
        let ev = format!("ack_{status}");
        match status {
            "rejected" => {
                self.gods.rejected_once = true;
                let detail = match &r.rerouted_to {
                    Some(g) => format!("rerouted to {g}"),
                    None => "no fallback left".to_owned(),
                };
                self.log
                    .at(self.tick, &ev, &job.god)
                    .workflow(&job.wf)
                    .step(&job.step)
                    .detail(detail);
                if r.rerouted_to.is_some() {
                    self.log
                        .at(self.tick, "rerouted", "conductor")
                        .workflow(&job.wf)
                        .step(&job.step)
                        .detail(r.rerouted_to.clone().unwrap_or_default());
                } else if r.state_status == WorkflowStatus::Failed {
                    self.workflow_failed(&job.wf, "no fallback god left");
                }
                None
            }
            "pending" => {
                self.gods.pended_once = true;
                self.log
                    .at(self.tick, &ev, &job.god)
                    .workflow(&job.wf)
                    .step(&job.step);
                job.pended = true;
                job.phase = Phase::AckAt(self.tick + wait);
                Some(job.clone())
            }
            _ => {
                self.log
                    .at(self.tick, &ev, &job.god)
                    .workflow(&job.wf)
                    .step(&job.step);
                job.phase = Phase::WorkUntil(self.tick + wait);
                Some(job.clone())
            }
        }
    }

    fn workflow_failed(&mut self, wf: &str, why: &str) {
        if let Some(w) = self.gods.workflows.get_mut(wf) {
            w.outcome = WfOutcome::Failed;
        }
        self.log
            .at(self.tick, "workflow_failed", "conductor")
            .workflow(wf)
            .detail(why);
    }

    /// Writes the step's artifact and submits its handoff, with the step's gates passed.
    fn submit_step(&mut self, god: &str, wf: &str, step: &str) {
        let Some(info) = self.gods.workflows.get(wf).cloned() else {
            return;
        };
        let Some(def) = self.gods.defs.get(&info.definition).cloned() else {
            return;
        };
        let Some(step_def) = def.step(step).cloned() else {
            return;
        };
        let summary = text::summary(&mut self.rng, step, &info.topic);
        let decisions = text::decisions(&mut self.rng, step);
        let rel = format!("artifacts/{wf}/{step}.md");
        let body = format!(
            "# {step}: {topic}\n\nBy {god}.\n\n{summary}\n\n## Decisions\n{}\n",
            decisions
                .iter()
                .map(|d| format!("- {d}"))
                .collect::<Vec<_>>()
                .join("\n"),
            topic = info.topic,
        );
        if let Err(e) = write_atomic(&self.root, &self.root.dir.join(&rel), body.as_bytes()) {
            return self.engine_error(god, "write artifact", &e);
        }
        self.log
            .at(self.tick, "artifact_written", god)
            .workflow(wf)
            .step(step)
            .detail(rel.clone());
        let to_god = def
            .next_step(step)
            .map(|s| s.god.clone())
            .unwrap_or_else(|| god.to_owned());
        let mut context = json!({
            "summary": summary,
            "decisions": decisions,
            "artifacts": [rel],
            "gates_passed": step_def.gates,
        });
        if self.rng.random_bool(0.25) {
            context["open_questions"] =
                json!(["Should Hermes announce this to the partner pantheon?"]);
        }
        let mut routing = json!({"workflow_definition": def.id, "priority": "normal"});
        if let Some(v) = &def.version {
            routing["workflow_version"] = json!(v);
        }
        let handoff = json!({
            "handoff_id": HandoffId::generate().as_str(),
            "workflow_id": wf,
            "from_god": god,
            "to_god": to_god,
            "step": step,
            "context": context,
            "routing": routing,
            "usage": step_usage(&mut self.rng, god, step),
        });
        let r = match self.conductor.submit_handoff(&handoff) {
            Ok(r) => r,
            Err(e) => return self.engine_error(god, "submit_handoff", &e),
        };
        let target = format!(
            "{} -> {}",
            r.target_step.as_deref().unwrap_or("-"),
            r.target_god.as_deref().unwrap_or("-")
        );
        self.log
            .at(self.tick, "handoff_submitted", god)
            .workflow(wf)
            .step(step)
            .detail(format!("{}: {target}", r.status));
        match r.status.as_str() {
            "awaiting_approval" => {
                let next = r.target_step.clone().unwrap_or_default();
                self.log
                    .at(self.tick, "dispatch_held", "conductor")
                    .workflow(wf)
                    .step(&next)
                    .detail(target);
                self.gods.held.push(Held {
                    handoff_id: r.handoff_id.clone(),
                    wf: wf.to_owned(),
                    step: next,
                    since: self.tick,
                });
            }
            "completed" => {
                if let Some(w) = self.gods.workflows.get_mut(wf) {
                    w.outcome = WfOutcome::Completed;
                }
                self.log
                    .at(self.tick, "workflow_completed", god)
                    .workflow(wf)
                    .detail(info.definition);
            }
            _ => {}
        }
    }

    /// Held dispatches: notice the operator's decision, or let the stand-in operator approve.
    fn watch_held(&mut self) {
        if self.gods.held.is_empty() {
            return;
        }
        let pending = match self.conductor.list_pending() {
            Ok(p) => p,
            Err(e) => return self.engine_error("sim-operator", "list_pending", &e),
        };
        let still: BTreeSet<String> = pending
            .awaiting_approval
            .iter()
            .map(|p| p.handoff_id.clone())
            .collect();
        let held = std::mem::take(&mut self.gods.held);
        for h in held {
            if !still.contains(&h.handoff_id) {
                let failed = WorkflowId::parse(&h.wf)
                    .and_then(|wf| self.conductor.get_workflow_state(&wf))
                    .map(|s| s.status == WorkflowStatus::Failed)
                    .unwrap_or(false);
                if failed {
                    self.log
                        .at(self.tick, "operator_rejected", "operator")
                        .workflow(&h.wf)
                        .step(&h.step);
                    self.workflow_failed(&h.wf, "rejected by the operator");
                } else {
                    self.log
                        .at(self.tick, "operator_approved", "operator")
                        .workflow(&h.wf)
                        .step(&h.step);
                }
                continue;
            }
            let patient = self
                .cfg
                .operator_patience
                .is_none_or(|p| self.tick < h.since + p);
            if patient {
                self.gods.held.push(h);
                continue;
            }
            match HandoffId::parse(&h.handoff_id)
                .and_then(|hid| self.conductor.approve(&hid, Actor::Operator))
            {
                Ok(_) => {
                    self.log
                        .at(self.tick, "sim_operator_approved", "sim-operator")
                        .workflow(&h.wf)
                        .step(&h.step);
                }
                Err(e) => self.engine_error("sim-operator", "approve", &e),
            }
        }
    }
}
