//! The console in the past (`pantheon --at TS`, `:replay [TS]`): a thread that moves along the
//! root's history ([`Timeline`]), lays each moment out as a scratch root ([`scratch::Scratch`]) and
//! reads it with the same live model the present uses, so every pane shows the past unchanged. It
//! publishes a [`Frame`] (the snapshot and where the replay stands, [`scrub::ReplayView`]) for each
//! move: a step, a jump to a journal entry or an attention item, a seek, or playback at 1x to 50x.
//!
//! Nothing here writes to the root: the scratch root is a private temporary directory, removed
//! when the replay ends.

pub(crate) mod scratch;
pub(crate) mod scrub;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Instant;

use tokio::sync::watch;

use crate::engine::{
    Change, HistoryTree, Root, Timeline, apply_change, layout,
    time::{format_ts, instant},
};
use crate::live::model::{FIRST_CHUNK, LOAD_CHUNK};
use crate::live::snapshot::Snapshot;
use crate::live::{LiveModel, ModelOptions};

use scratch::Scratch;
pub(crate) use scrub::ReplayView;

/// What the console asks of the replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// Move this many changes (negative: back).
    Step(i64),
    /// Go to a moment (microseconds).
    Seek(i64),
    /// The next (true) or previous journal entry.
    Journal(bool),
    /// The next (true) or previous moment a new attention item appeared.
    Attention(bool),
    TogglePlay,
    Pause,
    Faster,
    Slower,
    /// Step through the supervisors' heartbeats too, or skip them again.
    Heartbeats,
}

/// `snap` with the foreign sources' states recorded at its moment (`conductor/sources/`, written by
/// a recorder that read them): the past shows foreign items as they were, never the live ones.
fn with_recorded_sources(snap: Arc<Snapshot>, scratch: &crate::engine::Root) -> Arc<Snapshot> {
    let recorded = crate::sources::record::recorded(&scratch.conductor);
    if recorded.is_empty() && snap.sources.is_empty() {
        return snap;
    }
    let mut s = (*snap).clone();
    s.sources = Arc::new(recorded);
    Arc::new(s)
}

/// One published state of the replay.
#[derive(Debug, Clone)]
pub struct Frame {
    pub snapshot: Arc<Snapshot>,
    pub view: ReplayView,
}

/// A message for the operator (an error when true).
pub(crate) type Note = (bool, String);

/// The most changes a jump to an attention item replays, each way.
pub(crate) const ATTENTION_BUDGET: u64 = 2_000;
/// Backward, the attention items are looked for in windows of this many changes.
const ATTENTION_WINDOW: u64 = 400;
/// A move that rewrites more files than this has the model read the whole scratch root again.
const RESCAN_OVER: usize = 2_000;

/// The running replay: its newest frame, its notes, and the way to move it. Dropping it stops the
/// thread and removes the scratch root.
pub struct ReplayHandle {
    pub frames: watch::Receiver<Arc<Frame>>,
    pub notes: tokio::sync::mpsc::UnboundedReceiver<Note>,
    cmds: Sender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Why the replay cannot show a moment or move there.
#[derive(Debug)]
pub enum ReplayError {
    /// The history refused, in the engine's words: a root never recorded, or the history's files
    /// for the moment over their bounds (naming the file).
    History(crate::engine::Error),
    /// The replay's thread could not start.
    Thread(std::io::Error),
    /// The replay's scratch root (where a recorded moment is laid out) could not be made.
    Scratch(std::io::Error),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::History(e) => e.fmt(f),
            ReplayError::Thread(e) => write!(f, "cannot start the replay: {e}"),
            ReplayError::Scratch(e) => write!(f, "cannot make the replay's scratch root: {e}"),
        }
    }
}

impl std::error::Error for ReplayError {}

impl From<crate::engine::Error> for ReplayError {
    fn from(e: crate::engine::Error) -> Self {
        ReplayError::History(e)
    }
}

