"""A start that restores many operations: the event loop keeps turning while it does."""

from __future__ import annotations

import asyncio

from hostapp.engine.service import RESTORE_BATCH, Engine
from hostapp.store.journal import OperationRecord
from hostapp.store.server_config import ServerConfig
from hostapp.store.status import OperationStatus
from tests.engine.conftest import Recorder


async def test_restoring_many_operations_lets_the_event_loop_turn(isolated_home, real_keyring):
    # A paused server: its operations are restored and wait for Reconnect, nothing is sent.
    count = 3 * RESTORE_BATCH + 7
    first = Engine(isolated_home, Recorder())
    await first.start(resume=False)
    first.journal.add_server(ServerConfig(name="paused", transport="http", url="http://127.0.0.1:9/mcp",
                                          enabled=False))
    for i in range(count):
        first.journal.create_operation_sync(OperationRecord(
            f"op-{i}", "paused", "tools/call", {"name": "slow", "arguments": {}}, tool="slow",
            status=OperationStatus.RUNNING, jsonrpc_id=i + 1, mechanism="direct",
            handle={"mechanism": "direct", "method": "tools/call", "phase": "sent"}))
    await first.stop()

    second = Engine(isolated_home, Recorder())
    seen: list[int] = []  # how many were restored, each time another task got a turn

    async def watch() -> None:
        while True:
            seen.append(len(second.runners))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    try:
        await second.start()
    finally:
        watcher.cancel()
    try:
        assert len(second.runners) == count
        assert all(not runner.done for runner in second.runners.values())
        # Other tasks ran between batches, not only before the first and after the last.
        partial = sorted({n for n in seen if 0 < n < count})
        assert partial == [RESTORE_BATCH, 2 * RESTORE_BATCH, 3 * RESTORE_BATCH], seen[-20:]
    finally:
        await second.stop()
