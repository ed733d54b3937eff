"""The engine facade on the far side of the owner's socket: :class:`RemoteEngine`.

It implements :class:`~hostapp.engine.api.EngineApi` by sending each call over the wire
(:mod:`hostapp.agent.wire`) and hands the owner's events to its listener, so the window and
the CLI are written once, against the facade, whether the engine runs in their process or in
the agent. Failures arrive as the facade's own exceptions; a connection that breaks fails
every call in flight with :class:`AgentGone` (a facade :class:`~hostapp.engine.api.EngineError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import subprocess
import threading
import time
import typing
from pathlib import Path
from typing import Any

from hostapp.agent import wire
from hostapp.engine import api

log = logging.getLogger(__name__)

#: How long the client decodes what the agent sent before it lets its event loop run.
READ_SLICE = 0.004


class AgentGone(api.EngineError):
    """The connection to the agent closed (it stopped, or it died)."""


class AgentUnavailable(api.EngineError):
    """No agent answers on the home's socket."""


class AgentIncompatible(AgentUnavailable):
    """An agent answers, but no version of the wire is spoken by both: the message says
    which side is older and what the person does about it. ``speak_instead``: a version of
    the client's range the agent would speak, when it refused only the one asked for."""

    def __init__(self, message: str, speak_instead: int | None = None) -> None:
        super().__init__(message)
        self.speak_instead = speak_instead


class MethodUnavailable(api.EngineError):
    """The agent that answers does not serve the method asked for: it is older than this
    client (a method added since it started)."""


class AgentRefused(AgentUnavailable):
    """The home's socket is not safely this user's: its folder belongs to someone else or
    is open to others, or the process listening there runs as another user. Nothing was
    sent to it, and starting an agent would not help: the person must remove the folder."""


