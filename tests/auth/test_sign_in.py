"""Signing in to a protected MCP server, refreshing, and losing the sign-in, end to end.

The peer is tests/support/oauth_test_server.py in its own process on 127.0.0.1; tokens
go to a real Secret Service (gnome-keyring on a private bus); requests go through the
host's own transport and session.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import httpx
import pytest

from hostapp.auth import (
    LoopbackRedirectListener,
    McpOAuth,
    SignInRequired,
    TokenStore,
    logout,
)
from hostapp.engine.session import ClientHandlers, ClientSession
from hostapp.store.secrets import SecretStore
from hostapp.transport.http import StreamableHttpTransport

VERSION = "2025-11-25"


class Browser:
    """Plays the person's browser: opens the authorization URL and follows its redirects."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self._tasks: set[asyncio.Task] = set()

    def open(self, url: str) -> None:
        self.opened.append(url)
        task = asyncio.get_running_loop().create_task(self._visit(url))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _visit(url: str) -> None:
        # Another process, like a real browser: what it logs is not the host's log.
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import httpx, sys; httpx.get(sys.argv[1], follow_redirects=True, timeout=10)", url)
        await process.wait()


def token_store(home: Path) -> TokenStore:
    return TokenStore(SecretStore(home))


async def use_server(url: str, auth: McpOAuth) -> str:
    """Connect, list the tools and call one; the call's text."""
    transport = StreamableHttpTransport(url, auth=auth, standalone_stream=False)
    session = ClientSession(transport, ClientHandlers())
    try:
        await session.connect(VERSION)
        tools = await session.list_tools()
        result = await session.call_tool(tools[0]["name"], {})
        return result["content"][0]["text"]
    finally:
        await session.close()


async def sign_in(oauth_server, home: Path) -> tuple[TokenStore, Browser]:
    store, browser = token_store(home), Browser()
    auth = McpOAuth("protected", oauth_server.mcp_url, store,
                    redirect_handler=LoopbackRedirectListener(open_url=browser.open, timeout=30))
    assert await use_server(oauth_server.mcp_url, auth) == "signed in"
    return store, browser


async def test_sign_in_through_the_browser_and_the_loopback_redirect(oauth_server, real_keyring, isolated_home):
    store, browser = await sign_in(oauth_server, isolated_home)
    assert len(browser.opened) == 1
    url = httpx.URL(browser.opened[0])
    assert url.params["code_challenge_method"] == "S256"
    assert url.params["resource"] == oauth_server.mcp_url
    assert url.params["redirect_uri"].startswith("http://127.0.0.1:")
    # The challenge's scope, plus offline_access since the authorization server offers it.
    assert url.params["scope"].split() == ["mcp:tools", "offline_access"]
    assert store.signed_in("protected")
    client = store.load_client("protected")
    assert client is not None and client.client_secret in oauth_server.issued()


async def test_a_restarted_host_refreshes_without_asking_anyone(oauth_server, real_keyring, isolated_home):
    await sign_in(oauth_server, isolated_home)
    oauth_server.admin("expire")  # every access token is now refused
    # A new process: only the keyring and the sidecar remain; nobody can sign in.
    restarted = McpOAuth("protected", oauth_server.mcp_url, token_store(isolated_home), redirect_handler=None)
    assert await use_server(oauth_server.mcp_url, restarted) == "signed in"
    assert oauth_server.stats().get("refresh_token") == 1


async def test_a_revoked_refresh_token_ends_in_needs_sign_in(oauth_server, real_keyring, isolated_home, caplog):
    caplog.set_level(logging.DEBUG)
    store, _ = await sign_in(oauth_server, isolated_home)
    oauth_server.admin("expire")
    oauth_server.admin("revoke")
    restarted = McpOAuth("protected", oauth_server.mcp_url, store, redirect_handler=None)
    with pytest.raises(SignInRequired) as raised:
        await use_server(oauth_server.mcp_url, restarted)
    assert raised.value.server_name == "protected"
    assert oauth_server.stats().get("refresh_token") == 1  # tried once, no loop
    assert not store.signed_in("protected")
    # Asking again does not knock on the token endpoint again: straight to "needs sign-in".
    with pytest.raises(SignInRequired):
        await use_server(oauth_server.mcp_url, restarted)
    assert oauth_server.stats().get("refresh_token") == 1

    secrets = oauth_server.issued()
    assert secrets
    texts = [str(raised.value), repr(raised.value), caplog.text]
    for path in isolated_home.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    leaks = [s for s in secrets for text in texts if s in text]
    assert not leaks, "a token, code or client secret left the keyring"


