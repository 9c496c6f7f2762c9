//! The five-director board deliberation (docs/PROTOCOL.md §4): sessions move `ASSESSING → DISCUSSING → VOTING →
//! RESOLVING → COMPLETE`; every write is phase-checked, holds `.lock_mutex` and posts its `BOARD_*`
//! message. [`resolve_rule`] and [`quick_review_rule`] are pure, so the console can show the predicted
//! verdict before anyone resolves.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::Utc;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Bus;
use super::model::{
    Assessment, BoardSession, CountPhase, DiscussPhase, DiscussionLine, Phases, ResolvePhase, Vote,
    from_object, parse_assessments, parse_votes,
};
use super::queue::QueueWriter;
use crate::error::{Error, Result};
use crate::store::atomic::{ensure_file, rename_durable, write_atomic, write_json};
use crate::store::ids::{Director, check_free_text, encode_key, is_valid_name};
use crate::store::layout;
use crate::store::read::{read_json, read_json_object};
use crate::store::time::now_ts;

pub use super::vocab::DEFAULT_DIRECTORS;
use super::vocab::{
    AssessVerdict, Checkpoint, DiscussKind, MessageType, PhaseStatus, SessionStatus, TO_ALL,
    Vocabulary, VoteVerdict,
};

/// Session statuses as string constants for `match` on a tolerant record's field, derived from
/// [`SessionStatus`] (spelled there once).
pub const ASSESSING: &str = SessionStatus::Assessing.as_str();
/// See [`SessionStatus::Discussing`].
pub const DISCUSSING: &str = SessionStatus::Discussing.as_str();
/// See [`SessionStatus::Voting`].
pub const VOTING: &str = SessionStatus::Voting.as_str();
/// See [`SessionStatus::Resolving`].
pub const RESOLVING: &str = SessionStatus::Resolving.as_str();
/// See [`SessionStatus::Complete`].
pub const COMPLETE: &str = SessionStatus::Complete.as_str();
/// See [`Checkpoint::QuickReview`].
pub const QUICK_REVIEW: &str = Checkpoint::QuickReview.as_str();
use super::model::{PHASE_COMPLETE, PHASE_IN_PROGRESS, PHASE_NOT_STARTED};
/// See [`PhaseStatus::Skipped`].
pub const PHASE_SKIPPED: &str = PhaseStatus::Skipped.as_str();

/// The outcome of a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Four or more approvals (a quick review: three or more APPROVE or CONCERNS assessments).
    Approved,
    /// Exactly three approvals: approved, to be reviewed.
    ApprovedWithReview,
    /// Three or more rejections with fewer than three approvals (a quick review: fewer than three in favour).
    Rejected,
    /// Neither enough approvals nor enough rejections: a human decides.
    Escalate,
}

impl Verdict {
    /// The word written in files (`APPROVED_WITH_REVIEW`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Approved => "APPROVED",
            Self::ApprovedWithReview => "APPROVED_WITH_REVIEW",
            Self::Rejected => "REJECTED",
            Self::Escalate => "ESCALATE",
        }
    }
}

/// Counts behind a verdict (`vote_counts` in a `BOARD_RESOLVE` payload and a session's resolution).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
pub struct VoteCounts {
    /// Votes (or assessments) for approval.
    pub approve: usize,
    /// Votes (or assessments) for rejection.
    pub reject: usize,
    /// Directors who did not vote, or voted neither APPROVE nor REJECT.
    pub abstain: usize,
    /// Directors on the board.
    pub of: usize,
}

/// What the rule decides from the votes (or, for a quick review, the assessments) cast so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleOutcome {
    /// The verdict.
    pub verdict: Verdict,
    /// `{director: verdict}` for every director on the board who voted (or, for a quick review,
    /// assessed), the shape the public origin's `resolve_board_vote` writes.
    pub vote_summary: Map<String, Value>,
    /// The counts behind it.
    pub vote_counts: VoteCounts,
    /// `"{condition} ({director})"`.
    pub conditions: Vec<String>,
    /// Directors whose vote goes against the verdict.
    pub dissent: Vec<String>,
    /// Directors on the board who did not vote (or voted neither APPROVE nor REJECT).
    pub abstained: Vec<String>,
}

