#!/usr/bin/env bash
# The blank-line stress of docs/PROTOCOL.md 3.2 at full size: three seed-style writers (unlocked
# `open("a")`, lines of 10 B to 70 KB), a `pantheon bus lock`/`unlock` loop and `pantheon mcp`
# `post_message` calls, with one CPU burner per core, for ROUNDS rounds of SECONDS each on one queue.
# Prints each round's figures and fails on any blank or broken line or a seed read that fails.
#   scripts/queue-stress.sh                 2 rounds of 15 s (the run of the issue that found 9 blank lines)
#   ROUNDS=10 SECONDS_EACH=30 scripts/queue-stress.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
secs=${SECONDS_EACH:-15}
cargo build --quiet --bin pantheon
bin="${CARGO_TARGET_DIR:-target}/debug/pantheon"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
"$bin" --root "$root" bus --track stress init >/dev/null
fail=0
for r in $(seq 1 "$rounds"); do
  out=$(python3 tests/bus/python/load_stress.py "$bin" "$root" stress "$secs")
  echo "round $r: $out"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["blank"]==0 and r["not_json"]==0 and r["seed_error"] is None and r["failures"]==0 and r["posted"]==r["seen"] else 1)' "$out" || fail=1
done
lines=$(wc -l <"$root/conductor/tracks/stress/.message-bus/queue.jsonl")
echo "queue: $lines lines after $rounds x ${secs}s; $([[ $fail == 0 ]] && echo 'no blank or broken line, the seed read every one' || echo FAILED)"
exit $fail
