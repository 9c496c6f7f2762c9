#!/usr/bin/env bash
# The long version of tests/conductor/supervisor_kills.rs: two `pantheon serve` processes on one root,
# SIGKILLed at random moments (and, on a third of their starts, killing themselves at one of the
# supervisor's crash points) while dispatches time out, then clean `tick`s; fails unless every
# redelivery and dead letter is journaled exactly once. The test runs 8 s; this runs it for longer and
# several times over, each run with a fresh seed (printed, to replay one with PANTHEON_KILL_LOOP_SEED).
#   scripts/supervisor-kill-loop.sh [SECONDS_PER_RUN] [RUNS]     default 120 s, 5 runs
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
runs=${2:-5}
cargo test --test conductor --no-run >/dev/null 2>&1
for i in $(seq 1 "$runs"); do
  echo "run $i of $runs ($secs s)"
  PANTHEON_KILL_LOOP_SECS=$secs cargo test --test conductor \
    supervisor_kills::two_supervisors_killed_at_random_moments_journal_every_act_exactly_once \
    -- --exact --nocapture 2>&1 | grep -E "^seed|panicked|journaled .* times|test result"
done
