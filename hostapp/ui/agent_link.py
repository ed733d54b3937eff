"""The window's link to the background agent: one engine facade that outlives a connection.

The agent owns the home's engine; the window reaches it over a local connection that can
break (the agent was killed, or crashed). :class:`AgentLink` is the
:class:`~hostapp.engine.api.EngineApi` the window holds for its whole life: each call goes
to the current connection, and when that connection breaks the link says so, obtains a new
one through the ``connect`` it was given (which starts a new agent when none runs) and goes
on. Calls made in between wait for the new connection, so the window's models, selection,
filter and open dialogs stay as they were. A new connection to the same agent gives the
position of the last event heard: when the agent still has every event since, it sends them
again and the link says :data:`RESUMED` (nothing to read again); otherwise
:data:`RECONNECTED` (the window reads everything again).

The link knows nothing of how an agent is found or started: ``connect`` comes from the
composition root (:mod:`hostapp.app`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hostapp.engine.api import AgentControl, EngineError, EngineListener, ForwardingEngine, JsonObject

log = logging.getLogger(__name__)

#: States reported to ``on_change``.
CONNECTED, RECONNECTED, LOST, UNAVAILABLE = "connected", "reconnected", "lost", "unavailable"
#: Connected again to the same agent, every event missed meanwhile received since.
RESUMED = "resumed"
#: The agent stopped on purpose (``hostapp agent stop``, a signal): no new one is started
#: until the person asks (:meth:`AgentLink.restart`).
STOPPED = "stopped"


class AgentConnection(Protocol):
    """What the link needs of a connection to the agent."""

    listener: EngineListener
    #: The agent's own methods (``agent.stop``…).
    control: AgentControl
    #: Why the agent said it stops on purpose, if it did.
    owner_stopping: str | None
    #: Why the agent stopped serving this connection, if it did (the agent goes on).
    dropped: str | None
    #: Where the connection is in the agent's events (given to the next ``connect``).
    position: Any
    #: Whether the events missed since the position given were all received again.
    caught_up: bool | None

    async def forward(self, method: str, arguments: JsonObject) -> Any: ...

    async def wait_closed(self) -> None: ...

    async def close(self) -> None: ...


class AgentLink(ForwardingEngine):
    """The engine facade of the window, carried by whichever connection to the agent is current.

    States: new → connecting → connected ⇄ lost (reconnecting: resumed or reconnected);
    connected → stopped (the agent stopped on purpose) → connecting once the person asks;
    the window leaving ends it. ``on_change(state, message)`` hears each change (``message``
    is for the person). ``connect(position)`` makes a connection, given the position in the
    events of the previous one (None at first).
    """

    def __init__(self, connect: Callable[[Any], Awaitable[AgentConnection]], *, retry_seconds: float = 1.0) -> None:
        self._connect = connect
        self._retry = retry_seconds
        self.current: AgentConnection | None = None
        self.connections = 0  # how many connections were made (a new agent per loss, or the same one)
        self.on_change: Callable[[str, str], None] | None = None
        self._listener: EngineListener | None = None
        self._ready = asyncio.Event()
        self._restart = asyncio.Event()
        self._stopping = False
        self._running: asyncio.Task[None] | None = None

    # -- the listener goes to every connection ------------------------------------------

    @property
    def listener(self) -> EngineListener | None:
        return self._listener

    @listener.setter
    def listener(self, listener: EngineListener) -> None:
        self._listener = listener
        if self.current is not None:
            self.current.listener = listener

    # -- connecting ------------------------------------------------------------------

    def open(self) -> None:
        """Connect in the background (and again after each loss) until :meth:`stop`."""
        if self._running is None and not self._stopping:
            self._running = asyncio.ensure_future(self._run())

    async def wait_link(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)

    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    def _say(self, state: str, message: str) -> None:
        log.info("agent link %s%s", state, f": {message}" if message else "")
        if self.on_change is not None:
            self.on_change(state, message)

    async def _run(self) -> None:
        failures = 0
        position: Any = None
        while not self._stopping:
            try:
                conn = await self._connect(position)
            except (EngineError, OSError) as exc:
                failures += 1
                self._say(UNAVAILABLE, f"hostapp could not reach its background agent: {exc}. Trying again…")
                await asyncio.sleep(min(self._retry * failures, 15.0))
                continue
            failures = 0
            if self._listener is not None:
                conn.listener = self._listener
            self.current = conn
            self.connections += 1
            self._ready.set()
            if self.connections == 1:
                self._say(CONNECTED, "")
            else:
                self._say(RESUMED if conn.caught_up else RECONNECTED, "")
            await conn.wait_closed()
            self._ready.clear()
            if self._stopping:
                return
            position = conn.position
            reason = conn.owner_stopping
            if reason:
                self._say(STOPPED, f"The background agent stopped: {reason}. Operations are paused until it runs "
                                   "again; hostapp does not restart it by itself. Choose Start agent to go on.")
                self._restart.clear()
                await self._restart.wait()
                continue
            if conn.dropped:
                self._say(LOST, f"The background agent stopped serving this window ({conn.dropped}). "
                                "hostapp is connecting to it again.")
                continue
            self._say(LOST, "The background agent stopped unexpectedly. hostapp is starting it again; "
                            "operations that can resume will continue.")

    # -- the facade ------------------------------------------------------------------

    async def forward(self, method: str, arguments: JsonObject) -> Any:
        """Every engine call goes to the current connection, once there is one (the first
        call connects)."""
        if self._stopping:
            raise EngineError("the window has left the background agent")
        self.open()
        await self._ready.wait()
        assert self.current is not None
        return await self.current.forward(method, arguments)

    def restart(self) -> None:
        """After a deliberate stop: start (or reach) an agent again."""
        self._restart.set()

    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None:
        """The agent started its engine when it took the home; the link only connects."""
        self.open()
        await self._ready.wait()

    async def stop(self) -> None:
        """The window leaves: its connection ends; the agent and its work go on."""
        self._stopping = True
        await self._end()

    async def stop_owner(self, timeout: float = 60.0) -> None:
        """Stop everything: ask the agent to stop (journal flushed, stream positions kept,
        servers closed) and wait until it has closed the connection."""
        self._stopping = True
        conn = self.current if self._ready.is_set() else None
        if conn is not None:
            with contextlib.suppress(EngineError):
                await conn.control.stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.wait_closed(), timeout)
        await self._end()

    async def _end(self) -> None:
        if self._running is not None:
            self._running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._running
        if self.current is not None:
            await self.current.close()
        self._ready.clear()
