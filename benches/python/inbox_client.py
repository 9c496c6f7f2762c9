"""Times `check_inbox` through the official MCP Python client (as an agent's host calls it).

Usage: inbox_client.py PANTHEON_BINARY ROOT GOD N
Prints one JSON object: for each variant, the latencies (ms) of N calls and the bytes of one
answer's structured content. Variants: the whole inbox with full context (`limit` 100, what every
call returned before paging), the default page (20, full context), and `compact` pages.
"""

import asyncio
import json
import sys
import time

from mcp import Client, StdioServerParameters

VARIANTS = {
    "full_100": {"limit": 100},
    "page_20": {},
    "compact_100": {"limit": 100, "compact": True},
    "compact_20": {"compact": True},
}


async def main():
    binary, root, god, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    params = StdioServerParameters(command=binary, args=["--root", root, "mcp"], env={"PANTHEON_LOG": "error"})
    out = {}
    async with Client(params) as client:
        for name, extra in VARIANTS.items():
            args = {"god_name": god, **extra}
            result = await client.call_tool("check_inbox", args)
            size = len(json.dumps(result.structured_content)) + sum(len(b.text) for b in result.content)
            samples = []
            for _ in range(n):
                t = time.perf_counter()
                await client.call_tool("check_inbox", args)
                samples.append((time.perf_counter() - t) * 1e3)
            out[name] = {"ms": samples, "bytes": size,
                         "entries": len(result.structured_content["dispatches"])}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
