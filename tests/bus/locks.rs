//! File locks through the CLI: renew, refusal, takeover, release rules, force, foreign entries.

use serde_json::{Value, json};

use crate::common::{Env, strict_lines};

fn locks_json(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.bus_dir().join("locks.json")).unwrap())
        .unwrap()
}

fn write_locks(env: &Env, v: Value) {
    std::fs::write(
        env.bus_dir().join("locks.json"),
        serde_json::to_string_pretty(&v).unwrap(),
    )
    .unwrap();
}

#[test]
fn holder_renews_others_are_refused_with_holder_and_expiry() {
    let env = Env::new();
    let first = env.ok(&["lock", "./src//a.ts", "--worker", "w1", "--ttl", "10m"]);
    assert_eq!(
        (first["filepath"].as_str(), first["renewed"].as_bool()),
        (Some("src/a.ts"), Some(false))
    );
    assert_eq!(first["lock_type"], "exclusive");
    let again = env.ok(&["lock", "src/a.ts", "--worker", "w1"]);
    assert_eq!(again["renewed"], true);
    assert!(
        again["expires_at"].as_str() > first["expires_at"].as_str(),
        "30m default outlasts 10m"
    );
    let err = env.refused(&["lock", "src/./a.ts", "--worker", "w2"]);
    assert!(
        err.contains("locked by w1") && err.contains(again["expires_at"].as_str().unwrap()),
        "{err}"
    );
    let on_disk = locks_json(&env);
    assert_eq!(on_disk.as_object().unwrap().len(), 1);
    assert_eq!(on_disk["src/a.ts"]["worker_id"], "w1");
    let msgs = strict_lines(&env.bus_dir().join("queue.jsonl"));
    assert_eq!(msgs.len(), 2, "a refusal posts nothing");
    assert_eq!(msgs[0]["type"], "FILE_LOCK");
    assert_eq!(msgs[0]["payload"]["filepath"], "src/a.ts");
    assert!(
        env.refused(&["lock", "a", "--worker", "w", "--ttl", "soon"])
            .contains("not a duration")
    );
    // Sub-second and malformed TTLs say what is wrong, never "longer than the maximum".
    for bad in ["300ms", "1.5s", "5m30", "-1s"] {
        let err = env.refused(&["lock", "a", "--worker", "w", &format!("--ttl={bad}")]);
        assert!(
            err.contains("not a duration") && !err.contains("longer"),
            "{bad}: {err}"
        );
    }
    let err = env.refused(&["lock", "a", "--worker", "w", "--ttl", "300ms"]);
    assert!(err.contains("whole seconds"), "{err}");
    let err = env.refused(&["lock", "a", "--worker", "w", "--ttl", "366d"]);
    assert!(err.contains("longer than the maximum of 365d"), "{err}");
}

#[test]
fn an_expired_lock_is_taken_over_and_the_previous_holder_recorded() {
    let env = Env::new();
    write_locks(
        &env,
        json!({"src/a.ts": {"worker_id": "ghost", "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-01T00:30:00Z"}}),
    );
    let r = env.ok(&["lock", "src/a.ts", "--worker", "w2"]);
    assert_eq!(r["previous_holder"], "ghost");
    let msg = &strict_lines(&env.bus_dir().join("queue.jsonl"))[0];
    assert_eq!(msg["payload"]["previous_holder"], "ghost");
    assert_eq!(locks_json(&env)["src/a.ts"]["worker_id"], "w2");
}

#[test]
fn only_the_holder_releases_and_force_is_recorded_as_operator() {
    let env = Env::new();
    env.ok(&["lock", "src/a.ts", "--worker", "w1"]);
    let err = env.refused(&["unlock", "src/a.ts", "--worker", "w2"]);
    assert!(
        err.contains("held by w1") && err.contains("--force"),
        "{err}"
    );
    assert!(
        env.refused(&["unlock", "src/zzz.ts", "--worker", "w1"])
            .contains("no lock on src/zzz.ts")
    );
    let r = env.ok(&["unlock", "src/a.ts", "--worker", "ops", "--force"]);
    assert_eq!(
        (r["forced_by"].as_str(), r["released_from"].as_str()),
        (Some("operator"), Some("w1"))
    );
    let last = strict_lines(&env.bus_dir().join("queue.jsonl"))
        .pop()
        .unwrap();
    assert_eq!(last["type"], "FILE_UNLOCK");
    assert_eq!(last["payload"]["forced_by"], "operator");
    let ev = env.bus_dir().join("events");
    for name in ["FILE_UNLOCK_all.event", "FILE_UNLOCK_src%2Fa.ts.event"] {
        assert_eq!(
            std::fs::read_to_string(ev.join(name)).unwrap(),
            last["id"].as_str().unwrap()
        );
    }
    assert_eq!(locks_json(&env), json!({}));

    env.ok(&["lock", "src/b.ts", "--worker", "w1"]);
    let own = env.ok(&["unlock", "./src/b.ts", "--worker", "w1"]);
    assert_eq!(own["forced_by"], Value::Null);
}

#[test]
fn foreign_entries_are_respected_and_kept() {
    let env = Env::new();
    write_locks(
        &env,
        json!({
            "src/lib/legacy.ts": "worker-1.5",
            "./src//odd.ts": {"worker_id": "w9"},
            "keep.ts": {"worker_id": "w8", "expires_at": "2099-01-01T00:00:00Z", "note": "foreign"}
        }),
    );
    let err = env.refused(&["lock", "src/lib/legacy.ts", "--worker", "w1"]);
    assert!(
        err.contains("worker-1.5") && err.contains("no expiry"),
        "{err}"
    );
    assert!(
        env.refused(&["lock", "src/odd.ts", "--worker", "w1"])
            .contains("w9")
    );
    let s = env.ok(&["status"]);
    let legacy = s["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"] == "src/lib/legacy.ts")
        .unwrap();
    assert_eq!(
        (legacy["no_expiry"].as_bool(), legacy["live"].as_bool()),
        (Some(true), Some(true))
    );
    env.ok(&["unlock", "src/lib/legacy.ts", "--worker", "worker-1.5"]);
    env.ok(&["lock", "new.ts", "--worker", "w1"]);
    let on_disk = locks_json(&env);
    assert_eq!(
        on_disk["keep.ts"]["note"], "foreign",
        "entries we did not touch are kept as written"
    );
    assert_eq!(on_disk["./src//odd.ts"]["worker_id"], "w9");
    assert!(on_disk.get("src/lib/legacy.ts").is_none());
}

#[test]
fn a_corrupt_locks_file_is_reported_and_left_alone() {
    let env = Env::new();
    std::fs::write(env.bus_dir().join("locks.json"), "{\"a\": ").unwrap();
    let err = env.refused(&["lock", "a", "--worker", "w"]);
    assert!(
        err.contains("locks.json") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(env.bus_dir().join("locks.json")).unwrap(),
        "{\"a\": "
    );
}
