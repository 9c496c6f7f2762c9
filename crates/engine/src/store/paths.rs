//! The root and every path in it. Paths are built only from validated ids, and any path that comes
//! from input (artifacts, temp artifacts) is checked to lie inside the allowed roots.

use crate::error::Refusal;
use std::path::{Component, Path, PathBuf};

use super::ids::{GodName, HandoffId, StepId, TrackName, WorkflowId};
use super::layout as L;
use super::settings::Settings;

/// The pantheon root and the directories derived from it (docs/PROTOCOL.md §1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The root directory itself: `$PANTHEON_ROOT` or `--root`, resolved once.
    pub dir: PathBuf,
    /// `$CONDUCTOR_BASE_DIR`, default `{root}/conductor`.
    pub conductor: PathBuf,
    /// `$CONDUCTOR_HANDOFFS_DIR`, default `{root}/shared/handoffs`.
    pub handoffs: PathBuf,
    /// `$PANTHEON_CLEANUP_ROOTS`: extra directories where cleanup may delete and abort may mark.
    pub cleanup_roots: Vec<PathBuf>,
    /// The protocol settings shared by every process on this root (defaults, `conductor/config.yaml`,
    /// environment), read once when the root is built.
    pub settings: Settings,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The user's home directory, if known.
pub fn home_dir() -> Option<PathBuf> {
    env_path("HOME")
}

/// Makes `p` absolute (relative to the current directory) and lexically normalised.
pub fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(p)
    };
    normalize(&p)
}

/// Removes `.` and resolves `..` lexically (never above `/`).
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `p` with its deepest existing ancestor resolved (symbolic links followed) and the missing rest
/// appended, so a path below a link that does not exist yet is still judged by where it would land.
fn resolve_existing(p: &Path) -> PathBuf {
    let p = normalize(p);
    let mut missing = Vec::new();
    let mut cur = p.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(cur) {
            return missing.iter().rev().fold(real, |acc, n| acc.join(n));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                cur = parent;
            }
            _ => return p,
        }
    }
}

/// Why a path is never deleted by cleanup, if it is one of those: the path (already resolved) is, contains
/// or lies inside a protocol directory (`conductor/`, `shared/handoffs/`, the bus directories in
/// `conductor/tracks/`), or contains the root or a cleanup root.
fn protected_reason(root: &Root, real: &Path) -> Option<String> {
    for (dir, what) in [
        (&root.conductor, "the Conductor's directory"),
        (&root.handoffs, "the handoffs directory"),
    ] {
        if real.starts_with(dir) {
            return Some(format!("it lies inside {what} {}", dir.display()));
        }
        if dir.starts_with(real) {
            return Some(format!("it contains {what} {}", dir.display()));
        }
    }
    root.anchors()
        .into_iter()
        .find(|a| a.starts_with(real))
        .map(|a| format!("it contains the root or a cleanup root ({})", a.display()))
}

/// Why a definition's `temp_artifacts` entry is refused at load, if it is: judged lexically on the
/// default layout (`{root}/conductor`, `{root}/shared/handoffs`, the root and anything above it).
pub(crate) fn protocol_temp_artifact(raw: &str) -> Option<String> {
    let fake = Root {
        dir: PathBuf::from("/ROOT"),
        conductor: PathBuf::from("/ROOT/conductor"),
        handoffs: PathBuf::from("/ROOT/shared/handoffs"),
        cleanup_roots: Vec::new(),
        settings: Settings::default(),
    };
    let s = raw
        .replace("{workflow_id}", "wf_x")
        .replace("{root}", "/ROOT");
    if s.starts_with('~') {
        return None;
    }
    let p = if s.starts_with('/') {
        normalize(Path::new(&s))
    } else {
        normalize(&fake.dir.join(s))
    };
    protected_reason(&fake, &p).map(|r| r.replace("/ROOT", "{root}"))
}

