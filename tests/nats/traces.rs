//! `pantheon serve --otlp` (docs/OBSERVABILITY.md, "Traces") against an OTLP/HTTP receiver built on
//! the official OpenTelemetry protocol definitions (`python/otlp_receiver.py`, the
//! `opentelemetry-proto` package): one trace per workflow with its parent links, for acts through
//! the CLI and a god that writes its own dispatch file, a bridge hop between two roots over a real
//! `nats-server` keeping the trace id, and a receiver that is down costing nothing but counted drops.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Guard, Machine, Server, free_port, setup, start_handoff, two_machines, wait_for};

/// The receiver: a Python child writing one JSON line per span it decoded.
struct Receiver {
    port: u16,
    out: PathBuf,
    _proc: Guard,
    _dir: tempfile::TempDir,
}

impl Receiver {
    fn start(port: Option<u16>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("spans.jsonl");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/nats/python/otlp_receiver.py");
        let mut c = Command::new(setup::python());
        c.arg(script).arg(&out);
        if let Some(p) = port {
            c.arg(p.to_string());
        }
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver's port");
        Self {
            port,
            out,
            _proc: Guard(Some(child)),
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far (a request the receiver could not decode fails the test).
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let v: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if let Some(e) = v.iter().find(|s| s.get("error").is_some()) {
            panic!("the receiver refused a request: {e}");
        }
        v
    }

    fn of(&self, wf: &str) -> Vec<Value> {
        self.spans()
            .into_iter()
            .filter(|s| s["attributes"]["pantheon.workflow_id"] == wf)
            .collect()
    }
}

/// `pantheon serve --otlp URL --metrics PORT` on `m`'s root, once its model is loaded.
struct Serve {
    metrics: u16,
    _proc: Guard,
}

impl Serve {
    fn start(m: &Machine, otlp: &str) -> Self {
        let metrics = free_port();
        let child = m
            .command(&["serve", "--otlp", otlp, "--metrics", &metrics.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting pantheon serve");
        let s = Self {
            metrics,
            _proc: Guard(Some(child)),
        };
        wait_for("serve's model", Duration::from_secs(30), || {
            s.scrape().contains("\npantheon_model_loaded 1\n")
        });
        s
    }

    fn scrape(&self) -> String {
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", self.metrics)) else {
            return String::new();
        };
        let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    }

    /// The value of an unlabelled series in the text exposition.
    fn value(&self, name: &str) -> f64 {
        self.scrape()
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1.0)
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
}

fn has(spans: &[Value], name: &str) -> bool {
    spans.iter().any(|s| s["name"] == name)
}

/// The span id part of a traceparent.
fn span_of(tp: &str) -> &str {
    tp.split('-').nth(2).unwrap()
}

fn trace_of(tp: &str) -> &str {
    tp.split('-').nth(1).unwrap()
}

const FLOW: &str = r#"
workflow:
  id: traced
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
    - id: ship
      god: hermes
"#;

fn dispatch(m: &Machine, god: &str, hid: &str) -> Value {
    serde_json::from_slice(
        &std::fs::read(m.path(&format!("conductor/pending/{god}/{hid}.json"))).unwrap(),
    )
    .unwrap()
}

#[test]
fn a_workflow_is_one_trace_across_cli_acts_and_a_god_writing_its_own_file() {
    let m = Machine::new("solo");
    m.write("conductor/workflows/traced.yaml", FLOW);
    let rx = Receiver::start(None);
    let serve = Serve::start(&m, &rx.url());

    let wf = "wf_traced_1";
    let hid = "hof_20261201_tr0001";
    let r = m.ok(
        &["handoff", "submit", "-"],
        Some(&json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "hephaestus",
            "step": "plan", "context": {"summary": "the secret plan", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "traced"}})),
    );
    assert_eq!(r["status"], "dispatched", "{r}");
    let d = dispatch(&m, "hephaestus", hid);
    let tp = d["traceparent"]
        .as_str()
        .expect("the dispatch carries a traceparent")
        .to_owned();
    let trace = m.state(wf)["trace_id"].as_str().unwrap().to_owned();
    assert_eq!(
        trace_of(&tp),
        trace,
        "the engine started the workflow's trace"
    );

    // A Python god marks its dispatch pending by rewriting the file itself (docs/PROTOCOL.md A.1).
    let god =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conductor/python/foreign_god.py");
    let out = Command::new(setup::python())
        .arg(god)
        .arg(&m.root)
        .args(["hephaestus", wf, hid])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for(
        "the god's own pending ack as a span",
        Duration::from_secs(30),
        || has(&rx.of(wf), "ack pending"),
    );

