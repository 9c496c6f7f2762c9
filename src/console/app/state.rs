//! The console state read and kept in step with the snapshot: the rows of the current pane (asked
//! of the pane through `PaneView`), the selection followed by identity across snapshots, the
//! attention items and the memos a frame shares.

use super::*;

impl App {
    /// Every attention item of the snapshot now, snoozed ones included (computed once per snapshot
    /// and time).
    pub(super) fn attention_items(&self) -> Arc<Vec<attention::Item>> {
        let mut memo = self.attention_memo.borrow_mut();
        if let Some((g, t, items)) = memo.as_ref()
            && *g == self.snapshot_gen
            && *t == self.now
        {
            return items.clone();
        }
        let items = Arc::new(attention::items(&self.snapshot, self.now));
        *memo = Some((self.snapshot_gen, self.now, items.clone()));
        items
    }

    /// The attention items not snoozed, newest first (the Attention pane's filter not applied).
    pub fn attention_all(&self) -> Vec<attention::Item> {
        self.attention_items()
            .iter()
            .filter(|i| {
                self.snoozed
                    .get(&i.key)
                    .is_none_or(|until| *until <= self.now)
            })
            .cloned()
            .collect()
    }

    /// How many attention items there are, snoozed ones included (the header and the tab bar ask
    /// on every frame). A snooze is this console's own reminder setting, which `pantheon status`,
    /// `check` and the metrics cannot know: so no count leaves a snoozed item out, and every
    /// surface gives the same number. Snoozing hides the item from pane 7's list, from `@` and
    /// from the notifications until it ends.
    pub fn attention_count(&self) -> usize {
        self.attention_items().len()
    }

    /// The rows of the Attention pane: [`Self::attention_all`] through its filter.
    pub fn attention(&self) -> Vec<attention::Item> {
        self.attention_through(&self.filter(Pane::Attention))
    }

    /// [`Self::attention_all`] through `f`.
    pub(crate) fn attention_through(&self, f: &Filter) -> Vec<attention::Item> {
        self.attention_all()
            .into_iter()
            .filter(|i| f.is_empty() || f.matches_item(i.source(), &i.haystack()))
            .collect()
    }

    /// How many attention items are snoozed now (their cause still there).
    pub fn snoozed_count(&self) -> usize {
        self.attention_items()
            .iter()
            .filter(|i| {
                self.snoozed
                    .get(&i.key)
                    .is_some_and(|until| *until > self.now)
            })
            .count()
    }

    /// The rows of the Journal pane: the entries read, newest first, through its filter.
    pub fn journal(&self) -> Vec<&Arc<Value>> {
        self.journal_through(&self.filter(Pane::Journal))
    }

    /// The journal's entries, newest first, through `f`.
    pub(crate) fn journal_through(&self, f: &Filter) -> Vec<&Arc<Value>> {
        self.snapshot
            .journal
            .entries
            .iter()
            .rev()
            .filter(|e| f.is_empty() || f.matches_text(&e.to_string()))
            .collect()
    }

    /// The rows of the Bridge pane: tracks, pending, dead and sent records, through its filter.
    pub fn bridge_rows(&self) -> Vec<&crate::live::snapshot::BridgeRow> {
        self.bridge_rows_through(&self.filter(Pane::Bridge))
    }

    /// The Bridge pane's rows through `f`.
    pub(crate) fn bridge_rows_through(&self, f: &Filter) -> Vec<&crate::live::snapshot::BridgeRow> {
        self.snapshot
            .bridge_view
            .rows
            .iter()
            .filter(|r| {
                f.is_empty()
                    || f.matches_text(&format!(
                        "{} {} {} {} {}",
                        r.kind.word(),
                        r.id,
                        r.subject,
                        r.what,
                        r.at
                    ))
            })
            .collect()
    }

    /// Records the inbox depth of every god when [`DEPTH_EVERY`] has passed (the loop calls this).
    pub fn sample_depth(&mut self) {
        if self
            .depth_sampled
            .is_some_and(|t| self.now - t < DEPTH_EVERY)
        {
            return;
        }
        self.depth_sampled = Some(self.now);
        let s = self.snapshot.clone();
        self.depth
            .retain(|g, _| s.inboxes.iter().any(|i| &i.god == g));
        for i in s.inboxes.iter() {
            let v = self.depth.entry(i.god.clone()).or_default();
            if v.len() == DEPTH_SAMPLES {
                v.pop_front();
            }
            v.push_back(i.dispatches.len() as u32);
        }
    }

