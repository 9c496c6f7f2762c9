#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: runs every bench program that prints `BENCH {json}` lines (the proof
# bench measures each performance goal of the engine, the bus and the console next to its baseline; the
# area benches add theirs), then renders the table. One command, about 19 minutes on 2 cores (the two cold
# builds of scripts/bench-build.sh are 10 of them).
#   scripts/bench-report.sh            full run (1 GB queue, 60 s soak)
#   QUICK=1 scripts/bench-report.sh    smoke run (64 MB queue, 10 s soak), writes BENCHMARKS.quick.md
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [[ "${QUICK:-}" == 1 ]]; then
  export PROOF_BIG_QUEUE_MB=64 soak=10 target_md=BENCHMARKS.quick.md
else
  soak=60 target_md=BENCHMARKS.md
fi
# The Python clients (the official MCP SDK, nats-py, a2a-sdk) and MCP Agent Mail, which the mcp and
# sources benches compare against; both installs are idempotent and quick once done.
scripts/test-setup.sh >/dev/null
scripts/agent-mail-setup.sh >/dev/null || echo "bench-report: MCP Agent Mail did not install; its rows are left out" >&2
cargo bench --bench proof --no-run >/dev/null
cargo bench --bench proof -- goals | tee -a "$out"
cargo bench --bench proof -- soak "$soak" | tee -a "$out"
# The areas' own benches, when they print BENCH lines (others are run but contribute nothing). The
# console bench ends with the scale rows: roots of 1,000, 10,000 and 100,000 workflows,
# first screen, resident memory and frame time (PANTHEON_BENCH_SCALE=1000,10000 to stop earlier).
# The observe bench: `status` and a `/metrics` scrape on a 100,000-workflow root, and the submit +
# ack cycle with and without `serve --otlp`. The pause bench: a pause's effect on a god with 10,000
# waiting dispatches, a resume's rate, and the submit + ack cycle beside a root that never paused.
# The sources bench: a Claude Code permission request to its attention item, a large team's load.
# The a2a bench: an A2A agent of the official Python SDK, its question to the attention item and the
# operator's answer to the task resumed, next to the SDK's own client. The approvals bench: an
# approval link's tap on the listener to the dispatch in the inbox, next to the operator's approve.
# Every bench that prints figures (it includes benches/common, or prints BENCH lines itself), but the
# proof (above) and the durable one (below, through its script).
for f in benches/*.rs; do
  b=$(basename "$f" .rs)
  [[ "$b" == proof || "$b" == durable ]] && continue
  if grep -qE 'BENCH |mod common;' "$f"; then
    cargo bench --bench "$b" 2>/dev/null | grep '^BENCH ' | tee -a "$out" || true
  fi
done
# Durable submit + ack cycles with one `pantheon mcp` per god, beside NATS JetStream, Redis and DBOS
# at equal durability and at their defaults (scripts/bench-durable.sh: about 4 minutes; it installs
# its own venv and redis-server; SKIP_DURABLE=1 leaves it out).
if [[ "${QUICK:-}" != 1 && "${SKIP_DURABLE:-}" != 1 ]]; then
  scripts/bench-durable.sh 2>/dev/null | grep '^BENCH ' | tee -a "$out" || true
fi
# The binary a user installs: its size and cold build time (two cold builds, about 10 minutes;
# SKIP_BUILD=1 leaves them out).
if [[ "${QUICK:-}" != 1 && "${SKIP_BUILD:-}" != 1 ]]; then
  scripts/bench-build.sh | tee -a "$out"
fi
cargo bench --bench proof -- render "$out" "$target_md"
echo "wrote $target_md ($(grep -c '^BENCH ' "$out") figures)"
