"""The lab over stdio: newline-delimited JSON-RPC, both eras, elicitation round trip."""

from __future__ import annotations

import json
from typing import Any

from .conftest import STATELESS


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
