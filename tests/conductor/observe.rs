//! `pantheon status` and `pantheon check` (docs/OBSERVABILITY.md) on healthy, degraded and broken
//! roots made by the real binary's acts: each status line and each monitoring-plugin exit code.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A definition whose `build` step has an ack deadline of `ack_wait` and one delivery.
fn deadline_flow(ack_wait: &str) -> String {
    format!(
        r#"
workflow:
  id: obs-flow
  version: "1"
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      ack_wait: {ack_wait}
      max_deliveries: 1
"#
    )
}

fn status(env: &Env, format: &str) -> String {
    let out = env.run(&["status", "--format", format], None);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

fn status_json(env: &Env) -> Value {
    serde_json::from_str(&status(env, "json")).unwrap()
}

/// `check`'s exit code and its one line.
fn check(env: &Env, args: &[&str]) -> (i32, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let out = env.run(&all, None);
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "one line: {line:?}");
    (out.status.code().unwrap(), line.trim_end().to_owned())
}

/// Moves the `dispatched_at` of the dispatch at `rel` `mins` minutes into the past, as an old
/// dispatch would carry it; written as the protocol writes (a new file renamed over the old).
fn age(env: &Env, rel: &str, mins: i64) {
    let mut d = env.read(rel);
    let at = chrono::Utc::now() - chrono::Duration::minutes(mins);
    d["dispatched_at"] = Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let tmp = format!("{rel}.tmp");
    env.write(&tmp, &serde_json::to_string_pretty(&d).unwrap());
    std::fs::rename(env.path(&tmp), env.path(rel)).unwrap();
}

#[test]
fn a_healthy_root_is_all_clear_and_ok() {
    let env = Env::dispatched("wf_obs_ok", "hof_20260614_ob0001");
    assert_eq!(status(&env, "line"), "✓");
    assert_eq!(status(&env, "tmux"), "#[fg=green]✓#[default]");
    let j = status_json(&env);
    assert_eq!(j["waiting"], 1, "{j:#}");
    assert_eq!(j["attention"], 0);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.starts_with(
            "PANTHEON OK - 1 waiting, 0 held, 0 supervisors alive; journal chain intact | "
        ),
        "{line}"
    );
    assert!(line.contains(" waiting=1;;;0; "), "{line}");
}

#[test]
fn held_overdue_and_dead_lettered_dispatches_show_in_the_line_and_warn() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/obs-flow.yaml", &deadline_flow("1s"));
    // A dead letter: one delivery, its 1 s ack deadline passed, one supervisor pass.
    env.start("obs-flow", "wf_obs_dead", "hof_20260614_ob0002", &[]);
    let inbox = "conductor/pending/hephaestus/hof_20260614_ob0002.json";
    std::thread::sleep(Duration::from_millis(1100));
    let r = env.ok(&["tick"], None);
    assert_eq!(
        r["dead_lettered"].as_array().map(Vec::len),
        Some(1),
        "{r:#}"
    );
    assert!(!env.exists(inbox));
    // An unacked dispatch waiting ten minutes: overdue by the unacked limit (5 minutes).
    env.submit(&plan_handoff("hof_20260614_ob0003", "wf_obs_late"));
    age(
        &env,
        "conductor/pending/hephaestus/hof_20260614_ob0003.json",
        10,
    );
    // A held one, just held: not overdue (the held limit is 30 minutes).
    env.write(
        "conductor/rules/hold.yaml",
        "rules:\n  - id: hold-all\n    then: {handling_mode: approval_required}\n",
    );
    env.submit(&handoff(
        "hof_20260614_ob0004",
        "wf_obs_held",
        "thoth",
        "marvin",
        "x",
        &[],
    ));
    // attention: 1 held + 1 overdue + 1 dead letter; alerts: the overdue one.
    assert_eq!(status(&env, "line"), "@3 ‖1 ▲1 ☠1");
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 1, "{line}");
    assert!(
        line.starts_with("PANTHEON WARNING - 1 overdue dispatch; 1 dead letter | overdue=1;0;;0; dead_letters=1;0;;0; "),
        "{line}"
    );

    // Held past the held limit: counted once in attention, and as an alert.
    age(
        &env,
        "conductor/pending/_quarantine/hof_20260614_ob0004.json",
        45,
    );
    assert_eq!(status(&env, "line"), "@3 ‖1 ▲2 ☠1");
    let j = status_json(&env);
    assert_eq!(
        (j["overdue"].as_u64(), j["overdue_held"].as_u64()),
        (Some(2), Some(1))
    );

    // Thresholds: on the command line, then in the root config.
    let (code, line) = check(&env, &["--crit", "dead_letters=1"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - 1 dead letter; 2 overdue dispatches |"),
        "{line}"
    );
    env.write(
        "conductor/config.yaml",
        "check:\n  overdue: {warn: 5}\n  dead_letters: {warn: 2, crit: 10}\n",
    );
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.contains(" overdue=2;4;;0; dead_letters=1;1;9;0; "),
        "{line}"
    );
}