    // Then it acks through the CLI, passing the dispatch's traceparent on, and completes the step.
    m.ok(
        &["ack"],
        Some(
            &json!({"ack_id": "ack_20261201_tr01", "handoff_id": hid, "status": "accepted",
            "traceparent": tp}),
        ),
    );
    m.ok(
        &["ack"],
        Some(
            &json!({"ack_id": "ack_20261201_tr02", "handoff_id": hid, "status": "completed",
            "message": "the secret build"}),
        ),
    );
    wait_for("the workflow's spans", Duration::from_secs(30), || {
        let s = rx.of(wf);
        [
            "submit plan",
            "dispatch build",
            "ack accepted",
            "ack completed",
            "step build",
            "submit build",
        ]
        .iter()
        .all(|n| has(&s, n))
    });
    let spans = rx.of(wf);
    for s in &spans {
        assert_eq!(s["trace_id"], trace.as_str(), "one trace per workflow: {s}");
        assert_eq!(s["resource"]["service.name"], "pantheon");
        assert!(
            !s.to_string().contains("secret"),
            "no free text in a span: {s}"
        );
    }
    let submit = named(&spans, "submit plan");
    assert_eq!(submit["parent_span_id"], "", "the first submit is the root");
    let waiting = named(&spans, "dispatch build");
    assert_eq!(
        waiting["span_id"],
        span_of(&tp),
        "the dispatch's traceparent names its span"
    );
    assert_eq!(waiting["parent_span_id"], submit["span_id"]);
    assert!(waiting["end"].as_u64() >= waiting["start"].as_u64());
    for name in ["ack pending", "ack accepted", "ack completed"] {
        assert_eq!(
            named(&spans, name)["parent_span_id"],
            waiting["span_id"],
            "{name}"
        );
    }
    assert_eq!(
        named(&spans, "ack pending")["attributes"]["pantheon.written_by"],
        "god"
    );
    assert_eq!(
        named(&spans, "step build")["parent_span_id"],
        submit["span_id"]
    );
    assert_eq!(
        named(&spans, "submit build")["parent_span_id"],
        named(&spans, "ack completed")["span_id"],
        "the handoff a completed ack records is the ack's child"
    );
    assert_eq!(
        dispatch(
            &m,
            "hermes",
            m.state(wf)["step_history"][1]["handoff_id"]
                .as_str()
                .unwrap()
        )["traceparent"]
            .as_str()
            .map(trace_of),
        Some(trace.as_str())
    );
    assert_eq!(
        spans
            .iter()
            .filter(|s| s["name"] == "dispatch build")
            .count(),
        1
    );