/// The resolve rule (docs/PROTOCOL.md §4): with A approvals and R rejections among the votes of directors on
/// the board, A ≥ 4 → APPROVED; A = 3 → APPROVED_WITH_REVIEW; R ≥ 3 → REJECTED; otherwise ESCALATE.
pub fn resolve_rule(directors: &[String], votes: &[(String, Vote)]) -> RuleOutcome {
    let mut s = VoteCounts {
        of: directors.len(),
        ..Default::default()
    };
    let mut by_director = Map::new();
    let mut approvers = Vec::new();
    let mut rejecters = Vec::new();
    let mut abstained = Vec::new();
    let mut conditions = Vec::new();
    for d in directors {
        let vote = votes.iter().find(|(k, _)| k == d).map(|(_, v)| v);
        if let Some(v) = vote {
            by_director.insert(d.clone(), Value::String(v.final_verdict.clone()));
        }
        match vote.map(|v| v.final_verdict.to_ascii_uppercase()) {
            Some(v) if v == "APPROVE" => {
                s.approve += 1;
                approvers.push(d.clone());
            }
            Some(v) if v == "REJECT" => {
                s.reject += 1;
                rejecters.push(d.clone());
            }
            _ => {
                s.abstain += 1;
                abstained.push(d.clone());
            }
        }
        if let Some(v) = vote {
            conditions.extend(v.conditions.iter().map(|c| format!("{c} ({d})")));
        }
    }
    let verdict = if s.approve >= 4 {
        Verdict::Approved
    } else if s.approve == 3 {
        Verdict::ApprovedWithReview
    } else if s.reject >= 3 {
        Verdict::Rejected
    } else {
        Verdict::Escalate
    };
    let dissent = match verdict {
        Verdict::Approved | Verdict::ApprovedWithReview => rejecters,
        Verdict::Rejected => approvers,
        Verdict::Escalate => Vec::new(),
    };
    RuleOutcome {
        verdict,
        vote_summary: by_director,
        vote_counts: s,
        conditions,
        dissent,
        abstained,
    }
}

/// The quick-review rule: APPROVED when at least 3 assessments are APPROVE or CONCERNS, else
/// REJECTED. Concerns of CONCERNS assessments become the conditions.
pub fn quick_review_rule(
    directors: &[String],
    assessments: &[(String, Assessment)],
) -> RuleOutcome {
    let mut s = VoteCounts {
        of: directors.len(),
        ..Default::default()
    };
    let mut by_director = Map::new();
    let (mut ok, mut against, mut abstained, mut conditions) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for d in directors {
        let a = assessments.iter().find(|(k, _)| k == d).map(|(_, a)| a);
        if let Some(a) = a {
            by_director.insert(d.clone(), Value::String(a.verdict.clone()));
        }
        match a.map(|a| a.verdict.to_ascii_uppercase()) {
            Some(v) if v == "APPROVE" || v == "CONCERNS" => {
                s.approve += 1;
                ok.push(d.clone());
                if v == "CONCERNS"
                    && let Some(a) = a
                {
                    conditions.extend(a.concerns.iter().map(|c| format!("{c} ({d})")));
                }
            }
            Some(v) if v == "REJECT" => {
                s.reject += 1;
                against.push(d.clone());
            }
            _ => {
                s.abstain += 1;
                abstained.push(d.clone());
            }
        }
    }
    let (verdict, dissent) = if s.approve >= 3 {
        (Verdict::Approved, against)
    } else {
        (Verdict::Rejected, ok)
    };
    RuleOutcome {
        verdict,
        vote_summary: by_director,
        vote_counts: s,
        conditions,
        dissent,
        abstained,
    }
}

/// The votes behind a resolution, read from a `BOARD_RESOLVE` payload or a session's `resolution`,
/// whichever shape wrote it: `vote_summary` as `{director: verdict}` (the public origin, and ours
/// since 0.2) with `vote_counts` beside it, or `vote_summary` as counts (ours before).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedVotes {
    /// Each director's verdict, when the writer recorded them.
    pub by_director: Vec<(String, String)>,
    /// The counts: as written, or counted from `by_director` (`of` then counts those who voted).
    pub counts: VoteCounts,
}

