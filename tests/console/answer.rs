//! `a` on pane 7 answers a foreign item: a real A2A agent built with the official A2A Python SDK
//! (`tests/sources/a2a_agent.py`) asks for input in a task the SDK's own client started; the operator
//! answers from the console (asked, confirmed, flashed), the task completes with the answer (checked
//! through the SDK's client), and the journal has `answer_source` without the text.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::KeyCode;
use pantheon::Root;
use pantheon::testing::console::app::{FlashKind, Mode};
use pantheon::testing::console::engine_ops::EngineOperator;
use pantheon::testing::console::keymap::{Action, Pane};
use serde_json::Value;

use super::actions::{confirm, confirm_text};
use super::setup;
use super::support::*;

fn here(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sources")
        .join(file)
}

/// The SDK agent, killed and reaped when dropped.
struct Agent(Child, String);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn agent() -> Agent {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(setup::python())
        .arg(here("a2a_agent.py"))
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the A2A test agent starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the agent did not start");
    Agent(child, format!("http://127.0.0.1:{port}"))
}

fn sdk_client(args: &[&str]) -> Value {
    let out = Command::new(setup::python())
        .arg(here("a2a_client.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "a2a_client.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_waiting_a2a_task_is_answered_from_the_attention_pane_and_completes_with_the_answer() {
    let agent = agent();
    let started = sdk_client(&["start", &agent.1, "hi"]);
    assert_eq!(started["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = started["id"].as_str().unwrap().to_owned();
    let spec = format!("a2a:{}/", agent.1);

    let root = engine_root();
    let r = root.path();
    let op = EngineOperator::new(Root::at(r));
    // The console's snapshot with the source read as the live model reads it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let snap = loop {
        let states =
            pantheon::testing::sources::probe(std::slice::from_ref(&spec), Duration::from_secs(10));
        if states[0]
            .snapshot
            .attention
            .iter()
            .any(|a| a.raw["id"] == id.as_str())
        {
            let mut s = (*snapshot_of(r)).clone();
            s.sources = Arc::new(states);
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the source never showed the task"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    // A read-only console refuses.
    let mut ro = app_for(r, chrono::Utc::now());
    ro.set_snapshot(Arc::new(snap.clone()));
    ro.set_read_only(true);
    ro.dispatch(Action::GoPane(Pane::Attention));
    select_foreign(&mut ro);
    ro.on_key(key('a'));
    assert!(matches!(ro.mode(), Mode::Normal), "{:?}", ro.mode());
    assert!(
        ro.shown_flash()
            .cloned()
            .unwrap()
            .text
            .contains("read-only")
    );

    let mut app = app_for(r, chrono::Utc::now());
    app.set_snapshot(Arc::new(snap));
    app.dispatch(Action::GoPane(Pane::Attention));
    select_foreign(&mut app);
    app.on_key(key('a'));
    let Mode::Prompt(p) = &app.mode() else {
        panic!("expected the answer's prompt, got {:?}", app.mode())
    };
    assert!(p.label.contains("what name?"), "{}", p.label);
    // An empty answer is not sent: the prompt says why and stays open for the text.
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.shown_flash().cloned().unwrap().kind, FlashKind::Error);
    assert!(matches!(app.mode(), Mode::Prompt(_)), "{:?}", app.mode());
    type_text(&mut app, "Ada");
    app.on_key(code(KeyCode::Enter));
    let said = confirm_text(&app);
    assert!(said.contains("asks: "), "{said}");
    assert!(said.contains("Your answer (3 characters)"), "{said}");
    let flash = confirm(&mut app, &op);
    assert!(flash.starts_with("answered "), "{flash}");

    // On the agent's side, through the SDK's own client: completed with the operator's answer.
    let seen = sdk_client(&["get", &agent.1, &id]);
    assert_eq!(seen["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["artifacts"][0], "hello, Ada", "{seen}");
    let journal = std::fs::read_to_string(r.join("conductor/journal.jsonl")).unwrap();
    let entry: Value = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["action"] == "answer_source")
        .expect("the answer is journaled");
    assert_eq!(entry["targets"]["source"], spec.as_str());
    assert_eq!(entry["source"], "console");
    assert!(
        !journal.contains("Ada"),
        "the answer's text is never journaled"
    );
}

/// Moves the Attention pane's selection onto the foreign item.
fn select_foreign(app: &mut pantheon::testing::console::app::App) {
    app.dispatch(Action::Top);
    let items = app.attention();
    let i = items
        .iter()
        .position(|i| i.kind == pantheon::testing::live::attention::Kind::Foreign)
        .unwrap_or_else(|| panic!("no foreign item in {items:?}"));
    for _ in 0..i {
        app.dispatch(Action::Down);
    }
}
