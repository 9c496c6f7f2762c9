//! The bridge next to the origin's pantheons (docs/NATS.md "Peers"): core-NATS peers get each
//! request once, one stuck subject never blocks the rest, the origin's envelope both ways, an inbound
//! request ends at its reply, replies only to a peer's reply subject, idle stays idle. The origin's
//! NATS code is stood in for by a small `nats-py` client (tests/nats/python/client.py), as its
//! listener subscribes and publishes: core NATS.

use super::*;

/// The Python of the test virtualenv (`$PANTHEON_TEST_PYTHON`, else `.venv/bin/python`, which
/// `scripts/test-setup.sh` creates with `nats-py`); a setup that fails is a failure with the fix.
pub(super) fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PANTHEON_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    static SETUP: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    SETUP
        .get_or_init(|| {
            let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
            let out = Command::new("bash")
                .arg(repo.join("scripts/test-setup.sh"))
                .output()
                .map_err(|e| format!("cannot run scripts/test-setup.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "scripts/test-setup.sh failed (it installs nats-py into .venv; or set \
                     PANTHEON_TEST_PYTHON to a python that has nats-py):\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(repo.join(".venv/bin/python"))
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn client_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nats/python/client.py")
}

/// A core-NATS subscriber (the origin's listener's way) writing each message it gets to a file.
pub(super) struct Listener {
    _proc: Guard,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Listener {
    pub(super) fn start(url: &str, subject: &str) -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("received.jsonl");
        let mut child = Command::new(python())
            .arg(client_py())
            .args([url, "listen", subject])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the nats-py listener");
        let stdout = child.stdout.take().unwrap();
        let guard = Guard(Some(child));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let ready = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        assert_eq!(ready.trim(), "ready", "the nats-py listener did not start");
        Self {
            _proc: guard,
            out,
            _dir: dir,
        }
    }

    pub(super) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_owned())))
            .collect()
    }
}

