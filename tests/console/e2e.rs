//! The console in a real terminal (tmux): it follows files changed by other processes, acks and
//! aborts through keys, and leaves the terminal as it found it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::support::*;
use crate::tmux::Tmux;

/// The console on `root` in a fresh tmux window, with `env` (`NAME=value …`) set for it and `extra`
/// arguments; the shell prints `SHELL-BEFORE` first, and `EXITED=code` and the terminal's line
/// discipline (`icanon` or `-icanon`) when the console has gone.
fn console(root: &Path, env: &str, extra: &str) -> (Tmux, tempfile::TempDir) {
    let log = tempfile::tempdir().unwrap();
    let bin: PathBuf = assert_cmd::cargo::cargo_bin("pantheon");
    let script = format!(
        "echo SHELL-BEFORE; {env} PANTHEON_LOG={} {} --root {} console {extra}; echo EXITED=$?; \
         stty -a | grep -o -- '-\\?icanon'; sleep 600",
        log.path().join("console.log").display(),
        bin.display(),
        root.display()
    );
    (Tmux::start("e2e", &script), log)
}

fn wait_fs(what: &str, pred: impl Fn() -> bool) {
    crate::tmux::wait_fs(what, Duration::from_secs(10), pred)
}

#[test]
fn console_follows_other_processes_acks_and_aborts_by_keys_and_restores_the_terminal() {
    let root = engine_root();
    let r = root.path();
    let (t, _log) = console(r, "", "");
    t.wait("the console", |s| {
        s.contains("1 Workflows") && s.contains("wf_pay_1")
    });
    assert!(t.alternate_on());

    // Another process posts on the bus: the tail shows it.
    t.keys(&["3"]);
    t.wait("the bus pane", |s| s.contains("3 Bus · alpha"));
    pantheon(
        r,
        &[
            "bus",
            "--track",
            "alpha",
            "post",
            "TASK_COMPLETE",
            "--source",
            "worker-e2e",
            "--payload",
            r#"{"task_id":"7.7","commit_sha":"abc1234"}"#,
        ],
        None,
    );
    t.wait("the new message", |s| {
        s.contains("worker-e2e") && s.contains("task 7.7")
    });

    // Ack the first dispatch as accepted: a, Enter (accepted), Tab (to the Ack button), Enter.
    t.keys(&["2"]);
    t.wait("the inboxes", |s| s.contains("hof_20260614_aaa111"));
    t.keys(&["a"]);
    t.wait("the ack menu", |s| s.contains("Acknowledge as"));
    t.keys(&["Enter"]);
    t.wait("the confirmation", |s| s.contains("[ Cancel ]"));
    t.keys(&["Tab", "Enter"]);
    let archived = r.join("conductor/archive/hephaestus/hof_20260614_aaa111.json");
    wait_fs("the ack to archive the dispatch", || archived.exists());
    t.wait("the success flash", |s| {
        s.contains("✔ ") && s.contains("accepted")
    });

    // Abort the other workflow: 1, move to wf_pay_2, x, reason, Enter, Tab, Enter.
    t.keys(&["1", "g", "j"]);
    t.keys(&["x"]);
    t.wait("the reason prompt", |s| s.contains("Reason for aborting"));
    t.type_text("e2e abort");
    t.keys(&["Enter"]);
    t.wait("the abort confirmation", |s| {
        s.contains("Abort wf_pay_2") && s.contains("[ Cancel ]")
    });
    t.keys(&["Tab", "Enter"]);
    let manifest = r.join("conductor/state/wf_pay_2.aborted.json");
    wait_fs("the abort manifest", || manifest.exists());
    // The manifest is written before the state (docs/PROTOCOL.md §2.7): wait for the state too.
    let state_of = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(r.join("conductor/state/wf_pay_2.json")).unwrap())
            .unwrap()
    };
    wait_fs("the aborted state", || state_of()["status"] == "aborted");
    let st = state_of();
    assert_eq!(st["failure_reason"], "e2e abort");
    t.wait("the aborted status on screen", |s| s.contains("✗ aborted"));

    // Quit: the alternate screen is left and the shell's earlier output is back.
    t.keys(&["q"]);
    let s = t.wait("the console to exit", |s| {
        s.contains("EXITED=0") && s.contains("icanon")
    });
    assert!(s.contains("SHELL-BEFORE"), "{s}");
    assert!(!t.alternate_on());
    assert!(s.contains("\nicanon"), "line editing is back: {s}");
}

