//! Board deliberations from open to resolve through the CLI.

use serde_json::{Value, json};

use crate::common::{Env, strict_lines};

const DIRECTORS: [&str; 5] = ["CA", "CPO", "CSO", "COO", "CXO"];

fn open_and_assess(env: &Env) -> Value {
    let opened = env.board(&[
        "open",
        "--checkpoint",
        "EVALUATE_PLAN",
        "--proposal",
        "Stripe checkout",
    ]);
    for (i, d) in DIRECTORS.iter().enumerate() {
        let verdict = if i == 4 { "REJECT" } else { "APPROVE" };
        env.board(&[
            "assess",
            "--director",
            d,
            "--verdict",
            verdict,
            "--score",
            "7",
            "--concern",
            "tests",
        ]);
    }
    opened
}

/// A full deliberation in which the first `approvals` directors approve; returns the resolve result.
fn deliberate(env: &Env, approvals: usize) -> Value {
    open_and_assess(env);
    assert_eq!(env.board(&["advance"])["to"], "DISCUSSING");
    env.board(&[
        "discuss",
        "--from",
        "CSO",
        "--to",
        "CA",
        "--type",
        "QUESTION",
        "--message",
        "Signatures verified?",
    ]);
    env.board(&[
        "discuss",
        "--from",
        "CA",
        "--to",
        "ALL",
        "--type",
        "CLARIFY",
        "--message",
        "Yes",
        "--changes-verdict",
    ]);
    for round in 1..=3 {
        assert_eq!(env.board(&["next-round"])["record"]["round"], round);
    }
    assert_eq!(env.board(&["advance"])["to"], "VOTING");
    for (i, d) in DIRECTORS.iter().enumerate() {
        let verdict = if i < approvals { "APPROVE" } else { "REJECT" };
        let mut args = vec![
            "vote",
            "--director",
            d,
            "--verdict",
            verdict,
            "--confidence",
            "0.8",
        ];
        if *d == "CSO" {
            args.extend(["--condition", "Verify webhook signatures"]);
        }
        env.board(&args);
    }
    assert_eq!(env.board(&["advance"])["to"], "RESOLVING");
    env.board(&["resolve"])
}

fn session(env: &Env) -> Value {
    env.board(&["status"])["session"].clone()
}

#[test]
fn full_deliberations_resolve_every_split_by_the_rule() {
    let cases: [(usize, &str, &[&str]); 5] = [
        (5, "APPROVED", &[]),
        (4, "APPROVED", &["CXO"]),
        (3, "APPROVED_WITH_REVIEW", &["COO", "CXO"]),
        (2, "REJECTED", &["CA", "CPO"]),
        (0, "REJECTED", &[]),
    ];
    for (approvals, verdict, dissent) in cases {
        let env = Env::new();
        let r = deliberate(&env, approvals);
        assert_eq!(r["verdict"], verdict, "{approvals}-{}", 5 - approvals);
        assert_eq!(r["dissent"], json!(dissent));
        assert_eq!(r["abstained"], json!([]));
        assert_eq!(r["forced"], false);
        assert_eq!(r["conditions"], json!(["Verify webhook signatures (CSO)"]));
        // The public origin's shape, {director: verdict}, with the counts beside it.
        let by_director: serde_json::Map<String, Value> = DIRECTORS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let v = if i < approvals { "APPROVE" } else { "REJECT" };
                (d.to_string(), json!(v))
            })
            .collect();
        assert_eq!(r["vote_summary"], Value::Object(by_director.clone()));
        assert_eq!(
            r["vote_counts"],
            json!({"approve": approvals, "reject": 5 - approvals, "abstain": 0, "of": 5})
        );

        let s = session(&env);
        assert_eq!(s["status"], "COMPLETE");
        assert_eq!(s["resolution"]["verdict"], verdict);
        assert_eq!(s["phases"]["resolve"]["status"], "COMPLETE");
        assert_eq!(s["phases"]["discuss"]["rounds"], 3);
        let md = std::fs::read_to_string(env.bus_dir().join("board/resolution.md")).unwrap();
        assert!(md.contains("**Proposal**: Stripe checkout"), "{md}");
        assert!(
            md.contains(&format!("**Verdict**: {}", verdict.replace('_', " "))),
            "{md}"
        );
        assert!(
            md.contains("| CSO | ") && md.contains("Verify webhook signatures (CSO)"),
            "{md}"
        );
        for d in dissent {
            assert!(md.contains(&format!("- {d}")), "{md}");
        }
        let bus = env.bus_dir();
        assert_eq!(
            std::fs::read_to_string(bus.join("events/BOARD_RESOLVE.event")).unwrap(),
            r["message_id"].as_str().unwrap()
        );
        assert!(bus.join("events/BOARD_RESOLVE_all.event").exists());
        let msgs = strict_lines(&bus.join("queue.jsonl"));
        let types: Vec<&str> = msgs.iter().map(|m| m["type"].as_str().unwrap()).collect();
        assert_eq!(types.iter().filter(|t| **t == "BOARD_ASSESS").count(), 5);
        assert_eq!(types.iter().filter(|t| **t == "BOARD_DISCUSS").count(), 2);
        assert_eq!(types.iter().filter(|t| **t == "BOARD_VOTE").count(), 5);
        let resolve = msgs.iter().find(|m| m["type"] == "BOARD_RESOLVE").unwrap();
        assert_eq!(resolve["payload"]["verdict"], verdict);
        assert_eq!(
            resolve["payload"]["vote_summary"],
            Value::Object(by_director)
        );
        assert_eq!(resolve["payload"]["vote_counts"], r["vote_counts"]);
        assert_eq!(s["resolution"]["vote_summary"], r["vote_summary"]);
        let discussion = strict_lines(&bus.join("board/discussion.jsonl"));
        assert_eq!(discussion[1]["changes_my_verdict"], true);
        assert_eq!(discussion[1]["round"], 1);
    }
}

