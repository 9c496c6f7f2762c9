//! One thread per source: it reads the source when its files change (notify, recursive on the
//! paths the source names) and on its poll interval (time alone can make an item due), keeps the
//! newest [`SourceState`], wakes the live model when a state changed, and answers an item. A
//! source's read never runs on the console's thread, so a slow or hung source costs its own thread
//! only: its state stays what it was and says since when.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use notify::{RecursiveMode, Watcher as _};

use super::{Answered, Health, Source, SourceError, SourceState, open, read_guarded, split_spec};

/// A burst of file events is read once, after this much quiet.
pub(crate) const QUIET: Duration = Duration::from_millis(3);
/// A burst is never held back longer than this.
pub(crate) const SETTLE_MAX: Duration = Duration::from_millis(15);
/// How long the console waits for a source to take an answer.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What the live model is woken with when a source's state changed.
pub(crate) type Wake = Arc<dyn Fn() + Send + Sync>;

enum Cmd {
    Changed,
    Answer {
        key: String,
        text: String,
        reply: Sender<Result<Answered, SourceError>>,
    },
    Stop,
}

/// The running sources.
pub struct SourceHub {
    states: Arc<Mutex<Arc<Vec<SourceState>>>>,
    workers: Vec<(Sender<Cmd>, Option<std::thread::JoinHandle<()>>)>,
}

impl std::fmt::Debug for SourceHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceHub")
            .field("sources", &self.workers.len())
            .finish()
    }
}

impl SourceHub {
    /// Starts one reader per spec (a spec that cannot be opened is a broken state from the start,
    /// never a refusal); `wake` is called after each change of a state.
    pub fn start(specs: &[String], wake: Wake) -> Self {
        let initial: Vec<SourceState> = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let (kind, location) = split_spec(spec).unwrap_or(("unknown", spec.as_str()));
                SourceState::pending(kind, location, i)
            })
            .collect();
        let states = Arc::new(Mutex::new(Arc::new(initial)));
        let mut workers = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            let source = open(spec);
            let ctx = Worker {
                index: i,
                states: states.clone(),
                wake: wake.clone(),
                tx: tx.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("pantheon-source-{i}"))
                .spawn(move || ctx.run(source, rx))
                .ok();
            workers.push((tx, thread));
        }
        Self { states, workers }
    }

    /// The newest state of every source, in the order given.
    pub fn states(&self) -> Arc<Vec<SourceState>> {
        lock(&self.states).clone()
    }

    /// Hands an answer to source `index`'s reader, which sends the result to `reply` itself
    /// (at once, when there is no such source or its reader stopped).
    pub fn send_answer(
        &self,
        index: usize,
        key: &str,
        text: &str,
        reply: Sender<Result<Answered, SourceError>>,
    ) {
        let Some((tx, _)) = self.workers.get(index) else {
            let _ = reply.send(Err(SourceError::new(format!("no source number {index}"))));
            return;
        };
        if let Err(mpsc::SendError(Cmd::Answer { reply, .. })) = tx.send(Cmd::Answer {
            key: key.to_owned(),
            text: text.to_owned(),
            reply,
        }) {
            let _ = reply.send(Err(SourceError::new("the source's reader has stopped")));
        }
    }

    /// Asks source `index` to answer item `key` with `text`, waiting at most `timeout`.
    pub fn answer(
        &self,
        index: usize,
        key: &str,
        text: &str,
        timeout: Duration,
    ) -> Result<Answered, SourceError> {
        let (reply, rx) = mpsc::channel();
        self.send_answer(index, key, text, reply);
        rx.recv_timeout(timeout).map_err(|_| {
            SourceError::new(format!(
                "the source did not take the answer within {} s; it may still arrive",
                timeout.as_secs()
            ))
        })?
    }
}

