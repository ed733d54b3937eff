"""The official MCP Python SDK as a Streamable HTTP peer that drops its answer streams.

Run as a process: ``python tests/support/sdk_resumable_server.py --port PORT``. Endpoint
``/mcp``, SSE answers with a ``retry`` of 300 ms and an in-memory event store, so a client
can resume with ``Last-Event-ID``. Tool ``count_with_drop(n)`` reports progress 1..n and
closes its SSE connection halfway (the SDK's ``close_sse_stream``), then finishes. Tool
``ask_briefly(seconds)`` asks the client a question on its stream and gives up on it after
``seconds``: the call then ends with an error (a server that times its questions out).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from pydantic import BaseModel

RETRY_MS = 300


class MemoryEventStore(EventStore):
    """Every event of every stream, kept in order; ids are "<stream>/<sequence>"."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, object]] = []  # (event id, stream id, message)
        self._sequence = itertools.count(1)

    async def store_event(self, stream_id, message):
        event_id = f"{stream_id}/{next(self._sequence)}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):
        ids = [event_id for event_id, _, _ in self._events]
        if last_event_id not in ids:
            return None
        index = ids.index(last_event_id)
        stream_id = self._events[index][1]
        for event_id, stream, message in self._events[index + 1:]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


server = MCPServer("sdk-resumable")


@server.tool()
async def count_with_drop(n: int, ctx: Context) -> str:
    """Count to n, dropping the connection halfway."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
        if i == n // 2:
            await ctx.close_sse_stream()
            await asyncio.sleep(0.1)
    return f"counted to {n}"


class GoOn(BaseModel):
    proceed: bool = True


@server.tool()
async def ask_briefly(seconds: float, ctx: Context) -> str:
    """Ask whether to go on; the question expires after ``seconds``."""
    try:
        answer = await asyncio.wait_for(ctx.elicit("Go on?", GoOn), seconds)
    except TimeoutError:
        raise ValueError("the question timed out") from None
    return f"answered: {answer.action}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
