//! One `Action` in normal mode: moving, paging, opening, filtering, the pane-crossing jumps, and
//! the start of every operator flow (see `flows`).

use super::*;

impl App {
    /// Shows `pane` with the row whose identity is `key` selected (the pane's filter cleared so it
    /// is listed); false when no such row is there.
    pub fn jump_to(&mut self, pane: Pane, key: &RowKey) -> bool {
        if pane == Pane::Sources {
            crate::console::panes::sources::prepare_jump(self, key);
        }
        let saved = std::mem::take(&mut self.panes[pane].filter);
        let Some(i) = self.position_of(pane, key).0 else {
            self.panes[pane].filter = saved;
            return false;
        };
        if pane == Pane::Bus {
            self.panes.bus.follow = false;
        }
        let st = &mut self.panes[pane];
        st.selected = i;
        st.gone = None;
        st.detail = false;
        st.scroll = 0;
        self.pane = pane;
        true
    }

    /// Takes the operator to an attention item's record, and says what resolves it.
    pub(crate) fn open_attention(&mut self, item: &attention::Item) {
        // A reached budget with a dispatch held for it: `Enter` lands where `p` approves (and raises).
        let held = match &item.key {
            attention::Key::BudgetWarning { budget, scope, .. } => {
                crate::console::actions::budget_hold_row(&self.snapshot, scope, budget, self.now)
            }
            _ => None,
        };
        let jump = held.map_or_else(|| attention::jump(item), Jump::Row);
        match &jump {
            Jump::Row(key) => {
                let pane = key.pane();
                if !self.jump_to(pane, key) {
                    self.flash(
                        FlashKind::Error,
                        format!("{key} is not listed in {} any more", pane.title()),
                    );
                    return;
                }
            }
            Jump::Pane(pane) => self.pane = *pane,
            Jump::Board(track) => {
                self.panes.bus.track = Some(track.clone());
                self.pane = Pane::Board;
                self.panes[Pane::Board].detail = false;
            }
            Jump::Issues => self.mode = Mode::Issues,
        }
        self.panes.attention.last = Some(item.key.clone());
        self.flash(
            FlashKind::Info,
            format!(
                "{} · {}",
                crate::console::notify::item_words(item),
                attention::action_text(item, &self.keymap)
            ),
        );
    }

    /// The global key: the record of the attention item after the one it jumped to last.
    pub(super) fn next_attention(&mut self) {
        let items = self.attention_all();
        if items.is_empty() {
            self.flash(FlashKind::Success, "nothing waits on you");
            return;
        }
        let next = self
            .panes
            .attention
            .last
            .as_ref()
            .and_then(|k| items.iter().position(|i| &i.key == k))
            .map_or(0, |i| (i + 1) % items.len());
        let item = items[next].clone();
        self.open_attention(&item);
    }

    /// Orders the current pane by `column` (again: the other way round; `None`: its own order).
    pub(super) fn sort_by(&mut self, column: Option<items::Column>) {
        let pane = self.pane;
        let Some(column) = column else {
            self.relist(pane, |a| a.pane_state_mut().sort = None);
            return self.flash(FlashKind::Info, "the pane's own order again");
        };
        let descending = self
            .pane_state()
            .sort
            .as_ref()
            .is_some_and(|s| s.column == column && !s.descending);
        self.relist(pane, |a| {
            a.pane_state_mut().sort = Some(items::Sort { column, descending })
        });
        self.flash(
            FlashKind::Info,
            format!(
                "sorted by {column} {}",
                if descending {
                    "↓ (descending)"
                } else {
                    "↑"
                }
            ),
        );
    }

