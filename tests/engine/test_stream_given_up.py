"""An answer stream that cannot be resumed ends its operation as unknown, with the
reason, instead of leaving it ``running`` with nothing driving it. Real lab process,
real loopback proxy (which refuses the resumptions), real keyring."""

from __future__ import annotations

import asyncio

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.lab.state import JobRow, LabState, execution_count
from hostapp.store.journal import OperationJournal
from hostapp.transport.base import SessionExpired
from tests.engine.conftest import Recorder
from tests.engine.test_network_break import handle_committed, start_engine
from tests.soak.oracle import outcome_handed_out
from tests.support.chaos_proxy import ChaosProxy
from tests.support.faults import LoopbackProxy
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)

#: Every resumption GET (no JSON-RPC method) is answered "503" this many times: far more
#: than any bounded retrying needs, so only giving up ends the operation.
REFUSED_GETS = 10_000


@pytest.fixture
def proxy(lab):
    p = LoopbackProxy(lab.port).start()
    yield p
    p.stop()


@pytest.fixture
def quick_backoff(engine_timing):
    """The same attempts, without the minutes of back-off between them, and a
    resumption budget of seconds instead of a minute and a half."""
    return engine_timing(reconnect_cap=0.2, resume_budget=3.0)


async def progress_seen(recorder: Recorder, op_id: str) -> None:
    await until_async(lambda: recorder.progress_of(op_id), what="progress on the resumed stream")


async def test_a_resumed_stream_given_up_ends_unknown(isolated_home, lab, proxy, real_keyring, quick_backoff):
    # The host restarts and resumes the stream (its answer is awaited by id, not by the
    # request it sent); then the stream breaks and every resumption is refused. The
    # transport gives up, and the operation must end, not stay running.
    engine = await start_engine(isolated_home, Recorder(), proxy)
    op = await engine.start_call("lab", "long_sse", {"seconds": 60, "steps": 60})
    await handle_committed(engine, op.id)
    await engine.stop()

    recorder = Recorder()
    engine = Engine(isolated_home, recorder)
    await engine.start()
    try:
        await progress_seen(recorder, op.id)
        proxy.answer_status(None, 503, REFUSED_GETS)  # type: ignore[arg-type]  # a GET has no method
        assert proxy.drop_connections() > 0
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
    finally:
        await engine.stop()
    assert final.status == api.UNKNOWN, final
    message = final.error["message"] if final.error else ""
    assert "could not be resumed" in message and "may or may not have finished" in message, final.error
    with OperationJournal(isolated_home / "journal.sqlite3") as journal:
        assert journal.get_operation(op.id).status == api.UNKNOWN
    assert execution_count(lab.state_file, "long_sse") == 1  # never run again


async def test_a_live_stream_whose_resumptions_fail_ends_unknown(isolated_home, lab, proxy, recorder,
                                                                 real_keyring, quick_backoff):
    # No restart: the call's own stream breaks and no resumption is ever let through. The
    # mechanism's reconnects are bounded too.
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        op = await engine.start_call("lab", "long_sse", {"seconds": 60, "steps": 60})
        await handle_committed(engine, op.id)
        proxy.answer_status(None, 503, REFUSED_GETS)  # type: ignore[arg-type]
        assert proxy.drop_connections() > 0
        final = await asyncio.wait_for(engine.wait_finished(op.id), 90)
    finally:
        await engine.stop()
    assert final.status == api.UNKNOWN, final
    assert "could not be resumed" in (final.error or {}).get("message", ""), final.error
    assert execution_count(lab.state_file, "long_sse") == 1


SESSION_TOOLS = ("long_sse", "long_sse", "long_stream", "long_resumable", "long_async", "long_sse")