class _NullListener:
    def operation_changed(self, op: api.OperationView) -> None: ...

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None: ...

    def server_changed(self, server: api.ServerView) -> None: ...

    def input_requested(self, request: api.InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def server_removed(self, name: str) -> None: ...

    def problem(self, kind: str, message: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class EventPosition:
    """Where a client is in an agent's events: the agent's run (``stream``) and the number
    of the last event it received (``seq``), to ask for what came after on reconnecting."""

    stream: str
    seq: int


class RemoteControl(api.AgentControl):
    """The owner's own methods (``agent.status``…) over a connection."""

    def __init__(self, engine: RemoteEngine) -> None:
        self._engine = engine

    async def status(self) -> api.AgentStatus:
        return typing.cast(api.AgentStatus, await self._engine.call_raw("agent.status"))

    async def stop(self) -> dict[str, Any]:
        return typing.cast(dict[str, bool], await self._engine.call_raw("agent.stop"))

    async def unsurvivable(self) -> list[api.LostOperation]:
        return typing.cast(list[api.LostOperation], await self._engine.call_raw("agent.unsurvivable"))

    async def carried(self) -> list[str]:
        return typing.cast(list[str], await self._engine.call_raw("agent.carried"))


class RemoteEngine(api.ForwardingEngine):
    """:class:`~hostapp.engine.api.EngineApi` over a connection to the home's owner.

    ``agent`` is the owner's answer to ``hello`` (its versions, methods, pid, start);
    ``control`` its own methods; ``position`` where this client is in its events."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: dict[str, Any],
                 listener: api.EngineListener | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self.agent = hello
        self.methods = frozenset(m for m in hello.get("methods") or () if isinstance(m, str))
        self.control: api.AgentControl = RemoteControl(self)
        self.listener: api.EngineListener = listener or _NullListener()
        stream, seq = hello.get("stream"), hello.get("seq")
        self.position: EventPosition | None = (
            EventPosition(stream, seq) if isinstance(stream, str) and isinstance(seq, int) else None)
        #: Whether the events this client missed since the position it gave were all sent
        #: again (None: it gave none; False: some are lost, it must read everything again).
        self.caught_up: bool | None = hello.get("caught_up") if isinstance(hello.get("caught_up"), bool) else None
        self._ids = itertools.count(2)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._closed: asyncio.Event = asyncio.Event()
        #: Why the owner said it stops on purpose, if it did (then its end is no crash).
        self.owner_stopping: str | None = None
        #: Why the owner stopped serving this client, if it did (it read too slowly).
        self.dropped: str | None = None
        self._reading = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, path: Path, listener: api.EngineListener | None = None, *,
                      client: str = "client", timeout: float = 5.0, since: EventPosition | None = None,
                      versions: tuple[int, int] = (wire.CLIENT_MIN_VERSION, wire.VERSION)) -> RemoteEngine:
        """Connect to the endpoint at ``path`` (a Unix socket, or a loopback endpoint file:
        see :mod:`hostapp.agent.endpoint`) and say hello; :class:`AgentUnavailable` when
        nobody listens there, :class:`AgentIncompatible` when the agent there speaks no
        version of ``versions`` (``(minimum, version)``). ``since``: the events missed
        since that position are sent again when the agent still has them (:attr:`caught_up`).
        :class:`AgentRefused` when the socket is not safely this user's (nothing is sent to it)."""
        from hostapp.agent.endpoint import LOOPBACK_FILE, UnsafeEndpoint, check_private_folder, read_loopback_file

        hello: dict[str, Any] = {"version": versions[1], "min_version": versions[0], "client": client,
                                 "pid": os.getpid()}
        if since is not None:
            hello["since"] = {"stream": since.stream, "seq": since.seq}
        unix = path.name != LOOPBACK_FILE
        try:
            if not unix:
                port, hello["key"] = read_loopback_file(path)
                opening = asyncio.open_connection("127.0.0.1", port, limit=wire.MAX_MESSAGE)
            else:
                # Whatever listens here gets secrets: only a folder no one else can enter will do.
                check_private_folder(path.parent)
                opening = asyncio.open_unix_connection(str(path), limit=wire.MAX_MESSAGE)
            reader, writer = await asyncio.wait_for(opening, timeout)
        except UnsafeEndpoint as exc:
            raise AgentRefused(f"refused the agent's socket {path}: {exc}") from None
        except (FileNotFoundError, ConnectionRefusedError, TimeoutError, OSError) as exc:
            raise AgentUnavailable(f"no agent answers at {path}: {exc.strerror or exc}") from None
        except ValueError as exc:  # an endpoint file half written, or not one (never quotes the key)
            raise AgentUnavailable(f"no agent answers at {path}: {exc}") from None
        if unix:
            await _refuse_other_users(path, writer)
        writer.write(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": hello}))
        try:
            line = await asyncio.wait_for(reader.readline(), timeout)
            answer = wire.loads(line) if line else None
        except (TimeoutError, ConnectionError, wire.WireError) as exc:
            writer.close()
            raise AgentUnavailable(f"the agent at {path} did not answer hello: {exc}") from None
        if answer is None:
            writer.close()
            raise AgentUnavailable(f"the agent at {path} closed the connection")
        if "error" in answer:
            writer.close()
            refusal = _refusal(answer["error"], versions)
            lower = refusal.speak_instead if isinstance(refusal, AgentIncompatible) else None
            if lower is not None and lower < versions[1]:
                # An agent that wants an exact version (1) one of ours: ask again in its version.
                return await cls.connect(path, listener, client=client, timeout=timeout, since=since,
                                         versions=(versions[0], lower))
            raise refusal
        result = answer.get("result")
        agent = _agent_versions(result if isinstance(result, dict) else {})
        if agent is None or wire.negotiate(versions, agent) is None:
            writer.close()
            raise AgentIncompatible(wire.mismatch_advice(versions, agent or (1, 1)))
        return cls(reader, writer, dict(result or {}), listener)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._fail_all(AgentGone("the connection to the agent was closed"))

    # -- the wire ---------------------------------------------------------------------

    async def _read(self) -> None:
        # A line already buffered is returned without a pause: a burst of thousands of
        # views would be decoded and handed on in one turn of the event loop (the window's
        # timers, input and paints waiting behind it). Every READ_SLICE seconds of it the
        # reader lets the loop run.
        clock = time.perf_counter
        slice_end = clock() + READ_SLICE
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                if clock() >= slice_end:
                    await asyncio.sleep(0)
                    slice_end = clock() + READ_SLICE
                try:
                    message = wire.loads(line)
                except wire.WireError as exc:
                    log.warning("the agent sent a bad message: %s", exc)
                    continue
                if message.get("method") == "event":
                    self._dispatch(message.get("params"))
                    continue
                rid = message.get("id")
                future = self._waiting.pop(rid, None) if isinstance(rid, int) else None
                if future is None or future.done():
                    continue
                if "error" in message:
                    future.set_exception(wire.decode_error(message["error"]))
                else:
                    future.set_result(message.get("result"))
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._closed.set()
            self._fail_all(AgentGone("the agent stopped; the work it was doing goes on when it starts again"))

    def _fail_all(self, exc: Exception) -> None:
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(exc)

    def _dispatch(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        seq = params.get("seq")
        if isinstance(seq, int) and self.position is not None:
            self.position = EventPosition(self.position.stream, seq)
        kind = params.get("kind")
        listener = self.listener
        try:
            if kind == "operation_changed":
                listener.operation_changed(wire.operation_view(params.get("op")))
            elif kind == "operation_event":
                data = params.get("data")
                listener.operation_event(str(params.get("op_id") or ""), str(params.get("event")),
                                         data if isinstance(data, dict) else {})
            elif kind == "server_changed":
                listener.server_changed(wire.server_view(params.get("server")))
            elif kind == "input_requested":
                listener.input_requested(wire.input_request(params.get("request")))
            elif kind == "input_withdrawn":
                listener.input_withdrawn(str(params.get("request_id")))
            elif kind == "server_removed":
                listener.server_removed(str(params.get("name")))
            elif kind == "problem":
                listener.problem(str(params.get("problem")), str(params.get("message")))
            elif kind == "owner_stopping":
                self.owner_stopping = str(params.get("reason") or "it was stopped")
            elif kind == "dropped":
                self.dropped = str(params.get("reason") or "no reason given")
                log.warning("the agent dropped this client: %s", self.dropped)
        except wire.WireError as exc:
            log.warning("the agent sent a bad %s event: %s", kind, exc)

    async def forward(self, method: str, arguments: api.JsonObject) -> Any:
        """A facade method, done by the agent; :class:`MethodUnavailable` when it does not
        serve it (it is older than this client)."""
        if method not in self.methods:
            raise MethodUnavailable(
                f"the running agent (pid {self.agent.get('pid', '?')}) cannot do {method}: it is older than this "
                "hostapp. Restart the agent to use it (hostapp agent stop, or Quit > Stop everything in the "
                "window); its work resumes when it starts again.")
        return wire.FACADE[method].result(await self.call_raw(method, **arguments))

    async def call_raw(self, method: str, **params: Any) -> Any:
        """Send a request and wait for its result, as JSON."""
        if self._closed.is_set():
            raise AgentGone("the agent stopped")
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        self._writer.write(wire.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": wire.encode(params)}))
        try:
            return await future
        finally:
            self._waiting.pop(rid, None)

    # -- the lifecycle is the owner's ---------------------------------------------------

    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None:
        """The owner started its engine when it took the home; nothing to do."""

    async def stop(self) -> None:
        """A client's stop ends its connection; the owner and its work go on."""
        await self.close()


def _agent_versions(hello: dict[str, Any]) -> tuple[int, int] | None:
    """The agent's range of wire versions, as its hello answer or refusal gives it."""
    version = hello.get("version")
    minimum = hello.get("min_version", version)
    if isinstance(version, int) and isinstance(minimum, int):
        return minimum, version
    return None


def _refusal(error: Any, versions: tuple[int, int]) -> AgentUnavailable:
    """What a refused hello means for the person."""
    data = error.get("data") if isinstance(error, dict) else None
    if isinstance(error, dict) and error.get("code") == wire.Code.VERSION_MISMATCH:
        agent = _agent_versions(data if isinstance(data, dict) else {})
        if agent is not None:
            return AgentIncompatible(wire.mismatch_advice(versions, agent), wire.negotiate(versions, agent))
        return AgentIncompatible(str(error.get("message") or "the agent speaks another version of its wire"))
    return AgentUnavailable(str(wire.decode_error(error)))


async def _refuse_other_users(path: Path, writer: asyncio.StreamWriter) -> None:
    """Close a Unix socket connection, before anything is sent, when the process that
    accepted it runs as another user (the agent checks its clients the same way)."""
    from hostapp.agent.endpoint import peer_uid

    sock = writer.get_extra_info("socket")
    uid = peer_uid(sock) if sock is not None else None
    if uid is not None and uid != os.getuid():
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        raise AgentRefused(f"refused the agent's socket {path}: the process listening there runs as "
                           f"another user (uid {uid})")


#: How often a client that waits for an owner to come up tries its socket again.
_RETRY_SECONDS = 0.05

#: How many owners one client starts at most while it waits (one that lost the race for
#: the lock exits at once; one that died starting says why in its log).
_MAX_SPAWNS = 3


def spawn_agent(home: Path, *, verbose: bool = False) -> subprocess.Popen[bytes]:
    """Start ``hostapp agent`` for ``home``, detached from this process (its own session,
    no terminal: a Ctrl+C, a closed terminal or a killed client do not reach it), so the
    work it owns outlives whoever started it."""
    from hostapp.agent.autostart import self_command
    from hostapp.store.paths import HOME_ENV

    env = {**os.environ, HOME_ENV: str(Path(home).resolve())}
    # Windows has no sessions (the flags exist there only): a new process group without
    # a console does the same.
    flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    proc = subprocess.Popen(
        [*self_command(), *(["-v"] if verbose else []), "agent"], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        creationflags=flags)
    # A client that lives on (the window) reaps the agent if it ends first, so no zombie
    # stays behind; a short-lived client exits and the agent is adopted by init.
    threading.Thread(target=proc.wait, name="hostapp-agent-reaper", daemon=True).start()
    return proc


async def connect_or_spawn(home: Path, listener: api.EngineListener | None = None, *, client: str = "client",
                           timeout: float = 30.0, verbose: bool = False,
                           since: EventPosition | None = None) -> RemoteEngine:
    """Connect to the owner of ``home``, starting one when none runs.

    Safe when many clients start at once on a home with no owner: a client starts an
    owner only while the home's lock is free and it holds the spawn lock (so clients that
    start together start one owner between them); should two owners start all the same,
    exactly one takes the home's lock (the other exits at once); every client connects to
    it. A lock held by an owner still starting (or stopping) is waited for. A stale socket
    of a dead owner is answered by nobody: the new owner takes the lock and the socket; the
    kernel lets go of a dead process's locks, so none of them is ever stale. An owner that
    speaks no version of the wire this client does is not waited for: its
    :class:`AgentIncompatible` says what to do. ``since``: as :meth:`RemoteEngine.connect`."""
    from hostapp.agent.endpoint import endpoint_path
    from hostapp.agent.lock import SPAWN_LOCK_NAME, HomeLock

    path = endpoint_path(home)
    lock, spawning = HomeLock(home), HomeLock(home, SPAWN_LOCK_NAME)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    started: subprocess.Popen[bytes] | None = None
    spawns = 0
    try:
        while True:
            try:
                return await RemoteEngine.connect(path, listener, client=client, since=since)
            except AgentIncompatible:
                raise
            except AgentRefused:
                raise  # an agent started now could not listen there either
            except AgentUnavailable:
                pass
            if (started is None or started.poll() is not None) and spawns < _MAX_SPAWNS and lock.free() \
                    and spawning.acquire():
                started = spawn_agent(home, verbose=verbose)
                spawns += 1
            if loop.time() >= deadline:
                raise AgentUnavailable(
                    f"the agent did not start within {timeout:.0f} s (its log: {Path(home) / 'logs' / 'agent.log'})")
            await asyncio.sleep(_RETRY_SECONDS)
    finally:
        spawning.release()
