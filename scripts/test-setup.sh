#!/usr/bin/env bash
# Prepares what the integration tests need beyond cargo: a virtualenv at .venv/ with the official
# Python MCP client SDK, which tests/mcp uses to drive `pantheon mcp` as a real MCP host would.
#
# Idempotent and fast when already done: if the venv exists and its `mcp` satisfies the pin, nothing
# is downloaded. Override the interpreter with PYTHON=/path/to/python3.
set -euo pipefail

# The SDK major version the tests are written against (mcp 2.x: ClientSession, stdio_client).
MCP_MAJOR=2
MCP_SPEC="mcp>=${MCP_MAJOR},<$((MCP_MAJOR + 1))"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
python="${PYTHON:-python3}"

have_sdk() {
    [ -x "$venv/bin/python" ] || return 1
    "$venv/bin/python" - "$MCP_MAJOR" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version; import nats  # nats-py, for tests/nats
major = int(version("mcp").split(".")[0])
sys.exit(0 if major == int(sys.argv[1]) else 1)
PY
}

if have_sdk; then
    echo "test-setup: $venv already has $("$venv/bin/python" -c 'from importlib.metadata import version; print("mcp", version("mcp"))')"
    exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "test-setup: creating virtualenv $venv"
    "$python" -m venv "$venv"
fi
echo "test-setup: installing '$MCP_SPEC' into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$MCP_SPEC" "nats-py==2.16.0"
have_sdk || { echo "test-setup: installed, but $venv cannot import mcp ${MCP_MAJOR}.x" >&2; exit 1; }
echo "test-setup: ready ($("$venv/bin/python" -c 'from importlib.metadata import version; print("mcp", version("mcp"))'))"
