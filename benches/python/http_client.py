"""Times one tool call through the official MCP Python client over stdio and over Streamable HTTP,
side by side: the same client library, the same tool (`check_inbox` of GOD's inbox), the calls paired
(one per variant in turn, for every sample) so that all see the same load on a busy machine.

Usage: http_client.py PANTHEON_BINARY ROOT URL GOD N
URL is a running `pantheon mcp --http` on ROOT. Variants:
  stdio      `pantheon mcp` as a child, the client's default mode (`server/discover`, 2026-07-28)
  http_json  URL, the default mode: per request, each answer one JSON body
  http_sse   URL, `mode="legacy"` (the `initialize` handshake): a session, each answer an event stream
Prints one JSON object: for each variant, the latencies (ms) of N calls.
"""

import asyncio
import contextlib
import json
import sys
import time

from mcp import Client, StdioServerParameters


async def timed(client, god):
    t = time.perf_counter()
    result = await client.call_tool("check_inbox", {"god_name": god})
    took = (time.perf_counter() - t) * 1e3
    assert not result.is_error, result
    return took


async def main():
    binary, root, url, god, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    stdio = StdioServerParameters(command=binary, args=["--root", root, "mcp"], env={"PANTHEON_LOG": "error"})
    clients = {
        "stdio": Client(stdio, read_timeout_seconds=60),
        "http_json": Client(url, read_timeout_seconds=60),
        "http_sse": Client(url, mode="legacy", read_timeout_seconds=60),
    }
    out = {name: {"ms": []} for name in clients}
    async with contextlib.AsyncExitStack() as stack:
        opened = {name: await stack.enter_async_context(c) for name, c in clients.items()}
        for c in opened.values():  # warm up: first calls compile schemas, open connections
            for _ in range(5):
                await timed(c, god)
        for _ in range(n):
            for name, c in opened.items():
                out[name]["ms"].append(await timed(c, god))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
