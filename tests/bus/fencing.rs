//! Fencing tokens: a token per acquire, increasing per path across holders, releases
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

/// Five leases of one path, each released; returns the last token.
fn five_leases(env: &Env) -> u64 {
    let mut last = 0;
    for i in 0..5 {
        let w = format!("w{i}");
        last = token(&env.ok(&["lock", "src/a.ts", "--worker", &w]));
        env.ok(&["unlock", "src/a.ts", "--worker", &w]);
    }
    assert_eq!(last, 5);
    last
}

#[test]
fn a_deleted_or_torn_fencing_file_never_sends_tokens_backwards() {
    let fencing = |env: &Env| env.bus_dir().join("fencing.json");
    // Deleted, with every lease released: the floor comes from the queue's FILE_LOCK lines.
    let env = Env::new();
    let last = five_leases(&env);
    token(&env.ok(&["lock", "src/b.ts", "--worker", "w"]));
    std::fs::remove_file(fencing(&env)).unwrap();
    let t = token(&env.ok(&["lock", "src/a.ts", "--worker", "w9"]));
    assert!(t > last, "{t} > {last} after fencing.json was deleted");
    // Every other key's mark was rebuilt too (src/b.ts is still held with token 1).
    let marks: Value =
        serde_json::from_str(&std::fs::read_to_string(fencing(&env)).unwrap()).unwrap();
    assert_eq!(marks["src/b.ts"], 1, "{marks}");
    assert_eq!(marks["src/a.ts"], t, "{marks}");

    // Torn mid-write (a foreign writer, a crash): the same.
    let env = Env::new();
    let last = five_leases(&env);
    std::fs::write(fencing(&env), "{\"src/a.ts\": ").unwrap();
    let t = token(&env.ok(&["lock", "src/a.ts", "--worker", "w9"]));
    assert!(t > last, "{t} > {last} after fencing.json was torn");

    // Queue lines written without a token (an engine before tokens were posted, or a seed god) still
    // count: the floor is never below the number of leases.
    let env = Env::new();
    let last = five_leases(&env);
    let q = env.bus_dir().join("queue.jsonl");
    let stripped: String = std::fs::read_to_string(&q)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(p) = v["payload"].as_object_mut() {
                p.remove("fencing_token");
            }
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&q, stripped).unwrap();
    std::fs::remove_file(fencing(&env)).unwrap();
    let t = token(&env.ok(&["lock", "src/a.ts", "--worker", "w9"]));
    assert!(t > last, "{t} > {last} from lines without tokens");

    // The queue archived (`bus archive`) and the file deleted: the archive still holds the floor.
    let env = Env::new();
    let last = five_leases(&env);
    env.ok(&["archive", "--track-id", "old"]);
    std::fs::remove_file(fencing(&env)).unwrap();
    let t = token(&env.ok(&["lock", "src/a.ts", "--worker", "w9"]));
    assert!(
        t > last,
        "{t} > {last} with the floor in the archived queue"
    );
}

#[test]
fn a_planted_maximum_token_never_blocks_a_path() {
    const MAX: u64 = (1 << 53) - 1;
    let env = Env::new();
    let last = five_leases(&env);
    for planted in [json!(u64::MAX), json!(MAX), json!(MAX - 1)] {
        std::fs::write(
            env.bus_dir().join("fencing.json"),
            json!({"src/a.ts": planted}).to_string(),
        )
        .unwrap();
        let r = env.ok(&["lock", "src/a.ts", "--worker", "w9"]);
        let t = token(&r);
        assert!(t > last && t <= MAX, "{t} after a planted {planted}");
        env.ok(&["unlock", "src/a.ts", "--worker", "w9"]);
    }
    // Planted in the lock entry itself (an expired lease): taken over, with a usable token.
    env.ok(&["lock", "src/a.ts", "--worker", "w1"]);
    let mut l = locks(&env);
    l["src/a.ts"]["fencing_token"] = json!(u64::MAX);
    l["src/a.ts"]["expires_at"] = json!("2020-01-01T00:00:00Z");
    std::fs::write(locks_path(&env), l.to_string()).unwrap();
    let t = token(&env.ok(&["lock", "src/a.ts", "--worker", "w2"]));
    assert!(t > last && t < MAX, "{t}");
    // validate names a planted mark in fencing.json, which the next acquire ignores.
    std::fs::write(
        env.bus_dir().join("fencing.json"),
        json!({"src/c.ts": u64::MAX}).to_string(),
    )
    .unwrap();
    let out = env.cmd().args(["validate"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("fencing.json") && text.contains("never given out"),
        "{text}"
    );
}
