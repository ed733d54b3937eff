"""The stdio transport: an MCP server run as a child process, JSON-RPC over its stdin/stdout.

Messages are newline-delimited UTF-8 JSON both ways. The server's stderr is its log: every
line goes to ``listener.on_log`` and the last lines are kept, so that when the process dies
the :class:`ServerExited` error says why in the server's own words.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence

from hostapp.protocol.excerpt import excerpt
from hostapp.protocol.framing import LineFramer
from hostapp.protocol.jsonrpc import (
    MAX_MESSAGE_BYTES,
    Message,
    ProtocolError,
    encode,
    parse,
)
from hostapp.transport.base import (
    ServerExited,
    Transport,
    TransportError,
    TransportListener,
)

log = logging.getLogger(__name__)

#: Variables a child inherits from the host; everything else comes from the server's
#: configuration. A server gets what it needs to find programs and write files, but not
#: whatever tokens happen to sit in the host's own environment.
INHERITED_ENV_VARS: tuple[str, ...] = (
    ("APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
     "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES")
    if sys.platform == "win32"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
          # where the person keeps config, data and caches: a server should honour it too
          "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")
)

#: How many stderr lines are kept for the message of :class:`ServerExited`.
STDERR_TAIL_LINES = 50

#: How long the pipes may stay open after the process ended before their readers are stopped.
_READER_GRACE_SECONDS = 2.0

#: How much of stdout is read at once.
_READ_CHUNK = 256 * 1024

#: A single stderr line longer than this is cut (a log line, not a message: no need for more).
_MAX_LOG_LINE = 64 * 1024


def child_environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a server process: a minimal inherited set, then the configured ``env``."""
    merged = {name: value for name in INHERITED_ENV_VARS if (value := os.environ.get(name)) is not None}
    if env:
        merged.update(env)
    return merged


