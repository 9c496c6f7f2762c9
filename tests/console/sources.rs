//! `:pane sources` (pane 12): the foreign sources with their health, and, opened k9s-like, a
//! source's waiting items, agents (as gods marked with the source), tasks, messages and locks, a
//! record whole with its unknown fields raw. Drawn at 80x24 and 200x50 from the Claude Code teams
//! corpus (`tests/corpus/claude-teams`) read by the real reader beside a source that cannot be
//! read; then the real binary in tmux, following a team directory another process writes into.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use pantheon::testing::console::keymap::{Action, Pane};
use pantheon::testing::sources::{Health, SourceState};

use super::support::*;

fn corpus(layout: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/claude-teams")
        .join(layout)
}

/// The corpus layout `v2.1.39` and a missing Agent Mail archive, each read once by its real
/// reader; their locations, read times and durations made stable for the snapshots.
fn states() -> Vec<SourceState> {
    let specs = [
        format!("claude-teams:{}", corpus("v2.1.39").display()),
        "agent-mail:/nonexistent/mailbox".to_owned(),
    ];
    let mut states = pantheon::testing::sources::probe(&specs, Duration::from_secs(10));
    assert_eq!(states[0].health, Health::Ok, "{:?}", states[0].health);
    assert!(
        matches!(states[1].health, Health::Error { .. }),
        "{:?}",
        states[1].health
    );
    let at = fixture_now() - chrono::Duration::seconds(4);
    states[0].location = "~/.claude".into();
    states[1].location = "/srv/mailbox".into();
    for s in &mut states {
        s.read_at = Some(at);
        s.took = Some(Duration::from_micros(1_250));
        if let Health::Error { since, .. } = &mut s.health {
            *since = at;
        }
    }
    states
}

fn app_with_sources(root: &Path) -> pantheon::testing::console::app::App {
    let mut snap = (*snapshot_of(root)).clone();
    snap.sources = Arc::new(states());
    let mut app = app_for(root, fixture_now());
    app.set_snapshot(Arc::new(snap));
    app
}

#[test]
fn the_sources_pane_lists_each_source_with_its_health_and_opens_one_at_80x24_and_200x50() {
    let root = fixture_root();
    let r = root.path();
    for (w, h) in [(80u16, 24u16), (200, 50)] {
        let mut app = app_with_sources(r);
        app.run_command("pane sources");
        assert_eq!(app.pane(), Pane::Sources);
        let s = screen(&app, w, h, r);
        for want in [
            "12 Sources (2)",
            "claude-teams:~/.claude",
            "● ok",
            "✗ error",
        ] {
            assert!(s.contains(want), "{w}x{h}: no {want:?} in\n{s}");
        }
        assert_snapshot!(format!("sources_list_{w}x{h}"), s);

        // Enter opens the selected source: its waiting items first, then its gods marked with
        // the source, its tasks and its messages.
        app.dispatch(Action::Open);
        assert!(!app.pane_state().detail);
        let s = screen(&app, w, h, r);
        for want in [
            "claude-teams:~/.claude",
            "3 gods",
            "2 tasks",
            "haiku-poet-2 @claude-teams",
            "wait",
            "#1",
        ] {
            assert!(s.contains(want), "{w}x{h}: no {want:?} in\n{s}");
        }
        assert_snapshot!(format!("sources_open_{w}x{h}"), s);

        // A god's record whole: its fields, then its raw value with the fields no column shows.
        filter(&mut app, "god haiku-poet-2");
        app.dispatch(Action::Open);
        assert!(app.pane_state().detail);
        let s = screen(&app, w, h, r);
        for want in ["haiku-poet-2", "planModeRequired", "tmuxPaneId", "raw"] {
            assert!(s.contains(want), "{w}x{h}: no {want:?} in\n{s}");
        }
        assert_snapshot!(format!("sources_agent_detail_{w}x{h}"), s);

        // Esc: out of the detail, then the filter, then up to the sources, the source still selected.
        app.dispatch(Action::Back);
        assert!(!app.pane_state().detail);
        app.dispatch(Action::Back);
        assert!(app.pane_state().filter.is_empty());
        app.dispatch(Action::Back);
        let s = screen(&app, w, h, r);
        assert!(s.contains("12 Sources (2)"), "{s}");
        assert_eq!(app.selected(Pane::Sources), 0);
    }
}

