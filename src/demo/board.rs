//! The board: an orchestrator opens a session at a checkpoint, the five directors assess, discuss over
//! three rounds (challenges, questions, changed verdicts) and vote; the session then waits at
//! RESOLVING for the operator, and the orchestrator resolves it if nobody has after a while.
//!
//! The orchestrator reads the session before each act and does the next thing missing, so an
//! operator who advances, closes a round or resolves from the console is simply followed.

use std::collections::BTreeMap;

use rand::Rng;
use serde::Serialize;
use serde_json::{Map, json};

use super::sim::Sim;
use super::text;
use crate::engine::{
    Bus, Director,
    board::{AssessInput, DiscussInput, OpenInput, VoteInput},
};

/// Who the orchestrator's acts are recorded as.
pub(crate) const ORCHESTRATOR: &str = "orchestrator";

const CHECKPOINTS: [&str; 3] = ["EVALUATE_PLAN", "EVALUATE_EXECUTION", "PRE_LAUNCH"];
const DISCUSS_KINDS: [&str; 4] = ["CHALLENGE", "QUESTION", "CLARIFY", "AGREE"];

/// A session the simulation opened, as it ended (or stands).
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    pub session_id: String,
    pub checkpoint: String,
    pub status: String,
    pub verdict: Option<String>,
    /// `orchestrator` or `operator`.
    pub resolved_by: Option<String>,
}

#[derive(Debug, Clone)]
struct Current {
    session_id: String,
    /// Each director's current stance (assessment verdict, possibly changed in discussion).
    stance: BTreeMap<String, String>,
    lines_this_round: u32,
    planned_lines: u32,
    resolving_since: Option<u64>,
}

/// The board's side of the simulation.
pub(crate) struct BoardSim {
    bus: Bus,
    next_open: u64,
    next_act: u64,
    opened: usize,
    current: Option<Current>,
    pub(crate) sessions: Vec<SessionRecord>,
}

impl BoardSim {
    /// The board of `bus`'s track.
    pub(crate) fn new(bus: Bus) -> Self {
        Self {
            bus,
            next_open: 15,
            next_act: 0,
            opened: 0,
            current: None,
            sessions: Vec::new(),
        }
    }

    fn record(&mut self, id: &str) -> Option<&mut SessionRecord> {
        self.sessions.iter_mut().find(|s| s.session_id == id)
    }
}

impl Sim {
    pub(crate) fn board_tick(&mut self) {
        if self.board.current.is_none() {
            if self.tick >= self.board.next_open {
                self.board_open();
            }
            return;
        }
        if self.tick < self.board.next_act {
            return;
        }
        self.board.next_act = self.tick + self.rng.random_range(3..=7);
        self.board_act();
    }

    fn board_open(&mut self) {
        let checkpoint = CHECKPOINTS[self.board.opened % CHECKPOINTS.len()];
        self.board.opened += 1;
        let proposal = text::proposal(&mut self.rng, checkpoint);
        let input = OpenInput {
            checkpoint: checkpoint.to_owned(),
            proposal: proposal.to_owned(),
            directors: None,
            max_rounds: None,
            source: ORCHESTRATOR.to_owned(),
        };
        match self.board.bus.board_open(&input) {
            Ok(r) => {
                self.log
                    .at(self.tick, "board_opened", ORCHESTRATOR)
                    .track(self.board.bus.track.as_ref())
                    .detail(format!("{checkpoint}: {proposal}"));
                self.board.sessions.push(SessionRecord {
                    session_id: r.session.session_id.clone(),
                    checkpoint: checkpoint.to_owned(),
                    status: r.session.status.clone(),
                    verdict: None,
                    resolved_by: None,
                });
                self.board.current = Some(Current {
                    session_id: r.session.session_id,
                    stance: BTreeMap::new(),
                    lines_this_round: 0,
                    planned_lines: self.rng.random_range(2..=3),
                    resolving_since: None,
                });
                self.board.next_act = self.tick + 4;
            }
            Err(e) => {
                self.engine_error(ORCHESTRATOR, "board_open", &e);
                self.board.next_open = self.tick + 50;
            }
        }
    }

    fn board_event(&mut self, kind: &str, actor: &str, detail: String) {
        let track = self.board.bus.track.to_string();
        self.log
            .at(self.tick, kind, actor)
            .track(&track)
            .detail(detail);
    }