async def test_sign_out_removes_the_secrets_from_the_keyring(oauth_server, real_keyring, isolated_home):
    store, _ = await sign_in(oauth_server, isolated_home)
    refs = [ref for ref in _refs(store.path.read_text())]
    assert refs and all(store.secrets.get(ref) for ref in refs)
    await logout("protected", store)
    assert not store.signed_in("protected")
    backend = real_keyring.backend()
    from hostapp.store.secrets import keyring_key

    assert all(backend.get_password(*keyring_key(store.secrets.scope, ref)) is None for ref in refs)


def _refs(text: str) -> list[str]:
    import re

    return re.findall(r"oauth_[a-z_]+:[0-9a-f]{32}", text)


async def test_an_answer_in_flight_is_fetched_with_a_refreshed_token(oauth_server, real_keyring, isolated_home):
    store, _ = await sign_in(oauth_server, isolated_home)
    # A restarted host with only the keyring; the server drops the call's stream and
    # expires the token, so the resumption GET is refused once and must be refreshed.
    auth = McpOAuth("protected", oauth_server.mcp_url, store, redirect_handler=None)
    transport = StreamableHttpTransport(oauth_server.mcp_url, auth=auth, standalone_stream=False)
    session = ClientSession(transport, ClientHandlers())
    try:
        await session.connect(VERSION)
        result = await asyncio.wait_for(session.call_tool("slow", {}), 20)
    finally:
        await session.close()
    assert result["content"][0]["text"] == "slow done"
    assert oauth_server.stats().get("refresh_token") == 1


async def test_a_preregistered_client_refreshes_after_a_restart(oauth_server, real_keyring, isolated_home):
    from hostapp.auth import PreregisteredClient

    browser = Browser()
    listener = LoopbackRedirectListener(open_url=browser.open, timeout=30)
    redirect_uri = await listener.prepare()
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{oauth_server.base_url}/register", json={"redirect_uris": [redirect_uri]})
    registered = answer.json()
    configured = PreregisteredClient(registered["client_id"], registered["client_secret"])
    store = token_store(isolated_home)
    first = McpOAuth("protected", oauth_server.mcp_url, store, redirect_handler=listener, preregistered=configured)
    assert await use_server(oauth_server.mcp_url, first) == "signed in"
    assert httpx.URL(browser.opened[0]).params["client_id"] == registered["client_id"]

    oauth_server.admin("expire")
    restarted = McpOAuth("protected", oauth_server.mcp_url, store, redirect_handler=None, preregistered=configured)
    assert await use_server(oauth_server.mcp_url, restarted) == "signed in"
    assert oauth_server.stats().get("refresh_token") == 1


async def test_a_token_about_to_expire_is_refreshed_before_the_request(oauth_server, real_keyring, isolated_home):
    oauth_server.admin("lifetime?seconds=0")  # due for a refresh from the start
    store, _ = await sign_in(oauth_server, isolated_home)
    oauth_server.admin("lifetime?seconds=3600")
    before = oauth_server.stats()
    refused, refreshed = before["refused"], before.get("refresh_token", 0)
    restarted = McpOAuth("protected", oauth_server.mcp_url, store, redirect_handler=None)
    assert await use_server(oauth_server.mcp_url, restarted) == "signed in"
    stats = oauth_server.stats()
    assert stats.get("refresh_token") == refreshed + 1  # once: the new token lives an hour
    assert stats["refused"] == refused  # refreshed before sending, not after a 401
