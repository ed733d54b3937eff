"""A start that restores many operations: the event loop keeps turning while it does."""

from __future__ import annotations

import asyncio
import threading

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


async def test_a_client_s_journal_read_does_not_wait_for_the_shared_thread_pool(isolated_home, real_keyring):
    """A restart of 10,000 operations fills the event loop's shared thread pool with keyring
    calls; the window's list read waited behind them (3.5 s for a read of 0.3 s). The
    clients' journal reads have a thread of their own: one comes back while every thread of
    the shared pool is held."""
    engine = Engine(isolated_home, Recorder())
    await engine.start(resume=False)
    engine.journal.create_operation_sync(OperationRecord(
        "op-1", "lab", "tools/call", {"name": "slow", "arguments": {}}, tool="slow",
        status=OperationStatus.RUNNING, jsonrpc_id=1, mechanism="direct"))
    loop = asyncio.get_running_loop()
    release = threading.Event()
    held = [loop.run_in_executor(None, release.wait) for _ in range(64)]  # more than the pool's threads
    try:
        views = await asyncio.wait_for(engine.operations(), 60)
        count = await asyncio.wait_for(engine.count_operations(), 60)
    finally:
        release.set()
        await asyncio.gather(*held)
        await engine.stop()
    assert [v.id for v in views] == ["op-1"] and count == 1
