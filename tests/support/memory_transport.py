"""An MCP server in the test's own process, and a transport that talks to it.

Like httpx's ``MockTransport``: :class:`MemoryTransport` is a real
:class:`~hostapp.transport.base.Transport` (the engine cannot tell it from stdio), wired to
a :class:`FakeServer` whose tools are coroutines the test writes. Every message goes
through JSON-RPC encoding and parsing on its way, and is delivered on a later turn of the
event loop, as a pipe would. No process, no socket, no sleep: engine tests that are about
the engine's own bookkeeping run in milliseconds.

A tool is ``async def tool(call: ToolCall) -> dict``: it may report progress, ask the
person (an elicitation request to the client), close the connection mid-call, and returns
the CallToolResult (or raises :class:`~hostapp.protocol.jsonrpc.RpcError`).

    server = FakeServer()

    @server.tool("count")
    async def count(call):
        for step in range(1, 4):
            await call.progress(step, 3)
        return text_result("done")

    monkeypatch.setattr(supervisor, "make_transport", server.transport_factory)
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    parse,
)
from hostapp.transport.base import ConnectionLost, Transport, TransportListener

PROTOCOL_VERSION = "2025-11-25"


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


class ToolCall:
    """One ``tools/call`` as its tool sees it."""

    def __init__(self, server: FakeServer, link: MemoryTransport, request_id: RequestId, params: dict[str, Any]):
        self.server = server
        self.link = link
        self.request_id = request_id
        self.name: str = params.get("name", "")
        self.arguments: dict[str, Any] = params.get("arguments") or {}
        meta = params.get("_meta") or {}
        self.progress_token = meta.get("progressToken")

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` for this call's token, and let it arrive."""
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.link.to_client(Notification("notifications/progress", params))
        await asyncio.sleep(0)

    async def elicit(self, message: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask the person through the client (a form elicitation); the client's answer."""
        return await self.link.ask_client("elicitation/create", {
            "message": message,
            "requestedSchema": schema or {"type": "object", "properties": {}}})

    def close_connection(self) -> None:
        """The server goes away in the middle of the call (as a crashed process would)."""
        self.link.server_closed()


Tool = Callable[[ToolCall], Awaitable[dict[str, Any]]]


class FakeServer:
    """A scripted MCP server (the 2025-11-25 handshake, no durable mechanism offered).

    ``received`` keeps every message from the client (decoded), ``links`` every transport
    connected to it (a reconnect makes a new one).
    """

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.tools: dict[str, Tool] = {}
        #: Other requests the server answers at once: method -> params -> result.
        self.methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
        self.received: list[dict[str, Any]] = []
        self.links: list[MemoryTransport] = []
        #: What it declares in ``initialize`` besides its tools.
        self.capabilities: dict[str, Any] = {}
        self._calls: dict[tuple[int, RequestId], asyncio.Task[None]] = {}

    def tool(self, name: str) -> Callable[[Tool], Tool]:
        def register(fn: Tool) -> Tool:
            self.tools[name] = fn
            return fn
        return register

    def transport_factory(self, *_args: Any, **_kwargs: Any) -> MemoryTransport:
        """Stands in for ``hostapp.engine.connections.make_transport``."""
        return MemoryTransport(self)

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("method") == method]

    # -- the server's side of one link ----------------------------------------------

    def handle(self, link: MemoryTransport, obj: dict[str, Any]) -> None:
        self.received.append(obj)
        method, rid, params = obj.get("method"), obj.get("id"), obj.get("params") or {}
        if method is None:
            link.client_answered(obj)
        elif rid is None:
            if method == "notifications/cancelled":
                task = self._calls.get((id(link), params.get("requestId")))
                if task is not None:
                    task.cancel()
        elif method == "initialize":
            link.to_client(Response(rid, {
                "protocolVersion": params.get("protocolVersion", PROTOCOL_VERSION),
                "capabilities": {"tools": {"listChanged": False}, **self.capabilities},
                "serverInfo": {"name": self.name, "version": "0"}}))
        elif method == "tools/list":
            link.to_client(Response(rid, {"tools": [
                {"name": n, "inputSchema": {"type": "object"}} for n in self.tools]}))
        elif method == "ping":
            link.to_client(Response(rid, {}))
        elif method == "tools/call" and params.get("name") in self.tools:
            call = ToolCall(self, link, rid, params)
            task = asyncio.get_running_loop().create_task(self._run(link, call))
            key = (id(link), rid)
            self._calls[key] = task
            task.add_done_callback(lambda _t: self._calls.pop(key, None))
        elif method in self.methods:
            link.to_client(Response(rid, self.methods[method](params)))
        else:
            link.to_client(ErrorResponse(rid, ErrorObject(METHOD_NOT_FOUND, f"no method {method}")))

    def link_closed(self, link: MemoryTransport) -> None:
        """The calls in flight on a closed link end with it."""
        for (link_id, _rid), task in list(self._calls.items()):
            if link_id == id(link):
                task.cancel()

    async def _run(self, link: MemoryTransport, call: ToolCall) -> None:
        try:
            result = await self.tools[call.name](call)
        except RpcError as exc:
            link.to_client(ErrorResponse(call.request_id, exc.to_error()))
        except ConnectionLost:
            pass  # the connection it would answer on is gone
        except asyncio.CancelledError:
            pass  # the client cancelled it: no answer is owed
        except Exception as exc:  # noqa: BLE001 - a tool's bug is the server's error answer
            link.to_client(ErrorResponse(call.request_id, ErrorObject(INTERNAL_ERROR, str(exc))))
        else:
            link.to_client(Response(call.request_id, result))


