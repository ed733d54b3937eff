"""A restarted HTTP server forgets its sessions: the next request carrying the old
``Mcp-Session-Id`` is answered 404, which the specification defines as "the session is
gone, and this request was not processed". The host starts a new session with a fresh
``initialize``, sends that request again exactly once on it, and says so on the server's
row. Real third-party servers (the TypeScript SDK's example server, the Python `mcp`
SDK), restarted on the same port; a real keyring.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.engine.session import ClientSession
from hostapp.store.journal import ServerConfig
from hostapp.store.paths import journal_path
from tests.engine.conftest import Recorder
from tests.support.faults import HeldRequest, LoopbackProxy
from tests.support.peers import Peer, start_sdk_work_server, start_ts_example_server
from tests.support.sdk_work_server import records
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(180)


async def start_engine(home: Path, recorder: Recorder, url: str, version: str | None) -> Engine:
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="peer", transport="http", url=url, protocol_version=version))
    await engine.connected("peer")
    return engine


async def finished(engine: Engine, op_id: str) -> api.OperationView:
    return await asyncio.wait_for(engine.wait_finished(op_id), 60)


@pytest.fixture
def ts_peer() -> Iterator[tuple[Peer, LoopbackProxy]]:
    """The TypeScript SDK's example server, behind a proxy that sees every request."""
    peer = start_ts_example_server()
    proxy = LoopbackProxy(peer.port).start()
    yield peer, proxy
    proxy.stop()
    peer.stop()


@pytest.fixture
def sdk_peer(tmp_path: Path) -> Iterator[tuple[Peer, LoopbackProxy, Path]]:
    """The `mcp` SDK's work server, behind a proxy that sees (and can hold) every request,
    and the file where the server records each run of its tool."""
    record = tmp_path / "record.txt"
    peer = start_sdk_work_server(record)
    proxy = LoopbackProxy(peer.port).start()
    yield peer, proxy, record
    proxy.stop()
    peer.stop()


def session_of(engine: Engine) -> str | None:
    session = engine.connections["peer"].session
    return session.transport.session_id if session is not None else None


async def restarted_holding_its_stream(engine: Engine, peer: Peer, proxy: LoopbackProxy,
                                       first_seconds: float) -> tuple[HeldRequest, ClientSession]:
    """A first call completes in the session the host has then (returned); the server
    restarts, and the standalone stream's request asking for it again is held, not yet
    answered 404 (returned, to be released when the test says)."""
    first = await engine.start_call("peer", "work", {"seconds": first_seconds, "tag": "before"})
    assert (await finished(engine, first.id)).status == api.COMPLETED
    old = engine.connections["peer"].session
    assert old is not None
    stream = proxy.hold(lambda r: r.method == "GET")
    await asyncio.to_thread(peer.restart)
    await until_async(stream.arrived, what="the standalone stream asked for again")
    return stream, old


async def restarted_after_a_greeting(engine: Engine, peer: Peer) -> ClientSession:
    """A first call completes in the session the host has then (returned); the server
    restarts, forgetting it."""
    first = await engine.start_call("peer", "greet", {"name": "before"})
    assert (await finished(engine, first.id)).status == api.COMPLETED
    old = engine.connections["peer"].session
    assert old is not None
    await asyncio.to_thread(peer.restart)
    return old


def sessions_sent_in(proxy: LoopbackProxy, tag: str) -> list[str | None]:
    """The session id of each ``work`` call tagged ``tag`` that reached the server, in order."""
    return [r.headers.get("mcp-session-id") for r in proxy.requests
            if r.rpc_method == "tools/call" and r.message["params"]["arguments"].get("tag") == tag]


def renewed_of(recorder: Recorder, op_id: str) -> list[dict]:
    """What the operation's timeline said when its call went out again in a new session."""
    return [data for oid, kind, data in recorder.events if oid == op_id and kind == api.EVENT_SESSION_RENEWED]