    /// Every lock in a deadlock cycle: (track, path).
    pub fn cycle_locks(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for t in self.snapshot.tracks.iter() {
            for cycle in t.deadlock_locks.iter() {
                for p in cycle {
                    let k = (t.name.clone(), p.clone());
                    if !out.contains(&k) {
                        out.push(k);
                    }
                }
            }
        }
        out
    }

    /// Changes how `pane`'s rows are listed (order, what is left out) keeping the same record
    /// selected when it is still listed.
    pub(super) fn relist(&mut self, pane: Pane, change: impl FnOnce(&mut Self)) {
        let key = self.selected_key(pane);
        change(self);
        let keys = self.keys(pane);
        let st = &mut self.panes[pane];
        st.gone = None;
        st.selected = key
            .and_then(|k| keys.iter().position(|x| *x == k))
            .unwrap_or(0);
    }

    /// The first time a held dispatch, a deadlock or an open vote appears, one line says what to do.
    pub fn first_time_hints(&mut self) {
        let Some(mut seen) = self.hints.take() else {
            return;
        };
        let c = self.snapshot.counts(self.now);
        let voting = self.snapshot.tracks.iter().any(|t| {
            t.board
                .as_ref()
                .is_some_and(|b| b.session.status == crate::engine::board::VOTING)
        });
        // The keys as the operator bound them.
        let pane = |p: Pane| {
            self.keymap
                .pane_key(p)
                .unwrap_or_else(|| format!(":pane {}", p.title().to_ascii_lowercase()))
        };
        let act = |a: Action| self.keymap.key_for(&a);
        let hint = if c.held > 0 && !seen.held {
            seen.held = true;
            Some(format!(
                "a dispatch is held for approval: press {}, select the held row, {} approves, {} rejects",
                pane(Pane::Inboxes),
                act(Action::Approve),
                act(Action::RejectHeld)
            ))
        } else if c.deadlocks > 0 && !seen.deadlock {
            seen.deadlock = true;
            Some(format!(
                "workers wait on each other (a deadlock): press {} to see the cycle",
                pane(Pane::Workers)
            ))
        } else if voting && !seen.vote {
            seen.vote = true;
            Some(format!(
                "the board is voting: press {} to watch the votes come in",
                pane(Pane::Board)
            ))
        } else {
            None
        };
        self.hints = Some(seen);
        if let Some(h) = hint
            && !matches!(
                self.mode,
                Mode::Confirm(_) | Mode::Prompt(_) | Mode::AckMenu { .. }
            )
        {
            self.flash(FlashKind::Info, format!("hint: {h}"));
        }
    }

    /// Number of rows in the current pane's table.
    pub fn row_count(&self) -> usize {
        let view = self.pane.view();
        let f = self.filter(self.pane);
        if !view.grows_with_root() {
            return view.count(self, &f);
        }
        let at = Arc::as_ptr(&self.snapshot) as usize;
        if let Some((p, ptr, g, filter, n)) = self.rows_memo.borrow().as_ref()
            && (*p, *ptr, *g) == (self.pane, at, self.snapshot_gen)
            && *filter == f
        {
            return *n;
        }
        let n = view.count(self, &f);
        *self.rows_memo.borrow_mut() = Some((self.pane, at, self.snapshot_gen, f, n));
        n
    }

    /// The pane `step` (`Pane::next` or `Pane::prev`) reaches from the current one, passing over
    /// the panes the tab bar leaves out (the Ledger of a root that records no usage).
    pub(crate) fn cycled(&self, step: fn(Pane) -> Pane) -> Pane {
        let mut p = step(self.pane);
        while p != self.pane && !p.view().in_tabs(self) {
            p = step(p);
        }
        p
    }

    /// The selected row of `pane`, clamped to what is there (the bus follows the newest when following).
    pub fn selected(&self, pane: Pane) -> usize {
        let st = &self.panes[pane];
        let n = if pane == self.pane {
            self.row_count()
        } else {
            usize::MAX
        };
        if pane == Pane::Bus && self.follow {
            return n.saturating_sub(1);
        }
        st.selected.min(n.saturating_sub(1))
    }

