//! The operator flows: from the selected record to a prompt, a confirmation and an `Op` as data;
//! then the engine's answer as a flash.

use super::*;

impl App {
    pub(super) fn start_snooze(&mut self) {
        if self.pane != Pane::Attention || self.refuse_if_gone(Pane::Attention) {
            return self.need("an attention item (7 Attention)");
        }
        let items = self.attention();
        let Some(item) = items.get(self.selected(Pane::Attention)) else {
            return self.need("an attention item");
        };
        self.ask(
            "Snooze for (e.g. 15m, 2h, 1d, or a time)",
            true,
            "1h".into(),
            PromptFor::Snooze(item.key.clone()),
        );
    }

    pub(crate) fn selected_dispatch(
        &self,
    ) -> Option<(String, Arc<crate::live::snapshot::DispatchRecord>, bool)> {
        if self.pane != Pane::Inboxes || self.pane_state().gone.is_some() {
            return None;
        }
        let rows = items::dispatches(&self.snapshot, &self.filter(Pane::Inboxes));
        let r = rows.get(self.selected(Pane::Inboxes))?;
        Some((r.god.to_owned(), r.view.dispatch.clone(), r.held))
    }

    pub(crate) fn need(&mut self, what: &str) {
        self.flash(FlashKind::Error, format!("select {what} first"));
    }

    pub(crate) fn ask(
        &mut self,
        label: impl Into<String>,
        required: bool,
        input: String,
        purpose: PromptFor,
    ) {
        // With marks, the prompt is asked once for every marked record: it says so, not the one
        // record the selection stands on (the confirmation then lists each).
        let marked = self.pane_state().picked.len();
        let title = match &purpose {
            PromptFor::Action(q) => q.title(marked, self.pane),
            PromptFor::Snooze(key) => format!("Snooze {key}"),
        };
        self.mode = Mode::Prompt(Prompt {
            title,
            label: label.into(),
            required,
            // A suggested answer (the snooze's `1h`, requeue's last god, rerun's step) is a
            // placeholder: the first key typed replaces it, Enter takes it.
            input: LineEditor::suggested(input),
            purpose,
            completions: Vec::new(),
            context: Vec::new(),
        });
    }

    /// [`App::ask`] with `context` lines shown above the label (what the answer is about).
    pub(crate) fn ask_about(
        &mut self,
        context: Vec<String>,
        label: impl Into<String>,
        input: String,
        purpose: PromptFor,
    ) {
        self.ask(label, false, input, purpose);
        if let Mode::Prompt(p) = &mut self.mode {
            p.context = context;
        }
    }

    /// Takes a prompt's answer: asks the next question or opens the confirmation (the action's
    /// module decides). An answer that cannot be used comes back as the reason, and the prompt
    /// stays open.
    pub(super) fn prompt_answered(
        &mut self,
        purpose: PromptFor,
        text: String,
    ) -> Result<(), String> {
        let answer = (!text.is_empty()).then_some(text);
        match purpose {
            PromptFor::Action(q) => q.answered(self, answer),
            PromptFor::Snooze(key) => self.snooze_answered(key, answer),
        }
    }

    /// How long to snooze an attention item was typed.
    fn snooze_answered(
        &mut self,
        key: attention::Key,
        answer: Option<String>,
    ) -> Result<(), String> {
        let until = parse_eta(answer.as_deref().unwrap_or(""), self.now)?;
        let until = crate::engine::time::parse_ts(&until)
            .ok_or_else(|| format!("cannot read {until:?} as a time"))?;
        self.snoozed.retain(|_, t| *t > self.now);
        // Said in words: the item's kind and record, and for how long (not its internal key).
        let what = self
            .attention_all()
            .into_iter()
            .find(|i| i.key == key)
            .map(|i| format!("{} {}", i.kind.as_str().replace('_', " "), i.record()))
            .unwrap_or_else(|| key.kind().as_str().replace('_', " "));
        self.snoozed.insert(key, until);
        self.flash(
            FlashKind::Info,
            format!(
                "snoozed {} for {} (until {})",
                what.trim(),
                crate::live::snapshot::short_duration(until - self.now),
                crate::console::times::when_at(
                    Some(&crate::live::compact::Stamp::At(until)),
                    self.now,
                    true
                )
            ),
        );
        Ok(())
    }

    pub(crate) fn selected_workflow(&mut self) -> Option<WorkflowId> {
        if self.pane == Pane::DeadLetters {
            if self.refuse_if_gone(Pane::DeadLetters) {
                return None;
            }
            let Some(wf) = self.selected_dead().map(|(_, _, wf)| wf) else {
                self.need("a dead letter");
                return None;
            };
            return match WorkflowId::parse(&wf) {
                Ok(id) => Some(id),
                Err(e) => {
                    self.flash(FlashKind::Error, e.to_string());
                    None
                }
            };
        }
        if self.pane != Pane::Workflows {
            self.need("a workflow in the Workflows pane (1)");
            return None;
        }
        if self.refuse_if_gone(Pane::Workflows) {
            return None;
        }
        let rows = items::workflows(&self.snapshot, &self.filter(Pane::Workflows));
        let Some(w) = rows.get(self.selected(Pane::Workflows)) else {
            self.need("a workflow");
            return None;
        };
        match WorkflowId::parse(&w.id) {
            Ok(id) => Some(id),
            Err(e) => {
                self.flash(FlashKind::Error, e.to_string());
                None
            }
        }
    }

