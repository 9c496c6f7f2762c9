//! Eight real processes submitting and acking at once, on one shared workflow and on their own.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::*;

const ROUNDS: usize = 3;

fn run_worker(env: &Env, t: usize) -> Vec<String> {
    let wf = if t < 4 {
        "wf_conc_shared".to_owned()
    } else {
        format!("wf_conc_{t}")
    };
    let mut errors = Vec::new();
    for r in 0..ROUNDS {
        let hid = format!("hof_20260614_c{t}{r}0000");
        let step = format!("s{t}-{r}");
        let h = handoff(&hid, &wf, &format!("g{t}"), &format!("h{t}"), &step, &[]);
        let acks = [
            ack(&format!("ack_20260614_p{t}{r}0"), &hid, "pending", "queued"),
            ack(
                &format!("ack_20260614_a{t}{r}0"),
                &hid,
                "accepted",
                "taking it",
            ),
        ];
        let mut steps: Vec<(Vec<&str>, &Value)> = vec![(vec!["handoff", "submit", "-"], &h)];
        steps.extend(acks.iter().map(|a| (vec!["ack"], a)));
        for (args, input) in steps {
            let out = env.run(&args, Some(input));
            if !out.status.success() {
                errors.push(format!(
                    "{t}/{r} {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    errors
}

#[test]
fn eight_processes_submit_and_ack_without_losing_or_duplicating_anything() {
    let env = Env::with_test_flow();
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let env = &env;
                s.spawn(move || run_worker(env, t))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(errors.is_empty(), "{errors:#?}");
    let check = |wf: &str, threads: &[usize]| {
        let s = env.state(wf);
        let hids: Vec<&str> = s["step_history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["handoff_id"].as_str().unwrap())
            .collect();
        let want: BTreeSet<String> = threads
            .iter()
            .flat_map(|t| (0..ROUNDS).map(move |r| format!("hof_20260614_c{t}{r}0000")))
            .collect();
        assert_eq!(hids.len(), want.len(), "{wf}: {hids:?}");
        assert_eq!(
            hids.iter().map(|h| h.to_string()).collect::<BTreeSet<_>>(),
            want,
            "{wf}"
        );
        let acks: Vec<&str> = s["acks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["ack_id"].as_str().unwrap())
            .collect();
        assert_eq!(acks.len(), want.len() * 2, "{wf}: {acks:?}");
        assert_eq!(
            acks.iter().collect::<BTreeSet<_>>().len(),
            acks.len(),
            "{wf}: an ack recorded twice"
        );
    };
    check("wf_conc_shared", &[0, 1, 2, 3]);
    for t in 4..8 {
        check(&format!("wf_conc_{t}"), &[t]);
    }
    for t in 0..8 {
        assert!(env.names(&format!("conductor/pending/h{t}")).is_empty());
        assert_eq!(env.names(&format!("conductor/archive/h{t}")).len(), ROUNDS);
    }
    env.assert_all_json_valid();
}
