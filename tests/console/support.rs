//! Shared helpers: fixture roots, an engine-built root, rendering to a `TestBackend`.

pub use crate::fixture_root::{copy_dir, fixture_root as fixture_source};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use pantheon::Root;
use pantheon::testing::console::app::App;
use pantheon::testing::console::theme::Theme;
use pantheon::testing::console::views;
use pantheon::testing::live::{LiveModel, ModelOptions, Snapshot};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// A temp copy of the foreign fixture root, every file's modification time set to an hour before
/// [`fixture_now`]: what the console dates by a file's time (an unreadable file's age) is drawn the
/// same whatever day the tests run.
pub fn fixture_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_source(), dir.path());
    let at = std::time::SystemTime::from(fixture_now() - chrono::Duration::hours(1));
    fn walk(p: &Path, at: std::time::SystemTime) {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(&e.path(), at);
            } else if t.is_file() {
                let f = std::fs::File::options().write(true).open(e.path()).unwrap();
                f.set_modified(at).unwrap();
            }
        }
    }
    walk(dir.path(), at);
    dir
}

/// The instant the fixture snapshots are drawn at: 6 minutes after wf_deploy_42 was dispatched.
pub fn fixture_now() -> DateTime<Utc> {
    "2026-06-14T10:36:00Z".parse().unwrap()
}

/// Runs the real binary on `root` with `args` (and optional stdin); panics on failure.
pub fn pantheon(root: &Path, args: &[&str], stdin: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::cargo_bin("pantheon").unwrap();
    cmd.arg("--root").arg(root).args(args);
    if let Some(s) = stdin {
        cmd.write_stdin(s);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "pantheon {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// The handoff that starts `wf` at the research step of deploy-feature (dispatches architect to
/// hephaestus).
pub fn research_handoff(wf: &str, hid: &str) -> String {
    serde_json::json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "hephaestus",
        "step": "research",
        "context": {"summary": "Researched the payment providers", "decisions": ["Use Stripe"],
                    "artifacts": ["research/payments.md"], "gates_passed": ["state_gate"]},
        "routing": {"workflow_definition": "deploy-feature"}
    })
    .to_string()
}

/// A root built through the engine (the real binary): two workflows waiting for acks, a bus with
/// messages, a lock, a heartbeat and a board in assessment.
pub fn engine_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    pantheon(r, &["init"], None);
    std::fs::create_dir_all(r.join("research")).unwrap();
    std::fs::write(r.join("research/payments.md"), "notes").unwrap();
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&research_handoff("wf_pay_1", "hof_20260614_aaa111")),
    );
    pantheon(
        r,
        &["handoff", "submit", "-"],
        Some(&research_handoff("wf_pay_2", "hof_20260614_bbb222")),
    );
    let bus = |a: &[&str]| {
        let mut v = vec!["bus", "--track", "alpha"];
        v.extend_from_slice(a);
        pantheon(r, &v, None)
    };
    bus(&["init"]);
    bus(&[
        "post",
        "PROGRESS",
        "--source",
        "worker-1",
        "--payload",
        r#"{"task_id":"1.1","progress_pct":40,"current_subtask":"wiring"}"#,
    ]);
    bus(&[
        "post",
        "TASK_FAILED",
        "--source",
        "worker-2",
        "--payload",
        r#"{"task_id":"1.2","error":"tsc failed"}"#,
    ]);
    bus(&["lock", "src/app.rs", "--worker", "worker-1"]);
    bus(&[
        "heartbeat",
        "--worker",
        "worker-1",
        "--task",
        "1.1",
        "--status",
        "RUNNING",
        "--progress",
        "40",
        "--subtask",
        "wiring",
    ]);
    let board = |a: &[&str]| {
        let mut v = vec!["board", "--track", "alpha"];
        v.extend_from_slice(a);
        pantheon(r, &v, None)
    };
    board(&[
        "open",
        "--checkpoint",
        "EVALUATE_PLAN",
        "--proposal",
        "Ship payments",
    ]);
    board(&[
        "assess",
        "--director",
        "CA",
        "--verdict",
        "APPROVE",
        "--score",
        "8",
    ]);
    dir
}

/// The model's snapshot of `root`, with the root path replaced by a stable one for snapshots.
pub fn snapshot_of(root: &Path) -> Arc<Snapshot> {
    let model = LiveModel::open(Root::at(root), ModelOptions::default());
    let mut s = (*model.snapshot()).clone();
    s.root = PathBuf::from("/srv/pantheon");
    s.watch = "notify".into();
    Arc::new(s)
}

/// An app over `root` at the fixture's fixed time.
pub fn app_for(root: &Path, now: DateTime<Utc>) -> App {
    App::new(snapshot_of(root), false, now)
}

pub fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

pub fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

/// Types a string into the app, one key per character.
pub fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        let effects = app.on_key(key(c));
        assert!(effects.is_empty(), "typing {c:?} produced {effects:?}");
    }
}

pub fn render(app: &App, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app, &Theme::plain(true)))
        .unwrap();
    t.backend().buffer().clone()
}

/// The buffer as text, one line per row, trailing spaces removed.
pub fn text(buf: &Buffer) -> String {
    let w = buf.area.width as usize;
    buf.content
        .chunks(w)
        .map(|row| {
            let mut line = String::new();
            for c in row {
                line.push_str(c.symbol());
            }
            line.trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Renders and returns the text, with `root` (a temp dir) replaced by `<root>`.
pub fn screen(app: &App, w: u16, h: u16, root: &Path) -> String {
    text(&render(app, w, h)).replace(&root.display().to_string(), "<root>")
}

/// Where `needle` starts in the buffer (first match, row by row).
pub fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let w = buf.area.width as usize;
    for (y, row) in buf.content.chunks(w).enumerate() {
        let mut line = String::new();
        let mut starts = Vec::new();
        for c in row {
            starts.push(line.len());
            line.push_str(c.symbol());
        }
        if let Some(i) = line.find(needle) {
            let x = starts.iter().position(|s| *s >= i).unwrap_or(0);
            return Some((x as u16, y as u16));
        }
    }
    None
}

/// The foreground colour of the first cell of `needle`.
pub fn fg_of(buf: &Buffer, needle: &str) -> Color {
    let (x, y) =
        find(buf, needle).unwrap_or_else(|| panic!("{needle:?} not on screen:\n{}", text(buf)));
    buf[(x, y)].fg
}

/// Replaces what changes from run to run in an engine-built root (ages, generated ids, dates) and
/// collapses runs of spaces, so snapshots compare layout-independent content.
pub fn redact(s: &str) -> String {
    s.lines()
        .map(|l| {
            let words: Vec<String> = l
                .split(' ')
                .filter(|w| !w.is_empty())
                .map(|w| {
                    let digits = w.trim_end_matches(['s', 'm', 'h', 'd']);
                    let is_age = !digits.is_empty()
                        && digits.len() + 1 == w.len()
                        && digits.chars().all(|c| c.is_ascii_digit());
                    let spark = !w.is_empty() && w.chars().all(|c| ('▁'..='█').contains(&c));
                    let rate = w
                        .strip_suffix("/s")
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
                    if is_age {
                        "<t>".to_owned()
                    } else if spark {
                        "<spark>".to_owned()
                    } else if rate {
                        "<n>/s".to_owned()
                    } else if let Some(rest) = w.strip_prefix("board-") {
                        format!("board-{}", "#".repeat(rest.len().min(14)))
                    } else {
                        w.to_owned()
                    }
                })
                .collect();
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
