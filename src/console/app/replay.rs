//! The console in the past: entering and leaving the replay, the scrub line's keys, the refusal of
//! every action that would change files (the console shows a moment that is gone), and the one act
//! allowed there, the fork of a workflow from the moment shown.

use super::*;
use crate::console::replay::{Cmd, Frame, ReplayView};
use crate::engine::time::format_ts;

impl App {
    /// Shows a replay frame: its snapshot, where the replay stands, and its moment as "now".
    pub fn show_frame(&mut self, frame: &Frame) {
        let entering = self.replay.is_none();
        self.replay = Some(frame.view.clone());
        self.now = crate::engine::time::instant(frame.view.moment_us);
        self.set_snapshot(frame.snapshot.clone());
        if entering {
            let live = self.keymap.key_for(&Action::ReplayLive);
            self.flash(
                FlashKind::Info,
                format!(
                    "replaying the recorded past: read-only ({live} back to live, ? for the scrub keys)"
                ),
            );
        }
    }

    /// Leaves the replay for the live snapshot `live`.
    pub fn back_to_live(&mut self, live: Arc<Snapshot>) {
        if self.replay.take().is_none() {
            return;
        }
        self.now = self.wall;
        self.set_snapshot(live);
        self.flash(FlashKind::Info, "back to live");
    }

    /// The moment the replay shows, as the header writes it.
    pub fn replay_moment(&self) -> Option<String> {
        self.replay
            .as_ref()
            .map(|v| format_ts(crate::engine::time::instant(v.moment_us)))
    }

    /// A scrub line key: the replay's move, or a hint when the console is live.
    pub(super) fn replay_action(&mut self, action: Action) -> Vec<Effect> {
        if self.replay.is_none() {
            self.flash(
                FlashKind::Info,
                format!(
                    "{}: only in replay (`:replay -15m` or `pantheon --at TS` opens the past)",
                    action.describe()
                ),
            );
            return Vec::new();
        }
        let cmd = match action {
            Action::ReplayBack => Cmd::Step(-1),
            Action::ReplayForward => Cmd::Step(1),
            Action::ReplayPrevJournal => Cmd::Journal(false),
            Action::ReplayNextJournal => Cmd::Journal(true),
            Action::ReplayPrevAttention => Cmd::Attention(false),
            Action::ReplayNextAttention => Cmd::Attention(true),
            Action::ReplayPlay => Cmd::TogglePlay,
            Action::ReplayFaster => Cmd::Faster,
            Action::ReplaySlower => Cmd::Slower,
            Action::ReplayHeartbeats => Cmd::Heartbeats,
            Action::ReplayLive => return vec![Effect::Live],
            _ => return Vec::new(),
        };
        vec![Effect::Replay(cmd)]
    }

    /// In replay, an action that would change files is refused with a flash saying why (true);
    /// the fork (`R` on a workflow) is the one act allowed.
    pub(super) fn refused_in_the_past(&mut self, action: &Action) -> bool {
        let Some(moment) = self.replay_moment() else {
            return false;
        };
        if !action.is_mutation() || *action == Action::Operator(OperatorAction::Rerun) {
            return false;
        }
        let live = self.keymap.key_for(&Action::ReplayLive);
        let fork = self
            .keymap
            .key_for(&Action::Operator(OperatorAction::Rerun));
        self.flash(
            FlashKind::Error,
            format!(
                "the console is in the past ({moment}): {} is refused; {live} goes back to live \
                 ({fork} on a workflow forks a rerun from this moment)",
                action.describe()
            ),
        );
        true
    }

    /// `:replay [TS]`: opens the past at TS (RFC 3339, `-15m`; none: the last recorded moment),
    /// or moves the open replay there.
    pub(super) fn replay_command(&mut self, arg: &str) -> Vec<Effect> {
        let arg = if arg.trim().is_empty() { "now" } else { arg };
        match crate::engine::parse_moment(arg, self.wall) {
            Ok(at) => vec![Effect::ReplayAt(at)],
            Err(e) => {
                self.flash(FlashKind::Error, e.to_string());
                Vec::new()
            }
        }
    }

    /// The fork: asks the step the selected workflow is dispatched again from, starting from the
    /// context bag it had at the moment shown (the caller pauses playback, so the moment stays
    /// put).
    pub(super) fn start_fork(&mut self) {
        let Some(at) = self.replay_moment() else {
            return;
        };
        let Some(wf) = self.selected_workflow() else {
            return;
        };
        let steps = crate::console::actions::rerun::rerun_steps(self, &wf);
        let then = self
            .snapshot
            .workflows
            .iter()
            .find(|w| &*w.id == wf.as_str())
            .and_then(|w| w.state.current_step.as_deref().map(str::to_owned));
        let default = then.or_else(|| steps.first().cloned()).unwrap_or_default();
        let label = if steps.is_empty() {
            "Fork from step (its definition is not loaded here)".to_owned()
        } else {
            format!("Fork from step (Tab completes: {})", steps.join(", "))
        };
        self.ask(
            label,
            true,
            default,
            crate::console::actions::rerun_step_question(wf, Some(at)),
        );
        if let Mode::Prompt(p) = &mut self.mode {
            p.completions = steps;
        }
    }

    /// `text` as the operator should read it: in replay, a path inside the scratch root the moment
    /// is laid out in (the snapshot's root) is written inside the root the history belongs to, so
    /// details, file issues, flashes and yanked text name the recorded root's files.
    pub fn shown_text<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let Some(recorded) = self.replay.as_ref().and_then(|v| v.recorded.as_ref()) else {
            return std::borrow::Cow::Borrowed(text);
        };
        let scratch = self.snapshot.root.display().to_string();
        let recorded = recorded.display().to_string();
        crate::console::replay::map_root(text, &scratch, &recorded)
    }

    /// [`App::shown_text`] for a path.
    pub fn shown_path(&self, p: &std::path::Path) -> String {
        let shown = p.display().to_string();
        self.shown_text(&shown).into_owned()
    }

    /// The scrub line's state, for views and tests.
    pub fn replay_view(&self) -> Option<&ReplayView> {
        self.replay.as_ref()
    }
}
