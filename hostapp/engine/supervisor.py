"""Keeps one server connected: connect, detect loss, reconnect with backoff, say so.

A :class:`ServerConnection` owns the live :class:`ClientSession` of one configured
server. When the connection drops (a stdio process exits, an HTTP stream cannot be
resumed, a 404 says the session is gone) it reconnects with exponential backoff and full
jitter, re-initializing from scratch, and tells its owner each time a new session is
ready so the operations of that server can be resumed on it. It never gives up: after a
few failures the server shows as offline, and attempts continue at the longest interval.

A break of the network is not the end of an HTTP session: the server may still hold the
session and everything bound to it (tasks, streams, subscriptions). So when a request
failed for the network's sake and the session has an id, the same session is pinged with
the same backoff until it answers; only when the server refuses it (404 and its kin, a
sign-in) is a new session initialized.

States: offline → connecting → connected → reconnecting (waiting ``retry_in``) →
connecting … ; disabled when stopped; needs_sign_in on HTTP 401.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hostapp.auth.errors import SignInRequired
from hostapp.engine import api
from hostapp.engine.connections import make_transport
from hostapp.engine.session import ClientHandlers, ClientSession, StrayAnswer
from hostapp.protocol import eras
from hostapp.protocol.eras import ServerInfo
from hostapp.protocol.jsonrpc import IdAllocator, RpcError
from hostapp.protocol.timing import DEFAULT_TIMING, Timing
from hostapp.transport.base import BUSY_STATUSES, HttpStatusError, SessionExpired, StreamHabits, TransportError

if TYPE_CHECKING:
    from hostapp.store.journal import ServerConfig
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)


class Backoff:
    """Exponential backoff with full jitter (each delay uniform in [base, cap_n])."""

    def __init__(self, base: float = 0.5, factor: float = 2.0, cap: float = 30.0, rng: random.Random | None = None):
        self.base, self.factor, self.cap = base, factor, cap
        self.failures = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * (self.factor ** self.failures))
        self.failures += 1
        return self._rng.uniform(min(self.base, ceiling), ceiling)

    def reset(self) -> None:
        self.failures = 0


#: Failures in a row after which a reconnecting server is shown as offline.
OFFLINE_AFTER = 3
#: Longest a request of an optional method waits for the server's verdict on the first
#: one, when the transport cannot tell that a request was taken (see optional_turn).
OPTIONAL_PROBE_SECONDS = 2.0


class ServerConnection:
    """The supervised connection of one server."""

    def __init__(self, cfg: ServerConfig, *, secret_store: SecretStore | None,
                 handlers_factory: Callable[..., ClientHandlers],
                 capabilities: dict[str, Any] | Callable[[str], dict[str, Any]],
                 on_change: Callable[[api.ServerView], None],
                 on_ready: Callable[[ServerConnection, ClientSession], Awaitable[None]],
                 backoff: Backoff | None = None,
                 request_ids: Callable[[], IdAllocator] = IdAllocator,
                 timing: Timing = DEFAULT_TIMING,
                 keeps_sign_in: Callable[[], bool] = lambda: False):
        self.cfg = cfg
        self.secret_store = secret_store
        self.handlers_factory = handlers_factory
        self.capabilities = capabilities
        self.on_change = on_change
        self.on_ready = on_ready
        self.timing = timing
        self.backoff = backoff or Backoff(base=timing.reconnect_base, cap=timing.reconnect_cap)
        # Each session's request ids: never those of another operation of this server,
        # whichever process or lifetime sent it (the engine reserves them in the journal).
        self.request_ids = request_ids
        # Whether a sign-in of this server is kept (what Sign out would forget).
        self.keeps_sign_in = keeps_sign_in
        self.session: ClientSession | None = None
        self.info: ServerInfo | None = None
        self.tools: list[dict[str, Any]] = []
        self.view = api.ServerView(cfg.name, cfg.transport, cfg.url or " ".join([cfg.command or "", *cfg.args]))
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self.attempted = asyncio.Event()  # set once the first connection attempt has ended
        self._side: dict[str, ClientSession] = {}
        self._adopting: dict[str, asyncio.Lock] = {}  # one adoption at a time per session id
        # Whether the session that was lost may still be alive on the server (see module doc).
        self._may_keep = True
        # The server said it no longer knows the session: the next one is a renewal, shown.
        self._forgotten = False
        # Optional methods the server answered "method not found" (not asked again until
        # the next new session, which may be a newer server), those it took, and those
        # whose first request is out with no verdict yet (see optional_turn).
        self.unsupported_methods: set[str] = set()
        self.supported_methods: set[str] = set()
        self._probes: dict[str, asyncio.Event] = {}
        # What its transports learn about the server's streams, shared by all of them.
        self.stream_habits = StreamHabits()

    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def is_ready(self) -> bool:
        """Is the session ready for requests now (connected, not being replaced)?"""
        return self._ready.is_set()

    async def optional_turn(self, method: str) -> str | None:
        """May a request of the optional ``method`` go to this server now?

        None: the server lacks it. "go": it has it. "probe": nobody knows yet and the caller
        sends the first one, then gives the verdict (:meth:`optional_verdict`) as soon as the
        server took it or refused it. The others wait for that verdict, for at most
        OPTIONAL_PROBE_SECONDS when the transport cannot tell that a request was taken
        (stdio); without that wait, thousands of operations resumed together would each
        send the request before the server's first "method not found" came back.
        """
        while True:
            if method in self.unsupported_methods:
                return None
            if method in self.supported_methods:
                return "go"
            probe = self._probes.get(method)
            if probe is None:
                self._probes[method] = asyncio.Event()
                return "probe"
            session = self.session
            acknowledged = session is not None and session.transport.acknowledges_requests
            try:
                await asyncio.wait_for(probe.wait(), None if acknowledged else OPTIONAL_PROBE_SECONDS)
            except TimeoutError:
                return "go"  # no refusal by now: most likely the server has it

    def optional_verdict(self, method: str, supported: bool | None) -> None:
        """What the server said to an optional method (None: nothing yet; the request
        failed otherwise, and the next one asks)."""
        if supported is not None:
            (self.supported_methods if supported else self.unsupported_methods).add(method)
            (self.unsupported_methods if supported else self.supported_methods).discard(method)
        probe = self._probes.pop(method, None)
        if probe is not None:
            probe.set()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"supervise {self.name}")

    async def stop(self, *, keep_session: bool = False) -> None:
        """Stop supervising and close; ``keep_session`` when operations will be resumed
        after a restart (an HTTP session then stays alive on the server)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopped: how it ended does not matter
                pass
        await self._drop_session(end_session=not keep_session)
        for session in list(self._side.values()):
            try:
                await session.close(end_session=not keep_session)
            except Exception as exc:  # noqa: BLE001 - closing a broken connection may fail any way
                log.debug("closing an adopted session of %s: %s", self.name, exc)
        self._side.clear()
        self._adopting.clear()
        self._set(state=api.DISABLED, retry_in=None)

    async def side_session(self, session_id: str, protocol_version: str) -> ClientSession:
        """A session a previous process opened, adopted to resume its operations' streams."""
        # Operations restored together ask at once: they must share one adopted session,
        # not each make its own while another's is still being set up.
        async with self._adopting.setdefault(session_id, asyncio.Lock()):
            session = self._side.get(session_id)
            if session is not None and session.state == "ready":
                return session
            return await self._adopt_side_session(session_id, protocol_version)

    async def _adopt_side_session(self, session_id: str, protocol_version: str) -> ClientSession:
        transport = make_transport(self.cfg, self.secret_store, session_id=session_id,
                                   protocol_version=protocol_version, standalone_stream=False,
                                   habits=self.stream_habits, timing=self.timing)
        # Its handlers and requests are told apart from the other sessions' by its id:
        # requests of different earlier processes may share a JSON-RPC id.
        session = ClientSession(transport, _Watcher(self.handlers_factory(self, scope=session_id), self),
                                capabilities=self.capabilities, ids=self.request_ids())
        session.scope = session_id
        await session.adopt(ServerInfo(protocol_version, eras.era_of(protocol_version)))
        self._side[session_id] = session
        return session

    async def release_side_session(self, session_id: str) -> None:
        """The last operation of an adopted session ended: end that session on the server."""
        session = self._side.pop(session_id, None)
        self._adopting.pop(session_id, None)
        if session is not None:
            try:
                await session.close()
            except Exception as exc:  # noqa: BLE001 - closing a broken connection may fail any way
                log.debug("ending an adopted session of %s: %s", self.name, exc)

    def reconnect_now(self) -> None:
        """Skip the wait before the next attempt (the person pressed Reconnect)."""
        self.backoff.reset()
        self._wake.set()
        if self.session is not None:
            self._ready.clear()  # nothing new goes out on a session about to be replaced
            self._may_keep = False  # the person asked for a new connection
            self._lost.set()

    def stray_answer(self, error: StrayAnswer) -> None:
        """One of this server's sessions got an answer to an id nobody waits for: counted
        on the server's row (all its sessions, for this engine's lifetime)."""
        quoted = str(error)
        self._set(stray_answers=self.view.stray_answers + 1, last_stray=quoted)

    def connection_lost(self, *, session_gone: bool = True, session: ClientSession | None = None,
                        forgotten: bool = False) -> None:
        """Called when a request on this connection failed in a way that means it is gone.

        ``session_gone=False``: the network failed, not the session (the server did not
        refuse it), so the same HTTP session is tried again before a new one is made.
        ``session``: the session the failure came from; a failure of one already replaced
        is old news, not a reason to drop the new one. ``forgotten``: the server said it
        no longer knows the session (HTTP 404): it restarted, or ended the session.
        """
        if session is not None and session is not self.session:
            return
        self._ready.clear()
        if session_gone:
            self._may_keep = False
        if forgotten:
            self._forgotten = True
        self._lost.set()

    async def next_session(self, after: ClientSession) -> ClientSession:
        """The live session once it is another than ``after`` (which is being replaced)."""
        while True:
            session = await self.wait_ready()
            if session is not after:
                return session
            await asyncio.sleep(0.05)  # the loss is being noticed: wait for the new one

    async def wait_ready(self, timeout: float | None = None) -> ClientSession:
        """The live session, waiting for the next successful connection if needed."""
        async def ready() -> ClientSession:
            # The session may be dropped between the event and this task waking up: wait again.
            while True:
                await self._ready.wait()
                if self.session is not None and self._ready.is_set():
                    return self.session
                await asyncio.sleep(0)

        return await (ready() if timeout is None else asyncio.wait_for(ready(), timeout))

    def _set(self, **fields: Any) -> None:
        if "retry_in" in fields:  # the countdown's end, for clients that show it
            delay = fields["retry_in"]
            fields["retry_at"] = None if delay is None else now() + delay
        if "state" in fields:  # a sign-in may have begun or ended with the new state
            fields["signs_in"] = self._signs_in(fields["state"])
        self.view = dataclasses.replace(self.view, **fields)  # views are immutable snapshots
        self.on_change(self.view)

    def _signs_in(self, state: str) -> bool:
        """Whether the server signs in: configured to, asking to now, or signed in before."""
        if self.cfg.transport != "http":
            return False
        if self.cfg.auth is not None or state == api.NEEDS_SIGN_IN:
            return True
        return self.keeps_sign_in()

    async def _drop_session(self, *, end_session: bool = True) -> None:
        self._ready.clear()
        session, self.session = self.session, None
        if session is not None:
            try:
                await session.close(end_session=end_session)
            except Exception as exc:  # noqa: BLE001 - closing a broken connection may fail; it is gone either way
                log.debug("closing %s: %s", self.name, exc)

    async def _run(self) -> None:
        first = True
        while True:
            self._set(state=api.CONNECTING if first else api.RECONNECTING, retry_in=None)
            try:
                await self._connect_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the supervising task must not die; any failure is retried
                await self._drop_session()
                message = describe_failure(exc)
                needs_sign_in = isinstance(exc, SignInRequired) or (
                    isinstance(exc, HttpStatusError) and exc.status == 401)
                state = api.NEEDS_SIGN_IN if needs_sign_in else (
                    api.OFFLINE if self.backoff.failures + 1 >= OFFLINE_AFTER else api.RECONNECTING)
                delay = self.backoff.next_delay()
                self._set(state=state, error=message, retry_in=delay)
                self.attempted.set()
                log.info("%s: %s; retrying in %.1f s", self.name, message, delay)
                await self._sleep(delay)
                first = False
                continue
            first = False
            self.backoff.reset()
            self.attempted.set()
            while await self._outlive_break():
                pass
            await self._drop_session()

    async def _outlive_break(self) -> bool:
        """Wait for the connection to break; True when the same session works again.

        The session is kept only while it may still be alive on the server: an HTTP
        session with an id, whose loss was the network's. Pings go out at once and then
        with the backoff; an answer of any kind (even an error) means the server knows the
        session, a refusal means it does not.
        """
        await self._lost.wait()
        self._lost.clear()
        session, may_keep = self.session, self._may_keep
        self._may_keep = True
        if not may_keep or session is None or not _keepable(session):
            return False
        delay = 0.0
        while True:
            if delay:
                state = api.OFFLINE if self.backoff.failures >= OFFLINE_AFTER else api.RECONNECTING
                self._set(state=state, retry_in=delay)
                await self._sleep(delay)
            if not self._may_keep or session.state != "ready":
                return False  # the person asked for a new connection, or it closed meanwhile
            self._set(state=api.RECONNECTING, retry_in=None)
            try:
                await asyncio.wait_for(session.ping(), PING_TIMEOUT_SECONDS)
            except RpcError:
                pass  # an answer all the same: the session is known
            except HttpStatusError as exc:
                if exc.refused_for_good:
                    # Refused (404 and its kin), or sign-in needed: a new connection it is.
                    log.info("%s: the server refused the session after the break: %s", self.name, exc)
                    self._forgotten = self._forgotten or isinstance(exc, SessionExpired)
                    return False
                self._set(error=describe_failure(exc))
                delay = self.backoff.next_delay()
                continue
            except (TimeoutError, TransportError) as exc:
                self._set(error=describe_failure(exc))
                delay = self.backoff.next_delay()
                continue
            if session.state != "ready" or self.session is not session:
                return False
            log.info("%s: the connection is back; the session was kept", self.name)
            self.backoff.reset()
            session.transport.reopen_standalone_stream()
            self._set(state=api.CONNECTED, error=None, retry_in=None)
            self._ready.set()
            await self.on_ready(self, session)
            return True

    async def _sleep(self, delay: float) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), delay)
        except TimeoutError:
            pass

    async def _connect_once(self) -> None:
        self._lost.clear()
        transport = make_transport(self.cfg, self.secret_store, habits=self.stream_habits, timing=self.timing)
        handlers = self.handlers_factory(self)
        watcher = _LossWatcher(handlers, self)
        session = ClientSession(transport, watcher, capabilities=self.capabilities, ids=self.request_ids())
        watcher.session = session
        self.session = session
        self.unsupported_methods.clear()
        self.supported_methods.clear()
        for probe in self._probes.values():
            probe.set()  # its waiters ask the new session
        self._probes.clear()
        # A configured revision pins the negotiation (for a server that misbehaves in a newer era).
        self.info = await session.connect(self.cfg.protocol_version or None)
        try:
            self.tools = await session.list_tools() if "tools" in self.info.capabilities else []
        except RpcError as exc:
            log.info("%s: tools/list failed: %s", self.name, exc)
            self.tools = []
        extensions = self.info.capabilities.get("extensions")
        note = self.view.note
        if self._forgotten:
            self._forgotten = False
            note = f"{SESSION_RENEWED} at {time.strftime('%H:%M:%S')}"
            log.info("%s: %s", self.name, note)
        self._set(state=api.CONNECTED, error=None, retry_in=None, protocol_version=self.info.protocol_version,
                  tools_count=len(self.tools), tools=self.tools, note=note,
                  extensions=tuple(sorted(extensions)) if isinstance(extensions, dict) else ())
        self._ready.set()
        await self.on_ready(self, session)


