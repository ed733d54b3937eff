"""The address a sign-in opens comes from the server's metadata, so it is checked.

The authorization server (tests/support/oauth_test_server.py, told to name other
endpoints) may name any scheme; the OS opener runs whatever handles a scheme (a
``file:`` URL to a ``.desktop`` file, ``ShellExecute`` on Windows). Only ``https``, or
``http`` on this machine, is handed out; and a sign-in the person walked away from does
not block the next one, nor outlive its server.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from hostapp.engine import api, open_engine


@pytest.fixture
async def engine(real_keyring, isolated_home: Path, oauth_server):
    engine = open_engine(isolated_home, connect=False)
    await engine.add_server(api.ServerConfig(name="protected", transport="http", url=oauth_server.mcp_url))
    try:
        yield engine
    finally:
        await engine.stop()


@pytest.mark.parametrize(("endpoint", "said"), [
    ("file:///tmp/payload.desktop?x=1", "file: address, not https"),
    ("javascript:alert(1)", "javascript: address, not https"),
    ("ms-settings:privacy", "ms-settings: address, not https"),
    ("http://auth.example/authorize", "plain http on another machine"),
    ("https://bank.example@evil.example/authorize", "user name before its host"),
    ("https://auth.example/authorize\n", "not a single address"),
])
async def test_an_authorization_endpoint_that_is_not_https_is_never_handed_out(
        engine, oauth_server, endpoint: str, said: str):
    oauth_server.admin("metadata", json={"authorization_endpoint": endpoint})
    with pytest.raises(api.SignInFailed, match=said):
        await engine.begin_sign_in("protected")


async def test_a_plain_http_token_endpoint_elsewhere_is_refused_before_any_secret_goes_there(engine, oauth_server):
    oauth_server.admin("metadata", json={"token_endpoint": "http://auth.example/token"})
    with pytest.raises(api.SignInFailed, match=r"token endpoint .* plain http"):
        await engine.begin_sign_in("protected")


def _redirect_port(url: str) -> int:
    redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
    port = urlsplit(redirect).port
    assert port is not None
    return port


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    except ConnectionRefusedError:
        return False
    return True


async def test_a_sign_in_asked_again_or_whose_server_is_removed_is_released(engine, oauth_server):
    oauth_server.admin("metadata", json={"authorization_endpoint": "https://auth.example/authorize"})
    first = await engine.begin_sign_in("protected")
    assert first.startswith("https://auth.example/authorize?")
    waiting = asyncio.ensure_future(engine.finish_sign_in("protected"))
    await asyncio.sleep(0)  # the waiter is waiting before what follows

    # The person closed the tab and asks again: a new sign-in, the old one given up.
    second = await engine.begin_sign_in("protected")
    assert second.startswith("https://auth.example/authorize?") and second != first
    with pytest.raises(api.SignInFailed, match="given up"):
        await asyncio.wait_for(waiting, 60)
    assert _listening(_redirect_port(second))  # (the registered redirect port, used again)

    waiting = asyncio.ensure_future(engine.finish_sign_in("protected"))
    await asyncio.sleep(0)  # the waiter is waiting before what follows
    assert await engine.forget_server("protected") == []
    with pytest.raises(api.SignInFailed, match="given up"):
        await asyncio.wait_for(waiting, 60)
    assert not _listening(_redirect_port(second))

    # The same name added again signs in at once, not ten minutes later.
    await engine.add_server(api.ServerConfig(name="protected", transport="http", url=oauth_server.mcp_url))
    assert (await engine.begin_sign_in("protected")).startswith("https://auth.example/authorize?")
