//! Shared helpers: a temp root, running the binary, building handoffs and acks, snapshots.

pub use crate::fixture_root::{copy_dir, fixture_root as fixture};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

/// The `pantheon` binary under test.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pantheon"))
}

/// A temp root (initialised unless `bare`), with its own HOME outside the root.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        let env = Self::bare();
        env.ok(&["init"], None);
        env
    }

    pub fn bare() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Self { dir, root, home }
    }

    /// A copy of the shared foreign fixture root.
    pub fn foreign() -> Self {
        let env = Self::bare();
        copy_dir(&fixture(), &env.root);
        env
    }

    /// A `std::process::Command` for the binary on this root, with a clean environment.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(bin());
        c.arg("--root").arg(&self.root).args(args);
        for v in [
            "PANTHEON_ROOT",
            "CONDUCTOR_BASE_DIR",
            "CONDUCTOR_HANDOFFS_DIR",
            "PANTHEON_CLEANUP_ROOTS",
            "PANTHEON_TEST_CRASH_AT",
            "PANTHEON_LINK_KEY_FILE",
            "XDG_CONFIG_HOME",
        ] {
            c.env_remove(v);
        }
        c.env("HOME", &self.home);
        c
    }

    pub fn run(&self, args: &[&str], stdin: Option<&Value>) -> Output {
        let mut c = assert_cmd::Command::from_std(self.command(args));
        if let Some(v) = stdin {
            c.write_stdin(serde_json::to_vec(v).unwrap());
        }
        c.output().unwrap()
    }

    /// Runs and expects success; returns the JSON printed.
    pub fn ok(&self, args: &[&str], stdin: Option<&Value>) -> Value {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "pantheon {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Runs and expects a refusal (exit 1, `error: …`); returns stderr.
    pub fn refused(&self, args: &[&str], stdin: Option<&Value>) -> String {
        let out = self.run(args, stdin);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(1),
            "pantheon {args:?} should be refused; stdout: {}; stderr: {err}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(err.starts_with("error: "), "{err}");
        assert!(out.stdout.is_empty());
        err
    }

    pub fn submit(&self, h: &Value) -> Value {
        self.ok(&["handoff", "submit", "-"], Some(h))
    }

    pub fn ack(&self, a: &Value) -> Value {
        self.ok(&["ack"], Some(a))
    }

    pub fn state(&self, wf: &str) -> Value {
        self.ok(&["state", wf], None)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    pub fn read(&self, rel: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.path(rel)).unwrap()).unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Every file under the root with its bytes (lock files excluded: taking a lock creates one).
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        walk(&self.root, &mut |p| {
            let name = p.file_name().unwrap().to_string_lossy();
            if !name.ends_with(".lock") {
                let bytes = if p.is_symlink() {
                    std::fs::read_link(p)
                        .unwrap()
                        .to_string_lossy()
                        .as_bytes()
                        .to_vec()
                } else if p.is_dir() {
                    b"<dir>".to_vec()
                } else {
                    std::fs::read(p).unwrap()
                };
                out.insert(p.to_path_buf(), bytes);
            }
        });
        out
    }

    /// Asserts every `.json` file under the root parses.
    pub fn assert_all_json_valid(&self) {
        self.assert_all_json_valid_except(&[]);
    }

    /// Asserts every `.json` file under the root parses, except the (root-relative) ones named.
    pub fn assert_all_json_valid_except(&self, skip: &[&str]) {
        let skip: Vec<PathBuf> = skip.iter().map(|s| self.root.join(s)).collect();
        walk(&self.root, &mut |p| {
            if p.is_file()
                && p.extension().is_some_and(|e| e == "json")
                && !skip.iter().any(|s| s == p)
            {
                let bytes = std::fs::read(p).unwrap();
                assert!(
                    serde_json::from_slice::<Value>(&bytes).is_ok(),
                    "{} is not valid JSON",
                    p.display()
                );
            }
        });
    }
}

