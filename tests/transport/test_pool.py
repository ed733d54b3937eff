"""hostapp.transport.pool: keep-alive connections reused, dropped when the server closes
them or they expire, streams holding their own, proxies from the environment honoured."""

from __future__ import annotations

import asyncio
import socket
import ssl

import httpx
import pytest

from hostapp.transport.asyncio_backend import HIGH_WATER, LOW_WATER
from hostapp.transport.pool import KeepAlivePool, KeepAliveTransport, client_with_pool
from tests.support.waiting import until_async

TIMEOUT = httpx.Timeout(10.0)
BIG_BODY = 4 * HIGH_WATER


class CountingServer:
    """HTTP/1.1 on loopback: ``/ok`` answers at once (keep-alive), ``/close`` answers and
    closes, ``/stream`` sends one chunk and holds the response until ``release`` is set.
    Every connection it accepts is counted; ``requests`` keeps each request line."""

    def __init__(self) -> None:
        self.connections = 0
        self.open_connections = 0
        self.requests: list[str] = []
        self.release = asyncio.Event()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> CountingServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self._server = await asyncio.start_server(self._serve, sock=sock)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_connections += 1
        self._writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                self.requests.append(lines[0])
                length = next((int(line.split(":", 1)[1]) for line in lines
                               if line.lower().startswith("content-length:")), 0)
                if length:
                    await reader.readexactly(length)
                path = lines[0].split(" ")[1]
                if path.endswith("/stream"):
                    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
                    await writer.drain()
                    released = asyncio.ensure_future(self.release.wait())
                    hung_up = asyncio.ensure_future(reader.read(1))
                    await asyncio.wait([released, hung_up], return_when=asyncio.FIRST_COMPLETED)
                    released.cancel()
                    if hung_up.done():
                        break  # the client closed the connection
                    hung_up.cancel()
                    writer.write(b"4\r\nlast\r\n0\r\n\r\n")
                    await writer.drain()
                    continue
                if path.endswith("/big"):
                    # More than the connection keeps unread before it stops reading.
                    body = bytes(range(256)) * (BIG_BODY // 256)
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
                    await writer.drain()
                    continue
                closing = path.endswith("/close")
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n"
                             + (b"connection: close\r\n" if closing else b"") + b"\r\nok")
                await writer.drain()
                if closing:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_connections -= 1
            writer.close()

    async def drop_idle_connections(self) -> None:
        """Close every connection from the server's side (as a server's idle timeout does)."""
        for writer in self._writers:
            writer.close()
        await until_async(lambda: self.open_connections == 0, what="the server's connections to close")

    async def stop(self) -> None:
        self.release.set()
        self._server.close()
        for writer in self._writers:
            writer.close()
        # Every handler ends before the loop closes.
        await until_async(lambda: self.open_connections == 0, what="every connection's handler to end")


@pytest.fixture
async def server():
    srv = await CountingServer().start()
    yield srv
    await srv.stop()


