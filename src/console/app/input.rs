//! Terminal input: a key in each input mode (normal, help, filter, `:` line, ack menu, prompt,
//! confirmation), pastes, and the `:` command line with its history and completion.

use super::*;

impl App {
    /// Handles a terminal key.
    pub fn on_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        if ev.kind == KeyEventKind::Release {
            return Vec::new();
        }
        if ev.code == KeyCode::Char('c') && ev.modifiers.contains(KeyModifiers::CONTROL) {
            return vec![Effect::Quit];
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Normal => {
                let key = Key::from_event(&ev);
                let scopes =
                    Keymap::scopes_in(self.pane, self.pane_state().detail, self.replay.is_some());
                match self.keymap.binding(&scopes, key).map(|b| b.action.clone()) {
                    Some(a) => self.dispatch(a),
                    None => {
                        // A key that acts elsewhere says where, instead of doing nothing silently.
                        if let Some(why) = self.keymap.elsewhere(key) {
                            self.flash(FlashKind::Info, why);
                        }
                        Vec::new()
                    }
                }
            }
            Mode::Issues | Mode::Messages => Vec::new(),
            Mode::Help(h) => {
                self.help_key(h, &ev);
                Vec::new()
            }
            Mode::Filter(mut edit) => {
                match ev.code {
                    KeyCode::Enter => {}
                    KeyCode::Esc => self.pane_state_mut().filter.clear(),
                    _ => {
                        if edit.handle(&ev) == Edit::Changed {
                            self.set_filter(edit.text().to_owned());
                        }
                        self.mode = Mode::Filter(edit);
                    }
                }
                Vec::new()
            }
            Mode::Command(mut cl) => match ev.code {
                KeyCode::Enter => {
                    let line = cl.edit.text().to_owned();
                    self.history.push(&line);
                    self.run_command(&line)
                }
                KeyCode::Esc => Vec::new(),
                KeyCode::Up | KeyCode::Down => {
                    self.recall(&mut cl, ev.code == KeyCode::Up);
                    self.mode = Mode::Command(cl);
                    Vec::new()
                }
                KeyCode::Tab => {
                    cl.candidates = self.complete(&mut cl.edit);
                    self.mode = Mode::Command(cl);
                    Vec::new()
                }
                _ => {
                    if cl.edit.handle(&ev) == Edit::Changed {
                        cl.recalled = None;
                        cl.candidates = None;
                    }
                    self.mode = Mode::Command(cl);
                    Vec::new()
                }
            },
            Mode::AckMenu { target, mut choice } => {
                match self
                    .keymap
                    .lookup_dialog(Dialog::AckMenu, Key::from_event(&ev))
                {
                    Some(Action::Cancel) => return Vec::new(),
                    Some(Action::Up) => choice = choice.saturating_sub(1),
                    Some(Action::Down) => choice = (choice + 1).min(AckChoice::ALL.len() - 1),
                    Some(Action::Submit) => {
                        crate::console::actions::ack::choose_ack(
                            self,
                            target,
                            AckChoice::ALL[choice],
                        );
                        return Vec::new();
                    }
                    _ => {}
                }
                self.mode = Mode::AckMenu { target, choice };
                Vec::new()
            }
            Mode::Prompt(mut p) => match self
                .keymap
                .lookup_dialog(Dialog::Prompt, Key::from_event(&ev))
            {
                Some(Action::Cancel) => Vec::new(),
                Some(Action::Submit) => {
                    let text = p.input.text().trim().to_owned();
                    if p.required && text.is_empty() {
                        self.flash(FlashKind::Error, format!("{} cannot be empty", p.label));
                        self.mode = Mode::Prompt(p);
                        return Vec::new();
                    }
                    if let Err(why) = self.prompt_answered(p.purpose.clone(), text) {
                        self.flash(FlashKind::Error, why.to_string());
                        self.mode = Mode::Prompt(p);
                    }
                    Vec::new()
                }
                _ if ev.code == KeyCode::Tab && !p.completions.is_empty() => {
                    self.complete_prompt(&mut p);
                    self.mode = Mode::Prompt(p);
                    Vec::new()
                }
                _ => {
                    p.input.handle(&ev);
                    self.mode = Mode::Prompt(p);
                    Vec::new()
                }
            },
            Mode::Confirm(c) => self.confirm_key(c, &ev),
        }
    }

    /// A key in the help overlay: scrolling, or typing its search.
    fn help_key(&mut self, mut h: HelpView, ev: &KeyEvent) {
        if h.searching {
            match ev.code {
                KeyCode::Enter => h.searching = false,
                KeyCode::Esc => {
                    h.search = LineEditor::default();
                    h.searching = false;
                }
                _ => {
                    if h.search.handle(ev) == Edit::Changed {
                        h.scroll = 0;
                    }
                }
            }
            self.mode = Mode::Help(h);
            return;
        }
        let max = self.drawn.help_max.get();
        let page = self.page.max(1);
        // Bottom is kept as "the end" (whatever the size); moving starts from what is shown.
        h.scroll = h.scroll.min(max);
        match self.keymap.lookup_dialog(Dialog::Help, Key::from_event(ev)) {
            Some(Action::Cancel) => return,
            Some(Action::Down) => h.scroll = (h.scroll + 1).min(max),
            Some(Action::Up) => h.scroll = h.scroll.saturating_sub(1),
            Some(Action::PageDown) => h.scroll = (h.scroll + page).min(max),
            Some(Action::PageUp) => h.scroll = h.scroll.saturating_sub(page),
            Some(Action::Top) => h.scroll = 0,
            Some(Action::Bottom) => h.scroll = usize::MAX,
            Some(Action::Filter) => h.searching = true,
            _ => {}
        }
        self.mode = Mode::Help(h);
    }

    /// A key in a confirmation: `Enter` acts on exactly what it showed, or refuses.
    fn confirm_key(&mut self, mut c: Confirm, ev: &KeyEvent) -> Vec<Effect> {
        match self
            .keymap
            .lookup_dialog(Dialog::Confirm, Key::from_event(ev))
        {
            Some(Action::Cancel) => {
                self.flash(FlashKind::Info, format!("cancelled: {}", c.op.title()));
                Vec::new()
            }
            Some(Action::ToggleFocus) => {
                c.confirm_focused = !c.confirm_focused;
                self.mode = Mode::Confirm(c);
                Vec::new()
            }
            Some(Action::Submit) => {
                let now = crate::console::shown::version(&c.op, &self.snapshot);
                if c.confirm_focused
                    && let Some(what) = crate::console::shown::changed(&c.shown, &now)
                {
                    // It acts on exactly what it showed: a newer state is refused, named.
                    self.flash(
                        FlashKind::Error,
                        format!(
                            "{} refused: changed since it was shown ({what}); nothing was done",
                            c.op.title()
                        ),
                    );
                    return Vec::new();
                }
                if c.confirm_focused {
                    self.in_flight += 1;
                    self.acted_on = self
                        .selected_key(self.pane)
                        .filter(|_| !c.op.is_bulk())
                        .map(|k| (self.pane, k));
                    self.flash(FlashKind::Info, format!("{}…", c.op.title()));
                    vec![Effect::Execute(Box::new(c.op))]
                } else {
                    self.flash(FlashKind::Info, format!("cancelled: {}", c.op.title()));
                    Vec::new()
                }
            }
            _ => {
                self.mode = Mode::Confirm(c);
                Vec::new()
            }
        }
    }

    /// Tab in a prompt that offers completions: one candidate is taken whole, several are extended
    /// to what they share (and listed in a flash).
    pub(super) fn complete_prompt(&mut self, p: &mut Prompt) {
        // A suggestion is no typed prefix: Tab offers every candidate.
        let typed = if p.input.is_suggested() {
            String::new()
        } else {
            p.input.text().trim().to_owned()
        };
        let cands: Vec<&String> = p
            .completions
            .iter()
            .filter(|c| c.starts_with(&typed))
            .collect();
        match cands.as_slice() {
            [] => self.flash(FlashKind::Info, format!("nothing completes {typed:?}")),
            [one] => p.input.set((*one).clone()),
            many => {
                let common = line::common_prefix(many.iter().map(|c| c.as_str()));
                if common.len() > typed.len() {
                    p.input.set(common);
                }
                self.flash(
                    FlashKind::Info,
                    many.iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join("  "),
                );
            }
        }
    }

    /// Pasted text (bracketed paste) goes whole into the focused input; elsewhere it is ignored.
    /// A click on `row` of the current pane (`None`: elsewhere) at `at`: true when it doubles the
    /// last one (the same pane and row within `within`), which is then forgotten; otherwise it is
    /// remembered for the next click.
    pub(crate) fn click_at(&mut self, row: Option<usize>, at: Instant, within: Duration) -> bool {
        let double = row.is_some_and(|row| {
            self.last_click.is_some_and(|(t, p, r)| {
                p == self.pane && r == row && at.duration_since(t) <= within
            })
        });
        self.last_click = match row {
            Some(row) if !double => Some((at, self.pane, row)),
            _ => None,
        };
        double
    }

    /// A mouse event (`console/mouse.rs`: clicks, the wheel, double-clicks).
    pub fn on_mouse(&mut self, ev: crossterm::event::MouseEvent, at: Instant) -> Vec<Effect> {
        crate::console::mouse::on_mouse(self, ev, at)
    }

    pub fn on_paste(&mut self, text: &str) {
        match &mut self.mode {
            Mode::Prompt(p) => p.input.insert_str(text),
            Mode::Command(cl) => {
                cl.edit.insert_str(text);
                cl.recalled = None;
            }
            Mode::Filter(edit) => {
                edit.insert_str(text);
                let t = edit.text().to_owned();
                self.set_filter(t);
            }
            _ => {}
        }
    }

    /// Sets the current pane's filter; the selection goes back to the first match.
    pub(super) fn set_filter(&mut self, text: String) {
        let st = self.pane_state_mut();
        st.filter = text;
        st.selected = 0;
        st.gone = None;
    }

    /// Up/Down on the `:` line: older/newer history entries; past the newest, the line being typed.
    pub(super) fn recall(&self, cl: &mut CommandLine, older: bool) {
        let n = self.history.len();
        if n == 0 {
            return;
        }
        let next = match (cl.recalled, older) {
            (None, true) => {
                cl.draft = cl.edit.text().to_owned();
                Some(n - 1)
            }
            (None, false) => None,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i + 1 < n => Some(i + 1),
            (Some(_), false) => None,
        };
        cl.recalled = next;
        match next.and_then(|i| self.history.get(i)) {
            Some(line) => cl.edit.set(line),
            None => cl.edit.set(cl.draft.clone()),
        }
    }

    /// What the word being typed on the `:` line can become: command names first, then the
    /// argument's kind (panes, tracks, ack statuses; for `:filter`, gods, workflow ids and tracks).
    pub fn completions(&self, line: &str) -> Vec<String> {
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let typing_new = line.is_empty() || line.ends_with(char::is_whitespace);
        let prefix = if typing_new {
            ""
        } else {
            words.pop().unwrap_or("")
        };
        let s = &self.snapshot;
        let cands: Vec<String> = match words.first() {
            None => commands::COMMANDS
                .iter()
                .map(|c| c.name.to_owned())
                .collect(),
            Some(w) => match commands::lookup(w).map(|c| c.arg) {
                Some(Arg::Pane) => Pane::ALL
                    .iter()
                    .map(|p| p.title().to_ascii_lowercase())
                    .collect(),
                Some(Arg::Track) => s.tracks.iter().map(|t| t.name.clone()).collect(),
                Some(Arg::AckStatus) => AckChoice::ALL
                    .iter()
                    .map(|c| c.as_str().to_owned())
                    .collect(),
                Some(Arg::Filter) => {
                    let mut v: Vec<String> = s.inboxes.iter().map(|i| i.god.clone()).collect();
                    v.extend(s.workflows.iter().map(|w| w.id.to_string()));
                    v.extend(s.tracks.iter().map(|t| t.name.clone()));
                    v
                }
                Some(Arg::Column) => items::sort_columns(self.pane)
                    .iter()
                    .map(|c| c.word())
                    .collect(),
                Some(Arg::None) | Some(Arg::Moment) | None => Vec::new(),
            },
        };
        let mut out: Vec<String> = cands
            .into_iter()
            .filter(|c| c.starts_with(prefix))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Tab on the `:` line: one candidate is taken whole, several are extended to what they share
    /// and returned as the list to show beside the open line.
    pub(super) fn complete(&mut self, edit: &mut LineEditor) -> Option<String> {
        let (_, typed) = edit.current_word();
        let typed = typed.to_owned();
        let line = edit.split().0.to_owned();
        let cands = self.completions(&line);
        match cands.as_slice() {
            [] => Some(format!("nothing completes {typed:?}")),
            [one] => {
                edit.replace_current_word(&format!("{one} "));
                None
            }
            many => {
                let common = line::common_prefix(many.iter().map(String::as_str));
                if common.len() > typed.len() {
                    edit.replace_current_word(&common);
                }
                const SHOWN: usize = 12;
                let mut list = many
                    .iter()
                    .take(SHOWN)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("  ");
                if many.len() > SHOWN {
                    list.push_str(&format!("  (+{} more)", many.len() - SHOWN));
                }
                Some(list)
            }
        }
    }

    /// Runs a `:` command line.
    pub fn run_command(&mut self, line: &str) -> Vec<Effect> {
        let mut words = line.split_whitespace();
        let Some(cmd) = words.next() else {
            return Vec::new();
        };
        let rest: Vec<&str> = words.collect();
        let arg = rest.join(" ");
        let name = commands::lookup(cmd).map(|c| c.name).unwrap_or(cmd);
        if let Some(a) = commands::lookup(name)
            .filter(|c| c.arg == Arg::None)
            .and_then(commands::action_of)
        {
            return self.dispatch(a);
        }
        let action = match name {
            "ack" => match arg.as_str() {
                "" => Action::Operator(OperatorAction::Ack(None)),
                s => match AckChoice::parse(s.trim()) {
                    Some(c) => Action::Operator(OperatorAction::Ack(Some(c))),
                    None => {
                        self.flash(
                            FlashKind::Error,
                            format!("unknown ack status {s:?}: use accepted, pending, rejected or completed"),
                        );
                        return Vec::new();
                    }
                },
            },
            "pane" => match Pane::parse(&arg) {
                Some(p) => Action::GoPane(p),
                None => {
                    self.flash(FlashKind::Error, Pane::not_one(&arg));
                    return Vec::new();
                }
            },
            "track" => {
                if self.snapshot.track(&arg).is_some() {
                    self.panes.bus.track = Some(arg);
                } else {
                    self.flash(FlashKind::Error, format!("no track {arg:?}"));
                }
                return Vec::new();
            }
            "filter" => {
                self.set_filter(arg);
                return Vec::new();
            }
            "sort" if arg.trim().is_empty() => Action::Sort(None),
            "sort" => match items::sort_column(self.pane, &arg) {
                Some(column) => Action::Sort(Some(column)),
                None => {
                    let cols = items::sort_columns(self.pane);
                    let text = if cols.is_empty() {
                        format!("{} rows are not sortable", self.pane.title())
                    } else {
                        format!(
                            "no column {arg:?} here: use {}",
                            cols.iter().map(|c| c.word()).collect::<Vec<_>>().join(", ")
                        )
                    };
                    self.flash(FlashKind::Error, text);
                    return Vec::new();
                }
            },
            "replay" => return self.replay_command(&arg),
            other => match Pane::parse(other) {
                Some(p) => Action::GoPane(p),
                None if Pane::matching(other).len() > 1 => {
                    self.flash(FlashKind::Error, Pane::not_one(other));
                    return Vec::new();
                }
                None => {
                    let hint = match commands::suggest(other) {
                        Some(near) => format!("did you mean :{near}? (? lists every command)"),
                        None => "see ? for commands".to_owned(),
                    };
                    self.flash(
                        FlashKind::Error,
                        format!("unknown command {other:?}: {hint}"),
                    );
                    return Vec::new();
                }
            },
        };
        self.dispatch(action)
    }
}
