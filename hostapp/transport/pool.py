"""HTTP/1.1 keep-alive connections with constant work per request.

httpx's default transport hands requests to httpcore's ``AsyncConnectionPool``, which
walks every connection of the pool when a request starts and when it ends: it asks each
idle one whether the server closed it (a ``getpeername`` and a ``poll`` system call
through anyio) and, for each idle one, counts all connections again. With the hundreds
of polls and streams that a restart resumes at once, that walk was the host's largest
cost (a quarter of the CPU in the resume benchmark, bench/RESULTS.md). This pool keeps
the idle connections of each origin on a stack and checks only the one it takes, so a
request costs the same however many connections are open. Connections themselves are
httpcore's (``AsyncHTTPConnection``: connecting, TLS, HTTP/1.1 framing); only the
bookkeeping around them is ours.

Not covered here, and left to httpx's own transport: proxies (``client_with_pool`` mounts
httpx's proxy transports for the proxies named in the environment, as httpx does) and
HTTP/2, which multiplexes on one connection anyway.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from types import TracebackType

import httpcore
import httpx
from httpcore._async.interfaces import AsyncRequestInterface

from hostapp.transport.asyncio_backend import AsyncioBackend

#: Idle connections kept per origin; beyond that a finished connection is closed.
MAX_IDLE_PER_ORIGIN = 100
#: Seconds an idle connection is kept. Below the servers' own keep-alive timeout (5 s in
#: uvicorn and Node's http server): at the same 5 s as httpx's default, a request on a
#: connection idle for just under 5 s met the server closing it, and failed (ReadError),
#: dozens of times a minute with thousands of polls spaced out by the poll budget.
KEEPALIVE_SECONDS = 4.0

_Origin = tuple[bytes, bytes, int | None]


class KeepAlivePool(AsyncRequestInterface):
    """httpcore's request interface over a stack of idle connections per origin."""

    def __init__(self, *, ssl_context: Callable[[], ssl.SSLContext] | None = None,
                 keepalive_expiry: float = KEEPALIVE_SECONDS,
                 max_idle_per_origin: int = MAX_IDLE_PER_ORIGIN,
                 network_backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._ssl_context = ssl_context
        self._keepalive_expiry = keepalive_expiry
        self._max_idle = max_idle_per_origin
        self._network_backend = network_backend
        # origin -> deque of (connection, monotonic time it became idle); newest on the right
        self._idle: dict[_Origin, deque[tuple[httpcore.AsyncHTTPConnection, float]]] = {}
        self._open: set[httpcore.AsyncHTTPConnection] = set()
        self._closed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._closed:
            raise httpcore.ConnectError("the connection pool is closed")
        url = request.url
        key: _Origin = (url.scheme, url.host, url.port)
        while True:
            connection = await self._take_idle(key)
            if connection is None:
                tls = self._ssl_context() if url.scheme == b"https" and self._ssl_context else None
                connection = httpcore.AsyncHTTPConnection(
                    origin=url.origin, ssl_context=tls, keepalive_expiry=self._keepalive_expiry,
                    network_backend=self._network_backend)
                self._open.add(connection)
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                # An idle connection the server had just closed: take another.
                self._open.discard(connection)
                continue
            except BaseException:
                await self._close(connection)
                raise
            stream = response.stream
            assert isinstance(stream, AsyncIterable)  # an async connection's body
            return httpcore.Response(
                status=response.status, headers=response.headers,
                content=_ReleasingStream(stream, self, connection, key),
                extensions=response.extensions)

    async def _take_idle(self, key: _Origin) -> httpcore.AsyncHTTPConnection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        await self._drop_expired(idle)
        while idle:
            connection, _ = idle.pop()  # the most recently used: the least likely closed
            if connection.is_available() and not connection.has_expired():
                return connection
            await self._close(connection)
        return None

    async def _drop_expired(self, idle: deque[tuple[httpcore.AsyncHTTPConnection, float]]) -> None:
        """Close the idle connections kept longer than the keep-alive expiry (oldest on the left)."""
        now = time.monotonic()
        while idle and now - idle[0][1] > self._keepalive_expiry:
            await self._close(idle.popleft()[0])

    async def _release(self, connection: httpcore.AsyncHTTPConnection, key: _Origin) -> None:
        """A response is closed: keep its connection for the next request, or close it."""
        if self._closed or not connection.is_idle():
            await self._close(connection)
            return
        idle = self._idle.setdefault(key, deque())
        idle.append((connection, time.monotonic()))
        await self._drop_expired(idle)
        if len(idle) > self._max_idle:
            await self._close(idle.popleft()[0])

    async def _close(self, connection: httpcore.AsyncHTTPConnection) -> None:
        self._open.discard(connection)
        await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._idle.clear()
        connections, self._open = self._open, set()
        for connection in connections:
            await connection.aclose()

    async def __aenter__(self) -> KeepAlivePool:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None = None, exc_value: BaseException | None = None,
                        traceback: TracebackType | None = None) -> None:
        await self.aclose()


