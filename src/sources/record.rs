//! The sources' states kept in the root's history, so the time machine shows foreign items as they
//! were. A recorder that reads sources (`pantheon --source … record`) writes each source's state to
//! `conductor/sources/{n}.json` (its `n`-th source) when what it shows changed, atomically, at most
//! once per [`EVERY`]; the history records that file's versions like any file of the root, and the
//! console's replay reads the files of the moment it shows back as that moment's sources
//! ([`recorded`]). A state records the source's health and its agents, tasks, locks, waiting items
//! and costs whole, and its newest [`MAX_RECORDED_MESSAGES`] messages.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::hub::SourceHub;
use super::{Health, KINDS, Snapshot, SourceState, files};
use crate::engine::{Root, layout, write_atomic};

/// Most messages a recorded state keeps (the newest).
pub(crate) const MAX_RECORDED_MESSAGES: usize = 200;
/// A source's state is written at most this often.
pub(crate) const EVERY: Duration = Duration::from_millis(500);
/// Largest recorded state read back.
const MAX_RECORD_BYTES: u64 = 32 * 1024 * 1024;

/// `conductor/sources/`.
pub(crate) fn dir(root: &Root) -> PathBuf {
    root.conductor.join(layout::SOURCES_DIR)
}

/// A state as recorded: what `pantheon sources` says of it, and its snapshot (messages cut to the
/// newest [`MAX_RECORDED_MESSAGES`]).
pub(crate) fn to_record(s: &SourceState) -> Value {
    let mut snap: Snapshot = (*s.snapshot).clone();
    if snap.messages.len() > MAX_RECORDED_MESSAGES {
        snap.messages.sort_by_key(|m| std::cmp::Reverse(m.at));
        snap.messages.truncate(MAX_RECORDED_MESSAGES);
    }
    let mut v = s.to_json();
    if let Some(m) = v.as_object_mut() {
        m.insert("index".into(), s.index.into());
        m.insert(
            "snapshot".into(),
            serde_json::to_value(&snap).unwrap_or(Value::Null),
        );
    }
    v
}

/// A recorded state read back; `None` when it is not one.
pub(crate) fn from_record(v: &Value) -> Option<SourceState> {
    let text = |k: &str| v.get(k).and_then(Value::as_str);
    let kind = KINDS.iter().copied().find(|k| Some(*k) == text("kind"))?;
    let location = files::clean(text("location").unwrap_or(""), files::MAX_TEXT);
    let index = usize::try_from(v.get("index")?.as_u64()?).ok()?;
    let at = |k: &str| {
        text(k)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let health = match text("health")? {
        "ok" => Health::Ok,
        "error" => Health::Error {
            reason: files::clean(text("reason").unwrap_or(""), files::MAX_REASON),
            since: at("since").unwrap_or(DateTime::UNIX_EPOCH),
        },
        _ => Health::Pending,
    };
    let snapshot: Snapshot = serde_json::from_value(v.get("snapshot")?.clone()).ok()?;
    Some(SourceState {
        kind,
        location,
        health,
        snapshot: Arc::new(clean(snapshot)),
        read_at: at("read_at"),
        took: v
            .get("took_ms")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && (0.0..1e9).contains(t))
            .map(|t| Duration::from_secs_f64(t / 1000.0)),
        index,
    })
}

