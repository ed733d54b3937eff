"""Fixtures for the lab tests: a real lab process on a free loopback port, driven by raw httpx."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.faults import LabProcess
from tests.support.waiting import DEADLINE, until

ROOT = Path(__file__).resolve().parents[2]
STATELESS = "2026-07-28"
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "lab.sqlite3"


@pytest.fixture
def start_lab(state_file: Path) -> Iterator[Callable[..., LabProcess]]:
    labs: list[LabProcess] = []

    def start(*extra: str, port: int = 0, stdio: bool = False, env: dict[str, str] | None = None) -> LabProcess:
        lab = LabProcess(state_file, *extra, stdio=stdio, env=env).start(port)
        labs.append(lab)
        return lab

    yield start
    for lab in labs:
        lab.stop()


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabProcess]:
    """One lab for the tests of a module (on each xdist worker) that neither stop, restart
    nor count on it: each opens sessions of its own, and a lab process costs a Python
    start-up."""
    lab = LabProcess(tmp_path_factory.mktemp("shared-lab") / "lab.sqlite3").start()
    yield lab
    lab.stop()


@pytest.fixture
def lab(request: pytest.FixtureRequest) -> LabProcess:
    """The test's lab: a new one, on ``state_file``, when the test reads that file (what ran
    there, from nothing) or starts labs of its own with ``start_lab`` (it stops or restarts
    them); the module's shared one otherwise."""
    if {"state_file", "start_lab"} & set(request.fixturenames):
        return request.getfixturevalue("start_lab")()
    return request.getfixturevalue("shared_lab")


@dataclass
class Exchange:
    """What one streamed request produced: messages in order, the event ids seen, the answer."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)
    retry_ms: int | None = None
    response: dict[str, Any] | None = None

    @property
    def progress(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == "notifications/progress"]

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == method]

    @property
    def result(self) -> dict[str, Any]:
        assert self.response is not None and "result" in self.response, self.response
        return self.response["result"]

    @property
    def error(self) -> dict[str, Any]:
        assert self.response is not None and "error" in self.response, self.response
        return self.response["error"]


def read_sse(response: httpx.Response, exchange: Exchange, request_id: Any,
             on_request: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
             client: McpClient | None = None, max_messages: int | None = None) -> Exchange:
    """Collect SSE events into ``exchange`` until the response to ``request_id`` arrives or the stream ends."""
    event: dict[str, str] = {}
    data_lines: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if "id" in event:
                exchange.event_ids.append(event["id"])
            if "retry" in event:
                exchange.retry_ms = int(event["retry"])
            data = "\n".join(data_lines)
            event, data_lines = {}, []
            if not data.strip():
                continue
            message = json.loads(data)
            exchange.messages.append(message)
            if max_messages is not None and len(exchange.messages) >= max_messages:
                return exchange  # the caller hangs up here
            if "method" in message and "id" in message and on_request is not None and client is not None:
                answer = on_request(message)
                if answer is not None:
                    client.post({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            elif "method" not in message and message.get("id") == request_id:
                exchange.response = message
                return exchange
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data_lines.append(value)
        else:
            event[name] = value
    return exchange


class McpClient:
    """A deliberately raw JSON-RPC client over httpx for the lab tests."""

    def __init__(self, url: str, stateless: bool = False, capabilities: dict[str, Any] | None = None,
                 version: str = "2025-11-25"):
        self.url = url
        self.http = httpx.Client(timeout=30)
        self.stateless = stateless
        self.capabilities = capabilities or {}
        self.version = STATELESS if stateless else version
        self.session_id: str | None = None
        self.next_id = 1

    def close(self) -> None:
        self.http.close()

    def headers(self, method: str | None = None, params: dict[str, Any] | None = None) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.session_id or self.stateless:
            headers["MCP-Protocol-Version"] = self.version
        if self.stateless and method:
            headers["Mcp-Method"] = method
            if params and "name" in params:
                headers["Mcp-Name"] = params["name"]
            elif params and method == "resources/read" and "uri" in params:
                headers["Mcp-Name"] = params["uri"]
        return headers

    def initialize(self) -> dict[str, Any]:
        response = self.http.post(self.url, headers={"Accept": ACCEPT}, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": self.version, "capabilities": self.capabilities,
                       "clientInfo": {"name": "lab-tests", "version": "1"}}})
        response.raise_for_status()
        self.session_id = response.headers["mcp-session-id"]
        result = response.json()["result"]
        self.version = result["protocolVersion"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        return result

    def post(self, message: dict[str, Any]) -> httpx.Response:
        return self.http.post(self.url, json=message,
                              headers=self.headers(message.get("method"), message.get("params")))

    def params(self, params: dict[str, Any] | None, progress: Any = None) -> dict[str, Any]:
        params = dict(params or {})
        meta = dict(params.get("_meta") or {})
        if progress is not None:
            meta["progressToken"] = progress
        if self.stateless:
            meta.setdefault("io.modelcontextprotocol/protocolVersion", STATELESS)
            meta.setdefault("io.modelcontextprotocol/clientCapabilities", self.capabilities)
            meta.setdefault("io.modelcontextprotocol/clientInfo", {"name": "lab-tests", "version": "1"})
        if meta:
            params["_meta"] = meta
        return params

    def request(self, method: str, params: dict[str, Any] | None = None, *, progress: Any = None,
                request_id: Any = None, max_messages: int | None = None,
                on_request: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> Exchange:
        if request_id is None:
            request_id = self.next_id
            self.next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": self.params(params, progress)}
        exchange = Exchange()
        with self.http.stream("POST", self.url, json=message, headers=self.headers(method, message["params"])) as r:
            if r.headers.get("content-type", "").startswith("text/event-stream"):
                return read_sse(r, exchange, request_id, on_request, self, max_messages)
            r.read()
            exchange.response = r.json()
            exchange.status = r.status_code  # type: ignore[attr-defined]
        return exchange

    def call(self, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Exchange:
        extra = kwargs.pop("extra", {})
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}, **extra}, **kwargs)

    def resume(self, last_event_id: str, request_id: Any, max_messages: int | None = None) -> Exchange:
        exchange = Exchange()
        headers = {**self.headers(), "Last-Event-ID": last_event_id}
        with self.http.stream("GET", self.url, headers=headers) as r:
            assert r.status_code == 200, r.read()
            return read_sse(r, exchange, request_id, max_messages=max_messages)


@pytest.fixture
def client(lab: LabProcess) -> Iterator[McpClient]:
    c = McpClient(lab.url)
    c.initialize()
    yield c
    c.close()


@pytest.fixture
def stateless(lab: LabProcess) -> Iterator[McpClient]:
    c = McpClient(lab.url, stateless=True)
    yield c
    c.close()


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE, interval: float = 0.05,
               what: str = "the condition") -> Any:
    """``predicate``'s first true value (tests/support/waiting.py's ``until``, checked less often:
    most predicates here are a request to the lab)."""
    return until(predicate, timeout, what=what, interval=interval)
