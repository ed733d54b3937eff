"""After a restart, one ``tasks/list`` per server instead of a ``tasks/get`` per task.

Every operation carried as a 2025-11-25 task is first heard from after a restart by a
``tasks/get`` of its task id. A server that declares ``tasks.list`` in its capabilities
answers the same Task objects in one listing: at ten thousand restored operations that
was 2,500 requests each side had to carry while every other operation waited for its
own first word. :class:`TaskListings` reads the listing once per server and session (its
pages, at most :data:`MAX_PAGES`) when the first restored task asks, and answers every
first contact from it while it is fresh (:data:`FRESH_SECONDS`); a first contact after
that reads a new one. A task another session's listing of the same server names is
answered from that one (a task id names one task of its server): a server that lists all
its client's tasks in any session is listed once for all of them.

A task the listing does not name (a server that lists only the tasks of the session that
made them, one it forgot, a listing cut short) is asked for by its own ``tasks/get``, as
before; so is every task of a server whose listing failed (it is not tried again for that
server). Only first contacts after a start are answered here: the repeat polls that follow
go to the server one by one, within its poll budget, as they always did.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from hostapp.engine.session import ClientSession
from hostapp.protocol.eras import ServerInfo
from hostapp.protocol.jsonrpc import RpcError
from hostapp.transport.base import TransportError

log = logging.getLogger(__name__)

#: Pages of one listing read at most (each as long as the server makes it).
MAX_PAGES = 50
#: How long a listing answers first contacts after it was read (seconds).
FRESH_SECONDS = 5.0


def lists_tasks(info: ServerInfo | None) -> bool:
    """Whether the server said it answers ``tasks/list`` (2025-11-25 ``capabilities.tasks.list``)."""
    tasks = info.capabilities.get("tasks") if info is not None else None
    return isinstance(tasks, dict) and isinstance(tasks.get("list"), dict)


class _Listing:
    __slots__ = ("read", "tasks")

    def __init__(self, tasks: asyncio.Future[dict[str, dict[str, Any]]]) -> None:
        self.tasks = tasks
        self.read: float | None = None  # when the last page came (clock seconds)


class TaskListings:
    """Per server and session: the latest listing of its tasks (the operations restored in
    one session are restored together, but those of several sessions may interleave); and
    the servers whose listing failed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._listings: dict[tuple[str, ClientSession], _Listing] = {}  # by server and session
        self._refused: set[str] = set()

    async def task(self, server: str, info: ServerInfo | None, session: ClientSession,
                   task_id: str) -> dict[str, Any] | None:
        """The Task object ``server`` lists for ``task_id`` in ``session``; None when there is
        none to go by (then its ``tasks/get`` asks). ``info``: what the server said of itself
        when it was last connected (a session a previous process made, taken over after a
        restart, carries no capabilities of its own)."""
        if server in self._refused or not lists_tasks(info or session.server):
            return None
        key = (server, session)
        listing = self._fresh(key)
        if listing is None:
            # A task id names one task of its server (the specification: "uniquely
            # identifiable by a receiver-generated task ID"), so another session's listing
            # that names it will do; a server that lists every task of its client then
            # answers all its sessions with one listing (the bench's restart of 10,000 made
            # ten). One that lists a session's own tasks only costs this session that wait.
            for other in [it for k, it in self._listings.items() if k[0] == server and k != key
                          and not self._stale(it)]:
                named = await self._named(other, task_id)
                if named is not None:
                    return named
            # Made meanwhile by another of its tasks, or made now.
            listing = self._fresh(key) or self._start(server, session)
        return await self._named(listing, task_id)

    def _fresh(self, key: tuple[str, ClientSession]) -> _Listing | None:
        """The listing of this server and session, unless there is none or it is stale."""
        listing = self._listings.get(key)
        return None if listing is None or self._stale(listing) else listing

    def _start(self, server: str, session: ClientSession) -> _Listing:
        """A new listing of ``server`` in ``session``, read from now on."""
        # The stale ones go (a few thousand Task objects each, of no use after the start).
        for old in [k for k, it in self._listings.items() if self._stale(it)]:
            del self._listings[old]
        listing = self._listings[(server, session)] = _Listing(asyncio.ensure_future(self._read(server, session)))
        listing.tasks.add_done_callback(functools.partial(self._was_read, listing))
        return listing

    @staticmethod
    async def _named(listing: _Listing, task_id: str) -> dict[str, Any] | None:
        """The Task object ``listing`` names for ``task_id``, once read; None when it names
        none or could not be read."""
        try:
            tasks = await asyncio.shield(listing.tasks)
        except (RpcError, TransportError):
            return None
        return tasks.get(task_id)

    def _was_read(self, listing: _Listing, _done: asyncio.Future[Any]) -> None:
        listing.read = self._clock()
        if not _done.cancelled():
            _done.exception()  # retrieved: each waiter hears of it from its own await

    def _stale(self, listing: _Listing) -> bool:
        return listing.read is not None and self._clock() - listing.read > FRESH_SECONDS

    async def _read(self, server: str, session: ClientSession) -> dict[str, dict[str, Any]]:
        tasks: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        try:
            for _ in range(MAX_PAGES):
                page = await session.request("tasks/list", {"cursor": cursor} if cursor else {})
                if not isinstance(page, dict):
                    break
                listed = page.get("tasks")
                for task in listed if isinstance(listed, list) else []:
                    if isinstance(task, dict) and isinstance(task.get("taskId"), str):
                        tasks[task["taskId"]] = task
                cursor = page.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
        except RpcError as exc:
            # It says it lists, but does not: each task is asked for by itself from now on.
            self._refused.add(server)
            log.info("%s: tasks/list refused (%s); each restored task asks tasks/get", server, exc)
            raise
        except TransportError as exc:
            log.info("%s: tasks/list did not come back (%s); each restored task asks tasks/get", server, exc)
            raise
        log.info("%s: %d tasks listed for the first contact of its restored tasks", server, len(tasks))
        return tasks
