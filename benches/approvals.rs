//! Approval links (docs/PROTOCOL.md §2.15): the tap to the dispatch in the god's inbox, beside the
//! operator's own approve measured in the same run. Prints `BENCH {json}` lines
//! (scripts/bench-report.sh collects them).
//!
//! - `approval_link_http_tap_p50` / `_p99`: a `POST /a/TOKEN` (the page's form) on the real
//!   listener (`pantheon::testing::approvals::routes` on the one HTTP stack, loopback), from the request sent
//!   to the answer read; the answer is written after the dispatch is in the god's inbox, which is
//!   checked after each tap. Goal: p99 < 50 ms. Baseline: `Conductor::approve` (what `pantheon
//!   approve HOF` calls), in process, on the same kind of held item.
//! - `approval_link_relayed_redeem_p99`: the redeem a NATS message or a dropped file goes through
//!   (`pantheon::testing::approvals::redeem_relayed`), in process, without the transport.
//! - `approval_link_nats_tap_p50` / `_p99`: a token published as a request on
//!   `pantheon.NAME.approve` of a local `nats-server` (`.venv/bin/nats-server`, from
//!   scripts/test-setup.sh, else one on PATH) and taken by the real bridge process (`pantheon bridge
//!   --approvals`, this build's binary), from the request sent to the receipt read; the bridge
//!   replies after the dispatch is in the god's inbox, which is checked after each tap. The
//!   publisher is the async-nats client in this bench, standing in for a peer or a phone relay (it
//!   only publishes and reads the reply; the side measured is the bridge). Goal: p99 < 100 ms.
//!   Baseline: the same `Conductor::approve`.
//!
//! `cargo bench --bench approvals` (`APPROVALS_BENCH_N`, default 300 taps of each kind).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pantheon::engine::{
    Actor, ApprovalChannel, Conductor, HandoffId, LinkKey, LinkRequest, Origin, Root,
};
use serde_json::json;

mod common;
#[path = "common/nats.rs"]
mod nats_server;
use common::Figure;
use nats_server::{Kill, free_port, nats_server_bin};

const GATE: &str = "workflow:\n  id: gate\n  steps:\n    - {id: plan, god: thoth}\n    - {id: build, god: hephaestus, approval_required: true}\n";