class _ReleasingStream:
    """A response body that gives its connection back to the pool when it is closed."""

    def __init__(self, stream: AsyncIterable[bytes], pool: KeepAlivePool, connection: httpcore.AsyncHTTPConnection,
                 key: _Origin) -> None:
        self._stream = stream
        self._pool = pool
        self._connection = connection
        self._key = key
        self._released = False
        self._parts: AsyncIterator[bytes] | None = None  # the body's iterator, once reading has begun

    def __aiter__(self) -> _ReleasingStream:
        # An iterator object rather than an async generator of our own, and the body's
        # iterator (httpcore's async generator) closed in aclose: a response abandoned
        # mid-stream (a cancelled read at quit) then leaves no suspended generator for the
        # garbage collector to finalize after the event loop has gone.
        self._parts = self._stream.__aiter__()
        return self

    async def __anext__(self) -> bytes:
        if self._parts is None:  # closed, or iterated without __aiter__
            raise StopAsyncIteration
        return await self._parts.__anext__()

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        try:
            parts, self._parts = self._parts, None
            if parts is not None and hasattr(parts, "aclose"):
                await parts.aclose()
            if hasattr(self._stream, "aclose"):
                await self._stream.aclose()
        finally:
            await self._pool._release(self._connection, self._key)


class KeepAliveTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (request conversion, error mapping) on a :class:`KeepAlivePool`."""

    def __init__(self, *, verify: bool = True, trust_env: bool = True,
                 keepalive_expiry: float = KEEPALIVE_SECONDS) -> None:
        # Not super().__init__(): it builds httpx's pool and an SSL context (the CA bundle
        # loaded, ~20 ms) for every client, https or not. httpx's transport sends through
        # ``_pool`` and keeps nothing else; that seam is pinned by tests/transport/test_pool.py.
        # httpx types ``_pool`` as its own pool; it only calls the request interface both share.
        self._pool = KeepAlivePool(  # type: ignore[assignment]
            ssl_context=functools.partial(shared_ssl_context, verify, trust_env), keepalive_expiry=keepalive_expiry,
            network_backend=AsyncioBackend())


def client_with_pool(*, timeout: httpx.Timeout, auth: httpx.Auth | None = None) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` sending through a :class:`KeepAliveTransport`, with the
    environment's proxies (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) mounted as
    httpx itself would mount them: giving a transport turns httpx's own lookup off."""
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for pattern, proxy in _environment_proxies():
        mounts[pattern] = httpx.AsyncHTTPTransport(proxy=proxy) if proxy else None
    return httpx.AsyncClient(timeout=timeout, auth=auth, transport=KeepAliveTransport(), mounts=mounts)


@functools.cache
def shared_ssl_context(verify: bool = True, trust_env: bool = True) -> ssl.SSLContext:
    """httpx's SSL context for these settings, made once per process at the first https
    connection (an SSLContext is shared safely by connections)."""
    return httpx.create_ssl_context(verify=verify, trust_env=trust_env)


def _environment_proxies() -> Iterable[tuple[str, str | None]]:
    from httpx._utils import get_environment_proxies  # what httpx.AsyncClient(trust_env=True) uses

    return get_environment_proxies().items()
