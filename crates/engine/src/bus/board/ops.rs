//! The board operations on a track (open, assess, discuss, next round, vote, advance, resolve, status): each
//! takes the bus mutex, checks the session with the pure rules, writes the session files and posts its
//! `BOARD_*` message.

use std::path::PathBuf;

use chrono::Utc;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::bus::Bus;
use crate::bus::model::{
    BoardSession, CountPhase, DiscussPhase, DiscussionLine, Phases, ResolvePhase,
    parse_assessments, parse_votes,
};
use crate::bus::model::{PHASE_COMPLETE, PHASE_IN_PROGRESS, PHASE_NOT_STARTED};
use crate::bus::queue::QueueWriter;
use crate::bus::vocab::{AssessVerdict, Checkpoint, DiscussKind, MessageType, TO_ALL, VoteVerdict};
use crate::error::{Error, Result};
use crate::store::atomic::{ensure_file, write_atomic, write_json};
use crate::store::ids::{Director, check_free_text};
use crate::store::layout;
use crate::store::read::read_json_object;
use crate::store::time::now_ts;

use super::report::{Resolution, render_resolution};
use super::rules::{
    RuleOutcome, count_of, missing, next_status, non_empty_list, one_of, phase_complete,
    quick_review_rule, require_director, require_status, resolve_rule,
};
use super::session::{current_session, read_discussion, require_session, session_file};
use super::{
    ASSESSING, COMPLETE, DEFAULT_DIRECTORS, DISCUSSING, PHASE_SKIPPED, QUICK_REVIEW, RESOLVING,
    VOTING,
};

/// A new assessment.
#[derive(Debug, Clone)]
pub struct AssessInput {
    /// The director assessing; refused unless on the session's board.
    pub director: Director,
    /// `APPROVE`, `CONCERNS` or `REJECT`; other words are refused.
    pub verdict: String,
    /// The score, 1–10; out-of-range values are refused.
    pub score: f64,
    /// Concerns raised.
    pub concerns: Vec<String>,
    /// Recommendations made.
    pub recommendations: Vec<String>,
    /// The points that weighed most.
    pub key_points: Vec<String>,
    /// True when a concern blocks approval.
    pub blocking: Option<bool>,
    /// Director-specific fields kept as given (`vulnerabilities`, `timeline_assessment`, …).
    pub extra: Map<String, Value>,
}

/// A new discussion line.
#[derive(Debug, Clone)]
pub struct DiscussInput {
    /// The director speaking; refused unless on the session's board.
    pub from: Director,
    /// A director on the board, or `ALL` (which matches the director pattern too).
    pub to: Director,
    /// `CHALLENGE`, `AGREE`, `QUESTION` or `CLARIFY`; other words are refused.
    pub kind: String,
    /// The message text (free text, bounded).
    pub message: String,
    /// True when the speaker means to change its verdict.
    pub changes_my_verdict: bool,
}

/// A new vote.
#[derive(Debug, Clone)]
pub struct VoteInput {
    /// The director voting; refused unless on the session's board.
    pub director: Director,
    /// `APPROVE` or `REJECT`; other words are refused.
    pub final_verdict: String,
    /// Confidence, 0–1; out-of-range values are refused.
    pub confidence: f64,
    /// Conditions attached to the vote.
    pub conditions: Vec<String>,
}

/// Options of `board open`.
#[derive(Debug, Clone)]
pub struct OpenInput {
    /// What is being decided (free text, bounded).
    pub checkpoint: String,
    /// Text, or a JSON object given as text.
    pub proposal: String,
    /// Default: the five default directors.
    pub directors: Option<Vec<Director>>,
    /// Default 3.
    pub max_rounds: Option<u32>,
    /// Who opens the session (the message's `source`).
    pub source: String,
}

/// What `board open` did.
#[derive(Debug, Clone, Serialize)]
pub struct OpenResult {
    /// The new session as written.
    pub session: BoardSession,
    /// The earlier session moved to `board/archive/{id}/`, and its status then.
    pub archived: Option<ArchivedSession>,
    /// The id of the `BOARD_OPEN` message posted.
    pub message_id: String,
}