fn root(dir: &Path, key: &LinkKey) -> Conductor {
    let c = Conductor::new(Root::at(dir));
    c.init().unwrap();
    std::fs::write(dir.join("conductor/workflows/gate.yaml"), GATE).unwrap();
    for e in std::fs::read_dir(dir.join("conductor/rules")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    Conductor::new(Root::at(dir))
        .with_origin(Origin::new(None, "bench"))
        .with_link_key(key.clone())
}

/// Holds a fresh dispatch (the gate's build step); its handoff id.
fn hold(c: &Conductor, tag: &str, i: usize) -> HandoffId {
    let hid = format!("hof_20261206_{tag}{i:05}");
    c.submit_handoff(
        &json!({"handoff_id": hid, "workflow_id": format!("wf_{tag}_{i}"),
        "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
        "routing": {"workflow_definition": "gate"},
        "context": {"summary": "pay the supplier", "decisions": [], "artifacts": []}}),
    )
    .unwrap();
    HandoffId::parse(&hid).unwrap()
}

fn mint(c: &Conductor, hid: &HandoffId) -> pantheon::engine::MintedLink {
    c.mint_link(&LinkRequest {
        handoff_id: hid.clone(),
        ttl: Duration::from_secs(900),
        channel: ApprovalChannel::Cli,
    })
    .unwrap()
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// One form POST over a fresh connection; the status code.
fn post(addr: std::net::SocketAddr, path: &str, form: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

const PANTHEON: &str = env!("CARGO_BIN_EXE_pantheon");

/// The NATS tap: a local nats-server, the real bridge with `--approvals` on `c`'s root, and `n`
/// tokens published as requests by an async-nats client; each tap's milliseconds.
fn nats_taps(c: &Conductor, key_file: &Path, n: usize) -> Vec<f64> {
    let dir = c.root().dir.clone();
    let js = tempfile::tempdir().unwrap();
    let port = free_port();
    let _server = Kill(
        Command::new(nats_server_bin())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(js.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nats-server"),
    );
    let url = format!("nats://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nats-server did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _bridge = Kill(
        Command::new(PANTHEON)
            .arg("--root")
            .arg(&dir)
            .args(["bridge", "--nats", &url, "--name", "bench", "--approvals"])
            .env("PANTHEON_LINK_KEY_FILE", key_file)
            .env_remove("PANTHEON_ROOT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting pantheon bridge"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let subject = "pantheon.bench.approve";
    rt.block_on(async {
        let client = async_nats::connect(&url).await.unwrap();
        // Until the bridge has subscribed: a message it answers (an unknown token's receipt).
        let start = Instant::now();
        loop {
            let body = json!({"token": "x".repeat(43)}).to_string();
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_secs(2), client.request(subject, body.into()))
                    .await
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the bridge never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut taps = Vec::with_capacity(n);
        for i in 0..n {
            let hid = hold(c, "na", i);
            let m = mint(c, &hid);
            let body = json!({"token": m.approve_token, "handoff": hid.as_str(),
                "digest": m.content_sha256})
            .to_string();
            let t = Instant::now();
            let reply = client.request(subject, body.into()).await.unwrap();
            taps.push(t.elapsed().as_secs_f64() * 1000.0);
            let r: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
            assert_eq!(r["status"], "approved", "{r:#}");
            assert!(
                dir.join(format!("conductor/pending/hephaestus/{hid}.json"))
                    .exists()
            );
        }
        taps
    })
}

fn main() {
    let n: usize = std::env::var("APPROVALS_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    // The operator's key in a file outside the root: the bridge process reads the same one.
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("link-key");
    let key = pantheon::testing::approvals::link_key_at(&key_file, &Root::at(dir.path())).unwrap();
    let c = root(dir.path(), &key);
    let inbox = |hid: &HandoffId| {
        dir.path()
            .join(format!("conductor/pending/hephaestus/{hid}.json"))
    };
    // Baseline: the operator's approve, in process.
    let mut base = Vec::with_capacity(n);
    for i in 0..n {
        let hid = hold(&c, "ba", i);
        let t = Instant::now();
        c.approve(&hid, Actor::Operator).unwrap();
        base.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(inbox(&hid).exists());
    }
    // The listener.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = pantheon::testing::http::Server::start(
        "approvals-bench",
        listener,
        pantheon::testing::approvals::routes(
            Root::at(dir.path()),
            pantheon::testing::approvals::Approver::Link,
            key.clone(),
        ),
        pantheon::testing::http::Limits::default(),
    )
    .unwrap();
    let addr = server.local_addr();
    let mut taps = Vec::with_capacity(n);
    for i in 0..n {
        let hid = hold(&c, "ht", i);
        let m = mint(&c, &hid);
        let form = format!("handoff={hid}&digest={}", m.content_sha256);
        let t = Instant::now();
        let code = post(addr, &format!("/a/{}", m.approve_token), &form);
        taps.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(code, 200);
        assert!(inbox(&hid).exists());
    }
    server.shutdown();
    // The relayed redeem (NATS, file drop) without its transport.
    let mut relayed = Vec::with_capacity(n);
    for i in 0..n {
        let hid = hold(&c, "re", i);
        let m = mint(&c, &hid);
        let fields = [("token".to_owned(), m.approve_token.clone())]
            .into_iter()
            .collect();
        let t = Instant::now();
        let r = pantheon::testing::approvals::redeem_relayed(
            &Root::at(dir.path()),
            &key,
            ApprovalChannel::Nats,
            &fields,
            None,
        )
        .unwrap();
        relayed.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(r.applied(), "{r:?}");
    }
    // The NATS tap on a fresh root (as the HTTP tap began on one with no link records): a redeem
    // reads every link record of the root, so a root holding the 1,200 records of the taps above
    // would weigh on it.
    let nats_dir = tempfile::tempdir().unwrap();
    let mut nats = nats_taps(&root(nats_dir.path(), &key), &key_file, n);
    let (b50, b99) = (percentile(&mut base, 0.5), percentile(&mut base, 0.99));
    let (n50, n99) = (percentile(&mut nats, 0.5), percentile(&mut nats, 0.99));
    let (h50, h99) = (percentile(&mut taps, 0.5), percentile(&mut taps, 0.99));
    let (r50, r99) = (
        percentile(&mut relayed, 0.5),
        percentile(&mut relayed, 0.99),
    );
    let note = format!("{n} taps each; a fresh held item per tap on one root");
    Figure {
        name: "approval_link_http_tap_p50",
        issue: 46,
        goal: "-",
        median: h50,
        unit: "ms",
        baseline: Some((b50, "Conductor::approve p50")),
        met: Some(true),
        note: &note,
    }
    .print();
    Figure {
        name: "approval_link_http_tap_p99",
        issue: 46,
        goal: "< 50 ms",
        median: h99,
        unit: "ms",
        baseline: Some((b99, "Conductor::approve p99")),
        met: Some(h99 < 50.0),
        note: &note,
    }
    .print();
    Figure {
        name: "approval_link_relayed_redeem_p99",
        issue: 46,
        goal: "-",
        median: r99,
        unit: "ms",
        baseline: Some((b99, "Conductor::approve p99")),
        met: Some(true),
        note: &format!("{note}; p50 {r50:.3} ms"),
    }
    .print();
    let nats_note = format!(
        "{n} taps; a fresh held item per tap on a fresh root; a local nats-server, the real bridge \
         process (`bridge --approvals`); the publisher is the bench's async-nats client standing in \
         for a peer or a relay"
    );
    Figure {
        name: "approval_link_nats_tap_p50",
        issue: 46,
        goal: "-",
        median: n50,
        unit: "ms",
        baseline: Some((b50, "Conductor::approve p50")),
        met: Some(true),
        note: &nats_note,
    }
    .print();
    Figure {
        name: "approval_link_nats_tap_p99",
        issue: 46,
        goal: "< 100 ms",
        median: n99,
        unit: "ms",
        baseline: Some((b99, "Conductor::approve p99")),
        met: Some(n99 < 100.0),
        note: &nats_note,
    }
    .print();
}