    fn board_act(&mut self) {
        let status = match self.board.bus.board_status() {
            Ok(s) => s,
            Err(e) => return self.engine_error(ORCHESTRATOR, "board_status", &e),
        };
        let Some(session) = status.session.clone() else {
            self.board.current = None;
            self.board.next_open = self.tick + 20;
            return;
        };
        let mut cur = self.board.current.clone().expect("checked by board_tick");
        if session.session_id != cur.session_id {
            // Someone opened another session from outside: follow it from here.
            cur = Current {
                session_id: session.session_id.clone(),
                stance: BTreeMap::new(),
                lines_this_round: 0,
                planned_lines: 2,
                resolving_since: None,
            };
            self.board.sessions.push(SessionRecord {
                session_id: session.session_id.clone(),
                checkpoint: session.checkpoint.clone(),
                status: session.status.clone(),
                verdict: None,
                resolved_by: None,
            });
        }
        if let Some(r) = self.board.record(&cur.session_id) {
            r.status = session.status.clone();
        }
        let directors = session.directors.clone();
        match session.status.as_str() {
            "ASSESSING" => match status.missing_assessments.first().cloned() {
                Some(d) => self.board_assess(&mut cur, &d),
                None => self.board_advance(),
            },
            "DISCUSSING" => {
                let d = &session.phases.discuss;
                if d.rounds >= d.max_rounds {
                    self.board_advance();
                } else if cur.lines_this_round < cur.planned_lines {
                    self.board_discuss(&mut cur, &directors, d.rounds + 1);
                } else {
                    match self.board.bus.board_next_round(ORCHESTRATOR) {
                        Ok(_) => {
                            self.board_event(
                                "board_round_closed",
                                ORCHESTRATOR,
                                format!("round {}", d.rounds + 1),
                            );
                            cur.lines_this_round = 0;
                            cur.planned_lines = self.rng.random_range(2..=3);
                        }
                        Err(e) => self.engine_error(ORCHESTRATOR, "board_next_round", &e),
                    }
                }
            }
            "VOTING" => match status.missing_votes.first().cloned() {
                Some(d) => self.board_vote(&cur, &d),
                None => self.board_advance(),
            },
            "RESOLVING" => {
                let since = *cur.resolving_since.get_or_insert(self.tick);
                if self.tick >= since + self.cfg.orchestrator_patience {
                    match self.board.bus.board_resolve(false, ORCHESTRATOR) {
                        Ok(r) => {
                            let verdict = r.resolution.outcome.verdict.as_str().to_owned();
                            self.board_event("board_resolved", ORCHESTRATOR, verdict.clone());
                            if let Some(rec) = self.board.record(&cur.session_id) {
                                rec.status = "COMPLETE".into();
                                rec.verdict = Some(verdict);
                                rec.resolved_by = Some(ORCHESTRATOR.into());
                            }
                            self.board_finished();
                            return;
                        }
                        Err(e) => self.engine_error(ORCHESTRATOR, "board_resolve", &e),
                    }
                }
                self.board.next_act = self.tick + 5;
            }
            "COMPLETE" => {
                // Resolved by the operator from the console (or the CLI).
                let res = session.resolution.clone().unwrap_or_default();
                let verdict = res
                    .get("verdict")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                let by = res
                    .get("resolved_by")
                    .and_then(|v| v.as_str())
                    .unwrap_or("operator")
                    .to_owned();
                self.board_event("board_resolved", &by, verdict.clone().unwrap_or_default());
                if let Some(rec) = self.board.record(&cur.session_id) {
                    rec.verdict = verdict;
                    rec.resolved_by = Some(by);
                }
                self.board_finished();
                return;
            }
            _ => {}
        }
        if self.board.current.is_some() {
            self.board.current = Some(cur);
        }
    }

    fn board_finished(&mut self) {
        self.board.current = None;
        self.board.next_open = self.tick + self.rng.random_range(80..=150);
    }

    fn board_advance(&mut self) {
        match self.board.bus.board_advance(false, ORCHESTRATOR) {
            Ok(r) => {
                self.board_event(
                    "board_advanced",
                    ORCHESTRATOR,
                    format!("{} -> {}", r.from, r.to),
                );
                if r.to == "RESOLVING" {
                    let predicted = self
                        .board
                        .bus
                        .board_status()
                        .ok()
                        .and_then(|s| s.predicted)
                        .map(|p| p.verdict.as_str().to_owned())
                        .unwrap_or_default();
                    self.board_event(
                        "board_resolving",
                        ORCHESTRATOR,
                        format!("predicted {predicted}"),
                    );
                }
            }
            Err(e) => self.engine_error(ORCHESTRATOR, "board_advance", &e),
        }
    }

