"""A break of the network is not the end of an HTTP session: the supervisor keeps the
session (what the server bound to it lives on) and makes a new one only when the server
refuses the old one. Real lab process, real loopback proxy, real keyring."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.engine.supervisor import ServerConnection
from hostapp.lab.state import execution_count
from hostapp.store.journal import OperationJournal, ServerConfig
from tests.engine.conftest import Recorder
from tests.support.faults import LoopbackProxy
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def proxy(lab):
    p = LoopbackProxy(lab.port).start()
    yield p
    p.stop()


async def handle_committed(engine: Engine, op_id: str) -> None:
    """Until the operation's handle (a task id, a stream's event id) is in the journal."""
    await until_async(lambda: engine.journal.get_operation(op_id).handle_ref,
                      what=f"the handle of {op_id} in the journal")


def session_id_of(engine: Engine) -> str | None:
    session = engine.connections["lab"].session
    return getattr(session.transport, "session_id", None) if session else None


async def start_engine(home, recorder: Recorder, proxy: LoopbackProxy) -> Engine:
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url(),
                                         protocol_version="2025-11-25"))
    await engine.connected("lab")
    return engine


async def test_an_outage_keeps_the_session_and_its_task(isolated_home, lab, proxy, recorder, real_keyring):
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        first_session = session_id_of(engine)
        op = await engine.start_call("lab", "long_task", {"seconds": 4, "steps": 8})
        await handle_committed(engine, op.id)
        await asyncio.to_thread(proxy.outage, 3)
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.COMPLETED, final.error
        assert session_id_of(engine) == first_session
        assert proxy.rpc_methods().count("initialize") == 1
        states = [s.state for s in recorder.servers]
        assert api.RECONNECTING in states and states[-1] == api.CONNECTED
        # The kept session takes new work too.
        again = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.2, "steps": 2})
        assert (await asyncio.wait_for(engine.wait_finished(again.id), 30)).status == api.COMPLETED
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_task") == 1


async def test_a_session_the_server_forgot_is_replaced(isolated_home, lab, proxy, recorder, real_keyring):
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        old_session = session_id_of(engine)
        # The server ends the session behind the host's back (as a restarted server would
        # forget it), then the network breaks: the ping on the old session draws a 404.
        async with httpx.AsyncClient() as client:
            response = await client.delete(lab.url, headers={"Mcp-Session-Id": old_session,
                                                             "MCP-Protocol-Version": "2025-11-25"})
            assert response.status_code == 204
        engine.connections["lab"].connection_lost(session_gone=False)
        op = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.2, "steps": 2})
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
        assert final.status == api.COMPLETED, final.error
        assert session_id_of(engine) not in (None, old_session)
        assert proxy.rpc_methods().count("initialize") == 2
    finally:
        await engine.stop()


@pytest.mark.parametrize("status", [429, 408, 503])
async def test_a_busy_answer_to_the_ping_keeps_the_session(isolated_home, lab, proxy, recorder, real_keyring, status):
    # After the break, a rate limiter (429), a timeout (408) or an overloaded gateway (503)
    # answers the first pings: the session is not refused, it is pinged again later.
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        first_session = session_id_of(engine)
        op = await engine.start_call("lab", "long_task", {"seconds": 3, "steps": 6})
        await handle_committed(engine, op.id)
        proxy.answer_status("ping", status, times=2)
        engine.connections["lab"].connection_lost(session_gone=False)
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.COMPLETED, final.error
        assert proxy.rpc_methods().count("ping") >= 3
        assert session_id_of(engine) == first_session
        assert proxy.rpc_methods().count("initialize") == 1
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_task") == 1


async def test_a_busy_answer_to_a_poll_is_asked_again_without_reconnecting(isolated_home, lab, proxy, recorder,
                                                                          real_keyring):
    # A rate limiter answers two polls 429: that task polls again after a pause; the
    # connection is not treated as lost (no ping, no new session) and the task completes.
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        first_session = session_id_of(engine)
        op = await engine.start_call("lab", "long_task", {"seconds": 3, "steps": 6})
        await handle_committed(engine, op.id)
        proxy.answer_status("tasks/get", 429, times=2)
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.COMPLETED, final.error
        assert proxy.rpc_methods().count("ping") == 0
        assert proxy.rpc_methods().count("initialize") == 1 and session_id_of(engine) == first_session
        assert api.RECONNECTING not in [s.state for s in recorder.servers]
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_task") == 1


async def test_a_call_refused_as_busy_fails_as_not_run(isolated_home, lab, proxy, recorder, real_keyring):
    # 429 to the call itself: it did not run (not "unknown"), and the connection stays.
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        proxy.answer_status("tools/call", 429)
        op = await engine.start_call("lab", "long_task", {"seconds": 1, "steps": 2})
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
        assert final.status == api.FAILED
        assert "429" in final.error["message"] and "did not run" in final.error["message"]
        assert proxy.rpc_methods().count("ping") == 0
        again = await engine.start_call("lab", "long_task", {"seconds": 1, "steps": 2})
        assert (await asyncio.wait_for(engine.wait_finished(again.id), 30)).status == api.COMPLETED
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_task") == 1


async def test_reconnect_asked_by_the_person_makes_a_new_session(isolated_home, lab, proxy, recorder, real_keyring):
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        old_session = session_id_of(engine)
        await engine.reconnect("lab")
        await engine.connected("lab")
        await until_async(lambda: session_id_of(engine) not in (None, old_session), what="a new session")
    finally:
        await engine.stop()


async def quit_with_a_task_in_flight(home, proxy) -> tuple[str, str]:
    """Start a 2025-11-25 task, wait for its id to be committed, quit; (op id, its session)."""
    engine = await start_engine(home, Recorder(), proxy)
    op = await engine.start_call("lab", "long_task", {"seconds": 3, "steps": 6})
    await handle_committed(engine, op.id)
    task_session = session_id_of(engine)
    await engine.stop()  # the session stays open on the server for the operation
    return op.id, task_session


async def restart_and_finish(home, op_id: str) -> api.OperationView:
    engine = Engine(home, Recorder())
    await engine.start()  # resumes without being asked
    try:
        return await asyncio.wait_for(engine.wait_finished(op_id), 60)
    finally:
        await engine.stop()


async def test_a_restarted_host_adopts_the_session_of_its_task(isolated_home, lab, proxy, real_keyring):
    op_id, task_session = await quit_with_a_task_in_flight(isolated_home, proxy)
    final = await restart_and_finish(isolated_home, op_id)
    assert final.status == api.COMPLETED, final.error
    # Every poll of the restarted host went out in the session that made the task.
    polls = [r for r in proxy.requests if r.rpc_method == "tasks/get"]
    assert polls and polls[-1].headers.get("mcp-session-id") == task_session
    assert execution_count(lab.state_file, "long_task") == 1


async def test_a_restarted_host_goes_on_when_that_session_is_gone(isolated_home, lab, proxy, real_keyring):
    op_id, task_session = await quit_with_a_task_in_flight(isolated_home, proxy)
    async with httpx.AsyncClient() as client:  # the server forgets that session
        await client.delete(lab.url, headers={"Mcp-Session-Id": task_session, "MCP-Protocol-Version": "2025-11-25"})
    final = await restart_and_finish(isolated_home, op_id)
    # The lab does not bind tasks to sessions: the task goes on in the new session.
    assert final.status == api.COMPLETED, final.error
    assert execution_count(lab.state_file, "long_task") == 1


async def test_streams_adopted_after_a_restart_stay_in_their_session(isolated_home, lab, proxy, real_keyring,
                                                                    engine_timing):
    # Two SSE streams of one earlier session are adopted by a restarted host; each commits
    # its newest event id with the session the stream lives in (the adopted one, not the
    # new host's own). So the shorter one ending leaves that session to the longer one,
    # and another restart still finds the longer one's stream.
    engine_timing(commit_every=0.5)  # commit while the test runs
    engine = await start_engine(isolated_home, Recorder(), proxy)
    short = await engine.start_call("lab", "long_sse", {"seconds": 3, "steps": 6})
    long = await engine.start_call("lab", "long_sse", {"seconds": 10, "steps": 20})
    for op in (short, long):
        await handle_committed(engine, op.id)
    await engine.stop()

    recorder = Recorder()
    engine = Engine(isolated_home, recorder)
    await engine.start()
    try:
        await until_async(lambda: recorder.progress_of(short.id) and recorder.progress_of(long.id),
                          what="progress on both resumed streams")
        adopted = engine.runners[long.id].http_session
        assert adopted is not None and adopted[0] != session_id_of(engine)
        first = await asyncio.wait_for(engine.wait_finished(short.id), 60)
        assert engine.runners[long.id].http_session == adopted
        await asyncio.sleep(0.5)
    finally:
        await engine.stop()  # the longer one is still streaming
    assert first.status == api.COMPLETED, first.error
    with OperationJournal(isolated_home / "journal.sqlite3") as journal:
        assert journal.get_operation(long.id).status not in api.TERMINAL

    final = await restart_and_finish(isolated_home, long.id)
    assert final.status == api.COMPLETED, final.error
    assert execution_count(lab.state_file, "long_sse") == 2


async def test_a_cancel_after_a_restart_goes_to_the_session_of_its_task(isolated_home, lab, proxy, real_keyring,
                                                                        monkeypatch):
    # As `hostapp cancel` does: start, then cancel at once, while the restored operation
    # is still taking its earlier session over (slowly, here). The cancel must go where
    # the polls go: the session that owns the task.
    adopt = ServerConnection.side_session

    async def slow_side_session(self, session_id: str, protocol_version: str):
        await asyncio.sleep(0.5)
        return await adopt(self, session_id, protocol_version)

    monkeypatch.setattr(ServerConnection, "side_session", slow_side_session)
    engine = await start_engine(isolated_home, Recorder(), proxy)
    op = await engine.start_call("lab", "long_task", {"seconds": 30, "steps": 30})
    await handle_committed(engine, op.id)
    task_session = session_id_of(engine)
    await engine.stop()

    engine = Engine(isolated_home, Recorder())
    await engine.start()
    try:
        await engine.cancel(op.id)
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
    finally:
        await engine.stop()
    assert final.status == api.CANCELLED, (final.error, final.result)
    cancels = [r for r in proxy.requests if r.rpc_method == "tasks/cancel"]
    assert cancels and {r.headers.get("mcp-session-id") for r in cancels} == {task_session}
