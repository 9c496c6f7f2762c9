//! Integration tests of `pantheon demo` and `pantheon validate`, driving the real binary on temp roots.

mod common;
mod determinism;
#[path = "../shared/fixture.rs"]
mod fixture_root;
mod headless;
mod terminal;
#[path = "../shared/tmux.rs"]
mod tmux;
mod validate;