/// An earlier session moved away by `board open`.
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedSession {
    /// The earlier session's id.
    pub session_id: String,
    /// Its status when it was moved.
    pub status: Option<String>,
    /// Where it went (`board/archive/{id}/`).
    pub dir: PathBuf,
    /// The files moved.
    pub files: Vec<String>,
}

/// The result of a board write: the session after it, and the message posted.
#[derive(Debug, Clone, Serialize)]
pub struct WriteResult {
    /// The session written.
    pub session_id: String,
    /// Its status after the write.
    pub status: String,
    /// Its phases after the write.
    pub phases: Phases,
    /// The id of the message posted.
    pub message_id: String,
    /// The record written (assessment, discussion line or vote).
    pub record: Value,
}

/// What `advance` did.
#[derive(Debug, Clone, Serialize)]
pub struct AdvanceResult {
    /// The session advanced.
    pub session_id: String,
    /// The status it left.
    pub from: String,
    /// The status it entered.
    pub to: String,
    /// True when it moved on with records missing (an operator's force).
    pub forced: bool,
    /// Its phases after the move.
    pub phases: Phases,
    /// The id of the message posted.
    pub message_id: String,
}

/// What `resolve` did.
#[derive(Debug, Clone, Serialize)]
pub struct ResolveResult {
    /// The resolution stored and posted.
    #[serde(flatten)]
    pub resolution: Resolution,
    /// The `resolution.md` written.
    pub resolution_md: PathBuf,
    /// The id of the `BOARD_RESOLVE` message posted.
    pub message_id: String,
    /// The event files touched.
    pub events: Vec<String>,
}

/// `board status`: the session, its records, what is missing, and the predicted verdict.
#[derive(Debug, Clone, Serialize)]
pub struct BoardStatus {
    /// The current session; `None` when the track has none.
    pub session: Option<BoardSession>,
    /// `assessments.json` as read.
    pub assessments: Map<String, Value>,
    /// The discussion lines that could be read, in file order.
    pub discussion: Vec<DiscussionLine>,
    /// Discussion lines that could not be read.
    pub discussion_skipped: usize,
    /// `votes.json` as read.
    pub votes: Map<String, Value>,
    /// Directors who have not assessed.
    pub missing_assessments: Vec<String>,
    /// Directors who have not voted.
    pub missing_votes: Vec<String>,
    /// Whether `advance` would move on without force, and to what.
    pub can_advance: bool,
    /// The status `advance` would move to.
    pub next_status: Option<String>,
    /// The verdict the rule gives for what is on disk now.
    pub predicted: Option<RuleOutcome>,
}

