//! The outbox against a real nats-server (docs/NATS.md "The outbox"): no subject under `$` loads or
//! leaves the bridge; a stuck record delays no other subject and holds nothing after a restart;
//! the operator retries or discards it (`pantheon bridge retry|discard`), journaled, while the
//! bridge runs.

use super::peers::{
    Listener, core_publish, dead_letters, deploy_to, origin_msg, read_json, start_to, stream_msgs,
    wait_stream,
};
use super::*;

/// `pantheon ARGS` on `m`: exit code and stdout as JSON (Null when it is not JSON).
fn run(m: &Machine, args: &[&str]) -> (i32, Value, String) {
    let out = m.command(args).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The journal's entries (one JSON object a line).
fn journal(m: &Machine) -> Vec<Value> {
    std::fs::read_to_string(m.path("conductor/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `stuck` entries of the bridge's status file.
fn stuck(m: &Machine) -> Vec<Value> {
    let s = m.ok(&["bridge", "status"], None);
    s["status"]["stuck"].as_array().cloned().unwrap_or_default()
}

fn stuck_entry(m: &Machine, id: &str) -> Option<Value> {
    stuck(m).into_iter().find(|s| s["outbox_id"] == id)
}

/// The one waiting outbox record of workflow `wf`.
fn record_of(m: &Machine, wf: &str) -> Value {
    m.files("conductor/outbox")
        .iter()
        .map(|p| read_json(p))
        .find(|r| r["workflow_id"] == wf)
        .unwrap_or_else(|| panic!("no outbox record of {wf}"))
}

#[test]
fn a_subject_under_dollar_never_loads_and_never_leaves_the_bridge() {
    let server = Server::start();
    let url = server.url();
    let (mut a, b) = two_machines(&server);
    // Anyone listening on the purge API hears it: a bridge that sent one would show here.
    let purges = Listener::start(&url, "$JS.API.STREAM.PURGE.>");
    // 1. A definition whose subject is under `$` does not load: `workflows` and `validate` name
    //    the file and the step.
    a.write(
        "conductor/workflows/purge.yaml",
        &DEPLOY.replace("deploy-across", "purge").replace(
            "subspace.konan.outgoing.tallon",
            "$JS.API.STREAM.PURGE.PANTHEON_tallon",
        ),
    );
    let (_, listed, _) = run(&a, &["workflows"]);
    let errors = listed["errors"].to_string();
    assert!(
        errors.contains("purge.yaml")
            && errors.contains("notify-enterprise")
            && errors.contains("under `$`"),
        "{listed:#}"
    );
    assert!(
        !listed["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == "purge"),
        "{listed:#}"
    );
    let (code, report, _) = run(&a, &["validate"]);
    assert_ne!(code, 0, "{report:#}");
    let problem = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["path"]
                .as_str()
                .is_some_and(|f| f.ends_with("purge.yaml"))
        })
        .unwrap_or_else(|| panic!("validate names purge.yaml: {report:#}"));
    assert_eq!(problem["severity"], "error", "{problem}");
    assert!(
        problem["message"]
            .as_str()
            .is_some_and(|m| m.contains("notify-enterprise") && m.contains("under `$`")),
        "{problem}"
    );
    std::fs::remove_file(a.path("conductor/workflows/purge.yaml")).unwrap();

    // 2. One request reaches tallon: its stream holds a message.
    a.ok(&["handoff", "submit", "-"], Some(&start_handoff(1)));
    wait_for(
        "the first request at tallon",
        Duration::from_secs(60),
        || inbox(&b).len() == 1,
    );
    let held = stream_msgs(&url, "PANTHEON_tallon");
    assert!(held >= 1, "tallon's stream holds the request");
    // 3. A committed record's subject edited to the purge API while konan's bridge is down: the
    //    restarted bridge dead-letters it with the reason and publishes nothing.
    assert!(a.bridge.terminate(), "konan's bridge stops cleanly");
    a.ok(&["handoff", "submit", "-"], Some(&start_handoff(2)));
    let mut rec = record_of(&a, "wf_deploy_2");
    let id = rec["outbox_id"].as_str().unwrap().to_owned();
    rec["subject"] = json!("$JS.API.STREAM.PURGE.PANTHEON_tallon");
    a.write(
        &format!("conductor/outbox/{id}.json"),
        &serde_json::to_string(&rec).unwrap(),
    );
    a.restart_bridge();
    let dead_path = a.path(&format!("conductor/bridge/dead/outbox_{id}.json"));
    wait_for(
        "the edited record's dead letter",
        Duration::from_secs(30),
        || dead_path.exists(),
    );
    let dead = read_json(&dead_path);
    let reason = dead["reason"].as_str().unwrap();
    assert!(
        reason.contains("not published") && reason.contains("under `$`"),
        "{reason}"
    );
    assert!(a.files("conductor/outbox").is_empty());
    assert!(!a.path(&format!("conductor/outbox/sent/{id}.json")).exists());
    // Time for a purge to land, had one gone out: the stream keeps every message, and nobody on
    // the purge API heard a thing.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        stream_msgs(&url, "PANTHEON_tallon"),
        held,
        "the stream survives"
    );
    assert!(purges.received().is_empty(), "{:?}", purges.received());
    assert_eq!(inbox(&b).len(), 1);
}

/// The text exposition of `serve --metrics` on `port` (empty while it does not answer).
fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s
}

/// Percentile `p` (0..=100) of `v`, which it sorts.
fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((v.len() as f64 - 1.0) * p / 100.0).round() as usize;
    v[i]
}

