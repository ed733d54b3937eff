"""Defects the chaos soak found, each reduced to its smallest reproduction. A defect not
fixed yet is kept here as a strict expected failure (and its kind in
``test_soak.KNOWN_DEFECTS``); once fixed, its test stays as a plain regression test."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.lab.state import JobRow, LabState, execution_count
from tests.engine.conftest import Recorder
from tests.support.chaos_proxy import ChaosProxy
from tests.support.faults import LabProcess


def _job_of(lab: LabProcess, op_id: str) -> JobRow:
    """The lab's record of the work an operation started (exactly one)."""
    state = LabState(lab.state_file)
    try:
        [job] = [j for j in state.jobs() if j.progress_token == f"op-{op_id}"]
    finally:
        state.close()
    return job


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
        job = _job_of(lab, op.id)
        assert job.status == "completed"
        assert final.status == api.COMPLETED, final.error
    finally:
        await engine.stop()
        await proxy.close()
        lab.stop()


async def test_an_answer_the_network_lost_is_sent_again(isolated_home: Path, tmp_path: Path, real_keyring):
    """Soak runs of 2026-11-23: a 2025-11-25 task stayed ``input_required`` after the drain.
    The person's answer to the task's question went out while the network was down (the
    proxy refused the connection); the session logged "could not answer" and dropped it,
    so the server waited for ever. An answer is now sent again while the network comes
    back."""
    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    proxy = await ChaosProxy(lab.port).start()
    loop = asyncio.get_running_loop()

    class LosesTheFirstAnswer(Recorder):
        def input_requested(self, request: api.InputRequest) -> None:
            self.questions.append(request)
            if len(self.questions) == 1:
                proxy.refuse(2.5)  # the network goes just as the person answers
            loop.call_soon(self.engine.answer_input, request.id, {"action": "accept", "content": {"proceed": True}})

    recorder = LosesTheFirstAnswer()
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(api.ServerConfig(name="lab", transport="http", url=proxy.url(),
                                                 protocol_version="2025-11-25"))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_task", {"seconds": 2, "steps": 4, "ask": True})
        final = await asyncio.wait_for(engine.wait_finished(op.id), 90)
        assert final.status == api.COMPLETED, (final.error, recorder.questions)
        job = _job_of(lab, op.id)
        assert job.status == "completed"
        assert execution_count(lab.state_file, "long_task") == 1
    finally:
        await engine.stop()
        await proxy.close()
        lab.stop()