impl Drop for SourceHub {
    fn drop(&mut self) {
        for (tx, _) in &self.workers {
            let _ = tx.send(Cmd::Stop);
        }
        for (_, t) in &mut self.workers {
            // A reader stuck in a read (a hung server) is left to end with the process.
            if let Some(t) = t.take()
                && t.is_finished()
            {
                let _ = t.join();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Worker {
    index: usize,
    states: Arc<Mutex<Arc<Vec<SourceState>>>>,
    wake: Wake,
    tx: Sender<Cmd>,
}

impl Worker {
    fn run(self, source: Result<Box<dyn Source>, SourceError>, rx: Receiver<Cmd>) {
        let mut source = match source {
            Ok(s) => s,
            Err(e) => {
                self.publish(|s| s.absorb(Err(e), Utc::now(), Duration::ZERO));
                // Nothing to read: wait for the stop only.
                while let Ok(cmd) = rx.recv() {
                    match cmd {
                        Cmd::Stop => return,
                        Cmd::Answer { reply, .. } => {
                            let _ =
                                reply.send(Err(SourceError::new("the source cannot be opened")));
                        }
                        Cmd::Changed => {}
                    }
                }
                return;
            }
        };
        let mut watched = self.watch(source.watch_paths());
        let poll = source.poll_every().max(Duration::from_millis(100));
        self.read(source.as_mut());
        loop {
            match rx.recv_timeout(poll) {
                Ok(Cmd::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Cmd::Changed) => {
                    if !settle(&rx) {
                        return;
                    }
                }
                Ok(Cmd::Answer { key, text, reply }) => {
                    let r = source.answer(&key, &text);
                    let _ = reply.send(r);
                }
                Err(RecvTimeoutError::Timeout) => {
                    // A watched path that appeared since (a first team) gets its watch.
                    if watched.as_ref().is_some_and(|(_, missing)| *missing) {
                        watched = self.watch(source.watch_paths());
                    }
                }
            }
            self.read(source.as_mut());
        }
    }

    /// Watches `paths` recursively; the bool says some path did not exist yet.
    fn watch(&self, paths: Vec<PathBuf>) -> Option<(notify::RecommendedWatcher, bool)> {
        if paths.is_empty() {
            return None;
        }
        let tx = self.tx.clone();
        let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Reads (ours included) raise access events: only changes count.
            if let Ok(ev) = res
                && !matches!(ev.kind, notify::EventKind::Access(_))
            {
                let _ = tx.send(Cmd::Changed);
            }
        })
        .ok()?;
        let mut missing = false;
        for p in paths {
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                missing |= w.watch(&p, RecursiveMode::Recursive).is_err();
            } else {
                missing = true;
            }
        }
        Some((w, missing))
    }

    fn read(&self, source: &mut dyn Source) {
        let started = Instant::now();
        let r = read_guarded(source);
        let took = started.elapsed();
        self.publish(|s| s.absorb(r, Utc::now(), took));
    }

    /// Applies `change` to this source's state; wakes the model when what it shows changed.
    fn publish(&self, change: impl FnOnce(&mut SourceState)) {
        let changed = {
            let mut all = lock(&self.states);
            let mut next = (**all).clone();
            let Some(mine) = next.get_mut(self.index) else {
                return;
            };
            let before = (mine.health.clone(), mine.snapshot.clone());
            change(mine);
            let changed = before.0 != mine.health
                || (!Arc::ptr_eq(&before.1, &mine.snapshot) && *before.1 != *mine.snapshot);
            if !changed {
                // Same content: keep the old snapshot's allocation, only the read time moves.
                mine.snapshot = before.1;
            }
            *all = Arc::new(next);
            changed || matches!(before.0, Health::Pending)
        };
        if changed {
            (self.wake)();
        }
    }
}

/// Gathers a burst of change signals: returns at the first quiet moment, or after
/// [`SETTLE_MAX`]; false when told to stop.
fn settle(rx: &Receiver<Cmd>) -> bool {
    let started = Instant::now();
    loop {
        let left = SETTLE_MAX.saturating_sub(started.elapsed());
        if left.is_zero() {
            return true;
        }
        match rx.recv_timeout(QUIET.min(left)) {
            Ok(Cmd::Changed) => {}
            Ok(Cmd::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(Cmd::Answer { reply, .. }) => {
                // Answered after the read, in turn: asked again by the caller.
                let _ = reply.send(Err(SourceError::new(
                    "the source was busy reading; try again",
                )));
            }
            Err(RecvTimeoutError::Timeout) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source of this test: one agent, and an answerable item it answers by recording the text.
    struct Asking(Arc<Mutex<Vec<String>>>);

    impl Source for Asking {
        fn kind(&self) -> &'static str {
            "claude-teams"
        }
        fn location(&self) -> &str {
            "test"
        }
        fn read(&mut self) -> Result<super::super::Snapshot, SourceError> {
            Ok(super::super::Snapshot::default())
        }
        fn answer(&mut self, key: &str, text: &str) -> Result<Answered, SourceError> {
            lock(&self.0).push(format!("{key}={text}"));
            Ok(Answered {
                key: key.into(),
                detail: "sent".into(),
            })
        }
    }

    #[test]
    fn a_team_appearing_is_read_and_the_model_woken_without_a_poll() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("teams")).unwrap();
        let (tx, rx) = mpsc::channel();
        let wake: Wake = Arc::new(move || {
            let _ = tx.send(());
        });
        let hub = SourceHub::start(&[format!("claude-teams:{}", d.path().display())], wake);
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(hub.states()[0].health, Health::Ok);
        std::fs::create_dir_all(d.path().join("teams/t")).unwrap();
        std::fs::write(
            d.path().join("teams/t/config.json"),
            r#"{"members":[{"name":"a"}]}"#,
        )
        .unwrap();
        let started = Instant::now();
        loop {
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
            if hub.states()[0].snapshot.agents.len() == 1 {
                break;
            }
        }
        // Well under the 2 s poll: the watch saw it.
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
        // A read-only source refuses an answer, saying so.
        let e = hub
            .answer(0, "k", "yes", Duration::from_secs(5))
            .unwrap_err();
        assert!(e.reason.contains("read-only"), "{e}");
    }

    #[test]
    fn an_answer_reaches_the_source_through_its_thread() {
        let said = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let states = Arc::new(Mutex::new(Arc::new(vec![SourceState::pending(
            "claude-teams",
            "test",
            0,
        )])));
        let worker = Worker {
            index: 0,
            states: states.clone(),
            wake: Arc::new(|| {}),
            tx: tx.clone(),
        };
        let src: Box<dyn Source> = Box::new(Asking(said.clone()));
        let t = std::thread::spawn(move || worker.run(Ok(src), rx));
        let hub = SourceHub {
            states,
            workers: vec![(tx, Some(t))],
        };
        let a = hub
            .answer(0, "task-1", "use the staging key", Duration::from_secs(5))
            .unwrap();
        assert_eq!(a.detail, "sent");
        assert_eq!(*lock(&said), ["task-1=use the staging key"]);
    }
}