/// A snapshot read from a file of the root: every string a row shows cleaned again (the file is
/// input like any other).
fn clean(mut s: Snapshot) -> Snapshot {
    let c = |t: &mut String| *t = files::clean(t, files::MAX_TEXT);
    for a in &mut s.agents {
        c(&mut a.name);
        a.group.as_mut().map(c);
        a.status.as_mut().map(c);
    }
    for m in &mut s.messages {
        c(&mut m.id);
        c(&mut m.from);
        m.to.iter_mut().for_each(c);
        m.subject.as_mut().map(c);
        m.group.as_mut().map(c);
        // A body keeps its lines: cleaned line by line.
        m.body = m
            .body
            .lines()
            .map(|l| files::clean(l, files::MAX_TEXT))
            .collect::<Vec<_>>()
            .join("\n");
    }
    for t in &mut s.tasks {
        c(&mut t.id);
        c(&mut t.title);
        c(&mut t.state);
        t.owner.as_mut().map(c);
        t.group.as_mut().map(c);
    }
    for l in &mut s.locks {
        c(&mut l.path);
        c(&mut l.holder);
    }
    for a in &mut s.attention {
        c(&mut a.key);
        c(&mut a.agent);
        c(&mut a.what);
    }
    for k in &mut s.costs {
        c(&mut k.team);
        c(&mut k.agent);
        k.models.iter_mut().for_each(c);
    }
    s
}

/// The states recorded under `conductor/` (a root's, or a replay's scratch root's), in their
/// order; a file that cannot be read as one is left out.
pub(crate) fn recorded(conductor: &Path) -> Vec<SourceState> {
    let dir = conductor.join(layout::SOURCES_DIR);
    let mut out: Vec<SourceState> = files::list_dir(&dir)
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _, is_dir)| !is_dir && name.ends_with(".json"))
        .filter_map(|(_, path, _)| {
            let bytes = files::read_bounded(&path, MAX_RECORD_BYTES).ok()??;
            from_record(&serde_json::from_slice(&bytes).ok()?)
        })
        .collect();
    out.sort_by_key(|s| s.index);
    out
}

/// Writes each state whose record differs from `last` (what was written before, by index);
/// returns how many were written.
pub fn write_states(
    root: &Root,
    states: &[SourceState],
    last: &mut Vec<Option<Value>>,
) -> crate::engine::Result<usize> {
    let dir = dir(root);
    let mut n = 0;
    for s in states {
        if matches!(s.health, Health::Pending) {
            continue;
        }
        let mut rec = to_record(s);
        // The read's time and length change on every read: what the source shows decides.
        let shown = {
            if let Some(m) = rec.as_object_mut() {
                m.remove("read_at");
                m.remove("took_ms");
            }
            rec.clone()
        };
        if last.len() <= s.index {
            last.resize(s.index + 1, None);
        }
        if last[s.index].as_ref() == Some(&shown) {
            continue;
        }
        if let Some(m) = rec.as_object_mut() {
            m.insert("read_at".into(), json!(s.read_at.map(|t| t.to_rfc3339())));
        }
        let bytes = serde_json::to_vec_pretty(&rec).unwrap_or_default();
        write_atomic(root, &dir.join(format!("{}.json", s.index)), &bytes)?;
        last[s.index] = Some(shown);
        n += 1;
    }
    Ok(n)
}

/// Removes the recorded states this recorder does not write: every `{n}.json` with `n` at or past
/// `keep` (a previous recorder's with more sources, or every one once `keep` is 0, when recording
/// stops), so the time machine does not show a source as it last was after nobody read it any more.
/// Names that are not a recorder's (`{n}.json`) are left alone. Returns how many went.
pub(crate) fn retire(root: &Root, keep: usize) -> crate::engine::Result<usize> {
    let Some(dir) = crate::engine::SafeDir::open(root, &dir(root), false)? else {
        return Ok(0);
    };
    let mut n = 0;
    let listed = files::list_dir(dir.path())
        .ok()
        .flatten()
        .unwrap_or_default();
    for (name, _, is_dir) in listed {
        let Some(index) = name
            .strip_suffix(".json")
            .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        if !is_dir && index >= keep && dir.remove_file(std::ffi::OsStr::new(&name))? {
            n += 1;
        }
    }
    if n > 0 {
        dir.sync()?;
    }
    Ok(n)
}

