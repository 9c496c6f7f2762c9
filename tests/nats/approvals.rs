//! Approval links over NATS (docs/NATS.md "Approval links"): a token published on
//! `pantheon.NAME.approve` by a nats-py client (a peer's or a phone relay's stand-in, not our code)
//! is redeemed as the listener's POST is, and the reply is the receipt.

use super::peers::{client_py, python};
use super::*;

const GATE: &str = "workflow:\n  id: gate\n  steps:\n    - id: plan\n      god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n";

/// A held dispatch on `m` (the gate's build step), its handoff id.
fn hold(m: &Machine, n: u32) -> String {
    let hid = format!("hof_20261206_na{n:04}");
    m.ok(
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": hid, "workflow_id": format!("wf_na{n}"),
            "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
            "routing": {"workflow_definition": "gate"},
            "context": {"summary": format!("pay invoice {n}"), "decisions": [], "artifacts": []}}),
        ),
    );
    assert_eq!(
        m.files("conductor/pending/_quarantine").len() as u32,
        n,
        "held"
    );
    hid
}

/// Publishes `body` on `subject` as a request through nats-py; the reply's JSON (retried while the
/// bridge has not subscribed yet: no responders).
fn request(url: &str, subject: &str, body: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(python())
            .arg(client_py())
            .args([url, "request", subject, body])
            .output()
            .unwrap();
        if out.status.success() {
            return serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        }
        assert!(
            Instant::now() < until,
            "no reply on {subject}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn journal(m: &Machine, action: &str, hid: &str) -> Vec<Value> {
    std::fs::read_to_string(m.path("conductor/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["action"] == action && e["targets"]["handoff_id"] == hid)
        .collect()
}

#[test]
fn a_token_published_on_the_approve_subject_is_redeemed_and_the_reply_is_its_receipt() {
    let server = Server::start();
    let mut m = Machine::new("konan");
    for e in std::fs::read_dir(m.path("conductor/rules")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    m.write("conductor/workflows/gate.yaml", GATE);
    let (h1, h2) = (hold(&m, 1), hold(&m, 2));
    let base = "http://127.0.0.1:9";
    let l1 = m.ok(&["approve", &h1, "--link", "--base-url", base], None);
    let l2 = m.ok(&["approve", &h2, "--link", "--base-url", base], None);
    m.start_bridge(&server.url(), &["--peer", "tallon", "--approvals"]);
    let subject = "pantheon.konan.approve";
    let token = |l: &Value, k: &str| {
        l[k].as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    };
    // A declared peer approves: the reply is the receipt, the dispatch is in the god's inbox.
    let body = json!({"token": token(&l1, "approve_url"), "handoff": h1,
        "digest": l1["content_sha256"], "from": "tallon"})
    .to_string();
    let r = request(&server.url(), subject, &body);
    assert_eq!(r["status"], "approved", "{r:#}\n{}", m.log_tail());
    assert_eq!(r["decided_by"], "tallon (nats peer) via nats link", "{r:#}");
    assert!(
        m.path(&format!("conductor/pending/hephaestus/{h1}.json"))
            .exists()
    );
    let e = journal(&m, "approve", &h1);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["targets"]["channel"], "nats");
    assert_eq!(e[0]["targets"]["approver"], "tallon (nats peer)");
    // The same message again: a receipt saying who decided, nothing decided.
    let again = request(&server.url(), subject, &body);
    assert_eq!(again["status"], "refused", "{again:#}");
    assert_eq!(again["refused"], "already_decided");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("already approved by tallon"),
        "{again:#}"
    );
    assert_eq!(journal(&m, "approve", &h1).len(), 1);
    // A sender that is no declared peer decides nothing.
    let stranger = json!({"token": token(&l2, "approve_url"), "from": "mallory"}).to_string();
    let r = request(&server.url(), subject, &stranger);
    assert_eq!(r["status"], "error", "{r:#}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("not a declared peer"),
        "{r:#}"
    );
    assert!(
        m.path(&format!("conductor/pending/_quarantine/{h2}.json"))
            .exists()
    );
    // A phone relay forwards the reject link itself, as a form body, naming nobody.
    let form = format!("url={}", l2["reject_url"].as_str().unwrap());
    let r = request(&server.url(), subject, &form);
    assert_eq!(r["status"], "rejected", "{r:#}");
    assert_eq!(r["decided_by"], "operator via nats link");
    let e = journal(&m, "reject", &h2);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["targets"]["channel"], "nats");
    // Garbage is answered, not taken.
    let r = request(&server.url(), subject, "{not json");
    assert_eq!(r["status"], "error", "{r:#}");
}
