"""fastmcp tells how far a task got only in the task's statusMessage ("crunch 5/12"): the
engine shows and journals each new one and moves the progress bar. fastmcp with the
tasks extension as a real process (tests/faults/fastmcp_tasks_server.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.transport.conftest import free_port, wait_until_listening

pytestmark = pytest.mark.timeout(90)

SERVER = Path(__file__).resolve().parents[1] / "faults" / "fastmcp_tasks_server.py"


@pytest.fixture
def fastmcp_url(tmp_path: Path):
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), str(port), str(tmp_path / "count")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_a_fastmcp_task_status_message_moves_the_progress(isolated_home, fastmcp_url, recorder, real_keyring):
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(ServerConfig(name="fastmcp", transport="http", url=fastmcp_url))
        await engine.connected("fastmcp")
        op = await engine.start_call("fastmcp", "crunch", {"steps": 4})
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        events = await engine.events(op.id)
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED, final.error
    progress = recorder.progress_of(op.id)
    assert len(set(progress)) >= 2 and progress == sorted(progress), recorder.changes[op.id]
    assert {t for _s, _p, t, _m in recorder.changes[op.id] if t is not None} == {4}
    messages = [e["data"]["message"] for e in events if e["kind"] == "status_message"]
    assert len(messages) >= 2 and all(m.startswith("crunch ") for m in messages), events
