"""The other client: the official A2A Python SDK's own client, for the a2a source's tests and bench.

  a2a_client.py start URL TEXT      start a task (returns once it stops: input-required); prints
                                    {"id", "contextId", "state"}
  a2a_client.py get URL TASK_ID     prints {"state", "artifacts": [text], "history": [text], "status": text}
  a2a_client.py answer URL TASK_ID CONTEXT_ID TEXT
                                    sends TEXT as the task's next message; prints {"state", "seconds"}
  a2a_client.py bench URL ROUNDS PER_ROUND
                                    the benchmark's baseline, the SDK client's own way: PER_ROUND tasks
                                    at once ("slow:1500"), each followed by a subscription from its
                                    start; the input-required event's arrival minus the status
                                    timestamp ("attention_ms"), then each answered in turn with
                                    send_message: the completed status timestamp minus the send
                                    ("answer_ms")
"""

import asyncio
import json
import sys
import time

import httpx

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import (
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)


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


WAITING = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)


async def one_task(streaming, polling, out):
    """Starts a task that works, then asks; measures its question's arrival."""
    request = SendMessageRequest(
        message=new_text_message("slow:1500", role=Role.ROLE_USER),
        configuration=SendMessageConfiguration(return_immediately=True),
    )
    first = await polling.send_message(request).__anext__()
    task = first.task
    seen = None
    async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
        status = None
        if event.HasField("status_update"):
            status = event.status_update.status
        elif event.HasField("task"):
            status = event.task.status
        if status is not None and status.state in WAITING:
            seen = time.time() - status.timestamp.ToDatetime().timestamp()
            break
    out["attention_ms"].append(seen * 1000)
    return task


async def answer(polling, task, out) -> None:
    """Answers a waiting task (one at a time, as an operator and as the bench's source do)."""
    message = new_text_message(
        "Ada", role=Role.ROLE_USER, task_id=task.id, context_id=task.context_id
    )
    t0 = time.time()
    async for _ in polling.send_message(SendMessageRequest(message=message)):
        pass
    done = await polling.get_task(GetTaskRequest(id=task.id))
    out["answer_ms"].append((done.status.timestamp.ToDatetime().timestamp() - t0) * 1000)


async def bench(url: str, rounds: int, per_round: int) -> dict:
    http = httpx.AsyncClient(timeout=30)
    streaming = await create_client(url, ClientConfig(streaming=True, httpx_client=http))
    polling = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
    out = {"attention_ms": [], "answer_ms": []}
    for _ in range(rounds):
        tasks = await asyncio.gather(*(one_task(streaming, polling, out) for _ in range(per_round)))
        for task in tasks:
            await answer(polling, task, out)
    return out


async def main() -> None:
    if sys.argv[1] == "bench":
        out = await bench(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        print(json.dumps(out), flush=True)
        return
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