#[test]
fn brackets_open_the_next_source_and_a_broken_one_says_why_in_its_title() {
    let root = fixture_root();
    let r = root.path();
    let mut app = app_with_sources(r);
    app.run_command("pane sources");
    app.on_key(key(']'));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources › claude-teams:~/.claude"), "{s}");
    app.on_key(key(']'));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources › agent-mail:/srv/mailbox"), "{s}");
    assert!(s.contains("✗ error"), "{s}");
    assert!(s.contains("last good read shown"), "{s}");
    assert!(s.contains("holds no agent"), "{s}");
    // Past the last: the list again, on the source left.
    app.on_key(key(']'));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources (2)"), "{s}");
    assert_eq!(app.selected(Pane::Sources), 1);
    // `[` from the list: the last source.
    app.on_key(key('['));
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources › agent-mail:/srv/mailbox"), "{s}");
    // Esc: the list again, on the broken source's row.
    app.on_key(code(KeyCode::Esc));
    assert_eq!(app.selected(Pane::Sources), 1);
}

#[test]
fn enter_on_a_foreign_attention_item_lands_on_its_row_among_its_sources_records() {
    let root = fixture_root();
    let r = root.path();
    let mut app = app_with_sources(r);
    app.dispatch(Action::GoPane(Pane::Attention));
    filter(&mut app, "npm install");
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("Bash"), "{s}");
    app.dispatch(Action::Open);
    assert_eq!(app.pane(), Pane::Sources);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources › claude-teams:~/.claude"), "{s}");
    // The selected row is the item: its detail names the request.
    app.dispatch(Action::Open);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("wait · request/test-team/perm-123"), "{s}");
    // The broken source's item lands on its row in the list of sources.
    app.dispatch(Action::GoPane(Pane::Attention));
    app.dispatch(Action::Back);
    filter(&mut app, "mailbox");
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("source_down"), "{s}");
    app.dispatch(Action::Open);
    assert_eq!(app.pane(), Pane::Sources, "{:?}", app.shown_flash());
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("12 Sources (2)"), "{s}");
    assert_eq!(app.selected(Pane::Sources), 1);
}

#[test]
fn the_sources_tab_shows_only_when_the_console_reads_a_source() {
    let root = fixture_root();
    let r = root.path();
    let app = app_for(r, fixture_now());
    let s = screen(&app, 200, 50, r);
    assert!(!s.contains("Sources"), "{s}");
    let mut app = app_with_sources(r);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("Sources"), "{s}");
    // Tab from the last pane in the tabs reaches it.
    app.dispatch(Action::GoPane(Pane::DeadLetters));
    for _ in 0..4 {
        app.dispatch(Action::NextPane);
        if app.pane() == Pane::Sources {
            break;
        }
    }
    assert_eq!(app.pane(), Pane::Sources);
}

/// Types `/TEXT` and Enter: the pane's filter.
fn filter(app: &mut pantheon::testing::console::app::App, text: &str) {
    app.on_key(key('/'));
    type_text(app, text);
    app.on_key(code(KeyCode::Enter));
}

