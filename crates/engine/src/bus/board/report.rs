//! The resolution report: the resolution stored in a session and posted as `BOARD_RESOLVE`, the vote
//! counts read back from either shape of it, and `resolution.md` rendered from it.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::bus::model::{Assessment, BoardSession, Vote};

use super::rules::{RuleOutcome, VoteCounts};

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

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Renders `resolution.md`: proposal, verdict, vote table, conditions, dissent.
pub(crate) fn render_resolution(
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
    use serde_json::json;

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
}
