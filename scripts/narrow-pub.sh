#!/usr/bin/env bash
# Narrows the shell crate `pantheon` to what its users need: the integration tests, benches and
# examples reach it through one facade, `pantheon::testing` (src/testing.rs, generated), the binary
# through `pantheon::{Cli, run}`, and every other `pub` item of src/ becomes `pub(crate)`.
# `#![deny(unreachable_pub)]` in src/lib.rs keeps it so: a new `pub` item nothing outside reaches
# fails clippy. Re-run it after a merge that adds `pub` items or tests naming new items:
#
#   scripts/narrow-pub.sh            # rewrite paths, regenerate the facade, narrow, fmt, count
#
# Steps: (1) scripts/narrow-pub.py rewrites `pantheon::<module>::` in tests/, benches/ and
# examples/ to `pantheon::testing::<module>::`, regenerates src/testing.rs from every item they
# name there, and declares src/lib.rs's modules `pub(crate)`; (2) the lint is turned to `warn` for
# one `cargo clippy --fix --lib`, which rewrites each unreachable `pub` to `pub(crate)`, then back
# to `deny`; (3) `cargo fmt --all`; (4) the counts of scripts/module-graph.py.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/narrow-pub.py prepare
lib=src/lib.rs
grep -q '^#!\[deny(unreachable_pub)\]' "$lib" || grep -q '^#!\[warn(unreachable_pub)\]' "$lib" \
    || sed -i '0,/^$/s//#![deny(unreachable_pub)]\n/' "$lib"
sed -i 's/^#!\[deny(unreachable_pub)\]/#![warn(unreachable_pub)]/' "$lib"
restore() { sed -i 's/^#!\[warn(unreachable_pub)\]/#![deny(unreachable_pub)]/' "$lib"; }
trap restore EXIT
# Twice: a `pub` item made `pub(crate)` can leave a `pub` item of it unreachable in turn.
for _ in 1 2; do
    cargo clippy --fix --lib -p pantheon --allow-dirty --allow-staged --allow-no-vcs -- -W unreachable_pub
done
restore
trap - EXIT
cargo fmt --all
python3 scripts/module-graph.py | grep -i 'pub fn\|pub mod' || true
