//! One `Action` in normal mode: moving, paging, opening, filtering, the pane-crossing jumps, and
//! the start of every operator flow (see `flows`).

use super::*;

impl App {
    /// Shows `pane` with the row whose identity is `key` selected (the pane's filter cleared so it
    /// is listed); false when no such row is there.
    pub fn jump_to(&mut self, pane: Pane, key: &RowKey) -> bool {
        let saved = std::mem::take(&mut self.panes[pane].filter);
        let Some(i) = self.position_of(pane, key).0 else {
            self.panes[pane].filter = saved;
            return false;
        };
        if pane == Pane::Bus {
            self.follow = false;
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
                self.track = Some(track.clone());
                self.pane = Pane::Board;
                self.panes[Pane::Board].detail = false;
            }
            Jump::Issues => self.mode = Mode::Issues,
        }
        self.last_attention = Some(item.key.clone());
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
            .last_attention
            .as_ref()
            .and_then(|k| items.iter().position(|i| &i.key == k))
            .map_or(0, |i| (i + 1) % items.len());
        let item = items[next].clone();
        self.open_attention(&item);
    }

    /// Takes the operator from a journal entry to the record it is about; false if none is listed.
    pub(crate) fn open_journal_entry(&mut self, e: &Value) -> bool {
        let t = |k: &str| e.pointer(&format!("/targets/{k}")).and_then(Value::as_str);
        if let Some(h) = t("handoff_id") {
            let key = items::dispatches(&self.snapshot, &Filter::default())
                .iter()
                .find(|r| *r.view.dispatch.handoff_id == *h || *r.view.name == *h)
                .map(items::DispatchRow::key);
            if let Some(k) = key
                && self.jump_to(Pane::Inboxes, &k)
            {
                return true;
            }
        }
        if let Some(h) = t("handoff_id")
            && let Ok(h) = HandoffId::parse(h)
            && let Some((k, _)) = self.dead_row_of(&h)
            && self.jump_to(Pane::DeadLetters, &k)
        {
            return true;
        }
        if let Some(w) = t("workflow_id")
            && self.jump_to(Pane::Workflows, &RowKey::workflow(w))
        {
            return true;
        }
        if let (Some(track), Some(path)) = (t("track"), t("path"))
            && self.jump_to(Pane::Locks, &RowKey::lock(track, path))
        {
            return true;
        }
        if let Some(track) = t("track")
            && self.snapshot.track(track).is_some()
            && e.get("action")
                .and_then(Value::as_str)
                .is_some_and(|a| a.starts_with("board"))
        {
            self.track = Some(track.to_owned());
            self.pane = Pane::Board;
            return true;
        }
        false
    }

    /// The selected worker: (track, worker id).
    pub(super) fn selected_worker(&mut self) -> Option<(String, String)> {
        if self.pane != Pane::Workers || self.refuse_if_gone(Pane::Workers) {
            return None;
        }
        let rows = items::workers(&self.snapshot, &self.filter(Pane::Workers));
        rows.get(self.selected(Pane::Workers))
            .map(|(t, w)| ((*t).to_owned(), w.worker_id.clone()))
    }

    pub(super) fn worker_locks(&mut self) {
        let Some((_, worker)) = self.selected_worker() else {
            return self.need("a worker");
        };
        let held = items::locks(&self.snapshot, &Filter::default())
            .iter()
            .filter(|(_, l)| l.worker_id.as_deref() == Some(worker.as_str()))
            .count();
        if held == 0 {
            return self.flash(FlashKind::Info, format!("{worker} holds no lock"));
        }
        self.panes[Pane::Locks] = PaneState {
            filter: worker.clone(),
            ..PaneState::default()
        };
        self.pane = Pane::Locks;
        self.flash(
            FlashKind::Info,
            format!("{held} lock(s) held by {worker} · Esc clears the filter"),
        );
    }

    pub(super) fn worker_messages(&mut self) {
        let Some((track, worker)) = self.selected_worker() else {
            return self.need("a worker");
        };
        self.track = Some(track.clone());
        self.panes[Pane::Bus] = PaneState {
            filter: format!("source:{worker}"),
            ..PaneState::default()
        };
        self.follow = true;
        self.pane = Pane::Bus;
        self.flash(
            FlashKind::Info,
            format!("{track}: messages from {worker} · Esc shows the whole track"),
        );
    }

    pub(super) fn cycle_lock(&mut self) {
        let locks = self.cycle_locks();
        if locks.is_empty() {
            return self.flash(FlashKind::Info, "no deadlock cycle holds a lock");
        }
        // The selected worker's track first; pressed again, the next lock of the cycles.
        let track = self.selected_worker().map(|(t, _)| t);
        let current = self.selected_key(Pane::Locks);
        let mut order: Vec<&(String, String)> = locks
            .iter()
            .filter(|(t, _)| Some(t) == track.as_ref())
            .collect();
        order.extend(locks.iter().filter(|(t, _)| Some(t) != track.as_ref()));
        let at = order
            .iter()
            .position(|(t, p)| current.as_ref().is_some_and(|k| k.is_lock(t, p)))
            .map_or(0, |i| (i + 1) % order.len());
        let (t, p) = order[at].clone();
        if self.jump_to(Pane::Locks, &RowKey::lock(&t, &p)) {
            self.flash(
                FlashKind::Info,
                format!("{p} is in a deadlock cycle ({t}) · u force-unlocks it"),
            );
        }
    }

    pub(super) fn go_workflow(&mut self) {
        let wf = match self.selected_dispatch() {
            Some((_, d, _)) => d.workflow_id.to_string(),
            None => match self.selected_dead() {
                Some((_, _, wf)) => wf,
                None => return self.need("a dispatch or a dead letter"),
            },
        };
        if !self.jump_to(Pane::Workflows, &RowKey::workflow(&wf)) {
            self.flash(
                FlashKind::Error,
                format!("workflow {wf} has no state file here"),
            );
        }
    }

    pub(super) fn go_dispatch(&mut self) {
        let Some(wf) = self.selected_workflow() else {
            return;
        };
        let key = self
            .snapshot
            .workflows
            .iter()
            .find(|w| *w.id == *wf.as_str())
            .and_then(|w| w.waiting.first().cloned())
            .and_then(|(god, d)| {
                items::dispatches(&self.snapshot, &Filter::default())
                    .iter()
                    .find(|r| *r.god == *god && r.view.dispatch.handoff_id == d.handoff_id)
                    .map(items::DispatchRow::key)
            });
        match key {
            Some(k) => {
                self.jump_to(Pane::Inboxes, &k);
            }
            None => self.flash(FlashKind::Info, format!("{wf} has no dispatch waiting")),
        }
    }

    pub(super) fn sort_by(&mut self, word: &str) {
        let pane = self.pane;
        if word.trim().is_empty() {
            self.relist(pane, |a| a.pane_state_mut().sort = None);
            return self.flash(FlashKind::Info, "the pane's own order again");
        }
        let Some(column) = items::sort_column(pane, word) else {
            let cols = items::sort_columns(pane);
            let text = if cols.is_empty() {
                format!("{} rows are not sortable", pane.title())
            } else {
                format!(
                    "no column {word:?} here: use {}",
                    cols.iter().map(|c| c.word()).collect::<Vec<_>>().join(", ")
                )
            };
            return self.flash(FlashKind::Error, text);
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

    pub(super) fn cycle_god(&mut self, forward: bool) {
        let mut names: Vec<String> = vec![crate::engine::layout::QUARANTINE_DIR.into()];
        names.extend(self.snapshot.inboxes.iter().map(|i| i.god.clone()));
        // None (every inbox) sits before the first and after the last.
        let cur = self
            .inbox_god
            .as_ref()
            .and_then(|g| names.iter().position(|n| n == g));
        let next = match (cur, forward) {
            (None, true) => Some(0),
            (None, false) => names.len().checked_sub(1),
            (Some(i), true) => (i + 1 < names.len()).then_some(i + 1),
            (Some(i), false) => i.checked_sub(1),
        };
        let god = next.map(|i| names[i].clone());
        self.relist(Pane::Inboxes, |a| a.inbox_god = god.clone());
        self.flash(
            FlashKind::Info,
            match god {
                Some(g) => format!("dispatches in {g}'s inbox (] next, [ previous)"),
                None => "dispatches of every inbox".to_owned(),
            },
        );
    }

    /// Stops the bus tail from following, remembering the newest message so the new ones count.
    pub(super) fn pause(&mut self) {
        self.follow = false;
        self.paused_at = items::track(&self.snapshot, self.track.as_deref())
            .and_then(|t| t.messages.last())
            .map(|m| m.id.clone());
    }

    /// Performs an action in normal mode.
    pub fn dispatch(&mut self, action: Action) -> Vec<Effect> {
        if action.is_replay() {
            return self.replay_action(action);
        }
        if self.refused_in_the_past(&action) {
            return Vec::new();
        }
        if action.is_mutation() && self.read_only {
            self.flash(
                FlashKind::Error,
                format!("read-only console: {} is disabled", action.describe()),
            );
            return Vec::new();
        }
        if action == Action::Rerun && self.replay.is_some() {
            self.start_fork();
            return vec![Effect::Replay(crate::console::replay::Cmd::Pause)];
        }
        // An operator action: its module starts it (`console/actions/`).
        if action.is_mutation() {
            return crate::console::actions::start(self, &action).unwrap_or_default();
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
            Action::NextTrack | Action::PrevTrack => self.cycle_track(action == Action::NextTrack),
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
            // Started by their modules above (`Action::is_mutation`).
            Action::Ack(_)
            | Action::Approve
            | Action::RejectHeld
            | Action::Abort
            | Action::Cleanup
            | Action::ForceUnlock
            | Action::OutboxRetry
            | Action::OutboxDiscard
            | Action::BoardAdvance
            | Action::BoardForceAdvance
            | Action::BoardNextRound
            | Action::BoardResolve
            | Action::Requeue
            | Action::DiscardDead
            | Action::Rerun
            | Action::Pause
            | Action::Resume => {}
            Action::NextAttention => self.next_attention(),
            Action::Snooze => self.start_snooze(),
            Action::Messages => self.mode = Mode::Messages,
            Action::WorkerLocks => self.worker_locks(),
            Action::WorkerMessages => self.worker_messages(),
            Action::CycleLock => self.cycle_lock(),
            Action::GoWorkflow => self.go_workflow(),
            Action::GoDispatch => self.go_dispatch(),
            Action::ToggleFocus | Action::Submit | Action::Cancel => {}
            Action::Sort(col) => self.sort_by(&col),
            Action::NextGod | Action::PrevGod => self.cycle_god(action == Action::NextGod),
            Action::Yank => return self.yank(),
            Action::ToggleMark => self.toggle_mark(),
            Action::MarkRange => self.mark_range(),
            Action::MarkAll => self.mark_all(),
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
            Action::Back if !detail && self.clear_marks() => {}
            Action::Back => {
                let st = self.pane_state_mut();
                if st.detail {
                    st.detail = false;
                    st.raw = false;
                } else {
                    st.filter.clear();
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
                if self.follow {
                    let sel = self.selected(Pane::Bus);
                    self.panes[Pane::Bus].selected = sel;
                    self.pause();
                } else {
                    self.follow = true;
                }
            }
            Action::ToggleFinished => {
                let hide = !self.hide_finished;
                self.relist(Pane::Workflows, |a| a.hide_finished = hide);
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
                if self.pane == Pane::Bus && self.follow {
                    self.pause();
                }
                let st = self.pane_state_mut();
                st.selected = 0;
                st.scroll = 0;
                st.gone = None;
                self.moved_in_newest_first();
            }
            Action::Bottom => {
                if self.pane == Pane::Bus {
                    self.follow = true;
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
        let max = self.detail_max.get() as isize;
        let st = self.pane_state_mut();
        let from = (st.scroll as isize).min(max);
        st.scroll = (from + delta).clamp(0, max.max(0)) as u16;
    }

    pub(super) fn move_by(&mut self, delta: isize) {
        // Another record: its detail starts at its top.
        self.pane_state_mut().scroll = 0;
        let n = self.row_count();
        if self.pane == Pane::Bus {
            if self.follow && delta < 0 {
                self.pause();
                self.panes[Pane::Bus].selected = n.saturating_sub(1);
            } else if self.follow {
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
            self.follow = true;
        }
    }

    pub(super) fn cycle_track(&mut self, forward: bool) {
        let names: Vec<String> = self
            .snapshot
            .tracks
            .iter()
            .map(|t| t.name.clone())
            .collect();
        if names.is_empty() {
            self.flash(FlashKind::Info, "no tracks under conductor/tracks");
            return;
        }
        let cur = self
            .track_name()
            .and_then(|t| names.iter().position(|n| *n == t))
            .unwrap_or(0);
        let next = if forward {
            (cur + 1) % names.len()
        } else {
            (cur + names.len() - 1) % names.len()
        };
        self.track = Some(names[next].clone());
        for p in [Pane::Bus, Pane::Board] {
            let st = &mut self.panes[p];
            st.selected = 0;
            st.gone = None;
        }
    }
}
