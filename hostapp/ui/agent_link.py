"""The window's link to the background agent: one engine facade that outlives a connection.

The agent owns the home's engine; the window reaches it over a local connection that can
break (the agent was killed, or crashed). :class:`AgentLink` is the
:class:`~hostapp.engine.api.EngineApi` the window holds for its whole life: each call goes
to the current connection, and when that connection breaks the link says so, obtains a new
one through the ``connect`` it was given (which starts a new agent when none runs) and goes
on. Calls made in between wait for the new connection, so the window's models, selection,
filter and open dialogs stay as they were.

The link knows nothing of how an agent is found or started: ``connect`` comes from the
composition root (:mod:`hostapp.app`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hostapp.engine.api import EngineError, EngineListener

log = logging.getLogger(__name__)

#: States reported to ``on_change``.
CONNECTED, RECONNECTED, LOST, UNAVAILABLE = "connected", "reconnected", "lost", "unavailable"
#: The agent stopped on purpose (``hostapp agent stop``, a signal): no new one is started
#: until the person asks (:meth:`AgentLink.restart`).
STOPPED = "stopped"


class AgentConnection(Protocol):
    """What a connection to the agent offers besides the engine facade."""

    listener: EngineListener

    async def wait_closed(self) -> None: ...

    async def close(self) -> None: ...

    async def request_owner(self, method: str) -> Any: ...


class AgentLink:
    """The engine facade of the window, carried by whichever connection to the agent is current.

    States: new → connecting → connected ⇄ lost (reconnecting); connected → stopped (the
    agent stopped on purpose) → connecting once the person asks; the window leaving ends it.
    ``on_change(state, message)`` hears each change (``message`` is for the person).
    """

    def __init__(self, connect: Callable[[], Awaitable[AgentConnection]], *, retry_seconds: float = 1.0) -> None:
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
        if self._running is None:
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
        while not self._stopping:
            try:
                conn = await self._connect()
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
            self._say(CONNECTED if self.connections == 1 else RECONNECTED, "")
            await conn.wait_closed()
            self._ready.clear()
            if self._stopping:
                return
            reason = getattr(conn, "owner_stopping", None)
            if reason:
                self._say(STOPPED, f"The background agent stopped: {reason}. Operations are paused until it runs "
                                   "again; hostapp does not restart it by itself. Choose Start agent to go on.")
                self._restart.clear()
                await self._restart.wait()
                continue
            self._say(LOST, "The background agent stopped unexpectedly. hostapp is starting it again; "
                            "operations that can resume will continue.")

    # -- the facade ------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        """Every other engine call goes to the current connection, once there is one."""
        if name.startswith("_"):
            raise AttributeError(name)
        from hostapp.engine.api import EngineApi

        member = getattr(EngineApi, name, None)
        if member is None or not inspect.iscoroutinefunction(member):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._ready.wait()
            assert self.current is not None
            return await getattr(self.current, name)(*args, **kwargs)

        call.__name__ = name
        return call

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
                await conn.request_owner("agent.stop")
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
