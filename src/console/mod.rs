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
