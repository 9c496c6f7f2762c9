"""Drives one `pantheon mcp` server through the official MCP Python SDK, as an MCP host would.

Usage: session.py PANTHEON_BINARY ROOT [MODE] < steps.json > results.json
       session.py URL - [MODE] < steps.json > results.json

With a URL (`http://…/mcp` or `https://…/mcp`) in place of the binary, the session connects to a
running server over Streamable HTTP with the SDK's `streamable_http_client`; `PANTHEON_MCP_TOKEN`, when
set, is sent as `Authorization: Bearer TOKEN`, and `PANTHEON_MCP_CA` names a PEM file of the
certificate authority to trust (a test's self-signed certificate). A connection the server refuses
(e.g. HTTP 401) is reported as `{"connect_error": {"status": int | null, "message": str}}` instead
of the usual report. `PANTHEON_MCP_ARGS`, a JSON list, adds arguments to a stdio server's command
line (`["--as", "thoth"]`).

The same steps run through the official TypeScript SDK with ../node/session.mjs.

MODE is the SDK's connect mode: `auto` (the default: `server/discover`, falling back to the
initialize handshake) or `legacy` (the initialize handshake that most hosts still use).

The steps are a JSON list, run in order in one session; the output is one JSON object
`{"server": {...}, "results": [...]}` with one result per step:

  {"op": "list_tools"}
      -> {"tools": [{"name", "description", "input_schema", "output_schema", "annotations"}]}
  {"op": "call", "tool": NAME, "arguments": {...}}
      -> {"is_error": bool, "structured": {...} | null, "text": "...", "refusal": {...} | null,
          "schema_errors": [...]}
         `schema_errors` lists every way the structured content breaks the tool's declared
         `outputSchema`, checked here with `jsonschema` for every result that has structured
         content, error or not, as the official TypeScript client does (empty when it fits;
         `["no outputSchema declared"]` when the tool declares none). The SDK's own check of the
         same schema is reported the same way instead of ending the session. `refusal` is the
         `{kind, violations?}` a refusal carries in `_meta["pantheon/refusal"]`.
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
import os
import ssl
import sys

import httpx2
import jsonschema

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def tool_json(tool):
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None,
    }


OUTPUT_SCHEMAS = {}


def schema_errors(tool, structured):
    schema = OUTPUT_SCHEMAS.get(tool)
    if schema is None:
        return ["no outputSchema declared"]
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    validator = validator_cls(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(structured)]


async def call(client, step):
    try:
        result = await client.call_tool(step["tool"], step.get("arguments"))
    except MCPError as e:
        return {"protocol_error": {"code": e.code, "message": e.message}}
    except RuntimeError as e:
        # The SDK refuses structured content that does not fit the declared outputSchema.
        return {"is_error": None, "structured": None, "text": "", "refusal": None, "schema_errors": [f"SDK: {e}"]}
    text = "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")
    if result.structured_content is None and result.is_error:
        errors = []
    else:
        errors = schema_errors(step["tool"], result.structured_content)
    refusal = (result.meta or {}).get("pantheon/refusal")
    return {"is_error": bool(result.is_error), "structured": result.structured_content, "text": text,
            "refusal": refusal, "schema_errors": errors}


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


def http_target(url):
    """The SDK's streamable HTTP transport to `url`, with the test's token and trusted CA."""
    headers = {}
    token = os.environ.get("PANTHEON_MCP_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    ca = os.environ.get("PANTHEON_MCP_CA")
    verify = ssl.create_default_context(cafile=ca) if ca else True
    http = httpx2.AsyncClient(headers=headers, verify=verify, timeout=httpx2.Timeout(30, read=300))
    return streamable_http_client(url, http_client=http)


def status_of(error):
    """The HTTP status behind a connection failure, looking inside exception groups."""
    stack = [error]
    while stack:
        e = stack.pop()
        response = getattr(e, "response", None)
        if response is not None and getattr(response, "status_code", None):
            return response.status_code
        stack.extend(getattr(e, "exceptions", ()))
        if e.__cause__ is not None:
            stack.append(e.__cause__)
        if e.__context__ is not None:
            stack.append(e.__context__)
    return None


async def main():
    binary, root = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "auto"
    steps = json.load(sys.stdin)
    if binary.startswith(("http://", "https://")):
        try:
            await run_session(http_target(binary), mode, steps)
        except Exception as e:  # noqa: BLE001 - reported for the test to judge
            json.dump({"connect_error": {"status": status_of(e), "message": repr(e)[:2000]}}, sys.stdout)
        return
    extra = json.loads(os.environ.get("PANTHEON_MCP_ARGS", "[]"))
    params = StdioServerParameters(command=binary, args=["--root", root, "mcp", *extra])
    await run_session(params, mode, steps)


async def run_session(target, mode, steps):
    results = []
    async with Client(target, mode=mode, read_timeout_seconds=120) as client:
        server = {
            "name": client.server_info.name if client.server_info else None,
            "version": client.server_info.version if client.server_info else None,
            "protocol_version": client.protocol_version,
            "instructions": client.instructions,
            "tools_capability": client.server_capabilities.tools is not None,
        }
        for tool in (await client.list_tools()).tools:
            OUTPUT_SCHEMAS[tool.name] = tool.output_schema
        for step in steps:
            results.append(await run_step(client, step))
    json.dump({"server": server, "results": results}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
