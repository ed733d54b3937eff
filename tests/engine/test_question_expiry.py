"""A question a server asked on a plain request's stream, left open when the host quit and
timed out by the server meanwhile: the restarted host says so. The official MCP Python SDK
as the server (tests/support/sdk_resumable_server.py, with an event store)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.store.journal import OperationJournal, ServerConfig
from tests.engine.conftest import Recorder
from tests.support.waiting import until_async
from tests.transport.conftest import free_port, wait_until_listening

pytestmark = pytest.mark.timeout(90)

SERVER = Path(__file__).resolve().parents[1] / "support" / "sdk_resumable_server.py"


@pytest.fixture
def sdk_url():
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


class Silent(Recorder):
    """A person who sees the questions and answers none."""

    def input_requested(self, request: api.InputRequest) -> None:
        self.questions.append(request)


async def test_a_question_the_server_timed_out_while_closed_is_said_to_have_expired(isolated_home, sdk_url,
                                                                                   real_keyring):
    first = Silent()
    engine = Engine(isolated_home, first)
    first.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="sdk", transport="http", url=sdk_url, protocol_version="2025-11-25"))
    await engine.connected("sdk")
    op = await engine.start_call("sdk", "ask_briefly", {"seconds": 1.5})
    await until_async(lambda: first.questions, what="the server's question")
    assert [q.operation_id for q in first.questions] == [op.id]
    await until_async(lambda: engine.journal.get_operation(op.id).handle_ref,
                      what="the stream's position committed")
    await engine.stop()  # the question is left open
    journal = OperationJournal(isolated_home / "journal.sqlite3")
    assert journal.get_operation(op.id).status == api.INPUT_REQUIRED
    mechanism = journal.get_operation(op.id).mechanism
    journal.close()
    await asyncio.sleep(2.5)  # the server gives up on its question meanwhile

    second = Recorder()
    engine = Engine(isolated_home, second)
    second.engine = engine
    await engine.start()
    try:
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
    finally:
        await engine.stop()
    assert final.status == api.FAILED, (mechanism, final)
    assert "the server's question expired while hostapp was closed" in (final.message or ""), (mechanism, final)
    assert second.questions == []