async def test_sequential_requests_share_one_connection(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        for _ in range(20):
            response = await client.post(server.url + "/ok", content=b"{}")
            assert response.text == "ok"
    assert server.connections == 1
    assert len(server.requests) == 20


async def test_concurrent_requests_open_connections_that_are_then_reused(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        await asyncio.gather(*(client.get(server.url + "/ok") for _ in range(8)))
        opened = server.connections
        assert 1 < opened <= 8
        await asyncio.gather(*(client.get(server.url + "/ok") for _ in range(8)))
        assert server.connections == opened  # all eight went over the kept connections


async def test_connection_closed_by_the_server_is_not_reused(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        assert (await client.get(server.url + "/close")).text == "ok"
        assert (await client.get(server.url + "/ok")).text == "ok"
        assert server.connections == 2


async def test_idle_connection_the_server_dropped_is_replaced_without_an_error(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        await client.get(server.url + "/ok")
        await server.drop_idle_connections()
        assert (await client.get(server.url + "/ok")).text == "ok"
        assert server.connections == 2


async def test_idle_connections_expire(server):
    transport = KeepAliveTransport(keepalive_expiry=0.1)
    async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT) as client:
        await client.get(server.url + "/ok")
        await asyncio.sleep(0.3)
        await client.get(server.url + "/ok")
        assert server.connections == 2
        # The expired one was closed, not only forgotten.
        await until_async(lambda: server.open_connections == 1, what="the expired connection to close")


async def test_a_held_stream_keeps_its_connection_and_gives_it_back_when_closed(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        async with client.stream("GET", server.url + "/stream") as stream:
            chunks = stream.aiter_bytes()
            assert await chunks.__anext__() == b"first"
            # A request while the stream is held needs a connection of its own.
            assert (await client.get(server.url + "/ok")).text == "ok"
            assert server.connections == 2
            server.release.set()
            assert b"".join([part async for part in chunks]) == b"last"
        for _ in range(3):
            await client.get(server.url + "/ok")
        assert server.connections == 2


async def test_closing_the_client_closes_held_streams(server):
    client = client_with_pool(timeout=TIMEOUT)
    stream = await client.send(client.build_request("GET", server.url + "/stream"), stream=True)
    chunks = stream.aiter_bytes()
    assert await chunks.__anext__() == b"first"
    await client.aclose()
    await until_async(lambda: server.open_connections == 0, what="the held stream's connection to close")
    with pytest.raises(httpx.HTTPError):
        await chunks.__anext__()


async def test_connection_refused_is_httpx_connect_error(unused_port):
    async with client_with_pool(timeout=TIMEOUT) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{unused_port}/ok")


async def test_proxies_named_in_the_environment_are_used(server, monkeypatch):
    # An absolute-form request line is what a client sends to an HTTP proxy.
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with client_with_pool(timeout=TIMEOUT) as client:
        response = await client.get("http://mcp.example.invalid/ok")
    assert response.text == "ok"
    assert server.requests == ["GET http://mcp.example.invalid/ok HTTP/1.1"]


async def test_httpx_transport_sends_through_the_pool():
    # The seam KeepAliveTransport relies on: httpx's transport sends through ``_pool``.
    transport = KeepAliveTransport()
    assert isinstance(transport._pool, KeepAlivePool)
    await transport.aclose()


def _self_signed_server_context(tmp_path) -> ssl.SSLContext:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


async def test_https_is_verified_with_httpx_ssl_context_made_once(tmp_path):
    from hostapp.transport.pool import shared_ssl_context

    assert shared_ssl_context(True, True) is shared_ssl_context(True, True)
    srv = CountingServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    srv._server = await asyncio.start_server(srv._serve, sock=sock, ssl=_self_signed_server_context(tmp_path))
    url = f"https://127.0.0.1:{sock.getsockname()[1]}/ok"
    try:
        async with client_with_pool(timeout=TIMEOUT) as client:  # a certificate nobody vouches for
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(url)
        unverified = KeepAliveTransport(verify=False)
        async with httpx.AsyncClient(transport=unverified, timeout=TIMEOUT) as client:
            assert (await client.get(url)).text == "ok"
            assert (await client.get(url)).text == "ok"
        assert srv.connections == 1  # both over one kept connection (the refused handshake never got this far)
    finally:
        await srv.stop()


async def test_a_stream_silent_past_its_read_timeout_is_httpx_read_timeout(server):
    async with client_with_pool(timeout=httpx.Timeout(10.0, read=0.2)) as client, \
            client.stream("GET", server.url + "/stream") as response:
        parts = response.aiter_raw()
        assert await parts.__anext__() == b"first"
        with pytest.raises(httpx.ReadTimeout):
            await parts.__anext__()


async def test_a_body_larger_than_the_unread_limit_arrives_whole_read_slowly(server):
    async with client_with_pool(timeout=TIMEOUT) as client:
        async with client.stream("GET", server.url + "/big") as response:
            received = bytearray()
            async for chunk in response.aiter_raw():
                received += chunk
                await asyncio.sleep(0.001)  # a slow reader: the connection pauses and resumes reading
        assert bytes(received) == bytes(range(256)) * (BIG_BODY // 256)
        assert LOW_WATER < HIGH_WATER < BIG_BODY
        # The connection is kept for the next request.
        assert (await client.get(server.url + "/ok")).text == "ok"
    assert server.connections == 1
