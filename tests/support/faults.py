"""Fault injection for tests against real processes on loopback.

* :class:`LoopbackProxy` – a TCP proxy on 127.0.0.1 between the host and a server. It can
  cut every open connection (a connection dropped mid-stream), refuse every connection for
  a while (the network gone) and let them through again, and hold a request in flight
  (read from the host, not yet passed on) until the test releases it. It reads the HTTP/1.1 requests it
  forwards, so a test can count ``tools/call`` requests on the wire (the execution count of
  peers that keep none), collect every handle the server issued (the secret check), and
  show a server as a handshake-era one (``server/discover`` answered with HTTP 400).
* :class:`LabProcess` – ``python -m hostapp.lab serve`` as a child process.
* :class:`HostCall` – ``hostapp call ... --json`` as a child process whose event lines
  are read as they come, so a test can SIGKILL it after some progress.
* :func:`journal_rows` – the operations a home's journal holds, read from the file itself
  (what a test waits on: the journal's own commit, not a command run in a loop).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from tests.support.waiting import DEADLINE

REPO_ROOT = Path(__file__).resolve().parents[2]


# -- the proxy --------------------------------------------------------------------------

_HEADER_END = b"\r\n\r\n"
_DISCOVER_REFUSAL = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"\r\n%s")
# An HTTP error status answered by the proxy itself (as a gateway or rate limiter would).
_STATUS_ANSWER = b"HTTP/1.1 %d %s\r\nContent-Length: 0\r\nRetry-After: 1\r\n\r\n"


class WireRequest:
    """One HTTP request the proxy forwarded: its method, headers and JSON-RPC body."""

    def __init__(self, head: bytes, body: bytes):
        lines = head.decode("latin-1").split("\r\n")
        self.method = lines[0].split(" ", 1)[0]
        self.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        try:
            self.message: Any = json.loads(body) if body else None
        except ValueError:
            self.message = None

    @property
    def rpc_method(self) -> str | None:
        return self.message.get("method") if isinstance(self.message, dict) else None


class HeldRequest:
    """A request the proxy holds in flight (see :meth:`LoopbackProxy.hold`): the host has
    sent it and waits for its answer; the server has not seen it yet."""

    def __init__(self, matches: Callable[[WireRequest], bool], loop: asyncio.AbstractEventLoop):
        self.matches = matches
        self.request: WireRequest | None = None
        self._loop = loop
        self._arrived = threading.Event()
        self._released = asyncio.Event()

    def arrived(self) -> WireRequest | None:
        """The held request once the host sent it (None until then)."""
        return self.request if self._arrived.is_set() else None

    def release(self) -> None:
        """Pass the request on to the server (on a connection of its own, opened now)."""
        self._loop.call_soon_threadsafe(self._released.set)

    def _take(self, request: WireRequest) -> None:
        self.request = request
        self._arrived.set()


class _RequestSplitter:
    """Splits the client's byte stream into HTTP/1.1 requests (Content-Length bodies;
    the host's HTTP client does not chunk request bodies)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bytes, bytes]]:
        """Complete requests as (raw bytes, head, body)."""
        self.buffer += data
        out = []
        while True:
            end = self.buffer.find(_HEADER_END)
            if end < 0:
                return out
            head = self.buffer[:end]
            match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
            length = int(match.group(1)) if match else 0
            total = end + len(_HEADER_END) + length
            if len(self.buffer) < total:
                return out
            raw, self.buffer = self.buffer[:total], self.buffer[total:]
            out.append((raw, head, raw[end + len(_HEADER_END):]))


