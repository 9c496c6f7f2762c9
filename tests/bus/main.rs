//! Integration tests of the message bus and the board, driving the real `pantheon` binary against temp
//! roots, with real concurrent processes and real Python processes running the seed's functions.

mod common;

mod board;
#[path = "../common/decoy.rs"]
mod decoy;
mod disk;
mod fencing;
mod fixture;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod hardening;
mod ids;
mod interop;
mod limits;
mod locks;
mod queue;
mod races;
mod stress;
