"""A real A2A agent built with the official A2A Python SDK (a2a-sdk), for the a2a source's tests.

Its executor asks for input: a new task enters input-required with the question "what name?", and the
next message on that task completes it with an artifact "hello, <the answer>". A message whose text
starts with "auth" enters auth-required instead (answered the same way); one that starts with "slow:MS"
works for MS milliseconds (state working) before it asks (the benchmark's transition).

It also serves a 0.3 card at /.well-known/agent.json (url, protocolVersion 0.3.0) for the SDK's 0.3
compatibility adapter on the same endpoint, so a client can be made to speak 0.3's method names.

Usage: a2a_agent.py PORT [--no-streaming]
Prints "ready" on stdout once the card is served.
"""

import asyncio
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)


class AskingExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        text = context.get_user_input()
        if task is None:
            task = Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        waiting = task.status.state in (
            TaskState.TASK_STATE_INPUT_REQUIRED,
            TaskState.TASK_STATE_AUTH_REQUIRED,
        )
        if not waiting:
            question = "what name?"
            if text.startswith("slow:"):
                await updater.start_work()
                await asyncio.sleep(int(text.split(":", 1)[1].split()[0]) / 1000)
            if text.startswith("auth"):
                await updater.requires_auth(
                    updater.new_agent_message([new_text_message("sign in: paste a token").parts[0]])
                )
            else:
                await updater.requires_input(
                    updater.new_agent_message([new_text_message(question).parts[0]])
                )
            return
        await updater.add_artifact(new_text_artifact("greeting", f"hello, {text}").parts)
        await updater.complete(updater.new_agent_message([new_text_message(f"done: {text}").parts[0]]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    port = int(sys.argv[1])
    streaming = "--no-streaming" not in sys.argv
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="asker",
        description="asks for a name, then greets it",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="greet", name="greet", description="greets a name", tags=["test"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=AskingExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    card_0_3 = {
        "name": "asker (0.3)",
        "description": "the same agent, as a 0.3 card",
        "url": url,
        "version": "1.0.0",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }

    async def old_card(_request):
        return JSONResponse(card_0_3)

    routes = (
        create_agent_card_routes(card)
        + [Route("/.well-known/agent.json", old_card)]
        + create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
    )
    app = Starlette(routes=routes)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)

    async def run() -> None:
        serve = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await serve

    asyncio.run(run())


if __name__ == "__main__":
    main()
