"""What the Agent Mail drivers share (benches/python/agent_mail_*.py import it from their folder):
the server's environment, a timed tool call, and an answer's size and data."""

import json
import os
import time


def agent_mail_env(work, **extra):
    """The environment MCP Agent Mail runs with: its database and mailbox under WORKDIR, quiet logs."""
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": f"sqlite+aiosqlite:///{work}/storage.sqlite3",
        "STORAGE_ROOT": f"{work}/mailbox",
        "LOG_LEVEL": "ERROR",
    })
    env.update(extra)
    return env


async def timed(client, tool, args):
    """One tool call's latency in milliseconds (a tool error fails the run)."""
    t = time.perf_counter()
    result = await client.call_tool(tool, args)
    took = (time.perf_counter() - t) * 1e3
    assert not result.is_error, result
    return took


def size_of(result):
    """An answer's bytes: its structured content and its text blocks."""
    return len(json.dumps(result.structured_content)) + sum(len(getattr(b, "text", "")) for b in result.content)


def data(result):
    """An answer's data: the structured content (unwrapped from `result`), else the first text block."""
    if result.structured_content is not None:
        v = result.structured_content
        return v.get("result", v) if isinstance(v, dict) and set(v) == {"result"} else v
    return json.loads(result.content[0].text)
