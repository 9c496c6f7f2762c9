//! Colours and glyphs. Every state is shown by word or glyph as well as colour, so `NO_COLOR`
//! (which drops colours but keeps bold/reverse) loses nothing.

use super::items::AckShown;
use crate::engine::{AckStatus, WorkflowStatus};
use ratatui::style::{Color, Modifier, Style};

use super::config::Palette;

/// The styles the views use: a palette (the config's theme or skin), and whether to colour at all.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
    pub palette: Palette,
}

impl Theme {
    /// Colours unless `NO_COLOR` is set (to anything non-empty), in the dark theme.
    pub fn from_env() -> Self {
        Self::with_palette(Palette::DARK)
    }

    /// `palette`, unless `NO_COLOR` is set.
    pub fn with_palette(palette: Palette) -> Self {
        Self {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            palette,
        }
    }

    /// The dark theme, coloured or not (tests and screenshots).
    pub fn plain(color: bool) -> Self {
        Self {
            color,
            palette: Palette::DARK,
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub fn base(&self) -> Style {
        Style::new()
    }
    pub fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(self.palette.dim)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }
    pub fn title(&self) -> Style {
        self.fg(self.palette.title).add_modifier(Modifier::BOLD)
    }
    pub fn header(&self) -> Style {
        self.fg(self.palette.header).add_modifier(Modifier::BOLD)
    }
    pub fn ok(&self) -> Style {
        self.fg(self.palette.ok)
    }
    pub fn warn(&self) -> Style {
        self.fg(self.palette.warn)
    }
    /// Something that needs the operator: stale, expired, overdue, failed.
    pub fn alert(&self) -> Style {
        self.fg(self.palette.alert).add_modifier(Modifier::BOLD)
    }
    pub fn info(&self) -> Style {
        self.fg(self.palette.info)
    }
    pub fn accent(&self) -> Style {
        self.fg(self.palette.accent)
    }
    pub fn selected(&self) -> Style {
        if self.color {
            Style::new()
                .bg(self.palette.selected_bg)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
    /// Text matching the filter.
    pub fn matched(&self) -> Style {
        Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
    }

    pub fn key(&self) -> Style {
        self.fg(self.palette.key).add_modifier(Modifier::BOLD)
    }
    pub fn tab_active(&self) -> Style {
        if self.color {
            Style::new()
                .fg(self.palette.tab_fg)
                .bg(self.palette.tab_bg)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }
    /// The replay's header bar: a colour no live screen uses for a whole row (reversed and bold
    /// without colours).
    pub fn past(&self) -> Style {
        if self.color {
            Style::new()
                .fg(self.palette.tab_fg)
                .bg(self.palette.accent)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }
    pub fn button_focused(&self, danger: bool) -> Style {
        if !self.color {
            return Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD);
        }
        let bg = if danger {
            self.palette.alert
        } else {
            self.palette.tab_bg
        };
        Style::new()
            .fg(self.palette.tab_fg)
            .bg(bg)
            .add_modifier(Modifier::BOLD)
    }

    /// Style and glyph of a workflow status.
    pub fn workflow_status(&self, status: &WorkflowStatus) -> (Style, &'static str) {
        match status {
            WorkflowStatus::InProgress => (self.info(), "●"),
            WorkflowStatus::WaitingForAck => (self.warn(), "◌"),
            WorkflowStatus::AwaitingApproval => (self.accent(), "‖"),
            WorkflowStatus::Completed => (self.ok(), "✓"),
            WorkflowStatus::Aborted => (self.dim(), "✗"),
            WorkflowStatus::Failed => (self.alert(), "!"),
            WorkflowStatus::Stalled => (self.alert(), "⊘"),
            WorkflowStatus::Other(_) => (self.base(), "?"),
        }
    }

    /// Style and glyph of what an ack column shows.
    pub fn ack_status(&self, shown: &AckShown) -> (Style, &'static str) {
        match shown {
            AckShown::Status(AckStatus::Unacked) => (self.warn(), "○"),
            AckShown::Status(AckStatus::Pending) => (self.info(), "…"),
            AckShown::Status(AckStatus::Accepted) => (self.ok(), "◐"),
            AckShown::Status(AckStatus::Rejected) => (self.alert(), "✗"),
            AckShown::Status(AckStatus::Completed) => (self.ok(), "✔"),
            AckShown::Status(AckStatus::Withdrawn) => (self.dim(), "↩"),
            AckShown::Held => (self.accent(), "‖"),
            AckShown::Dead => (self.alert(), "☠"),
            AckShown::None => (self.dim(), "·"),
            AckShown::Status(AckStatus::Other(_)) => (self.base(), "?"),
        }
    }

    /// Style and glyph of a bus message type.
    pub fn message_type(&self, kind: &str) -> (Style, &'static str) {
        match kind {
            "PROGRESS" => (self.info(), "▶"),
            "TASK_COMPLETE" => (self.ok(), "✔"),
            "TASK_FAILED" => (self.alert(), "✗"),
            "FILE_LOCK" => (self.warn(), "▣"),
            "FILE_UNLOCK" => (self.ok(), "□"),
            "BLOCKED" => (self.alert(), "⊘"),
            k if k.starts_with("BOARD_") => (self.accent(), "◆"),
            _ => (self.dim(), "·"),
        }
    }

    /// Style and glyph of a worker status.
    pub fn worker_status(&self, status: &str) -> (Style, &'static str) {
        match status {
            "RUNNING" => (self.info(), "▶"),
            "COMPLETE" => (self.ok(), "✔"),
            "FAILED" => (self.alert(), "✗"),
            "BLOCKED" => (self.warn(), "⊘"),
            _ => (self.dim(), "?"),
        }
    }

    /// Style of a board verdict.
    pub fn verdict(&self, v: &str) -> Style {
        match v {
            "APPROVE" | "APPROVED" => self.ok(),
            "APPROVED_WITH_REVIEW" | "CONCERNS" => self.warn(),
            "REJECT" | "REJECTED" => self.alert(),
            "ESCALATE" => self.accent(),
            _ => self.dim(),
        }
    }
}