#[test]
fn resolving_with_missing_votes_needs_force_and_counts_them_abstained() {
    let env = Env::new();
    open_and_assess(&env);
    env.board(&["advance"]);
    let err = env.board_refused(&["advance"]);
    assert!(
        err.contains("0 of 3 discussion rounds") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(env.board(&["advance", "--force"])["forced"], true);
    env.board(&[
        "vote",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--confidence",
        "0.9",
        "--condition",
        "Add tests",
    ]);
    env.board(&[
        "vote",
        "--director",
        "CPO",
        "--verdict",
        "REJECT",
        "--confidence",
        "0.6",
    ]);
    let status = env.board(&["status"]);
    assert_eq!(status["missing_votes"], json!(["CSO", "COO", "CXO"]));
    assert_eq!(status["predicted"]["verdict"], "ESCALATE");
    let err = env.board_refused(&["resolve"]);
    assert!(
        err.contains("votes missing from CSO, COO, CXO") && err.contains("--force"),
        "{err}"
    );
    let r = env.board(&["resolve", "--force"]);
    assert_eq!(r["verdict"], "ESCALATE");
    assert_eq!(r["forced"], true);
    assert_eq!(r["abstained"], json!(["CSO", "COO", "CXO"]));
    assert_eq!(r["conditions"], json!(["Add tests (CA)"]));
    assert_eq!(r["resolved_by"], "operator");
    let md = std::fs::read_to_string(env.bus_dir().join("board/resolution.md")).unwrap();
    assert!(
        md.contains("(forced)") && md.contains("| COO | (abstained)"),
        "{md}"
    );
    assert_eq!(session(&env)["status"], "COMPLETE");
    assert!(
        env.board_refused(&["resolve", "--force"])
            .contains("already resolved")
    );
}

#[test]
fn writes_are_phase_checked_and_limited_to_the_board() {
    let env = Env::new();
    assert_eq!(env.board(&["status"])["session"], Value::Null);
    assert!(
        env.board_refused(&[
            "assess",
            "--director",
            "CA",
            "--verdict",
            "APPROVE",
            "--score",
            "5"
        ])
        .contains("no board session")
    );
    env.board(&[
        "open",
        "--checkpoint",
        "PRE_LAUNCH",
        "--proposal",
        r#"{"proposal": "Launch", "context": {"spec": "s.md"}}"#,
    ]);
    assert_eq!(session(&env)["proposal"]["context"]["spec"], "s.md");
    let err = env.board_refused(&[
        "vote",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--confidence",
        "1",
    ]);
    assert!(err.contains("ASSESSING") && err.contains("VOTING"), "{err}");
    assert!(
        env.board_refused(&[
            "discuss",
            "--from",
            "CA",
            "--to",
            "ALL",
            "--type",
            "AGREE",
            "--message",
            "x"
        ])
        .contains("DISCUSSING")
    );
    let err = env.board_refused(&[
        "assess",
        "--director",
        "CFO",
        "--verdict",
        "APPROVE",
        "--score",
        "5",
    ]);
    assert!(err.contains("CFO is not on the board"), "{err}");
    assert!(
        env.board_refused(&[
            "assess",
            "--director",
            "CA",
            "--verdict",
            "MAYBE",
            "--score",
            "5"
        ])
        .contains("APPROVE, CONCERNS, REJECT")
    );
    assert!(
        env.board_refused(&[
            "assess",
            "--director",
            "CA",
            "--verdict",
            "APPROVE",
            "--score",
            "11"
        ])
        .contains("1–10")
    );
    env.board(&[
        "assess",
        "--director",
        "CSO",
        "--verdict",
        "CONCERNS",
        "--score",
        "6.5",
        "--blocking",
        "--extra",
        r#"{"vulnerabilities": [{"severity": "HIGH"}]}"#,
    ]);
    let st = env.board(&["status"]);
    assert_eq!(st["assessments"]["CSO"]["score"], 6.5);
    assert_eq!(
        st["assessments"]["CSO"]["vulnerabilities"][0]["severity"],
        "HIGH"
    );
    assert_eq!(st["session"]["phases"]["assess"]["complete"], 1);
    let err = env.board_refused(&["advance"]);
    assert!(
        err.contains("assessments missing from CA, CPO, COO, CXO"),
        "{err}"
    );
    env.board(&["advance", "--force"]);
    assert!(
        env.board_refused(&[
            "discuss",
            "--from",
            "CA",
            "--to",
            "CFO",
            "--type",
            "AGREE",
            "--message",
            "x"
        ])
        .contains("CFO is not on the board")
    );
    assert!(
        env.board_refused(&[
            "discuss",
            "--from",
            "CA",
            "--to",
            "ALL",
            "--type",
            "SHOUT",
            "--message",
            "x"
        ])
        .contains("CHALLENGE")
    );
    for _ in 0..3 {
        env.board(&["next-round"]);
    }
    assert!(
        env.board_refused(&["next-round"])
            .contains("all 3 discussion rounds are done")
    );
    assert!(
        env.board_refused(&[
            "discuss",
            "--from",
            "CA",
            "--to",
            "ALL",
            "--type",
            "AGREE",
            "--message",
            "x"
        ])
        .contains("board advance")
    );
    env.board(&["advance"]);
    assert!(
        env.board_refused(&[
            "vote",
            "--director",
            "CA",
            "--verdict",
            "CONCERNS",
            "--confidence",
            "0.5"
        ])
        .contains("APPROVE, REJECT")
    );
    assert!(
        env.board_refused(&[
            "vote",
            "--director",
            "CA",
            "--verdict",
            "APPROVE",
            "--confidence",
            "1.5"
        ])
        .contains("0–1")
    );
}

#[test]
fn opening_a_session_archives_the_previous_one() {
    let env = Env::new();
    let first = env.board(&["open", "--checkpoint", "EVALUATE_PLAN", "--proposal", "one"]);
    let first_id = first["session"]["session_id"].as_str().unwrap().to_owned();
    assert!(first_id.starts_with("board-2"));
    env.board(&[
        "assess",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--score",
        "8",
    ]);
    let second = env.board(&[
        "open",
        "--checkpoint",
        "EVALUATE_EXECUTION",
        "--proposal",
        "two",
    ]);
    let second_id = second["session"]["session_id"].as_str().unwrap().to_owned();
    assert_ne!(first_id, second_id);
    assert_eq!(second["archived"]["session_id"], first_id.as_str());
    assert_eq!(second["archived"]["status"], "ASSESSING");
    let archived = env.bus_dir().join("board/archive").join(&first_id);
    assert!(archived.join(format!("session-{first_id}.json")).exists());
    let old: Value =
        serde_json::from_str(&std::fs::read_to_string(archived.join("assessments.json")).unwrap())
            .unwrap();
    assert_eq!(old["CA"]["verdict"], "APPROVE");
    let st = env.board(&["status"]);
    assert_eq!(st["session"]["session_id"], second_id.as_str());
    assert_eq!(st["assessments"], json!({}));
}

#[test]
fn a_quick_review_resolves_from_assessments_alone() {
    let env = Env::new();
    env.board(&[
        "open",
        "--checkpoint",
        "QUICK_REVIEW",
        "--proposal",
        "hotfix",
    ]);
    for (d, v) in [
        ("CA", "APPROVE"),
        ("CPO", "CONCERNS"),
        ("CSO", "CONCERNS"),
        ("COO", "REJECT"),
        ("CXO", "REJECT"),
    ] {
        env.board(&[
            "assess",
            "--director",
            d,
            "--verdict",
            v,
            "--score",
            "5",
            "--concern",
            &format!("{d} worry"),
        ]);
    }
    assert_eq!(env.board(&["status"])["predicted"]["verdict"], "APPROVED");
    assert_eq!(env.board(&["advance"])["to"], "RESOLVING");
    let r = env.board(&["resolve"]);
    assert_eq!(r["verdict"], "APPROVED");
    assert_eq!(r["quick_review"], true);
    assert_eq!(
        r["conditions"],
        json!(["CPO worry (CPO)", "CSO worry (CSO)"])
    );
    assert_eq!(r["dissent"], json!(["COO", "CXO"]));
    let s = session(&env);
    assert_eq!(
        (
            s["phases"]["vote"]["status"].as_str(),
            s["phases"]["discuss"]["status"].as_str()
        ),
        (Some("SKIPPED"), Some("SKIPPED"))
    );
}