#[test]
fn unenforced_deadlines_and_a_broken_journal_are_critical() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/obs-flow.yaml", &deadline_flow("1h"));
    env.start("obs-flow", "wf_obs_nosup", "hof_20260614_ob0005", &[]);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - no supervisor alive to enforce 1 ack deadline |"),
        "{line}"
    );
    assert_eq!(status(&env, "line"), "@1 ▲1");
    assert_eq!(check(&env, &["--supervisor", "never"]).0, 0);

    // A real supervisor beating: the deadline is enforced, the check is OK again.
    let serve = Serve::start(&env);
    serve.wait_for_heartbeat(&env);
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(line.contains("1 supervisor alive"), "{line}");
    assert_eq!(status(&env, "line"), "✓");
    drop(serve);

    // An edited journal entry breaks the chain.
    let journal = env.path("conductor/journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains("\"submit\""), "{text}");
    std::fs::write(&journal, text.replacen("\"submit\"", "\"sUbmit\"", 1)).unwrap();
    let (code, line) = check(&env, &["--supervisor", "never"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - journal chain broken: "),
        "{line}"
    );
    assert_eq!(check(&env, &["--supervisor", "never", "--no-journal"]).0, 0);
}

#[test]
fn a_check_that_cannot_judge_is_unknown() {
    let env = Env::with_test_flow();
    let missing = env.path("no-such-root");
    let out = std::process::Command::new(bin())
        .args(["--root", missing.to_str().unwrap(), "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("PANTHEON UNKNOWN - ") && line.contains("not a pantheon root"),
        "{line}"
    );

    let (code, line) = check(&env, &["--warn", "overdue=many"]);
    assert_eq!(code, 3, "{line}");
    assert!(line.contains("expected FIGURE=N"), "{line}");
    env.write("conductor/config.yaml", "check:\n  overdue: {warn: -1}\n");
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 3, "{line}");
    assert!(
        line.contains("check.overdue.warn: -1 is not a count"),
        "{line}"
    );
}