#[test]
fn console_names_an_overridden_stale_threshold_survives_resizes_and_quits_cleanly() {
    let root = fixture_root();
    let (t, _log) = console(root.path(), "PANTHEON_STALE_AFTER_SECS=6", "--read-only");
    t.wait("the console", |s| {
        s.contains("READ-ONLY") && s.contains("wf_deploy_42")
    });
    // An overridden staleness threshold is said where staleness is shown.
    t.keys(&["5"]);
    t.wait("the workers pane naming the threshold", |s| {
        s.contains("5 Workers (") && s.contains("stale after 6s")
    });
    t.keys(&["1"]);
    t.tmux(&["resize-window", "-t", "main", "-x", "40", "-y", "10"]);
    t.wait("the too-small message", |s| {
        s.contains("Terminal too small")
    });
    t.tmux(&["resize-window", "-t", "main", "-x", "120", "-y", "30"]);
    t.wait("the console again", |s| s.contains("1 Workflows"));
    // A malformed file written mid-session is reported, never fatal.
    std::fs::write(
        root.path().join("conductor/state/wf_broken_9.json"),
        "{\"workflow_id\": ",
    )
    .unwrap();
    t.wait("the warning count", |s| s.contains("⚠ 4"));
    // Read-only: the abort key is refused with a message.
    t.keys(&["x"]);
    t.wait("the read-only refusal", |s| s.contains("read-only console"));
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn a_panic_in_the_console_still_gives_the_terminal_back() {
    let root = fixture_root();
    let (t, _log) = console(
        root.path(),
        "RUST_BACKTRACE=1 PANTHEON_TEST_PANIC_ON_KEY=!",
        "--read-only",
    );
    t.wait("the console", |s| s.contains("wf_deploy_42"));
    assert!(t.alternate_on());
    t.keys(&["!"]);
    t.wait("the console to die", |s| {
        s.contains("EXITED=101") && s.contains("icanon")
    });
    assert!(!t.alternate_on(), "still on the alternate screen");
    // The whole scrollback: the shell's line before, the panic and its backtrace, the shell after.
    let h = t.history();
    assert!(h.contains("SHELL-BEFORE"), "{h}");
    assert!(
        h.contains("test panic requested"),
        "the panic message is readable: {h}"
    );
    assert!(h.contains("\nicanon"), "raw mode is off again: {h}");
    // Nothing printed after the console is written over what it printed before.
    assert!(
        h.lines().any(|l| l.trim_end() == "EXITED=101"),
        "the shell's next line starts on a fresh line: {h}"
    );
}

#[test]
fn line_editor_clears_with_ctrl_u_and_takes_a_bracketed_paste() {
    let root = engine_root();
    let r = root.path();
    let (t, _log) = console(r, "", "");
    t.wait("the console", |s| s.contains("wf_pay_2"));
    // The abort reason: typed, cleared with C-u, then pasted (two lines become one).
    t.keys(&["g", "j", "x"]);
    t.wait("the reason prompt", |s| s.contains("Reason for aborting"));
    t.type_text("typo typo");
    t.wait("the typed text", |s| s.contains("> typo typo"));
    t.keys(&["C-u"]);
    t.wait("the cleared prompt", |s| {
        !s.contains("typo") && !s.contains("> u")
    });
    t.tmux(&["set-buffer", "-b", "e2e", "pasted\nreason"]);
    t.tmux(&["paste-buffer", "-p", "-b", "e2e", "-t", "main"]);
    t.wait("the pasted reason", |s| s.contains("> pasted reason"));
    t.keys(&["Enter"]);
    t.wait("the abort confirmation", |s| s.contains("pasted reason"));
    t.keys(&["Escape"]);
    t.wait("the cancelled abort", |s| s.contains("cancelled: Abort"));
    // The `:` line: C-w deletes a word, Tab completes a pane name, Enter runs it.
    t.keys(&[":"]);
    t.type_text("track zzz");
    t.wait("the typed command", |s| s.contains(":track zzz"));
    t.keys(&["C-u"]);
    t.type_text("pane loc");
    t.keys(&["Tab"]);
    t.wait("the completed pane", |s| s.contains(":pane locks ▏"));
    t.type_text("zz");
    t.keys(&["C-w", "Enter"]);
    t.wait("the locks pane", |s| s.contains("4 Locks ("));
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn detail_scrolls_with_g_and_pages_and_keeps_its_record() {
    let root = fixture_root();
    let (t, _log) = console(root.path(), "", "--read-only");
    t.tmux(&["resize-window", "-t", "main", "-x", "80", "-y", "24"]);
    t.wait("the console", |s| s.contains("wf_deploy_42"));
    t.keys(&["g", "j", "j", "Enter"]);
    t.wait("the detail", |s| s.contains("record 3/4 · lines 1-"));
    t.keys(&["G"]);
    let s = t.wait("the end of the detail", |s| {
        s.contains("record 3/4 · lines") && !s.contains("lines 1-")
    });
    assert!(s.contains("wf_deploy_42"), "G kept the record: {s}");
    t.keys(&["PPage", "g"]);
    t.wait("the top again", |s| s.contains("record 3/4 · lines 1-"));
    t.keys(&["J"]);
    t.wait("the next record", |s| s.contains("record 4/4"));
    // `q` in a detail goes back to the table, as it closes the overlays; from there it quits.
    t.keys(&["q"]);
    t.wait("the table again", |s| {
        s.contains("1 Workflows (4)") && !s.contains("record 4/4")
    });
    assert!(
        !t.screen().contains("EXITED="),
        "q in a detail does not quit"
    );
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn board_keys_on_a_completed_session_say_it_is_resolved_and_change_nothing() {
    let root = engine_root();
    let r = root.path();
    pantheon(
        r,
        &["board", "--track", "alpha", "resolve", "--force"],
        None,
    );
    let session = std::fs::read_dir(r.join("conductor/tracks/alpha/.message-bus/board"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("session-"))
        .map(|e| e.path())
        .expect("the session file");
    let before = std::fs::read(&session).unwrap();
    let (t, _log) = console(r, "", "");
    t.wait("the console", |s| s.contains("wf_pay_1"));
    t.keys(&["6"]);
    let s = t.wait("the resolved header", |s| {
        s.contains("resolved: ESCALATE by")
    });
    let footer = s
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        !footer.contains("next round") && !footer.contains("advance"),
        "{s}"
    );
    t.keys(&["n"]);
    t.wait("the refusal", |s| s.contains("✗ the session is resolved"));
    t.keys(&[">", "s"]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.screen().contains("[ Cancel ]"), "no confirmation opens");
    assert_eq!(
        std::fs::read(&session).unwrap(),
        before,
        "nothing was written"
    );
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn the_filter_finds_the_overdue_rows_by_the_word_on_screen() {
    let root = fixture_root();
    let (t, _log) = console(root.path(), "", "--read-only");
    t.wait("the console", |s| s.contains("wf_deploy_42"));
    t.keys(&["/"]);
    t.type_text("overdue");
    let s = t.wait("the filtered list", |s| s.contains("1 Workflows (1)"));
    assert!(s.contains("wf_deploy_42") && s.contains("OVERDUE"), "{s}");
    t.keys(&["Enter", "2", "/"]);
    t.type_text("overdue");
    t.wait("the overdue dispatch", |s| s.contains("Dispatches (1)"));
    t.keys(&["Enter", "q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

/// The rows of `ids` in the order they appear on `screen`.
fn order<'a>(screen: &str, ids: &[&'a str]) -> Vec<&'a str> {
    let mut at: Vec<(usize, &str)> = ids
        .iter()
        .map(|id| (screen.find(id).unwrap_or(usize::MAX), *id))
        .collect();
    at.sort();
    at.into_iter().map(|(_, id)| id).collect()
}

#[test]
fn sorting_by_a_column_with_its_capital_letter_and_with_sort() {
    let root = fixture_root();
    let (t, _log) = console(root.path(), "", "--read-only");
    let ids = ["wf_1a2b3c4d", "wf_bug_7", "wf_deploy_42", "wf_old_3"];
    let s = t.wait("the console", |s| s.contains("wf_deploy_42"));
    // The pane's own order: unfinished first, ids in natural order.
    assert_eq!(
        order(&s, &ids),
        ["wf_1a2b3c4d", "wf_bug_7", "wf_deploy_42", "wf_old_3"]
    );
    // Shift+A: by AGE, oldest first (no creation time sorts first); again: reversed.
    t.keys(&["A"]);
    let s = t.wait("sorted by age", |s| s.contains("by AGE ↑"));
    assert_eq!(
        order(&s, &ids),
        ["wf_old_3", "wf_deploy_42", "wf_bug_7", "wf_1a2b3c4d"],
        "{s}"
    );
    t.keys(&["A"]);
    let s = t.wait("reversed", |s| s.contains("by AGE ↓"));
    assert_eq!(
        order(&s, &ids),
        ["wf_1a2b3c4d", "wf_bug_7", "wf_deploy_42", "wf_old_3"],
        "{s}"
    );
    // `:sort god` for a column whose letter is taken (G is "bottom").
    t.keys(&[":"]);
    t.type_text("sort god");
    t.keys(&["Enter"]);
    let s = t.wait("sorted by god", |s| s.contains("by GOD ↑"));
    assert_eq!(
        order(&s, &["wf_old_3", "wf_deploy_42", "wf_bug_7", "wf_1a2b3c4d"]),
        ["wf_old_3", "wf_deploy_42", "wf_bug_7", "wf_1a2b3c4d"],
        "- before hephaestus, marvin, thoth: {s}"
    );
    // `h` hides the finished one.
    t.keys(&["h"]);
    let s = t.wait("finished hidden", |s| s.contains("1 finished hidden"));
    assert!(!s.contains("wf_old_3"), "{s}");
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn new_attention_items_reach_a_hook_once_each_and_the_terminal_as_osc_9() {
    let root = fixture_root();
    let r = root.path();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("hook-out.jsonl");
    let raw = work.path().join("raw.log");
    // A real script, as an operator would wire ntfy or Slack: it keeps what it is given.
    let hook = work.path().join("hook.sh");
    std::fs::write(&hook, "#!/bin/sh\ncat >> \"$1\"\n").unwrap();
    let extra = format!(
        "--read-only --bell --notify-desktop --notify-every 1 --on-attention 'sh {} {}'",
        hook.display(),
        out.display()
    );
    let (t, _log) = console(r, "", &extra);
    t.wait("the console", |s| s.contains("1 Workflows"));
    // capture-pane drops escape sequences: the raw output is piped to a file.
    t.tmux(&[
        "pipe-pane",
        "-t",
        "main",
        "-o",
        &format!("cat >> {}", raw.display()),
    ]);
    t.keys(&["7"]);
    t.wait("the attention pane", |s| s.contains("7 Attention ("));
    let lines = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    };
    let held = |hid: &str| {
        serde_json::json!({"handoff_id": hid, "workflow_id": "wf_n", "from_god": "thoth",
            "to_god": "apollo", "step": "build", "context": {"summary": "s"},
            "dispatched_at": chrono::Utc::now().to_rfc3339(), "ack_status": "unacked",
            "held_because": "rule guard"})
        .to_string()
    };
    let q = r.join("conductor/pending/_quarantine");
    // As the engine and the Python gods write: a temporary file renamed into place.
    let put = |name: &str, body: String| {
        let tmp = q.join(format!(".tmp-{name}"));
        std::fs::write(&tmp, body).unwrap();
        std::fs::rename(&tmp, q.join(name)).unwrap();
    };
    std::fs::create_dir_all(&q).unwrap();
    // What was there when the console opened is on screen: not announced.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        lines().is_empty(),
        "the baseline is not announced: {:?}",
        lines()
    );

    put("hof_flap_1.json", held("hof_flap_1"));
    t.wait("the held item", |s| s.contains("hof_flap_1"));
    wait_fs("the hook's first line", || lines().len() == 1);
    let first = &lines()[0];
    assert_eq!(first["kind"], "held");
    assert_eq!(first["ids"]["handoff_id"], "hof_flap_1");
    assert!(first["reason"].as_str().unwrap().contains("rule guard"));
    assert!(first["since"].is_string());

    // The cause flaps: gone, back. It was announced once and is not announced again.
    std::fs::remove_file(q.join("hof_flap_1.json")).unwrap();
    t.wait("the item gone", |s| !s.contains("hof_flap_1"));
    put("hof_flap_1.json", held("hof_flap_1"));
    t.wait("the item back", |s| s.contains("hof_flap_1"));
    put("hof_new_2.json", held("hof_new_2"));
    wait_fs("the hook's second line", || lines().len() >= 2);
    std::thread::sleep(Duration::from_millis(1500));
    let ids: Vec<String> = lines()
        .iter()
        .map(|l| format!("{} {}", l["kind"], l["ids"]["handoff_id"]))
        .collect();
    assert_eq!(ids, [r#""held" "hof_flap_1""#, r#""held" "hof_new_2""#]);

    let raw_out = String::from_utf8_lossy(&std::fs::read(&raw).unwrap()).into_owned();
    assert!(
        // The kind said once, in words (it read `held: held for approval`).
        raw_out.contains("\x1b]9;pantheon: held for approval (rule guard)"),
        "no OSC 9 in the raw output"
    );
    assert!(raw_out.contains('\x07'));
    // The history keeps what was announced.
    t.type_text(":messages");
    t.keys(&["Enter"]);
    t.wait("the messages", |s| s.contains("▲ notified: held"));
    // Escape and q sent together can arrive as one Alt-q: close the overlay first.
    t.keys(&["Escape"]);
    t.wait("the messages closed", |s| !s.contains("any key closes"));
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

/// The operator's config is read from `$XDG_CONFIG_HOME/pantheon/config.toml` (here `yank` is on
/// `Y`); the yank reaches the terminal as OSC 52 (checked in the raw output with `pipe-pane`, since
/// `capture-pane` drops it); a click through tmux's mouse reporting opens a tab.
#[test]
fn yank_writes_osc52_a_remapped_key_works_and_a_mouse_click_opens_a_tab() {
    let root = engine_root();
    let r = root.path();
    let xdg = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(xdg.path().join("pantheon")).unwrap();
    std::fs::write(
        xdg.path().join("pantheon/config.toml"),
        "[keys]\nyank = \"Y\"\n[theme]\nname = \"light\"\n",
    )
    .unwrap();
    let raw = xdg.path().join("raw.out");
    let (t, _log) = console(r, &format!("XDG_CONFIG_HOME={}", xdg.path().display()), "");
    t.wait("the console", |s| {
        s.contains("1 Workflows") && s.contains("wf_pay_1")
    });
    t.tmux(&[
        "pipe-pane",
        "-t",
        "main",
        "-o",
        &format!("cat >> {}", raw.display()),
    ]);
    t.wait("the remapped key in the footer", |s| s.contains("Y yank"));
    t.keys(&["Y"]);
    t.wait("the yank flash", |s| s.contains("yanked wf_pay_1"));
    // base64("wf_pay_1") = d2ZfcGF5XzE=
    let want = "\x1b]52;c;d2ZfcGF5XzE=\x07";
    wait_fs("the OSC 52 sequence in the raw output", || {
        std::fs::read(&raw)
            .map(|b| String::from_utf8_lossy(&b).contains(want))
            .unwrap_or(false)
    });
    // An SGR mouse press and release on the tab " 4 Locks " (column 36, row 2, 1-based).
    t.type_text("\x1b[<0;36;2M\x1b[<0;36;2m");
    t.wait("the Locks pane after the click", |s| {
        s.contains("4 Locks (") && s.contains("HOLDER")
    });
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn the_console_journals_its_actor_and_says_so_before_acting() {
    let root = engine_root();
    let r = root.path();
    // No USER or LOGNAME (a service, a container): `--actor` names who acts.
    let (t, _log) = console(r, "env -u USER -u LOGNAME", "--actor alice");
    t.wait("the console", |s| s.contains("wf_pay_1"));
    t.keys(&["2"]);
    t.wait("the inboxes", |s| s.contains("hof_20260614_aaa111"));
    t.keys(&["a", "Enter"]);
    t.wait("the confirmation naming the actor", |s| {
        s.contains("Journaled as alice") && s.contains("[ Cancel ]")
    });
    t.keys(&["Tab", "Enter"]);
    let archived = r.join("conductor/archive/hephaestus/hof_20260614_aaa111.json");
    wait_fs("the ack", || archived.exists());
    // The journal entry follows the act.
    let acked = || -> Option<serde_json::Value> {
        std::fs::read_to_string(r.join("conductor/journal.jsonl"))
            .ok()?
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["action"] == "ack")
    };
    wait_fs("the ack's journal entry", || acked().is_some());
    let entry = acked().unwrap();
    assert_eq!(entry["actor"], "alice", "{entry}");
    assert_eq!(entry["source"], "console", "{entry}");
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn a_hanging_hook_runs_one_at_a_time_and_does_not_outlive_the_console() {
    let root = engine_root();
    let r = root.path();
    let out = tempfile::tempdir().unwrap();
    let pids = out.path().join("pids");
    let hook = format!("echo $$ >> {}; exec sleep 300", pids.display());
    let (t, _log) = console(r, "", &format!("--notify-every 0 --on-attention '{hook}'"));
    t.wait("the console", |s| s.contains("wf_pay_1"));
    std::thread::sleep(Duration::from_millis(300));
    // Three new attention items, one after another: expired locks written by an agent.
    let file = r.join("conductor/tracks/alpha/.message-bus/locks.json");
    for i in 0..3 {
        let mut locks: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        locks[format!("src/expired_{i}.rs")] = serde_json::json!({
            "worker_id": "worker-9", "acquired_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-01T00:30:00Z"
        });
        std::fs::write(&file, locks.to_string()).unwrap();
        std::thread::sleep(Duration::from_millis(400));
    }
    wait_fs("the first hook run", || pids.exists());
    std::thread::sleep(Duration::from_millis(500));
    let started = std::fs::read_to_string(&pids).unwrap();
    assert_eq!(
        started.lines().count(),
        1,
        "one hook at a time while the first hangs: {started}"
    );
    let pid: u32 = started.trim().parse().unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    assert!(alive(pid), "the hook hangs");
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
    wait_fs("the hanging hook to go with the console", || !alive(pid));
}

#[test]
fn a_budget_warning_reaches_the_hook_once_per_crossing() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    pantheon(r, &["init"], None);
    std::fs::write(
        r.join("conductor/workflows/budgeted.yaml"),
        "workflow:\n  id: budgeted\n  version: \"1\"\n  budget: {cost_usd: 1}\n  steps:\n    \
         - id: research\n      god: thoth\n    - id: build\n      god: hephaestus\n    \
         - id: review\n      god: marvin\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("hook-out.jsonl");
    let hook = work.path().join("hook.sh");
    std::fs::write(&hook, "#!/bin/sh\ncat >> \"$1\"\n").unwrap();
    let extra = format!(
        "--read-only --notify-every 0 --on-attention 'sh {} {}'",
        hook.display(),
        out.display()
    );
    let (t, _log) = console(r, "", &extra);
    t.wait("the console", |s| s.contains("1 Workflows"));
    std::thread::sleep(Duration::from_millis(1000));
    let warnings = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("one JSON object a line"))
            .filter(|v| v["kind"] == "budget_warning")
            .collect()
    };
    // $0.85 of the workflow's $1: past the 80 % share, not reached (the dispatch is not held).
    let h = serde_json::json!({"handoff_id": "hof_20260614_b0b001", "workflow_id": "wf_hook_1",
        "from_god": "thoth", "to_god": "hephaestus", "step": "research",
        "routing": {"workflow_definition": "budgeted"},
        "context": {"summary": "Researched", "decisions": [], "artifacts": []},
        "usage": {"cost_usd": 0.85, "model": "claude-sonnet-4-5"}});
    pantheon(r, &["handoff", "submit", "-"], Some(&h.to_string()));
    assert!(
        r.join("conductor/pending/hephaestus/hof_20260614_b0b001.json")
            .exists()
    );
    wait_fs("the hook's budget warning", || warnings().len() == 1);
    let w = &warnings()[0];
    assert_eq!(w["ids"]["budget"], "wf_hook_1", "{w}");
    assert_eq!(w["ids"]["scope"], "workflow", "{w}");
    assert_eq!(w["ids"]["limit"], "1000000", "{w}");
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .contains("used 85% of its cost budget ($0.85 of $1.00"),
        "{w}"
    );
    t.keys(&["7"]);
    t.wait("the item in the Attention pane", |s| {
        s.contains("budget_warning")
    });
    // More usage on the same budget, still under its limit: the same crossing, no second run.
    let ack = serde_json::json!({"ack_id": "ack_20260614_b0b001", "handoff_id": "hof_20260614_b0b001",
        "status": "accepted", "usage": {"cost_usd": 0.05, "model": "claude-sonnet-4-5"}});
    pantheon(r, &["ack", "-"], Some(&ack.to_string()));
    let ledger = r.join("conductor/cost/ledger.jsonl");
    wait_fs("the ack's ledger line", || {
        std::fs::read_to_string(&ledger).is_ok_and(|l| l.lines().count() == 2)
    });
    t.wait("the ledger read", |s| s.contains("budget_warning"));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        warnings().len(),
        1,
        "one run per crossing: {:?}",
        warnings()
    );
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}

#[test]
fn a_suggested_snooze_is_replaced_by_what_is_typed() {
    let root = engine_root();
    let r = root.path();
    // One attention item: a file in an inbox that is no dispatch.
    std::fs::write(
        r.join("conductor/pending/hephaestus/broken.json"),
        "{not json",
    )
    .unwrap();
    let (t, _log) = console(r, "", "");
    t.wait("the console", |s| s.contains("wf_pay_2"));
    t.keys(&["7"]);
    t.wait("the attention item", |s| {
        s.contains("unreadable_file  conductor/pending")
    });
    t.keys(&["z"]);
    t.wait("the suggested snooze", |s| {
        s.contains("> ▏1h  (suggested: Enter takes it, typing replaces it)")
    });
    t.type_text("15m");
    let s = t.wait("the typed snooze", |s| s.contains("> 15m▏"));
    assert!(!s.contains("1h15m"), "{s}");
    let asked = chrono::Utc::now();
    t.keys(&["Enter"]);
    let s = t.wait("the snooze's flash", |s| {
        s.contains("snoozed unreadable file")
    });
    // Snoozed for 15 minutes, not 1h15m: the flash says for how long, in words.
    let long = s
        .split("snoozed unreadable file")
        .nth(1)
        .and_then(|rest| rest.split(" for ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no duration in the flash: {s}"));
    assert!(long == "15m" || long == "14m", "snoozed for {long}: {s}");
    let _ = asked;
    t.keys(&["q"]);
    t.wait("the console to exit", |s| s.contains("EXITED=0"));
}
