//! The ratatui operations console: state and actions (pure), views (pure functions of a snapshot),
//! and the event loop that ties them to the terminal, the live model and the engine.
//!
//! - [`keymap`]: the `Action` enum and the keymap (footer and help come from it).
//! - [`app`]: the state machine; returns effects as data.
//! - [`ops`]: engine calls as data and what their confirmation says; [`times`]: how times read.
//! - [`engine_ops`]: the real operator (the engine).
//! - [`views`]: drawing. [`theme`]: colours and glyphs.
//! - [`run`]: the event loop; [`terminal`]: raw mode and restoration.

pub(crate) mod actions;
pub mod app;
pub mod attention;
pub mod clipboard;
pub mod commands;
pub mod config;
pub mod engine_ops;
pub mod hook;
pub mod items;
pub mod keymap;
pub mod line;
pub mod marks;
pub mod moments;
pub mod mouse;
pub mod notify;
pub mod ops;
pub mod panes;
pub mod replay;
pub mod rowkey;
pub mod run;
pub mod screenshot;
pub mod shown;
pub mod terminal;
pub mod theme;
pub mod times;
pub mod views;
