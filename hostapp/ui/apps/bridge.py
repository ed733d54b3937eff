"""The host's half of a view's protocol (MCP Apps), without Qt.

One :class:`AppBridge` per rendered view. It receives the view's raw messages, checks each
one (:func:`hostapp.protocol.apps.check_view_message`: size, shape, known method,
params) and answers:

- ``ui/initialize``: what hostapp offers and where the view is shown; after
  ``ui/notifications/initialized`` the view gets the call's arguments
  (``ui/notifications/tool-input``) and, once there is one, its outcome
  (``ui/notifications/tool-result``, or ``ui/notifications/tool-cancelled``);
- ``tools/call``: only after the person agreed, the first time per tool, and then through
  the engine as an operation of its own (:meth:`EngineApi.start_app_call`), which checks
  that apps may call that tool of that server. A view shown again (its operation's
  timeline lists calls its view made before: ``record``) makes no call: each is answered
  with what the same call (tool and arguments) returned before, or refused;
- ``ui/open-link``: opened in the browser only after the person agreed;
- ``ui/notifications/size-changed``: the view's height;
- ``ui/request-display-mode``: always ``inline``; ``ping``: an empty answer.

Anything else is refused: a request gets a JSON-RPC error, a notification is dropped. The
host ends a view with ``ui/resource-teardown`` (:meth:`teardown`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from hostapp.engine import api
from hostapp.protocol import apps
from hostapp.protocol.apps import BridgeRefused, ViewMessage, ViewResource

log = logging.getLogger(__name__)

#: JSON-RPC error code for what the person or hostapp's rules did not allow.
NOT_ALLOWED = -32000
#: Most refusals remembered per view (shown to the person; a noisy view must not eat memory).
MAX_REFUSALS = 200
#: Most tool calls one view may have in flight; more are refused (a view must not flood the
#: journal and the server).
MAX_CALLS_IN_FLIGHT = 8
#: How long the view may take to answer ``ui/resource-teardown``.
TEARDOWN_SECONDS = 1.0
#: Why a view shown again gets no answer to a call it did not make the first time.
NOT_MADE_AGAIN = ("this view is shown again from the record: its tool calls are not made again, and this one "
                  "was not made before; call the tool again for fresh data")


class ConsentBook:
    """Which tools the person let views call, per server, while the window runs. The first
    call of a tool asks; a "no" holds for the view that asked."""

    def __init__(self, ask: Callable[[str, str, str, dict[str, Any]], Awaitable[bool]]) -> None:
        self._ask = ask
        self._granted: set[tuple[str, str]] = set()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def grant(self, server: str, tool: str) -> None:
        self._granted.add((server, tool))

    def granted(self, server: str, tool: str) -> bool:
        return (server, tool) in self._granted

    async def allow(self, server: str, tool: str, asked_by: str, arguments: dict[str, Any]) -> bool:
        key = (server, tool)
        async with self._locks.setdefault(key, asyncio.Lock()):  # one question at a time per tool
            if key in self._granted:
                return True
            if await self._ask(server, tool, asked_by, arguments):
                self._granted.add(key)
                return True
            return False


class AppBridge:
    """The conversation with one view of operation ``op``."""

    def __init__(self, engine: api.EngineApi, op: api.OperationView, tool: dict[str, Any] | None,
                 resource: ViewResource, send: Callable[[dict[str, Any]], None], *,
                 consent: ConsentBook, open_link: Callable[[str], Awaitable[bool]],
                 resized: Callable[[int], None], theme: str = "light", width: int = 800,
                 max_height: int = 2000, host_version: str = "",
                 started: Callable[[str], None] | None = None,
                 record: list[dict[str, Any]] | None = None) -> None:
        self.engine = engine
        self.op = op
        self.tool = tool
        self.resource = resource
        self._send = send
        self._consent = consent
        self._open_link = open_link
        self._resized = resized
        self._started = started
        self._theme, self._width, self._max_height, self._host_version = theme, width, max_height, host_version
        self.initialized = False
        self.closed = False
        self.refusals: list[str] = []
        self.calls: list[str] = []  # operation ids the view started
        self.tool_replies: list[dict[str, Any]] = []  # the last answers to its tools/call
        #: The calls its view made when it was shown before (``view_call`` event data),
        #: None for a view shown the first time.
        self.record = record
        self.replayed: list[str] = []  # the earlier operations whose outcome answered a call
        self._declined: set[str] = set()
        self._in_flight = 0
        self._sent_input = False
        self._sent_outcome = False
        self._ids = itertools.count(1)
        self._waiting: dict[str | int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- from the view ------------------------------------------------------------------------

    def receive(self, text: str) -> None:
        """One raw message from the view."""
        if self.closed:
            return
        try:
            message = apps.check_view_message(text)
        except BridgeRefused as refused:
            self._refuse(str(refused))
            if refused.rid is not None:
                self._send(apps.refusal(refused.rid, refused.code, str(refused)))
            return
        if message.method is None:
            future = self._waiting.pop(message.rid, None) if message.rid is not None else None
            if future is not None and not future.done():
                future.set_result(message.result if message.error is None else None)
            return
        if message.is_request:
            task = asyncio.ensure_future(self._answer(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._notified(message)

    def _refuse(self, why: str) -> None:
        log.info("app view of %s: refused: %s", self.op.id, why)
        if len(self.refusals) < MAX_REFUSALS:
            self.refusals.append(why)

    def _notified(self, message: ViewMessage) -> None:
        if message.method == "ui/notifications/initialized":
            self.initialized = True
            self.deliver(self.op)
        elif message.method == "ui/notifications/size-changed":
            height = message.params.get("height")
            if isinstance(height, (int, float)):
                self._resized(int(height))
        elif message.method == "notifications/message":
            log.debug("app view of %s says: %s", self.op.id, json.dumps(message.params)[:500])

    async def _answer(self, message: ViewMessage) -> None:
        assert message.rid is not None and message.method is not None
        try:
            result = await self._handle(message.method, message.params)
        except BridgeRefused as refused:
            self._refuse(f"{message.method}: {refused}")
            reply = apps.refusal(message.rid, refused.code, str(refused))
        except api.EngineError as exc:
            reply = apps.refusal(message.rid, NOT_ALLOWED, str(exc))
        else:
            reply = apps.answer(message.rid, result)
        if message.method == "tools/call":
            self.tool_replies = [*self.tool_replies[-(MAX_REFUSALS - 1):], reply]
        if not self.closed:
            self._send(reply)

    async def _handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "ui/initialize":
            return apps.initialize_result(host_name="hostapp", host_version=self._host_version, tool=self.tool,
                                          csp=self.resource.csp, theme=self._theme, width=self._width,
                                          max_height=self._max_height)
        if method == "tools/call":
            return await self._call_tool(str(params["name"]), params.get("arguments") or {})
        if method == "ui/open-link":
            return {} if await self._open_link(str(params["url"])) else {"isError": True}
        if method == "ui/request-display-mode":
            return {"mode": "inline"}
        if method == "ping":
            return {}
        raise BridgeRefused(f"hostapp does not offer {method} to views", apps.METHOD_NOT_FOUND)

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        server = self.op.server
        if name in self._declined:
            raise BridgeRefused(f"the person did not allow this view to call {name}", NOT_ALLOWED)
        # Checked again by the engine; checked here so that nobody is asked about a call
        # that could not be made anyway.
        entry = apps.find_tool(await self.engine.list_tools(server), name)
        if entry is None or not apps.tool_ui(entry).app_callable:
            raise BridgeRefused(f"{server} does not let its views call {name}", NOT_ALLOWED)
        if self.record is not None:
            return await self._recorded(name, arguments)  # refused as it was the first time, else this
        if not await self._consent.allow(server, name, self.op.tool or self.op.method, arguments):
            self._declined.add(name)
            raise BridgeRefused(f"the person did not allow this view to call {name}", NOT_ALLOWED)
        if self._in_flight >= MAX_CALLS_IN_FLIGHT:
            raise BridgeRefused(f"this view already has {MAX_CALLS_IN_FLIGHT} calls in flight", NOT_ALLOWED)
        self._in_flight += 1
        try:
            started = await self.engine.start_app_call(server, name, arguments, self.op.id)
            self.calls.append(started.id)
            if self._started is not None:
                self._started(started.id)
            final = await self.engine.wait_finished(started.id)
        finally:
            self._in_flight -= 1
        return _answer_of(final)

    async def _recorded(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The answer a view shown again gets: what the newest same call returned."""
        assert self.record is not None
        for call in reversed(self.record):
            if call.get("tool") != name or call.get("arguments") != arguments:
                continue
            earlier = await self.engine.operation(str(call.get("operation")))
            if earlier is not None and not earlier.in_flight:
                self.replayed.append(earlier.id)
                return _answer_of(earlier)
        raise BridgeRefused(NOT_MADE_AGAIN, NOT_ALLOWED)

    # -- to the view ----------------------------------------------------------------------------

    def deliver(self, op: api.OperationView) -> None:
        """Send the call's arguments and, once there is one, its outcome (each once)."""
        if op.id != self.op.id:
            return
        self.op = op
        if not self.initialized or self.closed:
            return
        if not self._sent_input:
            self._sent_input = True
            self._send(apps.notification("ui/notifications/tool-input", {"arguments": op.arguments}))
        if self._sent_outcome or op.in_flight:
            return
        self._sent_outcome = True
        if op.result is not None:
            self._send(apps.notification("ui/notifications/tool-result", op.result))
        elif op.status == api.OperationStatus.FAILED:
            text = str((op.error or {}).get("message") or op.message or "the call failed")
            self._send(apps.notification("ui/notifications/tool-result",
                                         {"content": [{"type": "text", "text": text}], "isError": True}))
        else:
            self._send(apps.notification("ui/notifications/tool-cancelled", {"reason": op.message or op.status}))

    async def teardown(self, timeout: float = TEARDOWN_SECONDS) -> None:
        """Ask the view to clean up (``ui/resource-teardown``), then stop talking to it."""
        if self.closed:
            return
        if self.initialized:
            rid = f"host-{next(self._ids)}"
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting[rid] = future
            self._send({"jsonrpc": "2.0", "id": rid, "method": "ui/resource-teardown", "params": {}})
            try:
                await asyncio.wait_for(future, timeout)
            except TimeoutError:
                pass
        self.closed = True
        for task in list(self._tasks):
            task.cancel()


def _answer_of(final: api.OperationView) -> dict[str, Any]:
    """A ``tools/call`` result for the view from an ended operation."""
    if final.result is not None:
        return final.result
    error = final.error or {}
    text = str(error.get("message") or final.message or final.status)
    return {"content": [{"type": "text", "text": text}], "isError": True}
