//! Bounds on what hostile configuration can cost: a YAML alias bomb in a definition or a rule file is
//! refused quickly under a hard memory limit, never built.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use crate::common::*;

/// Address-space limit for the child: far above what the binary needs, far below what a bomb builds.
const MEMORY_LIMIT: u64 = 1 << 30;

/// 10,000 aliases of one anchored 10,000-item list: ~140 KB that expands to 10^8 nodes.
fn alias_bomb(prefix: &str) -> String {
    let mut s = String::from(prefix);
    s.push_str("anchor: &big\n");
    for _ in 0..10_000 {
        s.push_str("- lol\n");
    }
    s.push_str("copies:\n");
    for _ in 0..10_000 {
        s.push_str("- *big\n");
    }
    s
}

/// Runs the binary with an address-space limit; returns the output and how long it took.
fn run_limited(env: &Env, args: &[&str], stdin: Option<&str>) -> (std::process::Output, Duration) {
    let mut c = env.command(args);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY_LIMIT,
                rlim_max: MEMORY_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = Instant::now();
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (out, started.elapsed())
}

#[test]
fn an_alias_bomb_definition_is_refused_in_under_a_second_under_a_memory_limit() {
    let env = Env::new();
    let bomb = alias_bomb("");
    assert!(bomb.len() < 150_000, "{}", bomb.len());
    env.write("conductor/workflows/bomb.yaml", &bomb);
    let (out, took) = run_limited(&env, &["workflows"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = v["errors"].as_array().unwrap();
    let e = errors
        .iter()
        .find(|e| e["path"].as_str().unwrap().ends_with("bomb.yaml"))
        .unwrap_or_else(|| panic!("bomb.yaml not reported: {v}"));
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("alias") && msg.contains("100000 nodes"),
        "{msg}"
    );
    // The samples `init` installed still load beside it.
    assert!(v["workflows"].as_array().unwrap().len() >= 5, "{v}");
    // Generous for a loaded machine: the whole process, start to exit, usually takes well under a
    // second, and an expansion that is not cut short runs for minutes or dies of the memory limit.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn an_alias_bomb_rule_file_leaves_direct_submits_working_under_a_memory_limit() {
    let env = Env::new();
    env.write("conductor/rules/00-bomb.yaml", &alias_bomb("rules: []\n"));
    let h = handoff(
        "hof_20260614_0b0001",
        "wf_bomb_1",
        "thoth",
        "marvin",
        "notes",
        &[],
    );
    let (out, took) = run_limited(
        &env,
        &["handoff", "submit", "-"],
        Some(&serde_json::to_string(&h).unwrap()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("00-bomb.yaml") && warnings.contains("alias"),
        "{v}"
    );
    // Generous for a loaded machine: the whole process, start to exit, usually takes well under a
    // second, and an expansion that is not cut short runs for minutes or dies of the memory limit.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let (out, _) = run_limited(&env, &["rules"], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["errors"].to_string().contains("alias"), "{v}");
}
