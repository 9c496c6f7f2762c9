//! Usage, the ledger and budgets through the real binary (docs/BUDGETS.md): holds, raises, old
//! schemas, god and day budgets, kill -9 between recording usage and holding the dispatch, and Python
//! gods that never report usage or report it on the bus.

use std::os::unix::process::ExitStatusExt;

use serde_json::{Value, json};

use crate::common::*;

const PAID: &str = r#"
workflow:
  id: paid
  budget: {cost_usd: 1.0}
  steps:
    - id: research
      god: thoth
    - id: build
      god: hephaestus
      budget: {tokens: 100000}
    - id: review
      god: iris
    - id: ship
      god: hermes
"#;

fn paid_env() -> Env {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/paid.yaml", PAID);
    env
}

fn paid(hid: &str, wf: &str, from: &str, step: &str, usage: Option<Value>) -> Value {
    let mut h = def_handoff(handoff(hid, wf, from, "x", step, &[]), "paid", None);
    if let Some(u) = usage {
        h["usage"] = u;
    }
    h
}

fn cost(env: &Env, by: &str) -> Value {
    env.ok(&["cost", "--by", by, "--json"], None)
}

fn row<'a>(v: &'a Value, key: &str) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {v:#}"))
}

#[test]
fn the_handoff_whose_usage_reaches_the_budget_holds_the_dispatch_it_produces_until_approved() {
    let env = paid_env();
    let r = env.submit(&paid(
        "hof_20261202_aaaaa1",
        "wf_b1",
        "thoth",
        "research",
        Some(json!({"cost_usd": 0.6, "model": "claude-sonnet-4"})),
    ));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    let r = env.submit(&paid(
        "hof_20261202_aaaaa2",
        "wf_b1",
        "hephaestus",
        "build",
        Some(json!({"cost_usd": 0.4, "input_tokens": 1000})),
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    let d = env.read("conductor/pending/_quarantine/hof_20261202_aaaaa2.json");
    assert_eq!(
        d["held_because"],
        "budget: workflow wf_b1: $1.000000 of its $1.000000 budget"
    );
    assert_eq!(
        d["budget"]["crossed"][0],
        json!({"scope": "workflow", "name": "wf_b1", "metric": "cost_usd", "used": 1, "limit": 1})
    );
    // A bare approve lets this one through; the budget stays reached, so the next is held too.
    env.ok(&["approve", "hof_20261202_aaaaa2"], None);
    let r = env.submit(&paid(
        "hof_20261202_aaaaa3",
        "wf_b1",
        "iris",
        "review",
        None,
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    // Raising it (journaled) releases it and the next one goes through.
    let a = env.ok(
        &["approve", "hof_20261202_aaaaa3", "--budget-usd", "2.5"],
        None,
    );
    assert_eq!(a["status"], "approved", "{a:#}");
    assert_eq!(
        a["budget_raised"]["raises"][0]["to"],
        json!({"cost_usd": 2.5})
    );
    let st = env.state("wf_b1");
    assert_eq!(st["budget"]["workflow"]["cost_micros"], 2_500_000);
    let raise = env
        .journal_entries()
        .into_iter()
        .find(|e| e["action"] == "budget_raise")
        .unwrap();
    assert_eq!(raise["targets"]["handoff_id"], "hof_20261202_aaaaa3");
    assert!(
        raise["reason"]
            .as_str()
            .unwrap()
            .contains("\"cost_usd\":2.5")
    );
    let r = env.submit(&paid(
        "hof_20261202_aaaaa4",
        "wf_b1",
        "hermes",
        "ship",
        Some(json!({"cost_usd": 0.1})),
    ));
    assert_eq!(r["status"], "completed", "{r:#}");
    // The ledger: by god, by step, and the warning fired once at 80 %.
    let by_god = cost(&env, "god");
    assert_eq!(by_god["total"]["cost_usd"], 1.1);
    assert_eq!(row(&by_god, "thoth")["cost_usd"], 0.6);
    assert_eq!(row(&cost(&env, "step"), "build")["input_tokens"], 1000);
    let warnings = env.ok(&["cost", "--attention"], None);
    let wf_warnings: Vec<&Value> = warnings["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["scope"] == "workflow" && i["limit"] == 1)
        .collect();
    assert_eq!(wf_warnings.len(), 1, "{warnings:#}");
}

const FALLBACK: &str = r#"
workflow:
  id: fallback
  budget: {cost_usd: 1.0}
  steps:
    - id: research
      god: thoth
    - id: build
      god: hephaestus
      fallback_gods: [apollo, hermes]
    - id: review
      god: iris
"#;

fn ack_rejected(env: &Env, ack_id: &str, hid: &str, usage: Option<Value>) -> Value {
    let mut a = json!({"ack_id": ack_id, "handoff_id": hid, "status": "rejected",
                       "message": "not mine"});
    if let Some(u) = usage {
        a["usage"] = u;
    }
    env.ack(&a)
}

#[test]
fn a_rejection_rerouted_to_a_fallback_god_is_held_once_a_budget_is_reached() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/fallback.yaml", FALLBACK);
    let h = |hid: &str, wf: &str, cost: f64| {
        let mut h = def_handoff(
            handoff(hid, wf, "thoth", "x", "research", &[]),
            "fallback",
            None,
        );
        h["usage"] = json!({"cost_usd": cost});
        h
    };
    // Under the budget at routing; the rejection's own usage reaches it: the reroute is held.
    let r = env.submit(&h("hof_20261202_bbbbb1", "wf_f1", 0.5));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    let a = ack_rejected(
        &env,
        "ack_20261202_bbbbb1",
        "hof_20261202_bbbbb1",
        Some(json!({"cost_usd": 0.6})),
    );
    assert_eq!(a["state_status"], "awaiting_approval", "{a:#}");
    assert!(!env.exists("conductor/pending/apollo/hof_20261202_bbbbb1.json"));
    let d = env.read("conductor/pending/_quarantine/hof_20261202_bbbbb1.json");
    assert_eq!(d["to_god"], "apollo");
    assert_eq!(d["rerouted_from"], "hephaestus");
    assert_eq!(
        d["held_because"],
        "budget: workflow wf_f1: $1.100000 of its $1.000000 budget"
    );
    assert_eq!(d["budget"]["crossed"][0]["limit"], 1);
    assert_eq!(env.state("wf_f1")["status"], "awaiting_approval");
    env.ok(&["approve", "hof_20261202_bbbbb1"], None);
    assert!(env.exists("conductor/pending/apollo/hof_20261202_bbbbb1.json"));
    assert_eq!(env.state("wf_f1")["status"], "waiting_for_ack");

    // Held at routing, approved, then rejected: the reroute is held again (the budget stays
    // reached) and is decided anew, though the handoff was approved once.
    let r = env.submit(&h("hof_20261202_bbbbb2", "wf_f2", 1.2));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    env.ok(&["approve", "hof_20261202_bbbbb2"], None);
    let a = ack_rejected(&env, "ack_20261202_bbbbb2", "hof_20261202_bbbbb2", None);
    assert_eq!(a["state_status"], "awaiting_approval", "{a:#}");
    let d = env.read("conductor/pending/_quarantine/hof_20261202_bbbbb2.json");
    assert_eq!(d["to_god"], "apollo");
    assert!(d.get("approved_by").is_none(), "{d:#}");
    env.ok(&["approve", "hof_20261202_bbbbb2"], None);
    let st = env.state("wf_f2");
    assert_eq!(st["status"], "waiting_for_ack", "{st:#}");
    assert!(env.exists("conductor/pending/apollo/hof_20261202_bbbbb2.json"));
    let approvals = st["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 2, "{st:#}");
    assert_ne!(approvals[0]["dispatch_id"], approvals[1]["dispatch_id"]);
    // Repeated, the approval is the one already made, not a new one or a refusal.
    let again = env.ok(&["approve", "hof_20261202_bbbbb2"], None);
    assert_eq!(again["duplicate"], true, "{again:#}");
    assert_eq!(env.state("wf_f2")["approvals"].as_array().unwrap().len(), 2);

    // No budget reached: a reroute goes straight to the fallback god's inbox, as before.
    let r = env.submit(&h("hof_20261202_bbbbb3", "wf_f3", 0.1));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    let a = ack_rejected(&env, "ack_20261202_bbbbb3", "hof_20261202_bbbbb3", None);
    assert_eq!(a["state_status"], "waiting_for_ack", "{a:#}");
    assert!(env.exists("conductor/pending/apollo/hof_20261202_bbbbb3.json"));
}

#[test]
fn without_a_budget_nothing_is_held_and_usage_still_reaches_the_ledger_priced_by_the_table() {
    let env = Env::with_test_flow();
    let mut h = plan_handoff("hof_20261202_bbbbb1", "wf_free");
    h["usage"] = json!({"input_tokens": 2_000_000, "output_tokens": 100_000, "model": "claude-sonnet-4-5-20250929"});
    assert_eq!(env.submit(&h)["status"], "dispatched");
    let mut a = ack(
        "ack_20261202_bb1",
        "hof_20261202_bbbbb1",
        "accepted",
        "on it",
    );
    a["usage"] = json!({"output_tokens": 10, "model": "mystery-model"});
    env.ack(&a);
    let v = cost(&env, "model");
    // 2M input at $3/M and 100k output at $15/M.
    assert_eq!(row(&v, "claude-sonnet-4-5-20250929")["cost_usd"], 7.5);
    assert_eq!(row(&v, "mystery-model")["unpriced"], 1);
    assert_eq!(v["prices"]["source"], "default");
    let wf = cost(&env, "workflow");
    assert_eq!(row(&wf, "wf_free")["reports"], 2);
    // --since after everything: nothing.
    let later = env.ok(
        &[
            "cost",
            "--by",
            "god",
            "--since",
            "2999-01-01T00:00:00Z",
            "--json",
        ],
        None,
    );
    assert_eq!(later["total"]["reports"], 0);
    // A bad report is refused with its pointer, and nothing is recorded.
    let mut bad = plan_handoff("hof_20261202_bbbbb2", "wf_free2");
    bad["usage"] = json!({"input_tokens": -5, "surprise": 1});
    let err = env.refused(&["handoff", "submit", "-"], Some(&bad));
    assert!(err.contains("/usage/input_tokens"), "{err}");
    assert!(err.contains("/usage/surprise"), "{err}");
}

#[test]
fn a_root_still_on_the_previous_schema_takes_usage_and_still_bounds_it() {
    let env = paid_env();
    let v4 = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/engine/src/conductor/schema-v4.json"),
    )
    .unwrap();
    env.write("shared/handoffs/schema.json", &v4);
    let r = env.submit(&paid(
        "hof_20261202_ccccc1",
        "wf_old",
        "thoth",
        "research",
        Some(json!({"cost_usd": 1.5})),
    ));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    let mut bad = paid("hof_20261202_ccccc2", "wf_old2", "thoth", "research", None);
    bad["usage"] = json!({"cost_usd": "lots"});
    let err = env.refused(&["handoff", "submit", "-"], Some(&bad));
    assert!(err.contains("/usage/cost_usd"), "{err}");
    // Unknown top-level keys other than usage are still the old schema's to refuse.
    let mut other = paid("hof_20261202_ccccc3", "wf_old3", "thoth", "research", None);
    other["surprise"] = json!(1);
    env.refused(&["handoff", "submit", "-"], Some(&other));
}

#[test]
fn a_god_budget_from_the_root_config_holds_dispatches_to_that_god_across_workflows() {
    let env = Env::with_test_flow();
    env.write(
        "conductor/config.yaml",
        "cost:\n  warn_at: 0.5\n  budgets:\n    gods:\n      hephaestus: {cost_usd: 2}\n",
    );
    // Hephaestus spends $2.50 on one workflow, through an accepted ack's report.
    env.submit(&plan_handoff("hof_20261202_ddddd1", "wf_g1"));
    let mut a = ack("ack_20261202_dd1", "hof_20261202_ddddd1", "accepted", "");
    a["usage"] = json!({"cost_usd": 2.5});
    env.ack(&a);
    // The next dispatch to hephaestus, in another workflow, is held; one to iris is not.
    let r = env.submit(&plan_handoff("hof_20261202_ddddd2", "wf_g2"));
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    let d = env.read("conductor/pending/_quarantine/hof_20261202_ddddd2.json");
    assert!(
        d["held_because"]
            .as_str()
            .unwrap()
            .contains("god hephaestus: $2.500000 of its $2.000000 budget"),
        "{d:#}"
    );
    let r = env.submit(&def_handoff(
        handoff(
            "hof_20261202_ddddd3",
            "wf_g3",
            "hephaestus",
            "iris",
            "build",
            &[],
        ),
        "test-flow",
        None,
    ));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    // Raising the god budget goes to conductor/cost/budgets.json and releases later dispatches.
    env.ok(
        &["approve", "hof_20261202_ddddd2", "--budget-usd", "10"],
        None,
    );
    assert_eq!(
        env.read("conductor/cost/budgets.json")["gods"]["hephaestus"]["cost_micros"],
        10_000_000
    );
    let r = env.submit(&plan_handoff("hof_20261202_ddddd4", "wf_g4"));
    assert_eq!(r["status"], "dispatched", "{r:#}");
    let cfg = cost(&env, "god");
    assert_eq!(cfg["budgets"]["gods"]["hephaestus"]["cost_usd"], 10);
}

#[test]
fn a_day_budget_holds_every_dispatch_once_the_days_usage_reaches_it() {
    let env = Env::with_test_flow();
    env.write(
        "conductor/config.yaml",
        "cost:\n  budgets:\n    day: {cost_usd: 1}\n",
    );
    let mut h = plan_handoff("hof_20261202_ggggg1", "wf_d1");
    h["usage"] = json!({"cost_usd": 1.0});
    let r = env.submit(&h);
    assert_eq!(r["status"], "awaiting_approval", "{r:#}");
    let d = env.read("conductor/pending/_quarantine/hof_20261202_ggggg1.json");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(d["budget"]["crossed"][0]["scope"], "day");
    assert_eq!(d["budget"]["crossed"][0]["name"], today.as_str());
    env.ok(
        &["approve", "hof_20261202_ggggg1", "--budget-usd", "5"],
        None,
    );
    assert_eq!(
        env.read("conductor/cost/budgets.json")["days"][&today]["cost_micros"],
        5_000_000
    );
    assert_eq!(
        env.submit(&plan_handoff("hof_20261202_ggggg2", "wf_d2"))["status"],
        "dispatched"
    );
}

/// Kills `args` with SIGKILL at `point`, feeding it `input`.
fn killed_at(env: &Env, args: &[&str], input: &Value, point: &str) {
    use std::io::Write;
    let mut c = env.command(args);
    c.env("PANTHEON_TEST_CRASH_AT", point)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{point} not reached");
}

/// What a run ends with, for comparing a killed-and-repaired run with an unkilled one.
fn outcome(env: &Env, wf: &str) -> Value {
    let st = env.state(wf);
    let ledger = cost(env, "step");
    json!({
        "status": st["status"], "usage": st["usage"]["total"], "current": st["current_step"],
        "held": env.names("conductor/pending/_quarantine"),
        "ledger": ledger["total"], "steps": ledger["rows"],
        "markers": env.names("conductor/cost/pending"),
        "lines": std::fs::read_to_string(env.path("conductor/cost/ledger.jsonl")).unwrap().lines().count(),
    })
}

#[test]
fn kill_9_between_recording_usage_and_holding_the_dispatch_ends_as_if_never_killed() {
    let first = paid(
        "hof_20261202_eeeee1",
        "wf_k",
        "thoth",
        "research",
        Some(json!({"cost_usd": 0.5})),
    );
    let crossing = paid(
        "hof_20261202_eeeee2",
        "wf_k",
        "hephaestus",
        "build",
        Some(json!({"cost_usd": 0.7, "input_tokens": 10})),
    );
    let plain = paid_env();
    plain.submit(&first);
    plain.submit(&crossing);
    let want = outcome(&plain, "wf_k");
    assert_eq!(want["status"], "awaiting_approval");
    assert_eq!(want["lines"], 2);
    // Killed after the marker, after the state (usage and hold committed, no dispatch), after the
    // dispatch (no ledger line) and after the ledger line (summary not rewritten, marker left):
    // repeating the submit finishes it.
    for point in [
        "cost:after-marker",
        "submit:after-state",
        "submit:after-dispatch",
        "cost:after-ledger",
    ] {
        let env = paid_env();
        env.submit(&first);
        killed_at(&env, &["handoff", "submit", "-"], &crossing, point);
        let again = env.submit(&crossing);
        assert!(
            matches!(
                again["status"].as_str(),
                Some("awaiting_approval" | "duplicate")
            ),
            "{point}: {again:#}"
        );
        assert_eq!(
            outcome(&env, "wf_k"),
            want,
            "repeat after a kill at {point}"
        );
    }
    // ... or the supervisor's next pass does, when nobody repeats it (the dispatch was written).
    for point in ["submit:after-dispatch", "cost:after-ledger"] {
        let env = paid_env();
        env.submit(&first);
        killed_at(&env, &["handoff", "submit", "-"], &crossing, point);
        let tick = env.ok(&["tick"], None);
        assert_eq!(tick["cost"]["settled"], 1, "{point}: {tick:#}");
        assert_eq!(outcome(&env, "wf_k"), want, "tick after a kill at {point}");
    }
}

fn python_god(env: &Env, god: &str, wf: &str, mode: &str) -> Value {
    let out = std::process::Command::new("python3")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/conductor/python/usage_god.py"),
        )
        .arg(bin())
        .arg(&env.root)
        .args([god, wf, mode])
        .env("HOME", &env.home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "usage_god.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn python_gods_that_never_report_usage_or_report_it_on_the_bus_work_against_a_root_with_budgets() {
    let env = paid_env();
    // A silent god: the workflow runs through its budget-free steps untouched.
    env.submit(&paid(
        "hof_20261202_fffff1",
        "wf_py1",
        "thoth",
        "research",
        None,
    ));
    let done = python_god(&env, "hephaestus", "wf_py1", "silent");
    assert_eq!(done["next"]["status"], "dispatched", "{done:#}");
    assert_eq!(cost(&env, "god")["total"]["reports"], 0);
    // A god reporting 128,000 tokens on the bus: the supervisor pass reads it into the step (its
    // budget is 100,000 tokens), so the dispatch after it is held.
    env.submit(&paid(
        "hof_20261202_fffff2",
        "wf_py2",
        "thoth",
        "research",
        None,
    ));
    let ack = env.ok(
        &["ack"],
        Some(&json!({"ack_id": "ack_20261202_ff2", "handoff_id": "hof_20261202_fffff2", "status": "accepted"})),
    );
    assert_eq!(ack["status"], "accepted");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sys; sys.path.insert(0, {:?}); import usage_god; usage_god.post_usage({:?}, 'main', 'hephaestus', 'wf_py2', 'build')",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conductor/python").display().to_string(),
            env.root.display().to_string()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tick = env.ok(&["tick"], None);
    assert_eq!(tick["cost"]["bus_recorded"], 1, "{tick:#}");
    // A second pass reads nothing new.
    assert_eq!(env.ok(&["tick"], None)["cost"]["bus_reports"], 0);
    assert_eq!(
        env.state("wf_py2")["usage"]["steps"]["build"]["input_tokens"],
        120_000
    );
    let r = env.ack(
        &json!({"ack_id": "ack_20261202_ff3", "handoff_id": "hof_20261202_fffff2",
        "status": "completed", "message": "built"}),
    );
    assert_eq!(r["next"]["status"], "awaiting_approval", "{r:#}");
    let by_track = cost(&env, "track");
    assert_eq!(row(&by_track, "main")["tokens"], 128_000);
    // The bus-reporting god, whole: its own step runs, its report lands, the next dispatch is held.
    env.submit(&paid(
        "hof_20261202_fffff4",
        "wf_py3",
        "thoth",
        "research",
        None,
    ));
    let done = python_god(&env, "hephaestus", "wf_py3", "bus");
    assert_eq!(done["next"]["status"], "dispatched", "{done:#}");
    env.ok(&["tick"], None);
    assert_eq!(
        env.state("wf_py3")["usage"]["total"]["input_tokens"],
        120_000
    );
}