/// Copies `from` into `to` (the corpus layout into a directory the test may write).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn in_a_terminal_the_sources_pane_follows_a_team_another_process_writes() {
    let root = engine_root();
    let r = root.path();
    let claude = tempfile::tempdir().unwrap();
    copy_dir(&corpus("swarm-2026-01"), claude.path());
    let bin: PathBuf = assert_cmd::cargo::cargo_bin("pantheon");
    let script = format!(
        "{} --root {} --source claude-teams:{} console; sleep 600",
        bin.display(),
        r.display(),
        claude.path().display()
    );
    let t = crate::tmux::Tmux::start("sources", &script);
    t.wait("the console", |s| s.contains("1 Workflows"));
    t.keys(&[":"]);
    t.type_text("pane sources");
    t.keys(&["Enter"]);
    t.wait("the sources pane", |s| {
        s.contains("12 Sources (1)") && s.contains("● ok")
    });
    t.keys(&["Enter"]);
    t.wait("the team's records", |s| {
        s.contains("12 Sources › claude-teams:") && s.contains("@claude-teams")
    });
    // Another process: a teammate asks for a permission (the inbox rewritten whole, as Claude
    // Code writes it).
    let inbox = claude
        .path()
        .join("teams/my-project/inboxes/team-lead.json");
    let mut messages: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&inbox).unwrap()).unwrap();
    let request = serde_json::json!({"type": "permission_request", "requestId": "perm-tmux-1",
        "workerName": "worker-1", "toolName": "WebFetch", "input": {"url": "https://example.org/"},
        "createdAt": 1770772300000u64});
    messages.push(
        serde_json::json!({"from": "worker-1", "text": request.to_string(),
        "timestamp": "2026-02-11T14:40:00.000Z", "read": false}),
    );
    let tmp = inbox.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&messages).unwrap()).unwrap();
    std::fs::rename(&tmp, &inbox).unwrap();
    let s = t.wait("the new waiting item", |s| s.contains("WebFetch"));
    assert!(s.contains("wait"), "{s}");
    // Esc goes back up to the list of sources.
    t.keys(&["Escape"]);
    t.wait("the list of sources", |s| s.contains("12 Sources (1)"));
}

#[test]
fn the_ledger_lists_each_teammates_cost_from_its_session_logs() {
    let root = fixture_root();
    let r = root.path();
    let mut app = app_with_sources(r);
    app.run_command("pane ledger");
    assert_eq!(app.pane(), Pane::Ledger);
    let s = screen(&app, 200, 50, r);
    // The corpus's logs: the poet's two replies on Opus, the lead's on Haiku (a streamed reply once).
    for want in [
        "haiku-poet-1 @claude-teams",
        "team-lead @claude-teams",
        "$0.11",
        "22.7k",
        "test-team · claude-teams:~/.claude (its logs)",
    ] {
        assert!(s.contains(want), "no {want:?} in\n{s}");
    }
    let poet = s
        .lines()
        .position(|l| l.contains("haiku-poet-1 @"))
        .unwrap();
    let lead = s.lines().position(|l| l.contains("team-lead @")).unwrap();
    assert!(poet < lead, "highest cost first:\n{s}");
    // Its detail: the tokens by kind, the models, where it comes from.
    filter(&mut app, "haiku-poet-1");
    app.dispatch(Action::Open);
    let s = screen(&app, 200, 50, r);
    for want in [
        "output tokens 570",
        "cache writes  2150",
        "claude-opus-4-6",
        "not in the root's ledger",
    ] {
        assert!(s.contains(want), "no {want:?} in\n{s}");
    }
    // In the Sources pane the god's row says it too.
    app.run_command("pane sources");
    app.dispatch(Action::Open);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("$0.11 · 22.7k tokens · 2 replies"), "{s}");
}

/// A permission request added to the team's inbox by another process.
fn ask_permission(team_dir: &Path, id: &str) {
    let inbox = team_dir.join("teams/my-project/inboxes/team-lead.json");
    let mut messages: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&inbox).unwrap()).unwrap();
    let request = serde_json::json!({"type": "permission_request", "requestId": id,
        "workerName": "worker-1", "toolName": "WebFetch", "input": {"url": "https://example.org/"},
        "createdAt": 1770772300000u64});
    messages.push(
        serde_json::json!({"from": "worker-1", "text": request.to_string(),
        "timestamp": "2026-02-11T14:40:00.000Z", "read": false}),
    );
    let tmp = inbox.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&messages).unwrap()).unwrap();
    std::fs::rename(&tmp, &inbox).unwrap();
}

fn frame_at(r: &Path, at: i64) -> std::sync::Arc<pantheon::testing::live::snapshot::Snapshot> {
    let mut h = pantheon::testing::console::replay::ReplayHandle::start(
        &pantheon::Root::at(r),
        at,
        pantheon::testing::live::ModelOptions::default(),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut f = h.latest();
    while f.snapshot.loading.is_some() {
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), h.frames.changed())
                .await
                .expect("a frame from the replay")
                .unwrap()
        });
        f = h.frames.borrow_and_update().clone();
    }
    f.snapshot.clone()
}

