//! The board rules as pure functions (docs/PROTOCOL.md §4): the resolve and quick-review rules, the phase
//! order and completeness, and the checks of a write's phase, director and words. No file is touched here,
//! so the console can predict a verdict and the tests below can try every split of votes.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::bus::model::{Assessment, BoardSession, Vote};
use crate::bus::vocab::Vocabulary;
use crate::error::{Error, Result};
use crate::store::ids::{Director, check_free_text};

use super::{ASSESSING, COMPLETE, DISCUSSING, QUICK_REVIEW, RESOLVING, VOTING};

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

pub(super) fn require_status(s: &BoardSession, want: &[&str], what: &str) -> Result<()> {
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

pub(super) fn require_director(s: &BoardSession, d: &Director) -> Result<()> {
    if s.directors.iter().any(|x| x == d.as_str()) {
        Ok(())
    } else {
        Err(Error::refused(format!(
            "{d} is not on the board of session {} (directors: {})",
            s.session_id,
            s.directors.join(", ")
        )))
    }
}

pub(super) fn one_of<W: Vocabulary>(field: &str, value: &str) -> Result<String> {
    match W::parse_word_loose(value) {
        Some(w) => Ok(w.word().to_owned()),
        None => Err(Error::refused(format!(
            "{field} {value:?} must be one of {}",
            W::every_word()
        ))),
    }
}

pub(super) fn phase_complete(
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

pub(super) fn next_status(s: &BoardSession) -> Option<&'static str> {
    match s.status.as_str() {
        ASSESSING if s.checkpoint == QUICK_REVIEW => Some(RESOLVING),
        ASSESSING => Some(DISCUSSING),
        DISCUSSING => Some(VOTING),
        VOTING => Some(RESOLVING),
        _ => None,
    }
}

pub(super) fn count_of(directors: &[String], map: &Map<String, Value>) -> u32 {
    directors.iter().filter(|d| map.contains_key(*d)).count() as u32
}

pub(super) fn non_empty_list(field: &'static str, items: &[String]) -> Result<()> {
    for i in items {
        check_free_text(field, i)?;
    }
    Ok(())
}

pub(super) fn missing(directors: &[String], map: &Map<String, Value>) -> Vec<String> {
    directors
        .iter()
        .filter(|d| !map.contains_key(*d))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::board::DEFAULT_DIRECTORS;
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
