#!/usr/bin/env bash
# The binary a user installs: prints `BENCH {json}` lines for scripts/bench-report.sh.
#  - its size: the release binary (stripped, four code units) next to the `profiling` profile's (the
#    release settings before: line tables, not stripped, sixteen code units);
#  - the cold build time of the README's first command (`cargo run --release -- demo` builds the
#    release profile from nothing), next to a cold build of the `profiling` profile.
# Each cold build uses a fresh, empty target directory (deleted afterwards); the crates are already
# downloaded, so the figures are compile and link time. About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cold_build() { # profile -> seconds
  local t0=$EPOCHREALTIME
  CARGO_TARGET_DIR="$scratch/$1" cargo build --locked --profile "$1" --bin pantheon >/dev/null 2>&1
  python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$EPOCHREALTIME"
}
rel_s=$(cold_build release)
prof_s=$(cold_build profiling)
rel_b=$(stat -c %s "$scratch/release/release/pantheon")
prof_b=$(stat -c %s "$scratch/profiling/profiling/pantheon")
python3 - "$rel_s" "$prof_s" "$rel_b" "$prof_b" <<'PY'
import json, sys
rel_s, prof_s, rel_b, prof_b = (float(x) for x in sys.argv[1:])
mb = lambda b: round(b / 1e6, 1)
print("BENCH " + json.dumps({
    "name": "release_binary_size", "issue": 28,
    "goal": "the binary `cargo install` gives: <= 25 MB (was 135 MB with line tables)",
    "median": mb(rel_b), "unit": "MB", "baseline": mb(prof_b),
    "baseline_name": "`--profile profiling`: release with line tables, not stripped, 16 code units (the release profile before)",
    "ratio": round(rel_b / prof_b, 3), "met": rel_b <= 25e6,
    "note": "target/release/pantheon, stripped (`strip = true`)"}))
print("BENCH " + json.dumps({
    "name": "cold_build_release", "issue": 28,
    "goal": "the README's first command builds no slower from a cold target than before",
    "median": round(rel_s, 1), "unit": "s", "baseline": round(prof_s, 1),
    "baseline_name": "cold `cargo build --profile profiling` (the release settings before)",
    "ratio": round(rel_s / prof_s, 3), "met": rel_s <= prof_s * 1.05,
    "note": "`cargo build --release --bin pantheon` into an empty target directory, crates already downloaded; one run each, back to back"}))
PY
