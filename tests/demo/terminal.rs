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
    // The header's count can run ahead of the Locks pane (the cycle is seen on the bus first), and a
    // loaded machine draws the pane late: select only once the pane itself shows the cycle.
    t.wait("the cycle in the locks pane", |s| {
        s.contains("4 Locks") && s.contains("CYCLE src/checkout/")
    });
    let mut unlocked = false;
    let mut dialogs = Vec::new();
    // Each try starts again from the top (`g`) and goes `n` rows down: locks come and go while the
    // workers run, so a row reached by `j` from the last try may since have moved.
    for n in 0..12 {
        t.keys(&["g"]);
        for _ in 0..n % 6 {
            t.keys(&["j"]);
        }
        t.keys(&["u"]);
        // The dialog's button, not the words: the flash of the previous `cancelled: Force-unlock …`
        // is still on screen and would match before this dialog is drawn.
        let s = t.wait("the unlock dialog", |s| s.contains("[ Cancel ]"));
        dialogs.push(s.clone());
        if s.contains("Force-unlock src/checkout/cart.ts")
            || s.contains("Force-unlock src/checkout/pricing.ts")
        {
            t.keys(&["Tab", "Enter"]);
            unlocked = true;
            break;
        }
        t.keys(&["Escape"]);
        t.wait("the dialog closed", |s| !s.contains("[ Cancel ]"));
    }
    assert!(
        unlocked,
        "could not select a deadlocked lock:\n{}\nthe dialogs it saw, first and last:\n{}\n{}",
        t.screen(),
        dialogs.first().map(String::as_str).unwrap_or("none"),
        dialogs.last().map(String::as_str).unwrap_or("none"),
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
    let s = t.wait("the approve dialog", |s| {
        s.contains("Approve held dispatch") || s.contains("Raise the budgets of")
    });
    if !s.contains("Approve held dispatch") {
        // Held for the demo's budget: the raise is asked first; empty approves it as it is.
        t.keys(&["Enter"]);
        t.wait("the approve dialog", |s| {
            s.contains("Approve held dispatch")
        });
    }
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

/// The demo reads the operator's config the way `pantheon console` does (`$XDG_CONFIG_HOME`, or
/// `--config PATH`): a remapped pane key shows in the tab bar and works, `time = "local"` shows
/// wall-clock times, and `[notify] on_attention` runs the operator's hook for new attention items.
#[test]
fn demo_honours_the_operators_config_keys_time_and_notify() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let xdg = dir.path().join("xdg");
    let out = dir.path().join("hook-out.jsonl");
    let hook = dir.path().join("hook.sh");
    std::fs::write(&hook, "#!/bin/sh\ncat >> \"$1\"\n").unwrap();
    std::fs::create_dir_all(xdg.join("pantheon")).unwrap();
    std::fs::write(
        xdg.join("pantheon/config.toml"),
        format!(
            "[keys]\npane_9 = \"F9\"\n[theme]\nname = \"light\"\n[time]\nformat = \"local\"\n\
             [notify]\non_attention = \"sh {} {}\"\nrate_limit_secs = 1\n",
            hook.display(),
            out.display()
        ),
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("pantheon");
    let script = format!(
        "unset PANTHEON_STALE_AFTER_SECS PANTHEON_ROOT; XDG_CONFIG_HOME={} PANTHEON_LOG={} {} demo --root {} --speed 3; echo EXITED=$?; sleep 600",
        xdg.display(),
        root.with_extension("log").display(),
        bin.display(),
        root.display()
    );
    let mut t = Tmux::start("demo-config", &script);
    t.deadline = Duration::from_secs(40);
    t.key_pause = Duration::from_millis(60);
    let s = t.wait("the console on the demo root", |s| {
        s.contains("1 Workflows")
    });
    assert!(
        s.contains("F9 Dead letters"),
        "the remapped key in the tabs: {s}"
    );
    // Local wall-clock times (HH:MM:SS) in the workflows' AGE column, not "3s ago".
    t.wait("a local time", |s| {
        s.lines().any(|l| {
            l.contains("wf_")
                && l.split_whitespace().any(|w| {
                    w.len() == 8
                        && w.chars().enumerate().all(|(i, c)| {
                            if i == 2 || i == 5 {
                                c == ':'
                            } else {
                                c.is_ascii_digit()
                            }
                        })
                })
        })
    });
    t.keys(&["F9"]);
    t.wait("pane 9 by its remapped key", |s| {
        s.contains("9 Dead letters (")
    });
    // The help lists the remapped key.
    t.keys(&["?"]);
    t.wait("the help with F9", |s| {
        s.contains("go to pane 9 Dead letters")
    });
    t.keys(&["Escape"]);
    wait_fs("the operator's hook run for an attention item", || {
        std::fs::read_to_string(&out)
            .map(|s| s.lines().any(|l| l.contains("\"kind\"")))
            .unwrap_or(false)
    });
    t.keys(&["q"]);
    let s = t.wait("the exit", |s| s.contains("EXITED="));
    assert!(s.contains("EXITED=0"), "{s}");
}

#[test]
fn demo_with_a_bad_config_stops_before_the_terminal_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[keys]\nnot_an_action = \"x\"\n").unwrap();
    let out = pantheon()
        .arg("--root")
        .arg(dir.path().join("root"))
        .args(["demo", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
    assert!(
        !dir.path().join("root").exists(),
        "no root is made for a config that cannot be used"
    );
}
