//! Integration tests of the Conductor: the real `pantheon` binary on temp roots.

mod abort_cleanup;
mod acks;
mod anchor;
mod approvals;
mod budgets;
mod common;
mod concurrency;
mod cost_scale;
mod crash;
#[path = "../common/decoy.rs"]
mod decoy;
mod delivery;
mod exit_codes;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod foreign;
mod hardening;
mod help;
mod history;
mod holds;
mod http;
mod journal;
mod limits;
mod moments;
mod newcomer;
mod observe;
mod origin;
mod orphans;
mod paging;
mod pause;
mod planted;
mod publish;
mod races;
mod refusals;
mod routing;
#[path = "../common/setup.rs"]
mod setup;
mod sources;
mod supervisor_kills;
mod upgrade;