/// Publishes each message with core NATS (`nc.publish`, as the origin does).
pub(super) fn core_publish(url: &str, subject: &str, msgs: &[Value]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("msgs.jsonl");
    let text: String = msgs.iter().map(|m| format!("{m}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let out = Command::new(python())
        .arg(client_py())
        .args([url, "publish", subject])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nats-py publish failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The number of messages a JetStream stream holds (`None`: no such stream yet).
pub(super) fn try_stream_msgs(url: &str, stream: &str) -> Option<u64> {
    let out = Command::new(python())
        .arg(client_py())
        .args([url, "stream-msgs", stream])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    v["messages"].as_u64()
}

pub(super) fn stream_msgs(url: &str, stream: &str) -> u64 {
    try_stream_msgs(url, stream).expect("the stream exists")
}

/// Waits until the bridge of `m` has made its stream: a core publish before that is stored nowhere.
pub(super) fn wait_stream(url: &str, m: &Machine) {
    wait_for("the bridge's stream", Duration::from_secs(30), || {
        try_stream_msgs(url, &format!("PANTHEON_{}", m.name)).is_some()
    });
}

pub(super) fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

pub(super) fn dead_letters(m: &Machine) -> Vec<Value> {
    m.files("conductor/bridge/dead")
        .iter()
        .map(|p| read_json(p))
        .collect()
}

pub(super) fn assert_valid(m: &Machine) {
    let out = m.command(&["validate"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 0, "{}: {report:#}", m.name);
}

/// The deploy definition of `DEPLOY`, publishing to `to` instead of tallon, under id `deploy-{to}`.
pub(super) fn deploy_to(to: &str) -> String {
    DEPLOY
        .replace("deploy-across", &format!("deploy-{to}"))
        .replace(
            "subspace.konan.outgoing.tallon",
            &format!("subspace.konan.outgoing.{to}"),
        )
}

pub(super) fn start_to(to: &str, n: usize) -> Value {
    let mut h = start_handoff(n);
    h["handoff_id"] = json!(format!("hof_20261201_{}{n:05}", &to[..1]));
    h["workflow_id"] = json!(format!("wf_{to}_{n}"));
    h["routing"]["workflow_definition"] = json!(format!("deploy-{to}"));
    h
}

pub(super) fn origin_msg(id: &str, source: &str, target: &str, context: Value) -> Value {
    json!({
        "id": id, "type": "deploy_request", "source": source, "target": target,
        "timestamp": "2026-12-01T10:00:00Z", "workflow_id": "wf_8a0b5f28",
        "step_id": "notify-enterprise", "context": context,
    })
}

fn ack(m: &Machine, n: usize, hid: &str, status: &str, message: &str) -> Value {
    m.ok(
        &["ack"],
        Some(
            &json!({"ack_id": format!("ack_20261201_{n:05}"), "handoff_id": hid,
                     "status": status, "message": message}),
        ),
    )
}

#[test]
fn a_core_peer_gets_each_request_once_across_a_sigkill_while_a_jetstream_peer_keeps_its_guarantees()
{
    const N: usize = 10;
    let server = Server::start();
    // tallon is the origin: a core-NATS listener on its subject, and no stream stores that subject.
    let listener = Listener::start(&server.url(), "subspace.konan.outgoing.tallon");
    let mut v = Machine::new("vulcan");
    v.start_bridge(
        &server.url(),
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
    a.start_bridge(
        &server.url(),
        &["--peer", "tallon:core:origin", "--peer", "vulcan"],
    );
    for n in 0..N {
        a.ok(&["handoff", "submit", "-"], Some(&start_to("tallon", n)));
        a.ok(&["handoff", "submit", "-"], Some(&start_to("vulcan", n)));
        if n == N / 2 {
            std::thread::sleep(Duration::from_millis(150));
            a.restart_bridge(); // SIGKILL konan's bridge mid-traffic, start it again
        }
    }
    wait_for(
        "every request at the listener",
        Duration::from_secs(60),
        || {
            let ids: std::collections::BTreeSet<String> = listener
                .received()
                .iter()
                .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
                .collect();
            ids.len() == N
        },
    );
    wait_for("vulcan's dispatches", Duration::from_secs(60), || {
        inbox(&v).len() == N
    });
    // Time for any retry to show up (a retry loop repeats every second or so).
    std::thread::sleep(Duration::from_secs(3));
    let got = listener.received();
    let mut per_id: std::collections::BTreeMap<String, usize> = Default::default();
    for m in &got {
        assert_eq!(m["type"], "request", "{m}");
        assert_eq!(m["source"], "konan", "{m}");
        assert_eq!(m["target"], "tallon", "{m}");
        assert!(
            m["context"]["payload"]["feature_summary"]
                .as_str()
                .unwrap()
                .starts_with("feature "),
            "{m}"
        );
        *per_id
            .entry(m["id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(per_id.len(), N, "{got:#?}");
    // Once each; the one record in flight at the kill may have gone out once more, with its id.
    let repeats: usize = per_id.values().map(|c| c - 1).sum();
    assert!(
        repeats <= 1 && per_id.values().all(|c| *c <= 2),
        "core requests repeated: {per_id:?}"
    );
    let status = a.ok(&["bridge", "status"], None);
    assert_eq!(status["outbox_pending"], 0, "{status}");
    assert!(status["status"].get("stuck").is_none(), "{status}");
    assert_eq!(
        status["status"]["peers"][0],
        json!({"name": "tallon", "transport": "core", "envelope": "origin",
               "reply_subjects": ["subspace.konan.outgoing.tallon"]}),
        "{status}"
    );
    // The JetStream peer: every request once, nothing dead.
    let ids: std::collections::BTreeSet<String> = inbox(&v)
        .iter()
        .map(|d| d["handoff_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), N);
    assert!(dead_letters(&v).is_empty(), "{:?}", dead_letters(&v));
    assert_valid(&a);
}

#[test]
fn a_record_no_stream_stores_waits_on_its_own_while_the_rest_go_out() {
    const N: usize = 20;
    let server = Server::start();
    let mut b = Machine::new("tallon");
    b.start_bridge(
        &server.url(),
        &["--peer", "konan", "--subject", "subspace.*.outgoing.tallon"],
    );
    let mut a = Machine::new("konan");
    a.write("conductor/workflows/deploy-across.yaml", DEPLOY);
    // The origin's morning briefing: a subject no stream holds and no peer is named by.
    a.write(
        "conductor/workflows/deploy-inbox.yaml",
        &DEPLOY
            .replace("deploy-across", "deploy-inbox")
            .replace("subspace.konan.outgoing.tallon", "subspace.konan.inbox"),
    );
    let mut stuck = start_handoff(900);
    stuck["routing"]["workflow_definition"] = json!("deploy-inbox");
    a.ok(&["handoff", "submit", "-"], Some(&stuck));
    a.start_bridge(&server.url(), &["--peer", "tallon"]);
    for n in 0..N {
        a.ok(&["handoff", "submit", "-"], Some(&start_handoff(n)));
    }
    wait_for("all 20 at tallon", Duration::from_secs(60), || {
        inbox(&b).len() == N
    });
    let waiting = a.files("conductor/outbox");
    assert_eq!(waiting.len(), 1, "the stuck record waits: {waiting:?}");
    let rec = read_json(&waiting[0]);
    assert_eq!(rec["subject"], "subspace.konan.inbox");
    wait_for(
        "the status to name the stuck record",
        Duration::from_secs(20),
        || {
            let s = a.ok(&["bridge", "status"], None);
            s["status"]["stuck"].as_array().is_some_and(|v| {
                v.iter().any(|r| {
                    r["outbox_id"] == rec["outbox_id"]
                        && r["hint"].as_str().is_some_and(|h| {
                            h.contains("no stream holds subject subspace.konan.inbox")
                        })
                })
            })
        },
    );
    // Past the stated limit it is dead-lettered with its reason, and the outbox is empty.
    let mut args: Vec<String> = a.bridge_args.clone();
    args.extend(["--give-up-after".into(), "2s".into()]);
    a.bridge_args = args;
    a.restart_bridge();
    wait_for(
        "the stuck record's dead letter",
        Duration::from_secs(30),
        || a.files("conductor/outbox").is_empty(),
    );
    let dead = dead_letters(&a);
    assert_eq!(dead.len(), 1, "{dead:?}");
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("gave up after") && reason.contains("no stream holds subject"),
        "{reason}"
    );
}

#[test]
fn origin_envelope_messages_become_dispatches_and_get_replies_in_it() {
    let server = Server::start();
    let replies = Listener::start(&server.url(), "subspace.tallon.outgoing.konan");
    let mut b = Machine::new("tallon");
    b.start_bridge(
        &server.url(),
        &[
            "--peer",
            "konan:core:origin",
            "--peer",
            "vulcan",
            "--subject",
            "subspace.*.outgoing.tallon",
        ],
    );
    wait_stream(&server.url(), &b);
    let ctx = json!({"summary": "Deploy request: feature 7", "feature_summary": "feature 7",
                     "ticket": "T-7"});
    core_publish(
        &server.url(),
        "subspace.konan.outgoing.tallon",
        &[
            origin_msg("7f3c-0001", "konan", "tallon", ctx.clone()),
            origin_msg("7f3c-0002", "rogue", "tallon", ctx.clone()),
            origin_msg("7f3c-0003", "vulcan", "tallon", ctx.clone()),
            json!({"hello": "world"}),
        ],
    );
    wait_for(
        "one dispatch and three dead letters",
        Duration::from_secs(30),
        || inbox(&b).len() == 1 && dead_letters(&b).len() == 3,
    );
    let reasons: Vec<String> = dead_letters(&b)
        .iter()
        .map(|d| d["reason"].as_str().unwrap().to_owned())
        .collect();
    let has = |s: &str| reasons.iter().any(|r| r.contains(s));
    assert!(has("--peer rogue:core:origin"), "{reasons:#?}");
    assert!(
        has("peer vulcan is not declared with the origin's envelope")
            && has("--peer vulcan:core:origin"),
        "{reasons:#?}"
    );
    assert!(has("not a pantheon_bridge message"), "{reasons:#?}");
    assert!(
        !reasons.iter().any(|r| r.contains("version 0")),
        "{reasons:#?}"
    );
    let d = &inbox(&b)[0];
    assert_eq!(d["from_god"], "konan");
    assert_eq!(d["step"], "notify-enterprise");
    let wf = d["workflow_id"].as_str().unwrap().to_owned();
    let handoff = read_json(&b.path(&format!("shared/handoffs/{wf}/notify-enterprise.json")));
    assert_eq!(
        handoff["context"]["payload"]["feature_summary"],
        "feature 7"
    );
    assert_eq!(handoff["context"]["summary"], "Deploy request: feature 7");
    ack(
        &b,
        1,
        d["handoff_id"].as_str().unwrap(),
        "completed",
        "deployed on tallon",
    );
    wait_for(
        "the reply at konan's listener",
        Duration::from_secs(30),
        || !replies.received().is_empty(),
    );
    std::thread::sleep(Duration::from_secs(1));
    let got = replies.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    let r = &got[0];
    assert_eq!(r["type"], "reply", "{r}");
    assert_eq!(r["source"], "tallon");
    assert_eq!(r["target"], "konan");
    assert_eq!(r["workflow_id"], "wf_8a0b5f28");
    assert_eq!(r["context"]["in_reply_to"], "7f3c-0001");
    assert_eq!(r["context"]["status"], "completed");
    assert_eq!(r["context"]["summary"], "deployed on tallon");
    assert_eq!(b.state(&wf)["status"], "completed");
    assert!(!b.path("conductor/pending/konan").exists());
}

#[test]
fn a_reply_to_the_jetstream_api_is_refused_at_the_door() {
    let server = Server::start();
    let mut b = Machine::new("tallon");
    b.ok(&["bus", "--track", "shared", "init"], None);
    b.start_bridge(
        &server.url(),
        &[
            "--peer",
            "konan",
            "--subject",
            "subspace.*.outgoing.tallon",
            "--track",
            "shared",
        ],
    );
    b.post_numbered("shared", "wb", 0, 3);
    wait_for(
        "the track's stream to hold 3 lines",
        Duration::from_secs(30),
        || {
            b.path("conductor/bridge/tracks/shared.json").exists()
                && stream_msgs(&server.url(), "PANTHEON_TRACK_shared") == 3
        },
    );
    wait_stream(&server.url(), &b);
    let request = |id: &str, reply_to: &str| {
        json!({"pantheon_bridge": 1, "kind": "request", "id": id, "from_pantheon": "konan",
               "workflow_id": "wf_attack", "step": "notify", "message": "please ack",
               "reply_to": reply_to})
    };
    core_publish(
        &server.url(),
        "subspace.konan.outgoing.tallon",
        &[
            request("ob_attack1", "$JS.API.STREAM.PURGE.PANTHEON_TRACK_shared"),
            request("ob_attack2", "$KV.pantheon_locks_shared.x"),
            request("ob_attack3", "pantheon.tallon.in.reply"),
            request("ob_fine", "pantheon.konan.in.reply"),
        ],
    );
    wait_for(
        "three dead letters and one dispatch",
        Duration::from_secs(30),
        || dead_letters(&b).len() == 3 && inbox(&b).len() == 1,
    );
    for d in dead_letters(&b) {
        let r = d["reason"].as_str().unwrap();
        assert!(r.contains("is not a reply subject of peer konan"), "{r}");
    }
    // Whatever a god acks, nothing reaches the server's API.
    let mut acked = Default::default();
    ack_all(&b, &mut acked);
    // The legitimate reply is written for konan's reply subject (konan runs no bridge here, so it
    // waits in the outbox for a stream).
    wait_for("the legitimate reply", Duration::from_secs(30), || {
        !b.files("conductor/outbox").is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(stream_msgs(&server.url(), "PANTHEON_TRACK_shared"), 3);
    let replies: Vec<Value> = b
        .files("conductor/outbox")
        .iter()
        .chain(b.files("conductor/outbox/sent").iter())
        .map(|p| read_json(p))
        .collect();
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0]["subject"], "pantheon.konan.in.reply");
    assert_eq!(replies[0]["in_reply_to"], "ob_fine");
}

/// A god may ack the instant its dispatch appears: the mark that routes its completion back to the
/// peer is in the state the submit commits, before the dispatch is written (the bridge is killed
/// right after writing the dispatch, at the submit's crash point, and the state already has it).
#[test]
fn an_inbound_requests_mark_is_committed_before_its_dispatch_is_seen() {
    let server = Server::start();
    let mut a = Machine::new("konan");
    let mut b = Machine::new("tallon");
    a.write("conductor/workflows/deploy-across.yaml", DEPLOY);
    b.bridge_env = vec![(
        "PANTHEON_TEST_CRASH_AT".into(),
        "submit:after-dispatch".into(),
    )];
    b.start_bridge(
        &server.url(),
        &[
            "--peer",
            "konan",
            "--subject",
            "subspace.*.outgoing.tallon",
            "--god",
            "hermes",
        ],
    );
    a.start_bridge(&server.url(), &["--peer", "tallon"]);
    a.ok(&["handoff", "submit", "-"], Some(&start_handoff(1)));
    wait_for("B's dispatch", Duration::from_secs(30), || {
        inbox(&b).len() == 1
    });
    let mut bridge = b.bridge.0.take().unwrap();
    let status = bridge.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "killed at its crash point: {status:?}"
    );
    let wf = inbox(&b)[0]["workflow_id"].as_str().unwrap().to_owned();
    let st = b.state(&wf);
    assert_eq!(st["bridge_inbound"]["peer"], "konan", "{st}");
}

#[test]
fn the_deploy_round_trip_ends_at_the_reply_when_the_receiver_completes() {
    let server = Server::start();
    let (a, b) = two_machines(&server);
    a.ok(&["handoff", "submit", "-"], Some(&start_handoff(1)));
    wait_for("B's dispatch", Duration::from_secs(30), || {
        inbox(&b).len() == 1
    });
    let d = inbox(&b)[0].clone();
    let bwf = d["workflow_id"].as_str().unwrap().to_owned();
    ack(
        &b,
        1,
        d["handoff_id"].as_str().unwrap(),
        "completed",
        "deployed on tallon",
    );
    wait_for("A's await-ack to complete", Duration::from_secs(30), || {
        a.state("wf_deploy_1")["current_step"] == "announce"
    });
    assert_eq!(b.state(&bwf)["status"], "completed", "{}", b.state(&bwf));
    assert!(
        !b.path("conductor/pending/konan").exists(),
        "dispatched to a god named after the peer"
    );
    let pending = b.ok(&["pending"], None).to_string();
    assert!(!pending.contains("konan"), "{pending}");
    // A's workflow runs to its end (its dispatch is written just after the state that names it).
    wait_for("A's announce dispatch", Duration::from_secs(10), || {
        inbox(&a).len() == 1
    });
    let announce = inbox(&a);
    ack(
        &a,
        2,
        announce[0]["handoff_id"].as_str().unwrap(),
        "completed",
        "announced",
    );
    assert_eq!(a.state("wf_deploy_1")["status"], "completed");
    std::thread::sleep(Duration::from_millis(500));
    let replies: Vec<Value> = b
        .files("conductor/outbox/sent")
        .iter()
        .map(|p| read_json(p))
        .filter(|r| r["kind"] == "reply")
        .collect();
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_valid(&a);
    assert_valid(&b);
}

/// CPU time (user + system) of a process so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Read system calls a process has made so far (`syscr` of /proc/PID/io): unlike CPU time, this does not
/// grow when the machine is loaded, so it tells work done from time waited.
fn read_calls(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn idle_stays_idle_with_hundreds_of_unanswered_requests() {
    const N: usize = 300;
    let server = Server::start();
    let mut b = Machine::new("tallon");
    b.start_bridge(
        &server.url(),
        &[
            "--peer",
            "konan:core:origin",
            "--subject",
            "subspace.*.outgoing.tallon",
        ],
    );
    let msgs: Vec<Value> = (0..N)
        .map(|n| origin_msg(&format!("idle-{n:04}"), "konan", "tallon", json!({"n": n})))
        .collect();
    wait_stream(&server.url(), &b);
    core_publish(&server.url(), "subspace.konan.outgoing.tallon", &msgs);
    wait_for("every request dispatched", Duration::from_secs(120), || {
        b.files("conductor/pending/hermes").len() == N
    });
    std::thread::sleep(Duration::from_secs(2));
    let pid = b.bridge.0.as_ref().unwrap().id();
    let (t0, c0, r0) = (Instant::now(), cpu_ticks(pid), read_calls(pid));
    std::thread::sleep(Duration::from_secs(4));
    let secs = t0.elapsed().as_secs_f64();
    let (ticks, reads) = (cpu_ticks(pid) - c0, read_calls(pid) - r0);
    let hz = 100.0; // USER_HZ on Linux
    let share = ticks as f64 / hz / secs;
    let reads_per_s = reads as f64 / secs;
    // Idle is idle: the bridge polls at 50 ms here (20 polls a second). Before it looked only at changed
    // workflows it read every waiting request's ledger entry and state on every poll: at least 2 x 300 reads
    // a poll, 12,000 a second. What is left must not depend on how many requests wait: fewer reads a second
    // than one per waiting request. CPU time is reported too, with a bound generous enough for a machine
    // loaded by the other tests (the read count is the figure the load does not change).
    assert!(
        reads_per_s < N as f64,
        "the idle bridge made {reads_per_s:.0} read calls a second with {N} unanswered requests \
         ({:.1}% of a core)",
        share * 100.0
    );
    assert!(
        share < 0.15,
        "the idle bridge used {:.1}% of a core with {N} unanswered requests ({reads_per_s:.0} reads/s)",
        share * 100.0
    );
    eprintln!(
        "idle bridge, {N} waiting: {reads_per_s:.0} read calls/s, {:.2}% of a core",
        share * 100.0
    );
}

#[test]
fn a_track_line_from_an_unlisted_pantheon_is_not_appended() {
    let server = Server::start();
    let mut b = Machine::new("tallon");
    b.ok(&["bus", "--track", "shared", "init"], None);
    b.start_bridge(&server.url(), &["--track", "shared", "--peer", "konan"]);
    b.post_numbered("shared", "wb", 0, 1);
    wait_for("the track's stream", Duration::from_secs(30), || {
        try_stream_msgs(&server.url(), "PANTHEON_TRACK_shared") == Some(1)
    });
    let line = |id: &str| {
        json!({"id": id, "type": "PROGRESS", "source": "worker-9",
               "timestamp": "2026-12-01T10:00:00Z", "payload": {"task_id": "1"}})
    };
    core_publish(
        &server.url(),
        "pantheon.track.shared.rogue",
        &[line("msg_rogue_1")],
    );
    core_publish(
        &server.url(),
        "pantheon.track.shared.konan",
        &[line("msg_konan_1")],
    );
    let queue = b.path("conductor/tracks/shared/.message-bus/queue.jsonl");
    wait_for("konan's line", Duration::from_secs(30), || {
        std::fs::read_to_string(&queue)
            .unwrap_or_default()
            .contains("msg_konan_1")
    });
    wait_for(
        "the rogue line's dead letter",
        Duration::from_secs(30),
        || dead_letters(&b).len() == 1,
    );
    let text = std::fs::read_to_string(&queue).unwrap();
    assert!(!text.contains("msg_rogue_1"), "{text}");
    let reason = dead_letters(&b)[0]["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.contains("\"rogue\" is not an allowed peer"),
        "{reason}"
    );
}

#[test]
fn a_token_to_a_server_without_authentication_warns_or_is_refused_and_errors_clear_on_reconnect() {
    let mut server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token").unwrap();
    let mut strict = Machine::new("strict");
    strict.start_bridge(
        &server.url(),
        &["--token-file", token.to_str().unwrap(), "--require-auth"],
    );
    let mut c = strict.bridge.0.take().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(st) = c.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "--require-auth did not stop the bridge"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert!(
        strict.log_tail().contains("asks for no authentication"),
        "{}",
        strict.log_tail()
    );
    let mut lax = Machine::new("lax");
    lax.start_bridge(&server.url(), &["--token-file", token.to_str().unwrap()]);
    let last_error = |m: &Machine| {
        m.ok(&["bridge", "status"], None)["status"]["last_error"]
            .as_str()
            .map(str::to_owned)
    };
    wait_for("the warning in the status", Duration::from_secs(30), || {
        last_error(&lax).is_some_and(|e| e.contains("asks for no authentication"))
    });
    // An error met while the server is away is cleared by the next successful connect.
    let mut plain = Machine::new("plain");
    plain.start_bridge(&server.url(), &[]);
    wait_for("plain connected", Duration::from_secs(30), || {
        plain.ok(&["bridge", "status"], None)["status"]["connected"] == true
    });
    server.proc.kill();
    wait_for(
        "an error while the server is away",
        Duration::from_secs(30),
        || last_error(&plain).is_some(),
    );
    server.restart();
    let start = Instant::now();
    loop {
        let s = plain.ok(&["bridge", "status"], None);
        if s["status"]["connected"] == true && s["status"]["last_error"].is_null() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the error was not cleared on reconnect: {s}\n{}",
            plain.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The per-user publish permissions docs/NATS.md gives as the example that backs a sender's name.
fn permissions(me: &str, peer: &str) -> String {
    format!(
        r#"{{ publish: {{ allow: ["pantheon.track.*.{me}", "subspace.{me}.>", "pantheon.{peer}.in.reply",
            "$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.CREATE.>",
            "$JS.API.CONSUMER.>", "$JS.API.STREAM.MSG.GET.>", "$JS.API.DIRECT.GET.>",
            "$JS.ACK.>", "$JS.FC.>", "$KV.*.{me}.>", "$KV.pantheon_locks_*.>", "_INBOX.>"] }},
            subscribe: {{ allow: [">"] }} }}"#
    )
}

#[test]
fn per_user_publish_permissions_make_a_senders_name_more_than_a_claim() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("server.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\naccounts {{\n  PANTHEON {{\n    jetstream: enabled\n    users: [\n      {{ user: konan, password: pk, permissions: {} }}\n      {{ user: tallon, password: pt, permissions: {} }}\n    ]\n  }}\n}}\n",
            dir.path().join("js"),
            permissions("konan", "tallon"),
            permissions("tallon", "konan"),
        ),
    )
    .unwrap();
    let _server = Guard(Some(
        Command::new(nats_server_bin())
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    wait_for("nats-server to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = |user: &str, pass: &str| format!("nats://{user}:{pass}@127.0.0.1:{port}");
    let mut a = Machine::new("konan");
    let mut b = Machine::new("tallon");
    for m in [&a, &b] {
        m.ok(&["bus", "--track", "shared", "init"], None);
    }
    a.start_bridge(
        &url("konan", "pk"),
        &["--track", "shared", "--peer", "tallon"],
    );
    b.start_bridge(
        &url("tallon", "pt"),
        &["--track", "shared", "--peer", "konan"],
    );
    let queue = |m: &Machine| {
        std::fs::read_to_string(m.path("conductor/tracks/shared/.message-bus/queue.jsonl"))
            .unwrap_or_default()
    };
    let from = |m: &Machine, p: &str| {
        queue(m)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["from_pantheon"] == p)
            .count()
    };
    // With these permissions the bridges do their work: lines both ways.
    a.post_numbered("shared", "wa", 0, 2);
    b.post_numbered("shared", "wb", 0, 2);
    wait_for(
        "each side's lines on the other",
        Duration::from_secs(60),
        || from(&a, "tallon") == 2 && from(&b, "konan") == 2,
    );
    // tallon's user cannot speak as konan: the server refuses the publish, nothing is stored.
    let line = json!({"id": "msg_forged_1", "type": "PROGRESS", "source": "worker-9",
                      "timestamp": "2026-12-01T10:00:00Z", "payload": {}});
    core_publish(&url("tallon", "pt"), "pantheon.track.shared.konan", &[line]);
    // konan's next line follows the forgery in the stream: once tallon has it, the forgery would be there.
    a.post_numbered("shared", "wa", 2, 1);
    wait_for(
        "konan's next line at tallon",
        Duration::from_secs(30),
        || from(&b, "konan") == 3,
    );
    assert!(!queue(&a).contains("msg_forged_1"), "{}", queue(&a));
    assert!(!queue(&b).contains("msg_forged_1"), "{}", queue(&b));
}

#[test]
fn three_pantheons_on_a_track_each_read_only_their_peers_and_a_strangers_line_is_swept() {
    const PER: usize = 30;
    let server = Server::start();
    let names = ["konan", "tallon", "ubik"];
    let machines: Vec<Machine> = names.iter().map(|n| Machine::new(n)).collect();
    for m in &machines {
        m.ok(&["bus", "--track", "shared", "init"], None);
    }
    let mut machines = machines;
    for (i, m) in machines.iter_mut().enumerate() {
        // Each names the other two: a consumer of two subjects (`filter_subjects`).
        let others: Vec<&str> = names
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, n)| ["--peer", n])
            .collect();
        let mut args = vec!["--track", "shared"];
        args.extend(others);
        m.start_bridge(&server.url(), &args);
    }
    std::thread::scope(|s| {
        for (m, w) in machines.iter().zip(["wk", "wt", "wu"]) {
            s.spawn(move || m.post_numbered("shared", w, 0, PER));
        }
    });
    // A core publish before the bridges made the track's stream would be stored nowhere.
    wait_for("the track's stream", Duration::from_secs(60), || {
        try_stream_msgs(&server.url(), "PANTHEON_TRACK_shared").is_some_and(|n| n >= 3 * PER as u64)
    });
    let line = json!({"id": "msg_stranger_1", "type": "PROGRESS", "source": "worker-9",
                      "timestamp": "2026-12-01T10:00:00Z", "payload": {"n": 0}});
    core_publish(&server.url(), "pantheon.track.shared.stranger", &[line]);
    for m in &machines {
        wait_for(
            &format!("{}: every line", m.name),
            Duration::from_secs(60),
            || progress_count(m, "shared") >= 3 * PER,
        );
        wait_for(
            &format!("{}: the stranger's dead letter", m.name),
            Duration::from_secs(30),
            || dead_letters(m).len() == 1,
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    for m in &machines {
        assert_eq!(progress_count(m, "shared"), 3 * PER, "{}", m.name);
        assert_exactly_once_in_order(m, "shared", &["wk", "wt", "wu"], PER);
        let reason = dead_letters(m)[0]["reason"].as_str().unwrap().to_owned();
        assert!(
            reason.contains("\"stranger\" is not an allowed peer"),
            "{reason}"
        );
        let status = m.ok(&["bridge", "status"], None);
        assert_eq!(status["dead_letters"], 1, "{}: {status}", m.name);
    }
}