/// The attention counts `status` keeps follow what the live model reads: a file appended in place
/// (a queue's BLOCKED lines making a deadlock), a file renamed into a directory, and time alone (a
/// lease running out with no file changing).
#[test]
fn the_kept_attention_counts_follow_appends_renames_and_the_clock() {
    let env = Env::with_test_flow();
    let bus = "conductor/tracks/t1/.message-bus";
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(3500);
    let iso =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    env.write(
        &format!("{bus}/locks.json"),
        &serde_json::json!({
            "a.ts": {"worker_id": "w1", "acquired_at": iso(chrono::Utc::now()), "expires_at": "2099-01-01T00:00:00Z"},
            "b.ts": {"worker_id": "w2", "acquired_at": iso(chrono::Utc::now()), "expires_at": "2099-01-01T00:00:00Z"},
            "c.ts": {"worker_id": "w3", "acquired_at": iso(chrono::Utc::now()), "expires_at": iso(soon)},
        })
        .to_string(),
    );
    env.write(&format!("{bus}/queue.jsonl"), "");
    std::thread::sleep(Duration::from_millis(1100));
    let kinds = |env: &Env| status_json(env)["attention_kinds"].clone();
    assert_eq!(status(&env, "line"), "✓");
    // Kept: a second run reuses the counts (their file is not written again).
    let kept = || {
        std::fs::read_dir(env.home.join(".cache/pantheon/status"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".attention.json"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .expect("the attention counts are kept")
    };
    let first = kept();
    assert_eq!(kinds(&env)["expired_lock"], 0);
    assert_eq!(kept(), first, "reused, not counted again");
    // Time alone: the lease of c.ts runs out, no file changing.
    while chrono::Utc::now() < soon + chrono::Duration::milliseconds(200) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(kinds(&env)["expired_lock"], 1);
    assert_eq!(kinds(&env)["deadlock"], 0);
    // Appended in place: two BLOCKED lines make a wait cycle.
    let blocked = |id: &str, src: &str, res: &str| {
        serde_json::json!({"id": id, "type": "BLOCKED", "source": src,
            "timestamp": iso(chrono::Utc::now()),
            "payload": {"waiting_for": "file_lock", "resource": res}})
        .to_string()
    };
    let mut q = std::fs::OpenOptions::new()
        .append(true)
        .open(env.path(&format!("{bus}/queue.jsonl")))
        .unwrap();
    use std::io::Write;
    writeln!(
        q,
        "{}\n{}",
        blocked("m1", "w1", "b.ts"),
        blocked("m2", "w2", "a.ts")
    )
    .unwrap();
    drop(q);
    assert_eq!(kinds(&env)["deadlock"], 1);
    // A dead letter renamed into conductor/dead/.
    let d = serde_json::json!({"handoff_id": "hof_20261206_kd0001", "workflow_id": "wf_kept",
        "from_god": "thoth", "to_god": "hephaestus", "step": "build", "context": {"summary": "s"},
        "dispatched_at": iso(chrono::Utc::now()), "ack_status": "unacked"});
    env.write("conductor/dead/hephaestus/x.tmp", &d.to_string());
    std::fs::rename(
        env.path("conductor/dead/hephaestus/x.tmp"),
        env.path("conductor/dead/hephaestus/hof_20261206_kd0001.json"),
    )
    .unwrap();
    let j = status_json(&env);
    assert_eq!(j["attention_kinds"]["dead_letter"], 1, "{j:#}");
    let out = env.run(&["status", "--format", "json", "--no-cache"], None);
    let fresh: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fresh["attention_kinds"], j["attention_kinds"]);
}

#[test]
fn a_config_that_does_not_parse_and_a_pending_file_are_critical() {
    // A configured CRITICAL level in a config that does not parse: the check does not quietly
    // fall back to the default WARNING, it says the config is not in force.
    let env = Env::dispatched("wf_obs_cfg", "hof_20260614_ob0007");
    env.write(
        "conductor/config.yaml",
        "check:\n  overdue: {warn: 1, crit: 1\n",
    );
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("PANTHEON CRITICAL - conductor/config.yaml cannot be used ("),
        "{line}"
    );
    assert!(
        line.contains("its settings and check levels are not in force"),
        "{line}"
    );
    assert!(
        status_json(&env)["broken"][0]
            .as_str()
            .is_some_and(|b| b.starts_with("conductor/config.yaml cannot be used"))
    );
    std::fs::remove_file(env.path("conductor/config.yaml")).unwrap();
    assert_eq!(check(&env, &[]).0, 0, "a root with no config is fine");

    // `conductor/pending` as a file: no inbox can be counted, which is no OK.
    let pending = env.path("conductor/pending");
    std::fs::remove_dir_all(&pending).unwrap();
    std::fs::write(&pending, "not a directory").unwrap();
    let (code, line) = check(&env, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with(
            "PANTHEON CRITICAL - conductor/pending is not a directory: no dispatch in it can be counted"
        ),
        "{line}"
    );
}

/// `pantheon serve` on the root, killed and reaped on drop.
pub(crate) struct Serve(pub(crate) Child);

