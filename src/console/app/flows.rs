//! The operator flows: from the selected record to a prompt, a confirmation and an `Op` as data;
//! then the engine's answer as a flash.

use super::*;

impl App {
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
    ) -> Result<(), AnswerError> {
        let answer = (!text.is_empty()).then_some(text);
        match purpose {
            PromptFor::Action(q) => q.answered(self, answer),
            PromptFor::Snooze(key) => {
                crate::console::panes::attention::snooze_answered(self, key, answer)
            }
        }
    }

    pub(crate) fn selected_workflow(&mut self) -> Option<WorkflowId> {
        if self.pane == Pane::DeadLetters {
            if self.refuse_if_gone(Pane::DeadLetters) {
                return None;
            }
            let Some(wf) =
                crate::console::panes::deadletters::selected_dead(self).map(|(_, _, wf)| wf)
            else {
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

    /// Whether the state allows `action` now (the pane decides first: the board's moves depend
    /// on its phase); the footer leaves out what is not offered, and the action itself says why.
    pub fn offers(&self, action: &Action) -> bool {
        let view = self.pane.view();
        if let Some(yes) = view.offers(self, action) {
            return yes;
        }
        match action {
            Action::Operator(
                OperatorAction::BoardAdvance
                | OperatorAction::BoardForceAdvance
                | OperatorAction::BoardNextRound
                | OperatorAction::BoardResolve,
            ) => false,
            Action::Filter => view.lists_records(),
            Action::NextMatch | Action::PrevMatch => !self.pane_state().filter.is_empty(),
            // Nothing listed (an empty root): no action on a selected record is offered.
            Action::Operator(
                OperatorAction::Abort
                | OperatorAction::Cleanup
                | OperatorAction::Ack(_)
                | OperatorAction::Approve
                | OperatorAction::RejectHeld
                | OperatorAction::ForceUnlock
                | OperatorAction::Requeue
                | OperatorAction::DiscardDead
                | OperatorAction::Rerun,
            )
            | Action::ToggleRaw
            | Action::Open => self.row_count() > 0,
            Action::ToggleMark | Action::MarkRange | Action::MarkAll => {
                !self.pane_state().detail && view.lists_records()
            }
            _ => true,
        }
    }

    /// Opens the confirmation dialog for `op`, with what will happen.
    pub(crate) fn confirm(&mut self, op: Op) {
        let op = crate::console::actions::bulk::on_marks(self, op);
        let mut lines = op.describe(&self.snapshot, self.now);
        lines.push((Tone::Dim, self.recorded_as()));
        self.mode = Mode::Confirm(Confirm::new(op, lines, &self.snapshot));
    }

    /// The engine's cleanup dry run for `wf` came back: the confirmation, or why there is none
    /// (the `cleanup` action's module says).
    pub fn cleanup_previewed(
        &mut self,
        wf: WorkflowId,
        result: Result<crate::engine::CleanupResult, crate::engine::Error>,
    ) {
        crate::console::actions::cleanup::cleanup_previewed(self, wf, result)
    }

    /// The engine answered an operation.
    pub fn op_finished(
        &mut self,
        op: &Op,
        result: Result<crate::console::ops::Done, crate::engine::Error>,
    ) -> Vec<Effect> {
        self.in_flight = self.in_flight.saturating_sub(1);
        match result {
            Ok(done) => {
                let kind = match &done.outcome {
                    crate::console::ops::Outcome::Bulk(r) if r.has_failures() => FlashKind::Error,
                    _ => FlashKind::Success,
                };
                self.flash(kind, done.flash);
                op.finished(self, &done.outcome)
            }
            Err(e) => {
                self.flash(FlashKind::Error, format!("{} refused: {e}", op.title()));
                Vec::new()
            }
        }
    }
}