impl ReplayHandle {
    /// Opens the history of `root` at moment `at_us` and publishes its first frame before
    /// returning; refused (with the engine's words) on a root never recorded or a moment the
    /// history cannot show (its files over their bounds, naming the file). A moment before the
    /// history starts opens at its first moment, with a note saying so.
    pub fn start(root: &Root, at_us: i64, opts: ModelOptions) -> Result<Self, ReplayError> {
        let worker = Worker::open(root, at_us, opts)?;
        let (frame_tx, frames) = watch::channel(Arc::new(worker.frame()));
        let (note_tx, notes) = tokio::sync::mpsc::unbounded_channel();
        if let Some(n) = before_note(at_us, worker.timeline.first_us()) {
            let _ = note_tx.send((false, n));
        }
        let (cmds, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pantheon-replay".into())
            .spawn(move || worker.run(rx, frame_tx, note_tx))
            .map_err(ReplayError::Thread)?;
        Ok(Self {
            frames,
            notes,
            cmds,
            thread: Some(thread),
        })
    }

    /// Asks the replay to move.
    pub fn send(&self, cmd: Cmd) {
        let _ = self.cmds.send(cmd);
    }

    /// The newest frame.
    pub fn latest(&self) -> Arc<Frame> {
        self.frames.borrow().clone()
    }
}

impl Drop for ReplayHandle {
    fn drop(&mut self) {
        // Closing the command channel ends the thread, which drops (removes) the scratch root.
        let (tx, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.cmds, tx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The timeline of `root`'s history; refused, with the engine's words, on a root never recorded.
/// (A moment before the history starts opens at its first moment: [`before_note`].)
pub(crate) fn timeline_at(root: &Root, _at_us: i64) -> Result<Timeline, ReplayError> {
    Ok(Timeline::open(root)?)
}

/// Checks that the history can show moment `at_us` (or its first moment, for a moment before it):
/// refused, with the engine's words, on a root never recorded or when the history's files for the
/// moment are over their bounds (naming the file). The console asks this before it takes the
/// terminal.
pub(crate) fn check_moment(root: &Root, at_us: i64) -> Result<(), ReplayError> {
    let mut timeline = timeline_at(root, at_us)?;
    let at_us = at_us.max(timeline.first_us());
    let pos = timeline.position_at(at_us)?;
    timeline.tree_at(pos)?;
    Ok(())
}

/// What the operator is told when the moment asked for, `at_us`, is before the history's first,
/// `first_us` (the replay opens at the first moment instead).
pub(crate) fn before_note(at_us: i64, first_us: i64) -> Option<String> {
    (at_us < first_us).then(|| {
        format!(
            "{} is before the history starts: showing its first moment, {}",
            format_ts(instant(at_us)),
            format_ts(instant(first_us))
        )
    })
}

/// A journal entry's words, as the scrub line shows them: `ack accepted wf_x by ops` (what was
/// done, what came of it, what it concerns, who did it). Control and bidirectional characters a
/// foreign writer put in are left out.
pub fn journal_words(entry: &serde_json::Value) -> Option<String> {
    fn s(v: Option<&serde_json::Value>) -> &str {
        v.and_then(serde_json::Value::as_str).unwrap_or("")
    }
    let action = s(entry.get("action"));
    if action.is_empty() {
        return None;
    }
    let targets = entry.get("targets");
    let target = ["workflow_id", "handoff_id", "track", "path", "outbox_id"]
        .iter()
        .map(|k| s(targets.and_then(|t| t.get(*k))))
        .find(|t| !t.is_empty())
        .or_else(|| {
            targets
                .and_then(serde_json::Value::as_object)
                .and_then(|m| m.values().find_map(serde_json::Value::as_str))
        })
        .unwrap_or("");
    let actor = s(entry.get("actor"));
    let words = [action, s(entry.get("outcome")), target]
        .into_iter()
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut words = if actor.is_empty() {
        words
    } else {
        format!("{words} by {actor}")
    };
    // A decision that came through an approval link says so: which channel, and who it proved.
    let channel = s(targets.and_then(|t| t.get("channel")));
    if !channel.is_empty() {
        words.push_str(&format!(" via {channel} link"));
        let approver = s(targets.and_then(|t| t.get("approver")));
        if !approver.is_empty() {
            words.push_str(&format!(", approver {approver}"));
        }
    }
    let shown: String = words
        .chars()
        .filter(|c| {
            !c.is_control() && !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .take(200)
        .collect();
    Some(shown)
}

/// `text` with every path inside directory `from` written inside `to` instead: `from` where it is
/// a whole path or a path's leading part (followed by `/`, the end, or a character no file name
/// of the scratch root continues with), never a longer name that merely starts the same.
pub(crate) fn map_root<'a>(text: &'a str, from: &str, to: &str) -> std::borrow::Cow<'a, str> {
    if from.is_empty() || !text.contains(from) {
        return std::borrow::Cow::Borrowed(text);
    }
    let continues = |c: char| c.is_alphanumeric() || matches!(c, '.' | '-' | '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let after = &rest[i + from.len()..];
        out.push_str(&rest[..i]);
        if after.chars().next().is_some_and(continues) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// The bar's `laying out N of M files` while `left` files of `tree` are still to be laid out.
fn loading(tree: &HistoryTree, left: usize) -> Option<(usize, usize)> {
    let total = tree.keys().filter(|k| scratch::read_by_console(k)).count();
    (left > 0).then(|| (total.saturating_sub(left), total))
}

fn is_journal(c: &Change) -> bool {
    c.path
        .strip_prefix(layout::CONDUCTOR_DIR)
        .and_then(|r| r.strip_prefix('/'))
        == Some(layout::JOURNAL_FILE)
}

fn attention_keys(s: &Snapshot, at_us: i64) -> HashSet<super::attention::Key> {
    super::attention::items(s, instant(at_us))
        .into_iter()
        .map(|i| i.key)
        .collect()
}

/// The replay thread's state: the timeline, the scratch root showing the current position and the
/// model reading it.
struct Worker {
    timeline: Timeline,
    scratch: Scratch,
    model: LiveModel,
    snapshot: Arc<Snapshot>,
    view: ReplayView,
    /// The tree the scratch root shows.
    tree: HistoryTree,
    /// When playback last moved the moment.
    played_at: Instant,
}

impl Worker {
    fn open(root: &Root, at_us: i64, opts: ModelOptions) -> Result<Self, ReplayError> {
        let mut timeline = timeline_at(root, at_us)?;
        let at_us = at_us.max(timeline.first_us());
        let pos = timeline.position_at(at_us)?;
        let tree = timeline.tree_at(pos)?;
        // The scratch root reads with the live root's settings (thresholds, staleness), not the
        // defaults of a directory without a config.
        let mut scratch = Scratch::new(root.settings.clone()).map_err(ReplayError::Scratch)?;
        // The first screen within twice the live one's: a quarter of its reading budget for the
        // layout, which still lays out a screenful of records however long it takes (reading what
        // was laid out takes longer again: with half the budget, 800 states of a 10,000-workflow
        // root were laid out and read for a screen that shows 50); what is not laid out by then
        // follows in the background, and the bar says how far.
        let until = Instant::now() + FIRST_CHUNK / 4;
        let (_, left) = scratch.show_until(timeline.dir(), &tree, Some(until));
        let mut model = LiveModel::open(scratch.root.clone(), opts);
        model.set_watch_mode("replay");
        let snapshot = with_recorded_sources(model.snapshot(), &scratch.root);
        let mut view = ReplayView::new(pos, timeline.first(), timeline.end());
        view.first_us = timeline.first_us();
        view.last_us = timeline.last_us();
        view.moment_us = at_us;
        view.loading = loading(&tree, left);
        view.recorded = Some(root.dir.clone());
        let mut w = Self {
            timeline,
            scratch,
            model,
            snapshot,
            view,
            tree,
            played_at: Instant::now(),
        };
        w.view.change = w.label(pos);
        Ok(w)
    }

    fn frame(&self) -> Frame {
        Frame {
            snapshot: self.snapshot.clone(),
            view: self.view.clone(),
        }
    }

    /// What the change that led to `pos` did (`put conductor/state/wf_x.json`), a journal entry
    /// in its words (`ack accepted wf_x by ops`, the last entry the change appended). While
    /// heartbeats are skipped, the last act at or before `pos`: the one the screen shows.
    fn label(&mut self, pos: u64) -> Option<String> {
        let c = if self.view.heartbeats {
            self.timeline.change(pos.checked_sub(1)?).ok()??
        } else {
            self.timeline.last_act(pos).ok()??
        };
        if is_journal(&c)
            && let Some(words) = c
                .blob
                .as_deref()
                .and_then(|b| self.timeline.dir().blob(b).ok().flatten())
                .and_then(|bytes| {
                    bytes
                        .split(|b| *b == b'\n')
                        .rev()
                        .find_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
                })
                .as_ref()
                .and_then(journal_words)
        {
            return Some(words);
        }
        Some(format!("{} {}", c.kind.as_str(), c.path))
    }

    /// Moves the scratch root and the model to position `pos`; the moment becomes its change's.
    fn go(&mut self, pos: u64) -> Result<(), ReplayError> {
        let pos = pos.clamp(self.timeline.first(), self.timeline.end());
        let here = self.view.pos;
        if pos == here {
            // The scratch root shows this position already.
            self.view.moment_us = self.timeline.moment_of(pos)?;
            return Ok(());
        }
        let tree = if pos > here && pos - here <= 64 {
            let mut t = self.tree.clone();
            for seq in here..pos {
                if let Some(c) = self.timeline.change(seq)? {
                    apply_change(&mut t, &c);
                }
            }
            t
        } else {
            self.timeline.tree_at(pos)?
        };
        let touched = self.scratch.show(self.timeline.dir(), &tree);
        self.view.loading = None;
        self.tree = tree;
        let snap = if touched.len() > RESCAN_OVER {
            self.model.rescan()
        } else {
            self.model.apply(&touched)
        };
        if let Some(s) = snap {
            self.snapshot = with_recorded_sources(s, &self.scratch.root);
        }
        self.view.pos = pos;
        self.view.moment_us = self.timeline.moment_of(pos)?;
        self.view.change = self.label(pos);
        Ok(())
    }

    fn run(
        mut self,
        rx: Receiver<Cmd>,
        frames: watch::Sender<Arc<Frame>>,
        notes: tokio::sync::mpsc::UnboundedSender<Note>,
    ) {
        loop {
            let cmd = if self.view.loading.is_some() {
                match rx.try_recv() {
                    Ok(c) => Some(c),
                    Err(mpsc::TryRecvError::Empty) => {
                        self.lay_out_more();
                        if frames.send(Arc::new(self.frame())).is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            } else if self.view.playing {
                let next = self.timeline.change(self.view.pos).ok().flatten();
                match rx.recv_timeout(self.view.wait_for(next.map(|c| c.at_us))) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                }
            };
            let note = match cmd {
                Some(c) => self.handle(c),
                None => self.play(),
            };
            // The frame before the note that speaks of it, so the console draws them together
            // (a note drawn over the frame before it showed `change 33/37` beside "the end").
            if frames.send(Arc::new(self.frame())).is_err() {
                return;
            }
            if let Err(e) = &note {
                let _ = notes.send((true, e.to_string()));
            } else if let Ok(Some(n)) = &note {
                let _ = notes.send((false, n.clone()));
            }
        }
    }

    /// Lays out the next part of a moment the first screen did not wait for, and reads it.
    fn lay_out_more(&mut self) {
        let until = Instant::now() + LOAD_CHUNK;
        let (touched, left) = self
            .scratch
            .show_until(self.timeline.dir(), &self.tree, Some(until));
        if let Some(s) = self.model.apply(&touched) {
            self.snapshot = with_recorded_sources(s, &self.scratch.root);
        }
        self.view.loading = loading(&self.tree, left);
        // Playback asked for meanwhile starts when the moment is whole, not with a jump.
        self.played_at = Instant::now();
    }

    /// One command; `Ok(Some(text))` is a note for the operator.
    fn handle(&mut self, cmd: Cmd) -> Result<Option<String>, ReplayError> {
        match cmd {
            Cmd::Step(n) => {
                self.view.playing = false;
                let to = if self.view.heartbeats {
                    self.view.step_target(n)
                } else {
                    // Act by act: the supervisors' heartbeats are stepped over.
                    let mut to = self.view.pos;
                    for _ in 0..n.unsigned_abs() {
                        to = self.timeline.step_act(to, n > 0)?;
                    }
                    to
                };
                if to == self.view.pos && n > 0 {
                    return self.refresh_at_end();
                }
                self.go(to)?;
                Ok(None)
            }
            Cmd::Heartbeats => {
                self.view.heartbeats = !self.view.heartbeats;
                Ok(Some(
                    if self.view.heartbeats {
                        "stepping through every change, the supervisors' heartbeats too"
                    } else {
                        "stepping act by act: the supervisors' heartbeats are skipped"
                    }
                    .into(),
                ))
            }
            Cmd::Seek(asked) => {
                self.view.playing = false;
                let at = asked.max(self.timeline.first_us());
                let pos = self.timeline.position_at(at)?;
                self.go(pos)?;
                self.view.moment_us = at.max(self.view.moment_us);
                Ok(before_note(asked, self.timeline.first_us()))
            }
            Cmd::Journal(forward) => {
                self.view.playing = false;
                match self
                    .timeline
                    .find(self.view.pos, forward, u64::MAX, &is_journal)?
                {
                    Some((pos, _)) => self.go(pos).map(|()| None),
                    None => Ok(Some(format!(
                        "no journal entry {} this moment",
                        if forward { "after" } else { "before" }
                    ))),
                }
            }
            Cmd::Attention(forward) => {
                self.view.playing = false;
                if forward {
                    self.next_attention()
                } else {
                    self.previous_attention()
                }
            }
            Cmd::TogglePlay => {
                self.view.playing = !self.view.playing;
                self.played_at = Instant::now();
                if self.view.playing && self.view.at_end() {
                    self.view.playing = false;
                    return self.refresh_at_end();
                }
                Ok(None)
            }
            Cmd::Pause => {
                self.view.playing = false;
                Ok(None)
            }
            Cmd::Faster => {
                self.view.faster();
                Ok(None)
            }
            Cmd::Slower => {
                self.view.slower();
                Ok(None)
            }
        }
    }

    /// At the last position: reads the history again (a recorder may have written more since);
    /// says so when nothing new was recorded.
    fn refresh_at_end(&mut self) -> Result<Option<String>, ReplayError> {
        self.timeline.refresh()?;
        self.view.first = self.timeline.first();
        self.view.end = self.timeline.end();
        self.view.last_us = self.timeline.last_us();
        if self.view.pos < self.view.end {
            let to = self.view.pos + 1;
            self.go(to)?;
            return Ok(None);
        }
        Ok(Some(
            "the end of the recorded history: nothing was recorded after this change".into(),
        ))
    }

    /// Playback: moves the moment by the real time elapsed times the speed and applies the
    /// changes that fell due; pauses at the end of the history.
    fn play(&mut self) -> Result<Option<String>, ReplayError> {
        let elapsed = self.played_at.elapsed();
        self.played_at = Instant::now();
        let moment = self.view.advanced(elapsed);
        let pos = self.timeline.position_at(moment)?.max(self.view.pos);
        if pos != self.view.pos {
            self.go(pos)?;
        }
        self.view.moment_us = moment.max(self.view.moment_us);
        if self.view.at_end() && self.view.moment_us >= self.view.last_us {
            self.timeline.refresh()?;
            self.view.end = self.timeline.end();
            self.view.last_us = self.timeline.last_us();
            if self.view.at_end() {
                self.view.playing = false;
                self.view.moment_us = self.view.last_us.max(self.timeline.first_us());
                return Ok(Some(
                    "playback reached the end of the recorded history (paused)".into(),
                ));
            }
        }
        Ok(None)
    }

    /// Replays forward until an attention item appears that the moment before did not have: at a
    /// change, or when time alone brings it (an ack going overdue, a lease running out).
    fn next_attention(&mut self) -> Result<Option<String>, ReplayError> {
        let start = (self.view.pos, self.view.moment_us);
        let mut seen = attention_keys(&self.snapshot, self.view.moment_us);
        for _ in 0..ATTENTION_BUDGET {
            let next = self.timeline.change(self.view.pos)?;
            let timed = super::moments::next(&self.snapshot, instant(self.view.moment_us))
                .map(|t| (t + super::moments::AFTER).timestamp_micros())
                .filter(|t| next.as_ref().is_none_or(|c| *t < c.at_us));
            match (timed, next) {
                (Some(t), _) => self.view.moment_us = t,
                (None, Some(_)) => {
                    let to = self.view.pos + 1;
                    self.go(to)?;
                }
                (None, None) => break,
            }
            let now = attention_keys(&self.snapshot, self.view.moment_us);
            if now.iter().any(|k| !seen.contains(k)) {
                return Ok(None);
            }
            seen = now;
        }
        let (pos, moment) = start;
        self.go(pos)?;
        self.view.moment_us = moment;
        Ok(Some(format!(
            "no new attention item within the next {ATTENTION_BUDGET} changes"
        )))
    }

    /// Replays the changes before this moment, window by window, for the last position where an
    /// attention item appeared that the change before did not have.
    fn previous_attention(&mut self) -> Result<Option<String>, ReplayError> {
        let start = (self.view.pos, self.view.moment_us);
        let first = self.timeline.first();
        let mut upto = start.0.saturating_sub(1);
        let mut looked = 0u64;
        while upto > first && looked < ATTENTION_BUDGET {
            let from = upto.saturating_sub(ATTENTION_WINDOW).max(first);
            self.go(from)?;
            let mut seen = attention_keys(&self.snapshot, self.view.moment_us);
            let mut found = None;
            for p in from + 1..=upto {
                self.go(p)?;
                let now = attention_keys(&self.snapshot, self.view.moment_us);
                if now.iter().any(|k| !seen.contains(k)) {
                    found = Some(p);
                }
                seen = now;
            }
            looked += upto - from;
            if let Some(p) = found {
                self.go(p)?;
                return Ok(None);
            }
            upto = from;
        }
        let (pos, moment) = start;
        self.go(pos)?;
        self.view.moment_us = moment;
        Ok(Some(
            "no attention item appeared before this moment (within the changes looked at)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{journal_words, map_root};

    #[test]
    fn a_journal_entry_reads_as_action_outcome_target_and_actor() {
        let e = serde_json::json!({"seq": 4, "actor": "ops", "source": "cli", "action": "ack",
            "targets": {"handoff_id": "hof_1", "workflow_id": "wf_x"}, "outcome": "accepted"});
        assert_eq!(
            journal_words(&e).as_deref(),
            Some("ack accepted wf_x by ops")
        );
        let e = serde_json::json!({"action": "force_unlock", "targets": {"track": "t1"},
            "outcome": "released", "actor": "a\u{1b}[31mb\u{202e}c"});
        assert_eq!(
            journal_words(&e).as_deref(),
            Some("force_unlock released t1 by a[31mbc"),
            "control and bidirectional characters are left out"
        );
        assert_eq!(journal_words(&serde_json::json!({"seq": 1})), None);
        // A decision made remotely, through an approval link: its channel and approver.
        let e = serde_json::json!({"actor": "operator", "source": "nats", "action": "approve",
            "outcome": "approved", "targets": {"workflow_id": "wf_x", "handoff_id": "hof_1",
            "channel": "nats", "approver": "tallon (nats peer)", "intent": "held-hof_1"}});
        assert_eq!(
            journal_words(&e).as_deref(),
            Some("approve approved wf_x by operator via nats link, approver tallon (nats peer)")
        );
    }

    #[test]
    fn a_scratch_path_is_shown_inside_the_recorded_root_and_nothing_else_changes() {
        let from = "/tmp/pantheon-replay-42-aB3";
        let to = "/srv/pantheon";
        for (text, want) in [
            (
                "/tmp/pantheon-replay-42-aB3/conductor/state/wf_a.json",
                "/srv/pantheon/conductor/state/wf_a.json",
            ),
            (
                "/tmp/pantheon-replay-42-aB3/conductor/state/wf_a.json: not JSON (line 1)",
                "/srv/pantheon/conductor/state/wf_a.json: not JSON (line 1)",
            ),
            (
                "root /tmp/pantheon-replay-42-aB3 [replay]",
                "root /srv/pantheon [replay]",
            ),
            (
                "a /tmp/pantheon-replay-42-aB3/x and /tmp/pantheon-replay-42-aB3/y",
                "a /srv/pantheon/x and /srv/pantheon/y",
            ),
            (
                "/tmp/pantheon-replay-42-aB3x/conductor",
                "/tmp/pantheon-replay-42-aB3x/conductor",
            ),
            ("nothing here", "nothing here"),
        ] {
            assert_eq!(map_root(text, from, to), want, "{text}");
        }
        assert_eq!(map_root("x", "", "/y"), "x");
    }
}