impl Serve {
    fn start(env: &Env) -> Self {
        let child = env
            .command(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn wait_for_heartbeat(&self, env: &Env) {
        let until = Instant::now() + Duration::from_secs(20);
        while env.names("conductor/supervisor").is_empty() {
            assert!(Instant::now() < until, "serve wrote no heartbeat");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---- `serve --metrics`, scraped by a real Prometheus ----

/// A free loopback port (bound, then released for the process that will listen there).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on 127.0.0.1:port (HTTP/1.0, whole answer): (status code, headers, body).
pub(crate) fn http_get(
    port: u16,
    path: &str,
    accept: Option<&str>,
) -> Option<(u16, String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{accept}\r\n").ok()?;
    let mut all = String::new();
    s.read_to_string(&mut all).ok()?;
    let (head, body) = all.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, head.to_owned(), body.to_owned()))
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `serve --metrics 127.0.0.1:PORT` on the root, killed and reaped on drop.
pub(crate) fn serve_metrics(env: &Env, port: u16) -> Serve {
    let child = env
        .command(&["serve", "--metrics", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serve = Serve(child);
    let until = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/metrics", None).is_none_or(|(c, _, _)| c != 200) {
        assert!(Instant::now() < until, "serve --metrics never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    serve
}

/// A Prometheus server on loopback scraping `target` every second, with the example rules loaded;
/// killed and reaped (and its data removed with the test's directory) on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(env: &Env, target: u16) -> Self {
        let dir = env.dir.path().join("prometheus");
        std::fs::create_dir_all(&dir).unwrap();
        let rules = repo_file("deploy/prometheus/pantheon-rules.yml");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: pantheon\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n",
            rules.display()
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let child = std::process::Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .expect("prometheus is installed (Debian's `prometheus` package; .ci/run installs it)");
        let p = Self { child, port };
        let until = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/-/ready", None).is_none_or(|(c, _, _)| c != 200) {
            assert!(
                Instant::now() < until,
                "prometheus never got ready: {}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// An instant query's result (the API's `data.result`), asserting the query ran.
    fn query(&self, q: &str) -> Vec<Value> {
        let (code, _, body) = http_get(
            self.port,
            &format!("/api/v1/query?query={}", url_encode(q)),
            None,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        assert_eq!(
            (code, v["status"].as_str()),
            (200, Some("success")),
            "{q}: {body}"
        );
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The single value of `q`, once Prometheus has scraped one.
    fn value(&self, q: &str) -> Option<f64> {
        let r = self.query(q);
        r.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Waits until `q` is `want` (scrapes come every second).
    fn wait_for(&self, q: &str, want: f64) {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.value(q);
            if got == Some(want) {
                return;
            }
            assert!(Instant::now() < until, "{q}: {got:?}, want {want}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo_file(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn promtool(args: &[&str], input: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut c = std::process::Command::new("promtool");
    c.args(args)
        .current_dir(repo_file("deploy/prometheus"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .expect("promtool is installed (Debian's `prometheus` package)");
    if let Some(text) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// Journal entries of `action` whose outcome is `outcome`.
fn journaled(env: &Env, action: &str, outcome: &str) -> f64 {
    env.journal_entries()
        .iter()
        .filter(|e| e["action"] == action && e["outcome"] == outcome)
        .count() as f64
}

#[test]
fn prometheus_scrapes_serve_metrics_and_the_figures_match_the_root() {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/obs-flow.yaml", &deadline_flow("1s"));
    // Acts before serve starts count too (the counters fold the journal).
    env.submit(&plan_handoff("hof_20260614_pm0001", "wf_pm_1"));
    env.submit(&plan_handoff("hof_20260614_pm0002", "wf_pm_2"));
    // The first ack reports usage: the ledger's totals are served as cost and token counters.
    let mut first = ack(
        "ack_20260614_pm0001",
        "hof_20260614_pm0001",
        "accepted",
        "on it",
    );
    first["usage"] =
        serde_json::json!({"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0125});
    env.ack(&first);

    let port = free_port();
    let serve = serve_metrics(&env, port);
    // The exposition is what `promtool check metrics` reads, in both formats' negotiation.
    let (_, head, text) = http_get(port, "/metrics", None).unwrap();
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(!text.contains("_created"), "{text}");
    let served = |prefix: &str, value: &str| {
        text.lines()
            .any(|l| l.starts_with(prefix) && l.ends_with(&format!("}} {value}")))
    };
    assert!(served("pantheon_cost_usd_total{god=", "0.0125"), "{text}");
    assert!(served("pantheon_tokens_total{god=", "1200"), "{text}");
    assert!(text.contains("kind=\"output\"} 300"), "{text}");
    let out = promtool(&["check", "metrics"], Some(&text));
    assert!(
        out.status.success(),
        "promtool check metrics: {out:?}\n{text}"
    );
    let (_, head, om) = http_get(
        port,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .unwrap();
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(
        om.contains("pantheon_acks_created{status=\"accepted\"} "),
        "{om}"
    );

    // A second serve on the same port: a clear error, exit 1.
    let out = env
        .command(&["serve", "--metrics", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already in use"), "{err}");

    let prom = Prometheus::start(&env, port);
    // A workload while Prometheus scrapes: more dispatches, an ack, a forced dead-lettering (one
    // delivery, a 1 s ack deadline, enforced by the running serve).
    env.submit(&plan_handoff("hof_20260614_pm0003", "wf_pm_3"));
    env.ack(&ack(
        "ack_20260614_pm0002",
        "hof_20260614_pm0002",
        "accepted",
        "on it",
    ));
    env.start("obs-flow", "wf_pm_dead", "hof_20260614_pm0004", &[]);
    let until = Instant::now() + Duration::from_secs(30);
    while env.names("conductor/dead/hephaestus").is_empty() {
        assert!(Instant::now() < until, "serve dead-lettered nothing");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Pending per god: what `pantheon inbox GOD` lists.
    for god in ["hephaestus", "thoth", "marvin"] {
        let listed = env.ok(&["inbox", god], None)["dispatches"]
            .as_array()
            .map_or(0, Vec::len);
        prom.wait_for(
            &format!("pantheon_dispatches_pending{{job=\"pantheon\",god=\"{god}\"}}"),
            listed as f64,
        );
    }
    assert_eq!(
        prom.value("sum(pantheon_dispatches_pending{god=\"hephaestus\"})"),
        Some(1.0),
        "wf_pm_3's dispatch waits; the two accepted left the inbox"
    );
    // Dead letters after the forced dead-lettering, as the root has them.
    let dead = env.names("conductor/dead/hephaestus").len() as f64;
    assert_eq!(dead, 1.0);
    prom.wait_for("pantheon_dead_letters{god=\"hephaestus\"}", dead);
    prom.wait_for(
        "pantheon_dead_lettered_total",
        journaled(&env, "dead_letter", "dead_lettered"),
    );
    prom.wait_for("pantheon_attention_items{kind=\"dead_letter\"}", dead);
    // Ack counters, from every process's acts (these acks came from the CLI, not serve).
    let accepted = journaled(&env, "ack", "accepted");
    assert_eq!(accepted, 2.0);
    prom.wait_for("pantheon_acks_total{status=\"accepted\"}", accepted);
    prom.wait_for(
        "sum(pantheon_submits_total)",
        env.journal_entries()
            .iter()
            .filter(|e| e["action"] == "submit")
            .count() as f64,
    );
    prom.wait_for("pantheon_ack_latency_seconds_count", accepted);
    prom.wait_for("pantheon_supervisors", 1.0);

    // Every expression of the example dashboard and rules runs against this Prometheus.
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("deploy/grafana/pantheon-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for e in &exprs {
        prom.query(e);
    }
    // The rules loaded and evaluated without error; the dead letter fires its alert's pending state.
    let (_, _, rules) = http_get(prom.port, "/api/v1/rules", None).unwrap();
    let rules: Value = serde_json::from_str(&rules).unwrap();
    let groups = rules["data"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{rules:#}");
    for g in groups {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r:#}");
        }
    }
    let until = Instant::now() + Duration::from_secs(30);
    while !prom
        .query("ALERTS{alertname=\"PantheonDeadLetters\"}")
        .iter()
        .any(|a| a["metric"]["god"] == "hephaestus")
    {
        assert!(
            Instant::now() < until,
            "PantheonDeadLetters never went pending"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A restarted serve continues its counters from the journal: no reset for Prometheus to see.
    drop(serve);
    let serve = serve_metrics(&env, port);
    let (_, _, text) = http_get(port, "/metrics", None).unwrap();
    assert!(
        text.contains("pantheon_acks_total{status=\"accepted\"} 2\n")
            && text.contains("pantheon_dead_lettered_total 1\n"),
        "{text}"
    );
    drop(serve);
    drop(prom);
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(e)) = m.get("expr") {
                out.push(e.clone());
            }
            m.values().for_each(|x| collect_exprs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

#[test]
fn the_example_rules_pass_promtool() {
    let out = promtool(&["check", "rules", "pantheon-rules.yml"], None);
    assert!(out.status.success(), "{out:?}");
    let out = promtool(&["test", "rules", "pantheon-rules.test.yml"], None);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("SUCCESS"),
        "{out:?}"
    );
}

#[test]
fn the_status_cache_follows_protocol_writes_and_the_clock() {
    let env = Env::dispatched("wf_obs_cache", "hof_20260614_oc0001");
    let rel = "conductor/pending/hephaestus/hof_20260614_oc0001.json";
    // Due in 2.5 s: past the unacked limit then, with its directory unchanged.
    let mut d = env.read(rel);
    let at =
        chrono::Utc::now() - chrono::Duration::minutes(5) + chrono::Duration::milliseconds(2500);
    d["dispatched_at"] = Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let tmp = format!("{rel}.tmp");
    env.write(&tmp, &serde_json::to_string_pretty(&d).unwrap());
    std::fs::rename(env.path(&tmp), env.path(rel)).unwrap();
    let both = |want: &str| {
        assert_eq!(status(&env, "line"), want);
        let out = env.run(&["status", "--no-cache"], None);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), want);
    };
    // Settled directories are kept (a directory changed within the last second is read again).
    std::thread::sleep(Duration::from_millis(1100));
    both("✓");
    let cache_dir = env.home.join(".cache/pantheon/status");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        2,
        "the directories' figures and the attention counts of the root: {files:?}"
    );
    assert!(files[0].to_string_lossy().ends_with(".attention.json"));
    let cached = std::fs::read_to_string(&files[1]).unwrap();
    assert!(cached.contains("hephaestus"), "{cached}");
    // The kept overdue instant makes the cached figures right later, without a re-read.
    let until = at + chrono::Duration::minutes(5) + chrono::Duration::milliseconds(200);
    while chrono::Utc::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    both("@1 ▲1");
    // A protocol write (a rename into the inbox) is seen at once.
    env.submit(&plan_handoff("hof_20260614_oc0002", "wf_obs_cache2"));
    let j = status_json(&env);
    assert_eq!(j["waiting"], 2, "{j:#}");
    // An ack that moves the dispatch out of the inbox is seen too.
    env.ack(&ack(
        "ack_20260614_oc0001",
        "hof_20260614_oc0001",
        "accepted",
        "ok",
    ));
    both("✓");
    // A planted, unparseable cache is ignored.
    for e in std::fs::read_dir(&cache_dir).unwrap() {
        std::fs::write(e.unwrap().path(), "{not json").unwrap();
    }
    both("✓");
    assert_eq!(status_json(&env)["waiting"], 1);
}

#[test]
fn status_warns_while_a_live_supervisor_serves_metrics_beyond_loopback() {
    let env = Env::dispatched("wf_obs_exposed", "hof_20260614_ox0001");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    env.write(
        "conductor/supervisor/pid-77.json",
        &serde_json::json!({"supervisor": "pid-77", "pid": 77, "started": now, "last_beat": now})
            .to_string(),
    );
    let record = |loopback: bool, addr: &str| {
        env.write(
            "conductor/observe/metrics-pid-77.json",
            &serde_json::json!({"supervisor": "pid-77", "pid": 77, "addr": addr, "loopback": loopback})
                .to_string(),
        );
    };
    record(true, "127.0.0.1:9464");
    assert_eq!(status(&env, "line"), "✓");
    assert_eq!(status_json(&env)["metrics_exposed"], serde_json::json!([]));
    record(false, "10.1.2.3:9464");
    assert_eq!(status(&env, "line"), "✓ ⚠metrics");
    assert_eq!(
        status_json(&env)["metrics_exposed"],
        serde_json::json!(["10.1.2.3:9464"])
    );
    // A record whose supervisor is gone (no live heartbeat) says nothing.
    std::fs::remove_file(env.path("conductor/supervisor/pid-77.json")).unwrap();
    assert_eq!(status(&env, "line"), "✓");
}

/// `pantheon_paused{kind}` and `pantheon_dispatches_paused` follow `conductor/paused.json` as the
/// live model reads it (docs/PROTOCOL.md §2.14); a pause's hold is not counted as held.
#[test]
fn serve_metrics_count_the_pauses_by_kind_and_what_they_hold() {
    let env = Env::with_test_flow();
    env.ok(&["pause", "--god", "hephaestus", "--reason", "r"], None);
    env.submit(&plan_handoff("hof_20261206_ob0p01", "wf_obs_paused"));
    let port = free_port();
    let _serve = serve_metrics(&env, port);
    let body = || http_get(port, "/metrics", None).unwrap().2;
    let b = body();
    for line in [
        "pantheon_paused{kind=\"god\"} 1",
        "pantheon_paused{kind=\"all\"} 0",
        "pantheon_dispatches_paused 1",
        "pantheon_dispatches_held 0",
    ] {
        assert!(b.lines().any(|l| l == line), "{line} in:\n{b}");
    }
    env.ok(&["resume", "--god", "hephaestus"], None);
    let until = Instant::now() + Duration::from_secs(30);
    while !body()
        .lines()
        .any(|l| l == "pantheon_paused{kind=\"god\"} 0")
    {
        assert!(
            Instant::now() < until,
            "the resume never reached the metrics:\n{}\n{}",
            body(),
            std::fs::read_to_string(env.path("conductor/paused.json")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A record the bridge cannot publish is named by its outbox id in `check` (WARNING) and in
/// `status --format json` (`bridge.stuck`), from the bridge's status file as the bridge writes it;
/// an id that does not read as one (the file is another process's) is not printed.
#[test]
fn check_and_status_name_a_stuck_outbox_record_by_its_id() {
    let env = Env::with_test_flow();
    let (code, line) = check(&env, &["--supervisor", "never"]);
    assert_eq!(code, 0, "{line}");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    env.write(
        "conductor/bridge/status.json",
        &serde_json::json!({
            "name": "konan", "updated": now, "connected": true, "lag": 0, "outbox_pending": 2,
            "stuck": [
                {"outbox_id": "ob_20261206_a1b2c3", "subject": "subspace.deploy.tallon",
                 "attempts": 1, "since": now, "error": "no stream stores it",
                 "hint": "add a stream for the subject, then `pantheon bridge retry ob_20261206_a1b2c3`"},
                {"outbox_id": "ob_\u{1b}]0;evil\u{7}", "subject": "x", "attempts": 1, "since": now}
            ]
        })
        .to_string(),
    );
    let (code, line) = check(&env, &["--supervisor", "never"]);
    assert_eq!(code, 1, "{line}");
    assert!(
        line.contains("outbox records the bridge cannot publish: ob_20261206_a1b2c3 ")
            && line.contains("pantheon bridge retry ID"),
        "{line}"
    );
    assert!(!line.contains('\u{1b}'), "{line:?}");
    let j = status_json(&env);
    assert_eq!(
        j["bridge"]["stuck"],
        serde_json::json!(["ob_20261206_a1b2c3"]),
        "{j:#}"
    );
    assert!(
        j["attention_kinds"]["stuck_outbox"].as_u64().unwrap_or(0) >= 1,
        "{j:#}"
    );
}
