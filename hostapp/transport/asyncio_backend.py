"""httpcore's network backend on asyncio's own transports.

httpcore reads and writes its connections through a network backend; the default one is
anyio's, which wraps every read and write in a cancel scope (``anyio.fail_after``, even
without a timeout), maps exceptions through a context manager and, for each connection,
runs a happy-eyeballs task group. With thousands of operations resumed at once (a poll or
a stream each) that bookkeeping was a large part of the host's CPU (bench/RESULTS.md).
This backend is httpcore's documented extension point (``AsyncNetworkBackend``) on an
``asyncio.Protocol``: data is kept as it arrives, a read takes what is there or waits for
the next chunk, a write hands the bytes to the transport and waits only while the
transport asks to pause. Timeouts use ``asyncio.timeout`` and only when one is set.

Connections made here behave as the anyio backend's: TCP_NODELAY (asyncio sets it),
socket options applied, TLS by ``loop.start_tls``; errors are httpcore's (ConnectError,
ReadError, WriteError and their timeouts), so httpx maps them as before.
"""

from __future__ import annotations

import asyncio
import ssl
import typing
from collections.abc import Awaitable, Iterable
from typing import TypeVar

import httpcore
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

#: Bytes kept unread before the transport stops reading from the socket (and again below
#: the low mark): a stream whose reader lags does not grow without bound.
HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024

T = TypeVar("T")
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


async def _within(waiting: Awaitable[T], timeout: float | None, error: type[Exception]) -> T:
    """``waiting``, or ``error`` once it has taken ``timeout`` seconds (None: no limit)."""
    if timeout is None:
        return await waiting
    try:
        async with asyncio.timeout(timeout):
            return await waiting
    except TimeoutError:
        raise error(f"timed out after {timeout} s") from None


class _Connection(asyncio.Protocol):
    """What has arrived on one connection, and who waits for more or for room to write."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self._readable: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and self.transport is not None and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # close the transport: HTTP/1.1 does not write after the peer's end

    def connection_lost(self, exc: BaseException | None) -> None:
        self.eof = True
        self.error = exc
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_writer()

    def _wake_reader(self) -> None:
        waiter, self._readable = self._readable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait_readable(self) -> None:
        # A waiter cancelled (a read's timeout) is not reused.
        if self._readable is None or self._readable.done():
            self._readable = asyncio.get_running_loop().create_future()
        await self._readable

    async def wait_writable(self) -> None:
        waiter = self._writable
        if waiter is not None:
            await asyncio.shield(waiter)


class AsyncioStream(AsyncNetworkStream):
    """One connection: httpcore's stream interface over :class:`_Connection`."""

    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        connection = self._connection
        if not connection.buffer and not connection.eof:
            await _within(connection.wait_readable(), timeout, httpcore.ReadTimeout)
        buffer = connection.buffer
        if not buffer:
            if connection.error is not None:
                raise httpcore.ReadError(str(connection.error) or type(connection.error).__name__)
            return b""  # the peer ended the connection
        data = bytes(buffer[:max_bytes])
        del buffer[:max_bytes]
        if connection.reading_paused and len(buffer) < LOW_WATER and not self._transport.is_closing():
            connection.reading_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        await _within(self._connection.wait_writable(), timeout, httpcore.WriteTimeout)
        if self._connection.error is not None:
            raise httpcore.WriteError(str(self._connection.error) or type(self._connection.error).__name__)

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport = await _within(loop.start_tls(self._transport, self._connection, ssl_context,
                                                     server_hostname=server_hostname), timeout, httpcore.ConnectTimeout)
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        if transport is None:
            raise httpcore.ConnectError("the TLS handshake did not complete")
        self._connection.transport = transport
        return AsyncioStream(transport, self._connection)

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":
            # Something arrived (or the peer closed) on a connection no request reads: the
            # server is done with it. asyncio reads as data comes, so the buffer tells.
            return bool(self._connection.buffer) or self._connection.eof
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info in ("ssl_object", "socket"):
            return self._transport.get_extra_info(info)
        return None


class AsyncioBackend(AsyncNetworkBackend):
    """Connections for httpcore made by ``loop.create_connection``."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        connection = _Connection()
        try:
            transport, _ = await _within(loop.create_connection(
                lambda: connection, host, port, local_addr=(local_address, 0) if local_address else None),
                timeout, httpcore.ConnectTimeout)
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        _apply(transport, socket_options)
        return AsyncioStream(transport, connection)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[SocketOption] | None = None) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        connection = _Connection()
        try:
            transport, _ = await _within(loop.create_unix_connection(lambda: connection, path), timeout,
                                         httpcore.ConnectTimeout)
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from None
        _apply(transport, socket_options)
        return AsyncioStream(transport, connection)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _apply(transport: asyncio.BaseTransport, options: Iterable[SocketOption] | None) -> None:
    sock = transport.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)