impl Bus {
    /// Opens a new session, moving the previous session's files to `board/archive/{old_id}/`.
    pub fn board_open(&self, input: &OpenInput) -> Result<OpenResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_open_act(input))
    }

    fn board_open_act(&self, input: &OpenInput) -> Result<OpenResult> {
        self.require()?;
        let checkpoint = one_of::<Checkpoint>("checkpoint", &input.checkpoint)?;
        check_free_text("source", &input.source)?;
        if input.proposal.trim().is_empty() {
            return Err(Error::refused(
                "the proposal is empty; say what the board decides on",
            ));
        }
        let proposal = match serde_json::from_str::<Value>(&input.proposal) {
            Ok(Value::Object(m)) => Value::Object(m),
            _ => json!({ "proposal": input.proposal }),
        };
        let directors: Vec<String> = match &input.directors {
            Some(d) if !d.is_empty() => d.iter().map(Director::to_string).collect(),
            _ => DEFAULT_DIRECTORS.iter().map(|s| s.to_string()).collect(),
        };
        if (1..directors.len()).any(|i| directors[..i].contains(&directors[i])) {
            return Err(Error::refused("a director is listed twice"));
        }
        let max_rounds = input
            .max_rounds
            .unwrap_or(crate::bus::model::DEFAULT_MAX_ROUNDS);

        let _mutex = self.mutex()?;
        let board = self.board_dir();
        let archived = self.archive_board_files()?;
        let base = format!("board-{}", Utc::now().format("%Y%m%d%H%M%S"));
        let mut id = base.clone();
        let mut n = 1;
        while session_file(&board, &id).exists()
            || board.join(layout::BOARD_ARCHIVE_DIR).join(&id).exists()
        {
            n += 1;
            id = format!("{base}-{n}");
        }
        let of = directors.len() as u32;
        let session = BoardSession {
            session_id: id.clone(),
            checkpoint: checkpoint.clone(),
            status: ASSESSING.into(),
            proposal: proposal.clone(),
            directors: directors.clone(),
            started_at: Some(now_ts()),
            phases: Phases {
                assess: CountPhase {
                    status: PHASE_IN_PROGRESS.into(),
                    complete: 0,
                    of,
                    extra: Map::new(),
                },
                discuss: DiscussPhase {
                    max_rounds,
                    ..Default::default()
                },
                vote: CountPhase {
                    status: PHASE_NOT_STARTED.into(),
                    complete: 0,
                    of,
                    extra: Map::new(),
                },
                resolve: ResolvePhase::default(),
                extra: Map::new(),
            },
            resolution: None,
            extra: Map::new(),
        };
        write_json(&self.root, &self.assessments_path(), &json!({}))?;
        write_json(&self.root, &self.votes_path(), &json!({}))?;
        ensure_file(&self.root, &self.discussion_path())?;
        self.save_session(&session_file(&board, &id), &session)?;
        let msg = self.post(
            MessageType::BoardOpen,
            &input.source,
            json!({"session_id": id, "checkpoint": checkpoint, "proposal": proposal, "directors": directors}),
        )?;
        Ok(OpenResult {
            session,
            archived,
            message_id: msg.id,
        })
    }

    /// Records a director's assessment (ASSESSING only; a director may revise theirs).
    pub fn board_assess(&self, input: &AssessInput) -> Result<WriteResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_assess_act(input))
    }

    fn board_assess_act(&self, input: &AssessInput) -> Result<WriteResult> {
        self.require()?;
        let verdict = one_of::<AssessVerdict>("verdict", &input.verdict)?;
        if !(1.0..=10.0).contains(&input.score) {
            return Err(Error::refused(format!(
                "score {} is outside 1–10",
                input.score
            )));
        }
        non_empty_list("concern", &input.concerns)?;
        non_empty_list("recommendation", &input.recommendations)?;
        non_empty_list("key point", &input.key_points)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        require_status(&s, &[ASSESSING], "assess")?;
        require_director(&s, &input.director)?;
        let mut record = Map::new();
        record.insert("director".into(), json!(input.director));
        record.insert("verdict".into(), json!(verdict));
        record.insert("score".into(), number(input.score));
        record.insert("concerns".into(), json!(input.concerns));
        record.insert("recommendations".into(), json!(input.recommendations));
        record.insert("key_points".into(), json!(input.key_points));
        if let Some(b) = input.blocking {
            record.insert("blocking".into(), json!(b));
        }
        for (k, v) in &input.extra {
            record.entry(k.clone()).or_insert_with(|| v.clone());
        }
        record.insert("timestamp".into(), json!(now_ts()));
        let record = Value::Object(record);
        let mut all = read_json_object(&self.assessments_path())?;
        all.insert(input.director.to_string(), record.clone());
        write_json(&self.root, &self.assessments_path(), &all)?;
        s.phases.assess.complete = count_of(&s.directors, &all);
        s.phases.assess.of = s.directors.len() as u32;
        self.save_session(&path, &s)?;
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardAssess, input.director.as_str(), payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    fn write_result(&self, s: BoardSession, message_id: String, record: Value) -> WriteResult {
        WriteResult {
            session_id: s.session_id,
            status: s.status,
            phases: s.phases,
            message_id,
            record,
        }
    }

    /// Appends a discussion line for the current round (DISCUSSING only).
    pub fn board_discuss(&self, input: &DiscussInput) -> Result<WriteResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_discuss_act(input))
    }

    fn board_discuss_act(&self, input: &DiscussInput) -> Result<WriteResult> {
        self.require()?;
        let kind = one_of::<DiscussKind>("discussion type", &input.kind)?;
        check_free_text("message", &input.message)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        require_status(&s, &[DISCUSSING], "discuss")?;
        require_director(&s, &input.from)?;
        if input.to.as_str() != TO_ALL {
            require_director(&s, &input.to)?;
        }
        let d = &s.phases.discuss;
        if d.rounds >= d.max_rounds {
            return Err(Error::refused(format!(
                "all {} discussion rounds of session {} are done; move on with `board advance`",
                d.max_rounds, s.session_id
            )));
        }
        let round = d.rounds + 1;
        let record = json!({
            "from": input.from,
            "to": input.to,
            "type": kind,
            "message": input.message,
            "changes_my_verdict": input.changes_my_verdict,
            "round": round,
            "timestamp": now_ts(),
        });
        let mut line = crate::store::json_text(&record, false);
        line.push(b'\n');
        QueueWriter::open(&self.root, &self.discussion_path())?.append_line(&line)?;
        if s.phases.discuss.status != PHASE_IN_PROGRESS {
            s.phases.discuss.status = PHASE_IN_PROGRESS.into();
            self.save_session(&path, &s)?;
        }
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardDiscuss, input.from.as_str(), payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    /// Closes the current discussion round (DISCUSSING only, up to `max_rounds`).
    pub fn board_next_round(&self, source: &str) -> Result<WriteResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_next_round_act(source))
    }

    fn board_next_round_act(&self, source: &str) -> Result<WriteResult> {
        self.require()?;
        check_free_text("source", source)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        require_status(&s, &[DISCUSSING], "start the next round")?;
        let d = &mut s.phases.discuss;
        if d.rounds >= d.max_rounds {
            return Err(Error::refused(format!(
                "all {} discussion rounds are done; move on with `board advance`",
                d.max_rounds
            )));
        }
        d.rounds += 1;
        if d.rounds >= d.max_rounds {
            d.status = PHASE_COMPLETE.into();
        }
        let record = json!({"round": d.rounds, "max_rounds": d.max_rounds, "status": d.status});
        self.save_session(&path, &s)?;
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardRound, source, payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    /// Records a director's final vote (VOTING only; a director may change it until resolved).
    pub fn board_vote(&self, input: &VoteInput) -> Result<WriteResult> {
        crate::store::commit::act_unheld(&self.root, || self.board_vote_act(input))
    }

    fn board_vote_act(&self, input: &VoteInput) -> Result<WriteResult> {
        self.require()?;
        let verdict = one_of::<VoteVerdict>("verdict", &input.final_verdict)?;
        if !(0.0..=1.0).contains(&input.confidence) {
            return Err(Error::refused(format!(
                "confidence {} is outside 0–1",
                input.confidence
            )));
        }
        non_empty_list("condition", &input.conditions)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        require_status(&s, &[VOTING], "vote")?;
        require_director(&s, &input.director)?;
        let record = json!({
            "director": input.director,
            "final_verdict": verdict,
            "confidence": input.confidence,
            "conditions": input.conditions,
            "timestamp": now_ts(),
        });
        let mut all = read_json_object(&self.votes_path())?;
        all.insert(input.director.to_string(), record.clone());
        write_json(&self.root, &self.votes_path(), &all)?;
        s.phases.vote.complete = count_of(&s.directors, &all);
        s.phases.vote.of = s.directors.len() as u32;
        self.save_session(&path, &s)?;
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardVote, input.director.as_str(), payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    /// Moves to the next phase when the current one is complete, or when forced.
    pub(crate) fn advance_unjournaled(&self, force: bool, source: &str) -> Result<AdvanceResult> {
        self.require()?;
        check_free_text("source", source)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        let Some(to) = next_status(&s) else {
            return Err(match s.status.as_str() {
                RESOLVING => Error::refused(format!(
                    "session {} is ready to resolve; run `board resolve`",
                    s.session_id
                )),
                COMPLETE => Error::refused(format!(
                    "session {} is already resolved; open a new one with `board open`",
                    s.session_id
                )),
                other => Error::refused(format!(
                    "session {} is in an unknown phase {other:?}; it cannot be advanced",
                    s.session_id
                )),
            });
        };
        let assessments = read_json_object(&self.assessments_path())?;
        let votes = read_json_object(&self.votes_path())?;
        if !force && !phase_complete(&s, &assessments, &votes) {
            let what = match s.status.as_str() {
                ASSESSING => format!(
                    "assessments missing from {}",
                    missing(&s.directors, &assessments).join(", ")
                ),
                DISCUSSING => format!(
                    "{} of {} discussion rounds done (close rounds with `board next-round`)",
                    s.phases.discuss.rounds, s.phases.discuss.max_rounds
                ),
                _ => format!(
                    "votes missing from {}",
                    missing(&s.directors, &votes).join(", ")
                ),
            };
            return Err(Error::refused(format!(
                "the {} phase of session {} is not complete: {what}; use --force to move on anyway",
                s.status.to_ascii_lowercase(),
                s.session_id
            )));
        }
        let from = s.status.clone();
        let p = &mut s.phases;
        match to {
            DISCUSSING => {
                p.assess.status = PHASE_COMPLETE.into();
                p.discuss.status = PHASE_IN_PROGRESS.into();
            }
            VOTING => {
                p.assess.status = PHASE_COMPLETE.into();
                p.discuss.status = PHASE_COMPLETE.into();
                p.vote.status = PHASE_IN_PROGRESS.into();
            }
            _ => {
                if s.checkpoint == QUICK_REVIEW {
                    p.discuss.status = PHASE_SKIPPED.into();
                    p.vote.status = PHASE_SKIPPED.into();
                } else {
                    p.vote.status = PHASE_COMPLETE.into();
                }
                p.assess.status = PHASE_COMPLETE.into();
                p.resolve.status = PHASE_IN_PROGRESS.into();
            }
        }
        s.status = to.into();
        self.save_session(&path, &s)?;
        let msg = self.post(
            MessageType::BoardAdvance,
            source,
            json!({"session_id": s.session_id, "from": from, "to": to, "forced": force}),
        )?;
        Ok(AdvanceResult {
            session_id: s.session_id,
            from,
            to: to.into(),
            forced: force,
            phases: s.phases,
            message_id: msg.id,
        })
    }

    /// Resolves the session: applies the rule (or the quick-review rule), writes `resolution.md`,
    /// stores the resolution, sets the session `COMPLETE`, posts `BOARD_RESOLVE` and touches its events.
    /// Needs the resolve phase (or VOTING with every vote in); anything missing needs `force`.
    pub(crate) fn resolve_unjournaled(&self, force: bool, source: &str) -> Result<ResolveResult> {
        self.require()?;
        check_free_text("source", source)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        if s.status == COMPLETE {
            return Err(Error::refused(format!(
                "session {} is already resolved; open a new one with `board open`",
                s.session_id
            )));
        }
        let quick = s.checkpoint == QUICK_REVIEW;
        let assessments = read_json_object(&self.assessments_path())?;
        let votes = read_json_object(&self.votes_path())?;
        let outcome = if quick {
            quick_review_rule(&s.directors, &parse_assessments(&assessments))
        } else {
            resolve_rule(&s.directors, &parse_votes(&votes))
        };
        let ready_phase = if quick {
            [ASSESSING, RESOLVING].contains(&s.status.as_str())
        } else {
            [VOTING, RESOLVING].contains(&s.status.as_str())
        };
        let missing_records = !outcome.abstained.is_empty();
        if !force && (!ready_phase || missing_records) {
            let why = if !ready_phase {
                format!("it is {}", s.status)
            } else if quick {
                format!("assessments missing from {}", outcome.abstained.join(", "))
            } else {
                format!("votes missing from {}", outcome.abstained.join(", "))
            };
            return Err(Error::refused(format!(
                "cannot resolve session {} yet: {why}; use --force to resolve with what is there \
                 (missing directors count as abstained)",
                s.session_id
            )));
        }
        let forced = !ready_phase || missing_records;
        let resolution = Resolution {
            session_id: s.session_id.clone(),
            outcome,
            quick_review: quick,
            forced,
            resolved_by: source.to_owned(),
            resolved_at: now_ts(),
        };
        let md = render_resolution(
            &s,
            &resolution,
            &parse_votes(&votes),
            &parse_assessments(&assessments),
        );
        write_atomic(&self.root, &self.resolution_path(), md.as_bytes())?;
        for p in [&mut s.phases.assess, &mut s.phases.vote] {
            if p.status == PHASE_IN_PROGRESS {
                p.status = PHASE_COMPLETE.into();
            } else if p.status == PHASE_NOT_STARTED {
                p.status = PHASE_SKIPPED.into();
            }
        }
        if s.phases.discuss.status == PHASE_IN_PROGRESS {
            s.phases.discuss.status = PHASE_COMPLETE.into();
        } else if s.phases.discuss.status == PHASE_NOT_STARTED {
            s.phases.discuss.status = PHASE_SKIPPED.into();
        }
        s.phases.resolve.status = PHASE_COMPLETE.into();
        s.status = COMPLETE.into();
        s.resolution = Some(crate::store::json_value(&resolution));
        self.save_session(&path, &s)?;
        let o = &resolution.outcome;
        let msg = self.post(
            MessageType::BoardResolve,
            source,
            json!({
                "session_id": s.session_id,
                "verdict": o.verdict.as_str(),
                "vote_summary": o.vote_summary,
                "vote_counts": o.vote_counts,
                "conditions": o.conditions,
                "dissent": o.dissent,
                "abstained": o.abstained,
                "forced": forced,
            }),
        )?;
        Ok(ResolveResult {
            resolution_md: self.resolution_path(),
            events: crate::bus::events::events_for(&msg),
            message_id: msg.id,
            resolution,
        })
    }

    /// The current session with its records, what is missing, and the predicted verdict.
    pub fn board_status(&self) -> Result<BoardStatus> {
        self.require()?;
        let session = current_session(self)?;
        let assessments = read_json_object(&self.assessments_path())?;
        let votes = read_json_object(&self.votes_path())?;
        let (discussion, discussion_skipped) = read_discussion(&self.discussion_path())?;
        let (missing_assessments, missing_votes, can_advance, next, predicted) = match &session {
            Some(s) => {
                let predicted = if s.checkpoint == QUICK_REVIEW {
                    quick_review_rule(&s.directors, &parse_assessments(&assessments))
                } else {
                    resolve_rule(&s.directors, &parse_votes(&votes))
                };
                (
                    missing(&s.directors, &assessments),
                    missing(&s.directors, &votes),
                    next_status(s).is_some() && phase_complete(s, &assessments, &votes),
                    next_status(s).map(str::to_owned),
                    Some(predicted),
                )
            }
            None => (Vec::new(), Vec::new(), false, None, None),
        };
        Ok(BoardStatus {
            session,
            assessments,
            discussion,
            discussion_skipped,
            votes,
            missing_assessments,
            missing_votes,
            can_advance,
            next_status: next,
            predicted,
        })
    }
}

pub(super) fn number(f: f64) -> Value {
    if f.fract() == 0.0 {
        json!(f as i64)
    } else {
        json!(f)
    }
}
