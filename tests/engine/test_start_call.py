"""Starting a call before its server is connected: the operation is there at once, can be
cancelled without anything being sent, and is sent by the mechanism the server offers
once it answers. Real lab process, real keyring."""

from __future__ import annotations

import asyncio
import socket

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.lab.state import execution_count
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import lab_server

pytestmark = pytest.mark.timeout(60)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_call_to_a_server_not_yet_reachable_is_shown_and_cancellable(isolated_home, recorder, real_keyring):
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await asyncio.wait_for(engine.start(), 10)
    try:
        await asyncio.wait_for(engine.add_server(ServerConfig(name="away", transport="http",
                                             url=f"http://127.0.0.1:{unused_port()}/mcp")), 10)
        op = await asyncio.wait_for(engine.start_call("away", "anything", {}), 5)  # no wait for the server
        assert op.status == api.PENDING and op.id in recorder.changes
        await asyncio.wait_for(engine.cancel(op.id), 10)
        final = await asyncio.wait_for(engine.wait_finished(op.id), 5)
        assert final.status == api.CANCELLED
        assert "never ran" in final.message
        assert engine.journal.get_operation(op.id).jsonrpc_id is None  # nothing was sent
    finally:
        await asyncio.wait_for(engine.stop(), 10)


async def test_a_call_started_before_the_connection_uses_what_the_server_offers(isolated_home, lab, recorder,
                                                                                real_keyring):
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        op = await engine.start_call("lab", "long_task", {"seconds": 0.5, "steps": 2})  # not connected yet
        final = await asyncio.wait_for(engine.wait_finished(op.id), 30)
        assert final.status == api.COMPLETED, final.error
        assert engine.journal.get_operation(op.id).mechanism == "tasks_2025"
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_task") == 1
