"""Times one inbox call over Streamable HTTP through the official MCP Python client, ours against MCP
Agent Mail's, side by side: our `check_inbox` on a running `pantheon mcp --http`, and Agent Mail's
`fetch_inbox` on its own HTTP server (`mcp-agent-mail serve-http`, uvicorn, started here as a child on
a free loopback port, its database and mailbox under WORKDIR). The same client library, the same
default page (20 entries: ours with full context, theirs without bodies), inboxes of 100 messages of
about the same size, and the calls paired (one of ours, then one of theirs, alternating who goes
first) so that both see the same load on a busy machine.

Usage: agent_mail_http_client.py AGENT_MAIL_BIN WORKDIR N URL GOD
AGENT_MAIL_BIN is the `mcp-agent-mail` console script (scripts/agent-mail-setup.sh installs it in
`.agent-mail/`); URL is a running `pantheon mcp --http` whose root holds GOD's inbox of 100
dispatches (made by the bench). Variants (each a client connected the way named):
  ours         URL, the client's default mode (per request, each answer one JSON body)
  ours_legacy  URL, `mode="legacy"` (the `initialize` handshake; each answer an event stream)
  theirs       Agent Mail's URL, the client's default mode (what the client settles on with it)
Prints one JSON object: for each variant, the latencies (ms) of N calls and the bytes of one answer.
"""

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time

from mcp import Client
from agent_mail_common import agent_mail_env, data, size_of, timed

BODY = ("Research for the item done. " + "Keep the schema additive and record why in the ADR, with the "
        "measurements that back it. ") * 11  # about 1.5 KB, as a rich dispatch's context


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, log, deadline_s=120):
    """Until Agent Mail's uvicorn accepts connections (its start imports a lot: tens of seconds on a
    busy machine)."""
    t_end = time.monotonic() + deadline_s
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise SystemExit(f"error: mcp-agent-mail serve-http exited with {proc.returncode}; its log: {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"error: mcp-agent-mail serve-http did not listen on {port} in {deadline_s} s; its log: {log}")


async def main():
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    n, url, god = int(sys.argv[3]), sys.argv[4], sys.argv[5]
    os.makedirs(work, exist_ok=True)
    port = free_port()
    env = agent_mail_env(work, HTTP_HOST="127.0.0.1", HTTP_PORT=str(port))
    log_path = f"{work}/agent-mail.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([binary, "serve-http", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc, log_path)
        theirs_url = f"http://127.0.0.1:{port}/mcp/"
        project = f"{work}/project"
        os.makedirs(project, exist_ok=True)
        clients = {
            "ours": Client(url, read_timeout_seconds=60),
            "ours_legacy": Client(url, mode="legacy", read_timeout_seconds=60),
            "theirs": Client(theirs_url, read_timeout_seconds=60),
        }
        out = {name: {"ms": []} for name in clients}
        async with contextlib.AsyncExitStack() as stack:
            opened = {name: await stack.enter_async_context(c) for name, c in clients.items()}
            theirs = opened["theirs"]
            r = await theirs.call_tool("ensure_project", {"human_key": project})
            assert not r.is_error, r
            names = []
            for _ in range(2):
                r = await theirs.call_tool("register_agent", {"project_key": project, "program": "bench",
                                                              "model": "bench"})
                assert not r.is_error, r
                names.append(data(r)["name"])
            sender, recipient = names
            for k in range(100):
                r = await theirs.call_tool("send_message", {"project_key": project, "sender_name": sender,
                                                            "to": [recipient], "subject": f"item {k}",
                                                            "body_md": BODY})
                assert not r.is_error, r
            calls = {
                "ours": ("check_inbox", {"god_name": god}),
                "ours_legacy": ("check_inbox", {"god_name": god}),
                "theirs": ("fetch_inbox", {"project_key": project, "agent_name": recipient}),
            }
            for name, c in opened.items():  # warm up: first calls compile schemas, open connections
                tool, args = calls[name]
                first = await c.call_tool(tool, args)
                assert not first.is_error, first
                out[name]["bytes"] = size_of(first)
                for _ in range(4):
                    await timed(c, tool, args)
            order = list(opened)
            for k in range(n):
                for name in (order if k % 2 == 0 else order[::-1]):
                    tool, args = calls[name]
                    out[name]["ms"].append(await timed(opened[name], tool, args))
        json.dump(out, sys.stdout)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    asyncio.run(main())
