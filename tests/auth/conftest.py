"""Fixtures for the auth tests: a protected MCP server with its authorization server, a real keyring."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "support" / "oauth_test_server.py"


class OAuthTestServer:
    """The subprocess of tests/support/oauth_test_server.py and its test hooks."""

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.mcp_url = f"{base_url}/mcp"

    def admin(self, hook: str, method: str = "POST", json: dict | None = None):
        response = httpx.request(method, f"{self.base_url}/admin/{hook}", json=json, timeout=10)
        response.raise_for_status()
        return response.json()

    def issued(self) -> list[str]:
        """Every token, code and client secret the server handed out."""
        return self.admin("issued", "GET")

    def stats(self) -> dict[str, int]:
        return self.admin("stats", "GET")


@pytest.fixture
def oauth_server() -> Iterator[OAuthTestServer]:
    process = subprocess.Popen([sys.executable, str(SERVER_SCRIPT)], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith("PORT "):
            pytest.fail(f"the OAuth test server did not start (said {line!r})")
        yield OAuthTestServer(f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
