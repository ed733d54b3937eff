"""Bad input from a server gets a clear error and leaves the client usable.

The server is a real process (tests/support/misbehaving_server.py) speaking over stdio
to the real session and transport; the elicitation case also runs the whole CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hostapp.engine.session import ClientHandlers, ClientSession
from hostapp.protocol.jsonrpc import ProtocolError
from hostapp.transport.base import ConnectionLost, ServerExited
from hostapp.transport.stdio import StdioTransport
from tests.support.peers import events, hostapp

SERVER = Path(__file__).resolve().parents[1] / "support" / "misbehaving_server.py"


class Watch(ClientHandlers):
    def __init__(self) -> None:
        self.errors: list[Exception] = []

    def on_protocol_error(self, error: Exception) -> None:
        self.errors.append(error)


async def open_session(handlers: ClientHandlers) -> ClientSession:
    session = ClientSession(StdioTransport(sys.executable, [str(SERVER)]), handlers)
    info = await session.connect()
    assert info.protocol_version == "2025-06-18"  # discover refused, counter-offer accepted
    return session


async def test_garbage_stray_answers_and_unknown_progress_are_survived():
    watch = Watch()
    session = await open_session(watch)
    seen: list[float] = []
    try:
        result = await session.call_tool("noisy", {}, on_progress=lambda p, t, m: seen.append(p))
        assert result["content"][0]["text"] == "noisy done"
        assert seen == [1, 5, 6]  # the backwards 3 was dropped
        messages = [str(e) for e in watch.errors]
        assert any("malformed JSON" in m for m in messages), messages
        assert any("424242" in m and "not pending" in m for m in messages), messages
        assert any("unknown token 'nobody-asked'" in m for m in messages), messages
        assert all(isinstance(e, ProtocolError) for e in watch.errors)
        # still usable
        await session.ping()
        assert [t["name"] for t in await session.list_tools()] == ["noisy", "bad_schema", "die", "replayed_question"]
    finally:
        await session.close()


async def test_server_exiting_mid_call_is_a_clear_error_with_its_last_words():
    session = await open_session(Watch())
    try:
        with pytest.raises(ConnectionLost) as info:
            await session.call_tool("die", {})
        assert isinstance(info.value, ServerExited) and info.value.returncode == 7
        assert "out of disk space" in str(info.value)
    finally:
        await session.close()


def test_invalid_elicitation_schema_is_refused_and_the_call_completes(isolated_home):
    added = hostapp("servers", "add", "bad", "--command", sys.executable, "--arg", str(SERVER), home=isolated_home)
    assert added.returncode == 0, added.stderr
    proc = hostapp("call", "bad", "bad_schema", "--json", home=isolated_home)
    assert proc.returncode == 0, proc.stderr
    evs = events(proc)
    answer = json.loads(evs[-1]["result"]["content"][0]["text"])
    # The server was told, with the reason; nobody was asked a question that cannot be shown.
    assert answer["error"]["code"] == -32602
    assert "address" in answer["error"]["message"]
    assert not [e for e in evs if e["event"] == "elicitation"]


def test_server_dying_mid_call_through_the_cli(isolated_home):
    hostapp("servers", "add", "bad", "--command", sys.executable, "--arg", str(SERVER), home=isolated_home)
    proc = hostapp("call", "bad", "die", "--json", home=isolated_home)
    assert proc.returncode == 1
    last = events(proc)[-1]
    assert last["event"] == "error"
    ops = json.loads(hostapp("ops", "--json", home=isolated_home).stdout)
    # Outcome unknown (it may have run), never re-run behind the person's back.
    assert [o["status"] for o in ops] == ["unknown"]


async def test_a_replayed_server_request_is_answered_once():
    # A server that replays its stream (server-everything replays every stream of a
    # session) may send a question again under the id it already used: one answer only.
    session = await open_session(Watch())
    try:
        result = await session.call_tool("replayed_question", {})
        assert result["content"][0]["text"] == "answers to ask-2: 1"
    finally:
        await session.close()