async def test_ts_sdk_server_restarted_call_goes_out_once_on_a_new_session(isolated_home, real_keyring, ts_peer):
    peer, proxy = ts_peer
    recorder = Recorder()
    engine = await start_engine(isolated_home, recorder, proxy.url(), None)
    try:
        old_session = (await restarted_after_a_greeting(engine, peer)).transport.session_id
        ops = {}
        for name in ("after", "again"):
            op = ops[name] = await engine.start_call("peer", "greet", {"name": name})
            final = await finished(engine, op.id)
            assert final.status == api.COMPLETED, final.error
            assert final.result["content"][0]["text"] == f"Hello, {name}!"
        renewed = renewed_of(recorder, ops["after"].id)
        new_session = session_of(engine)
        assert new_session not in (None, old_session)
        view = engine.connections["peer"].view
        assert view.state == api.CONNECTED
        assert view.note is not None and "restarted" in view.note and "new session" in view.note
    finally:
        await engine.stop()
    calls = [r for r in proxy.requests if r.rpc_method == "tools/call"]
    after = [r for r in calls if r.message["params"]["arguments"]["name"] == "after"]
    sent_in = [r.headers.get("mcp-session-id") for r in after]
    if sent_in == [old_session, new_session]:
        # Once in the forgotten session (answered 404, not processed), once in the new one:
        # the call's timeline says it went out again, and why.
        assert len(renewed) == 1 and "had not processed the call" in renewed[0]["message"]
    else:
        # The engine noticed the loss first (its standalone stream's 404) and sent the call
        # once, in the new session: nothing to say on its timeline.
        assert sent_in == [new_session] and renewed == [], (sent_in, renewed)
    again = [r for r in calls if r.message["params"]["arguments"]["name"] == "again"]
    assert [r.headers.get("mcp-session-id") for r in again] == [new_session]
    assert [r.rpc_method for r in proxy.requests].count("initialize") == 2


async def test_python_sdk_server_restarted_call_runs_once(isolated_home, real_keyring, tmp_path):
    record = tmp_path / "record.txt"
    peer: Peer = start_sdk_work_server(record)
    recorder = Recorder()
    try:
        engine = await start_engine(isolated_home, recorder, peer.url, "2025-11-25")
        try:
            first = await engine.start_call("peer", "work", {"seconds": 0.2, "tag": "before"})
            assert (await finished(engine, first.id)).status == api.COMPLETED
            await asyncio.to_thread(peer.restart)
            op = await engine.start_call("peer", "work", {"seconds": 0.3, "tag": "after"})
            final = await finished(engine, op.id)
            assert final.status == api.COMPLETED, final.error
            view = engine.connections["peer"].view
            assert view.state == api.CONNECTED and "new session" in (view.note or "")
        finally:
            await engine.stop()
        assert records(record) == ["start before", "end before", "start after", "end after"]
    finally:
        peer.stop()


async def test_python_sdk_server_restarted_call_in_flight_as_the_session_is_replaced_runs_once(
        isolated_home, real_keyring, sdk_peer):
    # The call goes out in the old session just after the restart, and is still on its
    # way when the host learns (its standalone stream's 404) that the server forgot the
    # session and replaces it. Closing the old session must not cut the call's POST: the
    # server answers it 404 (not processed), and it goes out again once, in the new session.
    peer, proxy, record = sdk_peer
    recorder = Recorder()
    engine = await start_engine(isolated_home, recorder, proxy.url(), "2025-11-25")
    try:
        stream, old = await restarted_holding_its_stream(engine, peer, proxy, first_seconds=0.2)
        old_session = old.transport.session_id  # (kept until the held stream brings its 404)
        call = proxy.hold(lambda r: r.rpc_method == "tools/call")
        op = await engine.start_call("peer", "work", {"seconds": 0.3, "tag": "after"})
        assert (await until_async(call.arrived, what="the call on its way")).headers["mcp-session-id"] \
            == old_session
        stream.release()  # its 404: the server forgot the session, which is replaced
        await until_async(lambda: proxy.rpc_methods().count("initialize") == 2, what="a new session")
        call.release()
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED, final.error
        new_session = session_of(engine)
    finally:
        await engine.stop()
    assert records(record) == ["start before", "end before", "start after", "end after"]
    assert sessions_sent_in(proxy, "after") == [old_session, new_session] and new_session != old_session
    renewed = renewed_of(recorder, op.id)
    assert len(renewed) == 1 and "had not processed the call" in renewed[0]["message"]


