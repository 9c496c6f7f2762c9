"""Drives one `pantheon mcp` server through the official MCP Python SDK, as an MCP host would.

Usage: session.py PANTHEON_BINARY ROOT [MODE] < steps.json > results.json

MODE is the SDK's connect mode: `auto` (the default: `server/discover`, falling back to the
initialize handshake) or `legacy` (the initialize handshake that most hosts still use).

The steps are a JSON list, run in order in one session; the output is one JSON object
`{"server": {...}, "results": [...]}` with one result per step:

  {"op": "list_tools"}
      -> {"tools": [{"name", "description", "input_schema", "annotations"}]}
  {"op": "call", "tool": NAME, "arguments": {...}}
      -> {"is_error": bool, "structured": {...} | null, "text": "..."}
      or {"protocol_error": {"code": int, "message": str}} when the server answers with a
         JSON-RPC error (e.g. an unknown tool)
  {"op": "gather", "calls": [CALL, ...]}
      -> {"results": [...], "finished_order": [indices]}: the calls are sent at once, on the
         same session, and `finished_order` says in which order their answers arrived

The Rust tests (tests/mcp/) decide what is right; this script only speaks the protocol and
reports faithfully. It exits non-zero (with a traceback) only when the session itself breaks,
e.g. the server dies.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError


def tool_json(tool):
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None,
    }


async def call(client, step):
    try:
        result = await client.call_tool(step["tool"], step.get("arguments"))
    except MCPError as e:
        return {"protocol_error": {"code": e.code, "message": e.message}}
    text = "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")
    return {"is_error": bool(result.is_error), "structured": result.structured_content, "text": text}


async def gather(client, calls):
    order = []

    async def one(i, step):
        result = await call(client, step)
        order.append(i)
        return result

    results = await asyncio.gather(*(one(i, step) for i, step in enumerate(calls)))
    return {"results": list(results), "finished_order": order}


async def run_step(client, step):
    op = step["op"]
    if op == "list_tools":
        listing = await client.list_tools(cache_mode="refresh")
        return {"tools": [tool_json(t) for t in listing.tools]}
    if op == "call":
        return await call(client, step)
    if op == "gather":
        return await gather(client, step["calls"])
    raise ValueError(f"unknown step op {op!r}")


async def main():
    binary, root = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "auto"
    steps = json.load(sys.stdin)
    params = StdioServerParameters(command=binary, args=["--root", root, "mcp"])
    results = []
    async with Client(params, mode=mode, read_timeout_seconds=120) as client:
        server = {
            "name": client.server_info.name if client.server_info else None,
            "version": client.server_info.version if client.server_info else None,
            "protocol_version": client.protocol_version,
            "instructions": client.instructions,
            "tools_capability": client.server_capabilities.tools is not None,
        }
        for step in steps:
            results.append(await run_step(client, step))
    json.dump({"server": server, "results": results}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