impl ResolvedVotes {
    /// Reads `record` (a payload or a resolution object); `None` when it holds no vote summary.
    pub fn read(record: &Value) -> Option<Self> {
        let counts_of = |v: &Value| -> Option<VoteCounts> {
            let o = v.as_object()?;
            let n = |k: &str| o.get(k).and_then(Value::as_u64).map(|x| x as usize);
            if ["approve", "reject", "abstain"]
                .iter()
                .all(|k| n(k).is_none())
            {
                return None;
            }
            let (approve, reject, abstain) = (
                n("approve").unwrap_or(0),
                n("reject").unwrap_or(0),
                n("abstain").unwrap_or(0),
            );
            Some(VoteCounts {
                approve,
                reject,
                abstain,
                of: n("of").unwrap_or(approve.saturating_add(reject).saturating_add(abstain)),
            })
        };
        let summary = record.get("vote_summary");
        let mut out = Self::default();
        let mut counted = record.get("vote_counts").and_then(counts_of);
        match summary.and_then(counts_of) {
            Some(c) => counted = counted.or(Some(c)),
            None => {
                if let Some(map) = summary.and_then(Value::as_object) {
                    out.by_director = map
                        .iter()
                        .filter_map(|(d, v)| Some((d.clone(), v.as_str()?.to_owned())))
                        .collect();
                }
            }
        }
        if counted.is_none() && out.by_director.is_empty() {
            return None;
        }
        out.counts = counted.unwrap_or_else(|| {
            let mut c = VoteCounts {
                of: out.by_director.len(),
                ..Default::default()
            };
            for (_, v) in &out.by_director {
                match v.to_ascii_uppercase().as_str() {
                    "APPROVE" | "CONCERNS" => c.approve += 1,
                    "REJECT" => c.reject += 1,
                    _ => c.abstain += 1,
                }
            }
            c
        });
        Some(out)
    }

    /// `3 approve, 2 reject, 0 abstained of 5`.
    pub fn counts_line(&self) -> String {
        let c = &self.counts;
        format!(
            "{} approve, {} reject, {} abstained of {}",
            c.approve, c.reject, c.abstain, c.of
        )
    }
}

/// The resolution stored in the session, posted as `BOARD_RESOLVE` and written to `resolution.md`.
#[derive(Debug, Clone, Serialize)]
pub struct Resolution {
    /// The session resolved.
    pub session_id: String,
    /// What the rule decided.
    #[serde(flatten)]
    pub outcome: RuleOutcome,
    /// True when the verdict came from the assessments alone (no discussion or vote).
    pub quick_review: bool,
    /// True when resolved with missing votes (or before the resolve phase).
    pub forced: bool,
    /// Who resolved it (a director, `operator` or the source of the call).
    pub resolved_by: String,
    /// When it was resolved (RFC 3339).
    pub resolved_at: String,
}

