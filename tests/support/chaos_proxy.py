"""A loopback TCP proxy for chaos runs, driven from the caller's own asyncio loop.

Between the host and one HTTP server on 127.0.0.1, it forwards bytes both ways and, on
command, cuts every open connection (:meth:`ChaosProxy.cut`), refuses new ones for a
while (:meth:`ChaosProxy.refuse`: it stops listening, so a connection attempt is refused
as by a machine that is gone), or delays every chunk it forwards
(:meth:`ChaosProxy.delay`). While its server is down (:meth:`ChaosProxy.server_down`)
it does not listen either, so the host sees what it would see without a proxy: a refused
connection, not one accepted and then reset. With ``handshake_only`` it answers ``server/discover`` with
HTTP 400, as a handshake-era server does, so the host speaks the handshake era to a
server that also knows the stateless one (the lab). It keeps no copy of the traffic: a
soak runs for many minutes.

:class:`tests.support.faults.LoopbackProxy` is the fault tests' proxy (its own thread,
every request recorded); this one is for long runs inside an asyncio driver.
"""

from __future__ import annotations

import asyncio
import json
import re

_HEADER_END = b"\r\n\r\n"
_DISCOVER = re.compile(rb"(?im)^mcp-method:\s*server/discover\s*$")
_REFUSAL = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s")


class ChaosProxy:
    """``127.0.0.1:port`` forwarded to ``127.0.0.1:upstream_port``."""

    def __init__(self, upstream_port: int, *, handshake_only: bool = False) -> None:
        self.upstream_port = upstream_port
        self.handshake_only = handshake_only
        self.port = 0
        self.cuts = 0          # connections cut by cut() or refuse()
        self.refused = 0       # connections refused while refusing
        self.forwarded = 0     # connections let through
        self._refusing_until = 0.0
        self._server_down = False
        self._delay = 0.0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.AbstractServer | None = None
        self._relisten: asyncio.TimerHandle | None = None

    async def start(self) -> ChaosProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._relisten is not None:
            self._relisten.cancel()
        self._stop_listening()
        self.cut()

    def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _listen(self) -> None:
        if self._server is None and not self._server_down and not self.refusing:
            # The port stays ours: asyncio sets SO_REUSEADDR on its listening sockets.
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    def _listen_later(self, seconds: float) -> None:
        if self._relisten is not None:
            self._relisten.cancel()
        loop = asyncio.get_running_loop()
        self._relisten = loop.call_later(seconds, lambda: loop.create_task(self._listen()))

    async def server_down(self) -> None:
        """The server is gone: stop listening, cut what is open."""
        self._server_down = True
        self._stop_listening()
        self.cut()

    async def server_up(self) -> None:
        self._server_down = False
        await self._listen()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- the faults ---------------------------------------------------------------------
    def cut(self) -> int:
        """Cut every open connection now (both sides, a reset); new ones still pass."""
        writers = list(self._writers)
        self._writers.clear()
        for writer in writers:
            writer.transport.abort()
        self.cuts += len(writers)
        return len(writers)

    def refuse(self, seconds: float) -> None:
        """The network is gone for ``seconds``: open connections cut, new ones refused."""
        self._refusing_until = asyncio.get_running_loop().time() + seconds
        self._stop_listening()
        self.cut()
        self._listen_later(seconds)

    def delay(self, seconds: float) -> None:
        """Hold every forwarded chunk for ``seconds`` (0: no delay) from now on."""
        self._delay = max(0.0, seconds)

    async def heal(self) -> None:
        """No refusal, no delay."""
        self._refusing_until = 0.0
        self._delay = 0.0
        await self._listen()

    @property
    def refusing(self) -> bool:
        return asyncio.get_running_loop().time() < self._refusing_until

    # -- forwarding ---------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing or self._server_down:  # accepted just before listening stopped
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:  # the server is down: a connection that closes at once
            writer.transport.abort()
            return
        self.forwarded += 1
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._upstream(reader, up_writer, writer), self._pump(up_reader, writer),
                                 return_exceptions=True)
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if self._delay:
                await asyncio.sleep(self._delay)
            writer.write(data)
            await writer.drain()
        writer.transport.abort()

    async def _upstream(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter,
                        client: asyncio.StreamWriter) -> None:
        if not self.handshake_only:
            await self._pump(reader, upstream)
            return
        buffer = b""
        while data := await reader.read(65536):
            buffer += data
            while (end := buffer.find(_HEADER_END)) >= 0:
                head = buffer[:end]
                match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
                total = end + len(_HEADER_END) + (int(match.group(1)) if match else 0)
                if len(buffer) < total:
                    break
                raw, buffer = buffer[:total], buffer[total:]
                if _DISCOVER.search(head) or b'"server/discover"' in raw[end:]:
                    body = raw[end + len(_HEADER_END):]
                    try:
                        rid = json.loads(body).get("id")
                    except (ValueError, AttributeError):
                        rid = None
                    error = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
                        "code": -32602, "message": "Unsupported protocol version"}}).encode()
                    client.write(_REFUSAL % (len(error), error))
                    continue
                if self._delay:
                    await asyncio.sleep(self._delay)
                upstream.write(raw)
                await upstream.drain()
        upstream.write_eof()
