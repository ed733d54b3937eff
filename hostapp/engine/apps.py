"""MCP Apps on the engine's side: a tool's view read from its server, and the calls a view
makes, each an operation of its own.

The window renders the view; everything that reaches a server goes through here:

- :func:`read_app_view` reads a ``ui://`` resource with ``resources/read`` on the server's
  live session and checks it (:func:`hostapp.protocol.apps.parse_view_resource`: the MIME
  type, the size, the declared origins);
- :func:`start_app_call` starts a ``tools/call`` a view asked for, only for a tool of the
  same server whose ``_meta.ui.visibility`` lets apps call it, as an ordinary operation
  (journaled before it is sent, resumed after a crash, shown in the window) whose timeline
  says which operation's view started it, and whose own timeline lists it
  (:data:`VIEW_CALL_EVENT`: its id, tool and arguments). A view shown again later is
  answered from that list (``hostapp.ui.apps.bridge``): a view's calls run once. A view's
  calls are bounded: arguments of at most :data:`MAX_VIEW_ARGUMENT_BYTES`, and a rate
  (:class:`ViewCallBudget`), so one consent cannot be used to flood the journal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.protocol.apps import (
    EXTENSION_ID,
    RESOURCE_MIME,
    AppResourceError,
    find_tool,
    parse_view_resource,
    tool_ui,
)

if TYPE_CHECKING:
    from hostapp.engine.port import EnginePort

#: How long a view's resource read may wait for its server's connection and answer.
READ_TIMEOUT = 30.0

#: The arguments of one call a view makes, encoded as JSON, at most (each call is journaled).
MAX_VIEW_ARGUMENT_BYTES = 64 * 1024

#: How many calls one view may make at once, then how many a second after that: a view
#: that polls (a monitor, a progress page) stays well within; one that floods the journal
#: after the person's one "Yes" is refused until it slows down.
VIEW_CALL_BURST = 20
VIEW_CALLS_PER_SECOND = 2.0


class ViewCallBudget:
    """A token bucket per view (the operation whose view calls): :meth:`take` says whether
    one more call may start now."""

    def __init__(self, clock: Callable[[], float], burst: int = VIEW_CALL_BURST,
                 rate: float = VIEW_CALLS_PER_SECOND) -> None:
        self._clock = clock
        self._burst = burst
        self._rate = rate
        self._buckets: dict[str, tuple[float, float]] = {}  # view: (tokens, at)

    def take(self, view_of: str) -> bool:
        now = self._clock()
        tokens, at = self._buckets.get(view_of, (float(self._burst), now))
        tokens = min(float(self._burst), tokens + (now - at) * self._rate)
        if tokens < 1.0:
            self._buckets[view_of] = (tokens, now)
            return False
        self._buckets[view_of] = (tokens - 1.0, now)
        return True
#: The timeline event that marks an operation a view started.
ORIGIN_EVENT = "origin"
#: The timeline event, on the operation whose view called, of each call its view made.
VIEW_CALL_EVENT = api.EVENT_VIEW_CALL


def with_app_views(capabilities: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """The client's capabilities per era plus the MCP Apps extension (the views hostapp
    renders), so that a server that shows views only to hosts declaring it shows them."""
    def declare(era: str) -> dict[str, Any]:
        caps = dict(capabilities(era))
        caps["extensions"] = {**caps.get("extensions", {}), EXTENSION_ID: {"mimeTypes": [RESOURCE_MIME]}}
        return caps

    return declare


async def read_app_view(engine: EnginePort, server: str, uri: str, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
    """The checked view resource ``uri`` of ``server`` (``ViewResource.to_json``)."""
    if not uri.startswith("ui://"):
        raise api.AppViewRefused(f"{uri[:200]!r} is not a ui:// resource")
    session = await engine.context.connection(server).wait_ready(timeout)
    result = await session.request("resources/read", {"uri": uri}, timeout=timeout)
    try:
        return parse_view_resource(result, uri).to_json()
    except AppResourceError as exc:
        raise api.AppViewRefused(str(exc)) from None


async def _tools(engine: EnginePort, server: str) -> list[dict[str, Any]]:
    conn = engine.context.connection(server)
    if not conn.tools:
        await conn.wait_ready(READ_TIMEOUT)
    return list(conn.tools)


async def start_app_call(engine: EnginePort, server: str, tool: str, arguments: dict[str, Any] | None,
                         view_of: str) -> api.OperationView:
    """Start the ``tools/call`` the view of operation ``view_of`` asked for."""
    parent = await engine.operation(view_of)
    if parent is None:
        raise api.NoSuchOperation(view_of)
    if parent.server != server:
        raise api.AppViewRefused(f"the view of {view_of} belongs to {parent.server}, not {server}")
    entry = find_tool(await _tools(engine, server), tool)
    if entry is None:
        raise api.AppViewRefused(f"{server} offers no tool {tool[:100]!r}")
    if not tool_ui(entry).app_callable:
        raise api.AppViewRefused(f"{server} does not let its views call {tool[:100]!r}")
    size = len(json.dumps(arguments or {}, ensure_ascii=False).encode())
    if size > MAX_VIEW_ARGUMENT_BYTES:
        raise api.AppViewRefused(f"the view's arguments for {tool[:100]!r} are {size // 1024} KiB; a view may "
                                 f"send at most {MAX_VIEW_ARGUMENT_BYTES // 1024} KiB")
    if not engine.view_call_budget.take(view_of):
        raise api.AppViewRefused(f"the view of {view_of} calls tools too often (at most {VIEW_CALL_BURST} at once, "
                                 f"then {VIEW_CALLS_PER_SECOND:g} a second); this call was not made")
    view = await engine.start_call(server, tool, arguments, view_of=view_of)
    data = {"app_view_of": view_of, "message": f"called by the view of operation {view_of}"}
    engine.journal.append_event(view.id, ORIGIN_EVENT, data)
    engine.listener.operation_event(view.id, ORIGIN_EVENT, data)
    called = {"operation": view.id, "tool": tool, "arguments": arguments or {},
              "message": f"its view called {tool} (operation {view.id})"}
    engine.journal.append_event(view_of, VIEW_CALL_EVENT, called)
    engine.listener.operation_event(view_of, VIEW_CALL_EVENT, called)
    return view
