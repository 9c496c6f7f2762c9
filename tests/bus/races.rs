//! Races between real processes on one track: `bus archive` while our CLI and the seed's Python
//! `post_message` append. Every message must end exactly once in one archive or the live queue.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Env, bin, driver, strict_lines};

/// A child killed (and reaped) when dropped, so none outlives a failed assertion.
struct Guard(Option<Child>);

impl Guard {
    fn wait_ok(mut self, what: &str) {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn running(&mut self) -> bool {
        self.0.as_mut().unwrap().try_wait().unwrap().is_none()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[test]
fn archives_racing_python_and_cli_posters_lose_and_double_no_message() {
    let env = Env::new();
    let bus = env.bus_dir();
    let n = 3000;
    let spawn = |mut c: Command| {
        Guard(Some(
            c.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ))
    };
    let mut cli = Command::new(bin());
    cli.arg("--root")
        .arg(env.root())
        .env_remove("PANTHEON_ROOT");
    cli.args(["bus", "--track", &env.track, "post", "PROGRESS"]);
    cli.args(["--source", "rs", "--count", &n.to_string()]);
    let mut py = Command::new("python3");
    py.arg(driver())
        .args(["post", bus.to_str().unwrap(), &n.to_string(), "py"]);
    let mut posters = [spawn(cli), spawn(py)];
    // Archive whatever the queue holds, again and again, while both post.
    let start = Instant::now();
    let mut archives = 0;
    while posters.iter_mut().any(Guard::running) {
        assert!(start.elapsed() < Duration::from_secs(60), "posters hang");
        if lines_in(&bus.join("queue.jsonl")) == 0 {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        env.ok(&["archive", "--track-id", &format!("a{archives}"), "--force"]);
        archives += 1;
    }
    let [cli, py] = posters;
    cli.wait_ok("pantheon bus post");
    py.wait_ok("python post_message");
    assert!(archives >= 2, "only {archives} archives ran while posting");

    // Every message once, whole, across the archives and the live queue.
    let mut files = vec![bus.join("queue.jsonl")];
    files.extend((0..archives).map(|i| bus.join(format!("queue.a{i}.archive.jsonl"))));
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_source: BTreeMap<String, usize> = BTreeMap::new();
    for f in &files {
        if !f.exists() {
            continue;
        }
        for m in strict_lines(f) {
            *ids.entry(m["id"].to_string()).or_default() += 1;
            *by_source
                .entry(m["source"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert!(ids.values().all(|&c| c == 1), "a message appears twice");
    assert_eq!(by_source.get("rs"), Some(&n), "{by_source:?}");
    assert_eq!(by_source.get("py"), Some(&n), "{by_source:?}");
    eprintln!("{archives} archives while {} messages were posted", 2 * n);
}
