"""Defects the chaos soak found, each reduced to its smallest reproduction and kept as a
strict expected failure: the day one is fixed, its test passes, pytest reports it, and
the mark goes (with its entry in ``test_soak.KNOWN_DEFECTS``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.lab.state import LabState
from tests.engine.conftest import Recorder
from tests.support.chaos_proxy import ChaosProxy
from tests.support.faults import LabProcess


@pytest.mark.xfail(strict=True, reason="the response that comes on a resumed draft stream under the call's "
                                       "JSON-RPC id is ignored (not pending), and the stream's end makes the "
                                       "operation unknown")
async def test_a_draft_streams_response_after_its_answer_stream_was_cut_is_delivered(isolated_home: Path,
                                                                                      tmp_path: Path, real_keyring):
    """Soak run of 2026-11-23, operation ad96171c1dbf (sl/long_stream): the call's answer
    stream was cut; the call went on by stream/resume; the lab copied the response onto
    the resumed stream and the agent's log says "the server answered request id 40966,
    which is not pending; ignored"; notifications/stream/end then ended it unknown."""
    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    proxy = await ChaosProxy(lab.port).start()
    recorder = Recorder()
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(api.ServerConfig(name="lab", transport="http", url=proxy.url()))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_stream", {"seconds": 4, "steps": 8})
        for _ in range(200):  # until the stream is offered and the work under way
            if engine.journal.get_operation(op.id).mechanism == "streams" and recorder.progress_of(op.id):
                break
            await asyncio.sleep(0.05)
        assert engine.journal.get_operation(op.id).mechanism == "streams"
        assert proxy.cut() >= 1, "the answer stream was not open"
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        state = LabState(lab.state_file)
        try:
            [job] = [j for j in state.jobs() if j.progress_token == f"op-{op.id}"]
        finally:
            state.close()
        assert job.status == "completed"
        assert final.status == api.COMPLETED, final.error
    finally:
        await engine.stop()
        await proxy.close()
        lab.stop()
