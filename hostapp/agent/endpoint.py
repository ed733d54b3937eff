"""The owner's local endpoint: the engine facade served to the window and the CLI.

Two kinds, one wire (:mod:`hostapp.agent.wire`):

- ``unix`` (Linux, macOS): a Unix domain socket in a folder only the user can enter
  (0700), the socket itself 0600, and on Linux the peer's credentials checked
  (``SO_PEERCRED``): a connection from another user is closed before it is read.
- ``loopback`` (Windows, where Python has no Unix sockets): TCP on 127.0.0.1, port chosen
  by the system, and a key made afresh at each start. Both are in the endpoint file
  ``<home>/agent/agent.endpoint`` (0600 in the 0700 folder; on Windows the profile's ACL
  keeps other users out of the home). A client proves it could read that file by sending
  the key in its ``hello``; any other connection is refused before anything is served.
  This is the model of Jupyter's connection files; it was chosen over a named pipe because
  asyncio's pipe server is undocumented, and because this one is tested here in full
  (``HOSTAPP_AGENT_ENDPOINT=loopback`` selects it on any system). A key sent to a port
  that a dead owner left and someone else took is worth nothing: the next owner makes a
  new one.

The endpoint is also the engine's listener, and fans what it hears out to every client:
an operation's changes are coalesced per operation and sent at most :data:`EVENT_HZ` times a
second to each client, while a terminal change, a question and every other event go at
once (a coalesced change still waiting for that operation goes first, so a client never
sees an operation move backwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hostapp.agent import wire
from hostapp.engine import api

log = logging.getLogger(__name__)

#: At most this many coalesced operation updates a second reach each client.
EVENT_HZ = 30

#: How long requests of a client that stopped sending are still answered.
_ANSWER_GRACE_SECONDS = 5.0

# sun_path holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
_MAX_SOCKET_PATH = 100


#: Chooses the endpoint's kind (``unix`` or ``loopback``) where both work; the owner and
#: its clients must agree (tests run the loopback kind on Linux with it).
ENDPOINT_ENV = "HOSTAPP_AGENT_ENDPOINT"

UNIX, LOOPBACK = "unix", "loopback"

#: The loopback endpoint file's name under ``<home>/agent``.
LOOPBACK_FILE = "agent.endpoint"


def endpoint_kind() -> str:
    """``unix`` where the system has Unix sockets (unless ``HOSTAPP_AGENT_ENDPOINT`` says
    ``loopback``), ``loopback`` elsewhere."""
    has_unix = hasattr(socket, "AF_UNIX") and sys.platform != "win32"
    return LOOPBACK if not has_unix or os.environ.get(ENDPOINT_ENV) == LOOPBACK else UNIX


def endpoint_path(home: Path) -> Path:
    """Where the owner of ``home`` can be found. ``unix``: its socket,
    ``<home>/agent/agent.sock``, or, when that path is too long for a Unix socket, a
    per-user folder in the temporary directory named after the home (both folders 0700).
    ``loopback``: the endpoint file ``<home>/agent/agent.endpoint``."""
    folder = Path(home).resolve() / "agent"
    if endpoint_kind() == LOOPBACK:
        return folder / LOOPBACK_FILE
    path = folder / "agent.sock"
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(Path(home).resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"hostapp-{os.getuid()}" / f"{digest}.sock"


def read_loopback_file(path: Path) -> tuple[int, str]:
    """The port and key of a loopback endpoint file; ``OSError``/``ValueError`` when there
    is none or it cannot be read (the key is never put in the error)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not an agent endpoint file")
    port, key = data.get("port"), data.get("key")
    if not isinstance(port, int) or not 0 < port < 65536 or not isinstance(key, str) or not key:
        raise ValueError(f"{path} is not an agent endpoint file")
    return port, key


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only, whole or not at all."""
    part = path.with_name(path.name + ".part")
    with contextlib.suppress(FileNotFoundError):
        part.unlink()
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(part, path)


def _private_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    if hasattr(os, "getuid") and folder.stat().st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to another user; the agent will not listen there")


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """True when the peer of a Unix socket runs as this user (always true where the OS
    cannot tell, and for loopback connections, which prove themselves with the key)."""
    sock = writer.get_extra_info("socket")
    if sock is None or not sys.platform.startswith("linux") or sock.family != socket.AF_UNIX:
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


class _Client:
    """One connected client: its writer, and the operation changes waiting to be sent."""

    def __init__(self, writer: asyncio.StreamWriter, name: str) -> None:
        self.writer = writer
        self.name = name
        self.pending: dict[str, api.OperationView] = {}
        self.flush_handle: asyncio.TimerHandle | None = None
        self.last_flush = 0.0
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.writer.write(wire.dumps(message))
        except (ConnectionError, RuntimeError):
            self.closed = True

    def event(self, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": "event", "params": params})


class AgentEndpoint:
    """Serves an :class:`~hostapp.engine.api.EngineApi` on its endpoint; implements
    :class:`~hostapp.engine.api.EngineListener` to forward what the engine tells.

    ``info`` is what ``hello`` answers besides the version (the owner's pid, start time).
    ``on_clients`` is called with the number of clients whenever it changes.
    """

    def __init__(self, engine: api.EngineApi | None, path: Path, *, info: dict[str, Any] | None = None,
                 on_clients: Callable[[int], None] | None = None) -> None:
        self.engine = engine  # may be set after construction: the engine is made with its listener
        #: Set once the engine has started: requests wait for it (a client may connect while
        #: the owner still resumes what it found in the journal).
        self.ready = asyncio.Event()
        #: Requests the owner answers itself (``agent.status``, ``agent.stop``), by name.
        self.own_methods: dict[str, Callable[[], Awaitable[Any]]] = {}
        self.path = path
        self.info = dict(info or {})
        self._on_clients = on_clients
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[_Client] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._key: str | None = None  # the loopback kind's key of this start

    @property
    def client_count(self) -> int:
        return len(self._clients)

    def has_client(self, name: str) -> bool:
        """Whether a client that said it is ``name`` (``window``, ``cli``) is connected."""
        return any(client.name == name for client in self._clients)

    async def start(self) -> None:
        _private_folder(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by an owner that died; we hold the home's lock now
        if self.path.name == LOOPBACK_FILE:
            self._key = secrets.token_urlsafe(32)
            self._server = await asyncio.start_server(self._serve, host="127.0.0.1", port=0,
                                                      limit=wire.MAX_MESSAGE)
            port = self._server.sockets[0].getsockname()[1]
            _write_private(self.path, json.dumps({"port": port, "key": self._key, "pid": os.getpid()}))
            return
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=wire.MAX_MESSAGE)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)

    async def farewell(self, reason: str) -> None:
        """Tell every client that the owner stops on purpose (``reason``, for a person), so
        that a window does not start a new owner behind the back of whoever stopped it."""
        for client in list(self._clients):
            client.event({"kind": "owner_stopping", "reason": reason})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.writer.drain(), 1)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for client in list(self._clients):
            client.closed = True
            client.writer.close()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- a client's connection -------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not _same_user(writer):
            log.warning("refused a connection from another user")
            writer.close()
            return
        client: _Client | None = None
        mine: set[asyncio.Task[Any]] = set()
        try:
            client = await self._hello(reader, writer)
            if client is None:
                return
            self._clients.add(client)
            self._clients_changed()
            while True:
                try:
                    line = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    client.send({"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32600, "message": "message too large"}})
                    break
                if not line:
                    break
                try:
                    message = wire.loads(line)
                except wire.WireError as exc:
                    client.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": str(exc)}})
                    continue
                task = asyncio.get_running_loop().create_task(self._answer(client, message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                mine.add(task)
                task.add_done_callback(mine.discard)
            # The client stopped sending: what it asked for is still answered, briefly.
            if mine:
                await asyncio.wait(set(mine), timeout=_ANSWER_GRACE_SECONDS)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # gone, or never said hello
        finally:
            for task in list(mine):
                task.cancel()
            if client is not None:
                client.closed = True
                if client.flush_handle is not None:
                    client.flush_handle.cancel()
                self._clients.discard(client)
                self._clients_changed()
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Client | None:
        line = await asyncio.wait_for(reader.readline(), 10)
        if not line:
            return None
        probe = _Client(writer, "?")
        try:
            message = wire.loads(line)
        except wire.WireError as exc:
            probe.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": str(exc)}})
            return None
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if message.get("method") != "hello":
            probe.send({"jsonrpc": "2.0", "id": message.get("id"),
                        "error": {"code": -32600, "message": "the first message must be hello"}})
            return None
        if self._key is not None and not (isinstance(params.get("key"), str) and hmac.compare_digest(
                params["key"].encode("utf-8", "replace"), self._key.encode())):
            log.warning("refused a loopback connection without this start's key")
            probe.send({"jsonrpc": "2.0", "id": message.get("id"), "error": {
                "code": -32600, "message": "this agent's endpoint key was not given; "
                                           "connect through the home's endpoint file"}})
            return None
        if params.get("version") != wire.VERSION:
            probe.send({"jsonrpc": "2.0", "id": message.get("id"), "error": {
                "code": wire.VERSION_MISMATCH,
                "message": f"the agent speaks version {wire.VERSION} of its wire, this client "
                           f"{params.get('version')}: restart the agent (hostapp agent stop)",
                "data": {"version": wire.VERSION}}})
            return None
        client = _Client(writer, str(params.get("client") or "client"))
        client.send({"jsonrpc": "2.0", "id": message.get("id"), "result": {"version": wire.VERSION, **self.info}})
        return client

    async def _answer(self, client: _Client, message: dict[str, Any]) -> None:
        rid = message.get("id")
        method = message.get("method")
        if rid is None:
            return  # no notifications from clients today
        if isinstance(method, str) and method in self.own_methods:
            client.send({"jsonrpc": "2.0", "id": rid, "result": await self.own_methods[method]()})
            return
        if not isinstance(method, str) or method not in wire.RESULTS or self.engine is None:
            client.send({"jsonrpc": "2.0", "id": rid,
                         "error": {"code": -32601, "message": f"unknown method {method!r}"}})
            return
        try:
            kwargs = wire.decode_arguments(method, message.get("params"))
            await self.ready.wait()
            result = await getattr(self.engine, method)(**kwargs)
        except api.EngineError as exc:
            client.send({"jsonrpc": "2.0", "id": rid, "error": wire.encode_error(exc)})
        except (wire.WireError, TypeError) as exc:
            client.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"bad params: {exc}"}})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one client's request must not take the owner down
            log.exception("request %s failed", method)
            client.send({"jsonrpc": "2.0", "id": rid, "error": wire.encode_error(api.EngineError(
                f"the agent could not do {method}: {type(exc).__name__}"))})
        else:
            client.send({"jsonrpc": "2.0", "id": rid, "result": wire.encode(result)})

    def _clients_changed(self) -> None:
        if self._on_clients is not None:
            self._on_clients(len(self._clients))

    # -- EngineListener: what the engine tells, fanned out ----------------------------------

    def operation_changed(self, op: api.OperationView) -> None:
        urgent = op.status in api.TERMINAL or op.needs_input
        for client in self._clients:
            if urgent:
                client.pending.pop(op.id, None)
                client.event({"kind": "operation_changed", "op": wire.encode(op)})
            else:
                client.pending[op.id] = op
                self._schedule_flush(client)

    def _schedule_flush(self, client: _Client) -> None:
        if client.flush_handle is not None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, client.last_flush + 1 / EVENT_HZ - time.monotonic())
        client.flush_handle = loop.call_later(delay, self._flush, client)

    def _flush(self, client: _Client) -> None:
        client.flush_handle = None
        client.last_flush = time.monotonic()
        pending, client.pending = client.pending, {}
        for op in pending.values():
            client.event({"kind": "operation_changed", "op": wire.encode(op)})

    def _before_other_event(self, client: _Client, op_id: str | None) -> None:
        if op_id and op_id in client.pending:
            client.event({"kind": "operation_changed", "op": wire.encode(client.pending.pop(op_id))})

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None:
        for client in self._clients:
            self._before_other_event(client, op_id)
            client.event({"kind": "operation_event", "op_id": op_id, "event": kind, "data": wire.encode(data)})

    def server_changed(self, server: api.ServerView) -> None:
        for client in self._clients:
            client.event({"kind": "server_changed", "server": wire.encode(server)})

    def input_requested(self, request: api.InputRequest) -> None:
        for client in self._clients:
            self._before_other_event(client, request.operation_id)
            client.event({"kind": "input_requested", "request": wire.encode(request)})

    def input_withdrawn(self, request_id: str) -> None:
        for client in self._clients:
            client.event({"kind": "input_withdrawn", "request_id": request_id})

    def server_removed(self, name: str) -> None:
        for client in self._clients:
            client.event({"kind": "server_removed", "name": name})

    def problem(self, kind: str, message: str) -> None:
        for client in self._clients:
            client.event({"kind": "problem", "problem": kind, "message": message})