async def test_a_replaced_sessions_late_404_does_not_drop_the_new_session(isolated_home, real_keyring, sdk_peer):
    # The call's 404 ends the forgotten session and a new one is made; only then does the
    # old session's standalone stream get its own 404. That is old news: the new session
    # stays, and the next call goes out in it.
    peer, proxy, record = sdk_peer
    engine = await start_engine(isolated_home, Recorder(), proxy.url(), "2025-11-25")
    try:
        stream, old = await restarted_holding_its_stream(engine, peer, proxy, first_seconds=0.1)
        op = await engine.start_call("peer", "work", {"seconds": 0.1, "tag": "after"})
        assert (await finished(engine, op.id)).status == api.COMPLETED
        new_session = session_of(engine)
        stream.release()  # the old session's stream: 404
        standalone = old.transport._standalone_task  # type: ignore[attr-defined]
        await until_async(lambda: standalone is None or standalone.done(), what="the late 404 taken")
        again = await engine.start_call("peer", "work", {"seconds": 0.1, "tag": "again"})
        assert (await finished(engine, again.id)).status == api.COMPLETED
        assert session_of(engine) == new_session
        assert proxy.rpc_methods().count("initialize") == 2
    finally:
        await engine.stop()
    assert records(record) == [f"{e} {tag}" for tag in ("before", "after", "again") for e in ("start", "end")]


class _JournalHeldUntilReconnecting(Recorder):
    """Holds the journal's write lock (as another process writing would) from ``hold()``
    until the server's row first leaves ``connected``: by then the engine has heard of
    the loss, and making the next session needs the journal again."""

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self._journal = journal
        self._busy: sqlite3.Connection | None = None

    def hold(self) -> None:
        self._busy = sqlite3.connect(self._journal, isolation_level=None)
        self._busy.execute("BEGIN IMMEDIATE")

    def server_changed(self, server: api.ServerView) -> None:
        super().server_changed(server)
        if self._busy is not None and server.state != api.CONNECTED:
            self._busy.execute("COMMIT")
            self._busy.close()
            self._busy = None


async def test_python_sdk_server_restarted_as_a_call_is_being_sent_it_goes_out_once_in_the_new_session(
        isolated_home, real_keyring, sdk_peer):
    # The call has taken the session and is committing its request id (the journal is
    # slow: another process holds its write lock) when the standalone stream's 404 says
    # the server forgot the session. Nothing has gone out yet, so nothing may be "unknown":
    # the call goes out once, in the new session.
    peer, proxy, record = sdk_peer
    recorder = _JournalHeldUntilReconnecting(journal_path(isolated_home))
    engine = await start_engine(isolated_home, recorder, proxy.url(), "2025-11-25")
    try:
        stream, _ = await restarted_holding_its_stream(engine, peer, proxy, first_seconds=0.2)
        op = await engine.start_call("peer", "work", {"seconds": 0.3, "tag": "after"})
        recorder.hold()  # before the call takes its turn: its commits wait from now on
        stream.release()  # its 404: the server forgot the session
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED, final.error
        new_session = session_of(engine)
    finally:
        await engine.stop()
    assert records(record) == ["start before", "end before", "start after", "end after"]
    assert sessions_sent_in(proxy, "after") == [new_session]
    assert [data["message"] for data in renewed_of(recorder, op.id)] == [
        "the server no longer knew the session (it restarted, or ended it) before the call went out; "
        "sent in a new session"]


async def test_ts_sdk_server_restarted_operations_of_the_old_session_end_by_their_truth(isolated_home, real_keyring,
                                                                                      ts_peer):
    # A task the restarted server no longer knows, and an SSE stream of the vanished
    # session: neither can be carried on, and each says why; nothing is sent again.
    peer, proxy = ts_peer
    recorder = Recorder()
    engine = await start_engine(isolated_home, recorder, proxy.url(), None)
    try:
        task = await engine.start_call("peer", "delay", {"duration": 20000})
        stream = await engine.start_call("peer", "start-notification-stream", {"interval": 200, "count": 100})
        await until_async(lambda: engine.journal.get_operation(task.id).handle_ref
                          and engine.journal.get_operation(stream.id).handle_ref, 30, what="both handles committed")
        await asyncio.to_thread(peer.restart)
        ended_task, ended_stream = await finished(engine, task.id), await finished(engine, stream.id)
        assert ended_task.status == api.UNKNOWN
        assert "no longer knows the task" in ended_task.error["message"]
        assert ended_stream.status == api.UNKNOWN
        assert "no longer knows the HTTP session" in ended_stream.error["message"]
        again = await engine.start_call("peer", "greet", {"name": "next"})
        assert (await finished(engine, again.id)).status == api.COMPLETED
    finally:
        await engine.stop()
    calls = [r.message["params"]["name"] for r in proxy.requests if r.rpc_method == "tools/call"]
    assert calls == ["delay", "start-notification-stream", "greet"]