    /// Installs a newer snapshot. Each pane keeps the same record selected (by identity, not by row
    /// number) when rows appear or vanish above it, so an action never lands on a neighbour; when the
    /// selected record itself went away, the pane says so (see [`PaneState::gone`]) instead of quietly
    /// selecting the row that took its place. An open confirmation is re-described from the new files.
    pub fn set_snapshot(&mut self, s: Arc<Snapshot>) {
        let keys: Vec<Option<RowKey>> = Pane::ALL.iter().map(|p| self.selected_key(*p)).collect();
        self.snapshot = self.with_my_thresholds(&s);
        self.snapshot_gen += 1;
        for (pane, key) in Pane::ALL.iter().zip(keys) {
            let Some(key) = key else { continue };
            let (found, len) = self.position_of(*pane, &key);
            let st = &mut self.panes[*pane];
            match found {
                Some(i) => {
                    st.selected = i;
                    st.gone = None;
                }
                None => {
                    st.selected = st.selected.min(len.saturating_sub(1));
                    let ours = self.acted_on.as_ref() == Some(&(*pane, key.clone()));
                    if ours {
                        // The operator's own action moved it (approved, acked, unlocked): like
                        // after a delete in lazygit, the row that took its place is selected.
                        st.gone = None;
                        st.detail = false;
                        self.acted_on = None;
                    } else {
                        st.gone = Some(key);
                    }
                }
            }
        }
        for pane in Pane::ALL {
            if self.following(pane) {
                let st = &mut self.panes[pane];
                st.selected = 0;
                st.gone = None;
            }
        }
        if let Mode::Confirm(c) = &mut self.mode {
            let now = crate::console::shown::version(&c.op, &self.snapshot);
            c.changed = crate::console::shown::changed(&c.shown, &now);
            // Re-described from the new files only while they still are what was shown: once a
            // record changed, the lines stay the ones the operator read, and the dialog says what
            // changed (Enter then refuses).
            if c.changed.is_none() && c.op.described_from_snapshot() {
                let mut lines = c.op.describe(&self.snapshot, self.now);
                lines.push((Tone::Dim, recorded_as(&self.actor)));
                c.lines = lines;
            }
        }
        self.first_time_hints();
    }

    /// True when `pane` lists newest first (journal, attention) and its selection follows the newest
    /// entry: until the operator moves off the top row (`g` follows again), as the bus tail does.
    pub fn following(&self, pane: Pane) -> bool {
        pane.view().newest_first() && {
            let st = &self.panes[pane];
            !st.moved && !st.detail && st.picked.is_empty()
        }
    }

    /// After the selection of the current pane moved: a newest-first list follows the newest again
    /// when the top row is selected, and stays on its record otherwise.
    pub(super) fn moved_in_newest_first(&mut self) {
        if self.pane.view().newest_first() {
            let st = self.pane_state_mut();
            st.moved = st.selected != 0;
        }
    }

    /// Entering a pane: a newest-first list that follows starts on its newest entry, so `z` and
    /// `Enter` have a record at once.
    pub(super) fn entered_pane(&mut self) {
        if self.following(self.pane) {
            let st = self.pane_state_mut();
            st.selected = 0;
            st.gone = None;
        }
    }

    /// The identities of the rows of `pane`, in row order (what selection, marks and jumps follow).
    pub fn keys(&self, pane: Pane) -> Vec<RowKey> {
        pane.view().keys(self, &self.filter(pane))
    }

    /// The identity of the record selected in `pane` (the one that went away, if it did).
    pub(crate) fn selected_key(&self, pane: Pane) -> Option<RowKey> {
        if pane == Pane::Bus && self.follow {
            return None;
        }
        let st = &self.panes[pane];
        if let Some(k) = &st.gone {
            return Some(k.clone());
        }
        self.key_at(pane, st.selected)
    }

    /// The key of row `i` of `pane` (the last row when `i` is past it).
    pub(super) fn key_at(&self, pane: Pane, i: usize) -> Option<RowKey> {
        pane.view().key_at(self, &self.filter(pane), i)
    }

    /// Where the row with `key` is in `pane`, and how many rows there are.
    pub(super) fn position_of(&self, pane: Pane, key: &RowKey) -> (Option<usize>, usize) {
        pane.view().position_of(self, &self.filter(pane), key)
    }

    /// Refuses an action on `pane` while its selected record is gone (true: refused, with a flash).
    pub(crate) fn refuse_if_gone(&mut self, pane: Pane) -> bool {
        match self.panes[pane].gone.clone() {
            Some(k) if self.pane == pane => {
                self.flash(
                    FlashKind::Error,
                    format!("{k} is no longer listed (it changed on disk); select a row again"),
                );
                true
            }
            _ => false,
        }
    }
}
