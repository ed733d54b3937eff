"""A restarted agent lists the journal's operations before its engine has started.

The engine's start reads the keyring, connects every server and re-attaches each
unfinished operation: seconds with thousands of them. A window opened meanwhile lists
what the journal holds at once (each operation with its last known status and
progress); whatever changes the journal cannot answer waits for the engine.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hostapp.agent.client import RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from hostapp.agent.owner import Owner
from hostapp.engine import api
from hostapp.store.journal import OperationJournal, OperationRecord
from hostapp.store.paths import journal_path
from tests.support.keyring_daemon import KeyringDaemon
from tests.support.waiting import until_async


def _journal_of_a_stopped_agent(home: Path) -> None:
    """Three operations as an agent left them: one in flight at 40 of 100 with a message,
    one waiting for a server's question, one completed."""
    now = time.time()
    with OperationJournal(journal_path(home)) as journal:
        for op_id, status in (("running", api.RUNNING), ("asking", api.INPUT_REQUIRED), ("done", api.RUNNING)):
            journal.create_operation_sync(OperationRecord(
                id=op_id, server="gone", method="tools/call", tool="slow", status=api.PENDING,
                params={"name": "slow", "arguments": {}}, created_at=now - 60, updated_at=now - 60))
            journal.update_operation_sync(op_id, status=status)
        journal.update_operation_sync("running", progress=40.0, total=100.0, message="step 4 of 10")
        journal.finish_operation_sync("done", api.COMPLETED, result={"content": []})


async def test_the_list_is_answered_from_the_journal_while_the_engine_starts(
        isolated_home: Path, real_keyring: KeyringDaemon):
    _journal_of_a_stopped_agent(isolated_home)
    owner = Owner(isolated_home, idle_exit=None)
    # The engine's start is held (as a slow keyring or thousands of operations hold it)
    # until the test lets it go.
    engine_start = owner._engine.start
    go_on = asyncio.Event()

    async def held_start(**kwargs: object) -> None:
        await go_on.wait()
        await engine_start(**kwargs)  # type: ignore[arg-type]

    owner._engine.start = held_start  # type: ignore[method-assign]
    running = asyncio.create_task(owner.run())
    client: RemoteEngine | None = None
    try:
        async def connected() -> RemoteEngine | None:
            try:
                return await RemoteEngine.connect(endpoint_path(isolated_home), client="test")
            except api.EngineError:
                return None

        client = await until_async(connected, what="the agent to answer")
        # A method the journal cannot answer alone waits for the engine...
        servers = asyncio.create_task(client.servers())
        # ...while the list and the count are read from the journal now.
        listed = {op.id: op for op in await client.operations(set(api.IN_FLIGHT), limit=10_000)}
        assert await client.count_operations() == 3
        # (what a quit asks, and `hostapp resume --wait`: the journal's unfinished ones)
        assert {op.id for op in await client.unfinished_operations()} == {"running", "asking"}
        assert not owner.endpoint.ready.is_set() and not servers.done()
        assert set(listed) == {"running", "asking"}
        assert listed["running"].status == api.RUNNING
        assert (listed["running"].progress, listed["running"].total) == (40.0, 100.0)
        assert listed["running"].message == "step 4 of 10"
        assert listed["asking"].status == api.INPUT_REQUIRED
        finished = await client.operations(set(api.TERMINAL))
        assert [op.id for op in finished] == ["done"] and finished[0].status == api.COMPLETED

        go_on.set()
        await asyncio.wait_for(servers, 60)  # answered once the engine has started
        assert owner.endpoint.ready.is_set()
    finally:
        go_on.set()
        if client is not None:
            await client.close()
        await owner.stop()
        await asyncio.wait_for(running, 60)