#[test]
fn a_stuck_record_delays_no_other_subject_and_the_operator_retries_or_discards_it() {
    const N: usize = 20;
    let server = Server::start();
    let url = server.url();
    // tallon is the origin: a core listener on its subject, no stream for it, and konan's bridge
    // (wrongly) publishes to it with JetStream, so every try waits for an ack that never comes.
    let listener = Listener::start(&url, "subspace.konan.outgoing.tallon");
    let mut v = Machine::new("vulcan");
    v.start_bridge(
        &url,
        &["--peer", "konan", "--subject", "subspace.*.outgoing.vulcan"],
    );
    let mut a = Machine::new("konan");
    a.write(
        "conductor/workflows/deploy-tallon.yaml",
        &deploy_to("tallon"),
    );
    a.write(
        "conductor/workflows/deploy-vulcan.yaml",
        &deploy_to("vulcan"),
    );
    // A subject no stream holds and that names no peer (the origin's morning briefing).
    a.write(
        "conductor/workflows/deploy-inbox.yaml",
        &DEPLOY
            .replace("deploy-across", "deploy-inbox")
            .replace("subspace.konan.outgoing.tallon", "subspace.konan.inbox"),
    );
    a.ok(&["handoff", "submit", "-"], Some(&start_to("tallon", 0)));
    let mut briefing = start_handoff(900);
    briefing["routing"]["workflow_definition"] = json!("deploy-inbox");
    a.ok(&["handoff", "submit", "-"], Some(&briefing));
    let to_tallon = record_of(&a, "wf_tallon_0")["outbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let to_inbox = record_of(&a, "wf_deploy_900")["outbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    a.start_bridge(&url, &["--peer", "tallon", "--peer", "vulcan"]);
    // Stuck from its first failed try, with a hint naming what really frees it.
    wait_for(
        "both records listed as stuck",
        Duration::from_secs(30),
        || stuck_entry(&a, &to_tallon).is_some() && stuck_entry(&a, &to_inbox).is_some(),
    );
    let t = stuck_entry(&a, &to_tallon).unwrap();
    assert_eq!(t["subject"], "subspace.konan.outgoing.tallon", "{t}");
    assert!(t["attempts"].as_u64().unwrap() >= 1, "{t}");
    let hint = t["hint"].as_str().unwrap();
    assert!(
        hint.contains("restart the bridge with `--peer tallon:core`")
            && hint.contains(&format!("pantheon bridge discard {to_tallon}")),
        "{hint}"
    );
    let i = stuck_entry(&a, &to_inbox).unwrap();
    let hint = i["hint"].as_str().unwrap();
    assert!(
        hint.contains("no stream holds subject subspace.konan.inbox")
            && hint.contains("no --peer flag changes how it is sent")
            && hint.contains(&format!("pantheon bridge retry {to_inbox}")),
        "{hint}"
    );
    // `serve --metrics` counts them for the alert rule (deploy/prometheus).
    {
        let port = free_port();
        let _serve = Guard(Some(
            a.command(&["serve", "--metrics", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ));
        wait_for(
            "the stuck records in /metrics",
            Duration::from_secs(30),
            || {
                scrape(port)
                    .lines()
                    .any(|l| l == "pantheon_bridge_outbox_stuck 2")
            },
        );
    }
    // Every other subject goes out at once while both are stuck.
    let mut secs = Vec::new();
    for n in 1..=N {
        let t0 = Instant::now();
        a.ok(&["handoff", "submit", "-"], Some(&start_to("vulcan", n)));
        wait_for("the request at vulcan", Duration::from_secs(30), || {
            inbox(&v).len() == n
        });
        secs.push(t0.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_millis(200));
    }
    let max = secs.iter().cloned().fold(0.0, f64::max);
    let p50 = percentile(&mut secs, 50.0);
    let p99 = percentile(&mut secs, 99.0);
    eprintln!(
        "other subject while one is stuck: p50 {p50:.3}s p99 {p99:.3}s max {max:.3}s (n={N}; submit through the CLI, 50 ms poll)"
    );
    // A try of the stuck record takes 5 s to fail; anything near it means the others waited.
    assert!(
        p99 < 2.0,
        "the others waited for the stuck record: {secs:?}"
    );
    assert!(
        stuck_entry(&a, &to_tallon).is_some(),
        "still stuck while the others went out"
    );

    // Retry: a stream for the briefing's subject, then `bridge retry` frees it within a second,
    // long before its backoff would have.
    wait_for("a long backoff", Duration::from_secs(60), || {
        stuck_entry(&a, &to_inbox).is_some_and(|s| s["retry_in_s"].as_u64().unwrap_or(0) >= 4)
    });
    let out = Command::new(super::peers::python())
        .arg(super::peers::client_py())
        .args([&url, "stream-add", "BRIEFING", "subspace.konan.inbox"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let t0 = Instant::now();
    let r = a.ok(&["bridge", "retry", &to_inbox], None);
    assert_eq!(r["status"], "retry_requested", "{r}");
    assert_eq!(r["outbox_id"], to_inbox.as_str(), "{r}");
    assert_eq!(r["bridge_running"], true, "{r}");
    let sent = a.path(&format!("conductor/outbox/sent/{to_inbox}.json"));
    wait_for("the retried record sent", Duration::from_secs(30), || {
        sent.exists()
    });
    let took = t0.elapsed().as_secs_f64();
    eprintln!("bridge retry to sent: {took:.3}s");
    assert!(took < 3.0, "the retry took {took:.3}s");
    assert_eq!(stream_msgs(&url, "BRIEFING"), 1);

    // Discard: the record is dead-lettered with the reason, the bridge stops trying it.
    let (code, refused, err) = run(&a, &["bridge", "discard", &to_tallon]);
    assert_ne!(code, 0, "a discard needs a reason: {refused} {err}");
    let r = a.ok(
        &[
            "bridge",
            "discard",
            &to_tallon,
            "--reason",
            "tallon listens with core NATS; resent by hand",
        ],
        None,
    );
    assert_eq!(r["status"], "discarded", "{r}");
    let t0 = Instant::now();
    wait_for(
        "the status to drop the discarded record",
        Duration::from_secs(10),
        || stuck_entry(&a, &to_tallon).is_none(),
    );
    eprintln!(
        "bridge discard to gone from status: {:.3}s",
        t0.elapsed().as_secs_f64()
    );
    let dead = read_json(&a.path(&format!("conductor/bridge/dead/outbox_{to_tallon}.json")));
    assert!(
        dead["reason"]
            .as_str()
            .is_some_and(|r| r.contains("discarded by") && r.contains("resent by hand")),
        "{dead}"
    );
    assert!(a.files("conductor/outbox").is_empty());
    let tries = listener.received().len();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(listener.received().len(), tries, "no try after the discard");
    // A record that no longer waits is refused, naming where it went.
    let (code, _, err) = run(&a, &["bridge", "retry", &to_tallon]);
    assert_ne!(code, 0);
    assert!(err.contains("dead-lettered"), "{err}");
    // Both acts are journaled, naming the outbox id.
    let entries = journal(&a);
    for (action, id) in [("bridge_retry", &to_inbox), ("bridge_discard", &to_tallon)] {
        let e = entries
            .iter()
            .find(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("no {action} entry: {entries:#?}"));
        assert_eq!(e["targets"]["outbox_id"], id.as_str(), "{e}");
    }
    assert_eq!(
        entries
            .iter()
            .find(|e| e["action"] == "bridge_discard")
            .unwrap()["reason"],
        "tallon listens with core NATS; resent by hand"
    );
}

/// Definition `id` of the deploy shape publishing on `subject`.
fn deploy_on(id: &str, subject: &str) -> String {
    DEPLOY
        .replace("deploy-across", id)
        .replace("subspace.konan.outgoing.tallon", subject)
}

#[test]
fn after_a_restart_with_stuck_records_waiting_the_rest_goes_out_and_comes_in_at_once() {
    const STUCK: usize = 6;
    let server = Server::start();
    let url = server.url();
    // Six subjects of peer zeus, which tallon wrongly publishes to with JetStream while a core
    // listener is all there is: each try waits 5 s for an acknowledgement that never comes.
    let _zeus = Listener::start(&url, "subspace.tallon.*.zeus");
    // konan is the origin: a core peer in its envelope, listening on its subject.
    let konan = Listener::start(&url, "subspace.tallon.outgoing.konan");
    let mut b = Machine::new("tallon");
    for n in 0..STUCK {
        let id = format!("deploy-w{n}");
        b.write(
            &format!("conductor/workflows/{id}.yaml"),
            &deploy_on(&id, &format!("subspace.tallon.w{n}.zeus")),
        );
        let mut h = start_handoff(n);
        h["routing"]["workflow_definition"] = json!(id);
        b.ok(&["handoff", "submit", "-"], Some(&h));
    }
    b.write(
        "conductor/workflows/deploy-konan.yaml",
        &deploy_on("deploy-konan", "subspace.tallon.outgoing.konan"),
    );
    b.start_bridge(
        &url,
        &[
            "--peer",
            "konan:core:origin",
            "--peer",
            "zeus",
            "--subject",
            "subspace.*.outgoing.tallon",
        ],
    );
    wait_stream(&url, &b);
    wait_for("every record stuck", Duration::from_secs(60), || {
        stuck(&b).len() == STUCK
    });
    // A restart with them waiting (a restarted bridge tries each at once): a new request to the
    // origin goes out, and the origin's request comes in, at once.
    b.restart_bridge();
    let t0 = Instant::now();
    let mut h = start_handoff(100);
    h["routing"]["workflow_definition"] = json!("deploy-konan");
    b.ok(&["handoff", "submit", "-"], Some(&h));
    core_publish(
        &url,
        "subspace.konan.outgoing.tallon",
        &[origin_msg(
            "after-restart-1",
            "konan",
            "tallon",
            json!({"summary": "deploy"}),
        )],
    );
    let (mut out_s, mut in_s) = (None, None);
    wait_for(
        "the request out and the request in",
        Duration::from_secs(90),
        || {
            if out_s.is_none() && !konan.received().is_empty() {
                out_s = Some(t0.elapsed().as_secs_f64());
            }
            if in_s.is_none() && inbox(&b).len() == 1 {
                in_s = Some(t0.elapsed().as_secs_f64());
            }
            out_s.is_some() && in_s.is_some()
        },
    );
    let (out_s, in_s) = (out_s.unwrap(), in_s.unwrap());
    eprintln!(
        "after a restart with {STUCK} stuck records: out to the origin {out_s:.3}s, in from it {in_s:.3}s"
    );
    assert!(
        out_s < 4.0,
        "the request waited {out_s:.3}s behind the stuck records"
    );
    assert!(in_s < 4.0, "the inbound request waited {in_s:.3}s");
    assert_eq!(dead_letters(&b).len(), 0, "{:?}", dead_letters(&b));
}
