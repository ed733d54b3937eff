"""The supervisor's view of a server that needs sign-in, before and after signing in."""

from __future__ import annotations

import asyncio

from hostapp.auth import LoopbackRedirectListener, TokenStore, login
from hostapp.engine import api
from hostapp.engine.session import ClientHandlers
from hostapp.engine.supervisor import ServerConnection
from hostapp.store.journal import ServerConfig
from hostapp.store.secrets import SecretStore
from tests.auth.test_sign_in import Browser


async def test_needs_sign_in_until_signed_in_then_connected(oauth_server, real_keyring, isolated_home):
    secrets = SecretStore(isolated_home)
    cfg = ServerConfig(name="protected", transport="http", url=oauth_server.mcp_url, protocol_version="2025-11-25")
    views: list[api.ServerView] = []
    ready = asyncio.Event()

    async def on_ready(conn, session) -> None:
        ready.set()

    conn = ServerConnection(cfg, secret_store=secrets, handlers_factory=lambda c, scope=None: ClientHandlers(),
                            capabilities={}, on_change=views.append, on_ready=on_ready)
    conn.start()
    try:
        await asyncio.wait_for(conn.attempted.wait(), 20)
        assert conn.view.state == api.NEEDS_SIGN_IN
        assert conn.view.error == "the server needs sign-in"
        assert "token" not in oauth_server.stats() and "authorization_code" not in oauth_server.stats()

        browser = Browser()
        await login("protected", oauth_server.mcp_url, TokenStore(secrets),
                    LoopbackRedirectListener(open_url=browser.open, timeout=30))
        conn.reconnect_now()
        await asyncio.wait_for(ready.wait(), 20)
        assert conn.view.state == api.CONNECTED
    finally:
        await conn.stop()
