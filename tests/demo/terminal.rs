//! `pantheon demo` in a real terminal (tmux): the console opens on the simulated root, an operator's
//! keys (force-unlock a deadlock, approve a held dispatch, resolve the board) change the run and the
//! simulation reacts, and quitting prints the kept root.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{json_files_under, pantheon, queue};
use crate::tmux::Tmux;

/// The demo on `root` in a fresh tmux window; the shell prints `EXITED=code` when it has gone. Its
/// screen changes continuously, so keys are paced and waits are long.
fn demo(root: &Path) -> Tmux {
    let bin = assert_cmd::cargo::cargo_bin("pantheon");
    let log = root.with_extension("log");
    let script = format!(
        "unset PANTHEON_STALE_AFTER_SECS PANTHEON_ROOT; PANTHEON_LOG={} {} demo --root {} --speed 3; echo EXITED=$?; sleep 600",
        log.display(),
        bin.display(),
        root.display()
    );
    let mut t = Tmux::start("demo-e2e", &script);
    t.deadline = Duration::from_secs(40);
    t.key_pause = Duration::from_millis(60);
    t
}

fn wait_fs(what: &str, pred: impl Fn() -> bool) {
    crate::tmux::wait_fs(what, Duration::from_secs(40), pred)
}

fn approvals(root: &Path) -> Vec<(String, Value)> {
    json_files_under(&root.join("conductor/state"))
        .into_iter()
        .flat_map(|(_, st)| {
            let wf = st["workflow_id"].as_str().unwrap_or_default().to_owned();
            st["approvals"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |a| (wf.clone(), a))
        })
        .collect()
}

#[test]
fn demo_in_a_terminal_follows_the_operators_keys_and_prints_the_kept_root_on_quit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let t = demo(&root);
    t.wait("the console on the demo root", |s| {
        s.contains("1 Workflows")
    });

    // A deadlock forms; the operator force-releases one of its locks from the Locks pane.
    t.wait("a deadlock", |s| s.contains("1 deadlock"));
    t.keys(&["4"]);
    t.wait("the locks pane", |s| s.contains("4 Locks"));
    t.keys(&["g"]);
    let mut unlocked = false;
    for _ in 0..12 {
        t.keys(&["u"]);
        // The dialog's button, not the words: the flash of the previous `cancelled: Force-unlock …`
        // is still on screen and would match before this dialog is drawn.
        let s = t.wait("the unlock dialog", |s| s.contains("[ Cancel ]"));
        if s.contains("Force-unlock src/checkout/cart.ts")
            || s.contains("Force-unlock src/checkout/pricing.ts")
        {
            t.keys(&["Tab", "Enter"]);
            unlocked = true;
            break;
        }
        t.keys(&["Escape"]);
        t.wait("the dialog closed", |s| !s.contains("[ Cancel ]"));
        t.keys(&["j"]);
    }
    assert!(
        unlocked,
        "could not select a deadlocked lock:\n{}",
        t.screen()
    );
    wait_fs("the forced FILE_UNLOCK and the worker's retry", || {
        let q = queue(&root, "checkout");
        q.iter()
            .any(|m| m["type"] == "FILE_UNLOCK" && m["payload"]["forced_by"] == "operator")
            && q.iter().any(|m| {
                m["type"] == "TASK_FAILED"
                    && m["payload"]["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("lost the lock"))
            })
    });

    // A held dispatch: the operator approves it; its god then takes it like any other.
    t.keys(&["2", "G", "Enter"]);
    t.wait("the quarantine", |s| s.contains("_quarantine"));
    t.keys(&["p"]);
    t.wait("the approve dialog", |s| {
        s.contains("Approve held dispatch")
    });
    t.keys(&["Tab", "Enter"]);
    wait_fs("an approval by the operator", || {
        !approvals(&root).is_empty()
    });
    let (wf, approval) = approvals(&root).remove(0);
    assert_eq!(approval["by"], "operator");
    let hid = approval["handoff_id"].as_str().unwrap().to_owned();
    let state = root.join(format!("conductor/state/{wf}.json"));
    wait_fs("the approved dispatch acked by its god", || {
        let st: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        st["acks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["handoff_id"] == hid.as_str() && a["by"] != "operator")
    });

    // The board waits at RESOLVING; the operator resolves it.
    t.keys(&["Escape", "6"]);
    t.wait("the board at RESOLVING", |s| s.contains("RESOLVING"));
    t.keys(&["s"]);
    t.wait("the resolve dialog", |s| s.contains("Cancel"));
    t.keys(&["Tab", "Enter"]);
    wait_fs("BOARD_RESOLVE by the operator", || {
        queue(&root, "checkout")
            .iter()
            .any(|m| m["type"] == "BOARD_RESOLVE" && m["source"] == "operator")
    });

    // Quit: the terminal is given back and the kept root is printed.
    t.keys(&["q"]);
    let s = t.wait("the exit", |s| s.contains("EXITED="));
    assert!(s.contains("EXITED=0"), "{s}");
    assert!(s.contains("the root is kept at"), "{s}");
    let out = pantheon()
        .arg("--root")
        .arg(&root)
        .arg("validate")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
