"""An answer to an id nobody asked for is logged, counted on the session and quoted
without its secrets, over stdio and over Streamable HTTP (tests/support/hostile_server.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from hostapp.engine.session import ClientSession
from hostapp.protocol.jsonrpc import Response
from hostapp.transport.http import StreamableHttpTransport
from hostapp.transport.stdio import StdioTransport
from tests.support.hostile_server import SECRET, stdio_command


@pytest.fixture(params=["stdio", "http"])
def transport(request, hostile_url):
    if request.param == "stdio":
        command = stdio_command()
        return StdioTransport(command[0], command[1:])
    return StreamableHttpTransport(hostile_url, standalone_stream=False)


async def test_a_stray_answer_is_counted_logged_and_quoted_without_secrets(transport, caplog):
    session = ClientSession(transport)
    await session.connect("2025-06-18")
    try:
        assert session.stray_answers.count == 0
        with caplog.at_level(logging.WARNING, logger="hostapp.engine.session"):
            result = await asyncio.wait_for(session.call_tool("stray"), 10)
        assert result["content"][0]["text"] == "after the stray"
        stray = session.stray_answers
        assert stray.count == 1
        assert stray.last_id in ("2-stray", 1002)  # stdio and HTTP number differently
        assert '"secret":"<redacted>"' in stray.last and SECRET not in stray.last
        [record] = [r for r in caplog.records if "not pending" in r.getMessage()]
        assert record.levelno == logging.WARNING
        assert repr(stray.last_id) in record.getMessage() and SECRET not in record.getMessage()
    finally:
        await session.close()


async def test_the_late_answer_of_a_request_given_up_is_no_stray(transport):
    session = ClientSession(transport)
    await session.connect("2025-06-18")
    try:
        with pytest.raises(TimeoutError):
            await session.request("tools/call", {"name": "silent"}, timeout=0.2)
        rid = session.ids.next() - 1
        # as if the server answered after all
        session.on_message(Response(rid, {}))
        assert session.stray_answers.count == 0
    finally:
        await session.close()
