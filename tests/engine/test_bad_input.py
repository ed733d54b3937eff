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


async def test_a_request_whose_session_closes_while_it_is_sent_leaves_no_unretrieved_failure(tmp_path):
    """The session closed (its server gone, or the agent stopping) while a request was still
    being sent: the close failed the answer it waited for, and the send failed too. The
    caller hears the send's error; the answer's failure was left unread, and asyncio
    reported each such request as an exception never retrieved (three lines in the agent's
    log for each of 10,000 polls in flight at a stop)."""
    import asyncio
    import gc

    from hostapp.engine.connections import make_transport
    from hostapp.store.server_config import ServerConfig
    from hostapp.transport.base import TransportError
    from tests.support.faults import LabProcess, LoopbackProxy

    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    proxy = LoopbackProxy(lab.port).start()
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    default = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context.get("message", "")))
    try:
        cfg = ServerConfig(name="lab", transport="http", url=f"http://127.0.0.1:{proxy.port}/mcp")
        session = ClientSession(make_transport(cfg), Watch())
        await session.connect()
        held = proxy.hold(lambda r: r.rpc_method == "ping")
        ping = asyncio.ensure_future(session.request("ping", {}))
        for _ in range(500):
            if held.arrived() is not None:
                break
            await asyncio.sleep(0.01)
        assert held.arrived() is not None and not ping.done()  # sent, and no answer yet
        session.on_closed(None)  # the connection is gone: what it waited for fails...
        await session.close()    # ...and so does the send still under way
        with pytest.raises((TransportError, ConnectionLost)):
            await asyncio.wait_for(ping, 30)
        del ping
        gc.collect()
        await asyncio.sleep(0)
        assert not [m for m in reported if "never retrieved" in m], reported
    finally:
        loop.set_exception_handler(default)
        proxy.stop()
        lab.stop()