class StdioTransport(Transport):
    """A server process spoken to over stdin/stdout.

    States: created -> connected (process running) -> closed. The process ending on its
    own calls ``listener.on_closed(ServerExited)`` with its return code and stderr tail;
    :meth:`close` ends it on purpose (stdin EOF, then SIGTERM, then SIGKILL) and reports
    ``on_closed(None)``.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        shutdown_timeout: float = 5.0,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env else None
        self.cwd = cwd
        self.shutdown_timeout = shutdown_timeout
        self.max_message_bytes = max_message_bytes
        self._process: asyncio.subprocess.Process | None = None
        self._reader_tasks: list[asyncio.Task[None]] = []
        self._watch_task: asyncio.Task[None] | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._closing = False
        self._closed = False
        self._write_lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    async def connect(self, listener: TransportListener) -> None:
        if self._process is not None:
            raise TransportError("the server process was already started")
        self.listener = listener
        try:
            self._process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_environment(self.env),
                cwd=self.cwd,
                limit=self.max_message_bytes,
                # Its own session: a Ctrl-C in the host's terminal is the host's business, and
                # the server must not receive it before the host had a chance to shut it down.
                start_new_session=True,
            )
        except FileNotFoundError:
            where = f" in {self.cwd}" if self.cwd and not os.path.isdir(self.cwd) else ""
            raise TransportError(f"cannot start server: no such command {self.command!r}{where}") from None
        except PermissionError:
            raise TransportError(f"cannot start server: {self.command!r} is not executable") from None
        except OSError as exc:
            raise TransportError(f"cannot start server {self.command!r}: {exc.strerror or exc}") from None
        self._reader_tasks = [
            asyncio.create_task(self._read_stdout(), name="stdio-stdout"),
            asyncio.create_task(self._read_stderr(), name="stdio-stderr"),
        ]
        self._watch_task = asyncio.create_task(self._watch_exit(), name="stdio-exit")

    async def send(self, message: Message) -> None:
        process = self._process
        if process is None or self._closing or process.returncode is not None or process.stdin is None:
            raise self._exited_error("the server is not running")
        data = encode(message) + b"\n"
        async with self._write_lock:
            try:
                process.stdin.write(data)
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                raise self._exited_error("the server stopped reading its input") from None

    async def close(self, *, end_session: bool = True) -> None:
        """End the server process (``end_session`` is for HTTP; a process cannot outlive us)."""
        if self._closing:
            if self._watch_task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(self._watch_task)
            return
        self._closing = True
        process = self._process
        if process is None:
            self._closed = True
            return
        if process.returncode is None:
            await self._terminate(process)
        # Reap the readers and the watcher; they end by themselves once the pipes close.
        if self._watch_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task

    # -- internals -------------------------------------------------------------------------

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        """Ask politely (stdin EOF), then SIGTERM, then SIGKILL, each with the same patience."""
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await process.stdin.wait_closed()
        if await self._exited_within(process, self.shutdown_timeout):
            return
        self._signal(process, signal.SIGTERM)
        if await self._exited_within(process, self.shutdown_timeout):
            return
        self._signal(process, signal.SIGKILL)
        await process.wait()

    @staticmethod
    async def _exited_within(process: asyncio.subprocess.Process, timeout: float) -> bool:
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @staticmethod
    def _signal(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
        # The whole process group: a server started through a wrapper (npx, uv run, a shell
        # script) must not leave its real worker behind.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sys.platform != "win32":
                os.killpg(process.pid, sig)
            elif sig == signal.SIGKILL:
                process.kill()
            else:
                process.terminate()

    async def _read_stdout(self) -> None:
        """Split stdout into lines and dispatch them.

        Hot path: progress notifications can come by the hundred thousand, so the pipe is
        read in large chunks and split by a :class:`LineFramer` (one await per chunk, not
        per line). A line longer than ``max_message_bytes`` is dropped as it streams by,
        never held whole.
        """
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        dispatch = self._dispatch
        framer = LineFramer(self.max_message_bytes)
        while True:
            try:
                chunk = await stdout.read(_READ_CHUNK)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            # a last line without a newline still counts
            lines = framer.feed(chunk) if chunk else framer.end()
            # Taken from the list as they are dispatched (last first, reversed once), so
            # that a long line is let go as soon as it is decoded, not when the chunk is done.
            lines.reverse()
            while lines:
                if type(lines[-1]) is bytes:
                    dispatch(lines.pop())  # type: ignore[arg-type]
                else:
                    self._report_oversized(lines.pop().size)  # type: ignore[union-attr]
            if not chunk:
                return

    def _dispatch(self, line: bytes) -> None:
        if not line.strip():
            return  # blank lines between messages are harmless
        # json.loads of bytes first sniffs the encoding; MCP's stdio is UTF-8, so decode
        # here (a line that is not UTF-8 goes to parse as it is, for its usual error).
        try:
            text: bytes | str = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line
        del line  # the only reference (see _read_stdout): a long line is not held twice
        try:
            message = parse(text)
        except ProtocolError as exc:
            raw = text.encode("utf-8") if isinstance(text, str) else text
            # Often a print() or a log line that went to stdout: the parser's own words
            # ("Expecting value: line 1 column 1") would not say so.
            self.listener.on_invalid(ProtocolError(
                f"the server wrote a line to its stdout that is not a JSON-RPC message ({exc}); "
                f"a server must write its logs to stderr. It begins: {excerpt(raw)}", exc.code, exc.request_id),
                raw)
            return
        del text
        try:
            self.listener.on_message(message)
        except Exception:
            # The reader is the connection: a listener that fails on one message (a bug,
            # or a shape nobody foresaw) must not leave every later answer unread.
            log.exception("a message from the server could not be handled")

    def _report_oversized(self, size: int) -> None:
        error = ProtocolError(
            f"message of {size} bytes skipped: over the size limit of {self.max_message_bytes} bytes")
        self.listener.on_invalid(error, b"")

    async def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        stderr = self._process.stderr
        while True:
            try:
                raw = await stderr.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                raw = exc.partial
                if not raw:
                    return
            except asyncio.LimitOverrunError as exc:
                raw = await stderr.readexactly(exc.consumed)
            except (ConnectionResetError, BrokenPipeError):
                return
            line = raw[:_MAX_LOG_LINE].decode("utf-8", errors="replace").rstrip("\r\n")
            self._stderr_tail.append(line)
            self.listener.on_log(line)

    async def _watch_exit(self) -> None:
        assert self._process is not None
        process = self._process
        returncode = await process.wait()
        # Let the readers deliver what the process wrote before it died: its last answer
        # and, above all, its last words on stderr.
        # Bounded: a grandchild that inherited the pipes may keep them open after its parent died.
        _done, pending = await asyncio.wait(self._reader_tasks, timeout=_READER_GRACE_SECONDS)
        for task in pending:
            task.cancel()
        self._closed = True
        if self._closing:
            self.listener.on_closed(None)
        else:
            self.listener.on_closed(self._exited_error(f"the server exited with code {returncode}"))

    def _exited_error(self, what: str) -> ServerExited:
        returncode = self._process.returncode if self._process else None
        if returncode is not None and returncode < 0:
            with contextlib.suppress(ValueError):
                what = f"the server was killed by {signal.Signals(-returncode).name}"
        tail = "\n".join(self._stderr_tail)
        message = f"{what}; its last output:\n{tail}" if tail else f"{what} (it wrote nothing to stderr)"
        return ServerExited(message, returncode)
