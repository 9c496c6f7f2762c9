//! The budget hold through the real Conductor on temp roots: random usage and budgets.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::conductor::{Actor, Conductor};
use crate::store::{HandoffId, Root};

const STEPS: usize = 8;

fn root_with(budget: Option<(u64, u64)>) -> (tempfile::TempDir, Conductor) {
    let d = tempfile::tempdir().unwrap();
    let c = Conductor::new(Root::at(d.path()));
    c.init().unwrap();
    for e in std::fs::read_dir(c.root().rules_dir()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let mut def = String::from("workflow:\n  id: paid\n");
    if let Some((cost, tokens)) = budget {
        def.push_str(&format!(
            "  budget: {{cost_usd: {}, tokens: {tokens}}}\n",
            cost as f64 / 1_000_000.0
        ));
    }
    def.push_str("  steps:\n");
    for i in 0..STEPS {
        def.push_str(&format!("    - id: s{i}\n      god: thoth\n"));
    }
    std::fs::write(c.root().workflows_dir().join("paid.yaml"), def).unwrap();
    (d, c)
}

fn handoff(i: usize, cost: u64, tokens: u64) -> Value {
    json!({
        "handoff_id": format!("hof_20261202_{i:06x}"), "workflow_id": "wf_prop",
        "from_god": "thoth", "to_god": "thoth", "step": format!("s{i}"),
        "context": {"summary": "done", "decisions": [], "artifacts": []},
        "routing": {"workflow_definition": "paid"},
        "usage": {"cost_usd": cost as f64 / 1_000_000.0, "input_tokens": tokens},
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Every dispatch is held exactly when the usage recorded so far (the handoff's own included) has
    /// reached the budget in force, from the first dispatch after the crossing on; an approval that
    /// raises the budget sets it to exactly what the journal says, and one that would leave it
    /// reached is refused; no budget, no hold.
    #[test]
    fn the_hold_fires_on_the_first_dispatch_after_the_crossing_and_raises_are_as_journaled(
        budget in prop::option::of((1u64..3_000_000, 1u64..3_000)),
        reports in prop::collection::vec((0u64..800_000, 0u64..800), STEPS - 1),
        raises in prop::collection::vec((1u64..2_000_000, 1u64..2_000), STEPS - 1),
    ) {
        let (_d, c) = root_with(budget);
        let (mut limit_cost, mut limit_tokens) = budget.unwrap_or((u64::MAX, u64::MAX));
        let (mut used_cost, mut used_tokens) = (0u64, 0u64);
        for (i, (cost, tokens)) in reports.iter().enumerate() {
            used_cost += cost;
            used_tokens += tokens;
            let r = c.submit_handoff(&handoff(i, *cost, *tokens)).unwrap();
            let over = used_cost >= limit_cost || used_tokens >= limit_tokens;
            prop_assert_eq!(r.status.as_str(), if over { "awaiting_approval" } else { "dispatched" },
                "step {} used ${} / {} tokens of ${} / {}", i, used_cost, used_tokens, limit_cost, limit_tokens);
            if !over {
                continue;
            }
            prop_assert!(budget.is_some());
            let hid = HandoffId::parse(&r.handoff_id).unwrap();
            let d: Value = serde_json::from_slice(&std::fs::read(
                c.root().quarantine_dir().join(format!("{hid}.json"))).unwrap()).unwrap();
            prop_assert!(d["held_because"].as_str().unwrap().starts_with("budget: workflow wf_prop"));
            // A raise to what is already used would leave the budget reached: refused, nothing changed.
            let level = super::budget::Budget { cost_micros: Some(used_cost), tokens: Some(used_tokens) };
            let e = c.raise_budget(&hid, level, "prop").unwrap_err().to_string();
            prop_assert!(e.contains("would leave") && e.contains("nothing was changed"), "{}", e);
            // Raise both to the usage plus a random margin.
            let (add_cost, add_tokens) = raises[i];
            let to = super::budget::Budget {
                cost_micros: Some(used_cost + add_cost),
                tokens: Some(used_tokens + add_tokens),
            };
            c.raise_budget(&hid, to, "prop").unwrap();
            c.approve(&hid, Actor::Operator).unwrap();
            let entry = crate::journal::read_recent(c.root(), 2).unwrap();
            let raised = entry.entries.iter().find(|e| e["action"] == "budget_raise").unwrap();
            prop_assert_eq!(raised["targets"]["handoff_id"].as_str(), Some(hid.as_str()));
            let reason = raised["reason"].as_str().unwrap();
            let st = c.get_workflow_state(&crate::store::WorkflowId::parse("wf_prop").unwrap()).unwrap();
            let in_state = super::budget::Raised::of(&st.extra).workflow.unwrap();
            prop_assert_eq!(in_state, to);
            prop_assert!(reason.contains(&to.to_json().to_string()), "{} vs {}", reason, to.to_json());
            limit_cost = used_cost + add_cost;
            limit_tokens = used_tokens + add_tokens;
        }
        let s = super::ledger::summary(c.root()).unwrap();
        prop_assert_eq!(s.total.cost_micros, used_cost);
        prop_assert_eq!(s.total.tokens(), used_tokens);
    }
}
