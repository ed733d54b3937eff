"""Fixtures of the transport tests: a listener that records every callback, and the test servers."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hostapp.protocol.jsonrpc import ErrorResponse, Message, Notification, Response
from tests.support.waiting import DEADLINE, until

SUPPORT = Path(__file__).resolve().parents[1] / "support"


class RecordingListener:
    """A TransportListener that keeps everything and lets a test await a condition."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.related: list[object] = []  # related_request_id of each message
        self.invalid: list[tuple[Exception, bytes | str]] = []
        self.stream_events: list[tuple[object, str, int | None]] = []
        self.lost: list[tuple[object, Exception]] = []
        self.closed: list[Exception | None] = []
        self.logs: list[str] = []
        self.arrival: list[float] = []  # monotonic time of each message
        self._changed = asyncio.Event()

    def _touch(self) -> None:
        self._changed.set()

    def on_message(self, message: Message, related_request_id=None) -> None:
        self.messages.append(message)
        self.related.append(related_request_id)
        self.arrival.append(time.monotonic())
        self._touch()

    def on_invalid(self, error: Exception, raw: bytes | str) -> None:
        self.invalid.append((error, raw))
        self._touch()

    def on_stream_event(self, request_id, event_id: str, retry_ms: int | None) -> None:
        self.stream_events.append((request_id, event_id, retry_ms))
        self._touch()

    def on_request_lost(self, request_id, error: Exception) -> None:
        self.lost.append((request_id, error))
        self._touch()

    def on_closed(self, error: Exception | None) -> None:
        self.closed.append(error)
        self._touch()

    def on_log(self, line: str) -> None:
        self.logs.append(line)
        self._touch()

    async def wait_for(self, condition, timeout: float = DEADLINE, what: str = "the condition") -> None:
        """Until ``condition()`` holds, checked again after each callback."""
        async def loop() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()
        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}") from None

    def response_for(self, request_id) -> Message | None:
        for message in self.messages:
            if isinstance(message, (Response, ErrorResponse)) and message.id == request_id:
                return message
        return None

    def has_response(self, request_id) -> bool:
        return self.response_for(request_id) is not None

    def progress_values(self) -> list:
        return [m.params["progress"] for m in self.messages
                if isinstance(m, Notification) and m.method == "notifications/progress"]


@pytest.fixture
def listener() -> RecordingListener:
    return RecordingListener()


@pytest.fixture
def make_listener():
    """For a test that needs a second listener (a second transport after a restart)."""
    return RecordingListener


@pytest.fixture(scope="session")
def wait_listening():
    """``wait_listening(port, popen)``: block until a server process accepts connections."""
    return wait_until_listening


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


@pytest.fixture(scope="session")
def port_finder():
    """``port_finder()``: a free loopback port, for fixtures wider than one test."""
    return free_port


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_listening(port: int, process: subprocess.Popen, timeout: float = DEADLINE) -> None:
    """Until the server process accepts connections on ``port``; at once if it exits."""
    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"test server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    until(listening, timeout, what=f"the test server to listen on port {port}", interval=0.05)


class SseTestServer:
    """The scripted Streamable HTTP server of tests/support, run as its own process."""

    def __init__(self, port: int, process: subprocess.Popen):
        self.port = port
        self.process = process
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/mcp"

    def records(self) -> list[dict]:
        return httpx.get(f"{self.base}/_records").json()

    def reset(self) -> None:
        httpx.post(f"{self.base}/_reset")


@pytest.fixture(scope="session")
def sse_server_process():
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SUPPORT / "sse_test_server.py"), "--port", str(port)])
    try:
        wait_until_listening(port, process)
        yield SseTestServer(port, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def sse_server(sse_server_process: SseTestServer) -> SseTestServer:
    sse_server_process.reset()
    return sse_server_process




@pytest.fixture(scope="session")
def hostile_url():
    """The endpoint of tests/support/hostile_server.py, run as its own process."""
    from tests.support.hostile_server import running_http_server

    with running_http_server() as url:
        yield url