    fn board_assess(&mut self, cur: &mut Current, director: &str) {
        let roll = self.rng.random_range(0..100u32);
        let verdict = match roll {
            0..50 => "APPROVE",
            50..85 => "CONCERNS",
            _ => "REJECT",
        };
        let score = match verdict {
            "APPROVE" => self.rng.random_range(7..=9),
            "CONCERNS" => self.rng.random_range(5..=7),
            _ => self.rng.random_range(2..=4),
        } as f64;
        let concerns = if verdict == "APPROVE" {
            Vec::new()
        } else {
            vec![text::concern(&mut self.rng, director).to_owned()]
        };
        let mut extra = Map::new();
        match director {
            "CSO" if verdict != "APPROVE" => {
                extra.insert(
                    "vulnerabilities".into(),
                    json!([{"severity": "HIGH", "type": "auth", "location": "webhook.ts",
                            "remediation": "verify signature"}]),
                );
            }
            "COO" => {
                extra.insert(
                    "timeline_assessment".into(),
                    json!({"proposed": "2d", "realistic": "3d", "confidence": 0.7}),
                );
            }
            _ => {}
        }
        let id = match Director::parse(director) {
            Ok(id) => id,
            Err(e) => return self.engine_error(director, "board_assess", &e),
        };
        let input = AssessInput {
            director: id,
            verdict: verdict.to_owned(),
            score,
            concerns,
            recommendations: vec![text::recommendation(&mut self.rng, director).to_owned()],
            key_points: Vec::new(),
            blocking: Some(verdict == "REJECT"),
            extra,
        };
        match self.board.bus.board_assess(&input) {
            Ok(_) => {
                cur.stance.insert(director.to_owned(), verdict.to_owned());
                self.board_event("board_assess", director, verdict.to_owned());
            }
            Err(e) => self.engine_error(director, "board_assess", &e),
        }
    }

    fn board_discuss(&mut self, cur: &mut Current, directors: &[String], round: u32) {
        if directors.len() < 2 {
            cur.lines_this_round = cur.planned_lines;
            return;
        }
        let from = directors[self.rng.random_range(0..directors.len())].clone();
        let to = if self.rng.random_bool(0.3) {
            "ALL".to_owned()
        } else {
            let others: Vec<&String> = directors.iter().filter(|d| **d != from).collect();
            others[self.rng.random_range(0..others.len())].clone()
        };
        let kind = DISCUSS_KINDS[self.rng.random_range(0..DISCUSS_KINDS.len())];
        let stance = cur
            .stance
            .get(&from)
            .cloned()
            .unwrap_or_else(|| "CONCERNS".into());
        // A clarification or agreement sometimes moves a director with concerns (or an approver
        // who was challenged) to the other side.
        let changes = matches!(kind, "CLARIFY" | "AGREE") && self.rng.random_bool(0.35);
        let ids =
            Director::parse_as("from", &from).and_then(|f| Ok((f, Director::parse_as("to", &to)?)));
        let (from_id, to_id) = match ids {
            Ok(ids) => ids,
            Err(e) => return self.engine_error(&from, "board_discuss", &e),
        };
        let input = DiscussInput {
            from: from_id,
            to: to_id,
            kind: kind.to_owned(),
            message: text::discussion(&mut self.rng, kind).to_owned(),
            changes_my_verdict: changes,
        };
        match self.board.bus.board_discuss(&input) {
            Ok(_) => {
                cur.lines_this_round += 1;
                let mut detail = format!("round {round}: {kind} to {to}");
                if changes {
                    let new = match stance.as_str() {
                        "APPROVE" => "CONCERNS",
                        _ => "APPROVE",
                    };
                    cur.stance.insert(from.clone(), new.to_owned());
                    detail.push_str(&format!(", changes verdict to {new}"));
                }
                self.board_event("board_discuss", &from, detail);
            }
            Err(e) => self.engine_error(&from, "board_discuss", &e),
        }
    }

    fn board_vote(&mut self, cur: &Current, director: &str) {
        let stance = cur
            .stance
            .get(director)
            .map(String::as_str)
            .unwrap_or("CONCERNS");
        let approve = match stance {
            "APPROVE" => !self.rng.random_bool(0.05),
            "REJECT" => self.rng.random_bool(0.1),
            _ => self.rng.random_bool(0.6),
        };
        let verdict = if approve { "APPROVE" } else { "REJECT" };
        let confidence = (self.rng.random_range(55..=95) as f64) / 100.0;
        let conditions = if approve && stance != "APPROVE" {
            vec![text::recommendation(&mut self.rng, director).to_owned()]
        } else {
            Vec::new()
        };
        let id = match Director::parse(director) {
            Ok(id) => id,
            Err(e) => return self.engine_error(director, "board_vote", &e),
        };
        let input = VoteInput {
            director: id,
            final_verdict: verdict.to_owned(),
            confidence,
            conditions,
        };
        match self.board.bus.board_vote(&input) {
            Ok(_) => self.board_event("board_vote", director, verdict.to_owned()),
            Err(e) => self.engine_error(director, "board_vote", &e),
        }
    }
}
