//! Integration tests of the Conductor: the real `pantheon` binary on temp roots.

mod abort_cleanup;
mod acks;
mod anchor;
mod budgets;
mod common;
mod concurrency;
mod crash;
#[path = "../common/decoy.rs"]
mod decoy;
mod delivery;
#[path = "../common/fixture.rs"]
mod fixture_root;
mod foreign;
mod hardening;
mod help;
mod http;
mod history;
mod journal;
mod limits;
mod newcomer;
mod observe;
mod origin;
mod orphans;
mod paging;
mod planted;
mod publish;
mod races;
mod refusals;
mod routing;
mod supervisor_kills;
mod upgrade;