    /// Performs an action in normal mode.
    pub fn dispatch(&mut self, action: Action) -> Vec<Effect> {
        if action.is_replay() {
            return self.replay_action(action);
        }
        if self.refused_in_the_past(&action) {
            return Vec::new();
        }
        // An operator action: its module starts it (`console/actions/`).
        if let Action::Operator(op) = action {
            if self.read_only {
                self.flash(
                    FlashKind::Error,
                    format!("read-only console: {} is disabled", op.describe()),
                );
                return Vec::new();
            }
            if op == OperatorAction::Rerun && self.replay.is_some() {
                self.start_fork();
                return vec![Effect::Replay(crate::console::replay::Cmd::Pause)];
            }
            return crate::console::actions::start(self, op);
        }
        let detail = self.pane_state().detail;
        match action {
            Action::Quit | Action::Open | Action::Back => return self.open_or_back(action, detail),
            Action::Help => self.mode = Mode::Help(HelpView::default()),
            Action::Issues => self.mode = Mode::Issues,
            Action::NextPane
            | Action::PrevPane
            | Action::GoPane(_)
            | Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            | Action::NextRecord
            | Action::PrevRecord
            | Action::HalfPageDown
            | Action::HalfPageUp => self.navigate(action, detail),
            Action::Filter | Action::NextMatch | Action::PrevMatch => self.filter_action(action),
            Action::Command => self.mode = Mode::Command(CommandLine::default()),
            Action::Refresh => {
                self.flash(FlashKind::Info, "rescanning the root");
                return vec![Effect::Rescan];
            }
            Action::ToggleTimes
            | Action::ToggleRaw
            | Action::ToggleFollow
            | Action::ToggleFinished => self.toggle(action),
            Action::NextTrack | Action::PrevTrack => {
                crate::console::panes::bus::cycle_track(self, action == Action::NextTrack)
            }
            // Answered by `replay_action` above.
            Action::ReplayBack
            | Action::ReplayForward
            | Action::ReplayPrevJournal
            | Action::ReplayNextJournal
            | Action::ReplayPrevAttention
            | Action::ReplayNextAttention
            | Action::ReplayPlay
            | Action::ReplayFaster
            | Action::ReplaySlower
            | Action::ReplayHeartbeats
            | Action::ReplayLive => {}
            // Started by their modules above.
            Action::Operator(_) => {}
            Action::NextAttention => self.next_attention(),
            Action::Snooze => crate::console::panes::attention::start_snooze(self),
            Action::Messages => self.mode = Mode::Messages,
            Action::WorkerLocks => crate::console::panes::workers::worker_locks(self),
            Action::WorkerMessages => crate::console::panes::workers::worker_messages(self),
            Action::CycleLock => crate::console::panes::locks::cycle_lock(self),
            Action::GoWorkflow => crate::console::panes::inboxes::go_workflow(self),
            Action::GoDispatch => crate::console::panes::workflows::go_dispatch(self),
            Action::ToggleFocus | Action::Submit | Action::Cancel => {}
            Action::Sort(col) => self.sort_by(col),
            Action::NextGod | Action::PrevGod => {
                crate::console::panes::inboxes::cycle_god(self, action == Action::NextGod)
            }
            Action::NextSource | Action::PrevSource => {
                crate::console::panes::sources::cycle_source(self, action == Action::NextSource)
            }
            Action::Yank => return self.yank(),
            Action::ToggleMark => crate::console::marks::toggle_mark(self),
            Action::MarkRange => crate::console::marks::mark_range(self),
            Action::MarkAll => crate::console::marks::mark_all(self),
            Action::ToggleMouse => return self.toggle_mouse(),
        }
        Vec::new()
    }

