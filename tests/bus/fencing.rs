//! Fencing tokens (issue 16 item 3): a token per acquire, increasing per path across holders, releases
//! and Python-written entries; stale tokens refused; `LOCK_LOST` and its event for a holder taken over.

use serde_json::{Value, json};

use crate::common::{Env, strict_lines};

fn locks_path(env: &Env) -> std::path::PathBuf {
    env.bus_dir().join("locks.json")
}

fn locks(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(locks_path(env)).unwrap()).unwrap()
}

/// Rewrites the lease of `path` so that it expired an hour ago, keeping every other field.
fn expire(env: &Env, path: &str) {
    let mut l = locks(env);
    l[path]["expires_at"] = json!("2020-01-01T00:00:00Z");
    std::fs::write(locks_path(env), serde_json::to_string_pretty(&l).unwrap()).unwrap();
}

fn token(v: &Value) -> u64 {
    v["fencing_token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token in {v}"))
}

#[test]
fn tokens_increase_across_holders_releases_and_python_entries() {
    let env = Env::new();
    let t1 = token(&env.ok(&["lock", "src/a.ts", "--worker", "w1"]));
    assert_eq!(
        locks(&env)["src/a.ts"]["fencing_token"],
        t1,
        "stored in locks.json"
    );
    let renewed = env.ok(&[
        "lock",
        "src/a.ts",
        "--worker",
        "w1",
        "--token",
        &t1.to_string(),
    ]);
    assert_eq!(renewed["renewed"], true);
    assert_eq!(token(&renewed), t1, "a renewal keeps the lease's token");
    env.ok(&["unlock", "src/a.ts", "--worker", "w1"]);
    let t2 = token(&env.ok(&["lock", "src/a.ts", "--worker", "w2"]));
    assert!(t2 > t1, "{t2} > {t1} across a release");
    env.ok(&["unlock", "src/a.ts", "--worker", "w2"]);

    // A Python god writes an entry with no token (and lets it expire); the next token is still higher.
    std::fs::write(
        locks_path(&env),
        r#"{"src/a.ts": {"worker_id": "py", "acquired_at": "2020-01-01T00:00:00", "expires_at": "2020-01-01T00:30:00"}}"#,
    )
    .unwrap();
    let t3 = token(&env.ok(&["lock", "src/a.ts", "--worker", "w3"]));
    assert!(t3 > t2, "{t3} > {t2} past a Python entry without a token");
    // Another path has its own sequence.
    assert_eq!(token(&env.ok(&["lock", "src/b.ts", "--worker", "w1"])), 1);
}

#[test]
fn a_takeover_posts_lock_lost_and_stale_tokens_are_refused() {
    let env = Env::new();
    let t1 = token(&env.ok(&["lock", "src/a.ts", "--worker", "w1"]));
    expire(&env, "src/a.ts");
    let r = env.ok(&["lock", "src/a.ts", "--worker", "w2"]);
    let t2 = token(&r);
    assert!(t2 > t1);
    assert_eq!(r["previous_holder"], "w1");
    assert_eq!(r["lost_event"], "LOCK_LOST_w1.event");

    let lost: Vec<Value> = strict_lines(&env.bus_dir().join("queue.jsonl"))
        .into_iter()
        .filter(|m| m["type"] == "LOCK_LOST")
        .collect();
    assert_eq!(lost.len(), 1);
    let p = &lost[0]["payload"];
    assert_eq!(
        (&p["path"], &p["holder"], &p["token"], &p["new_holder"]),
        (&json!("src/a.ts"), &json!("w1"), &json!(t1), &json!("w2"))
    );
    // The old holder can wait for it.
    env.ok(&["wait", "LOCK_LOST_w1*", "--timeout", "2"]);

    let t1s = t1.to_string();
    let err = env.refused(&["unlock", "src/a.ts", "--worker", "w1", "--token", &t1s]);
    assert!(err.contains("stale") && err.contains("w2"), "{err}");
    let err = env.refused(&["lock", "src/a.ts", "--worker", "w1", "--token", &t1s]);
    assert!(err.contains("stale"), "{err}");
    // Even the holder's own unlock with a wrong token is refused, and the lock stays.
    let wrong = (t2 + 7).to_string();
    env.refused(&["unlock", "src/a.ts", "--worker", "w2", "--token", &wrong]);
    assert_eq!(locks(&env)["src/a.ts"]["worker_id"], "w2");
    env.ok(&[
        "unlock",
        "src/a.ts",
        "--worker",
        "w2",
        "--token",
        &t2.to_string(),
    ]);
    let err = env.refused(&[
        "lock",
        "src/a.ts",
        "--worker",
        "w2",
        "--token",
        &t2.to_string(),
    ]);
    assert!(err.contains("no longer locked"), "{err}");
}
