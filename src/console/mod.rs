//! The ratatui operations console.
