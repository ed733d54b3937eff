"""The lab over stdio: newline-delimited JSON-RPC, both eras, elicitation round trip."""

from __future__ import annotations

import json
import re
import socket
import threading
from typing import Any

import httpx

from .conftest import STATELESS, McpClient, wait_until


class StdioPeer:
    def __init__(self, lab):
        self.proc = lab.proc

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        assert line, "lab closed stdout"
        return json.loads(line)

    def until_response(self, request_id: Any, on_request=None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        seen = []
        while True:
            message = self.receive()
            if "method" in message and "id" in message and on_request:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": on_request(message)})
            elif "method" not in message and message.get("id") == request_id:
                return seen, message
            seen.append(message)


def test_stdio_handshake_progress_and_elicitation(start_lab):
    peer = StdioPeer(start_lab(stdio=True))
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "t", "version": "1"}}})
    assert peer.until_response(1)[1]["result"]["protocolVersion"] == "2025-11-25"
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "sleep_with_progress", "arguments": {"seconds": 0.2, "steps": 2}, "_meta": {"progressToken": 5}}})
    seen, response = peer.until_response(2)
    assert [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"] == [1, 2]
    assert response["result"]["structuredContent"]["steps"] == 2
    peer.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask_form", "arguments": {}}})
    _seen, response = peer.until_response(3, lambda r: {"action": "decline"})
    assert response["result"]["structuredContent"]["action"] == "decline"


def test_stdio_stateless_request(start_lab):
    peer = StdioPeer(start_lab(stdio=True))
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {}}
    peer.send({"jsonrpc": "2.0", "id": "a", "method": "server/discover", "params": {"_meta": meta}})
    assert STATELESS in peer.until_response("a")[1]["result"]["supportedVersions"]
    peer.send({"jsonrpc": "2.0", "id": "b", "method": "tools/call",
               "params": {"name": "long_mrtr", "arguments": {"seconds": 0, "steps": 2}, "_meta": meta}})
    assert peer.until_response("b")[1]["result"]["resultType"] == "input_required"


def test_stdio_without_initialize_is_refused(start_lab):
    peer = StdioPeer(start_lab(stdio=True))
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert peer.until_response(1)[1]["error"]["code"] == -32600


HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}, "url": {}}},
             "clientInfo": {"name": "t", "version": "1"}}


def test_stdio_and_http_are_two_doors_to_one_lab(start_lab):
    """``--stdio --http PORT``, as the first run configures the lab: a call made on stdio is
    the same lab's work over HTTP (one process, one state)."""
    lab = start_lab("--http", "0", stdio=True)
    assert lab.url.startswith("http://127.0.0.1:")
    peer = StdioPeer(lab)
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "long_async", "arguments": {"seconds": 0, "steps": 1}, "operation": {"token": "tok-1"},
        "_meta": meta}})
    assert peer.until_response(1)[1]["result"]["operation"]["status"] == "working"
    client = McpClient(lab.url)
    client.initialize()
    status = wait_until(lambda: (r := client.request("tools/async/status", {"token": "tok-1"}).result)
                        and r["status"] == "completed" and r, what="the asynchronous call to complete")
    assert status == {"status": "completed"}
    client.close()


def test_a_taken_port_is_waited_for(start_lab):
    """The lab that replaces one whose host was killed may start before the old one let go
    of the port: it waits for the port instead of giving up on HTTP."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        releaser = threading.Timer(1.0, holder.close)
        releaser.start()
        lab = start_lab("--http", str(port), stdio=True)
        releaser.join()
    assert lab.url == f"http://127.0.0.1:{port}/mcp"
    assert httpx.post(lab.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 400  # a lab answers


def test_a_stdio_lab_serves_the_page_its_url_question_points_at(start_lab):
    """Without --http a stdio lab opens a loopback listener when a URL question needs one:
    the link works, and opening it completes the question."""
    peer = StdioPeer(start_lab(stdio=True))
    peer.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HANDSHAKE})
    peer.until_response(0)
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    urls = []

    def accept_after_opening(request):
        url = request["params"]["url"]
        urls.append(url)
        page = httpx.get(url)  # the person's browser
        assert page.status_code == 200 and "Thank you" in page.text
        return {"action": "accept"}

    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "ask_url", "arguments": {"wait_seconds": 10}}})
    seen, response = peer.until_response(1, on_request=accept_after_opening)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab/consent/[0-9a-f]+", urls[0])
    assert response["result"]["structuredContent"] == {"action": "accept", "visited": True}
    assert any(m.get("method") == "notifications/elicitation/complete" for m in seen)


def test_a_url_question_of_the_stateless_era_is_completed_by_its_page(start_lab):
    """2026-07-28: the question comes back as input_required; the answer's round learns from
    the signed requestState which page it waits for."""
    peer = StdioPeer(start_lab(stdio=True))
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}}
    call = {"name": "ask_url", "arguments": {"wait_seconds": 10}, "_meta": meta}
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    first = peer.until_response(1)[1]["result"]
    assert first["resultType"] == "input_required"
    question = first["inputRequests"]["url"]["params"]
    # Accepted first, opened a moment later: the second round waits for the page.
    threading.Timer(0.5, lambda: httpx.get(question["url"])).start()
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        **call, "inputResponses": {"url": {"action": "accept"}}, "requestState": first["requestState"]}})
    assert peer.until_response(2)[1]["result"]["structuredContent"] == {"action": "accept", "visited": True}