/// The sources read for a recorder: their readers, and a thread writing their states into the root
/// as they change. Dropping it stops both.
pub(crate) struct Recording {
    stop: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recording {
    /// Starts reading `specs` and recording their states into `root`; `warn` hears a write that
    /// failed (once per failing streak).
    pub(crate) fn start(root: &Root, specs: &[String], warn: Box<dyn Fn(String) + Send>) -> Self {
        let (wake_tx, wake_rx) = mpsc::channel::<()>();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let wake_tx2 = wake_tx.clone();
        let hub = SourceHub::start(
            specs,
            Arc::new(move || {
                let _ = wake_tx2.send(());
            }),
        );
        drop(wake_tx);
        let root = root.clone();
        let keep = specs.len();
        let thread = std::thread::Builder::new()
            .name("pantheon-source-record".into())
            .spawn(move || {
                let mut last = Vec::new();
                let mut failing = false;
                // A previous recorder's states past this one's sources end now; this one's end
                // when it stops.
                let retire = |keep: usize| {
                    if let Err(e) = retire(&root, keep) {
                        warn(format!(
                            "warning: cannot retire the recorded source states: {e}"
                        ));
                    }
                };
                retire(keep);
                loop {
                    match wake_rx.recv_timeout(EVERY) {
                        Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => return retire(0),
                    }
                    if stop_rx.try_recv() != Err(mpsc::TryRecvError::Empty) {
                        return retire(0);
                    }
                    match write_states(&root, &hub.states(), &mut last) {
                        Ok(_) => failing = false,
                        Err(e) if !failing => {
                            failing = true;
                            warn(format!("warning: cannot record a source's state: {e}"));
                        }
                        Err(_) => {}
                    }
                    std::thread::sleep(EVERY);
                    while wake_rx.try_recv().is_ok() {}
                }
            })
            .ok();
        Self { stop, thread }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reads_back_as_recorded_and_an_unchanged_one_is_not_written_again() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        std::fs::create_dir_all(&root.conductor).unwrap();
        let corpus =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/claude-teams/v2.1.39");
        let spec = format!("claude-teams:{}", corpus.display());
        let states = super::super::probe(&[spec], Duration::from_secs(10));
        let mut last = Vec::new();
        assert_eq!(write_states(&root, &states, &mut last).unwrap(), 1);
        assert_eq!(write_states(&root, &states, &mut last).unwrap(), 0);
        let back = recorded(&root.conductor);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].spec(), states[0].spec());
        assert_eq!(back[0].health, Health::Ok);
        assert_eq!(*back[0].snapshot, *states[0].snapshot);
        // A hostile record: escapes written out, a wrong kind left out.
        let mut v = to_record(&states[0]);
        v["snapshot"]["agents"][0]["name"] = "a\u{1b}[2Jb".into();
        let s = from_record(&v).unwrap();
        assert!(!s.snapshot.agents[0].name.contains('\u{1b}'));
        v["kind"] = "rm -rf".into();
        assert!(from_record(&v).is_none());
    }

    #[test]
    fn retiring_removes_a_recorders_states_past_its_sources_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        assert_eq!(retire(&root, 0).unwrap(), 0, "no directory, nothing to do");
        let dir = dir(&root);
        std::fs::create_dir_all(&dir).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("kept.json"), "{}").unwrap();
        for n in [
            "0.json",
            "1.json",
            "12.json",
            "notes.json",
            "1.json.tmp",
            ".json",
        ] {
            std::fs::write(dir.join(n), "{}").unwrap();
        }
        std::fs::create_dir(dir.join("3.json")).unwrap();
        // A link named as a state: removed as a link, never followed.
        std::os::unix::fs::symlink(outside.path().join("kept.json"), dir.join("2.json")).unwrap();
        assert_eq!(retire(&root, 1).unwrap(), 3);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".json", "0.json", "1.json.tmp", "3.json", "notes.json"]
        );
        assert!(outside.path().join("kept.json").exists());
        assert_eq!(retire(&root, 0).unwrap(), 1);
        assert!(!dir.join("0.json").exists());
    }
}