    /// `q`, `Enter` and `Esc`: into a record's detail and back out (out of a detail, `q` quits).
    fn open_or_back(&mut self, action: Action, detail: bool) -> Vec<Effect> {
        match action {
            // In a detail or raw view `q` goes back, as it closes the overlays; C-c still quits.
            Action::Quit if detail => {
                let st = self.pane_state_mut();
                st.detail = false;
                st.raw = false;
            }
            Action::Quit => return vec![Effect::Quit],
            Action::Open if !detail && self.pane.view().open(self).is_some() => {}
            Action::Open => {
                if !detail && self.refuse_if_gone(self.pane) {
                    return Vec::new();
                }
                if self.offers(&Action::Open) {
                    let st = self.pane_state_mut();
                    st.detail = true;
                    st.scroll = 0;
                }
            }
            Action::Back if !detail && crate::console::marks::clear_marks(self) => {}
            Action::Back => {
                let st = self.pane_state_mut();
                if st.detail {
                    st.detail = false;
                    st.raw = false;
                } else if !st.filter.is_empty() {
                    st.filter.clear();
                } else {
                    self.pane.view().back(self);
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// The switches: times, raw JSON, the bus tail's follow, finished workflows.
    fn toggle(&mut self, action: Action) {
        match action {
            Action::ToggleTimes => self.absolute_times = !self.absolute_times,
            Action::ToggleRaw => {
                let st = self.pane_state_mut();
                st.raw = !st.raw;
                st.detail = true;
                st.scroll = 0;
            }
            Action::ToggleFollow => {
                if self.panes.bus.follow {
                    let sel = self.selected(Pane::Bus);
                    self.panes[Pane::Bus].selected = sel;
                    crate::console::panes::bus::pause_tail(self);
                } else {
                    self.panes.bus.follow = true;
                }
            }
            Action::ToggleFinished => {
                let hide = !self.panes.workflows.hide_finished;
                self.relist(Pane::Workflows, |a| a.panes.workflows.hide_finished = hide);
                self.flash(
                    FlashKind::Info,
                    if hide {
                        "finished workflows hidden (h shows them)"
                    } else {
                        "finished workflows shown"
                    },
                );
            }
            _ => {}
        }
    }

    /// Moves between panes, rows and (in a detail) lines.
    fn navigate(&mut self, action: Action, detail: bool) {
        match action {
            Action::NextPane => {
                self.pane = self.cycled(Pane::next);
                self.entered_pane();
            }
            Action::PrevPane => {
                self.pane = self.cycled(Pane::prev);
                self.entered_pane();
            }
            Action::GoPane(p) => {
                self.pane = p;
                self.entered_pane();
            }
            Action::Up if detail => self.scroll_by(-1),
            Action::Down if detail => self.scroll_by(1),
            Action::PageUp if detail => self.scroll_by(-(self.page.max(1) as isize)),
            Action::PageDown if detail => self.scroll_by(self.page.max(1) as isize),
            Action::Top if detail => self.pane_state_mut().scroll = 0,
            Action::Bottom if detail => self.pane_state_mut().scroll = u16::MAX,
            Action::NextRecord => self.move_by(1),
            Action::PrevRecord => self.move_by(-1),
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page.max(1) as isize)),
            Action::PageDown => self.move_by(self.page.max(1) as isize),
            Action::HalfPageDown if detail => self.scroll_by((self.page / 2).max(1) as isize),
            Action::HalfPageUp if detail => self.scroll_by(-((self.page / 2).max(1) as isize)),
            Action::HalfPageDown => self.move_by((self.page / 2).max(1) as isize),
            Action::HalfPageUp => self.move_by(-((self.page / 2).max(1) as isize)),
            Action::Top => {
                if self.pane == Pane::Bus && self.panes.bus.follow {
                    crate::console::panes::bus::pause_tail(self);
                }
                let st = self.pane_state_mut();
                st.selected = 0;
                st.scroll = 0;
                st.gone = None;
                self.moved_in_newest_first();
            }
            Action::Bottom => {
                if self.pane == Pane::Bus {
                    self.panes.bus.follow = true;
                }
                let n = self.row_count();
                self.pane_state_mut().selected = n.saturating_sub(1);
                self.pane_state_mut().gone = None;
                self.moved_in_newest_first();
            }
            _ => {}
        }
    }

    /// `/`, `n` and `N`: the pane's filter.
    fn filter_action(&mut self, action: Action) {
        match action {
            Action::Filter if !self.pane.view().lists_records() => self.flash(
                FlashKind::Info,
                "the board shows one session whole: there is nothing to filter",
            ),
            Action::Filter => {
                self.mode = Mode::Filter(LineEditor::new(self.pane_state().filter.clone()))
            }
            Action::NextMatch | Action::PrevMatch => {
                let n = self.row_count();
                if self.pane_state().filter.is_empty() {
                    self.flash(FlashKind::Info, "no filter: / starts one");
                } else if n == 0 {
                    self.flash(FlashKind::Info, "nothing matches the filter");
                } else {
                    // Every listed row matches; n and N step through them, wrapping around.
                    let cur = self.selected(self.pane);
                    let next = if action == Action::NextMatch {
                        (cur + 1) % n
                    } else {
                        (cur + n - 1) % n
                    };
                    self.move_by(next as isize - cur as isize);
                    self.flash(FlashKind::Info, format!("match {}/{n}", next + 1));
                }
            }
            _ => {}
        }
    }

    /// `:mouse`: turns mouse capture on or off.
    fn toggle_mouse(&mut self) -> Vec<Effect> {
        self.mouse = !self.mouse;
        self.flash(
            FlashKind::Info,
            if self.mouse {
                "mouse on: click tabs and rows, wheel scrolls (Shift-drag selects text)"
            } else {
                "mouse off: the terminal selects text (:mouse turns it back on)"
            },
        );
        vec![Effect::Mouse(self.mouse)]
    }

    /// `y`: the selected record's id or path (every marked one's, a line each), to the clipboard.
    pub(super) fn yank(&mut self) -> Vec<Effect> {
        let picked = self.pane_state().picked.clone();
        let texts: Vec<String> = if picked.is_empty() {
            if self.refuse_if_gone(self.pane) {
                return Vec::new();
            }
            match self.yank_text(self.selected(self.pane)) {
                Some(t) => vec![t],
                None => {
                    self.flash(FlashKind::Info, "nothing selected to yank");
                    return Vec::new();
                }
            }
        } else {
            let all = self.keys(self.pane);
            all.iter()
                .enumerate()
                .filter(|(_, k)| picked.contains(k))
                .filter_map(|(i, _)| self.yank_text(i))
                .collect()
        };
        if texts.is_empty() {
            self.flash(FlashKind::Info, "the marked rows are not listed (filter?)");
            return Vec::new();
        }
        let text = texts.join("\n");
        let shown = if texts.len() == 1 {
            texts[0].clone()
        } else {
            format!("{} ids", texts.len())
        };
        self.flash(
            FlashKind::Success,
            format!("yanked {shown} to the clipboard (OSC 52)"),
        );
        vec![Effect::Clipboard(text)]
    }

    /// What `y` copies for row `i` of the current pane: a workflow id, a handoff id, a message id,
    /// a lock's path, a worker id, a director.
    pub(super) fn yank_text(&self, i: usize) -> Option<String> {
        self.yank_raw(i)
            .map(|t| crate::console::clipboard::printable(&t))
            .filter(|t| !t.is_empty())
    }

    /// [`App::yank_text`] as the file has it (control characters and all).
    pub(super) fn yank_raw(&self, i: usize) -> Option<String> {
        let raw = self.pane.view().yank(self, &self.filter(self.pane), i)?;
        Some(self.shown_text(&raw).into_owned())
    }

    /// Scrolls the open detail, within its lines.
    pub(super) fn scroll_by(&mut self, delta: isize) {
        let max = self.drawn.detail_max.get() as isize;
        let st = self.pane_state_mut();
        let from = (st.scroll as isize).min(max);
        st.scroll = (from + delta).clamp(0, max.max(0)) as u16;
    }

    pub(super) fn move_by(&mut self, delta: isize) {
        // Another record: its detail starts at its top.
        self.pane_state_mut().scroll = 0;
        let n = self.row_count();
        if self.pane == Pane::Bus {
            if self.panes.bus.follow && delta < 0 {
                crate::console::panes::bus::pause_tail(self);
                self.panes[Pane::Bus].selected = n.saturating_sub(1);
            } else if self.panes.bus.follow {
                return;
            }
        }
        let mut cur = self.selected(self.pane) as isize;
        if self.pane_state_mut().gone.take().is_some() && delta > 0 {
            // The row that slid into the vanished one's place is the next one down.
            cur -= 1;
        }
        let next = (cur + delta).clamp(0, n.saturating_sub(1) as isize) as usize;
        self.pane_state_mut().selected = next;
        self.moved_in_newest_first();
        if self.pane == Pane::Bus && n > 0 && next == n - 1 && delta > 0 {
            self.panes.bus.follow = true;
        }
    }
}
