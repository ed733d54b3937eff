"""Stdio front end of the lab: newline-delimited JSON-RPC on stdin and stdout.

One client per process. Everything the core writes to a request's stored stream (and, after
``initialize``, to the session's stream) is copied to stdout as it appears; the client's
answers to ``elicitation/create`` come back on stdin.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, BinaryIO

from hostapp.lab.core import STREAMED_METHODS, HttpRpcError, LabCore
from hostapp.protocol.eras import PROTOCOL_VERSION_META_KEY
from hostapp.protocol.jsonrpc import ErrorResponse, Notification, ProtocolError, Request, Response, encode, parse


class StdioLab:
    """Serves one client on a pair of byte streams until stdin ends."""

    def __init__(self, core: LabCore, out: BinaryIO | None = None):
        self.core = core
        self.out = out or sys.stdout.buffer
        self.session_id: str | None = None
        self._deliveries: set[asyncio.Task[None]] = set()

    def write(self, message: dict[str, Any]) -> None:
        self.out.write(encode(message) + b"\n")
        self.out.flush()

    def _deliver(self, stream_id: str, after: int) -> None:
        async def copy() -> None:
            async for seq, message in self.core.tail(stream_id, after):
                self.write(message)
                self.core.delivered(stream_id, seq)
        task = asyncio.create_task(copy())
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = parse(line)
        except ProtocolError as exc:
            self.write({"jsonrpc": "2.0", "id": exc.request_id, "error": {"code": exc.code, "message": str(exc)}})
            return
        if isinstance(message, Notification):
            self.core.notification(message.method, message.params, self.session_id)
            return
        if isinstance(message, (Response, ErrorResponse)):
            self.core.client_response(message.to_obj())
            return
        assert isinstance(message, Request)
        params = message.params or {}
        if message.method == "initialize" and PROTOCOL_VERSION_META_KEY not in (params.get("_meta") or {}):
            self.session_id, result = self.core.initialize(params)
            self.write({"jsonrpc": "2.0", "id": message.id, "result": result})
            session = self.core.state.session(self.session_id)
            self._deliver(session.session_stream, 0)  # type: ignore[union-attr]
            return
        try:
            call = self.core.make_call(message.id, message.method, params, session_id=self.session_id,
                                       header_version=None, transport="stdio")
        except HttpRpcError as err:
            self.write({"jsonrpc": "2.0", "id": message.id, "error": err.to_error().to_obj()})
            return
        if message.method in STREAMED_METHODS:
            self._deliver(self.core.start_streamed(call), 0)
        else:
            response = await self.core.answer(call)
            if response is not None:
                self.write(response)

    async def serve(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            await self.handle_line(line)


async def serve_stdio(core: LabCore) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("lab ready on stdio", file=sys.stderr, flush=True)
    await StdioLab(core).serve(reader)