class MemoryTransport(Transport):
    """A transport to a :class:`FakeServer` in this process (a pipe's behaviour: no
    session, no stream to resume, messages in order on a later loop turn)."""

    def __init__(self, server: FakeServer):
        self.server = server
        self.closed = False
        self._connected = False
        self._ids = itertools.count(1)
        self._asked: dict[RequestId, asyncio.Future[dict[str, Any]]] = {}

    async def connect(self, listener: TransportListener) -> None:
        self.listener = listener
        self._connected = True
        self.server.links.append(self)

    async def send(self, message: Message) -> None:
        if self.closed or not self._connected:
            raise ConnectionLost("the in-memory server is not connected")
        data = json.loads(encode(message))
        asyncio.get_running_loop().call_soon(self._to_server, data)

    def _to_server(self, data: dict[str, Any]) -> None:
        if not self.closed:
            self.server.handle(self, data)

    async def close(self, *, end_session: bool = True) -> None:
        self._end(None)

    # -- the server's side ----------------------------------------------------------

    def to_client(self, message: Message) -> None:
        """A message from the server, delivered on a later loop turn."""
        if self.closed:
            raise ConnectionLost("the connection is closed")
        data = encode(message)
        asyncio.get_running_loop().call_soon(self._to_client, data)

    def _to_client(self, data: bytes) -> None:
        if not self.closed:
            self.listener.on_message(parse(data))

    async def ask_client(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = f"srv-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[rid] = future
        self.to_client(Request(rid, method, params))
        return await future

    def client_answered(self, obj: dict[str, Any]) -> None:
        future = self._asked.pop(obj.get("id"), None)
        if future is None or future.done():
            return
        if "error" in obj:
            error = obj["error"]
            future.set_exception(RpcError(error.get("code", INTERNAL_ERROR), error.get("message", "")))
        else:
            future.set_result(obj.get("result") or {})

    def server_closed(self) -> None:
        """The server ends the connection (its process died, the pipe broke)."""
        self._end(ConnectionLost("the in-memory server closed the connection"))

    def _end(self, error: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        for future in self._asked.values():
            if not future.done():
                future.set_exception(ConnectionLost("the connection closed"))
        self._asked.clear()
        self.server.link_closed(self)
        if self._connected:
            self.listener.on_closed(error)