class LoopbackProxy:
    """A TCP proxy from ``127.0.0.1:port`` to ``127.0.0.1:upstream_port``, run on its own
    event loop thread so synchronous tests can drive it.

    States: *passing* (connections are forwarded) and *refusing* (a new connection is
    closed at once, before a byte is read; open ones were cut when refusing began).
    While a hold is armed (:meth:`hold`), a new connection reaches the server only when
    its first request is passed on: a request held across a server restart then reaches
    the new process, as one sent just after the restart would.
    ``handshake_only`` answers ``server/discover`` with HTTP 400, which is how a
    handshake-era server answers it: the host then runs the ``initialize`` handshake.
    """

    def __init__(self, upstream_port: int, *, handshake_only: bool = False):
        self.upstream_port = upstream_port
        self.handshake_only = handshake_only
        self.requests: list[WireRequest] = []
        self.server_bytes = bytearray()
        self.refused = 0
        self._refusing = False
        self._answers: list[tuple[str, int]] = []  # (JSON-RPC method, HTTP status) to answer in place
        self._writers: set[asyncio.StreamWriter] = set()
        self._holds: list[HeldRequest] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    # lifecycle
    def start(self) -> LoopbackProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close_all())
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # faults
    def drop_connections(self) -> int:
        """Cut every open connection now (both sides); new ones are still let through."""
        return self._call(self._close_all())

    def refuse(self) -> None:
        """The network is gone: cut open connections and refuse new ones."""
        self._refusing = True
        self._call(self._close_all())

    def let_through(self) -> None:
        self._refusing = False

    def answer_status(self, method: str, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests for JSON-RPC ``method`` with HTTP ``status``
        (and ``Retry-After: 1``) instead of passing them on, as a gateway or a rate
        limiter in front of the server would."""
        self._answers.extend([(method, status)] * times)

    def hold(self, matches: Callable[[WireRequest], bool]) -> HeldRequest:
        """Hold the next request for which ``matches`` is true: read from the host and kept
        from the server until :meth:`HeldRequest.release` (a request slow on the network).
        Its answer comes back to the host on the same connection."""
        held = HeldRequest(matches, self._loop)
        self._holds.append(held)
        return held

    def outage(self, seconds: float) -> None:
        """Refuse for ``seconds``, then let connections through again."""
        self.refuse()
        try:
            time.sleep(seconds)
        finally:
            self.let_through()

    # what went over the wire
    def tool_calls(self, tool: str) -> list[dict[str, Any]]:
        """The params of every ``tools/call`` naming ``tool`` that reached the server."""
        return [r.message["params"] for r in list(self.requests)
                if r.rpc_method == "tools/call" and (r.message.get("params") or {}).get("name") == tool]

    def fresh_tool_calls(self, tool: str) -> list[dict[str, Any]]:
        """The ``tools/call`` requests that start the tool's work: not a resume-token
        continuation, not an MRTR retry carrying answers."""
        def continues(params: dict[str, Any]) -> bool:
            meta = params.get("_meta") or {}
            return "resumeToken" in meta or "inputResponses" in params or "requestState" in params
        return [p for p in self.tool_calls(tool) if not continues(p)]

    def rpc_methods(self) -> list[str]:
        return [r.rpc_method for r in list(self.requests) if r.rpc_method]

    # internals
    def _call(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _close_all(self) -> int:
        writers = list(self._writers)
        for w in writers:
            w.transport.abort()
        self._writers.clear()
        return len(writers)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            self.refused += 1
            writer.transport.abort()
            return
        self._writers.add(writer)
        lazy = bool(self._holds)
        upstream: list[asyncio.StreamWriter] = []  # the connection to the server, once open
        pipes: list[asyncio.Task[None]] = []

        async def connect() -> asyncio.StreamWriter | None:
            if upstream:
                return upstream[0]
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            except OSError:  # the server is down: the host sees a connection that closes at once
                writer.transport.abort()
                return None
            upstream.append(up_writer)
            self._writers.add(up_writer)
            pipes.append(asyncio.ensure_future(self._server_to_client(up_reader, writer)))
            return up_writer

        if not lazy and await connect() is None:
            self._writers.discard(writer)
            return
        await asyncio.gather(self._client_to_server(reader, connect, writer), return_exceptions=True)
        if pipes:
            await asyncio.gather(*pipes, return_exceptions=True)
        for w in (writer, *upstream):
            self._writers.discard(w)
            w.transport.abort()

    async def _client_to_server(self, reader: asyncio.StreamReader,
                                connect: Callable[[], Any], client: asyncio.StreamWriter) -> None:
        splitter = _RequestSplitter()
        upstream: asyncio.StreamWriter | None = None
        while data := await reader.read(65536):
            for raw, head, body in splitter.feed(data):
                request = WireRequest(head, body)
                if self.handshake_only and (request.rpc_method == "server/discover"
                                            or request.headers.get("mcp-method") == "server/discover"):
                    error = json.dumps({"jsonrpc": "2.0", "id": (request.message or {}).get("id"), "error": {
                        "code": -32602, "message": "Unsupported protocol version"}}).encode()
                    client.write(_DISCOVER_REFUSAL % (len(error), error))
                    continue
                held = next((h for h in self._holds if h.matches(request)), None)
                if held is not None:
                    self._holds.remove(held)
                    held._take(request)
                    await held._released.wait()
                self.requests.append(request)
                answer = next((a for a in self._answers if a[0] == request.rpc_method), None)
                if answer is not None:
                    self._answers.remove(answer)
                    client.write(_STATUS_ANSWER % (answer[1], HTTPStatus(answer[1]).phrase.encode()))
                    continue
                upstream = await connect()
                if upstream is None:
                    return
                upstream.write(raw)
            if upstream is not None:
                await upstream.drain()
        if upstream is not None:
            upstream.write_eof()

    async def _server_to_client(self, upstream: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        # However the server's side ends, the host's ends with it, as through a real proxy:
        # a server killed with the proxy's connection still in its accept queue resets it
        # (ConnectionResetError, not an end of stream), and a host whose request had gone
        # out on it waited for an answer for ever (a loaded run, the lab restarted just as
        # a resume-token continuation was sent).
        try:
            while data := await upstream.read(65536):
                self.server_bytes.extend(data)
                client.write(data)
                await client.drain()
        finally:
            client.transport.abort()


#: JSON members whose string values are handles a server (or, for async tools, the
#: client) issued and that grant access to an operation or its answers.
_HANDLE_MEMBERS = ("taskId", "resumeToken", "nextResumeToken", "streamId", "requestState", "token")
_HANDLE_VALUE = re.compile(rb'"(%s)"\s*:\s*"([^"\\]+)"' % b"|".join(m.encode() for m in _HANDLE_MEMBERS))
_SESSION_HEADER = re.compile(rb"(?im)^mcp-session-id:\s*(\S+)\s*$")
_EVENT_ID = re.compile(rb"(?m)^id:\s?(\S+)\s*$")
#: Shorter values (an SSE event id such as "3") say nothing and would match anywhere.
MIN_HANDLE_LENGTH = 8


def issued_handles(proxy: LoopbackProxy) -> set[str]:
    """Every handle seen on the wire: session ids, task ids, resume tokens, stream ids,
    request states and SSE event ids the server sent, and the operation tokens the host
    generated for async tools."""
    wire = bytes(proxy.server_bytes)
    handles = {m.group(2).decode() for m in _HANDLE_VALUE.finditer(wire)}
    handles |= {m.group(1).decode() for m in _SESSION_HEADER.finditer(wire)}
    handles |= {m.group(1).decode() for m in _EVENT_ID.finditer(wire)}
    for request in list(proxy.requests):
        params = request.message.get("params") if isinstance(request.message, dict) else None
        if isinstance(params, dict) and isinstance(params.get("operation"), dict):
            token = params["operation"].get("token")
            if isinstance(token, str):
                handles.add(token)
    return {h for h in handles if len(h) >= MIN_HANDLE_LENGTH}


# -- processes ----------------------------------------------------------------------------

class LabProcess:
    """A ``python -m hostapp.lab serve`` child; ``url`` is its /mcp endpoint."""

    def __init__(self, state_file: Path, *extra: str, stdio: bool = False, env: dict[str, str] | None = None):
        self.state_file = state_file
        self.extra = extra
        self.stdio = stdio
        self.env = env or {}
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_lines: list[str] = []

    def start(self, port: int = 0, timeout: float = DEADLINE) -> LabProcess:
        mode = ["--stdio"] if self.stdio else ["--http", str(port)]
        self.url = ""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hostapp.lab", "serve", *mode, "--state", str(self.state_file), *self.extra],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        ready = threading.Event()
        proc = self.proc

        def read_stderr() -> None:
            assert proc.stderr
            for raw in proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.stderr_lines.append(line)
                if line.startswith("lab listening on "):
                    self.url = line.removeprefix("lab listening on ")
                    ready.set()
                elif line.startswith("lab ready on stdio"):
                    ready.set()
            ready.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        if not ready.wait(timeout) or (not self.stdio and not self.url):
            self.stop()
            raise RuntimeError("lab did not start:\n" + "\n".join(self.stderr_lines))
        return self

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        assert self.proc
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no chance to tidy up, as in a crash."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, timeout: float = DEADLINE) -> LabProcess:
        """Kill and start again on the same port with the same state file."""
        port = self.port
        self.kill()
        deadline = time.monotonic() + timeout
        while True:  # the port may linger for a moment after the kill
            try:
                return self.start(port)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def journal_rows(home: Path) -> list[dict[str, Any]]:
    """Every operation row of ``home``'s journal, oldest first, as the last commit left it
    (read-only, beside the host that writes it; none before the journal exists)."""
    from hostapp.store.paths import journal_path

    path = journal_path(home)
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in db.execute("SELECT * FROM operations ORDER BY created_at")]
    except sqlite3.OperationalError:  # created, its tables not yet
        return []
    finally:
        db.close()
    for row in rows:
        row["handle"] = json.loads(row["handle"]) if row.get("handle") else {}
    return rows


def hostapp_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "HOSTAPP_HOME": str(home), "PYTHONUNBUFFERED": "1", **(extra or {})}


class HostCall:
    """``hostapp <command> ... --json`` as a child process. Event lines are parsed as they
    arrive (a non-JSON line on stdout fails the test); stderr goes to a file so the
    secret check can read it after the process is gone."""

    def __init__(self, home: Path, *argv: str, env: dict[str, str] | None = None, stderr_path: Path | None = None):
        self.argv = argv
        self.home = home
        self.events: list[dict[str, Any]] = []
        self.bad_lines: list[str] = []
        self.command = next((a for a in argv if not a.startswith("-")), "hostapp")
        self.stderr_path = stderr_path or home / f"stderr-{self.command}-{time.monotonic_ns()}.txt"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - open while the child lives
        self._changed = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-m", "hostapp", *argv], cwd=REPO_ROOT,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=hostapp_env(home, env))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            with self._changed:
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    self.bad_lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], Any], timeout: float = 60) -> Any:
        """Block until ``predicate(events)`` is true; fail if the process ends first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate(list(self.events))
                if value:
                    return value
                if not self._reader.is_alive():
                    raise AssertionError(f"hostapp {self.command} ended (rc={self.proc.poll()}) before the "
                                         f"expected event; events={self.events}\nstderr:\n{self.stderr}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no expected event within {timeout} s; events={self.events}\n"
                                         f"stderr:\n{self.stderr}")
                self._changed.wait(min(left, 0.5))

    def wait_progress(self, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        return self.wait_for(lambda evs: (p := progress_of(evs)) and len(p) >= count and p, timeout)

    def kill(self) -> None:
        """SIGKILL: the host dies mid-call with no chance to tidy up: the command and the
        owner of its home (the agent that carries the call)."""
        from tests.support.agents import kill_owner

        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        kill_owner(self.home)
        self.proc.wait()
        self._reader.join(5)
        self._stderr.close()

    def wait(self, timeout: float = 120) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"hostapp {self.command} did not end within {timeout} s; events={self.events}\n"
                                 f"stderr:\n{self.stderr}\n{agent_log_tail(self.home)}") from None
        self._reader.join(5)
        self._stderr.close()
        assert not self.bad_lines, f"non-JSON lines on stdout: {self.bad_lines}"
        return rc

    @property
    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1] if self.events else {}


def agent_log_tail(home: Path, lines: int = 120) -> str:
    """The end of the log of the agent that carried the call (what it did while the
    command waited), for a failure's message."""
    log = home / "logs" / "agent.log"
    if not log.exists():
        return f"(no agent log at {log})"
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"the agent's log, last {len(tail)} lines:\n" + "\n".join(tail)


def progress_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == "progress"]


def run_hostapp(home: Path, *argv: str, env: dict[str, str] | None = None, timeout: float = 120
                ) -> subprocess.CompletedProcess:
    """Run one short ``hostapp`` command to its end."""
    return subprocess.run([sys.executable, "-m", "hostapp", *argv], check=False, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, env=hostapp_env(home, env))


def ops_of(home: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``hostapp ops --json`` of ``home``: the journal's operations as the person lists them.
    A command that fails says why (its exit status and stderr), not a JSON error on empty
    output."""
    done = run_hostapp(home, "ops", "--json", env=env)
    assert done.returncode == 0 and done.stdout.strip(), \
        f"hostapp ops --json ended {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return json.loads(done.stdout)
