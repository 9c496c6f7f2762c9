//! The ratatui operations console: state and actions (pure), views (pure functions of a snapshot),
//! and the event loop that ties them to the terminal, the live model and the engine.
//!
//! - [`app`]: the state machine (`App`, a host implemented only there); keys become actions,
//!   actions return effects as data.
//! - [`keymap`]: the `Action` enum (operator actions nested as `Action::Operator(OperatorAction)`)
//!   and the key table (the footer and the `?` help come from it);
//!   [`commands`]: the `:` commands; [`line`]: the one line editor of every text input.
//! - [`panes`]: one module per pane (its `ListPane` rows and keys, detail, own state and verbs),
//!   registered by the `panes!` table;
//!   [`items`]: the rows each pane lists, filtered; [`rowkey`]: a row's typed identity.
//! - `actions`: one module per operator action, registered by the `actions!` table; [`ops`]:
//!   engine calls as data (`Op`, `Operator`) and their typed output (`Done`); [`engine_ops`]: the real operator (the engine);
//!   [`shown`]: what a confirmation showed, checked again before it acts; [`marks`]: marks and
//!   bulk actions.
//! - [`attention`]: what waits on a human; [`moments`]: when time alone changes it; [`notify`]:
//!   bell, desktop notification and hook; [`hook`]: the bounded `--on-attention` runner.
//! - [`replay`]: the console in the past (a scratch root read by the same live model).
//! - [`views`]: drawing; [`theme`]: colours and glyphs; [`times`]: how times read;
//!   [`screenshot`]: SVG screenshots from the real render path.
//! - [`run`]: the event loop; [`terminal`]: raw mode and restoration; [`mouse`]: clicks and the
//!   wheel; [`clipboard`]: yanking through OSC 52; [`config`]: the operator's own settings file.

pub(crate) mod actions;
pub(crate) mod app;
pub(crate) mod attention;
pub(crate) mod clipboard;
pub(crate) mod commands;
pub mod config;
pub(crate) mod engine_ops;
pub(crate) mod hook;
pub(crate) mod items;
pub(crate) mod keymap;
pub(crate) mod line;
pub(crate) mod marks;
pub(crate) mod moments;
pub(crate) mod mouse;
pub(crate) mod notify;
pub(crate) mod ops;
pub(crate) mod panes;
pub(crate) mod replay;
pub(crate) mod rowkey;
pub(crate) mod run;
pub(crate) mod screenshot;
pub(crate) mod shown;
pub(crate) mod terminal;
pub(crate) mod theme;
pub(crate) mod times;
pub mod views;
