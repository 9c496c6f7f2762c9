//! Approval links in the console (docs/CONSOLE.md, docs/PROTOCOL.md §2.15), in a real terminal
//! (tmux) on a root the real binary writes: pane 2's detail of a held item shows its links (a link
//! minted with `pantheon approve --link` open, one past its `--ttl` expired, one revoked, and once a
//! decision came through the real listener (`serve --approvals`, tapped with `curl` as an operator)
//! used, naming the approver and the channel); then the time machine at a moment after the decision
//! shows it came by link, with its channel and approver, in `pantheon replay --at` and in the
//! console opened in the past.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::tmux::Tmux;

const GATED: &str = "workflow:\n  id: gated\n  version: \"1\"\n  steps:\n    - id: plan\n      \
                     god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n";

/// A root and, beside it, the operator's HOME (where the link key and the credentials live).
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let s = Self { dir };
        s.ok(&["init"]);
        std::fs::write(s.root().join("conductor/workflows/gated.yaml"), GATED).unwrap();
        for e in std::fs::read_dir(s.root().join("conductor/rules")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        s
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin!("pantheon"));
        c.arg("--root").arg(self.root()).args(args);
        for v in ["PANTHEON_ROOT", "PANTHEON_LINK_KEY_FILE", "XDG_CONFIG_HOME"] {
            c.env_remove(v);
        }
        // The operator named the same wherever the test runs.
        c.env("HOME", self.home())
            .env("USER", "ann")
            .env("LOGNAME", "ann");
        c
    }

    /// Runs the binary; its JSON output (panics on failure).
    fn ok(&self, args: &[&str]) -> Value {
        let out = self.command(args).stdin(Stdio::null()).output().unwrap();
        assert!(
            out.status.success(),
            "pantheon {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Holds the gated workflow `wf` at its build step; the held handoff id.
    fn hold(&self, hid: &str, wf: &str) -> String {
        let h = json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth",
            "to_god": "hephaestus", "step": "plan", "routing": {"workflow_definition": "gated"},
            "context": {"summary": "pay the supplier", "decisions": [], "artifacts": []}});
        let mut c = self.command(&["handoff", "submit", "-"]);
        c.stdin(Stdio::piped()).stdout(Stdio::null());
        let mut child = c.spawn().unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), h.to_string().as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        assert!(
            self.root()
                .join(format!("conductor/pending/_quarantine/{hid}.json"))
                .exists()
        );
        hid.to_owned()
    }

    /// The console in tmux (with `extra` arguments: `--at TS` opens the past).
    fn console(&self, extra: &str) -> Tmux {
        let script = format!(
            "HOME={} {} --root {} {extra}; echo EXITED=$?; sleep 600",
            self.home().display(),
            assert_cmd::cargo::cargo_bin!("pantheon").display(),
            self.root().display()
        );
        Tmux::start("links", &script)
    }
}

