//! Tests of the live model and the console: views on `TestBackend` (insta), the operator flow against
//! the real engine, the model's incremental reading, and end-to-end runs in tmux.

mod actions;
mod answer;
mod attention;
mod bridge;
mod cost;
mod deadletters;
mod e2e;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod front_door;
mod habits;
mod links;
mod live;
mod matrix;
mod narrow;
mod raise;
mod replay;
#[path = "../common/setup.rs"]
mod setup;
mod sources;
mod support;
#[path = "../common/tmux.rs"]
mod tmux;
mod truth;
mod views;
