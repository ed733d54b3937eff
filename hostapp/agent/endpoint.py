"""The owner's local endpoint: the engine facade served to the window and the CLI.

Two kinds, one wire (:mod:`hostapp.agent.wire`):

- ``unix`` (Linux, macOS): a Unix domain socket in a folder only the user can enter
  (0700), the socket itself 0600, and on Linux the peer's credentials checked
  (``SO_PEERCRED``): a connection from another user is closed before it is read. The
  client trusts the socket the same way: it connects only through a folder of its own
  user with mode 0700, and says nothing to a listener that runs as another user.
  A home too deep for a socket's path puts it in ``$XDG_RUNTIME_DIR/hostapp`` (else a
  per-user folder of the temporary directory, which anyone may have made first).
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
import collections
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import socket
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostapp.agent import wire
from hostapp.engine import api

log = logging.getLogger(__name__)

#: At most this many coalesced operation updates a second reach each client.
EVENT_HZ = 30

#: How often :meth:`AgentEndpoint.clients_caught_up` looks whether all was sent.
SENT_LOOK_SECONDS = 0.001

#: How long requests of a client that stopped sending are still answered.
_ANSWER_GRACE_SECONDS = 5.0

#: What a connection may make the agent hold before it has said a valid ``hello``: the
#: stream reader's own limit (it buffers up to twice as much before it stops reading). The
#: messages of a client that said hello may be up to :data:`wire.MAX_MESSAGE` long; they
#: are read in chunks by :class:`_Lines`, not by growing this limit.
HELLO_LIMIT = 64 * 1024

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
    return _short_socket_folder() / f"{digest}.sock"


def _short_socket_folder() -> Path:
    """Where a socket goes whose home is too deep: the user's own runtime folder
    (``$XDG_RUNTIME_DIR``, made by the system for this user alone) where it is set and
    usable, else a per-user folder in the shared temporary directory, which anyone could
    have made first (the agent and its clients then refuse it: :func:`check_private_folder`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            info = os.stat(runtime)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() \
                and not info.st_mode & 0o077:
            return Path(runtime) / "hostapp"
    return Path(tempfile.gettempdir()) / f"hostapp-{os.getuid()}"


class UnsafeEndpoint(PermissionError):
    """The endpoint's folder or its listener is not this user's own: someone else could
    read what is sent there, or pose as the agent."""


def check_private_folder(folder: Path) -> None:
    """Raise :class:`UnsafeEndpoint` unless ``folder`` is a real folder (not a link) of
    this user that nobody else may enter or write (mode 0700 or stricter)."""
    if not hasattr(os, "getuid"):
        return  # Windows: the loopback kind, whose key file the profile's ACL protects
    # A folder that does not exist (yet: an agent starting makes it) raises FileNotFoundError:
    # nobody listens there, which is not a refusal.
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeEndpoint(f"{folder} is not a folder but a link or a file; remove it and start again")
    if info.st_uid != os.getuid():
        raise UnsafeEndpoint(f"{folder} belongs to another user (uid {info.st_uid}); "
                             f"remove it, or set XDG_RUNTIME_DIR to a folder of your own")
    if info.st_mode & 0o077:
        raise UnsafeEndpoint(f"{folder} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); "
                             f"it must be 0700")


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a connected Unix socket
    (``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS and the BSDs); None where the
    system cannot tell."""
    if sock.family != getattr(socket, "AF_UNIX", None):
        return None
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    local_peercred = getattr(socket, "LOCAL_PEERCRED", 0x001 if sys.platform == "darwin" else None)
    if local_peercred is None:
        return None
    # struct xucred: u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]
    try:
        creds = sock.getsockopt(0, local_peercred, struct.calcsize("2I") + 2 + 2 + 4 * 16)
    except OSError:
        return None
    return int(struct.unpack_from("2I", creds)[1])


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
    if hasattr(os, "getuid"):
        info = os.lstat(folder)
        if info.st_uid != os.getuid() or stat.S_ISLNK(info.st_mode):
            check_private_folder(folder)  # says why, the agent will not listen there
        os.chmod(folder, 0o700)


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """True when the peer of a Unix socket runs as this user (always true where the OS
    cannot tell, and for loopback connections, which prove themselves with the key)."""
    sock = writer.get_extra_info("socket")
    uid = peer_uid(sock) if sock is not None else None
    return uid is None or uid == os.getuid()


class _Lines:
    """The lines of a client that said hello, each at most ``limit`` bytes, read from its
    stream in chunks (the stream's own limit stays :data:`HELLO_LIMIT`)."""

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._buffer = bytearray()
        self._searched = 0  # no new line in the buffer before this offset

    async def readline(self) -> bytes:
        """The next line with its ``\\n`` (or what was left at the end; b"" once ended);
        ValueError for a line longer than the limit."""
        while True:
            end = self._buffer.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                self._searched = 0
                return line
            self._searched = len(self._buffer)
            if len(self._buffer) > self._limit:
                raise ValueError("message too large")
            chunk = await self._reader.read(256 * 1024)
            if not chunk:
                line = bytes(self._buffer)
                self._buffer.clear()
                self._searched = 0
                return line
            self._buffer += chunk


@dataclass(frozen=True)
class Limits:
    """What one client may cost the agent (see docs/agent-wire.md, "Limits").

    Past ``high_water`` bytes waiting in a client's socket the agent reads no more of its
    requests, and its operation changes coalesce (one per operation, the latest) until it
    has read; its other events wait in line, and once more than ``held`` bytes of them wait
    the client is dropped with a farewell. At most ``in_flight`` of a client's requests run
    at once. The last ``replay_events`` events (at most ``replay_bytes``) are kept for a
    client that reconnects."""

    high_water: int = 1024 * 1024
    held: int = 8 * 1024 * 1024
    in_flight: int = 64
    replay_events: int = 4096
    replay_bytes: int = 16 * 1024 * 1024
    #: How long a dropped client's farewell may take before its socket is cut.
    farewell_seconds: float = 2.0


class _Client:
    """One connected client: its writer, what waits to be written to it, and the operation
    changes coalesced for it.

    States: open → backlogged (more than the high water waits: changes coalesce, requests
    are not read) ⇄ open; → closed (it left, its socket broke, or it was dropped: nothing
    more is written to it)."""

    def __init__(self, writer: asyncio.StreamWriter, name: str, limits: Limits,
                 on_close: Callable[[_Client], None] | None = None) -> None:
        self.writer = writer
        self.name = name
        self.limits = limits
        self._on_close = on_close
        #: The latest coalesced change of each operation, as its event line and its seq.
        self.pending: dict[str, tuple[int, bytes]] = {}
        #: Other events emitted while it is backlogged, in order (they cannot coalesce),
        #: and their bytes: they go out with the changes, in the order of their seqs.
        self.waiting: collections.deque[tuple[int, bytes]] = collections.deque()
        self._waiting_bytes = 0
        self.flush_handle: asyncio.TimerHandle | None = None
        self.last_flush = 0.0
        self.closed = False
        #: Lines waiting for the socket to drain, and the bytes of the events among them.
        self._queue: collections.deque[tuple[bytes, bool]] = collections.deque()
        self._held = 0
        self._pump: asyncio.Task[None] | None = None
        #: Set while the client may be sent to without waiting (its requests are read then).
        self.writable = asyncio.Event()
        self.writable.set()
        with contextlib.suppress(AttributeError, NotImplementedError):
            writer.transport.set_write_buffer_limits(high=limits.high_water)

    @property
    def backlogged(self) -> bool:
        return not self.writable.is_set()

    @property
    def unsent(self) -> bool:
        """Whether anything written to it has not left for its socket yet."""
        return bool(self._queue) or self.writer.transport.get_write_buffer_size() > 0

    def send(self, message: dict[str, Any]) -> None:
        """A response (or a refusal): written in turn, whatever the backlog (requests are not
        read while one lasts, so responses are bounded by the requests in flight)."""
        try:
            data = wire.dumps(message)
        except (TypeError, ValueError, RecursionError) as exc:
            # Never a silent drop: a request waits for its answer, so it gets an error.
            log.error("could not encode a message for a client: %s", type(exc).__name__)
            if message.get("id") is None:
                return
            data = wire.dumps({"jsonrpc": "2.0", "id": message["id"], "error": wire.error(
                wire.Code.ENGINE_ERROR, f"the agent could not encode its answer ({type(exc).__name__})")})
        self.write(data, event=False)

    def write(self, line: bytes, *, event: bool = True) -> None:
        if self.closed:
            return
        if self.writer.transport.is_closing():
            self.gone()
            return
        if not self._queue and not self._over_high_water():
            self.writer.write(line)
            if self._over_high_water():
                self._start_pump()
            return
        self._queue.append((line, event))
        if event:
            self._held += len(line)
            if self._held > self.limits.held:
                self.drop(f"it fell behind: {self._held} bytes of events waited for it to read")
                return
        self._start_pump()

    def _over_high_water(self) -> bool:
        return self.writer.transport.get_write_buffer_size() > self.limits.high_water

    def _start_pump(self) -> None:
        self.writable.clear()
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while not self.closed:
                await self.writer.drain()  # until the socket is below its low water
                while self._queue and not self._over_high_water():
                    line, event = self._queue.popleft()
                    if event:
                        self._held -= len(line)
                    self.writer.write(line)
                if self._queue or self._over_high_water():
                    continue
                self._pump = None
                self.writable.set()
                if self.pending or self.waiting:
                    self.flush()  # what coalesced or waited meanwhile
                return
        except (ConnectionError, RuntimeError):
            self.gone()
        finally:
            if self.closed:
                self._pump = None

    def event(self, seq: int, line: bytes) -> None:
        """An event that is not a coalescing change: written now, after the changes that
        coalesced before it; while the client is backlogged it waits with them instead
        (its changes keep coalescing), and past ``held`` bytes of such events the client
        is dropped."""
        if self.closed:
            return
        if self.backlogged:
            self.waiting.append((seq, line))
            self._waiting_bytes += len(line)
            if self._held + self._waiting_bytes > self.limits.held:
                self.drop(f"it fell behind: {self._held + self._waiting_bytes} bytes of events waited for it to read")
            return
        if self.pending:
            self.flush()
        if self.backlogged:  # the changes filled its socket: the event waits behind them
            self.event(seq, line)
            return
        self.write(line)

    def flush(self) -> None:
        """Send the coalesced changes (each operation's latest) and the events that waited,
        in the order they happened, as far as its socket takes them: what does not fit
        stays (the changes still coalescing) until the client has read."""
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        self.last_flush = time.monotonic()
        if self.closed:
            return
        if self.writer.transport.is_closing():
            self.gone()
            return
        due: list[tuple[int, bytes, str | None]] = [(seq, line, op_id) for op_id, (seq, line) in self.pending.items()]
        if self.waiting:
            due += [(seq, line, None) for seq, line in self.waiting]
        due.sort(key=lambda item: item[0])
        self.pending, self.waiting, self._waiting_bytes = {}, collections.deque(), 0
        for n, (_seq, line, _op) in enumerate(due):
            if self._over_high_water():
                for seq, rest, op_id in due[n:]:
                    if op_id is None:
                        self.waiting.append((seq, rest))
                        self._waiting_bytes += len(rest)
                    else:
                        self.pending[op_id] = (seq, rest)
                break
            self.writer.write(line)
        if self._over_high_water():
            self._start_pump()

    def gone(self) -> None:
        """Its socket broke: nothing more is written to it (said once in the log)."""
        if self.closed:
            return
        log.info("client %s went away; nothing more is sent to it", self.name)
        self._close()

    def drop(self, why: str) -> None:
        """Stop serving a client that does not read: a farewell, then its socket is cut."""
        if self.closed:
            return
        log.warning("dropped client %s: %s", self.name, why)
        self._close()
        transport = self.writer.transport
        with contextlib.suppress(Exception):
            transport.write(wire.dumps({"jsonrpc": "2.0", "method": "event", "params": {
                "kind": "dropped", "reason": why}}))
            transport.close()  # sends what is buffered, the farewell last, if the client reads
        asyncio.get_running_loop().call_later(self.limits.farewell_seconds, transport.abort)

    def _close(self) -> None:
        self.closed = True
        if self._on_close is not None:
            self._on_close(self)
        self._queue.clear()
        self._held = 0
        self.pending.clear()
        self.waiting.clear()
        self._waiting_bytes = 0
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        self.writable.set()  # its reader ends by itself; nothing waits on the drain any more


class _EventLog:
    """The events the agent emitted, numbered: each gets the next sequence number, and the
    latest are kept (bounded by count and by bytes) for a client that reconnects. An
    operation's change replaces its previous change in the log (a client wants its latest
    state), so only what the bounds pushed out makes a gap."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        #: This run of the agent: sequence numbers of another run mean nothing here.
        self.stream = secrets.token_hex(8)
        self.seq = 0
        self._kept: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._bytes = 0
        self._change_of: dict[str, int] = {}  # operation id -> seq of its change in the log
        # ...and back: with thousands of operations changing, a scan of _change_of for each
        # event pushed out of the log made every event cost as much as the operations.
        self._op_of: dict[int, str] = {}
        self._lost_through = 0  # the newest seq pushed out by the bounds

    def add(self, params: dict[str, Any], *, change_of: str | None = None) -> tuple[int, bytes]:
        """Number an event and keep it; its seq and its line."""
        self.seq += 1
        seq = self.seq
        line = wire.dumps({"jsonrpc": "2.0", "method": "event", "params": {"seq": seq, **params}})
        if change_of is not None:
            previous = self._change_of.pop(change_of, None)
            if previous is not None:
                self._bytes -= len(self._kept.pop(previous))
                del self._op_of[previous]
            self._change_of[change_of] = seq
            self._op_of[seq] = change_of
        self._kept[seq] = line
        self._bytes += len(line)
        while len(self._kept) > self.limits.replay_events or self._bytes > self.limits.replay_bytes:
            old, old_line = self._kept.popitem(last=False)
            self._bytes -= len(old_line)
            self._lost_through = old
            op = self._op_of.pop(old, None)
            if op is not None:
                del self._change_of[op]
        return seq, line

    def since(self, stream: Any, seq: Any) -> list[bytes] | None:
        """The events after ``seq`` of ``stream``, in order; None when some are no longer
        kept (or ``stream`` is another run's): the client must read everything again."""
        if stream != self.stream or not isinstance(seq, int) or isinstance(seq, bool) \
                or not self._lost_through <= seq <= self.seq:
            return None
        return [line for s, line in self._kept.items() if s > seq]


#: Methods answered from the journal while the engine still starts (reads its keyring,
#: connects, resumes): a window opened after a restart lists what the journal holds, each
#: operation with its last known status and progress, at once; the engine's views replace
#: those rows as it attaches each operation (the same ids: no row twice). Every other
#: method waits for :attr:`AgentEndpoint.ready`.
READ_BEFORE_START = frozenset({"operations", "count_operations", "unfinished_operations"})


class AgentEndpoint:
    """Serves an :class:`~hostapp.engine.api.EngineApi` on its endpoint; implements
    :class:`~hostapp.engine.api.EngineListener` to forward what the engine tells.

    ``info`` is what ``hello`` answers besides the versions and methods (the owner's pid,
    start time). ``on_clients`` is called with the number of clients whenever it changes.
    ``control`` answers the ``agent.*`` methods. ``versions`` is the range of wire versions
    served, ``(minimum, version)``.
    """

    def __init__(self, engine: api.EngineApi | None, path: Path, *, info: dict[str, Any] | None = None,
                 on_clients: Callable[[int], None] | None = None, control: api.AgentControl | None = None,
                 versions: tuple[int, int] = (wire.MIN_VERSION, wire.VERSION), limits: Limits = Limits()) -> None:
        self.engine = engine  # may be set after construction: the engine is made with its listener
        #: Set once the engine has started: requests wait for it (a client may connect while
        #: the owner still resumes what it found in the journal), but for the journal's reads
        #: (:data:`READ_BEFORE_START`).
        self.ready = asyncio.Event()
        self.control = control
        self.path = path
        self.info = dict(info or {})
        self.versions = versions
        self.limits = limits
        self._on_clients = on_clients
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[_Client] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._key: str | None = None  # the loopback kind's key of this start
        self._events = _EventLog(limits)

    @property
    def methods(self) -> list[str]:
        """The methods this agent serves: the facade's (with an engine) and its own."""
        return sorted([*(wire.FACADE if self.engine is not None else ()), *(wire.CONTROL if self.control else ())])

    @property
    def last_event(self) -> int:
        """The number of the last event emitted (0: none yet)."""
        return self._events.seq

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
                                                      limit=HELLO_LIMIT)
            port = self._server.sockets[0].getsockname()[1]
            _write_private(self.path, json.dumps({"port": port, "key": self._key, "pid": os.getpid()}))
            return
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=HELLO_LIMIT)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)

    async def clients_caught_up(self, within: float, *, everything: bool = False) -> None:
        """Until no client has more waiting to be written to it than its high water (with
        ``everything``: nothing at all), for at most ``within`` seconds. The owner's
        restoring at start-up waits here between its batches: a turn of the event loop
        writes what a client's socket takes (about 200 KB), and the window's list of 10,000
        after a restart (4.5 MB) went out one turn at a time between batches of 60 ms, for
        1.3 s. Before it restores, it waits for everything: the last quarter megabyte of
        that list, below the high water, otherwise left while the keyring's handles were
        read and the servers connected, reached the window 0.2-0.4 s later."""
        deadline = time.monotonic() + within
        # Again after each wait: a client that caught up is sent what waited meanwhile.
        while behind := [client for client in self._clients if not client.closed and client.backlogged]:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(client.writable.wait() for client in behind)), left)
        # Below the high water the transport says nothing more (no callback when it is
        # empty): looked at every millisecond, each look a turn of the loop that writes.
        while everything and any(client.unsent for client in self._clients if not client.closed):
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(SENT_LOOK_SECONDS)

    async def farewell(self, reason: str) -> None:
        """Tell every client that the owner stops on purpose (``reason``, for a person), so
        that a window does not start a new owner behind the back of whoever stopped it."""
        self._broadcast({"kind": "owner_stopping", "reason": reason})
        for client in list(self._clients):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.writable.wait(), 1)
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
            lines = _Lines(reader, wire.MAX_MESSAGE)
            while not client.closed:
                # A client that reads nothing sends nothing more that is read; one with
                # as many requests running as it may have waits for one to end.
                await client.writable.wait()
                if len(mine) >= self.limits.in_flight:
                    await asyncio.wait(set(mine), return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    line = await lines.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    client.send({"jsonrpc": "2.0", "id": None,
                                 "error": wire.error(wire.Code.INVALID_REQUEST, "message too large")})
                    break
                if not line:
                    break
                try:
                    message = wire.loads(line)
                except wire.WireError as exc:
                    client.send({"jsonrpc": "2.0", "id": None, "error": wire.error(wire.Code.PARSE_ERROR, str(exc))})
                    continue
                task = asyncio.get_running_loop().create_task(self._answer(client, message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                mine.add(task)
                task.add_done_callback(mine.discard)
            # The client stopped sending: what it asked for is still answered, briefly.
            if mine and not client.closed:
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
                self._client_closed(client)
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Client | None:
        probe = _Client(writer, "?", self.limits)
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
        except (asyncio.LimitOverrunError, ValueError):
            log.warning("refused a connection whose first message was over %d bytes", HELLO_LIMIT)
            probe.send({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": f"the first message must be a hello of at most {HELLO_LIMIT} bytes"}})
            return None
        if not line:
            return None
        try:
            message = wire.loads(line)
        except wire.WireError as exc:
            probe.send({"jsonrpc": "2.0", "id": None, "error": wire.error(wire.Code.PARSE_ERROR, str(exc))})
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
        return self._welcome(probe, message.get("id"), params)

    def _welcome(self, probe: _Client, rid: Any, params: dict[str, Any]) -> _Client | None:
        """Answer a client's hello: refused outside the versions served; else the agent's
        versions, methods and event position, then the events it missed when it asked for
        them (``since``) and they are still kept. The caller adds the client at once, so no
        event falls between the replay and the live ones."""
        version, minimum = params.get("version"), params.get("min_version", params.get("version"))
        speak = None
        if isinstance(version, int) and isinstance(minimum, int):
            speak = wire.negotiate((minimum, version), self.versions)
        if speak is None:
            theirs = (minimum, version) if isinstance(version, int) and isinstance(minimum, int) else (0, 0)
            probe.send({"jsonrpc": "2.0", "id": rid, "error": wire.error(
                wire.Code.VERSION_MISMATCH, wire.mismatch_advice(theirs, self.versions),
                {"version": self.versions[1], "min_version": self.versions[0]})})
            return None
        client = _Client(probe.writer, str(params.get("client") or "client"), self.limits, self._client_closed)
        since = params.get("since")
        replay = self._events.since(since.get("stream"), since.get("seq")) if isinstance(since, dict) else None
        result: dict[str, Any] = {
            "version": self.versions[1], "min_version": self.versions[0], "speaks": speak,
            "methods": self.methods, "stream": self._events.stream, "seq": self._events.seq, **self.info}
        if isinstance(since, dict):
            result["caught_up"] = replay is not None
        client.send({"jsonrpc": "2.0", "id": rid, "result": result})
        for line in replay or ():
            client.write(line)
        return client

    async def _answer(self, client: _Client, message: dict[str, Any]) -> None:
        rid = message.get("id")
        method = message.get("method")
        if rid is None:
            return  # no notifications from clients today
        if isinstance(method, str) and method in wire.CONTROL and self.control is not None:
            result = await getattr(self.control, wire.CONTROL[method])()
            client.send({"jsonrpc": "2.0", "id": rid, "result": result})
            return
        if not isinstance(method, str) or method not in wire.FACADE or self.engine is None:
            client.send({"jsonrpc": "2.0", "id": rid,
                         "error": wire.error(wire.Code.METHOD_NOT_FOUND, f"unknown method {method!r}")})
            return
        try:
            kwargs = wire.decode_arguments(method, message.get("params"))
            if method not in READ_BEFORE_START:
                await self.ready.wait()
            result = await getattr(self.engine, method)(**kwargs)
        except api.EngineError as exc:
            client.send({"jsonrpc": "2.0", "id": rid, "error": wire.encode_error(exc)})
        except (wire.WireError, TypeError) as exc:
            client.send({"jsonrpc": "2.0", "id": rid,
                         "error": wire.error(wire.Code.INVALID_PARAMS, f"bad params: {exc}")})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one client's request must not take the owner down
            log.exception("request %s failed", method)
            client.send({"jsonrpc": "2.0", "id": rid, "error": wire.encode_error(api.EngineError(
                f"the agent could not do {method}: {type(exc).__name__}"))})
        else:
            try:
                encoded = wire.encode(result)
            except Exception as exc:  # an answer that cannot be encoded is still an answer
                log.exception("the result of %s could not be encoded", method)
                client.send({"jsonrpc": "2.0", "id": rid, "error": wire.encode_error(api.EngineError(
                    f"the agent could not encode the result of {method}: {type(exc).__name__}"))})
            else:
                client.send({"jsonrpc": "2.0", "id": rid, "result": encoded})

    def _client_closed(self, client: _Client) -> None:
        if client in self._clients:
            self._clients.discard(client)
            self._clients_changed()

    def _clients_changed(self) -> None:
        if self._on_clients is not None:
            self._on_clients(len(self._clients))

    # -- EngineListener: what the engine tells, numbered and fanned out --------------------

    def _broadcast(self, params: dict[str, Any]) -> None:
        """An event for every client at once. Each client's coalesced changes go first (or,
        for a backlogged client, it waits with them): on one connection the events come in
        the order of their numbers, so a client that reconnects asks for exactly what it
        has not seen."""
        seq, line = self._events.add(params)
        for client in list(self._clients):
            client.event(seq, line)

    def operation_changed(self, op: api.OperationView) -> None:
        seq, line = self._events.add({"kind": "operation_changed", "op": wire.encode(op)}, change_of=op.id)
        urgent = op.status in api.TERMINAL or op.needs_input
        for client in list(self._clients):
            client.pending[op.id] = (seq, line)  # in place of its previous change
            if client.backlogged:
                continue  # its drain sends it, with what waits, once it has read
            if urgent:
                client.flush()  # at once, after what coalesced before it
            else:
                self._schedule_flush(client)

    def _schedule_flush(self, client: _Client) -> None:
        if client.flush_handle is not None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, client.last_flush + 1 / EVENT_HZ - time.monotonic())
        client.flush_handle = loop.call_later(delay, self._flush, client)

    def _flush(self, client: _Client) -> None:
        client.flush_handle = None
        if not client.backlogged:  # else its drain flushes, once it has read
            client.flush()

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None:
        self._broadcast({"kind": "operation_event", "op_id": op_id, "event": kind, "data": wire.encode(data)})

    def server_changed(self, server: api.ServerView) -> None:
        self._broadcast({"kind": "server_changed", "server": wire.encode(server)})

    def input_requested(self, request: api.InputRequest) -> None:
        self._broadcast({"kind": "input_requested", "request": wire.encode(request)})

    def input_withdrawn(self, request_id: str) -> None:
        self._broadcast({"kind": "input_withdrawn", "request_id": request_id})

    def server_removed(self, name: str) -> None:
        self._broadcast({"kind": "server_removed", "name": name})

    def problem(self, kind: str, message: str) -> None:
        self._broadcast({"kind": "problem", "problem": kind, "message": message})