    /// The selected dead letter of pane 9: (its god, its handoff id, its workflow id).
    pub(crate) fn selected_dead(&self) -> Option<(String, String, String)> {
        if self.pane != Pane::DeadLetters || self.pane_state().gone.is_some() {
            return None;
        }
        let rows = items::dead_letters(&self.snapshot, &self.filter(Pane::DeadLetters));
        let r = rows.get(self.selected(Pane::DeadLetters))?;
        let d = &r.view.dispatch;
        let hid = if d.handoff_id.is_empty() {
            r.view.name.to_string()
        } else {
            d.handoff_id.to_string()
        };
        Some((r.god.to_owned(), hid, d.workflow_id.to_string()))
    }

    /// The dead letter of `handoff_id`: (its row key, the god it was delivered to last).
    pub(crate) fn dead_row_of(&self, handoff_id: &HandoffId) -> Option<(RowKey, String)> {
        items::dead_letters(&self.snapshot, &Filter::default())
            .iter()
            .find(|r| {
                *r.view.dispatch.handoff_id == *handoff_id.as_str()
                    || *r.view.name == *handoff_id.as_str()
            })
            .map(|r| (r.key(), r.last_target().to_owned()))
    }

    /// Every god the console knows of (inboxes, dead letters, definitions' steps), for completion.
    pub fn known_gods(&self) -> Vec<String> {
        let s = &self.snapshot;
        let mut v: Vec<String> = s.inboxes.iter().map(|i| i.god.clone()).collect();
        v.extend(s.dead_letters.iter().map(|i| i.god.clone()));
        for d in s.definitions.iter() {
            for st in &d.steps {
                v.push(st.god.clone());
                v.extend(st.fallback_gods.iter().cloned());
            }
        }
        v.retain(|g| GodName::parse(g).is_ok());
        v.sort();
        v.dedup();
        v
    }

    /// The confirmation's last line: who the journal will record.
    pub(crate) fn recorded_as(&self) -> String {
        recorded_as(&self.actor)
    }

    /// The board's moves on the shown track (None: no session).
    pub(crate) fn board_moves(&self) -> Option<items::BoardMoves> {
        items::track(&self.snapshot, self.track.as_deref())
            .and_then(|t| t.board.as_ref())
            .map(|b| items::board_moves(b))
    }

    /// Whether the state allows `action` now (the pane decides first: the board's moves depend
    /// on its phase); the footer leaves out what is not offered, and the action itself says why.
    pub fn offers(&self, action: &Action) -> bool {
        let view = self.pane.view();
        if let Some(yes) = view.offers(self, action) {
            return yes;
        }
        match action {
            Action::BoardAdvance
            | Action::BoardForceAdvance
            | Action::BoardNextRound
            | Action::BoardResolve => false,
            Action::Filter => view.lists_records(),
            Action::NextMatch | Action::PrevMatch => !self.pane_state().filter.is_empty(),
            // Nothing listed (an empty root): no action on a selected record is offered.
            Action::Abort
            | Action::Cleanup
            | Action::ToggleRaw
            | Action::Ack(_)
            | Action::Approve
            | Action::RejectHeld
            | Action::ForceUnlock
            | Action::Requeue
            | Action::DiscardDead
            | Action::Rerun
            | Action::Open => self.row_count() > 0,
            Action::ToggleMark | Action::MarkRange | Action::MarkAll => {
                !self.pane_state().detail && view.lists_records()
            }
            _ => true,
        }
    }

    /// Opens the confirmation dialog for `op`, with what will happen.
    pub(crate) fn confirm(&mut self, op: Op) {
        let op = self.on_marks(op);
        let mut lines = op.describe(&self.snapshot, self.now);
        lines.push((Tone::Dim, self.recorded_as()));
        self.mode = Mode::Confirm(Confirm::new(op, lines, &self.snapshot));
    }

    /// The engine answered an operation.
    pub fn op_finished(&mut self, op: &Op, result: Result<crate::console::ops::Outcome, String>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match result {
            Ok(v) => {
                let kind = match &v {
                    crate::console::ops::Outcome::Bulk(r) if r.has_failures() => FlashKind::Error,
                    _ => FlashKind::Success,
                };
                self.flash(kind, op.summarize(&v));
                op.finished(self, &v);
            }
            Err(e) => self.flash(FlashKind::Error, format!("{} refused: {e}", op.title())),
        }
    }
}