impl Root {
    /// A root at `root` with the default sub-directories and no extra cleanup roots. The root is
    /// resolved once here (a root that is itself a link is followed now, never again), so every later
    /// check treats the resolved directory as the root (docs/THREAT-MODEL.md).
    ///
    /// Its settings are read from `conductor/config.yaml` and the environment (see [`Settings::load`]).
    pub fn at(root: impl AsRef<Path>) -> Self {
        let dir = resolve_existing(&absolute(root.as_ref()));
        let mut r = Self {
            conductor: dir.join(L::CONDUCTOR_DIR),
            handoffs: dir.join(L::SHARED_DIR).join(L::HANDOFFS_DIR),
            dir,
            cleanup_roots: Vec::new(),
            settings: Settings::default(),
        };
        r.settings = Settings::load(&r);
        r
    }

    /// The same root with `settings` in place of the ones read from its config and the environment
    /// (the demo compresses staleness this way; tests shorten timeouts).
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// `conductor/config.yaml`: the protocol settings shared by every process on the root.
    pub fn config_path(&self) -> PathBuf {
        self.conductor.join("config.yaml")
    }

    /// The root from `--root` if given, else `$PANTHEON_ROOT`, else `~/pantheon`, with the
    /// `CONDUCTOR_BASE_DIR`, `CONDUCTOR_HANDOFFS_DIR` and `PANTHEON_CLEANUP_ROOTS` overrides, each
    /// resolved once here and then treated as a root of its own.
    pub fn from_env(explicit: Option<&Path>) -> Self {
        let root = explicit
            .map(Path::to_path_buf)
            .or_else(|| env_path("PANTHEON_ROOT"))
            .or_else(|| home_dir().map(|h| h.join("pantheon")))
            .unwrap_or_else(|| PathBuf::from("pantheon"));
        let mut r = Self::at(root);
        if let Some(c) = env_path("CONDUCTOR_BASE_DIR") {
            r.conductor = resolve_existing(&absolute(&c));
        }
        if let Some(h) = env_path("CONDUCTOR_HANDOFFS_DIR") {
            r.handoffs = resolve_existing(&absolute(&h));
        }
        if let Ok(list) = std::env::var("PANTHEON_CLEANUP_ROOTS") {
            r.cleanup_roots = std::env::split_paths(&list)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| resolve_existing(&absolute(&p)))
                .collect();
        }
        r.settings = Settings::load(&r);
        r
    }

    /// The directories writes are anchored at: the root, and each of `conductor`, `handoffs` and the
    /// cleanup roots that lies outside it. Below an anchor no symbolic link is ever followed.
    pub(crate) fn anchors(&self) -> Vec<PathBuf> {
        let mut v = vec![self.dir.clone()];
        for p in [&self.conductor, &self.handoffs]
            .into_iter()
            .chain(self.cleanup_roots.iter())
        {
            if !p.starts_with(&self.dir) && !v.contains(p) {
                v.push(p.clone());
            }
        }
        v
    }

    /// Refuses a write, move or removal of `path` when it lies outside every anchor or when a
    /// component of its directory below the anchor is a symbolic link (see `super::safe`). Creates
    /// nothing.
    pub(crate) fn check_write(&self, path: &Path) -> Result<(), Refusal> {
        let path = absolute(path);
        if self.anchors().contains(&path) {
            return Ok(());
        }
        match super::safe::SafeDir::parent_of(self, &path, false) {
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string().into()),
        }
    }

    /// The handoff JSON schema in `shared/handoffs/`, which every handoff is checked against.
    pub(crate) fn schema_path(&self) -> PathBuf {
        self.handoffs.join(L::SCHEMA_FILE)
    }
    /// `shared/handoffs/{workflow_id}/`: the handoffs of one workflow.
    pub(crate) fn handoff_dir(&self, wf: &WorkflowId) -> PathBuf {
        self.handoffs.join(wf.as_str())
    }
    /// `shared/handoffs/{workflow_id}/{step}.json`: the latest handoff for a step.
    pub(crate) fn handoff_path(&self, wf: &WorkflowId, step: &StepId) -> PathBuf {
        self.handoff_dir(wf).join(format!("{step}.json"))
    }
    /// `shared/handoffs/{workflow_id}/{step}.{handoff_id}.json`: an earlier handoff for a step.
    pub(crate) fn handoff_history_path(
        &self,
        wf: &WorkflowId,
        step: &StepId,
        id: &HandoffId,
    ) -> PathBuf {
        self.handoff_dir(wf).join(format!("{step}.{id}.json"))
    }
    /// `conductor/workflows/`: the workflow definitions.
    pub fn workflows_dir(&self) -> PathBuf {
        self.conductor.join(L::WORKFLOWS_DIR)
    }
    /// `conductor/rules/`: the routing rules.
    pub(crate) fn rules_dir(&self) -> PathBuf {
        self.conductor.join(L::RULES_DIR)
    }
    /// `conductor/state/`: one state file per workflow.
    pub fn state_dir(&self) -> PathBuf {
        self.conductor.join(L::STATE_DIR)
    }
    /// `conductor/state/{workflow_id}.json`: a workflow's state.
    pub fn state_path(&self, wf: &WorkflowId) -> PathBuf {
        self.state_dir().join(format!("{wf}.json"))
    }
    /// `conductor/state/{workflow_id}.aborted.json`: the abort manifest.
    pub(crate) fn abort_manifest_path(&self, wf: &WorkflowId) -> PathBuf {
        self.state_dir().join(format!("{wf}{}", L::ABORTED_SUFFIX))
    }
    /// `conductor/state/.{workflow_id}.lock`: serialises every mutation of one workflow.
    pub(crate) fn workflow_lock_path(&self, wf: &WorkflowId) -> PathBuf {
        self.state_dir().join(format!(".{wf}{}", L::LOCK_SUFFIX))
    }
    /// `conductor/paused.json`: the pauses in force (docs/PROTOCOL.md §2.14).
    pub fn paused_path(&self) -> PathBuf {
        self.conductor.join(L::PAUSED_FILE)
    }
    /// `conductor/.paused.lock`: taken for every rewrite of `paused.json`.
    pub(crate) fn paused_lock_path(&self) -> PathBuf {
        self.conductor
            .join(format!("{}{}", L::PAUSED_LOCK, L::LOCK_SUFFIX))
    }
    /// `conductor/pending/`: the inboxes.
    pub fn pending_root(&self) -> PathBuf {
        self.conductor.join(L::PENDING_DIR)
    }
    /// `conductor/pending/{god}/`: one god's inbox.
    pub fn inbox_dir(&self, god: &GodName) -> PathBuf {
        self.pending_root().join(god.as_str())
    }
    /// `conductor/pending/_quarantine/`: dispatches held for an operator.
    pub fn quarantine_dir(&self) -> PathBuf {
        self.pending_root().join(L::QUARANTINE_DIR)
    }
    /// `conductor/archive/`: dispatches done with.
    pub(crate) fn archive_root(&self) -> PathBuf {
        self.conductor.join(L::ARCHIVE_DIR)
    }
    /// `conductor/archive/{god}/`: one god's archived dispatches.
    pub(crate) fn archive_dir(&self, god: &GodName) -> PathBuf {
        self.archive_root().join(god.as_str())
    }
    /// `conductor/dead`: dispatches out of deliveries (docs/PROTOCOL.md §2.10).
    pub fn dead_root(&self) -> PathBuf {
        self.conductor.join("dead")
    }
    /// `conductor/dead/{god}`.
    pub fn dead_dir(&self, god: &GodName) -> PathBuf {
        self.dead_root().join(god.as_str())
    }
    /// `conductor/bridge/`: the bridge's own files (inbound ledger, dead letters, status).
    pub(crate) fn bridge_dir(&self) -> PathBuf {
        self.conductor.join("bridge")
    }
    /// `conductor/bridge/dead/`: messages the bridge refused (inbound and shared-track lines), and
    /// outbox records no peer took, with why.
    pub(crate) fn bridge_dead_dir(&self) -> PathBuf {
        self.bridge_dir().join("dead")
    }
    /// `conductor/retired`: dead letters that ended, per god (docs/PROTOCOL.md §2.10).
    pub fn retired_root(&self) -> PathBuf {
        self.conductor.join(L::RETIRED_DIR)
    }
    /// `conductor/retired/{god}`.
    pub fn retired_dir(&self, god: &GodName) -> PathBuf {
        self.retired_root().join(god.as_str())
    }
    /// `conductor/timers`: one file per accepted dispatch whose step `timeout` the supervisor enforces
    /// (docs/PROTOCOL.md §2.10).
    pub fn timers_dir(&self) -> PathBuf {
        self.conductor.join("timers")
    }
    /// `conductor/approvals`: the approval links' records (docs/PROTOCOL.md §2.15).
    pub fn approvals_dir(&self) -> PathBuf {
        self.conductor.join(L::APPROVALS_DIR)
    }
    /// `conductor/approvals/listener.json`: the address `serve --approvals` listens on.
    pub fn approvals_listener_path(&self) -> PathBuf {
        self.approvals_dir().join(L::APPROVALS_LISTENER_FILE)
    }
    /// `conductor/supervisor`: the heartbeats of running supervisors (`pantheon serve`).
    pub fn supervisor_dir(&self) -> PathBuf {
        self.conductor.join("supervisor")
    }
    /// `conductor/tracks/`: the per-track buses.
    pub fn tracks_dir(&self) -> PathBuf {
        self.conductor.join(L::TRACKS_DIR)
    }
    /// `conductor/tracks/{track}/.message-bus`.
    pub fn bus_dir(&self, track: &TrackName) -> PathBuf {
        self.tracks_dir().join(track.as_str()).join(L::BUS_DIR)
    }

    /// The directories where cleanup may delete and abort may mark: the root and `PANTHEON_CLEANUP_ROOTS`.
    pub(crate) fn allowed_roots(&self) -> Vec<PathBuf> {
        let mut v = vec![self.dir.clone()];
        v.extend(self.cleanup_roots.iter().cloned());
        v
    }

    /// Expands `{workflow_id}`, `{root}` and a leading `~`, and resolves a relative path against the root.
    pub fn expand(&self, raw: &str, wf: &WorkflowId) -> PathBuf {
        let s = raw
            .replace("{workflow_id}", wf.as_str())
            .replace("{root}", &self.dir.to_string_lossy());
        let p = if s == "~" || s.starts_with("~/") {
            match home_dir() {
                Some(h) => h.join(s.trim_start_matches('~').trim_start_matches('/')),
                None => PathBuf::from(s),
            }
        } else {
            PathBuf::from(s)
        };
        if p.is_absolute() {
            normalize(&p)
        } else {
            normalize(&self.dir.join(p))
        }
    }

    /// Checks that `path` lies strictly inside one of `Root::allowed_roots` once every symbolic link in
    /// its parent directories is resolved (the last component is never followed). Returns the path to act
    /// on, or why it is refused.
    pub fn confine(&self, path: &Path) -> Result<PathBuf, Refusal> {
        if path.as_os_str().as_encoded_bytes().contains(&0) {
            return Err("path contains a NUL byte".into());
        }
        let path = normalize(&absolute(path));
        let roots: Vec<PathBuf> = self
            .allowed_roots()
            .iter()
            .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| normalize(r)))
            .collect();
        let (parent, name) = match (path.parent(), path.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return Err("refusing the file-system root".into()),
        };
        let real_parent = resolve_existing(parent);
        let real = real_parent.join(name);
        if roots.contains(&real) {
            return Err("refusing to touch the root itself or a cleanup root".into());
        }
        if let Some(why) = protected_reason(self, &real) {
            return Err(format!("refusing a protocol path: {why}").into());
        }
        if roots.iter().any(|r| real.starts_with(r)) {
            Ok(real)
        } else {
            Err(format!(
                "outside the root and PANTHEON_CLEANUP_ROOTS ({})",
                real.display()
            )
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_refuses_escapes_and_the_root_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let wf = WorkflowId::parse("wf_x").unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        assert!(
            root.confine(&root.expand("{root}/tmp/{workflow_id}/", &wf))
                .is_ok()
        );
        assert!(root.confine(&root.expand("tmp/../../etc", &wf)).is_err());
        assert!(root.confine(Path::new("/")).is_err());
        assert!(root.confine(&root.expand("{root}", &wf)).is_err());
        assert!(root.confine(&root.expand("{root}/", &wf)).is_err());
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        // The link itself may be removed (it is inside), but nothing reached through it.
        assert!(root.confine(&dir.path().join("link")).is_ok());
        assert!(root.confine(&dir.path().join("link/file")).is_err());
    }
}