/// Visits every entry under `dir` (symbolic links are reported, never followed).
pub fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd {
        let p = e.unwrap().path();
        f(&p);
        if p.is_dir() && !p.is_symlink() {
            walk(&p, f);
        }
    }
}

/// A handoff with the given names; `gates` go to `context.gates_passed`.
pub fn handoff(hid: &str, wf: &str, from: &str, to: &str, step: &str, gates: &[&str]) -> Value {
    json!({
        "handoff_id": hid, "workflow_id": wf, "from_god": from, "to_god": to, "step": step,
        "context": {
            "summary": format!("{from} finished {step}"),
            "decisions": [format!("decision of {step}")],
            "artifacts": [format!("out/{wf}/{step}.md")],
            "open_questions": [], "gates_passed": gates,
        }
    })
}

/// A [`handoff`] routed by a definition (optionally to an explicit step).
pub fn def_handoff(mut h: Value, def: &str, target: Option<&str>) -> Value {
    h["routing"] = json!({"workflow_definition": def});
    if let Some(t) = target {
        h["routing"]["workflow_step"] = json!(t);
    }
    h
}

/// Thoth's `plan` of workflow `wf` in the test flow (its gate passed), handed to hephaestus as `hid`.
pub fn plan_handoff(hid: &str, wf: &str) -> Value {
    def_handoff(
        handoff(hid, wf, "thoth", "hephaestus", "plan", &["state_gate"]),
        "test-flow",
        None,
    )
}

pub fn ack(ack_id: &str, hid: &str, status: &str, message: &str) -> Value {
    json!({"ack_id": ack_id, "handoff_id": hid, "status": status, "message": message})
}

/// A simple test definition (written into the root) with every knob used by the tests.
pub const TEST_FLOW: &str = r#"
workflow:
  id: test-flow
  version: "2.0.0"
  steps:
    - id: plan
      god: thoth
      gates: [state_gate]
    - id: build
      god: hephaestus
      fallback_gods: [marvin, hermes]
      temp_artifacts: ["{root}/tmp/{workflow_id}/", "{root}/tmp/link-{workflow_id}"]
    - id: check
      god: iris
      gates: [logic_gate]
"#;

impl Env {
    /// An initialised root with `TEST_FLOW` installed and no sample rules (so routing is predictable).
    pub fn with_test_flow() -> Self {
        let env = Self::new();
        env.write("conductor/workflows/test-flow.yaml", TEST_FLOW);
        for e in std::fs::read_dir(env.path("conductor/rules")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        env
    }

    /// Starts workflow `wf` of definition `flow`: thoth's `plan` (with `gates` passed) handed to
    /// hephaestus as handoff `hid`. The submit's answer.
    pub fn start(&self, flow: &str, wf: &str, hid: &str, gates: &[&str]) -> Value {
        self.submit(&def_handoff(
            handoff(hid, wf, "thoth", "hephaestus", "plan", gates),
            flow,
            None,
        ))
    }

    /// A test-flow root with workflow `wf`'s `build` step dispatched to hephaestus as handoff `hid`.
    pub fn dispatched(wf: &str, hid: &str) -> Self {
        let env = Self::with_test_flow();
        env.submit(&plan_handoff(hid, wf));
        env
    }

    /// The entries of `conductor/journal.jsonl`, oldest first (blank lines skipped).
    pub fn journal_entries(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("conductor/journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Every directory a dispatch of `hid` lies in (inboxes, quarantine, dead letters, archive).
    pub fn copies(&self, hid: &str) -> Vec<String> {
        let file = format!("{hid}.json");
        let mut out = Vec::new();
        for top in [
            "conductor/pending",
            "conductor/dead",
            "conductor/archive",
            "conductor/retired",
        ] {
            for god in self.names(top) {
                let dir = format!("{top}/{god}");
                if self.names(&dir).contains(&file) {
                    out.push(dir);
                }
            }
        }
        out
    }

    /// Names of files in a directory under the root (sorted), empty if missing.
    pub fn names(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}
