"""What every transport declares to the engine (hostapp.transport.base), as each one keeps it."""

from __future__ import annotations

import sys

import pytest

from hostapp.transport.base import TransportError
from hostapp.transport.http import StreamableHttpTransport
from hostapp.transport.stdio import StdioTransport


async def test_stdio_has_no_session_and_no_stream_to_resume():
    transport = StdioTransport(sys.executable, ["-c", "pass"])
    assert transport.session_id is None and not transport.stateless
    assert not transport.can_resume_streams
    with pytest.raises(TransportError):
        await transport.resume_stream(1, "event-1")
    transport.reopen_standalone_stream()  # nothing to reopen: no error


async def test_streamable_http_resumes_streams_except_in_the_stateless_era():
    transport = StreamableHttpTransport("http://127.0.0.1:9/mcp", standalone_stream=False)
    assert transport.can_resume_streams and not transport.stateless
    transport.reopen_standalone_stream()  # it keeps no standalone stream: nothing is opened
    transport.set_protocol_version("2026-07-28", stateless=True)
    assert transport.stateless
    with pytest.raises(TransportError):  # refused before anything is sent
        await transport.resume_stream(1, "event-1")
    await transport.close()