/// A new assessment.
#[derive(Debug, Clone, Default)]
pub struct AssessInput {
    /// The director assessing; refused unless on the session's board.
    pub director: String,
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
#[derive(Debug, Clone, Default)]
pub struct DiscussInput {
    /// The director speaking; refused unless on the session's board.
    pub from: String,
    /// A director or `ALL`.
    pub to: String,
    /// `CHALLENGE`, `AGREE`, `QUESTION` or `CLARIFY`; other words are refused.
    pub kind: String,
    /// The message text (free text, bounded).
    pub message: String,
    /// True when the speaker means to change its verdict.
    pub changes_my_verdict: bool,
}

/// A new vote.
#[derive(Debug, Clone, Default)]
pub struct VoteInput {
    /// The director voting; refused unless on the session's board.
    pub director: String,
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
    pub directors: Option<Vec<String>>,
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

fn session_file(board: &Path, id: &str) -> PathBuf {
    board.join(layout::session_file_name(id))
}

/// The session files in `board/` (not in the archive): (session id from the name, path).
fn session_files(board: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(board)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let id = layout::session_id_of(&name)?.to_owned();
                    Some((id, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn load_session(path: &Path) -> Result<BoardSession> {
    let v =
        read_json(path)?.ok_or_else(|| Error::not_found(format!("{} vanished", path.display())))?;
    from_object(&v).ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        message: "a session file must hold a JSON object".into(),
    })
}

/// The current session of a bus (the newest session file in `board/`), if any.
pub fn current_session(bus: &Bus) -> Result<Option<BoardSession>> {
    Ok(current(bus)?.map(|(_, s)| s))
}

fn current(bus: &Bus) -> Result<Option<(PathBuf, BoardSession)>> {
    let mut best: Option<(PathBuf, BoardSession)> = None;
    for (id, path) in session_files(&bus.board_dir()) {
        let mut s = load_session(&path)?;
        if s.session_id.is_empty() {
            s.session_id = id;
        }
        let newer = match &best {
            None => true,
            Some((_, b)) => {
                (s.started(), s.session_id.len(), &s.session_id)
                    >= (b.started(), b.session_id.len(), &b.session_id)
            }
        };
        if newer {
            best = Some((path, s));
        }
    }
    Ok(best)
}

fn require_session(bus: &Bus) -> Result<(PathBuf, BoardSession)> {
    current(bus)?.ok_or_else(|| {
        Error::not_found(format!(
            "track {} has no board session; open one with `pantheon board --track {} open --checkpoint EVALUATE_PLAN --proposal TEXT`",
            bus.track, bus.track
        ))
    })
}

fn require_status(s: &BoardSession, want: &[&str], what: &str) -> Result<()> {
    if want.contains(&s.status.as_str()) {
        return Ok(());
    }
    Err(Error::refused(format!(
        "cannot {what}: session {} is {}, and {what} needs {}{}",
        s.session_id,
        if s.status.is_empty() {
            "in no known phase"
        } else {
            &s.status
        },
        want.join(" or "),
        match s.status.as_str() {
            ASSESSING | DISCUSSING | VOTING => " (move on with `board advance`)",
            RESOLVING => " (finish with `board resolve`)",
            COMPLETE => " (open a new session with `board open`)",
            _ => "",
        }
    )))
}

fn require_director(s: &BoardSession, d: &str, field: &'static str) -> Result<()> {
    Director::parse_as(field, d)?;
    if s.directors.iter().any(|x| x == d) {
        Ok(())
    } else {
        Err(Error::refused(format!(
            "{d} is not on the board of session {} (directors: {})",
            s.session_id,
            s.directors.join(", ")
        )))
    }
}

fn one_of<W: Vocabulary>(field: &str, value: &str) -> Result<String> {
    match W::parse_word_loose(value) {
        Some(w) => Ok(w.word().to_owned()),
        None => Err(Error::refused(format!(
            "{field} {value:?} must be one of {}",
            W::every_word()
        ))),
    }
}

fn phase_complete(
    s: &BoardSession,
    assessments: &Map<String, Value>,
    votes: &Map<String, Value>,
) -> bool {
    phase_complete_with(
        s,
        |d| assessments.contains_key(d),
        |d| votes.contains_key(d),
    )
}

/// Whether the session's current phase is complete (so `board advance` needs no force), given who
/// has assessed and who has voted. Read-only: shells use it to offer only the moves the engine takes.
pub fn phase_complete_with(
    s: &BoardSession,
    assessed: impl Fn(&str) -> bool,
    voted: impl Fn(&str) -> bool,
) -> bool {
    match s.status.as_str() {
        ASSESSING => s.directors.iter().all(|d| assessed(d)),
        DISCUSSING => s.phases.discuss.rounds >= s.phases.discuss.max_rounds,
        VOTING => s.directors.iter().all(|d| voted(d)),
        _ => false,
    }
}

/// The phase `board advance` moves the session to (None once it is RESOLVING or COMPLETE).
pub fn next_phase(s: &BoardSession) -> Option<&'static str> {
    next_status(s)
}

fn next_status(s: &BoardSession) -> Option<&'static str> {
    match s.status.as_str() {
        ASSESSING if s.checkpoint == QUICK_REVIEW => Some(RESOLVING),
        ASSESSING => Some(DISCUSSING),
        DISCUSSING => Some(VOTING),
        VOTING => Some(RESOLVING),
        _ => None,
    }
}

fn count_of(directors: &[String], map: &Map<String, Value>) -> u32 {
    directors.iter().filter(|d| map.contains_key(*d)).count() as u32
}

fn non_empty_list(field: &'static str, items: &[String]) -> Result<()> {
    for i in items {
        check_free_text(field, i)?;
    }
    Ok(())
}

/// Reads `discussion.jsonl` tolerantly: (lines, lines skipped).
pub fn read_discussion(path: &Path) -> Result<(Vec<DiscussionLine>, usize)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut lines = Vec::new();
    let mut skipped = 0;
    let ends_clean = bytes.last().is_none_or(|b| *b == b'\n');
    let mut parts: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if ends_clean {
        parts.pop();
    }
    for (i, line) in parts.iter().enumerate() {
        let last_unterminated = !ends_clean && i == parts.len() - 1;
        match serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| from_object::<DiscussionLine>(&v))
        {
            Some(l) if !last_unterminated => lines.push(l),
            _ => skipped += 1,
        }
    }
    Ok((lines, skipped))
}