# Run many times alone, under CPU load too, since the session-id and lost-answer fixes:
# always green. A full run under load once failed it before those fixes; should it fail
# again, its message names every request sent after the restart and its session id.
@pytest.mark.parametrize("round_", range(3))
async def test_operations_of_one_earlier_session_restore_together(isolated_home, lab, proxy, real_keyring,
                                                                   round_):
    # Several operations lived in one HTTP session; a restarted host restores them all at
    # once, taking that session over for the streams. Each completes, and no request goes
    # out without a session id (one operation's refused request must not wipe the id the
    # others send).
    engine = await start_engine(isolated_home, Recorder(), proxy)
    ops = [await engine.start_call("lab", tool, {"seconds": 4, "steps": 8}) for tool in SESSION_TOOLS]
    for op in ops:
        await handle_committed(engine, op.id)
    await engine.stop()
    sent_before = len(proxy.requests)

    engine = Engine(isolated_home, Recorder())
    await engine.start()
    try:
        finals = [await asyncio.wait_for(engine.wait_finished(op.id), 60) for op in ops]
    finally:
        await engine.stop()
    after = proxy.requests[sent_before:]
    detail = [(r.method, r.rpc_method, r.headers.get("mcp-session-id")) for r in after]
    assert [f.status for f in finals] == [api.COMPLETED] * len(ops), (finals, detail)
    without = [d for d in detail if d[2] is None and d[1] not in ("initialize", "server/discover")]
    assert not without, detail
    for tool in set(SESSION_TOOLS):
        assert execution_count(lab.state_file, tool) == SESSION_TOOLS.count(tool)


async def test_a_refused_resumption_leaves_the_session_to_the_other_requests(isolated_home, lab, proxy, recorder,
                                                                             real_keyring):
    # A server answers 404 to a resumption it cannot serve in this session (the lab: a
    # Last-Event-ID of a stream of another session). Only that stream is refused: the
    # transport keeps its session id for everything else it sends.
    engine = await start_engine(isolated_home, recorder, proxy)
    try:
        live = engine.connections["lab"].session
        assert live is not None
        sid = live.transport.session_id
        with pytest.raises(SessionExpired):
            await live.transport.resume_stream(999_999, "no-such-stream:1")
        assert live.transport.session_id == sid
        sent_before = len(proxy.requests)
        op = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.2, "steps": 2})
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED, final.error
    calls = [r for r in proxy.requests[sent_before:] if r.rpc_method == "tools/call"]
    assert calls and all(r.headers.get("mcp-session-id") == sid for r in calls)


async def test_a_draft_streams_response_lost_with_a_resume_ends_unknown_not_running(isolated_home, lab, real_keyring):
    """Soak run of 2026-11-24, operation acba9007badb (hs/long_stream): left running after
    the drain. A draft stream's server copies what is pending onto the stream of the
    ``stream/resume`` that asks, and counts it as delivered. Here a restarted host's
    resume has its connection cut before its first byte arrives (nothing to resume that
    stream from); the host resumed again, got an empty answer from the finished stream,
    and resumed again, for ever. Now it looks at the stream after an empty resume:
    completed with nothing pending, the response is gone, and the operation ends unknown."""
    proxy = await ChaosProxy(lab.port).start()

    def job_of(op_id: str) -> tuple[JobRow | None, bool]:
        """The lab's job of the operation, and whether the lab counts its outcome as delivered."""
        state = LabState(lab.state_file)
        try:
            jobs = [j for j in state.jobs() if j.progress_token == f"op-{op_id}"]
            return (jobs[0], outcome_handed_out(state, jobs[0])) if len(jobs) == 1 else (None, False)
        finally:
            state.close()

    try:
        engine = Engine(isolated_home, Recorder())
        await engine.start()
        try:
            await engine.add_server(api.ServerConfig(name="lab", transport="http", url=proxy.url(),
                                                     protocol_version="2025-11-25"))
            await engine.connected("lab")
            op = await engine.start_call("lab", "long_stream", {"seconds": 1, "steps": 2})
            await until_async(lambda: engine.journal.get_operation(op.id).mechanism == "streams",
                              what="the operation's mechanism journaled as streams")
        finally:
            await engine.stop()
        def completed() -> tuple[JobRow, bool] | None:
            job, handed_out = job_of(op.id)
            return (job, handed_out) if job is not None and job.status == "completed" else None

        _job, handed_out = await until_async(completed, what="the lab's job to complete", interval=0.05)
        assert not handed_out

        engine = Engine(isolated_home, Recorder())
        await engine.start()
        try:
            await engine.connected("lab")
            proxy.delay(2)  # the restarted host's resume reaches the lab, its answer is held...
            await until_async(lambda: job_of(op.id)[1], what="the lab to copy the response onto a resume",
                              interval=0.025)
            proxy.cut()  # ... and lost
            proxy.delay(0)
            final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        finally:
            await engine.stop()
        assert final.status == api.UNKNOWN, final
        assert "holds no undelivered response" in final.error["message"], final.error
        assert execution_count(lab.state_file, "long_stream") == 1
    finally:
        await proxy.close()