/// The time machine shows a source as it was: its states, written into the root as they change,
/// are recorded by the real recorder, and the replay of a moment reads them back (a permission
/// request asked after that moment is not there; one asked before it is).
#[test]
fn the_time_machine_shows_a_sources_items_as_they_were() {
    use pantheon::engine::recorder::{self, Recorder};
    let root = engine_root();
    let r = root.path();
    let claude = tempfile::tempdir().unwrap();
    copy_dir(&corpus("swarm-2026-01"), claude.path());
    let spec = format!("claude-teams:{}", claude.path().display());
    let proot = pantheon::Root::at(r);
    let lease = recorder::lease_file(&proot).unwrap();
    lease.try_lock().unwrap();
    let mut rec = Recorder::start(&proot, lease).unwrap().0;
    let mut last = Vec::new();
    let mut moment = |rec: &mut Recorder| {
        let states =
            pantheon::testing::sources::probe(std::slice::from_ref(&spec), Duration::from_secs(10));
        pantheon::testing::sources::record::write_states(&proot, &states, &mut last).unwrap();
        rec.rescan(false).unwrap();
        let at = chrono::Utc::now().timestamp_micros();
        std::thread::sleep(Duration::from_millis(20));
        at
    };
    let before = moment(&mut rec);
    ask_permission(claude.path(), "perm-recorded-1");
    let after = moment(&mut rec);
    let has = |s: &pantheon::testing::live::snapshot::Snapshot| {
        s.sources.len() == 1
            && s.sources[0]
                .snapshot
                .attention
                .iter()
                .any(|a| a.key.contains("perm-recorded-1"))
    };
    let then = frame_at(r, before);
    assert_eq!(then.sources.len(), 1, "the source was recorded");
    assert_eq!(then.sources[0].spec(), spec);
    assert!(!has(&then), "{:#?}", then.sources[0].snapshot.attention);
    let now = frame_at(r, after);
    assert!(has(&now), "{:#?}", now.sources[0].snapshot.attention);
    // The replayed console's Sources pane shows it, read from the history only.
    let mut app = app_for(r, fixture_now());
    app.set_snapshot(now);
    app.run_command("pane sources");
    app.dispatch(Action::Open);
    let s = screen(&app, 200, 50, r);
    assert!(s.contains("WebFetch"), "{s}");
}

/// `pantheon --source … record` writes the sources' states into the root as they change (the
/// recorder beside it records them), retires the states of sources it does not read, and stopped by
/// SIGTERM, removes its own and leaves no process behind.
#[test]
fn record_with_a_source_writes_its_state_into_the_root_as_it_changes() {
    let root = engine_root();
    let r = root.path();
    let claude = tempfile::tempdir().unwrap();
    copy_dir(&corpus("swarm-2026-01"), claude.path());
    // A previous recorder's state of a second source, and a file that is not a recorder's.
    let dir = r.join("conductor/sources");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("1.json"), r#"{"index": 1, "health": "ok"}"#).unwrap();
    std::fs::write(dir.join("notes.json"), "{}").unwrap();
    let bin: PathBuf = assert_cmd::cargo::cargo_bin("pantheon");
    let mut child = Running(
        std::process::Command::new(bin)
            .arg("--root")
            .arg(r)
            .arg("--source")
            .arg(format!("claude-teams:{}", claude.path().display()))
            .arg("record")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let file = r.join("conductor/sources/0.json");
    let read = || -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(&file).ok()?).ok()
    };
    crate::tmux::wait_fs("the source's state", Duration::from_secs(20), || {
        read().is_some_and(|v| v["health"] == "ok")
    });
    assert!(
        !dir.join("1.json").exists(),
        "a source this recorder does not read is retired"
    );
    ask_permission(claude.path(), "perm-record-2");
    crate::tmux::wait_fs("the new item in the state", Duration::from_secs(20), || {
        read().is_some_and(|v| v.to_string().contains("perm-record-2"))
    });
    // SAFETY: kill with the pid of the child this test started.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // Stopped, it retires its states: the time machine shows no source after nobody read it.
    assert!(!file.exists(), "the state ends with its recorder");
    assert!(dir.join("notes.json").exists(), "not a recorder's file");
}

/// A child process killed and reaped when the test ends, passed or not.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