#: What the server's row says after the server forgot its session (HTTP 404) and a new
#: one was made: a restart is the usual reason (sessions live in a server's memory).
SESSION_RENEWED = "the server restarted or ended the session; new session"


def session_refused(exc: Exception) -> bool:
    """Did the server refuse the session or stream itself (rather than the network fail)?

    404 is the spec's word for a session that is gone; some servers say 400 ("not
    initialized") or 410. Either way, what was bound to that session cannot be resumed.
    Sign-in (401, 403) and busy answers (BUSY_STATUSES) say nothing about the session.
    """
    return (isinstance(exc, HttpStatusError) and 400 <= exc.status < 500
            and exc.status not in (401, 403, *BUSY_STATUSES))


#: How long a ping on a kept session may take before the network counts as still gone.
PING_TIMEOUT_SECONDS = 10.0


def _keepable(session: ClientSession) -> bool:
    """Can this session outlive a break of the network (an HTTP session with an id)?"""
    transport = session.transport
    return session.state == "ready" and transport.session_id is not None and not transport.stateless


class _Watcher(ClientHandlers):
    """Wraps the engine's handlers to count a session's stray answers on its server."""

    def __init__(self, inner: ClientHandlers, conn: ServerConnection):
        self._inner = inner
        self._conn = conn

    def __getattribute__(self, name: str) -> Any:
        if name in ("_inner", "_conn", "on_closed", "on_protocol_error", "session"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_inner"), name)

    def on_protocol_error(self, error: Exception) -> None:
        if isinstance(error, StrayAnswer):
            self._conn.stray_answer(error)
        self._inner.on_protocol_error(error)

    def on_closed(self, error: Exception | None) -> None:
        self._inner.on_closed(error)


class _LossWatcher(_Watcher):
    """Also notices when the session's connection ends (the supervised session). Only its
    own session's end counts: a session already replaced may still report its end (its
    standalone stream's 404 after a request's 404 ended it), which must not drop the new one."""

    session: ClientSession | None = None

    def on_closed(self, error: Exception | None) -> None:
        super().on_closed(error)
        self._conn.connection_lost(forgotten=isinstance(error, SessionExpired), session=self.session)


def describe_failure(exc: BaseException) -> str:
    """A failure in plain words, for the server row."""
    if isinstance(exc, SignInRequired):
        return "the server needs sign-in"
    if isinstance(exc, HttpStatusError):
        if exc.status == 401:
            return "the server needs sign-in"
        return str(exc)
    if isinstance(exc, (TransportError, RpcError)):
        return str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "the server did not answer in time"
    return f"{type(exc).__name__}: {exc}"


def now() -> float:
    return time.time()
