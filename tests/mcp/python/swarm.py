"""Many concurrent clients over Streamable HTTP, each its own official-SDK session and connection.

Usage: swarm.py URL N > report.json

Client i submits the research handoff of workflow `wf_swarm_{i}` (thoth -> hephaestus, the tests'
`mcp-test` definition) and then acks the dispatch it made as `accepted`, all N at once. The report is
`{"ok": count, "errors": [...], "seconds": float}`: each error names the client and what failed. The
Rust test decides what is right.
"""

import asyncio
import json
import sys
import time

from mcp import Client


def handoff(i):
    return {
        "handoff_id": f"hof_20260614_{0x900000 + i:06x}",
        "workflow_id": f"wf_swarm_{i}",
        "from_god": "thoth",
        "to_god": "hephaestus",
        "step": "research",
        "context": {"summary": f"swarm {i}", "decisions": [], "artifacts": []},
        "routing": {"workflow_definition": "mcp-test", "workflow_version": "1.0.0"},
    }


async def one(url, i, errors):
    try:
        async with Client(url, read_timeout_seconds=120) as client:
            h = handoff(i)
            r = await client.call_tool("submit_handoff", {"handoff": h})
            if r.is_error or (r.structured_content or {}).get("status") != "dispatched":
                errors.append(f"client {i} submit: {r.structured_content or r.content}")
                return False
            ack = {"ack_id": f"ack_20260614_{0x900000 + i:06x}", "handoff_id": h["handoff_id"],
                   "status": "accepted"}
            r = await client.call_tool("ack_handoff", {"ack": ack})
            if r.is_error or (r.structured_content or {}).get("status") != "accepted":
                errors.append(f"client {i} ack: {r.structured_content or r.content}")
                return False
            return True
    except Exception as e:  # noqa: BLE001 - reported for the test to judge
        errors.append(f"client {i}: {e!r}"[:500])
        return False


async def main():
    url, n = sys.argv[1], int(sys.argv[2])
    errors = []
    started = time.monotonic()
    results = await asyncio.gather(*(one(url, i, errors) for i in range(n)))
    json.dump({"ok": sum(results), "errors": errors, "seconds": time.monotonic() - started}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
