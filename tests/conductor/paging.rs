//! Paged `inbox` and `pending`: `--limit`, `--cursor`, `next_cursor`, `count`
//! the total, and cursors that stay right while dispatches come and go between pages.

use serde_json::{Value, json};

use crate::common::*;

/// Writes a dispatch file the way the Conductor (or a Python god) leaves one in an inbox.
fn plant(env: &Env, god: &str, n: u32) -> String {
    let id = format!("hof_20260614_{n:06x}");
    let d = json!({
        "dispatch_id": format!("disp_{n}"), "handoff_id": id, "workflow_id": format!("wf_page_{n}"),
        "from_god": "thoth", "to_god": god, "step": "build",
        "context": {"summary": format!("summary {n}\nsecond line"), "decisions": ["d"], "artifacts": []},
        "dispatched_at": format!("2026-06-14T10:{:02}:{:02}Z", n / 60, n % 60),
        "ack_status": "unacked"
    });
    env.write(
        &format!("conductor/pending/{god}/{id}.json"),
        &d.to_string(),
    );
    id
}

fn ids(page: &Value) -> Vec<String> {
    page["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["handoff_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn inbox_pages_oldest_first_with_the_total_count_and_default_limit_20() {
    let env = Env::new();
    let all: Vec<String> = (0..45).rev().map(|n| plant(&env, "thoth", n)).collect();
    let first = env.ok(&["inbox", "thoth"], None);
    assert_eq!(first["count"], json!(45));
    assert_eq!(first["limit"], json!(20));
    let mut oldest_first = all.clone();
    oldest_first.sort();
    assert_eq!(ids(&first), oldest_first[..20]);
    assert_eq!(
        first["dispatches"][0]["context"]["decisions"],
        json!(["d"]),
        "full context by default"
    );
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = env.ok(
        &["inbox", "thoth", "--limit", "30", "--cursor", cursor],
        None,
    );
    assert_eq!(ids(&second), oldest_first[20..]);
    assert_eq!(second["next_cursor"], Value::Null, "last page");

    let compact = env.ok(&["inbox", "thoth", "--compact", "--limit", "1"], None);
    let entry = compact["dispatches"][0].as_object().unwrap();
    let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "age_secs",
            "dispatch_id",
            "from_god",
            "handoff_id",
            "step",
            "summary",
            "workflow_id"
        ]
    );
    assert_eq!(entry["summary"], json!("summary 0"), "first line only");
    let whole = env.ok(&["dispatch", "thoth", &oldest_first[0]], None);
    assert_eq!(
        whole["dispatch"]["context"]["summary"],
        json!("summary 0\nsecond line")
    );

    let bad = env.refused(&["inbox", "thoth", "--cursor", "not-a-cursor"], None);
    assert!(bad.contains("start again without a cursor"), "{bad}");
    // A page size the engine does not take is bad usage (exit 2).
    let zero = env.run(&["inbox", "thoth", "--limit", "0"], None);
    assert_eq!(zero.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&zero.stderr).contains("1 to 1000"));
}

/// Walks every page of `args`; `between(round)` runs between two pages. Returns the handoff ids
/// listed, in order.
fn walk(env: &Env, args: &[&str], mut between: impl FnMut(u32)) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for round in 1..200 {
        let mut a: Vec<&str> = args.to_vec();
        if let Some(c) = &cursor {
            a.extend(["--cursor", c.as_str()]);
        }
        let page = env.ok(&a, None);
        if page.get("dispatches").is_some() {
            seen.extend(ids(&page));
        } else {
            for list in page["pending"].as_object().unwrap().values() {
                for e in list.as_array().unwrap() {
                    seen.push(e["handoff_id"].as_str().unwrap().to_string());
                }
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return seen,
        }
        between(round);
    }
    panic!("paging never ended: {seen:?}");
}

/// Entries that exist throughout are listed exactly once although others are added and removed
/// between pages, before and after the cursor.
#[test]
fn cursors_skip_and_repeat_nothing_while_dispatches_come_and_go() {
    let env = Env::new();
    for n in 0..40 {
        plant(&env, "marvin", n);
        plant(&env, "iris", n + 1000);
    }
    let id = |n: u32| format!("hof_20260614_{n:06x}");
    for (args, gone_from) in [
        (&["inbox", "marvin", "--limit", "6"][..], 0u32),
        (&["pending", "--limit", "9"][..], 100),
    ] {
        let mut removed = Vec::new();
        let seen = walk(&env, args, |round| {
            // One entry already listed and one not yet listed go; an older and a newer come.
            for gone in [gone_from / 10 + round * 2, 39 - round] {
                if !removed.contains(&gone) {
                    removed.push(gone);
                    let _ = std::fs::remove_file(
                        env.path(&format!("conductor/pending/marvin/{}.json", id(gone))),
                    );
                }
            }
            plant(&env, "marvin", 3000 + gone_from + round);
            plant(&env, "marvin", 200 + gone_from + round);
        });
        let throughout = (0..40)
            .filter(|n| !removed.contains(n))
            .chain(if args[0] == "pending" {
                1000..1040
            } else {
                0..0
            });
        let mut checked = 0;
        for n in throughout {
            let listed = seen.iter().filter(|s| **s == id(n)).count();
            assert_eq!(listed, 1, "{args:?}: {} listed once in {seen:?}", id(n));
            checked += 1;
        }
        assert!(checked > 40 || args[0] == "inbox", "{checked}");
        assert!(!removed.is_empty());
        // Replant what was removed for the next walk.
        for n in removed {
            plant(&env, "marvin", n);
        }
    }
}
