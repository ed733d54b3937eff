"""The sessions one operation runs in, and the earlier one it may adopt after a restart.

A stream (and a 2025-11-25 task) lives in the HTTP session that carried it: its handle is
kept with that session's id and protocol version, and a host restarted with it takes that
session over (no ``initialize``) to go on, instead of asking the connection's new session,
whose server would refuse it. :class:`OperationSessions` keeps, for one operation, the
session it runs in now, the earlier session it adopted (if any) and the HTTP session its
handle lives in, and adopts at most once per attach, whichever asks first: the attach, or
a cancel that goes out before it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from hostapp.transport.base import TransportError

if TYPE_CHECKING:
    from hostapp.engine.operation import RunnerContext
    from hostapp.engine.session import ClientSession, ProgressCallback

log = logging.getLogger(__name__)


class SessionsPort(Protocol):
    """What an operation's sessions use of the operation (which the engine's indexes name)."""

    @property
    def id(self) -> str: ...

    @property
    def server(self) -> str: ...

    @property
    def bound_to_its_session(self) -> bool:
        """Does its mechanism's handle work only in the HTTP session that issued it?"""
        ...


class OperationSessions:
    """One operation's sessions.

    ``current``: the session it runs in now (None until attached or sent). ``adopted``: an
    earlier session of its server it took over, where its handle lives. ``http_session``:
    (session id, protocol version) of the HTTP session its handle lives in, indexed by the
    engine's routing. Progress of the operation's token goes to ``on_progress`` from every
    session it runs in.
    """

    def __init__(self, port: SessionsPort, context: RunnerContext[Any], *, progress_token: str,
                 on_progress: ProgressCallback, http_session: tuple[str, str] | None):
        self._port = port
        self._context = context
        self._token = progress_token
        self._on_progress = on_progress
        self.current: ClientSession | None = None
        self.adopted: ClientSession | None = None
        self._http_session: tuple[str, str] | None = None
        # Restored with the HTTP session its handle is bound to: whatever goes out first
        # (a poll after attach, or a cancel asked for before it) adopts that session.
        self._pending = http_session is not None
        self._adopting = asyncio.Lock()
        self.http_session = http_session

    @property
    def http_session(self) -> tuple[str, str] | None:
        """The HTTP session its handle lives in (session id, protocol version), if any."""
        return self._http_session

    @http_session.setter
    def http_session(self, value: tuple[str, str] | None) -> None:
        # Indexed by the routing, so that an ending operation finds the others of its
        # session without looking at every operation.
        old, self._http_session = self._http_session, value
        self._context.bind_http_session(self._port, old, value)

    def run_in(self, session: ClientSession) -> None:
        """The operation runs in ``session`` now: its progress is routed from there."""
        self.current = session
        session.route_progress(self._token, self._on_progress)

    def is_its_own(self, session: ClientSession) -> bool:
        """Is ``session`` the HTTP session its handle lives in?"""
        bound = self._http_session
        return bound is not None and session.transport.session_id == bound[0]

    def handle_lives_in(self) -> tuple[str, str] | None:
        """The HTTP session a handle issued now lives in: the adopted earlier session, else
        the one it runs in (a stream can only be resumed in its own session)."""
        session = self.adopted or self.current
        sid = session.transport.session_id if session is not None else None
        if sid is not None and session is not None and session.server is not None:
            self.http_session = (sid, session.server.protocol_version)
        return self._http_session

    async def live(self) -> ClientSession:
        """The session its next request goes to: the adopted earlier one while it is
        ready, else the connection's (waited for)."""
        adopted = self.adopted
        if adopted is not None and adopted.state == "ready":
            return adopted  # the earlier session its handle is bound to
        live = await self._context.connection(self._port.server).wait_ready()
        if self._pending:
            # Nothing went out yet since the restart (a cancel before the attach): it goes
            # to the session the handle is bound to, as the polls will.
            return await self.adopt_earlier(live) or live
        return live

    async def adopt_earlier(self, live: ClientSession, *, look_again: bool = False) -> ClientSession | None:
        """After a restart, take over the earlier session its handle lives in (no
        initialize), to resume its stream there. ``look_again``: a (new) attach, after
        which the session may be another. Once, whether the attach or a cancel asks first."""
        if look_again:
            self._pending = True
        async with self._adopting:
            if not self._pending:
                adopted = self.adopted
                return adopted if adopted is not None and adopted.state == "ready" else None
            try:  # pending until done: what goes out meanwhile waits for it
                return await self._adopt_now(live)
            finally:
                self._pending = False

    async def adopt_for_stream(self, live: ClientSession) -> ClientSession | None:
        """A stream to resume lives in another session than ``live``: adopt that one now."""
        async with self._adopting:
            return await self._adopt_now(live)

    async def _adopt_now(self, live: ClientSession) -> ClientSession | None:
        if self._http_session is None or not self._port.bound_to_its_session:
            return None
        sid, version = self._http_session
        if live.transport.session_id == sid:
            return None
        try:
            self.adopted = await self._context.connection(self._port.server).side_session(sid, version)
        except TransportError as exc:
            log.info("operation %s: its earlier session cannot be adopted: %s", self._port.id, exc)
            return None
        self.adopted.route_progress(self._token, self._on_progress)
        return self.adopted

    async def give_up_adopted(self) -> None:
        """The server refused the adopted earlier session: go on (or end) on the live one."""
        adopted, self.adopted = self.adopted, None
        if adopted is not None and self._http_session is not None:
            sid, self.http_session = self._http_session[0], None
            await self._context.connection(self._port.server).release_side_session(sid)

    async def end(self) -> None:
        """The operation ends: no more progress is routed to it, and an adopted session no
        other operation's handle lives in is ended on the server."""
        if self.current is not None:
            self.current.unroute_progress(self._token)
        if self.adopted is not None and self._http_session is not None:
            sid = self._http_session[0]
            if not self._context.shares_http_session(self._port, sid):
                await self._context.connection(self._port.server).release_side_session(sid)