    // A god that starts the trace itself: the workflow takes its trace and the submit is its child.
    let god_tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    m.ok(
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": "hof_20261201_tr0002", "workflow_id": "wf_traced_2",
            "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
            "context": {"summary": "plan two", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "traced"}, "traceparent": god_tp}),
        ),
    );
    wait_for(
        "the second workflow's submit",
        Duration::from_secs(30),
        || has(&rx.of("wf_traced_2"), "submit plan"),
    );
    let second = rx.of("wf_traced_2");
    let s2 = named(&second, "submit plan");
    assert_eq!(s2["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(s2["parent_span_id"], "b7ad6b7169203331");
    // Two workflows, two traces, and nothing dropped.
    let traces: std::collections::BTreeSet<String> = rx
        .spans()
        .iter()
        .map(|s| s["trace_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(traces.len(), 2, "{traces:?}");
    wait_for("the exported count", Duration::from_secs(10), || {
        serve.value("pantheon_trace_spans_exported_total") >= rx.spans().len() as f64
    });
    assert_eq!(serve.value("pantheon_trace_spans_dropped_total"), 0.0);

    // A malformed traceparent is refused with its pointer, on every root.
    let out = m
        .command(&["ack"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(
                json!({"ack_id": "ack_20261201_tr03", "handoff_id": "hof_20261201_tr0002",
                    "status": "accepted", "traceparent": "00-nope"})
                .to_string()
                .as_bytes(),
            )?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/traceparent"),
        "{out:?}"
    );
}

/// The names of `pid`'s threads.
fn threads(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn serve_otlp_alone_reads_the_changed_files_without_the_consoles_model() {
    let m = Machine::new("solo");
    m.write("conductor/workflows/traced.yaml", FLOW);
    let rx = Receiver::start(None);
    let child = m
        .command(&["serve", "--otlp", &rx.url()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting pantheon serve");
    let pid = child.id();
    let _serve = Guard(Some(child));
    // Its first heartbeat follows the exporter's start.
    wait_for("serve's heartbeat", Duration::from_secs(30), || {
        !m.files("conductor/supervisor").is_empty()
    });
    let names = threads(pid);
    assert!(names.iter().any(|n| n == "otlp-observe"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "pantheon-live"),
        "no live model without --metrics: {names:?}"
    );
    let wf = "wf_alone_1";
    let hid = "hof_20261201_al0001";
    m.ok(
        &["handoff", "submit", "-"],
        Some(&json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "hephaestus",
            "step": "plan", "context": {"summary": "s", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "traced"}})),
    );
    m.ok(
        &["ack"],
        Some(&json!({"ack_id": "ack_20261201_al01", "handoff_id": hid, "status": "accepted"})),
    );
    // An inbox made after serve started (a god with no inbox yet) is watched, and its god's own
    // write seen.
    let other = "hof_20261201_al0002";
    m.ok(
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": other, "workflow_id": "wf_alone_2", "from_god": "thoth",
            "to_god": "apollo", "step": "scout",
            "context": {"summary": "s", "decisions": [], "artifacts": []}}),
        ),
    );
    let god =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conductor/python/foreign_god.py");
    let out = Command::new(setup::python())
        .arg(god)
        .arg(&m.root)
        .args(["apollo", "wf_alone_2", other])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for(
        "the spans of both workflows",
        Duration::from_secs(30),
        || {
            let (a, b) = (rx.of(wf), rx.of("wf_alone_2"));
            ["submit plan", "dispatch build", "ack accepted"]
                .iter()
                .all(|n| has(&a, n))
                && has(&b, "submit scout")
                && has(&b, "ack pending")
        },
    );
    let a = rx.of(wf);
    for name in ["submit plan", "dispatch build", "ack accepted"] {
        assert_eq!(
            a.iter().filter(|s| s["name"] == name).count(),
            1,
            "{name} once: {a:#?}"
        );
    }
}

#[test]
fn a_receiver_that_is_down_costs_serve_nothing_but_counted_drops() {
    let m = Machine::new("solo");
    m.write("conductor/workflows/traced.yaml", FLOW);
    let port = free_port();
    let serve = Serve::start(&m, &format!("http://127.0.0.1:{port}"));
    for i in 0..3 {
        let hid = format!("hof_20261201_dn{i:04}");
        m.ok(
            &["handoff", "submit", "-"],
            Some(
                &json!({"handoff_id": hid, "workflow_id": format!("wf_down_{i}"),
                "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
                "context": {"summary": "s", "decisions": [], "artifacts": []},
                "routing": {"workflow_definition": "traced"}}),
            ),
        );
        m.ok(
            &["ack"],
            Some(&json!({"ack_id": format!("ack_20261201_dn{i:02}"), "handoff_id": hid, "status": "accepted"})),
        );
    }
    // submit, dispatch, ack: three spans a workflow, every one dropped and counted.
    wait_for("the drops to be counted", Duration::from_secs(30), || {
        serve.value("pantheon_trace_spans_dropped_total") >= 9.0
    });
    assert_eq!(serve.value("pantheon_trace_spans_exported_total"), 0.0);
    assert_eq!(
        serve.value("pantheon_supervisors"),
        1.0,
        "the supervisor runs on"
    );
    // The collector comes up on that port: later spans reach it, nothing is sent twice.
    let rx = Receiver::start(Some(port));
    let hid = "hof_20261201_dn0100";
    m.ok(
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": hid, "workflow_id": "wf_down_up", "from_god": "thoth",
            "to_god": "hephaestus", "step": "plan",
            "context": {"summary": "s", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "traced"}}),
        ),
    );
    wait_for(
        "spans after the collector came up",
        Duration::from_secs(30),
        || has(&rx.of("wf_down_up"), "submit plan"),
    );
    assert!(
        rx.spans()
            .iter()
            .all(|s| s["attributes"]["pantheon.workflow_id"] == "wf_down_up")
    );
}

