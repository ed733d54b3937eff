"""A 2025-11-25 server may send its question on the standalone GET stream rather than on
the stream of the request it belongs to, and as soon as its task exists, before the task
id has reached the host: the TypeScript SDK's example server does so for
``collect-user-info-task``. The question is kept all the same, so a host stopped before
the person answered asks again after its restart, and the task completes with that
answer. Real server, real keyring."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import Recorder
from tests.support.faults import LoopbackProxy
from tests.support.peers import start_ts_example_server

pytestmark = pytest.mark.timeout(120)

ANSWER = {"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "phone": "123"}}


class Unanswered(Recorder):
    """Nobody at the window: questions are shown, none is answered."""

    def input_requested(self, request: api.InputRequest) -> None:
        self.questions.append(request)


async def asked(recorder: Recorder, timeout: float = 30) -> api.InputRequest:
    deadline = asyncio.get_running_loop().time() + timeout
    while not recorder.questions:
        assert asyncio.get_running_loop().time() < deadline, "the question was not asked"
        await asyncio.sleep(0.05)
    return recorder.questions[0]


async def test_a_task_question_sent_on_the_get_stream_is_asked_again_after_a_restart(isolated_home: Path,
                                                                                      real_keyring):
    peer = start_ts_example_server()
    proxy = LoopbackProxy(peer.port).start()
    try:
        first = Unanswered()
        engine = Engine(isolated_home, first)
        await engine.start()
        await engine.add_server(ServerConfig(name="ts", transport="http", url=proxy.url()))
        await engine.connected("ts")
        op = await engine.start_call("ts", "collect-user-info-task", {"infoType": "contact"})
        question = await asked(first)
        assert question.operation_id == op.id
        deadline = asyncio.get_running_loop().time() + 30
        while not ((record := engine.journal.get_operation(op.id)).open_question and record.handle_ref):
            # kept, and the task id it belongs to, before the stop
            assert asyncio.get_running_loop().time() < deadline, "the question or the task id was not kept"
            await asyncio.sleep(0.05)
        await engine.stop()

        again = Unanswered()
        engine = Engine(isolated_home, again)
        await engine.start()
        try:
            question = await asked(again)
            assert question.operation_id == op.id and "contact" in question.message
            engine.answer_input(question.id, ANSWER)
            final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        finally:
            await engine.stop()
        assert final.status == api.COMPLETED, final.error
        assert "ada@example.com" in final.result["content"][0]["text"]
        assert len(proxy.fresh_tool_calls("collect-user-info-task")) == 1
    finally:
        proxy.stop()
        peer.stop()