/// A child killed when dropped.
struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `curl` (the system's): (status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Opens the detail of dispatch `hid` in pane 2 (filtered to it); the screen once `want` shows.
fn detail_of(t: &Tmux, hid: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    t.keys(&["Escape", "2", "/", "C-u"]);
    t.type_text(hid);
    t.keys(&["Enter"]);
    t.wait("the filtered inbox", |s| s.contains(hid));
    t.keys(&["Enter"]);
    t.wait(what, want)
}

#[test]
fn a_held_items_links_show_in_pane_2_and_a_decision_by_link_shows_in_the_time_machine() {
    let site = Site::new();
    let (a, b, c) = (
        site.hold("hof_20261206_c10001", "wf_cl1"),
        site.hold("hof_20261206_c10002", "wf_cl2"),
        site.hold("hof_20261206_c10003", "wf_cl3"),
    );
    // The listener, which decides only with an operator's credential, and records the history.
    let creds = site.home().join("credentials.jsonl");
    let alice = site.ok(&[
        "credentials",
        "add",
        "alice",
        "--operator",
        "--file",
        creds.to_str().unwrap(),
    ])["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = free_port();
    let log = site.dir.path().join("serve.log");
    let _serve = Kill(
        site.command(&[
            "serve",
            "--approvals",
            &format!("127.0.0.1:{port}"),
            "--approvals-require",
            "operator",
            "--credentials",
            creds.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(30);
    while !site
        .root()
        .join("conductor/approvals/listener.json")
        .exists()
    {
        assert!(Instant::now() < until, "serve --approvals never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A's link lives an hour, B's one second; C's is revoked.
    let la = site.ok(&["approve", &a, "--link", "--ttl", "1h"]);
    site.ok(&["approve", &b, "--link", "--ttl", "1s"]);
    site.ok(&["approve", &c, "--link"]);
    site.ok(&["approve", &c, "--revoke"]);
    std::thread::sleep(Duration::from_millis(1200));

    let t = site.console("");
    t.wait("the console", |s| s.contains("1 Workflows"));
    let s = detail_of(&t, &a, "A's open link", |s| {
        s.contains("links") && s.contains("open · minted")
    });
    assert!(s.contains("(cli), expires in"), "{s}");
    detail_of(&t, &b, "B's expired link", |s| s.contains("expired "));
    detail_of(&t, &c, "C's revoked link", |s| s.contains("revoked by"));

    // Alice approves A through the listener, as a phone's form does.
    let url = la["approve_url"].as_str().unwrap();
    let form = format!(
        "handoff={a}&digest={}",
        la["content_sha256"].as_str().unwrap()
    );
    let (code, receipt) = curl(&["-u", &format!("alice:{alice}"), "-d", &form, url]);
    assert_eq!(code, 200, "{receipt}");
    assert!(
        site.root()
            .join(format!("conductor/pending/hephaestus/{a}.json"))
            .exists()
    );
    let decided = chrono::Utc::now();
    // Released into hephaestus's inbox, its detail says how: used, by whom, through which channel.
    let s = detail_of(&t, &a, "A's used link", |s| {
        s.contains("used · approved by")
    });
    assert!(s.contains("alice (operator credential)"), "{s}");
    assert!(s.contains("via http"), "{s}");
    // `q` leaves the detail, then the console.
    t.keys(&["q", "q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
    drop(t);

    // The time machine, at a moment after the decision (once the recorder has it): `replay --at`
    // lists the decisions that came by link, with their channel and approver.
    let by_link = |v: &Value| {
        v["journal"]["decided_by_link"].as_array().and_then(|es| {
            es.iter()
                .find(|e| e["action"] == "approve" && e["handoff_id"] == a.as_str())
                .cloned()
        })
    };
    let until = Instant::now() + Duration::from_secs(30);
    let (at, entry) = loop {
        std::thread::sleep(Duration::from_millis(200));
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let v = site.ok(&["replay", "--at", &at, "--json"]);
        if let Some(e) = by_link(&v) {
            break (at, e);
        }
        assert!(
            Instant::now() < until,
            "the recorded history never held the decision: {v:#}"
        );
    };
    assert_eq!(entry["channel"], "http", "{entry:#}");
    assert_eq!(
        entry["approver"], "alice (operator credential)",
        "{entry:#}"
    );
    assert_eq!(entry["outcome"], "approved", "{entry:#}");
    let out = site.command(&["replay", "--at", &at]).output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains(&format!(
            "by link: approve approved {a} (wf_cl1) via http, approver alice (operator credential) at "
        )),
        "{summary}"
    );
    // Before the decision, the replay lists no such decision.
    let before = (decided - chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    assert!(by_link(&site.ok(&["replay", "--at", &before, "--json"])).is_none());

    // The console opened at that moment: the Journal pane names the channel and the approver.
    let t = site.console(&format!("--at {at}"));
    t.wait("the replay", |s| {
        s.lines().next().is_some_and(|h| h.contains("REPLAY"))
    });
    t.keys(&["8"]);
    let s = t.wait("the decision by link in the journal", |s| {
        s.contains("channel=http approver=")
    });
    assert!(s.contains("approve      approved"), "{s}");
    // The scrub line names the change that led to the moment shown: the decision, by link (when
    // later files changed after it, `{` steps back to it, the newest journal entry).
    let on_decision = |s: &str| {
        s.lines()
            .last()
            .is_some_and(|l| l.contains("approve approved wf_cl1 by ann via http link"))
    };
    if !on_decision(&s) {
        t.keys(&["{"]);
        t.wait("the scrub line on the decision by link", on_decision);
    }
    // `Enter` on the entry (the newest, selected) goes to its dispatch in pane 2; its detail there,
    // as it was then, says the link was used, by whom and through which channel.
    t.keys(&["Enter"]);
    t.wait("the entry's dispatch", |s| s.contains("2 Inboxes (8 gods)"));
    t.keys(&["Enter"]);
    t.wait("the used link in the dispatch's detail", |s| {
        s.contains("used · approved by alice (operator credential) via http")
    });
    t.keys(&["q", "q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

/// The token of a link's URL.
fn token(link: &Value, which: &str) -> String {
    link[which]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned()
}

/// Pane 2's detail on `TestBackend`: a held item with a revoked pair and an open one, and an item
/// a link released (through the file drop's redeem, in process), its used pair naming the approver
/// and the channel. Ages and generated ids redacted.
#[test]
fn the_link_lines_of_a_held_item_and_of_one_a_link_released() {
    use crossterm::event::KeyCode;
    use pantheon::testing::console::app::App;

    use super::actions::select_dispatch;
    use super::support::{app_for, code, redact, screen};

    let site = Site::new();
    let a = site.hold("hof_20261206_c20001", "wf_cs1");
    let b = site.hold("hof_20261206_c20002", "wf_cs2");
    let base = "http://127.0.0.1:9";
    site.ok(&["approve", &a, "--link", "--base-url", base]);
    site.ok(&["approve", &a, "--revoke"]);
    site.ok(&["approve", &a, "--link", "--base-url", base, "--ttl", "2h"]);
    let lb = site.ok(&["approve", &b, "--link", "--base-url", base]);
    let root = pantheon::Root::at(site.root());
    let key = pantheon::testing::approvals::link_key_at(
        &site.home().join(".config/pantheon/link-key"),
        &root,
    )
    .unwrap();
    let fields = [("token".to_owned(), token(&lb, "approve_url"))]
        .into_iter()
        .collect();
    let r = pantheon::testing::approvals::redeem_relayed(
        &root,
        &key,
        pantheon::engine::ApprovalChannel::File,
        &fields,
        Some("uid 1000 (file owner)".into()),
    )
    .unwrap();
    assert!(r.applied(), "{r:?}");
    let mut app = app_for(&site.root(), chrono::Utc::now());
    let shot = |app: &App| {
        redact(&screen(app, 160, 40, &site.root()))
            .split(' ')
            .map(|w| if w.starts_with("disp_") { "<disp>" } else { w })
            .collect::<Vec<_>>()
            .join(" ")
    };
    select_dispatch(&mut app, &a);
    app.on_key(code(KeyCode::Enter));
    let s = shot(&app);
    assert!(s.contains("links open · minted"), "{s}");
    assert!(s.contains("revoked by"), "{s}");
    insta::assert_snapshot!("links_held_detail", s);
    app.on_key(code(KeyCode::Esc));
    select_dispatch(&mut app, &b);
    app.on_key(code(KeyCode::Enter));
    let s = shot(&app);
    assert!(
        s.contains("used · approved by uid 1000 (file owner) via file"),
        "{s}"
    );
    insta::assert_snapshot!("links_released_detail", s);
}