#[test]
fn a_bridge_hop_between_two_roots_keeps_the_trace_id() {
    let server = Server::start();
    let (a, b) = two_machines(&server);
    let rx = Receiver::start(None);
    let _sa = Serve::start(&a, &rx.url());
    let _sb = Serve::start(&b, &rx.url());
    let r = a.ok(&["handoff", "submit", "-"], Some(&start_handoff(1)));
    assert_eq!(r["status"], "publishing", "{r}");
    let trace = a.state("wf_deploy_1")["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for("B's dispatch", Duration::from_secs(30), || {
        b.files("conductor/pending/hermes").len() == 1
    });
    let d: Value =
        serde_json::from_slice(&std::fs::read(&b.files("conductor/pending/hermes")[0]).unwrap())
            .unwrap();
    let wf_b = d["workflow_id"].as_str().unwrap().to_owned();
    assert_eq!(trace_of(d["traceparent"].as_str().unwrap()), trace, "{d}");
    assert_eq!(b.state(&wf_b)["trace_id"], trace.as_str());
    wait_for(
        "the publish and the peer's submit",
        Duration::from_secs(30),
        || {
            rx.of("wf_deploy_1")
                .iter()
                .any(|s| s["name"].as_str().unwrap().starts_with("publish "))
                && has(&rx.of(&wf_b), "submit notify-enterprise")
        },
    );
    let publish = rx
        .of("wf_deploy_1")
        .into_iter()
        .find(|s| s["name"].as_str().unwrap().starts_with("publish "))
        .unwrap();
    let peer = rx.of(&wf_b);
    let submit = named(&peer, "submit notify-enterprise");
    assert_eq!(publish["trace_id"], trace.as_str());
    assert_eq!(
        submit["trace_id"],
        trace.as_str(),
        "the hop keeps the trace id"
    );
    assert_eq!(
        submit["parent_span_id"], publish["span_id"],
        "the peer's submit follows the publish"
    );
    assert_eq!(publish["kind"], 4, "a producer span");
    assert_eq!(submit["resource"]["pantheon.root"], "root");
}

#[test]
fn a_redelivery_and_a_dead_letter_are_spans_of_the_dispatch() {
    let m = Machine::new("solo");
    m.write(
        "conductor/workflows/redo.yaml",
        "workflow:\n  id: redo\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, ack_wait: 1s, max_deliveries: 2}\n",
    );
    let rx = Receiver::start(None);
    let _serve = Serve::start(&m, &rx.url());
    let hid = "hof_20261201_rd0001";
    m.ok(
        &["handoff", "submit", "-"],
        Some(
            &json!({"handoff_id": hid, "workflow_id": "wf_redo", "from_god": "thoth",
            "to_god": "hephaestus", "step": "plan",
            "context": {"summary": "s", "decisions": [], "artifacts": []},
            "routing": {"workflow_definition": "redo"}}),
        ),
    );
    // Nobody acks: the supervisor redelivers once after a second, then dead-letters it.
    wait_for(
        "the redelivery and the dead letter",
        Duration::from_secs(30),
        || {
            let s = rx.of("wf_redo");
            has(&s, "redeliver build") && has(&s, "dead letter build")
        },
    );
    let spans = rx.of("wf_redo");
    let trace = m.state("wf_redo")["trace_id"].as_str().unwrap().to_owned();
    let submit = named(&spans, "submit plan");
    let dispatch_span = trace_of_span(&m, hid);
    for name in ["redeliver build", "dead letter build"] {
        let s = named(&spans, name);
        assert_eq!(s["trace_id"], trace.as_str(), "{s}");
        assert_eq!(s["parent_span_id"], dispatch_span.as_str(), "{name}: {s}");
    }
    assert_eq!(
        named(&spans, "redeliver build")["attributes"]["pantheon.delivery"],
        2
    );
    assert_eq!(
        named(&spans, "dead letter build")["attributes"]["pantheon.deliveries"],
        2
    );
    assert_eq!(submit["parent_span_id"], "");
    assert_eq!(
        spans
            .iter()
            .filter(|s| s["name"] == "redeliver build")
            .count(),
        1
    );
    // No orphan: every parent named is a span exported (the never-acked dispatch's own span is
    // ended by its dead letter), and the dispatch's parent is its submit.
    wait_for("the dispatch's span", Duration::from_secs(10), || {
        rx.of("wf_redo")
            .iter()
            .any(|s| s["span_id"] == dispatch_span.as_str())
    });
    let spans = rx.of("wf_redo");
    let ids: std::collections::HashSet<&str> =
        spans.iter().filter_map(|s| s["span_id"].as_str()).collect();
    for s in &spans {
        let parent = s["parent_span_id"].as_str().unwrap_or_default();
        assert!(
            parent.is_empty() || ids.contains(parent),
            "{} names parent {parent}, which is not exported: {spans:#?}",
            s["name"]
        );
    }
    let d = spans
        .iter()
        .find(|s| s["span_id"] == dispatch_span.as_str())
        .unwrap();
    assert_eq!(d["name"], "dispatch build", "{d}");
    assert_eq!(d["parent_span_id"], submit["span_id"], "{d}");
    assert_eq!(
        spans
            .iter()
            .filter(|s| s["name"] == "dispatch build")
            .count(),
        1
    );
}

/// The span id the dispatch of `hid` named in its traceparent (read from the dead letter).
fn trace_of_span(m: &Machine, hid: &str) -> String {
    let d: Value = serde_json::from_slice(
        &std::fs::read(m.path(&format!("conductor/dead/hephaestus/{hid}.json"))).unwrap(),
    )
    .unwrap();
    span_of(d["traceparent"].as_str().unwrap()).to_owned()
}
