"""``hostapp servers add`` with sign-in settings: they live in the server's configuration,
its secrets only in the keyring, and the engine signs in as they say.

A client secret comes on standard input and a private key from a PEM file; after adding
the server, nothing under HOSTAPP_HOME (the SQLite journal included) holds either, and a
connection signs in with the client credentials grant (DPoP-bound when asked).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hostapp.engine.connections import server_auth
from hostapp.store.journal import ServerConfig
from tests.support.extension_peer import ExtensionPeer, ServedPeer
from tests.support.waiting import DEADLINE

HOSTAPP = [sys.executable, "-m", "hostapp"]
SECRET = "s3cret-only-for-the-keyring-4f1c"


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*HOSTAPP, *args], capture_output=True, text=True, env=env, input=stdin,
                          timeout=DEADLINE, check=False)


class McpPeer(ExtensionPeer):
    """The extension peer, answering as a small MCP server once the request is authorized."""

    async def mcp(self, request: Request) -> Response:
        checked = await super().mcp(request)
        if checked.status_code != 200:
            return checked
        if request.method != "POST":
            return Response(status_code=405)
        message = await request.json()
        if "id" not in message:
            return Response(status_code=202)
        results = {
            "initialize": {"protocolVersion": (message.get("params") or {}).get("protocolVersion", "2025-11-25"),
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "peer", "version": "0"}},
            "tools/list": {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]},
        }
        if message["method"] not in results:
            return JSONResponse({"jsonrpc": "2.0", "id": message["id"],
                                 "error": {"code": -32601, "message": "method not found"}})
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": results[message["method"]]})


@pytest.fixture
def peer() -> Iterator[ExtensionPeer]:
    served = ServedPeer(McpPeer())
    try:
        yield served.peer
    finally:
        served.stop()


def files_holding(home: Path, needle: str) -> list[str]:
    return [p.name for p in home.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_client_secret_from_stdin_lands_only_in_the_keyring_and_signs_in(
        peer, real_keyring, isolated_home: Path):
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home)}
    added = run(["servers", "add", "svc", "--url", peer.mcp_url, "--grant", "client_credentials",
                 "--client-id", "machine", "--client-secret-stdin", "--dpop"], env, stdin=SECRET + "\n")
    assert added.returncode == 0, added.stderr
    listed = run(["servers", "list", "--json"], env)
    [svc] = json.loads(listed.stdout)
    assert svc["auth"] == {"grant": "client_credentials", "client_id": "machine", "dpop": True}

    files = [p for p in isolated_home.rglob("*") if p.is_file()]
    assert any(".sqlite" in p.name for p in files)
    assert files_holding(isolated_home, SECRET) == []
    for text in (added.stdout, added.stderr, listed.stdout):
        assert SECRET not in text

    tools = run(["tools", "svc"], env)
    assert tools.returncode == 0 and "whoami" in tools.stdout, tools.stderr
    [token_request] = peer.requests_to("/token")
    assert token_request.form["grant_type"] == "client_credentials"
    assert token_request.headers["authorization"] == "Basic " + base64.b64encode(
        f"machine:{SECRET}".encode()).decode()
    assert "dpop" in token_request.headers
    assert files_holding(isolated_home, SECRET) == []
    assert run(["servers", "remove", "svc"], env).returncode == 0


def test_a_private_key_file_is_imported_into_the_keyring(peer, real_keyring, isolated_home: Path, tmp_path: Path):
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home)}
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    key_file = tmp_path / "client.pem"
    key_file.write_text(pem)
    added = run(["servers", "add", "svc", "--url", peer.mcp_url, "--grant", "client_credentials",
                 "--client-id", "machine", "--private-key", str(key_file)], env)
    assert added.returncode == 0, added.stderr
    key_file.unlink()  # imported: the file is no longer needed
    body = pem.splitlines()[1]
    assert files_holding(isolated_home, body) == []

    tools = run(["tools", "svc"], env)
    assert tools.returncode == 0 and "whoami" in tools.stdout, tools.stderr
    [token_request] = peer.requests_to("/token")
    assert token_request.form["grant_type"] == "client_credentials"
    assert token_request.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert files_holding(isolated_home, body) == []


def test_sign_in_options_are_checked_before_anything_is_stored(real_keyring, isolated_home: Path):
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home)}
    no_secret = run(["servers", "add", "a", "--url", "https://example.test/mcp", "--grant", "client_credentials",
                     "--client-id", "m", "--client-secret-stdin"], env, stdin="")
    assert no_secret.returncode == 2 and "no client secret" in no_secret.stderr
    no_client = run(["servers", "add", "a", "--url", "https://example.test/mcp", "--grant", "client_credentials"], env)
    assert no_client.returncode == 2 and "client id" in no_client.stderr
    stdio = run(["servers", "add", "a", "--command", "srv", "--dpop"], env)
    assert stdio.returncode == 2 and "HTTP servers" in stdio.stderr
    assert json.loads(run(["servers", "list", "--json"], env).stdout) == []


def test_the_engine_signs_in_with_the_configured_settings(isolated_home: Path):
    cfg = ServerConfig("svc", "http", url="https://example.test/mcp",
                       auth={"grant": "jwt_bearer", "client_id": "w", "assertion_file": "/run/token", "dpop": True})
    settings = getattr(server_auth(cfg, {}), "settings", None)
    assert settings is not None
    assert (settings.grant, settings.client_id, settings.assertion_file, settings.dpop) == (
        "jwt_bearer", "w", "/run/token", True)
    plain = getattr(server_auth(ServerConfig("plain", "http", url="https://example.test/mcp"), {}), "settings", None)
    assert plain is not None and plain.grant == "authorization_code"