impl Bus {
    fn assessments_path(&self) -> PathBuf {
        self.board_dir().join(layout::ASSESSMENTS_FILE)
    }
    fn votes_path(&self) -> PathBuf {
        self.board_dir().join(layout::VOTES_FILE)
    }
    fn discussion_path(&self) -> PathBuf {
        self.board_dir().join(layout::DISCUSSION_FILE)
    }
    fn resolution_path(&self) -> PathBuf {
        self.board_dir().join(layout::RESOLUTION_FILE)
    }

    fn save_session(&self, path: &Path, s: &BoardSession) -> Result<()> {
        write_json(&self.root, path, s)
    }

    /// Opens a new session, moving the previous session's files to `board/archive/{old_id}/`.
    pub fn board_open(&self, input: &OpenInput) -> Result<OpenResult> {
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
            Some(d) if !d.is_empty() => d.clone(),
            _ => DEFAULT_DIRECTORS.iter().map(|s| s.to_string()).collect(),
        };
        for d in &directors {
            Director::parse(d)?;
        }
        if (1..directors.len()).any(|i| directors[..i].contains(&directors[i])) {
            return Err(Error::refused("a director is listed twice"));
        }
        let max_rounds = input.max_rounds.unwrap_or(super::model::DEFAULT_MAX_ROUNDS);

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
            MessageType::BoardOpen.as_str(),
            &input.source,
            json!({"session_id": id, "checkpoint": checkpoint, "proposal": proposal, "directors": directors}),
        )?;
        Ok(OpenResult {
            session,
            archived,
            message_id: msg.id,
        })
    }

    /// Moves the session files and their records out of `board/` into `board/archive/{id}/`.
    fn archive_board_files(&self) -> Result<Option<ArchivedSession>> {
        let board = self.board_dir();
        let sessions = session_files(&board);
        let loose: Vec<PathBuf> = [
            self.assessments_path(),
            self.discussion_path(),
            self.votes_path(),
            self.resolution_path(),
        ]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
        if sessions.is_empty() && loose.is_empty() {
            return Ok(None);
        }
        let newest = current(self).ok().flatten();
        let (newest_id, status) = match &newest {
            Some((_, s)) => (s.session_id.clone(), Some(s.status.clone())),
            None => (
                format!("unknown-{}", Utc::now().format("%Y%m%d%H%M%S")),
                None,
            ),
        };
        let dir_name = |id: &str| {
            if is_valid_name(id) {
                id.to_owned()
            } else {
                encode_key(id)
            }
        };
        let unique_dir = |id: &str| {
            let mut d = board.join(layout::BOARD_ARCHIVE_DIR).join(dir_name(id));
            let mut n = 1;
            while d.exists() {
                n += 1;
                d = board
                    .join(layout::BOARD_ARCHIVE_DIR)
                    .join(format!("{}-{n}", dir_name(id)));
            }
            d
        };
        let main_dir = unique_dir(&newest_id);
        let mut files = Vec::new();
        for (id, path) in &sessions {
            let is_newest = newest.as_ref().is_some_and(|(p, _)| p == path);
            let dir = if is_newest {
                main_dir.clone()
            } else {
                unique_dir(id)
            };
            let Some(name) = path.file_name() else {
                continue;
            };
            rename_durable(&self.root, path, &dir.join(name))?;
            files.push(name.to_string_lossy().into_owned());
        }
        for p in loose {
            let Some(name) = p.file_name() else {
                continue;
            };
            rename_durable(&self.root, &p, &main_dir.join(name))?;
            files.push(name.to_string_lossy().into_owned());
        }
        Ok(Some(ArchivedSession {
            session_id: newest_id,
            status,
            dir: main_dir,
            files,
        }))
    }

    /// Records a director's assessment (ASSESSING only; a director may revise theirs).
    pub fn board_assess(&self, input: &AssessInput) -> Result<WriteResult> {
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
        require_director(&s, &input.director, "director")?;
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
        all.insert(input.director.clone(), record.clone());
        write_json(&self.root, &self.assessments_path(), &all)?;
        s.phases.assess.complete = count_of(&s.directors, &all);
        s.phases.assess.of = s.directors.len() as u32;
        self.save_session(&path, &s)?;
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardAssess.as_str(), &input.director, payload)?;
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
        self.require()?;
        let kind = one_of::<DiscussKind>("discussion type", &input.kind)?;
        check_free_text("message", &input.message)?;
        let _mutex = self.mutex()?;
        let (path, mut s) = require_session(self)?;
        require_status(&s, &[DISCUSSING], "discuss")?;
        require_director(&s, &input.from, "from")?;
        if input.to != TO_ALL {
            require_director(&s, &input.to, "to")?;
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
        let msg = self.post(MessageType::BoardDiscuss.as_str(), &input.from, payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    /// Closes the current discussion round (DISCUSSING only, up to `max_rounds`).
    pub fn board_next_round(&self, source: &str) -> Result<WriteResult> {
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
        let msg = self.post(MessageType::BoardRound.as_str(), source, payload)?;
        Ok(self.write_result(s, msg.id, record))
    }

    /// Records a director's final vote (VOTING only; a director may change it until resolved).
    pub fn board_vote(&self, input: &VoteInput) -> Result<WriteResult> {
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
        require_director(&s, &input.director, "director")?;
        let record = json!({
            "director": input.director,
            "final_verdict": verdict,
            "confidence": input.confidence,
            "conditions": input.conditions,
            "timestamp": now_ts(),
        });
        let mut all = read_json_object(&self.votes_path())?;
        all.insert(input.director.clone(), record.clone());
        write_json(&self.root, &self.votes_path(), &all)?;
        s.phases.vote.complete = count_of(&s.directors, &all);
        s.phases.vote.of = s.directors.len() as u32;
        self.save_session(&path, &s)?;
        let mut payload = record.clone();
        payload["session_id"] = json!(s.session_id);
        let msg = self.post(MessageType::BoardVote.as_str(), &input.director, payload)?;
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
            MessageType::BoardAdvance.as_str(),
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
            MessageType::BoardResolve.as_str(),
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
            events: super::events::events_for(&msg),
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

fn missing(directors: &[String], map: &Map<String, Value>) -> Vec<String> {
    directors
        .iter()
        .filter(|d| !map.contains_key(*d))
        .cloned()
        .collect()
}

fn number(f: f64) -> Value {
    if f.fract() == 0.0 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Renders `resolution.md`: proposal, verdict, vote table, conditions, dissent.
pub fn render_resolution(
    s: &BoardSession,
    r: &Resolution,
    votes: &[(String, Vote)],
    assessments: &[(String, Assessment)],
) -> String {
    let o = &r.outcome;
    let mut md = String::new();
    let _ = writeln!(md, "## Board of Directors Resolution\n");
    let _ = writeln!(md, "**Session**: {}  ", s.session_id);
    let _ = writeln!(md, "**Checkpoint**: {}  ", s.checkpoint);
    let _ = writeln!(
        md,
        "**Proposal**: {}  ",
        s.proposal_text().replace('\n', " ")
    );
    let _ = writeln!(
        md,
        "**Verdict**: {}  ",
        o.verdict.as_str().replace('_', " ")
    );
    let _ = writeln!(
        md,
        "**Resolved**: {} by {}{}\n",
        r.resolved_at,
        r.resolved_by,
        if r.forced { " (forced)" } else { "" }
    );
    let s_ = &o.vote_counts;
    let _ = writeln!(
        md,
        "{} approve, {} reject, {} abstained, of {} directors{}.\n",
        s_.approve,
        s_.reject,
        s_.abstain,
        s_.of,
        if r.quick_review {
            " (quick review: from assessments)"
        } else {
            ""
        }
    );
    if r.quick_review {
        let _ = writeln!(
            md,
            "### Assessments\n\n| Director | Verdict | Score | Concerns |\n|---|---|---|---|"
        );
        for d in &s.directors {
            match assessments.iter().find(|(k, _)| k == d) {
                Some((_, a)) => {
                    let _ = writeln!(
                        md,
                        "| {d} | {} | {} | {} |",
                        cell(&a.verdict),
                        a.score.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                        cell(&a.concerns.join("; "))
                    );
                }
                None => {
                    let _ = writeln!(md, "| {d} | (abstained) | | |");
                }
            }
        }
    } else {
        let _ = writeln!(
            md,
            "### Votes\n\n| Director | Vote | Confidence | Conditions |\n|---|---|---|---|"
        );
        for d in &s.directors {
            match votes.iter().find(|(k, _)| k == d) {
                Some((_, v)) => {
                    let _ = writeln!(
                        md,
                        "| {d} | {} | {} | {} |",
                        cell(&v.final_verdict),
                        v.confidence
                            .as_ref()
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                        cell(&v.conditions.join("; "))
                    );
                }
                None => {
                    let _ = writeln!(md, "| {d} | (abstained) | | |");
                }
            }
        }
    }
    let _ = writeln!(md, "\n### Conditions\n");
    if o.conditions.is_empty() {
        let _ = writeln!(md, "None.");
    }
    for c in &o.conditions {
        let _ = writeln!(md, "- {}", c.replace('\n', " "));
    }
    let _ = writeln!(md, "\n### Dissent\n");
    if o.dissent.is_empty() {
        let _ = writeln!(md, "None.");
    }
    for d in &o.dissent {
        let _ = writeln!(md, "- {d}");
    }
    if !o.abstained.is_empty() {
        let _ = writeln!(md, "\n### Abstained\n\n{}", o.abstained.join(", "));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vote(v: &str, conditions: &[&str]) -> Vote {
        Vote {
            final_verdict: v.into(),
            conditions: conditions.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn board(n: usize) -> Vec<String> {
        DEFAULT_DIRECTORS[..n]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// The rule as docs/PROTOCOL.md §4 states it, written independently of `resolve_rule`.
    fn expected(a: usize, r: usize) -> Verdict {
        match (a, r) {
            (a, _) if a >= 4 => Verdict::Approved,
            (3, _) => Verdict::ApprovedWithReview,
            (_, r) if r >= 3 => Verdict::Rejected,
            _ => Verdict::Escalate,
        }
    }

    #[test]
    fn every_vote_split_of_zero_to_five_directors() {
        // Each director approves (0), rejects (1) or does not vote (2): every assignment, 0..=5 directors.
        for n in 0..=5usize {
            let directors = board(n);
            for code in 0..3usize.pow(n as u32) {
                let mut c = code;
                let mut votes = Vec::new();
                let (mut a, mut r) = (0, 0);
                for d in &directors {
                    match c % 3 {
                        0 => {
                            a += 1;
                            votes.push((d.clone(), vote("APPROVE", &["tests"])));
                        }
                        1 => {
                            r += 1;
                            votes.push((d.clone(), vote("reject", &[])));
                        }
                        _ => {}
                    }
                    c /= 3;
                }
                let o = resolve_rule(&directors, &votes);
                assert_eq!(o.verdict, expected(a, r), "n={n} a={a} r={r}");
                assert_eq!(
                    (
                        o.vote_counts.approve,
                        o.vote_counts.reject,
                        o.vote_counts.abstain
                    ),
                    (a, r, n - a - r)
                );
                assert_eq!(o.abstained.len(), n - a - r);
                assert_eq!(o.conditions.len(), a);
                let dissent_want = match o.verdict {
                    Verdict::Approved | Verdict::ApprovedWithReview => r,
                    Verdict::Rejected => a,
                    Verdict::Escalate => 0,
                };
                assert_eq!(o.dissent.len(), dissent_want);
            }
        }
    }

    #[test]
    fn named_splits_of_a_full_board() {
        let directors = board(5);
        let split = |a: usize| -> Vec<(String, Vote)> {
            directors
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    (
                        d.clone(),
                        vote(if i < a { "APPROVE" } else { "REJECT" }, &[]),
                    )
                })
                .collect()
        };
        assert_eq!(
            resolve_rule(&directors, &split(5)).verdict,
            Verdict::Approved
        );
        assert_eq!(
            resolve_rule(&directors, &split(4)).verdict,
            Verdict::Approved
        );
        let o = resolve_rule(&directors, &split(3));
        assert_eq!(o.verdict, Verdict::ApprovedWithReview);
        assert_eq!(o.dissent, vec!["COO", "CXO"]);
        let o = resolve_rule(&directors, &split(2));
        assert_eq!(o.verdict, Verdict::Rejected);
        assert_eq!(o.dissent, vec!["CA", "CPO"]);
        assert_eq!(
            resolve_rule(&directors, &split(0)).verdict,
            Verdict::Rejected
        );
        let mut two_two = split(2);
        two_two.pop();
        let o = resolve_rule(&directors, &two_two);
        assert_eq!(
            (o.verdict, o.abstained.clone()),
            (Verdict::Escalate, vec!["CXO".to_string()])
        );
    }

    #[test]
    fn conditions_name_their_director_and_off_board_votes_do_not_count() {
        let directors = board(5);
        let mut votes: Vec<(String, Vote)> = directors
            .iter()
            .map(|d| (d.clone(), vote("APPROVE", &[])))
            .collect();
        votes[2].1 = vote("APPROVE", &["Verify webhook signatures"]);
        votes.push(("CFO".into(), vote("REJECT", &["money"])));
        let o = resolve_rule(&directors, &votes);
        assert_eq!(o.conditions, vec!["Verify webhook signatures (CSO)"]);
        assert_eq!(o.vote_counts.reject, 0);
        assert_eq!(o.vote_summary.len(), 5, "CFO is not on the board");
        assert_eq!(o.vote_summary["CA"], "APPROVE");
    }

    #[test]
    fn resolved_votes_read_both_shapes_of_vote_summary() {
        let counts = VoteCounts {
            approve: 3,
            reject: 1,
            abstain: 1,
            of: 5,
        };
        let origin = json!({"vote_summary": {"CA": "APPROVE", "CPO": "approve", "CSO": "APPROVE", "COO": "REJECT", "CXO": "ABSTAIN"}});
        let ours = json!({"vote_summary": {"CA": "APPROVE"}, "vote_counts": counts});
        let before = json!({"vote_summary": {"approve": 3, "reject": 1, "abstain": 1, "of": 5}});
        let r = ResolvedVotes::read(&origin).unwrap();
        assert_eq!(r.counts, counts);
        assert_eq!(r.by_director[1], ("CPO".to_owned(), "approve".to_owned()));
        let r = ResolvedVotes::read(&ours).unwrap();
        assert_eq!((r.counts, r.by_director.len()), (counts, 1));
        let r = ResolvedVotes::read(&before).unwrap();
        assert_eq!((r.counts, r.by_director.len()), (counts, 0));
        assert_eq!(r.counts_line(), "3 approve, 1 reject, 1 abstained of 5");
        assert_eq!(ResolvedVotes::read(&json!({"verdict": "APPROVED"})), None);
        assert_eq!(ResolvedVotes::read(&json!({"vote_summary": 7})), None);
    }

    #[test]
    fn quick_review_needs_three_approve_or_concerns() {
        let directors = board(5);
        let a = |v: &str| Assessment {
            verdict: v.into(),
            concerns: vec!["c".into()],
            ..Default::default()
        };
        let mk = |vs: &[&str]| -> Vec<(String, Assessment)> {
            directors
                .iter()
                .zip(vs)
                .map(|(d, v)| (d.clone(), a(v)))
                .collect()
        };
        let o = quick_review_rule(
            &directors,
            &mk(&["APPROVE", "CONCERNS", "CONCERNS", "REJECT", "REJECT"]),
        );
        assert_eq!(o.verdict, Verdict::Approved);
        assert_eq!(o.conditions, vec!["c (CPO)", "c (CSO)"]);
        assert_eq!(o.dissent, vec!["COO", "CXO"]);
        let o = quick_review_rule(&directors, &mk(&["APPROVE", "CONCERNS", "REJECT"]));
        assert_eq!(o.verdict, Verdict::Rejected);
        assert_eq!(o.abstained, vec!["COO", "CXO"]);
    }

    proptest! {
        #[test]
        fn rule_partitions_the_board(votes in proptest::collection::vec(0u8..4, 0..=5)) {
            let directors = board(votes.len());
            let cast: Vec<(String, Vote)> = directors.iter().zip(&votes).filter_map(|(d, v)| match v {
                0 => Some((d.clone(), vote("APPROVE", &[]))),
                1 => Some((d.clone(), vote("REJECT", &[]))),
                2 => Some((d.clone(), vote("ABSTAIN", &[]))),
                _ => None,
            }).collect();
            let o = resolve_rule(&directors, &cast);
            let s = o.vote_counts;
            prop_assert_eq!(s.approve + s.reject + s.abstain, directors.len());
            prop_assert!(o.dissent.iter().all(|d| directors.contains(d) && !o.abstained.contains(d)));
            prop_assert_eq!(o.verdict, expected(s.approve, s.reject));
        }
    }
}
