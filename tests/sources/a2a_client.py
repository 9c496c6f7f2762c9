"""The other client: the official A2A Python SDK's own client, for the a2a source's tests and bench.

  a2a_client.py start URL TEXT      start a task (returns once it stops: input-required); prints
                                    {"id", "contextId", "state"}
  a2a_client.py get URL TASK_ID     prints {"state", "artifacts": [text], "history": [text], "status": text}
  a2a_client.py answer URL TASK_ID CONTEXT_ID TEXT
                                    sends TEXT as the task's next message; prints {"state", "seconds"}
"""

import asyncio
import json
import sys
import time

import httpx

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import GetTaskRequest, Role, SendMessageRequest, TaskState


def state_name(state: int) -> str:
    return TaskState.Name(state)


async def client_for(url: str):
    http = httpx.AsyncClient(timeout=10)
    return await create_client(url, ClientConfig(streaming=False, httpx_client=http))


async def send(client, message) -> dict:
    last = None
    async for event in client.send_message(SendMessageRequest(message=message)):
        last = event
    task = last.task
    return {"id": task.id, "contextId": task.context_id, "state": state_name(task.status.state)}


async def main() -> None:
    cmd, url = sys.argv[1], sys.argv[2]
    client = await client_for(url)
    if cmd == "start":
        out = await send(client, new_text_message(sys.argv[3], role=Role.ROLE_USER))
    elif cmd == "get":
        task = await client.get_task(GetTaskRequest(id=sys.argv[3]))
        out = {
            "state": state_name(task.status.state),
            "status": get_message_text(task.status.message),
            "artifacts": [get_artifact_text(a) for a in task.artifacts],
            "history": [get_message_text(m) for m in task.history],
        }
    elif cmd == "answer":
        message = new_text_message(
            sys.argv[5], role=Role.ROLE_USER, task_id=sys.argv[3], context_id=sys.argv[4]
        )
        t0 = time.monotonic()
        out = await send(client, message)
        out["seconds"] = time.monotonic() - t0
    else:
        raise SystemExit(f"unknown command {cmd}")
    print(json.dumps(out), flush=True)
    await client.close()


asyncio.run(main())
