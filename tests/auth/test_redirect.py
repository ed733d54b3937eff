"""The loopback redirect listener: 127.0.0.1, a random port, only the expected ``state``."""

from __future__ import annotations

import asyncio

import httpx

from hostapp.auth.redirect import LoopbackRedirectListener
from tests.support.waiting import until_async


async def test_only_the_callback_with_the_expected_state_completes_the_sign_in():
    opened: list[str] = []
    listener = LoopbackRedirectListener(open_url=opened.append, timeout=10)
    redirect_uri = await listener.prepare()
    url = httpx.URL(redirect_uri)
    assert url.host == "127.0.0.1" and url.path == "/callback" and url.port
    waiting = asyncio.create_task(listener.authorize("https://auth.example/authorize?x=1", "expected-state"))
    try:
        async with httpx.AsyncClient(timeout=5) as browser:
            await until_async(lambda: opened, what="the browser to be opened")
            assert opened == ["https://auth.example/authorize?x=1"]
            forged = await browser.get(redirect_uri, params={"code": "c1", "state": "forged"})
            assert forged.status_code == 400
            assert not waiting.done()
            elsewhere = await browser.get(str(url.copy_with(path="/other")))
            assert elsewhere.status_code == 404
            good = await browser.get(redirect_uri, params={"code": "c2", "state": "expected-state", "iss": "i"})
            assert good.status_code == 200
            assert "close this tab" in good.text
        answer = await asyncio.wait_for(waiting, 5)
        assert answer == {"code": "c2", "state": "expected-state", "iss": "i"}
    finally:
        await listener.close()


async def test_the_registered_port_is_reused_when_it_is_free():
    first = LoopbackRedirectListener(open_url=lambda url: None)
    uri = await first.prepare()
    await first.close()
    second = LoopbackRedirectListener(open_url=lambda url: None)
    try:
        assert await second.prepare(uri) == uri
        # Taken: any other free port.
        third = LoopbackRedirectListener(open_url=lambda url: None)
        try:
            other = await third.prepare(uri)
            assert other != uri and other.startswith("http://127.0.0.1:")
        finally:
            await third.close()
    finally:
        await second.close()