async def test_cancel_stops_the_handler_of_a_2026_07_28_server(isolated_home, real_keyring, tmp_path):
    # At 2026-07-28 a request lives on its response stream: closing it is how a client
    # abandons the request. The Python SDK's own record says whether its handler stopped.
    record = tmp_path / "record.txt"
    peer = start_sdk_work_server(record)
    recorder = Recorder()
    try:
        engine = await start_engine(isolated_home, recorder, peer.url, None)
        try:
            assert engine.connections["peer"].view.protocol_version == "2026-07-28"
            op = await engine.start_call("peer", "work", {"seconds": 30, "tag": "long"})
            await until_async(lambda: recorder.progress_of(op.id), 30, what="progress of the long call")
            await engine.cancel(op.id)
            assert (await finished(engine, op.id)).status == api.CANCELLED
            await until_async(lambda: "stopped long" in records(record), 20, what="the handler stopped")
            after = await engine.start_call("peer", "work", {"seconds": 0.2, "tag": "next"})
            assert (await finished(engine, after.id)).status == api.COMPLETED
        finally:
            await engine.stop()
        assert records(record) == ["start long", "stopped long", "start next", "end next"]
    finally:
        peer.stop()


async def test_cancel_stops_a_2026_07_28_call_whose_answer_has_not_begun(isolated_home, real_keyring, tmp_path):
    # A silent handler at 2026-07-28: no status line yet, the answer will be plain JSON.
    # The request lives on its HTTP exchange all the same, and closing it is the cancel
    # (the SDK drops notifications/cancelled at this revision).
    record = tmp_path / "record.txt"
    peer = start_sdk_work_server(record)
    recorder = Recorder()
    try:
        engine = await start_engine(isolated_home, recorder, peer.url, None)
        try:
            assert engine.connections["peer"].view.protocol_version == "2026-07-28"
            op = await engine.start_call("peer", "quiet_work", {"seconds": 8, "tag": "quiet"})
            await until_async(lambda: "start quiet" in records(record), what="the handler started")
            await engine.cancel(op.id)
            assert (await finished(engine, op.id)).status == api.CANCELLED
            await until_async(lambda: {"stopped quiet", "end quiet"} & set(records(record)),
                              what="the handler stopped or ended")
            after = await engine.start_call("peer", "quiet_work", {"seconds": 0.1, "tag": "next"})
            assert (await finished(engine, after.id)).status == api.COMPLETED
        finally:
            await engine.stop()
        assert records(record) == ["start quiet", "stopped quiet", "start next", "end next"]
    finally:
        peer.stop()


async def test_a_forgotten_session_s_stream_asks_the_server_for_nothing_more(isolated_home, real_keyring, ts_peer):
    """The server forgot the session (restarted): the host works on in a new one, and
    nothing more goes out in the old one. Its standalone stream, cut by the restart, went
    on trying after a call's 404 had told the transport the session was gone: one more
    GET, now without any session id (answered 400), per forgotten session."""
    peer, proxy = ts_peer
    recorder = Recorder()
    engine = await start_engine(isolated_home, recorder, proxy.url(), None)
    try:
        old = await restarted_after_a_greeting(engine, peer)
        after = await engine.start_call("peer", "greet", {"name": "after"})
        assert (await finished(engine, after.id)).status == api.COMPLETED
        new_session = session_of(engine)
        assert new_session not in (None, old.transport.session_id)
        since = len(proxy.requests)
        await asyncio.sleep(5)  # the old stream's first retry came after about 2 s
        strays = [(r.method, r.rpc_method, r.headers.get("mcp-session-id")) for r in list(proxy.requests)[since:]
                  if r.headers.get("mcp-session-id") != new_session]
        assert strays == [], strays
        assert engine.connections["peer"].view.state == api.CONNECTED
    finally:
        await engine.stop()
