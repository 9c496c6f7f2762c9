//! Integration tests of `pantheon demo` and `pantheon validate`, driving the real binary on temp roots.

mod common;
mod determinism;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod headless;
mod terminal;
#[path = "../common/tmux.rs"]
mod tmux;
mod validate;
