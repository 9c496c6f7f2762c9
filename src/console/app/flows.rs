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

    pub(super) fn selected_dispatch(
        &self,
    ) -> Option<(String, Arc<crate::live::snapshot::DispatchRecord>, bool)> {
        if self.pane != Pane::Inboxes || self.pane_state().gone.is_some() {
            return None;
        }
        let rows = items::dispatches(&self.snapshot, &self.filter(Pane::Inboxes));
        let r = rows.get(self.selected(Pane::Inboxes))?;
        Some((r.god.to_owned(), r.view.dispatch.clone(), r.held))
    }

    pub(super) fn need(&mut self, what: &str) {
        self.flash(FlashKind::Error, format!("select {what} first"));
    }

    pub(super) fn start_ack(&mut self, choice: Option<AckChoice>) {
        if self.refuse_if_gone(Pane::Inboxes) {
            return;
        }
        let Some((god, d, held)) = self.selected_dispatch() else {
            return self.need("a dispatch in the Inboxes pane (2)");
        };
        if held {
            self.flash(
                FlashKind::Error,
                "a held dispatch is approved (p) or rejected (R), not acked",
            );
            return;
        }
        let target = match (GodName::parse(&god), HandoffId::parse(&d.handoff_id)) {
            (Ok(god), Ok(handoff_id)) => AckTarget {
                god,
                handoff_id,
                workflow_id: WorkflowId::parse(&d.workflow_id).ok(),
                step: d.step.to_string(),
            },
            (Err(e), _) | (_, Err(e)) => {
                self.flash(FlashKind::Error, format!("cannot ack this dispatch: {e}"));
                return;
            }
        };
        match choice {
            Some(c) => self.choose_ack(target, c),
            None => self.mode = Mode::AckMenu { target, choice: 0 },
        }
    }

    pub(super) fn choose_ack(&mut self, target: AckTarget, status: AckChoice) {
        match crate::console::action::ack_message_prompt(status) {
            Some((label, required)) => self.ask(
                label,
                required,
                String::new(),
                PromptFor::Ack {
                    target,
                    status,
                    stage: AckStage::Message,
                },
            ),
            None => self.confirm(ack_op(target, status, None, None, Vec::new())),
        }
    }

    pub(super) fn ask(
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
            PromptFor::Ack { status, .. } if marked > 0 => {
                format!("Ack {marked} marked dispatch(es) as {}", status.as_str())
            }
            PromptFor::RejectHeld(_) if marked > 0 => {
                format!("Reject {marked} marked held dispatch(es)")
            }
            PromptFor::Abort(_) if marked > 0 && self.pane == Pane::DeadLetters => {
                format!("Abort the workflows of {marked} marked dead letter(s)")
            }
            PromptFor::Abort(_) if marked > 0 => format!("Abort {marked} marked workflow(s)"),
            PromptFor::Requeue { .. } if marked > 0 => {
                format!("Requeue {marked} marked dead letter(s)")
            }
            PromptFor::Ack { target, status, .. } => {
                format!("Ack {} as {}", target.handoff_id, status.as_str())
            }
            PromptFor::RejectHeld(h) => format!("Reject held {h}"),
            PromptFor::Abort(wf) => format!("Abort {wf}"),
            PromptFor::Requeue { handoff_id, .. } => format!("Requeue dead letter {handoff_id}"),
            PromptFor::Rerun(wf, None) => format!("Rerun {wf}"),
            PromptFor::Rerun(wf, Some(at)) => format!("Fork {wf} as of {at}"),
            PromptFor::Snooze(key) => format!("Snooze {key}"),
            PromptFor::RaiseBudget(h) => format!("Approve {h}, held for a budget"),
        };
        self.mode = Mode::Prompt(Prompt {
            title,
            label: label.into(),
            required,
            input: LineEditor::new(input),
            purpose,
            completions: Vec::new(),
        });
    }

    /// The gates the step of a dispatch declares in its workflow's definition (empty when unknown).
    pub(super) fn declared_gates(&self, t: &AckTarget) -> Vec<String> {
        let Some(wf) = &t.workflow_id else {
            return Vec::new();
        };
        self.snapshot
            .workflows
            .iter()
            .find(|w| *w.id == *wf.as_str())
            .and_then(|w| self.snapshot.definition(w.state.definition_id.as_deref()))
            .and_then(|d| d.step(&t.step))
            .map(|s| s.gates.clone())
            .unwrap_or_default()
    }

    /// Takes a prompt's answer: asks the next question or opens the confirmation. An answer that
    /// cannot be used comes back as the reason, and the prompt stays open.
    pub(super) fn prompt_answered(
        &mut self,
        purpose: PromptFor,
        text: String,
    ) -> Result<(), String> {
        let answer = (!text.is_empty()).then_some(text);
        let op = match purpose {
            PromptFor::Ack {
                target,
                status,
                stage,
            } => match stage {
                AckStage::Message => match status {
                    AckChoice::Pending => {
                        self.ask(
                            "ETA (optional): in 30m / 2h / 1d, or a time like 2026-06-14T12:00:00Z",
                            false,
                            String::new(),
                            PromptFor::Ack {
                                target,
                                status,
                                stage: AckStage::Eta { message: answer },
                            },
                        );
                        return Ok(());
                    }
                    AckChoice::Completed => {
                        let declared = self.declared_gates(&target);
                        if declared.is_empty() {
                            ack_op(target, status, answer, None, Vec::new())
                        } else {
                            self.ask(
                                format!(
                                    "Gates passed (step {} declares: {}; comma-separated, edit to what really passed)",
                                    target.step,
                                    declared.join(", ")
                                ),
                                false,
                                declared.join(", "),
                                PromptFor::Ack {
                                    target,
                                    status,
                                    stage: AckStage::Gates {
                                        message: answer,
                                        declared,
                                    },
                                },
                            );
                            return Ok(());
                        }
                    }
                    _ => ack_op(target, status, answer, None, Vec::new()),
                },
                AckStage::Eta { message } => {
                    let eta = match answer {
                        Some(a) => Some(parse_eta(&a, self.now)?),
                        None => None,
                    };
                    ack_op(target, status, message, eta, Vec::new())
                }
                AckStage::Gates { message, .. } => {
                    let gates = parse_gates(answer.as_deref().unwrap_or(""))?;
                    ack_op(target, status, message, None, gates)
                }
            },
            PromptFor::RejectHeld(handoff_id) => Op::RejectHeld {
                handoff_id,
                reason: answer.unwrap_or_default(),
            },
            PromptFor::Abort(workflow_id) => Op::Abort {
                workflow_id,
                reason: answer.unwrap_or_default(),
            },
            PromptFor::Requeue {
                handoff_id,
                from_god,
            } => {
                let to = match answer.as_deref() {
                    None => None,
                    Some(g) => Some(GodName::parse_as("god", g).map_err(|e| e.to_string())?),
                };
                // The god it was delivered to last is the engine's own default: no `--to` (with
                // marks, each dead letter is compared with its own last god when fanned out).
                let last = self.dead_row_of(&handoff_id).map(|(_, last)| last);
                let to = if self.pane_state().picked.is_empty() {
                    to.filter(|g| last.as_deref() != Some(g.as_str()))
                } else {
                    to
                };
                Op::Requeue {
                    handoff_id,
                    from_god,
                    to,
                }
            }
            PromptFor::Rerun(workflow_id, as_of) => {
                let step = answer.unwrap_or_default();
                let steps = self.rerun_steps(&workflow_id);
                if !steps.is_empty() && !steps.contains(&step) {
                    return Err(format!(
                        "{step:?} is not a step of {workflow_id}'s definition (Tab completes: {})",
                        steps.join(", ")
                    ));
                }
                let step =
                    crate::engine::StepId::parse_as("step", &step).map_err(|e| e.to_string())?;
                Op::Rerun {
                    workflow_id,
                    step,
                    as_of,
                }
            }
            PromptFor::RaiseBudget(handoff_id) => Op::Approve {
                handoff_id,
                raise: answer.as_deref().map(parse_budget).transpose()?,
            },
            PromptFor::Snooze(key) => {
                let until = parse_eta(answer.as_deref().unwrap_or(""), self.now)?;
                let until = crate::engine::time::parse_ts(&until)
                    .ok_or_else(|| format!("cannot read {until:?} as a time"))?;
                self.snoozed.retain(|_, t| *t > self.now);
                self.snoozed.insert(key.clone(), until);
                self.flash(
                    FlashKind::Info,
                    format!(
                        "snoozed {key} until {}",
                        until.format("%Y-%m-%d %H:%M:%S UTC")
                    ),
                );
                return Ok(());
            }
        };
        self.confirm(op);
        Ok(())
    }

    pub(super) fn start_approve(&mut self) {
        if self.refuse_if_gone(Pane::Inboxes) {
            return;
        }
        match self.selected_dispatch() {
            // Held for a budget, one dispatch: the operator may raise the budget first.
            Some((_, d, true))
                if crate::live::ledger::held_for_budget(d.held_because.as_deref())
                    && self.pane_state().picked.is_empty() =>
            {
                match HandoffId::parse(&d.handoff_id) {
                    Ok(h) => self.ask(
                        "Raise the budget to (e.g. $5, 3000000 tokens, or both; empty: approve as it is)",
                        false,
                        String::new(),
                        PromptFor::RaiseBudget(h),
                    ),
                    Err(e) => self.flash(FlashKind::Error, e.to_string()),
                }
            }
            Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
                Ok(handoff_id) => self.confirm(Op::Approve {
                    handoff_id,
                    raise: None,
                }),
                Err(e) => self.flash(FlashKind::Error, e.to_string()),
            },
            _ => self.need("a held dispatch (the _quarantine rows of pane 2)"),
        }
    }

    pub(super) fn start_reject_held(&mut self) {
        if self.refuse_if_gone(Pane::Inboxes) {
            return;
        }
        match self.selected_dispatch() {
            Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
                Ok(h) => self.ask(
                    "Reason for rejecting (required)",
                    true,
                    String::new(),
                    PromptFor::RejectHeld(h),
                ),
                Err(e) => self.flash(FlashKind::Error, e.to_string()),
            },
            _ => self.need("a held dispatch (the _quarantine rows of pane 2)"),
        }
    }

    pub(super) fn selected_workflow(&mut self) -> Option<WorkflowId> {
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
    pub(super) fn selected_dead(&self) -> Option<(String, String, String)> {
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
    pub(super) fn dead_row_of(&self, handoff_id: &HandoffId) -> Option<(RowKey, String)> {
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

    /// The step ids of a workflow's definition, in its order (empty when it is not loaded).
    pub fn rerun_steps(&self, wf: &WorkflowId) -> Vec<String> {
        self.snapshot
            .workflows
            .iter()
            .find(|w| &*w.id == wf.as_str())
            .and_then(|w| self.snapshot.definition(w.state.definition_id.as_deref()))
            .map(|d| d.steps.iter().map(|s| s.id.clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn start_requeue(&mut self) {
        if self.refuse_if_gone(Pane::DeadLetters) {
            return;
        }
        let Some((god, hid, _)) = self.selected_dead() else {
            return self.need("a dead letter in the Dead letters pane (9)");
        };
        let (handoff_id, from_god) = match (HandoffId::parse(&hid), GodName::parse(&god)) {
            (Ok(h), Ok(g)) => (h, g),
            (Err(e), _) | (_, Err(e)) => {
                return self.flash(FlashKind::Error, format!("cannot requeue this file: {e}"));
            }
        };
        let last = self
            .dead_row_of(&handoff_id)
            .map(|(_, l)| l)
            .unwrap_or_else(|| god.clone());
        let marked = self.pane_state().picked.len();
        let label = if marked > 1 {
            "Requeue to god (empty: each to the god it was delivered to last; Tab completes)"
                .to_owned()
        } else {
            format!("Requeue to god (the god it was delivered to last: {last}; Tab completes)")
        };
        let input = if marked > 1 { String::new() } else { last };
        self.ask(
            label,
            false,
            input,
            PromptFor::Requeue {
                handoff_id,
                from_god,
            },
        );
        let gods = self.known_gods();
        if let Mode::Prompt(p) = &mut self.mode {
            p.completions = gods;
        }
    }

    pub(super) fn start_rerun(&mut self) {
        let Some(wf) = self.selected_workflow() else {
            return;
        };
        let Some(w) = self
            .snapshot
            .workflows
            .iter()
            .find(|w| &*w.id == wf.as_str())
        else {
            return self.need("a workflow");
        };
        use crate::engine::WorkflowStatus as S;
        let status = w.state.status.clone();
        if !matches!(status, S::Failed | S::Stalled | S::Completed) {
            return self.flash(
                FlashKind::Error,
                format!(
                    "{wf} is {status}: only a failed, stalled or completed workflow is rerun (abort it first)"
                ),
            );
        }
        let steps = self.rerun_steps(&wf);
        // The step it failed or stalled at; a completed workflow starts again from its first step.
        let default = match status {
            S::Completed => steps.first().cloned(),
            _ => w
                .state
                .current_step
                .as_deref()
                .map(str::to_owned)
                .or_else(|| steps.first().cloned()),
        }
        .unwrap_or_default();
        let label = if steps.is_empty() {
            "Rerun from step (its definition is not loaded here)".to_owned()
        } else {
            format!("Rerun from step (Tab completes: {})", steps.join(", "))
        };
        self.ask(label, true, default, PromptFor::Rerun(wf, None));
        if let Mode::Prompt(p) = &mut self.mode {
            p.completions = steps;
        }
    }

    pub(super) fn start_abort(&mut self) {
        if let Some(wf) = self.selected_workflow() {
            self.ask(
                "Reason for aborting (required)",
                true,
                String::new(),
                PromptFor::Abort(wf),
            );
        }
    }

    pub(super) fn start_cleanup(&mut self) -> Vec<Effect> {
        match self.selected_workflow() {
            Some(wf) => {
                self.flash(FlashKind::Info, format!("dry run of cleanup for {wf}…"));
                vec![Effect::PreviewCleanup(wf)]
            }
            None => Vec::new(),
        }
    }

    pub(super) fn start_unlock(&mut self) {
        if self.pane == Pane::Locks && self.refuse_if_gone(Pane::Locks) {
            return;
        }
        let rows = items::locks(&self.snapshot, &self.filter(Pane::Locks));
        let Some((track, lock)) = rows.get(self.selected(Pane::Locks)).copied() else {
            return self.need("a lock in the Locks pane (4)");
        };
        // Both parsed here, where the op is built: a hostile name never reaches a confirmation.
        match TrackName::parse(track).and_then(|t| Ok((t, LockKey::parse(&lock.path)?))) {
            Ok((track, path)) => self.confirm(Op::ForceUnlock { track, path }),
            Err(e) => self.flash(FlashKind::Error, e.to_string()),
        }
    }

    /// The confirmation's last line: who the journal will record.
    pub(super) fn recorded_as(&self) -> String {
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
            | Action::Rerun
            | Action::Open => self.row_count() > 0,
            Action::ToggleMark | Action::MarkRange | Action::MarkAll => {
                !self.pane_state().detail && view.lists_records()
            }
            _ => true,
        }
    }

    pub(super) fn start_board(&mut self, which: Action) {
        let Some(name) = self.track_name() else {
            return self.need("a track with a board");
        };
        let track = match TrackName::parse(&name) {
            Ok(t) => t,
            Err(e) => return self.flash(FlashKind::Error, e.to_string()),
        };
        let Some(m) = self.board_moves() else {
            return self.flash(FlashKind::Error, format!("{name} has no board session"));
        };
        if let Some(r) = &m.resolved {
            return self.flash(
                FlashKind::Error,
                format!("the session is {r}; nothing is left to do on it"),
            );
        }
        // The session as shown: the engine refuses the act if it moved on before Enter.
        let seen = items::track(&self.snapshot, Some(&name))
            .and_then(|t| t.board.as_ref())
            .map(|b| crate::engine::board::BoardSeen::of(&b.session));
        let op = match which {
            Action::BoardAdvance | Action::BoardForceAdvance => {
                let Some(to) = m.next else {
                    return self.flash(
                        FlashKind::Error,
                        format!("the session is {}: resolve it with s", m.status),
                    );
                };
                let force = !m.complete;
                if force && which == Action::BoardAdvance {
                    return self.flash(
                        FlashKind::Error,
                        format!(
                            "the {} phase is not complete ({}); F forces {} -> {to}",
                            m.status, m.missing, m.status
                        ),
                    );
                }
                Op::BoardAdvance { track, force, seen }
            }
            Action::BoardNextRound => {
                if m.round.is_none() {
                    let why = if m.status == crate::engine::board::DISCUSSING {
                        "all discussion rounds are closed; advance with >".to_owned()
                    } else {
                        format!(
                            "rounds are for DISCUSSING sessions; this one is {}",
                            m.status
                        )
                    };
                    return self.flash(FlashKind::Error, why);
                }
                Op::BoardNextRound { track, seen }
            }
            _ => {
                let missing = items::track(&self.snapshot, Some(&name))
                    .and_then(|t| t.board.as_ref())
                    .map(|b| items::directors(b).iter().any(|c| c.vote.is_none()))
                    .unwrap_or(false);
                Op::BoardResolve {
                    track,
                    force: missing,
                    seen,
                }
            }
        };
        self.confirm(op);
    }

    /// Opens the confirmation dialog for `op`, with what will happen.
    pub(crate) fn confirm(&mut self, op: Op) {
        let op = match self.fan_out(&op) {
            Some((items, skipped)) => Op::Bulk { items, skipped },
            None => op,
        };
        let mut lines = crate::console::preview::describe(&op, &self.snapshot, self.now);
        lines.push((Tone::Dim, self.recorded_as()));
        self.mode = Mode::Confirm(Confirm::new(op, lines, &self.snapshot));
    }

    /// The engine answered an operation.
    pub fn op_finished(&mut self, op: &Op, result: Result<crate::console::ops::Outcome, String>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match result {
            Ok(crate::console::ops::Outcome::Bulk(v)) => {
                let kind = if v.has_failures() {
                    FlashKind::Error
                } else {
                    FlashKind::Success
                };
                self.flash(
                    kind,
                    op.summarize(&crate::console::ops::Outcome::Bulk(v.clone())),
                );
                if let Op::Bulk { items, .. } = op {
                    self.bulk_finished(items, &v);
                }
            }
            Ok(v) => self.flash(FlashKind::Success, op.summarize(&v)),
            Err(e) => self.flash(FlashKind::Error, format!("{} refused: {e}", op.title())),
        }
    }

    /// The engine answered a cleanup dry run: show it and ask for confirmation.
    pub fn cleanup_previewed(&mut self, wf: WorkflowId, result: Result<CleanupResult, String>) {
        match result {
            Ok(v) if crate::console::preview::cleanup_finds_nothing(&v) => self.flash(
                FlashKind::Info,
                format!(
                    "cleanup of {wf}: the dry run found nothing to delete ({} already gone, {} refused)",
                    v.missing.len(),
                    v.refused.len()
                ),
            ),
            Ok(v) => {
                let op = Op::Cleanup { workflow_id: wf };
                let mut lines = crate::console::preview::cleanup_lines(&v);
                lines.push((Tone::Dim, self.recorded_as()));
                self.flash = None;
                self.mode = Mode::Confirm(Confirm::new(op, lines, &self.snapshot));
            }
            Err(e) => self.flash(FlashKind::Error, format!("cleanup of {wf} refused: {e}")),
        }
    }
}
